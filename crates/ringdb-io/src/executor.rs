//! A single-threaded executor whose tasks park on I/O (the paper's fibers, Sec. 3.3.2, as
//! stackless futures), over one [`Engine`] owned by the thread (ring per thread).
//!
//! The loop: run every ready task once (each may queue requests) -> hand queued requests to the
//! kernel as the [`Batching`] policy says -> reap completions -> wake their tasks; when no task
//! is ready, submit what is queued together with the wait (one `io_uring_enter`).
//!
//! Buffers pass by value into an I/O and come back with its result (`(Result, B)`), so the
//! runtime owns them while the kernel may write into them. When an I/O future is dropped while
//! its request is in flight, its buffer moves to the runtime and is released only when the
//! completion arrives; dropping the runtime drains the engine first.

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
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Memory an I/O can read into or write from.
///
/// # Safety
/// `stable_ptr` must return a pointer valid for `bytes_len` bytes that stays valid, and does not
/// move, for as long as the value lives (even if the value itself is moved), and nothing else may
/// access that memory while the runtime holds the value.
pub unsafe trait IoBuf: 'static {
    fn stable_ptr(&mut self) -> *mut u8;
    fn bytes_len(&self) -> usize;
    /// Registration index when the memory lies in the runtime's registered pool.
    fn fixed_index(&self) -> Option<u16> {
        None
    }
}

// SAFETY: AlignedBuf owns a heap allocation that does not move when the value moves.
unsafe impl IoBuf for AlignedBuf {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len()
    }
}

/// The registered pool shared by the runtime and the buffers leased from it.
struct SharedPool {
    pool: FixedBufferPool,
    free: RefCell<Vec<usize>>,
    waiters: RefCell<VecDeque<Waker>>,
}

/// A buffer leased from the runtime's registered pool; returns to the pool when dropped.
pub struct PoolBuf {
    shared: Rc<SharedPool>,
    index: usize,
}

impl PoolBuf {
    pub fn as_slice(&self) -> &[u8] {
        self.shared.pool.slice(self.index)
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.shared.pool.buf_len();
        // SAFETY: this lease is the only owner of buffer `index`, and no I/O is in flight on it
        // while the caller holds the PoolBuf (I/Os take it by value).
        unsafe { std::slice::from_raw_parts_mut(self.shared.pool.ptr(self.index), len) }
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        self.shared.free.borrow_mut().push(self.index);
        if let Some(w) = self.shared.waiters.borrow_mut().pop_front() {
            w.wake();
        }
    }
}

// SAFETY: the pool's memory lives as long as `shared` (an Rc held by this value) and the index
// is leased exclusively to this value.
unsafe impl IoBuf for PoolBuf {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.shared.pool.ptr(self.index)
    }
    fn bytes_len(&self) -> usize {
        self.shared.pool.buf_len()
    }
    fn fixed_index(&self) -> Option<u16> {
        Some(self.shared.pool.fixed_index(self.index))
    }
}

/// What the runtime counts, beside its engine's counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RuntimeStats {
    pub engine: EngineStats,
    pub tasks_spawned: u64,
    pub polls: u64,
    /// Submits that carried at least one request.
    pub submit_batches: u64,
    pub requests_per_batch: f64,
    /// Times the loop blocked in the kernel waiting for completions.
    pub waits: u64,
    /// Buffers of dropped I/O futures released when their completion finally arrived.
    pub orphans_released: u64,
}

/// One request slot: the waker of the task waiting for it, or the buffer of a dropped future.
#[derive(Default)]
struct OpSlot {
    busy: bool,
    result: Option<i32>,
    waker: Option<Waker>,
    orphan: Option<Box<dyn Any>>,
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Task ids woken (from wakers, which must be Send + Sync) and not yet polled.
#[derive(Default)]
struct ReadyQueue(Mutex<VecDeque<usize>>);

struct TaskWaker {
    id: usize,
    queue: Arc<ReadyQueue>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Ok(mut q) = self.queue.0.lock() {
            q.push_back(self.id);
        }
    }
}

/// The id under which `block_on`'s own future is woken.
const MAIN_TASK: usize = usize::MAX;

struct Inner {
    engine: RefCell<Box<dyn Engine>>,
    batching: Batching,
    ops: RefCell<Vec<OpSlot>>,
    free_ops: RefCell<Vec<usize>>,
    /// Tasks waiting for the engine to have room (in_flight == depth).
    depth_waiters: RefCell<VecDeque<Waker>>,
    tasks: RefCell<Vec<Option<Task>>>,
    free_tasks: RefCell<Vec<usize>>,
    ready: Arc<ReadyQueue>,
    pool: Option<Rc<SharedPool>>,
    stats: Cell<RuntimeStats>,
    batched_requests: Cell<u64>,
    /// An engine failure met inside a task's poll, reported by the loop.
    failed: RefCell<Option<IoError>>,
}

impl Inner {
    fn bump(&self, f: impl FnOnce(&mut RuntimeStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    fn has_ready(&self) -> bool {
        self.ready.0.lock().map(|q| !q.is_empty()).unwrap_or(false)
    }

    /// Hands queued requests to the kernel (waiting for `wait_for` completions).
    fn submit(&self, wait_for: usize) -> Result<()> {
        let mut e = self.engine.borrow_mut();
        let pending = e.pending();
        if pending > 0 {
            self.bump(|s| s.submit_batches += 1);
            self.batched_requests
                .set(self.batched_requests.get() + pending as u64);
        }
        if wait_for > 0 {
            self.bump(|s| s.waits += 1);
        }
        e.submit(wait_for)
    }

    /// Reaps ready completions and wakes their tasks; returns how many arrived.
    fn reap(&self, scratch: &mut Vec<IoCompletion>) -> usize {
        scratch.clear();
        let n = self.engine.borrow_mut().reap(scratch);
        let mut ops = self.ops.borrow_mut();
        for c in scratch.iter() {
            let slot = &mut ops[c.user_data as usize];
            debug_assert!(
                slot.busy && slot.result.is_none(),
                "completion for an idle slot"
            );
            if let Some(buf) = slot.orphan.take() {
                // The future that asked is gone: the kernel is done with the buffer now.
                drop(buf);
                *slot = OpSlot::default();
                self.free_ops.borrow_mut().push(c.user_data as usize);
                self.bump(|s| s.orphans_released += 1);
            } else {
                slot.result = Some(c.result);
                if let Some(w) = slot.waker.take() {
                    w.wake();
                }
            }
        }
        drop(ops);
        // Each completion frees room in the engine for one parked request.
        let mut waiters = self.depth_waiters.borrow_mut();
        for _ in 0..n {
            match waiters.pop_front() {
                Some(w) => w.wake(),
                None => break,
            }
        }
        n
    }

    fn alloc_slot(&self) -> usize {
        let mut ops = self.ops.borrow_mut();
        let id = self.free_ops.borrow_mut().pop().unwrap_or_else(|| {
            ops.push(OpSlot::default());
            ops.len() - 1
        });
        ops[id].busy = true;
        id
    }

    fn free_slot(&self, id: usize) {
        self.ops.borrow_mut()[id] = OpSlot::default();
        self.free_ops.borrow_mut().push(id);
    }
}

/// The executor. Not `Send`: it belongs to the thread that made it, like its ring.
pub struct Runtime {
    inner: Rc<Inner>,
    scratch: Vec<IoCompletion>,
}

/// The handle tasks use for I/O. Cheap to clone.
#[derive(Clone)]
pub struct Io {
    inner: Rc<Inner>,
}

impl Runtime {
    pub fn new(engine: Box<dyn Engine>, batching: Batching) -> Runtime {
        Self::build(engine, batching, None)
    }

    /// Opens the engine `cfg` names over `files`. With `cfg.fixed_buffers`, `pool` is
    /// registered; either way the runtime owns it and leases its buffers ([`Io::lease_buf`]).
    pub fn from_config(
        cfg: &IoConfig,
        files: &[RawFd],
        pool: Option<FixedBufferPool>,
    ) -> Result<Runtime> {
        let iov = pool.as_ref().map(FixedBufferPool::iovecs);
        if cfg.fixed_buffers && iov.is_none() {
            return Err(IoError::InvalidArg(
                "fixed buffers need a buffer pool".into(),
            ));
        }
        let engine = open_engine(
            cfg,
            files,
            if cfg.fixed_buffers {
                iov.as_deref()
            } else {
                None
            },
        )?;
        Ok(Self::build(engine, cfg.batching, pool))
    }

    fn build(
        engine: Box<dyn Engine>,
        batching: Batching,
        pool: Option<FixedBufferPool>,
    ) -> Runtime {
        let pool = pool.map(|pool| {
            Rc::new(SharedPool {
                free: RefCell::new((0..pool.count()).rev().collect()),
                pool,
                waiters: RefCell::new(VecDeque::new()),
            })
        });
        Runtime {
            inner: Rc::new(Inner {
                engine: RefCell::new(engine),
                batching,
                ops: RefCell::new(Vec::new()),
                free_ops: RefCell::new(Vec::new()),
                depth_waiters: RefCell::new(VecDeque::new()),
                tasks: RefCell::new(Vec::new()),
                free_tasks: RefCell::new(Vec::new()),
                ready: Arc::new(ReadyQueue::default()),
                pool,
                stats: Cell::new(RuntimeStats::default()),
                batched_requests: Cell::new(0),
                failed: RefCell::new(None),
            }),
            scratch: Vec::new(),
        }
    }

    pub fn io(&self) -> Io {
        Io {
            inner: self.inner.clone(),
        }
    }

    /// Starts a task; it runs when the runtime runs (`block_on`, `run`).
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        self.io().spawn(fut)
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

    /// Runs `fut` and every spawned task until `fut` finishes. Fails when the engine fails, or
    /// when nothing can make progress (no task ready, no I/O in flight): a stall, not a hang.
    pub fn block_on<T>(&mut self, fut: impl Future<Output = T>) -> Result<T> {
        let mut fut = std::pin::pin!(fut);
        let main_waker = Waker::from(Arc::new(TaskWaker {
            id: MAIN_TASK,
            queue: self.inner.ready.clone(),
        }));
        let mut main_cx = Context::from_waker(&main_waker);
        let mut main_ready = true;
        loop {
            if main_ready {
                main_ready = false;
                self.inner.bump(|s| s.polls += 1);
                if let Poll::Ready(v) = fut.as_mut().poll(&mut main_cx) {
                    return Ok(v);
                }
            }
            main_ready |= self.run_ready_tasks();
            if main_ready {
                continue;
            }
            if !self.progress()? {
                return Err(IoError::InvalidArg(
                    "executor stalled: the main future waits, but no task is ready and no I/O is in flight".into(),
                ));
            }
        }
    }

    /// Runs until every spawned task has finished.
    pub fn run(&mut self) -> Result<()> {
        loop {
            self.run_ready_tasks();
            if self.inner.tasks.borrow().iter().all(Option::is_none) {
                return Ok(());
            }
            if !self.progress()? {
                return Err(IoError::InvalidArg(
                    "executor stalled: tasks wait, but none is ready and no I/O is in flight"
                        .into(),
                ));
            }
        }
    }

    /// Polls every task woken so far once; returns whether the main future was woken.
    fn run_ready_tasks(&mut self) -> bool {
        let mut main = false;
        loop {
            let next = self
                .inner
                .ready
                .0
                .lock()
                .ok()
                .and_then(|mut q| q.pop_front());
            let Some(id) = next else { break };
            if id == MAIN_TASK {
                main = true;
                continue;
            }
            let task = self
                .inner
                .tasks
                .borrow_mut()
                .get_mut(id)
                .and_then(Option::take);
            let Some(mut task) = task else { continue }; // finished, or woken twice
            let waker = Waker::from(Arc::new(TaskWaker {
                id,
                queue: self.inner.ready.clone(),
            }));
            self.inner.bump(|s| s.polls += 1);
            match task.as_mut().poll(&mut Context::from_waker(&waker)) {
                Poll::Ready(()) => self.inner.free_tasks.borrow_mut().push(id),
                Poll::Pending => self.inner.tasks.borrow_mut()[id] = Some(task),
            }
        }
        main
    }

    /// After a pass over the ready tasks: flush, reap, and if nothing is ready, wait.
    /// Returns false when nothing can make progress.
    fn progress(&mut self) -> Result<bool> {
        let inner = &self.inner;
        if let Some(e) = inner.failed.borrow_mut().take() {
            return Err(e);
        }
        if inner.reap(&mut self.scratch) > 0 || inner.has_ready() {
            // Work to do without blocking; requests queued by this pass go out now.
            if inner.engine.borrow().pending() > 0 {
                inner.submit(0)?;
            }
            return Ok(true);
        }
        let in_flight = inner.engine.borrow().in_flight();
        if in_flight == 0 {
            return Ok(false);
        }
        // Nothing to run: submit what is queued together with the wait.
        inner.submit(1)?;
        inner.reap(&mut self.scratch);
        Ok(true)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Tasks go first (their in-flight buffers move to the orphan slots), then the engine
        // drains, and only then are those buffers released.
        let tasks: Vec<Option<Task>> = std::mem::take(&mut *self.inner.tasks.borrow_mut());
        drop(tasks);
        let _ = self.inner.engine.borrow_mut().drain();
        let orphans = self
            .inner
            .ops
            .borrow()
            .iter()
            .filter(|s| s.orphan.is_some())
            .count();
        self.inner.ops.borrow_mut().clear();
        self.inner.bump(|s| s.orphans_released += orphans as u64);
    }
}

/// The output of a spawned task.
pub struct JoinHandle<T> {
    state: Rc<RefCell<JoinState<T>>>,
}

struct JoinState<T> {
    value: Option<T>,
    waker: Option<Waker>,
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

impl Io {
    /// Starts a task on this runtime.
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        let state = Rc::new(RefCell::new(JoinState {
            value: None,
            waker: None,
        }));
        let st = state.clone();
        let task: Task = Box::pin(async move {
            let v = fut.await;
            let mut s = st.borrow_mut();
            s.value = Some(v);
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        });
        let inner = &self.inner;
        let id = match inner.free_tasks.borrow_mut().pop() {
            Some(id) => {
                inner.tasks.borrow_mut()[id] = Some(task);
                id
            }
            None => {
                let mut t = inner.tasks.borrow_mut();
                t.push(Some(task));
                t.len() - 1
            }
        };
        if let Ok(mut q) = inner.ready.0.lock() {
            q.push_back(id);
        }
        inner.bump(|s| s.tasks_spawned += 1);
        JoinHandle { state }
    }

    /// Reads `buf.bytes_len()` bytes at `offset` into `buf`; returns the byte count.
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
        let len = match u32::try_from(buf.bytes_len()) {
            Ok(l) => l,
            Err(_) => {
                return (
                    Err(IoError::InvalidArg("one I/O moves at most 4 GiB".into())),
                    buf,
                )
            }
        };
        let req = IoRequest {
            op,
            file,
            offset,
            buf: buf.stable_ptr(),
            len,
            buf_index: buf.fixed_index(),
            user_data: 0,
        };
        let (res, buf) = OpFuture::new(self.inner.clone(), req, Some(buf)).await;
        let buf = buf.expect("the buffer comes back with its result");
        (
            res.map(|n| n as usize).map_err(|e| with_op(e, op, offset)),
            buf,
        )
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

    /// A free buffer of the runtime's pool, if any is free now.
    pub fn lease_buf(&self) -> Option<PoolBuf> {
        let shared = self.inner.pool.as_ref()?;
        let index = shared.free.borrow_mut().pop()?;
        Some(PoolBuf {
            shared: shared.clone(),
            index,
        })
    }

    /// A buffer of the runtime's pool, waiting for one to be returned if all are leased.
    /// Fails when the runtime has no pool.
    pub async fn lease(&self) -> Result<PoolBuf> {
        if self.inner.pool.is_none() {
            return Err(IoError::InvalidArg(
                "this runtime has no buffer pool".into(),
            ));
        }
        std::future::poll_fn(|cx| match self.lease_buf() {
            Some(b) => Poll::Ready(Ok(b)),
            None => {
                if let Some(p) = &self.inner.pool {
                    p.waiters.borrow_mut().push_back(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }

    /// Lets the other ready tasks run before this one continues.
    pub async fn yield_now(&self) {
        let mut yielded = false;
        std::future::poll_fn(|cx| {
            if yielded {
                Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await
    }
}

fn with_op(e: IoError, op: OpKind, offset: u64) -> IoError {
    match e {
        IoError::Op { source, .. } => IoError::Op {
            op: op.name(),
            offset,
            source,
        },
        e => e,
    }
}

enum OpState {
    Unsubmitted,
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
            state: OpState::Unsubmitted,
        }
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
            OpState::Unsubmitted => {
                {
                    let e = inner.engine.borrow();
                    if e.in_flight() >= e.depth() {
                        inner
                            .depth_waiters
                            .borrow_mut()
                            .push_back(cx.waker().clone());
                        return Poll::Pending;
                    }
                }
                let slot = inner.alloc_slot();
                let mut req = this.req;
                req.user_data = slot as u64;
                // SAFETY: the buffer behind req.buf is owned by this future and, if the future
                // is dropped before the completion, moves to the runtime's slot (see Drop); the
                // runtime drains the engine before releasing slots. IoBuf guarantees the pointer
                // stays valid while the value lives.
                let pushed = unsafe { inner.engine.borrow_mut().push(&req) };
                if let Err(e) = pushed {
                    inner.free_slot(slot);
                    this.state = OpState::Done;
                    return Poll::Ready((Err(e), this.buf.take()));
                }
                inner.ops.borrow_mut()[slot].waker = Some(cx.waker().clone());
                this.state = OpState::InFlight(slot);
                let flush = {
                    let e = inner.engine.borrow();
                    match inner.batching {
                        Batching::Each => true,
                        // The last request of a pass goes out with the wait instead.
                        b => {
                            inner.has_ready() && b.flush_now(e.pending(), e.in_flight(), e.depth())
                        }
                    }
                };
                if flush {
                    if let Err(e) = inner.submit(0) {
                        // The request stays queued (its buffer stays here); the loop reports
                        // the failure from block_on.
                        inner.failed.borrow_mut().get_or_insert(e);
                    }
                }
                Poll::Pending
            }
            OpState::InFlight(slot) => {
                let result = inner.ops.borrow_mut()[slot].result.take();
                match result {
                    Some(res) => {
                        inner.free_slot(slot);
                        this.state = OpState::Done;
                        let r = if res < 0 {
                            Err(IoError::from_completion(
                                this.req.op.name(),
                                this.req.offset,
                                res,
                            ))
                        } else {
                            Ok(res)
                        };
                        Poll::Ready((r, this.buf.take()))
                    }
                    None => {
                        inner.ops.borrow_mut()[slot].waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                }
            }
            OpState::Done => panic!("OpFuture polled after completion"),
        }
    }
}

impl<B: IoBuf> Drop for OpFuture<B> {
    fn drop(&mut self) {
        if let OpState::InFlight(slot) = self.state {
            let mut ops = self.inner.ops.borrow_mut();
            let s = &mut ops[slot];
            if s.result.is_some() {
                // Completed but never collected: the kernel is done with the buffer.
                drop(ops);
                self.inner.free_slot(slot);
            } else {
                // Still in flight: the runtime keeps the buffer until the completion arrives.
                s.waker = None;
                s.orphan = Some(Box::new(self.buf.take()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EngineKind, SetupMode};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;

    const BS: usize = 4096;

    struct TempFile(std::path::PathBuf, std::fs::File);

    impl TempFile {
        fn new(name: &str, len: u64) -> TempFile {
            let p =
                std::env::temp_dir().join(format!("ringdb-exec-{name}-{}.dat", std::process::id()));
            let _ = std::fs::remove_file(&p);
            let open = |direct: bool| {
                let mut o = std::fs::OpenOptions::new();
                o.read(true).write(true).create(true);
                if direct {
                    o.custom_flags(libc::O_DIRECT);
                }
                o.open(&p)
            };
            let f = open(true).or_else(|_| open(false)).expect("temp file");
            f.set_len(len).unwrap();
            TempFile(p, f)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn fill(buf: &mut [u8], block: u64) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (block as usize * 31 + i * 7) as u8;
        }
    }

    fn configs() -> Vec<IoConfig> {
        let mut v = Vec::new();
        for engine in [EngineKind::Posix, EngineKind::Libaio, EngineKind::Uring] {
            for batching in [Batching::Each, Batching::Adaptive, Batching::Fixed(4)] {
                if engine != EngineKind::Uring && batching != Batching::Adaptive {
                    continue;
                }
                v.push(IoConfig {
                    batching,
                    queue_depth: 16,
                    ..IoConfig::new(engine)
                });
            }
        }
        v.push(IoConfig {
            setup: SetupMode::Defer,
            queue_depth: 16,
            ..IoConfig::new(EngineKind::Uring)
        });
        v
    }

    /// `tasks` tasks each write then read back their own block, through the runtime.
    fn write_read_back(cfg: &IoConfig, tasks: u64) -> RuntimeStats {
        let f = TempFile::new(
            &cfg.label().replace(['+', '(', ')'], "_"),
            tasks * BS as u64,
        );
        let mut rt = Runtime::from_config(cfg, &[f.1.as_raw_fd()], None).unwrap();
        let io = rt.io();
        let handles: Vec<_> = (0..tasks)
            .map(|b| {
                let io = io.clone();
                rt.spawn(async move {
                    let mut buf = AlignedBuf::new(BS);
                    fill(buf.as_mut_slice(), b);
                    let (r, buf) = io.write(FileId(0), b * BS as u64, buf).await;
                    assert_eq!(r.unwrap(), BS);
                    let mut back = AlignedBuf::new(BS);
                    back.as_mut_slice().fill(0);
                    let (r, back) = io.read(FileId(0), b * BS as u64, back).await;
                    assert_eq!(r.unwrap(), BS);
                    back.as_slice() == buf.as_slice()
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
        rt.stats()
    }

    #[test]
    fn tasks_write_and_read_back_through_every_engine_and_policy() {
        for cfg in configs() {
            match Runtime::from_config(&cfg, &[], None) {
                Err(IoError::Unsupported { .. }) => {
                    eprintln!("SKIP {}: unsupported here", cfg.label());
                    continue;
                }
                Err(e) => panic!("{}: {e}", cfg.label()),
                Ok(_) => {}
            }
            let s = write_read_back(&cfg, 64);
            assert_eq!(s.engine.completed, 128, "{}", cfg.label());
        }
    }

    #[test]
    fn more_tasks_than_depth_park_and_all_finish() {
        let cfg = IoConfig {
            queue_depth: 8,
            ..IoConfig::new(EngineKind::Uring)
        };
        let s = write_read_back(&cfg, 200);
        assert_eq!(s.engine.completed, 400);
        assert_eq!(s.tasks_spawned, 200);
    }

    #[test]
    fn batching_policies_differ_in_enters_per_request() {
        let run = |batching| {
            let cfg = IoConfig {
                batching,
                queue_depth: 64,
                ..IoConfig::new(EngineKind::Uring)
            };
            let mut rt = Runtime::from_config(&cfg, &[], None).unwrap();
            let io = rt.io();
            for _ in 0..64 {
                let io = io.clone();
                rt.spawn(async move {
                    for _ in 0..20 {
                        io.nop().await.unwrap();
                    }
                });
            }
            rt.run().unwrap();
            let s = rt.stats();
            assert_eq!(s.engine.completed, 64 * 20);
            s.engine.enters as f64 / s.engine.completed as f64
        };
        let each = run(Batching::Each);
        let adaptive = run(Batching::Adaptive);
        let fixed = run(Batching::Fixed(8));
        eprintln!(
            "enters per request: each {each:.3}, fixed(8) {fixed:.3}, adaptive {adaptive:.3}"
        );
        assert!(fixed < each, "fixed(8): {fixed} enters per request");
        assert!(each >= 1.0, "each: {each} enters per request");
        assert!(adaptive < 0.5, "adaptive: {adaptive} enters per request");
    }

    /// A buffer that records when it is dropped.
    struct Probe {
        buf: AlignedBuf,
        dropped: Rc<Cell<bool>>,
    }

    // SAFETY: delegates to AlignedBuf, whose heap memory does not move.
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
            self.dropped.set(true);
        }
    }

    #[test]
    fn a_dropped_read_keeps_its_buffer_until_the_completion() {
        let f = TempFile::new("orphan", 64 * BS as u64);
        let cfg = IoConfig {
            queue_depth: 8,
            ..IoConfig::new(EngineKind::Uring)
        };
        let mut rt = Runtime::from_config(&cfg, &[f.1.as_raw_fd()], None).unwrap();
        let io = rt.io();
        let dropped = Rc::new(Cell::new(false));
        let probe = Probe {
            buf: AlignedBuf::new(BS),
            dropped: dropped.clone(),
        };
        let io2 = io.clone();
        rt.block_on(async move {
            let mut fut = Box::pin(io2.read(FileId(0), 0, probe));
            // One poll queues the request; then the future is dropped with it in flight.
            let waker = Waker::from(Arc::new(TaskWaker {
                id: MAIN_TASK,
                queue: Arc::new(ReadyQueue::default()),
            }));
            assert!(fut
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            drop(fut);
        })
        .unwrap();
        assert!(
            !dropped.get(),
            "the buffer must outlive the dropped future while in flight"
        );
        assert_eq!(rt.stats().orphans_released, 0);
        // Later passes of the loop submit and reap the orphaned read, then free its buffer.
        for _ in 0..100_000 {
            if dropped.get() {
                break;
            }
            let io = io.clone();
            rt.block_on(async move { io.nop().await.unwrap() }).unwrap();
        }
        assert!(dropped.get(), "released once its completion was reaped");
        assert_eq!(rt.stats().orphans_released, 1);
    }

    #[test]
    fn fixed_buffers_from_the_pool() {
        let f = TempFile::new("pool", 32 * BS as u64);
        let cfg = IoConfig {
            fixed_buffers: true,
            queue_depth: 8,
            ..IoConfig::new(EngineKind::Uring)
        };
        let pool = FixedBufferPool::new(4, BS).unwrap();
        let mut rt = Runtime::from_config(&cfg, &[f.1.as_raw_fd()], Some(pool)).unwrap();
        let io = rt.io();
        for b in 0..32u64 {
            let io = io.clone();
            rt.spawn(async move {
                let mut buf = io.lease().await.unwrap();
                assert!(buf.fixed_index().is_some());
                fill(buf.as_mut_slice(), b);
                let (r, buf) = io.write(FileId(0), b * BS as u64, buf).await;
                r.unwrap();
                drop(buf);
                let back = io.lease().await.unwrap();
                let (r, back) = io.read(FileId(0), b * BS as u64, back).await;
                r.unwrap();
                let mut want = vec![0u8; BS];
                fill(&mut want, b);
                assert_eq!(back.as_slice(), &want[..]);
            });
        }
        rt.run().unwrap();
        assert_eq!(rt.stats().engine.completed, 64);
    }

    #[test]
    fn a_stall_is_an_error_not_a_hang() {
        let mut rt = Runtime::from_config(&IoConfig::new(EngineKind::Uring), &[], None).unwrap();
        let r = rt.block_on(std::future::pending::<()>());
        assert!(r.unwrap_err().to_string().contains("stalled"));
    }

    #[test]
    fn io_errors_reach_the_task() {
        let mut rt = Runtime::from_config(&IoConfig::new(EngineKind::Uring), &[-1], None).unwrap();
        let io = rt.io();
        let r = rt
            .block_on(async move { io.read(FileId(0), 0, AlignedBuf::new(BS)).await.0 })
            .unwrap();
        assert!(r
            .unwrap_err()
            .to_string()
            .contains("read failed at offset 0"));
    }
}
