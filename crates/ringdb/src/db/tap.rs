//! Commit taps: a way for the program that embeds the engine to see every logged commit, in
//! the order each key's commits reach the log. A server ships them to its replicas.
//!
//! The tap runs on the committing shard's thread after the batch is in the log and in the
//! tree, while the batch's keys are still locked: the next commit of any of those keys runs
//! its tap after this one, so per key the taps see commits in log order. A tap that was not
//! installed when a commit ran its check is certain to find that commit in the tree (it was
//! applied before the check): a reader that installs the tap first and scans afterwards
//! misses nothing. Without a log nothing is committed through one and no tap runs.

use crate::catalog::TableId;
use crate::wal::Op;
use std::sync::Arc;

/// One change of a committed batch, as a tap sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change<'a> {
    /// The table the change is in.
    pub table: TableId,
    /// The key it changes.
    pub key: &'a [u8],
    /// The value it puts (`None`: it deletes the key).
    pub value: Option<&'a [u8]>,
}

/// What a tap is: called with each committed batch's changes, in the batch's order. It runs
/// under the batch's key locks on a shard's thread, so it must not block for long.
pub type CommitTap = Arc<dyn Fn(&[Change<'_>]) + Send + Sync>;

/// The changes of `ops`, for a tap.
pub(super) fn changes(ops: &[Op]) -> Vec<Change<'_>> {
    ops.iter()
        .map(|op| match op {
            Op::Put { table, key, value } => Change {
                table: *table,
                key,
                value: Some(value),
            },
            Op::Delete { table, key } => Change {
                table: *table,
                key,
                value: None,
            },
        })
        .collect()
}
