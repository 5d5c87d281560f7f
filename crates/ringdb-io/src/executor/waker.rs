//! Wakers: ordinary `std::task::Waker`s built from an `Arc<TaskWaker>` (no unsafe code).
//!
//! Waking pushes the task's id and generation onto the [`ReadyQueue`], at most once until
//! the task is polled (the `queued` flag), so the queue never holds a task twice and a task
//! that is in it is one that was woken: the pass loop asserts the flag is set when it polls.
//! The generation makes a stale wake-up (the task finished, its slot was reused) harmless.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Wake;

/// Task ids (with their generation) woken and not yet polled.
#[derive(Default)]
pub(super) struct ReadyQueue(Mutex<VecDeque<(usize, u64)>>);

impl ReadyQueue {
    /// The queue, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, VecDeque<(usize, u64)>> {
        // Nothing panics while holding the lock; recover from poison anyway.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a woken task waits for its poll.
    pub(super) fn has_ready(&self) -> bool {
        !self.lock().is_empty()
    }
}

/// The waker of one task (or of `block_on`'s own future).
pub(super) struct TaskWaker {
    id: usize,
    generation: u64,
    /// Already in the ready queue: further wakes before the next poll are no-ops.
    queued: AtomicBool,
    queue: Arc<ReadyQueue>,
}

impl TaskWaker {
    /// A waker for task `id` of `generation` that pushes onto `queue`.
    pub(super) fn new(id: usize, generation: u64, queue: Arc<ReadyQueue>) -> Arc<Self> {
        Arc::new(TaskWaker {
            id,
            generation,
            queued: AtomicBool::new(false),
            queue,
        })
    }

    /// Called just before the task is polled: it leaves the ready queue, and the next wake
    /// queues it again. Panics when the task was not woken (a poll of a task that is not
    /// ready is a bug in the pass loop).
    pub(super) fn begin_poll(&self) {
        let was_queued = self.queued.swap(false, Ordering::AcqRel);
        assert!(
            was_queued,
            "task {} (generation {}) polled without being woken",
            self.id, self.generation
        );
    }
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.queue.lock().push_back((self.id, self.generation));
        }
    }
}
