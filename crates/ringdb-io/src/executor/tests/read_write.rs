//! Tasks that write and read back through every engine and policy; results, short reads
//! and errors reach the task.

use super::*;

/// `tasks` tasks each write a distinct pattern to their own block, then read it back and
/// compare every byte.
fn write_read_back(cfg: &IoConfig, tasks: u64) -> Option<RuntimeStats> {
    let f = TempFile::new(&cfg.label(), tasks * BS as u64);
    let mut rt = open(cfg, &[f.fd()], None)?;
    let io = rt.io();
    let handles: Vec<_> = (0..tasks)
        .map(|b| {
            let io = io.clone();
            rt.spawn(async move {
                let mut buf = AlignedBuf::new(BS);
                fill(buf.as_mut_slice(), b);
                let (r, _buf) = io.write(FileId(0), b * BS as u64, buf).await;
                assert_eq!(r.unwrap(), BS);
                let (r, back) = io.read(FileId(0), b * BS as u64, AlignedBuf::new(BS)).await;
                assert_eq!(r.unwrap(), BS);
                back.as_slice() == &pattern(b)[..]
            })
        })
        .collect();
    let ok = rt
        .block_on(async move {
            let mut all = true;
            for h in handles {
                all &= h.await;
            }
            all
        })
        .unwrap();
    assert!(ok, "{}: data read back differs", cfg.label());
    let s = rt.stats();
    assert_eq!(s.engine.completed, 2 * tasks, "{}", cfg.label());
    assert_eq!(s.tasks_spawned, tasks);
    assert_eq!(rt.live_tasks(), 0);
    Some(s)
}

#[test]
fn tasks_write_and_read_back_through_every_engine_and_policy() {
    for cfg in configs() {
        if let Some(s) = write_read_back(&cfg, 64) {
            eprintln!(
                "{:<28} enters/request {:.3}  batches {}  req/batch {:.2}  waits {}  polls {}",
                cfg.label(),
                s.engine.enters as f64 / s.engine.completed as f64,
                s.submit_batches,
                s.requests_per_batch,
                s.waits,
                s.polls
            );
        }
    }
}

#[test]
fn more_tasks_than_depth_park_and_all_finish() {
    for engine in [EngineKind::Uring, EngineKind::Libaio, EngineKind::Posix] {
        for batching in POLICIES {
            let Some(s) = write_read_back(&cfg(engine, batching, 8), 200) else {
                continue;
            };
            // Parked tasks are woken by completions, not polled in a loop.
            assert!(
                s.polls <= 200 * 8,
                "{engine}/{batching}: {} polls for 400 requests",
                s.polls
            );
        }
    }
}

#[test]
fn io_errors_reach_the_task() {
    let mut rt = Runtime::from_config(&IoConfig::new(EngineKind::Uring), &[-1], None).unwrap();
    let io = rt.io();
    let r = rt
        .block_on(async move { io.read(FileId(0), 0, AlignedBuf::new(BS)).await.0 })
        .unwrap();
    let e = r.unwrap_err().to_string();
    assert!(e.contains("read failed at offset 0"), "{e}");
}

#[test]
fn short_reads_return_the_count_and_fsync_works() {
    for engine in [EngineKind::Posix, EngineKind::Libaio, EngineKind::Uring] {
        let f = TempFile::new(&format!("short-{engine}"), 2 * BS as u64);
        let Some(mut rt) = open(&cfg(engine, Batching::Adaptive, 8), &[f.fd()], None) else {
            continue;
        };
        let io = rt.io();
        let (past_end, synced) = rt
            .block_on(async move {
                let (r, _) = io.read(FileId(0), 2 * BS as u64, AlignedBuf::new(BS)).await;
                let s1 = io.fsync(FileId(0), false).await;
                let s2 = io.fsync(FileId(0), true).await;
                (r.unwrap(), s1.is_ok() && s2.is_ok())
            })
            .unwrap();
        assert_eq!(past_end, 0, "{engine}");
        assert!(synced, "{engine}");
    }
}

#[test]
fn uring_sync_and_posix_count_one_enter_per_request() {
    for engine in [EngineKind::Posix, EngineKind::UringSync] {
        let f = TempFile::new(&format!("sync-{engine}"), 16 * BS as u64);
        let mut rt = open(&cfg(engine, Batching::Adaptive, 8), &[f.fd()], None).unwrap();
        for b in 0..16u64 {
            let io = rt.io();
            rt.spawn(async move {
                let (r, _) = io.read(FileId(0), b * BS as u64, AlignedBuf::new(BS)).await;
                r.unwrap();
            });
        }
        rt.run().unwrap();
        let s = rt.stats();
        assert_eq!(s.engine.completed, 16);
        assert!(
            s.engine.enters >= 16,
            "{engine}: {} enters",
            s.engine.enters
        );
    }
}
