//! OrderStatus (clause 2.6): a customer (by id, or by last name), its newest order (a
//! reverse scan of the order-by-customer index) and that order's lines. Reads only.

use super::access::{self, Intent};
use super::codec::Row;
use super::error::TpccError;
use super::input::OrderStatusInput;
use super::keys;
use super::rows::{Order, OrderLine};
use super::tables::TpccTables;
use super::txn::TpccTxn;
use super::TxOutcome;
use ringdb::Direction;

/// Lines an order has at most (O_OL_CNT is 5-15).
pub const ORDER_LINES_MAX: usize = 15;

/// Runs OrderStatus's reads in `txn` (the caller commits).
pub async fn order_status(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    input: &OrderStatusInput,
) -> Result<TxOutcome, TpccError> {
    let (w, d) = (input.warehouse, input.district);
    let (c, customer) =
        access::find_customer(txn, tables, (w, d), &input.customer, Intent::Read).await?;
    let prefix = keys::order_by_customer(w, d, c, 0);
    let prefix = &prefix[..keys::ORDER_ID_BY_CUSTOMER_OFFSET];
    let newest =
        access::scan_prefix(txn, tables.order_by_customer, prefix, Direction::Reverse, 1).await?;
    let missing = || TpccError::MissingRow {
        table: "ORDER (by customer)",
        key: prefix.to_vec(),
    };
    let (key, _) = newest.first().ok_or_else(missing)?;
    let o = keys::u32_at(key, keys::ORDER_ID_BY_CUSTOMER_OFFSET).ok_or_else(missing)?;
    let order: Order = access::read(txn, tables.order, &keys::order(w, d, o), Intent::Read).await?;
    let lines = access::scan_prefix(
        txn,
        tables.order_line,
        &keys::order(w, d, o),
        Direction::Forward,
        ORDER_LINES_MAX,
    )
    .await?;
    let mut quantity = 0u32;
    for (_, bytes) in &lines {
        quantity += u32::from(OrderLine::decode(bytes)?.quantity);
    }
    debug_assert!(customer.payment_count >= 1);
    if lines.len() != usize::from(order.line_count) {
        // Only without isolation: the order's lines are not all in yet (or half delivered).
        return Err(TpccError::MissingRow {
            table: "ORDER-LINE (fewer lines than the order's O_OL_CNT)",
            key: keys::order(w, d, o).to_vec(),
        });
    }
    debug_assert!(quantity > 0 || lines.is_empty());
    Ok(TxOutcome::Committed)
}
