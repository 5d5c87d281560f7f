//! Errors of the benchmark layer: I/O errors from `ringdb-io` plus what benchmarks add.

use ringdb_io::IoError;

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Io(#[from] IoError),

    #[error(transparent)]
    Db(#[from] ringdb::DbError),

    #[error("invalid argument: {0}")]
    InvalidArg(String),

    #[error("verification failed: {mismatches} of {checked} blocks differ; first at offset {first_offset}")]
    Verify {
        mismatches: u64,
        checked: u64,
        first_offset: u64,
    },

    #[error("fio: {0}")]
    Fio(String),

    #[error("a job thread failed: {0}")]
    Job(String),
}

/// Opening a database fails with the engine's `OpenError`: a benchmark reports it as any
/// other engine error.
impl From<ringdb::OpenError> for BenchError {
    fn from(e: ringdb::OpenError) -> Self {
        BenchError::Db(e.into())
    }
}

/// A write (or a close) fails with the engine's `WriteError`.
impl From<ringdb::WriteError> for BenchError {
    fn from(e: ringdb::WriteError) -> Self {
        BenchError::Db(e.into())
    }
}

/// A read fails with the engine's `ReadError`.
impl From<ringdb::ReadError> for BenchError {
    fn from(e: ringdb::ReadError) -> Self {
        BenchError::Db(e.into())
    }
}
