//! What a database's transactions share: the lock table, the clock that hands out timestamps,
//! and the counters behind [`TxnStats`]. One per [`LocalDb`](crate::LocalDb), held by every
//! clone of its [`DbHandle`](crate::DbHandle), so all tasks of the runtime lock in one table.

use super::locks::LockTable;
use crate::memory::PartBytes;
use serde::Serialize;
use std::cell::Cell;

/// What the transactions of one database counted since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TxnStats {
    /// Transactions committed (read-only ones included).
    pub commits: u64,
    /// Lock requests refused by wait-die (each a [`TxnError::Conflict`](crate::TxnError)).
    pub conflicts: u64,
    /// Lock requests that parked (an older transaction waiting for a younger one).
    pub waits: u64,
    /// Transactions that ended without a commit: aborted, dropped, or whose commit failed.
    pub aborts: u64,
    /// Key and range locks held now (0 once every transaction has ended).
    pub locks_held: u64,
    /// The lock table's memory: its entries, their keys, holders and waiters, and the range
    /// locks.
    pub lock_table: PartBytes,
}

/// The state a database's transactions share (see the module doc).
#[derive(Default)]
pub(crate) struct TxnShared {
    pub(crate) locks: LockTable,
    /// The last timestamp (and transaction number) handed out; 0: none yet.
    last_id: Cell<u64>,
    commits: Cell<u64>,
    conflicts: Cell<u64>,
    waits: Cell<u64>,
    aborts: Cell<u64>,
}

/// Adds one to a counter.
fn bump(counter: &Cell<u64>) {
    counter.set(counter.get() + 1);
}

impl TxnShared {
    /// A number no transaction of this database had: also a fresh timestamp.
    pub(crate) fn next_id(&self) -> u64 {
        let id = self.last_id.get() + 1;
        self.last_id.set(id);
        id
    }

    pub(crate) fn count_commit(&self) {
        bump(&self.commits);
    }

    pub(crate) fn count_conflict(&self) {
        bump(&self.conflicts);
    }

    pub(crate) fn count_wait(&self) {
        bump(&self.waits);
    }

    pub(crate) fn count_abort(&self) {
        bump(&self.aborts);
    }

    /// The counters and the lock table's memory now.
    pub(crate) fn stats(&self) -> TxnStats {
        TxnStats {
            commits: self.commits.get(),
            conflicts: self.conflicts.get(),
            waits: self.waits.get(),
            aborts: self.aborts.get(),
            locks_held: self.locks.locks_held(),
            lock_table: self.locks.memory(),
        }
    }
}
