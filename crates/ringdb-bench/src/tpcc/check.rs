//! The consistency conditions of clause 3.3.2, 1 to 4, checked per warehouse and district by
//! reading the tables directly (after a run, with no transaction running):
//!
//! 1. W_YTD = sum(D_YTD) of the warehouse's districts;
//! 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) of the district;
//! 3. max(NO_O_ID) - min(NO_O_ID) + 1 = the district's rows in NEW-ORDER;
//! 4. sum(O_OL_CNT) = the district's rows in ORDER-LINE.
//!
//! Each condition reports whether it held and the first few violations, in words.

use super::codec::Row;
use super::keys;
use super::rows::{District, Order, Warehouse};
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

/// The verdicts of conditions 1-4.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// One per condition, in order.
    pub conditions: Vec<ConditionResult>,
}

impl CheckReport {
    /// Whether every condition held.
    pub fn passed(&self) -> bool {
        self.conditions.iter().all(|c| c.passed)
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
    db.runtime()
        .block_on(async move { check_all(&h, &tables, &scale).await })?
}

async fn check_all(h: &DbHandle, tables: &TpccTables, scale: &TpccScale) -> Result<CheckReport> {
    let mut conditions = [
        ConditionResult::new(1, "W_YTD = sum(D_YTD)"),
        ConditionResult::new(2, "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)"),
        ConditionResult::new(3, "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER"),
        ConditionResult::new(4, "sum(O_OL_CNT) = rows in ORDER-LINE"),
    ];
    for w in 1..=scale.warehouses {
        let warehouse: Warehouse = read_row(h, tables.warehouse, &keys::warehouse(w)).await?;
        let mut ytd_sum = 0i64;
        for d in 1..=scale.districts {
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
    })
}

/// Conditions 2-4 on one district's totals.
fn judge_district(conditions: &mut [ConditionResult; 4], t: &DistrictTotals, w: u32, d: u32) {
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
        .get_in(table, key)
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
            .scan_in(table, start, end_bound(), Direction::Forward, SCAN_CHUNK)
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
