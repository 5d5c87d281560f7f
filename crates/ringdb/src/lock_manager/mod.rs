//! The lock manager of one database: the lock table (key locks, shared or exclusive, and
//! scans' shared range locks, per table, with the wait-die decision for each request), the
//! parking of a task on a lock, and the state a database's transactions share (the table,
//! the clock of timestamps, the counters behind [`TxnStats`]).
//!
//! Why a layer of its own, below the local database: every [`DbHandle`](crate::DbHandle)
//! holds its database's lock manager, and the transactions (`txn/`, above the database)
//! use both; kept inside `txn/`, the handle's field made the database and the transactions
//! depend on each other.
//!
//! Where to look: `locks.rs` (the lock table: key and range locks, wait-die),
//! `lock_entry.rs` (one key's holders and waiters), `wait.rs` (parking on a lock),
//! `release.rs` (releasing and narrowing), `queued_scan.rs` (scans waiting for their range,
//! which younger inserts into it give way to); `stats.rs` ([`TxnStats`], and the state the
//! transactions share).

mod lock_entry;
mod locks;
mod queued_scan;
mod release;
mod stats;
mod wait;

pub use stats::TxnStats;

pub(crate) use lock_entry::is_empty_range;
pub(crate) use locks::{Blocker, Grant};
pub(crate) use stats::TxnShared;
pub(crate) use wait::Refusal;

use crate::ids::TxnTimestamp;

/// Who a transaction is to the lock table: its timestamp (age for wait-die) and a number
/// unique per database (so two transactions given the same timestamp never share locks).
/// Ordered by timestamp, then number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Age {
    timestamp: TxnTimestamp,
    id: u64,
}

impl Age {
    /// The age of transaction number `id`, of `timestamp`.
    pub(crate) fn new(timestamp: TxnTimestamp, id: u64) -> Age {
        Age { timestamp, id }
    }

    /// The transaction's timestamp (its age for wait-die).
    pub(crate) fn timestamp(&self) -> TxnTimestamp {
        self.timestamp
    }
}
