//! Running one TPC-C transaction: begin, the kind's reads and writes, then commit (or abort,
//! for the 1% NewOrder rollback). A lock conflict comes back as [`TpccError::Conflict`] with
//! the transaction's timestamp, so that the caller retries it older (wait-die).

use super::delivery::{delivery, delivery_district};
use super::error::TpccError;
use super::input::{TxChoice, TxInput};
use super::new_order::new_order;
use super::order_status::order_status;
use super::payment::payment;
use super::phases::{Phase, Timer};
use super::stock_level::stock_level;
use super::tables::TpccTables;
use super::txn::{PlacedContext, TpccTxn};
use ringdb::{Db, DbHandle, DbTransaction, Transaction};
use ringdb::{Isolation, TableId, TxnTimestamp};

/// How a transaction ended when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TxOutcome {
    /// Committed.
    Committed,
    /// Rolled back on purpose: the NewOrder whose last item does not exist (clause 2.4.2.3).
    RolledBack,
}

/// When a committing transaction releases its locks (see `ringdb::Transaction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockRelease {
    /// Once its writes are in the tree, before the log sync.
    #[default]
    Early,
    /// Once its commit is durable (strict two-phase locking across the sync).
    AfterSync,
}

/// How a transaction runs: its isolation, when its locks go, whether it prefetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxOptions {
    /// How it isolates itself.
    pub isolation: Isolation,
    /// When a commit releases its locks.
    pub release: LockRelease,
    /// Fault in the rows it will read, together, before it takes a lock (NewOrder and
    /// Payment, first attempt only; see `prefetch.rs`).
    pub prefetch: bool,
}

impl TxOptions {
    /// `isolation`, locks released early, prefetch on.
    pub fn new(isolation: Isolation) -> TxOptions {
        TxOptions {
            isolation,
            release: LockRelease::Early,
            prefetch: true,
        }
    }
}

/// Runs `input` as one transaction with `isolation`, aged `timestamp` (a retry passes the
/// timestamp its conflict returned; `None` for a first attempt). With a log, its locks go
/// as soon as its writes are applied (early lock release, see `ringdb::Transaction`).
pub async fn execute(
    h: &DbHandle,
    tables: &TpccTables,
    input: &TxInput,
    isolation: Isolation,
    timestamp: Option<TxnTimestamp>,
) -> Result<TxOutcome, TpccError> {
    let options = TxOptions::new(isolation);
    execute_with(h, tables, input, options, timestamp, None).await
}

/// [`execute`] as `options` say; for a Delivery, `district` runs only that district's part
/// (one database transaction of the business transaction's ten).
pub async fn execute_with(
    h: &DbHandle,
    tables: &TpccTables,
    input: &TxInput,
    options: TxOptions,
    timestamp: Option<TxnTimestamp>,
    district: Option<u32>,
) -> Result<TxOutcome, TpccError> {
    input.validate()?;
    let txn = h.begin_with(options.isolation, timestamp);
    // A retry finds the rows its first attempt faulted in: prefetch only the first.
    let first_attempt = timestamp.is_none();
    execute_in(txn, tables, input, options, first_attempt, district).await
}

/// Runs `input` in `txn` (begun with `options.isolation`) and commits it, or aborts it on a
/// rollback or an error; a conflict comes back with the timestamp to retry with.
pub(crate) async fn execute_in(
    mut txn: Transaction,
    tables: &TpccTables,
    input: &TxInput,
    options: TxOptions,
    first_attempt: bool,
    district: Option<u32>,
) -> Result<TxOutcome, TpccError> {
    input.validate()?;
    if options.release == LockRelease::AfterSync {
        txn.hold_locks_until_durable();
    }
    let timestamp = txn.timestamp();
    let mut tpcc = TpccTxn::Local(txn);
    let done = run_body(&mut tpcc, tables, input, options, first_attempt, district).await;
    let TpccTxn::Local(txn) = tpcc else {
        unreachable!("a local transaction stays local")
    };
    match done {
        Ok(TxOutcome::Committed) => {
            let timer = Timer::start(Phase::Commit);
            let committed = txn.commit().await.map_err(TpccError::from);
            drop(timer);
            committed.map_err(|e| conflict_or(e, timestamp))?;
            Ok(TxOutcome::Committed)
        }
        Ok(TxOutcome::RolledBack) => {
            txn.abort();
            Ok(TxOutcome::RolledBack)
        }
        Err(e) => {
            txn.abort();
            Err(conflict_or(e, timestamp))
        }
    }
}

/// Runs `input` (only `district`'s part of a Delivery, when given) as one transaction of
/// `db` across its shards, placed as `context` says, with `Db::transaction_async`: the
/// engine retries a conflict (with the first attempt's timestamp) and commits. Returns the
/// outcome and the attempts that were retried; `on_conflict` gets each retried attempt's
/// cause (`None`: a conflict the body never saw, met while the commit ran).
pub(crate) async fn execute_placed(
    db: &Db,
    context: &PlacedContext,
    input: &TxInput,
    (options, district): (TxOptions, Option<u32>),
    on_conflict: &dyn Fn(Option<(TableId, ringdb::ConflictWith)>),
) -> Result<(TxOutcome, u64), TpccError> {
    input.validate()?;
    let mut attempts = 0u64;
    let mut seen = 0u64;
    let mut spanned = false;
    let tables = &context.tables;
    let committed = db
        .transaction_with_async(options.isolation, async |txn: &mut DbTransaction| {
            attempts += 1;
            if options.release == LockRelease::AfterSync {
                txn.hold_locks_until_durable();
            }
            let mut tpcc = TpccTxn::placed(txn, context);
            let done = run_body(&mut tpcc, tables, input, options, attempts == 1, district).await;
            spanned = tpcc.reached_elsewhere();
            if let Err(TpccError::Txn(e)) = &done {
                if e.is_conflict() {
                    seen += 1;
                    on_conflict(conflict_cause(e));
                }
            }
            match done? {
                TxOutcome::Committed => Ok(()),
                // An error out of the body aborts the transaction (and is no conflict).
                TxOutcome::RolledBack => Err(TpccError::RolledBack),
            }
        })
        .await;
    let outcome = match committed {
        Ok(()) => TxOutcome::Committed,
        Err(TpccError::RolledBack) => TxOutcome::RolledBack,
        Err(e) => return Err(e),
    };
    if spanned && outcome == TxOutcome::Committed {
        let commits = context.spanning_commits.get() + 1;
        context.spanning_commits.set(commits);
    }
    assert!(attempts >= 1, "the body ran");
    (seen..attempts - 1).for_each(|_| on_conflict(None));
    Ok((outcome, attempts - 1))
}

/// The reads and writes of `input` in `txn` (the caller commits or aborts): a Delivery's
/// `district` alone when given, after prefetching the rows when `options` and
/// `first_attempt` say so.
async fn run_body(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    input: &TxInput,
    options: TxOptions,
    first_attempt: bool,
    district: Option<u32>,
) -> Result<TxOutcome, TpccError> {
    let prefetch = options.prefetch && first_attempt;
    match (input.choice(), district) {
        (TxChoice::Delivery(i), Some(d)) => delivery_district(txn, tables, i, d).await,
        (choice, _) => run_choice(txn, tables, choice, prefetch).await,
    }
}

/// Runs the reads and writes of `choice` in `txn` (the caller commits), after prefetching
/// its rows when `prefetch` says so.
async fn run_choice(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    choice: &TxChoice,
    prefetch: bool,
) -> Result<TxOutcome, TpccError> {
    match choice {
        TxChoice::NewOrder(i) => {
            if prefetch {
                super::prefetch::new_order(txn, tables, i).await?;
            }
            new_order(txn, tables, i).await
        }
        TxChoice::Payment(i) => {
            if prefetch {
                super::prefetch::payment(txn, tables, i).await?;
            }
            payment(txn, tables, i, prefetch).await
        }
        TxChoice::OrderStatus(i) => order_status(txn, tables, i).await,
        TxChoice::Delivery(i) => delivery(txn, tables, i).await,
        TxChoice::StockLevel(i) => stock_level(txn, tables, i).await.map(|(o, _)| o),
    }
}

/// The table and the lock of a conflict, when `error` is one that names them.
pub(crate) fn conflict_cause(error: &ringdb::TxnError) -> Option<(TableId, ringdb::ConflictWith)> {
    match error {
        ringdb::TxnError::Conflict { table, with, .. } => Some((*table, *with)),
        _ => None,
    }
}

/// A transaction-API conflict as [`TpccError::Conflict`] with the timestamp to retry with.
fn conflict_or(e: TpccError, timestamp: TxnTimestamp) -> TpccError {
    match e {
        TpccError::Txn(t) if t.is_conflict() => TpccError::Conflict {
            timestamp,
            cause: conflict_cause(&t),
        },
        e => e,
    }
}
