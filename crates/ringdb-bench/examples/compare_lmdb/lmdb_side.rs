//! The LMDB side, through heed, on one thread.
//!
//! - Map size = the pool size given to ringdb: LMDB may not hold more data than ringdb's
//!   pool ("same memory"); a load that does not fit is LMDB's `MapFull`, an error.
//! - Flags: `NO_READ_AHEAD`, so a fault maps in the page asked for and not its neighbours (the
//!   mapping then holds what reads touched, as ringdb's pool holds what it read);
//!   `NO_SYNC | NO_META_SYNC`, so the load's commit costs no `fsync`, as ringdb runs without a
//!   log (reads never sync either way). Read transactions use thread-local reader slots by
//!   default (LMDB's default and its cheapest way to begin a read on one thread); with
//!   `no_tls` the slot is tied to the transaction (`MDB_NOTLS`), which is what an application
//!   multiplexing many tasks over one thread needs.
//! - Load: one write transaction, the same scattered order as ringdb's load (not sorted, no
//!   `MDB_APPEND`: pages fill as random inserts fill them, as ringdb's do).
//! - Reads: [`LmdbStore::round`] begins a read transaction every `gets_per_txn` gets (1 is
//!   the comparable mode: each ringdb read is its own operation), and copies each value into
//!   a reused `Vec`, since ringdb hands the bytes back too.

use crate::dataset::{Dataset, CHECK_EVERY};
use crate::error::{check_value, read_key, CompareError, Result, Store};
use crate::measurement::Measurement;
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions};
use ringdb_bench::ycsb::{key_bytes, scattered};
use ringdb_lab::counters::{rdtsc, ticks_to_ns, CpuTime, LatencyHist};
use std::path::Path;
use std::time::{Duration, Instant};

/// How often (in reads) a round looks at the clock.
const CLOCK_EVERY: u64 = 64;

/// An LMDB environment opened for the comparison; `no_tls` ties reader slots to transactions.
pub enum LmdbEnv {
    /// Thread-local reader slots (LMDB's default).
    Tls(Env<heed::WithTls>),
    /// `MDB_NOTLS`.
    NoTls(Env<heed::WithoutTls>),
}

impl LmdbEnv {
    /// Opens a fresh environment in the empty folder `dir` with a map of `map_bytes`.
    pub fn open(dir: &Path, map_bytes: u64, no_tls: bool) -> Result<LmdbEnv> {
        let mut options = EnvOpenOptions::new();
        options.map_size(map_bytes as usize).max_dbs(1);
        // SAFETY: NO_SYNC and NO_META_SYNC only give up durability after a crash (heed marks
        // them unsafe for that reason); nothing here relies on the data surviving one.
        unsafe {
            options.flags(EnvFlags::NO_READ_AHEAD | EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC)
        };
        let env = if no_tls {
            // SAFETY: `dir` is a folder this run made fresh; no other process maps it, and the
            // environment is dropped before the folder is removed.
            LmdbEnv::NoTls(
                unsafe { options.read_txn_without_tls().open(dir) }
                    .map_err(CompareError::lmdb("open"))?,
            )
        } else {
            // SAFETY: as above.
            LmdbEnv::Tls(unsafe { options.open(dir) }.map_err(CompareError::lmdb("open"))?)
        };
        Ok(env)
    }
}

/// A loaded LMDB database in an environment of thread-local (`WithTls`) or transaction-owned
/// (`WithoutTls`) reader slots.
pub struct LmdbStore<'e, T> {
    env: &'e Env<T>,
    database: Database<'e, Bytes, Bytes>,
    data: Dataset,
    /// Wall seconds the load took.
    pub load_secs: f64,
}

impl<'e, T: 'static> LmdbStore<'e, T>
where
    for<'t> heed::RoTxn<'t, T>: std::ops::Deref<Target = heed::RoTxn<'t>>,
{
    /// Creates the unnamed database in `env` and loads `data` into it in one write
    /// transaction.
    pub fn create(env: &'e Env<T>, data: Dataset) -> Result<Self> {
        let start = Instant::now();
        let wtxn = env.write_txn().map_err(CompareError::lmdb("write txn"))?;
        let database = env
            .create_databases_and_commit(wtxn, |opener, wtxn| -> heed::Result<_> {
                let database = opener.create_database::<Bytes, Bytes>(wtxn, None)?;
                let mut value = Vec::with_capacity(data.value_size);
                for i in 0..data.records {
                    let key = scattered(i, data.records);
                    data.value(key, &mut value);
                    database.put(wtxn, &key_bytes(key), &value)?;
                }
                Ok(CommitOrAbort::<_, ()>::Commit(database))
            })
            .map_err(CompareError::lmdb("load"))?
            .unwrap_commit();
        Ok(LmdbStore {
            env,
            database,
            data,
            load_secs: start.elapsed().as_secs_f64(),
        })
    }

    /// Bytes of the environment's data file.
    pub fn data_bytes(&self) -> Result<u64> {
        self.env
            .real_disk_size()
            .map_err(CompareError::lmdb("file size"))
    }

    /// Reads every loaded key in one read transaction and compares its value with the one
    /// loaded (this also maps every page in before the first timed round).
    pub fn verify_all(&self) -> Result<()> {
        let txn = self
            .env
            .read_txn()
            .map_err(CompareError::lmdb("read txn"))?;
        let mut expected = Vec::with_capacity(self.data.value_size);
        for key in 0..self.data.records {
            let found = self.get_in(&txn, key)?;
            self.data.value(key, &mut expected);
            check_value(Store::Lmdb, key, found, &expected)?;
        }
        Ok(())
    }

    /// The value under `key` in its own read transaction (`None`: no such key).
    #[cfg(test)]
    pub fn get(&self, key: u64) -> Result<Option<Vec<u8>>> {
        let txn = self
            .env
            .read_txn()
            .map_err(CompareError::lmdb("read txn"))?;
        self.database
            .get(&txn, &key_bytes(key))
            .map(|v| v.map(<[u8]>::to_vec))
            .map_err(CompareError::lmdb("get"))
    }

    /// Writes `value` under `key` (for tests that damage a value on purpose).
    #[cfg(test)]
    pub fn put(&self, key: u64, value: &[u8]) -> Result<()> {
        let mut wtxn = self
            .env
            .write_txn()
            .map_err(CompareError::lmdb("write txn"))?;
        self.database
            .put(&mut wtxn, &key_bytes(key), value)
            .map_err(CompareError::lmdb("put"))?;
        wtxn.commit().map_err(CompareError::lmdb("commit"))
    }

    /// The value under `key` in `txn`; a missing key is an error.
    fn get_in<'t>(&self, txn: &'t heed::RoTxn<'t, T>, key: u64) -> Result<&'t [u8]> {
        self.database
            .get(txn, &key_bytes(key))
            .map_err(CompareError::lmdb("get"))?
            .ok_or(CompareError::Missing {
                store: Store::Lmdb,
                key,
            })
    }

    /// One timed round: the read stream of `seed` (drawn as for `tasks` ringdb tasks) for
    /// `duration`, a read transaction every `gets_per_txn` gets, each value copied out, every
    /// [`CHECK_EVERY`]th compared with the loaded one.
    pub fn round(
        &self,
        seed: u64,
        tasks: usize,
        duration: Duration,
        gets_per_txn: u64,
    ) -> Result<Measurement> {
        assert!(gets_per_txn >= 1, "a transaction holds at least one get");
        let mut stream = self.data.read_stream(seed, tasks);
        let mut value = Vec::with_capacity(self.data.value_size);
        let mut expected = Vec::with_capacity(self.data.value_size);
        let mut latency = LatencyHist::new();
        let (mut ops, mut checked, mut next_clock) = (0u64, 0u64, CLOCK_EVERY);
        let cpu_before = CpuTime::now();
        let start = Instant::now();
        loop {
            let txn = self
                .env
                .read_txn()
                .map_err(CompareError::lmdb("read txn"))?;
            for _ in 0..gets_per_txn {
                let key = read_key(stream.next_op())?;
                let t0 = rdtsc();
                let found = self.get_in(&txn, key)?;
                value.clear();
                value.extend_from_slice(found);
                // Each read's latency into a histogram, as `ringdb ycsb` records every
                // operation: both stores pay the same bookkeeping per read.
                latency.record_ns(ticks_to_ns(rdtsc().saturating_sub(t0)));
                if ops.is_multiple_of(CHECK_EVERY) {
                    self.data.value(key, &mut expected);
                    check_value(Store::Lmdb, key, &value, &expected)?;
                    checked += 1;
                }
                ops += 1;
            }
            drop(txn);
            if ops >= next_clock {
                next_clock = ops + CLOCK_EVERY;
                if start.elapsed() >= duration {
                    break;
                }
            }
        }
        let wall_secs = start.elapsed().as_secs_f64();
        let cpu_secs = CpuTime::now().since(cpu_before).total().as_secs_f64();
        std::hint::black_box(&latency);
        Ok(Measurement::new(ops, wall_secs, cpu_secs, checked))
    }
}
