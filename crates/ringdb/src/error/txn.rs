//! [`TxnError`]: why a transaction's operation or commit failed.
//!
//! The one a caller must tell apart is [`TxnError::Conflict`]: under wait-die a younger
//! transaction that meets a lock an older one holds dies at once instead of waiting, so the
//! deadlock never forms. It is not a failure of the database: the caller drops the transaction
//! and runs it again with the timestamp the error carries, so the retry is older than every
//! transaction that started since and eventually wins.

use super::{ReadError, ShardError, WriteError};
use crate::ids::{TableId, TxnTimestamp};
use ringdb_io::IoError;

/// Why a transaction's operation or commit failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TxnError {
    /// Wait-die: this transaction is younger than one that holds (or waits first for) a lock it
    /// needs, so it dies instead of waiting. Drop it and retry with
    /// `begin_with(isolation, Some(timestamp))`.
    #[error(
        "transaction {timestamp} must restart: {table}, key {key:02x?} is locked by the older \
         transaction {holder} ({with}); retry with timestamp {timestamp}"
    )]
    #[non_exhaustive]
    Conflict {
        /// The timestamp of the transaction that died: the one to retry with.
        timestamp: TxnTimestamp,
        /// The timestamp of the older transaction whose lock it met.
        holder: TxnTimestamp,
        /// The table of the key.
        table: TableId,
        /// The key asked for (for a scan: the key inside its range that another transaction
        /// locked).
        key: Vec<u8>,
        /// What the older transaction holds or waits for.
        with: ConflictWith,
    },
    /// A lock wait was woken this many times without getting its lock (an older transaction
    /// kept finding it taken again): the wait's bound, not a deadlock.
    #[error(
        "transaction {timestamp} waited {rounds} rounds for a lock on {table}, key {key:02x?}, \
         without getting it"
    )]
    #[non_exhaustive]
    LockWaitStalled {
        /// The waiting transaction.
        timestamp: TxnTimestamp,
        /// The table of the key.
        table: TableId,
        /// The key it waited for.
        key: Vec<u8>,
        /// Wake-ups it waited through.
        rounds: u64,
    },
    /// A read of the transaction failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A write of the transaction (its checks, or its commit) failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A transaction of a [`Db`](crate::Db) could not reach one of its shards.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// The part of a transaction of a [`Db`](crate::Db) on `shard` is gone: an operation
    /// there failed (the error it returned said why) and ended it, with its locks, or the
    /// transaction was ended already. The transaction can only abort: later reads and the
    /// commit are refused, and nothing of it is committed.
    #[error("the transaction's part on shard {shard} is gone (an operation there failed); nothing was committed")]
    #[non_exhaustive]
    PartLost {
        /// The shard.
        shard: usize,
    },
    /// Shard `shard` holds `open_max` transactions open already (each a transaction some
    /// thread began and has not ended): a new one is refused rather than the table grown.
    #[error("shard {shard} holds {open_max} open transactions already; end some first")]
    #[non_exhaustive]
    TooManyOpen {
        /// The shard.
        shard: usize,
        /// The most it holds.
        open_max: usize,
    },
}

impl TxnError {
    /// Whether this is a wait-die [`Conflict`](TxnError::Conflict): retry the transaction
    /// with its old timestamp.
    pub fn is_conflict(&self) -> bool {
        matches!(self, TxnError::Conflict { .. })
    }

    /// The I/O layer's error behind this one, if an I/O failure caused it.
    pub fn io_cause(&self) -> Option<&IoError> {
        match self {
            TxnError::Read(e) => e.io_cause(),
            TxnError::Write(e) => e.io_cause(),
            TxnError::Shard(_)
            | TxnError::Conflict { .. }
            | TxnError::LockWaitStalled { .. }
            | TxnError::PartLost { .. }
            | TxnError::TooManyOpen { .. } => None,
        }
    }
}

/// What the older transaction that made a younger one die holds, or waits for.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictWith {
    /// A shared lock on the key (it read the key).
    SharedKey,
    /// An exclusive lock on the key (it wrote the key, or read it for update).
    ExclusiveKey,
    /// A shared range lock that holds the key (it scanned over it).
    Range,
    /// It waits for the key already, and came first by age.
    Queued,
}

impl std::fmt::Display for ConflictWith {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConflictWith::SharedKey => "a shared key lock",
            ConflictWith::ExclusiveKey => "an exclusive key lock",
            ConflictWith::Range => "a shared range lock of a scan",
            ConflictWith::Queued => "it waits for the key first",
        })
    }
}
