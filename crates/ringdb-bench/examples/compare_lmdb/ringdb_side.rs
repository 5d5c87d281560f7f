//! The ringdb side: exactly what `ringdb ycsb --workload c --distribution uniform
//! --durability off` runs with its defaults (engine `uring` with DEFER_TASKRUN, adaptive
//! batching, queue depth = tasks clamped to 8..=256, `O_DIRECT`, 4 KiB pages, no log), on one
//! shard on the calling thread with the tasks on the shard: `ycsb::run` with a `RunSpec` per
//! round. Only the pool size comes from the comparison (it must hold the data).
//!
//! The load is not `ycsb::load`: its tasks write each value at a version made of the task and
//! its count of operations, so which bytes a key holds depends on the schedule, and nothing
//! could check them. This loader writes `value_for(key, 0)` in the same scattered order, one
//! `LocalDb::insert` at a time (the harness's tasks take keys in that order too), so the tree
//! gets the same keys, sizes and insert order, and every value can be checked.
//!
//! The harness counts reads that find nothing (a round with any is an error) but does not
//! hand the values back, so the value check keeps every [`CHECK_EVERY`]th key of the round's
//! stream and reads those again after the round, outside its timing; [`RingdbStore::verify_all`]
//! reads every key once after the load.

use crate::dataset::{Dataset, CHECK_EVERY};
use crate::error::{check_value, read_key, CompareError, Result, Store};
use crate::measurement::Measurement;
use ringdb::{Durability, LocalDb, Options};
use ringdb_bench::ycsb::{self, key_bytes, scattered, RunSpec};
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode};
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Bytes per page (the CLI's default).
const PAGE_BYTES: usize = 4096;

/// A loaded ringdb database and how the rounds run on it.
pub struct RingdbStore {
    db: LocalDb,
    data: Dataset,
    tasks: usize,
    /// Wall seconds the load took.
    pub load_secs: f64,
}

impl RingdbStore {
    /// Creates a fresh database in `dir` with a pool of `pool_bytes` and loads `data` in
    /// scattered order, one insert at a time; refuses data larger than the pool.
    pub fn create(dir: &Path, data: Dataset, pool_bytes: u64, tasks: usize) -> Result<Self> {
        let mut db = LocalDb::open(dir, options(pool_bytes, tasks)).map_err(|source| {
            CompareError::RingdbOpen {
                path: dir.to_path_buf(),
                source,
            }
        })?;
        let start = Instant::now();
        let mut value = Vec::with_capacity(data.value_size);
        for i in 0..data.records {
            let key = scattered(i, data.records);
            data.value(key, &mut value);
            db.insert(&key_bytes(key), &value)?;
        }
        let store = RingdbStore {
            db,
            data,
            tasks,
            load_secs: start.elapsed().as_secs_f64(),
        };
        if store.data_bytes() > pool_bytes {
            return Err(CompareError::DataExceedsMemory {
                store: Store::Ringdb,
                data_bytes: store.data_bytes(),
                memory_bytes: pool_bytes,
            });
        }
        Ok(store)
    }

    /// Bytes of the data file's pages (the meta page included).
    pub fn data_bytes(&self) -> u64 {
        self.db.stats().pages * PAGE_BYTES as u64
    }

    /// The tree's height.
    pub fn height(&self) -> u32 {
        self.db.stats().height
    }

    /// The engine in effect, as `ringdb ycsb` prints it.
    pub fn engine(&self) -> String {
        self.db.stats().io.label()
    }

    /// Reads every loaded key and compares its value with the one loaded.
    pub fn verify_all(&mut self) -> Result<()> {
        let mut expected = Vec::with_capacity(self.data.value_size);
        for key in 0..self.data.records {
            self.check(key, &mut expected)?;
        }
        Ok(())
    }

    /// The value under `key`, as a read returns it (`None`: no such key).
    pub fn get(&mut self, key: u64) -> Result<Option<Vec<u8>>> {
        self.db
            .get(&key_bytes(key))
            .map_err(|source| CompareError::RingdbRead { key, source })
    }

    /// Writes `value` under `key` (for tests that damage a value on purpose).
    #[cfg(test)]
    pub fn put(&mut self, key: u64, value: &[u8]) -> Result<()> {
        self.db.insert(&key_bytes(key), value)?;
        Ok(())
    }

    /// Reads `key` and checks its value; `expected` is scratch space.
    fn check(&mut self, key: u64, expected: &mut Vec<u8>) -> Result<()> {
        let found = self.get(key)?.ok_or(CompareError::Missing {
            store: Store::Ringdb,
            key,
        })?;
        self.data.value(key, expected);
        check_value(Store::Ringdb, key, &found, expected)
    }

    /// One timed round: the read stream of `seed` for `duration` with the store's tasks, then
    /// the check of the sampled keys.
    pub fn round(&mut self, seed: u64, duration: Duration) -> Result<Measurement> {
        let sampled = Rc::new(RefCell::new(Vec::new()));
        let mut stream = self.data.read_stream(seed, self.tasks);
        let keep = sampled.clone();
        let mut drawn = 0u64;
        let spec = RunSpec {
            tasks: self.tasks,
            duration,
            value_size: self.data.value_size,
            max_ops: None,
            progress: false,
            label: "ringdb".into(),
        };
        let report = ycsb::run(&mut self.db, &spec, move |_| {
            let op = stream.next_op();
            if drawn.is_multiple_of(CHECK_EVERY) {
                keep.borrow_mut().push(op);
            }
            drawn += 1;
            Some(op)
        })?;
        if report.misses > 0 {
            return Err(CompareError::Misses {
                store: Store::Ringdb,
                misses: report.misses,
                ops: report.ops,
            });
        }
        let sampled = sampled.take();
        let mut expected = Vec::with_capacity(self.data.value_size);
        for op in &sampled {
            self.check(read_key(*op)?, &mut expected)?;
        }
        let cpu_secs = report.cpu_pct / 100.0 * report.secs;
        let checked = (sampled.len() as u64).min(report.ops);
        let mut m = Measurement::new(report.ops, report.secs, cpu_secs, checked);
        m.page_reads_per_op = report.reads_per_op;
        Ok(m)
    }

    /// Closes the database.
    pub fn close(self) -> Result<()> {
        self.db.close()?;
        Ok(())
    }
}

/// The options `ringdb ycsb` opens a fresh database with under `--durability off`, with a pool
/// of `pool_bytes`.
fn options(pool_bytes: u64, tasks: usize) -> Options {
    Options {
        page_size: PAGE_BYTES,
        pool_pages: (pool_bytes / PAGE_BYTES as u64) as usize,
        io: IoConfig {
            queue_depth: tasks.clamp(8, 256) as u32,
            batching: Batching::Adaptive,
            fixed_buffers: false,
            setup: SetupMode::Defer,
            ..IoConfig::new(EngineKind::Uring)
        },
        fresh: true,
        durability: Durability::Off,
        group_commit: true,
        ..Options::default()
    }
}
