//! An eviction round ends once its dirty victims' writes are submitted: the next round may
//! sweep while they are out. A round held open until its writes came back capped eviction at
//! one batch per write latency, and a write-heavy run out of memory idled waiting for it.

use ringdb::buffer::{BufferManager, PageGuard, PoolConfig};
use ringdb_io::Runtime;
use ringdb_io::{FileId, FixedBufferPool, IoConfig};
use std::os::fd::AsRawFd;

const FRAMES: usize = 32;
const EVICT_BATCH: usize = 2;
/// Rounds whose writes may be out at once (the pool's bound).
const ROUNDS_OUT_MAX: usize = 4;
/// Tasks that need a frame: more than the rounds that may be out.
const TASKS: usize = ROUNDS_OUT_MAX + 2;

#[test]
fn rounds_sweep_while_earlier_rounds_writes_are_out_up_to_a_bound() {
    let dir = std::env::temp_dir().join(format!("ringdb-eviction-overlap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("data"))
        .unwrap();
    let pool = FixedBufferPool::new(FRAMES, 4096).unwrap();
    let mut rt =
        Runtime::from_config(&IoConfig::default(), &[file.as_raw_fd()], Some(pool)).unwrap();
    let mut cfg = PoolConfig::new(4096, FRAMES);
    cfg.steal = true;
    cfg.evict_batch = EVICT_BATCH;
    cfg.free_target = EVICT_BATCH;
    let bm = BufferManager::new(rt.io(), FileId(0), cfg, 0).unwrap();
    // Every frame holds a dirty, unpinned page.
    let guards: Vec<PageGuard> = (0..FRAMES)
        .map(|_| {
            let g = bm.alloc_page(None).unwrap();
            g.write(|p| ringdb::page::init(p, ringdb::page::PageType::Leaf));
            g
        })
        .collect();
    drop(guards);
    assert_eq!(bm.free_frames(), 0);
    assert_eq!(bm.writes_out(), 0);
    // Tasks that need a frame, polled in turn before any completion is reaped: each of the
    // first ROUNDS_OUT_MAX finds the round before it over and runs its own; the rest wait.
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let bm = bm.clone();
            rt.spawn(async move { bm.ensure_free(1).await })
        })
        .collect();
    let observer = rt.spawn({
        let bm = bm.clone();
        async move { bm.writes_out() }
    });
    let (out_seen, results) = rt
        .block_on(async move {
            let out_seen = observer.await;
            let mut results = Vec::new();
            for t in tasks {
                results.push(t.await);
            }
            (out_seen, results)
        })
        .expect("the runtime made progress");
    for r in results {
        r.expect("every task got its frame");
    }
    assert_eq!(
        out_seen,
        ROUNDS_OUT_MAX * EVICT_BATCH,
        "rounds' writes out together, up to the bound (one round at a time shows {EVICT_BATCH})"
    );
    assert_eq!(bm.writes_out(), 0, "every write came back");
    assert!(bm.free_frames() >= 1);
    drop(bm);
    drop(rt);
    std::fs::remove_dir_all(&dir).ok();
}
