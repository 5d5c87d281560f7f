//! [`DbTransaction`]: a serializable transaction on a [`Db`], from any thread, over every
//! shard it touches.
//!
//! A transaction is made of parts, one per shard it reaches (`part.rs`): each a transaction
//! of that shard's own database, begun by the first operation sent there, holding its locks
//! to the end (strict two-phase locking on each shard). Every part carries the one timestamp
//! drawn from the database's clock, shared by the shards, so wait-die on every shard compares
//! the same ages and every wait goes from an older transaction to a younger one: no wait cycle
//! can form across shards either. Because a part's siblings hold locks an older transaction
//! may wait for, a part that dies reports the conflict at once; the transaction aborts every
//! part, and only then does the dead part wait, holding nothing anywhere, for the lock in its
//! way to change, so the retry (same timestamp: older than every transaction begun since)
//! does not meet the same holder at once.
//!
//! Reads go to their shard at once (a read takes its lock there); writes wait in the
//! transaction, which answers reads of them, and go to their shards at the commit, one
//! request per shard that locks them there and finishes the part: a round trip per shard
//! rather than one per write. A write to the shard whose thread runs the transaction (a task
//! there) costs no round trip: it goes to that part at once, locked when made, as a
//! transaction of that shard's own database writes.
//!
//! Commit (`transaction_parts.rs`): a transaction that reached one shard commits that part in
//! the same request as its writes, one record of that shard's log, as a single-shard
//! transaction does. Reaching several, each part takes its writes, locks them and hands them
//! back once its shard's log is durable (a prepare, every lock still held).
//! When one part writes, it commits alone and the readers commit after it (their reads of
//! writes not yet durable wait, see `Transaction::commit`). When several write, their writes
//! are logged as one durable record of the cross-shard batch log ([`Db::log_across_async`]:
//! the commit point), then each part commits with that record's marker; a crash before a
//! part's commit is durable is repaired at the reopen, which applies that part from the batch
//! log. Until a part commits, its locks keep its rows from every other transaction, so no one
//! sees one part's writes without the others'.
//!
//! The blocking methods run the `*_async` ones on the calling thread (`block.rs`), refused on
//! a shard's thread as every blocking call is; tasks use the `*_async` ones, which run in
//! place on the task's own shard.

use super::block::block_on;
use super::part::PartStart;
use super::{Db, Table};
use crate::error::TxnError;
use crate::txn::{Isolation, TxnTimestamp};
use crate::{Direction, TableId};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;

/// Key-value pairs in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Attempts [`Db::transaction`] makes at most. Wait-die guarantees a retry eventually wins
/// (it grows older with every transaction begun after it); the bound is against a livelock
/// that a bug would cause, not a figure expected to be reached.
pub(super) const ATTEMPTS_MAX: u32 = 100_000;

/// A transaction on a [`Db`] (see the module documentation): `Send`, so any thread may
/// carry it, and ended by [`commit`](Self::commit), [`abort`](Self::abort) or dropping it
/// (an abort). Reads see the transaction's own writes.
#[must_use = "a transaction does nothing until it commits"]
pub struct DbTransaction {
    pub(super) db: Db,
    pub(super) start: PartStart,
    /// Shards with a part, in the order first reached; at most one entry per shard.
    pub(super) parts: Vec<usize>,
    /// The writes (`None`: a delete) and the shard each goes to, sent to their shards at
    /// the commit (see the module doc); reads of these keys are answered here.
    pub(super) writes: BTreeMap<(TableId, Vec<u8>), Written>,
    /// A write went to a part at once (its shard is the thread's own, see
    /// `DbTransaction::put_at`): the commit has writes even when `writes` is empty.
    pub(super) wrote_in_place: bool,
    /// The shard whose part died in a conflict (reported at once, see the module doc).
    pub(super) died: Option<usize>,
    /// The shard whose part ended in a failure other than a conflict (its locks went with
    /// it): the transaction can only abort now, every later read or commit is refused.
    pub(super) lost: Option<usize>,
    /// Shards whose part's last read saw data whose log was not durable yet: its commit must
    /// wait for that log even if it wrote nothing. A transaction that only read, and on no
    /// such shard, commits without waiting for its parts (see `transaction_parts.rs`).
    pub(super) unsynced: BTreeSet<usize>,
    /// Requests to parts are under way: when the transaction is dropped meanwhile (its
    /// future cancelled), the shards drop those parts when the requests end instead of
    /// keeping them open.
    pub(super) in_flight: bool,
    /// Committed or aborted: dropping it has nothing left to end.
    pub(super) ended: bool,
}

/// A write kept in the transaction until its commit: the shard it goes to, and the value
/// (`None`: a delete).
pub(super) type Written = (usize, Option<Vec<u8>>);

/// How a commit ended.
pub(super) enum Ended {
    Committed,
    /// A part died in a conflict: every part is aborted and the dead one waited out; retry
    /// with this fresh attempt (same timestamp). The error is the conflict.
    Retry(DbTransaction, TxnError),
    /// It failed otherwise (every part aborted, unless past the commit point).
    Failed(TxnError),
}

impl Db {
    /// Begins a serializable transaction.
    pub fn begin(&self) -> DbTransaction {
        self.begin_with(Isolation::Serializable)
    }

    /// Begins a transaction with `isolation`.
    pub fn begin_with(&self, isolation: Isolation) -> DbTransaction {
        let timestamp = TxnTimestamp::from_counter(self.next_clock());
        DbTransaction::new(self.clone(), isolation, timestamp)
    }

    /// Runs `body` in a serializable transaction and commits it, retrying (with the first
    /// attempt's timestamp, as wait-die requires) when an operation or the commit died in a
    /// conflict; returns `body`'s output. `body` may return its own error type (converted
    /// from [`TxnError`]): an error it returns aborts the transaction and, unless a conflict
    /// caused it, is returned. `body` may run several times: keep its effects in the
    /// transaction.
    pub fn transaction<T, E, F>(&self, body: F) -> Result<T, E>
    where
        F: FnMut(&mut DbTransaction) -> Result<T, E>,
        E: From<TxnError>,
    {
        self.transaction_with(Isolation::Serializable, body)
    }

    /// [`transaction`](Self::transaction) with `isolation`.
    pub fn transaction_with<T, E, F>(&self, isolation: Isolation, mut body: F) -> Result<T, E>
    where
        F: FnMut(&mut DbTransaction) -> Result<T, E>,
        E: From<TxnError>,
    {
        self.check_blocking_allowed().map_err(TxnError::from)?;
        let mut txn = self.begin_with(isolation);
        for attempt in 1..=ATTEMPTS_MAX {
            let last = attempt == ATTEMPTS_MAX;
            let output = body(&mut txn);
            txn = match output {
                Ok(value) => match block_on(txn.finish_commit(true)) {
                    Ended::Committed => return Ok(value),
                    Ended::Retry(fresh, _) if !last => fresh,
                    Ended::Retry(_, e) | Ended::Failed(e) => return Err(e.into()),
                },
                Err(e) => match block_on(txn.retry_after_error()) {
                    Some(fresh) if !last => fresh,
                    _ => return Err(e),
                },
            };
        }
        unreachable!("the last attempt returns")
    }

    /// [`transaction`](Self::transaction) for a task (on a shard or any runtime).
    pub async fn transaction_async<T, E, F>(&self, body: F) -> Result<T, E>
    where
        F: AsyncFnMut(&mut DbTransaction) -> Result<T, E>,
        E: From<TxnError>,
    {
        self.transaction_with_async(Isolation::Serializable, body)
            .await
    }

    /// [`transaction_with`](Self::transaction_with) for a task.
    pub async fn transaction_with_async<T, E, F>(
        &self,
        isolation: Isolation,
        mut body: F,
    ) -> Result<T, E>
    where
        F: AsyncFnMut(&mut DbTransaction) -> Result<T, E>,
        E: From<TxnError>,
    {
        let mut txn = self.begin_with(isolation);
        for attempt in 1..=ATTEMPTS_MAX {
            let last = attempt == ATTEMPTS_MAX;
            let output = body(&mut txn).await;
            txn = match output {
                Ok(value) => match txn.finish_commit(true).await {
                    Ended::Committed => return Ok(value),
                    Ended::Retry(fresh, _) if !last => fresh,
                    Ended::Retry(_, e) | Ended::Failed(e) => return Err(e.into()),
                },
                Err(e) => match txn.retry_after_error().await {
                    Some(fresh) if !last => fresh,
                    _ => return Err(e),
                },
            };
        }
        unreachable!("the last attempt returns")
    }

    /// The next value of the clock every shard's transactions draw from.
    fn next_clock(&self) -> u64 {
        self.shared.clock.fetch_add(1, Ordering::Relaxed)
    }
}

impl DbTransaction {
    /// An attempt with `timestamp` (a fresh one).
    pub(super) fn new(db: Db, isolation: Isolation, timestamp: TxnTimestamp) -> DbTransaction {
        let start = PartStart {
            isolation,
            timestamp,
            part_id: 0,
            hold_locks: false,
        };
        DbTransaction::attempt(db, start)
    }

    /// An attempt begun as `start` says, with a part id of its own (a retry keeps the
    /// first attempt's timestamp and settings).
    pub(super) fn attempt(db: Db, start: PartStart) -> DbTransaction {
        let part_id = db.next_clock();
        DbTransaction {
            db,
            start: PartStart { part_id, ..start },
            parts: Vec::new(),
            writes: BTreeMap::new(),
            wrote_in_place: false,
            died: None,
            lost: None,
            unsynced: BTreeSet::new(),
            in_flight: false,
            ended: false,
        }
    }

    /// The transaction's timestamp (its age for wait-die: smaller is older).
    pub fn timestamp(&self) -> TxnTimestamp {
        self.start.timestamp
    }

    /// The same operations on `table`.
    pub fn in_table<'t>(&'t mut self, table: &Table) -> InTable<'t> {
        InTable {
            txn: self,
            table: table.id(),
            shard: None,
        }
    }

    /// The same operations on `table` for keys that live on `shard`, whichever shard their
    /// hash names: for data a program places on the shards itself (written through
    /// [`Shard::local`](super::Shard::local)), as a schema partitioned by a column is (every
    /// table of TPC-C by its warehouse). Reads, scans and writes go to that shard only;
    /// locking, isolation and the commit are the same as for hashed keys. A program keeps
    /// each key on one shard (this transaction answers a read of a key it wrote from its
    /// own writes, whichever shard the read names).
    ///
    /// # Panics
    /// When `shard` is not below [`Db::shard_count`] (as [`Db::run_on`] does).
    pub fn on_shard(&mut self, table: TableId, shard: usize) -> InTable<'_> {
        assert!(
            shard < self.db.shard_count(),
            "shard {shard} out of range: the database has {}",
            self.db.shard_count()
        );
        InTable {
            txn: self,
            table,
            shard: Some(shard),
        }
    }

    /// Makes the commit release every part's locks only once its shard's log is durable
    /// (strict two-phase locking across the sync) rather than as soon as the writes are in
    /// the tree (see [`Transaction::hold_locks_until_durable`](crate::Transaction::hold_locks_until_durable)).
    /// Takes effect for parts begun after it; retries keep it.
    pub fn hold_locks_until_durable(&mut self) {
        assert!(self.parts.is_empty(), "set before the first operation");
        self.start.hold_locks = true;
    }

    /// The value of `key`, under a shared lock.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.in_default().get(key)
    }

    /// The value of `key`, under an exclusive lock (it is about to be written).
    pub fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.in_default().get_for_update(key)
    }

    /// The values of `keys`, in their order, each under a shared lock: one round trip to
    /// every shard involved, all at once, rather than one per key.
    pub fn get_many(&mut self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.in_default().get_many(keys)
    }

    /// [`get_many`](Self::get_many) under exclusive locks.
    pub fn get_many_for_update(
        &mut self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.in_default().get_many_for_update(keys)
    }

    /// Writes `value` under `key` at commit (the transaction reads it back meanwhile).
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.in_default().insert(key, value)
    }

    /// Removes `key` at commit.
    pub fn remove(&mut self, key: &[u8]) -> Result<(), TxnError> {
        self.in_default().remove(key)
    }

    /// Up to `limit` pairs with keys in `range`, in key order, under a shared range lock on
    /// every shard: no key can appear in or vanish from the range until the transaction ends.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        range: R,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        self.in_default().range(range, limit)
    }

    /// Up to `limit` pairs whose keys start with `prefix`, in key order, locked as
    /// [`range`](Self::range) locks.
    pub fn prefix(&mut self, prefix: &[u8], limit: usize) -> Result<Pairs, TxnError> {
        self.in_default().prefix(prefix, limit)
    }

    /// The last `limit` pairs with keys in `range`, in descending key order, locked as
    /// [`range`](Self::range) locks.
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        range: R,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        self.in_default().range_rev(range, limit)
    }

    /// [`get`](Self::get) for a task.
    pub async fn get_async(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.in_default().get_async(key).await
    }

    /// [`get_for_update`](Self::get_for_update) for a task.
    pub async fn get_for_update_async(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.in_default().get_for_update_async(key).await
    }

    /// [`get_many`](Self::get_many) for a task.
    pub async fn get_many_async(
        &mut self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.in_default().get_many_async(keys).await
    }

    /// [`get_many_for_update`](Self::get_many_for_update) for a task.
    pub async fn get_many_for_update_async(
        &mut self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.in_default().get_many_for_update_async(keys).await
    }

    /// [`insert`](Self::insert) for a task.
    pub async fn insert_async(&mut self, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.in_default().insert_async(key, value).await
    }

    /// [`remove`](Self::remove) for a task.
    pub async fn remove_async(&mut self, key: &[u8]) -> Result<(), TxnError> {
        self.in_default().remove_async(key).await
    }

    /// [`prefix`](Self::prefix) for a task.
    pub async fn prefix_async(&mut self, prefix: &[u8], limit: usize) -> Result<Pairs, TxnError> {
        self.in_default().prefix_async(prefix, limit).await
    }

    /// [`range`](Self::range) for a task.
    pub async fn range_async<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        range: R,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        self.in_default().range_async(range, limit).await
    }

    /// [`range_rev`](Self::range_rev) for a task.
    pub async fn range_rev_async<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        range: R,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        self.in_default().range_rev_async(range, limit).await
    }

    /// Reads the pages that hold `keys` (table, key) into their shards' pools, all at once,
    /// taking no lock and returning nothing, so that the reads that follow find them
    /// resident (see [`Transaction::prefetch`](crate::Transaction::prefetch)); at most 64
    /// keys. For a task: faults overlap instead of following one another.
    pub async fn prefetch_async(&self, keys: &[(TableId, &[u8])]) -> Result<(), TxnError> {
        self.prefetch_at(None, keys).await
    }

    /// [`prefetch_async`](Self::prefetch_async) of keys that live on `shard` (see
    /// [`on_shard`](Self::on_shard)).
    pub async fn prefetch_on_async(
        &self,
        shard: usize,
        keys: &[(TableId, &[u8])],
    ) -> Result<(), TxnError> {
        assert!(shard < self.db.shard_count(), "shard {shard} out of range");
        self.prefetch_at(Some(shard), keys).await
    }

    /// Commits (see the module documentation): durable per the database's mode on return.
    /// On an error nothing is committed, unless it came after the commit point of a
    /// transaction whose writes span shards (a part failed to commit: the reopen applies it
    /// from the batch log, and the error says which). A [`TxnError::Conflict`] means: run
    /// it again, with [`Db::transaction`] or by hand.
    pub fn commit(self) -> Result<(), TxnError> {
        self.db.check_blocking_allowed()?;
        block_on(self.commit_async())
    }

    /// [`commit`](Self::commit) for a task.
    pub async fn commit_async(self) -> Result<(), TxnError> {
        match self.finish_commit(false).await {
            Ended::Committed => Ok(()),
            Ended::Retry(_, e) | Ended::Failed(e) => Err(e),
        }
    }

    /// Discards the writes and releases every lock, once every shard has done so (dropping
    /// the transaction does the same without waiting; so does this on a shard's thread). A
    /// transaction retried by hand after a conflict meets the same holder again unless that
    /// one ended meanwhile; [`Db::transaction`] first waits for it to.
    pub fn abort(self) {
        if self.db.check_blocking_allowed().is_ok() {
            block_on(self.abort_async());
        }
    }

    /// [`abort`](Self::abort) for a task.
    pub async fn abort_async(mut self) {
        self.end_parts(false).await;
    }

    fn in_default(&mut self) -> InTable<'_> {
        InTable {
            txn: self,
            table: TableId::DEFAULT,
            shard: None,
        }
    }
}

/// The operations of a [`DbTransaction`] on one table (see [`DbTransaction::in_table`]).
pub struct InTable<'t> {
    txn: &'t mut DbTransaction,
    table: TableId,
    /// The shard every key goes to ([`DbTransaction::on_shard`]); `None`: its hash's.
    shard: Option<usize>,
}

impl InTable<'_> {
    /// See [`DbTransaction::get`].
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.txn.db.check_blocking_allowed()?;
        block_on(self.txn.get_at(self.shard, self.table, key, false))
    }

    /// See [`DbTransaction::get_for_update`].
    pub fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.txn.db.check_blocking_allowed()?;
        block_on(self.txn.get_at(self.shard, self.table, key, true))
    }

    /// See [`DbTransaction::get_many`].
    pub fn get_many(&mut self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.txn.db.check_blocking_allowed()?;
        block_on(self.txn.get_many_at(self.shard, self.table, keys, false))
    }

    /// See [`DbTransaction::get_many_for_update`].
    pub fn get_many_for_update(
        &mut self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.txn.db.check_blocking_allowed()?;
        block_on(self.txn.get_many_at(self.shard, self.table, keys, true))
    }

    /// See [`DbTransaction::insert`].
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.txn.db.check_blocking_allowed()?;
        block_on(self.txn.put_at(self.shard, self.table, key, Some(value)))
    }

    /// See [`DbTransaction::remove`].
    pub fn remove(&mut self, key: &[u8]) -> Result<(), TxnError> {
        self.txn.db.check_blocking_allowed()?;
        block_on(self.txn.put_at(self.shard, self.table, key, None))
    }

    /// See [`DbTransaction::range`].
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        range: R,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        self.txn.db.check_blocking_allowed()?;
        let bounds = owned_bounds(&range);
        block_on(
            self.txn
                .scan_at(self.shard, self.table, bounds, Direction::Forward, limit),
        )
    }

    /// See [`DbTransaction::range_rev`].
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        range: R,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        self.txn.db.check_blocking_allowed()?;
        let bounds = owned_bounds(&range);
        block_on(
            self.txn
                .scan_at(self.shard, self.table, bounds, Direction::Reverse, limit),
        )
    }

    /// See [`DbTransaction::prefix`].
    pub fn prefix(&mut self, prefix: &[u8], limit: usize) -> Result<Pairs, TxnError> {
        self.txn.db.check_blocking_allowed()?;
        block_on(self.prefix_async(prefix, limit))
    }

    /// [`get`](Self::get) for a task.
    pub async fn get_async(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.txn.get_at(self.shard, self.table, key, false).await
    }

    /// [`get_for_update`](Self::get_for_update) for a task.
    pub async fn get_for_update_async(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.txn.get_at(self.shard, self.table, key, true).await
    }

    /// [`get_many`](Self::get_many) for a task.
    pub async fn get_many_async(
        &mut self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.txn
            .get_many_at(self.shard, self.table, keys, false)
            .await
    }

    /// [`get_many_for_update`](Self::get_many_for_update) for a task.
    pub async fn get_many_for_update_async(
        &mut self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.txn
            .get_many_at(self.shard, self.table, keys, true)
            .await
    }

    /// [`insert`](Self::insert) for a task.
    pub async fn insert_async(&mut self, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.txn
            .put_at(self.shard, self.table, key, Some(value))
            .await
    }

    /// [`remove`](Self::remove) for a task.
    pub async fn remove_async(&mut self, key: &[u8]) -> Result<(), TxnError> {
        self.txn.put_at(self.shard, self.table, key, None).await
    }

    /// [`range`](Self::range) for a task.
    pub async fn range_async<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        range: R,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        let bounds = owned_bounds(&range);
        (self.txn)
            .scan_at(self.shard, self.table, bounds, Direction::Forward, limit)
            .await
    }

    /// [`range_rev`](Self::range_rev) for a task.
    pub async fn range_rev_async<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        range: R,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        let bounds = owned_bounds(&range);
        (self.txn)
            .scan_at(self.shard, self.table, bounds, Direction::Reverse, limit)
            .await
    }

    /// [`prefix`](Self::prefix) for a task.
    pub async fn prefix_async(&mut self, prefix: &[u8], limit: usize) -> Result<Pairs, TxnError> {
        let bounds = prefix_bounds(prefix);
        (self.txn)
            .scan_at(self.shard, self.table, bounds, Direction::Forward, limit)
            .await
    }
}

/// A range's bounds, owned.
fn owned_bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(range: &R) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| b.map(|k| k.as_ref().to_vec());
    (own(range.start_bound()), own(range.end_bound()))
}

/// The bounds of the keys that start with `prefix`.
fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let end = super::prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
    (Bound::Included(prefix.to_vec()), end)
}
