//! `BufferManager::time_verification`: while it is on, the verification of every page read is
//! timed into the pool's stats (one timing per page read); off, the default, nothing is timed.
//! What a benchmark's cost model reads (`ringdb ycsb` prices its run's reads with it).

use ringdb::{LocalDb, Options};

const KEYS: u32 = 5000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Reads every 7th key: through a pool far smaller than the tree, most of them fault.
fn read_some(db: &mut LocalDb) {
    for i in (0..KEYS).step_by(7) {
        assert!(db.get(&key(i)).unwrap().is_some(), "key {i}");
    }
}

#[test]
fn page_verifications_are_timed_only_while_asked() {
    let dir = std::env::temp_dir().join(format!("ringdb-verify-timing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = Options {
        pool_pages: 32,
        direct: false,
        fresh: true,
        ..Options::default()
    };
    let mut db = LocalDb::open(&dir, options).unwrap();
    for i in 0..KEYS {
        db.insert(&key(i), &[0x5a; 100]).unwrap();
    }
    let before = db.stats().pool;
    read_some(&mut db);
    let off = db.stats().pool;
    assert!(off.reads > before.reads, "the reads must fault pages in");
    assert_eq!(off.verifications_timed, 0, "timed while off");
    db.handle().tree().buffer().time_verification(true);
    read_some(&mut db);
    let on = db.stats().pool;
    assert!(on.reads > off.reads);
    assert_eq!(on.verifications_timed, on.reads - off.reads);
    assert!(on.verification_cycles > 0);
    db.handle().tree().buffer().time_verification(false);
    read_some(&mut db);
    assert_eq!(db.stats().pool.verifications_timed, on.verifications_timed);
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
