//! Opening a database with a log: recovery.
//!
//! The data file always holds one complete checkpoint (see `checkpoint.rs`), the log every
//! commit since. Opening therefore:
//!
//! 1. on a raw device, recognises a blank one (formatted, or never used) and wipes its log
//!    and double-write regions, so no record of an earlier database can pass for this one's;
//! 2. finishes an interrupted checkpoint: an intact double-write image at least as new as the
//!    meta page is written in place again (its pages may be torn or missing there);
//! 3. reads the meta page: the tree's root, the allocator, the checkpoint's epoch and the redo
//!    LSN (the first batch that may not be wholly in the data file), and the whole free list
//!    (the ids it holds and the free-list chain it names, `freelist.rs`);
//! 4. reads the log from the redo LSN to its end (the first record that is not intact), after
//!    making it durable, so that a second crash cannot take back what this recovery builds on,
//!    and writes each page image it holds in place where the page there is torn or older
//!    (pages eviction wrote between checkpoints, `buffer/steal.rs`);
//! 5. opens every table: the default tree from the meta page, the others from the catalog
//!    page it names;
//! 6. replays those records, each whole and in log order (idempotently: a batch partly in the
//!    data file is applied again; a table created before the checkpoint is not created
//!    again); an op naming a table the catalog does not hold at that point is corruption;
//! 7. takes a checkpoint, so the next crash starts from here.

use super::handle::{self, DbHandle, Durable};
use super::layout::{DeviceLog, FileSet, FILE_IDS};
use super::runtime::OpenedFiles;
use super::write_ahead::{self, LogWriteAhead};
use super::Options;
use crate::buffer::{BufferManager, PageId, PoolConfig};
use crate::catalog::{Catalog, TableId};
use crate::checkpoint::{CheckpointFiles, Checkpointer, Reason};
use crate::double_write;
use crate::error::{Corruption, OpenError, StorageError, WriteError};
use crate::freelist::{self, FreeList};
use crate::keylock::KeyLocks;
use crate::meta::{Meta, META_PID, NO_CATALOG};
use crate::page;
use crate::tree::BTree;
use crate::wal::{self, Decoded, Wal};
use ringdb_io::AlignedBuf;
use ringdb_io::Io;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

/// Record alignment of a log in a file (a log on a device aligns to its blocks).
const FILE_LOG_ALIGN_BYTES: usize = 8;

/// Opens a database with a log: finishes an interrupted checkpoint from the double-write
/// file, replays the log from the checkpoint's redo LSN, and takes a checkpoint.
pub(super) async fn open_logged(
    io: Io,
    cfg: PoolConfig,
    files: OpenedFiles,
    opts: &Options,
    path: &Path,
    device_log: Option<DeviceLog>,
) -> Result<DbHandle, OpenError> {
    let recovery = Recovery {
        io,
        page_size: opts.page_size,
        path,
        device_log,
    };
    let mut len_bytes = files.len_bytes;
    if recovery.device_is_blank(len_bytes).await? {
        recovery.wipe_log_regions(len_bytes).await?;
        len_bytes.data = 0;
    }
    let restored = recovery.restore_double_write(len_bytes).await?;
    let meta = recovery.check_meta(restored.meta, restored.existing, len_bytes.data)?;
    let wanted = opts.log_bytes_for_new(recovery.device_log.is_some());
    let wal_bytes = recovery.log_bytes(meta.as_ref(), wanted, len_bytes.log)?;
    let (next_pid, epoch, redo) = meta
        .as_ref()
        .map_or((1, 0, 0), |m| (m.next_pid, m.epoch, m.redo_lsn));
    // Pages the data file holds (the double-write file may just have extended it).
    let data_pages = (len_bytes.data / opts.page_size as u64).max(restored.double_write_end);
    let free_list = read_free_list(&recovery.io, meta.as_ref(), data_pages).await?;
    let bm = BufferManager::new(recovery.io.clone(), FILE_IDS.data, cfg, next_pid)?;
    let (records, end) = recovery
        .read_durable_log(wal_bytes, len_bytes.log, redo)
        .await?;
    // Pages stolen since the checkpoint: torn or older ones get their logged image back.
    let images = write_ahead::apply_page_images(&recovery.io, opts.page_size, &records).await?;
    assert!(
        end >= redo,
        "the log ends at {end}, before its redo LSN {redo}"
    );
    let tree = Rc::new(open_tree(&bm, meta.as_ref(), free_list).await?);
    let catalog = meta.as_ref().map_or(NO_CATALOG, |m| m.catalog);
    let tables = Rc::new(Catalog::open(tree, catalog).await?);
    let log = LogStart {
        wal_file: files.wal_file,
        wal_bytes,
        end,
        redo,
        epoch,
    };
    let durable = recovery.start_log(&bm, cfg, opts, log)?;
    install_checkpoint_hook(&bm, &durable, &tables);
    // Every replayed change is stamped with the log's end (an upper bound of its record's
    // LSN, and durable), and eviction may steal during the replay as after it.
    bm.set_lsn_hint(end.max(1));
    bm.set_write_ahead(Some(Rc::new(LogWriteAhead::new(durable.wal.clone()))));
    let replayed = replay(&durable.wal, &tables, records).await?;
    durable.wal.end_replay();
    durable.ckpt.run(&tables, Reason::Request).await?;
    tracing::info!(replayed, images, redo, end, "opened {}", path.display());
    Ok(DbHandle::new(tables, Some(durable)))
}

/// What recovery works with.
struct Recovery<'a> {
    io: Io,
    page_size: usize,
    path: &'a Path,
    device_log: Option<DeviceLog>,
}

/// What the data file holds once an interrupted checkpoint is finished.
struct Restored {
    /// The meta page, if readable.
    meta: Option<Meta>,
    /// Whether there is a database at all: data, or a double-write image just written.
    existing: bool,
    /// One past the highest page of the double-write image written in place (0: none).
    double_write_end: PageId,
}

/// Where the log starts again after recovery.
struct LogStart {
    wal_file: Option<std::fs::File>,
    wal_bytes: u64,
    /// The log's end: the next record goes here.
    end: u64,
    /// The last checkpoint's redo LSN: the live log starts here.
    redo: u64,
    /// Checkpoints completed.
    epoch: u64,
}

impl Recovery<'_> {
    /// A device is blank (formatted, or never used) while page 0 is all zeros and no
    /// double-write image stands: a format interrupted by a crash is redone, so no record of
    /// an earlier database in the log region can pass for one of this database's. A file is
    /// never blank in this sense (a new one is simply empty).
    async fn device_is_blank(&self, len_bytes: FileSet<u64>) -> Result<bool, StorageError> {
        let Some(device_log) = self.device_log else {
            return Ok(false);
        };
        if device_log.wipe {
            return Ok(true);
        }
        let ps = self.page_size;
        let page0 = crate::chunked::read(&self.io, FILE_IDS.data, 0, ps).await?;
        Ok(page0.iter().all(|&b| b == 0)
            && double_write::read_dw(&self.io, FILE_IDS.double_write, len_bytes.double_write, ps)
                .await?
                .is_none())
    }

    /// Formats a device: first the double-write header and the meta page are zeroed and made
    /// durable (from then on any earlier database there is gone and the device reads as
    /// blank), then the whole log region, so that no record or double-write image of an
    /// earlier database can be taken for this one's.
    async fn wipe_log_regions(&self, len_bytes: FileSet<u64>) -> Result<(), StorageError> {
        const CHUNK: u64 = crate::chunked::MAX_IO as u64;
        let io = &self.io;
        let header_bytes = CHUNK.min(len_bytes.double_write) as usize;
        let (r, _) = io
            .write(FILE_IDS.double_write, 0, AlignedBuf::new(header_bytes))
            .await;
        r?;
        let (r, _) = io
            .write(FILE_IDS.data, 0, AlignedBuf::new(self.page_size))
            .await;
        r?;
        io.fsync(FILE_IDS.data, true).await?;
        let mut off = 0;
        while off < len_bytes.log {
            let n = CHUNK.min(len_bytes.log - off);
            let (r, _) = io
                .write(FILE_IDS.log, off, AlignedBuf::new(n as usize))
                .await;
            r?;
            off += n;
        }
        io.fsync(FILE_IDS.log, true).await?;
        Ok(())
    }

    /// Reads the meta page and the double-write file; writes an intact double-write image of
    /// this checkpoint or a newer one in place again (its pages may be torn or missing there:
    /// idempotent) and reads the meta page it restored.
    async fn restore_double_write(&self, len_bytes: FileSet<u64>) -> Result<Restored, OpenError> {
        let (io, ps) = (&self.io, self.page_size);
        let mut meta = read_meta(io, ps, len_bytes.data).await?;
        let dw =
            double_write::read_dw(io, FILE_IDS.double_write, len_bytes.double_write, ps).await?;
        let mut applied = false;
        let mut double_write_end = 0;
        if let Some(dw) = dw {
            if meta.as_ref().is_none_or(|m| dw.epoch >= m.epoch) {
                double_write::apply_dw(io, FILE_IDS.data, ps, &dw).await?;
                double_write_end = dw.pages.iter().map(|(p, _)| p + 1).max().unwrap_or(0);
                applied = true;
                meta = read_meta(io, ps, len_bytes.data.max(ps as u64)).await?;
            }
        }
        Ok(Restored {
            meta,
            existing: len_bytes.data > 0 || applied,
            double_write_end,
        })
    }

    /// Refuses a meta page of a database without a log, and a database whose meta page is
    /// lost (`data_bytes`: the data file's length).
    fn check_meta(
        &self,
        meta: Option<Meta>,
        existing: bool,
        data_bytes: u64,
    ) -> Result<Option<Meta>, OpenError> {
        match meta {
            Some(m) if !m.logged => Err(OpenError::NoLog {
                path: self.path.to_path_buf(),
            }),
            Some(m) => Ok(Some(m)),
            None if existing && data_bytes >= self.page_size as u64 => {
                Err(StorageError::corrupt(META_PID, Corruption::MetaLost).into())
            }
            None => Ok(None),
        }
    }

    /// The log's size: the meta page's, or `wanted` for a new database. On a device the log
    /// region was planned with it and must match.
    fn log_bytes(
        &self,
        meta: Option<&Meta>,
        wanted: u64,
        region_bytes: u64,
    ) -> Result<u64, OpenError> {
        let wal_bytes = meta.map_or(wanted, |m| m.wal_bytes);
        if self.device_log.is_some() && wal_bytes != region_bytes {
            return Err(OpenError::LogSizeMismatch {
                path: self.path.to_path_buf(),
                on_disk_bytes: wal_bytes,
                requested_bytes: region_bytes,
            });
        }
        Ok(wal_bytes)
    }

    /// What the log holds past the redo LSN, and its end; made durable first, so that a
    /// second crash cannot take back what this recovery builds on.
    async fn read_durable_log(
        &self,
        wal_bytes: u64,
        file_bytes: u64,
        redo: u64,
    ) -> Result<(Vec<(u64, Decoded)>, u64), StorageError> {
        if file_bytes > 0 {
            self.io.fsync(FILE_IDS.log, true).await?;
        }
        read_log(&self.io, wal_bytes, file_bytes, redo).await
    }

    /// The log and the checkpointer, taking up where the log ends.
    fn start_log(
        &self,
        bm: &BufferManager,
        cfg: PoolConfig,
        opts: &Options,
        log: LogStart,
    ) -> Result<Rc<Durable>, OpenError> {
        let align = self
            .device_log
            .map_or(FILE_LOG_ALIGN_BYTES, |d| d.block_bytes);
        let wal = Wal::new(
            self.io.clone(),
            FILE_IDS.log,
            log.wal_file,
            opts.durability,
            log.wal_bytes,
            log.end,
            log.redo,
            align,
        )?;
        wal.set_group_commit(opts.group_commit);
        wal.set_buffer_limit(opts.log_buffer_bytes);
        let files = CheckpointFiles {
            data: FILE_IDS.data,
            dw: FILE_IDS.double_write,
        };
        bm.set_oldest_unapplied(wal.oldest_unapplied());
        let dirty_high = opts.checkpoint_dirty_pages(cfg.frames);
        let ckpt = Checkpointer::new(
            self.io.clone(),
            bm.clone(),
            wal.clone(),
            files,
            log.epoch,
            dirty_high,
        );
        Ok(Rc::new(Durable {
            wal,
            ckpt,
            locks: Rc::new(KeyLocks::default()),
            dirty_high,
            failed: RefCell::new(None),
            tap: RefCell::new(None),
        }))
    }
}

/// The whole free list `meta` describes (its chain read from the data file), after checking
/// that pages past the data file's end (`data_pages`) are free ones (allocated and freed
/// between two checkpoints); any other is missing (a truncated file).
async fn read_free_list(
    io: &Io,
    meta: Option<&Meta>,
    data_pages: u64,
) -> Result<FreeList, StorageError> {
    let Some(m) = meta else {
        return Ok(FreeList::default());
    };
    let list = freelist::read(io, FILE_IDS.data, m).await?;
    check_data_pages(m, &list, data_pages)?;
    Ok(list)
}

/// Pages past the data file's end (`data_pages`) must be free ones (allocated and freed
/// between two checkpoints: not chain pages, which a checkpoint writes); any other is missing
/// (a truncated file).
fn check_data_pages(m: &Meta, list: &FreeList, data_pages: u64) -> Result<(), StorageError> {
    let free: std::collections::HashSet<u64> = list.free.iter().copied().collect();
    if let Some(missing) = (data_pages..m.next_pid).find(|p| !free.contains(p)) {
        let reason = Corruption::Truncated {
            counted_pages: m.next_pid,
            file_pages: data_pages,
        };
        return Err(StorageError::corrupt(missing, reason));
    }
    Ok(())
}

/// The tree the meta page describes (with its free list), or a new empty one.
async fn open_tree(
    bm: &BufferManager,
    meta: Option<&Meta>,
    free_list: FreeList,
) -> Result<BTree, WriteError> {
    match meta {
        Some(m) => {
            bm.restore_free_list(free_list);
            Ok(BTree::open(bm.clone(), m.root))
        }
        None => BTree::create(bm.clone()).await,
    }
}

/// Eviction that meets only dirty pages runs a checkpoint (weak references: no cycle).
fn install_checkpoint_hook(bm: &BufferManager, durable: &Rc<Durable>, tables: &Rc<Catalog>) {
    let (wd, wt) = (Rc::downgrade(durable), Rc::downgrade(tables));
    bm.set_checkpoint_hook(Some(Rc::new(move || {
        let (wd, wt) = (wd.clone(), wt.clone());
        Box::pin(async move {
            match (wd.upgrade(), wt.upgrade()) {
                (Some(d), Some(t)) => d.ckpt.run(&t, Reason::Eviction).await,
                _ => Ok(()),
            }
        })
    })));
}

/// Replays `records`: each whole, in log order, marked in flight so that a checkpoint taken
/// meanwhile (the pool may fill) starts its redo at the record being replayed. Returns the
/// records replayed.
async fn replay(
    wal: &Wal,
    tables: &Catalog,
    records: Vec<(u64, Decoded)>,
) -> Result<usize, WriteError> {
    let replayed = records.len();
    let mut previous = None;
    for (lsn, record) in records {
        assert!(
            previous.is_none_or(|p| p < lsn),
            "replayed LSNs go back: {lsn} after {previous:?}"
        );
        previous = Some(lsn);
        wal.mark_in_flight(lsn);
        match record {
            Decoded::Batch(ops) => {
                if let Some(op) = ops.iter().find(|op| tables.tree(op.table()).is_none()) {
                    let table = op.table().get();
                    let reason = Corruption::UnknownTable { table, lsn };
                    return Err(StorageError::corrupt(tables.page(), reason).into());
                }
                for op in &ops {
                    handle::apply(tables, op).await?;
                }
            }
            Decoded::CreateTable { table, name } => {
                replay_create(tables, lsn, table, &name).await?;
            }
            // Written in place before the replay (`apply_page_images`).
            Decoded::PageImage { .. } => {}
            Decoded::Pad => {}
        }
        wal.applied(lsn);
    }
    Ok(replayed)
}

/// Replays the creation of `table` named `name` (the record at `lsn`): nothing when the
/// checkpoint holds it already, else the table is created as it was.
async fn replay_create(
    tables: &Catalog,
    lsn: u64,
    table: TableId,
    name: &str,
) -> Result<(), WriteError> {
    let by_name = tables.id_of(name);
    if by_name == Some(table) {
        return Ok(());
    }
    if by_name.is_some() || table < tables.next_id() {
        let reason = Corruption::CreateConflict {
            table: table.get(),
            lsn,
        };
        return Err(StorageError::corrupt(tables.page(), reason).into());
    }
    tables.check_create(name)?;
    let bm = tables.default_tree().buffer();
    bm.ensure_free(tables.pages_to_create()).await?;
    tables.create_now(table, name)
}

/// Reads page 0 straight from the data file (a log database keeps it out of the pool).
async fn read_meta(io: &Io, page_size: usize, data_len: u64) -> Result<Option<Meta>, OpenError> {
    if data_len < page_size as u64 {
        return Ok(None);
    }
    let (r, buf) = io.read(FILE_IDS.data, 0, AlignedBuf::new(page_size)).await;
    if r.map_err(StorageError::from)? < page_size {
        return Ok(None);
    }
    if page::verify(buf.as_slice(), META_PID).is_err() {
        return Ok(None);
    }
    Meta::read_from(buf.as_slice()).map(Some)
}

/// Reads the log's records from `from` until the first one that is not intact (the end).
async fn read_log(
    io: &Io,
    cap: u64,
    file_len: u64,
    from: u64,
) -> Result<(Vec<(u64, Decoded)>, u64), StorageError> {
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
            buf = crate::chunked::read(io, FILE_IDS.log, off, want).await?;
            let n = buf.len();
            buf_lsn = lsn;
            if n < need {
                break;
            }
            continue;
        }
        match wal::decode_record(&buf[at..], lsn) {
            Some((len, Decoded::Pad)) => lsn += len as u64,
            Some((len, record)) => {
                out.push((lsn, record));
                lsn += len as u64;
            }
            None => break,
        }
    }
    Ok((out, lsn))
}
