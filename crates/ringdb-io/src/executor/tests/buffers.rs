//! Buffer safety: a buffer stays with the runtime until its completion, whatever is dropped
//! when; pool leases and registered (fixed) buffers.

use super::*;
use std::cell::Cell;
use std::rc::Rc;

#[test]
fn a_dropped_read_keeps_its_buffer_until_the_completion() {
    for engine in [EngineKind::Posix, EngineKind::Libaio, EngineKind::Uring] {
        // Each: the read goes to the kernel at its first poll, so it really is in flight.
        let f = probe_file(&format!("orphan-{engine}"));
        let Some(mut rt) = open(&cfg(engine, Batching::Each, 8), &[f.fd()], None) else {
            continue;
        };
        let io = rt.io();
        let record = Rc::new(Cell::new(None));
        let p = probe(&record);
        rt.block_on(async move {
            let mut fut = Box::pin(io.read(FileId(0), 0, p));
            assert!(poll_once(&mut fut).await);
            drop(fut); // in flight: the buffer must move to the runtime
        })
        .unwrap();
        assert_eq!(record.get(), None, "{engine}: freed while in flight");
        assert_eq!(rt.stats().orphans_released, 0);
        rt.run().unwrap();
        assert_eq!(
            record.get(),
            Some(true),
            "{engine}: released only after the data arrived"
        );
        assert_eq!(rt.stats().orphans_released, 1, "{engine}");
    }
}

#[test]
fn dropping_the_runtime_drains_before_releasing_buffers() {
    for engine in [EngineKind::Posix, EngineKind::Libaio, EngineKind::Uring] {
        let f = probe_file(&format!("drain-{engine}"));
        let Some(mut rt) = open(&cfg(engine, Batching::Each, 8), &[f.fd()], None) else {
            continue;
        };
        let io = rt.io();
        let record = Rc::new(Cell::new(None));
        let p = probe(&record);
        // The task issues the read and stays alive with it in flight...
        rt.spawn(async move {
            let _ = io.read(FileId(0), 0, p).await;
            std::future::pending::<()>().await;
        });
        rt.block_on(async {}).unwrap();
        assert_eq!(record.get(), None);
        // ...until the runtime drops it: the buffer is released only after the completion.
        drop(rt);
        assert_eq!(record.get(), Some(true), "{engine}");
    }
}

#[test]
fn fixed_buffers_from_the_pool() {
    let f = TempFile::new("pool", 32 * BS as u64);
    for fixed_buffers in [true, false] {
        let cfg = IoConfig {
            fixed_buffers,
            ..cfg(EngineKind::Uring, Batching::Adaptive, 8)
        };
        // Fewer buffers than tasks: leases wait for returns.
        let pool = FixedBufferPool::new(4, BS).unwrap();
        let mut rt = open(&cfg, &[f.fd()], Some(pool)).unwrap();
        let io = rt.io();
        for b in 0..32u64 {
            let io = io.clone();
            rt.spawn(async move {
                let mut buf = io.lease().await.unwrap();
                assert_eq!(buf.fixed_index().is_some(), fixed_buffers);
                fill(buf.as_mut_slice(), b);
                let (r, buf) = io.write(FileId(0), b * BS as u64, buf).await;
                assert_eq!(r.unwrap(), BS);
                drop(buf);
                let back = io.lease().await.unwrap();
                let (r, back) = io.read(FileId(0), b * BS as u64, back).await;
                assert_eq!(r.unwrap(), BS);
                assert_eq!(back.as_slice(), &pattern(b)[..]);
            });
        }
        rt.run().unwrap();
        assert_eq!(rt.stats().engine.completed, 64);
        // Every lease went back to the pool.
        let all: Vec<_> = std::iter::from_fn(|| io.lease_buf()).collect();
        assert_eq!(all.len(), 4);
    }
}

#[test]
fn a_foreign_fixed_index_falls_back_to_plain_io() {
    let f = TempFile::new("foreign", 4 * BS as u64);
    let cfg = IoConfig {
        fixed_buffers: true,
        ..cfg(EngineKind::Uring, Batching::Adaptive, 8)
    };
    let mut a = open(&cfg, &[f.fd()], Some(FixedBufferPool::new(2, BS).unwrap())).unwrap();
    let mut b = open(&cfg, &[f.fd()], Some(FixedBufferPool::new(2, BS).unwrap())).unwrap();
    let mut buf = a.io().lease_buf().unwrap();
    fill(buf.as_mut_slice(), 3);
    let io_b = b.io();
    let (r, buf) = b
        .block_on(async move { io_b.write(FileId(0), 0, buf).await })
        .unwrap();
    assert_eq!(r.unwrap(), BS);
    drop(buf);
    let io_a = a.io();
    let back = io_a.lease_buf().unwrap();
    let (r, back) = a
        .block_on(async move { io_a.read(FileId(0), 0, back).await })
        .unwrap();
    assert_eq!(r.unwrap(), BS);
    assert_eq!(back.as_slice(), &pattern(3)[..]);
}
