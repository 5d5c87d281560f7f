//! Dirty pages leaving the pool as a whole: a checkpoint's cut and its completion
//! ([`BufferManager::cut_dirty`], [`BufferManager::mark_clean`]), and the flush of a
//! database without a log ([`BufferManager::flush_all`]).

use super::evict::{check_write, Outgoing};
use super::{BufferManager, PageId};
use crate::error::StorageError;
use crate::page;
use ringdb_io::HugeSlice;

/// A dirty page copied by a checkpoint's cut (its sealed image is in the cut's `images`).
pub struct DirtyPage {
    /// The page's id.
    pub pid: PageId,
    pub(super) slot: usize,
    pub(super) version: u64,
}

/// What a checkpoint's cut takes from the pool.
pub struct PoolCut {
    /// The pages the checkpoint writes: every structural page and the oldest others, up to
    /// the cut's limit.
    pub pages: Vec<DirtyPage>,
    /// Their sealed images at the cut, one page each in `pages`' order, in one mapping (per-page
    /// heap copies stayed in the allocator: the process kept about twice what a cut copied).
    /// It may be longer than the images (a buffer an earlier cut used; see `cut_dirty`).
    images: HugeSlice<u8>,
    page_size: usize,
    /// The lowest `rec_lsn` among the dirty pages left out (`None`: none left out): the
    /// checkpoint's redo LSN may not pass it, since the data file lacks their changes.
    pub excluded_rec_lsn: Option<u64>,
}

impl PoolCut {
    /// The sealed image of `pages[i]`.
    pub fn image(&self, i: usize) -> &[u8] {
        &self.images[i * self.page_size..(i + 1) * self.page_size]
    }

    /// Each page's id and sealed image.
    pub fn images(&self) -> impl Iterator<Item = (PageId, &[u8])> {
        self.pages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.pid, self.image(i)))
    }

    /// Bytes its images hold.
    pub fn image_bytes(&self) -> u64 {
        self.images.len() as u64
    }

    /// The buffer that held the images, for a later cut to reuse.
    pub fn into_images(self) -> HugeSlice<u8> {
        self.images
    }
}

impl BufferManager {
    /// A checkpoint's cut, taken at one instant (no task runs in between, and no task holds a
    /// page borrowed across an `await`): sealed copies of every structural dirty page and of
    /// up to `content_max` other dirty resident pages, oldest `rec_lsn` first. The copied
    /// pages stay dirty, and the others are marked `in_checkpoint`, until
    /// [`mark_clean`](Self::mark_clean): eviction must not write a newer version in place that
    /// the checkpoint's older copy would then overwrite.
    ///
    /// The images go into `spare` when it is long enough (an earlier cut's buffer: its pages
    /// are already mapped, where a fresh mapping costs the kernel a zeroed page per fault),
    /// else into a new buffer.
    pub fn cut_dirty(&self, content_max: usize, spare: Option<HugeSlice<u8>>) -> PoolCut {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        let mut content: Vec<(u64, usize)> = Vec::new();
        let mut copy_slots: Vec<usize> = Vec::with_capacity(inner.structural_dirty.get());
        let mut excluded_rec_lsn: Option<u64> = None;
        for (slot, s) in st.slots.iter().enumerate() {
            let Some(s) = s.as_ref().filter(|s| s.dirty) else {
                continue;
            };
            if s.structural {
                assert!(s.is_resident(), "structural page {} in an I/O", s.pid);
                copy_slots.push(slot);
            } else if s.is_resident() {
                content.push((s.rec_lsn, slot));
            } else {
                // Being written back by eviction: not on disk yet.
                excluded_rec_lsn = Some(excluded_rec_lsn.map_or(s.rec_lsn, |l| l.min(s.rec_lsn)));
            }
        }
        assert_eq!(
            copy_slots.len(),
            inner.structural_dirty.get(),
            "structural count drifted"
        );
        content.sort_unstable();
        let keep = content.len().min(content_max);
        if let Some(&(rec_lsn, _)) = content.get(keep) {
            excluded_rec_lsn = Some(excluded_rec_lsn.map_or(rec_lsn, |l| l.min(rec_lsn)));
        }
        for &(_, slot) in &content[..keep] {
            let s = st.slot_mut(slot);
            assert!(!s.in_checkpoint, "page {} in two checkpoints", s.pid);
            s.in_checkpoint = true;
            copy_slots.push(slot);
        }
        inner.in_checkpoint.set(inner.in_checkpoint.get() + keep);
        let page_size = inner.cfg.page_size;
        let needed = copy_slots.len() * page_size;
        let mut images = match spare {
            Some(buffer) if buffer.len() >= needed => buffer,
            _ => HugeSlice::from_fn(needed, |_| 0u8),
        };
        debug_assert!(images.len() >= needed, "room for every image");
        let pages = copy_slots
            .into_iter()
            .zip(images.chunks_exact_mut(page_size))
            .map(|(slot, image)| self.copy_sealed(&st, slot, image))
            .collect();
        PoolCut {
            pages,
            images,
            page_size,
            excluded_rec_lsn,
        }
    }

    /// Copies the dirty resident page in `slot` into `image`, sealed.
    fn copy_sealed(&self, st: &super::frame::State, slot: usize, image: &mut [u8]) -> DirtyPage {
        let inner = &self.inner;
        let s = st.slots[slot].as_ref().expect("a live slot");
        assert_eq!(
            inner.cells[slot].borrows.get(),
            0,
            "page {} borrowed at a cut",
            s.pid
        );
        image.copy_from_slice(s.frame().as_slice());
        page::seal(image, s.pid);
        DirtyPage {
            pid: s.pid,
            slot,
            version: inner.cells[slot].version(),
        }
    }

    /// The checkpoint that took `pages` is complete: those not changed since are clean; those
    /// changed since keep their later changes dirty, structural only when one of those was
    /// structural, recording `rec_lsn` (the oldest batch in flight at the cut: every later
    /// change comes from it or a later one).
    pub fn mark_clean(&self, pages: &[DirtyPage], rec_lsn: u64) {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        for p in pages {
            if st.table.get(&p.pid) != Some(p.slot) {
                continue;
            }
            let unchanged = inner.cells[p.slot].version() == p.version;
            let s = st.slot_mut(p.slot);
            if !s.dirty {
                continue;
            }
            if unchanged {
                s.dirty = false;
                inner.dirty.set(inner.dirty.get() - 1);
            } else {
                s.rec_lsn = s.rec_lsn.max(rec_lsn);
            }
            if s.structural && (unchanged || s.structural_version <= p.version) {
                s.structural = false;
                inner.structural_dirty.set(inner.structural_dirty.get() - 1);
            }
            if s.in_checkpoint {
                s.in_checkpoint = false;
                inner.in_checkpoint.set(inner.in_checkpoint.get() - 1);
            }
        }
        drop(st);
        inner.debug_check();
        inner.wake_frames();
    }

    /// The checkpoint that took `pages` ended before [`mark_clean`](Self::mark_clean) (its
    /// log wait or a write failed, or its future was dropped): the pages stay dirty as they
    /// are and lose their `in_checkpoint` mark, so the next checkpoint takes them again and
    /// eviction may write them back.
    pub fn abandon_cut(&self, pages: &[DirtyPage]) {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        for p in pages {
            if st.table.get(&p.pid) != Some(p.slot) {
                continue;
            }
            let s = st.slot_mut(p.slot);
            if s.in_checkpoint {
                s.in_checkpoint = false;
                inner.in_checkpoint.set(inner.in_checkpoint.get() - 1);
            }
        }
        drop(st);
        inner.debug_check();
        inner.wake_frames();
    }

    /// Writes every dirty page (in batches), keeping them resident; with `sync`, then makes
    /// the data file durable.
    pub async fn flush_all(&self, sync: bool) -> Result<(), StorageError> {
        let inner = &self.inner;
        // One pass over the slots; a page pinned (held across an await by some caller) is
        // skipped and stays dirty.
        let mut cursor = 0;
        loop {
            inner.check_poisoned()?;
            let batch = self.next_flush_batch(&mut cursor);
            if batch.is_empty() {
                break;
            }
            self.finish_flush_batch(batch).await?;
        }
        inner.debug_check();
        if sync {
            inner.io.fsync(inner.file, true).await?;
        }
        Ok(())
    }

    /// Up to `evict_batch` unpinned dirty resident pages from slot `cursor` on, marked clean
    /// and moved to `Writing` (sealed); advances `cursor` past them.
    fn next_flush_batch(&self, cursor: &mut usize) -> Vec<Outgoing> {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        let mut batch = Vec::new();
        while *cursor < st.slots.len() && batch.len() < inner.cfg.evict_batch {
            let slot = *cursor;
            *cursor += 1;
            let cells = &inner.cells[slot];
            if cells.pins.get() != 0 {
                continue;
            }
            if let Some(s) = st.slots[slot].as_mut() {
                if s.is_resident() && s.dirty {
                    s.dirty = false;
                    inner.dirty.set(inner.dirty.get() - 1);
                    if s.structural {
                        // Without a log the flush makes it durable like any other.
                        s.structural = false;
                        inner.structural_dirty.set(inner.structural_dirty.get() - 1);
                    }
                    let pid = s.pid;
                    batch.push((slot, pid, s.start_write(cells)));
                }
            }
        }
        batch
    }

    /// Writes a flush batch; the pages stay resident, dirty again where the write failed
    /// (the first failure is returned once all are back).
    async fn finish_flush_batch(&self, batch: Vec<Outgoing>) -> Result<(), StorageError> {
        let inner = &self.inner;
        let mut first_err = None;
        for (slot, pid, r, buf) in self.write_pages(batch).await {
            let mut st = inner.state.borrow_mut();
            let s = st.slot_mut(slot);
            s.finish_write(buf, &inner.cells[slot]);
            if let Err(e) = check_write(r, inner.cfg.page_size, pid) {
                s.dirty = true;
                inner.dirty.set(inner.dirty.get() + 1);
                first_err.get_or_insert(e);
            }
            drop(st);
            inner.wake_io(pid);
        }
        inner.wake_frames();
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
