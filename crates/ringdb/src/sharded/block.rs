//! Runs a future to its end on the calling thread, parking it between polls: how the blocking
//! methods of a [`DbTransaction`](super::DbTransaction) run their async forms. The futures it
//! runs wait only on replies from shards, whose wakers unpark this thread (a reply from a
//! shard that went down is declared lost by its inbox, which wakes it too).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// Unparks the thread that polls.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// `future`'s output, polled on this thread, which parks until woken between polls.
pub(super) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    // Unbounded by design: each round waits for a wake-up, and every future here ends (a
    // reply comes, or its shard's inbox declares it lost).
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}
