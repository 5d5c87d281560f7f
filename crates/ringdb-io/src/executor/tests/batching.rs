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

/// When completions free room for more requests than wait for it, a task that makes a new request
/// in the same pass goes straight to the kernel: it would be among the first as many waiters as
/// there is room for. Before, it parked behind the woken waiters, was not woken itself, and the
/// loop then waited with the ring part empty (YCSB-B out of memory kept far fewer requests at the
/// device than the ring had room for; measured: docs/results/issue15-cpu-per-op.md, thirteenth
/// session). Reads of a pipe stay in flight until the test writes a byte for each.
#[test]
fn a_request_made_while_the_ring_has_room_for_it_is_not_parked() {
    use std::io::Write;
    const DEPTH: usize = 4;
    let (reader, mut writer) = std::io::pipe().expect("pipe");
    let config = cfg(EngineKind::Uring, Batching::Each, DEPTH as u32);
    let Some(mut rt) = open(&config, &[reader.as_raw_fd()], None) else {
        return;
    };
    let io = rt.io();
    // DEPTH + 1 tasks, each reading twice: DEPTH reads in flight, one parked.
    for _ in 0..=DEPTH {
        let io = io.clone();
        rt.spawn(async move {
            for _ in 0..2 {
                // A byte, or nothing once the pipe is closed at the end.
                let (read, _) = io.read(FileId(0), 0, AlignedBuf::new(BS)).await;
                assert!(read.unwrap() <= 1);
            }
        });
    }
    let in_flight_after_completions = rt
        .block_on(async {
            for _ in 0..4 {
                io.yield_now().await;
            }
            assert_eq!(
                requests_in_kernel(&io),
                DEPTH as u64,
                "the ring is full, one task parked"
            );
            // DEPTH reads complete at once: their tasks read again, the parked one goes too.
            for _ in 0..DEPTH {
                writer.write_all(&[7]).unwrap();
            }
            for _ in 0..8 {
                io.yield_now().await;
            }
            let in_flight = requests_in_kernel(&io);
            drop(writer);
            in_flight
        })
        .unwrap();
    rt.run().unwrap();
    assert_eq!(
        in_flight_after_completions, DEPTH as u64,
        "requests stayed parked while the ring had room for them"
    );
}

/// Adaptive, with the device busy: a partial batch queued in a pass is not handed over with an
/// enter of its own at the pass's end; it waits for the loop's next enter, here the flush of a
/// pass that queued nothing new. Each enter that hands requests over may ring the device's
/// doorbell (in a VM, an exit to the host): flushing three or more at every pass's end made
/// 0.17 enters per YCSB operation out of memory, holding them 0.07. Reads of a pipe stay in
/// flight until the test writes a byte for each.
#[test]
fn adaptive_holds_a_partial_batch_for_the_loops_next_enter_while_the_device_is_busy() {
    use std::io::Write;
    const DEPTH: usize = 64;
    let busy = crate::config::adaptive_low_water(DEPTH);
    let partial = crate::config::adaptive_batch(DEPTH) - 1;
    let (reader, mut writer) = std::io::pipe().expect("pipe");
    let config = cfg(EngineKind::Uring, Batching::Adaptive, DEPTH as u32);
    let Some(mut rt) = open(&config, &[reader.as_raw_fd()], None) else {
        return;
    };
    let io = rt.io();
    let read_once = |io: Io| async move {
        // Some bytes, or none once the pipe is closed at the end.
        let (read, _) = io.read(FileId(0), 0, AlignedBuf::new(BS)).await;
        read.unwrap();
    };
    for _ in 0..busy {
        rt.spawn(read_once(io.clone()));
    }
    let (held, later) = rt
        .block_on(async {
            for _ in 0..4 {
                io.yield_now().await;
            }
            assert_eq!(
                requests_in_kernel(&io),
                busy as u64,
                "the low-water mark is at the device"
            );
            for _ in 0..partial {
                io.spawn(read_once(io.clone()));
            }
            // The next pass runs the new tasks (their reads are queued) and this one; at its
            // end the partial batch is held.
            io.yield_now().await;
            io.yield_now().await;
            let held = requests_in_kernel(&io);
            // A pass that queued nothing new hands it over.
            io.yield_now().await;
            io.yield_now().await;
            (held, requests_in_kernel(&io))
        })
        .unwrap();
    writer.write_all(&[7; DEPTH]).unwrap();
    drop(writer);
    rt.run().unwrap();
    assert_eq!(
        held, busy as u64,
        "a partial batch took an enter of its own"
    );
    assert_eq!(
        later,
        (busy + partial) as u64,
        "the held batch never went out"
    );
}

/// Requests handed to the kernel and not completed yet.
fn requests_in_kernel(io: &Io) -> u64 {
    let engine = io.stats().engine;
    engine.submitted - engine.completed
}
