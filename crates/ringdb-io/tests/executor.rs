//! Executor behaviour through the public API only.

use ringdb_io::Runtime;
use ringdb_io::{Batching, EngineKind, IoConfig};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;

fn uring(depth: u32) -> IoConfig {
    IoConfig {
        queue_depth: depth,
        batching: Batching::Adaptive,
        ..IoConfig::new(EngineKind::Uring)
    }
}

/// A task that spins on `yield_now` until another task's I/O finishes must not starve it.
#[test]
fn a_yielding_spinner_does_not_starve_io() {
    let mut rt = Runtime::from_config(&uring(8), &[], None).unwrap();
    let io = rt.io();
    let done = Rc::new(Cell::new(false));
    let d = done.clone();
    let io2 = io.clone();
    rt.spawn(async move {
        io2.nop().await.unwrap();
        d.set(true);
    });
    let spins = rt
        .block_on(async move {
            let mut spins = 0u64;
            while !done.get() && spins < 1_000_000 {
                io.yield_now().await;
                spins += 1;
            }
            spins
        })
        .unwrap();
    assert!(
        spins < 1_000_000,
        "the nop never completed while the main future yielded"
    );
}

/// A future parked on a full ring and then dropped must not swallow the wake-up meant for the
/// next waiter.
#[test]
fn a_dropped_parked_future_passes_its_wakeup_on() {
    let mut rt = Runtime::from_config(&uring(1), &[], None).unwrap();
    let io = rt.io();
    let (a, b, c) = (io.clone(), io.clone(), io.clone());
    rt.spawn(async move { a.nop().await.unwrap() });
    rt.spawn(async move {
        // Park on the full ring, then give up.
        let mut f = pin!(b.nop());
        let pending =
            std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx).is_pending())).await;
        assert!(pending);
    });
    let h = rt.spawn(async move { c.nop().await.unwrap() });
    rt.block_on(h).expect("the last waiter must be woken");
}

/// Requests queued by one poll inside `submit_together` go to the kernel in one enter even
/// under `Batching::Each`, which otherwise enters once per request.
#[test]
fn submit_together_groups_requests_under_each() {
    fn enters_for(together: bool) -> u64 {
        let cfg = IoConfig {
            queue_depth: 16,
            batching: Batching::Each,
            ..IoConfig::new(EngineKind::Uring)
        };
        let mut rt = Runtime::from_config(&cfg, &[], None).unwrap();
        let io = rt.io();
        let before = rt.stats().engine.enters;
        rt.block_on(async move {
            let nops = futures_util::future::join_all((0..8).map(|_| io.nop()));
            let results = if together {
                io.submit_together(nops).await
            } else {
                nops.await
            };
            assert!(results.iter().all(|r| r.is_ok()));
        })
        .unwrap();
        rt.stats().engine.enters - before
    }
    let apart = enters_for(false);
    let together = enters_for(true);
    assert!(apart >= 8, "each: {apart} enters for 8 nops");
    assert!(together <= 2, "together: {together} enters for 8 nops");
}
