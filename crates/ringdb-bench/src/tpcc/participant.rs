//! A spanning transaction's part on another shard (see `span.rs`): a `ringdb::Transaction`
//! of that shard, begun by the first operation sent to it and kept, between operations, in
//! the shard thread's table of open parts under the attempt's part id. Each operation is a
//! request to that shard (`Db::call_on_async`: through its inbox, the reply waking the home
//! shard's ring); the part's locks stay held until a commit or an abort arrives.

use super::error::TpccError;
use ringdb::{
    AcrossCommit, Db, DbHandle, Direction, Isolation, TableId, Transaction, TxnTimestamp,
    WriteBatch,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Bound;

/// Open parts a shard thread holds at most: each belongs to a task of another shard that
/// waits for its reply, so the bound is the tasks of every shard together.
const OPEN_PARTS_MAX: usize = 1 << 16;

thread_local! {
    /// The parts open on this (shard) thread, by part id.
    static OPEN: RefCell<HashMap<u64, Transaction>> = RefCell::new(HashMap::new());
}

/// How a part begins: the spanning transaction's isolation and timestamp, and the id of this
/// attempt (unique across shards and attempts).
#[derive(Clone, Copy, Debug)]
pub struct PartStart {
    /// The isolation of every part.
    pub isolation: Isolation,
    /// The timestamp of every part (wait-die compares it on each shard).
    pub timestamp: TxnTimestamp,
    /// The attempt's id.
    pub part_id: u64,
}

/// An operation on a part.
#[derive(Debug)]
pub enum PartOp {
    /// A read, locked shared (or exclusive, to be written).
    Get {
        /// The table.
        table: TableId,
        /// The key.
        key: Vec<u8>,
        /// Lock exclusive.
        update: bool,
    },
    /// A write at commit.
    Put {
        /// The table.
        table: TableId,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// A delete at commit.
    Delete {
        /// The table.
        table: TableId,
        /// The key.
        key: Vec<u8>,
    },
    /// A range read under a range lock.
    Scan {
        /// The table.
        table: TableId,
        /// The first bound.
        start: Bound<Vec<u8>>,
        /// The last bound.
        end: Bound<Vec<u8>>,
        /// The order.
        direction: Direction,
        /// Pairs at most.
        limit: usize,
    },
    /// Commit the part.
    Commit,
    /// Return the part's writes (to log them with the others' before any commits).
    Prepare,
    /// Commit the part, its writes logged with the others' by `Db::log_across`.
    CommitAcross(AcrossCommit),
    /// Abort the part (nothing to do when it is gone already).
    Abort,
    /// The part died in a conflict and every other part has aborted: wait, holding nothing,
    /// for the lock in its way to change, then end it.
    WaitOut,
}

/// What an operation on a part returns.
#[derive(Debug)]
pub enum PartReply {
    /// A read's value.
    Value(Option<Vec<u8>>),
    /// A scan's pairs.
    Rows(Vec<(Vec<u8>, Vec<u8>)>),
    /// A write, delete, commit or abort done.
    Done,
    /// The part's writes, for the log.
    Writes(WriteBatch),
}

impl PartReply {
    /// The error for a reply that is not what the operation returns.
    pub(super) fn unexpected(&self, wanted: &'static str) -> TpccError {
        TpccError::PartReply {
            wanted,
            got: match self {
                PartReply::Value(_) => "a value",
                PartReply::Rows(_) => "rows",
                PartReply::Done => "done",
                PartReply::Writes(_) => "writes",
            },
        }
    }
}

/// Runs `op` on the part of attempt `start` on `shard`, from a task of another shard.
pub async fn send(
    db: &Db,
    shard: usize,
    start: PartStart,
    op: PartOp,
) -> Result<PartReply, TpccError> {
    let request = move |handle: DbHandle| serve(handle, shard, start, op);
    match db.call_on_async(shard, request).await {
        Ok(reply) => reply,
        Err(e) => Err(TpccError::Shard(e)),
    }
}

/// Runs `op` on this shard's part of `start` (begun now when this is its first operation).
async fn serve(
    handle: DbHandle,
    shard: usize,
    start: PartStart,
    op: PartOp,
) -> Result<PartReply, TpccError> {
    let Some(mut txn) = open_part(&handle, shard, start, &op)? else {
        return Ok(PartReply::Done);
    };
    let reply = match op {
        PartOp::Commit => return Ok(txn.commit().await.map(|()| PartReply::Done)?),
        PartOp::CommitAcross(commit) => {
            return Ok(txn.commit_across(&commit).await.map(|()| PartReply::Done)?)
        }
        PartOp::Abort => {
            txn.abort();
            return Ok(PartReply::Done);
        }
        PartOp::WaitOut => {
            txn.wait_out_conflict().await;
            return Ok(PartReply::Done);
        }
        PartOp::Prepare => txn.prepare().await.map(PartReply::Writes),
        PartOp::Get { table, key, update } if update => {
            txn.get_for_update(table, &key).await.map(PartReply::Value)
        }
        PartOp::Get { table, key, .. } => txn.get(table, &key).await.map(PartReply::Value),
        PartOp::Put { table, key, value } => {
            txn.put(table, &key, &value).await.map(|()| PartReply::Done)
        }
        PartOp::Delete { table, key } => txn.delete(table, &key).await.map(|()| PartReply::Done),
        PartOp::Scan {
            table,
            start: first,
            end,
            direction,
            limit,
        } => {
            let (first, end) = (as_ref(&first), as_ref(&end));
            txn.scan(table, first, end, direction, limit)
                .await
                .map(PartReply::Rows)
        }
    };
    // A conflict kills the part (its locks are released already): it is kept, dead, for
    // the `WaitOut` that follows once the other parts have aborted. Any other failure ends
    // it here (dropping it aborts it); the home aborts the whole transaction.
    if reply.is_ok() || matches!(&reply, Err(e) if e.is_conflict()) {
        keep_open(start.part_id, txn);
    }
    Ok(reply?)
}

/// The part of `start` on this shard: the open one, or a new one for a first operation;
/// `None` for an abort or wait-out of a part that is gone (nothing to do).
fn open_part(
    handle: &DbHandle,
    shard: usize,
    start: PartStart,
    op: &PartOp,
) -> Result<Option<Transaction>, TpccError> {
    let open = OPEN.with(|o| o.borrow_mut().remove(&start.part_id));
    match (open, op) {
        (Some(txn), _) => Ok(Some(txn)),
        (None, PartOp::Abort | PartOp::WaitOut) => Ok(None),
        (None, PartOp::Commit | PartOp::Prepare | PartOp::CommitAcross(_)) => {
            Err(TpccError::PartMissing { shard })
        }
        (None, _) => {
            let mut txn = handle.begin_with(start.isolation, Some(start.timestamp));
            txn.report_conflicts_at_once();
            Ok(Some(txn))
        }
    }
}

/// Keeps `txn` open on this shard under `part_id` until its next operation.
fn keep_open(part_id: u64, txn: Transaction) {
    OPEN.with(|o| {
        let mut open = o.borrow_mut();
        assert!(open.len() < OPEN_PARTS_MAX, "more open parts than tasks");
        open.insert(part_id, txn);
    });
}

/// A bound over an owned key as one over a borrowed key.
fn as_ref(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}
