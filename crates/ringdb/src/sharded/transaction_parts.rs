//! How a [`DbTransaction`] drives its parts: the requests to them, the commit protocol and
//! the end of every part (see `transaction.rs` for why it is shaped so).

use super::part::{self, PartOp, PartReply, Write};
use super::transaction::{DbTransaction, Ended, Pairs, Written};
use super::AcrossCommit;
use crate::db::{DbHandle, WriteBatch};
use crate::error::{ShardError, TxnError};
use crate::txn::prefetch::{prefetch_keys, PREFETCH_KEYS_MAX};
use crate::{Direction, TableId};
use futures_util::future::join_all;
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

/// A reply from a part, or why it did not come.
type Reply = Result<Result<PartReply, TxnError>, ShardError>;

impl DbTransaction {
    /// The value of `key` in `table`, locked shared (exclusive when `update`), on `shard`
    /// (`None`: the key's hash's).
    pub(super) async fn get_at(
        &mut self,
        shard: Option<usize>,
        table: TableId,
        key: &[u8],
        update: bool,
    ) -> Result<Option<Vec<u8>>, TxnError> {
        self.check_parts()?;
        if let Some((_, written)) = self.written(table, key) {
            return Ok(written.clone());
        }
        let shard = shard.unwrap_or_else(|| self.db.shard_of(key));
        if let Some(handle) = self.db.local_handle(shard) {
            self.note_part(shard);
            self.in_flight = true;
            let read = part::get_here(&handle, shard, self.start, (table, key), update).await;
            self.in_flight = false;
            let (value, durable) = self.noted_here(shard, read)?;
            self.note_durable(shard, durable);
            return Ok(value);
        }
        let keys = vec![key.to_vec()];
        // Boxed: the request's future is large, and this future (every get's, also on the
        // own shard) would carry its size.
        let request = Box::pin(self.send(
            shard,
            PartOp::Get {
                table,
                keys,
                update,
            },
        ));
        match request.await? {
            PartReply::Values {
                mut values,
                durable,
            } => {
                self.note_durable(shard, durable);
                assert_eq!(values.len(), 1, "one value per key");
                Ok(values.pop().flatten())
            }
            other => unreachable!("a get is answered with values, not {other:?}"),
        }
    }

    /// This transaction's write of `key` in `table`, if it made one (kept here, not yet on
    /// its shard).
    fn written(&self, table: TableId, key: &[u8]) -> Option<&Written> {
        if self.writes.is_empty() {
            return None;
        }
        self.writes.get(&(table, key.to_vec()))
    }

    /// The values of `keys` in `table`, in their order, locked shared (exclusive when
    /// `update`), on `shard` (`None`: each key's hash's): one request per shard involved,
    /// all at once.
    pub(super) async fn get_many_at(
        &mut self,
        shard: Option<usize>,
        table: TableId,
        keys: &[&[u8]],
        update: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        self.check_parts()?;
        let mut values = vec![None; keys.len()];
        let mut positions: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (position, key) in keys.iter().enumerate() {
            match self.written(table, key) {
                Some((_, written)) => values[position] = written.clone(),
                None => positions
                    .entry(shard.unwrap_or_else(|| self.db.shard_of(key)))
                    .or_default()
                    .push(position),
            }
        }
        let shards: Vec<usize> = positions.keys().copied().collect();
        let get = |shard| PartOp::Get {
            table,
            keys: positions[&shard]
                .iter()
                .map(|&p| keys[p].to_vec())
                .collect(),
            update,
        };
        for (shard, reply) in self.send_each(&shards, get).await {
            match reply? {
                PartReply::Values {
                    values: found,
                    durable,
                } => {
                    self.note_durable(shard, durable);
                    assert_eq!(found.len(), positions[&shard].len());
                    for (&position, value) in positions[&shard].iter().zip(found) {
                        values[position] = value;
                    }
                }
                other => unreachable!("a get is answered with values, not {other:?}"),
            }
        }
        Ok(values)
    }

    /// Writes (`Some`) or deletes (`None`) `key` of `table` at commit, on `shard` (`None`:
    /// the key's hash's): kept here until then, or, on the thread's own shard, locked and
    /// buffered in its part now (no round trip to save there).
    pub(super) async fn put_at(
        &mut self,
        shard: Option<usize>,
        table: TableId,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), TxnError> {
        assert!(!self.ended, "an ended transaction writes nothing");
        let shard = shard.unwrap_or_else(|| self.db.shard_of(key));
        assert!(shard < self.db.shard_count());
        let local = self.db.local_handle(shard);
        // A handle of the own shard means a shard's thread; otherwise blocking is refused
        // only on a shard's thread.
        if local.is_some() || self.db.check_blocking_allowed().is_err() {
            // On a shard's thread (a task): locked when made, as a transaction of one shard
            // writes: no round trip on the thread's own shard, and on another one a round
            // trip now instead of a prepare, holding every lock, at the commit.
            self.check_parts()?;
            // A value written before from another thread (the transaction is `Send`) is
            // replaced by this one.
            if self.written(table, key).is_some() {
                self.writes.remove(&(table, key.to_vec()));
            }
            self.wrote_in_place = true;
            if let Some(handle) = local {
                self.note_part(shard);
                self.in_flight = true;
                let written =
                    part::write_here(&handle, shard, self.start, (table, key), value).await;
                self.in_flight = false;
                return self.noted_here(shard, written);
            }
            let (key, value) = (key.to_vec(), value.map(<[u8]>::to_vec));
            let write = PartOp::Write { table, key, value };
            // Boxed as a get's request is (see `get_at`).
            return Box::pin(self.send(shard, write)).await.map(drop);
        }
        let write = (shard, value.map(<[u8]>::to_vec));
        self.writes.insert((table, key.to_vec()), write);
        Ok(())
    }

    /// Up to `limit` pairs of `table` within `bounds`, in key order walked in `direction`: the
    /// range locked and read on `shard`, or (`None`) on every shard at once (keys are spread
    /// by hash), the parts merged.
    pub(super) async fn scan_at(
        &mut self,
        shard: Option<usize>,
        table: TableId,
        bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        direction: Direction,
        limit: usize,
    ) -> Result<Pairs, TxnError> {
        self.check_parts()?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let shards: Vec<usize> = match shard {
            Some(shard) => vec![shard],
            None => (0..self.db.shard_count()).collect(),
        };
        let deleted = (self.writes_within(table, &bounds))
            .filter(|(_, (_, value))| value.is_none())
            .count();
        let scan = |_| PartOp::Scan {
            table,
            start: bounds.0.clone(),
            end: bounds.1.clone(),
            direction,
            limit: limit.saturating_add(deleted),
        };
        let own_writes = self.writes_within(table, &bounds).next().is_some();
        let mut pairs = BTreeMap::new();
        for (shard, reply) in self.send_each(&shards, scan).await {
            match reply? {
                // One shard and nothing of this transaction's to merge: its rows as they are.
                PartReply::Rows { rows, durable } if shards.len() == 1 && !own_writes => {
                    self.note_durable(shard, durable);
                    assert!(rows.len() <= limit, "a part returns at most the limit");
                    return Ok(rows);
                }
                PartReply::Rows { rows, durable } => {
                    self.note_durable(shard, durable);
                    pairs.extend(rows)
                }
                other => unreachable!("a scan is answered with rows, not {other:?}"),
            }
        }
        // The transaction's own writes over what the shards hold: each shard returned its
        // first `limit` plus as many as this transaction deletes in the range, so the first
        // `limit` of the merge (in `direction`) are here.
        for (key, (written_to, value)) in self.writes_within(table, &bounds) {
            if shard.is_some_and(|shard| shard != *written_to) {
                continue;
            }
            match value {
                Some(value) => pairs.insert(key.clone(), value.clone()),
                None => pairs.remove(key),
            };
        }
        Ok(match direction {
            Direction::Forward => pairs.into_iter().take(limit).collect(),
            Direction::Reverse => pairs.into_iter().rev().take(limit).collect(),
        })
    }

    /// Reads the pages of `keys` into their shards' pools, without locks: each key on
    /// `shard` (`None`: its hash's), one request per shard, all at once.
    pub(super) async fn prefetch_at(
        &self,
        shard: Option<usize>,
        keys: &[(TableId, &[u8])],
    ) -> Result<(), TxnError> {
        self.check_parts()?;
        if let Some(handle) = shard.and_then(|shard| self.db.local_handle(shard)) {
            // On this thread's own shard: read there directly, nothing to copy or send.
            return prefetch_keys(&handle, keys.iter().map(|(table, key)| (*table, *key))).await;
        }
        let mut by_shard: BTreeMap<usize, Vec<(TableId, Vec<u8>)>> = BTreeMap::new();
        for (table, key) in keys.iter().take(PREFETCH_KEYS_MAX) {
            let shard = shard.unwrap_or_else(|| self.db.shard_of(key));
            by_shard
                .entry(shard)
                .or_default()
                .push((*table, key.to_vec()));
        }
        let requests = by_shard.into_iter().map(|(shard, keys)| {
            let db = self.db.clone();
            async move {
                let read = move |handle: DbHandle| async move {
                    let keys = keys.iter().map(|(table, key)| (*table, key.as_slice()));
                    prefetch_keys(&handle, keys).await
                };
                db.call_async(shard, read).await
            }
        });
        for reply in join_all(requests).await {
            reply??;
        }
        Ok(())
    }

    /// This transaction's writes to `table` within `bounds`, in key order.
    fn writes_within<'w>(
        &'w self,
        table: TableId,
        bounds: &'w (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> impl Iterator<Item = (&'w Vec<u8>, &'w Written)> + 'w {
        let within = (bounds.0.as_ref(), bounds.1.as_ref());
        self.writes
            .range((table, Vec::new())..)
            .take_while(move |((t, _), _)| *t == table)
            .map(|((_, key), value)| (key, value))
            .filter(move |(key, _)| within.contains(*key))
    }

    /// Sends `op` to this transaction's part on `shard` (begun there by the first).
    async fn send(&mut self, shard: usize, op: PartOp) -> Result<PartReply, TxnError> {
        assert!(!self.ended, "an ended transaction sends nothing");
        self.note_part(shard);
        let start = self.start;
        self.in_flight = true;
        let reply = (self.db)
            .call_async(shard, move |handle| part::serve(handle, shard, start, op))
            .await;
        self.in_flight = false;
        self.noted(shard, reply)
    }

    /// Sends `op(shard)` to the part on each of `shards` at once; the replies in that order.
    async fn send_each(
        &mut self,
        shards: &[usize],
        mut op: impl FnMut(usize) -> PartOp,
    ) -> Vec<(usize, Result<PartReply, TxnError>)> {
        assert!(!self.ended, "an ended transaction sends nothing");
        if let [shard] = shards {
            // One shard (the common case): no futures to join, and in place when it is the
            // thread's own.
            return vec![(*shard, self.send(*shard, op(*shard)).await)];
        }
        shards.iter().for_each(|&shard| self.note_part(shard));
        let start = self.start;
        let requests = shards.iter().map(|&shard| {
            let (db, op) = (self.db.clone(), op(shard));
            async move {
                let request = move |handle| part::serve(handle, shard, start, op);
                (shard, db.call_async(shard, request).await)
            }
        });
        self.in_flight = true;
        let replies = join_all(requests).await;
        self.in_flight = false;
        replies
            .into_iter()
            .map(|(shard, reply)| (shard, self.noted(shard, reply)))
            .collect()
    }

    /// Records a part on `shard` (once).
    fn note_part(&mut self, shard: usize) {
        if !self.parts.contains(&shard) {
            self.parts.push(shard);
        }
        assert!(self.parts.len() <= self.db.shard_count());
    }

    /// `reply` from the part on `shard`, noting a conflict it died in, or its loss (any
    /// other failure ends the part there).
    fn noted(&mut self, shard: usize, reply: Reply) -> Result<PartReply, TxnError> {
        let reply = reply.map_err(TxnError::from).and_then(|r| r);
        self.noted_here(shard, reply)
    }

    /// [`noted`](Self::noted) for an operation run directly on the thread's own shard.
    fn noted_here<T>(&mut self, shard: usize, reply: Result<T, TxnError>) -> Result<T, TxnError> {
        match &reply {
            Err(e) if e.is_conflict() => _ = self.died.get_or_insert(shard),
            Err(_) => _ = self.lost.get_or_insert(shard),
            Ok(_) => {}
        }
        reply
    }

    /// Notes whether everything the part on `shard` has read is durable (its last read says
    /// so for all before it: the log only grows durable).
    fn note_durable(&mut self, shard: usize, durable: bool) {
        match durable {
            true => self.unsynced.remove(&shard),
            false => self.unsynced.insert(shard),
        };
    }

    /// Refuses to go on once a part was lost: its reads' locks are gone, so nothing read
    /// since could be serializable with what it read.
    fn check_parts(&self) -> Result<(), TxnError> {
        match self.lost {
            Some(shard) => Err(TxnError::PartLost { shard }),
            None => Ok(()),
        }
    }

    /// Commits every part (see the module doc of `transaction.rs`).
    /// With `wait_out`, a part that died in a conflict waits for the lock in its way to
    /// change before this returns (for a retry that follows at once).
    pub(super) async fn finish_commit(mut self, wait_out: bool) -> Ended {
        if let Err(lost) = self.check_parts() {
            return self.failed(lost, wait_out).await;
        }
        let read_only = self.writes.is_empty() && !self.wrote_in_place;
        if read_only && self.died.is_none() && self.unsynced.is_empty() {
            return self.commit_released().await;
        }
        let mut writes = self.writes_by_shard();
        writes.keys().for_each(|&shard| self.note_part(shard));
        let parts = self.parts.clone();
        match parts.as_slice() {
            [] => {
                self.ended = true;
                Ended::Committed
            }
            [only] => {
                let writes = writes.remove(only).unwrap_or_default();
                let finish = PartOp::Finish {
                    writes,
                    commit: true,
                };
                match self.send(*only, finish).await {
                    Ok(_) => {
                        self.ended = true;
                        Ended::Committed
                    }
                    Err(e) => self.failed(e, wait_out).await,
                }
            }
            _ if read_only => self.commit_read_only(parts, wait_out).await,
            _ if writes.is_empty() && self.died.is_none() && !self.db.shared.logs_across() => {
                self.commit_unlogged(parts, wait_out).await
            }
            _ => self.commit_spanning(parts, writes, wait_out).await,
        }
    }

    /// Commits a transaction that only read, and only data already durable, without waiting
    /// for its parts: each has taken every lock it needs and has nothing to write or wait
    /// for, so its commit only releases locks. That goes to the other shards as requests
    /// not waited for (each shard serves its requests in order, so this thread's next
    /// request there finds them released); a part on this thread's own shard ends here.
    async fn commit_released(mut self) -> Ended {
        assert!(self.writes.is_empty() && self.unsynced.is_empty());
        let parts = std::mem::take(&mut self.parts);
        let (here, elsewhere): (Vec<usize>, Vec<usize>) = parts
            .into_iter()
            .partition(|&shard| self.db.is_local(shard));
        self.ended = true;
        let start = self.start;
        for shard in elsewhere {
            let commit = move |handle| part::serve(handle, shard, start, PartOp::Commit(None));
            // A shard that is down took the part's locks with it; what it read was durable.
            drop(self.db.submit(shard, commit));
        }
        for shard in here {
            let commit = move |handle| part::serve(handle, shard, start, PartOp::Commit(None));
            let _ = self.db.call_async(shard, commit).await;
        }
        Ended::Committed
    }

    /// Commits parts on several shards that wrote nothing: every lock the transaction needs
    /// is held already (its reads are done), so the parts may end in any order, each once its
    /// shard's log is durable up to what it read. One round, all parts at once, instead of a
    /// prepare round and a commit round.
    async fn commit_read_only(mut self, parts: Vec<usize>, wait_out: bool) -> Ended {
        assert!(
            self.writes.is_empty() && !self.wrote_in_place,
            "a read-only commit"
        );
        let committed = self.send_each(&parts, |_| PartOp::Commit(None)).await;
        match committed.into_iter().find_map(|(_, reply)| reply.err()) {
            None => {
                self.ended = true;
                Ended::Committed
            }
            Some(e) => self.failed(e, wait_out).await,
        }
    }

    /// Commits parts on several shards that hold their writes already (locked when made)
    /// where there is no log to make the commit atomic across a crash: each part's commit
    /// only applies its writes and releases its locks, and none can conflict any more. The
    /// part on this thread's own shard first (its locks go at once, not a round trip later),
    /// then the others at once. A transaction holds every lock it takes until its commit,
    /// so one part's writes are never seen without the others': a reader of both waits for
    /// the part not yet committed.
    async fn commit_unlogged(mut self, parts: Vec<usize>, wait_out: bool) -> Ended {
        assert!(self.writes.is_empty() && self.died.is_none() && !self.db.shared.logs_across());
        let (here, elsewhere): (Vec<usize>, Vec<usize>) = parts
            .into_iter()
            .partition(|&shard| self.db.is_local(shard));
        for shard in here {
            if let Err(e) = self.send(shard, PartOp::Commit(None)).await {
                return self.failed(e, wait_out).await;
            }
        }
        let committed = self.send_each(&elsewhere, |_| PartOp::Commit(None)).await;
        self.ended = true;
        let first_error = committed.into_iter().find_map(|(_, reply)| reply.err());
        after_commit_point(None, first_error)
    }

    /// The buffered writes, taken, by shard.
    fn writes_by_shard(&mut self) -> BTreeMap<usize, Vec<Write>> {
        let mut by_shard: BTreeMap<usize, Vec<Write>> = BTreeMap::new();
        for ((table, key), (shard, value)) in std::mem::take(&mut self.writes) {
            by_shard.entry(shard).or_default().push((table, key, value));
        }
        by_shard
    }

    /// Commits parts on several shards: each takes its writes and hands them back once its
    /// shard's log is durable (a prepare); then, when more than one part writes, the record
    /// of the cross-shard batch log that is the commit point; then each part commits.
    async fn commit_spanning(
        mut self,
        parts: Vec<usize>,
        mut writes_by_shard: BTreeMap<usize, Vec<Write>>,
        wait_out: bool,
    ) -> Ended {
        let mut writes: Vec<(usize, WriteBatch)> = Vec::with_capacity(parts.len());
        let prepare = |shard| PartOp::Finish {
            writes: writes_by_shard.remove(&shard).unwrap_or_default(),
            commit: false,
        };
        for (shard, prepared) in self.send_each(&parts, prepare).await {
            match prepared {
                Ok(PartReply::Writes(batch)) if batch.is_empty() => {}
                Ok(PartReply::Writes(batch)) => writes.push((shard, batch)),
                Ok(other) => unreachable!("a prepare is answered with writes, not {other:?}"),
                Err(e) => return self.failed(e, wait_out).await,
            }
        }
        let across = if writes.len() > 1 {
            match self.db.log_across_async(&writes).await {
                Ok(across) => Some(across),
                Err(e) => return self.failed(e.into(), wait_out).await,
            }
        } else {
            None
        };
        // Past the commit point when `across` is set: a part that fails to commit now is
        // applied from the batch log at the reopen.
        let marked = |shard| across.filter(|_| writes.iter().any(|(s, _)| *s == shard));
        let committed = self.send_each(&parts, |s| PartOp::Commit(marked(s))).await;
        self.ended = true;
        let first_error = committed.into_iter().find_map(|(_, r)| r.err());
        if let Some(across) = across {
            self.db.across_done(across, first_error.is_none());
        }
        after_commit_point(across, first_error)
    }

    /// Aborts every part after `error` (see [`end_parts`](Self::end_parts) for `wait_out`);
    /// a fresh attempt to retry with when a conflict caused it.
    async fn failed(mut self, error: TxnError, wait_out: bool) -> Ended {
        let died = self.died.is_some();
        let (db, start) = (self.db.clone(), self.start);
        self.end_parts(wait_out).await;
        if died && error.is_conflict() {
            return Ended::Retry(DbTransaction::attempt(db, start), error);
        }
        Ended::Failed(error)
    }

    /// Ends every part after the body of [`Db::transaction`](super::Db::transaction) failed:
    /// a fresh attempt when a part died in a conflict.
    pub(super) async fn retry_after_error(mut self) -> Option<DbTransaction> {
        let died = self.died.is_some();
        let (db, start) = (self.db.clone(), self.start);
        self.end_parts(true).await;
        died.then(|| DbTransaction::attempt(db, start))
    }

    /// Aborts every part. With `wait_out` (a retry follows at once), the part that died in a
    /// conflict is ended last and waits, holding nothing anywhere, for the lock in its way to
    /// change. Not otherwise: the holder may be another transaction of the very thread that
    /// aborts. Failures are of shards that are gone, whose locks went with them.
    pub(super) async fn end_parts(&mut self, wait_out: bool) {
        let parts = std::mem::take(&mut self.parts);
        let waiting = self.died.filter(|_| wait_out);
        let others: Vec<usize> = parts.into_iter().filter(|s| Some(*s) != waiting).collect();
        let _ = self
            .send_each(&others, |_| PartOp::Abort { in_flight: false })
            .await;
        if let Some(shard) = waiting {
            let _ = self.send(shard, PartOp::WaitOut).await;
        }
        self.parts.clear();
        self.ended = true;
    }
}

/// How a commit ended once past its parts' prepares: committed, or the first part's error.
fn after_commit_point(across: Option<AcrossCommit>, first_error: Option<TxnError>) -> Ended {
    match (first_error, across) {
        (None, _) => Ended::Committed,
        (Some(e), Some(across)) => {
            tracing::error!(
                "cross-shard transaction commit {}: a part failed after the commit point \
                 (the reopen applies it): {e}",
                across.id()
            );
            Ended::Failed(e)
        }
        (Some(e), None) => Ended::Failed(e),
    }
}

impl Drop for DbTransaction {
    /// Aborts every part without waiting (requests pushed to the shards).
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let in_flight = self.in_flight;
        let start = self.start;
        for &shard in &self.parts {
            let abort =
                move |handle| part::serve(handle, shard, start, PartOp::Abort { in_flight });
            // A shard that is down took its locks with it.
            drop(self.db.submit(shard, abort));
        }
    }
}
