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
    /// (Boxed: a part moves out of the table and back for every operation.)
    static OPEN: RefCell<HashMap<u64, Box<Transaction>, PartIds>> = RefCell::default();
    /// Parts aborted while a request of theirs was under way (the transaction was dropped
    /// meanwhile): the request drops its part when it ends instead of keeping it open.
    static ABORTED: RefCell<HashSet<u64, PartIds>> = RefCell::default();
}

/// Hashes part ids with one multiplication: they are drawn by the engine (a counter), not
/// chosen by anyone who could aim them at one bucket, so SipHash's defence buys nothing on
/// a table every operation of a part visits twice.
type PartIds = std::hash::BuildHasherDefault<PartIdHasher>;

/// See [`PartIds`].
#[derive(Default)]
struct PartIdHasher(u64);

impl std::hash::Hasher for PartIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(PART_ID_MULTIPLIER);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(PART_ID_MULTIPLIER);
    }
}

/// An odd constant whose high bits change with every bit of the id (2^64 / golden ratio).
const PART_ID_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// How a part begins: the transaction's isolation and timestamp, and the id of this attempt
/// (unique across shards and attempts).
#[derive(Clone, Copy, Debug)]
pub(super) struct PartStart {
    pub(super) isolation: Isolation,
    pub(super) timestamp: TxnTimestamp,
    pub(super) part_id: u64,
    /// The parts' commits release their locks only once durable
    /// (`Transaction::hold_locks_until_durable`).
    pub(super) hold_locks: bool,
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
    /// A write (`None`: a delete) locked exclusive and buffered in the part now: a
    /// transaction on this shard's own thread writes its keys here at once (no round trip).
    Write {
        table: TableId,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
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
    end_request(start, kept);
    reply
}

/// A get of the transaction's part on this thread's own shard, called directly rather than
/// as a request (no operation to build, no reply to unpack): the value, and whether
/// everything the part read is durable.
pub(super) async fn get_here(
    handle: &DbHandle,
    shard: usize,
    start: PartStart,
    (table, key): (TableId, &[u8]),
    update: bool,
) -> Result<(Option<Vec<u8>>, bool), TxnError> {
    let mut txn = begin_or_open(handle, shard, start)?;
    let value = match update {
        true => txn.get_for_update(table, key).await,
        false => txn.get(table, key).await,
    };
    let read = value.map(|value| (value, txn.reads_are_durable()));
    let (read, kept) = kept(read, txn);
    end_request(start, kept);
    read
}

/// A write (`None`: a delete) of the transaction's part on this thread's own shard, called
/// directly (see [`get_here`]): locked exclusive and buffered in the part.
pub(super) async fn write_here(
    handle: &DbHandle,
    shard: usize,
    start: PartStart,
    (table, key): (TableId, &[u8]),
    value: Option<&[u8]>,
) -> Result<(), TxnError> {
    let mut txn = begin_or_open(handle, shard, start)?;
    let written = match value {
        Some(value) => txn.put(table, key, value).await,
        None => txn.delete(table, key).await,
    };
    let (written, kept) = kept(written, txn);
    end_request(start, kept);
    written
}

/// Keeps the part a request ran on open (`kept`), unless its transaction was dropped while
/// the request was under way: then it ends here (and its mark goes, whichever way the
/// request ended).
fn end_request(start: PartStart, kept: Option<Box<Transaction>>) {
    let aborted = ABORTED.with(|a| {
        let mut aborted = a.borrow_mut();
        !aborted.is_empty() && aborted.remove(&start.part_id)
    });
    if let Some(txn) = kept.filter(|_| !aborted) {
        keep_open(start.part_id, txn);
    }
}

/// What a part's operation returns, and the part when it stays open.
type Ran = (Result<PartReply, TxnError>, Option<Box<Transaction>>);

/// Runs `op` on the open part `txn`: its reply, and the part when it stays open. The
/// operations of every transaction (a get, a write) run inline; the rarer ones whose futures
/// are large (a commit, a scan) are boxed, so that the future every request builds and moves
/// stays small.
async fn run(mut txn: Box<Transaction>, op: PartOp) -> Ran {
    let reply = match op {
        PartOp::Get {
            table,
            keys,
            update,
        } => get_values(&mut txn, table, keys, update).await,
        PartOp::Write { table, key, value } => {
            let written = match value {
                Some(value) => txn.put(table, &key, &value).await,
                None => txn.delete(table, &key).await,
            };
            written.map(|()| PartReply::Done)
        }
        PartOp::Commit(across) => return (Box::pin(commit(*txn, across)).await, None),
        PartOp::Abort { .. } => {
            txn.abort();
            return (Ok(PartReply::Done), None);
        }
        PartOp::WaitOut => {
            Box::pin(txn.wait_out_conflict()).await;
            return (Ok(PartReply::Done), None);
        }
        PartOp::Finish { writes, commit } => return Box::pin(finish(txn, writes, commit)).await,
        op => Box::pin(scan(&mut txn, op)).await,
    };
    kept(reply, txn)
}

/// `reply` with the part when it stays open: a conflict kills the part (its locks are
/// released already), and it is kept, dead, for the `WaitOut` that follows once the other
/// parts have aborted. Any other failure ends it here (dropping it aborts it); the caller
/// aborts the whole transaction.
fn kept<T>(
    reply: Result<T, TxnError>,
    txn: Box<Transaction>,
) -> (Result<T, TxnError>, Option<Box<Transaction>>) {
    let keep = reply.is_ok() || matches!(&reply, Err(e) if e.is_conflict());
    (reply, keep.then_some(txn))
}

/// Buffers `writes` in `txn`, then commits it (`commit`) or returns its writes (a prepare).
async fn finish(mut txn: Box<Transaction>, writes: Vec<Write>, commit: bool) -> Ran {
    let reply = match apply(&mut txn, writes).await {
        Ok(()) if commit => return (self::commit(*txn, None).await, None),
        Ok(()) => txn.prepare().await.map(PartReply::Writes),
        Err(e) => Err(e),
    };
    kept(reply, txn)
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

/// The values of `keys` in `table`, each locked shared (exclusive when `update`).
async fn get_values(
    txn: &mut Transaction,
    table: TableId,
    keys: Vec<Vec<u8>>,
    update: bool,
) -> Result<PartReply, TxnError> {
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

/// A scan of an open part.
async fn scan(txn: &mut Transaction, op: PartOp) -> Result<PartReply, TxnError> {
    match op {
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
        PartOp::Get { .. }
        | PartOp::Write { .. }
        | PartOp::Finish { .. }
        | PartOp::Commit(_)
        | PartOp::Abort { .. }
        | PartOp::WaitOut => {
            unreachable!("only a scan is served here")
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
) -> Result<Option<Box<Transaction>>, TxnError> {
    let open = OPEN.with(|o| o.borrow_mut().remove(&start.part_id));
    match (open, op) {
        (Some(txn), _) => Ok(Some(txn)),
        (None, PartOp::Abort { in_flight: true }) => {
            note_aborted(start.part_id);
            Ok(None)
        }
        (None, PartOp::Abort { .. } | PartOp::WaitOut) => Ok(None),
        (None, PartOp::Commit(_)) => Err(TxnError::PartLost { shard }),
        (None, _) => begin(handle, shard, start).map(Some),
    }
}

/// The open part of `start` on this shard, or a new one (for a read or a write).
fn begin_or_open(
    handle: &DbHandle,
    shard: usize,
    start: PartStart,
) -> Result<Box<Transaction>, TxnError> {
    match OPEN.with(|o| o.borrow_mut().remove(&start.part_id)) {
        Some(txn) => Ok(txn),
        None => begin(handle, shard, start),
    }
}

/// A new part of `start` on this shard, unless the shard holds its bound of open ones.
fn begin(handle: &DbHandle, shard: usize, start: PartStart) -> Result<Box<Transaction>, TxnError> {
    if OPEN.with(|o| o.borrow().len()) >= OPEN_PARTS_MAX {
        return Err(TxnError::TooManyOpen {
            shard,
            open_max: OPEN_PARTS_MAX,
        });
    }
    let mut txn = handle.begin_with(start.isolation, Some(start.timestamp));
    txn.report_conflicts_at_once();
    if start.hold_locks {
        txn.hold_locks_until_durable();
    }
    Ok(Box::new(txn))
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
fn keep_open(part_id: u64, txn: Box<Transaction>) {
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
