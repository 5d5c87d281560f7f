//! [`AcrossCommit`]: the token of a commit whose parts, on several shards, were logged as one
//! record of the cross-shard batch log (`sharded/across.rs` makes it): each part commits with
//! its marker ([`Transaction::commit_across`](crate::Transaction::commit_across)). It lives
//! here, below the shards, because the transaction that commits with it is here.

/// A commit across shards whose writes are logged (see `sharded/across.rs`): pass it to each
/// part's [`Transaction::commit_across`](crate::Transaction::commit_across), then to
/// `Db::across_done`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcrossCommit {
    id: u64,
    marker: Option<u64>,
}

impl AcrossCommit {
    /// The commit numbered `id` in the batch log, its parts' batches carrying `marker`.
    pub(crate) fn new(id: u64, marker: Option<u64>) -> AcrossCommit {
        AcrossCommit { id, marker }
    }

    /// The marker each part's batch carries (`None` without a log).
    pub(crate) fn marker(&self) -> Option<u64> {
        self.marker
    }

    /// The commit's number in the batch log.
    pub fn id(&self) -> u64 {
        self.id
    }
}
