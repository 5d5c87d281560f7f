//! One reply crossing back from a shard: a one-shot slot the shard fills and the caller waits
//! on, either a thread (sync API: a short spin, then park) or a task (async API: its waker, and
//! the doorbell of the runtime it runs on, so that a runtime blocked in its ring wakes up).
//!
//! A sender dropped without a value (the shard stopped, the job was never run) marks the slot
//! lost, so a waiter never waits for a reply that cannot come: that is what bounds every wait
//! here (a shard either replies or drops the sender when its thread ends).

use ringdb_io::Doorbell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Who waits for the reply.
enum Waiter {
    Thread(Thread),
    Task {
        waker: Waker,
        /// The doorbell of the runtime the task runs on, when that is a ringdb runtime: a
        /// waker's wake from another thread does not end its blocking wait, the doorbell does.
        doorbell: Option<Doorbell>,
    },
}

enum State<T> {
    Waiting(Option<Waiter>),
    Ready(T),
    Lost,
    Taken,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    /// Set once the state left `Waiting`: what a spinning waiter polls without the lock.
    done: AtomicBool,
}

/// The shard's end: send the value, or drop it to say it will never come.
pub struct ReplySender<T> {
    slot: Option<Arc<Slot<T>>>,
}

/// The caller's end.
pub struct ReplyReceiver<T> {
    slot: Arc<Slot<T>>,
}

/// A new reply slot: its sender goes with the job to the shard.
pub fn channel<T>() -> (ReplySender<T>, ReplyReceiver<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Waiting(None)),
        done: AtomicBool::new(false),
    });
    (
        ReplySender {
            slot: Some(slot.clone()),
        },
        ReplyReceiver { slot },
    )
}

impl<T> Slot<T> {
    /// Leaves `Waiting` for `next` and wakes whoever waits. A slot already declared lost
    /// (its shard went down, [`Loseable::lose`]) keeps that verdict: a late value is dropped.
    fn finish(&self, next: State<T>) {
        let waiter = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            match &*state {
                State::Waiting(_) => {}
                State::Lost | State::Taken => return,
                State::Ready(_) => unreachable!("a reply slot is finished once"),
            }
            match std::mem::replace(&mut *state, next) {
                State::Waiting(waiter) => waiter,
                _ => unreachable!("checked above"),
            }
        };
        self.done.store(true, Ordering::Release);
        match waiter {
            Some(Waiter::Thread(thread)) => thread.unpark(),
            Some(Waiter::Task { waker, doorbell }) => {
                waker.wake();
                if let Some(doorbell) = doorbell {
                    doorbell.ring();
                }
            }
            None => {}
        }
    }

    /// The value, if the slot is finished: `Some(None)` when it was lost.
    fn take(&self) -> Option<Option<T>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut *state, State::Taken) {
            State::Ready(value) => Some(Some(value)),
            State::Lost => Some(None),
            waiting @ State::Waiting(_) => {
                *state = waiting;
                None
            }
            State::Taken => unreachable!("a reply is taken once"),
        }
    }

    /// Registers `waiter` unless the slot is already finished.
    fn register(&self, waiter: Waiter) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *state {
            State::Waiting(slot) => {
                *slot = Some(waiter);
                true
            }
            _ => false,
        }
    }
}

impl<T> ReplySender<T> {
    /// Delivers the reply.
    pub fn send(mut self, value: T) {
        let slot = self.slot.take().expect("a sender sends once");
        slot.finish(State::Ready(value));
    }
}

impl<T> Drop for ReplySender<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.finish(State::Lost);
        }
    }
}

/// A reply slot a shard's inbox can declare lost when the shard goes down: a shard that
/// panicked leaks its tasks, and with them the senders of the replies they owed, which
/// therefore never drop. A task awaiting such a reply (on another shard) cannot poll for that
/// the way a parked thread does, so the inbox keeps its slot and loses it at the stop.
pub(super) trait Loseable: Send + Sync {
    /// Marks the reply lost (and wakes its waiter) unless it already came.
    fn lose(&self);
}

impl<T: Send> Loseable for Slot<T> {
    fn lose(&self) {
        self.finish(State::Lost);
    }
}

/// How often a parked [`ReplyReceiver::wait_unless`] checks whether its sender was lost.
pub const LOST_CHECK: Duration = Duration::from_millis(20);

impl<T> ReplyReceiver<T> {
    /// Blocks the calling thread for the reply: spins for up to `spin` first (a reply that
    /// comes within it costs no sleep and no wake-up), then parks. `None`: the reply was lost.
    pub fn wait(self, spin: Duration) -> Option<T> {
        self.wait_unless(spin, || false)
    }

    /// [`wait`](Self::wait), but also gives up (`None`) once `lost` says the sender can no
    /// longer send: a shard that panicked leaks its tasks, and with them the senders of the
    /// replies they owed, which therefore never drop. Checked every [`LOST_CHECK`] of parking.
    pub fn wait_unless(self, spin: Duration, lost: impl Fn() -> bool) -> Option<T> {
        if !spin.is_zero() {
            let until = Instant::now() + spin;
            while !self.slot.done.load(Ordering::Acquire) && Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        if let Some(value) = self.slot.take() {
            return value;
        }
        if !self.slot.register(Waiter::Thread(std::thread::current())) {
            return self.slot.take().expect("finished");
        }
        loop {
            if self.slot.done.load(Ordering::Acquire) {
                return self.slot.take().expect("finished");
            }
            if lost() {
                // The sender may have finished just before the check.
                return self.slot.take().flatten();
            }
            std::thread::park_timeout(LOST_CHECK);
        }
    }
}

impl<T: Send + 'static> ReplyReceiver<T> {
    /// A weak handle on the slot, for the inbox of the shard that owes the reply.
    pub(super) fn loseable(&self) -> std::sync::Weak<dyn Loseable> {
        let slot: Arc<dyn Loseable> = self.slot.clone();
        Arc::downgrade(&slot)
    }
}

impl<T> Future for ReplyReceiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(value) = self.slot.take() {
            return Poll::Ready(value);
        }
        let waiter = Waiter::Task {
            waker: cx.waker().clone(),
            doorbell: super::context::current_doorbell(),
        };
        if !self.slot.register(waiter) {
            return Poll::Ready(self.slot.take().expect("finished"));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_reaches_a_parked_thread_and_a_dropped_sender_is_a_loss() {
        let (tx, rx) = channel::<u32>();
        let t = std::thread::spawn(move || rx.wait(Duration::ZERO));
        std::thread::sleep(Duration::from_millis(20));
        tx.send(7);
        assert_eq!(t.join().unwrap(), Some(7));
        let (tx, rx) = channel::<u32>();
        drop(tx);
        assert_eq!(rx.wait(Duration::from_micros(10)), None);
    }
}
