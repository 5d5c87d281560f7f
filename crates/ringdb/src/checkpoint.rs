//! Checkpoints through a double-write area, and their recovery.
//!
//! With a log, the data file always holds the *structure* of one complete checkpoint: pages
//! split, merged or allocated since (structural pages) reach it only here. Between two
//! checkpoints eviction may also write pages whose records changed in place (`buffer/steal.rs`:
//! write-ahead rule, page images in the log), so the data file's leaves may be ahead of the
//! checkpoint or behind it; the log replays every key from the redo LSN on, so both end right.
//! Checkpoints are therefore *fuzzy*: they bound recovery's work and the log's live part, and
//! no longer have to write every dirty page.
//!
//! 1. **Cut** (synchronous, so no task runs in between): bring the catalog page up to date
//!    with every table's root (`catalog.rs`), copy every structural page and the oldest other
//!    dirty pages up to the staging bound (`staging_pages`), sealed; cut the free list (its
//!    ids and the images of its chain's pages, `buffer/free_list.rs`); note the default
//!    tree's root, the allocator and the redo LSN: the oldest batch in flight, or the oldest
//!    `rec_lsn` of a dirty page left out, whichever is lower.
//! 2. The log is made durable up to that end (the write-ahead rule: no page reaches the disk
//!    before the log that explains it).
//! 3. The copies, the catalog page when it was not resident (`catalog.rs`), the free-list
//!    chain's pages (see `freelist.rs`) and the new meta page go to the **double-write file**
//!    with one write, which is made durable. Its header names the checkpoint's epoch and
//!    carries a CRC32C of it all.
//! 4. The same pages (the catalog and chain pages among them) and last the meta page are
//!    written in place and the data file is made durable.
//! 5. The pages are marked clean (those not changed since; the others stay dirty, structural
//!    only if changed in structure after the cut), and the log before the redo LSN may be
//!    reused.
//!
//! A crash during 3 leaves the double-write file torn (its CRC fails) and the data file
//! untouched: the previous checkpoint stands. A crash during 4 leaves torn or missing pages in
//! place, and an intact double-write file of an epoch at least the meta page's (or a torn meta
//! page): recovery writes the whole double-write file in place again. So a torn page is always
//! repaired, and the data file never mixes two checkpoints.

use crate::buffer::{BufferManager, DirtyPage, FreeListCut, PageId, PoolCut};
use crate::catalog::{Catalog, CatalogRecord};
use crate::chunked;
use crate::double_write::{check_len, encode_dw_header, failed, sync_data_file, DoubleWritePieces};
use crate::error::{CheckpointFailure, CheckpointPart, StorageError};
use crate::memory::{Meter, PartBytes};
use crate::meta::{Meta, META_PID};
use crate::page;
use crate::wal::Wal;
use futures_util::future::join_all;
use ringdb_io::Io;
use ringdb_io::{AlignedBuf, FileId, HugeSlice};
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Writes in place submitted together.
const WRITE_BATCH: usize = 64;

/// What checkpoints count.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CheckpointStats {
    /// Checkpoints completed.
    pub checkpoints: u64,
    /// Pages written in place by them.
    pub pages_written: u64,
    /// Microseconds spent in checkpoints (all of them).
    pub micros: u64,
    /// Checkpoints by what started them (the checkpointer's `Reason`): by structural pages.
    pub by_structure: u64,
    /// ... by the live log passing half its threshold.
    pub by_log_half: u64,
    /// ... by a commit that found the log full.
    pub by_log_full: u64,
    /// ... by eviction that found no clean victim.
    pub by_eviction: u64,
    /// ... by a flush or a close.
    pub by_request: u64,
    /// The thresholds in force: structural pages past this start a checkpoint (and bound
    /// what a cut copies besides them), and so does live log past this many bytes.
    pub structural_threshold_pages: u64,
    /// See `structural_threshold_pages`.
    pub log_threshold_bytes: u64,
}

/// Why a checkpoint starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Structural pages (only checkpoints write them) passed their share of the pool.
    Structure,
    /// The live log passed half the log.
    LogHalf,
    /// A commit found no room in the log.
    LogFull,
    /// Eviction found only pages it may not write back.
    Eviction,
    /// A flush, a close, or the end of recovery.
    Request,
}

impl CheckpointStats {
    fn count(&mut self, reason: Reason) {
        let counter = match reason {
            Reason::Structure => &mut self.by_structure,
            Reason::LogHalf => &mut self.by_log_half,
            Reason::LogFull => &mut self.by_log_full,
            Reason::Eviction => &mut self.by_eviction,
            Reason::Request => &mut self.by_request,
        };
        *counter += 1;
    }
}

/// The files a checkpoint writes.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointFiles {
    pub data: FileId,
    pub dw: FileId,
}

/// What a checkpoint's cut took (step 1).
struct Cut {
    /// The first LSN recovery replays from this checkpoint on.
    redo: u64,
    /// The oldest batch in flight at the cut: every change made after it comes from this
    /// batch or a later one.
    in_flight: u64,
    /// The log's end at the cut: the log must be durable up to here first.
    end: u64,
    /// The checkpoint's epoch (the last one's + 1).
    epoch: u64,
    pages: PoolCut,
    /// The free list the meta page records, with its chain's pages.
    free_list: FreeListCut,
    meta_image: AlignedBuf,
    /// The catalog page, when it changed and was not resident (else it is among `pages`).
    catalog_image: Option<(PageId, AlignedBuf)>,
    /// The catalog as the cut recorded it (durable once the checkpoint is).
    catalog: CatalogRecord,
}

/// Takes checkpoints (one at a time) for one database.
pub struct Checkpointer {
    io: Io,
    bm: BufferManager,
    wal: Wal,
    files: CheckpointFiles,
    epoch: Cell<u64>,
    /// The redo LSN of the last checkpoint taken here (0 before the first): never goes back.
    last_redo: Cell<u64>,
    running: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
    /// A write in place failed: the data file may now mix two checkpoints until recovery
    /// writes the double-write file again, so no further checkpoint may overwrite that file.
    failed: RefCell<Option<Arc<CheckpointFailure>>>,
    stats: Cell<CheckpointStats>,
    /// What a checkpoint's copies and write buffers hold (the spare buffer included).
    staging: Meter,
    /// The last cut's image buffer, kept for the next cut when it is within the staging
    /// bound: a sustained write load checkpoints again and again, and a fresh mapping each
    /// time cost the kernel a zeroed page per fault (more CPU than the copies themselves).
    spare: RefCell<Option<HugeSlice<u8>>>,
    /// Pages a cut copies at most, structural ones aside (which it must all copy): the bound
    /// on what the copies hold.
    staging_pages: usize,
}

impl Cut {
    /// Bytes of the pages the cut copied: the dirty pages, the catalog page's image, the
    /// free-list chain's pages and the meta page.
    fn copied_bytes(&self, page_size: usize) -> u64 {
        let others =
            usize::from(self.catalog_image.is_some()) + self.free_list.image.pages.len() + 1;
        self.pages.image_bytes() + (others * page_size) as u64
    }
}

impl Checkpointer {
    /// A checkpointer for the pool `bm` and the log `wal`, writing `files`; `epoch`
    /// checkpoints are complete (the meta page's count).
    /// A cut copies every structural page and up to `staging_pages` pages in all.
    pub fn new(
        io: Io,
        bm: BufferManager,
        wal: Wal,
        files: CheckpointFiles,
        epoch: u64,
        staging_pages: usize,
    ) -> Self {
        Checkpointer {
            staging_pages,
            io,
            bm,
            wal,
            files,
            epoch: Cell::new(epoch),
            last_redo: Cell::new(0),
            running: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
            failed: RefCell::new(None),
            stats: Cell::new(CheckpointStats::default()),
            staging: Meter::default(),
            spare: RefCell::new(None),
        }
    }

    /// What checkpoints' copies and write buffers hold now, and the most they held.
    pub fn memory(&self) -> PartBytes {
        self.staging.read()
    }

    /// What checkpoints counted so far.
    pub fn stats(&self) -> CheckpointStats {
        CheckpointStats {
            structural_threshold_pages: self.staging_pages as u64,
            log_threshold_bytes: self.wal.capacity() / 2,
            ..self.stats.get()
        }
    }

    #[cfg(any(test, feature = "__internal"))]
    /// Checkpoints complete.
    pub fn epoch(&self) -> u64 {
        self.epoch.get()
    }

    /// Whether a checkpoint is running now.
    pub fn running(&self) -> bool {
        self.running.get()
    }

    /// Takes a checkpoint of every table in `tables` for `reason`, or waits for the one
    /// running to finish.
    pub async fn run(&self, tables: &Catalog, reason: Reason) -> Result<(), StorageError> {
        self.check_failed()?;
        if self.running.get() {
            return self.wait_for_running().await;
        }
        self.running.set(true);
        let _running = Running { ckpt: self };
        let t0 = std::time::Instant::now();
        // 1. The cut: nothing else runs until the first await.
        let cut = self.cut(tables);
        let mut taken = TakenPages {
            bm: &self.bm,
            pages: &cut.pages.pages,
            clean: false,
        };
        let _copies = self.staging.hold(cut.copied_bytes(self.bm.page_size()));
        // 2. The write-ahead rule.
        self.wal.wait_durable(cut.end).await?;
        self.assert_write_ahead(&cut.pages);
        let images = page_images(&cut.pages, cut.catalog_image.as_ref(), &cut.free_list);
        // 3. The double-write file.
        self.write_double_write(cut.epoch, &cut.meta_image, &images)
            .await
            .map_err(failed)?;
        // 4. In place. From here a failure leaves the data file to recovery.
        if let Err(e) = self.write_in_place(&images, cut.meta_image).await {
            let first = Arc::new(e);
            *self.failed.borrow_mut() = Some(first.clone());
            return Err(StorageError::CheckpointFailed { source: first });
        }
        // 5. Done.
        self.bm.mark_clean(&cut.pages.pages, cut.in_flight);
        taken.clean = true;
        tables.stored(cut.catalog);
        self.bm.free_list_written(cut.free_list.number);
        self.wal.checkpointed(cut.redo);
        assert_eq!(self.epoch.get() + 1, cut.epoch, "two checkpoints at once");
        self.epoch.set(cut.epoch);
        let mut s = self.stats.get();
        s.checkpoints += 1;
        s.count(reason);
        s.pages_written += images.len() as u64;
        s.micros += t0.elapsed().as_micros() as u64;
        self.stats.set(s);
        tracing::debug!(
            epoch = cut.epoch,
            pages = cut.pages.pages.len(),
            redo = cut.redo,
            "checkpoint"
        );
        drop((images, taken, _copies));
        self.keep_spare(cut.pages);
        Ok(())
    }

    /// The spare image buffer, if one is kept (no longer counted: the cut counts it).
    fn take_spare(&self) -> Option<HugeSlice<u8>> {
        let spare = self.spare.borrow_mut().take()?;
        let held = self.staging.read().current_bytes;
        assert!(held >= spare.len() as u64, "the spare buffer is counted");
        self.staging.set(held - spare.len() as u64);
        Some(spare)
    }

    /// Keeps a finished cut's image buffer for the next one, when it is within twice the
    /// staging bound (the structural pages a cut must copy may take it past the bound; a cut
    /// that copied every dirty page, without stealing, gives its buffer back).
    fn keep_spare(&self, pages: PoolCut) {
        let images = pages.into_images();
        if images.len() > 2 * self.staging_pages * self.bm.page_size() {
            return;
        }
        debug_assert!(self.spare.borrow().is_none(), "one spare buffer");
        self.staging
            .set(self.staging.read().current_bytes + images.len() as u64);
        *self.spare.borrow_mut() = Some(images);
    }

    fn check_failed(&self) -> Result<(), StorageError> {
        match self.failed.borrow().as_ref() {
            Some(first) => Err(StorageError::CheckpointFailed {
                source: first.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Waits for the checkpoint running now; fails if it failed.
    async fn wait_for_running(&self) -> Result<(), StorageError> {
        WaitDone {
            ckpt: self,
            epoch: self.epoch.get(),
        }
        .await;
        self.check_failed()
    }

    /// The cut (synchronous: no task runs in between): the log's redo LSN and end, the
    /// catalog page brought up to date, sealed copies of the dirty pages, the free list's cut
    /// (its chain's pages), and the meta page of the next epoch.
    fn cut(&self, tables: &Catalog) -> Cut {
        let (in_flight, end) = self.wal.cut();
        // Before the pool's cut: a resident catalog page it rewrites is one of its pages.
        let (catalog_image, catalog) = tables.cut();
        // A pool that may not steal (`Options::steal` off: the engine before stealing) has no
        // other way to make pages clean: its cut copies every dirty page, as it always did.
        let content_max = if self.bm.config().steal {
            self.staging_pages
                .saturating_sub(self.bm.structural_pages())
        } else {
            usize::MAX
        };
        let pool = self.bm.cut_dirty(content_max, self.take_spare());
        let redo = pool
            .excluded_rec_lsn
            .map_or(in_flight, |l| l.min(in_flight));
        let last = self.last_redo.get();
        assert!(
            redo >= last,
            "checkpoint redo LSN goes back from {last} to {redo}"
        );
        assert!(redo <= end, "redo LSN {redo} past the log's end {end}");
        self.last_redo.set(redo);
        let pages = pool;
        let epoch = self.epoch.get() + 1;
        // Before `next_pid`: the cut may grow the data for the chain.
        let free_list = self.bm.cut_free_list();
        let meta = Meta {
            page_size: self.bm.page_size() as u32,
            root: tables.default_tree().root(),
            next_pid: self.bm.next_pid(),
            free_pages: free_list.image.in_meta.clone(),
            free_list_head: free_list.image.head,
            logged: true,
            epoch,
            redo_lsn: redo,
            wal_bytes: self.wal.capacity(),
            catalog: tables.page(),
        };
        let meta_image = meta_page(&meta, self.bm.page_size());
        Cut {
            redo,
            in_flight,
            end,
            epoch,
            pages,
            free_list,
            meta_image,
            catalog_image,
            catalog,
        }
    }

    /// The write-ahead rule: no page of the cut is ahead of the durable log.
    fn assert_write_ahead(&self, pages: &PoolCut) {
        let durable = self.wal.durable();
        for (pid, image) in pages.images() {
            let lsn = page::lsn(image);
            assert!(
                lsn <= durable,
                "write-ahead rule: page {pid} (LSN {lsn}) ahead of the durable log ({durable})"
            );
        }
    }

    /// Writes the cut's pages (`images`: the dirty pages, the catalog page when the cut made
    /// an image of it, the chain's pages) and meta page to the double-write file of `epoch`
    /// and makes it durable. The file is written in pieces of at most [`chunked::MAX_IO`]
    /// bytes assembled from the images one piece at a time (its CRC computed over the images
    /// first), so the checkpoint holds one piece beside its copies, not a second copy of them.
    async fn write_double_write(
        &self,
        epoch: u64,
        meta_image: &AlignedBuf,
        images: &[(PageId, &[u8])],
    ) -> Result<(), CheckpointFailure> {
        let mut all: Vec<(PageId, &[u8])> = Vec::with_capacity(images.len() + 1);
        all.push((META_PID, meta_image.as_slice()));
        all.extend_from_slice(images);
        let page_size = self.bm.page_size();
        let header = encode_dw_header(epoch, page_size, &all);
        let mut offset = 0u64;
        for piece in DoubleWritePieces::new(&header, &all, page_size) {
            let len = piece.len();
            let _held = self.staging.hold(piece.capacity() as u64);
            let r = chunked::write_all(&self.io, self.files.dw, offset, piece).await;
            check_len(r, len, CheckpointPart::DoubleWriteFile)?;
            offset += len as u64;
        }
        self.io
            .fsync(self.files.dw, true)
            .await
            .map_err(|source| CheckpointFailure::Sync {
                part: CheckpointPart::DoubleWriteFile,
                source,
            })
    }

    /// Writes `images` in place (the dirty pages, the catalog page when the cut made an image
    /// of it, the chain's pages), then the meta page, and makes the data file durable.
    async fn write_in_place(
        &self,
        images: &[(PageId, &[u8])],
        meta_image: AlignedBuf,
    ) -> Result<(), CheckpointFailure> {
        let ps = self.bm.page_size() as u64;
        let data = self.files.data;
        for chunk in images.chunks(WRITE_BATCH) {
            let _buffers = self.staging.hold(chunk.len() as u64 * ps);
            let writes = join_all(chunk.iter().map(|&(pid, image)| {
                let mut buf = AlignedBuf::new(ps as usize);
                buf.as_mut_slice().copy_from_slice(image);
                async move {
                    let (r, _) = self.io.write(data, pid * ps, buf).await;
                    (pid, r)
                }
            }));
            for (pid, r) in self.io.submit_together(writes).await {
                check_len(r, ps as usize, CheckpointPart::Page { page: pid })?;
            }
        }
        let (r, _) = self.io.write(data, 0, meta_image).await;
        check_len(r, ps as usize, CheckpointPart::MetaPage)?;
        sync_data_file(&self.io, data).await
    }
}

/// The pages a checkpoint writes besides the meta page: the dirty pages of its cut, the
/// catalog page when the cut made an image of it (it was not resident), and the free-list
/// chain's pages. No page twice: the catalog image exists only when the page is not in the
/// pool (so not among the dirty pages), and the chain's pages are free (neither dirty nor the
/// catalog page).
fn page_images<'a>(
    pages: &'a PoolCut,
    catalog_image: Option<&'a (PageId, AlignedBuf)>,
    free_list: &'a FreeListCut,
) -> Vec<(PageId, &'a [u8])> {
    let dirty = pages.images();
    let catalog = catalog_image.into_iter();
    let chain = free_list.image.pages.iter();
    let images: Vec<(PageId, &[u8])> = dirty
        .chain(catalog.map(|(pid, image)| (*pid, image.as_slice())))
        .chain(chain.map(|(pid, image)| (*pid, image.as_slice())))
        .collect();
    assert_distinct(&images);
    images
}

/// No page among a checkpoint's images twice, and none is the meta page (written last, on its
/// own): the double-write file would hold two images of one page.
fn assert_distinct(images: &[(PageId, &[u8])]) {
    let mut pids: Vec<PageId> = images.iter().map(|&(pid, _)| pid).collect();
    pids.sort_unstable();
    if let Some(w) = pids.windows(2).find(|w| w[0] == w[1]) {
        panic!("page {} twice among a checkpoint's images", w[0]);
    }
    assert_ne!(
        pids.first(),
        Some(&META_PID),
        "the meta page among the images"
    );
}

/// The sealed meta page of `meta`.
pub fn meta_page(meta: &Meta, page_size: usize) -> AlignedBuf {
    let mut b = AlignedBuf::new(page_size);
    page::init(b.as_mut_slice(), page::PageType::Meta);
    meta.write_to(b.as_mut_slice());
    page::seal(b.as_mut_slice(), META_PID);
    b
}

/// The pages a checkpoint's cut marked: unless the checkpoint marked them clean, they are
/// handed back on drop ([`BufferManager::abandon_cut`]), so a checkpoint that failed before
/// its in-place writes, or whose future was dropped, does not leave them marked for the next.
struct TakenPages<'a> {
    bm: &'a BufferManager,
    pages: &'a [DirtyPage],
    clean: bool,
}

impl Drop for TakenPages<'_> {
    fn drop(&mut self) {
        if !self.clean {
            self.bm.abandon_cut(self.pages);
        }
    }
}

struct Running<'a> {
    ckpt: &'a Checkpointer,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.ckpt.running.set(false);
        let w = std::mem::take(&mut *self.ckpt.waiters.borrow_mut());
        for w in w {
            w.wake();
        }
    }
}

struct WaitDone<'a> {
    ckpt: &'a Checkpointer,
    epoch: u64,
}

impl Future for WaitDone<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.ckpt.running.get() || self.ckpt.epoch.get() != self.epoch {
            return Poll::Ready(());
        }
        self.ckpt.waiters.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}
