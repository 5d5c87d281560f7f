//! A stall is an error, not a hang; stale wakers are harmless.

use super::*;
use crate::engine::open_engine;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

#[test]
fn a_stall_is_an_error_not_a_hang() {
    let mut rt = Runtime::new(
        open_engine(&IoConfig::new(EngineKind::Posix), &[], None).unwrap(),
        Batching::Adaptive,
    );
    let r = rt.block_on(std::future::pending::<()>());
    assert!(r.unwrap_err().to_string().contains("stalled"));
    // A task waiting on a handle of a task that never finishes.
    let io = rt.io();
    rt.spawn(async move {
        io.nop().await.unwrap();
        std::future::pending::<()>().await
    });
    let e = rt.run().unwrap_err().to_string();
    assert!(
        e.contains("executor stalled") && e.contains("1 tasks parked"),
        "{e}"
    );
    // Also when the only pending thing is a lease nobody will return.
    let mut rt = open(
        &IoConfig::new(EngineKind::Uring),
        &[],
        Some(FixedBufferPool::new(1, BS).unwrap()),
    )
    .unwrap();
    let io = rt.io();
    let r = rt.block_on(async move {
        let _held = io.lease().await.unwrap();
        io.lease().await.unwrap()
    });
    assert!(r.is_err());
}

#[test]
fn wakers_are_harmless_after_the_task_finished_and_handles_detach() {
    let mut rt = Runtime::from_config(&IoConfig::new(EngineKind::Uring), &[], None).unwrap();
    let io = rt.io();
    let saved: Rc<RefCell<Option<Waker>>> = Rc::default();
    let ran = Rc::new(Cell::new(0));
    let (s, r) = (saved.clone(), ran.clone());
    // Detached: the handle is dropped at once, the task still runs.
    drop(rt.spawn(async move {
        std::future::poll_fn(|cx| {
            *s.borrow_mut() = Some(cx.waker().clone());
            Poll::Ready(())
        })
        .await;
        io.nop().await.unwrap();
        r.set(r.get() + 1);
    }));
    rt.run().unwrap();
    assert_eq!(ran.get(), 1);
    let w = saved.borrow_mut().take().unwrap();
    // From this thread and from another: the task is gone; nothing happens.
    w.wake_by_ref();
    std::thread::spawn(move || w.wake()).join().unwrap();
    let h = rt.spawn(async { 5 });
    assert_eq!(rt.block_on(h).unwrap(), 5);
    assert_eq!(ran.get(), 1);
    rt.run().unwrap();
}
