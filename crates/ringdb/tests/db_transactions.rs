//! Transactions on a sharded `Db` (`Db::begin`, `Db::transaction`): reading their own writes,
//! commit and abort across shards, dropped transactions releasing their locks, phantoms kept
//! out of a scanned range, a task's async form, and a bank of accounts spread over the shards
//! that threads transfer between while others audit it: the sum never changes, and every
//! committed transfer is present, also after a reopen.

use proptest::prelude::*;
use ringdb::{Db, DbTransaction, Durability, Options, TableId, TxnError};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-dbtxn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Options that run anywhere (no O_DIRECT: tmpfs too) with a small pool.
fn options(durability: Durability) -> Options {
    let mut o = Options {
        pool_pages: 512,
        direct: false,
        durability,
        wal_bytes: 4 << 20,
        ..Options::default()
    };
    if ringdb_io::limits::io_uring_disabled().unwrap_or(0) != 0 {
        o.io.engine = ringdb_io::EngineKind::Posix;
    }
    o
}

fn open(d: &PathBuf, shards: usize, durability: Durability) -> Db {
    Db::builder(d)
        .options(options(durability))
        .shards(shards)
        .open()
        .unwrap()
}

fn account(i: u64) -> Vec<u8> {
    format!("account{i:04}").into_bytes()
}

fn amount(value: &[u8]) -> i64 {
    i64::from_be_bytes(value.try_into().expect("8 bytes"))
}

/// Keys that land on `shards` different shards, one each.
fn keys_on_every_shard(db: &Db) -> Vec<Vec<u8>> {
    let mut found: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
    for i in 0..10_000u64 {
        let k = format!("k{i}").into_bytes();
        found.entry(db.shard_of(&k)).or_insert(k);
        if found.len() == db.shard_count() {
            break;
        }
    }
    found.into_values().collect()
}

#[test]
fn a_transaction_is_send_and_reads_its_own_writes_across_shards() {
    fn assert_send<T: Send>() {}
    assert_send::<DbTransaction>();
    let d = dir("own-writes");
    let db = open(&d, 2, Durability::Fdatasync);
    let keys = keys_on_every_shard(&db);
    assert_eq!(keys.len(), 2);
    db.insert(&keys[0], b"old").unwrap();
    let mut txn = db.begin();
    txn.insert(&keys[0], b"new0").unwrap();
    txn.insert(&keys[1], b"new1").unwrap();
    assert_eq!(txn.get(&keys[0]).unwrap().as_deref(), Some(&b"new0"[..]));
    assert_eq!(txn.get(&keys[1]).unwrap().as_deref(), Some(&b"new1"[..]));
    let moved = std::thread::spawn(move || {
        txn.remove(&keys[0]).unwrap();
        assert_eq!(txn.get(&keys[0]).unwrap(), None);
        txn.commit()
    });
    moved.join().unwrap().unwrap();
    let keys = keys_on_every_shard(&db);
    assert_eq!(db.get(&keys[0]).unwrap(), None);
    assert_eq!(db.get(&keys[1]).unwrap().as_deref(), Some(&b"new1"[..]));
    db.close().unwrap();
    // Durable across a reopen.
    let db = open(&d, 2, Durability::Fdatasync);
    assert_eq!(db.get(&keys[0]).unwrap(), None);
    assert_eq!(db.get(&keys[1]).unwrap().as_deref(), Some(&b"new1"[..]));
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn abort_and_drop_discard_the_writes_and_release_the_locks() {
    let d = dir("abort");
    let db = open(&d, 2, Durability::None);
    let keys = keys_on_every_shard(&db);
    let mut txn = db.begin();
    txn.insert(&keys[0], b"a").unwrap();
    txn.insert(&keys[1], b"b").unwrap();
    txn.abort();
    let mut dropped = db.begin();
    dropped.get_for_update(&keys[0]).unwrap();
    dropped.insert(&keys[1], b"c").unwrap();
    drop(dropped);
    // A later (younger) transaction would die on a lock still held; it commits instead.
    let mut later = db.begin();
    assert_eq!(later.get(&keys[0]).unwrap(), None);
    assert_eq!(later.get(&keys[1]).unwrap(), None);
    later.insert(&keys[0], b"d").unwrap();
    later.commit().unwrap();
    assert_eq!(db.get(&keys[0]).unwrap().as_deref(), Some(&b"d"[..]));
    assert_eq!(db.get(&keys[1]).unwrap(), None);
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// A transaction that only reads, on every shard: its shared locks keep a younger writer
/// out until it commits (its parts end in one round, all at once), then nothing is left held.
#[test]
fn a_read_only_transaction_across_shards_holds_its_locks_until_it_commits() {
    let d = dir("read-only");
    let db = open(&d, 3, Durability::Fdatasync);
    let keys = keys_on_every_shard(&db);
    for key in &keys {
        db.insert(key, b"v").unwrap();
    }
    let mut reader = db.begin();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let read = reader.get_many(&refs).unwrap();
    assert!(read.iter().all(|v| v.as_deref() == Some(&b"v"[..])));
    let mut writer = db.begin();
    let died = writer.get_for_update(&keys[2]).unwrap_err();
    assert!(died.is_conflict(), "{died}");
    writer.abort();
    reader.commit().unwrap();
    for key in &keys {
        db.transaction(|txn| txn.insert(key, b"w")).unwrap();
    }
    assert_eq!(db.get(&keys[2]).unwrap().as_deref(), Some(&b"w"[..]));
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// A part lost to a failure (here its shard panicked): the transaction refuses every later
/// read and its commit (the lost part's locks are gone), and aborting it releases the other
/// shards' locks.
#[test]
fn a_transaction_whose_part_is_lost_refuses_to_go_on_or_commit() {
    let d = dir("part-lost");
    let db = open(&d, 3, Durability::None);
    let keys = keys_on_every_shard(&db);
    let (on_0, on_1) = (db.shard_of(&keys[0]), db.shard_of(&keys[1]));
    let mut txn = db.begin();
    txn.get_for_update(&keys[0]).unwrap();
    txn.insert(&keys[0], b"t").unwrap();
    let down = db.run_on(on_1, |_| async { panic!("a bug in a task") });
    assert!(down.is_err());
    let failed = txn.get(&keys[1]).unwrap_err();
    assert!(matches!(failed, TxnError::Shard(_)), "{failed}");
    let refused = txn.get(&keys[2]).unwrap_err();
    assert!(
        matches!(refused, TxnError::PartLost { shard, .. } if shard == on_1),
        "{refused}"
    );
    let refused = txn.commit().unwrap_err();
    assert!(matches!(refused, TxnError::PartLost { .. }), "{refused}");
    // Nothing committed, and the lock on the first key is gone with the abort.
    assert_eq!(db.get(&keys[0]).unwrap(), None);
    db.transaction(|t| t.insert(&keys[0], b"after")).unwrap();
    assert_eq!(db.shard_of(&keys[0]), on_0);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

/// Transactions a program leaves open are bounded per shard: past 65,536 a new one is
/// refused with a typed error instead of the shard's table growing; once they end, new ones
/// run again.
#[test]
fn a_shard_refuses_a_part_past_its_bound_of_open_transactions() {
    const OPEN_MAX: usize = 1 << 16;
    let d = dir("too-many");
    let db = open(&d, 1, Durability::Off);
    let mut open: Vec<DbTransaction> = Vec::with_capacity(OPEN_MAX);
    for i in 0..OPEN_MAX {
        let mut txn = db.begin();
        txn.get(format!("k{i}").as_bytes()).unwrap();
        open.push(txn);
    }
    let mut refused = db.begin();
    match refused.get(b"one more").unwrap_err() {
        TxnError::TooManyOpen {
            shard, open_max, ..
        } => assert_eq!((shard, open_max), (0, OPEN_MAX)),
        other => panic!("{other}"),
    }
    refused.abort();
    drop(open);
    db.transaction(|t| t.insert(b"k0", b"v")).unwrap();
    assert_eq!(db.get(b"k0").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_younger_transaction_dies_on_an_older_ones_lock_and_the_retry_wins() {
    let d = dir("conflict");
    let db = open(&d, 2, Durability::None);
    let keys = keys_on_every_shard(&db);
    let mut older = db.begin();
    older.get_for_update(&keys[1]).unwrap();
    let mut younger = db.begin();
    younger.insert(&keys[0], b"y").unwrap();
    let died = younger.get(&keys[1]).unwrap_err();
    assert!(died.is_conflict(), "{died}");
    younger.abort();
    older.insert(&keys[1], b"o").unwrap();
    older.commit().unwrap();
    // `transaction` retries; the body sees the committed value.
    let seen = db
        .transaction(|txn| {
            let v = txn.get(&keys[1])?;
            txn.insert(&keys[0], b"y")?;
            Ok::<_, TxnError>(v)
        })
        .unwrap();
    assert_eq!(seen.as_deref(), Some(&b"o"[..]));
    assert_eq!(db.get(&keys[0]).unwrap().as_deref(), Some(&b"y"[..]));
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// A range walked backwards across three shards, with the transaction's own inserts and
/// deletes merged in: the last `limit` pairs, descending, the same as the forward walk's
/// reversed.
#[test]
fn a_range_walked_backwards_merges_every_shard_and_the_own_writes() {
    let d = dir("range-rev");
    let db = open(&d, 3, Durability::None);
    let key = |i: u32| format!("k{i:02}").into_bytes();
    for i in 0..30 {
        db.insert(&key(i), &i.to_be_bytes()).unwrap();
    }
    let mut txn = db.begin();
    txn.remove(&key(29)).unwrap();
    txn.remove(&key(27)).unwrap();
    txn.insert(b"k275", b"mine").unwrap();
    let last = txn.range_rev(key(10)..key(30), 5).unwrap();
    let names: Vec<&[u8]> = last.iter().map(|(k, _)| k.as_slice()).collect();
    let want: [&[u8]; 5] = [b"k28", b"k275", b"k26", b"k25", b"k24"];
    assert_eq!(names, want);
    assert_eq!(last[1].1, b"mine");
    let mut forward = txn.range(key(10)..key(30), usize::MAX).unwrap();
    forward.reverse();
    let backward = txn.range_rev(key(10)..key(30), usize::MAX).unwrap();
    assert_eq!(forward, backward);
    assert_eq!(backward.len(), 20 - 2 + 1);
    let first = txn.prefix(b"k0", 3).unwrap();
    assert_eq!(
        first.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        [key(0), key(1), key(2)]
    );
    txn.commit().unwrap();
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_scanned_range_has_no_phantoms_until_the_scan_ends() {
    let d = dir("phantom");
    let db = open(&d, 2, Durability::None);
    for i in 0..20u64 {
        db.insert(&account(i * 2), &0i64.to_be_bytes()).unwrap();
    }
    let mut scanner = db.begin();
    let first = scanner.prefix(b"account", 100).unwrap();
    assert_eq!(first.len(), 20);
    assert!(first.windows(2).all(|w| w[0].0 < w[1].0), "in key order");
    let limited = scanner.range(account(4)..account(20), 3).unwrap();
    let limited_keys: Vec<_> = limited.into_iter().map(|(k, _)| k).collect();
    assert_eq!(limited_keys, vec![account(4), account(6), account(8)]);
    // A younger writer into the range dies (the scanner is older): no phantom.
    let mut writer = db.begin();
    let refused = writer
        .insert(&account(7), b"x")
        .and_then(|()| writer.get(&account(7)));
    let committed = refused.and_then(|_| writer.commit());
    assert!(
        matches!(&committed, Err(e) if e.is_conflict()),
        "{committed:?}"
    );
    let again = scanner.prefix(b"account", 100).unwrap();
    assert_eq!(again, first, "the scan repeats");
    scanner.commit().unwrap();
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_task_runs_a_transaction_with_the_async_form() {
    let d = dir("async");
    let db = open(&d, 2, Durability::Fdatasync);
    let keys = keys_on_every_shard(&db);
    let task_keys = keys.clone();
    let db_in_task = db.clone();
    let read = db
        .run_on(0, move |_| async move {
            db_in_task
                .transaction_async(async |txn: &mut DbTransaction| {
                    txn.insert_async(&task_keys[0], b"0").await?;
                    txn.insert_async(&task_keys[1], b"1").await?;
                    // Scans in a task see the writes too, both ways.
                    let all = txn.prefix_async(b"", usize::MAX).await?;
                    let mut backward = txn.range_rev_async::<&[u8], _>(.., usize::MAX).await?;
                    backward.reverse();
                    assert_eq!((all.len(), &all), (2, &backward));
                    txn.get_async(&task_keys[1]).await
                })
                .await
        })
        .unwrap()
        .unwrap();
    assert_eq!(read.as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(&keys[0]).unwrap().as_deref(), Some(&b"0"[..]));
    // The blocking form on a shard's thread is refused.
    let db_in_task = db.clone();
    let refused = db
        .run_on(
            1,
            move |_| async move { db_in_task.begin().get(b"k").map(drop) },
        )
        .unwrap();
    assert!(matches!(refused, Err(TxnError::Shard(_))), "{refused:?}");
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// What shard `shard` itself holds under `key` (read there, not by the key's hash).
fn held_by(db: &Db, shard: usize, key: &[u8]) -> Option<Vec<u8>> {
    let key = key.to_vec();
    let read = db.run_on(shard, move |s| async move { s.local().get(&key).await });
    read.unwrap().unwrap()
}

#[test]
fn keys_a_program_places_on_a_shard_are_read_written_and_scanned_there() {
    let d = dir("placed");
    let db = open(&d, 2, Durability::Fdatasync);
    let keys = keys_on_every_shard(&db);
    let (hashed_to_0, hashed_to_1) = (&keys[0], &keys[1]);
    assert_eq!((db.shard_of(hashed_to_0), db.shard_of(hashed_to_1)), (0, 1));
    let table = TableId::DEFAULT;
    // Each key written to the other shard than its hash's, in one transaction.
    let mut txn = db.begin();
    txn.on_shard(table, 1).insert(hashed_to_0, b"on 1").unwrap();
    txn.on_shard(table, 0).insert(hashed_to_1, b"on 0").unwrap();
    let own = txn.on_shard(table, 1).get(hashed_to_0).unwrap();
    assert_eq!(own.as_deref(), Some(&b"on 1"[..]), "reads its own write");
    txn.commit().unwrap();
    assert_eq!(held_by(&db, 1, hashed_to_0).as_deref(), Some(&b"on 1"[..]));
    assert_eq!(
        held_by(&db, 0, hashed_to_0),
        None,
        "not on its hash's shard"
    );
    assert_eq!(
        db.get(hashed_to_0).unwrap(),
        None,
        "the hash's routing misses it"
    );
    // Reads and scans go to the shard named, and only there.
    let mut reader = db.begin();
    let on_1 = reader.on_shard(table, 1).get(hashed_to_0).unwrap();
    assert_eq!(on_1.as_deref(), Some(&b"on 1"[..]));
    let scanned = reader.on_shard(table, 0).prefix(b"", usize::MAX).unwrap();
    assert_eq!(scanned, vec![(hashed_to_1.clone(), b"on 0".to_vec())]);
    reader.commit().unwrap();
    // A task prefetches placed keys, and its transaction's writes on both shards commit
    // together (through the cross-shard batch log).
    let db_in_task = db.clone();
    let (k0, k1) = (hashed_to_0.clone(), hashed_to_1.clone());
    db.run_on(0, move |_| async move {
        let mut txn = db_in_task.begin();
        txn.prefetch_on_async(1, &[(table, &k0)]).await.unwrap();
        txn.on_shard(table, 1).remove_async(&k0).await.unwrap();
        txn.on_shard(table, 0)
            .insert_async(&k1, b"again")
            .await
            .unwrap();
        txn.commit_async().await.unwrap();
    })
    .unwrap();
    assert_eq!(held_by(&db, 1, hashed_to_0), None);
    assert_eq!(held_by(&db, 0, hashed_to_1).as_deref(), Some(&b"again"[..]));
    // A shard that does not exist is a program's error, as `Db::run_on` treats it.
    let out_of_range = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut txn = db.begin();
        let _ = txn.on_shard(table, 2);
    }));
    assert!(out_of_range.is_err(), "shard 2 of 2 is refused");
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// What a transfer thread did.
struct Ledger {
    committed: Vec<(u64, u64, i64, Vec<u8>)>,
}

const ACCOUNTS: u64 = 24;
const START_BALANCE: i64 = 1_000;

/// One transfer of `amount` from `from` to `to`, with its record under `record`.
fn transfer(db: &Db, from: u64, to: u64, amount_moved: i64, record: &[u8]) -> Result<(), TxnError> {
    db.transaction(|txn| {
        let (from_key, to_key) = (account(from), account(to));
        let both = txn.get_many_for_update(&[&from_key, &to_key])?;
        let a = both[0].as_deref().map_or(0, amount);
        let b = both[1].as_deref().map_or(0, amount);
        txn.insert(&account(from), &(a - amount_moved).to_be_bytes())?;
        txn.insert(&account(to), &(b + amount_moved).to_be_bytes())?;
        txn.insert(record, &amount_moved.to_be_bytes())
    })
}

/// The sum of every balance, read in one transaction (a range over the accounts).
fn audit(db: &Db) -> Result<i64, TxnError> {
    db.transaction(|txn| {
        let pairs = txn.prefix(b"account", 1_000)?;
        assert_eq!(pairs.len() as u64, ACCOUNTS, "every account");
        Ok(pairs.iter().map(|(_, v)| amount(v)).sum())
    })
}

/// Every committed transfer present, every balance what the ledgers say, the sum unchanged.
fn check_bank(db: &Db, ledgers: &[Ledger]) {
    let mut expected = vec![START_BALANCE; ACCOUNTS as usize];
    for (from, to, moved, record) in ledgers.iter().flat_map(|l| &l.committed) {
        expected[*from as usize] -= moved;
        expected[*to as usize] += moved;
        let present = db.get(record).unwrap();
        assert_eq!(
            present.map(|v| amount(&v)),
            Some(*moved),
            "a committed transfer"
        );
    }
    for (i, balance) in expected.iter().enumerate() {
        let stored = db.get(&account(i as u64)).unwrap().map(|v| amount(&v));
        assert_eq!(stored, Some(*balance), "account {i}");
    }
    assert_eq!(audit(db).unwrap(), START_BALANCE * ACCOUNTS as i64);
}

#[test]
fn transfers_between_accounts_on_every_shard_keep_the_sum() {
    let d = dir("bank");
    let db = open(&d, 3, Durability::Fdatasync);
    for i in 0..ACCOUNTS {
        db.insert(&account(i), &START_BALANCE.to_be_bytes())
            .unwrap();
    }
    let total = START_BALANCE * ACCOUNTS as i64;
    let stop = Arc::new(AtomicBool::new(false));
    let audits = Arc::new(AtomicU64::new(0));
    let auditor = {
        let (db, stop, audits) = (db.clone(), stop.clone(), audits.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(
                    audit(&db).unwrap(),
                    total,
                    "an audit saw money appear or vanish"
                );
                audits.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let movers: Vec<_> = (0..4u64)
        .map(|thread| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut ledger = Ledger {
                    committed: Vec::new(),
                };
                let mut state = thread.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for n in 0..150u64 {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let from = state % ACCOUNTS;
                    let to = (from + 1 + (state >> 20) % (ACCOUNTS - 1)) % ACCOUNTS;
                    let moved = (state >> 40) as i64 % 50 + 1;
                    let record = format!("transfer/{thread}/{n:05}").into_bytes();
                    transfer(&db, from, to, moved, &record).unwrap();
                    ledger.committed.push((from, to, moved, record));
                }
                ledger
            })
        })
        .collect();
    let ledgers: Vec<Ledger> = movers.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    auditor.join().unwrap();
    assert!(audits.load(Ordering::Relaxed) > 0, "the auditor ran");
    check_bank(&db, &ledgers);
    db.close().unwrap();
    let db = open(&d, 3, Durability::Fdatasync);
    check_bank(&db, &ledgers);
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// An operation of the model test.
#[derive(Clone, Debug)]
enum Step {
    Get(u8),
    GetMany(u8, u8, u8),
    Insert(u8, u8),
    Remove(u8),
    Range(u8, u8, usize),
    Commit,
    Abort,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => any::<u8>().prop_map(|k| Step::Get(k % 64)),
        2 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(a, b, c)| Step::GetMany(a % 64, b % 64, c % 64)),
        4 => (any::<u8>(), any::<u8>()).prop_map(|(k, v)| Step::Insert(k % 64, v)),
        2 => any::<u8>().prop_map(|k| Step::Remove(k % 64)),
        2 => (any::<u8>(), any::<u8>(), 0..12usize).prop_map(|(a, b, n)| Step::Range(a % 64, b % 64, n)),
        1 => Just(Step::Commit),
        1 => Just(Step::Abort),
    ]
}

fn model_key(k: u8) -> Vec<u8> {
    format!("m{k:03}").into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Transactions on three shards agree with a model: committed state plus the open
    /// transaction's own writes, for gets and ranges with limits; commits keep the writes,
    /// aborts drop them.
    #[test]
    fn transactions_agree_with_a_model(steps in proptest::collection::vec(step(), 1..60)) {
        let d = dir("model");
        let db = open(&d, 3, Durability::None);
        let mut committed: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut pending = committed.clone();
        let mut txn = db.begin();
        for step in steps {
            match step {
                Step::Get(k) => {
                    let got = txn.get(&model_key(k)).unwrap();
                    prop_assert_eq!(got.as_ref(), pending.get(&model_key(k)));
                }
                Step::GetMany(a, b, c) => {
                    let keys = [model_key(a), model_key(b), model_key(c)];
                    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                    let got = txn.get_many(&refs).unwrap();
                    let want: Vec<_> = keys.iter().map(|k| pending.get(k).cloned()).collect();
                    prop_assert_eq!(got, want);
                }
                Step::Insert(k, v) => {
                    txn.insert(&model_key(k), &[v]).unwrap();
                    pending.insert(model_key(k), vec![v]);
                }
                Step::Remove(k) => {
                    txn.remove(&model_key(k)).unwrap();
                    pending.remove(&model_key(k));
                }
                Step::Range(a, b, n) => {
                    let (a, b) = (model_key(a.min(b)), model_key(a.max(b)));
                    let got = txn.range(a.clone()..b.clone(), n).unwrap();
                    let want: Vec<_> = pending
                        .range(a..b)
                        .take(n)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    prop_assert_eq!(got, want);
                }
                Step::Commit => {
                    txn.commit().unwrap();
                    committed = pending.clone();
                    txn = db.begin();
                }
                Step::Abort => {
                    txn.abort();
                    pending = committed.clone();
                    txn = db.begin();
                }
            }
        }
        drop(txn);
        let stored: BTreeMap<_, _> = db.prefix(b"m").map(Result::unwrap).collect();
        prop_assert_eq!(stored, committed);
        db.close().unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn a_transaction_dropped_with_a_request_under_way_leaves_no_lock() {
    use futures_util::FutureExt;
    let d = dir("cancelled");
    let db = open(&d, 2, Durability::None);
    let keys = keys_on_every_shard(&db);
    db.insert(&keys[1], b"v").unwrap();
    let mut older = db.begin();
    let mut younger = db.begin();
    younger.get_for_update(&keys[1]).unwrap();
    // The older one waits for the younger's lock (wait-die): its request is under way on the
    // shard when its future, then the transaction, are dropped.
    let cancelled = older.get_for_update_async(&keys[1]).now_or_never();
    assert!(cancelled.is_none(), "the request waits for the lock");
    drop(older);
    younger.insert(&keys[1], b"w").unwrap();
    younger.commit().unwrap();
    // The dropped one's part got the lock when the younger committed, and must end with its
    // request rather than keep the lock: a later transaction gets it (a few tries, as the
    // part may hold it for a moment).
    let mut got = None;
    for _ in 0..200 {
        let mut later = db.begin();
        match later.get_for_update(&keys[1]) {
            Ok(value) => {
                later.commit().unwrap();
                got = Some(value);
                break;
            }
            Err(e) if e.is_conflict() => std::thread::sleep(std::time::Duration::from_millis(5)),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        got.flatten().as_deref(),
        Some(&b"w"[..]),
        "a dropped part kept its lock"
    );
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}
