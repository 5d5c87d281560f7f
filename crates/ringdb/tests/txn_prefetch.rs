//! `Transaction::prefetch`: the pages of the keys asked for are read into the pool together,
//! without a lock (another transaction may write those keys meanwhile), and the transaction's
//! later reads of them find them resident.

mod txn_common;

use ringdb::{Durability, LocalDb, Options, TableId};
use txn_common::dir;

/// Keys in the table, and the value bytes of each: about four keys per 4 KiB page, so the
/// table is far larger than the pool.
const KEYS: u32 = 4_000;
const VALUE_BYTES: usize = 900;
const POOL_PAGES: usize = 64;
/// Keys prefetched, spread over the table (each on its own leaf).
const PREFETCHED: u32 = 16;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn loaded(name: &str) -> (LocalDb, TableId) {
    let options = Options {
        pool_pages: POOL_PAGES,
        direct: false,
        fresh: true,
        durability: Durability::Off,
        ..Options::default()
    };
    let mut db = LocalDb::open(&dir(name), options).unwrap();
    let table = db.create_table("t").unwrap();
    for i in 0..KEYS {
        db.in_table(table)
            .insert(&key(i), &vec![b'v'; VALUE_BYTES])
            .unwrap();
    }
    (db, table)
}

#[test]
fn prefetch_reads_the_pages_together_takes_no_lock_and_later_reads_hit() {
    let (mut db, table) = loaded("prefetch");
    let h = db.handle();
    let wanted: Vec<Vec<u8>> = (0..PREFETCHED)
        .map(|i| key(i * (KEYS / PREFETCHED) + 7))
        .collect();
    db.runtime()
        .block_on(async move {
            let reads = || h.tree().buffer().stats().reads;
            let txn = h.begin();
            let before = reads();
            let keys: Vec<(TableId, &[u8])> = wanted.iter().map(|k| (table, &k[..])).collect();
            txn.prefetch(&keys).await.unwrap();
            let prefetched = reads() - before;
            // The pool held the end of the load, not these leaves: most had to be read.
            assert!(
                prefetched >= u64::from(PREFETCHED) / 2,
                "prefetch read {prefetched} pages for {PREFETCHED} keys spread over the table"
            );
            assert_eq!(h.txn_stats().locks_held, 0, "a prefetch takes no lock");
            // Nothing is locked: a younger transaction writes one of the keys and commits
            // without waiting or dying.
            let mut writer = h.begin();
            writer.put(table, &wanted[0], b"changed").await.unwrap();
            writer.commit().await.unwrap();
            // The prefetching transaction's reads now come from memory, and see the commit.
            let mut txn = txn;
            let after_prefetch = reads();
            for (i, k) in wanted.iter().enumerate() {
                let value = txn.get(table, k).await.unwrap().expect("the key exists");
                if i == 0 {
                    assert_eq!(value, b"changed");
                } else {
                    assert_eq!(value.len(), VALUE_BYTES);
                }
            }
            assert_eq!(
                reads(),
                after_prefetch,
                "the prefetched pages stayed resident"
            );
            txn.commit().await.unwrap();
            let stats = h.txn_stats();
            assert_eq!((stats.conflicts, stats.waits), (0, 0));
        })
        .unwrap();
}

#[test]
fn a_prefetch_of_absent_keys_and_of_none_is_fine() {
    let (mut db, table) = loaded("prefetch-absent");
    let h = db.handle();
    db.runtime()
        .block_on(async move {
            let txn = h.begin();
            txn.prefetch(&[]).await.unwrap();
            let absent = key(KEYS + 100);
            txn.prefetch(&[(table, &absent[..])]).await.unwrap();
            // A table the database does not hold is refused as a read would be.
            let missing = TableId::from_raw(9_999);
            assert!(txn.prefetch(&[(missing, &absent[..])]).await.is_err());
            txn.commit().await.unwrap();
        })
        .unwrap();
}

/// Everything resident: a prefetch reads no page and runs no task per key; it only finds the
/// keys' leaves, and the reads after it start there (leaf hints, `tree/hint.rs`) instead of
/// descending again.
#[test]
fn a_prefetch_of_resident_keys_reads_nothing_and_the_reads_start_at_their_leaves() {
    let options = Options {
        pool_pages: 4_096,
        direct: false,
        fresh: true,
        durability: Durability::Off,
        ..Options::default()
    };
    let mut db = LocalDb::open(&dir("prefetch-resident"), options).unwrap();
    for i in 0..KEYS {
        db.insert(&key(i), &vec![b'v'; VALUE_BYTES]).unwrap();
    }
    let wanted: Vec<Vec<u8>> = (0..PREFETCHED)
        .map(|i| key(i * (KEYS / PREFETCHED) + 7))
        .collect();
    let h = db.handle();
    let hinted = db
        .runtime()
        .block_on(async move {
            let reads = || h.tree().buffer().stats().reads;
            let hints = || h.tree().stats().leaf_hints;
            let mut txn = h.begin();
            let keys: Vec<(TableId, &[u8])> =
                wanted.iter().map(|k| (TableId::DEFAULT, &k[..])).collect();
            let (reads_before, hints_before) = (reads(), hints());
            txn.prefetch(&keys).await.unwrap();
            assert_eq!(reads(), reads_before, "every page was resident");
            for k in &wanted {
                let value = txn.get(TableId::DEFAULT, k).await.unwrap();
                assert_eq!(value.expect("the key exists").len(), VALUE_BYTES);
            }
            txn.commit().await.unwrap();
            hints() - hints_before
        })
        .unwrap();
    // A key past its leaf's last key (or two keys sharing a hint slot) descends instead.
    assert!(
        hinted >= u64::from(PREFETCHED) / 2,
        "{hinted} of {PREFETCHED} reads started at their leaf"
    );
}
