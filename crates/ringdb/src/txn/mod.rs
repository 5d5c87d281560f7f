//! Transactions on one shard ([`LocalDb`](crate::LocalDb)): serializable reads and writes
//! across tables, committed as one [`WriteBatch`](crate::WriteBatch).
//!
//! Why this shape: the engine's tasks interleave at every page fault (the paper's fibers), so
//! a read-modify-write spread over several awaits needs concurrency control, and a commit
//! needs to be all or nothing. Both already exist below: a `WriteBatch` is one log record
//! (replayed whole or not at all), so a transaction buffers its writes and commits them as
//! one batch; what it adds is **strict two-phase locking** with wait-die:
//!
//! - a read takes a shared lock on its key (an absent key too, so nobody inserts it
//!   meanwhile), a write or `get_for_update` an exclusive one; a scan takes a shared *range*
//!   lock, which conflicts with an exclusive key lock inside it, so no insert or delete can
//!   create a phantom in a range a transaction has read;
//! - every lock is held until commit or abort (strict), so nobody sees a write before its
//!   batch is in the tree; with a log, the commit point is the append of its record, not the
//!   sync that makes it durable (early lock release, see `transaction.rs`: a reader that
//!   wrote nothing waits for that sync in its own commit);
//! - deadlocks cannot form: on a conflict the older transaction (smaller [`TxnTimestamp`])
//!   waits and the younger dies with [`TxnError::Conflict`](crate::TxnError::Conflict), so
//!   every wait goes from older to younger. A retry passes its first timestamp again, grows
//!   older with every transaction that starts after it, and eventually wins.
//!
//! Where to look: `transaction.rs` ([`Transaction`], its reads, writes and commit);
//! `scan.rs` (scans merged with the transaction's own writes); `prefetch.rs` (pages of keys
//! about to be read, faulted in together before any lock); `write_set.rs` (the buffered
//! writes); `across.rs` (the token of a commit logged across shards). The lock table, its
//! waits and the state a database's transactions share are the lock manager's
//! (`lock_manager/`), a layer below the local database, whose handle holds it.

mod across;
pub(crate) mod prefetch;
mod scan;
mod transaction;
mod write_set;

pub use crate::error::ConflictWith;
pub use crate::ids::TxnTimestamp;
pub use crate::lock_manager::TxnStats;
pub use across::AcrossCommit;
pub use transaction::Transaction;

use crate::db::DbHandle;
use crate::lock_manager::Age;

/// How a transaction isolates itself. `Off` takes no locks (its writes are still buffered and
/// committed as one batch): only for showing what goes wrong without concurrency control.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Strict two-phase locking on keys and scanned ranges, wait-die: serializable.
    #[default]
    Serializable,
    /// Reads see only committed data, but their shared locks (key and range) last only for
    /// the read: no repeatable reads, no phantom protection. Writes lock as under
    /// `Serializable`, to the end. What TPC-C's StockLevel is allowed (clause 2.8.2.3).
    ReadCommitted,
    /// No locks at all: lost updates and phantoms happen (for demonstrations and baselines).
    Off,
}

impl DbHandle {
    /// Begins a serializable transaction with a fresh timestamp.
    pub fn begin(&self) -> Transaction {
        self.begin_with(Isolation::Serializable, None)
    }

    /// Begins a transaction with `isolation`; `timestamp` is a retry's first timestamp (none:
    /// a fresh one, younger than every transaction begun before).
    pub fn begin_with(&self, isolation: Isolation, timestamp: Option<TxnTimestamp>) -> Transaction {
        let shared = self.txn.clone();
        let id = shared.next_id();
        let age = Age::new(timestamp.unwrap_or(TxnTimestamp(id)), id);
        Transaction::new(self.clone(), shared, isolation, age)
    }

    /// What the transactions on this database counted: commits, conflicts, waits, aborts,
    /// and the lock table's memory.
    pub fn txn_stats(&self) -> TxnStats {
        self.txn.stats()
    }
}
