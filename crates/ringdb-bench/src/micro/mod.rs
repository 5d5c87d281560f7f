//! The paper's microbenchmarks (Secs. 2.1, 2.2, 3.6 with Fig. 9's durable writes; seeds/003):
//! each isolates one mechanism
//! and returns a [`MicroResult`]: a table for people, JSON for machines, an SVG plot.
//!
//! Every benchmark takes the same [`MicroOpts`]; `ringdb micro <name>` runs one.

mod batch_latency;
mod block_size;
mod durable;
mod fixed_buffers;
mod iowq;
mod nop_batch;
pub mod report;
mod scale_out;
mod sqpoll_wakeup;

pub use report::{MicroResult, Plot, Series};

use crate::error::{BenchError, Result};
use std::path::PathBuf;
use std::time::Duration;

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
        _ => Err(BenchError::InvalidArg(format!(
            "unknown microbenchmark {name:?}; one of: {}",
            NAMES.join(", ")
        ))),
    }
}
