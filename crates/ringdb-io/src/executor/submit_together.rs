//! [`Io::submit_together`](super::Io::submit_together): the requests one poll of a future
//! queues go to the kernel in one submission, whatever the batching policy.
//!
//! The runtime's `hold` count keeps new requests queued while the wrapped future's first poll
//! runs (holds nest); when the last hold ends, what was queued goes out in one submit, or,
//! when no other task is ready, with the loop's wait.

use super::shared::Inner;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// The future of [`Io::submit_together`](super::Io::submit_together).
pub struct SubmitTogether<F: Future> {
    inner: Rc<Inner>,
    fut: Pin<Box<F>>,
    first: bool,
}

impl<F: Future> SubmitTogether<F> {
    /// `fut`, whose first poll's requests go out together.
    pub(super) fn new(inner: Rc<Inner>, fut: F) -> Self {
        SubmitTogether {
            inner,
            fut: Box::pin(fut),
            first: true,
        }
    }
}

impl<F: Future> Future for SubmitTogether<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if !self.first {
            return self.fut.as_mut().poll(cx);
        }
        self.first = false;
        let inner = self.inner.clone();
        let holds_before = inner.hold.get();
        inner.hold.set(holds_before + 1);
        let result = self.fut.as_mut().poll(cx);
        assert_eq!(
            inner.hold.get(),
            holds_before + 1,
            "holds nest: a poll releases only its own"
        );
        inner.hold.set(holds_before);
        if holds_before == 0 && inner.has_ready() && inner.engine.borrow().pending() > 0 {
            if let Err(error) = inner.submit(0) {
                inner.record_failure(error);
            }
        }
        result
    }
}
