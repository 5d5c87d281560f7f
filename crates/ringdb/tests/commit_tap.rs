//! Commit taps: every logged commit reaches the tap once, with its changes in the batch's
//! order, per key in commit order, cross-shard batches included; a database without a log
//! runs no tap and says so.

use ringdb::{Change, CommitTap, Db, Durability, Options, TableId, WriteBatch};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What a test tap recorded: (table, key, value) per change, batch by batch.
type Seen = Arc<Mutex<Vec<Vec<(TableId, Vec<u8>, Option<Vec<u8>>)>>>>;

fn dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn open(dir: &PathBuf, durability: Durability) -> Db {
    let mut options = Options {
        pool_pages: 1024,
        direct: false,
        durability,
        wal_bytes: 4 << 20,
        ..Options::default()
    };
    if ringdb_io::limits::io_uring_disabled().unwrap_or(0) != 0 {
        options.io.engine = ringdb_io::EngineKind::Posix;
    }
    Db::builder(dir).options(options).shards(2).open().unwrap()
}

fn recording_tap() -> (CommitTap, Seen) {
    let seen: Seen = Arc::default();
    let into = seen.clone();
    let tap: CommitTap = Arc::new(move |changes: &[Change<'_>]| {
        let batch = changes
            .iter()
            .map(|c| (c.table, c.key.to_vec(), c.value.map(<[u8]>::to_vec)))
            .collect();
        into.lock().unwrap().push(batch);
    });
    (tap, seen)
}

#[test]
fn every_logged_commit_reaches_the_tap_in_order() {
    let dir = dir("commit-tap-logged");
    let db = open(&dir, Durability::Fdatasync);
    let (tap, seen) = recording_tap();
    db.insert(b"before", b"0").unwrap();
    assert!(
        db.set_commit_tap(Some(tap)).unwrap(),
        "a logged database runs taps"
    );
    for i in 0..50u32 {
        db.insert(b"counter", &i.to_be_bytes()).unwrap();
    }
    db.remove(b"counter").unwrap();
    let mut batch = WriteBatch::new();
    // Keys on both shards: a cross-shard batch reaches the tap as one part per shard.
    for i in 0..20u32 {
        batch.put(format!("k{i}").as_bytes(), b"v");
    }
    batch.delete(b"k3");
    db.write(&batch).unwrap();
    db.set_commit_tap(None).unwrap();
    db.insert(b"after", b"1").unwrap();
    let seen = seen.lock().unwrap();
    let changes: Vec<_> = seen.iter().flatten().cloned().collect();
    assert!(!changes
        .iter()
        .any(|(_, key, _)| key == b"before" || key == b"after"));
    let counter: Vec<_> = changes.iter().filter(|(_, k, _)| k == b"counter").collect();
    assert_eq!(counter.len(), 51);
    for (i, (_, _, value)) in counter.iter().take(50).enumerate() {
        assert_eq!(value.as_deref(), Some(&(i as u32).to_be_bytes()[..]));
    }
    assert_eq!(counter[50].2, None, "the removal comes last");
    let user: Vec<_> = changes
        .iter()
        .filter(|(table, key, _)| *table == TableId::DEFAULT && key.starts_with(b"k"))
        .collect();
    assert_eq!(
        user.len(),
        21,
        "every change of the cross-shard batch, once"
    );
    let k3: Vec<_> = user.iter().filter(|(_, k, _)| k == b"k3").collect();
    assert_eq!(k3.last().unwrap().2, None, "the batch's own order per key");
}

#[test]
fn a_database_without_a_log_runs_no_tap() {
    let dir = dir("commit-tap-unlogged");
    let db = open(&dir, Durability::Off);
    let (tap, seen) = recording_tap();
    assert!(!db.set_commit_tap(Some(tap)).unwrap());
    db.insert(b"k", b"v").unwrap();
    assert!(seen.lock().unwrap().is_empty());
}
