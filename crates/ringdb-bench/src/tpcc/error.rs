//! [`TpccError`]: how one TPC-C transaction fails. A lock conflict is its own variant, with
//! the timestamp to retry with (wait-die lets the retry grow older until it wins); the 1%
//! NewOrder rollback is no error at all but an outcome (`TxOutcome::RolledBack`).

use super::codec::RowError;
use ringdb::{ShardError, TxnError, TxnTimestamp};

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

    /// A request to another shard (a part of a transaction that spans shards) did not
    /// reach it or its reply was lost: the shard stopped.
    #[error("a part of the transaction on another shard failed: {0}")]
    Shard(#[source] ShardError),

    /// A commit reached a shard that holds no part of the transaction: the part was lost.
    #[error("shard {shard} holds no part of the transaction that asked it to commit")]
    PartMissing {
        /// The shard.
        shard: usize,
    },

    /// A part on another shard answered with a reply of the wrong kind.
    #[error(
        "a part of the transaction on another shard returned {got} where {wanted} was expected"
    )]
    PartReply {
        /// What the operation returns.
        wanted: &'static str,
        /// What came back.
        got: &'static str,
    },

    /// The home shard committed but a part on another shard did not. With a log the part
    /// is applied from the cross-shard batch log on reopen; without one nothing can redo it.
    #[error("the transaction committed on its home shard, but its part on shard {shard} failed to commit: {cause}")]
    HalfCommitted {
        /// The shard whose part failed.
        shard: usize,
        /// Why.
        cause: String,
    },
}
