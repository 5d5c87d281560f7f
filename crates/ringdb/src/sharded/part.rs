//! A [`DbTransaction`](super::DbTransaction)'s part on one shard: a [`Transaction`] of that
//! shard's own database, begun by the first operation sent to it and kept, between
//! operations, in the shard thread's table of open parts under the attempt's part id. Each
//! operation is a request to that shard (`call.rs`); the part's locks stay held until a
//! commit or an abort arrives.
//!
//! Why a table on the shard's thread rather than the transaction object itself: a
//! [`Transaction`] holds the shard's single-thread state (its lock table, its tree handles),
//! so it never leaves that thread; the caller holds only the part's id.

use super::AcrossCommit;
use crate::db::{DbHandle, WriteBatch};
use crate::error::TxnError;
use crate::txn::{Isolation, Transaction, TxnTimestamp};
use crate::{Direction, TableId};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::Bound;

/// Open parts a shard thread holds at most. Each belongs to a transaction some thread holds
/// open; a program that leaks more than this is refused new ones rather than growing the
/// table without bound.
pub(super) const OPEN_PARTS_MAX: usize = 1 << 16;

thread_local! {
    /// The parts open on this (shard) thread, by part id.
    static OPEN: RefCell<HashMap<u64, Transaction>> = RefCell::new(HashMap::new());
    /// Parts aborted while a request of theirs was under way (the transaction was dropped
    /// meanwhile): the request drops its part when it ends instead of keeping it open.
    static ABORTED: RefCell<HashSet<u64>> = RefCell::new(HashSet::new());
}

/// How a part begins: the transaction's isolation and timestamp, and the id of this attempt
/// (unique across shards and attempts).
#[derive(Clone, Copy, Debug)]
pub(super) struct PartStart {
    pub(super) isolation: Isolation,
    pub(super) timestamp: TxnTimestamp,
    pub(super) part_id: u64,
}

/// A write of a transaction: table, key, value (`None`: a delete).
pub(super) type Write = (TableId, Vec<u8>, Option<Vec<u8>>);

/// An operation on a part.
#[derive(Debug)]
pub(super) enum PartOp {
    /// Reads, each locked shared (exclusive when `update`: it will be written).
    Get {
        table: TableId,
        keys: Vec<Vec<u8>>,
        update: bool,
    },
    /// A range read under a range lock.
    Scan {
        table: TableId,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        direction: Direction,
        limit: usize,
    },
    /// The transaction's writes to this shard (`None`: a delete), locked exclusive and
    /// buffered in the part now, at the end (see `transaction.rs`); then the part commits
    /// (`commit`: it is the transaction's only part) or returns its writes, once its shard's
    /// log is durable, to log them with the others' (a prepare).
    Finish { writes: Vec<Write>, commit: bool },
    /// Commit the part (its writes logged with the others' when the commit is given).
    Commit(Option<AcrossCommit>),
    /// Abort the part (nothing to do when it is gone already, unless a request of it was
    /// `in_flight`: that request drops it when it ends).
    Abort { in_flight: bool },
    /// The part died in a conflict and every other part has aborted: wait, holding nothing,
    /// for the lock in its way to change, then end it.
    WaitOut,
}

/// What an operation on a part returns.
#[derive(Debug)]
pub(super) enum PartReply {
    /// Values read, and whether everything read so far is durable (see
    /// `DbTransaction::unsynced`).
    Values {
        values: Vec<Option<Vec<u8>>>,
        durable: bool,
    },
    /// Pairs scanned, and the same.
    Rows {
        rows: Vec<(Vec<u8>, Vec<u8>)>,
        durable: bool,
    },
    Done,
    Writes(WriteBatch),
}

/// Runs `op` on this shard's part of `start` (begun now when this is its first operation).
pub(super) async fn serve(
    handle: DbHandle,
    shard: usize,
    start: PartStart,
    op: PartOp,
) -> Result<PartReply, TxnError> {
    let Some(txn) = open_part(&handle, shard, start, &op)? else {
        return Ok(PartReply::Done);
    };
    let (reply, kept) = run(txn, op).await;
    // A part whose transaction was dropped while this request was under way ends here (and
    // its mark goes, whichever way the request ended).
    let aborted = ABORTED.with(|a| a.borrow_mut().remove(&start.part_id));
    if let Some(txn) = kept.filter(|_| !aborted) {
        keep_open(start.part_id, txn);
    }
    reply
}

/// Runs `op` on the open part `txn`: its reply, and the part when it stays open.
async fn run(
    mut txn: Transaction,
    op: PartOp,
) -> (Result<PartReply, TxnError>, Option<Transaction>) {
    let reply = match op {
        PartOp::Commit(across) => return (commit(txn, across).await, None),
        PartOp::Abort { .. } => {
            txn.abort();
            return (Ok(PartReply::Done), None);
        }
        PartOp::WaitOut => {
            txn.wait_out_conflict().await;
            return (Ok(PartReply::Done), None);
        }
        PartOp::Finish { writes, commit } => match apply(&mut txn, writes).await {
            Ok(()) if commit => return (self::commit(txn, None).await, None),
            Ok(()) => txn.prepare().await.map(PartReply::Writes),
            Err(e) => Err(e),
        },
        op => read(&mut txn, op).await,
    };
    // A conflict kills the part (its locks are released already): it is kept, dead, for the
    // `WaitOut` that follows once the other parts have aborted. Any other failure ends it
    // here (dropping it aborts it); the caller aborts the whole transaction.
    let keep = reply.is_ok() || matches!(&reply, Err(e) if e.is_conflict());
    (reply, keep.then_some(txn))
}

/// Buffers `writes` in `txn`, each under an exclusive lock.
async fn apply(txn: &mut Transaction, writes: Vec<Write>) -> Result<(), TxnError> {
    for (table, key, value) in writes {
        match value {
            Some(value) => txn.put(table, &key, &value).await?,
            None => txn.delete(table, &key).await?,
        }
    }
    Ok(())
}

/// A read or scan of an open part.
async fn read(txn: &mut Transaction, op: PartOp) -> Result<PartReply, TxnError> {
    match op {
        PartOp::Get {
            table,
            keys,
            update,
        } => {
            let mut values = Vec::with_capacity(keys.len());
            for key in &keys {
                values.push(match update {
                    true => txn.get_for_update(table, key).await?,
                    false => txn.get(table, key).await?,
                });
            }
            let durable = txn.reads_are_durable();
            Ok(PartReply::Values { values, durable })
        }
        PartOp::Scan {
            table,
            start,
            end,
            direction,
            limit,
        } => txn
            .scan(table, as_ref(&start), as_ref(&end), direction, limit)
            .await
            .map(|rows| PartReply::Rows {
                rows,
                durable: txn.reads_are_durable(),
            }),
        PartOp::Finish { .. } | PartOp::Commit(_) | PartOp::Abort { .. } | PartOp::WaitOut => {
            unreachable!("finishes and ends are served by `serve`")
        }
    }
}

/// Commits `txn`, with the cross-shard commit's marker when its writes were logged with
/// other parts'.
async fn commit(txn: Transaction, across: Option<AcrossCommit>) -> Result<PartReply, TxnError> {
    match across {
        Some(across) => txn.commit_across(&across).await?,
        None => txn.commit().await?,
    }
    Ok(PartReply::Done)
}

/// The part of `start` on this shard: the open one, or a new one for a first operation;
/// `None` for an abort or wait-out of a part that is gone (nothing to do).
fn open_part(
    handle: &DbHandle,
    shard: usize,
    start: PartStart,
    op: &PartOp,
) -> Result<Option<Transaction>, TxnError> {
    let open = OPEN.with(|o| o.borrow_mut().remove(&start.part_id));
    match (open, op) {
        (Some(txn), _) => Ok(Some(txn)),
        (None, PartOp::Abort { in_flight: true }) => {
            note_aborted(start.part_id);
            Ok(None)
        }
        (None, PartOp::Abort { .. } | PartOp::WaitOut) => Ok(None),
        (None, PartOp::Commit(_)) => Err(TxnError::PartLost { shard }),
        (None, _) => {
            if OPEN.with(|o| o.borrow().len()) >= OPEN_PARTS_MAX {
                return Err(TxnError::TooManyOpen {
                    shard,
                    open_max: OPEN_PARTS_MAX,
                });
            }
            let mut txn = handle.begin_with(start.isolation, Some(start.timestamp));
            txn.report_conflicts_at_once();
            Ok(Some(txn))
        }
    }
}

/// Notes that the part `part_id`, whose request is under way, must end with it.
fn note_aborted(part_id: u64) {
    ABORTED.with(|a| {
        let mut aborted = a.borrow_mut();
        if aborted.len() < OPEN_PARTS_MAX {
            aborted.insert(part_id);
        } else {
            tracing::warn!("too many parts aborted mid-request; part {part_id} stays open");
        }
    });
}

/// Keeps `txn` open on this shard under `part_id` until its next operation.
fn keep_open(part_id: u64, txn: Transaction) {
    OPEN.with(|o| {
        let mut open = o.borrow_mut();
        assert!(open.len() <= OPEN_PARTS_MAX, "the open parts are bounded");
        let previous = open.insert(part_id, txn);
        assert!(previous.is_none(), "one part per attempt and shard");
    });
}

/// A bound over an owned key as one over a borrowed key.
fn as_ref(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    bound.as_ref().map(Vec::as_slice)
}
