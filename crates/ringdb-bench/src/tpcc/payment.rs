//! Payment (clause 2.5): charge the customer (found by id, or by last name through the
//! index: the middle of the name group), prefix a bad-credit customer's C_DATA with the
//! payment, add the amount to the district's and the warehouse's year-to-date, and insert
//! HISTORY. The hot rows (warehouse, district) are taken last.

use super::access::{self, Intent};
use super::codec::Text;
use super::error::TpccError;
use super::input::PaymentInput;
use super::keys;
use super::population::now_micros;
use super::rows::{District, History, Warehouse};
use super::tables::TpccTables;
use super::txn::TpccTxn;
use super::TxOutcome;

/// Runs Payment's reads and writes in `txn` (the caller commits). With `prefetch`, the page
/// its HISTORY row goes to is faulted in before the hot rows are locked.
pub async fn payment(
    txn: &mut TpccTxn<'_>,
    tables: &TpccTables,
    input: &PaymentInput,
    prefetch: bool,
) -> Result<TxOutcome, TpccError> {
    let (w, d) = (input.warehouse, input.district);
    let amount = input.amount_cents;
    // The customer first, the warehouse last: every Payment of a warehouse updates its row,
    // so it is locked only for the in-memory work at the end, not across the customer's
    // page faults (the clause's order of steps is not an order of execution; the result of
    // a serializable transaction does not depend on it).
    let (cw, cd) = (input.customer_warehouse, input.customer_district);
    let (c, mut customer) =
        access::find_customer(txn, tables, (cw, cd), &input.customer, Intent::Update).await?;
    customer.balance_cents -= amount;
    customer.ytd_payment_cents += amount;
    customer.payment_count += 1;
    if customer.credit.as_bytes() == b"BC" {
        let entry = format!(
            "{c} {cd} {cw} {d} {w} {}.{:02} ",
            amount / 100,
            amount % 100
        );
        // The newest entry first; what passes C_DATA's 500 bytes is dropped.
        let data = Text::concat_truncated(&[entry.as_bytes(), customer.data.as_bytes()]);
        customer.data = data;
    }
    access::write(txn, tables.customer, &keys::customer(cw, cd, c), &customer).await?;
    let history_key = keys::history((w, d), (cw, cd, c), customer.payment_count);
    if prefetch {
        txn.prefetch(&[(tables.history, &history_key)]).await?;
    }
    let district_key = keys::district(w, d);
    let mut district: District =
        access::read(txn, tables.district, &district_key, Intent::Update).await?;
    district.ytd_cents += amount;
    access::write(txn, tables.district, &district_key, &district).await?;
    let warehouse_key = keys::warehouse(w);
    let mut warehouse: Warehouse =
        access::read(txn, tables.warehouse, &warehouse_key, Intent::Update).await?;
    warehouse.ytd_cents += amount;
    access::write(txn, tables.warehouse, &warehouse_key, &warehouse).await?;
    let history = History {
        district: d,
        warehouse: w,
        date_micros: now_micros(),
        amount_cents: amount,
        data: Text::concat_truncated(&[
            warehouse.name.as_bytes(),
            b"    ",
            district.name.as_bytes(),
        ]),
    };
    access::write(txn, tables.history, &history_key, &history).await?;
    Ok(TxOutcome::Committed)
}
