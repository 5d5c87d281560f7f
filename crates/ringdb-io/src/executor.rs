//! A single-threaded executor whose tasks park on I/O (the paper's fibers, Sec. 3.3.2, as
//! stackless futures), over one [`Engine`] owned by the thread (ring per thread).
//!
//! # The loop
//! One *pass* polls every task that was ready when the pass began, once (each may queue
//! requests; tasks woken during the pass run in the next one, so a task spinning on
//! [`yield_now`] cannot starve the I/O). Then: hand queued requests to the kernel as the
//! [`Batching`] policy says -> reap completions -> wake their tasks. When no task is ready, what
//! is queued goes to the kernel together with the wait (one `io_uring_enter`). When no task is
//! ready and nothing is in flight while tasks still wait, [`Runtime::block_on`] and
//! [`Runtime::run`] return an "executor stalled" error instead of hanging.
//!
//! # Batching (paper Sec. 3.3.3)
//! - [`Batching::Each`]: every request is submitted right after it is queued (one enter each).
//! - [`Batching::Fixed`]`(n)`: submit once `n` requests are queued; otherwise they wait until no
//!   task is ready (and go out with the wait), the ring is full, or a pass queued nothing new
//!   (so a task spinning on `yield_now` cannot hold back requests it waits for).
//! - [`Batching::Adaptive`]: after each request, if fewer than
//!   [`adaptive_low_water`](crate::config::adaptive_low_water)`(depth) = max(1, depth / 4)` requests are *at the device*
//!   (`in_flight - pending`) or [`ADAPTIVE_MAX_BATCH`](crate::config::ADAPTIVE_MAX_BATCH) (8) are queued, submit at once so the
//!   device does not idle; otherwise defer, and flush at the end of the pass (or with the wait
//!   when no task is ready). A quarter of the depth still outstanding covers the time one
//!   pass of the executor takes to refill, while deep queues get batches of up to 8 per enter.
//!   The flush is skipped when no other task is ready, since the wait that follows carries the
//!   request anyway. The rule itself is [`Batching::flush_now`] in `config.rs`.
//!
//! # Buffers and in-flight safety
//! Buffers pass by value into an I/O and come back with its result (`(Result, B)`), so the
//! runtime owns them while the kernel may write into them. When an I/O future is dropped while
//! its request is in flight (e.g. its task is dropped), its buffer moves into the runtime's
//! orphan table, keyed by the request's slot, and is released only when the completion is
//! reaped. Dropping the runtime drops the tasks, then waits for every completion, and only then
//! releases the orphans, the buffer pool and the engine. If that wait fails, the orphans and
//! the pool are leaked rather than freed under the kernel.
//!
//! # Ring depth
//! A request that finds the engine full (`in_flight == depth`), or other requests already
//! waiting, parks in a FIFO and is woken when a completion frees a slot: no busy loop, no error.
//! A parked future that is dropped leaves the FIFO and passes its wake-up on.
//!
//! # Wakers
//! Wakers are ordinary `std::task::Waker`s built from an `Arc` (no unsafe code): waking pushes
//! the task's id onto a mutex-protected ready queue, at most once until the task is polled.
//! They are `Send` and may be woken from any thread, but the runtime is driven by its own
//! thread only: a wake from another thread does not interrupt a blocking wait, and the stall
//! check cannot know about it. Waking a finished task is harmless (ids carry a generation).

use crate::buf::{AlignedBuf, FixedBufferPool};
use crate::config::{Batching, IoConfig};
use crate::engine::{open_engine, Engine, EngineStats, FileId, IoCompletion, IoRequest, OpKind};
use crate::error::{IoError, Result};
use serde::Serialize;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

/// Memory an I/O can read into or write from, passed by value to the runtime for the I/O's
/// duration.
///
/// # Safety
/// Implementors promise that:
/// - `stable_ptr` returns a pointer valid for reads and writes of `bytes_len` bytes, and every
///   call returns the same pointer and length while the value lives, even if the value itself
///   is moved (the memory must be on the heap or otherwise not inside the value);
/// - that memory stays allocated for as long as the value lives, and is not freed or reused
///   before the value is dropped;
/// - nothing but the value's owner accesses that memory: while the runtime holds the value (an
///   I/O is in flight) the kernel may write into it at any time.
///
/// The runtime, in turn, drops the value only after the I/O's completion has been reaped.
/// `fixed_index` is a hint: the runtime uses it only when the memory lies inside the runtime's
/// own registered buffer with that index, and otherwise issues a plain read or write.
pub unsafe trait IoBuf: 'static {
    fn stable_ptr(&mut self) -> *mut u8;
    fn bytes_len(&self) -> usize;
    /// Registration index when the memory lies in the runtime's registered pool.
    fn fixed_index(&self) -> Option<u16> {
        None
    }
}

// SAFETY: AlignedBuf owns a heap allocation of `len()` bytes that does not move when the value
// moves and is freed only in its Drop.
unsafe impl IoBuf for AlignedBuf {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len()
    }
}

// SAFETY: a Vec's heap buffer does not move when the Vec moves, and the runtime never resizes
// it; `len()` bytes are initialised and owned by the Vec. (For O_DIRECT use AlignedBuf.)
unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len()
    }
}

/// A FIFO of parked futures, each known by its ticket. Woken entries stay queued until their
/// future takes what it waited for (or is dropped), so a wake-up is never lost.
#[derive(Default)]
struct Fifo {
    next: Cell<u64>,
    q: RefCell<VecDeque<(u64, Waker)>>,
}

impl Fifo {
    fn is_empty(&self) -> bool {
        self.q.borrow().is_empty()
    }

    fn len(&self) -> usize {
        self.q.borrow().len()
    }

    fn park(&self, waker: &Waker) -> u64 {
        let t = self.next.get();
        self.next.set(t + 1);
        self.q.borrow_mut().push_back((t, waker.clone()));
        t
    }

    /// Whether `ticket` is among the first `room` entries; if so it leaves the queue, else its
    /// waker is refreshed.
    fn try_leave(&self, ticket: u64, room: usize, waker: &Waker) -> bool {
        let mut q = self.q.borrow_mut();
        match q.iter().position(|(t, _)| *t == ticket) {
            Some(pos) if pos < room => {
                q.remove(pos);
                true
            }
            Some(pos) => {
                if !q[pos].1.will_wake(waker) {
                    q[pos].1 = waker.clone();
                }
                false
            }
            None => {
                // Not queued (cannot happen): behave as a newcomer at the back.
                if room > 0 && q.is_empty() {
                    return true;
                }
                q.push_back((ticket, waker.clone()));
                false
            }
        }
    }

    fn cancel(&self, ticket: u64) {
        self.q.borrow_mut().retain(|(t, _)| *t != ticket);
    }

    /// Wakes the first `n` entries (they stay queued until they take their turn).
    fn wake_first(&self, n: usize) {
        let wakers: Vec<Waker> = self
            .q
            .borrow()
            .iter()
            .take(n)
            .map(|(_, w)| w.clone())
            .collect();
        // Woken outside the borrow: a waker may be anything, including code that parks again.
        for w in wakers {
            w.wake();
        }
    }
}

/// The registered pool shared by the runtime and the buffers leased from it.
struct SharedPool {
    pool: FixedBufferPool,
    /// The registration, in index order, when the pool is registered with the ring.
    registered: Option<Vec<libc::iovec>>,
    free: RefCell<Vec<usize>>,
    waiters: Fifo,
}

impl SharedPool {
    fn wake_waiters(&self) {
        self.waiters.wake_first(self.free.borrow().len());
    }
}

/// A buffer leased from the runtime's pool (see [`Io::lease_buf`], [`Io::lease`]); it returns
/// to the pool's free list when dropped. When the pool is registered with the ring
/// (`IoConfig::fixed_buffers`), I/O on it uses `READ_FIXED`/`WRITE_FIXED`.
pub struct PoolBuf {
    shared: Rc<SharedPool>,
    index: usize,
}

impl PoolBuf {
    /// Index of this buffer in the pool.
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn len(&self) -> usize {
        self.shared.pool.buf_len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the pool's memory is initialised (zeroed at allocation) and lives as long as
        // `shared`; this lease is the only owner of buffer `index`, and no I/O is in flight on
        // it while the caller can reach the PoolBuf (I/Os take it by value). The slice is built
        // from the raw pointer so that no reference to other leases' buffers is created.
        unsafe { std::slice::from_raw_parts(self.shared.pool.ptr(self.index), self.len()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.shared.pool.ptr(self.index), self.len()) }
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        self.shared.free.borrow_mut().push(self.index);
        self.shared.wake_waiters();
    }
}

// SAFETY: the pool's memory is one heap allocation that lives as long as `shared` (an Rc held
// by this value), does not move, and buffer `index` is leased exclusively to this value.
unsafe impl IoBuf for PoolBuf {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.shared.pool.ptr(self.index)
    }
    fn bytes_len(&self) -> usize {
        self.shared.pool.buf_len()
    }
    fn fixed_index(&self) -> Option<u16> {
        self.shared
            .registered
            .as_ref()
            .map(|_| self.shared.pool.fixed_index(self.index))
    }
}

/// What the runtime counts, beside its engine's counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RuntimeStats {
    pub engine: EngineStats,
    pub tasks_spawned: u64,
    /// Polls of tasks and of `block_on`'s future.
    pub polls: u64,
    /// Submits by the runtime that handed at least one request to the kernel.
    pub submit_batches: u64,
    /// Requests per such submit.
    pub requests_per_batch: f64,
    /// Times the loop blocked in the kernel waiting for completions.
    pub waits: u64,
    /// Buffers of dropped I/O futures released once their completion arrived.
    pub orphans_released: u64,
}

/// One request slot: the waker of the future waiting for it, or what a dropped future left.
#[derive(Default)]
struct OpSlot {
    result: Option<i32>,
    waker: Option<Waker>,
    /// The buffer of a future dropped while its request was in flight.
    orphan: Option<Box<dyn Any>>,
    /// The future is gone; free the slot when the completion arrives.
    abandoned: bool,
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Task ids (with their generation) woken and not yet polled.
#[derive(Default)]
struct ReadyQueue(Mutex<VecDeque<(usize, u64)>>);

impl ReadyQueue {
    fn lock(&self) -> MutexGuard<'_, VecDeque<(usize, u64)>> {
        // Nothing panics while holding the lock; recover from poison anyway.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct TaskWaker {
    id: usize,
    gen: u64,
    /// Already in the ready queue: further wakes before the next poll are no-ops.
    queued: AtomicBool,
    queue: Arc<ReadyQueue>,
}

impl TaskWaker {
    fn new(id: usize, gen: u64, queue: Arc<ReadyQueue>) -> Arc<Self> {
        Arc::new(TaskWaker {
            id,
            gen,
            queued: AtomicBool::new(false),
            queue,
        })
    }
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.queue.lock().push_back((self.id, self.gen));
        }
    }
}

/// One slab entry. Free: no waker. Running (being polled): waker but no future.
#[derive(Default)]
struct TaskSlot {
    gen: u64,
    fut: Option<Task>,
    waker: Option<Arc<TaskWaker>>,
}

/// The id under which `block_on`'s own future is woken.
const MAIN_TASK: usize = usize::MAX;

struct Inner {
    engine: RefCell<Box<dyn Engine>>,
    batching: Batching,
    ops: RefCell<Vec<OpSlot>>,
    free_ops: RefCell<Vec<usize>>,
    /// Requests waiting for the engine to have room (in_flight == depth).
    depth_waiters: Fifo,
    tasks: RefCell<Vec<TaskSlot>>,
    free_tasks: RefCell<Vec<usize>>,
    live_tasks: Cell<usize>,
    next_gen: Cell<u64>,
    ready: Arc<ReadyQueue>,
    pool: Option<Rc<SharedPool>>,
    stats: Cell<RuntimeStats>,
    batched_requests: Cell<u64>,
    /// Requests pushed so far (to tell whether a pass queued anything).
    pushes: Cell<u64>,
    /// An engine failure met inside a task's poll, reported by the loop.
    failed: RefCell<Option<IoError>>,
    /// The Runtime is gone: no new tasks or requests.
    closed: Cell<bool>,
    /// Draining failed: the orphans and the pool were leaked on purpose.
    leaked: Cell<bool>,
    /// While non-zero, new requests stay queued whatever the batching policy says
    /// ([`Io::submit_together`]).
    hold: Cell<u32>,
}

impl Inner {
    fn bump(&self, f: impl FnOnce(&mut RuntimeStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    fn has_ready(&self) -> bool {
        !self.ready.lock().is_empty()
    }

    fn next_gen(&self) -> u64 {
        let g = self.next_gen.get() + 1;
        self.next_gen.set(g);
        g
    }

    fn room(&self) -> usize {
        let e = self.engine.borrow();
        e.depth().saturating_sub(e.in_flight())
    }

    /// Hands queued requests to the kernel (waiting for `wait_for` completions).
    fn submit(&self, wait_for: usize) -> Result<()> {
        let mut e = self.engine.borrow_mut();
        let before = e.stats().submitted;
        let r = e.submit(wait_for);
        let n = e.stats().submitted - before;
        drop(e);
        self.bump(|s| {
            if wait_for > 0 {
                s.waits += 1;
            }
            if n > 0 {
                s.submit_batches += 1;
            }
        });
        self.batched_requests.set(self.batched_requests.get() + n);
        r
    }

    /// Reaps ready completions, wakes their futures and releases orphans; returns how many.
    fn reap(&self, scratch: &mut Vec<IoCompletion>) -> usize {
        scratch.clear();
        let n = self.engine.borrow_mut().reap(scratch);
        let mut wake = Vec::new();
        let mut orphans = Vec::new();
        {
            let mut ops = self.ops.borrow_mut();
            for c in scratch.iter() {
                let id = c.user_data as usize;
                let Some(slot) = ops.get_mut(id) else {
                    debug_assert!(false, "completion for unknown slot {id}");
                    continue;
                };
                if slot.abandoned {
                    // The future that asked is gone: the kernel is done with its buffer now.
                    orphans.extend(slot.orphan.take());
                    *slot = OpSlot::default();
                    self.free_ops.borrow_mut().push(id);
                } else {
                    slot.result = Some(c.result);
                    wake.extend(slot.waker.take());
                }
            }
        }
        let released = orphans.len() as u64;
        // Dropped outside the borrow: a PoolBuf's drop wakes lease waiters.
        drop(orphans);
        if released > 0 {
            self.bump(|s| s.orphans_released += released);
        }
        for w in wake {
            w.wake();
        }
        if n > 0 {
            self.depth_waiters.wake_first(self.room());
        }
        n
    }

    fn alloc_slot(&self) -> usize {
        let mut ops = self.ops.borrow_mut();
        self.free_ops.borrow_mut().pop().unwrap_or_else(|| {
            ops.push(OpSlot::default());
            ops.len() - 1
        })
    }

    fn free_slot(&self, id: usize) {
        self.ops.borrow_mut()[id] = OpSlot::default();
        self.free_ops.borrow_mut().push(id);
    }

    /// Whether requests still queued at the end of a pass go to the kernel now.
    fn flush_at_end_of_pass(&self, pass_pushed: bool) -> bool {
        let e = self.engine.borrow();
        let pending = e.pending();
        pending > 0
            && match self.batching {
                Batching::Each | Batching::Adaptive => true,
                Batching::Fixed(n) => {
                    pending >= n as usize || e.in_flight() >= e.depth() || !pass_pushed
                }
            }
    }

    /// Waits for every request in flight, routing completions as usual (orphans are released,
    /// live futures get their results). On failure the orphans and the pool are leaked: the
    /// kernel may still write into them.
    fn drain(&self) {
        if self.leaked.get() {
            return;
        }
        let mut scratch = Vec::new();
        let mut r = Ok(());
        while self.engine.borrow().in_flight() > 0 {
            if let Err(e) = self.submit(1) {
                r = Err(e);
                break;
            }
            self.reap(&mut scratch);
        }
        if r.is_err() {
            self.leaked.set(true);
            let ops = std::mem::take(&mut *self.ops.borrow_mut());
            std::mem::forget(ops);
            if let Some(p) = &self.pool {
                std::mem::forget(p.clone());
            }
        }
    }

    fn spawn_task(&self, task: Task) {
        if self.closed.get() {
            return; // the runtime is gone; the future is dropped unpolled
        }
        let gen = self.next_gen();
        let id = self.free_tasks.borrow_mut().pop().unwrap_or_else(|| {
            let mut t = self.tasks.borrow_mut();
            t.push(TaskSlot::default());
            t.len() - 1
        });
        let waker = TaskWaker::new(id, gen, self.ready.clone());
        self.tasks.borrow_mut()[id] = TaskSlot {
            gen,
            fut: Some(task),
            waker: Some(waker.clone()),
        };
        self.live_tasks.set(self.live_tasks.get() + 1);
        self.bump(|s| s.tasks_spawned += 1);
        waker.wake_by_ref();
    }

    /// Polls task `id` once if it is still the task that was woken.
    fn poll_task(&self, id: usize, gen: u64) {
        let (mut fut, waker) = {
            let mut tasks = self.tasks.borrow_mut();
            let Some(slot) = tasks.get_mut(id) else {
                return;
            };
            if slot.gen != gen {
                return; // a finished task's stale wake-up
            }
            let (Some(fut), Some(w)) = (slot.fut.take(), slot.waker.clone()) else {
                return;
            };
            (fut, w)
        };
        waker.queued.store(false, Ordering::Release);
        let waker = Waker::from(waker);
        self.bump(|s| s.polls += 1);
        // The slab is not borrowed while the task runs: it may spawn.
        match fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(()) => {
                drop(fut);
                let mut tasks = self.tasks.borrow_mut();
                tasks[id].waker = None;
                self.free_tasks.borrow_mut().push(id);
                self.live_tasks.set(self.live_tasks.get() - 1);
            }
            Poll::Pending => self.tasks.borrow_mut()[id].fut = Some(fut),
        }
    }

    /// One pass: polls every task ready when the pass began, once. `main` polls `block_on`'s
    /// future (under generation `main_gen`) and says whether it finished; then the pass stops.
    fn run_pass(&self, main_gen: u64, main: &mut dyn FnMut() -> bool) -> bool {
        let n = self.ready.lock().len();
        for _ in 0..n {
            let Some((id, gen)) = self.ready.lock().pop_front() else {
                break;
            };
            if id == MAIN_TASK {
                if gen == main_gen && main() {
                    return true;
                }
                continue;
            }
            self.poll_task(id, gen);
        }
        false
    }

    fn stall_error(&self, what: &str) -> IoError {
        IoError::InvalidArg(format!(
            "executor stalled: {what}, but no task is ready and no I/O is in flight \
             ({} tasks parked, {} requests waiting for ring room); a future waits for something \
             only this thread could provide",
            self.live_tasks.get(),
            self.depth_waiters.len()
        ))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Runs before the fields are dropped (engine first, then the orphans, then the pool):
        // no buffer may go before its completion. A no-op after Runtime::drop drained.
        self.drain();
    }
}

/// The executor. Not `Send`: it belongs to the thread that made it, like its ring.
pub struct Runtime {
    inner: Rc<Inner>,
    scratch: Vec<IoCompletion>,
}

/// The handle tasks use for I/O and spawning. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct Io {
    inner: Rc<Inner>,
}

impl Runtime {
    pub fn new(engine: Box<dyn Engine>, batching: Batching) -> Runtime {
        Self::build(engine, batching, None, false)
    }

    /// A runtime over an engine opened elsewhere (e.g. a simulated disk), owning `pool`
    /// (not registered with the engine) to lease its buffers.
    pub fn with_pool(
        engine: Box<dyn Engine>,
        batching: Batching,
        pool: FixedBufferPool,
    ) -> Runtime {
        Self::build(engine, batching, Some(pool), false)
    }

    /// Opens the engine `cfg` names over `files`. With `cfg.fixed_buffers`, `pool` is
    /// registered with the ring; either way the runtime owns it (it outlives the engine) and
    /// leases its buffers ([`Io::lease_buf`], [`Io::lease`]).
    pub fn from_config(
        cfg: &IoConfig,
        files: &[RawFd],
        pool: Option<FixedBufferPool>,
    ) -> Result<Runtime> {
        Self::from_config_wrapped(cfg, files, pool, Ok)
    }

    /// [`Runtime::from_config`], with the opened engine passed through `wrap` (e.g. into a
    /// [`crate::engine::RegionEngine`]) before the runtime takes it.
    pub fn from_config_wrapped(
        cfg: &IoConfig,
        files: &[RawFd],
        pool: Option<FixedBufferPool>,
        wrap: impl FnOnce(Box<dyn Engine>) -> Result<Box<dyn Engine>>,
    ) -> Result<Runtime> {
        let iov = pool.as_ref().map(FixedBufferPool::iovecs);
        if cfg.fixed_buffers && iov.is_none() {
            return Err(IoError::InvalidArg(
                "fixed buffers need a buffer pool to register; pass one to Runtime::from_config"
                    .into(),
            ));
        }
        let registered = cfg.fixed_buffers && cfg.engine.is_uring();
        let engine = open_engine(cfg, files, if registered { iov.as_deref() } else { None })?;
        let engine = wrap(engine)?;
        Ok(Self::build(engine, cfg.batching, pool, registered))
    }

    fn build(
        engine: Box<dyn Engine>,
        batching: Batching,
        pool: Option<FixedBufferPool>,
        registered: bool,
    ) -> Runtime {
        let pool = pool.map(|pool| {
            Rc::new(SharedPool {
                registered: registered.then(|| pool.iovecs()),
                free: RefCell::new((0..pool.count()).rev().collect()),
                pool,
                waiters: Fifo::default(),
            })
        });
        Runtime {
            inner: Rc::new(Inner {
                engine: RefCell::new(engine),
                batching,
                ops: RefCell::new(Vec::new()),
                free_ops: RefCell::new(Vec::new()),
                depth_waiters: Fifo::default(),
                tasks: RefCell::new(Vec::new()),
                free_tasks: RefCell::new(Vec::new()),
                live_tasks: Cell::new(0),
                next_gen: Cell::new(0),
                ready: Arc::new(ReadyQueue::default()),
                pool,
                stats: Cell::new(RuntimeStats::default()),
                batched_requests: Cell::new(0),
                pushes: Cell::new(0),
                failed: RefCell::new(None),
                closed: Cell::new(false),
                leaked: Cell::new(false),
                hold: Cell::new(0),
            }),
            scratch: Vec::new(),
        }
    }

    pub fn io(&self) -> Io {
        Io {
            inner: self.inner.clone(),
        }
    }

    pub fn batching(&self) -> Batching {
        self.inner.batching
    }

    /// Starts a task; it runs when the runtime runs (`block_on`, `run`).
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        self.io().spawn(fut)
    }

    /// Tasks spawned and not finished.
    pub fn live_tasks(&self) -> usize {
        self.inner.live_tasks.get()
    }

    pub fn stats(&self) -> RuntimeStats {
        let mut s = self.inner.stats.get();
        s.engine = self.inner.engine.borrow().stats();
        s.requests_per_batch = if s.submit_batches == 0 {
            0.0
        } else {
            self.inner.batched_requests.get() as f64 / s.submit_batches as f64
        };
        s
    }

    /// Runs `fut` and every spawned task until `fut` finishes (other tasks may remain; they run
    /// on the next `block_on` or `run`). Fails when the engine fails, or when nothing can make
    /// progress (no task ready, no I/O in flight): a stall, not a hang.
    pub fn block_on<T>(&mut self, fut: impl Future<Output = T>) -> Result<T> {
        let mut fut = std::pin::pin!(fut);
        let inner = self.inner.clone();
        let gen = inner.next_gen();
        let main = TaskWaker::new(MAIN_TASK, gen, inner.ready.clone());
        let main_waker = Waker::from(main.clone());
        main.wake_by_ref();
        let mut out = None;
        loop {
            let pushes = inner.pushes.get();
            let finished = inner.run_pass(gen, &mut || {
                main.queued.store(false, Ordering::Release);
                inner.bump(|s| s.polls += 1);
                match fut.as_mut().poll(&mut Context::from_waker(&main_waker)) {
                    Poll::Ready(v) => {
                        out = Some(v);
                        true
                    }
                    Poll::Pending => false,
                }
            });
            if finished {
                if let Some(v) = out.take() {
                    return Ok(v);
                }
            }
            if !self.progress(pushes)? {
                return Err(inner.stall_error("the main future is pending"));
            }
        }
    }

    /// Runs until every spawned task has finished and no request is in flight (requests of
    /// dropped futures included, so their buffers are released).
    pub fn run(&mut self) -> Result<()> {
        let inner = self.inner.clone();
        loop {
            let pushes = inner.pushes.get();
            inner.run_pass(0, &mut || false);
            if inner.live_tasks.get() == 0 && inner.engine.borrow().in_flight() == 0 {
                return Ok(());
            }
            if !self.progress(pushes)? {
                return Err(inner.stall_error("tasks are pending"));
            }
        }
    }

    /// Same as [`Runtime::run`].
    pub fn run_until_idle(&mut self) -> Result<()> {
        self.run()
    }

    /// After a pass: flush, reap, and if nothing is ready, submit together with the wait.
    /// Returns false when nothing can make progress.
    fn progress(&mut self, pushes_before_pass: u64) -> Result<bool> {
        let inner = &*self.inner;
        if let Some(e) = inner.failed.borrow_mut().take() {
            return Err(e);
        }
        if inner.reap(&mut self.scratch) > 0 || inner.has_ready() {
            if inner.flush_at_end_of_pass(inner.pushes.get() != pushes_before_pass) {
                inner.submit(0)?;
            }
            return Ok(true);
        }
        if inner.engine.borrow().in_flight() == 0 {
            // Last chance before calling it a stall: parked futures whose wake-up went to a
            // waker that does not reach this runtime get another one.
            inner.depth_waiters.wake_first(inner.room());
            if let Some(p) = &inner.pool {
                p.wake_waiters();
            }
            return Ok(inner.has_ready());
        }
        // Nothing to run: submit what is queued together with the wait (one enter).
        inner.submit(1)?;
        inner.reap(&mut self.scratch);
        Ok(true)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let inner = &self.inner;
        inner.closed.set(true);
        // Tasks go first (their in-flight buffers move to the orphan slots); dropping a task may
        // run code that touches the runtime, so the slab is not borrowed meanwhile.
        loop {
            let tasks = std::mem::take(&mut *inner.tasks.borrow_mut());
            if tasks.is_empty() {
                break;
            }
            drop(tasks);
        }
        inner.free_tasks.borrow_mut().clear();
        inner.live_tasks.set(0);
        // Then every completion is waited for, and only then are the orphans released. The
        // pool and the engine go with the last Io handle (Inner's fields: engine first).
        inner.drain();
    }
}

/// The output of a spawned task; a future. Dropping it detaches the task.
pub struct JoinHandle<T> {
    state: Rc<RefCell<JoinState<T>>>,
}

struct JoinState<T> {
    value: Option<T>,
    done: bool,
    waker: Option<Waker>,
}

impl<T> JoinHandle<T> {
    /// Whether the task has finished.
    pub fn is_finished(&self) -> bool {
        self.state.borrow().done
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut st = self.state.borrow_mut();
        match st.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Lets the other ready tasks (and the I/O loop) run before the caller continues.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future of [`yield_now`].
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl Io {
    /// Starts a task on this runtime. After the runtime is dropped the future is dropped
    /// unpolled and the handle never resolves.
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        let state = Rc::new(RefCell::new(JoinState {
            value: None,
            done: false,
            waker: None,
        }));
        let st = state.clone();
        self.inner.spawn_task(Box::pin(async move {
            let v = fut.await;
            let waker = {
                let mut s = st.borrow_mut();
                s.value = Some(v);
                s.done = true;
                s.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }));
        JoinHandle { state }
    }

    /// Reads `buf.bytes_len()` bytes at `offset` into `buf`; returns the byte count (short at
    /// end of file: the caller decides).
    pub async fn read<B: IoBuf>(&self, file: FileId, offset: u64, buf: B) -> (Result<usize>, B) {
        self.rw(OpKind::Read, file, offset, buf).await
    }

    /// Writes `buf` at `offset`; returns the byte count.
    pub async fn write<B: IoBuf>(&self, file: FileId, offset: u64, buf: B) -> (Result<usize>, B) {
        self.rw(OpKind::Write, file, offset, buf).await
    }

    async fn rw<B: IoBuf>(
        &self,
        op: OpKind,
        file: FileId,
        offset: u64,
        mut buf: B,
    ) -> (Result<usize>, B) {
        let Ok(len) = u32::try_from(buf.bytes_len()) else {
            return (
                Err(IoError::InvalidArg(format!(
                    "one {} moves less than 4 GiB, got a {}-byte buffer",
                    op.name(),
                    buf.bytes_len()
                ))),
                buf,
            );
        };
        let ptr = buf.stable_ptr();
        let req = IoRequest {
            op,
            file,
            offset,
            buf: ptr,
            len,
            buf_index: self.checked_fixed_index(buf.fixed_index(), ptr, len as usize),
            user_data: 0,
        };
        let (res, buf) = OpFuture::new(self.inner.clone(), req, Some(buf)).await;
        let buf = buf.expect("an OpFuture returns the buffer it was given");
        (res.map(|n| n as usize), buf)
    }

    /// `idx` if `[ptr, ptr + len)` lies inside this runtime's registered buffer `idx`.
    fn checked_fixed_index(&self, idx: Option<u16>, ptr: *mut u8, len: usize) -> Option<u16> {
        let idx = idx?;
        let iov = self
            .inner
            .pool
            .as_ref()?
            .registered
            .as_ref()?
            .get(idx as usize)?;
        let (base, p) = (iov.iov_base as usize, ptr as usize);
        (p >= base && p.checked_add(len)? <= base + iov.iov_len).then_some(idx)
    }

    /// `fsync` (or `fdatasync` with `datasync`) of `file`.
    pub async fn fsync(&self, file: FileId, datasync: bool) -> Result<()> {
        let op = if datasync {
            OpKind::Fdatasync
        } else {
            OpKind::Fsync
        };
        let req = IoRequest::sync(op, file, 0);
        OpFuture::<AlignedBuf>::new(self.inner.clone(), req, None)
            .await
            .0
            .map(|_| ())
    }

    /// A request that does nothing: the pure cost of the submission path.
    pub async fn nop(&self) -> Result<()> {
        OpFuture::<AlignedBuf>::new(self.inner.clone(), IoRequest::nop(0), None)
            .await
            .0
            .map(|_| ())
    }

    /// A free buffer of the runtime's pool, if one is free and nobody waits for one.
    pub fn lease_buf(&self) -> Option<PoolBuf> {
        let shared = self.inner.pool.as_ref()?;
        if !shared.waiters.is_empty() {
            return None;
        }
        let index = shared.free.borrow_mut().pop()?;
        Some(PoolBuf {
            shared: shared.clone(),
            index,
        })
    }

    /// A buffer of the runtime's pool, waiting (FIFO) for one to be returned if all are
    /// leased. Fails at once when the runtime has no pool.
    pub async fn lease(&self) -> Result<PoolBuf> {
        let shared = self.inner.pool.clone().ok_or_else(|| {
            IoError::InvalidArg(
                "this runtime has no buffer pool; pass one to Runtime::from_config".into(),
            )
        })?;
        Ok(Lease {
            shared,
            ticket: None,
        }
        .await)
    }

    /// Lets the other ready tasks (and the I/O loop) run before this one continues.
    pub async fn yield_now(&self) {
        yield_now().await
    }

    /// Runs `fut` so that the requests its first poll queues go to the kernel together, in
    /// one submission, whatever the batching policy (e.g. a batch of eviction writes under
    /// [`Batching::Each`]). When no other task is ready they go out with the loop's wait.
    pub fn submit_together<F: Future>(&self, fut: F) -> SubmitTogether<F> {
        SubmitTogether {
            inner: self.inner.clone(),
            fut: Box::pin(fut),
            first: true,
        }
    }
}

/// The future of [`Io::submit_together`].
pub struct SubmitTogether<F: Future> {
    inner: Rc<Inner>,
    fut: Pin<Box<F>>,
    first: bool,
}

impl<F: Future> Future for SubmitTogether<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if !self.first {
            return self.fut.as_mut().poll(cx);
        }
        self.first = false;
        let inner = self.inner.clone();
        inner.hold.set(inner.hold.get() + 1);
        let r = self.fut.as_mut().poll(cx);
        inner.hold.set(inner.hold.get() - 1);
        if inner.hold.get() == 0 && inner.has_ready() && inner.engine.borrow().pending() > 0 {
            if let Err(e) = inner.submit(0) {
                inner.failed.borrow_mut().get_or_insert(e);
            }
        }
        r
    }
}

/// Waits for a free buffer of the pool, in FIFO order.
struct Lease {
    shared: Rc<SharedPool>,
    ticket: Option<u64>,
}

impl Future for Lease {
    type Output = PoolBuf;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<PoolBuf> {
        let this = &mut *self;
        let sh = &this.shared;
        let free = sh.free.borrow().len();
        let go = match this.ticket {
            None => free > 0 && sh.waiters.is_empty(),
            Some(t) => sh.waiters.try_leave(t, free, cx.waker()),
        };
        if go {
            if let Some(index) = sh.free.borrow_mut().pop() {
                this.ticket = None;
                return Poll::Ready(PoolBuf {
                    shared: sh.clone(),
                    index,
                });
            }
        }
        if this.ticket.is_none() {
            this.ticket = Some(sh.waiters.park(cx.waker()));
        }
        Poll::Pending
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(t) = self.ticket {
            // Leave the queue; a wake-up meant for this lease goes to the next waiter.
            self.shared.waiters.cancel(t);
            self.shared.wake_waiters();
        }
    }
}

enum OpState {
    Idle,
    /// Waiting for ring room under this ticket of `depth_waiters`.
    Parked(u64),
    InFlight(usize),
    Done,
}

/// One request's future: queues it on first poll (or parks while the ring is full), then waits
/// for its completion. Holds the buffer; on drop while in flight, hands it to the runtime.
struct OpFuture<B: IoBuf> {
    inner: Rc<Inner>,
    req: IoRequest,
    buf: Option<B>,
    state: OpState,
}

impl<B: IoBuf> OpFuture<B> {
    fn new(inner: Rc<Inner>, req: IoRequest, buf: Option<B>) -> Self {
        OpFuture {
            inner,
            req,
            buf,
            state: OpState::Idle,
        }
    }

    fn finish(&mut self, r: Result<i32>) -> Poll<(Result<i32>, Option<B>)> {
        self.state = OpState::Done;
        Poll::Ready((r, self.buf.take()))
    }
}

// OpFuture holds no self-references: moving it is fine.
impl<B: IoBuf> Unpin for OpFuture<B> {}

impl<B: IoBuf> Future for OpFuture<B> {
    type Output = (Result<i32>, Option<B>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let inner = this.inner.clone();
        match this.state {
            OpState::Idle | OpState::Parked(_) => {
                if inner.closed.get() {
                    if let OpState::Parked(t) = this.state {
                        inner.depth_waiters.cancel(t);
                    }
                    return this.finish(Err(IoError::InvalidArg(
                        "the runtime was dropped; no more I/O on its handles".into(),
                    )));
                }
                let room = inner.room();
                let go = match this.state {
                    OpState::Parked(t) => inner.depth_waiters.try_leave(t, room, cx.waker()),
                    _ => room > 0 && inner.depth_waiters.is_empty(),
                };
                if !go {
                    if let OpState::Idle = this.state {
                        this.state = OpState::Parked(inner.depth_waiters.park(cx.waker()));
                    }
                    return Poll::Pending;
                }
                let slot = inner.alloc_slot();
                let mut req = this.req;
                req.user_data = slot as u64;
                // SAFETY: req.buf points into the buffer owned by this future (IoBuf: valid for
                // req.len bytes, stable while the value lives). If the future is dropped before
                // the completion, the buffer moves into slot `slot` of the runtime (see Drop),
                // which releases it only when that completion has been reaped, and the runtime
                // drains the engine before releasing slots (or leaks them if it cannot).
                let pushed = unsafe { inner.engine.borrow_mut().push(&req) };
                if let Err(e) = pushed {
                    inner.free_slot(slot);
                    return this.finish(Err(e));
                }
                inner.pushes.set(inner.pushes.get() + 1);
                inner.ops.borrow_mut()[slot].waker = Some(cx.waker().clone());
                this.state = OpState::InFlight(slot);
                let flush = inner.hold.get() == 0
                    && match inner.batching {
                        Batching::Each => true,
                        // Without other ready tasks the loop submits right away with its wait.
                        b => {
                            inner.has_ready() && {
                                let e = inner.engine.borrow();
                                b.flush_now(e.pending(), e.in_flight(), e.depth())
                            }
                        }
                    };
                if flush {
                    if let Err(e) = inner.submit(0) {
                        // The request stays queued (its buffer stays here); the loop reports
                        // the failure from block_on/run.
                        inner.failed.borrow_mut().get_or_insert(e);
                    }
                }
                Poll::Pending
            }
            OpState::InFlight(slot) => {
                let result = {
                    let mut ops = inner.ops.borrow_mut();
                    let s = &mut ops[slot];
                    let r = s.result.take();
                    if r.is_none() && !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        s.waker = Some(cx.waker().clone());
                    }
                    r
                };
                match result {
                    Some(res) => {
                        inner.free_slot(slot);
                        let r = if res < 0 {
                            Err(IoError::from_completion(
                                this.req.op.name(),
                                this.req.offset,
                                res,
                            ))
                        } else {
                            Ok(res)
                        };
                        this.finish(r)
                    }
                    None => Poll::Pending,
                }
            }
            OpState::Done => panic!("an I/O future was polled after it completed"),
        }
    }
}

impl<B: IoBuf> Drop for OpFuture<B> {
    fn drop(&mut self) {
        match self.state {
            OpState::Parked(t) => {
                // Leave the queue; a wake-up meant for this request goes to the next one.
                self.inner.depth_waiters.cancel(t);
                self.inner.depth_waiters.wake_first(self.inner.room());
            }
            OpState::InFlight(slot) => {
                let mut ops = self.inner.ops.borrow_mut();
                let s = &mut ops[slot];
                if s.result.is_some() {
                    // Completed but never collected: the kernel is done with the buffer.
                    drop(ops);
                    self.inner.free_slot(slot);
                } else {
                    // Still in flight: the runtime keeps the buffer until the completion.
                    s.waker = None;
                    s.abandoned = true;
                    s.orphan = self.buf.take().map(|b| Box::new(b) as Box<dyn Any>);
                }
            }
            OpState::Idle | OpState::Done => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EngineKind, SetupMode};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileExt, OpenOptionsExt};

    const BS: usize = 4096;

    struct TempFile {
        path: std::path::PathBuf,
        file: std::fs::File,
    }

    impl TempFile {
        /// A file in the temp dir, opened with O_DIRECT when the filesystem allows it.
        fn new(name: &str, len: u64) -> TempFile {
            let path = std::env::temp_dir().join(format!(
                "ringdb-exec-{}-{}.dat",
                name.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
                std::process::id()
            ));
            let _ = std::fs::remove_file(&path);
            let open = |direct: bool| {
                let mut o = std::fs::OpenOptions::new();
                o.read(true).write(true).create(true);
                if direct {
                    o.custom_flags(libc::O_DIRECT);
                }
                o.open(&path)
            };
            let file = open(true).or_else(|_| open(false)).expect("temp file");
            file.set_len(len).unwrap();
            TempFile { path, file }
        }

        fn fd(&self) -> RawFd {
            self.file.as_raw_fd()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn fill(buf: &mut [u8], block: u64) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (block as usize * 31 + i * 7 + 1) as u8;
        }
    }

    fn pattern(block: u64) -> Vec<u8> {
        let mut v = vec![0u8; BS];
        fill(&mut v, block);
        v
    }

    /// `None` when this kernel or build cannot open the engine.
    fn open(cfg: &IoConfig, files: &[RawFd], pool: Option<FixedBufferPool>) -> Option<Runtime> {
        match Runtime::from_config(cfg, files, pool) {
            Ok(rt) => Some(rt),
            Err(e @ IoError::Unsupported { .. }) => {
                eprintln!("SKIP {}: {e}", cfg.label());
                None
            }
            Err(e) => panic!("{}: {e}", cfg.label()),
        }
    }

    fn cfg(engine: EngineKind, batching: Batching, depth: u32) -> IoConfig {
        IoConfig {
            batching,
            queue_depth: depth,
            ..IoConfig::new(engine)
        }
    }

    const POLICIES: [Batching; 3] = [Batching::Each, Batching::Fixed(4), Batching::Adaptive];

    fn configs() -> Vec<IoConfig> {
        let mut v = Vec::new();
        for engine in EngineKind::ALL {
            for batching in POLICIES {
                v.push(cfg(engine, batching, 16));
            }
        }
        for setup in [SetupMode::Coop, SetupMode::Defer] {
            v.push(IoConfig {
                setup,
                ..cfg(EngineKind::Uring, Batching::Adaptive, 16)
            });
        }
        v
    }

    /// `tasks` tasks each write a distinct pattern to their own block, then read it back and
    /// compare every byte.
    fn write_read_back(cfg: &IoConfig, tasks: u64) -> Option<RuntimeStats> {
        let f = TempFile::new(&cfg.label(), tasks * BS as u64);
        let mut rt = open(cfg, &[f.fd()], None)?;
        let io = rt.io();
        let handles: Vec<_> = (0..tasks)
            .map(|b| {
                let io = io.clone();
                rt.spawn(async move {
                    let mut buf = AlignedBuf::new(BS);
                    fill(buf.as_mut_slice(), b);
                    let (r, _buf) = io.write(FileId(0), b * BS as u64, buf).await;
                    assert_eq!(r.unwrap(), BS);
                    let (r, back) = io.read(FileId(0), b * BS as u64, AlignedBuf::new(BS)).await;
                    assert_eq!(r.unwrap(), BS);
                    back.as_slice() == &pattern(b)[..]
                })
            })
            .collect();
        let ok = rt
            .block_on(async move {
                let mut all = true;
                for h in handles {
                    all &= h.await;
                }
                all
            })
            .unwrap();
        assert!(ok, "{}: data read back differs", cfg.label());
        let s = rt.stats();
        assert_eq!(s.engine.completed, 2 * tasks, "{}", cfg.label());
        assert_eq!(s.tasks_spawned, tasks);
        assert_eq!(rt.live_tasks(), 0);
        Some(s)
    }

    #[test]
    fn tasks_write_and_read_back_through_every_engine_and_policy() {
        for cfg in configs() {
            if let Some(s) = write_read_back(&cfg, 64) {
                eprintln!(
                    "{:<28} enters/request {:.3}  batches {}  req/batch {:.2}  waits {}  polls {}",
                    cfg.label(),
                    s.engine.enters as f64 / s.engine.completed as f64,
                    s.submit_batches,
                    s.requests_per_batch,
                    s.waits,
                    s.polls
                );
            }
        }
    }

    #[test]
    fn more_tasks_than_depth_park_and_all_finish() {
        for engine in [EngineKind::Uring, EngineKind::Libaio, EngineKind::Posix] {
            for batching in POLICIES {
                let Some(s) = write_read_back(&cfg(engine, batching, 8), 200) else {
                    continue;
                };
                // Parked tasks are woken by completions, not polled in a loop.
                assert!(
                    s.polls <= 200 * 8,
                    "{engine}/{batching}: {} polls for 400 requests",
                    s.polls
                );
            }
        }
    }

    #[test]
    fn requests_waiting_for_ring_room_go_in_fifo_order() {
        for engine in [EngineKind::Posix, EngineKind::Uring] {
            let Some(mut rt) = open(&cfg(engine, Batching::Adaptive, 1), &[], None) else {
                continue;
            };
            let order = Rc::new(RefCell::new(Vec::new()));
            for i in 0..20 {
                let (io, order) = (rt.io(), order.clone());
                rt.spawn(async move {
                    io.nop().await.unwrap();
                    order.borrow_mut().push(i);
                });
            }
            rt.run().unwrap();
            assert_eq!(*order.borrow(), (0..20).collect::<Vec<_>>(), "{engine}");
        }
    }

    /// Enters per completed request: an engine counter, not a timing.
    fn enters_per_request(batching: Batching, tasks: usize, ops: usize) -> f64 {
        let mut rt = Runtime::from_config(&cfg(EngineKind::Uring, batching, 64), &[], None)
            .expect("uring runtime");
        for _ in 0..tasks {
            let io = rt.io();
            rt.spawn(async move {
                for _ in 0..ops {
                    io.nop().await.unwrap();
                }
            });
        }
        rt.run().unwrap();
        let s = rt.stats();
        assert_eq!(s.engine.completed, (tasks * ops) as u64);
        s.engine.enters as f64 / s.engine.completed as f64
    }

    #[test]
    fn batching_policies_differ_in_enters_per_request() {
        let each = enters_per_request(Batching::Each, 64, 20);
        let fixed = enters_per_request(Batching::Fixed(8), 64, 20);
        let adaptive = enters_per_request(Batching::Adaptive, 64, 20);
        let adaptive_one = enters_per_request(Batching::Adaptive, 1, 200);
        eprintln!(
            "nop enters per request, 64 tasks: each {each:.3}, fixed(8) {fixed:.3}, \
             adaptive {adaptive:.3}; 1 task: adaptive {adaptive_one:.3}"
        );
        assert!(each >= 1.0, "each: {each} enters per request");
        assert!(fixed < 0.5, "fixed(8): {fixed} enters per request");
        assert!(adaptive < 0.5, "adaptive: {adaptive} enters per request");
        // One task alone: nothing to batch with, one submit-and-wait per request.
        assert!(adaptive_one >= 1.0, "adaptive, 1 task: {adaptive_one}");
    }

    #[test]
    fn adaptive_batches_real_reads() {
        let f = TempFile::new("ratio", 64 * BS as u64);
        // Written and synced, so that O_DIRECT reads go to the device (a hole completes inline).
        let mut b = AlignedBuf::new(64 * BS);
        fill(b.as_mut_slice(), 1);
        f.file.write_all_at(b.as_slice(), 0).unwrap();
        f.file.sync_all().unwrap();
        for batching in [Batching::Each, Batching::Adaptive] {
            let mut rt = open(&cfg(EngineKind::Uring, batching, 64), &[f.fd()], None).unwrap();
            for t in 0..64u64 {
                let io = rt.io();
                rt.spawn(async move {
                    let mut buf = AlignedBuf::new(BS);
                    for i in 0..8u64 {
                        let (r, b) = io.read(FileId(0), ((t + i) % 64) * BS as u64, buf).await;
                        assert_eq!(r.unwrap(), BS);
                        buf = b;
                    }
                });
            }
            rt.run().unwrap();
            let s = rt.stats();
            let ratio = s.engine.enters as f64 / s.engine.completed as f64;
            eprintln!(
                "4 KiB reads, 64 tasks, {batching}: enters/request {ratio:.3}, \
                 req/batch {:.2}, waits {}",
                s.requests_per_batch, s.waits
            );
            match batching {
                Batching::Each => assert!(ratio >= 1.0, "each: {ratio}"),
                _ => assert!(ratio < 0.5, "{batching}: {ratio}"),
            }
        }
    }

    /// A buffer that records, when dropped, whether the read's data had arrived in it.
    struct Probe {
        buf: AlignedBuf,
        want: Vec<u8>,
        record: Rc<Cell<Option<bool>>>,
    }

    // SAFETY: delegates to AlignedBuf, whose heap memory does not move and lives as long as
    // the Probe.
    unsafe impl IoBuf for Probe {
        fn stable_ptr(&mut self) -> *mut u8 {
            self.buf.as_mut_ptr()
        }
        fn bytes_len(&self) -> usize {
            self.buf.len()
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.record.set(Some(self.buf.as_slice() == &self.want[..]));
        }
    }

    fn probe_file(name: &str) -> TempFile {
        let f = TempFile::new(name, 64 * BS as u64);
        let mut b = AlignedBuf::new(BS);
        b.as_mut_slice().copy_from_slice(&pattern(7));
        f.file.write_all_at(b.as_slice(), 0).unwrap();
        f.file.sync_all().unwrap();
        f
    }

    fn probe(record: &Rc<Cell<Option<bool>>>) -> Probe {
        Probe {
            buf: AlignedBuf::new(BS),
            want: pattern(7),
            record: record.clone(),
        }
    }

    /// Polls `fut` once with the current task's context; true if it is pending.
    async fn poll_once<F: Future + Unpin>(fut: &mut F) -> bool {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx).is_pending())).await
    }

    #[test]
    fn a_dropped_read_keeps_its_buffer_until_the_completion() {
        for engine in [EngineKind::Posix, EngineKind::Libaio, EngineKind::Uring] {
            // Each: the read goes to the kernel at its first poll, so it really is in flight.
            let f = probe_file(&format!("orphan-{engine}"));
            let Some(mut rt) = open(&cfg(engine, Batching::Each, 8), &[f.fd()], None) else {
                continue;
            };
            let io = rt.io();
            let record = Rc::new(Cell::new(None));
            let p = probe(&record);
            rt.block_on(async move {
                let mut fut = Box::pin(io.read(FileId(0), 0, p));
                assert!(poll_once(&mut fut).await);
                drop(fut); // in flight: the buffer must move to the runtime
            })
            .unwrap();
            assert_eq!(record.get(), None, "{engine}: freed while in flight");
            assert_eq!(rt.stats().orphans_released, 0);
            rt.run().unwrap();
            assert_eq!(
                record.get(),
                Some(true),
                "{engine}: released only after the data arrived"
            );
            assert_eq!(rt.stats().orphans_released, 1, "{engine}");
        }
    }

    #[test]
    fn dropping_the_runtime_drains_before_releasing_buffers() {
        for engine in [EngineKind::Posix, EngineKind::Libaio, EngineKind::Uring] {
            let f = probe_file(&format!("drain-{engine}"));
            let Some(mut rt) = open(&cfg(engine, Batching::Each, 8), &[f.fd()], None) else {
                continue;
            };
            let io = rt.io();
            let record = Rc::new(Cell::new(None));
            let p = probe(&record);
            // The task issues the read and stays alive with it in flight...
            rt.spawn(async move {
                let _ = io.read(FileId(0), 0, p).await;
                std::future::pending::<()>().await;
            });
            rt.block_on(async {}).unwrap();
            assert_eq!(record.get(), None);
            // ...until the runtime drops it: the buffer is released only after the completion.
            drop(rt);
            assert_eq!(record.get(), Some(true), "{engine}");
        }
    }

    #[test]
    fn fixed_buffers_from_the_pool() {
        let f = TempFile::new("pool", 32 * BS as u64);
        for fixed_buffers in [true, false] {
            let cfg = IoConfig {
                fixed_buffers,
                ..cfg(EngineKind::Uring, Batching::Adaptive, 8)
            };
            // Fewer buffers than tasks: leases wait for returns.
            let pool = FixedBufferPool::new(4, BS).unwrap();
            let mut rt = open(&cfg, &[f.fd()], Some(pool)).unwrap();
            let io = rt.io();
            for b in 0..32u64 {
                let io = io.clone();
                rt.spawn(async move {
                    let mut buf = io.lease().await.unwrap();
                    assert_eq!(buf.fixed_index().is_some(), fixed_buffers);
                    fill(buf.as_mut_slice(), b);
                    let (r, buf) = io.write(FileId(0), b * BS as u64, buf).await;
                    assert_eq!(r.unwrap(), BS);
                    drop(buf);
                    let back = io.lease().await.unwrap();
                    let (r, back) = io.read(FileId(0), b * BS as u64, back).await;
                    assert_eq!(r.unwrap(), BS);
                    assert_eq!(back.as_slice(), &pattern(b)[..]);
                });
            }
            rt.run().unwrap();
            assert_eq!(rt.stats().engine.completed, 64);
            // Every lease went back to the pool.
            let all: Vec<_> = std::iter::from_fn(|| io.lease_buf()).collect();
            assert_eq!(all.len(), 4);
        }
    }

    #[test]
    fn a_foreign_fixed_index_falls_back_to_plain_io() {
        let f = TempFile::new("foreign", 4 * BS as u64);
        let cfg = IoConfig {
            fixed_buffers: true,
            ..cfg(EngineKind::Uring, Batching::Adaptive, 8)
        };
        let mut a = open(&cfg, &[f.fd()], Some(FixedBufferPool::new(2, BS).unwrap())).unwrap();
        let mut b = open(&cfg, &[f.fd()], Some(FixedBufferPool::new(2, BS).unwrap())).unwrap();
        let mut buf = a.io().lease_buf().unwrap();
        fill(buf.as_mut_slice(), 3);
        let io_b = b.io();
        let (r, buf) = b
            .block_on(async move { io_b.write(FileId(0), 0, buf).await })
            .unwrap();
        assert_eq!(r.unwrap(), BS);
        drop(buf);
        let io_a = a.io();
        let back = io_a.lease_buf().unwrap();
        let (r, back) = a
            .block_on(async move { io_a.read(FileId(0), 0, back).await })
            .unwrap();
        assert_eq!(r.unwrap(), BS);
        assert_eq!(back.as_slice(), &pattern(3)[..]);
    }

    #[test]
    fn a_stall_is_an_error_not_a_hang() {
        let mut rt = Runtime::new(
            open_engine(&IoConfig::new(EngineKind::Posix), &[], None).unwrap(),
            Batching::Adaptive,
        );
        let r = rt.block_on(std::future::pending::<()>());
        assert!(r.unwrap_err().to_string().contains("stalled"));
        // A task waiting on a handle of a task that never finishes.
        let io = rt.io();
        rt.spawn(async move {
            io.nop().await.unwrap();
            std::future::pending::<()>().await
        });
        let e = rt.run().unwrap_err().to_string();
        assert!(
            e.contains("executor stalled") && e.contains("1 tasks parked"),
            "{e}"
        );
        // Also when the only pending thing is a lease nobody will return.
        let mut rt = open(
            &IoConfig::new(EngineKind::Uring),
            &[],
            Some(FixedBufferPool::new(1, BS).unwrap()),
        )
        .unwrap();
        let io = rt.io();
        let r = rt.block_on(async move {
            let _held = io.lease().await.unwrap();
            io.lease().await.unwrap()
        });
        assert!(r.is_err());
    }

    #[test]
    fn io_errors_reach_the_task() {
        let mut rt = Runtime::from_config(&IoConfig::new(EngineKind::Uring), &[-1], None).unwrap();
        let io = rt.io();
        let r = rt
            .block_on(async move { io.read(FileId(0), 0, AlignedBuf::new(BS)).await.0 })
            .unwrap();
        let e = r.unwrap_err().to_string();
        assert!(e.contains("read failed at offset 0"), "{e}");
    }

    #[test]
    fn short_reads_return_the_count_and_fsync_works() {
        for engine in [EngineKind::Posix, EngineKind::Libaio, EngineKind::Uring] {
            let f = TempFile::new(&format!("short-{engine}"), 2 * BS as u64);
            let Some(mut rt) = open(&cfg(engine, Batching::Adaptive, 8), &[f.fd()], None) else {
                continue;
            };
            let io = rt.io();
            let (past_end, synced) = rt
                .block_on(async move {
                    let (r, _) = io.read(FileId(0), 2 * BS as u64, AlignedBuf::new(BS)).await;
                    let s1 = io.fsync(FileId(0), false).await;
                    let s2 = io.fsync(FileId(0), true).await;
                    (r.unwrap(), s1.is_ok() && s2.is_ok())
                })
                .unwrap();
            assert_eq!(past_end, 0, "{engine}");
            assert!(synced, "{engine}");
        }
    }

    #[test]
    fn wakers_are_harmless_after_the_task_finished_and_handles_detach() {
        let mut rt = Runtime::from_config(&IoConfig::new(EngineKind::Uring), &[], None).unwrap();
        let io = rt.io();
        let saved: Rc<RefCell<Option<Waker>>> = Rc::default();
        let ran = Rc::new(Cell::new(0));
        let (s, r) = (saved.clone(), ran.clone());
        // Detached: the handle is dropped at once, the task still runs.
        drop(rt.spawn(async move {
            std::future::poll_fn(|cx| {
                *s.borrow_mut() = Some(cx.waker().clone());
                Poll::Ready(())
            })
            .await;
            io.nop().await.unwrap();
            r.set(r.get() + 1);
        }));
        rt.run().unwrap();
        assert_eq!(ran.get(), 1);
        let w = saved.borrow_mut().take().unwrap();
        // From this thread and from another: the task is gone; nothing happens.
        w.wake_by_ref();
        std::thread::spawn(move || w.wake()).join().unwrap();
        let h = rt.spawn(async { 5 });
        assert_eq!(rt.block_on(h).unwrap(), 5);
        assert_eq!(ran.get(), 1);
        rt.run().unwrap();
    }

    #[test]
    fn uring_sync_and_posix_count_one_enter_per_request() {
        for engine in [EngineKind::Posix, EngineKind::UringSync] {
            let f = TempFile::new(&format!("sync-{engine}"), 16 * BS as u64);
            let mut rt = open(&cfg(engine, Batching::Adaptive, 8), &[f.fd()], None).unwrap();
            for b in 0..16u64 {
                let io = rt.io();
                rt.spawn(async move {
                    let (r, _) = io.read(FileId(0), b * BS as u64, AlignedBuf::new(BS)).await;
                    r.unwrap();
                });
            }
            rt.run().unwrap();
            let s = rt.stats();
            assert_eq!(s.engine.completed, 16);
            assert!(
                s.engine.enters >= 16,
                "{engine}: {} enters",
                s.engine.enters
            );
        }
    }
}
