//! The invariants the executor asserts, and its bounded waits: the request slots' state
//! machine, the FIFO's order, a task polled only when woken, a drain that gets no completion,
//! and a push the engine keeps despite failing it.

use super::*;
use crate::engine::{Engine, EngineStats, FileId, IoCompletion, IoRequest};
use crate::executor::fifo::Fifo;
use crate::executor::slots::{Delivered, OpSlots};
use crate::executor::stall::EMPTY_WAITS_MAX;
use crate::executor::task::Tasks;
use crate::Result;
use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Waker;

/// How a [`ScriptedEngine`] misbehaves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Script {
    /// Takes requests and never completes them.
    NeverCompletes,
    /// Queues its first request and completes it, but reports the push as failed (as
    /// uring-sync does when its submit fails after the request was queued).
    FailsAfterQueueingFirst,
}

/// An engine that misbehaves as its script says; it touches no buffer.
struct ScriptedEngine {
    script: Script,
    in_flight: usize,
    ready: VecDeque<IoCompletion>,
    pushes: u64,
}

impl ScriptedEngine {
    fn boxed(script: Script) -> Box<dyn Engine> {
        Box::new(ScriptedEngine {
            script,
            in_flight: 0,
            ready: VecDeque::new(),
            pushes: 0,
        })
    }
}

impl Engine for ScriptedEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Uring
    }
    fn depth(&self) -> usize {
        8
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn pending(&self) -> usize {
        0
    }
    unsafe fn push(&mut self, req: &IoRequest) -> Result<()> {
        self.pushes += 1;
        self.in_flight += 1;
        if self.script == Script::NeverCompletes {
            return Ok(());
        }
        self.ready.push_back(IoCompletion {
            user_data: req.user_data,
            result: req.len as i32,
        });
        if self.pushes == 1 {
            return Err(IoError::os(
                "scripted failure after queueing",
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        Ok(())
    }
    fn submit(&mut self, _wait_for: usize) -> Result<()> {
        Ok(())
    }
    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        let reaped = self.ready.len();
        out.extend(self.ready.drain(..));
        self.in_flight -= reaped;
        reaped
    }
    fn stats(&self) -> EngineStats {
        EngineStats::default()
    }
}

fn noop_waker() -> Waker {
    Waker::noop().clone()
}

#[test]
fn a_slot_goes_in_flight_then_completed_then_free() {
    let mut slots = OpSlots::default();
    let waker = noop_waker();
    let id = slots.acquire(&waker);
    assert_eq!(slots.in_flight(), 1);
    assert_eq!(slots.take_result(id, &waker), None, "not completed yet");
    assert!(matches!(slots.deliver(id, 7), Delivered::Wake(_)));
    assert_eq!(slots.in_flight(), 0);
    assert!(!slots.is_free(id), "the result waits for its future");
    assert_eq!(slots.take_result(id, &waker), Some(7));
    assert!(slots.is_free(id));
    assert_eq!(slots.acquire(&waker), id, "a freed slot is reused");
}

#[test]
fn an_abandoned_slot_keeps_its_buffer_until_the_completion() {
    let mut slots = OpSlots::default();
    let waker = noop_waker();
    let dropped = Rc::new(Cell::new(false));
    struct Flag(Rc<Cell<bool>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    let id = slots.acquire(&waker);
    let handed_back = slots.abandon(id, Some(Box::new(Flag(dropped.clone()))));
    assert!(
        handed_back.is_none(),
        "in flight: the slot keeps the buffer"
    );
    assert!(!dropped.get());
    assert_eq!(
        slots.in_flight(),
        1,
        "an abandoned request is still in flight"
    );
    let Delivered::Release(orphan) = slots.deliver(id, 0) else {
        panic!("the completion of an abandoned slot releases its buffer");
    };
    drop(orphan);
    assert!(dropped.get());
    assert!(slots.is_free(id));
    assert_eq!(slots.in_flight(), 0);
}

#[test]
#[should_panic(expected = "no request of it is in flight")]
fn a_second_completion_for_a_slot_panics() {
    let mut slots = OpSlots::default();
    let waker = noop_waker();
    let id = slots.acquire(&waker);
    let _ = slots.deliver(id, 0);
    let _ = slots.deliver(id, 0);
}

#[test]
#[should_panic(expected = "was never used")]
fn a_completion_for_an_unknown_slot_panics() {
    let _ = OpSlots::default().deliver(3, 0);
}

#[test]
fn fifo_tickets_leave_in_order_or_by_cancel() {
    let fifo = Fifo::default();
    let waker = noop_waker();
    let tickets: Vec<u64> = (0..3).map(|_| fifo.park(&waker)).collect();
    assert!(tickets.windows(2).all(|pair| pair[0] < pair[1]));
    assert!(!fifo.try_leave(tickets[1], 1, &waker), "behind the first");
    fifo.cancel(tickets[0]);
    assert!(fifo.try_leave(tickets[1], 1, &waker), "now first");
    assert_eq!(fifo.len(), 1);
    fifo.cancel(tickets[2]);
    assert!(fifo.is_empty());
}

#[test]
#[should_panic(expected = "is not parked")]
fn a_ticket_that_is_not_parked_cannot_take_its_turn() {
    let fifo = Fifo::default();
    let waker = noop_waker();
    let ticket = fifo.park(&waker);
    fifo.cancel(ticket);
    fifo.try_leave(ticket, 1, &waker);
}

#[test]
#[should_panic(expected = "polled without being woken")]
fn a_task_is_polled_only_when_woken() {
    let tasks = Tasks::default();
    tasks.spawn(Box::pin(std::future::pending::<()>()));
    let (id, generation) = tasks.ready().lock().pop_front().unwrap();
    assert!(tasks.poll(id, generation));
    // A second poll without a wake-up in between is a bug of the pass loop.
    tasks.poll(id, generation);
}

#[test]
fn a_drain_that_gets_no_completion_is_bounded_and_leaks_the_buffer() {
    let mut rt = Runtime::new(
        ScriptedEngine::boxed(Script::NeverCompletes),
        Batching::Each,
    );
    let io = rt.io();
    let record = Rc::new(Cell::new(None));
    let buffer = probe(&record);
    rt.block_on(async move {
        let mut read = Box::pin(io.read(FileId(0), 0, buffer));
        assert!(poll_once(&mut read).await);
        drop(read); // in flight: the buffer moves to the runtime
    })
    .unwrap();
    let error = rt.inner.drain().unwrap_err();
    assert!(
        matches!(error, IoError::NoCompletion { in_flight: 1, waits } if waits == EMPTY_WAITS_MAX),
        "{error}"
    );
    assert!(rt.inner.leaked.get());
    drop(rt);
    assert_eq!(record.get(), None, "leaked, never freed under the kernel");
}

#[test]
fn a_wait_that_gets_no_completion_is_an_error_not_a_hang() {
    let mut rt = Runtime::new(
        ScriptedEngine::boxed(Script::NeverCompletes),
        Batching::Each,
    );
    let io = rt.io();
    let error = rt.block_on(async move { io.nop().await }).unwrap_err();
    assert!(matches!(error, IoError::NoCompletion { .. }), "{error}");
}

#[test]
fn a_push_the_engine_keeps_despite_failing_keeps_its_buffer() {
    let mut rt = Runtime::new(
        ScriptedEngine::boxed(Script::FailsAfterQueueingFirst),
        Batching::Each,
    );
    let io = rt.io();
    let record = Rc::new(Cell::new(None));
    let buffer = probe(&record);
    // The loop reports the failure; the read's future is dropped with the request in flight.
    let error = rt
        .block_on(async move { io.read(FileId(0), 0, buffer).await.0 })
        .unwrap_err();
    assert!(error.to_string().contains("scripted failure"), "{error}");
    assert_eq!(record.get(), None, "still in flight: not released");
    rt.run().unwrap();
    assert!(
        record.get().is_some(),
        "released once the completion was reaped"
    );
    assert_eq!(rt.stats().orphans_released, 1);
}

#[test]
fn a_stall_is_a_typed_error() {
    let mut rt = Runtime::new(
        ScriptedEngine::boxed(Script::NeverCompletes),
        Batching::Each,
    );
    let error = rt.block_on(std::future::pending::<()>()).unwrap_err();
    assert!(
        matches!(
            error,
            IoError::Stalled {
                parked_tasks: 0,
                waiting_for_room: 0,
                ..
            }
        ),
        "{error}"
    );
}
