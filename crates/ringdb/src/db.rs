//! The embeddable database: one data file (or block device), one thread, one ring.
//!
//! [`Db`] owns the thread's [`Runtime`]; its blocking methods (`get`, `insert`, ...) run one
//! operation to completion. For many concurrent operations (the paper's fibers), spawn tasks
//! that use a [`DbHandle`] on [`Db::runtime`] and run it: each task parks on its own page
//! faults while the others run.

use crate::buffer::{BufferManager, PoolConfig, PoolStats};
use crate::error::{DbError, Result};
use crate::meta::{Meta, META_PID};
use crate::page;
use crate::tree::{BTree, TreeStats};
use ringdb_io::executor::{Runtime, RuntimeStats};
use ringdb_io::target::{Target, TargetOptions};
use ringdb_io::{FileId, FixedBufferPool, IoConfig};
use serde::Serialize;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The data file's name when `Db::open` is given a directory.
pub const DATA_FILE: &str = "data.ringdb";

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
}

/// A handle for tasks on the database's runtime. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct DbHandle {
    tree: Rc<BTree>,
}

impl DbHandle {
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get(key).await
    }

    /// Inserts or replaces; returns whether the key existed.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.tree.insert(key, value).await
    }

    /// Removes; returns whether the key existed.
    pub async fn remove(&self, key: &[u8]) -> Result<bool> {
        self.tree.remove(key).await
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

    /// Writes the meta page and every dirty page; with `sync`, makes them durable.
    pub async fn flush(&self, sync: bool) -> Result<()> {
        let bm = self.tree.buffer();
        loop {
            if let Some(g) = bm.try_fix(META_PID) {
                let meta = Meta {
                    page_size: bm.page_size() as u32,
                    root: self.tree.root(),
                    next_pid: bm.next_pid(),
                    free_pages: bm.free_pages(),
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
}

/// An open database. Not `Send`: it lives on the thread that opened it, like its ring.
pub struct Db {
    handle: DbHandle,
    // Dropped after the handle (the tree's frames go back to the runtime's pool), and before
    // the target, whose fd the engine uses until it has drained.
    rt: Runtime,
    target: Target,
    path: PathBuf,
    closed: bool,
}

impl Db {
    /// Opens (or creates) the database at `path`: a directory (the data file is
    /// `path/data.ringdb`, created with the directory), a file, or a block device.
    pub fn open(path: &Path, opts: Options) -> Result<Db> {
        let file_path = if path.is_dir() || (!path.exists() && path.extension().is_none()) {
            std::fs::create_dir_all(path).map_err(|source| DbError::File {
                path: path.display().to_string(),
                source,
            })?;
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
            target.file().set_len(0).map_err(|source| DbError::File {
                path: file_path.display().to_string(),
                source,
            })?;
        }
        let ps = opts.page_size as u64;
        if target.direct && !ps.is_multiple_of(target.align as u64) {
            return Err(DbError::InvalidArg(format!(
                "page size {ps} is not a multiple of {}'s direct I/O alignment {}",
                file_path.display(),
                target.align
            )));
        }
        let size = if opts.fresh && !target.is_block_device {
            0
        } else {
            target.size
        };
        let mut cfg = PoolConfig::new(opts.page_size, opts.pool_pages);
        if let Some(b) = opts.evict_batch {
            cfg.evict_batch = b;
        }
        if let Some(t) = opts.free_target {
            cfg.free_target = t;
        }
        if target.is_block_device {
            cfg.capacity_pages = Some(target.size / ps);
        }
        cfg.validate()?;
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size)?;
        let mut rt = Runtime::from_config(&opts.io, &[target.fd()], Some(pool))?;
        let io = rt.io();
        let existing = !opts.fresh && size > 0;
        if existing {
            check_page_size(&file_path, opts.page_size)?;
        }
        // A block device is a new database unless page 0 is a ringdb meta page.
        let pages_on_disk = if existing { size / ps } else { 0 };
        let bm = BufferManager::new(io, FileId(0), cfg, pages_on_disk)?;
        let tree = rt.block_on(async {
            if existing {
                let g = bm.load(META_PID).await.map_err(|e| match e {
                    DbError::Page(pe) if target.is_block_device => DbError::InvalidArg(format!(
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
        let handle = DbHandle {
            tree: Rc::new(tree),
        };
        let db = Db {
            handle,
            rt,
            target,
            path: file_path,
            closed: false,
        };
        Ok(db)
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
        self.rt.block_on(async move { h.flush(true).await })?
    }

    pub fn stats(&self) -> DbStats {
        let tree = &self.handle.tree;
        DbStats {
            pool: tree.buffer().stats(),
            tree: tree.stats(),
            runtime: self.rt.stats(),
            height: tree.root().height,
            pages: tree.buffer().next_pid(),
        }
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
        match self.rt.block_on(async move { h.flush(true).await }) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("flushing {} on drop failed: {e}", self.path.display()),
            Err(e) => tracing::warn!("flushing {} on drop failed: {e}", self.path.display()),
        }
        let _ = &self.target;
    }
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
