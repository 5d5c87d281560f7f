//! [`TpccTxn`]: the transaction the five TPC-C transactions run in. On one database it is a
//! `ringdb::Transaction` and nothing more. On a database of several shards (warehouses
//! partitioned, `placement.rs`) it is that transaction on the home warehouse's shard plus a
//! part on each other shard it touches (a remote warehouse's STOCK in NewOrder, a remote
//! customer in Payment), each part a transaction of that shard's own (`participant.rs`).
//!
//! Why it stays serializable: every part holds its locks to the end (strict two-phase
//! locking on each shard), and all parts carry the one timestamp drawn from a counter the
//! shards share, so wait-die on every shard compares the same ages and every wait, local or
//! through a part, goes from an older transaction to a younger one: no cycle can form across
//! shards either. A conflict in any part aborts every part; the retry keeps the timestamp.
//!
//! Once a transaction has a part elsewhere, a part that dies in a conflict reports it at
//! once: a lone transaction first waits, holding nothing, for the lock in its way to change,
//! but a part's siblings still hold locks that an older transaction may wait for, so that
//! wait could close a cycle.
//!
//! Commit: the home part first; if it fails, the other parts abort and nothing is changed.
//! Then each other part. Until a part commits, its locks keep its old rows from every other
//! transaction, so nobody sees one part's writes without the others'.
//!
//! With a log, a crash must not keep one part's writes without the others': when more than
//! one shard writes, every part first hands its writes over (`Prepare`, locks still held),
//! they are logged as one durable record of the cross-shard batch log (`Db::log_across`: the
//! commit point), and only then does each part commit, its batch carrying that record's
//! marker; a reopen applies the parts whose marker is missing from that log.

use super::error::TpccError;
use super::participant::{self, PartOp, PartReply, PartStart};
use super::placement::Placement;
use super::tables::TpccTables;
use ringdb::{Db, Direction, Isolation, TableId, Transaction, TxnTimestamp};
use std::cell::Cell;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Key-value pairs a scan returns, in its order.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// What the transactions of one shard share when the warehouses span several shards.
pub struct SpanContext {
    /// The database.
    pub db: Db,
    /// Where each warehouse lives.
    pub placement: Placement,
    /// The shard these transactions run on (their home warehouses').
    pub home_shard: usize,
    /// The tables (ITEM stays local).
    pub tables: TpccTables,
    /// The counter every shard draws timestamps from (and part ids: unique per attempt).
    pub clock: Arc<AtomicU64>,
    /// Transactions committed with a part on another shard.
    pub spanning_commits: Cell<u64>,
    /// Operations sent to another shard.
    pub remote_operations: Cell<u64>,
    /// The database has a log: a commit whose writes span shards goes through the
    /// cross-shard batch log first (`Db::log_across`).
    pub logged: bool,
}

impl SpanContext {
    /// A fresh timestamp, younger than every one drawn before on any shard.
    pub fn next_timestamp(&self) -> TxnTimestamp {
        TxnTimestamp::from_counter(self.clock.fetch_add(1, Ordering::Relaxed))
    }
}

/// A TPC-C transaction: on one shard, or spanning several (see the module doc).
pub struct TpccTxn {
    home: Transaction,
    span: Option<Span>,
}

/// Where a spanning transaction's part died in a conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Died {
    Home,
    On(usize),
}

/// The parts of a spanning transaction on other shards.
struct Span {
    context: std::rc::Rc<SpanContext>,
    start: PartStart,
    /// Shards with a part (at most one entry per shard: bounded by the shard count).
    parts: Vec<usize>,
    /// The part that died in a conflict, reported at once: it waits for the lock in its way
    /// only after every other part has aborted.
    died: Option<Died>,
}

impl TpccTxn {
    /// A transaction on one database.
    pub fn local(home: Transaction) -> TpccTxn {
        TpccTxn { home, span: None }
    }

    /// `home` (begun on the home shard with a timestamp from `context`'s clock) and the
    /// parts it will need on other shards.
    pub fn spanning(
        home: Transaction,
        isolation: Isolation,
        context: std::rc::Rc<SpanContext>,
    ) -> TpccTxn {
        let start = PartStart {
            isolation,
            timestamp: home.timestamp(),
            part_id: context.clock.fetch_add(1, Ordering::Relaxed),
        };
        let span = Span {
            context,
            start,
            parts: Vec::new(),
            died: None,
        };
        TpccTxn {
            home,
            span: Some(span),
        }
    }

    /// The timestamp to retry with after a conflict.
    pub fn timestamp(&self) -> TxnTimestamp {
        self.home.timestamp()
    }

    /// Releases the home part's locks only once its commit is durable.
    pub fn hold_locks_until_durable(&mut self) {
        self.home.hold_locks_until_durable();
    }

    /// Whether warehouse `w` lives on another shard than this transaction's home.
    pub fn is_elsewhere(&self, w: u32) -> bool {
        self.span.as_ref().is_some_and(|span| {
            span.context.placement.shard_of_warehouse(w) != span.context.home_shard
        })
    }

    /// The shard `key` of `table` lives on when that is not the home shard.
    fn remote_shard(&self, table: TableId, key: &[u8]) -> Option<usize> {
        let span = self.span.as_ref()?;
        let context = &span.context;
        let shard = context
            .placement
            .shard_of_key(&context.tables, table, key)?;
        (shard != context.home_shard).then_some(shard)
    }

    /// The value of `key` in `table`, under a shared lock.
    pub async fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, TpccError> {
        match self.remote_shard(table, key) {
            None => {
                let read = self.home.get(table, key).await;
                self.noted(read)
            }
            Some(shard) => {
                let op = PartOp::Get {
                    table,
                    key: key.to_vec(),
                    update: false,
                };
                self.remote(shard, op).await?.into_value()
            }
        }
    }

    /// The value of `key` in `table`, under an exclusive lock (it will be written).
    pub async fn get_for_update(
        &mut self,
        table: TableId,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, TpccError> {
        match self.remote_shard(table, key) {
            None => {
                let read = self.home.get_for_update(table, key).await;
                self.noted(read)
            }
            Some(shard) => {
                let op = PartOp::Get {
                    table,
                    key: key.to_vec(),
                    update: true,
                };
                self.remote(shard, op).await?.into_value()
            }
        }
    }

    /// Writes `value` under `key` in `table` at commit.
    pub async fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), TpccError> {
        match self.remote_shard(table, key) {
            None => {
                let written = self.home.put(table, key, value).await;
                self.noted(written)
            }
            Some(shard) => {
                let op = PartOp::Put {
                    table,
                    key: key.to_vec(),
                    value: value.to_vec(),
                };
                self.remote(shard, op).await.map(drop)
            }
        }
    }

    /// Deletes `key` from `table` at commit.
    pub async fn delete(&mut self, table: TableId, key: &[u8]) -> Result<(), TpccError> {
        match self.remote_shard(table, key) {
            None => {
                let deleted = self.home.delete(table, key).await;
                self.noted(deleted)
            }
            Some(shard) => {
                let op = PartOp::Delete {
                    table,
                    key: key.to_vec(),
                };
                self.remote(shard, op).await.map(drop)
            }
        }
    }

    /// The pairs of `table` between `start` and `end`, at most `limit`, under a range lock;
    /// both bounds must lie on one shard (TPC-C scans one district).
    pub async fn scan(
        &mut self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
    ) -> Result<Rows, TpccError> {
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[][..],
        };
        match self.remote_shard(table, first) {
            None => {
                let rows = self.home.scan(table, start, end, direction, limit).await;
                self.noted(rows)
            }
            Some(shard) => {
                let op = PartOp::Scan {
                    table,
                    start: start.map(<[u8]>::to_vec),
                    end: end.map(<[u8]>::to_vec),
                    direction,
                    limit,
                };
                self.remote(shard, op).await?.into_rows()
            }
        }
    }

    /// Faults in the pages of the home shard's `keys` together (no locks); other shards'
    /// keys are read when their part reads them.
    pub async fn prefetch(&self, keys: &[(TableId, &[u8])]) -> Result<(), TpccError> {
        if self.span.is_none() {
            return Ok(self.home.prefetch(keys).await?);
        }
        let local: Vec<(TableId, &[u8])> = keys
            .iter()
            .filter(|(table, key)| self.remote_shard(*table, key).is_none())
            .copied()
            .collect();
        Ok(self.home.prefetch(&local).await?)
    }

    /// Sends `op` to this transaction's part on `shard` (begun there by the first).
    async fn remote(&mut self, shard: usize, op: PartOp) -> Result<PartReply, TpccError> {
        let span = self
            .span
            .as_mut()
            .expect("only a spanning transaction has remote keys");
        if !span.parts.contains(&shard) {
            // A part that dies must not wait while another part holds locks (see
            // `Transaction::report_conflicts_at_once`): with a part elsewhere, every part
            // reports at once. Until then the home part alone waits as a lone one does.
            self.home.report_conflicts_at_once();
            span.parts.push(shard);
        }
        let context = &span.context;
        context
            .remote_operations
            .set(context.remote_operations.get() + 1);
        let reply = participant::send(&context.db, shard, span.start, op).await;
        if matches!(&reply, Err(TpccError::Txn(e)) if e.is_conflict()) {
            span.died.get_or_insert(Died::On(shard));
        }
        reply
    }

    /// `result` of an operation of the home part, noting a conflict it died in.
    fn noted<T>(&mut self, result: Result<T, ringdb::TxnError>) -> Result<T, TpccError> {
        if let (Err(e), Some(span)) = (&result, self.span.as_mut()) {
            if e.is_conflict() {
                span.died.get_or_insert(Died::Home);
            }
        }
        Ok(result?)
    }

    /// Commits: the home part, then every other part (see the module doc). On an error in
    /// the home part every other part aborts.
    pub async fn commit(self) -> Result<(), TpccError> {
        let TpccTxn { home, span } = self;
        let Some(span) = span.filter(|s| !s.parts.is_empty()) else {
            return Ok(home.commit().await?);
        };
        if span.context.logged {
            return commit_logged(home, span).await;
        }
        if let Err(e) = home.commit().await {
            abort_parts(&span).await;
            return Err(e.into());
        }
        let context = &span.context;
        let mut first_error = None;
        for &shard in &span.parts {
            let done = participant::send(&context.db, shard, span.start, PartOp::Commit).await;
            if let Err(e) = done {
                first_error.get_or_insert(TpccError::HalfCommitted {
                    shard,
                    cause: e.to_string(),
                });
            }
        }
        context
            .spanning_commits
            .set(context.spanning_commits.get() + 1);
        first_error.map_or(Ok(()), Err)
    }

    /// Discards every part's writes and releases their locks. After a conflict, the part
    /// that died then waits for the lock in its way to change (holding nothing anywhere
    /// by then: see the module doc), so the retry does not meet the same holder at once.
    pub async fn abort(self) {
        let TpccTxn { home, span } = self;
        let Some(span) = span else {
            home.abort();
            return;
        };
        if span.died == Some(Died::Home) {
            abort_parts(&span).await;
            home.wait_out_conflict().await;
            return;
        }
        home.abort();
        abort_parts(&span).await;
        if let Some(Died::On(shard)) = span.died {
            let context = &span.context;
            // Like an abort, this fails only for a shard that is gone.
            let _ = participant::send(&context.db, shard, span.start, PartOp::WaitOut).await;
        }
    }
}

/// Commits a spanning transaction with a log: every part's writes into one durable record
/// of the cross-shard batch log first (the commit point), then each part with its marker
/// (see `ringdb::Db::log_across`). When only one shard writes, its own log record is atomic
/// already: the parts simply commit.
async fn commit_logged(home: Transaction, span: Span) -> Result<(), TpccError> {
    let context = &span.context;
    let mut logged = Vec::with_capacity(span.parts.len() + 1);
    let home_writes = match home.prepare().await {
        Ok(writes) => writes,
        Err(e) => {
            home.abort();
            abort_parts(&span).await;
            return Err(e.into());
        }
    };
    if !home_writes.is_empty() {
        logged.push((context.home_shard, home_writes));
    }
    for &shard in &span.parts {
        let prepared = participant::send(&context.db, shard, span.start, PartOp::Prepare).await;
        match prepared {
            Ok(PartReply::Writes(batch)) if batch.is_empty() => {}
            Ok(PartReply::Writes(batch)) => logged.push((shard, batch)),
            other => {
                home.abort();
                abort_parts(&span).await;
                return Err(match other {
                    Ok(reply) => reply.unexpected("writes"),
                    Err(e) => e,
                });
            }
        }
    }
    let commit = if logged.len() > 1 {
        match context.db.log_across_async(&logged).await {
            Ok(commit) => Some(commit),
            Err(e) => {
                home.abort();
                abort_parts(&span).await;
                return Err(TpccError::Txn(e.into()));
            }
        }
    } else {
        None
    };
    // Past the commit point: a part that fails to commit is applied from the log on reopen.
    let mut first_error = match &commit {
        Some(c) => home.commit_across(c).await.err().map(TpccError::from),
        None => home.commit().await.err().map(TpccError::from),
    };
    for &shard in &span.parts {
        let op = commit.map_or(PartOp::Commit, PartOp::CommitAcross);
        if let Err(e) = participant::send(&context.db, shard, span.start, op).await {
            first_error.get_or_insert(e);
        }
    }
    if let Some(commit) = commit {
        context.db.across_done(commit, first_error.is_none());
    }
    context
        .spanning_commits
        .set(context.spanning_commits.get() + 1);
    first_error.map_or(Ok(()), Err)
}

/// Aborts the parts of `span` on other shards, but for the one that died in a conflict (it
/// released its locks then, and waits out the conflict last).
async fn abort_parts(span: &Span) {
    for &shard in &span.parts {
        if span.died == Some(Died::On(shard)) {
            continue;
        }
        // An abort cannot fail but for a shard that is gone, whose locks went with it.
        let _ = participant::send(&span.context.db, shard, span.start, PartOp::Abort).await;
    }
}

impl PartReply {
    fn into_value(self) -> Result<Option<Vec<u8>>, TpccError> {
        match self {
            PartReply::Value(v) => Ok(v),
            other => Err(other.unexpected("a value")),
        }
    }

    fn into_rows(self) -> Result<Rows, TpccError> {
        match self {
            PartReply::Rows(rows) => Ok(rows),
            other => Err(other.unexpected("rows")),
        }
    }
}
