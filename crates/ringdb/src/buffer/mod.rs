//! The buffer manager (paper Sec. 3.1): a fixed set of page frames, a page table, clock-sweep
//! replacement, batched eviction and asynchronous page faults.
//!
//! # Frames are the runtime's (registered) buffers
//! Every frame is a [`PoolBuf`](ringdb_io::PoolBuf) leased from the executor's
//! buffer pool, so with `IoConfig::fixed_buffers` page reads and write-backs use
//! `READ_FIXED`/`WRITE_FIXED`. A frame moves *by value* into the read or write that fills or
//! drains it; while that I/O is in flight the page is in state `Reading`/`Writing` and no one
//! can touch its bytes. If the task doing the I/O is dropped, the runtime keeps the buffer
//! until the completion arrives and then returns it to its pool, where [`BufferManager`]
//! reclaims it (`Io::lease_buf`): a frame is never reused while the kernel may still write
//! into it.
//!
//! # Pins live only in synchronous code
//! [`BufferManager::try_fix`] never waits: it pins a resident page or says it is not resident.
//! Callers (the B+tree) do their work between two `await`s, holding pins only there, and when a
//! page is missing they drop every pin, `load` it (the task parks, others run) and restart
//! (paper Sec. 3.3.2: the traversal restarts because the pages may have changed meanwhile).
//! Hence eviction, which only runs inside `await`s, never meets a pinned page of the task that
//! runs it, and no task holds a pin while it waits: no deadlock on a small pool.
//!
//! # Eviction
//! When fewer than `free_target` frames are free, the task that needs one runs a round of
//! clock-sweep (second chance via a reference bit) collecting up to `evict_batch` victims;
//! clean victims are dropped at once, dirty ones are sealed (page id + checksum) and written
//! together (one batch of writes in flight), then freed. One round at a time; other tasks that
//! find no free frame wait for it.

//!
//! # Where to look
//! - this file: [`BufferManager`], pinning resident pages, allocating and freeing pages;
//! - `config.rs`: [`PoolConfig`], [`PoolStats`];
//! - `frame.rs`: the state (slots, page table, free lists) and a frame's life, with the
//!   assertions on its state transitions;
//! - `load.rs`: page faults and their admission; `prefetch.rs`: several pages read in one
//!   batch;
//! - `evict.rs`: free frames and eviction rounds;
//! - `dirty.rs`: a checkpoint's cut and the flush of every dirty page;
//! - `steal.rs`: what a pool under a log checks before eviction writes a page back;
//! - `free_list.rs`: free pages, and the free-list chain's pages held between meta writes;
//! - `guard.rs`: [`PageGuard`] and [`Reservation`];
//! - `view.rs`: [`PoolView`], the pool as readers on other threads see it (pages read in
//!   place, optimistically, validated by the slot's version; `cells.rs` keeps the version).

mod cells;
mod config;
mod dirty;
mod evict;
mod frame;
mod frame_hint;
mod free_list;
mod guard;
mod load;
mod page_table;
mod prefetch;
mod steal;
mod view;
mod wait;

#[cfg(any(test, feature = "__internal"))]
pub use config::MIN_FRAMES;
pub use config::{PoolConfig, PoolStats};
pub use dirty::{DirtyPage, PoolCut};
pub use free_list::FreeListCut;
pub use guard::{PageGuard, Reservation};
pub use view::{Open, OptimisticPage, PoolView};

use crate::error::{OpenError, StorageError, WriteError};
pub use crate::ids::PageId;
use frame::{Inner, Slot};
use ringdb_io::FileId;
use ringdb_io::Io;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// Runs a checkpoint (or waits for the one running) when a no-steal pool has no clean page
/// left to evict.
pub type CheckpointHook = Rc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), StorageError>>>>>;

/// What a pool under a write-ahead log runs before eviction writes pages in place outside a
/// checkpoint: logs what the mode needs to repair a torn page (their images) and waits until
/// the log is durable past `lsn` (the highest LSN stamped in them). `Ok(false)`: not now
/// (no room in the log); the pages stay dirty and the pool asks for a checkpoint instead.
pub trait WriteAhead {
    /// See the trait's documentation; `pages` are sealed images.
    fn before_write<'a>(
        &'a self,
        pages: &'a [(PageId, &'a [u8])],
        lsn: u64,
    ) -> Pin<Box<dyn Future<Output = Result<bool, StorageError>> + 'a>>;
}

/// The buffer manager of one thread (one ring). Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct BufferManager {
    inner: Rc<Inner>,
}

impl BufferManager {
    /// Leases `cfg.frames` buffers of `cfg.page_size` bytes from `io`'s pool; pages live in
    /// `file` from `next_pid` on (pages below it exist on the target).
    pub fn new(io: Io, file: FileId, cfg: PoolConfig, next_pid: PageId) -> Result<Self, OpenError> {
        cfg.validate()?;
        let mut free_bufs = Vec::with_capacity(cfg.frames);
        for _ in 0..cfg.frames {
            let b = io
                .lease_buf()
                .ok_or(OpenError::RuntimeBuffers { frames: cfg.frames })?;
            if b.len() != cfg.page_size {
                return Err(OpenError::RuntimeBufferSize {
                    buffer_bytes: b.len(),
                    page_size: cfg.page_size,
                });
            }
            free_bufs.push(b);
        }
        Ok(BufferManager {
            inner: Rc::new(Inner::new(io, file, cfg, free_bufs, next_pid)),
        })
    }

    /// The pool's sizes and policies.
    pub fn config(&self) -> &PoolConfig {
        &self.inner.cfg
    }

    /// Bytes per page.
    pub fn page_size(&self) -> usize {
        self.inner.cfg.page_size
    }

    /// Times the verification of each page read from now on (`on`), or no longer: two
    /// time-stamp counter reads per page read, counted in [`PoolStats::verification_cycles`].
    /// A page just read is not in the CPU's caches, and what checking it costs depends on
    /// where the device (in a VM, the host) left it: a benchmark that prices its run with a
    /// cost model reads the run's own figure here. Off by default: nothing is timed.
    pub fn time_verification(&self, on: bool) {
        self.inner.time_verification.set(on);
    }

    /// What the pool counted so far.
    pub fn stats(&self) -> PoolStats {
        self.inner.stats.get()
    }

    /// The pool as readers on other threads see it (`Send + Sync`; see [`PoolView`]).
    pub fn view(&self) -> PoolView {
        let inner = &self.inner;
        let table = inner.state.borrow().table.entries();
        PoolView::new(
            inner.cells.clone(),
            table,
            inner.mapping.clone(),
            inner.cfg.page_size,
        )
    }

    /// The runtime's I/O handle the pool reads and writes through.
    pub fn io(&self) -> &Io {
        &self.inner.io
    }

    /// How many changes pages have had (any page of this pool): equal at two points on the
    /// pool's thread means no page changed in between.
    pub fn changes(&self) -> u64 {
        self.inner.changes.get()
    }

    /// The first page id never allocated (the data file's size in pages).
    pub fn next_pid(&self) -> PageId {
        self.inner.state.borrow().next_pid
    }

    /// Sets the first page id never allocated (from the meta page on open).
    pub fn set_next_pid(&self, next: PageId) {
        self.inner.state.borrow_mut().next_pid = next;
    }

    /// Frames free right now.
    pub fn free_frames(&self) -> usize {
        self.inner.state.borrow().free_bufs.len()
    }

    /// Pages that eviction rounds sent to the target and that are not back yet. A round ends
    /// once its writes are submitted, so several rounds' writes can be out at once (bounded).
    pub fn writes_out(&self) -> usize {
        self.inner.writes_out.get()
    }

    /// Pages resident (or in I/O) right now.
    pub fn resident(&self) -> usize {
        self.inner.state.borrow().table.len()
    }

    /// Dirty resident pages.
    pub fn dirty_pages(&self) -> usize {
        self.inner.dirty.get()
    }

    /// Dirty pages changed in their structure since the last complete checkpoint (under a
    /// log, only a checkpoint writes them).
    pub fn structural_pages(&self) -> usize {
        self.inner.structural_dirty.get()
    }

    /// Dirty pages only a checkpoint can write: the structural ones, or every dirty page in a
    /// pool that may not steal (what decides when a checkpoint is due).
    pub fn pages_for_checkpoint(&self) -> usize {
        if self.inner.cfg.steal {
            self.inner.structural_dirty.get()
        } else {
            self.inner.dirty.get()
        }
    }

    /// Under a log: the cell holding the log's oldest batch in flight (its end when none is),
    /// which pages becoming dirty record (see `checkpoint.rs`).
    pub fn set_oldest_unapplied(&self, cell: Rc<std::cell::Cell<u64>>) {
        assert!(self.inner.cfg.write_ahead, "a pool without a log");
        *self.inner.oldest_unapplied.borrow_mut() = Some(cell);
    }

    /// Under a log: installs (or, with `None`, removes) what eviction runs before it writes
    /// dirty pages in place; without one such a pool steals nothing.
    pub fn set_write_ahead(&self, hook: Option<Rc<dyn WriteAhead>>) {
        assert!(self.inner.cfg.write_ahead, "a pool without a log");
        *self.inner.write_ahead.borrow_mut() = hook;
    }

    /// Sets what is stamped as the LSN of pages changed from now on (the log's end). The log
    /// only grows, so the stamp never goes back.
    pub fn set_lsn_hint(&self, lsn: u64) {
        let old = self.inner.lsn_hint.get();
        assert!(lsn >= old, "page LSN stamp goes back from {old} to {lsn}");
        self.inner.lsn_hint.set(lsn);
    }

    /// Installs what eviction runs when a no-steal pool has only dirty pages left.
    pub fn set_checkpoint_hook(&self, hook: Option<CheckpointHook>) {
        *self.inner.checkpoint.borrow_mut() = hook;
    }

    /// Pins `pid` if it is resident; `None` if it is not (or is in I/O): the caller drops its
    /// pins, awaits [`load`](Self::load) and restarts. Never waits.
    pub fn try_fix(&self, pid: PageId) -> Option<PageGuard> {
        let inner = &self.inner;
        let entry = inner.state.borrow().table.get_with_hint(pid);
        let found = entry.and_then(|(slot, frame_hint)| {
            // The frame's header is on its way while the slot's cells are read.
            inner.prefetch_frame(frame_hint);
            let cells = &inner.cells[slot];
            let ptr = cells.resident_frame()?;
            cells.set_referenced(true);
            inner.correct_frame_hint(pid, frame_hint, ptr);
            Some((slot, ptr))
        });
        match found {
            Some((slot, ptr)) => {
                inner.bump(|s| s.hits += 1);
                Some(PageGuard::pin(inner, slot, pid, ptr))
            }
            None => {
                inner.bump(|s| s.misses += 1);
                None
            }
        }
    }

    /// Starts pinning `pid` without waiting for it, in two steps for a batch of pages, so that
    /// their cache misses overlap instead of following one another (`tree/probe.rs`):
    /// `Lookup` fetches the page-table entry's line; `Frame` (after every page's `Lookup`)
    /// reads the entry and fetches the slot's cells and the frame's header. A later
    /// [`try_fix`](Self::try_fix) then finds them in the cache. Nothing is pinned or changed.
    pub fn prefetch_pin(&self, pid: PageId, step: PinStep) {
        let inner = &self.inner;
        let st = inner.state.borrow();
        match step {
            PinStep::Lookup => st.table.prefetch_home(pid),
            PinStep::Frame => {
                if let Some((slot, frame_hint)) = st.table.get_with_hint(pid) {
                    guard::prefetch_line((&inner.cells[slot] as *const cells::SlotCells).cast());
                    inner.prefetch_frame(frame_hint);
                }
            }
        }
    }

    /// Fails unless `n` more pages can be allocated on the target (free ids or room to grow):
    /// a split checks this before it changes anything, so a full device never leaves half a
    /// split behind.
    pub fn check_room(&self, n: usize) -> Result<(), WriteError> {
        let st = self.inner.state.borrow();
        let Some(cap) = self.inner.cfg.capacity_pages else {
            return Ok(());
        };
        let room = st.free_pages.len() as u64 + cap.saturating_sub(st.next_pid);
        if room < n as u64 {
            return Err(self.full(room, n as u64));
        }
        Ok(())
    }

    /// The target is full: `available` pages left, `needed` asked for.
    fn full(&self, available: u64, needed: u64) -> WriteError {
        let cfg = &self.inner.cfg;
        WriteError::Full {
            capacity_pages: cfg.capacity_pages.unwrap_or(0),
            page_size: cfg.page_size,
            available_pages: available,
            needed_pages: needed,
        }
    }

    /// An empty reservation, for [`reserve`](Self::reserve).
    pub fn reservation(&self) -> Reservation {
        Reservation {
            inner: self.inner.clone(),
            bufs: Vec::new(),
        }
    }

    /// Fills `res` up to `n` frames, all at once (a task never sits on part of what it needs
    /// while waiting for the rest, so reservations cannot deadlock). The frames stay the
    /// caller's across restarts, so other tasks cannot take them between the wait and the
    /// attempt that uses them (they did, again and again, before: a starved split).
    pub async fn reserve(&self, res: &mut Reservation, n: usize) -> Result<(), StorageError> {
        assert!(n <= self.inner.cfg.frames / 2, "reserve({n}) asks too much");
        let missing = n.saturating_sub(res.bufs.len());
        if missing == 0 {
            return Ok(());
        }
        self.ensure_free(missing).await?;
        let mut st = self.inner.state.borrow_mut();
        for _ in 0..missing {
            res.bufs
                .push(st.free_bufs.pop().expect("ensure_free made them free"));
        }
        Ok(())
    }

    /// A fresh zeroed page, pinned and dirty, in a frame of `res` if it has one, else a free
    /// frame (call `ensure_free` or `reserve` first).
    pub fn alloc_page(&self, res: Option<&mut Reservation>) -> Result<PageGuard, WriteError> {
        let inner = &self.inner;
        inner.check_poisoned()?;
        let mut st = inner.state.borrow_mut();
        let pid = match st.free_pages.pop() {
            Some(p) => {
                st.freed.remove(&p);
                p
            }
            None => {
                let p = st.next_pid;
                if inner.cfg.capacity_pages.is_some_and(|cap| p >= cap) {
                    return Err(self.full(0, 1));
                }
                st.next_pid += 1;
                p
            }
        };
        assert!(
            !st.table.contains_key(&pid),
            "page {pid} allocated while resident"
        );
        let reserved = res.and_then(|r| r.bufs.pop());
        let Some(mut buf) = reserved.or_else(|| st.free_bufs.pop()) else {
            st.freed.insert(pid);
            st.free_pages.push(pid);
            return Err(WriteError::NoFreeFrame);
        };
        buf.as_mut_slice().fill(0);
        let slot = st.free_slots.pop().expect("as many slots as frames");
        assert!(st.slots[slot].is_none(), "a free slot is live");
        let rec_lsn = inner.rec_lsn_now();
        st.slots[slot] = Some(Slot::allocated(pid, buf, &inner.cells[slot], rec_lsn));
        st.table.insert(pid, slot);
        let ptr = st.slot_mut(slot).frame_ptr();
        if let Some(frame) = inner.frames.index_of(ptr) {
            st.table.set_frame_hint(pid, frame);
        }
        drop(st);
        inner.dirty.set(inner.dirty.get() + 1);
        inner.structural_dirty.set(inner.structural_dirty.get() + 1);
        assert_eq!(inner.cells[slot].pins.get(), 0, "a free slot is pinned");
        Ok(PageGuard::pin(inner, slot, pid, ptr))
    }

    /// Gives page `pid` back: its frame (if resident) is freed without a write and its id is
    /// reused. The caller holds no pin on it and it is not in an I/O (it was just pinned by
    /// the synchronous code that frees it).
    pub fn free_page(&self, pid: PageId) {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        if let Some(slot) = st.table.get(&pid) {
            assert!(
                st.slot_mut(slot).is_resident(),
                "freeing page {pid} during its I/O"
            );
            if let Some(buf) = inner.release_slot(&mut st, slot) {
                inner.free_frame(&mut st, buf);
            }
        }
        assert!(st.freed.insert(pid), "page {pid} freed twice");
        st.free_pages.push(pid);
        drop(st);
        inner.wake_frame_waiters(1);
    }
}

/// The steps of [`BufferManager::prefetch_pin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinStep {
    /// Fetch the page-table entry's line.
    Lookup,
    /// Read the entry; fetch the slot's cells and the frame's header.
    Frame,
}
