//! Running one TPC-C transaction: begin, the kind's reads and writes, then commit (or abort,
//! for the 1% NewOrder rollback). A lock conflict comes back as [`TpccError::Conflict`] with
//! the transaction's timestamp, so that the caller retries it older (wait-die).

use super::delivery::delivery;
use super::error::TpccError;
use super::input::{TxChoice, TxInput};
use super::new_order::new_order;
use super::order_status::order_status;
use super::payment::payment;
use super::stock_level::stock_level;
use super::tables::TpccTables;
use ringdb::DbHandle;
use ringdb::{Isolation, TxnTimestamp};

/// How a transaction ended when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TxOutcome {
    /// Committed.
    Committed,
    /// Rolled back on purpose: the NewOrder whose last item does not exist (clause 2.4.2.3).
    RolledBack,
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
    execute_with(h, tables, input, isolation, timestamp, LockRelease::Early).await
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

/// [`execute`], releasing the locks as `release` says.
pub async fn execute_with(
    h: &DbHandle,
    tables: &TpccTables,
    input: &TxInput,
    isolation: Isolation,
    timestamp: Option<TxnTimestamp>,
    release: LockRelease,
) -> Result<TxOutcome, TpccError> {
    input.validate()?;
    let mut txn = h.begin_with(isolation, timestamp);
    if release == LockRelease::AfterSync {
        txn.hold_locks_until_durable();
    }
    let timestamp = txn.timestamp();
    let done = match input.choice() {
        TxChoice::NewOrder(i) => new_order(&mut txn, tables, i).await,
        TxChoice::Payment(i) => payment(&mut txn, tables, i).await,
        TxChoice::OrderStatus(i) => order_status(&mut txn, tables, i).await,
        TxChoice::Delivery(i) => delivery(&mut txn, tables, i).await,
        TxChoice::StockLevel(i) => stock_level(&mut txn, tables, i).await.map(|(o, _)| o),
    };
    match done {
        Ok(TxOutcome::Committed) => {
            txn.commit()
                .await
                .map_err(|e| conflict_or(e.into(), timestamp))?;
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

/// A transaction-API conflict as [`TpccError::Conflict`] with the timestamp to retry with.
fn conflict_or(e: TpccError, timestamp: TxnTimestamp) -> TpccError {
    match e {
        TpccError::Txn(t) if t.is_conflict() => TpccError::Conflict { timestamp },
        e => e,
    }
}
