//! Telling a wait from a stall.
//!
//! With requests in flight, the loop blocks in the kernel until a completion arrives: a wait.
//! The engine's wait may return early without one (an interrupted `io_getevents`, an
//! `io_uring_enter` answered with `EAGAIN`); the loop then waits again, but at most
//! [`EMPTY_WAITS_MAX`] times in a row before it fails with [`IoError::NoCompletion`] rather
//! than spin forever on an engine or device that does not complete its requests.
//!
//! With nothing in flight and no task ready, nothing this thread does can wake a task: a
//! stall. Before calling it one, the loop wakes the futures parked for ring room and for pool
//! buffers once more (their wake-up may have gone to a waker that does not reach this
//! runtime); if none becomes ready, [`Runtime::block_on`](super::Runtime::block_on) and
//! [`Runtime::run`](super::Runtime::run) fail with [`IoError::Stalled`] instead of hanging.

use super::shared::Inner;
use crate::engine::IoCompletion;
use crate::error::{IoError, Result};

/// Waits in a row that may return without a completion before the loop gives up.
pub(super) const EMPTY_WAITS_MAX: u32 = 100_000;

/// What ends [`Inner::wait_for_completion`] besides a completion.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum WaitEnds {
    /// Only a completion (the drain: no task runs any more).
    AtCompletion,
    /// A completion, or a task woken meanwhile (from another thread).
    AtCompletionOrReadyTask,
}

impl Inner {
    /// Hands queued requests to the kernel and blocks until at least one completion is
    /// reaped (or, with [`WaitEnds::AtCompletionOrReadyTask`], a task is ready); returns how
    /// many were reaped. Fails after [`EMPTY_WAITS_MAX`] empty waits in a row.
    pub(super) fn wait_for_completion(
        &self,
        scratch: &mut Vec<IoCompletion>,
        ends: WaitEnds,
    ) -> Result<usize> {
        debug_assert!(
            self.engine.borrow().in_flight() > 0,
            "a wait with nothing in flight"
        );
        let tasks_count = ends == WaitEnds::AtCompletionOrReadyTask;
        for _ in 0..EMPTY_WAITS_MAX {
            // A task awaiting the doorbell makes a ring end the wait too (doorbell.rs).
            let armed = match tasks_count.then(|| self.arm_doorbell_for_wait()) {
                Some(None) => {
                    self.check_doorbell();
                    return Ok(0);
                }
                Some(Some(armed)) => armed,
                None => false,
            };
            let submitted = self.submit(1);
            if armed {
                self.disarm_doorbell();
            }
            submitted?;
            let reaped = self.reap(scratch);
            let woken = tasks_count && self.check_doorbell();
            if reaped > 0 || woken || (tasks_count && self.has_ready()) {
                return Ok(reaped);
            }
        }
        Err(IoError::NoCompletion {
            in_flight: self.engine.borrow().in_flight(),
            waits: EMPTY_WAITS_MAX,
        })
    }

    /// The last chance before a stall: wakes the futures parked for ring room or a pool
    /// buffer once more; returns whether a task is ready now.
    pub(super) fn wake_parked_again(&self) -> bool {
        self.depth_waiters.wake_first(self.room());
        if let Some(pool) = &self.pool {
            pool.wake_waiters();
        }
        self.has_ready()
    }

    /// The error for a stall while `pending` (the main future, or the tasks) still waits.
    pub(super) fn stall_error(&self, pending: &'static str) -> IoError {
        IoError::Stalled {
            pending,
            parked_tasks: self.tasks.live(),
            waiting_for_room: self.depth_waiters.len(),
        }
    }
}
