//! Range scans against `BTreeMap`, through `DbHandle::scan`: forward and reverse, random
//! bounds (included, excluded, unbounded) and chunk limits, each scan resumed chunk by chunk
//! until it is exhausted; over trees of height 3 and more on pools far smaller than the data
//! (pages are evicted while scanning), with inserts and deletes between the scans, with
//! read-ahead off and on.

use proptest::prelude::*;
use ringdb::{DbHandle, Direction, LocalDb, Options};
use ringdb_io::{Batching, EngineKind, IoConfig};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Long keys with a long common prefix: separators stay long, inner nodes hold few children,
/// and a few thousand records make a tree of height 3 or 4.
fn key(k: u16) -> Vec<u8> {
    let mut v = vec![b'p'; 150 + (k % 7) as usize];
    v.extend_from_slice(&k.to_be_bytes());
    v
}

fn value(k: u16, generation: u8) -> Vec<u8> {
    (0..60 + (k % 50) as usize)
        .map(|i| (k as usize + i + generation as usize) as u8)
        .collect()
}

/// A bound on a key that may or may not be in the tree (the prefix length varies with it).
#[derive(Clone, Copy, Debug)]
enum Edge {
    Included(u16),
    Excluded(u16),
    Unbounded,
}

impl Edge {
    fn bound(self, buf: &mut Vec<u8>) -> Bound<&[u8]> {
        match self {
            Edge::Included(k) | Edge::Excluded(k) => *buf = key(k),
            Edge::Unbounded => return Bound::Unbounded,
        }
        match self {
            Edge::Included(_) => Bound::Included(buf.as_slice()),
            _ => Bound::Excluded(buf.as_slice()),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Scan {
        start: Edge,
        end: Edge,
        direction: Direction,
        chunk: usize,
    },
    Remove(u16, u16),
    Insert(u16, u16),
}

/// Keys drawn from `0..KEYS` (about 1,000 of them make a tree of height 3).
const KEYS: u16 = 1500;

fn edge() -> impl Strategy<Value = Edge> {
    prop_oneof![
        2 => (0..KEYS + 10).prop_map(Edge::Included),
        2 => (0..KEYS + 10).prop_map(Edge::Excluded),
        1 => Just(Edge::Unbounded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let direction = prop_oneof![Just(Direction::Forward), Just(Direction::Reverse)];
    let chunk = prop_oneof![1usize..4, 4usize..64, 64usize..700];
    prop_oneof![
        6 => (edge(), edge(), direction, chunk).prop_map(|(start, end, direction, chunk)| {
            Op::Scan { start, end, direction, chunk }
        }),
        1 => (0..KEYS, 1u16..400).prop_map(|(k, n)| Op::Remove(k, n)),
        1 => (0..KEYS, 1u16..300).prop_map(|(k, n)| Op::Insert(k, n)),
    ]
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-scan-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn open(name: &str, pool: usize) -> (LocalDb, PathBuf) {
    let d = dir(name);
    let opts = Options {
        pool_pages: pool,
        io: IoConfig {
            queue_depth: 32,
            batching: Batching::Adaptive,
            fixed_buffers: true,
            ..IoConfig::new(EngineKind::Uring)
        },
        // /tmp may be tmpfs; buffered I/O works everywhere.
        direct: false,
        fresh: true,
        ..Options::default()
    };
    (LocalDb::open(&d, opts).unwrap(), d)
}

/// What the model holds within the bounds, in the scan's order.
fn expected(model: &Model, start: Edge, end: Edge, direction: Direction) -> Pairs {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (lo, hi) = (start.bound(&mut a), end.bound(&mut b));
    let inside = |k: &Vec<u8>| {
        let above = match lo {
            Bound::Included(s) => k.as_slice() >= s,
            Bound::Excluded(s) => k.as_slice() > s,
            Bound::Unbounded => true,
        };
        let below = match hi {
            Bound::Included(e) => k.as_slice() <= e,
            Bound::Excluded(e) => k.as_slice() < e,
            Bound::Unbounded => true,
        };
        above && below
    };
    let pairs = model.iter().filter(|(k, _)| inside(k));
    let pairs = pairs.map(|(k, v)| (k.clone(), v.clone()));
    match direction {
        Direction::Forward => pairs.collect(),
        Direction::Reverse => pairs.rev().collect(),
    }
}

/// The whole scan, `chunk` pairs at a time, each chunk resuming after the last key of the one
/// before; checks that no chunk is longer than asked and that only the last is short.
async fn scan_in_chunks(
    h: &DbHandle,
    start: Edge,
    end: Edge,
    direction: Direction,
    chunk: usize,
) -> Pairs {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut lo, mut hi) = (
        start.bound(&mut a).map(<[u8]>::to_vec),
        end.bound(&mut b).map(<[u8]>::to_vec),
    );
    let mut all = Vec::new();
    for _ in 0..=(KEYS as usize * 2) {
        let got = h
            .scan(
                lo.as_ref().map(Vec::as_slice),
                hi.as_ref().map(Vec::as_slice),
                direction,
                chunk,
            )
            .await
            .unwrap();
        assert!(
            got.len() <= chunk,
            "a chunk of {} pairs for a limit of {chunk}",
            got.len()
        );
        let Some((last, _)) = got.last() else {
            return all;
        };
        match direction {
            Direction::Forward => lo = Bound::Excluded(last.clone()),
            Direction::Reverse => hi = Bound::Excluded(last.clone()),
        }
        let short = got.len() < chunk;
        all.extend(got);
        if short {
            return all;
        }
    }
    panic!("the scan did not end");
}

/// Loads `keys`, checks the height, runs `ops`, checks every scan against the model.
fn run(pool: usize, read_ahead: usize, keys: &[u16], ops: &[Op], name: &str) {
    let (mut db, d) = open(name, pool);
    let h = db.handle();
    h.tree().set_read_ahead(read_ahead);
    let mut model = Model::new();
    db.runtime()
        .block_on(async {
            for &k in keys {
                h.insert(&key(k), &value(k, 0)).await.unwrap();
                model.insert(key(k), value(k, 0));
            }
            assert!(
                h.tree().root().height >= 3,
                "height {}",
                h.tree().root().height
            );
            for (generation, op) in ops.iter().enumerate() {
                apply(&h, &mut model, op, generation as u8).await;
            }
        })
        .unwrap();
    let s = db.stats();
    assert!(
        s.pool.evicted > 0 && s.pool.reads > 0,
        "the pool must have evicted: {s:?}"
    );
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

async fn apply(h: &DbHandle, model: &mut Model, op: &Op, generation: u8) {
    match *op {
        Op::Scan {
            start,
            end,
            direction,
            chunk,
        } => {
            let got = scan_in_chunks(h, start, end, direction, chunk).await;
            let want = expected(model, start, end, direction);
            assert_eq!(got.len(), want.len(), "{op:?}: length");
            assert!(got == want, "{op:?}: pairs differ from the model");
        }
        Op::Remove(from, n) => {
            for k in from..from.saturating_add(n).min(KEYS) {
                let existed = h.remove(&key(k)).await.unwrap();
                assert_eq!(existed, model.remove(&key(k)).is_some());
            }
        }
        Op::Insert(from, n) => {
            for k in from..from.saturating_add(n).min(KEYS) {
                h.insert(&key(k), &value(k, generation)).await.unwrap();
                model.insert(key(k), value(k, generation));
            }
        }
    }
}

/// Keys from a seed: about 70% of `0..count`, loaded from the top down.
fn keys_from(seed: u64, count: u16) -> Vec<u16> {
    let mut x = seed | 1;
    let mut keys: Vec<u16> = (0..count)
        .filter(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 10 < 7
        })
        .collect();
    keys.reverse();
    keys
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]

    #[test]
    fn scans_match_the_model_on_a_tiny_pool(seed in any::<u64>(), ops in prop::collection::vec(op(), 1..30)) {
        run(16, ringdb::tree::READ_AHEAD_PAGES, &keys_from(seed, KEYS), &ops, "tiny");
    }

    #[test]
    fn scans_match_the_model_with_batches_of_eight(seed in any::<u64>(), ops in prop::collection::vec(op(), 1..30)) {
        run(64, ringdb::tree::READ_AHEAD_PAGES, &keys_from(seed, KEYS), &ops, "batches");
    }

    #[test]
    fn scans_match_the_model_without_read_ahead(seed in any::<u64>(), ops in prop::collection::vec(op(), 1..30)) {
        run(16, 0, &keys_from(seed, KEYS), &ops, "leaf-at-a-time");
    }
}

/// A fixed run on a tree of height 4: both directions, chunks of several sizes. (On a pool of
/// 16 frames, loading this tree stalls in an insert near height 4, outside the scan: see the
/// report of this change; 32 frames load it.)
#[test]
fn fixed_scans_both_ways_in_chunks() {
    let ops = [
        Op::Scan {
            start: Edge::Unbounded,
            end: Edge::Unbounded,
            direction: Direction::Forward,
            chunk: 100,
        },
        Op::Scan {
            start: Edge::Included(10),
            end: Edge::Excluded(3000),
            direction: Direction::Reverse,
            chunk: 7,
        },
        Op::Remove(500, 300),
        Op::Scan {
            start: Edge::Excluded(400),
            end: Edge::Included(900),
            direction: Direction::Forward,
            chunk: 1,
        },
        Op::Scan {
            start: Edge::Unbounded,
            end: Edge::Unbounded,
            direction: Direction::Reverse,
            chunk: 1000,
        },
    ];
    run(
        32,
        ringdb::tree::READ_AHEAD_PAGES,
        &keys_from(7, 4000),
        &ops,
        "fixed",
    );
}
