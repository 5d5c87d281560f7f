//! [`Db::open`]: from a path to an open database.
//!
//! A path is one of four things ([`TargetKind`]), and what it is decides which options make
//! sense: a directory holds the three files of a database with a log; a plain file holds the
//! data of a database without one; a block device or an NVMe generic char device holds either
//! (with a log, as the three regions of [`DeviceLayout`]). Every refusal happens here, before
//! anything is created or written, as an [`OpenError`] that names what to change.

use super::layout::{DeviceLayout, DeviceLog, FileSet, DATA_FILE, DW_FILE, WAL_FILE};
use super::runtime::OpenedFiles;
use super::{Db, Options};
use crate::error::{OpenError, TargetKind};
use crate::page;
use crate::wal::Durability;
use ringdb_io::RegionEngine;
use ringdb_io::Runtime;
use ringdb_io::{EffectiveIo, EngineKind, FixedBufferPool};
use ringdb_io::{PathKind, Target, TargetOptions};
use std::path::{Path, PathBuf};

/// What `Db::open` was given, by what the path is ([`PathKind`], never its name): a directory,
/// or a path without an extension that does not exist yet in a directory where files may be
/// made (created: the data file is `data.ringdb` in it, with the log files beside it); a char
/// device (an NVMe generic one); a block device; anything else is the data file itself (a
/// missing name among device nodes included: opening it is refused as missing, and nothing is
/// created there).
fn target_kind(path: &Path) -> TargetKind {
    match PathKind::of(path) {
        PathKind::Directory => TargetKind::Directory,
        PathKind::Creatable | PathKind::MissingParent if path.extension().is_none() => {
            TargetKind::Directory
        }
        PathKind::CharDevice => TargetKind::NvmeCharDevice,
        PathKind::BlockDevice => TargetKind::BlockDevice,
        _ => TargetKind::File,
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
    fn open(dir: &Path, opts: &Options) -> Result<LogFiles, OpenError> {
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
fn open_beside(
    dir: &Path,
    name: &str,
    fresh: bool,
    o_dsync: bool,
) -> Result<(std::fs::File, u64), OpenError> {
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

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> OpenError + '_ {
    move |source| OpenError::File {
        path: path.to_path_buf(),
        source,
    }
}

impl Db {
    /// Opens (or creates) the database at `path`: a directory (the data file is
    /// `path/data.ringdb`, created with the directory, and with a log `wal.ringdb` and
    /// `dw.ringdb` beside it), a file, or a block device (mode `off` only).
    pub fn open(path: &Path, opts: Options) -> Result<Db, OpenError> {
        let kind = target_kind(path);
        let opts = with_engine_for(kind, opts);
        check_options_fit(path, kind, &opts)?;
        let file_path = if kind == TargetKind::Directory {
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
    ) -> Result<Db, OpenError> {
        let log_files = if opts.durability.logged() {
            LogFiles::open(dir, &opts)?
        } else {
            LogFiles::none()
        };
        let fds: Vec<_> = std::iter::once(target.fd())
            .chain(log_files.fds())
            .collect();
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size).map_err(OpenError::Io)?;
        let rt = Runtime::from_config(&opts.io, &fds, Some(pool)).map_err(OpenError::Io)?;
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
        let polls = polls_through_block_layer(&rt.effective_io());
        let mut db = Self::open_runtime(rt, files, &file_path, opts, None)?;
        db.log_files = log_files.files;
        db.target = Some(target);
        db.sync_off_ring = db.handle.durable.is_none() && polls;
        Ok(db)
    }

    /// A database with a log on a raw device: its data, log and double-write area are regions
    /// of the device (see [`DeviceLayout`]), reached through a [`RegionEngine`].
    fn open_device_logged(
        target: Target,
        file_path: &Path,
        opts: Options,
    ) -> Result<Db, OpenError> {
        let ps = opts.page_size as u64;
        let block = (target.align as u64).max(512);
        let layout = DeviceLayout::plan(target.size, ps, block, &opts).map_err(|reason| {
            OpenError::Layout {
                path: file_path.to_path_buf(),
                reason,
            }
        })?;
        layout.assert_fits(target.size);
        let len_bytes = FileSet {
            data: if opts.fresh { 0 } else { layout.data.len },
            log: layout.log.len,
            double_write: layout.double_write.len,
        };
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size).map_err(OpenError::Io)?;
        let regions = layout.into_file_order().to_vec();
        let rt = Runtime::from_config_wrapped(&opts.io, &[target.fd()], Some(pool), |e| {
            Ok(Box::new(RegionEngine::new(e, regions, block)?))
        })
        .map_err(OpenError::Io)?;
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
/// passthrough on one, and so does `auto` (no engine without io_uring can run there, so a
/// passthrough that cannot run is the typed error, not a fallback).
fn with_engine_for(kind: TargetKind, mut opts: Options) -> Options {
    if kind == TargetKind::NvmeCharDevice
        && matches!(
            opts.io.engine,
            EngineKind::Uring | EngineKind::UringSync | EngineKind::Auto
        )
    {
        opts.io.engine = EngineKind::UringPassthrough;
    }
    opts
}

/// Refuses durability modes and switches the target cannot serve: a mode the kind of target
/// cannot serve ([`TargetKind::supports`]), NVMe Flush without passthrough, and syncs on an
/// IOPOLL ring.
fn check_options_fit(path: &Path, kind: TargetKind, opts: &Options) -> Result<(), OpenError> {
    let mode = opts.durability;
    let passthrough = opts.io.engine == EngineKind::UringPassthrough;
    if !kind.supports(mode) {
        return Err(OpenError::Durability {
            path: path.to_path_buf(),
            mode,
            target: kind,
        });
    }
    if mode == Durability::NvmeFlush && !passthrough {
        return Err(OpenError::NvmeFlushEngine {
            path: path.to_path_buf(),
            engine: opts.io.engine,
        });
    }
    if mode.logged() && opts.io.iopoll && !passthrough {
        return Err(OpenError::DurabilityOnIopoll { mode });
    }
    Ok(())
}

/// Opens the data file or device (emptying a file when `fresh`) and checks that pages suit
/// its direct I/O alignment.
fn open_target(file_path: &Path, opts: &Options) -> Result<Target, OpenError> {
    let target = Target::open(
        file_path,
        TargetOptions {
            direct: opts.direct,
            write: true,
            create: true,
        },
    )
    .map_err(OpenError::Io)?;
    if opts.fresh && !target.is_block_device {
        target.file().set_len(0).map_err(file_err(file_path))?;
    }
    let ps = opts.page_size as u64;
    if target.direct && !ps.is_multiple_of(target.align as u64) {
        return Err(OpenError::Alignment {
            path: file_path.to_path_buf(),
            page_size: opts.page_size,
            alignment: target.align,
        });
    }
    Ok(target)
}

/// Whether the engine in effect polls completions through the block layer (IOPOLL on
/// `uring`), where fsync is refused; NVMe passthrough flushes with an NVMe Flush command on the
/// same ring. (Under `auto`, IOPOLL may have been dropped.)
fn polls_through_block_layer(io: &EffectiveIo) -> bool {
    io.switches.is_some_and(|s| s.iopoll) && io.engine != EngineKind::UringPassthrough
}

/// Refuses to open a database with another page size than it was created with, naming the
/// right one (read from page 0's header through the page cache, before any direct I/O).
fn check_page_size(path: &Path, page_size: usize) -> Result<(), OpenError> {
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
        return Err(OpenError::PageSizeMismatch {
            path: Some(path.to_path_buf()),
            on_disk: 1usize << shift,
            requested: page_size,
        });
    }
    Ok(())
}
