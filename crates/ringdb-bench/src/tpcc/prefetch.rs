//! What a transaction reads, faulted in together before it locks anything
//! ([`ringdb::Transaction::prefetch`]).
//!
//! Out of memory, NewOrder's reads fault one after another (warehouse, district, customer,
//! then an item and a STOCK row per line) while it holds its district's row exclusively, so
//! every other NewOrder of the district waits (or dies) behind ten page faults. Prefetched,
//! those faults are one batch of reads in flight at once, taken before the first lock; the
//! locked part then runs from memory. Payment's customer (or the page of its last-name
//! index where the name group starts) likewise. The other three read ranges whose pages
//! are known only as they go (order lines of an order found by a scan), and are 12% of the
//! mix: they run as before.

use super::error::TpccError;
use super::input::{CustomerChoice, NewOrderInput, PaymentInput};
use super::keys::{self, Key};
use super::tables::TpccTables;
use super::txn::TpccTxn;
use ringdb::TableId;

/// Faults in the rows NewOrder `input` reads: its warehouse, district and customer, and
/// each line's item and STOCK row.
pub async fn new_order(
    txn: &TpccTxn<'_>,
    tables: &TpccTables,
    input: &NewOrderInput,
) -> Result<(), TpccError> {
    let (w, d) = (input.warehouse, input.district);
    let mut rows: Vec<(TableId, Key)> = Vec::with_capacity(3 + 2 * input.lines.len());
    rows.push((tables.warehouse, keys::warehouse(w)));
    rows.push((tables.district, keys::district(w, d)));
    rows.push((tables.customer, keys::customer(w, d, input.customer)));
    // Where its order-by-customer index row goes (the order id is not known yet: the
    // customer's first possible key lands on the same leaf or the one before it).
    let by_customer = keys::order_by_customer(w, d, input.customer, 0);
    rows.push((tables.order_by_customer, by_customer));
    for line in &input.lines {
        rows.push((tables.item, keys::item(line.item)));
        rows.push((tables.stock, keys::stock(line.supply_warehouse, line.item)));
    }
    fetch(txn, &rows).await
}

/// Faults in the customer Payment `input` charges: chosen by id, its row; by last name, the
/// page of the index where its name group starts. (The page its HISTORY row goes to is
/// prefetched once the customer is known, before the hot rows are locked: `payment.rs`.)
pub async fn payment(
    txn: &TpccTxn<'_>,
    tables: &TpccTables,
    input: &PaymentInput,
) -> Result<(), TpccError> {
    let (cw, cd) = (input.customer_warehouse, input.customer_district);
    let row = match &input.customer {
        CustomerChoice::Id(c) => (tables.customer, keys::customer(cw, cd, *c)),
        CustomerChoice::LastName(last) => (
            tables.customer_by_name,
            keys::customer_name_prefix(cw, cd, last),
        ),
    };
    fetch(txn, &[row]).await
}

/// Prefetches `rows` in one batch.
async fn fetch(txn: &TpccTxn<'_>, rows: &[(TableId, Key)]) -> Result<(), TpccError> {
    let keys: Vec<(TableId, &[u8])> = rows.iter().map(|(t, k)| (*t, k.as_bytes())).collect();
    txn.prefetch(&keys).await
}
