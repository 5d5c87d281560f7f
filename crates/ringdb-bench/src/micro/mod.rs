//! The paper's microbenchmarks (Secs. 2.1, 2.2, 3.6 with Fig. 9's durable writes; seeds/003),
//! issue 12's hand-off to a shard thread (`handoff`) and issue 15's breakdown of the in-memory
//! point cost (`point-cost`) and issue 36's TPC-C transaction by phase (`txn-cost`): each
//! isolates one mechanism
//! and returns a [`MicroResult`]: a table for people, JSON for machines, an SVG plot.
//!
//! Every benchmark takes the same [`MicroOpts`]; `ringdb micro <name>` runs one.
//!
//! A benchmark's file holds its measurement and the notes it writes about it; what several
//! share lives apart: `target` (the storage target: its usable size, filling, description),
//! `qd1` (one request at a time, and the io-wq workers it brought up), [`report`] (the
//! result, its table and plot), and here the run-time policies and the CPUs to pin to.

mod batch_latency;
mod block_size;
mod durable;
mod fixed_buffers;
mod handoff;
mod iowq;
mod nop_batch;
mod point_cost;
mod preempted;
mod qd1;
pub mod report;
mod scale_out;
mod scan_read_ahead;
mod sqpoll_wakeup;
mod target;
mod txn_cost;

pub use report::{MicroResult, Plot, Series};

use crate::error::{BenchError, BenchSetting, Result};
use std::path::PathBuf;
use std::time::Duration;

/// The whole default run of a multi-point benchmark aims to stay within this many seconds
/// (the per-point runtime is shortened when `points x runtime` would exceed it).
const BUDGET_S: f64 = 55.0;
/// Shortest per-point runtime the budget may impose.
const MIN_POINT: Duration = Duration::from_millis(500);
/// Per-point runtime of a budgeted benchmark with `--quick`.
const QUICK_POINT: Duration = Duration::from_millis(300);

/// Options shared by every microbenchmark.
#[derive(Clone, Debug)]
pub struct MicroOpts {
    /// File or block device for the benchmarks that do storage I/O.
    pub target: PathBuf,
    /// Bytes of the target to use (files are filled first when shorter).
    pub size: u64,
    /// Time per measured point.
    pub runtime: Duration,
    /// Fewer, shorter points (for a smoke run or CI).
    pub quick: bool,
    /// Threads for `scale-out` (default: the online CPUs).
    pub max_threads: Option<u32>,
    /// Draw progress on stderr (only when it is a terminal).
    pub progress: bool,
    /// Bytes per write for `durable` (default 4 KiB); the others ignore it.
    pub bs: Option<u64>,
    /// Durable writes per method for `durable` (default 10 000, bounded by `runtime`); the others
    /// ignore it.
    pub ios: Option<u64>,
}

impl MicroOpts {
    pub fn new(target: impl Into<PathBuf>) -> Self {
        MicroOpts {
            target: target.into(),
            size: 1 << 30,
            runtime: Duration::from_secs(2),
            quick: false,
            max_threads: None,
            progress: false,
            bs: None,
            ios: None,
        }
    }

    /// The time per measured point: `runtime`, but at most `quick_cap` with `--quick`.
    pub fn runtime_capped_when_quick(&self, quick_cap: Duration) -> Duration {
        if self.quick {
            self.runtime.min(quick_cap)
        } else {
            self.runtime
        }
    }

    /// The time per measured point of a benchmark of `points` points: `runtime`, shorter with
    /// `--quick` or when `points` of it would exceed the run's budget of 55 s.
    pub fn budgeted_point_runtime(&self, points: usize) -> Duration {
        if self.quick {
            return self.runtime.min(QUICK_POINT);
        }
        let fair = Duration::from_secs_f64(BUDGET_S / points.max(1) as f64).max(MIN_POINT);
        self.runtime.min(fair)
    }
}

/// The CPUs this process may run on (`Cpus_allowed_list` of /proc/self/status), in order;
/// `0..online` when that cannot be read. The benchmarks pin their threads to these.
pub fn allowed_cpus() -> Vec<u32> {
    let parsed = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .and_then(|list| ringdb_io::affinity::parse_cpu_list(&list).ok())
        .filter(|c| !c.is_empty());
    parsed.unwrap_or_else(|| (0..ringdb_io::affinity::online_cpus() as u32).collect())
}

/// The first CPU of [`allowed_cpus`] (0 when none is known): where a QD1 benchmark pins its
/// measuring thread and that thread's io-wq workers.
fn first_allowed_cpu() -> u32 {
    allowed_cpus().first().copied().unwrap_or(0)
}

/// CPUs this machine offers (`available_parallelism`, 0 when unknown), for the notes.
fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The microbenchmarks, by the name `ringdb micro` takes.
pub const NAMES: &[&str] = &[
    "nop-batch",
    "sqpoll-wakeup",
    "iowq",
    "batch-latency",
    "block-size",
    "scale-out",
    "fixed-buffers",
    "durable",
    "handoff",
    "scan",
    "point-cost",
    "txn-cost",
];

/// The microbenchmarks that take `--bs` and `--ios`.
pub const TAKES_BS_IOS: &[&str] = &["durable"];

/// Runs the microbenchmark called `name`.
pub fn run(name: &str, opts: &MicroOpts) -> Result<MicroResult> {
    match name {
        "nop-batch" => nop_batch::run(opts),
        "sqpoll-wakeup" => sqpoll_wakeup::run(opts),
        "iowq" => iowq::run(opts),
        "batch-latency" => batch_latency::run(opts),
        "block-size" => block_size::run(opts),
        "scale-out" => scale_out::run(opts),
        "fixed-buffers" => fixed_buffers::run(opts),
        "durable" => durable::run(opts),
        "handoff" => handoff::run(opts),
        "scan" => scan_read_ahead::run(opts),
        "point-cost" => point_cost::run(opts),
        "txn-cost" => txn_cost::run(opts),
        _ => Err(BenchError::Unknown {
            setting: BenchSetting::Microbenchmark,
            value: name.to_string(),
            one_of: NAMES,
        }),
    }
}
