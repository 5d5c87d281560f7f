//! Batching: how many kernel entries the policies make per request, and the FIFO order of
//! requests waiting for ring room.

use super::*;
use std::cell::RefCell;
use std::os::unix::fs::FileExt;
use std::rc::Rc;

#[test]
fn requests_waiting_for_ring_room_go_in_fifo_order() {
    for engine in [EngineKind::Posix, EngineKind::Uring] {
        let Some(mut rt) = open(&cfg(engine, Batching::Adaptive, 1), &[], None) else {
            continue;
        };
        let order = Rc::new(RefCell::new(Vec::new()));
        for i in 0..20 {
            let (io, order) = (rt.io(), order.clone());
            rt.spawn(async move {
                io.nop().await.unwrap();
                order.borrow_mut().push(i);
            });
        }
        rt.run().unwrap();
        assert_eq!(*order.borrow(), (0..20).collect::<Vec<_>>(), "{engine}");
    }
}

/// Enters per completed request: an engine counter, not a timing.
fn enters_per_request(batching: Batching, tasks: usize, ops: usize) -> f64 {
    let mut rt = Runtime::from_config(&cfg(EngineKind::Uring, batching, 64), &[], None)
        .expect("uring runtime");
    for _ in 0..tasks {
        let io = rt.io();
        rt.spawn(async move {
            for _ in 0..ops {
                io.nop().await.unwrap();
            }
        });
    }
    rt.run().unwrap();
    let s = rt.stats();
    assert_eq!(s.engine.completed, (tasks * ops) as u64);
    s.engine.enters as f64 / s.engine.completed as f64
}

#[test]
fn batching_policies_differ_in_enters_per_request() {
    let each = enters_per_request(Batching::Each, 64, 20);
    let fixed = enters_per_request(Batching::Fixed(8), 64, 20);
    let adaptive = enters_per_request(Batching::Adaptive, 64, 20);
    let adaptive_one = enters_per_request(Batching::Adaptive, 1, 200);
    eprintln!(
        "nop enters per request, 64 tasks: each {each:.3}, fixed(8) {fixed:.3}, \
         adaptive {adaptive:.3}; 1 task: adaptive {adaptive_one:.3}"
    );
    assert!(each >= 1.0, "each: {each} enters per request");
    assert!(fixed < 0.5, "fixed(8): {fixed} enters per request");
    assert!(adaptive < 0.5, "adaptive: {adaptive} enters per request");
    // One task alone: nothing to batch with, one submit-and-wait per request.
    assert!(adaptive_one >= 1.0, "adaptive, 1 task: {adaptive_one}");
}

#[test]
fn adaptive_batches_real_reads() {
    let f = TempFile::new("ratio", 64 * BS as u64);
    // Written and synced, so that O_DIRECT reads go to the device (a hole completes inline).
    let mut b = AlignedBuf::new(64 * BS);
    fill(b.as_mut_slice(), 1);
    f.file.write_all_at(b.as_slice(), 0).unwrap();
    f.file.sync_all().unwrap();
    for batching in [Batching::Each, Batching::Adaptive] {
        let mut rt = open(&cfg(EngineKind::Uring, batching, 64), &[f.fd()], None).unwrap();
        for t in 0..64u64 {
            let io = rt.io();
            rt.spawn(async move {
                let mut buf = AlignedBuf::new(BS);
                for i in 0..8u64 {
                    let (r, b) = io.read(FileId(0), ((t + i) % 64) * BS as u64, buf).await;
                    assert_eq!(r.unwrap(), BS);
                    buf = b;
                }
            });
        }
        rt.run().unwrap();
        let s = rt.stats();
        let ratio = s.engine.enters as f64 / s.engine.completed as f64;
        eprintln!(
            "4 KiB reads, 64 tasks, {batching}: enters/request {ratio:.3}, \
             req/batch {:.2}, waits {}",
            s.requests_per_batch, s.waits
        );
        match batching {
            Batching::Each => assert!(ratio >= 1.0, "each: {ratio}"),
            _ => assert!(ratio < 0.5, "{batching}: {ratio}"),
        }
    }
}
