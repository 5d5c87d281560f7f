//! The state a [`Runtime`](super::Runtime), its [`Io`](super::Io) handles and its I/O futures
//! share (behind one `Rc`), and the two places requests cross into the engine: the push of
//! one request and the reap of completions.
//!
//! Both keep the request slots and the engine in step: after a push or a reap, the slots in
//! flight number exactly what the engine reports in flight (asserted), so every completion
//! finds the slot of its request and no slot is freed while the engine still has it.

use super::doorbell::DoorbellHost;
use super::fifo::Fifo;
use super::pool::SharedPool;
use super::slots::{Delivered, OpSlots};
use super::stats::RuntimeStats;
use super::task::Tasks;
use crate::config::Batching;
use crate::engine::{Engine, IoCompletion, IoRequest};
use crate::error::IoError;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

/// The runtime's state, shared by the runtime, its handles and its futures.
///
/// Fields drop in declaration order, after [`Inner`]'s own `Drop` drained the engine: the
/// engine first, then the slots (with the orphans), then the pool, so that no buffer goes
/// before the engine that may still point into it.
pub(super) struct Inner {
    pub(super) engine: RefCell<Box<dyn Engine>>,
    /// The doorbell (once made) and the tasks awaiting it; after the engine, which may hold
    /// its eventfd.
    pub(super) doorbell: RefCell<DoorbellHost>,
    pub(super) batching: Batching,
    pub(super) slots: RefCell<OpSlots>,
    /// Requests waiting for the engine to have room (in_flight == depth).
    pub(super) depth_waiters: Fifo,
    pub(super) tasks: Tasks,
    pub(super) pool: Option<Rc<SharedPool>>,
    pub(super) stats: Cell<RuntimeStats>,
    /// Requests handed to the kernel by submits that handed at least one.
    pub(super) batched_requests: Cell<u64>,
    /// Requests pushed so far (to tell whether a pass queued anything).
    pub(super) pushes: Cell<u64>,
    /// An engine failure met inside a task's poll, reported by the loop.
    pub(super) failed: RefCell<Option<IoError>>,
    /// The Runtime is gone: no new tasks or requests.
    pub(super) closed: Cell<bool>,
    /// Draining failed: the orphans and the pool were leaked on purpose.
    pub(super) leaked: Cell<bool>,
    /// While non-zero, new requests stay queued whatever the batching policy says
    /// ([`Io::submit_together`](super::Io::submit_together)).
    pub(super) hold: Cell<u32>,
}

/// What became of a request handed to [`Inner::push_request`].
pub(super) enum Pushed {
    /// The engine has it, under this slot.
    InFlight(usize),
    /// The engine refused it; nothing reached the kernel and the buffer is the caller's.
    Refused(IoError),
}

impl Inner {
    /// A runtime's state over `engine`, which must have nothing in flight.
    pub(super) fn new(
        engine: Box<dyn Engine>,
        batching: Batching,
        pool: Option<Rc<SharedPool>>,
    ) -> Inner {
        assert_eq!(
            engine.in_flight(),
            0,
            "a runtime starts over an engine with nothing in flight"
        );
        Inner {
            engine: RefCell::new(engine),
            doorbell: RefCell::new(DoorbellHost::default()),
            batching,
            slots: RefCell::new(OpSlots::default()),
            depth_waiters: Fifo::default(),
            tasks: Tasks::default(),
            pool,
            stats: Cell::new(RuntimeStats::default()),
            batched_requests: Cell::new(0),
            pushes: Cell::new(0),
            failed: RefCell::new(None),
            closed: Cell::new(false),
            leaked: Cell::new(false),
            hold: Cell::new(0),
        }
    }

    /// Updates the runtime's counters.
    pub(super) fn bump(&self, update: impl FnOnce(&mut RuntimeStats)) {
        let mut stats = self.stats.get();
        update(&mut stats);
        self.stats.set(stats);
    }

    /// Whether a woken task (or `block_on`'s future) waits for its poll.
    pub(super) fn has_ready(&self) -> bool {
        self.tasks.ready().has_ready()
    }

    /// Requests the engine can take before it is full.
    pub(super) fn room(&self) -> usize {
        let engine = self.engine.borrow();
        engine.depth().saturating_sub(engine.in_flight())
    }

    /// Keeps the first engine failure for the loop to report from `block_on`/`run`.
    pub(super) fn record_failure(&self, error: IoError) {
        self.failed.borrow_mut().get_or_insert(error);
    }

    /// Pushes `request` to the engine under a new slot whose completion wakes `waker`.
    ///
    /// # Safety
    /// For reads and writes, `request.buf` must stay valid for `request.len` bytes, and must
    /// not be freed or reused, until the completion of the returned slot has been reaped: the
    /// caller keeps the buffer, or hands it to the slot ([`OpSlots::abandon`]) when dropped.
    pub(super) unsafe fn push_request(&self, mut request: IoRequest, waker: &Waker) -> Pushed {
        let slot = self.slots.borrow_mut().acquire(waker);
        request.user_data = slot as u64;
        let mut engine = self.engine.borrow_mut();
        let in_flight_before = engine.in_flight();
        // SAFETY: the caller's contract above is the engine's push contract.
        let pushed = unsafe { engine.push(&request) };
        let kept = engine.in_flight() > in_flight_before;
        drop(engine);
        let outcome = match pushed {
            Ok(()) => {
                assert!(
                    kept,
                    "the engine accepted slot {slot} but has it not in flight"
                );
                Pushed::InFlight(slot)
            }
            // The engine failed after queueing it (uring-sync's submit): the kernel may have
            // the buffer, so the request stays in flight and the loop reports the failure.
            Err(error) if kept => {
                self.record_failure(error);
                Pushed::InFlight(slot)
            }
            Err(error) => {
                self.slots.borrow_mut().release_refused(slot);
                Pushed::Refused(error)
            }
        };
        if let Pushed::InFlight(_) = outcome {
            self.pushes.set(self.pushes.get() + 1);
        }
        self.assert_in_step();
        outcome
    }

    /// Reaps ready completions, wakes their futures and releases orphans; returns how many.
    pub(super) fn reap(&self, scratch: &mut Vec<IoCompletion>) -> usize {
        scratch.clear();
        let reaped = self.engine.borrow_mut().reap(scratch);
        let mut wakers = Vec::new();
        let mut orphans = Vec::new();
        {
            let mut slots = self.slots.borrow_mut();
            for completion in scratch.iter() {
                match slots.deliver(completion.user_data as usize, completion.result) {
                    Delivered::Wake(waker) => wakers.push(waker),
                    Delivered::Release(orphan) => orphans.extend(orphan),
                }
            }
        }
        self.assert_in_step();
        let released = orphans.len() as u64;
        // Dropped outside the borrow: a PoolBuf's drop wakes lease waiters.
        drop(orphans);
        if released > 0 {
            self.bump(|s| s.orphans_released += released);
        }
        for waker in wakers {
            waker.wake();
        }
        if reaped > 0 {
            self.depth_waiters.wake_first(self.room());
        }
        reaped
    }

    /// The slots in flight are the engine's requests in flight (checked where either
    /// changes: a push, a reap). Not after a drain failure, which leaks the slots on purpose.
    pub(super) fn assert_in_step(&self) {
        if self.leaked.get() {
            return;
        }
        let slots = self.slots.borrow().in_flight();
        let engine = self.engine.borrow().in_flight();
        assert_eq!(
            slots, engine,
            "the runtime has {slots} requests in flight, the engine {engine}"
        );
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Runs before the fields are dropped (engine first, then the orphans, then the pool):
        // no buffer may go before its completion. A no-op after Runtime::drop drained.
        let _ = self.drain();
    }
}
