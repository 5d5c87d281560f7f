//! An eviction round that finds every page pinned waits, its round still open, for an unpin;
//! the unpins must reach it even when other tasks wait for frames ahead of it (frame waiters
//! are woken one per change, not all at once).

use ringdb::buffer::{BufferManager, PageGuard, PoolConfig};
use ringdb_io::Runtime;
use ringdb_io::{FileId, FixedBufferPool, IoConfig};
use std::cell::RefCell;
use std::os::fd::AsRawFd;
use std::rc::Rc;

const FRAMES: usize = 16;
const QUEUED_WAITERS: usize = 10;

#[test]
fn a_round_that_found_every_page_pinned_is_woken_by_an_unpin() {
    let dir = std::env::temp_dir().join(format!("ringdb-eviction-waits-{}", std::process::id()));
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
    let bm = BufferManager::new(rt.io(), FileId(0), cfg, 0).unwrap();
    // Every frame holds a page, and every page is pinned.
    let guards: Vec<PageGuard> = (0..FRAMES)
        .map(|_| {
            let g = bm.alloc_page(None).unwrap();
            // A page eviction seals must be initialised (checked in debug builds).
            g.write(|p| ringdb::page::init(p, ringdb::page::PageType::Leaf));
            g
        })
        .collect();
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
    drop(bm);
    drop(rt);
    std::fs::remove_dir_all(&dir).ok();
}
