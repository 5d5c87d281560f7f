//! The task slab: spawned futures, each in a slot with the generation it was spawned under
//! and its waker.
//!
//! A slot is free (no waker, no future), live (waker and future) or running (waker, the
//! future taken out while it is polled, so that the slab is not borrowed while the task runs
//! and it may spawn). A slot's generation changes each time it is reused, so a wake-up meant
//! for a finished task never polls its successor. Tasks run only from the ready queue
//! ([`Tasks::poll`] asserts that the task was woken), never re-entrantly.

use super::waker::{ReadyQueue, TaskWaker};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// A spawned future, with its output already delivered to its `JoinHandle`.
pub(super) type Task = Pin<Box<dyn Future<Output = ()>>>;

/// The id under which `block_on`'s own future is woken.
pub(super) const MAIN_TASK: usize = usize::MAX;

/// A task's waker, made once when it is spawned: polls lend the `Waker` by reference, so a
/// poll costs no reference-count traffic on it (two atomic operations per poll before).
struct PollWaker {
    task: Arc<TaskWaker>,
    waker: Waker,
}

/// One slab entry. Free: no waker. Running (being polled): waker but no future.
#[derive(Default)]
struct TaskSlot {
    generation: u64,
    future: Option<Task>,
    waker: Option<Rc<PollWaker>>,
}

/// Every spawned task not yet finished, and the queue of those woken.
#[derive(Default)]
pub(super) struct Tasks {
    slots: RefCell<Vec<TaskSlot>>,
    free: RefCell<Vec<usize>>,
    live: Cell<usize>,
    next_generation: Cell<u64>,
    ready: Arc<ReadyQueue>,
}

impl Tasks {
    /// Tasks spawned and not finished.
    pub(super) fn live(&self) -> usize {
        self.live.get()
    }

    /// The queue wakers push onto.
    pub(super) fn ready(&self) -> &Arc<ReadyQueue> {
        &self.ready
    }

    /// A generation no task (and no `block_on` call) has had.
    pub(super) fn next_generation(&self) -> u64 {
        let generation = self.next_generation.get() + 1;
        self.next_generation.set(generation);
        generation
    }

    /// Puts `task` in a free slot and queues it to run.
    pub(super) fn spawn(&self, task: Task) {
        let generation = self.next_generation();
        let id = self.free.borrow_mut().pop().unwrap_or_else(|| {
            let mut slots = self.slots.borrow_mut();
            slots.push(TaskSlot::default());
            slots.len() - 1
        });
        let task_waker = TaskWaker::new(id, generation, self.ready.clone());
        let waker = Rc::new(PollWaker {
            task: task_waker.clone(),
            waker: Waker::from(task_waker),
        });
        {
            let mut slots = self.slots.borrow_mut();
            assert!(
                slots[id].waker.is_none(),
                "task slot {id} reused while live"
            );
            slots[id] = TaskSlot {
                generation,
                future: Some(task),
                waker: Some(waker.clone()),
            };
        }
        self.live.set(self.live.get() + 1);
        waker.waker.wake_by_ref();
    }

    /// Polls task `id` once if it is still the task of `generation` that was woken; returns
    /// whether it was polled.
    pub(super) fn poll(&self, id: usize, generation: u64) -> bool {
        let Some((mut future, waker)) = self.take_to_run(id, generation) else {
            return false;
        };
        waker.task.begin_poll();
        // The slab is not borrowed while the task runs: it may spawn.
        match future.as_mut().poll(&mut Context::from_waker(&waker.waker)) {
            Poll::Ready(()) => {
                drop(future);
                self.slots.borrow_mut()[id].waker = None;
                self.free.borrow_mut().push(id);
                assert!(self.live.get() > 0, "a task finished that was not live");
                self.live.set(self.live.get() - 1);
            }
            Poll::Pending => {
                let mut slots = self.slots.borrow_mut();
                assert!(slots[id].future.is_none(), "task {id} has two futures");
                slots[id].future = Some(future);
            }
        }
        true
    }

    /// Task `id`'s future and waker, taken out of the slab for a poll; `None` for a stale
    /// wake-up (the task finished, or its slot belongs to a later task).
    fn take_to_run(&self, id: usize, generation: u64) -> Option<(Task, Rc<PollWaker>)> {
        let mut slots = self.slots.borrow_mut();
        let slot = slots.get_mut(id)?;
        if slot.generation != generation {
            return None; // a finished task's stale wake-up
        }
        let waker = slot.waker.clone()?; // finished: the slot is free
        let future = slot.future.take();
        let future = future.expect("a task is polled while it is already running");
        Some((future, waker))
    }

    /// Takes every task out of the slab (to drop them outside of its borrow).
    pub(super) fn take_all(&self) -> Vec<Task> {
        let slots = std::mem::take(&mut *self.slots.borrow_mut());
        self.free.borrow_mut().clear();
        self.live.set(0);
        slots.into_iter().filter_map(|slot| slot.future).collect()
    }

    /// Whether the slab holds no task.
    pub(super) fn is_empty(&self) -> bool {
        self.slots.borrow().is_empty()
    }
}
