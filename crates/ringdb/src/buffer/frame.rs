//! The buffer manager's state: slots (one per frame), the page table, the free lists, and the
//! life of a frame.
//!
//! # A frame's life
//!
//! ```text
//!   free ──load──> Reading ──read done──> Resident ──evict / flush──> Writing
//!    ^               │                   │  ^  (clean or dirty)         │
//!    │               │ failed/cancelled  │  └────────write done─────────┘
//!    └───────────────┴───────────────────┘ evicted clean, or freed
//! ```
//!
//! A slot's state and frame change only through [`Slot`]'s methods, which assert that the move
//! is one of these: a page in an I/O has no frame (the frame is inside the read or write), a
//! resident page always has one, a slot in a write is never released (its frame belongs to
//! the kernel until the completion arrives), and a pinned slot is never released. What one
//! method asserts when it writes the state, the next asserts again when it reads it.

use super::cells::SlotCells;
use super::config::{PoolConfig, PoolStats};
use super::frame_hint::FrameAddresses;
use super::page_table::PageTable;
use super::{CheckpointHook, PageId, WriteAhead};
use crate::error::StorageError;
use crate::page;
use ringdb_io::FileId;
use ringdb_io::{HugeSlice, Io, PoolBuf, PoolMapping};
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

/// Rounds a wait for a frame or a page makes (each a wake-up, an eviction round or a load
/// attempt) before it gives up with `StorageError::Stalled`: far more than any real contention
/// takes, so reaching it means no progress at all (a livelock or a lost wake-up).
pub(super) const WAIT_ROUNDS_MAX: u64 = 1 << 24;

/// Where a slot's page is in its life (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SlotState {
    /// Being read from the target: no frame yet, nobody may pin it.
    Reading,
    /// In its frame: may be pinned, read and changed.
    Resident,
    /// Being written back: its frame is inside the write, nobody may pin it.
    Writing,
}

/// A page in the pool.
pub(super) struct Slot {
    pub(super) pid: PageId,
    state: SlotState,
    /// The frame; `None` while it is in an I/O.
    buf: Option<PoolBuf>,
    pub(super) dirty: bool,
    /// Under a log: changed in its structure (a split, a merge, a new page, an inner node)
    /// since the last complete checkpoint wrote it. Such a page may not be stolen: the data
    /// file must keep the structure of its last checkpoint (see `checkpoint.rs`).
    pub(super) structural: bool,
    /// The page's version (`SlotCells::version`) at its last structural change.
    pub(super) structural_version: u64,
    /// A running checkpoint copied this page (not structural) and has not written it yet:
    /// eviction must not write a newer version that the older copy would then overwrite.
    pub(super) in_checkpoint: bool,
    /// While dirty: a lower bound of the LSN of the first record whose change the data file
    /// does not hold (the oldest batch in flight when the page became dirty). Recovery must
    /// replay from at most this for a checkpoint that leaves the page out.
    pub(super) rec_lsn: u64,
}

/// How a change marks a page (see [`Slot::mark_changed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Records changed inside a leaf, its key range and links untouched.
    Content,
    /// Anything else: splits, merges, inner nodes, new pages, the catalog.
    Structure,
}

impl Slot {
    /// A page about to be read into a frame.
    pub(super) fn reading(pid: PageId, cells: &SlotCells) -> Slot {
        assert!(cells.resident_frame().is_none(), "a free slot has a frame");
        cells.set_referenced(true);
        Slot {
            pid,
            state: SlotState::Reading,
            buf: None,
            dirty: false,
            structural: false,
            structural_version: 0,
            in_checkpoint: false,
            rec_lsn: 0,
        }
    }

    /// A page just allocated in `buf`: resident, dirty and structural (it exists nowhere
    /// else); `rec_lsn` as in [`mark_changed`](Self::mark_changed).
    pub(super) fn allocated(
        pid: PageId,
        mut buf: PoolBuf,
        cells: &SlotCells,
        rec_lsn: u64,
    ) -> Slot {
        cells.set_referenced(true);
        cells.publish(buf.as_mut_slice().as_mut_ptr(), pid);
        Slot {
            pid,
            state: SlotState::Resident,
            buf: Some(buf),
            dirty: true,
            structural: true,
            structural_version: cells.version(),
            in_checkpoint: false,
            rec_lsn,
        }
    }

    /// A change of kind `change` is being made to this resident page, whose version becomes
    /// `version`; `rec_lsn` gives the oldest batch in flight now (asked only when the page
    /// becomes dirty). Returns whether the page became dirty and whether it became structural
    /// (for the pool's counts).
    pub(super) fn mark_changed(
        &mut self,
        change: Change,
        version: u64,
        rec_lsn: impl FnOnce() -> u64,
    ) -> (bool, bool) {
        assert!(self.is_resident(), "page {} changed in an I/O", self.pid);
        let newly_dirty = !self.dirty;
        if newly_dirty {
            self.dirty = true;
            self.rec_lsn = rec_lsn();
        }
        let newly_structural = change == Change::Structure && !self.structural;
        if change == Change::Structure {
            self.structural = true;
            self.structural_version = version;
        }
        (newly_dirty, newly_structural)
    }

    pub(super) fn state(&self) -> SlotState {
        self.assert_frame_matches_state();
        self.state
    }

    pub(super) fn is_resident(&self) -> bool {
        self.state() == SlotState::Resident
    }

    /// The resident page's bytes.
    pub(super) fn frame(&self) -> &PoolBuf {
        assert_eq!(
            self.state,
            SlotState::Resident,
            "page {} not resident",
            self.pid
        );
        self.buf.as_ref().expect("a resident page has its frame")
    }

    /// Where the resident page's bytes start, for a pin.
    pub(super) fn frame_ptr(&mut self) -> *mut u8 {
        assert_eq!(
            self.state,
            SlotState::Resident,
            "page {} pinned in an I/O",
            self.pid
        );
        let buf = self.buf.as_mut().expect("a resident page has its frame");
        buf.as_mut_slice().as_mut_ptr()
    }

    /// Reading -> Resident: the read filled `buf`.
    pub(super) fn finish_read(&mut self, mut buf: PoolBuf, cells: &SlotCells) {
        self.transition(SlotState::Reading, SlotState::Resident);
        assert!(
            self.buf.is_none(),
            "page {} read into a slot with a frame",
            self.pid
        );
        cells.publish(buf.as_mut_slice().as_mut_ptr(), self.pid);
        self.buf = Some(buf);
    }

    /// Resident -> Writing: seals the page (page id and checksum) and takes its frame out for
    /// the write. The caller has checked that nobody pins it.
    pub(super) fn start_write(&mut self, cells: &SlotCells) -> PoolBuf {
        self.transition(SlotState::Resident, SlotState::Writing);
        cells.withdraw();
        let mut buf = self.buf.take().expect("a resident page has its frame");
        page::seal(buf.as_mut_slice(), self.pid);
        buf
    }

    /// Writing -> Resident: the write is done (or failed) and the frame is back.
    pub(super) fn finish_write(&mut self, mut buf: PoolBuf, cells: &SlotCells) {
        self.transition(SlotState::Writing, SlotState::Resident);
        assert!(
            self.buf.is_none(),
            "page {} written from two frames",
            self.pid
        );
        cells.publish(buf.as_mut_slice().as_mut_ptr(), self.pid);
        self.buf = Some(buf);
    }

    fn transition(&mut self, from: SlotState, to: SlotState) {
        assert_eq!(
            self.state, from,
            "page {}: frame state {:?} cannot become {to:?}",
            self.pid, self.state
        );
        self.state = to;
    }

    /// A resident page has its frame; a page in an I/O does not.
    fn assert_frame_matches_state(&self) {
        debug_assert_eq!(
            self.buf.is_some(),
            self.state == SlotState::Resident,
            "page {} in state {:?} with frame: {}",
            self.pid,
            self.state,
            self.buf.is_some()
        );
    }
}

pub(super) struct State {
    pub(super) slots: Vec<Option<Slot>>,
    pub(super) free_slots: Vec<usize>,
    /// Page id -> slot (see `page_table.rs`).
    pub(super) table: PageTable,
    pub(super) free_bufs: Vec<PoolBuf>,
    /// The clock's hand: the next slot the sweep looks at.
    pub(super) hand: usize,
    pub(super) next_pid: PageId,
    pub(super) free_pages: Vec<PageId>,
    /// The same ids, for lookups: a page freed while some task still meant to load it must
    /// not come back into the pool (its stale image would shadow its next tenant).
    pub(super) freed: FxHashSet<PageId>,
    /// Free pages holding the free-list chain: in `freed`, not in `free_pages`.
    pub(super) chain: super::free_list::HeldChain,
}

impl State {
    /// The slot of a page in the table (which only points at live slots).
    pub(super) fn slot_mut(&mut self, slot: usize) -> &mut Slot {
        self.slots[slot]
            .as_mut()
            .expect("the table points at a live slot")
    }
}

pub(super) struct Inner {
    pub(super) io: Io,
    pub(super) file: FileId,
    pub(super) cfg: PoolConfig,
    pub(super) state: RefCell<State>,
    /// Per slot, outside the RefCell so guards can use them while others borrow the state:
    /// pins, borrows, version, reference bit and the resident frame (see `cells.rs`).
    pub(super) cells: Arc<HugeSlice<SlotCells>>,
    /// A share of the runtime pool's memory, for readers on other threads (see
    /// [`PoolView`](super::PoolView)).
    pub(super) mapping: PoolMapping,
    /// Where the frames lie, for the page table's frame hints (`frame_hint.rs`).
    pub(super) frames: FrameAddresses,
    pub(super) io_waiters: RefCell<FxHashMap<PageId, Vec<Waker>>>,
    pub(super) frame_waiters: RefCell<Vec<Waker>>,
    /// The task of an eviction round that found nothing evictable, waiting for an unpin or a
    /// freed frame (see `WaitOn::Evictable`).
    pub(super) round_waiter: RefCell<Option<Waker>>,
    pub(super) evicting: Cell<bool>,
    /// Pages that ended eviction rounds sent to the target and that are not back yet.
    pub(super) writes_out: Cell<usize>,
    /// Page reads in flight, their limit, and the tasks waiting for a permit.
    pub(super) loads: Cell<usize>,
    pub(super) max_loads: usize,
    /// Tasks waiting for a permit, in arrival order, by ticket.
    pub(super) load_queue: RefCell<VecDeque<(u64, Waker)>>,
    pub(super) next_ticket: Cell<u64>,
    /// Set when an eviction was cancelled mid-write: the pool can no longer tell which
    /// version of those pages is on disk, so it refuses further work instead of guessing.
    pub(super) poisoned: Cell<bool>,
    pub(super) stats: Cell<PoolStats>,
    /// Whether each page read's verification is timed into the stats
    /// ([`BufferManager::time_verification`](super::BufferManager::time_verification)).
    pub(super) time_verification: Cell<bool>,
    /// Changes made to pages so far (every `mark_changed`): a reader that saw no change
    /// between two points knows every page read in between is as it was.
    pub(super) changes: Cell<u64>,
    /// Resident pages that are dirty.
    pub(super) dirty: Cell<usize>,
    /// Of those, the structural ones (never stolen under a log).
    pub(super) structural_dirty: Cell<usize>,
    /// Of those, the others a running checkpoint copied and has not written yet.
    pub(super) in_checkpoint: Cell<usize>,
    /// The log's oldest batch in flight (or its end when none is): what a page becoming dirty
    /// records as its `rec_lsn`. `None` without a log.
    pub(super) oldest_unapplied: RefCell<Option<Rc<Cell<u64>>>>,
    /// Under a log: what eviction runs before it writes pages in place (see [`WriteAhead`]).
    pub(super) write_ahead: RefCell<Option<Rc<dyn WriteAhead>>>,
    /// Stamped into every page a task changes (the log's end when the change was made: an
    /// upper bound of the LSN of the record that changed it); 0 without a log.
    pub(super) lsn_hint: Cell<u64>,
    /// Runs a checkpoint (no-steal pools): what eviction does when every page is dirty.
    pub(super) checkpoint: RefCell<Option<CheckpointHook>>,
}

impl Inner {
    /// A pool of `cfg.frames` slots, every frame in `free_bufs`, whose pages from `next_pid`
    /// on were never allocated.
    pub(super) fn new(
        io: Io,
        file: FileId,
        cfg: PoolConfig,
        free_bufs: Vec<PoolBuf>,
        next_pid: PageId,
    ) -> Inner {
        let n = cfg.frames;
        let first = free_bufs.first().expect("a pool has frames");
        let frames = FrameAddresses::of_pool(first);
        let mapping = first.pool_mapping();
        Inner {
            io,
            file,
            cfg,
            state: RefCell::new(State {
                slots: (0..n).map(|_| None).collect(),
                free_slots: (0..n).rev().collect(),
                table: PageTable::with_max_len(n),
                free_bufs,
                hand: 0,
                next_pid,
                free_pages: Vec::new(),
                freed: FxHashSet::default(),
                chain: Default::default(),
            }),
            cells: Arc::new(HugeSlice::from_fn(n, |_| SlotCells::new())),
            mapping,
            frames,
            io_waiters: RefCell::new(FxHashMap::default()),
            frame_waiters: RefCell::new(Vec::new()),
            round_waiter: RefCell::new(None),
            evicting: Cell::new(false),
            writes_out: Cell::new(0),
            loads: Cell::new(0),
            max_loads: (n / 8).max(2),
            load_queue: RefCell::new(VecDeque::new()),
            next_ticket: Cell::new(0),
            poisoned: Cell::new(false),
            stats: Cell::new(PoolStats::default()),
            time_verification: Cell::new(false),
            changes: Cell::new(0),
            dirty: Cell::new(0),
            structural_dirty: Cell::new(0),
            in_checkpoint: Cell::new(0),
            oldest_unapplied: RefCell::new(None),
            write_ahead: RefCell::new(None),
            lsn_hint: Cell::new(0),
            checkpoint: RefCell::new(None),
        }
    }

    pub(super) fn bump(&self, f: impl FnOnce(&mut PoolStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    pub(super) fn wake_io(&self, pid: PageId) {
        let w = self.io_waiters.borrow_mut().remove(&pid);
        for w in w.into_iter().flatten() {
            w.wake();
        }
    }

    /// Wakes the eviction round waiting for something evictable, if one is.
    pub(super) fn wake_round_waiter(&self) {
        let waiter = self.round_waiter.borrow_mut().take();
        if let Some(w) = waiter {
            w.wake();
        }
    }

    /// Wakes every task waiting for frames: for changes any of them may act on (an eviction
    /// round ended, a checkpoint made pages clean, the pool was poisoned).
    pub(super) fn wake_frames(&self) {
        self.wake_round_waiter();
        let w = std::mem::take(&mut *self.frame_waiters.borrow_mut());
        for w in w {
            w.wake();
        }
    }

    /// Wakes the `n` tasks that have waited longest for a frame: for changes that help at most
    /// `n` of them (`n` frames freed, one page unpinned). Waking every waiter on each of those
    /// (128 tasks on every page read and unpin while a round of writes was out) spent a tenth
    /// of a write-heavy run polling tasks that went straight back to sleep. A waiter that takes
    /// a frame and leaves more behind wakes the next (`take_frame`), so none sleeps beside a
    /// free frame.
    pub(super) fn wake_frame_waiters(&self, n: usize) {
        self.wake_round_waiter();
        let woken: Vec<Waker> = {
            let mut waiters = self.frame_waiters.borrow_mut();
            let n = n.min(waiters.len());
            waiters.drain(..n).collect()
        };
        for w in woken {
            w.wake();
        }
    }

    pub(super) fn check_poisoned(&self) -> Result<(), StorageError> {
        if self.poisoned.get() {
            return Err(StorageError::PoolPoisoned);
        }
        Ok(())
    }

    pub(super) fn offset(&self, pid: PageId) -> u64 {
        pid * self.cfg.page_size as u64
    }

    /// Drops `slot` from the page table and the slot array, returning its frame if it has one
    /// (a page being read has none yet). Never a pinned slot, nor one being written (its frame
    /// is the kernel's until the write completes).
    pub(super) fn release_slot(&self, st: &mut State, slot: usize) -> Option<PoolBuf> {
        let s = st.slots[slot].take().expect("releasing a live slot");
        let cells = &self.cells[slot];
        assert_eq!(cells.pins.get(), 0, "releasing pinned page {}", s.pid);
        assert_ne!(
            s.state(),
            SlotState::Writing,
            "releasing page {} during its write",
            s.pid
        );
        if s.state() == SlotState::Resident {
            cells.withdraw();
        }
        if s.dirty {
            self.dirty.set(self.dirty.get() - 1);
        }
        if s.structural {
            self.structural_dirty.set(self.structural_dirty.get() - 1);
        }
        if s.in_checkpoint {
            self.in_checkpoint.set(self.in_checkpoint.get() - 1);
        }
        let removed = st.table.remove(&s.pid);
        assert_eq!(removed, Some(slot), "page {} not in the table", s.pid);
        st.free_slots.push(slot);
        s.buf
    }

    /// Puts a frame back on the free list.
    pub(super) fn free_frame(&self, st: &mut State, buf: PoolBuf) {
        assert_eq!(buf.len(), self.cfg.page_size, "a frame of another size");
        st.free_bufs.push(buf);
    }

    /// In debug builds, checks the whole state: the table and the slots agree, every slot is
    /// live or free, the dirty count is right, and frames match states. O(frames): run after
    /// rounds that touch many slots, not per page.
    pub(super) fn debug_check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let st = self.state.borrow();
        assert_eq!(
            st.table.len() + st.free_slots.len(),
            self.cfg.frames,
            "slots lost or counted twice"
        );
        for (pid, slot) in st.table.iter() {
            let s = st.slots[slot]
                .as_ref()
                .expect("the table points at a live slot");
            assert_eq!(
                s.pid, pid,
                "slot {slot} holds page {} for page {pid}",
                s.pid
            );
            s.assert_frame_matches_state();
            assert_eq!(
                self.cells[slot].resident_frame().is_some(),
                s.state == SlotState::Resident,
                "slot {slot}'s published frame disagrees with page {}'s state",
                s.pid
            );
        }
        let live = st.slots.iter().flatten().count();
        assert_eq!(live, st.table.len(), "live slots outside the table");
        let dirty = st.slots.iter().flatten().filter(|s| s.dirty).count();
        assert_eq!(dirty, self.dirty.get(), "dirty page count drifted");
        let structural = st.slots.iter().flatten().filter(|s| s.structural).count();
        assert_eq!(
            structural,
            self.structural_dirty.get(),
            "structural page count drifted"
        );
        let copied = st
            .slots
            .iter()
            .flatten()
            .filter(|s| s.in_checkpoint)
            .count();
        assert_eq!(
            copied,
            self.in_checkpoint.get(),
            "checkpoint copies drifted"
        );
        assert!(
            st.slots
                .iter()
                .flatten()
                .all(|s| s.dirty || (!s.structural && !s.in_checkpoint)),
            "a clean page marked structural or in a checkpoint"
        );
    }

    /// What a page becoming dirty now records as its `rec_lsn` (0 without a log).
    pub(super) fn rec_lsn_now(&self) -> u64 {
        self.oldest_unapplied
            .borrow()
            .as_ref()
            .map_or(0, |c| c.get())
    }

    /// Whether eviction may write this dirty page back now: always without a log; under one
    /// only with stealing on, the write-ahead hook installed, and no structural change since
    /// the last complete checkpoint.
    pub(super) fn may_steal(&self, s: &Slot) -> bool {
        if !self.cfg.steal {
            return false;
        }
        if !self.cfg.write_ahead {
            return true;
        }
        !s.structural && !s.in_checkpoint && self.write_ahead.borrow().is_some()
    }

    /// Dirty pages eviction may not write back now (only a checkpoint can make them clean).
    pub(super) fn unstealable_dirty(&self) -> usize {
        if !self.cfg.steal || (self.cfg.write_ahead && self.write_ahead.borrow().is_none()) {
            self.dirty.get()
        } else if self.cfg.write_ahead {
            self.structural_dirty.get() + self.in_checkpoint.get()
        } else {
            0
        }
    }
}
