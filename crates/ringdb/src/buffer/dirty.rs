//! Dirty pages leaving the pool as a whole: a checkpoint's cut and its completion
//! ([`BufferManager::snapshot_dirty`], [`BufferManager::mark_clean`]), and the flush of a
//! database without a log ([`BufferManager::flush_all`]).

use super::evict::{check_write, Outgoing};
use super::{BufferManager, PageId};
use crate::error::StorageError;
use crate::page;

/// A dirty page copied by a checkpoint's cut: sealed, ready to write.
pub struct DirtyPage {
    /// The page's id.
    pub pid: PageId,
    /// Its sealed bytes at the cut.
    pub image: ringdb_io::AlignedBuf,
    pub(super) slot: usize,
    pub(super) version: u64,
}

impl BufferManager {
    /// A checkpoint's cut: sealed copies of every dirty page, taken at one instant (no task
    /// runs in between, and no task holds a page borrowed across an `await`). The pages stay
    /// dirty (so they are never evicted and reread before the checkpoint has written them)
    /// until [`mark_clean`](Self::mark_clean).
    pub fn snapshot_dirty(&self) -> Vec<DirtyPage> {
        let inner = &self.inner;
        let st = inner.state.borrow();
        let mut out = Vec::with_capacity(inner.dirty.get());
        for (slot, s) in st.slots.iter().enumerate() {
            let Some(s) = s.as_ref() else { continue };
            if !s.dirty {
                continue;
            }
            assert!(
                s.is_resident(),
                "dirty page {} in an I/O without steal",
                s.pid
            );
            assert_eq!(
                inner.cells[slot].borrows.get(),
                0,
                "page {} borrowed at a cut",
                s.pid
            );
            let mut image = ringdb_io::AlignedBuf::new(inner.cfg.page_size);
            image.as_mut_slice().copy_from_slice(s.frame().as_slice());
            page::seal(image.as_mut_slice(), s.pid);
            out.push(DirtyPage {
                pid: s.pid,
                image,
                slot,
                version: inner.cells[slot].version.get(),
            });
        }
        assert_eq!(out.len(), inner.dirty.get(), "dirty page count drifted");
        out
    }

    /// The checkpoint that took `pages` has made them durable: those not changed since are
    /// clean (evictable without a write).
    pub fn mark_clean(&self, pages: &[DirtyPage]) {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        for p in pages {
            if st.table.get(&p.pid) != Some(&p.slot)
                || inner.cells[p.slot].version.get() != p.version
            {
                continue;
            }
            let s = st.slot_mut(p.slot);
            if s.dirty {
                s.dirty = false;
                inner.dirty.set(inner.dirty.get() - 1);
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
