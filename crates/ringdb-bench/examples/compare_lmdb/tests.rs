//! The comparison's own checks, run by `cargo test -p ringdb-bench` (the example is declared
//! with `test = true`): both stores hold and return the same values, a round runs on each, and
//! a damaged value fails the checks that guard the figures.

use crate::dataset::Dataset;
use crate::error::{CompareError, Store};
use crate::lmdb_side::{LmdbEnv, LmdbStore};
use crate::ringdb_side::RingdbStore;
use std::path::PathBuf;
use std::time::Duration;

const DATA: Dataset = Dataset {
    records: 1000,
    value_size: 128,
};
const MEMORY_BYTES: u64 = 16 << 20;
const TASKS: usize = 16;
const ROUND: Duration = Duration::from_millis(50);

/// A fresh folder for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path =
            std::env::temp_dir().join(format!("ringdb-compare-lmdb-{}-{name}", std::process::id()));
        crate::fresh_folder(&path).expect("a scratch folder");
        Scratch(path)
    }

    fn sub(&self, name: &str) -> PathBuf {
        crate::fresh_folder(&self.0.join(name)).expect("a scratch subfolder")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tls_env(scratch: &Scratch) -> heed::Env<heed::WithTls> {
    match LmdbEnv::open(&scratch.sub("lmdb"), MEMORY_BYTES, false).expect("LMDB opens") {
        LmdbEnv::Tls(env) => env,
        LmdbEnv::NoTls(_) => panic!("asked for thread-local reader slots"),
    }
}

#[test]
fn both_stores_return_the_loaded_values_and_run_a_round() {
    let scratch = Scratch::new("same-values");
    let mut ringdb = RingdbStore::create(&scratch.sub("ringdb"), DATA, MEMORY_BYTES, TASKS)
        .expect("ringdb loads");
    let env = tls_env(&scratch);
    let lmdb = LmdbStore::create(&env, DATA).expect("LMDB loads");
    let mut expected = Vec::new();
    for key in 0..DATA.records {
        DATA.value(key, &mut expected);
        let from_ringdb = ringdb.get(key).expect("ringdb reads");
        assert_eq!(
            from_ringdb.as_deref(),
            Some(&expected[..]),
            "ringdb, key {key}"
        );
        assert_eq!(lmdb.get(key).expect("LMDB reads"), from_ringdb, "key {key}");
    }
    assert_eq!(ringdb.get(DATA.records).expect("ringdb reads"), None);
    assert_eq!(lmdb.get(DATA.records).expect("LMDB reads"), None);
    ringdb.verify_all().expect("ringdb holds every value");
    lmdb.verify_all().expect("LMDB holds every value");

    let r = ringdb.round(7, ROUND).expect("a ringdb round");
    assert!(r.ops > 0 && r.values_checked >= 1, "{r:?}");
    assert!(r.cpu_secs > 0.0 && r.cycles_per_op > 0.0, "{r:?}");
    assert_eq!(r.page_reads_per_op, 0.0, "the data is in the pool");
    for gets_per_txn in [1, 100] {
        let l = lmdb
            .round(7, TASKS, ROUND, gets_per_txn)
            .expect("an LMDB round");
        assert!(l.ops >= gets_per_txn && l.values_checked >= 1, "{l:?}");
        assert!(l.cpu_secs > 0.0 && l.cycles_per_op > 0.0, "{l:?}");
    }
    ringdb.close().expect("ringdb closes");
}

#[test]
fn lmdb_without_thread_local_slots_runs_the_same_round() {
    let scratch = Scratch::new("no-tls");
    let LmdbEnv::NoTls(env) =
        LmdbEnv::open(&scratch.sub("lmdb"), MEMORY_BYTES, true).expect("LMDB opens")
    else {
        panic!("asked for MDB_NOTLS");
    };
    let lmdb = LmdbStore::create(&env, DATA).expect("LMDB loads");
    lmdb.verify_all().expect("LMDB holds every value");
    let l = lmdb.round(3, TASKS, ROUND, 1).expect("an LMDB round");
    assert!(l.ops > 0 && l.values_checked >= 1, "{l:?}");
}

/// The first key of seed 11's stream: a round checks the value of its first read.
fn first_key_read(seed: u64) -> u64 {
    crate::error::read_key(DATA.read_stream(seed, TASKS).next_op()).expect("a read")
}

fn assert_mismatch(result: Result<impl std::fmt::Debug, CompareError>, store: Store, key: u64) {
    match result {
        Err(CompareError::Mismatch {
            store: s, key: k, ..
        }) => {
            assert_eq!((s, k), (store, key));
        }
        other => panic!("expected a mismatch of {store} key {key}, got {other:?}"),
    }
}

#[test]
fn a_damaged_value_fails_the_load_check_and_the_round() {
    let scratch = Scratch::new("damaged");
    let key = first_key_read(11);
    let wrong = vec![0xA5u8; DATA.value_size];
    let mut ringdb = RingdbStore::create(&scratch.sub("ringdb"), DATA, MEMORY_BYTES, TASKS)
        .expect("ringdb loads");
    ringdb.put(key, &wrong).expect("ringdb writes");
    assert_mismatch(ringdb.verify_all(), Store::Ringdb, key);
    assert_mismatch(ringdb.round(11, ROUND), Store::Ringdb, key);
    ringdb.close().expect("ringdb closes");

    let env = tls_env(&scratch);
    let lmdb = LmdbStore::create(&env, DATA).expect("LMDB loads");
    lmdb.put(key, &wrong).expect("LMDB writes");
    assert_mismatch(lmdb.verify_all(), Store::Lmdb, key);
    assert_mismatch(lmdb.round(11, TASKS, ROUND, 1), Store::Lmdb, key);
    assert_mismatch(lmdb.round(11, TASKS, ROUND, 100), Store::Lmdb, key);
}
