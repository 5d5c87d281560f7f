//! [`TpccError`]: how one TPC-C transaction fails. A lock conflict is its own variant, with
//! the timestamp to retry with (wait-die lets the retry grow older until it wins); the 1%
//! NewOrder rollback is no error at all but an outcome (`TxOutcome::RolledBack`).

use super::codec::RowError;
use ringdb::{ConflictWith, TableId, TxnError, TxnTimestamp};

/// Why a TPC-C transaction did not commit.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TpccError {
    /// The transaction died in a lock conflict (wait-die) and changed nothing: run it again
    /// with this timestamp.
    #[error("the transaction (timestamp {timestamp:?}) died in a lock conflict; retry it with its timestamp")]
    Conflict {
        /// The transaction's timestamp, to retry with.
        timestamp: TxnTimestamp,
        /// The table of the lock it met and what the older transaction held there.
        cause: Option<(TableId, ConflictWith)>,
    },

    /// The transaction API failed (a read or the commit's write).
    #[error(transparent)]
    Txn(#[from] TxnError),

    /// A row the population and the transactions always keep is missing: the data is not a
    /// consistent TPC-C database.
    #[error("{table} has no row for key {key:02x?}")]
    MissingRow {
        /// The table.
        table: &'static str,
        /// The key looked up.
        key: Vec<u8>,
    },

    /// An input no TPC-C transaction can have (built by hand, not drawn by
    /// `TxInput::generate`): nothing was read or written.
    #[error("invalid transaction input: {rule}")]
    InvalidInput {
        /// The rule it breaks.
        rule: &'static str,
    },

    /// A row that does not decode.
    #[error(transparent)]
    Row(#[from] RowError),

    /// The NewOrder rollback of clause 2.4.2.3 inside a transaction body: it aborts the
    /// transaction; the runner counts it as the outcome `TxOutcome::RolledBack`.
    #[error("the transaction rolled back on purpose (clause 2.4.2.3)")]
    RolledBack,
}
