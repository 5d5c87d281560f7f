//! The buffer manager (paper Sec. 3.1): a fixed set of page frames, a page table, clock-sweep
//! replacement, batched eviction and asynchronous page faults.
//!
//! # Frames are the runtime's (registered) buffers
//! Every frame is a [`PoolBuf`] leased from the executor's buffer pool, so with
//! `IoConfig::fixed_buffers` page reads and write-backs use `READ_FIXED`/`WRITE_FIXED`. A frame
//! moves *by value* into the read or write that fills or drains it; while that I/O is in flight
//! the page is in state `Reading`/`Writing` and no one can touch its bytes. If the task doing the
//! I/O is dropped, the runtime keeps the buffer until the completion arrives and then returns it
//! to its pool, where [`BufferManager`] reclaims it (`Io::lease_buf`): a frame is never reused
//! while the kernel may still write into it.
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

use crate::error::{DbError, Result};
use crate::page;
use futures_util::future::join_all;
use ringdb_io::executor::{Io, PoolBuf};
use ringdb_io::FileId;
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A page's number in the data file: it lives at byte `pid * page_size`.
pub type PageId = u64;

/// The fewest frames a pool may have: a root-to-leaf path, a split of every level, and room
/// for eviction to make progress.
pub const MIN_FRAMES: usize = 16;

/// The buffer manager's sizes and policies.
#[derive(Clone, Copy, Debug)]
pub struct PoolConfig {
    pub page_size: usize,
    pub frames: usize,
    /// Victims collected and written together by one eviction round (1: one at a time).
    pub evict_batch: usize,
    /// An eviction round starts when fewer frames than this are free.
    pub free_target: usize,
    /// Pages the target can hold (`None`: a file that grows).
    pub capacity_pages: Option<u64>,
    /// Whether eviction may write a dirty page back (no log). With a write-ahead log it may
    /// not: the data file changes only in checkpoints, so it always holds one consistent
    /// checkpoint (the log replays the rest), and a pool full of dirty pages asks for a
    /// checkpoint instead.
    pub steal: bool,
}

impl PoolConfig {
    pub fn new(page_size: usize, frames: usize) -> Self {
        let evict_batch = (frames / 16).clamp(1, 64);
        PoolConfig {
            page_size,
            frames,
            evict_batch,
            free_target: (frames / 10).max(evict_batch).max(4),
            capacity_pages: None,
            steal: true,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if !self.page_size.is_power_of_two() || !(4096..=65536).contains(&self.page_size) {
            return Err(DbError::InvalidArg(format!(
                "page size {} must be a power of two from 4096 to 65536",
                self.page_size
            )));
        }
        if self.frames < MIN_FRAMES {
            return Err(DbError::InvalidArg(format!(
                "a buffer pool of {} frames is too small: at least {MIN_FRAMES}",
                self.frames
            )));
        }
        if self.evict_batch == 0 || self.evict_batch > self.frames / 2 {
            return Err(DbError::InvalidArg(format!(
                "eviction batch {} must be between 1 and half the pool ({})",
                self.evict_batch,
                self.frames / 2
            )));
        }
        if self.free_target == 0 || self.free_target > self.frames / 2 {
            return Err(DbError::InvalidArg(format!(
                "free target {} must be between 1 and half the pool ({})",
                self.free_target,
                self.frames / 2
            )));
        }
        Ok(())
    }
}

/// What the buffer manager counts.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PoolStats {
    /// `try_fix` calls that found the page resident.
    pub hits: u64,
    /// `try_fix` calls that did not (the caller then loads it).
    pub misses: u64,
    /// Pages read from the target.
    pub reads: u64,
    /// Pages written to the target (eviction and flush).
    pub writes: u64,
    /// Eviction rounds run, and pages they freed.
    pub evict_rounds: u64,
    pub evicted: u64,
    /// Times a task waited for a frame or for another task's I/O on a page.
    pub waits: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Reading,
    Resident,
    Writing,
}

struct Slot {
    pid: PageId,
    state: SlotState,
    /// The frame; `None` while it is in an I/O.
    buf: Option<PoolBuf>,
    dirty: bool,
    referenced: bool,
}

struct State {
    slots: Vec<Option<Slot>>,
    free_slots: Vec<usize>,
    table: HashMap<PageId, usize>,
    free_bufs: Vec<PoolBuf>,
    hand: usize,
    next_pid: PageId,
    free_pages: Vec<PageId>,
    /// The same ids, for lookups: a page freed while some task still meant to load it must
    /// not come back into the pool (its stale image would shadow its next tenant).
    freed: std::collections::HashSet<PageId>,
}

struct Inner {
    io: Io,
    file: FileId,
    cfg: PoolConfig,
    state: RefCell<State>,
    /// Per slot, outside the RefCell so guards can use them while others borrow the state.
    pins: Box<[Cell<u32>]>,
    /// Per slot: n > 0 readers, -1 one writer, 0 none (catches aliasing bugs at run time).
    borrows: Box<[Cell<i32>]>,
    /// Per slot: bumped on every write access.
    versions: Box<[Cell<u64>]>,
    io_waiters: RefCell<HashMap<PageId, Vec<Waker>>>,
    frame_waiters: RefCell<Vec<Waker>>,
    evicting: Cell<bool>,
    /// Page reads in flight, their limit, and the tasks waiting for a permit.
    loads: Cell<usize>,
    max_loads: usize,
    /// Tasks waiting for a permit, in arrival order, by ticket.
    load_queue: RefCell<std::collections::VecDeque<(u64, Waker)>>,
    next_ticket: Cell<u64>,
    /// Set when an eviction was cancelled mid-write: the pool can no longer tell which
    /// version of those pages is on disk, so it refuses further work instead of guessing.
    poisoned: Cell<bool>,
    stats: Cell<PoolStats>,
    /// Resident pages that are dirty.
    dirty: Cell<usize>,
    /// Stamped into every page a task changes (the log's end when the change was made: an
    /// upper bound of the LSN of the record that changed it); 0 without a log.
    lsn_hint: Cell<u64>,
    /// Runs a checkpoint (no-steal pools): what eviction does when every page is dirty.
    checkpoint: RefCell<Option<CheckpointHook>>,
}

/// Runs a checkpoint (or waits for the one running) when a no-steal pool has no clean page
/// left to evict.
pub type CheckpointHook = Rc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<()>>>>>;

/// A dirty page copied by a checkpoint's cut: sealed, ready to write.
pub struct DirtyPage {
    pub pid: PageId,
    pub image: ringdb_io::AlignedBuf,
    slot: usize,
    version: u64,
}

impl Inner {
    fn bump(&self, f: impl FnOnce(&mut PoolStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    fn wake_io(&self, pid: PageId) {
        let w = self.io_waiters.borrow_mut().remove(&pid);
        for w in w.into_iter().flatten() {
            w.wake();
        }
    }

    fn wake_frames(&self) {
        let w = std::mem::take(&mut *self.frame_waiters.borrow_mut());
        for w in w {
            w.wake();
        }
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.get() {
            return Err(DbError::InvalidArg(
                "buffer pool unusable: an eviction was cancelled while its writes were in flight"
                    .into(),
            ));
        }
        Ok(())
    }

    fn offset(&self, pid: PageId) -> u64 {
        pid * self.cfg.page_size as u64
    }

    /// Drops `slot` from the page table and the slot array, returning its frame if it has one.
    fn release_slot(&self, st: &mut State, slot: usize) -> Option<PoolBuf> {
        let s = st.slots[slot].take().expect("releasing a live slot");
        assert_eq!(self.pins[slot].get(), 0, "releasing pinned page {}", s.pid);
        if s.dirty {
            self.dirty.set(self.dirty.get() - 1);
        }
        st.table.remove(&s.pid);
        st.free_slots.push(slot);
        s.buf
    }
}

/// The buffer manager of one thread (one ring). Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct BufferManager {
    inner: Rc<Inner>,
}

impl BufferManager {
    /// Leases `cfg.frames` buffers of `cfg.page_size` bytes from `io`'s pool; pages live in
    /// `file` from `next_pid` on (pages below it exist on the target).
    pub fn new(io: Io, file: FileId, cfg: PoolConfig, next_pid: PageId) -> Result<Self> {
        cfg.validate()?;
        let mut free_bufs = Vec::with_capacity(cfg.frames);
        for _ in 0..cfg.frames {
            let b = io.lease_buf().ok_or_else(|| {
                DbError::InvalidArg(format!(
                    "the runtime's buffer pool has fewer than the {} frames asked for",
                    cfg.frames
                ))
            })?;
            if b.len() != cfg.page_size {
                return Err(DbError::InvalidArg(format!(
                    "the runtime's buffers hold {} bytes, pages are {}",
                    b.len(),
                    cfg.page_size
                )));
            }
            free_bufs.push(b);
        }
        let n = cfg.frames;
        let cells = |v| (0..n).map(|_| Cell::new(v)).collect::<Box<[_]>>();
        Ok(BufferManager {
            inner: Rc::new(Inner {
                io,
                file,
                cfg,
                state: RefCell::new(State {
                    slots: (0..n).map(|_| None).collect(),
                    free_slots: (0..n).rev().collect(),
                    table: HashMap::with_capacity(n),
                    free_bufs,
                    hand: 0,
                    next_pid,
                    free_pages: Vec::new(),
                    freed: std::collections::HashSet::new(),
                }),
                pins: cells(0u32),
                borrows: (0..n).map(|_| Cell::new(0i32)).collect(),
                versions: (0..n).map(|_| Cell::new(0u64)).collect(),
                io_waiters: RefCell::new(HashMap::new()),
                frame_waiters: RefCell::new(Vec::new()),
                evicting: Cell::new(false),
                loads: Cell::new(0),
                max_loads: (n / 8).max(2),
                load_queue: RefCell::new(std::collections::VecDeque::new()),
                next_ticket: Cell::new(0),
                poisoned: Cell::new(false),
                stats: Cell::new(PoolStats::default()),
                dirty: Cell::new(0),
                lsn_hint: Cell::new(0),
                checkpoint: RefCell::new(None),
            }),
        })
    }

    pub fn config(&self) -> &PoolConfig {
        &self.inner.cfg
    }

    pub fn page_size(&self) -> usize {
        self.inner.cfg.page_size
    }

    pub fn stats(&self) -> PoolStats {
        self.inner.stats.get()
    }

    pub fn io(&self) -> &Io {
        &self.inner.io
    }

    /// The first page id never allocated (the data file's size in pages).
    pub fn next_pid(&self) -> PageId {
        self.inner.state.borrow().next_pid
    }

    /// Sets the first page id never allocated (from the meta page on open).
    pub fn set_next_pid(&self, next: PageId) {
        self.inner.state.borrow_mut().next_pid = next;
    }

    /// Freed page ids, reusable by `alloc_page`.
    pub fn free_pages(&self) -> Vec<PageId> {
        self.inner.state.borrow().free_pages.clone()
    }

    /// Restores the free-page list (from the meta page on open).
    pub fn set_free_pages(&self, pages: Vec<PageId>) {
        let mut st = self.inner.state.borrow_mut();
        st.freed = pages.iter().copied().collect();
        st.free_pages = pages;
    }

    /// Frames free right now.
    pub fn free_frames(&self) -> usize {
        self.inner.state.borrow().free_bufs.len()
    }

    /// Pages resident (or in I/O) right now.
    pub fn resident(&self) -> usize {
        self.inner.state.borrow().table.len()
    }

    /// Pins `pid` if it is resident; `None` if it is not (or is in I/O): the caller drops its
    /// pins, awaits [`load`](Self::load) and restarts. Never waits.
    pub fn try_fix(&self, pid: PageId) -> Option<PageGuard> {
        let mut st = self.inner.state.borrow_mut();
        let found = st.table.get(&pid).copied().and_then(|slot| {
            let s = st.slots[slot]
                .as_mut()
                .expect("table points at a live slot");
            if s.state != SlotState::Resident {
                return None;
            }
            s.referenced = true;
            let ptr = s
                .buf
                .as_mut()
                .expect("a resident page has its frame")
                .as_mut_slice()
                .as_mut_ptr();
            Some((slot, ptr))
        });
        drop(st);
        match found {
            Some((slot, ptr)) => {
                self.inner.bump(|s| s.hits += 1);
                let pins = &self.inner.pins[slot];
                pins.set(pins.get() + 1);
                Some(PageGuard {
                    inner: self.inner.clone(),
                    slot,
                    pid,
                    ptr,
                })
            }
            None => {
                self.inner.bump(|s| s.misses += 1);
                None
            }
        }
    }

    /// Makes `pid` resident, reading it from the target if needed (the task parks; others
    /// run), and pins it. The caller keeps the pin only until its restarted attempt has run:
    /// that way the page cannot be evicted between the completion and the moment the task
    /// runs again (under heavy pressure it otherwise could be, again and again: a livelock).
    /// Every pin held across an `await` belongs to a task that is ready to run, so pins
    /// never block eviction for good. The page is verified (checksum, page id) before anyone
    /// can see it.
    ///
    /// Returns `None` when the page was freed (by a merge) before it could be loaded: it is
    /// no longer part of the tree, and the caller's restart will not lead to it.
    pub async fn load(&self, pid: PageId) -> Result<Option<PageGuard>> {
        let inner = &self.inner;
        loop {
            inner.check_poisoned()?;
            let busy = {
                let mut st = inner.state.borrow_mut();
                if st.freed.contains(&pid) {
                    return Ok(None);
                }
                if pid >= st.next_pid {
                    return Err(DbError::Corrupt {
                        page: pid,
                        what: format!(
                            "a pointer leads past the end of the data ({} pages)",
                            st.next_pid
                        ),
                    });
                }
                match st.table.get(&pid).copied() {
                    Some(slot) => {
                        let s = st.slots[slot].as_mut().expect("live slot");
                        if s.state == SlotState::Resident {
                            drop(st);
                            return Ok(Some(self.pin_resident(pid)));
                        }
                        true
                    }
                    None => false,
                }
            };
            if busy {
                inner.bump(|s| s.waits += 1);
                WaitIo {
                    inner: inner.clone(),
                    pid,
                    registered: false,
                }
                .await;
                continue;
            }
            // Admission: at most `max_loads` page reads at once, so that a crowd of faulting
            // tasks cannot evict each other's pages before they get to use them.
            let _admitted = self.admit_load().await;
            if inner.state.borrow().table.contains_key(&pid) {
                continue;
            }
            let buf = self.take_frame().await?;
            let slot = {
                let mut st = inner.state.borrow_mut();
                if st.table.contains_key(&pid) || st.freed.contains(&pid) {
                    // Another task faulted it in (or freed it) while we waited for a frame.
                    st.free_bufs.push(buf);
                    drop(st);
                    inner.wake_frames();
                    continue;
                }
                let slot = st
                    .free_slots
                    .pop()
                    .expect("there are as many slots as frames");
                st.slots[slot] = Some(Slot {
                    pid,
                    state: SlotState::Reading,
                    buf: None,
                    dirty: false,
                    referenced: true,
                });
                st.table.insert(pid, slot);
                slot
            };
            let mut cancel = CancelRead {
                inner: inner.clone(),
                slot,
                pid,
                armed: true,
            };
            let (res, buf) = inner.io.read(inner.file, inner.offset(pid), buf).await;
            cancel.armed = false;
            inner.bump(|s| s.reads += 1);
            let checked = match res {
                Ok(n) if n == inner.cfg.page_size => {
                    page::verify(buf.as_slice(), pid).map_err(DbError::from)
                }
                Ok(n) => Err(DbError::Corrupt {
                    page: pid,
                    what: format!(
                        "short read: {n} of {} bytes (the data file is truncated)",
                        inner.cfg.page_size
                    ),
                }),
                Err(e) => Err(e.into()),
            };
            let mut st = inner.state.borrow_mut();
            match checked {
                Ok(()) => {
                    let s = st.slots[slot].as_mut().expect("reading slot is live");
                    s.state = SlotState::Resident;
                    s.buf = Some(buf);
                    drop(st);
                    let g = self.pin_resident(pid);
                    inner.wake_io(pid);
                    inner.wake_frames();
                    return Ok(Some(g));
                }
                Err(e) => {
                    inner.release_slot(&mut st, slot);
                    st.free_bufs.push(buf);
                    drop(st);
                    inner.wake_io(pid);
                    inner.wake_frames();
                    return Err(e);
                }
            }
        }
    }

    /// Pins a page known to be resident.
    fn pin_resident(&self, pid: PageId) -> PageGuard {
        let mut st = self.inner.state.borrow_mut();
        let slot = *st.table.get(&pid).expect("resident page is in the table");
        let s = st.slots[slot].as_mut().expect("live slot");
        assert_eq!(s.state, SlotState::Resident);
        s.referenced = true;
        let ptr = s
            .buf
            .as_mut()
            .expect("a resident page has its frame")
            .as_mut_slice()
            .as_mut_ptr();
        let pins = &self.inner.pins[slot];
        pins.set(pins.get() + 1);
        PageGuard {
            inner: self.inner.clone(),
            slot,
            pid,
            ptr,
        }
    }

    /// Waits for one of the `max_loads` page-read permits, first come first served (a task
    /// that arrives while others wait queues behind them, so none starves).
    async fn admit_load(&self) -> LoadPermit {
        let inner = &self.inner;
        if inner.loads.get() < inner.max_loads && inner.load_queue.borrow().is_empty() {
            inner.loads.set(inner.loads.get() + 1);
        } else {
            inner.bump(|s| s.waits += 1);
            let ticket = inner.next_ticket.get();
            inner.next_ticket.set(ticket + 1);
            WaitLoad {
                inner: inner.clone(),
                ticket,
                queued: false,
                done: false,
            }
            .await;
        }
        LoadPermit {
            inner: inner.clone(),
        }
    }

    /// Waits until at least `n` frames are free (evicting as needed), so that a caller can
    /// then `alloc_page` up to `n` times without waiting. Holds no pins while it waits.
    pub async fn ensure_free(&self, n: usize) -> Result<()> {
        assert!(
            n <= self.inner.cfg.frames / 2,
            "ensure_free({n}) asks too much"
        );
        let inner = &self.inner;
        loop {
            inner.check_poisoned()?;
            if self.free_frames() >= n {
                return Ok(());
            }
            // A frame orphaned by a cancelled read comes back through the runtime's pool.
            if let Some(b) = inner.io.lease_buf() {
                inner.state.borrow_mut().free_bufs.push(b);
                continue;
            }
            if inner.evicting.get() {
                inner.bump(|s| s.waits += 1);
                WaitFrame {
                    inner: inner.clone(),
                    registered: false,
                }
                .await;
            } else {
                self.evict_round().await?;
            }
        }
    }

    /// Fails unless `n` more pages can be allocated on the target (free ids or room to grow):
    /// a split checks this before it changes anything, so a full device never leaves half a
    /// split behind.
    pub fn check_room(&self, n: usize) -> Result<()> {
        let st = self.inner.state.borrow();
        let Some(cap) = self.inner.cfg.capacity_pages else {
            return Ok(());
        };
        let room = st.free_pages.len() as u64 + cap.saturating_sub(st.next_pid);
        if room < n as u64 {
            return Err(DbError::Full(format!(
                "all {cap} pages of {} bytes are in use",
                self.inner.cfg.page_size
            )));
        }
        Ok(())
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
    pub async fn reserve(&self, res: &mut Reservation, n: usize) -> Result<()> {
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
    pub fn alloc_page(&self, res: Option<&mut Reservation>) -> Result<PageGuard> {
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
                if let Some(cap) = inner.cfg.capacity_pages {
                    if p >= cap {
                        return Err(DbError::Full(format!(
                            "all {cap} pages of {} bytes are in use",
                            inner.cfg.page_size
                        )));
                    }
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
            st.free_pages.push(pid);
            return Err(DbError::InvalidArg(
                "alloc_page without a free frame (call ensure_free first)".into(),
            ));
        };
        buf.as_mut_slice().fill(0);
        let ptr = buf.as_mut_slice().as_mut_ptr();
        let slot = st.free_slots.pop().expect("as many slots as frames");
        st.slots[slot] = Some(Slot {
            pid,
            state: SlotState::Resident,
            buf: Some(buf),
            dirty: true,
            referenced: true,
        });
        st.table.insert(pid, slot);
        inner.pins[slot].set(1);
        inner.dirty.set(inner.dirty.get() + 1);
        let v = &inner.versions[slot];
        v.set(v.get() + 1);
        Ok(PageGuard {
            inner: inner.clone(),
            slot,
            pid,
            ptr,
        })
    }

    /// Gives page `pid` back: its frame (if resident) is freed without a write and its id is
    /// reused. The caller holds no pin on it and it is not in an I/O (it was just pinned by
    /// the synchronous code that frees it).
    pub fn free_page(&self, pid: PageId) {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        if let Some(&slot) = st.table.get(&pid) {
            let s = st.slots[slot].as_ref().expect("live slot");
            assert_eq!(
                s.state,
                SlotState::Resident,
                "freeing page {pid} during its I/O"
            );
            if let Some(buf) = inner.release_slot(&mut st, slot) {
                st.free_bufs.push(buf);
            }
        }
        assert!(st.freed.insert(pid), "page {pid} freed twice");
        st.free_pages.push(pid);
        drop(st);
        inner.wake_frames();
    }

    /// Dirty resident pages.
    pub fn dirty_pages(&self) -> usize {
        self.inner.dirty.get()
    }

    /// Sets what is stamped as the LSN of pages changed from now on (the log's end).
    pub fn set_lsn_hint(&self, lsn: u64) {
        self.inner.lsn_hint.set(lsn);
    }

    /// Installs what eviction runs when a no-steal pool has only dirty pages left.
    pub fn set_checkpoint_hook(&self, hook: Option<CheckpointHook>) {
        *self.inner.checkpoint.borrow_mut() = hook;
    }

    /// A checkpoint's cut: sealed copies of every dirty page, taken at one instant (no task
    /// runs in between, and no task holds a page borrowed across an `await`). The pages stay
    /// dirty (so they are never evicted and reread before the checkpoint has written them)
    /// until [`mark_clean`](Self::mark_clean).
    pub fn snapshot_dirty(&self) -> Vec<DirtyPage> {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        let mut out = Vec::with_capacity(inner.dirty.get());
        for (slot, s) in st.slots.iter_mut().enumerate() {
            let Some(s) = s.as_mut() else { continue };
            if !s.dirty {
                continue;
            }
            assert_eq!(
                s.state,
                SlotState::Resident,
                "dirty page {} in an I/O without steal",
                s.pid
            );
            assert_eq!(
                inner.borrows[slot].get(),
                0,
                "page {} borrowed at a cut",
                s.pid
            );
            let mut image = ringdb_io::AlignedBuf::new(inner.cfg.page_size);
            image
                .as_mut_slice()
                .copy_from_slice(s.buf.as_ref().expect("resident frame").as_slice());
            page::seal(image.as_mut_slice(), s.pid);
            out.push(DirtyPage {
                pid: s.pid,
                image,
                slot,
                version: inner.versions[slot].get(),
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
            if st.table.get(&p.pid) != Some(&p.slot) || inner.versions[p.slot].get() != p.version {
                continue;
            }
            let s = st.slots[p.slot].as_mut().expect("live slot");
            if s.dirty {
                s.dirty = false;
                inner.dirty.set(inner.dirty.get() - 1);
            }
        }
        drop(st);
        inner.wake_frames();
    }

    /// Writes every dirty page (in batches), keeping them resident; with `sync`, then makes
    /// the data file durable.
    pub async fn flush_all(&self, sync: bool) -> Result<()> {
        let inner = &self.inner;
        // One pass over the slots; a page pinned (held across an await by some caller) is
        // skipped and stays dirty.
        let mut cursor = 0;
        loop {
            inner.check_poisoned()?;
            let batch = {
                let mut st = inner.state.borrow_mut();
                let mut batch = Vec::new();
                while cursor < st.slots.len() && batch.len() < inner.cfg.evict_batch {
                    let slot = cursor;
                    cursor += 1;
                    if inner.pins[slot].get() != 0 {
                        continue;
                    }
                    if let Some(s) = st.slots[slot].as_mut() {
                        if s.state == SlotState::Resident && s.dirty {
                            s.state = SlotState::Writing;
                            s.dirty = false;
                            inner.dirty.set(inner.dirty.get() - 1);
                            let mut buf = s.buf.take().expect("resident frame");
                            page::seal(buf.as_mut_slice(), s.pid);
                            batch.push((slot, s.pid, buf));
                        }
                    }
                }
                batch
            };
            if batch.is_empty() {
                break;
            }
            let mut first_err = None;
            for (slot, pid, r, buf) in self.write_pages(batch).await {
                let mut st = inner.state.borrow_mut();
                let s = st.slots[slot].as_mut().expect("writing slot is live");
                s.state = SlotState::Resident;
                s.buf = Some(buf);
                if let Err(e) = check_write(r, inner.cfg.page_size, pid) {
                    s.dirty = true;
                    inner.dirty.set(inner.dirty.get() + 1);
                    first_err.get_or_insert(e);
                }
                drop(st);
                inner.wake_io(pid);
            }
            inner.wake_frames();
            if let Some(e) = first_err {
                return Err(e);
            }
        }
        if sync {
            inner.io.fsync(inner.file, true).await?;
        }
        Ok(())
    }

    /// Writes sealed pages (slots in state `Writing`, frames taken out) in one submission
    /// (paper Sec. 3.3.1) and hands the frames back with the results. Dropped midway, it
    /// poisons the pool (see `Inner::poisoned`).
    async fn write_pages(
        &self,
        batch: Vec<(usize, PageId, PoolBuf)>,
    ) -> Vec<(usize, PageId, ringdb_io::Result<usize>, PoolBuf)> {
        let inner = &self.inner;
        let mut cancel = CancelWrites {
            inner: inner.clone(),
            armed: true,
        };
        let writes = join_all(batch.into_iter().map(|(slot, pid, buf)| async move {
            let (r, buf) = inner.io.write(inner.file, inner.offset(pid), buf).await;
            (slot, pid, r, buf)
        }));
        let results = inner.io.submit_together(writes).await;
        cancel.armed = false;
        inner.bump(|s| s.writes += results.len() as u64);
        results
    }

    /// A free frame, evicting a round when the pool runs low.
    async fn take_frame(&self) -> Result<PoolBuf> {
        let inner = &self.inner;
        loop {
            inner.check_poisoned()?;
            let (free, evicting) = (self.free_frames(), inner.evicting.get());
            if free < inner.cfg.free_target && !evicting {
                self.evict_round().await?;
                // The evictor serves itself first: otherwise the others can take every frame
                // it frees, round after round, and it never gets one (seen: a 2 s stall).
                if let Some(b) = inner.state.borrow_mut().free_bufs.pop() {
                    return Ok(b);
                }
                continue;
            }
            if let Some(b) = inner.state.borrow_mut().free_bufs.pop() {
                return Ok(b);
            }
            // A frame orphaned by a cancelled read comes back through the runtime's pool.
            if let Some(b) = inner.io.lease_buf() {
                return Ok(b);
            }
            inner.bump(|s| s.waits += 1);
            WaitFrame {
                inner: inner.clone(),
                registered: false,
            }
            .await;
        }
    }

    /// One round of clock-sweep: up to `evict_batch` victims, dirty ones written together.
    async fn evict_round(&self) -> Result<()> {
        let inner = &self.inner;
        assert!(!inner.evicting.get(), "one eviction round at a time");
        inner.evicting.set(true);
        let _flag = EvictingFlag {
            inner: inner.clone(),
        };
        inner.bump(|s| s.evict_rounds += 1);
        let mut dirty = Vec::new();
        let mut freed = 0u64;
        {
            let mut st = inner.state.borrow_mut();
            let n = st.slots.len();
            let mut victims = 0;
            for _ in 0..2 * n {
                if victims == inner.cfg.evict_batch {
                    break;
                }
                let slot = st.hand;
                st.hand = (st.hand + 1) % n;
                if inner.pins[slot].get() != 0 {
                    continue;
                }
                let Some(s) = st.slots[slot].as_mut() else {
                    continue;
                };
                if s.state != SlotState::Resident {
                    continue;
                }
                if s.dirty && !inner.cfg.steal {
                    continue;
                }
                if s.referenced {
                    s.referenced = false;
                    continue;
                }
                victims += 1;
                if s.dirty {
                    s.state = SlotState::Writing;
                    let mut buf = s.buf.take().expect("resident frame");
                    page::seal(buf.as_mut_slice(), s.pid);
                    dirty.push((slot, s.pid, buf));
                } else {
                    let buf = inner.release_slot(&mut st, slot).expect("resident frame");
                    st.free_bufs.push(buf);
                    freed += 1;
                }
            }
        }
        if freed > 0 {
            inner.wake_frames();
        }
        if dirty.is_empty() {
            inner.bump(|s| s.evicted += freed);
            let hook = inner.checkpoint.borrow().clone();
            if freed == 0 && !inner.cfg.steal && inner.dirty.get() > 0 {
                if let Some(hook) = hook {
                    // Every evictable page is dirty: only a checkpoint can make them clean.
                    drop(_flag);
                    return hook().await;
                }
            }
            if freed == 0 {
                // Nothing evictable now (pages in I/O or pinned): wait for a change.
                inner.bump(|s| s.waits += 1);
                WaitFrame {
                    inner: inner.clone(),
                    registered: false,
                }
                .await;
            }
            return Ok(());
        }
        let mut first_err = None;
        for (slot, pid, r, buf) in self.write_pages(dirty).await {
            let mut st = inner.state.borrow_mut();
            match check_write(r, inner.cfg.page_size, pid) {
                Ok(()) => {
                    let s = st.slots[slot].as_mut().expect("writing slot is live");
                    s.buf = Some(buf);
                    s.state = SlotState::Resident;
                    let b = inner.release_slot(&mut st, slot).expect("frame is back");
                    st.free_bufs.push(b);
                    freed += 1;
                }
                Err(e) => {
                    // The page stays resident and dirty: nothing is lost, the caller sees
                    // the error (EIO, ENOSPC).
                    let s = st.slots[slot].as_mut().expect("writing slot is live");
                    s.buf = Some(buf);
                    s.state = SlotState::Resident;
                    first_err.get_or_insert(e);
                }
            }
            drop(st);
            inner.wake_io(pid);
        }
        inner.bump(|s| s.evicted += freed);
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn check_write(r: ringdb_io::Result<usize>, page_size: usize, pid: PageId) -> Result<()> {
    match r {
        Ok(n) if n == page_size => Ok(()),
        Ok(n) => Err(DbError::Full(format!(
            "short write of page {pid}: {n} of {page_size} bytes"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Free frames set aside for one task (see [`BufferManager::reserve`]); they go back to the
/// free list when it is dropped.
pub struct Reservation {
    inner: Rc<Inner>,
    bufs: Vec<PoolBuf>,
}

impl Reservation {
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bufs.is_empty() {
            return;
        }
        self.inner
            .state
            .borrow_mut()
            .free_bufs
            .append(&mut self.bufs);
        self.inner.wake_frames();
    }
}

/// A pin on a resident page. Its bytes are reached through [`read`](Self::read) and
/// [`write`](Self::write), whose closures cannot `await`: a page is never borrowed while its
/// task is parked.
pub struct PageGuard {
    inner: Rc<Inner>,
    slot: usize,
    pid: PageId,
    ptr: *mut u8,
}

impl PageGuard {
    pub fn pid(&self) -> PageId {
        self.pid
    }

    /// Bumped on every `write`: a caller can tell whether the page changed.
    pub fn version(&self) -> u64 {
        self.inner.versions[self.slot].get()
    }

    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let b = &self.inner.borrows[self.slot];
        assert!(b.get() >= 0, "page {} read while written", self.pid);
        b.set(b.get() + 1);
        let _release = BorrowRelease { cell: b, by: -1 };
        // SAFETY: the frame is pinned, so it stays attached to this slot and is never moved
        // into an I/O (eviction and flush skip pinned pages) nor freed (`release_slot` asserts
        // no pins). The pool's memory does not move. The borrow counter rules out a
        // concurrent `write` of the same page, so no `&mut` aliases this slice.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.inner.cfg.page_size) };
        f(bytes)
    }

    /// Mutable access; marks the page dirty and bumps its version.
    pub fn write<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let b = &self.inner.borrows[self.slot];
        assert_eq!(b.get(), 0, "page {} written while borrowed", self.pid);
        b.set(-1);
        let _release = BorrowRelease { cell: b, by: 1 };
        {
            let mut st = self.inner.state.borrow_mut();
            let s = st.slots[self.slot].as_mut().expect("pinned slot");
            if !s.dirty {
                s.dirty = true;
                self.inner.dirty.set(self.inner.dirty.get() + 1);
            }
        }
        let v = &self.inner.versions[self.slot];
        v.set(v.get() + 1);
        // SAFETY: as in `read`; the counter is -1, so this is the only live slice of the page.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.inner.cfg.page_size) };
        let r = f(bytes);
        let lsn = self.inner.lsn_hint.get();
        if lsn > 0 {
            page::set_lsn(bytes, lsn);
        }
        r
    }
}

impl Drop for PageGuard {
    fn drop(&mut self) {
        let pins = &self.inner.pins[self.slot];
        debug_assert!(pins.get() > 0);
        pins.set(pins.get() - 1);
        if pins.get() == 0 && !self.inner.frame_waiters.borrow().is_empty() {
            self.inner.wake_frames();
        }
    }
}

struct BorrowRelease<'a> {
    cell: &'a Cell<i32>,
    by: i32,
}

impl Drop for BorrowRelease<'_> {
    fn drop(&mut self) {
        self.cell.set(self.cell.get() + self.by);
    }
}

struct EvictingFlag {
    inner: Rc<Inner>,
}

impl Drop for EvictingFlag {
    fn drop(&mut self) {
        self.inner.evicting.set(false);
        self.inner.wake_frames();
    }
}

/// Undoes a page read whose task was dropped: the slot goes away (the frame stays with the
/// runtime until the completion, then returns to its pool) and waiters retry.
struct CancelRead {
    inner: Rc<Inner>,
    slot: usize,
    pid: PageId,
    armed: bool,
}

impl Drop for CancelRead {
    fn drop(&mut self) {
        if self.armed {
            let mut st = self.inner.state.borrow_mut();
            self.inner.release_slot(&mut st, self.slot);
            drop(st);
            self.inner.wake_io(self.pid);
        }
    }
}

/// Marks the pool poisoned when writes are dropped mid-flight (see `Inner::poisoned`).
struct CancelWrites {
    inner: Rc<Inner>,
    armed: bool,
}

impl Drop for CancelWrites {
    fn drop(&mut self) {
        if self.armed {
            self.inner.poisoned.set(true);
            let pids: Vec<PageId> = self.inner.io_waiters.borrow().keys().copied().collect();
            for pid in pids {
                self.inner.wake_io(pid);
            }
            self.inner.wake_frames();
        }
    }
}

/// One admitted page read; frees its permit (and wakes the first waiter) when dropped.
struct LoadPermit {
    inner: Rc<Inner>,
}

impl Drop for LoadPermit {
    fn drop(&mut self) {
        self.inner.loads.set(self.inner.loads.get() - 1);
        wake_first_loader(&self.inner);
    }
}

fn wake_first_loader(inner: &Inner) {
    let w = inner.load_queue.borrow().front().map(|(_, w)| w.clone());
    if let Some(w) = w {
        w.wake();
    }
}

/// Waits in the load queue until this ticket is first and a permit is free; takes it.
struct WaitLoad {
    inner: Rc<Inner>,
    ticket: u64,
    queued: bool,
    done: bool,
}

impl Future for WaitLoad {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = self.inner.clone();
        let mut q = inner.load_queue.borrow_mut();
        if !self.queued {
            self.queued = true;
            q.push_back((self.ticket, cx.waker().clone()));
        }
        let first = q.front().is_some_and(|(t, _)| *t == self.ticket);
        if first && inner.loads.get() < inner.max_loads {
            q.pop_front();
            drop(q);
            inner.loads.set(inner.loads.get() + 1);
            self.done = true;
            // Permits may remain for the next in line.
            if inner.loads.get() < inner.max_loads {
                wake_first_loader(&inner);
            }
            return Poll::Ready(());
        }
        if let Some(e) = q.iter_mut().find(|(t, _)| *t == self.ticket) {
            if !e.1.will_wake(cx.waker()) {
                e.1 = cx.waker().clone();
            }
        }
        Poll::Pending
    }
}

impl Drop for WaitLoad {
    fn drop(&mut self) {
        if self.queued && !self.done {
            // Cancelled while queued: leave, and pass a wake-up on if it was ours.
            let was_first = {
                let mut q = self.inner.load_queue.borrow_mut();
                let first = q.front().is_some_and(|(t, _)| *t == self.ticket);
                q.retain(|(t, _)| *t != self.ticket);
                first
            };
            if was_first {
                wake_first_loader(&self.inner);
            }
        }
    }
}

/// Waits until the page `pid` is no longer in another task's I/O.
struct WaitIo {
    inner: Rc<Inner>,
    pid: PageId,
    registered: bool,
}

impl Future for WaitIo {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.registered || self.inner.poisoned.get() {
            return Poll::Ready(());
        }
        self.registered = true;
        self.inner
            .io_waiters
            .borrow_mut()
            .entry(self.pid)
            .or_default()
            .push(cx.waker().clone());
        Poll::Pending
    }
}

/// Waits for the next change in the free frames (a frame freed, a round ended, a pin gone).
struct WaitFrame {
    inner: Rc<Inner>,
    registered: bool,
}

impl Future for WaitFrame {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.registered || self.inner.poisoned.get() {
            return Poll::Ready(());
        }
        self.registered = true;
        self.inner
            .frame_waiters
            .borrow_mut()
            .push(cx.waker().clone());
        Poll::Pending
    }
}
