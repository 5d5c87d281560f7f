//! StockLevel (clause 2.8): the distinct items of the district's last 20 orders (a range of
//! ORDER-LINE below D_NEXT_O_ID) whose stock at the home warehouse is below the threshold.
//! Reads only.

use super::access::{self, Intent};
use super::codec::Row;
use super::error::TpccError;
use super::input::StockLevelInput;
use super::keys;
use super::order_status::ORDER_LINES_MAX;
use super::rows::{District, OrderLine, Stock};
use super::tables::TpccTables;
use super::txn::TpccTxn;
use super::TxOutcome;
use ringdb::Direction;
use std::collections::BTreeSet;
use std::ops::Bound;

/// Orders StockLevel looks back over.
const RECENT_ORDERS: u32 = 20;

/// Runs StockLevel's reads in `txn` (the caller commits); returns the outcome and the count
/// of low-stock items.
pub async fn stock_level(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    input: &StockLevelInput,
) -> Result<(TxOutcome, usize), TpccError> {
    let (w, d) = (input.warehouse, input.district);
    let district: District =
        access::read(txn, tables.district, &keys::district(w, d), Intent::Read).await?;
    let next = district.next_order_id;
    let start = keys::order(w, d, next.saturating_sub(RECENT_ORDERS));
    let end = keys::order(w, d, next);
    let lines = txn
        .scan(
            tables.order_line,
            Bound::Included(&start),
            Bound::Excluded(&end),
            Direction::Forward,
            RECENT_ORDERS as usize * ORDER_LINES_MAX,
        )
        .await?;
    let mut items = BTreeSet::new();
    for (_, bytes) in &lines {
        items.insert(OrderLine::item_of(bytes)?);
    }
    let mut low = 0;
    for item in items {
        // S_QUANTITY is all it needs of the row: the rest is not decoded.
        let key = keys::stock(w, item);
        let bytes = txn.get(tables.stock, &key).await?;
        let bytes = bytes.ok_or_else(|| TpccError::MissingRow {
            table: Stock::TABLE,
            key: key.to_vec(),
        })?;
        if Stock::quantity_of(&bytes)? < input.threshold {
            low += 1;
        }
    }
    Ok((TxOutcome::Committed, low))
}
