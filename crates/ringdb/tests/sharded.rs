//! The sharded, thread-per-core `Db` through its `Send + Sync` API: several threads against a
//! `BTreeMap` model, iterators merged across shards from both ends, tables, batches across
//! shards, reopening (with the wrong shard count too), the blocking API on a shard's thread,
//! and a shard that panics.

use proptest::prelude::*;
use ringdb::{
    Db, Durability, OpenError, Options, ReadError, ShardError, ShardSetupError, WriteBatch,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-sharded-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Options that run anywhere (no O_DIRECT: tmpfs too) with a small pool.
fn options(durability: Durability, pool_pages: usize) -> Options {
    let mut o = Options {
        pool_pages,
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
        .options(options(durability, 256))
        .shards(shards)
        .open()
        .unwrap()
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn collect(
    range: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), ReadError>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    range.map(Result::unwrap).collect()
}

#[test]
fn a_db_is_send_sync_and_clone() {
    fn assert_send_sync_clone<T: Send + Sync + Clone>() {}
    assert_send_sync_clone::<Db>();
    assert_send_sync_clone::<ringdb::Table>();
    fn assert_send<T: Send>() {}
    assert_send::<ringdb::Range>();
}

#[test]
fn threads_write_and_read_and_iterators_merge_in_key_order_from_both_ends() {
    let d = dir("threads");
    let db = open(&d, 3, Durability::Fdatasync);
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in (t..2000).step_by(4) {
                    assert!(!db.insert(&key(i), &i.to_le_bytes()).unwrap());
                }
                for i in (t..2000).step_by(12) {
                    assert!(db.remove(&key(i)).unwrap());
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    let model: BTreeMap<Vec<u8>, Vec<u8>> = (0..2000u64)
        .filter(|i| i % 12 >= 4)
        .map(|i| (key(i), i.to_le_bytes().to_vec()))
        .collect();
    let all = collect(db.range::<&[u8], _>(..));
    assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
    let reversed = collect(db.range::<&[u8], _>(..).rev());
    assert_eq!(
        reversed,
        model.clone().into_iter().rev().collect::<Vec<_>>()
    );
    let window = collect(db.range(key(100)..key(900)));
    let expected: Vec<_> = model
        .range(key(100)..key(900))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(window, expected);
    // Both ends at once stop where they meet.
    let mut both = db.range(key(100)..=key(120));
    let mut seen = Vec::new();
    loop {
        match (both.next(), both.next_back()) {
            (None, None) => break,
            (a, b) => seen.extend(a.into_iter().chain(b).map(|p| p.unwrap().0)),
        }
    }
    seen.sort();
    let expected_keys: Vec<_> = model
        .range(key(100)..=key(120))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(seen, expected_keys);
    let values = db
        .multi_get(&[key(5), key(0), key(1999), b"missing".to_vec()])
        .unwrap();
    assert_eq!(
        values,
        vec![
            Some(5u64.to_le_bytes().to_vec()),
            None,
            Some(1999u64.to_le_bytes().to_vec()),
            None
        ]
    );
    assert!(db.verify().unwrap().iter().all(|r| r.is_ok()));
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// A value that tells its key apart (long enough that the data outgrows a small pool).
fn value_of(i: u64) -> Vec<u8> {
    let mut value = i.to_le_bytes().repeat(12);
    value.truncate(90 + (i % 7) as usize);
    value
}

#[test]
fn multi_gets_and_gets_from_threads_agree_with_the_data_when_most_pages_must_be_read() {
    let d = dir("multi-get-faults");
    let db = Db::builder(&d)
        .options(options(Durability::None, 64))
        .shards(2)
        .open()
        .unwrap();
    let records = 12_000u64;
    for chunk in (0..records).collect::<Vec<_>>().chunks(500) {
        let mut batch = WriteBatch::new();
        chunk.iter().for_each(|&i| {
            batch.put(&key(i), &value_of(i));
        });
        db.write(&batch).unwrap();
    }
    let reads_before = db.stats().unwrap().page_reads();
    let readers: Vec<_> = (0..4u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for round in 0..200u64 {
                    // Keys spread over the whole range (most leaves not in the pool), with
                    // absent ones mixed in and a key asked twice.
                    let asked: Vec<u64> = (0..16u64)
                        .map(|j| (round * 7919 + j * 1543 + t * 104_729) % (records + 300))
                        .chain([round % records])
                        .chain([round % records])
                        .collect();
                    let keys: Vec<Vec<u8>> = asked.iter().map(|&i| key(i)).collect();
                    let got = db.multi_get(&keys).unwrap();
                    for (i, value) in asked.iter().zip(got) {
                        assert_eq!(value, (*i < records).then(|| value_of(*i)), "key {i}");
                    }
                    // A single get takes the same two paths: in place, or after a fault.
                    let i = asked[round as usize % asked.len()];
                    let single = db.get(&key(i)).unwrap();
                    assert_eq!(single, (i < records).then(|| value_of(i)), "get {i}");
                }
            })
        })
        .collect();
    readers.into_iter().for_each(|r| r.join().unwrap());
    let read = db.stats().unwrap().page_reads() - reads_before;
    assert!(
        read > 100,
        "the multi-gets should have faulted pages in: {read} read"
    );
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn reopening_keeps_everything_and_another_shard_count_is_refused() {
    let d = dir("reopen");
    let db = open(&d, 2, Durability::Fdatasync);
    for i in 0..500 {
        db.insert(&key(i), b"v").unwrap();
    }
    let users = db.table("users").unwrap();
    users.insert(b"ada", b"lovelace").unwrap();
    db.close().unwrap();
    let refused = Db::builder(&d)
        .options(options(Durability::Fdatasync, 256))
        .shards(3)
        .open();
    match refused {
        Err(OpenError::Shards(ShardSetupError::Count {
            on_disk: 2,
            requested: 3,
            ..
        })) => {}
        Err(e) => panic!("expected a shard count refusal, got {e}"),
        Ok(_) => panic!("expected a shard count refusal"),
    }
    // Without a count: the database's own.
    let db = Db::builder(&d)
        .options(options(Durability::Fdatasync, 256))
        .open()
        .unwrap();
    assert_eq!(db.shard_count(), 2);
    assert_eq!(db.range::<&[u8], _>(..).count(), 500);
    assert_eq!(db.tables().unwrap(), vec!["users".to_string()]);
    assert_eq!(
        db.table("users").unwrap().get(b"ada").unwrap().as_deref(),
        Some(&b"lovelace"[..])
    );
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn batches_across_shards_and_tables_are_whole() {
    let d = dir("batches");
    let db = open(&d, 4, Durability::Fdatasync);
    let orders = db.table("orders").unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..64 {
        batch.put(&key(i), b"x");
        batch.put_in(orders.id(), &key(i), b"o");
    }
    let shards: std::collections::HashSet<_> = (0..64).map(|i| db.shard_of(&key(i))).collect();
    assert_eq!(shards.len(), 4, "the batch spans every shard");
    db.write(&batch).unwrap();
    assert_eq!(db.range::<&[u8], _>(..).count(), 64);
    assert_eq!(orders.range::<&[u8], _>(..).count(), 64);
    let mut delete = WriteBatch::new();
    for i in 0..32 {
        delete.delete(&key(i));
    }
    db.write(&delete).unwrap();
    drop(orders);
    db.close().unwrap();
    let db = open(&d, 4, Durability::Fdatasync);
    assert_eq!(db.range::<&[u8], _>(..).count(), 32);
    assert_eq!(
        db.table("orders").unwrap().range::<&[u8], _>(..).count(),
        64
    );
    // The engine's own table is neither listed nor open to users.
    assert_eq!(db.tables().unwrap(), vec!["orders".to_string()]);
    assert!(db.table("ringdb.system.batches").is_err());
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_task_writes_batches_across_shards_whole_and_durable() {
    let d = dir("batches-async");
    let db = open(&d, 4, Durability::Fdatasync);
    let orders = db.table("orders").unwrap();
    let orders_id = orders.id();
    // From shard 0, the first part's shard (the commit is a task of its own there).
    let written = db
        .run_on(0, move |s| async move {
            let mut batch = WriteBatch::new();
            for i in 0..64 {
                batch.put(&key(i), b"x");
                batch.put_in(orders_id, &key(i), b"o");
            }
            // `after` runs once on each shard the batch writes, on that shard's thread.
            let ran: Arc<Vec<AtomicUsize>> =
                Arc::new((0..4).map(|_| AtomicUsize::new(0)).collect());
            let counted = ran.clone();
            let after = move |shard: usize| {
                let thread = std::thread::current();
                assert_eq!(
                    thread.name(),
                    Some(format!("ringdb-shard-{shard}").as_str())
                );
                counted[shard].fetch_add(1, Ordering::Relaxed);
            };
            s.db().write_async_then(&batch, after).await?;
            let mut one_shard = WriteBatch::new();
            one_shard.delete(&key(0));
            let counted = ran.clone();
            let after = move |shard: usize| {
                counted[shard].fetch_add(10, Ordering::Relaxed);
            };
            s.db().write_async_then(&one_shard, after).await?;
            s.db().write_async(&WriteBatch::new()).await?;
            Ok::<_, ringdb::WriteError>(
                ran.iter()
                    .map(|n| n.load(Ordering::Relaxed))
                    .collect::<Vec<_>>(),
            )
        })
        .unwrap();
    let mut ran = written.unwrap();
    ran[db.shard_of(&key(0))] -= 10;
    assert_eq!(
        ran,
        vec![1, 1, 1, 1],
        "after ran once per part, on its shard"
    );
    let shards: std::collections::HashSet<_> = (0..64).map(|i| db.shard_of(&key(i))).collect();
    assert_eq!(shards.len(), 4, "the batch spans every shard");
    drop(orders);
    db.close().unwrap();
    let db = open(&d, 4, Durability::Fdatasync);
    assert_eq!(db.range::<&[u8], _>(..).count(), 63);
    assert_eq!(
        db.table("orders").unwrap().range::<&[u8], _>(..).count(),
        64
    );
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_blocking_api_on_a_shard_thread_is_refused_and_tasks_use_the_async_one() {
    let d = dir("on-shard");
    let db = open(&d, 2, Durability::Off);
    db.insert(b"a", b"1").unwrap();
    let other_shard_key = (0..100u64)
        .map(key)
        .find(|k| db.shard_of(k) != db.shard_of(b"a"))
        .unwrap();
    db.insert(&other_shard_key, b"2").unwrap();
    let shard = db.shard_of(b"a");
    let other = other_shard_key.clone();
    let (refused, local, remote, both) = db
        .run_on(shard, move |s| async move {
            let refused = s.db().get(b"a");
            let local = s.db().get_async(b"a").await.unwrap();
            let remote = s.db().get_async(&other).await.unwrap();
            let keys = [b"a".to_vec(), other.clone(), b"missing".to_vec()];
            let both = s.db().multi_get_async(&keys).await.unwrap();
            (refused.map_err(|e| e.to_string()), local, remote, both)
        })
        .unwrap();
    assert_eq!(both, vec![Some(b"1".to_vec()), Some(b"2".to_vec()), None]);
    assert!(
        refused.unwrap_err().contains("shard"),
        "a blocking call on a shard is refused"
    );
    assert_eq!(local.as_deref(), Some(&b"1"[..]));
    assert_eq!(remote.as_deref(), Some(&b"2"[..]));
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_shard_that_panics_is_down_and_the_others_keep_serving() {
    let d = dir("panic");
    let db = open(&d, 2, Durability::Fdatasync);
    let keys: Vec<_> = (0..50).map(key).collect();
    for k in &keys {
        db.insert(k, b"v").unwrap();
    }
    let lost = db.run_on(0, |_| async { panic!("a bug in a task") });
    assert!(
        matches!(lost, Err(ShardError::Down { shard: 0, .. })),
        "{lost:?}"
    );
    for k in &keys {
        match db.get(k) {
            Ok(v) => assert_eq!(db.shard_of(k), 1, "{v:?}"),
            Err(ReadError::Shard(ShardError::Down {
                shard: 0, reason, ..
            })) => {
                assert!(reason.contains("a bug in a task"), "{reason}");
            }
            Err(e) => panic!("{e}"),
        }
    }
    drop(db);
    // Nothing acknowledged is lost: the panicked shard's log has it all.
    let db = open(&d, 2, Durability::Fdatasync);
    for k in &keys {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&b"v"[..]));
    }
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// A caller waiting for a task of a shard when another task there panics: the waiting task
/// is leaked with the shard (never dropped, so its reply never goes), and the caller must
/// learn the shard is down rather than wait forever.
#[test]
fn a_caller_waiting_on_a_shard_that_panics_meanwhile_gets_down() {
    let d = dir("panic-waiting");
    let db = open(&d, 2, Durability::Off);
    let waiter = {
        let db = db.clone();
        std::thread::spawn(move || {
            db.run_on(0, |shard| async move {
                // Waits for a key nobody writes: until the shard dies under it.
                loop {
                    ringdb_io::yield_now().await;
                    if shard.local().get(b"never").await.ok().flatten().is_some() {
                        return;
                    }
                }
            })
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    let lost = db.run_on(0, |_| async { panic!("a bug in another task") });
    assert!(
        matches!(lost, Err(ShardError::Down { shard: 0, .. })),
        "{lost:?}"
    );
    let waited = waiter.join().expect("the waiting thread returns");
    assert!(
        matches!(waited, Err(ShardError::Down { shard: 0, .. })),
        "{waited:?}"
    );
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_iterator_keeps_the_database_open_after_every_handle_is_dropped() {
    let d = dir("iter-alive");
    let db = open(&d, 2, Durability::Off);
    for i in 0..300 {
        db.insert(&key(i), b"v").unwrap();
    }
    let mut range = db.range::<&[u8], _>(..);
    drop(db);
    assert_eq!(range.next().unwrap().unwrap().0, key(0));
    assert_eq!(range.count(), 299);
    let _ = std::fs::remove_dir_all(&d);
}

/// The last handle can go away on a shard's thread (a task kept a `Db` clone): the close it
/// starts there must not wait for that very thread.
#[test]
fn the_last_handle_dropped_on_a_shard_closes_without_deadlock() {
    let d = dir("last-on-shard");
    let db = open(&d, 2, Durability::Fdatasync);
    db.insert(b"kept", b"v").unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (dropped_tx, dropped_rx) = std::sync::mpsc::channel::<()>();
    db.run_on(0, move |shard| async move {
        let shard = std::rc::Rc::new(shard);
        let kept = shard.clone();
        drop(shard.spawn(async move {
            // Bounded: wait (yielding) until the test dropped its handle, at most 5 s.
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while dropped_rx.try_recv().is_err() && std::time::Instant::now() < until {
                ringdb_io::yield_now().await;
            }
            drop(kept); // the last `Db` clone: its close runs here, on shard 0's thread
            done_tx.send(()).unwrap();
        }));
    })
    .unwrap();
    drop(db);
    dropped_tx.send(()).unwrap();
    done_rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the close on the shard's thread returned");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let db = open(&d, 2, Durability::Fdatasync);
    assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_closed_database_refuses_every_handle_and_a_file_holds_one_shard() {
    let d = dir("closed");
    let db = open(&d, 2, Durability::Off);
    let other = db.clone();
    db.close().unwrap();
    assert!(matches!(
        other.get(b"k"),
        Err(ReadError::Shard(ShardError::Closed))
    ));
    assert!(matches!(
        other.insert(b"k", b"v"),
        Err(ringdb::WriteError::Shard(ShardError::Closed))
    ));
    drop(other);
    let file = d.join("one-file.db");
    let refused = Db::builder(&file)
        .options(options(Durability::Off, 64))
        .shards(2)
        .open();
    assert!(
        matches!(
            refused,
            Err(OpenError::Shards(ShardSetupError::NeedsDirectory {
                requested: 2,
                ..
            }))
        ),
        "{:?}",
        refused.err()
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[derive(Clone, Debug)]
enum Step {
    Put(u16, u8),
    Delete(u16),
    Batch(Vec<(u16, Option<u8>)>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u16..400, any::<u8>()).prop_map(|(k, v)| Step::Put(k, v)),
        2 => (0u16..400).prop_map(Step::Delete),
        1 => prop::collection::vec((0u16..400, prop::option::of(any::<u8>())), 1..12).prop_map(Step::Batch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Several threads apply their own steps (on disjoint key sets) through the shared API;
    /// the merged state, read back forward and backward, is the model's.
    #[test]
    fn threads_against_a_btreemap(steps in prop::collection::vec(prop::collection::vec(step(), 1..60), 3)) {
        let d = dir("prop");
        let db = open(&d, 3, Durability::None);
        let handles: Vec<_> = steps.iter().cloned().enumerate().map(|(t, steps)| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut model = BTreeMap::new();
                let k = |i: u16| format!("t{t}-{i:04}").into_bytes();
                for s in steps {
                    match s {
                        Step::Put(i, v) => { db.insert(&k(i), &[v]).unwrap(); model.insert(k(i), vec![v]); }
                        Step::Delete(i) => { db.remove(&k(i)).unwrap(); model.remove(&k(i)); }
                        Step::Batch(ops) => {
                            let mut b = WriteBatch::new();
                            for (i, v) in ops {
                                match v {
                                    Some(v) => { b.put(&k(i), &[v]); model.insert(k(i), vec![v]); }
                                    None => { b.delete(&k(i)); model.remove(&k(i)); }
                                }
                            }
                            db.write(&b).unwrap();
                        }
                    }
                }
                model
            })
        }).collect();
        let mut model = BTreeMap::new();
        for h in handles { model.extend(h.join().unwrap()); }
        let forward = collect(db.range::<&[u8], _>(..));
        prop_assert_eq!(&forward, &model.clone().into_iter().collect::<Vec<_>>());
        let backward = collect(db.range::<&[u8], _>(..).rev());
        prop_assert_eq!(&backward, &model.clone().into_iter().rev().collect::<Vec<_>>());
        let prefix = collect(db.prefix(b"t1-"));
        prop_assert_eq!(prefix.len(), model.keys().filter(|k| k.starts_with(b"t1-")).count());
        db.close().unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// A task on shard 1 awaiting a reply from shard 0 when shard 0 panics: its shard's other
/// tasks leak, the reply's sender with them, so only the inbox can tell the task.
#[test]
fn a_task_awaiting_a_shard_that_panics_meanwhile_gets_down() {
    let d = dir("panic-awaited");
    let db = open(&d, 2, Durability::Off);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let waiter = {
        let db = db.clone();
        std::thread::spawn(move || {
            let got = db.run_on(1, |shard| async move {
                shard
                    .db()
                    .call_on_async(0, |h| async move {
                        // Waits for a key nobody writes: until the shard dies under it.
                        loop {
                            ringdb_io::yield_now().await;
                            if h.get(b"never").await.ok().flatten().is_some() {
                                return;
                            }
                        }
                    })
                    .await
            });
            let _ = done_tx.send(());
            got
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    let lost = db.run_on(0, |_| async { panic!("a bug in another task") });
    assert!(
        matches!(lost, Err(ShardError::Down { shard: 0, .. })),
        "{lost:?}"
    );
    // Bounded: without the fix the task on shard 1 waits forever.
    done_rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the task on shard 1 learns that shard 0 is down");
    let waited = waiter.join().expect("the waiting thread returns");
    assert!(
        matches!(waited, Ok(Err(ShardError::Down { shard: 0, .. }))),
        "{waited:?}"
    );
    // Shard 1 still serves.
    let on_shard_1 = (0..).map(key).find(|k| db.shard_of(k) == 1).unwrap();
    db.insert(&on_shard_1, b"v")
        .unwrap_or_else(|e| panic!("{e}"));
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

/// A transaction with parts on two shards, its writes logged as one (`Db::log_across`), cut
/// after the commit point with its home part committed and the other part never (it aborts,
/// as a crash before its commit would leave it): the reopen applies that part from the batch
/// log, so the transaction is whole.
#[test]
fn a_transaction_across_shards_cut_before_a_part_commits_is_whole_after_reopen() {
    let d = dir("across");
    let db = open(&d, 2, Durability::Fdatasync);
    let on = |shard: usize| {
        (0..1000)
            .map(key)
            .find(|k| db.shard_of(k) == shard)
            .expect("a key of each shard")
    };
    let (home_key, part_key) = (on(0), on(1));
    let (h0, h1) = (home_key.clone(), part_key.clone());
    db.run_on(0, move |shard| async move {
        let db = shard.db().clone();
        let timestamp = ringdb::TxnTimestamp::from_counter(1);
        let mut home = shard
            .local()
            .begin_with(ringdb::Isolation::Serializable, Some(timestamp));
        home.put(ringdb::TableId::DEFAULT, &h0, b"home")
            .await
            .unwrap();
        let part_writes = db
            .call_on_async(1, move |h| async move {
                let mut part = h.begin_with(ringdb::Isolation::Serializable, Some(timestamp));
                part.put(ringdb::TableId::DEFAULT, &h1, b"part")
                    .await
                    .unwrap();
                let writes = part.pending_writes();
                part.abort();
                writes
            })
            .await
            .unwrap();
        let logged = [(0, home.pending_writes()), (1, part_writes)];
        let commit = db.log_across(&logged).unwrap();
        home.commit_across(&commit).await.unwrap();
        // No `across_done`: the commit stays in flight, as after a crash.
    })
    .unwrap();
    assert_eq!(db.get(&home_key).unwrap().as_deref(), Some(&b"home"[..]));
    assert_eq!(db.get(&part_key).unwrap(), None, "the part never committed");
    drop(db);
    let db = open(&d, 2, Durability::Fdatasync);
    assert_eq!(db.get(&home_key).unwrap().as_deref(), Some(&b"home"[..]));
    assert_eq!(
        db.get(&part_key).unwrap().as_deref(),
        Some(&b"part"[..]),
        "the missing part is applied from the batch log"
    );
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}
