//! The engine's memory by part (`DbStats::memory`) under a write-heavy load with a log: every
//! part is reported, a checkpoint's staging stays within a quarter of the pool plus one write's
//! buffers (its copies are bounded, and commits wait while structural pages are past their
//! share), and the log buffer stays within its bound (commits wait for a log write).

use ringdb::{Durability, LocalDb, Options};
use std::path::PathBuf;

const POOL_PAGES: usize = 256;
const PAGE_BYTES: usize = 4096;
const TASKS: usize = 64;
const WRITES_PER_TASK: u64 = 400;
/// The largest piece a checkpoint assembles for the double-write file (`chunked::MAX_IO`).
const PIECE_BYTES: u64 = 128 << 10;
/// Pages a checkpoint writes in place at once (`checkpoint::WRITE_BATCH`).
const IN_PLACE_PAGES: u64 = 64;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-mem-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `TASKS` tasks each writing `WRITES_PER_TASK` distinct keys with 300-byte values.
/// A fresh database in `d` with `durability`, after the write-heavy load.
fn loaded(d: &std::path::Path, durability: Durability) -> LocalDb {
    let mut db = LocalDb::open(
        d,
        Options {
            pool_pages: POOL_PAGES,
            direct: false,
            fresh: true,
            durability,
            ..Options::default()
        },
    )
    .unwrap();
    write_heavy(&mut db);
    db
}

fn write_heavy(db: &mut LocalDb) {
    let handles: Vec<_> = (0..TASKS as u64)
        .map(|t| {
            let h = db.handle();
            db.runtime().spawn(async move {
                for i in 0..WRITES_PER_TASK {
                    let key = (i * TASKS as u64 + t).to_be_bytes();
                    h.insert(&key, &[t as u8; 300]).await.unwrap();
                }
            })
        })
        .collect();
    db.runtime()
        .block_on(async move {
            for h in handles {
                h.await;
            }
        })
        .unwrap();
}

#[test]
fn checkpoint_staging_stays_within_a_quarter_of_the_pool_plus_one_write() {
    let d = dir("staging");
    let db = loaded(&d, Durability::None);
    let stats = db.stats();
    let m = stats.memory;
    let checkpoints = stats.checkpoints.unwrap().checkpoints;
    assert!(
        checkpoints >= 2,
        "only {checkpoints} checkpoints: not write-heavy enough"
    );
    let pool = (POOL_PAGES * PAGE_BYTES) as u64;
    assert_eq!(m.pool_frames.current_bytes, pool);
    // The cut copies the structural pages (a checkpoint starts, and commits wait, once they
    // pass 1/8 of the pool: at most that plus what the tasks in flight split meanwhile) and
    // other dirty pages up to 1/8 of the pool, plus the meta, catalog and free-list pages;
    // the writes add one double-write piece or one batch of in-place pages at a time.
    let write_buffers = PIECE_BYTES.max(IN_PLACE_PAGES * PAGE_BYTES as u64);
    let bound = pool / 4 + 16 * PAGE_BYTES as u64 + write_buffers;
    let staging = m.checkpoint_staging;
    assert!(staging.peak_bytes > 0, "no checkpoint staging counted");
    assert!(
        staging.peak_bytes <= bound,
        "checkpoint staging peaked at {} bytes, over {bound}",
        staging.peak_bytes
    );
    // Between checkpoints the last cut's image buffer is kept for the next (within twice the
    // cut's bound of 1/8 of the pool); the write buffers are not.
    assert!(
        staging.current_bytes > 0 && staging.current_bytes <= pool / 4,
        "staging held after the checkpoints: {} bytes (the spare buffer, up to {})",
        staging.current_bytes,
        pool / 4
    );
    assert!(m.log_buffer.peak_bytes > 0, "no log buffer counted");
    assert!(m.key_locks.peak_bytes > 0, "no key locks counted");
    db.close().unwrap();
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn without_a_log_only_the_pool_holds_memory() {
    let d = dir("off");
    let db = loaded(&d, Durability::Off);
    let m = db.stats().memory;
    assert_eq!(
        m.pool_frames.current_bytes,
        (POOL_PAGES * PAGE_BYTES) as u64
    );
    assert_eq!(m.beyond_pool().peak_bytes, 0);
    db.close().unwrap();
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn the_log_buffer_stays_within_its_bound_and_commits_wait_for_it() {
    const BOUND_BYTES: usize = 16 << 10;
    let d = dir("log-buffer");
    let mut db = LocalDb::open(
        &d,
        Options {
            pool_pages: POOL_PAGES,
            direct: false,
            fresh: true,
            durability: Durability::None,
            log_buffer_bytes: BOUND_BYTES,
            ..Options::default()
        },
    )
    .unwrap();
    write_heavy(&mut db);
    let stats = db.stats();
    let peak = stats.memory.log_buffer.peak_bytes;
    // The tail's allocation (grown by doubling) and the group being written, each checked
    // against the bound before a record goes in.
    assert!(
        peak <= BOUND_BYTES as u64,
        "the log buffer peaked at {peak} bytes, over its bound of {BOUND_BYTES}"
    );
    let waits = stats.wal.unwrap().buffer_waits;
    assert!(
        waits > 0,
        "no commit waited for the log buffer: the bound was never reached"
    );
    db.close().unwrap();
    std::fs::remove_dir_all(&d).ok();
}
