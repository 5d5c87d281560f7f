//! A transaction with parts on several shards, committed atomically across a crash: the
//! cross-shard batches' protocol (`cross.rs`, `batch_log.rs`) with the parts' writes coming
//! from transactions that hold their locks meanwhile.
//!
//! 1. Each part's writes ([`Transaction::pending_writes`](crate::Transaction::pending_writes))
//!    go into one record of the batch log, made durable: [`Db::log_across`]. That is the
//!    commit point; a failure here changes nothing (the caller aborts every part).
//! 2. Each part commits with the record's marker in its batch
//!    ([`Transaction::commit_across`](crate::Transaction::commit_across)), then releases its
//!    locks. A crash before a part's commit is durable leaves its shard without the marker,
//!    and the reopen applies that part from the batch log (`Db::recover_batches`).
//! 3. [`Db::across_done`] once every part has committed: the log may then be emptied.
//!
//! Without a log (durability `off`) step 1 only numbers the commit and the parts carry no
//! marker: nothing survives a crash anyway.

use super::cross::Record;
use super::Db;
use crate::db::WriteBatch;
use crate::error::WriteError;
use crate::txn::AcrossCommit;
use std::io::ErrorKind;

impl Db {
    /// The commit point of a transaction whose parts write on several shards: logs `parts`
    /// (each shard's writes) as one record of the cross-shard batch log and makes it durable,
    /// sharing the sync with concurrent committers. Blocks the calling thread for that sync
    /// (on a shard's thread, its other tasks wait: the log is a plain file). Call it with
    /// every part's locks held; on an error nothing is committed.
    #[cfg(any(test, feature = "__internal"))]
    #[cfg_attr(feature = "__internal", visibility::make(pub))]
    pub(crate) fn log_across(
        &self,
        parts: &[(usize, WriteBatch)],
    ) -> Result<AcrossCommit, WriteError> {
        self.assert_part_shards(parts);
        let (id, marker) = self.log_batch(self.shared.coordinator(), parts)?;
        Ok(AcrossCommit::new(id, marker))
    }

    /// [`log_across`](Self::log_across) for a task on a shard: the sync runs on the batch
    /// log's sync thread (shared with concurrent committers) while the shard's other tasks
    /// go on.
    pub(crate) async fn log_across_async(
        &self,
        parts: &[(usize, WriteBatch)],
    ) -> Result<AcrossCommit, WriteError> {
        self.assert_part_shards(parts);
        let coordinator = self.shared.coordinator();
        let written = match self.write_batch_record(coordinator, parts)? {
            Record::Unlogged(id) => return Ok(AcrossCommit::new(id, None)),
            Record::Written(written) => written,
        };
        if let Some(file) = &written.file {
            let synced = (coordinator
                .syncer
                .request(&coordinator.sync, file, written.end))
            .await
            .unwrap_or_else(|| Err((ErrorKind::Other, "the sync thread stopped".into())));
            if let Err((kind, message)) = synced {
                coordinator.lock().failed = true;
                let source = std::io::Error::new(kind, message);
                let path = written.path;
                return Err(WriteError::BatchLog { path, source });
            }
        }
        let id = written.id;
        Ok(AcrossCommit::new(id, Some(id)))
    }

    /// Every part names one of this database's shards.
    fn assert_part_shards(&self, parts: &[(usize, WriteBatch)]) {
        for (shard, _) in parts {
            assert!(*shard < self.shard_count(), "shard {shard} out of range");
        }
    }

    /// Every part of `commit` has committed (`all_committed`), or some failed: a failed
    /// part keeps its record in the log, so that a reopen applies it.
    pub(crate) fn across_done(&self, commit: AcrossCommit, all_committed: bool) {
        if all_committed {
            self.shared.coordinator().lock().in_flight -= 1;
        } else {
            tracing::error!(
                "cross-shard commit {}: a part failed after the commit point",
                commit.id()
            );
        }
    }
}
