//! The consistency conditions of clause 3.3.2, 1 to 4, checked per warehouse and district by
//! reading the tables directly (after a run, with no transaction running):
//!
//! 1. W_YTD = sum(D_YTD) of the warehouse's districts;
//! 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) of the district;
//! 3. max(NO_O_ID) - min(NO_O_ID) + 1 = the district's rows in NEW-ORDER;
//! 4. sum(O_OL_CNT) = the district's rows in ORDER-LINE.
//!
//! And one of ringdb's own, over all warehouses together (number 0: the clause does not list
//! it, but it follows from Payment, the only transaction that changes either side): the sum
//! of W_YTD grew by as much as the sum of C_YTD_PAYMENT. A Payment whose customer lives on
//! another shard changes one on each shard, so it is the check of cross-shard commits.
//!
//! Each condition reports whether it held and the first few violations, in words.

use super::codec::Row;
use super::keys;
use super::population;
use super::rows::{Customer, District, Order, Warehouse};
use super::tables::TpccTables;
use super::TpccScale;
use crate::error::{BenchError, Result};
use ringdb::{DbHandle, Direction, LocalDb, TableId};
use serde::Serialize;
use std::ops::Bound;

/// Violations a condition keeps in words (the rest are only counted).
const VIOLATIONS_KEPT: usize = 8;
/// Pairs a scan of the check reads per call.
const SCAN_CHUNK: usize = 1024;

/// One condition's verdict.
#[derive(Clone, Debug, Serialize)]
pub struct ConditionResult {
    /// Its number in clause 3.3.2.
    pub number: u32,
    /// What it states.
    pub name: &'static str,
    /// Whether it held everywhere.
    pub passed: bool,
    /// Warehouses or districts checked.
    pub checked: u64,
    /// Places it did not hold.
    pub violation_count: u64,
    /// The first few of them, in words.
    pub violations: Vec<String>,
}

impl ConditionResult {
    fn new(number: u32, name: &'static str) -> Self {
        ConditionResult {
            number,
            name,
            passed: true,
            checked: 0,
            violation_count: 0,
            violations: Vec::new(),
        }
    }

    /// Counts one place checked; records a violation when `holds` is false.
    fn verdict(&mut self, holds: bool, describe: impl FnOnce() -> String) {
        self.checked += 1;
        if holds {
            return;
        }
        self.passed = false;
        self.violation_count += 1;
        if self.violations.len() < VIOLATIONS_KEPT {
            self.violations.push(describe());
        }
    }
}

/// The verdicts of conditions 1-4, then of the payments condition (number 0).
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// One per condition, in order.
    pub conditions: Vec<ConditionResult>,
    /// What the payments condition adds up.
    pub payments: PaymentSums,
}

/// How much the warehouses' W_YTD and the customers' C_YTD_PAYMENT grew since the load, in
/// cents, over the warehouses checked.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct PaymentSums {
    /// Sum of W_YTD less its value at load.
    pub warehouse_growth_cents: i64,
    /// Sum of C_YTD_PAYMENT less its value at load.
    pub customer_growth_cents: i64,
}

impl CheckReport {
    /// Whether every condition held.
    pub fn passed(&self) -> bool {
        self.conditions.iter().all(|c| c.passed)
    }

    /// Adds the verdicts of `other` (other warehouses: another shard's) to these.
    pub fn merge(&mut self, other: CheckReport) {
        assert_eq!(self.conditions.len(), other.conditions.len());
        for (mine, theirs) in self.conditions.iter_mut().zip(other.conditions) {
            assert_eq!(mine.number, theirs.number, "the same conditions, in order");
            mine.passed &= theirs.passed;
            mine.checked += theirs.checked;
            mine.violation_count += theirs.violation_count;
            let room = VIOLATIONS_KEPT.saturating_sub(mine.violations.len());
            mine.violations
                .extend(theirs.violations.into_iter().take(room));
        }
        self.payments.warehouse_growth_cents += other.payments.warehouse_growth_cents;
        self.payments.customer_growth_cents += other.payments.customer_growth_cents;
    }

    /// Judges the payments condition on the sums, once every warehouse is in them.
    pub(crate) fn judge_payments(&mut self) {
        let sums = self.payments;
        let condition = self
            .conditions
            .iter_mut()
            .find(|c| c.number == 0)
            .expect("the payments condition is listed");
        let holds = sums.warehouse_growth_cents == sums.customer_growth_cents;
        condition.verdict(holds, || {
            format!(
                "the warehouses' W_YTD grew by {} cents, the customers' C_YTD_PAYMENT by {}",
                sums.warehouse_growth_cents, sums.customer_growth_cents
            )
        });
    }
}

/// What one district's rows add up to.
#[derive(Default)]
struct DistrictTotals {
    ytd_cents: i64,
    next_order_id: u32,
    max_order_id: Option<u32>,
    line_count_sum: u64,
    new_orders: u64,
    min_new_order: Option<u32>,
    max_new_order: Option<u32>,
    order_lines: u64,
}

/// Checks conditions 1-4 on every warehouse and district of `scale` in `db`.
pub fn check(db: &mut LocalDb, tables: &TpccTables, scale: &TpccScale) -> Result<CheckReport> {
    let h = db.handle();
    let (tables, scale) = (*tables, *scale);
    let warehouses: Vec<u32> = (1..=scale.warehouses).collect();
    let mut report = db
        .runtime()
        .block_on(async move { check_warehouses(&h, &tables, &scale, &warehouses).await })??;
    report.judge_payments();
    Ok(report)
}

/// Checks conditions 1-4 on `warehouses` (and every district of each) through `h`, and adds
/// up their payments (judged by [`CheckReport::judge_payments`] once all are in).
pub(crate) async fn check_warehouses(
    h: &DbHandle,
    tables: &TpccTables,
    scale: &TpccScale,
    warehouses: &[u32],
) -> Result<CheckReport> {
    let mut conditions: [ConditionResult; 5] = [
        ConditionResult::new(1, "W_YTD = sum(D_YTD)"),
        ConditionResult::new(2, "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)"),
        ConditionResult::new(3, "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER"),
        ConditionResult::new(4, "sum(O_OL_CNT) = rows in ORDER-LINE"),
        ConditionResult::new(
            0,
            "sum(W_YTD) and sum(C_YTD_PAYMENT) grew alike, all warehouses",
        ),
    ];
    let mut payments = PaymentSums::default();
    for &w in warehouses {
        let warehouse: Warehouse = read_row(h, tables.warehouse, &keys::warehouse(w)).await?;
        payments.warehouse_growth_cents +=
            warehouse.ytd_cents - population::warehouse_ytd_cents(scale);
        let mut ytd_sum = 0i64;
        for d in 1..=scale.districts {
            payments.customer_growth_cents += customer_payments_growth(h, tables, w, d).await?;
            let totals = district_totals(h, tables, w, d).await?;
            ytd_sum += totals.ytd_cents;
            judge_district(&mut conditions, &totals, w, d);
        }
        conditions[0].verdict(warehouse.ytd_cents == ytd_sum, || {
            format!(
                "warehouse {w}: W_YTD {} but its districts' D_YTD sum to {}",
                warehouse.ytd_cents, ytd_sum
            )
        });
    }
    Ok(CheckReport {
        conditions: conditions.into(),
        payments,
    })
}

/// How much the C_YTD_PAYMENT of district (w, d)'s customers grew since the load, in cents.
async fn customer_payments_growth(
    h: &DbHandle,
    tables: &TpccTables,
    w: u32,
    d: u32,
) -> Result<i64> {
    let mut growth = 0i64;
    let prefix = keys::district_prefix(w, d);
    for_each_in_prefix(h, tables.customer, &prefix, |_, value| {
        let customer = Customer::decode(value).map_err(|source| BenchError::TpccRow { source })?;
        growth += customer.ytd_payment_cents - population::FIRST_PAYMENT_CENTS;
        Ok(())
    })
    .await?;
    Ok(growth)
}

/// Conditions 2-4 on one district's totals.
fn judge_district(conditions: &mut [ConditionResult; 5], t: &DistrictTotals, w: u32, d: u32) {
    let last = t.next_order_id.checked_sub(1);
    let newest_ok =
        t.max_order_id == last && (t.max_new_order.is_none() || t.max_new_order == last);
    conditions[1].verdict(newest_ok, || {
        format!(
            "district {w}/{d}: D_NEXT_O_ID - 1 = {last:?}, max(O_ID) = {:?}, max(NO_O_ID) = {:?}",
            t.max_order_id, t.max_new_order
        )
    });
    let span = match (t.min_new_order, t.max_new_order) {
        (Some(min), Some(max)) => u64::from(max.saturating_sub(min)) + 1,
        _ => 0,
    };
    conditions[2].verdict(span == t.new_orders, || {
        format!(
            "district {w}/{d}: NO_O_ID spans {span} ({:?}..={:?}) but NEW-ORDER has {} rows",
            t.min_new_order, t.max_new_order, t.new_orders
        )
    });
    conditions[3].verdict(t.line_count_sum == t.order_lines, || {
        format!(
            "district {w}/{d}: sum(O_OL_CNT) = {} but ORDER-LINE has {} rows",
            t.line_count_sum, t.order_lines
        )
    });
}

/// Reads district (w, d) and adds up its orders, new orders and order lines.
async fn district_totals(
    h: &DbHandle,
    tables: &TpccTables,
    w: u32,
    d: u32,
) -> Result<DistrictTotals> {
    let district: District = read_row(h, tables.district, &keys::district(w, d)).await?;
    let mut t = DistrictTotals {
        ytd_cents: district.ytd_cents,
        next_order_id: district.next_order_id,
        ..DistrictTotals::default()
    };
    let prefix = keys::district_prefix(w, d);
    for_each_in_prefix(h, tables.order, &prefix, |key, value| {
        let order = Order::decode(value).map_err(|source| BenchError::TpccRow { source })?;
        t.line_count_sum += u64::from(order.line_count);
        t.max_order_id = t.max_order_id.max(keys::u32_at(key, keys::ORDER_ID_OFFSET));
        Ok(())
    })
    .await?;
    for_each_in_prefix(h, tables.new_order, &prefix, |key, _| {
        let o = keys::u32_at(key, keys::ORDER_ID_OFFSET);
        t.new_orders += 1;
        t.min_new_order = t.min_new_order.min(o).or(o);
        t.max_new_order = t.max_new_order.max(o);
        Ok(())
    })
    .await?;
    for_each_in_prefix(h, tables.order_line, &prefix, |_, _| {
        t.order_lines += 1;
        Ok(())
    })
    .await?;
    Ok(t)
}

/// A row that must exist, decoded.
async fn read_row<R: Row>(h: &DbHandle, table: TableId, key: &[u8]) -> Result<R> {
    let bytes = h
        .in_table(table)
        .get(key)
        .await?
        .ok_or(BenchError::TpccMissingRow {
            table: R::TABLE,
            key: key.to_vec(),
        })?;
    R::decode(&bytes).map_err(|source| BenchError::TpccRow { source })
}

/// Calls `f` on every pair of `table` whose key starts with `prefix`, in key order, reading
/// a chunk at a time.
async fn for_each_in_prefix(
    h: &DbHandle,
    table: TableId,
    prefix: &[u8],
    mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    let end = keys::prefix_end(prefix);
    let end_bound = || end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let mut after: Option<Vec<u8>> = None;
    // Each round reads a full chunk or ends; the table is finite, so the loop is too.
    loop {
        let start = after
            .as_deref()
            .map_or(Bound::Included(prefix), Bound::Excluded);
        let chunk = h
            .in_table(table)
            .scan(start, end_bound(), Direction::Forward, SCAN_CHUNK)
            .await?;
        for (key, value) in &chunk {
            f(key, value)?;
        }
        if chunk.len() < SCAN_CHUNK {
            return Ok(());
        }
        after = chunk.last().map(|(key, _)| key.clone());
    }
}
