//! The wiring every way of opening a database shares: given a runtime over the three files
//! ([`FILE_IDS`]), build the buffer pool and the tables' trees, and the log when there is
//! one.
//!
//! [`Db::open`] gets here with a runtime over real files or a device; [`Db::open_on`] with
//! any engine (a simulated disk in tests). A database without a log is opened here (its meta
//! page read, or a new one formatted); one with a log goes through `recovery.rs`.

use super::handle::DbHandle;
use super::layout::{DeviceLog, FileSet, FILE_IDS};
use super::{recovery, Db, Options};
use crate::buffer::{BufferManager, PageId, PoolConfig};
use crate::catalog::Catalog;
use crate::error::{Corruption, OpenError, StorageError, TargetKind, WriteError};
use crate::freelist::FreeList;
use crate::meta::{Meta, META_PID, NO_CATALOG};
use crate::page;
use crate::tree::BTree;
use crate::wal::Durability;
use ringdb_io::{Engine, FixedBufferPool};
use ringdb_io::{Io, Runtime};
use std::collections::HashSet;
use std::path::Path;
use std::rc::Rc;

/// What `Db::open_on` is given: an engine over the files (data, log, double-write: file ids
/// 0, 1 and 2, see `FILE_IDS`), their lengths, and the handles that must outlive it.
pub struct Storage {
    /// The engine over the three files.
    pub engine: Box<dyn Engine>,
    /// Lengths of the data, log and double-write files in bytes (the log ones unused in mode
    /// `off`).
    pub len_bytes: FileSet<u64>,
    /// Pages the target can hold (a block device), if bounded.
    pub capacity_pages: Option<u64>,
    /// The log file, for the sync thread of mode `thread`.
    pub wal_file: Option<std::fs::File>,
    /// Whether the data lives on a device (a database there is recognised by its meta page).
    pub is_block_device: bool,
}

/// What the open paths know about the files once a runtime is over them.
pub(super) struct OpenedFiles {
    /// Lengths of the data, log and double-write files in bytes (0: empty or absent).
    pub(super) len_bytes: FileSet<u64>,
    /// Pages the target can hold (a block device), if bounded.
    pub(super) capacity_pages: Option<u64>,
    /// A second handle on the log, for the sync thread of mode `thread`.
    pub(super) wal_file: Option<std::fs::File>,
    /// Whether the data lives on a device.
    pub(super) is_block_device: bool,
}

impl Db {
    /// Opens a database over `storage` (e.g. a simulated disk in tests): file 0 is the data
    /// file, 1 the log, 2 the double-write file.
    pub fn open_on(storage: Storage, name: &Path, opts: Options) -> Result<Db, OpenError> {
        let mode = opts.durability;
        let thread_without_file = mode == Durability::Thread && storage.wal_file.is_none();
        if !TargetKind::Engine.supports(mode) || thread_without_file {
            return Err(OpenError::Durability {
                path: name.to_path_buf(),
                mode,
                target: TargetKind::Engine,
            });
        }
        let pool = FixedBufferPool::new(opts.pool_pages, opts.page_size).map_err(OpenError::Io)?;
        let rt = Runtime::with_pool(storage.engine, opts.io.batching, pool);
        let files = OpenedFiles {
            len_bytes: storage.len_bytes,
            capacity_pages: storage.capacity_pages,
            wal_file: storage.wal_file,
            is_block_device: storage.is_block_device,
        };
        Self::open_runtime(rt, files, name, opts, None)
    }

    /// Builds the database over `rt`: checks the options, then opens the tree (recovering it
    /// from the log when there is one).
    pub(super) fn open_runtime(
        mut rt: Runtime,
        files: OpenedFiles,
        file_path: &Path,
        opts: Options,
        device_log: Option<DeviceLog>,
    ) -> Result<Db, OpenError> {
        assert!(
            opts.durability != Durability::NvmeFlush || device_log.is_some(),
            "durability nvme-flush without an NVMe device (the open paths refuse it)"
        );
        let cfg = opts.pool_config(files.capacity_pages)?;
        if opts.durability.logged() {
            opts.validate_log()?;
        }
        let io = rt.io();
        let handle = if opts.durability.logged() {
            let path = file_path.to_path_buf();
            rt.block_on(async move {
                recovery::open_logged(io, cfg, files, &opts, &path, device_log).await
            })
            .map_err(StorageError::from)??
        } else {
            rt.block_on(open_unlogged(io, cfg, &files, file_path))
                .map_err(StorageError::from)??
        };
        Ok(Db::assemble(handle, rt, file_path))
    }
}

/// Opens a database without a log: its tree as the meta page describes it, or a new one.
async fn open_unlogged(
    io: Io,
    cfg: PoolConfig,
    files: &OpenedFiles,
    file_path: &Path,
) -> Result<DbHandle, OpenError> {
    let data_bytes = files.len_bytes.data;
    let existing = data_bytes > 0;
    // A block device is a new database unless page 0 is a ringdb meta page.
    let pages_on_disk = if existing {
        data_bytes / cfg.page_size as u64
    } else {
        0
    };
    let bm = BufferManager::new(io, FILE_IDS.data, cfg, pages_on_disk)?;
    let (tree, catalog) = if existing {
        open_tree(bm, pages_on_disk, files.is_block_device, file_path).await?
    } else {
        (create_tree(bm).await?, NO_CATALOG)
    };
    let tables = Catalog::open(Rc::new(tree), catalog).await?;
    Ok(DbHandle::new(Rc::new(tables), None))
}

/// Opens the default tree of an existing database without a log from its meta page; returns
/// it with the catalog page the meta page names.
async fn open_tree(
    bm: BufferManager,
    pages_on_disk: u64,
    is_block_device: bool,
    file_path: &Path,
) -> Result<(BTree, PageId), OpenError> {
    let g = bm.load(META_PID).await.map_err(|e| match e {
        StorageError::Page(source) if is_block_device => OpenError::NotADatabase {
            path: file_path.to_path_buf(),
            source,
        },
        e => e.into(),
    })?;
    let g = g.ok_or_else(|| StorageError::corrupt(META_PID, Corruption::MetaOnFreeList))?;
    let meta = g.read(Meta::read_from)?;
    drop(g);
    if meta.logged {
        return Err(OpenError::HasLog {
            path: file_path.to_path_buf(),
        });
    }
    let free_list = if meta.next_pid > pages_on_disk && is_block_device {
        FreeList::default()
    } else {
        crate::freelist::read(bm.io(), FILE_IDS.data, &meta).await?
    };
    check_beyond_target(&meta, &free_list, pages_on_disk, is_block_device)?;
    bm.set_next_pid(meta.next_pid);
    bm.restore_free_list(free_list);
    Ok((BTree::open(bm, meta.root), meta.catalog))
}

/// Refuses a meta page that counts pages the target does not hold: on a device, any; in a
/// file, any but free ones (allocated and freed between two flushes, never written).
fn check_beyond_target(
    meta: &Meta,
    free_list: &FreeList,
    pages_on_disk: u64,
    is_block_device: bool,
) -> Result<(), StorageError> {
    if meta.next_pid <= pages_on_disk {
        return Ok(());
    }
    let free: HashSet<PageId> = free_list.free.iter().copied().collect();
    // `any` stops at the first page that is not free: at most `free.len() + 1` steps.
    if is_block_device || (pages_on_disk..meta.next_pid).any(|p| !free.contains(&p)) {
        let reason = Corruption::BeyondTarget {
            counted_pages: meta.next_pid,
            target_pages: pages_on_disk,
        };
        return Err(StorageError::corrupt(META_PID, reason));
    }
    Ok(())
}

/// Formats a new database without a log: a blank meta page (written at the first flush) and
/// an empty tree.
async fn create_tree(bm: BufferManager) -> Result<BTree, WriteError> {
    bm.ensure_free(2).await?;
    let g = bm.alloc_page(None)?;
    assert_eq!(g.pid(), META_PID, "a new database starts at page 0");
    g.write(|p| page::init(p, page::PageType::Meta));
    drop(g);
    BTree::create(bm).await
}
