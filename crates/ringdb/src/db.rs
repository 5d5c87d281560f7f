//! The embeddable database: one data file (or block device), one thread, one ring.
//!
//! [`Db`] owns the thread's [`Runtime`]; its blocking methods (`get`, `insert`, ...) run one
//! operation to completion. For many concurrent operations (the paper's fibers), spawn tasks
//! that use a [`DbHandle`] on [`Db::runtime`] and run it: each task parks on its own page
//! faults while the others run.

use crate::buffer::{BufferManager, PoolConfig, PoolStats};
use crate::checkpoint::{self, CheckpointFiles, CheckpointStats, Checkpointer};
use crate::error::{DbError, Result};
use crate::keylock::KeyLocks;
use crate::meta::{Meta, META_PID};
use crate::page;
use crate::tree::{BTree, TreeStats};
use crate::wal::{self, Durability, Op, Wal, WalStats};
use ringdb_io::engine::{Region, RegionEngine};
use ringdb_io::executor::{Io, Runtime, RuntimeStats};
use ringdb_io::target::{Target, TargetOptions};
use ringdb_io::{AlignedBuf, Engine, EngineKind, FileId, FixedBufferPool, IoConfig};
use serde::Serialize;
use std::cell::RefCell;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The data file's name when `Db::open` is given a directory.
pub const DATA_FILE: &str = "data.ringdb";
/// The write-ahead log's file, beside the data file.
pub const WAL_FILE: &str = "wal.ringdb";
/// The double-write file of checkpoints, beside the data file.
pub const DW_FILE: &str = "dw.ringdb";

const DATA: FileId = FileId(0);
const WAL: FileId = FileId(1);
const DW: FileId = FileId(2);

/// A write batch: puts and deletes that commit atomically (with a log: all or nothing after a
/// crash, and durable when [`DbHandle::write`] returns, per the durability mode).
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    ops: Vec<Op>,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.ops.push(Op::Put {
            key: key.to_vec(),
            value: value.to_vec(),
        });
        self
    }

    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.ops.push(Op::Delete { key: key.to_vec() });
        self
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// How to open a database.
#[derive(Clone, Debug)]
pub struct Options {
    pub page_size: usize,
    /// Buffer pool size in pages.
    pub pool_pages: usize,
    /// The I/O engine and its switches (fixed buffers register the pool's frames).
    pub io: IoConfig,
    /// Victims per eviction round (`None`: the pool's default, 1/16 of it up to 64).
    pub evict_batch: Option<usize>,
    /// Start evicting below this many free frames (`None`: the default, 10% of the pool).
    pub free_target: Option<usize>,
    /// `O_DIRECT` (the buffer pool is the only cache).
    pub direct: bool,
    /// Start empty, discarding what the file or device holds.
    pub fresh: bool,
    /// How commits are made durable; `Off`: no log (pages written back on eviction and close).
    pub durability: Durability,
    /// The circular log's size in bytes (a new database; an existing one keeps its own).
    pub wal_bytes: u64,
    /// A checkpoint starts when more than this share of the pool is dirty.
    pub checkpoint_dirty: f64,
    /// Group commit (one durability point for all commits waiting); off: one per commit.
    pub group_commit: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 4096,
            pool_pages: 4096,
            io: IoConfig {
                queue_depth: 128,
                batching: ringdb_io::Batching::Adaptive,
                ..IoConfig::new(ringdb_io::EngineKind::Uring)
            },
            evict_batch: None,
            free_target: None,
            direct: true,
            fresh: false,
            durability: Durability::Fdatasync,
            wal_bytes: 64 << 20,
            checkpoint_dirty: 0.5,
            group_commit: true,
        }
    }
}

/// Everything the database counts.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct DbStats {
    pub pool: PoolStats,
    pub tree: TreeStats,
    pub runtime: RuntimeStats,
    pub height: u32,
    pub pages: u64,
    pub durability: Durability,
    pub wal: Option<WalStats>,
    pub checkpoints: Option<CheckpointStats>,
}

/// The log side of a database opened with a durability mode.
struct Durable {
    wal: Wal,
    ckpt: Checkpointer,
    locks: Rc<KeyLocks>,
    /// Dirty pages that start a checkpoint.
    dirty_high: usize,
    /// A commit failed after its record was appended: memory and log may disagree, so the
    /// database refuses work until it is reopened (recovery decides from the log).
    failed: RefCell<Option<String>>,
}

/// A handle for tasks on the database's runtime. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct DbHandle {
    tree: Rc<BTree>,
    durable: Option<Rc<Durable>>,
}

impl DbHandle {
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_failed()?;
        self.tree.get(key).await
    }

    /// Inserts or replaces; returns whether the key existed. With a log, a commit of its own.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        if self.durable.is_none() {
            return self.tree.insert(key, value).await;
        }
        let ops = vec![Op::Put {
            key: key.to_vec(),
            value: value.to_vec(),
        }];
        Ok(self.commit(ops).await?[0])
    }

    /// Removes; returns whether the key existed. With a log, a commit of its own.
    pub async fn remove(&self, key: &[u8]) -> Result<bool> {
        if self.durable.is_none() {
            return self.tree.remove(key).await;
        }
        Ok(self.commit(vec![Op::Delete { key: key.to_vec() }]).await?[0])
    }

    /// Commits `batch` atomically; with a log, returns once it is durable.
    pub async fn write(&self, batch: &WriteBatch) -> Result<()> {
        if self.durable.is_none() {
            for op in &batch.ops {
                match op {
                    Op::Put { key, value } => self.tree.insert(key, value).await?,
                    Op::Delete { key } => self.tree.remove(key).await?,
                };
            }
            return Ok(());
        }
        self.commit(batch.ops.clone()).await.map(|_| ())
    }

    fn check_failed(&self) -> Result<()> {
        if let Some(d) = &self.durable {
            if let Some(why) = d.failed.borrow().as_ref() {
                return Err(DbError::LogFailed(why.clone()));
            }
        }
        Ok(())
    }

    /// The commit path: lock the keys, append the record (log first: every change in the
    /// tree has its record before it in the log), apply it, then wait until it is durable.
    async fn commit(&self, ops: Vec<Op>) -> Result<Vec<bool>> {
        let d = self.durable.as_ref().expect("commit needs a log");
        self.check_failed()?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        for op in &ops {
            let (k, v) = match op {
                Op::Put { key, value } => (key.as_slice(), value.as_slice()),
                Op::Delete { key } => (key.as_slice(), &[][..]),
            };
            self.tree.check_record(k, v)?;
        }
        let len = d.wal.record_len(&ops);
        if len > d.wal.max_record() {
            return Err(DbError::InvalidArg(format!(
                "a batch of {len} bytes is larger than a quarter of the log ({} bytes); split it \
                 or open the database with a larger log",
                d.wal.max_record()
            )));
        }
        let _keys = d
            .locks
            .lock(ops.iter().map(|o| o.key().to_vec()).collect())
            .await;
        while !d.wal.has_room(len) {
            d.ckpt.run(&self.tree).await?;
        }
        let (start, end) = d.wal.append(&ops)?;
        self.tree.buffer().set_lsn_hint(end);
        let mut existed = Vec::with_capacity(ops.len());
        for op in &ops {
            let r = match op {
                Op::Put { key, value } => self.tree.insert(key, value).await,
                Op::Delete { key } => self.tree.remove(key).await,
            };
            match r {
                Ok(e) => existed.push(e),
                Err(e) => {
                    // The record is in the log, part of it is not in the tree.
                    d.failed.borrow_mut().get_or_insert_with(|| e.to_string());
                    return Err(e);
                }
            }
        }
        d.wal.applied(start);
        drop(_keys);
        let bm = self.tree.buffer();
        if !d.ckpt.running()
            && (bm.dirty_pages() > d.dirty_high || d.wal.live_bytes() > d.wal.capacity() / 2)
        {
            d.ckpt.run(&self.tree).await?;
        }
        d.wal.wait_durable(end).await?;
        Ok(existed)
    }

    /// Up to `limit` pairs in `[start, end)` order by key.
    pub async fn range(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.tree.range(start, end, limit).await
    }

    /// The largest key + value length accepted.
    pub fn max_record(&self) -> usize {
        self.tree.max_record()
    }

    /// Writes the meta page and every dirty page; with `sync`, makes them durable. With a
    /// log: a checkpoint.
    pub async fn flush(&self, sync: bool) -> Result<()> {
        if let Some(d) = &self.durable {
            self.check_failed()?;
            return d.ckpt.run(&self.tree).await;
        }
        let bm = self.tree.buffer();
        loop {
            if let Some(g) = bm.try_fix(META_PID) {
                let meta = Meta {
                    page_size: bm.page_size() as u32,
                    root: self.tree.root(),
                    next_pid: bm.next_pid(),
                    free_pages: bm.free_pages(),
                    logged: false,
                    epoch: 0,
                    redo_lsn: 0,
                    wal_bytes: 0,
                };
                g.write(|p| meta.write_to(p));
                break;
            }
            drop(bm.load(META_PID).await?);
        }
        bm.flush_all(sync).await
    }

    pub fn tree(&self) -> &BTree {
        &self.tree
    }

    /// The log's mode (`Off` without one).
    pub fn durability(&self) -> Durability {
        self.durable
            .as_ref()
            .map_or(Durability::Off, |d| d.wal.mode())
    }

    /// One durability point per commit instead of group commit (for the comparison).
    pub fn set_group_commit(&self, on: bool) {
        if let Some(d) = &self.durable {
            d.wal.set_group_commit(on);
        }
    }
}

/// An open database. Not `Send`: it lives on the thread that opened it, like its ring.
pub struct Db {
    handle: DbHandle,
    // Dropped after the handle (the tree's frames go back to the runtime's pool), and before
    // the files, whose fds the engine uses until it has drained.
    rt: Runtime,
    _files: Vec<std::fs::File>,
    _target: Option<Target>,
    path: PathBuf,
    closed: bool,
    /// The ring polls for completions (IOPOLL, through the block layer), where fsync cannot
    /// run: a flush makes the data durable with `fdatasync` on the target, off the ring.
    sync_off_ring: bool,
}

/// What `Db::open_on` is given: an engine over the files (data, log, double-write), their
/// lengths, and the handles that must outlive it.
pub struct Storage {
    pub engine: Box<dyn Engine>,
    /// Lengths of the data, log and double-write files (the log ones unused in mode `off`).
    pub lens: [u64; 3],
    /// Pages the target can hold (a block device), if bounded.
    pub capacity_pages: Option<u64>,
    /// The log file, for the sync thread of mode `thread`.
    pub wal_file: Option<std::fs::File>,
    pub is_block_device: bool,
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
        let is_dir_form = path.is_dir() || (!path.exists() && path.extension().is_none());
        use std::os::unix::fs::FileTypeExt;
        let kind = std::fs::metadata(path).map(|m| m.file_type()).ok();
        let is_nvme_char = kind.is_some_and(|k| k.is_char_device());
        let is_device = is_nvme_char || kind.is_some_and(|k| k.is_block_device());
        let logged = opts.durability.logged();
        let mut opts = opts;
        if is_nvme_char && matches!(opts.io.engine, EngineKind::Uring | EngineKind::UringSync) {
            // A char device carries block I/O only as NVMe commands.
            opts.io.engine = EngineKind::UringPassthrough;
        }
        let passthrough = opts.io.engine == EngineKind::UringPassthrough;
        if opts.durability == Durability::NvmeFlush && !(is_nvme_char && passthrough) {
            return Err(DbError::InvalidArg(format!(
                "durability nvme-flush makes the log durable with NVMe Flush commands through \
                 passthrough: it needs the database on an NVMe generic char device (/dev/ngXnY) \
                 with engine uring-passthrough; {} is not one: use fdatasync",
                path.display()
            )));
        }
        if logged && !is_dir_form && !is_device {
            return Err(DbError::InvalidArg(format!(
                "{}: a database with a log (durability {}) is a directory (data, log and \
                 double-write files) or a raw device (its regions); pass a directory, or use \
                 durability off",
                path.display(),
                opts.durability
            )));
        }
        if is_device && matches!(opts.durability, Durability::Thread | Durability::Odsync) {
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
        let file_path = if is_dir_form {
            std::fs::create_dir_all(path).map_err(file_err(path))?;
            path.join(DATA_FILE)
        } else {
            path.to_path_buf()
        };
        let target = Target::open(
            &file_path,
            TargetOptions {
                direct: opts.direct,
                write: true,
                create: true,
            },
        )?;
        if opts.fresh && !target.is_block_device {
            target.file().set_len(0).map_err(file_err(&file_path))?;
        }
        let ps = opts.page_size as u64;
        if target.direct && !ps.is_multiple_of(target.align as u64) {
            return Err(DbError::InvalidArg(format!(
                "page size {ps} is not a multiple of {}'s direct I/O alignment {}",
                file_path.display(),
                target.align
            )));
        }
        // `fresh` formats a device too: whatever page 0 holds (a raw benchmark's writes, an
        // older database) is ignored, and the device's capacity still bounds the data.
        let data_len = if opts.fresh { 0 } else { target.size };
        if data_len > 0 {
            check_page_size(&file_path, opts.page_size)?;
        }
        if logged && is_device {
            return Self::open_device_logged(target, &file_path, opts);
        }
        let mut fds = vec![target.fd()];
        let mut files = Vec::new();
        let mut lens = [data_len, 0, 0];
        let mut wal_file = None;
        if opts.durability.logged() {
            use std::os::unix::fs::OpenOptionsExt;
            for (i, name) in [(1, WAL_FILE), (2, DW_FILE)] {
                let fp = path.join(name);
                let mut oo = std::fs::OpenOptions::new();
                oo.read(true).write(true).create(true);
                if i == 1 && opts.durability == Durability::Odsync {
                    oo.custom_flags(libc::O_DSYNC);
                }
                let f = oo.open(&fp).map_err(file_err(&fp))?;
                if opts.fresh {
                    f.set_len(0).map_err(file_err(&fp))?;
                }
                lens[i] = f.metadata().map_err(file_err(&fp))?.len();
                fds.push(std::os::fd::AsRawFd::as_raw_fd(&f));
                if i == 1 {
                    wal_file = Some(f.try_clone().map_err(file_err(&fp))?);
                }
                files.push(f);
            }
        }
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size)?;
        let rt = Runtime::from_config(&opts.io, &fds, Some(pool))?;
        let capacity_pages = target.is_block_device.then(|| target.size / ps);
        let is_block_device = target.is_block_device;
        let db_opts_io = opts.io.clone();
        let mut db = Self::open_runtime(
            rt,
            lens,
            capacity_pages,
            wal_file,
            is_block_device,
            &file_path,
            opts,
            None,
        )?;
        db._files = files;
        db._target = Some(target);
        db.sync_off_ring =
            db.handle.durable.is_none() && db_io_polls_through_block_layer(&db_opts_io);
        Ok(db)
    }

    /// A database with a log on a raw device: its data, log and double-write area are regions
    /// of the device (see [`DeviceLayout`]), reached through a [`RegionEngine`].
    fn open_device_logged(target: Target, file_path: &Path, opts: Options) -> Result<Db> {
        let ps = opts.page_size as u64;
        let block = (target.align as u64).max(512);
        let layout = DeviceLayout::plan(target.size, ps, block, &opts)
            .map_err(|why| DbError::InvalidArg(format!("{}: {why}", file_path.display())))?;
        let lens = [
            if opts.fresh { 0 } else { layout.data.len },
            layout.log.len,
            layout.dw.len,
        ];
        if lens[0] > 0 {
            check_page_size(file_path, opts.page_size)?;
        }
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size)?;
        let regions = vec![layout.data, layout.log, layout.dw];
        let rt = Runtime::from_config_wrapped(&opts.io, &[target.fd()], Some(pool), |e| {
            Ok(Box::new(RegionEngine::new(e, regions, block)?))
        })?;
        let dev = DeviceLog {
            align: block as usize,
            wipe: opts.fresh,
        };
        let mut db = Self::open_runtime(
            rt,
            lens,
            Some(layout.data.len / ps),
            None,
            true,
            file_path,
            opts,
            Some(dev),
        )?;
        db._target = Some(target);
        Ok(db)
    }

    /// Opens a database over `storage` (e.g. a simulated disk in tests): file 0 is the data
    /// file, 1 the log, 2 the double-write file.
    pub fn open_on(storage: Storage, name: &Path, opts: Options) -> Result<Db> {
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size)?;
        let rt = Runtime::with_pool(storage.engine, opts.io.batching, pool);
        Self::open_runtime(
            rt,
            storage.lens,
            storage.capacity_pages,
            storage.wal_file,
            storage.is_block_device,
            name,
            opts,
            None,
        )
    }

    // The open paths differ in exactly these; a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    fn open_runtime(
        mut rt: Runtime,
        lens: [u64; 3],
        capacity_pages: Option<u64>,
        wal_file: Option<std::fs::File>,
        is_block_device: bool,
        file_path: &Path,
        opts: Options,
        dev: Option<DeviceLog>,
    ) -> Result<Db> {
        let ps = opts.page_size as u64;
        if opts.durability == Durability::NvmeFlush && dev.is_none() {
            return Err(DbError::InvalidArg(
                "durability nvme-flush needs the database on an NVMe generic char device \
                 (/dev/ngXnY) through passthrough; use fdatasync"
                    .into(),
            ));
        }
        let mut cfg = PoolConfig::new(opts.page_size, opts.pool_pages);
        if let Some(b) = opts.evict_batch {
            cfg.evict_batch = b;
        }
        if let Some(t) = opts.free_target {
            cfg.free_target = t;
        }
        cfg.capacity_pages = capacity_pages;
        cfg.steal = !opts.durability.logged();
        cfg.validate()?;
        if opts.durability.logged() {
            if !(0.05..=0.9).contains(&opts.checkpoint_dirty) {
                return Err(DbError::InvalidArg(format!(
                    "checkpoint_dirty {} must be between 0.05 and 0.9 of the pool",
                    opts.checkpoint_dirty
                )));
            }
            if opts.wal_bytes < 256 * 1024 || !opts.wal_bytes.is_multiple_of(8) {
                return Err(DbError::InvalidArg(format!(
                    "a log of {} bytes is too small: at least 256 KiB, a multiple of 8",
                    opts.wal_bytes
                )));
            }
        }
        let io = rt.io();
        let existing = lens[0] > 0;
        let handle = if opts.durability.logged() {
            let io2 = io.clone();
            let path = file_path.to_path_buf();
            rt.block_on(
                async move { open_logged(io2, cfg, lens, wal_file, &opts, &path, dev).await },
            )??
        } else {
            // A block device is a new database unless page 0 is a ringdb meta page.
            let pages_on_disk = if existing { lens[0] / ps } else { 0 };
            let bm = BufferManager::new(io, DATA, cfg, pages_on_disk)?;
            let tree = rt.block_on(async {
                if existing {
                    let g = bm.load(META_PID).await.map_err(|e| match e {
                        DbError::Page(pe) if is_block_device => DbError::InvalidArg(format!(
                            "{} does not hold a ringdb database ({pe}); open it with `fresh` to format it",
                            file_path.display()
                        )),
                        e => e,
                    })?;
                    let g = g.ok_or_else(|| DbError::Corrupt {
                        page: META_PID,
                        what: "the meta page is on the free list".into(),
                    })?;
                    let meta = g.read(Meta::read_from)?;
                    drop(g);
                    if meta.logged {
                        return Err(DbError::InvalidArg(format!(
                            "{} has a write-ahead log; open it with a durability mode (not off), \
                             or its last commits would be ignored",
                            file_path.display()
                        )));
                    }
                    if meta.next_pid > pages_on_disk {
                        return Err(DbError::Corrupt {
                            page: META_PID,
                            what: format!(
                                "the meta page counts {} pages, the target holds {pages_on_disk}",
                                meta.next_pid
                            ),
                        });
                    }
                    bm.set_next_pid(meta.next_pid);
                    bm.set_free_pages(meta.free_pages);
                    Ok(BTree::open(bm, meta.root))
                } else {
                    bm.ensure_free(2).await?;
                    let g = bm.alloc_page(None)?;
                    assert_eq!(g.pid(), META_PID, "a new database starts at page 0");
                    g.write(|p| page::init(p, page::PageType::Meta));
                    drop(g);
                    BTree::create(bm).await
                }
            })??;
            DbHandle {
                tree: Rc::new(tree),
                durable: None,
            }
        };
        Ok(Db {
            handle,
            rt,
            _files: Vec::new(),
            _target: None,
            path: file_path.to_path_buf(),
            closed: false,
            sync_off_ring: false,
        })
    }

    /// The data file or device.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn handle(&self) -> DbHandle {
        self.handle.clone()
    }

    /// The runtime, to spawn tasks that use [`handle`](Self::handle) and run them.
    pub fn runtime(&mut self) -> &mut Runtime {
        &mut self.rt
    }

    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let h = self.handle.clone();
        self.rt.block_on(async move { h.get(key).await })?
    }

    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let h = self.handle.clone();
        self.rt
            .block_on(async move { h.insert(key, value).await })?
    }

    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        let h = self.handle.clone();
        self.rt.block_on(async move { h.remove(key).await })?
    }

    pub fn range(
        &mut self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let h = self.handle.clone();
        self.rt
            .block_on(async move { h.range(start, end, limit).await })?
    }

    /// Writes everything to the target and makes it durable.
    pub fn flush(&mut self) -> Result<()> {
        let h = self.handle.clone();
        let on_ring = !self.sync_off_ring;
        self.rt.block_on(async move { h.flush(on_ring).await })??;
        self.sync_target_off_ring()
    }

    /// `fdatasync` on the data target, for an IOPOLL ring (see `sync_off_ring`).
    fn sync_target_off_ring(&self) -> Result<()> {
        match (&self._target, self.sync_off_ring) {
            (Some(t), true) => t.file().sync_data().map_err(|source| DbError::File {
                path: self.path.display().to_string(),
                source,
            }),
            _ => Ok(()),
        }
    }

    pub fn stats(&self) -> DbStats {
        let tree = &self.handle.tree;
        DbStats {
            pool: tree.buffer().stats(),
            tree: tree.stats(),
            runtime: self.rt.stats(),
            height: tree.root().height,
            pages: tree.buffer().next_pid(),
            durability: self.handle.durability(),
            wal: self.handle.durable.as_ref().map(|d| d.wal.stats()),
            checkpoints: self.handle.durable.as_ref().map(|d| d.ckpt.stats()),
        }
    }

    /// Commits `batch` atomically (see [`DbHandle::write`]).
    pub fn write(&mut self, batch: &WriteBatch) -> Result<()> {
        let h = self.handle.clone();
        self.rt.block_on(async move { h.write(batch).await })?
    }

    /// Flushes and closes; errors surface here (dropping a `Db` flushes too, but can only
    /// log a failure).
    pub fn close(mut self) -> Result<()> {
        self.closed = true;
        self.flush()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let h = self.handle.clone();
        let on_ring = !self.sync_off_ring;
        match self
            .rt
            .block_on(async move { h.flush(on_ring).await })
            .map(|r| r.and_then(|()| self.sync_target_off_ring()))
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("flushing {} on drop failed: {e}", self.path.display()),
            Err(e) => tracing::warn!("flushing {} on drop failed: {e}", self.path.display()),
        }
    }
}

/// Reads page 0 straight from the data file (a log database keeps it out of the pool).
async fn read_meta(io: &Io, page_size: usize, data_len: u64) -> Result<Option<Meta>> {
    if data_len < page_size as u64 {
        return Ok(None);
    }
    let (r, buf) = io.read(DATA, 0, AlignedBuf::new(page_size)).await;
    if r? < page_size {
        return Ok(None);
    }
    if page::verify(buf.as_slice(), META_PID).is_err() {
        return Ok(None);
    }
    Meta::read_from(buf.as_slice()).map(Some)
}

/// Opens a database with a log: finishes an interrupted checkpoint from the double-write
/// file, replays the log from the checkpoint's redo LSN, and takes a checkpoint.
async fn open_logged(
    io: Io,
    cfg: PoolConfig,
    lens: [u64; 3],
    wal_file: Option<std::fs::File>,
    opts: &Options,
    path: &Path,
    dev: Option<DeviceLog>,
) -> Result<DbHandle> {
    let ps = opts.page_size;
    let mut lens = lens;
    if let Some(d) = dev {
        // A device is blank (formatted, or never used) while page 0 is all zeros and no
        // double-write image stands: a format interrupted by a crash is redone, so no record
        // of an earlier database in the log region can pass for one of this database's.
        let blank = d.wipe
            || (crate::chunked::read(&io, DATA, 0, ps)
                .await?
                .iter()
                .all(|&b| b == 0)
                && checkpoint::read_dw(&io, DW, lens[2], ps).await?.is_none());
        if blank {
            wipe_log_regions(&io, lens, ps).await?;
            lens[0] = 0;
        }
    }
    let mut meta = read_meta(&io, ps, lens[0]).await?;
    let dw = checkpoint::read_dw(&io, DW, lens[2], ps).await?;
    let mut epoch_dw = None;
    let mut dw_end = 0;
    if let Some(dw) = dw {
        // An intact double-write file of this checkpoint or a newer one: its pages may be
        // torn or missing in place, so write them again (idempotent).
        if meta.as_ref().is_none_or(|m| dw.epoch >= m.epoch) {
            checkpoint::apply_dw(&io, DATA, ps, &dw).await?;
            dw_end = dw.pages.iter().map(|(p, _)| p + 1).max().unwrap_or(0);
            epoch_dw = Some(dw.epoch);
            meta = read_meta(&io, ps, lens[0].max(ps as u64)).await?;
        }
    }
    let existing = lens[0] > 0 || epoch_dw.is_some();
    let meta = match meta {
        Some(m) => {
            if !m.logged {
                return Err(DbError::InvalidArg(format!(
                    "{} was created without a write-ahead log; open it with durability off",
                    path.display()
                )));
            }
            Some(m)
        }
        None if existing && lens[0] >= ps as u64 => {
            return Err(DbError::Corrupt {
                page: META_PID,
                what: "the meta page is unreadable (torn or corrupted) and the double-write \
                       file holds no copy of it"
                    .into(),
            })
        }
        None => None,
    };
    let wal_bytes = meta.as_ref().map_or(opts.wal_bytes, |m| m.wal_bytes);
    if dev.is_some() && wal_bytes != lens[1] {
        return Err(DbError::InvalidArg(format!(
            "{} was formatted with a log of {wal_bytes} bytes; open it with that log size \
             (the regions of the device depend on it)",
            path.display()
        )));
    }
    let (next_pid, epoch, redo) = meta
        .as_ref()
        .map_or((1, 0, 0), |m| (m.next_pid, m.epoch, m.redo_lsn));
    // Pages the data file holds (the double-write file may just have extended it). Pages
    // past its end must be free ones (allocated and freed between two checkpoints).
    let data_pages = (lens[0] / ps as u64).max(dw_end);
    if let Some(m) = &meta {
        let free: std::collections::HashSet<u64> = m.free_pages.iter().copied().collect();
        if let Some(missing) = (data_pages..m.next_pid).find(|p| !free.contains(p)) {
            return Err(DbError::Corrupt {
                page: missing,
                what: format!(
                    "the meta page counts {} pages, the data file holds {data_pages} (truncated?)",
                    m.next_pid
                ),
            });
        }
    }
    let bm = BufferManager::new(io.clone(), DATA, cfg, next_pid)?;
    // What the log holds past the redo LSN; made durable first, so that a second crash
    // cannot take back what this recovery builds on.
    if lens[1] > 0 {
        io.fsync(WAL, true).await?;
    }
    let (records, end) = read_log(&io, wal_bytes, lens[1], redo).await?;
    let tree = match &meta {
        Some(m) => {
            bm.set_free_pages(m.free_pages.clone());
            BTree::open(bm.clone(), m.root)
        }
        None => BTree::create(bm.clone()).await?,
    };
    let wal = Wal::new(
        io.clone(),
        WAL,
        wal_file,
        opts.durability,
        wal_bytes,
        end,
        redo,
        dev.map_or(8, |d| d.align),
    )?;
    wal.set_group_commit(opts.group_commit);
    let files = CheckpointFiles { data: DATA, dw: DW };
    let ckpt = Checkpointer::new(io, bm.clone(), wal.clone(), files, epoch);
    let durable = Rc::new(Durable {
        wal: wal.clone(),
        ckpt,
        locks: Rc::new(KeyLocks::default()),
        dirty_high: ((cfg.frames as f64 * opts.checkpoint_dirty) as usize).max(1),
        failed: RefCell::new(None),
    });
    let tree = Rc::new(tree);
    // Eviction that meets only dirty pages runs a checkpoint (weak: no cycle).
    let (wd, wt) = (Rc::downgrade(&durable), Rc::downgrade(&tree));
    bm.set_checkpoint_hook(Some(Rc::new(move || {
        let (wd, wt) = (wd.clone(), wt.clone());
        Box::pin(async move {
            match (wd.upgrade(), wt.upgrade()) {
                (Some(d), Some(t)) => d.ckpt.run(&t).await,
                _ => Ok(()),
            }
        })
    })));
    // Replay: each batch whole, in log order, marked in flight so that a checkpoint taken
    // meanwhile (the pool may fill) starts its redo at the batch being replayed.
    let replayed = records.len();
    for (lsn, ops) in records {
        wal.mark_in_flight(lsn);
        for op in ops {
            match op {
                Op::Put { key, value } => tree.insert(&key, &value).await?,
                Op::Delete { key } => tree.remove(&key).await?,
            };
        }
        wal.applied(lsn);
    }
    bm.set_lsn_hint(end.max(1));
    durable.ckpt.run(&tree).await?;
    tracing::info!(replayed, redo, end, "opened {}", path.display());
    Ok(DbHandle {
        tree,
        durable: Some(durable),
    })
}

/// How a log on a raw device is written.
#[derive(Clone, Copy, Debug)]
struct DeviceLog {
    /// The device's block size: log records are padded to it.
    align: usize,
    /// A fresh database: the log and double-write regions still hold what was there before.
    wipe: bool,
}

/// The regions of a raw device that holds a database with a log: data first (so page 0 is at
/// offset 0, as on a file), then the log, then the double-write area, each `wal_bytes` long
/// (rounded up to a page). The layout depends only on the device's size, the page size and
/// the log size, which the meta page records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLayout {
    pub data: Region,
    pub log: Region,
    pub dw: Region,
}

impl DeviceLayout {
    pub fn plan(
        capacity: u64,
        ps: u64,
        block: u64,
        opts: &Options,
    ) -> std::result::Result<Self, String> {
        if !ps.is_multiple_of(block) {
            return Err(format!(
                "page size {ps} is not a multiple of the device's {block}-byte blocks"
            ));
        }
        let w = opts.wal_bytes.next_multiple_of(ps);
        if w != opts.wal_bytes {
            return Err(format!(
                "on a raw device the log size must be a multiple of the page size {ps} (got {})",
                opts.wal_bytes
            ));
        }
        // A checkpoint writes at most every frame plus the meta page, with a header of
        // 40 bytes + 8 per page, to the double-write area.
        let pages = opts.pool_pages as u64 + 1;
        let dw_need = (40 + 8 * pages).next_multiple_of(ps) + pages * ps;
        if dw_need > w {
            return Err(format!(
                "a checkpoint of this pool ({} pages) needs {dw_need} bytes of double-write \
                 area, more than the {w} bytes the log size gives; use a larger log or a \
                 smaller pool",
                opts.pool_pages
            ));
        }
        let min_data = 16 * ps;
        let usable = capacity / ps * ps;
        if usable < 2 * w + min_data {
            return Err(format!(
                "{capacity} bytes hold no database with a log of {w} bytes (log and \
                 double-write area {} bytes, data at least {min_data})",
                2 * w
            ));
        }
        let data_len = usable - 2 * w;
        Ok(DeviceLayout {
            data: Region {
                base: 0,
                len: data_len,
            },
            log: Region {
                base: data_len,
                len: w,
            },
            dw: Region {
                base: data_len + w,
                len: w,
            },
        })
    }
}

/// Formats a device: first the double-write header and the meta page are zeroed and made
/// durable (from then on any earlier database there is gone and the device reads as blank),
/// then the whole log region, so that no record or double-write image of an earlier database
/// can be taken for this one's.
async fn wipe_log_regions(io: &Io, lens: [u64; 3], ps: usize) -> Result<()> {
    const CHUNK: u64 = crate::chunked::MAX_IO as u64;
    let (r, _) = io
        .write(DW, 0, AlignedBuf::new(CHUNK.min(lens[2]) as usize))
        .await;
    r?;
    let (r, _) = io.write(DATA, 0, AlignedBuf::new(ps)).await;
    r?;
    io.fsync(DATA, true).await?;
    let mut off = 0;
    while off < lens[1] {
        let n = CHUNK.min(lens[1] - off);
        let (r, _) = io.write(WAL, off, AlignedBuf::new(n as usize)).await;
        r?;
        off += n;
    }
    io.fsync(WAL, true).await?;
    Ok(())
}

/// Reads the log's records from `from` until the first one that is not intact (the end).
async fn read_log(
    io: &Io,
    cap: u64,
    file_len: u64,
    from: u64,
) -> Result<(Vec<(u64, Vec<Op>)>, u64)> {
    const CHUNK: usize = 1 << 20;
    let mut out = Vec::new();
    let mut lsn = from;
    // `buf` holds the log from `buf_lsn` on (never across the wrap).
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_lsn = lsn;
    loop {
        if lsn - from >= cap {
            break;
        }
        let off = lsn % cap;
        let left = (cap - off) as usize;
        if left < wal::RECORD_HEADER {
            lsn += left as u64;
            continue;
        }
        let have = (buf_lsn + buf.len() as u64).saturating_sub(lsn) as usize;
        let at = (lsn - buf_lsn) as usize;
        let need = if have >= wal::RECORD_HEADER {
            let len = u32::from_le_bytes(buf[at + 4..at + 8].try_into().expect("4")) as usize;
            len.max(wal::RECORD_HEADER)
        } else {
            wal::RECORD_HEADER
        };
        if buf_lsn > lsn || have < need {
            if off >= file_len || need > left {
                break;
            }
            let want = CHUNK.max(need).min(left).min((file_len - off) as usize);
            buf = crate::chunked::read(io, WAL, off, want).await?;
            let n = buf.len();
            buf_lsn = lsn;
            if n < need {
                break;
            }
            continue;
        }
        match wal::decode_record(&buf[at..], lsn) {
            Some((len, wal::Decoded::Batch(ops))) => {
                out.push((lsn, ops));
                lsn += len as u64;
            }
            Some((len, wal::Decoded::Pad)) => lsn += len as u64,
            None => break,
        }
    }
    Ok((out, lsn))
}

/// Whether `io` polls completions through the block layer (IOPOLL on `uring`), where fsync
/// is refused; NVMe passthrough flushes with an NVMe Flush command on the same ring.
fn db_io_polls_through_block_layer(io: &IoConfig) -> bool {
    io.iopoll && io.engine != ringdb_io::EngineKind::UringPassthrough
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
