//! Transactions (`DbHandle::begin`): bank transfers by 64 concurrent tasks over a pool much
//! smaller than the data keep the total (and without isolation they do not: lost updates),
//! scans lock their range against phantoms, wait-die makes the older wait and the younger
//! die (no deadlock with opposite lock orders), a transaction sees its own writes in gets and
//! scans, abort and drop discard writes and release locks, and with a log a commit is one
//! record that survives a crash.

mod txn_common;

use ringdb::{
    ConflictWith, DbHandle, Direction, Durability, Isolation, LocalDb, Options, TableId, TxnError,
    TxnTimestamp,
};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;
use txn_common::{dir, key, opts, small_db, yield_rounds, Events};

/// Accounts in the bank test, and the bytes each account's value carries besides its balance
/// (so the data is several times the pool).
const ACCOUNTS: u64 = 400;
const ACCOUNT_PAD_BYTES: usize = 900;
const INITIAL_BALANCE: i64 = 1_000;
const TASKS: u64 = 64;
const TRANSFERS_PER_TASK: u64 = 25;
/// Attempts of one transfer before the test calls it livelock.
const ATTEMPTS_MAX: u64 = 10_000;

fn account_key(i: u64) -> Vec<u8> {
    format!("acct{i:06}").into_bytes()
}

fn account_value(balance: i64) -> Vec<u8> {
    let mut v = balance.to_be_bytes().to_vec();
    v.resize(8 + ACCOUNT_PAD_BYTES, b'.');
    v
}

fn balance_of(value: &[u8]) -> i64 {
    i64::from_be_bytes(value[..8].try_into().unwrap())
}

/// A small deterministic generator per task (xorshift).
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Moves `amount` from `from` to `to` in one transaction; yields between the reads and the
/// writes so that the tasks interleave there whatever the page faults do.
async fn transfer(
    h: &DbHandle,
    table: TableId,
    (from, to, amount): (u64, u64, i64),
    isolation: Isolation,
    timestamp: Option<TxnTimestamp>,
) -> Result<(), TxnError> {
    let mut t = h.begin_with(isolation, timestamp);
    let a = t.get_for_update(table, &account_key(from)).await?.unwrap();
    let b = t.get_for_update(table, &account_key(to)).await?.unwrap();
    ringdb_io::yield_now().await;
    t.put(
        table,
        &account_key(from),
        &account_value(balance_of(&a) - amount),
    )
    .await?;
    t.put(
        table,
        &account_key(to),
        &account_value(balance_of(&b) + amount),
    )
    .await?;
    t.commit().await
}

/// One task's transfers, each retried with its first timestamp on a conflict.
async fn transfers(h: DbHandle, table: TableId, seed: u64, isolation: Isolation) {
    let mut rng = seed * 0x9E37_79B9_7F4A_7C15 + 1;
    for _ in 0..TRANSFERS_PER_TASK {
        let from = next_random(&mut rng) % ACCOUNTS;
        let to = (from + 1 + next_random(&mut rng) % (ACCOUNTS - 1)) % ACCOUNTS;
        let amount = (next_random(&mut rng) % 100) as i64 + 1;
        let mut timestamp = None;
        let mut attempts = 0;
        loop {
            attempts += 1;
            assert!(
                attempts <= ATTEMPTS_MAX,
                "a transfer did not commit in {ATTEMPTS_MAX} tries"
            );
            match transfer(&h, table, (from, to, amount), isolation, timestamp).await {
                Ok(()) => break,
                Err(TxnError::Conflict { timestamp: t, .. }) => timestamp = Some(t),
                Err(e) => panic!("transfer failed: {e}"),
            }
        }
    }
}

/// Runs the bank with `isolation`; returns the total afterwards and the database.
fn bank(name: &str, isolation: Isolation) -> (i64, LocalDb) {
    let mut db = LocalDb::open(&dir(name), opts(24, Durability::Off)).unwrap();
    let table = db.create_table("accounts").unwrap();
    for i in 0..ACCOUNTS {
        db.in_table(table)
            .insert(&account_key(i), &account_value(INITIAL_BALANCE))
            .unwrap();
    }
    let h = db.handle();
    for task in 0..TASKS {
        db.runtime()
            .spawn(transfers(h.clone(), table, task, isolation));
    }
    db.runtime().run().unwrap();
    let all = db
        .runtime()
        .block_on(async move {
            h.in_table(table)
                .scan(
                    Bound::Unbounded,
                    Bound::Unbounded,
                    Direction::Forward,
                    usize::MAX,
                )
                .await
        })
        .unwrap()
        .unwrap();
    assert_eq!(all.len() as u64, ACCOUNTS);
    (all.iter().map(|(_, v)| balance_of(v)).sum(), db)
}

#[test]
fn bank_transfers_keep_the_total_and_lose_updates_without_isolation() {
    let total = ACCOUNTS as i64 * INITIAL_BALANCE;
    let (serializable, mut db) = bank("bank-serializable", Isolation::Serializable);
    let stats = db.handle().txn_stats();
    let pool = db.stats().pool;
    eprintln!("serializable: {stats:?}, pool misses {}", pool.misses);
    assert_eq!(
        serializable, total,
        "serializable transfers changed the total"
    );
    assert_eq!(stats.commits, TASKS * TRANSFERS_PER_TASK);
    assert!(
        stats.conflicts + stats.waits > 0,
        "the tasks never met: {stats:?}"
    );
    assert_eq!(stats.aborts, stats.conflicts, "only conflicts abort here");
    assert!(pool.misses > 0, "the data fit the pool: no read faulted");
    assert_eq!(stats.locks_held, 0, "locks left after every transaction");
    assert!(stats.lock_table.peak_bytes > 0);
    assert!(db.verify().unwrap().is_ok());
    db.close().unwrap();

    let (off, mut db) = bank("bank-off", Isolation::Off);
    let stats = db.handle().txn_stats();
    eprintln!("isolation off: total {off} of {total}, {stats:?}");
    assert_ne!(
        off, total,
        "without isolation no update was lost: the test cannot fail"
    );
    assert_eq!(stats.conflicts + stats.waits, 0);
    assert!(db.verify().unwrap().is_ok());
    db.close().unwrap();
}

/// The younger transaction meets the older one's lock: it dies, and reports it once the lock
/// has changed (so its retry does not meet it again at once).
async fn younger_dies(h: DbHandle, io: ringdb_io::Io, table: TableId, ev: Events) {
    let mut older = h.begin();
    let mut younger = h.begin();
    assert!(older.timestamp() < younger.timestamp());
    older.get_for_update(table, &key(1)).await.unwrap();
    let (ev2, older_ts) = (ev.clone(), older.timestamp());
    let dies = io.spawn(async move {
        // Holding a lock (which a serializable transaction dies with anyway; a read-committed
        // one holding none would wait instead, see
        // `a_read_committed_transaction_holding_no_lock_waits_even_for_an_older_one`).
        younger.get(table, &key(7)).await.unwrap();
        let e = younger.get(table, &key(1)).await.unwrap_err();
        ev2.borrow_mut().push("younger died");
        assert!(e.is_conflict(), "{e}");
        let TxnError::Conflict {
            timestamp,
            holder,
            table: t,
            key: k,
            with,
            ..
        } = e
        else {
            unreachable!()
        };
        assert_eq!((timestamp, holder), (younger.timestamp(), older_ts));
        assert_eq!((t, k, with), (table, key(1), ConflictWith::ExclusiveKey));
        // Dead: every later call repeats the conflict.
        assert!(younger.get(table, &key(5)).await.unwrap_err().is_conflict());
    });
    yield_rounds(5).await;
    ev.borrow_mut().push("older commits");
    older.commit().await.unwrap();
    dies.await;
}

/// The older transaction meets the younger one's lock: it waits until the younger commits.
async fn older_waits(h: DbHandle, io: ringdb_io::Io, table: TableId, ev: Events) {
    let mut older = h.begin();
    let mut younger = h.begin();
    younger.put(table, &key(2), b"young").await.unwrap();
    let ev2 = ev.clone();
    let waits = io.spawn(async move {
        older.put(table, &key(2), b"old").await.unwrap();
        ev2.borrow_mut().push("older got the key");
        older.commit().await.unwrap();
    });
    yield_rounds(5).await;
    ev.borrow_mut().push("younger commits");
    younger.commit().await.unwrap();
    waits.await;
}

#[test]
fn a_younger_transaction_dies_and_an_older_one_waits() {
    let (mut db, table) = small_db("wait-die", 10);
    let h = db.handle();
    let events: Events = Rc::default();
    let io = db.runtime().io();
    let step = younger_dies(h.clone(), io.clone(), table, events.clone());
    db.runtime().block_on(step).unwrap();
    let step = older_waits(h.clone(), io, table, events.clone());
    db.runtime().block_on(step).unwrap();
    let order = [
        "older commits",
        "younger died",
        "younger commits",
        "older got the key",
    ];
    assert_eq!(*events.borrow(), order);
    let stats = h.txn_stats();
    assert_eq!(
        (stats.conflicts, stats.waits, stats.commits, stats.aborts),
        (1, 1, 3, 1)
    );
    assert_eq!(
        db.in_table(table).get(&key(2)).unwrap().as_deref(),
        Some(&b"old"[..])
    );
    assert_eq!(stats.locks_held, 0);
}

/// Locks `first` then `second` for update, yielding between, and writes both; retries with
/// the first timestamp on a conflict. Returns the attempts it took.
async fn lock_two(h: DbHandle, table: TableId, first: u32, second: u32, rounds: u32) -> u32 {
    let mut attempts = 0;
    for _ in 0..rounds {
        let mut timestamp = None;
        loop {
            attempts += 1;
            assert!(u64::from(attempts) <= ATTEMPTS_MAX, "livelock");
            let mut t = h.begin_with(Isolation::Serializable, timestamp);
            let result = async {
                t.get_for_update(table, &key(first)).await?;
                ringdb_io::yield_now().await;
                t.get_for_update(table, &key(second)).await?;
                t.put(table, &key(first), b"x").await?;
                t.put(table, &key(second), b"y").await?;
                Ok::<_, TxnError>(())
            }
            .await;
            match result {
                Ok(()) => {
                    t.commit().await.unwrap();
                    break;
                }
                Err(TxnError::Conflict { timestamp: ts, .. }) => timestamp = Some(ts),
                Err(e) => panic!("{e}"),
            }
        }
    }
    attempts
}

#[test]
fn opposite_lock_orders_never_deadlock() {
    let (mut db, table) = small_db("no-deadlock", 4);
    let h = db.handle();
    let a = db.runtime().spawn(lock_two(h.clone(), table, 0, 1, 200));
    let b = db.runtime().spawn(lock_two(h.clone(), table, 1, 0, 200));
    // The runtime reports a stall (an error) if every task parks and nothing is in flight:
    // a deadlock cannot hang here.
    db.runtime().run().unwrap();
    let attempts = db.runtime().block_on(async { a.await + b.await }).unwrap();
    let stats = h.txn_stats();
    eprintln!("{attempts} attempts for 400 transactions: {stats:?}");
    assert_eq!(stats.commits, 400);
    assert!(
        stats.conflicts > 0,
        "the two orders never crossed: {stats:?}"
    );
    assert_eq!(u64::from(attempts), stats.commits + stats.conflicts);
}

/// A scan of keys 10..20 by one transaction, and an insert of `k015` by another: under
/// `isolation`, returns whether the insert had to wait, and what the scanner saw twice.
fn scan_then_insert(name: &str, isolation: Isolation) -> (bool, usize, usize) {
    let (mut db, table) = small_db(name, 30);
    let h = db.handle();
    let io = db.runtime().io();
    let inserted = Rc::new(Cell::new(false));
    db.runtime()
        .block_on(async move {
            let mut inserter = h.begin_with(isolation, None);
            let mut scanner = h.begin_with(isolation, None);
            let (from, to) = (key(10), key(20));
            let range = (Bound::Included(&from[..]), Bound::Excluded(&to[..]));
            let first = scanner.scan(table, range.0, range.1, Direction::Forward, 100);
            let first = first.await.unwrap().len();
            // The inserter is older: it waits for the scanner instead of dying.
            let done = inserted.clone();
            let insert = io.spawn(async move {
                inserter.put(table, b"k015x", b"phantom").await.unwrap();
                inserter.commit().await.unwrap();
                done.set(true);
            });
            yield_rounds(5).await;
            let waited = !inserted.get();
            let second = scanner.scan(table, range.0, range.1, Direction::Forward, 100);
            let second = second.await.unwrap().len();
            scanner.commit().await.unwrap();
            insert.await;
            (waited, first, second)
        })
        .unwrap()
}

#[test]
fn a_scanned_range_admits_no_phantom() {
    let (waited, first, second) = scan_then_insert("phantom", Isolation::Serializable);
    assert!(waited, "the insert into the scanned range did not wait");
    assert_eq!((first, second), (10, 10), "the scan saw a phantom");
    // Without isolation the insert lands between the two scans: the test can fail.
    let (waited, first, second) = scan_then_insert("phantom-off", Isolation::Off);
    assert!(!waited);
    assert_eq!((first, second), (10, 11));
}

#[test]
fn a_younger_insert_into_a_scanned_range_dies_and_a_cut_scan_locks_only_what_it_saw() {
    let (mut db, table) = small_db("phantom-die", 30);
    let h = db.handle();
    let io = db.runtime().io();
    db.runtime()
        .block_on(async move {
            let mut scanner = h.begin();
            let mut inserter = h.begin();
            let (from, to) = (key(10), key(20));
            let pairs = scanner
                .scan(
                    table,
                    Bound::Included(&from),
                    Bound::Excluded(&to),
                    Direction::Forward,
                    3,
                )
                .await
                .unwrap();
            let keys: Vec<Vec<u8>> = pairs.into_iter().map(|(k, _)| k).collect();
            assert_eq!(keys, [key(10), key(11), key(12)]);
            // The limit cut the scan at k012: keys past it are not locked.
            inserter.put(table, b"k015x", b"fine").await.unwrap();
            let dies = io.spawn(async move {
                let e = inserter.put(table, b"k011x", b"phantom").await.unwrap_err();
                let TxnError::Conflict { with, key: k, .. } = &e else {
                    panic!("{e}")
                };
                assert_eq!((*with, k.as_slice()), (ConflictWith::Range, &b"k011x"[..]));
            });
            yield_rounds(3).await;
            // The younger inserter died at once; it reports it once the scanner is gone.
            assert!(!dies.is_finished());
            assert_eq!(h.txn_stats().conflicts, 1);
            drop(scanner);
            dies.await;
            assert_eq!(h.txn_stats().locks_held, 0);
        })
        .unwrap();
}

/// The pairs of `model` inside (`start`, `end`) in `direction`, at most `limit`.
fn model_scan(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    (start, end): (Bound<&[u8]>, Bound<&[u8]>),
    direction: Direction,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let range = model.range::<[u8], _>((start, end));
    let pairs = range.map(|(k, v)| (k.clone(), v.clone()));
    match direction {
        Direction::Forward => pairs.take(limit).collect(),
        _ => pairs.rev().take(limit).collect(),
    }
}

#[test]
fn a_transaction_sees_its_own_writes_in_gets_and_scans() {
    let (mut db, table) = small_db("own-writes", 30);
    let h = db.handle();
    db.runtime()
        .block_on(async move {
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = (0..30)
                .map(|i| (key(i), format!("v{i}").into_bytes()))
                .collect();
            let mut t = h.begin();
            for (k, v) in [
                (key(5), &b"new5"[..]),
                (key(40), b"new40"),
                (b"k0125".to_vec(), b"mid"),
            ] {
                t.put(table, &k, v).await.unwrap();
                model.insert(k, v.to_vec());
            }
            for i in [10, 11, 12, 0, 29] {
                t.delete(table, &key(i)).await.unwrap();
                model.remove(&key(i));
            }
            t.put(table, &key(11), b"back").await.unwrap();
            model.insert(key(11), b"back".to_vec());
            for i in [5, 10, 11, 12, 13, 40] {
                assert_eq!(
                    t.get(table, &key(i)).await.unwrap(),
                    model.get(&key(i)).cloned()
                );
            }
            let (k8, k20) = (key(8), key(20));
            let ranges = [
                (Bound::Unbounded, Bound::Unbounded),
                (Bound::Included(&k8[..]), Bound::Excluded(&k20[..])),
                (Bound::Excluded(&k8[..]), Bound::Included(&k20[..])),
            ];
            for range in ranges {
                for direction in [Direction::Forward, Direction::Reverse] {
                    for limit in [1, 2, 3, 5, 8, 13, 40] {
                        let got = t
                            .scan(table, range.0, range.1, direction, limit)
                            .await
                            .unwrap();
                        let want = model_scan(&model, range, direction, limit);
                        assert_eq!(got, want, "{range:?} {direction:?} limit {limit}");
                    }
                }
            }
            t.commit().await.unwrap();
            let all = h
                .in_table(table)
                .scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward, 100)
                .await
                .unwrap();
            assert_eq!(all, model.into_iter().collect::<Vec<_>>());
        })
        .unwrap();
    assert!(db.verify().unwrap().is_ok());
}

#[test]
fn abort_and_drop_discard_writes_and_release_locks() {
    let (mut db, table) = small_db("abort", 10);
    let h = db.handle();
    db.runtime()
        .block_on(async move {
            for how in ["abort", "drop"] {
                let mut t = h.begin();
                t.put(table, &key(1), b"gone").await.unwrap();
                t.delete(table, &key(2)).await.unwrap();
                t.get(table, &key(3)).await.unwrap();
                let (k0, k9) = (key(0), key(9));
                t.scan(
                    table,
                    Bound::Included(&k0),
                    Bound::Included(&k9),
                    Direction::Forward,
                    100,
                )
                .await
                .unwrap();
                assert_eq!(h.txn_stats().locks_held, 4);
                if how == "abort" {
                    t.abort();
                } else {
                    drop(t);
                }
                assert_eq!(h.txn_stats().locks_held, 0, "{how}");
                // A younger transaction would die on any lock left: it gets them all.
                let mut later = h.begin();
                for i in [1, 2, 3, 5] {
                    later.get_for_update(table, &key(i)).await.unwrap();
                }
                later.commit().await.unwrap();
                assert_eq!(
                    h.in_table(table).get(&key(1)).await.unwrap().as_deref(),
                    Some(&b"v1"[..])
                );
                assert_eq!(
                    h.in_table(table).get(&key(2)).await.unwrap().as_deref(),
                    Some(&b"v2"[..])
                );
            }
            let stats = h.txn_stats();
            assert_eq!((stats.aborts, stats.commits, stats.conflicts), (2, 2, 0));
        })
        .unwrap();
}

#[test]
fn with_a_log_a_commit_is_one_record_and_survives_a_crash() {
    let d = dir("durable");
    let mut db = LocalDb::open(&d, opts(64, Durability::Fdatasync)).unwrap();
    let table = db.create_table("t").unwrap();
    let h = db.handle();
    let records = |db: &LocalDb| db.stats().wal.unwrap().records;
    let before = records(&db);
    db.runtime()
        .block_on(async move {
            let mut t = h.begin();
            for i in 0..20 {
                t.put(table, &key(i), b"committed").await.unwrap();
            }
            t.put(TableId::DEFAULT, b"other-table", b"too")
                .await
                .unwrap();
            t.commit().await.unwrap();
            let mut dropped = h.begin();
            dropped.put(table, &key(100), b"never").await.unwrap();
            dropped.delete(table, &key(0)).await.unwrap();
            drop(dropped);
        })
        .unwrap();
    assert_eq!(records(&db) - before, 1, "one transaction, one log record");
    std::mem::forget(db); // a crash: nothing flushed or checkpointed on the way out
    let reopen = Options {
        fresh: false,
        ..opts(64, Durability::Fdatasync)
    };
    let mut db = LocalDb::open(&d, reopen).unwrap();
    for i in 0..20 {
        assert_eq!(
            db.in_table(table).get(&key(i)).unwrap().as_deref(),
            Some(&b"committed"[..])
        );
    }
    assert_eq!(
        db.get(b"other-table").unwrap().as_deref(),
        Some(&b"too"[..])
    );
    assert_eq!(db.in_table(table).get(&key(100)).unwrap(), None);
    assert!(db.verify().unwrap().is_ok());
    db.close().unwrap();
}

/// An older transaction wants the key a younger one is committing with a log; returns the
/// order of what happened. With `strict`, the younger holds its locks until its sync.
async fn wait_on_a_commit(
    h: DbHandle,
    io: ringdb_io::Io,
    table: TableId,
    strict: bool,
) -> Vec<&'static str> {
    let ev: Events = Rc::default();
    let mut older = h.begin();
    let mut younger = h.begin();
    if strict {
        younger.hold_locks_until_durable();
    }
    younger.put(table, &key(3), b"committed").await.unwrap();
    let ev2 = ev.clone();
    let reader = io.spawn(async move {
        // Older: it waits for the younger's lock instead of dying.
        let seen = older.get_for_update(table, &key(3)).await.unwrap();
        ev2.borrow_mut().push("older granted");
        assert_eq!(seen.as_deref(), Some(&b"committed"[..]));
        // It wrote nothing: its commit waits until what it read is durable.
        older.commit().await.unwrap();
        ev2.borrow_mut().push("older committed");
    });
    yield_rounds(5).await;
    younger.commit().await.unwrap();
    ev.borrow_mut().push("younger committed");
    reader.await;
    let order = ev.borrow().clone();
    order
}

#[test]
fn with_a_log_locks_go_before_the_sync_and_a_reader_waits_for_it() {
    let d = dir("early-release");
    let mut db = LocalDb::open(&d, opts(64, Durability::Fdatasync)).unwrap();
    let table = db.create_table("t").unwrap();
    let h = db.handle();
    let io = db.runtime().io();
    let early = db
        .runtime()
        .block_on(wait_on_a_commit(h.clone(), io.clone(), table, false))
        .unwrap();
    // The older transaction has the key while the younger's commit still waits for its sync,
    // and its own commit returns only once that sync is done.
    assert_eq!(
        early,
        ["older granted", "younger committed", "older committed"]
    );
    let strict = db
        .runtime()
        .block_on(wait_on_a_commit(h.clone(), io, table, true))
        .unwrap();
    assert_eq!(
        strict,
        ["younger committed", "older granted", "older committed"]
    );
    let stats = h.txn_stats();
    assert_eq!(
        (stats.commits, stats.conflicts, stats.locks_held),
        (4, 0, 0)
    );
    db.close().unwrap();
}

#[test]
fn read_committed_holds_read_locks_only_for_the_read() {
    let (mut db, table) = small_db("read-committed", 10);
    let h = db.handle();
    db.runtime()
        .block_on(async move {
            let mut reader = h.begin_with(Isolation::ReadCommitted, None);
            let first = reader.get(table, &key(4)).await.unwrap();
            let scanned = reader
                .scan(
                    table,
                    Bound::Unbounded,
                    Bound::Unbounded,
                    Direction::Forward,
                    5,
                )
                .await
                .unwrap();
            assert_eq!(scanned.len(), 5);
            // Its read and scan locks are gone already: a younger writer neither waits nor
            // dies (under serializable it would die against the older reader's locks).
            assert_eq!(h.txn_stats().locks_held, 0);
            let mut writer = h.begin();
            assert!(reader.timestamp() < writer.timestamp());
            writer.put(table, &key(4), b"changed").await.unwrap();
            writer.put(table, &key(0), b"changed too").await.unwrap();
            writer.commit().await.unwrap();
            // Not repeatable: the second read sees the committed change.
            let second = reader.get(table, &key(4)).await.unwrap();
            assert_ne!(first, second);
            assert_eq!(second.as_deref(), Some(&b"changed"[..]));
            // Its own writes still lock to the end.
            reader.put(table, &key(5), b"mine").await.unwrap();
            assert_eq!(h.txn_stats().locks_held, 1);
            reader.commit().await.unwrap();
            let stats = h.txn_stats();
            assert_eq!((stats.conflicts, stats.waits, stats.locks_held), (0, 0, 0));

            // (Under serializable the same writer would die against the older reader's shared
            // lock: `a_younger_transaction_dies_and_an_older_one_waits`.)
        })
        .unwrap();
}

#[test]
fn a_read_committed_transaction_holding_no_lock_waits_even_for_an_older_one() {
    let (mut db, table) = small_db("holds-nothing", 10);
    let h = db.handle();
    let io = db.runtime().io();
    let events: Events = Rc::default();
    let ev = events.clone();
    db.runtime()
        .block_on(async move {
            let mut older = h.begin();
            let mut younger = h.begin_with(Isolation::ReadCommitted, None);
            older.put(table, &key(1), b"older").await.unwrap();
            let ev2 = ev.clone();
            let waits = io.spawn(async move {
                // It holds nothing, so nobody can be waiting for it and its wait closes no
                // cycle. It waits rather than dies, and reads the committed value.
                let seen = younger.get(table, &key(1)).await.unwrap();
                ev2.borrow_mut().push("younger got the key");
                assert_eq!(seen.as_deref(), Some(&b"older"[..]));
                younger.commit().await.unwrap();
            });
            yield_rounds(5).await;
            ev.borrow_mut().push("older commits");
            older.commit().await.unwrap();
            waits.await;
            let stats = h.txn_stats();
            assert_eq!((stats.conflicts, stats.waits, stats.commits), (0, 1, 2));
        })
        .unwrap();
    assert_eq!(*events.borrow(), ["older commits", "younger got the key"]);
}
