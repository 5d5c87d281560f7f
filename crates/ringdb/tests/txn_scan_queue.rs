//! Scans against inserts into their range:
//! - a scan waiting for its range lock is seen by later requests: a younger transaction that
//!   asks for an exclusive lock on another key inside that range dies (wait-die) instead of
//!   taking the key and making the older scan wait again (a stream of younger inserts could
//!   otherwise keep an older scan waiting indefinitely);
//! - a short scan locks only the part of the range it returns, so it neither waits for nor
//!   kills a writer of a key beyond its limit.

mod txn_common;

use ringdb::{ConflictWith, DbHandle, Direction, TableId, TxnError};
use std::ops::Bound;
use std::rc::Rc;
use txn_common::{key, small_db, yield_rounds, Events};

async fn scenario(h: DbHandle, io: ringdb_io::Io, table: TableId, ev: Events) {
    let mut scanner = h.begin();
    let mut holder = h.begin();
    // The holder (younger than the scanner) has an uncommitted key in the range.
    holder.put(table, &key(5), b"held").await.unwrap();
    let scanner_ts = scanner.timestamp();
    let ev_scan = ev.clone();
    let scan = io.spawn(async move {
        // Older than the holder: it waits for it.
        let all = scanner
            .scan(
                table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
                100,
            )
            .await
            .unwrap();
        ev_scan.borrow_mut().push("scan granted");
        scanner.commit().await.unwrap();
        all.len()
    });
    yield_rounds(5).await;
    // A transaction younger than the waiting scan asks for another key in its range.
    let mut late = h.begin();
    assert!(scanner_ts < late.timestamp());
    let ev_late = ev.clone();
    let late_insert = io.spawn(async move {
        let result = late.put(table, &key(7), b"late").await;
        ev_late.borrow_mut().push("late insert refused");
        let e = result.expect_err("the younger insert gives way to the queued scan");
        let TxnError::Conflict {
            holder: older,
            with,
            ..
        } = e
        else {
            panic!("not a conflict: {e}");
        };
        assert_eq!((older, with), (scanner_ts, ConflictWith::Queued));
    });
    yield_rounds(5).await;
    ev.borrow_mut().push("holder commits");
    holder.commit().await.unwrap();
    let scanned = scan.await;
    late_insert.await;
    // The scan saw the table as the holder left it: the late insert never happened.
    assert_eq!(scanned, 10);
}

#[test]
fn a_younger_insert_into_a_range_a_scan_waits_for_gives_way() {
    let (mut db, table) = small_db("scan-queue", 10);
    let h = db.handle();
    let events: Events = Rc::default();
    let io = db.runtime().io();
    let step = scenario(h.clone(), io, table, events.clone());
    db.runtime().block_on(step).unwrap();
    // The refused insert reports once the lock the scan waits on changes.
    assert_eq!(
        *events.borrow(),
        ["holder commits", "scan granted", "late insert refused"]
    );
    assert_eq!(
        db.in_table(table).get(&key(7)).unwrap().as_deref(),
        Some(&b"v7"[..])
    );
    assert_eq!(h.txn_stats().locks_held, 0);
}

#[test]
fn a_short_scan_locks_only_up_to_its_last_pair() {
    let (mut db, table) = small_db("short-scan", 10);
    let h = db.handle();
    let io = db.runtime().io();
    db.runtime()
        .block_on(async move {
            let mut scanner = h.begin();
            let mut writer = h.begin();
            // The younger writer holds a key beyond where the scan's limit cuts.
            writer.put(table, &key(8), b"w").await.unwrap();
            // The older scan would wait for it if it locked the whole range first; it
            // returns at once (no wait counted) with the first two pairs.
            let (unbounded, forward) = (Bound::Unbounded, Direction::Forward);
            let first_two = scanner
                .scan(table, unbounded, unbounded, forward, 2)
                .await
                .unwrap();
            let keys: Vec<Vec<u8>> = first_two.into_iter().map(|(k, _)| k).collect();
            assert_eq!(keys, [key(0), key(1)]);
            assert_eq!(h.txn_stats().waits, 0);
            // What it returned is locked: a younger write inside dies (and reports it once
            // the scan's lock is gone).
            let mut late = h.begin();
            let refused = io.spawn(async move {
                let e = late.put(table, &key(1), b"late").await.unwrap_err();
                assert!(e.is_conflict(), "{e}");
            });
            yield_rounds(3).await;
            // Beyond it, the writer goes on and commits.
            writer.put(table, &key(9), b"w").await.unwrap();
            writer.commit().await.unwrap();
            scanner.commit().await.unwrap();
            refused.await;
        })
        .unwrap();
}

/// A short scan first reads without a lock, then locks what it read: when the lock had to
/// wait for a writer that then committed into that part, it reads again and returns the
/// writer's value, not what it read before waiting.
#[test]
fn a_short_scan_that_waited_for_its_lock_returns_what_the_writer_committed() {
    let (mut db, table) = small_db("short-scan-waits", 10);
    let h = db.handle();
    let io = db.runtime().io();
    let scanned = db
        .runtime()
        .block_on(async move {
            let mut scanner = h.begin();
            let mut holder = h.begin();
            // The younger holder has an uncommitted write inside the first two pairs.
            holder.put(table, &key(1), b"held").await.unwrap();
            let scan = io.spawn(async move {
                let (unbounded, forward) = (Bound::Unbounded, Direction::Forward);
                let pairs = scanner.scan(table, unbounded, unbounded, forward, 2).await;
                scanner.commit().await.unwrap();
                pairs.unwrap()
            });
            yield_rounds(5).await;
            holder.commit().await.unwrap();
            let pairs = scan.await;
            assert_eq!(h.txn_stats().waits, 1, "the scan waited for the holder");
            pairs
        })
        .unwrap();
    let values: Vec<&[u8]> = scanned.iter().map(|(_, v)| v.as_slice()).collect();
    assert_eq!(values, [&b"v0"[..], &b"held"[..]]);
}
