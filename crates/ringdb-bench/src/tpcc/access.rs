//! Typed row access inside a transaction: read a row that must exist (a missing one is a
//! typed error naming the table and key, never a panic), write one back, and find a customer
//! by id or by last name.

use super::codec::Row;
use super::error::TpccError;
use super::input::CustomerChoice;
use super::keys;
use super::rows::Customer;
use super::tables::TpccTables;
use super::txn::TpccTxn;
use ringdb::{Direction, TableId};
use std::ops::Bound;

/// Customers with one last name in a district that a lookup reads at most.
const NAME_GROUP_MAX: usize = 1 << 16;

/// Whether a read will be followed by a write of the same row.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// Read only: a shared lock.
    Read,
    /// Read, then write: an exclusive lock from the start (no upgrade, no upgrade deadlock).
    Update,
}

/// The row of `key` in `table`, which must exist.
pub async fn read<R: Row>(
    txn: &mut TpccTxn<'_>,
    table: TableId,
    key: &[u8],
    intent: Intent,
) -> Result<R, TpccError> {
    let bytes = match intent {
        Intent::Read => txn.get(table, key).await?,
        Intent::Update => txn.get_for_update(table, key).await?,
    };
    let bytes = bytes.ok_or_else(|| TpccError::MissingRow {
        table: R::TABLE,
        key: key.to_vec(),
    })?;
    Ok(R::decode(&bytes)?)
}

/// Writes `row` under `key` in `table`.
pub async fn write<R: Row>(
    txn: &mut TpccTxn<'_>,
    table: TableId,
    key: &[u8],
    row: &R,
) -> Result<(), TpccError> {
    txn.put(table, key, &row.encode()).await
}

/// Every pair of `table` whose key starts with `prefix`, at most `limit`, in `direction`.
pub async fn scan_prefix(
    txn: &mut TpccTxn<'_>,
    table: TableId,
    prefix: &[u8],
    direction: Direction,
    limit: usize,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, TpccError> {
    let end = keys::prefix_end(prefix);
    let end_bound = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    txn.scan(table, Bound::Included(prefix), end_bound, direction, limit)
        .await
}

/// The customer of district (w, d) that `choice` names: by id, or the middle one (n/2
/// rounded up) of those with the last name, sorted by first name (clause 2.5.2.2).
pub async fn find_customer(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    (w, d): (u32, u32),
    choice: &CustomerChoice,
    intent: Intent,
) -> Result<(u32, Customer), TpccError> {
    let c = match choice {
        CustomerChoice::Id(c) => *c,
        CustomerChoice::LastName(last) => {
            let prefix = keys::customer_name_prefix(w, d, last);
            let index = tables.customer_by_name;
            let group =
                scan_prefix(txn, index, &prefix, Direction::Forward, NAME_GROUP_MAX).await?;
            let missing = || TpccError::MissingRow {
                table: "CUSTOMER (by last name)",
                key: prefix.to_vec(),
            };
            let middle = group.len().checked_sub(1).ok_or_else(missing)? / 2;
            keys::customer_id_of_name_key(&group[middle].0).ok_or_else(missing)?
        }
    };
    let customer = read(txn, tables.customer, &keys::customer(w, d, c), intent).await?;
    Ok((c, customer))
}
