//! Waiting for the pool to change: a task that cannot go on (no free frame, a page in another
//! task's I/O) registers its waker once where the change will be announced, parks, and retries
//! from the top when woken. A poisoned pool wakes nobody again, so a wait on it ends at once.

use super::frame::Inner;
use super::PageId;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Where a parked task's waker goes.
#[derive(Clone, Copy)]
pub(super) enum WaitOn {
    /// The next change in the free frames (a frame freed, a round ended, a pin gone).
    Frames,
    /// An eviction round that found nothing to evict (every page pinned or in an I/O) waits,
    /// its round still open, for the next unpin or freed frame: it alone is woken by those,
    /// before any other frame waiter.
    Evictable,
    /// The end of the I/O on this page.
    PageIo(PageId),
}

/// Parks the task until `on` announces a change (or the pool is poisoned).
pub(super) fn wait(inner: &Rc<Inner>, on: WaitOn) -> Wait {
    Wait {
        inner: inner.clone(),
        on,
        registered: false,
    }
}

/// The future of [`wait`]: pending once, after registering its waker; ready when polled again.
pub(super) struct Wait {
    inner: Rc<Inner>,
    on: WaitOn,
    registered: bool,
}

impl Wait {
    fn register(&self, waker: Waker) {
        match self.on {
            WaitOn::Frames => self.inner.frame_waiters.borrow_mut().push(waker),
            // One round at a time; a waker left by a cancelled round is replaced.
            WaitOn::Evictable => *self.inner.round_waiter.borrow_mut() = Some(waker),
            WaitOn::PageIo(pid) => self
                .inner
                .io_waiters
                .borrow_mut()
                .entry(pid)
                .or_default()
                .push(waker),
        }
    }
}

impl Future for Wait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.registered || self.inner.poisoned.get() {
            return Poll::Ready(());
        }
        self.registered = true;
        self.register(cx.waker().clone());
        Poll::Pending
    }
}
