//! The B+tree against `BTreeMap` over random operation sequences, through the public `LocalDb`
//! API: with a pool of a few frames (constant eviction), with many interleaved tasks, for
//! every engine.

use proptest::prelude::*;
use ringdb::{LocalDb, Options};
use ringdb_io::{Batching, EngineKind, IoConfig};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::rc::Rc;

#[derive(Clone, Debug)]
enum Op {
    Insert(u16, u16),
    Remove(u16),
    Get(u16),
    Range(u16, u8),
}

fn key(k: u16) -> Vec<u8> {
    // Variable lengths: 2..=41 bytes, ordered like the number.
    let mut v = k.to_be_bytes().to_vec();
    v.extend(std::iter::repeat_n(b'k', (k % 40) as usize));
    v
}

fn value(k: u16, len: u16) -> Vec<u8> {
    (0..len as usize).map(|i| (k as usize + i) as u8).collect()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u16..2000, 0u16..600).prop_map(|(k, l)| Op::Insert(k, l)),
        3 => (0u16..2000).prop_map(Op::Remove),
        2 => (0u16..2000).prop_map(Op::Get),
        1 => (0u16..2000, 1u8..50).prop_map(|(k, n)| Op::Range(k, n)),
    ]
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-tree-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts(engine: EngineKind, pool: usize, fixed: bool) -> Options {
    Options {
        pool_pages: pool,
        io: IoConfig {
            queue_depth: 32,
            batching: Batching::Adaptive,
            fixed_buffers: fixed && engine.is_uring(),
            ..IoConfig::new(engine)
        },
        // /tmp may be tmpfs; buffered I/O works everywhere.
        direct: false,
        fresh: true,
        ..Options::default()
    }
}

fn check_against_model(db: &mut LocalDb, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let all = db
        .range(Bound::Unbounded, Bound::Unbounded, usize::MAX)
        .unwrap();
    let expect: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all.len(), expect.len(), "scan length");
    assert!(all == expect, "full scan differs from the model");
}

/// One task, the operations in order; the tree's counters before the close.
fn sequential(engine: EngineKind, pool: usize, ops: &[Op], name: &str) -> ringdb::TreeStats {
    let d = dir(name);
    let mut db = LocalDb::open(&d, opts(engine, pool, true)).unwrap();
    let mut model = BTreeMap::new();
    for op in ops {
        match *op {
            Op::Insert(k, l) => {
                let existed = db.insert(&key(k), &value(k, l)).unwrap();
                assert_eq!(existed, model.insert(key(k), value(k, l)).is_some());
            }
            Op::Remove(k) => {
                assert_eq!(db.remove(&key(k)).unwrap(), model.remove(&key(k)).is_some());
            }
            Op::Get(k) => assert_eq!(db.get(&key(k)).unwrap(), model.get(&key(k)).cloned()),
            Op::Range(k, n) => {
                let got = db
                    .range(Bound::Included(&key(k)), Bound::Unbounded, n as usize)
                    .unwrap();
                let want: Vec<_> = model
                    .range(key(k)..)
                    .take(n as usize)
                    .map(|(a, b)| (a.clone(), b.clone()))
                    .collect();
                assert_eq!(got, want);
            }
        }
    }
    check_against_model(&mut db, &model);
    let stats = db.stats().tree;
    db.close().unwrap();
    // Reopen: everything is on disk.
    let mut o = opts(engine, pool, false);
    o.fresh = false;
    let mut db = LocalDb::open(&d, o).unwrap();
    check_against_model(&mut db, &model);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
    stats
}

/// The inserts of even keys preceded by a get of their key (a read-modify-write): such an
/// insert may start at the leaf the get found (`tree/hint.rs`), while other operations split
/// and merge leaves. The others meet the hints older gets left, which must not mislead them.
fn read_before_write(ops: Vec<Op>) -> Vec<Op> {
    ops.into_iter()
        .flat_map(|op| match op {
            Op::Insert(k, l) if k % 2 == 0 => vec![Op::Get(k), Op::Insert(k, l)],
            other => vec![other],
        })
        .collect()
}

/// Every get repeated at once: the second finds its leaf from the first's hint
/// (`tree/hint.rs`), between inserts and removes that split and merge leaves, so that a hint
/// may name a leaf whose range no longer holds the key (absent keys included).
fn reads_twice(ops: Vec<Op>) -> Vec<Op> {
    ops.into_iter()
        .flat_map(|op| match op {
            Op::Get(k) => vec![Op::Get(k), Op::Get(k)],
            other => vec![other],
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn matches_btreemap_with_a_tiny_pool(ops in prop::collection::vec(op(), 1..1500)) {
        sequential(EngineKind::Uring, 16, &ops, "tiny");
    }

    #[test]
    fn matches_btreemap_with_a_roomy_pool(ops in prop::collection::vec(op(), 1..1500)) {
        sequential(EngineKind::Uring, 1024, &ops, "roomy");
    }

    #[test]
    fn writes_after_reads_start_at_the_hinted_leaf(ops in prop::collection::vec(op(), 200..1500)) {
        let ops = read_before_write(ops);
        let inserts = ops.iter().filter(|op| matches!(op, Op::Insert(k, _) if k % 2 == 0)).count() as u64;
        let roomy = sequential(EngineKind::Uring, 1024, &ops, "hints");
        // Most inserts fit their leaf and start there; those that split began at the root.
        prop_assert!(roomy.leaf_hints > inserts / 4, "{} of {} inserts hinted", roomy.leaf_hints, inserts);
        sequential(EngineKind::Uring, 16, &ops, "hints-tiny");
    }

    #[test]
    fn reads_after_reads_start_at_the_hinted_leaf(ops in prop::collection::vec(op(), 200..1500)) {
        let ops = reads_twice(ops);
        let gets = ops.iter().filter(|op| matches!(op, Op::Get(_))).count() as u64;
        let roomy = sequential(EngineKind::Uring, 1024, &ops, "read-hints");
        // The repeated half of the gets finds its hint (unless the key lies past its leaf's
        // last key, where only a descent can tell which leaf holds it).
        prop_assert!(roomy.leaf_hints > gets / 8, "{} of {} gets hinted", roomy.leaf_hints, gets);
        sequential(EngineKind::Uring, 16, &ops, "read-hints-tiny");
    }
}

#[test]
fn every_engine_agrees_with_the_model() {
    let ops: Vec<Op> = (0..3000u32)
        .map(|i| {
            let k = ((i * 7919) % 1500) as u16;
            match i % 7 {
                0..=3 => Op::Insert(k, (i % 300) as u16),
                4 => Op::Remove(k / 2),
                5 => Op::Get(k),
                _ => Op::Range(k, 20),
            }
        })
        .collect();
    for engine in [
        EngineKind::Posix,
        EngineKind::Libaio,
        EngineKind::UringSync,
        EngineKind::Uring,
    ] {
        sequential(engine, 16, &ops, engine.name());
    }
}

/// Many tasks interleave inserts and removes of disjoint key sets on a tiny pool (each
/// fault parks a task, others change the tree meanwhile, and the task resumes at the page it
/// waited for only if no split or merge happened); the final contents must equal the model's,
/// for every engine.
#[test]
fn interleaved_tasks_on_a_tiny_pool() {
    for engine in [EngineKind::Posix, EngineKind::Libaio, EngineKind::Uring] {
        let d = dir(&format!("tasks-{}", engine.name()));
        let mut db = LocalDb::open(&d, opts(engine, 24, true)).unwrap();
        let model = Rc::new(RefCell::new(BTreeMap::new()));
        let tasks = 64u16;
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let h = db.handle();
                let model = model.clone();
                db.runtime().spawn(async move {
                    for i in 0..60u16 {
                        let k = i * tasks + t;
                        let v = value(k, 50 + (k % 200));
                        h.insert(&key(k), &v).await.unwrap();
                        model.borrow_mut().insert(key(k), v);
                        if i % 3 == 2 {
                            let gone = (i - 1) * tasks + t;
                            assert!(h.remove(&key(gone)).await.unwrap());
                            model.borrow_mut().remove(&key(gone));
                        }
                        let probe = (i / 2) * tasks + t;
                        let got = h.get(&key(probe)).await.unwrap();
                        assert_eq!(got, model.borrow().get(&key(probe)).cloned());
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
        let s = db.stats();
        assert!(
            s.pool.reads > 0 && s.pool.evicted > 0,
            "the pool must have evicted: {s:?}"
        );
        assert!(s.tree.restarts > 0, "tasks must have parked and restarted");
        // Both kinds of restart happened: at the page the wait read (the tree kept its shape
        // meanwhile) and at the root (another task split or merged first). A resume across a
        // change of shape would send a task to a stale page: the model check below finds it.
        assert!(
            s.tree.resumes > 0 && s.tree.resumes < s.tree.restarts,
            "restarts must both resume and start over: {:?}",
            s.tree
        );
        check_against_model(&mut db, &model.borrow());
        drop(db);
        let _ = std::fs::remove_dir_all(&d);
    }
}
