//! The engine's one error type: every failure a caller can see, with a message that names the
//! cause (and, where there is one, what to change).

use thiserror::Error;

#[derive(Debug, Error)]
pub enum DbError {
    /// The I/O layer failed (EIO, ENOSPC, a refused switch, ...).
    #[error(transparent)]
    Io(#[from] ringdb_io::IoError),
    /// A page read from disk is not what it should be (checksum, page id, layout).
    #[error(transparent)]
    Page(#[from] crate::page::PageError),
    /// A node's contents violate the B+tree's invariants.
    #[error("corrupted page {page}: {what}")]
    Corrupt { page: u64, what: String },
    /// A caller's argument is out of range.
    #[error("{0}")]
    InvalidArg(String),
    /// A key/value pair larger than a page can hold.
    #[error("key of {key} bytes + value of {value} bytes is too large: at most {max} bytes together for {page_size}-byte pages")]
    TooLarge {
        key: usize,
        value: usize,
        max: usize,
        page_size: usize,
    },
    /// The data set does not fit the target.
    #[error("the data file is full: {0}")]
    Full(String),
    /// The write-ahead log could not be written or made durable: commits fail from now on;
    /// reopen the database (recovery keeps every acknowledged commit).
    #[error("the write-ahead log failed ({0}); reopen the database to recover")]
    LogFailed(String),
    /// A checkpoint could not write the data file: the database must be reopened (recovery
    /// finishes the checkpoint from its double-write copy).
    #[error("a checkpoint failed ({0}); reopen the database to recover")]
    CheckpointFailed(String),
    /// Opening or creating the database's files failed.
    #[error("{path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, DbError>;
