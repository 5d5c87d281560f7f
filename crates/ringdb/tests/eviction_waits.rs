//! Eviction rounds and the tasks that wait for frames:
//! - a round that finds every page pinned waits, its round still open, for an unpin; the
//!   unpins must reach it even when other tasks wait for frames ahead of it (frame waiters
//!   are woken one per change, not all at once);
//! - a round ends once its dirty victims' writes are submitted: the next round may sweep
//!   while they are out, up to a bound. A round held open until its writes came back capped
//!   eviction at one batch per write latency, and a write-heavy run out of memory idled
//!   waiting for it.

use ringdb::buffer::{BufferManager, PageGuard, PoolConfig};
use ringdb_io::Runtime;
use ringdb_io::{FileId, FixedBufferPool, IoConfig};
use std::cell::RefCell;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;

const FRAMES: usize = 16;
const QUEUED_WAITERS: usize = 10;

/// A runtime over a fresh file in its own directory (the file is returned to keep it open),
/// and a stealing pool of `cfg`.
fn pool(name: &str, cfg: PoolConfig) -> (PathBuf, std::fs::File, Runtime, BufferManager) {
    let dir = std::env::temp_dir().join(format!("ringdb-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("data"))
        .unwrap();
    let frames = FixedBufferPool::new(cfg.frames, cfg.page_size).unwrap();
    let rt = Runtime::from_config(&IoConfig::default(), &[file.as_raw_fd()], Some(frames)).unwrap();
    let mut cfg = cfg;
    cfg.steal = true;
    let bm = BufferManager::new(rt.io(), FileId(0), cfg, 0).unwrap();
    (dir, file, rt, bm)
}

/// Fills every frame with an initialised page (a page eviction seals must be initialised,
/// checked in debug builds), pinned.
fn fill(bm: &BufferManager, frames: usize) -> Vec<PageGuard> {
    (0..frames)
        .map(|_| {
            let g = bm.alloc_page(None).unwrap();
            g.write(|p| ringdb::page::init(p, ringdb::page::PageType::Leaf));
            g
        })
        .collect()
}

#[test]
fn a_round_that_found_every_page_pinned_is_woken_by_an_unpin() {
    let (dir, _file, mut rt, bm) = pool("eviction-waits", PoolConfig::new(4096, FRAMES));
    // Every frame holds a page, and every page is pinned.
    let guards = fill(&bm, FRAMES);
    assert_eq!(bm.free_frames(), 0);
    let guards = Rc::new(RefCell::new(guards));
    // The first task runs a round that finds nothing evictable and waits for an unpin.
    let evictor = rt.spawn({
        let bm = bm.clone();
        async move { bm.ensure_free(1).await }
    });
    // Others queue for frames behind it.
    let queued: Vec<_> = (0..QUEUED_WAITERS)
        .map(|_| {
            let bm = bm.clone();
            rt.spawn(async move { bm.ensure_free(1).await })
        })
        .collect();
    // Then the pins go, one per pass.
    let unpinner = rt.spawn({
        let guards = guards.clone();
        async move {
            for _ in 0..4 {
                ringdb_io::yield_now().await;
            }
            while guards.borrow_mut().pop().is_some() {
                ringdb_io::yield_now().await;
            }
        }
    });
    let results = rt
        .block_on(async move {
            unpinner.await;
            let mut results = vec![evictor.await];
            for q in queued {
                results.push(q.await);
            }
            results
        })
        .expect("the runtime made progress: no task was left waiting forever");
    for r in results {
        r.expect("every waiter got its frame");
    }
    assert!(bm.free_frames() >= 1);
    // Each queued task waited for a frame at least once, and was counted.
    assert!(
        bm.stats().frame_waits >= QUEUED_WAITERS as u64,
        "{:?}",
        bm.stats()
    );
    drop(bm);
    drop(rt);
    std::fs::remove_dir_all(&dir).ok();
}

/// Frames of the overlap test's pool.
const OVERLAP_FRAMES: usize = 32;
const EVICT_BATCH: usize = 2;
/// Rounds whose writes may be out at once (the pool's bound).
const ROUNDS_OUT_MAX: usize = 4;
/// Tasks that need a frame: more than the rounds that may be out.
const TASKS: usize = ROUNDS_OUT_MAX + 2;

#[test]
fn rounds_sweep_while_earlier_rounds_writes_are_out_up_to_a_bound() {
    let mut cfg = PoolConfig::new(4096, OVERLAP_FRAMES);
    cfg.evict_batch = EVICT_BATCH;
    cfg.free_target = EVICT_BATCH;
    let (dir, _file, mut rt, bm) = pool("eviction-overlap", cfg);
    // Every frame holds a dirty, unpinned page.
    drop(fill(&bm, OVERLAP_FRAMES));
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
