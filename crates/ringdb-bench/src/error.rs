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
