//! Deliveries of a warehouse run one at a time, as from the deferred-execution queue of clause
//! 2.7.2 ("the Delivery transaction is executed in deferred mode ... queued").
//!
//! Why: every Delivery of a warehouse takes the oldest NEW-ORDER row of each district in turn,
//! so two Deliveries of one warehouse running together want the same rows, and all but one die
//! and retry. Once Deliveries slowed down they piled up (at W=1 with 128 tasks, dozens ran at
//! once and nearly all their attempts died; measured: docs/results/issue13-tpcc.md, eighth
//! session), which made each one slower still. The
//! queue serialises them per warehouse; a task waits its turn parked, not retrying.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// One warehouse's turn: held by the Delivery running, and the tasks waiting for it.
#[derive(Default)]
struct Turn {
    taken: Cell<bool>,
    waiting: RefCell<VecDeque<Waker>>,
}

/// The per-warehouse turns of a run.
pub(super) struct DeliveryQueue {
    turns: Vec<Rc<Turn>>,
}

impl DeliveryQueue {
    /// A queue for warehouses `1..=warehouses`.
    pub(super) fn new(warehouses: u32) -> DeliveryQueue {
        let turns = (0..warehouses).map(|_| Rc::default()).collect();
        DeliveryQueue { turns }
    }

    /// Waits for warehouse `w`'s turn; the turn passes on when the returned guard drops.
    pub(super) async fn turn(&self, w: u32) -> DeliveryTurn {
        let turn = self.turns[w as usize - 1].clone();
        TakeTurn { turn: &turn }.await;
        DeliveryTurn { turn }
    }
}

/// A warehouse's turn, held: the waiters are woken when it drops (all of them: a few tasks at
/// most, and a waiter whose task is gone then cannot keep the others asleep).
pub(super) struct DeliveryTurn {
    turn: Rc<Turn>,
}

impl Drop for DeliveryTurn {
    fn drop(&mut self) {
        assert!(self.turn.taken.get(), "a turn released twice");
        self.turn.taken.set(false);
        let waiting = std::mem::take(&mut *self.turn.waiting.borrow_mut());
        for waker in waiting {
            waker.wake();
        }
    }
}

/// Takes the turn when it is free, else parks (a woken task that finds the turn taken again
/// parks again).
struct TakeTurn<'a> {
    turn: &'a Turn,
}

impl Future for TakeTurn<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.turn.taken.get() {
            self.turn.taken.set(true);
            return Poll::Ready(());
        }
        self.turn.waiting.borrow_mut().push_back(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::DeliveryQueue;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    struct CountWakes(AtomicUsize);

    impl Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn one_delivery_per_warehouse_at_a_time_and_the_waiter_is_woken() {
        let queue = DeliveryQueue::new(2);
        let wakes = Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut first = pin!(queue.turn(1));
        let Poll::Ready(held) = first.as_mut().poll(&mut cx) else {
            panic!("a free turn is taken at once");
        };
        // Another warehouse's turn is independent.
        let mut other = pin!(queue.turn(2));
        assert!(other.as_mut().poll(&mut cx).is_ready());
        // A second Delivery of warehouse 1 waits.
        let mut second = pin!(queue.turn(1));
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Ordering::Relaxed), 0);
        drop(held);
        assert!(wakes.0.load(Ordering::Relaxed) >= 1, "the waiter was woken");
        assert!(second.as_mut().poll(&mut cx).is_ready());
    }
}
