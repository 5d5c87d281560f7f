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
    /// A wait ran past its bound without what it waits for coming: a livelock or a lost
    /// wake-up (a bug), reported instead of hanging.
    #[error("gave up waiting for {waiting_for} after {rounds} rounds; reopen the database")]
    Stalled {
        /// What the wait was for.
        waiting_for: WaitFor,
        /// The rounds it waited (its bound).
        rounds: u64,
    },
}

/// What a bounded wait was waiting for (see [`DbError::Stalled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitFor {
    /// A free frame in the buffer pool.
    FreeFrame,
    /// `frames` free frames at once (a split's reservation).
    FreeFrames {
        /// Frames needed.
        frames: usize,
    },
    /// Page `page` to come out of another task's read or write, or to be read.
    PageLoad {
        /// The page.
        page: u64,
    },
    /// Room in the log for a record of `record_bytes` (checkpoints free it).
    LogRoom {
        /// The record's size.
        record_bytes: usize,
    },
    /// The log to be durable up to `lsn`.
    DurableLog {
        /// The LSN the commit waits for.
        lsn: u64,
    },
}

impl std::fmt::Display for WaitFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitFor::FreeFrame => write!(f, "a free frame"),
            WaitFor::FreeFrames { frames } => write!(f, "{frames} free frames"),
            WaitFor::PageLoad { page } => write!(f, "page {page} to load"),
            WaitFor::LogRoom { record_bytes } => {
                write!(f, "log room for a record of {record_bytes} bytes")
            }
            WaitFor::DurableLog { lsn } => write!(f, "the log to be durable up to LSN {lsn}"),
        }
    }
}

pub type Result<T> = std::result::Result<T, DbError>;
