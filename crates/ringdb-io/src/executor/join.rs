//! What a spawner gets back, and how a task lets others run.
//!
//! A spawned future is wrapped so that its output lands in a [`JoinHandle`]'s shared state and
//! wakes whoever awaits the handle; the task itself then has no output, so the slab holds one
//! type of future. [`yield_now`] lets the other ready tasks and the I/O loop run: the task
//! wakes itself, and the pass loop runs tasks woken during a pass only in the next one.

use super::task::Task;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// The output of a spawned task; a future. Dropping it detaches the task.
pub struct JoinHandle<T> {
    state: Rc<RefCell<JoinState<T>>>,
}

struct JoinState<T> {
    value: Option<T>,
    done: bool,
    waker: Option<Waker>,
}

/// `future` as a task whose output goes to the returned handle.
pub(super) fn joinable<T: 'static>(
    future: impl Future<Output = T> + 'static,
) -> (Task, JoinHandle<T>) {
    let state = Rc::new(RefCell::new(JoinState {
        value: None,
        done: false,
        waker: None,
    }));
    let shared = state.clone();
    let task = Box::pin(async move {
        let value = future.await;
        let waker = {
            let mut state = shared.borrow_mut();
            assert!(!state.done, "a task finished twice");
            state.value = Some(value);
            state.done = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    });
    (task, JoinHandle { state })
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
        let mut state = self.state.borrow_mut();
        match state.value.take() {
            Some(value) => Poll::Ready(value),
            None => {
                state.waker = Some(cx.waker().clone());
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
