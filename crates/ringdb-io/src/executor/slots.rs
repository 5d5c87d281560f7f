//! Request slots: what the runtime knows about each request between its push and its result,
//! and where the buffer of a future dropped mid-flight waits for the completion.
//!
//! A request's `user_data` is its slot's index. A slot goes
//! `Free -> InFlight -> Completed -> Free` (the future takes its result), or
//! `InFlight -> Abandoned -> Free` when the future is dropped before the completion: its
//! buffer (the *orphan*) moves into the slot and is released only when the completion is
//! reaped, because until then the kernel may write into it. A future dropped after the
//! completion but before taking the result frees its slot at once (`Completed -> Free`), and
//! a push the engine refused frees it too (`InFlight -> Free`, nothing reached the kernel).
//! Every change is asserted: a completion for a slot with no request in flight would hand a
//! stale result to the slot's next request, and freeing a slot still in flight would release
//! a buffer under the kernel.
//!
//! InFlight means the engine has the request, queued or at the device: the engine, not the
//! runtime, knows which (`Engine::pending`). The count of slots in flight (InFlight and
//! Abandoned) is what the engine reports as `in_flight`, asserted after every push and reap.

use std::any::Any;
use std::task::Waker;

/// A buffer, type-erased, held for a dropped future until its request completes.
pub(super) type Orphan = Box<dyn Any>;

/// One request slot.
#[derive(Default)]
enum SlotState {
    /// No request; the slot is on the free list.
    #[default]
    Free,
    /// The engine has the request; `waker` wakes the future waiting for it.
    InFlight { waker: Waker },
    /// The completion arrived; its result waits for the future to take it.
    Completed { result: i32 },
    /// The future was dropped while the request was in flight; its buffer waits here.
    Abandoned { orphan: Option<Orphan> },
}

impl SlotState {
    fn name(&self) -> &'static str {
        match self {
            SlotState::Free => "free",
            SlotState::InFlight { .. } => "in flight",
            SlotState::Completed { .. } => "completed",
            SlotState::Abandoned { .. } => "abandoned",
        }
    }
}

/// What a completion did to its slot.
pub(super) enum Delivered {
    /// The waiting future has its result; wake it.
    Wake(Waker),
    /// The future was gone: the kernel is done with its buffer, which may be dropped now
    /// (outside of any borrow: a pool buffer's drop wakes lease waiters).
    Release(Option<Orphan>),
}

/// Every request slot, the free ones and how many are in flight.
#[derive(Default)]
pub(super) struct OpSlots {
    slots: Vec<SlotState>,
    free: Vec<usize>,
    /// Slots InFlight or Abandoned: requests the engine has not returned.
    in_flight: usize,
}

impl OpSlots {
    /// Requests the engine has and has not returned (their slots are InFlight or Abandoned).
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether slot `id` is free (its request's result was taken, or it never had one).
    pub(super) fn is_free(&self, id: usize) -> bool {
        matches!(self.slots.get(id), Some(SlotState::Free))
    }

    /// A free slot for a request about to be pushed: `Free -> InFlight`.
    pub(super) fn acquire(&mut self, waker: &Waker) -> usize {
        let id = self.free.pop().unwrap_or_else(|| {
            self.slots.push(SlotState::Free);
            self.slots.len() - 1
        });
        let slot = &mut self.slots[id];
        assert!(
            matches!(slot, SlotState::Free),
            "slot {id} on the free list is {}",
            slot.name()
        );
        *slot = SlotState::InFlight {
            waker: waker.clone(),
        };
        self.in_flight += 1;
        id
    }

    /// The engine refused the push: nothing reached the kernel. `InFlight -> Free`.
    pub(super) fn release_refused(&mut self, id: usize) {
        let slot = &mut self.slots[id];
        assert!(
            matches!(slot, SlotState::InFlight { .. }),
            "a refused push frees slot {id}, which is {}",
            slot.name()
        );
        self.set_free(id);
        self.in_flight -= 1;
    }

    /// The completion of slot `id`'s request: `InFlight -> Completed`, or
    /// `Abandoned -> Free`. Panics for a slot that has no request in flight.
    pub(super) fn deliver(&mut self, id: usize, result: i32) -> Delivered {
        let Some(slot) = self.slots.get_mut(id) else {
            panic!("a completion for slot {id}, which was never used");
        };
        let delivered = match std::mem::take(slot) {
            SlotState::InFlight { waker } => {
                *slot = SlotState::Completed { result };
                Delivered::Wake(waker)
            }
            SlotState::Abandoned { orphan } => {
                self.set_free(id);
                Delivered::Release(orphan)
            }
            other => panic!(
                "a completion for slot {id}, which is {}: no request of it is in flight",
                other.name()
            ),
        };
        self.in_flight -= 1;
        delivered
    }

    /// The result of slot `id`'s request if it has completed (`Completed -> Free`); while it
    /// is in flight, `waker` replaces the waker the completion wakes.
    pub(super) fn take_result(&mut self, id: usize, waker: &Waker) -> Option<i32> {
        match &mut self.slots[id] {
            SlotState::Completed { result } => {
                let result = *result;
                self.set_free(id);
                Some(result)
            }
            SlotState::InFlight { waker: waiting } => {
                if !waiting.will_wake(waker) {
                    *waiting = waker.clone();
                }
                None
            }
            other => panic!("slot {id}'s future waits, but the slot is {}", other.name()),
        }
    }

    /// Slot `id`'s future is dropped holding `buffer`. In flight, the buffer stays in the slot
    /// until the completion (`InFlight -> Abandoned`); completed, the slot is freed and the
    /// buffer handed back to be dropped (`Completed -> Free`).
    pub(super) fn abandon(&mut self, id: usize, buffer: Option<Orphan>) -> Option<Orphan> {
        let slot = &mut self.slots[id];
        match slot {
            SlotState::InFlight { .. } => {
                *slot = SlotState::Abandoned { orphan: buffer };
                None
            }
            SlotState::Completed { .. } => {
                self.set_free(id);
                buffer
            }
            other => panic!(
                "slot {id}'s future is dropped, but the slot is {}",
                other.name()
            ),
        }
    }

    fn set_free(&mut self, id: usize) {
        self.slots[id] = SlotState::Free;
        debug_assert!(!self.free.contains(&id), "slot {id} freed twice");
        self.free.push(id);
        assert!(
            self.free.len() <= self.slots.len(),
            "more free slots than slots"
        );
    }
}
