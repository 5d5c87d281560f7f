//! NewOrder (clause 2.4): take the district's next order id; for each line read the item,
//! update its STOCK (the S_QUANTITY rule of 2.4.2.2) and insert the ORDER-LINE; then insert
//! the ORDER, its NEW-ORDER and its index row. An item id that does not exist (the 1% whose
//! last line names an unused one) rolls the whole transaction back.

use super::access::{self, Intent};
use super::codec::Row;
use super::error::TpccError;
use super::input::{NewOrderInput, NewOrderLine};
use super::keys;
use super::population::now_micros;
use super::rows::{Customer, District, Item, Order, OrderLine, Stock, Warehouse};
use super::tables::TpccTables;
use super::txn::TpccTxn;
use super::TxOutcome;

/// Runs NewOrder's reads and writes in `txn` (the caller commits or aborts).
///
/// The lines whose STOCK lives on another shard first (warehouses partitioned over shards):
/// each is a round trip to that shard, and the hot rows (the warehouse every NewOrder
/// reads and every Payment updates, the district every NewOrder of it updates) must not be
/// locked across it. Then the order of a lone database: warehouse, district, customer, and
/// the other lines, whose pages the prefetch has read in.
pub async fn new_order(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    input: &NewOrderInput,
) -> Result<TxOutcome, TpccError> {
    let (w, d) = (input.warehouse, input.district);
    // At most one entry per line (15): the remote lines' rows, by line index.
    let mut taken: Vec<(usize, OrderLine)> = Vec::new();
    for (index, line) in input.lines.iter().enumerate() {
        if txn.is_elsewhere(line.supply_warehouse) {
            match take_stock(txn, tables, (w, d), line).await? {
                Some(row) => taken.push((index, row)),
                None => return Ok(TxOutcome::RolledBack),
            }
        }
    }
    let warehouse: Warehouse =
        access::read(txn, tables.warehouse, &keys::warehouse(w), Intent::Read).await?;
    let district_key = keys::district(w, d);
    let mut district: District =
        access::read(txn, tables.district, &district_key, Intent::Update).await?;
    let o = district.next_order_id;
    district.next_order_id = o + 1;
    access::write(txn, tables.district, &district_key, &district).await?;
    let customer_key = keys::customer(w, d, input.customer);
    let customer: Customer =
        access::read(txn, tables.customer, &customer_key, Intent::Read).await?;
    let mut total_cents = 0i64;
    for (number, (index, line)) in (1..).zip(input.lines.iter().enumerate()) {
        let row = match taken.iter().position(|(i, _)| *i == index) {
            Some(at) => taken.swap_remove(at).1,
            None => match take_stock(txn, tables, (w, d), line).await? {
                Some(row) => row,
                None => return Ok(TxOutcome::RolledBack),
            },
        };
        total_cents += row.amount_cents;
        let key = keys::order_line(w, d, o, number);
        access::write(txn, tables.order_line, &key, &row).await?;
    }
    // The ORDER, NEW-ORDER and index rows last: a Delivery scanning the district's NEW-ORDER
    // range conflicts with an uncommitted NEW-ORDER row, so that row is locked only for the
    // end of the transaction, not across the lines' STOCK reads.
    let order = Order {
        customer: input.customer,
        entry_micros: now_micros(),
        carrier: None,
        line_count: input.lines.len() as u8,
        all_local: input.lines.iter().all(|l| l.supply_warehouse == w),
    };
    access::write(txn, tables.order, &keys::order(w, d, o), &order).await?;
    txn.put(tables.new_order, &keys::new_order(w, d, o), &[])
        .await?;
    let by_customer = keys::order_by_customer(w, d, input.customer, o);
    txn.put(tables.order_by_customer, &by_customer, &[]).await?;
    // The total the terminal would show (clause 2.4.2.2), in cents.
    let rates =
        i128::from(10_000 - customer.discount) * i128::from(10_000 + warehouse.tax + district.tax);
    let total = i128::from(total_cents) * rates / 100_000_000;
    debug_assert!(total >= 0, "an order's total is never negative");
    Ok(TxOutcome::Committed)
}

/// One line's item and STOCK update (the S_QUANTITY rule of 2.4.2.2) for district (w, d).
/// Returns the ORDER-LINE row to write, or `None` for an item that does not exist (the
/// transaction rolls back).
async fn take_stock(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    (w, d): (u32, u32),
    line: &NewOrderLine,
) -> Result<Option<OrderLine>, TpccError> {
    let Some(item_bytes) = txn.get(tables.item, &keys::item(line.item)).await? else {
        return Ok(None);
    };
    let item = Item::decode(&item_bytes)?;
    let stock_key = keys::stock(line.supply_warehouse, line.item);
    let mut stock: Stock = access::read(txn, tables.stock, &stock_key, Intent::Update).await?;
    let quantity = i32::from(line.quantity);
    stock.quantity = if stock.quantity >= quantity + 10 {
        stock.quantity - quantity
    } else {
        stock.quantity - quantity + 91
    };
    stock.ytd += u64::from(line.quantity);
    stock.order_count += 1;
    if line.supply_warehouse != w {
        stock.remote_count += 1;
    }
    let dist_info = stock.dist[(d as usize - 1).min(9)];
    access::write(txn, tables.stock, &stock_key, &stock).await?;
    Ok(Some(OrderLine {
        item: line.item,
        supply_warehouse: line.supply_warehouse,
        delivery_micros: None,
        quantity: line.quantity,
        amount_cents: i64::from(line.quantity) * item.price_cents,
        dist_info,
    }))
}
