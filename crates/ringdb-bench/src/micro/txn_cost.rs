//! `txn-cost` (issue 36): the cycles of one TPC-C transaction of each kind, in memory, broken
//! down by phase (begin, prefetch, reads, reads for update, writes, scans, commit, and the
//! transaction's own code), serializable beside the same transactions with isolation off
//! (the paper's engine runs without), so that the cost of serializability is a figure. The
//! measurement is `tpcc::measure_cost` (its module doc gives the method); this file turns it
//! into the micro's table, notes and plot.

use super::{MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchError, Result};
use crate::tpcc::phases::PHASES;
use crate::tpcc::{measure_cost, CostPlan, CostReport, KindCost, TxKind};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The plan of a run: the standard population, or the small one with `quick`.
fn plan(quick: bool) -> CostPlan {
    if quick {
        CostPlan {
            small: true,
            per_kind: 200,
            rounds: 3,
            warmup: 500,
        }
    } else {
        CostPlan {
            small: false,
            per_kind: 2_000,
            rounds: 5,
            warmup: 5_000,
        }
    }
}

/// Where the database lives: a directory beside the target, removed after the run.
fn db_dir(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(".txn-cost");
    PathBuf::from(name)
}

/// Runs the benchmark: load W=1, measure every kind at both isolations, report.
pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let plan = plan(opts.quick);
    let dir = db_dir(&opts.target);
    let measured = measure_cost(&dir, plan, opts.progress);
    let _ = std::fs::remove_dir_all(&dir);
    let report = measured?;
    if !report.consistent {
        return Err(BenchError::Internal {
            what: "the TPC-C consistency checks failed after txn-cost's transactions",
        });
    }
    let mut columns = vec!["transaction", "isolation"];
    columns.extend(PHASES.iter().map(|p| p.name()));
    columns.extend(["body", "total", "samples"]);
    let mut r = MicroResult::new(
        "txn-cost",
        "issue 36: ticks of one in-memory TPC-C transaction by phase, serializable beside isolation off",
        &columns,
    );
    for cost in &report.kinds {
        r.row(row(cost));
    }
    r.plot = Some(plot(&report));
    notes(&mut r, plan, &report);
    Ok(r)
}

/// A kind's name in the table (a Delivery's figures are one district's).
fn kind_name(kind: TxKind) -> &'static str {
    match kind {
        TxKind::NewOrder => "NewOrder",
        TxKind::Payment => "Payment",
        TxKind::OrderStatus => "OrderStatus",
        TxKind::Delivery => "Delivery (1 district)",
        TxKind::StockLevel => "StockLevel",
    }
}

fn row(cost: &KindCost) -> Vec<serde_json::Value> {
    let mut row = vec![json!(kind_name(cost.kind)), json!(cost.isolation)];
    row.extend(cost.phases.iter().map(|t| json!(t.round())));
    row.extend([
        json!(cost.body.round()),
        json!(cost.total.round()),
        json!(cost.samples),
    ]);
    row
}

/// NewOrder's and Payment's ticks per phase (x: the phase's number, then body, then total),
/// one line per isolation.
fn plot(report: &CostReport) -> Plot {
    let series = report
        .kinds
        .iter()
        .filter(|c| matches!(c.kind, TxKind::NewOrder | TxKind::Payment))
        .map(|c| Series {
            label: format!("{} {}", kind_name(c.kind), c.isolation),
            points: c
                .phases
                .iter()
                .chain([&c.body, &c.total])
                .enumerate()
                .map(|(i, &t)| ((i + 1) as f64, t))
                .collect(),
        })
        .collect();
    let names: Vec<String> = PHASES
        .iter()
        .map(|p| p.name())
        .chain(["body", "total"])
        .enumerate()
        .map(|(i, n)| format!("{} {n}", i + 1))
        .collect();
    Plot::new(
        format!(
            "TPC-C in memory, ticks per transaction: {}",
            names.join(", ")
        ),
        "phase",
        "ticks per transaction",
        series,
    )
}

fn notes(r: &mut MicroResult, plan: CostPlan, report: &CostReport) {
    let population = if plan.small { "small" } else { "standard" };
    r.notes.push(format!(
        "W=1, {population} population, in memory, no log, one transaction at a time; {} transactions per kind, isolation and round (Deliveries: districts), {} rounds alternating the isolations' order, after {} of the mix; ticks are the time-stamp counter's, means without preempted samples",
        plan.per_kind, plan.rounds, plan.warmup
    ));
    for kind in TxKind::ALL {
        let total = |isolation: &str| {
            (report.kinds.iter())
                .find(|c| c.kind == kind && c.isolation == isolation)
                .map_or(0.0, |c| c.total)
        };
        let (serializable, off) = (total("serializable"), total("off"));
        r.notes.push(format!(
            "{}: serializable {serializable:.0}, off {off:.0} ticks: isolation costs {:.0} ({:.2}x)",
            kind_name(kind),
            serializable - off,
            serializable / off.max(1.0)
        ));
    }
    r.notes.push(format!(
        "a transaction of the mix (45% NewOrder, 43% Payment, 4% each of the others, a Delivery as its ten districts): serializable {:.0}, off {:.0} ticks; StockLevel runs at read committed under serializable, as the runs do",
        report.mix[0], report.mix[1]
    ));
    r.notes.push(format!(
        "body: ticks outside every phase (rows decoded and encoded, the transaction's own logic); page reads during the measurement: {} (0: in memory); the consistency checks passed after it",
        report.page_reads
    ));
}
