//! Delivery (clause 2.7): for each district of the warehouse, the oldest NEW-ORDER (a forward
//! scan from the district's start) is deleted, its ORDER gets the carrier, its lines the
//! delivery date, and the customer the order's amount on its balance and one more delivery.
//! A district without an undelivered order is skipped.
//!
//! The clause lets the business transaction be one to ten database transactions ("each order
//! is processed (delivered) in full within the scope of a read-write database transaction";
//! how many are grouped in one is the implementation's choice): [`delivery`] does all ten
//! districts in one, [`delivery_district`] one district, for the runner's per-district mode.

use super::access::{self, Intent};
use super::error::TpccError;
use super::input::DeliveryInput;
use super::keys;
use super::population::now_micros;
use super::rows::{Customer, Order, OrderLine};
use super::tables::TpccTables;
use super::txn::TpccTxn;
use super::TxOutcome;
use ringdb::Direction;

/// Runs Delivery's reads and writes in `txn` (the caller commits).
pub async fn delivery(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    input: &DeliveryInput,
) -> Result<TxOutcome, TpccError> {
    let now = now_micros();
    for d in 1..=input.districts {
        deliver_district(txn, tables, input, d, now).await?;
    }
    Ok(TxOutcome::Committed)
}

/// Runs district `d`'s part of Delivery in `txn`, a transaction of its own (the caller
/// commits).
pub async fn delivery_district(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    input: &DeliveryInput,
    d: u32,
) -> Result<TxOutcome, TpccError> {
    deliver_district(txn, tables, input, d, now_micros()).await?;
    Ok(TxOutcome::Committed)
}

/// Delivers district `d`'s oldest undelivered order, if it has one.
async fn deliver_district(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    input: &DeliveryInput,
    d: u32,
    now: u64,
) -> Result<(), TpccError> {
    let w = input.warehouse;
    let prefix = keys::district_prefix(w, d);
    let oldest = access::scan_prefix(txn, tables.new_order, &prefix, Direction::Forward, 1).await?;
    let Some((new_order_key, _)) = oldest.first() else {
        return Ok(());
    };
    let o = keys::u32_at(new_order_key, keys::ORDER_ID_OFFSET).ok_or_else(|| {
        TpccError::MissingRow {
            table: "NEW-ORDER",
            key: new_order_key.clone(),
        }
    })?;
    txn.delete(tables.new_order, new_order_key).await?;
    let order_key = keys::order(w, d, o);
    let mut order: Order = access::read(txn, tables.order, &order_key, Intent::Update).await?;
    order.carrier = Some(input.carrier);
    access::write(txn, tables.order, &order_key, &order).await?;
    let mut amount_cents = 0i64;
    for number in 1..=u32::from(order.line_count) {
        let key = keys::order_line(w, d, o, number);
        let mut line: OrderLine =
            access::read(txn, tables.order_line, &key, Intent::Update).await?;
        line.delivery_micros = Some(now);
        amount_cents += line.amount_cents;
        access::write(txn, tables.order_line, &key, &line).await?;
    }
    let customer_key = keys::customer(w, d, order.customer);
    let mut customer: Customer =
        access::read(txn, tables.customer, &customer_key, Intent::Update).await?;
    customer.balance_cents += amount_cents;
    customer.delivery_count += 1;
    access::write(txn, tables.customer, &customer_key, &customer).await
}
