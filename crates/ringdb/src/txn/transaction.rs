//! [`Transaction`]: reads that lock, writes that are buffered, and the commit that turns them
//! into one batch (its scans are in `scan.rs`).
//!
//! Commit writes the buffered writes as one `WriteBatch` through [`DbHandle::write`]: with a
//! log, one record, all or nothing across a crash; the batch is applied while the exclusive
//! locks are still held, so no other transaction sees half of it (two-phase locking).
//!
//! With a log, the locks go as soon as the batch is in the tree, before its record is durable
//! (**early lock release**, as in Aether and Shore-MT): a hot row is not held across a log
//! sync, so the transactions queued on it join the same group commit instead of one sync
//! each. It is safe because the database has one log: a transaction that saw these writes
//! and writes itself appends its record after this one, so it is durable (and acknowledged)
//! only after this one; a transaction that wrote nothing waits for the log to be durable up
//! to its end before its commit returns. Either way no commit reports data a crash could
//! still take back. [`Transaction::hold_locks_until_durable`] keeps the strict order (locks
//! released after the sync), for comparison. Abort, and dropping a transaction, discard the
//! writes and release the locks.

use super::write_set::WriteSet;
use super::{ConflictWith, Isolation, TxnTimestamp};
use crate::catalog::TableId;
use crate::db::{DbHandle, WriteBatch};
use crate::error::{ReadError, TxnError, WriteError};
use crate::lock_manager::{Age, Blocker, Grant, Refusal, TxnShared};
use std::rc::Rc;

/// A transaction on one database (see the module doc of `txn`): reads see its own writes,
/// writes are buffered until [`commit`](Self::commit). Not `Send`: it holds a [`DbHandle`].
/// Dropping it aborts it.
pub struct Transaction {
    pub(super) handle: DbHandle,
    pub(super) shared: Rc<TxnShared>,
    pub(super) isolation: Isolation,
    pub(super) age: Age,
    /// Key locks held, to release at the end (each key shared with the lock table).
    keys: Vec<(TableId, Rc<[u8]>)>,
    /// Range locks held: table and lock number.
    pub(super) ranges: Vec<(TableId, u64)>,
    pub(super) writes: WriteSet,
    /// Committed or aborted: the locks are gone.
    finished: bool,
    /// Release the locks only once the commit is durable (see the module doc).
    strict_release: bool,
    /// After dying in a conflict, wait (holding nothing) for the lock in the way to change
    /// before reporting it; off for a transaction with parts elsewhere (see
    /// [`Transaction::report_conflicts_at_once`]).
    wait_after_conflict: bool,
    /// With `wait_after_conflict` off: the lock it died on, to wait for in
    /// [`Transaction::wait_out_conflict`].
    pending_wait: Option<(TableId, Blocker)>,
    /// The conflict that killed it: its locks are gone, every later call repeats it.
    doomed: Option<Doomed>,
}

/// The conflict a transaction died of, to repeat on every later call.
struct Doomed {
    holder: TxnTimestamp,
    table: TableId,
    key: Vec<u8>,
    with: ConflictWith,
}

impl Transaction {
    /// A transaction of `age` on `handle`'s database.
    pub(super) fn new(
        handle: DbHandle,
        shared: Rc<TxnShared>,
        isolation: Isolation,
        age: Age,
    ) -> Self {
        Transaction {
            handle,
            shared,
            isolation,
            age,
            keys: Vec::new(),
            ranges: Vec::new(),
            writes: WriteSet::default(),
            finished: false,
            strict_release: false,
            wait_after_conflict: true,
            pending_wait: None,
            doomed: None,
        }
    }

    /// Makes [`commit`](Self::commit) release the locks only after the log is durable
    /// (strict two-phase locking across the sync) instead of as soon as the writes are in the
    /// tree. Slower under contention with a log; there for comparison.
    pub fn hold_locks_until_durable(&mut self) {
        self.strict_release = true;
    }

    /// Reports a conflict at once instead of first waiting, with its locks released, for the
    /// lock in the way to change. That wait is safe only for a transaction that then holds
    /// nothing anywhere: one that has parts on other databases (the shards of a
    /// [`Db`](crate::Db), all carrying one timestamp) still holds their locks, an older
    /// transaction may wait for those, and the wait could close a cycle. Such a
    /// transaction's parts all report at once; it aborts every part, then retries.
    pub(crate) fn report_conflicts_at_once(&mut self) {
        self.wait_after_conflict = false;
    }

    /// Ends a transaction that died in a conflict it reported at once (see
    /// [`report_conflicts_at_once`](Self::report_conflicts_at_once)): waits, holding nothing,
    /// for the lock in its way to change, so that the retry does not meet the same holder at
    /// once. Call it once every other part of the transaction has aborted. For any other
    /// transaction it is an abort.
    pub(crate) async fn wait_out_conflict(mut self) {
        if let Some((table, blocker)) = self.pending_wait.take() {
            self.shared.wait_for_change(table, blocker, self.age).await;
        }
    }

    /// The transaction's timestamp: pass it to [`DbHandle::begin_with`] to retry after a
    /// [`TxnError::Conflict`].
    pub fn timestamp(&self) -> TxnTimestamp {
        self.age.timestamp()
    }

    /// Locks `key` of `table` (unless isolation is off), recording a new lock to release.
    async fn lock(&mut self, table: TableId, key: &[u8], exclusive: bool) -> Result<(), TxnError> {
        if self.isolation == Isolation::Off {
            return Ok(());
        }
        self.check_alive()?;
        let waits_for_older = self.waits_for_older();
        match (self.shared)
            .lock_key(table, key, self.age, exclusive, waits_for_older)
            .await
        {
            Ok(Grant::Key(key)) => self.keys.push((table, key)),
            Ok(_) => {}
            Err(refusal) => return Err(self.refused(refusal).await),
        }
        Ok(())
    }

    /// Whether a lock it cannot have now makes it wait even for an older holder instead of
    /// dying (see `TxnShared::lock_key`): only a read-committed transaction holding no lock.
    ///
    /// Sound for any transaction that holds nothing (nobody waits for it, so its wait closes
    /// no cycle), but applied only to read committed: for every transaction it cut TPC-C's
    /// conflicts from 96% to 3% of attempts and yet lowered tx/s by 10-16% at 128 tasks,
    /// because every release wakes every waiter of its lock (`docs/results/issue13-tpcc.md`).
    pub(super) fn waits_for_older(&self) -> bool {
        self.isolation == Isolation::ReadCommitted && self.keys.is_empty() && self.ranges.is_empty()
    }

    /// Refuses every call after the transaction died of a conflict (its locks are gone).
    pub(super) fn check_alive(&self) -> Result<(), TxnError> {
        match &self.doomed {
            None => Ok(()),
            Some(d) => Err(TxnError::Conflict {
                timestamp: self.age.timestamp(),
                holder: d.holder,
                table: d.table,
                key: d.key.clone(),
                with: d.with,
            }),
        }
    }

    /// Handles a refused lock request. On a conflict the transaction is dead: it releases
    /// every lock at once (so the older transactions waiting for it go on), then waits until
    /// the lock in its way changes (holding nothing, it can be in no deadlock), so that its
    /// retry does not meet the same holder again at once; then the conflict is reported.
    pub(super) async fn refused(&mut self, refusal: Refusal) -> TxnError {
        let Some((table, blocker)) = refusal.blocker else {
            return refusal.error;
        };
        if let TxnError::Conflict {
            holder,
            table,
            key,
            with,
            ..
        } = &refusal.error
        {
            self.doomed = Some(Doomed {
                holder: *holder,
                table: *table,
                key: key.clone(),
                with: *with,
            });
        }
        self.release_locks();
        if self.wait_after_conflict {
            self.shared.wait_for_change(table, blocker, self.age).await;
        } else {
            self.pending_wait = Some((table, blocker));
        }
        refusal.error
    }

    /// The value of `key` in `table` (this transaction's own write if it made one), under a
    /// shared lock: nobody else can change or insert the key until this one ends.
    pub async fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.check_alive()?;
        if let Some(own) = self.writes.get(table, key) {
            return Ok(own.map(<[u8]>::to_vec));
        }
        if self.isolation == Isolation::ReadCommitted {
            return self.get_read_committed(table, key).await;
        }
        self.lock(table, key, false).await?;
        Ok(self.handle.get_in(table, key).await?)
    }

    /// [`get`](Self::get) under read committed: a shared lock only for the read (unless the
    /// transaction held the key already), so the value is committed, and nobody waits for
    /// this transaction's end to change it.
    async fn get_read_committed(
        &mut self,
        table: TableId,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, TxnError> {
        let waits_for_older = self.waits_for_older();
        let locked = (self.shared)
            .lock_key(table, key, self.age, false, waits_for_older)
            .await;
        let short = match locked {
            Ok(Grant::Key(key)) => Some(key),
            Ok(_) => None,
            Err(refusal) => return Err(self.refused(refusal).await),
        };
        let value = self.handle.get_in(table, key).await;
        if let Some(key) = short {
            self.shared.locks.release(self.age, &[(table, key)], &[]);
        }
        Ok(value?)
    }

    /// The value of `key` in `table` under an exclusive lock (for a read-modify-write: two
    /// transactions cannot both read the old value).
    pub async fn get_for_update(
        &mut self,
        table: TableId,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, TxnError> {
        self.lock(table, key, true).await?;
        if let Some(own) = self.writes.get(table, key) {
            return Ok(own.map(<[u8]>::to_vec));
        }
        Ok(self.handle.get_in(table, key).await?)
    }

    /// Puts `key` -> `value` in `table` under an exclusive lock; buffered until commit. A
    /// table the database does not hold, an empty key or a record too large is refused here.
    pub async fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.check_write(table, key, value)?;
        self.lock(table, key, true).await?;
        self.writes.set(table, key, Some(value));
        Ok(())
    }

    /// Deletes `key` from `table` under an exclusive lock; buffered until commit.
    pub async fn delete(&mut self, table: TableId, key: &[u8]) -> Result<(), TxnError> {
        self.check_write(table, key, &[])?;
        self.lock(table, key, true).await?;
        self.writes.set(table, key, None);
        Ok(())
    }

    /// Refuses a write the commit would refuse, before it takes a lock.
    fn check_write(&self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        let tree = self.handle.tree_of(table).map_err(|e| match e {
            ReadError::NoSuchTable { table } => TxnError::Write(WriteError::NoSuchTable { table }),
            e => TxnError::Read(e),
        })?;
        Ok(tree.check_record(key, value)?)
    }

    /// Commits: the writes as one [`WriteBatch`] through [`DbHandle::write`] (one log record,
    /// durable per the database's mode when this returns), then the locks are released. On
    /// an error nothing of the batch is committed (unless the database failed mid-way, which
    /// the error says) and the locks are released as by an abort.
    pub async fn commit(self) -> Result<(), TxnError> {
        self.commit_marked(None).await
    }

    /// A copy of the writes the commit would make, as a batch: what a transaction with parts
    /// on several shards logs for this part (in the cross-shard batch log).
    #[cfg_attr(feature = "__internal", visibility::make(pub))]
    pub(crate) fn pending_writes(&self) -> WriteBatch {
        WriteBatch::from_ops(self.writes.to_ops())
    }

    /// Whether what this transaction has read is durable already (the log is, up to its
    /// end): its commit, when it wrote nothing, would not wait.
    pub(crate) fn reads_are_durable(&self) -> bool {
        self.handle.log_is_durable()
    }

    /// `pending_writes`, once this database's log is durable up to its end. With early lock release this part may have read writes whose records are
    /// not durable yet; its commit point is in another log (the cross-shard batch log),
    /// which must not become durable before them, or a crash would keep this transaction
    /// and lose what it read.
    pub(crate) async fn prepare(&self) -> Result<WriteBatch, TxnError> {
        self.check_alive()?;
        self.handle.wait_log_durable().await?;
        Ok(self.pending_writes())
    }

    /// Commits this part of a transaction whose writes on several shards were logged as one
    /// by [`Db::log_across`](crate::Db::log_across): as [`commit`](Self::commit), with the
    /// log's marker in the same batch, so that a reopen after a crash applies this part from
    /// that log only if it is not here.
    #[cfg_attr(feature = "__internal", visibility::make(pub))]
    pub(crate) async fn commit_across(self, commit: &super::AcrossCommit) -> Result<(), TxnError> {
        self.commit_marked(commit.marker()).await
    }

    /// [`commit`](Self::commit), the writes carrying the cross-shard `marker` when given.
    async fn commit_marked(mut self, marker: Option<u64>) -> Result<(), TxnError> {
        if let Err(e) = self.check_alive() {
            self.finish(false);
            return Err(e);
        }
        let mut writes = std::mem::take(&mut self.writes);
        if let Some(id) = marker {
            let system = self
                .handle
                .create_table(crate::catalog::SYSTEM_TABLE)
                .await?;
            writes.set(system, &id.to_be_bytes(), Some(b""));
        }
        let result = if writes.is_empty() {
            if self.strict_release {
                // Writers held their locks until durable: what it read is durable.
                Ok(())
            } else {
                // What it read may be another's writes not yet durable: wait for them.
                self.release_locks();
                self.handle.wait_log_durable().await
            }
        } else if self.strict_release {
            let batch = WriteBatch::from_ops(writes.into_ops());
            self.handle.write(&batch).await
        } else {
            let batch = WriteBatch::from_ops(writes.into_ops());
            let release = EarlyRelease {
                shared: self.shared.clone(),
                age: self.age,
                keys: std::mem::take(&mut self.keys),
                ranges: std::mem::take(&mut self.ranges),
            };
            self.handle.write_then(&batch, move || drop(release)).await
        };
        self.finish(result.is_ok());
        Ok(result?)
    }

    /// Discards the writes and releases the locks (what dropping the transaction does).
    pub fn abort(mut self) {
        self.finish(false);
    }

    /// Releases every lock, wakes their waiters, and counts the end.
    fn finish(&mut self, committed: bool) {
        assert!(!self.finished, "a transaction finished twice");
        self.finished = true;
        self.writes = WriteSet::default();
        self.release_locks();
        if committed {
            self.shared.count_commit();
        } else {
            self.shared.count_abort();
        }
    }
}

impl Transaction {
    /// Releases every lock held and wakes their waiters.
    fn release_locks(&mut self) {
        self.shared
            .locks
            .release(self.age, &self.keys, &self.ranges);
        self.keys.clear();
        self.ranges.clear();
    }
}

/// A committing transaction's locks, released when this is dropped: by the commit path once
/// the writes are in the tree, or with the commit's future if it ends (fails, or is dropped)
/// before.
struct EarlyRelease {
    shared: Rc<TxnShared>,
    age: Age,
    keys: Vec<(TableId, Rc<[u8]>)>,
    ranges: Vec<(TableId, u64)>,
}

impl Drop for EarlyRelease {
    fn drop(&mut self) {
        self.shared
            .locks
            .release(self.age, &self.keys, &self.ranges);
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.finished {
            self.finish(false);
        }
    }
}
