//! [`WriteError`] (insert, remove, write, flush, close) and [`ReadError`] (get, range).
//!
//! A commit that fails after its record reached the log leaves memory and log disagreeing, so
//! the database refuses work from then on until it is reopened (recovery decides from the
//! log). That first failure is kept ([`Arc`]) and every refusal carries it, reads included:
//! that is the one cause reads have of their own beyond a [`StorageError`].

use super::{ShardError, StorageError};
use crate::ids::TableId;
use ringdb_io::IoError;
use std::path::PathBuf;
use std::sync::Arc;

/// Why an insert, remove, write (batch), flush or close failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// An empty key: keys are at least one byte long.
    #[error("keys must not be empty")]
    EmptyKey,
    /// A key/value pair larger than a page can hold.
    #[error(
        "key of {key} bytes + value of {value} bytes is too large: at most {max} bytes together \
         for {page_size}-byte pages"
    )]
    #[non_exhaustive]
    TooLarge {
        /// The key's length in bytes.
        key: usize,
        /// The value's length in bytes.
        value: usize,
        /// The most bytes a key and its value may take together.
        max: usize,
        /// The database's page size in bytes.
        page_size: usize,
    },
    /// A batch whose log record is larger than the log accepts (a quarter of it, so that
    /// checkpoints can always make room).
    #[error(
        "a batch of {record_bytes} bytes is larger than a quarter of the log ({max_bytes} \
         bytes); split it or open the database with a larger log"
    )]
    #[non_exhaustive]
    BatchTooLarge {
        /// The batch's log record in bytes.
        record_bytes: usize,
        /// The largest record the log accepts.
        max_bytes: usize,
    },
    /// The data does not fit the target (a device, or a device's data region): every page is
    /// in use. Nothing was changed.
    #[error(
        "the data file is full: {needed_pages} more pages needed, {available_pages} left of its \
         {capacity_pages} pages of {page_size} bytes"
    )]
    #[non_exhaustive]
    Full {
        /// Pages the target holds.
        capacity_pages: u64,
        /// Bytes per page.
        page_size: usize,
        /// Pages still free (free ids and room to grow).
        available_pages: u64,
        /// Pages the write needed.
        needed_pages: u64,
    },
    /// A page was allocated without a free frame for it (a caller of the buffer manager did
    /// not call `ensure_free` or `reserve` first).
    #[error("alloc_page without a free frame (call ensure_free first)")]
    NoFreeFrame,
    /// A commit failed after its record was logged: the database refuses work until it is
    /// reopened (recovery keeps every acknowledged commit).
    #[error(
        "a commit failed after its record was logged ({first}); reopen the database to recover"
    )]
    #[non_exhaustive]
    Failed {
        /// The failure that left memory and log disagreeing: the commit's own, or for every
        /// later refusal the first one.
        #[source]
        first: Arc<WriteError>,
    },
    /// A write names a table the database does not hold (never created, or of another
    /// database). Nothing was changed.
    #[error("{table} does not exist in this database")]
    #[non_exhaustive]
    NoSuchTable {
        /// The table named.
        table: TableId,
    },
    /// A table name that is empty or longer than the catalog stores.
    #[error("a table name of {length_bytes} bytes: names are 1 to {max_bytes} bytes of UTF-8")]
    #[non_exhaustive]
    TableName {
        /// The name's length in bytes.
        length_bytes: usize,
        /// The longest name stored.
        max_bytes: usize,
    },
    /// The catalog page is full: no further table can be created in this database.
    #[error(
        "the catalog holds {max_tables} tables (all that one {page_size}-byte page holds); \
         no further table can be created"
    )]
    #[non_exhaustive]
    TooManyTables {
        /// Tables the catalog holds besides the default table.
        max_tables: usize,
        /// The database's page size in bytes.
        page_size: usize,
    },
    /// Making the data durable with `fdatasync` on the target (off the ring, for an IOPOLL
    /// ring) failed.
    #[error("{}: {source}", path.display())]
    #[non_exhaustive]
    Sync {
        /// The data file or device.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// Below the API: I/O, a damaged page, the log or a checkpoint.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The request could not reach the shard that owns the key (see [`ShardError`]).
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// The cross-shard batch log could not be written or synced: whether the batch is
    /// committed is known only after a reopen recovers the log; until then cross-shard
    /// batches are refused ([`WriteError::BatchLogFailed`]).
    #[error("{}: writing the cross-shard batch log: {source}", path.display())]
    #[non_exhaustive]
    BatchLog {
        /// The batch log file.
        path: PathBuf,
        /// The OS's error.
        #[source]
        source: std::io::Error,
    },
    /// A table name the engine keeps for itself.
    #[error(
        "table name {name:?} is reserved (names starting with \"ringdb.system.\" are the engine's)"
    )]
    #[non_exhaustive]
    ReservedTableName {
        /// The name asked for.
        name: String,
    },
    /// A table got another id on one shard than on the first: the shards' catalogs disagree.
    #[error("table {name:?} has another id on shard {shard} than on shard 0")]
    #[non_exhaustive]
    TableIdsDiffer {
        /// The table's name.
        name: String,
        /// The first shard that disagrees.
        shard: usize,
    },
    /// An earlier write of the cross-shard batch log failed: batches across shards are
    /// refused until the database is reopened (single-shard work goes on).
    #[error("the cross-shard batch log failed earlier; reopen the database to recover it")]
    BatchLogFailed,
    /// The cross-shard batch log names a shard the database does not have.
    #[error("the cross-shard batch log's batch {batch} has a part for shard {shard}, of {shards}")]
    #[non_exhaustive]
    BatchLogShard {
        /// The batch's id.
        batch: u64,
        /// The shard it names.
        shard: usize,
        /// Shards in the database.
        shards: usize,
    },
}

impl WriteError {
    /// The I/O layer's error behind this one, if an I/O failure caused it.
    pub fn io_cause(&self) -> Option<&IoError> {
        match self {
            WriteError::Storage(e) => e.io_cause(),
            WriteError::Failed { first } => first.io_cause(),
            _ => None,
        }
    }
}

/// A write that had to read first (a marker, a table) fails with what the read met.
impl From<ReadError> for WriteError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Failed { first } => WriteError::Failed { first },
            ReadError::Storage(e) => WriteError::Storage(e),
            ReadError::Shard(e) => WriteError::Shard(e),
            ReadError::NoSuchTable { table } => WriteError::NoSuchTable { table },
        }
    }
}

/// Why a get or a range scan failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// An earlier commit failed after its record was logged: the database refuses work until
    /// it is reopened (see [`WriteError::Failed`]).
    #[error(
        "a commit failed after its record was logged ({first}); reopen the database to recover"
    )]
    #[non_exhaustive]
    Failed {
        /// The first failure.
        #[source]
        first: Arc<WriteError>,
    },
    /// A read names a table the database does not hold.
    #[error("{table} does not exist in this database")]
    #[non_exhaustive]
    NoSuchTable {
        /// The table named.
        table: TableId,
    },
    /// Below the API: I/O, a damaged page, the log or a checkpoint.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The request could not reach the shard that owns the key (see [`ShardError`]).
    #[error(transparent)]
    Shard(#[from] ShardError),
}

impl ReadError {
    /// The I/O layer's error behind this one, if an I/O failure caused it.
    pub fn io_cause(&self) -> Option<&IoError> {
        match self {
            ReadError::Storage(e) => e.io_cause(),
            ReadError::Failed { first } => first.io_cause(),
            ReadError::Shard(_) => None,
            ReadError::NoSuchTable { .. } => None,
        }
    }
}
