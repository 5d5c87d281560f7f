//! What a TPC-C run reports, and the report as text.
//!
//! Two kinds of abort are kept apart because they mean different things: a **conflict** is an
//! attempt the concurrency control killed (wait-die) and the runner retried, a cost of running
//! transactions concurrently; a **rollback** is the 1% of NewOrders the standard makes fail on
//! an invalid item, business logic that any engine pays.

use super::ladder::{TpccLadderReport, TpccStep};
use super::run::{TypeCounters, TX_KINDS};
use super::TxKind;
use crate::report::{BarChart, BarSeries};
use plotters::style::RGBColor;
use ringdb_lab::counters::LatencySummary;
use serde::Serialize;

/// One transaction type's share of a run.
#[derive(Clone, Debug, Serialize)]
pub struct TxTypeReport {
    /// The type.
    pub kind: TxKind,
    /// Transactions committed.
    pub committed: u64,
    /// Transactions rolled back on purpose (NewOrder's 1% invalid item).
    pub rolled_back: u64,
    /// Attempts that lost a conflict and were retried.
    pub conflicts: u64,
    /// Conflicts over attempts (attempts = conflicts + committed + rolled back).
    pub conflict_rate: f64,
    /// The conflicts by cause, most first.
    pub conflict_causes: Vec<ConflictCause>,
    /// Rollbacks over finished transactions (committed + rolled back).
    pub rollback_rate: f64,
    /// Latency from the first attempt to the commit or rollback, microseconds.
    pub lat_us: LatencySummary,
}

impl TxTypeReport {
    /// The report of `kind` from what the run's tasks counted.
    pub(crate) fn from_counters(kind: TxKind, counters: &TypeCounters) -> TxTypeReport {
        let finished = counters.committed + counters.rolled_back;
        let attempts = finished + counters.conflicts;
        TxTypeReport {
            kind,
            committed: counters.committed,
            rolled_back: counters.rolled_back,
            conflicts: counters.conflicts,
            conflict_rate: ratio(counters.conflicts, attempts),
            conflict_causes: ConflictCause::of(counters),
            rollback_rate: ratio(counters.rolled_back, finished),
            lat_us: counters.latency.summary(),
        }
    }

    /// Transactions finished: committed or rolled back.
    pub fn finished(&self) -> u64 {
        self.committed + self.rolled_back
    }
}

/// Conflicts of one cause: the table and the lock the losing transaction met there, or "at
/// commit" / "a part" for one met while a commit across shards ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConflictCause {
    /// The table (`tpcc.stock`, ...).
    pub table: String,
    /// The lock the older transaction held or waited for there.
    pub lock: String,
    /// Conflicts of this cause.
    pub conflicts: u64,
}

impl ConflictCause {
    /// `counters`' causes, most first.
    fn of(counters: &TypeCounters) -> Vec<ConflictCause> {
        let mut causes: Vec<ConflictCause> = (counters.causes.iter())
            .map(|(&(table, lock), &conflicts)| ConflictCause {
                table: table.to_string(),
                lock: lock.to_string(),
                conflicts,
            })
            .collect();
        causes.sort_by_key(|c| std::cmp::Reverse(c.conflicts));
        causes
    }
}

/// The conflicts of every type by cause, most first, as one line of text (at most
/// `CAUSES_SHOWN` causes).
fn causes_line(per_type: &[TxTypeReport]) -> Option<String> {
    const CAUSES_SHOWN: usize = 6;
    let mut all = std::collections::BTreeMap::<(&str, &str), u64>::new();
    for cause in per_type.iter().flat_map(|t| &t.conflict_causes) {
        *all.entry((&cause.table, &cause.lock)).or_default() += cause.conflicts;
    }
    let mut all: Vec<_> = all.into_iter().collect();
    all.sort_by_key(|a| std::cmp::Reverse(a.1));
    let shown: Vec<String> = (all.iter().take(CAUSES_SHOWN))
        .map(|((table, lock), n)| format!("{table} {lock} {n}"))
        .collect();
    (!shown.is_empty()).then(|| format!("  conflicts by cause: {}\n", shown.join(", ")))
}

/// `part / whole`, 0 when `whole` is 0.
fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// What a TPC-C run measured.
#[derive(Clone, Debug, Serialize)]
pub struct TpccRunReport {
    /// The run's name.
    pub label: String,
    /// Warehouses of the database.
    pub warehouses: u32,
    /// Concurrent tasks.
    pub tasks: usize,
    /// `serializable` or `off`.
    pub isolation: String,
    /// When commits released their locks: `early` (once applied) or `after-sync`.
    pub lock_release: super::LockRelease,
    /// Whether each Delivery ran as one transaction per district (else one for all ten).
    pub delivery_per_district: bool,
    /// Whether StockLevel ran at read committed (clause 2.8.2.3) under a serializable run.
    pub stock_level_read_committed: bool,
    /// Whether NewOrder and Payment prefetched their rows before locking.
    pub prefetch: bool,
    /// Transactions abandoned on a missing row: only without isolation (0 otherwise).
    pub anomalies: u64,
    /// Seconds the run took.
    pub secs: f64,
    /// Transactions committed (all types).
    pub committed: u64,
    /// NewOrders rolled back on purpose (the 1% invalid item).
    pub rolled_back: u64,
    /// Attempts that lost a conflict and were retried (all types).
    pub conflicts: u64,
    /// Transactions committed per second.
    pub tx_per_s: f64,
    /// NewOrders committed per minute (tpmC).
    pub tpmc: f64,
    /// Page reads (faults) per committed transaction.
    pub faults_per_tx: f64,
    /// Page writes (evictions, checkpoints) per committed transaction.
    pub writes_per_tx: f64,
    /// Page reads and writes per committed transaction.
    pub ios_per_tx: f64,
    /// Kernel entries per committed transaction.
    pub enters_per_tx: f64,
    /// CPU cycles of the whole process per committed transaction.
    pub cycles_per_tx: f64,
    /// With a log: durability points (log syncs) per committed transaction, and commits
    /// (log records) per durability point, group commit's effect; 0 without a log.
    pub log_syncs_per_tx: f64,
    pub commits_per_log_sync: f64,
    /// CPU time of the process over the run's time, percent.
    pub cpu_pct: f64,
    /// Transactions finished (committed or rolled back) in each whole second.
    pub per_second: Vec<u64>,
    /// Most io-wq worker threads seen at once.
    pub iowq_workers: usize,
    /// Shards the warehouses were spread over (1: one database).
    pub shards: usize,
    /// Transactions per committed one that had a part on another shard (a remote
    /// warehouse's STOCK or customer there).
    pub spanning_per_tx: f64,
    /// Operations per committed transaction sent to another shard.
    pub remote_operations_per_tx: f64,
    /// Each transaction type, in [`TX_KINDS`] order.
    pub per_type: Vec<TxTypeReport>,
}

impl TpccRunReport {
    /// The report of transaction type `kind`.
    pub fn of(&self, kind: TxKind) -> Option<&TxTypeReport> {
        self.per_type.iter().find(|t| t.kind == kind)
    }

    /// Conflicts over attempts, all types together.
    pub fn conflict_rate(&self) -> f64 {
        ratio(
            self.conflicts,
            self.committed + self.rolled_back + self.conflicts,
        )
    }

    /// Rollbacks over NewOrders finished.
    pub fn rollback_rate(&self) -> f64 {
        self.of(TxKind::NewOrder)
            .map_or(0.0, |t| ratio(t.rolled_back, t.finished()))
    }

    /// The report as text: throughput, counters, then one line per transaction type.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}: {} warehouse(s), {} tasks, isolation {}, locks released {}, Delivery as {}, {:.1} s\n",
            self.label,
            self.warehouses,
            self.tasks,
            self.isolation,
            match self.lock_release {
                super::LockRelease::Early => "once applied",
                super::LockRelease::AfterSync => "after the log sync",
            },
            if self.delivery_per_district {
                "one transaction per district"
            } else {
                "one transaction"
            },
            self.secs
        );
        s.push_str(&format!(
            "  {:.0} tx/s  tpmC {:.0}  committed {}  conflicts {} ({:.2}% of attempts, retried)  rollbacks {} ({:.2}% of NewOrders)\n",
            self.tx_per_s, self.tpmc, self.committed, self.conflicts, 100.0 * self.conflict_rate(),
            self.rolled_back, 100.0 * self.rollback_rate()
        ));
        s.push_str(&format!(
            "  per tx: faults {:.2}  writes {:.2}  enters {:.2}  cycles {:.0}  CPU {:.0}%  io-wq workers {}\n",
            self.faults_per_tx, self.writes_per_tx, self.enters_per_tx, self.cycles_per_tx,
            self.cpu_pct, self.iowq_workers
        ));
        if self.shards > 1 {
            s.push_str(&format!(
                "  shards {}: {:.1}% of transactions had a part on another shard, {:.3} operations per tx sent there\n",
                self.shards,
                100.0 * self.spanning_per_tx,
                self.remote_operations_per_tx
            ));
        }
        if self.anomalies > 0 {
            s.push_str(&format!(
                "  anomalies: {} transactions abandoned on a row another had not finished writing (isolation {})\n",
                self.anomalies, self.isolation
            ));
        }
        if self.log_syncs_per_tx > 0.0 {
            s.push_str(&format!(
                "  log: {:.3} syncs per tx, {:.1} commits per sync (group commit)\n",
                self.log_syncs_per_tx, self.commits_per_log_sync
            ));
        }
        s.push_str(&format!(
            "  {:<12} {:>9} {:>9} {:>9} {:>8} {:>10} {:>10} {:>10}\n",
            "type", "committed", "rollback", "conflict", "abort%", "p50 us", "p99 us", "max us"
        ));
        for t in &self.per_type {
            s.push_str(&type_row(t));
        }
        if let Some(line) = causes_line(&self.per_type) {
            s.push_str(&line);
        }
        let seconds: Vec<String> = self.per_second.iter().map(u64::to_string).collect();
        s.push_str(&format!("  tx per second: {}\n", seconds.join(" ")));
        s
    }
}

/// One transaction type's line.
fn type_row(t: &TxTypeReport) -> String {
    format!(
        "  {:<12} {:>9} {:>9} {:>9} {:>8.2} {:>10.1} {:>10.1} {:>10.1}\n",
        format!("{:?}", t.kind),
        t.committed,
        t.rolled_back,
        t.conflicts,
        100.0 * t.conflict_rate,
        t.lat_us.p50,
        t.lat_us.p99,
        t.lat_us.max
    )
}

/// Every transaction type in the report ran at least once.
pub fn every_type_ran(report: &TpccRunReport) -> bool {
    TX_KINDS
        .iter()
        .all(|&k| report.of(k).is_some_and(|t| t.finished() > 0))
}

/// The ladder as a table: one block per warehouse count, one row per step.
pub fn ladder_table(report: &TpccLadderReport) -> String {
    let mut s = format!(
        "dir {}  {} population  page {} B  pool {} pages  {} tasks  durability {}\nhost {}\n",
        report.dir,
        if report.small { "small" } else { "standard" },
        report.page_size,
        report.pool_pages,
        report.tasks,
        report.durability,
        report.host.describe()
    );
    for group in &report.groups {
        s.push_str(&format!(
            "\nW={}: data {} pages ({:.1}x pool){}\n",
            group.warehouses,
            group.data_pages,
            group.data_over_pool,
            if group.load_secs > 0.0 {
                format!(", loaded in {:.1} s", group.load_secs)
            } else {
                String::new()
            }
        ));
        s.push_str(&ladder_header());
        for step in &group.steps {
            s.push_str(&ladder_row(step));
        }
    }
    s
}

/// The steps table's columns; the latencies are p50/p99 in microseconds per type (NewOrder,
/// Payment, OrderStatus, Delivery, StockLevel).
fn ladder_header() -> String {
    format!(
        "{:<14} {:>9} {:>9} {:>8} {:>7} {:>7} {:>9} {:>7} {:>6} {:>6}  {:<13} {:<13} {:<13} {:<13} {:<13} {}\n",
        "step", "tx/s", "tpmC", "vs posix", "faults", "I/Os", "cyc/tx", "enters", "confl%", "rollb%",
        "NO p50/p99", "P p50/p99", "OS p50/p99", "D p50/p99", "SL p50/p99", "checks"
    )
}

/// One step's row; a step that did not run shows its status instead.
fn ladder_row(step: &TpccStep) -> String {
    if step.status != "ok" {
        return format!("{:<14} {}\n", step.name, step.status);
    }
    let latency = |kind: TxKind| {
        step.latencies
            .iter()
            .find(|l| l.kind == kind)
            .map_or("-".to_string(), |l| {
                format!("{:.0}/{:.0}", l.p50_us, l.p99_us)
            })
    };
    let checks = match step.checks_passed {
        Some(true) => "passed".to_string(),
        Some(false) => format!(
            "FAILED ({})",
            step.check_violations.first().map_or("", String::as_str)
        ),
        None => "-".to_string(),
    };
    format!(
        "{:<14} {:>9.0} {:>9.0} {:>8} {:>7.2} {:>7.2} {:>9.0} {:>7.2} {:>6.2} {:>6.2}  {:<13} {:<13} {:<13} {:<13} {:<13} {}\n",
        step.name,
        step.tx_per_s,
        step.tpmc,
        if step.speedup_posix > 0.0 { format!("{:.2}x", step.speedup_posix) } else { "-".into() },
        step.faults_per_tx,
        step.ios_per_tx,
        step.cycles_per_tx,
        step.enters_per_tx,
        100.0 * step.conflict_rate,
        100.0 * step.rollback_rate,
        latency(TxKind::NewOrder),
        latency(TxKind::Payment),
        latency(TxKind::OrderStatus),
        latency(TxKind::Delivery),
        latency(TxKind::StockLevel),
        checks
    )
}

/// Bar colours of the warehouse counts, in order.
const GROUP_COLOURS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
];

/// Fig. 6 as an SVG: transactions per second by step, one series per warehouse count (a
/// logarithmic axis: out of memory is orders of magnitude slower), each bar labelled with its
/// speedup over `posix`. Steps that did not run are named under the chart.
pub fn ladder_svg(report: &TpccLadderReport) -> String {
    let mut names: Vec<String> = Vec::new();
    for step in report.groups.iter().flat_map(|g| &g.steps) {
        if step.status == "ok" && !names.contains(&step.name) {
            names.push(step.name.clone());
        }
    }
    let series = report
        .groups
        .iter()
        .zip(GROUP_COLOURS.iter().cycle())
        .map(|(group, colour)| {
            let step = |name: &String| {
                group
                    .steps
                    .iter()
                    .find(|s| &s.name == name && s.status == "ok")
            };
            BarSeries {
                name: format!("W={} ({:.1}x pool)", group.warehouses, group.data_over_pool),
                colour: *colour,
                values: names.iter().map(|n| step(n).map(|s| s.tx_per_s)).collect(),
                labels: names
                    .iter()
                    .map(|n| {
                        step(n)
                            .filter(|s| s.speedup_posix > 0.0)
                            .map(|s| format!("{:.2}x", s.speedup_posix))
                    })
                    .collect(),
            }
        })
        .collect();
    let not_run: Vec<String> = report
        .groups
        .iter()
        .flat_map(|g| {
            g.steps
                .iter()
                .filter(|s| s.status != "ok")
                .map(move |s| format!("W={} {}: {}", g.warehouses, s.name, s.status))
        })
        .collect();
    BarChart {
        title: "TPC-C transactions per second by step (Fig. 6)".into(),
        y_label: "transactions per second".into(),
        categories: names,
        series,
        caption: not_run.join("; "),
        log_y: true,
        empty_message: "no step ran here".into(),
    }
    .render()
}
