//! What the comparison fails with. A read that finds nothing or the wrong bytes is an error
//! that stops the run, never a count printed beside the figures: a store that loses data
//! must not win a throughput comparison.

use ringdb_bench::ycsb::Op;
use ringdb_bench::BenchError;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// The result of every step of the comparison.
pub type Result<T, E = CompareError> = std::result::Result<T, E>;

/// Which store a figure or a failure belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Store {
    /// ringdb: one shard on the calling thread, tasks on the shard.
    Ringdb,
    /// LMDB through heed, one thread.
    Lmdb,
}

impl fmt::Display for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Store::Ringdb => "ringdb",
            Store::Lmdb => "LMDB",
        })
    }
}

/// Everything the comparison refuses or fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// A workload or setting the benchmark layer refused, or ringdb failing under it.
    #[error(transparent)]
    Bench(#[from] BenchError),

    /// ringdb could not open its database.
    #[error("opening ringdb at {}: {source}", path.display())]
    RingdbOpen {
        /// The database's folder.
        path: PathBuf,
        /// Why.
        source: ringdb::OpenError,
    },

    /// A ringdb read failed.
    #[error("ringdb read of key {key}: {source}")]
    RingdbRead {
        /// The key read.
        key: u64,
        /// Why.
        source: ringdb::ReadError,
    },

    /// A ringdb write (a test's damage) or its close failed.
    #[error("ringdb write or close: {0}")]
    RingdbWrite(#[from] ringdb::WriteError),

    /// LMDB failed in the step named.
    #[error("LMDB {step}: {source}")]
    Lmdb {
        /// What was being done.
        step: &'static str,
        /// Why.
        source: heed::Error,
    },

    /// The data does not fit in the memory given: the comparison is of in-memory reads.
    #[error("{store} holds {data_bytes} bytes of data, more than the {memory_bytes} bytes given")]
    DataExceedsMemory {
        /// The store whose data is too large.
        store: Store,
        /// Bytes of data after the load.
        data_bytes: u64,
        /// The pool (ringdb) or map (LMDB) size.
        memory_bytes: u64,
    },

    /// A read found no value for a key that was loaded.
    #[error("{store} has no value for loaded key {key}")]
    Missing {
        /// The store read.
        store: Store,
        /// The key.
        key: u64,
    },

    /// Reads of a timed ringdb round found nothing (the harness counts them).
    #[error("{store} missed {misses} of {ops} reads of loaded keys")]
    Misses {
        /// The store read.
        store: Store,
        /// Reads that found nothing.
        misses: u64,
        /// Reads in the round.
        ops: u64,
    },

    /// A read returned bytes other than the value loaded under its key.
    #[error("{store} returned a wrong value for key {key} ({found_bytes} bytes, first differing byte at {first_difference})")]
    Mismatch {
        /// The store read.
        store: Store,
        /// The key.
        key: u64,
        /// Length of what came back.
        found_bytes: usize,
        /// Offset of the first byte that differs from the expected value.
        first_difference: usize,
    },

    /// The read-only workload produced an operation other than a read.
    #[error("the read stream produced {op:?}, not a read")]
    NotARead {
        /// The operation drawn.
        op: Op,
    },

    /// A setting outside what the comparison can run with.
    #[error("{setting} must be {expected}, got {value}")]
    Setting {
        /// The setting.
        setting: &'static str,
        /// What it accepts.
        expected: &'static str,
        /// What was given.
        value: f64,
    },

    /// A data folder could not be emptied or made, or the report written.
    #[error("{} {}: {source}", step, path.display())]
    File {
        /// What was being done.
        step: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// The report could not be serialised.
    #[error("serialising the report: {0}")]
    Json(#[from] serde_json::Error),
}

impl CompareError {
    /// A mapper from heed's error to [`CompareError::Lmdb`] during `step`.
    pub fn lmdb(step: &'static str) -> impl FnOnce(heed::Error) -> CompareError {
        move |source| CompareError::Lmdb { step, source }
    }
}

/// Checks that `found` is `expected`, the value loaded under `key` in `store`.
pub fn check_value(store: Store, key: u64, found: &[u8], expected: &[u8]) -> Result<()> {
    if found == expected {
        return Ok(());
    }
    let first_difference = found
        .iter()
        .zip(expected)
        .position(|(a, b)| a != b)
        .unwrap_or(found.len().min(expected.len()));
    Err(CompareError::Mismatch {
        store,
        key,
        found_bytes: found.len(),
        first_difference,
    })
}

/// The key of `op`, which must be a read.
pub fn read_key(op: Op) -> Result<u64> {
    match op {
        Op::Read(key) => Ok(key),
        op => Err(CompareError::NotARead { op }),
    }
}
