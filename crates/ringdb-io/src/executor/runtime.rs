//! The [`Runtime`]: building it over an engine, and the loop (the module docs' *The loop*):
//! a pass polls the tasks that were ready when it began; then the runtime flushes, reaps, and
//! when no task is ready, submits together with a wait, or reports a stall.

use super::doorbell::{Doorbell, Running};
use super::io::Io;
use super::join::JoinHandle;
use super::pool::SharedPool;
use super::shared::Inner;
use super::stall::WaitEnds;
use super::stats::RuntimeStats;
use super::task::{Task, MAIN_TASK};
use super::waker::TaskWaker;
use crate::buf::FixedBufferPool;
use crate::config::{Batching, IoConfig};
use crate::engine::{open_engine_resolved, EffectiveIo, Engine, IoCompletion};
use crate::error::{IoError, Result};
use std::future::Future;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::{Context, Poll, Wake, Waker};

/// The executor. Not `Send`: it belongs to the thread that made it, like its ring.
pub struct Runtime {
    pub(super) inner: Rc<Inner>,
    scratch: Vec<IoCompletion>,
    /// What the engine runs (what `auto` resolved to).
    effective: EffectiveIo,
}

impl Runtime {
    /// A runtime over an engine opened elsewhere, without a buffer pool.
    pub fn new(engine: Box<dyn Engine>, batching: Batching) -> Runtime {
        let effective = EffectiveIo::opened_elsewhere(engine.kind(), engine.depth());
        Self::build(engine, batching, None, effective)
    }

    /// A runtime over an engine opened elsewhere (e.g. a simulated disk), owning `pool`
    /// (not registered with the engine) to lease its buffers.
    pub fn with_pool(
        engine: Box<dyn Engine>,
        batching: Batching,
        pool: FixedBufferPool,
    ) -> Runtime {
        let effective = EffectiveIo::opened_elsewhere(engine.kind(), engine.depth());
        Self::build(engine, batching, Some(pool), effective)
    }

    /// Opens the engine `cfg` names over `files` (`auto` resolves here: see
    /// [`Runtime::effective_io`]). With `cfg.fixed_buffers` in effect, `pool` is registered with
    /// the ring; either way the runtime owns it (it outlives the engine) and
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
            return Err(IoError::NoBufferPool);
        }
        let offered = cfg.fixed_buffers && cfg.engine.accepts_uring_switches();
        let (engine, effective) =
            open_engine_resolved(cfg, files, if offered { iov.as_deref() } else { None })?;
        let engine = wrap(engine)?;
        Ok(Self::build(engine, cfg.batching, pool, effective))
    }

    fn build(
        engine: Box<dyn Engine>,
        batching: Batching,
        pool: Option<FixedBufferPool>,
        effective: EffectiveIo,
    ) -> Runtime {
        let registered = effective.switches.is_some_and(|s| s.fixed_buffers);
        let pool = pool.map(|pool| Rc::new(SharedPool::new(pool, registered)));
        Runtime {
            inner: Rc::new(Inner::new(engine, batching, pool)),
            scratch: Vec::new(),
            effective,
        }
    }

    /// What the engine runs: the engine in effect (what `auto` resolved to), its switches, and
    /// what was done without.
    pub fn effective_io(&self) -> EffectiveIo {
        self.effective
    }

    /// A handle for I/O and spawning, to move into tasks.
    pub fn io(&self) -> Io {
        Io {
            inner: self.inner.clone(),
        }
    }

    /// The batching policy the runtime submits by.
    pub fn batching(&self) -> Batching {
        self.inner.batching
    }

    /// Starts a task; it runs when the runtime runs (`block_on`, `run`).
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        self.io().spawn(fut)
    }

    /// Tasks spawned and not finished.
    pub fn live_tasks(&self) -> usize {
        self.inner.tasks.live()
    }

    /// The runtime's [`Doorbell`], made with its eventfd on the first call (later calls hand
    /// out more handles to the same one). Other threads ring it to wake the runtime.
    pub fn doorbell(&self) -> Result<Doorbell> {
        self.inner.doorbell_handle()
    }

    /// The runtime's counters and its engine's.
    pub fn stats(&self) -> RuntimeStats {
        self.inner.stats_now()
    }

    /// Runs `fut` and every spawned task until `fut` finishes (other tasks may remain; they run
    /// on the next `block_on` or `run`). Fails when the engine fails, or when nothing can make
    /// progress (no task ready, no I/O in flight): a stall, not a hang.
    pub fn block_on<T>(&mut self, fut: impl Future<Output = T>) -> Result<T> {
        let mut fut = std::pin::pin!(fut);
        let inner = self.inner.clone();
        let _running = Running::enter(&inner);
        let generation = inner.tasks.next_generation();
        let main = TaskWaker::new(MAIN_TASK, generation, inner.tasks.ready().clone());
        let main_waker = Waker::from(main.clone());
        main.wake_by_ref();
        let mut output = None;
        let mut poll_main = || {
            main.begin_poll();
            inner.bump(|s| s.polls += 1);
            match fut.as_mut().poll(&mut Context::from_waker(&main_waker)) {
                Poll::Ready(value) => {
                    output = Some(value);
                    true
                }
                Poll::Pending => false,
            }
        };
        // Each round is one pass and one step of I/O; it ends when the future does, or when
        // nothing can make progress (a stall, or a bounded wait that got no completion).
        loop {
            let pushes = inner.pushes.get();
            if inner.run_pass(generation, &mut poll_main) {
                break;
            }
            if !self.progress(pushes)? {
                return Err(inner.stall_error("the main future is pending"));
            }
        }
        Ok(output.expect("block_on's future finished with a value"))
    }

    /// Runs until every spawned task has finished and no request is in flight (requests of
    /// dropped futures included, so their buffers are released).
    pub fn run(&mut self) -> Result<()> {
        let inner = self.inner.clone();
        let _running = Running::enter(&inner);
        // Ends when everything is done, or when nothing can make progress (see block_on).
        loop {
            let pushes = inner.pushes.get();
            inner.run_pass(0, &mut || false);
            if inner.tasks.live() == 0 && inner.engine.borrow().in_flight() == 0 {
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
        if let Some(error) = inner.failed.borrow_mut().take() {
            return Err(error);
        }
        let reaped = inner.reap(&mut self.scratch);
        inner.check_doorbell();
        if reaped > 0 || inner.has_ready() {
            if inner.flush_at_end_of_pass(inner.pushes.get() != pushes_before_pass) {
                inner.submit(0)?;
            }
            return Ok(true);
        }
        if inner.engine.borrow().in_flight() == 0 {
            // A task awaiting the doorbell is not a stall: sleep until it rings.
            return Ok(inner.wake_parked_again() || inner.sleep_for_doorbell()?);
        }
        // Nothing to run: submit what is queued together with the wait (one enter).
        inner.wait_for_completion(&mut self.scratch, WaitEnds::AtCompletionOrReadyTask)?;
        Ok(true)
    }
}

impl Inner {
    /// Starts `task` unless the runtime is gone (then the future is dropped unpolled).
    pub(super) fn spawn_task(&self, task: Task) {
        if self.closed.get() {
            return;
        }
        self.tasks.spawn(task);
        self.bump(|s| s.tasks_spawned += 1);
    }

    /// One pass: polls every task ready when the pass began, once. `main` polls `block_on`'s
    /// future (under generation `main_generation`) and says whether it finished; then the
    /// pass stops.
    fn run_pass(&self, main_generation: u64, main: &mut dyn FnMut() -> bool) -> bool {
        let ready_at_start = self.tasks.ready().lock().len();
        for _ in 0..ready_at_start {
            let Some((id, generation)) = self.tasks.ready().lock().pop_front() else {
                break;
            };
            if id == MAIN_TASK {
                if generation == main_generation && main() {
                    return true;
                }
                continue;
            }
            if self.tasks.poll(id, generation) {
                self.bump(|s| s.polls += 1);
            }
        }
        false
    }
}
