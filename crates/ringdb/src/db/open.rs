//! [`Db::open`]: from a path to an open database.
//!
//! A path is one of four things ([`PathKind`]), and what it is decides which options make
//! sense: a directory holds the three files of a database with a log; a plain file holds the
//! data of a database without one; a block device or an NVMe generic char device holds either
//! (with a log, as the three regions of [`DeviceLayout`]). Every refusal happens here, before
//! anything is created or written, with a message that names what to change.

use super::layout::{DeviceLayout, DeviceLog, FileSet, DATA_FILE, DW_FILE, WAL_FILE};
use super::runtime::OpenedFiles;
use super::{Db, Options};
use crate::error::{DbError, Result};
use crate::page;
use crate::wal::Durability;
use ringdb_io::RegionEngine;
use ringdb_io::Runtime;
use ringdb_io::{EngineKind, FixedBufferPool, IoConfig};
use ringdb_io::{Target, TargetOptions};
use std::path::{Path, PathBuf};

/// What `Db::open` was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathKind {
    /// A directory, or a path without an extension that does not exist yet (created): the
    /// data file is `data.ringdb` in it, with the log files beside it.
    Directory,
    /// Anything else that is not a device: the data file itself (no log).
    File,
    /// A block device: the whole device is the database.
    BlockDevice,
    /// An NVMe generic char device (`/dev/ngXnY`), reached only through passthrough.
    NvmeCharDevice,
}

impl PathKind {
    fn of(path: &Path) -> PathKind {
        use std::os::unix::fs::FileTypeExt;
        if path.is_dir() || (!path.exists() && path.extension().is_none()) {
            return PathKind::Directory;
        }
        match std::fs::metadata(path).map(|m| m.file_type()) {
            Ok(t) if t.is_char_device() => PathKind::NvmeCharDevice,
            Ok(t) if t.is_block_device() => PathKind::BlockDevice,
            _ => PathKind::File,
        }
    }

    fn is_device(self) -> bool {
        matches!(self, PathKind::BlockDevice | PathKind::NvmeCharDevice)
    }
}

/// The log and double-write files of a directory, open.
struct LogFiles {
    /// Kept open while the runtime uses their fds: the log, then the double-write file.
    files: Vec<std::fs::File>,
    /// Their lengths in bytes.
    log_bytes: u64,
    double_write_bytes: u64,
    /// A second handle on the log, for the sync thread of mode `thread`.
    wal_sync_file: Option<std::fs::File>,
}

impl LogFiles {
    /// Opens (or creates) `wal.ringdb` and `dw.ringdb` in `dir`.
    fn open(dir: &Path, opts: &Options) -> Result<LogFiles> {
        let o_dsync = opts.durability == Durability::Odsync;
        let (log, log_bytes) = open_beside(dir, WAL_FILE, opts.fresh, o_dsync)?;
        let log_path = dir.join(WAL_FILE);
        let wal_sync_file = Some(log.try_clone().map_err(file_err(&log_path))?);
        let (double_write, double_write_bytes) = open_beside(dir, DW_FILE, opts.fresh, false)?;
        Ok(LogFiles {
            files: vec![log, double_write],
            log_bytes,
            double_write_bytes,
            wal_sync_file,
        })
    }

    /// No log (durability `off`).
    fn none() -> LogFiles {
        LogFiles {
            files: Vec::new(),
            log_bytes: 0,
            double_write_bytes: 0,
            wal_sync_file: None,
        }
    }

    fn fds(&self) -> impl Iterator<Item = std::os::fd::RawFd> + '_ {
        self.files.iter().map(std::os::fd::AsRawFd::as_raw_fd)
    }
}

/// Opens (or creates) `dir/name` for reading and writing (`O_DSYNC` if asked; emptied when
/// `fresh`); returns it and its length.
fn open_beside(dir: &Path, name: &str, fresh: bool, o_dsync: bool) -> Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let mut oo = std::fs::OpenOptions::new();
    oo.read(true).write(true).create(true);
    if o_dsync {
        oo.custom_flags(libc::O_DSYNC);
    }
    let f = oo.open(&path).map_err(file_err(&path))?;
    if fresh {
        f.set_len(0).map_err(file_err(&path))?;
    }
    let len = f.metadata().map_err(file_err(&path))?.len();
    Ok((f, len))
}

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> DbError + '_ {
    move |source| DbError::File {
        path: path.display().to_string(),
        source,
    }
}

impl Db {
    /// Opens (or creates) the database at `path`: a directory (the data file is
    /// `path/data.ringdb`, created with the directory, and with a log `wal.ringdb` and
    /// `dw.ringdb` beside it), a file, or a block device (mode `off` only).
    pub fn open(path: &Path, opts: Options) -> Result<Db> {
        let kind = PathKind::of(path);
        let opts = with_engine_for(kind, opts);
        check_options_fit(path, kind, &opts)?;
        let file_path = if kind == PathKind::Directory {
            std::fs::create_dir_all(path).map_err(file_err(path))?;
            path.join(DATA_FILE)
        } else {
            path.to_path_buf()
        };
        let target = open_target(&file_path, &opts)?;
        // `fresh` formats a device too: whatever page 0 holds (a raw benchmark's writes, an
        // older database) is ignored, and the device's capacity still bounds the data.
        let data_bytes = if opts.fresh { 0 } else { target.size };
        if data_bytes > 0 {
            check_page_size(&file_path, opts.page_size)?;
        }
        if opts.durability.logged() && kind.is_device() {
            return Self::open_device_logged(target, &file_path, opts);
        }
        Self::open_files(path, file_path, target, data_bytes, opts)
    }

    /// A database in files: the data file (or a device without a log), and with a log the
    /// log and double-write files beside it in `dir`.
    fn open_files(
        dir: &Path,
        file_path: PathBuf,
        target: Target,
        data_bytes: u64,
        opts: Options,
    ) -> Result<Db> {
        let log_files = if opts.durability.logged() {
            LogFiles::open(dir, &opts)?
        } else {
            LogFiles::none()
        };
        let fds: Vec<_> = std::iter::once(target.fd())
            .chain(log_files.fds())
            .collect();
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size)?;
        let rt = Runtime::from_config(&opts.io, &fds, Some(pool))?;
        let ps = opts.page_size as u64;
        let files = OpenedFiles {
            len_bytes: FileSet {
                data: data_bytes,
                log: log_files.log_bytes,
                double_write: log_files.double_write_bytes,
            },
            capacity_pages: target.is_block_device.then(|| target.size / ps),
            wal_file: log_files.wal_sync_file,
            is_block_device: target.is_block_device,
        };
        let polls = db_io_polls_through_block_layer(&opts.io);
        let mut db = Self::open_runtime(rt, files, &file_path, opts, None)?;
        db.log_files = log_files.files;
        db.target = Some(target);
        db.sync_off_ring = db.handle.durable.is_none() && polls;
        Ok(db)
    }

    /// A database with a log on a raw device: its data, log and double-write area are regions
    /// of the device (see [`DeviceLayout`]), reached through a [`RegionEngine`].
    fn open_device_logged(target: Target, file_path: &Path, opts: Options) -> Result<Db> {
        let ps = opts.page_size as u64;
        let block = (target.align as u64).max(512);
        let layout = DeviceLayout::plan(target.size, ps, block, &opts)
            .map_err(|why| DbError::InvalidArg(format!("{}: {why}", file_path.display())))?;
        layout.assert_fits(target.size);
        let len_bytes = FileSet {
            data: if opts.fresh { 0 } else { layout.data.len },
            log: layout.log.len,
            double_write: layout.double_write.len,
        };
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size)?;
        let regions = layout.into_file_order().to_vec();
        let rt = Runtime::from_config_wrapped(&opts.io, &[target.fd()], Some(pool), |e| {
            Ok(Box::new(RegionEngine::new(e, regions, block)?))
        })?;
        let device_log = DeviceLog {
            block_bytes: block as usize,
            wipe: opts.fresh,
        };
        let files = OpenedFiles {
            len_bytes,
            capacity_pages: Some(layout.data.len / ps),
            wal_file: None,
            is_block_device: true,
        };
        let mut db = Self::open_runtime(rt, files, file_path, opts, Some(device_log))?;
        db.target = Some(target);
        Ok(db)
    }
}

/// A char device carries block I/O only as NVMe commands: the ring engines become
/// passthrough on one.
fn with_engine_for(kind: PathKind, mut opts: Options) -> Options {
    if kind == PathKind::NvmeCharDevice
        && matches!(opts.io.engine, EngineKind::Uring | EngineKind::UringSync)
    {
        opts.io.engine = EngineKind::UringPassthrough;
    }
    opts
}

/// Refuses durability modes and switches the target cannot serve.
fn check_options_fit(path: &Path, kind: PathKind, opts: &Options) -> Result<()> {
    let logged = opts.durability.logged();
    let passthrough = opts.io.engine == EngineKind::UringPassthrough;
    let is_nvme_char = kind == PathKind::NvmeCharDevice;
    if opts.durability == Durability::NvmeFlush && !(is_nvme_char && passthrough) {
        return Err(DbError::InvalidArg(format!(
            "durability nvme-flush makes the log durable with NVMe Flush commands through \
             passthrough: it needs the database on an NVMe generic char device (/dev/ngXnY) \
             with engine uring-passthrough; {} is not one: use fdatasync",
            path.display()
        )));
    }
    if logged && kind == PathKind::File {
        return Err(DbError::InvalidArg(format!(
            "{}: a database with a log (durability {}) is a directory (data, log and \
             double-write files) or a raw device (its regions); pass a directory, or use \
             durability off",
            path.display(),
            opts.durability
        )));
    }
    if kind.is_device() && matches!(opts.durability, Durability::Thread | Durability::Odsync) {
        return Err(DbError::InvalidArg(format!(
            "durability {} needs the log as a file; on a raw device ({}) use fdatasync{}",
            opts.durability,
            path.display(),
            if is_nvme_char { " or nvme-flush" } else { "" }
        )));
    }
    if logged && opts.io.iopoll && !passthrough {
        return Err(DbError::InvalidArg(format!(
            "durability {} syncs the log and checkpoints with fsync/fdatasync, which cannot \
             run on an IOPOLL ring; drop --iopoll, or use durability off (on an NVMe \
             namespace through passthrough, syncs are NVMe Flush commands and IOPOLL works)",
            opts.durability
        )));
    }
    Ok(())
}

/// Opens the data file or device (emptying a file when `fresh`) and checks that pages suit
/// its direct I/O alignment.
fn open_target(file_path: &Path, opts: &Options) -> Result<Target> {
    let target = Target::open(
        file_path,
        TargetOptions {
            direct: opts.direct,
            write: true,
            create: true,
        },
    )?;
    if opts.fresh && !target.is_block_device {
        target.file().set_len(0).map_err(file_err(file_path))?;
    }
    let ps = opts.page_size as u64;
    if target.direct && !ps.is_multiple_of(target.align as u64) {
        return Err(DbError::InvalidArg(format!(
            "page size {ps} is not a multiple of {}'s direct I/O alignment {}",
            file_path.display(),
            target.align
        )));
    }
    Ok(target)
}

/// Whether `io` polls completions through the block layer (IOPOLL on `uring`), where fsync
/// is refused; NVMe passthrough flushes with an NVMe Flush command on the same ring.
fn db_io_polls_through_block_layer(io: &IoConfig) -> bool {
    io.iopoll && io.engine != EngineKind::UringPassthrough
}

/// Refuses to open a database with another page size than it was created with, naming the
/// right one (read from page 0's header through the page cache, before any direct I/O).
fn check_page_size(path: &Path, page_size: usize) -> Result<()> {
    use std::io::Read;
    let mut head = [0u8; page::HEADER_SIZE];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    if read.is_err() {
        // Too short to hold a header: the meta page check reports it.
        return Ok(());
    }
    if page::page_type(&head) != Some(page::PageType::Meta) {
        return Ok(());
    }
    let shift = head[26];
    if shift < 32 && (1usize << shift) != page_size {
        return Err(DbError::InvalidArg(format!(
            "{} was created with {}-byte pages; open it with page size {}",
            path.display(),
            1usize << shift,
            1usize << shift
        )));
    }
    Ok(())
}
