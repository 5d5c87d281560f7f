//! The future of one request: it holds the buffer, queues the request on its first poll (or
//! parks in the ring-depth FIFO while the engine is full), then waits for the completion.
//!
//! Its states go `Idle -> (Parked ->) InFlight -> Done`, or straight to `Done` when the
//! runtime is closed or the engine refuses the push; each change is asserted. The buffer goes
//! back to the caller only on the way to `Done`, and from `InFlight` only once the slot's
//! result was taken: never while the kernel may still write into it. Dropped while in
//! flight, the future hands its buffer to the request's slot, which releases it when the
//! completion is reaped.

use super::buffers::IoBuf;
use super::shared::{Inner, Pushed};
use super::slots::Orphan;
use crate::engine::IoRequest;
use crate::error::{IoError, Result};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Where one request's future stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpState {
    /// Not yet polled.
    Idle,
    /// Waiting for ring room under this ticket of `depth_waiters`.
    Parked(u64),
    /// The engine has the request, under this slot.
    InFlight(usize),
    /// The result (and the buffer) went to the caller.
    Done,
}

/// One request's future: queues it on first poll (or parks while the ring is full), then waits
/// for its completion. Holds the buffer; on drop while in flight, hands it to the runtime.
pub(super) struct OpFuture<B: IoBuf> {
    inner: Rc<Inner>,
    request: IoRequest,
    buf: Option<B>,
    state: OpState,
}

impl<B: IoBuf> OpFuture<B> {
    /// The future of `request`, whose memory (for reads and writes) lies in `buf`.
    pub(super) fn new(inner: Rc<Inner>, request: IoRequest, buf: Option<B>) -> Self {
        OpFuture {
            inner,
            request,
            buf,
            state: OpState::Idle,
        }
    }

    /// Moves to `next`, asserting that the change is one the state machine has.
    fn set_state(&mut self, next: OpState) {
        use OpState::{Done, Idle, InFlight, Parked};
        let allowed = match (self.state, next) {
            (Idle, Parked(_)) | (Idle | Parked(_), InFlight(_)) | (Idle | Parked(_), Done) => true,
            // The buffer may go back only once the result left the slot.
            (InFlight(slot), Done) => self.inner.slots.borrow().is_free(slot),
            _ => false,
        };
        assert!(allowed, "I/O future: {:?} -> {next:?}", self.state);
        self.state = next;
    }

    /// Done: the result and the buffer go to the caller.
    fn finish(&mut self, result: Result<i32>) -> Poll<(Result<i32>, Option<B>)> {
        self.set_state(OpState::Done);
        Poll::Ready((result, self.buf.take()))
    }

    /// Idle or parked: pushes the request when its turn for ring room has come.
    fn poll_start(&mut self, waker: &Waker) -> Poll<(Result<i32>, Option<B>)> {
        if self.inner.closed.get() {
            if let OpState::Parked(ticket) = self.state {
                self.inner.depth_waiters.cancel(ticket);
            }
            return self.finish(Err(IoError::RuntimeGone));
        }
        if !self.take_turn(waker) {
            return Poll::Pending;
        }
        // SAFETY: request.buf points into the buffer this future owns (IoBuf: valid for
        // request.len bytes, stable while the value lives). The buffer leaves this future only
        // once the slot's result was taken (`set_state`), or, if the future is dropped first,
        // moves into the slot (see Drop), which releases it only when the completion has been
        // reaped; the runtime drains the engine before releasing slots (or leaks them if it
        // cannot).
        match unsafe { self.inner.push_request(self.request, waker) } {
            Pushed::Refused(error) => self.finish(Err(error)),
            Pushed::InFlight(slot) => {
                self.set_state(OpState::InFlight(slot));
                self.inner.flush_after_push();
                Poll::Pending
            }
        }
    }

    /// Whether this request may go to the engine now: when it is (or, a newcomer, would be)
    /// among the first as many waiters as the engine has room for; a parked request then
    /// leaves the FIFO, a newcomer never joins it. A newcomer behind waiters that a reap woke
    /// but the pass has not polled yet goes at once when the room covers them and it too:
    /// parked there it would not be woken until the next reap, and the loop would wait with
    /// the ring part empty.
    fn take_turn(&mut self, waker: &Waker) -> bool {
        let inner = &*self.inner;
        let room = inner.room();
        match self.state {
            OpState::Parked(ticket) => inner.depth_waiters.try_leave(ticket, room, waker),
            OpState::Idle if room > inner.depth_waiters.len() => true,
            OpState::Idle => {
                let ticket = inner.depth_waiters.park(waker);
                self.set_state(OpState::Parked(ticket));
                false
            }
            state => unreachable!("take_turn in state {state:?}"),
        }
    }

    /// In flight: the result, once the completion has arrived.
    fn poll_result(&mut self, slot: usize, waker: &Waker) -> Poll<(Result<i32>, Option<B>)> {
        let Some(result) = self.inner.slots.borrow_mut().take_result(slot, waker) else {
            return Poll::Pending;
        };
        let result = if result < 0 {
            Err(IoError::from_completion(
                self.request.op.name(),
                self.request.offset,
                result,
            ))
        } else {
            Ok(result)
        };
        self.finish(result)
    }
}

// OpFuture holds no self-references: moving it is fine.
impl<B: IoBuf> Unpin for OpFuture<B> {}

impl<B: IoBuf> Future for OpFuture<B> {
    type Output = (Result<i32>, Option<B>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        match this.state {
            OpState::Idle | OpState::Parked(_) => this.poll_start(cx.waker()),
            OpState::InFlight(slot) => this.poll_result(slot, cx.waker()),
            OpState::Done => panic!("an I/O future was polled after it completed"),
        }
    }
}

impl<B: IoBuf> Drop for OpFuture<B> {
    fn drop(&mut self) {
        match self.state {
            OpState::Parked(ticket) => {
                // Leave the queue; a wake-up meant for this request goes to the next one.
                self.inner.depth_waiters.cancel(ticket);
                self.inner.depth_waiters.wake_first(self.inner.room());
            }
            OpState::InFlight(_) if self.inner.leaked.get() => {
                // The drain failed and the slots were leaked: so is this buffer.
                std::mem::forget(self.buf.take());
            }
            OpState::InFlight(slot) => {
                let buffer = self.buf.take().map(|b| Box::new(b) as Orphan);
                // Still in flight: the slot keeps the buffer until the completion. Completed
                // but never collected: the kernel is done with it; dropped here, unborrowed.
                let done_with = self.inner.slots.borrow_mut().abandon(slot, buffer);
                drop(done_with);
            }
            OpState::Idle | OpState::Done => {}
        }
    }
}
