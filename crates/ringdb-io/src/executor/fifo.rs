//! A FIFO of parked futures, each known by its ticket: requests waiting for ring room, and
//! leases waiting for a free pool buffer.
//!
//! Waiting in a FIFO instead of retrying keeps the executor free of busy loops and gives
//! waiters their turn in arrival order. A woken entry stays queued until its future takes
//! what it waited for (or is dropped), so a wake-up is never lost: a future that is woken but
//! finds itself behind others refreshes its waker and stays.
//!
//! Tickets increase by one per park, so the queue is always in ticket order (asserted on
//! each park, and checked in full on each turn taken in debug builds).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::task::Waker;

/// A FIFO of parked futures, each known by its ticket.
#[derive(Default)]
pub(super) struct Fifo {
    next_ticket: Cell<u64>,
    queue: RefCell<VecDeque<(u64, Waker)>>,
}

impl Fifo {
    /// Whether no future waits.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.queue.borrow().is_empty()
    }

    /// How many futures wait.
    pub(super) fn len(&self) -> usize {
        self.queue.borrow().len()
    }

    /// Queues a future at the back; returns its ticket.
    pub(super) fn park(&self, waker: &Waker) -> u64 {
        let ticket = self.next_ticket.get();
        self.next_ticket.set(ticket + 1);
        let mut queue = self.queue.borrow_mut();
        assert!(
            queue.back().is_none_or(|(last, _)| *last < ticket),
            "FIFO order: ticket {ticket} parks behind a later one"
        );
        queue.push_back((ticket, waker.clone()));
        ticket
    }

    /// Whether `ticket` is among the first `room` entries; if so it leaves the queue, else its
    /// waker is refreshed. A parked ticket is always queued (it leaves only here or through
    /// [`Fifo::cancel`]).
    pub(super) fn try_leave(&self, ticket: u64, room: usize, waker: &Waker) -> bool {
        let mut queue = self.queue.borrow_mut();
        debug_assert!(
            queue
                .iter()
                .zip(queue.iter().skip(1))
                .all(|(a, b)| a.0 < b.0),
            "FIFO order: tickets out of order"
        );
        let position = queue.iter().position(|(queued, _)| *queued == ticket);
        let Some(position) = position else {
            panic!("ticket {ticket} takes its turn but is not parked");
        };
        if position < room {
            queue.remove(position);
            return true;
        }
        if !queue[position].1.will_wake(waker) {
            queue[position].1 = waker.clone();
        }
        false
    }

    /// Removes a parked `ticket` whose future is gone (or gives up).
    pub(super) fn cancel(&self, ticket: u64) {
        let mut queue = self.queue.borrow_mut();
        let before = queue.len();
        queue.retain(|(queued, _)| *queued != ticket);
        assert_eq!(
            before - queue.len(),
            1,
            "ticket {ticket} is cancelled but is not parked"
        );
    }

    /// Wakes the first `n` entries (they stay queued until they take their turn).
    pub(super) fn wake_first(&self, n: usize) {
        let wakers: Vec<Waker> = self
            .queue
            .borrow()
            .iter()
            .take(n)
            .map(|(_, waker)| waker.clone())
            .collect();
        // Woken outside the borrow: a waker may be anything, including code that parks again.
        for waker in wakers {
            waker.wake();
        }
    }
}
