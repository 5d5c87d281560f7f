//! What the buffer manager hands out: pins on resident pages ([`PageGuard`]) and frames set
//! aside for one task ([`Reservation`]).

use super::cells::{OwnerCell, SlotCells};
use super::frame::{Change, Inner, Slot};
use super::PageId;
use crate::page;
use ringdb_io::PoolBuf;
use std::rc::Rc;
use std::sync::atomic::AtomicI16;

/// A pin on a resident page. Its bytes are reached through [`read`](Self::read) and
/// [`write`](Self::write), whose closures cannot `await`: a page is never borrowed while its
/// task is parked.
pub struct PageGuard {
    pub(super) inner: Rc<Inner>,
    pub(super) slot: usize,
    pub(super) pid: PageId,
    pub(super) ptr: *mut u8,
}

impl PageGuard {
    /// A pin on the resident page `pid` in `slot`, whose bytes start at `ptr` (the caller
    /// checked it is resident).
    pub(super) fn pin(inner: &Rc<Inner>, slot: usize, pid: PageId, ptr: *mut u8) -> PageGuard {
        prefetch_head(ptr);
        let pins = &inner.cells[slot].pins;
        pins.set(pins.get() + 1);
        PageGuard {
            inner: inner.clone(),
            slot,
            pid,
            ptr,
        }
    }

    /// The pinned page's id.
    pub fn pid(&self) -> PageId {
        self.pid
    }

    /// Bumped on every `write`: a caller can tell whether the page changed.
    pub fn version(&self) -> u64 {
        self.inner.cells[self.slot].version()
    }

    /// Runs `f` over the page's bytes.
    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let b = &self.inner.cells[self.slot].borrows;
        assert!(b.get() >= 0, "page {} read while written", self.pid);
        self.debug_assert_still_resident();
        b.set(b.get() + 1);
        let _release = BorrowRelease { cell: b, by: -1 };
        // SAFETY: the frame is pinned, so it stays attached to this slot and is never moved
        // into an I/O (eviction and flush skip pinned pages) nor freed (`release_slot` asserts
        // no pins). The pool's memory does not move. The borrow counter rules out a
        // concurrent `write` of the same page, so no `&mut` aliases this slice.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.inner.cfg.page_size) };
        f(bytes)
    }

    /// Mutable access; marks the page dirty, changed in its structure, and bumps its version.
    pub fn write<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        self.change(Change::Structure, f)
    }

    /// Mutable access for a change of records inside a leaf that leaves its key range and
    /// links as they were (an upsert that fits, a removal without a merge): under a log, such
    /// a page may be written back on eviction before the next checkpoint (see `steal.rs`).
    pub fn write_content<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        self.change(Change::Content, f)
    }

    fn change<R>(&self, change: Change, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let cells = &self.inner.cells[self.slot];
        let b = &cells.borrows;
        assert_eq!(b.get(), 0, "page {} written while borrowed", self.pid);
        b.set(-1);
        let _release = BorrowRelease { cell: b, by: 1 };
        // Odd while the bytes change: readers on other threads retry (see `cells.rs`). Even
        // again when the change ends, also if `f` panics (the shard's thread then stops).
        cells.begin_change();
        let ended = ChangeEnd { cells };
        self.mark_changed(change, cells.version() + 1);
        // SAFETY: as in `read`; the counter is -1, so this is the only live slice of the page.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.inner.cfg.page_size) };
        let r = f(bytes);
        let lsn = self.inner.lsn_hint.get();
        if lsn > 0 {
            page::set_lsn(bytes, lsn);
        }
        drop(ended);
        r
    }

    /// Marks the slot changed (dirty, and structural for `Change::Structure`) at `version`.
    fn mark_changed(&self, change: Change, version: u64) {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        let s = st.slots[self.slot].as_mut().expect("pinned slot");
        self.assert_holds(s, "written");
        let (dirty, structural) = s.mark_changed(change, version, || inner.rec_lsn_now());
        inner.changes.set(inner.changes.get() + 1);
        if dirty {
            inner.dirty.set(inner.dirty.get() + 1);
        }
        if structural {
            inner.structural_dirty.set(inner.structural_dirty.get() + 1);
        }
    }

    /// In debug builds: the pinned slot still holds this page, resident (the pair of the
    /// check made when the pin was taken).
    fn debug_assert_still_resident(&self) {
        if cfg!(debug_assertions) {
            let st = self.inner.state.borrow();
            let s = st.slots[self.slot].as_ref().expect("pinned slot");
            self.assert_holds(s, "read");
        }
    }

    /// The pinned slot `s` holds this page, resident (checked when the page is `doing`).
    fn assert_holds(&self, s: &Slot, doing: &str) {
        assert!(
            s.pid == self.pid && s.is_resident(),
            "page {} {doing} through a pin on a slot holding page {} ({:?})",
            self.pid,
            s.pid,
            s.state()
        );
    }
}

impl Drop for PageGuard {
    fn drop(&mut self) {
        let pins = &self.inner.cells[self.slot].pins;
        debug_assert!(pins.get() > 0);
        pins.set(pins.get() - 1);
        // An unpinned page may be what a waiter needs: the round waiting for something
        // evictable (it holds the round open), else, outside a round, the longest waiting
        // task; during a round the others wait for its end (waking them on every unpin cost a
        // write-heavy run more cycles per operation: docs/results/issue15-cpu-per-op.md).
        if pins.get() == 0 {
            if self.inner.round_waiter.borrow().is_some() {
                self.inner.wake_round_waiter();
            } else if !self.inner.evicting.get() && !self.inner.frame_waiters.borrow().is_empty() {
                self.inner.wake_frame_waiters(1);
            }
        }
    }
}

/// Bytes at the start of a page asked into the CPU's cache when it is pinned: the header and
/// the first slots, which every search reads next.
const PREFETCH_BYTES: usize = 512;
/// A cache line.
const CACHE_LINE_BYTES: usize = 64;

/// Asks for the first [`PREFETCH_BYTES`] of the page at `ptr` at once. A node's search reads
/// the header, then slots chosen by the binary search, one dependent miss after another in a
/// pool larger than the caches; fetched together, those misses overlap (a leaf of 100-byte
/// records has all its slots in these lines).
#[inline(always)]
pub(super) fn prefetch_head(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    for line in 0..PREFETCH_BYTES / CACHE_LINE_BYTES {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it never faults, reads nothing the program sees and
        // writes nothing. The address lies inside a frame of the pool (every page is at least
        // `MIN_PAGE_SIZE` > PREFETCH_BYTES long), and SSE is part of x86_64's baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr.wrapping_add(line * CACHE_LINE_BYTES).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// Asks for the cache line at `ptr` (a page-table entry, a slot's cells): the first step of
/// a pin started for several pages at once, so that their misses overlap.
#[inline(always)]
pub(super) fn prefetch_line(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it never faults (whatever the address), reads nothing
        // the program sees and writes nothing; SSE is part of x86_64's baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

struct BorrowRelease<'a> {
    cell: &'a OwnerCell<AtomicI16>,
    by: i16,
}

/// Ends a page's change (its version even again) when dropped.
struct ChangeEnd<'a> {
    cells: &'a SlotCells,
}

impl Drop for ChangeEnd<'_> {
    fn drop(&mut self) {
        self.cells.end_change();
    }
}

impl Drop for BorrowRelease<'_> {
    fn drop(&mut self) {
        self.cell.set(self.cell.get() + self.by);
    }
}

/// Free frames set aside for one task (see [`BufferManager::reserve`](super::BufferManager::reserve));
/// they go back to the free list when it is dropped.
pub struct Reservation {
    pub(super) inner: Rc<Inner>,
    pub(super) bufs: Vec<PoolBuf>,
}

impl Reservation {
    /// Frames held.
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    /// Whether no frame is held.
    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bufs.is_empty() {
            return;
        }
        let freed = self.bufs.len();
        {
            let mut st = self.inner.state.borrow_mut();
            for buf in self.bufs.drain(..) {
                self.inner.free_frame(&mut st, buf);
            }
        }
        self.inner.wake_frame_waiters(freed);
    }
}
