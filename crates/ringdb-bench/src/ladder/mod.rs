//! `ringdb ladder`: the paper's Fig. 5 (seeds/000 Sec. 3.3-3.4). YCSB with 100% uniform
//! updates (one per transaction) on a data set a few times the buffer pool, with the buffer
//! manager's I/O design switched on step by step, each step measured beside the **cost
//! model's prediction** (Sec. 3.3, Table 1) computed from costs this command measures first on
//! the same target.
//!
//! The model, per transaction, with `r` page reads and `w` page writes measured in the step:
//! - synchronous steps (`posix`, `uring-sync`): every fault waits for its read and for the
//!   write of its victim: `t = c_tx/f + r * lat_read + w * lat_write`;
//! - `+batch-evict`: the victims' writes go out in batches, their latency is amortised, their
//!   CPU cost stays: `t = c_tx/f + r * lat_read + w * c_write_batch/f`;
//! - asynchronous steps: the core is the bottleneck unless the device is:
//!   `t = max((c_tx + r * c_read + w * c_write)/f, (r + w) / device_iops)`, with the per-I/O
//!   cycles of the step's submission mode (single or batched, plain or registered buffers,
//!   libaio, or the application thread's share under SQPOLL).
//!
//! In each, `c_tx` stands for the engine's own work, and each fault adds a restart and the
//! verification of the page read to it (`c_checksum_read`, timed on the pages of the batched
//! read calibration as each arrives; each write-back adds the seal of a cold page,
//! `c_checksum`). A restart costs `c_restart` (one more in-memory transaction, as in the
//! paper) less `c_descent` for the share of the step's restarts that resumed at the page
//! their wait read instead of at the root.
//!
//! A run goes: check the options, [`calibrate`] the costs on the target, load the data (which
//! also times a transaction in memory), run each step, then relate the steps' throughputs.
//! The parts live beside this file:
//! - `calibrate`: the costs the model needs (the paper's Table 1), measured here;
//! - `steps`: what each step switches on, and running one beside its prediction;
//! - `model`: the prediction itself;
//! - `target`: where the data lives and what the target and machine let a step switch on;
//! - `workload`: the database options and the update stream every phase shares;
//! - `table`: the report as text.

pub(crate) mod calibrate;
pub(crate) mod model;
pub(crate) mod steps;
pub(crate) mod table;
pub(crate) mod target;
pub(crate) mod workload;

pub use calibrate::{calibrate, Calibration};
pub use table::table;

use crate::error::{BenchError, BenchSetting, Result};
use ringdb_lab::host::Host;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// The steps, in the paper's order.
pub const STEPS: &[&str] = &[
    "posix",
    "uring-sync",
    "+batch-evict",
    "+async",
    "+batch-submit",
    "+regbufs",
    "+passthrough",
    "+iopoll",
    "+sqpoll",
    "libaio-async",
];

/// The name of the step that runs [`LadderOpts::config_io`].
pub const CONFIG_STEP: &str = "config";

/// Bytes a record takes in a leaf besides its key and value (slot + lengths), for sizing.
const RECORD_OVERHEAD: usize = 8;
/// Leaf fill after inserts in scattered order (random B+tree inserts: about ln 2).
const LOAD_FILL: f64 = 0.69;
/// Fewest records a ladder runs with: below this the data set is no test of the I/O path.
const MIN_RECORDS: u64 = 1000;
/// Most concurrent tasks a step may run.
const MAX_TASKS: usize = 4096;

/// What `ringdb ladder` runs: the target, the data set's size, the phases' lengths and which
/// steps.
#[derive(Clone, Debug)]
pub struct LadderOpts {
    /// Data file (or block device; its contents are destroyed).
    pub target: PathBuf,
    /// Page size of the database, in bytes.
    pub page_size: usize,
    /// Buffer pool size, in pages.
    pub pool_pages: usize,
    /// Records loaded (`None`: enough for a data set `data_ratio` times the pool).
    pub records: Option<u64>,
    /// Data set size over pool size, when `records` is not given.
    pub data_ratio: f64,
    /// Value size in bytes (keys are 8 bytes).
    pub value_size: usize,
    /// Concurrent tasks in the asynchronous steps.
    pub tasks: usize,
    /// Percentage of transactions that read a record instead of updating it (0: the paper's
    /// 100% updates; 95: YCSB-B; 100: YCSB-C).
    pub read_percent: u8,
    /// Time each step runs before it is measured.
    pub warmup: Duration,
    /// Measured time per step.
    pub runtime: Duration,
    /// Time per calibration measurement.
    pub calibrate: Duration,
    /// Only these steps (names from [`STEPS`]).
    pub steps: Option<Vec<String>>,
    /// CPU for the engine's thread (and its io-wq workers); the SQPOLL thread gets another.
    pub cpu: Option<u32>,
    /// Draw progress bars on stderr during the load and the measured phases.
    pub progress: bool,
    /// A configuration from a file (`ringdb advise`'s recommendation, say), run as one more
    /// step named [`CONFIG_STEP`] beside the ladder's, priced by the model for its switches.
    pub config_io: Option<ringdb_io::IoConfig>,
}

impl LadderOpts {
    /// The paper's setup on `target`: 4 KiB pages, a pool of 4096 of them, a data set 3.5
    /// times the pool of 128-byte values, 128 tasks, 2 s of warm-up and 8 s per step.
    pub fn new(target: impl Into<PathBuf>) -> Self {
        LadderOpts {
            target: target.into(),
            page_size: 4096,
            pool_pages: 4096,
            records: None,
            data_ratio: 3.5,
            value_size: 128,
            tasks: 128,
            read_percent: 0,
            warmup: Duration::from_secs(2),
            runtime: Duration::from_secs(8),
            calibrate: Duration::from_secs(1),
            steps: None,
            cpu: None,
            progress: false,
            config_io: None,
        }
    }

    /// Shorter phases, for a smoke run.
    pub fn quick(mut self) -> Self {
        self.warmup = Duration::from_millis(500);
        self.runtime = Duration::from_secs(2);
        self.calibrate = Duration::from_millis(300);
        self
    }

    /// Records to load: `records`, or as many as fill `data_ratio` pools at the load's fill.
    pub fn records(&self) -> u64 {
        self.records.unwrap_or_else(|| {
            let per_leaf = (self.page_size as f64 * LOAD_FILL)
                / (8 + self.value_size + RECORD_OVERHEAD) as f64;
            (self.data_ratio * self.pool_pages as f64 * per_leaf) as u64
        })
    }

    /// The data set's expected size in bytes (at least one pool), which the calibration
    /// measures on and the load's pool is sized from.
    /// Bytes of the target the calibration runs over (the data's region, at least 64 MiB).
    pub(crate) fn calibration_bytes(&self) -> u64 {
        self.estimated_bytes().max(64 << 20)
    }

    /// The data set's expected size in bytes (at least one pool).
    fn estimated_bytes(&self) -> u64 {
        (self.data_ratio.max(1.0) * self.pool_pages as f64 * self.page_size as f64) as u64
    }
}

/// One step of the ladder: what it measured beside what the model predicted.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Step {
    /// The step's name, from [`STEPS`].
    pub name: String,
    /// `"ok"`, or `"unsupported here: <reason>"`, or `"failed: <error>"`.
    pub status: String,
    /// Transactions per second measured.
    pub tps: f64,
    /// Transactions per second the model predicts from the step's faults and writes.
    pub predicted_tps: f64,
    /// Which term of the model bounds it: "latency", "cpu" or "device".
    pub bound: String,
    /// Page reads (faults) per transaction.
    pub faults_per_tx: f64,
    /// Page writes (evicted dirty pages) per transaction.
    pub writes_per_tx: f64,
    /// CPU cycles per transaction, of the whole process.
    pub cycles_per_tx: f64,
    /// CPU cycles per transaction the model predicts.
    pub predicted_cycles_per_tx: f64,
    /// Kernel entries per transaction.
    pub enters_per_tx: f64,
    /// B+tree traversals restarted per transaction (after waiting for a page).
    pub restarts_per_tx: f64,
    /// io-wq worker threads seen during the step (requests the kernel could not issue
    /// inline: on zram every read and write).
    pub iowq_workers: usize,
    /// Median transaction latency, microseconds.
    pub lat_us_p50: f64,
    /// 99th percentile of the transaction latency, microseconds.
    pub lat_us_p99: f64,
    /// Throughput over the previous measured step's (0: none to compare with).
    pub speedup_prev: f64,
    /// Throughput over `posix`'s (0: posix did not run).
    pub speedup_posix: f64,
    /// Concurrent tasks the step ran.
    pub tasks: usize,
    /// Page reads + writes per second.
    pub ios_per_s: f64,
    /// `ios_per_s` over what raw I/O (`ringdb io`, 50/50 random read/write at the same queue
    /// depth) reaches on the same target: `raw_iops_after`.
    pub ios_vs_raw: f64,
    /// The raw baseline for `ios_vs_raw`: `ringdb io` 50/50 random read/write at the step's
    /// queue depth, run right after the step (synchronous steps: the calibration's figure).
    pub raw_iops_after: f64,
}

impl Step {
    /// A step that did not run (or did not finish), with `status` saying why.
    fn not_run(name: &str, status: String) -> Step {
        Step {
            name: name.into(),
            status,
            ..Step::default()
        }
    }
}

/// What `ringdb ladder` reports: the data set, the calibrated costs and every step.
#[derive(Clone, Debug, Serialize)]
pub struct LadderReport {
    /// The target, as given.
    pub target: String,
    /// Records loaded.
    pub records: u64,
    /// Value size in bytes.
    pub value_size: usize,
    /// Page size in bytes.
    pub page_size: usize,
    /// Buffer pool size in pages.
    pub pool_pages: usize,
    /// Pages the loaded data takes.
    pub data_pages: u64,
    /// The costs the model used.
    pub calibration: Calibration,
    /// The steps, in the order they ran.
    pub steps: Vec<Step>,
    /// The machine it ran on.
    pub host: Host,
}

/// Runs the whole ladder.
pub fn run(opts: &LadderOpts, progress: &dyn Fn(&str)) -> Result<LadderReport> {
    let names = selected_steps(opts)?;
    let prepared = prepare(opts, progress)?;
    let steps = run_named_steps(opts, &names, &prepared, progress);
    Ok(prepared.report(opts, steps))
}

/// A target calibrated and loaded: what the steps (and the advisor's verification) run on.
pub(crate) struct Prepared {
    /// Records loaded.
    pub(crate) records: u64,
    /// Pages the loaded data takes.
    pub(crate) data_pages: u64,
    /// The costs the model uses.
    pub(crate) calibration: Calibration,
}

impl Prepared {
    /// The report of the steps that ran on this data.
    pub(crate) fn report(self, opts: &LadderOpts, steps: Vec<Step>) -> LadderReport {
        LadderReport {
            target: opts.target.display().to_string(),
            records: self.records,
            value_size: opts.value_size,
            page_size: opts.page_size,
            pool_pages: opts.pool_pages,
            data_pages: self.data_pages,
            calibration: self.calibration,
            steps,
            host: Host::current(),
        }
    }
}

/// Checks the options, calibrates the costs on the target, then loads the data set (which
/// also times a transaction in memory).
pub(crate) fn prepare(opts: &LadderOpts, progress: &dyn Fn(&str)) -> Result<Prepared> {
    let calibration = prepare_calibration(opts, progress)?;
    load(opts, calibration, progress)
}

/// Checks the options and calibrates the costs on the target (its region the data will
/// occupy), before anything is loaded.
pub(crate) fn prepare_calibration(
    opts: &LadderOpts,
    progress: &dyn Fn(&str),
) -> Result<Calibration> {
    check_tasks(opts)?;
    check_data_set(opts, opts.records())?;
    calibrate(opts, opts.calibration_bytes(), progress)
}

/// Loads the data set on a calibrated target, timing a transaction in memory into
/// `calibration`.
pub(crate) fn load(
    opts: &LadderOpts,
    mut calibration: Calibration,
    progress: &dyn Fn(&str),
) -> Result<Prepared> {
    let records = opts.records();
    let data_pages = calibrate::load_measuring_in_memory_costs(
        opts,
        records,
        opts.estimated_bytes(),
        &mut calibration,
        progress,
    )?;
    Ok(Prepared {
        records,
        data_pages,
        calibration,
    })
}

/// Runs the steps `names` on prepared data, relates their throughputs, and removes the raw
/// baselines' scratch file.
pub(crate) fn run_named_steps(
    opts: &LadderOpts,
    names: &[String],
    prepared: &Prepared,
    progress: &dyn Fn(&str),
) -> Vec<Step> {
    let mut steps = run_steps(
        opts,
        names,
        prepared.records,
        &prepared.calibration,
        progress,
    );
    set_speedups(&mut steps);
    if let Some(scratch) = target::raw_scratch(&opts.target) {
        let _ = std::fs::remove_file(scratch);
    }
    steps
}

fn check_tasks(opts: &LadderOpts) -> Result<()> {
    crate::error::check_range(BenchSetting::Tasks, opts.tasks as u64, 1, MAX_TASKS as u64)?;
    crate::error::check_range(BenchSetting::ReadMix, opts.read_percent as u64, 0, 100)
}

/// The steps asked for (all of [`STEPS`] by default), each checked to be one of them.
fn selected_steps(opts: &LadderOpts) -> Result<Vec<String>> {
    let mut names: Vec<String> = match &opts.steps {
        Some(s) => s.clone(),
        None => STEPS.iter().map(|s| s.to_string()).collect(),
    };
    if opts.config_io.is_some() {
        names.retain(|n| n != CONFIG_STEP);
        names.push(CONFIG_STEP.to_string());
    }
    let known = |n: &str| STEPS.contains(&n) || (n == CONFIG_STEP && opts.config_io.is_some());
    if let Some(unknown) = names.iter().find(|n| !known(n)) {
        return Err(BenchError::Unknown {
            setting: BenchSetting::Step,
            value: unknown.clone(),
            one_of: STEPS,
        });
    }
    Ok(names)
}

/// Refuses a pool the buffer manager cannot run with, a data set too small to fault, and an
/// NVMe char device whose block device is missing.
fn check_data_set(opts: &LadderOpts, records: u64) -> Result<()> {
    let min_frames = ringdb::buffer::MIN_FRAMES;
    if opts.pool_pages < min_frames {
        return Err(BenchError::PoolTooSmall {
            pool_pages: opts.pool_pages,
            min_pages: min_frames,
            page_size_bytes: opts.page_size,
        });
    }
    if records < MIN_RECORDS {
        return Err(BenchError::TooSmall {
            setting: BenchSetting::Records,
            value: records,
            min: MIN_RECORDS,
            needed_by: "the ladder's data set",
        });
    }
    if let Some(block) = target::nvme_namespace(&opts.target) {
        if !block.exists() {
            return Err(BenchError::MissingBlockDevice {
                char_device: opts.target.clone(),
                block_device: block,
            });
        }
    }
    Ok(())
}

/// Runs each named step in turn. A step this target cannot run, or one that fails, is
/// reported with its reason instead of ending the ladder.
fn run_steps(
    opts: &LadderOpts,
    names: &[String],
    records: u64,
    calibration: &Calibration,
    progress: &dyn Fn(&str),
) -> Vec<Step> {
    let mut steps = Vec::with_capacity(names.len());
    for name in names {
        progress(name);
        let step = match steps::step_config(name, opts) {
            Err(why) => Step::not_run(name, format!("unsupported here: {why}")),
            Ok(config) => steps::run_step(opts, name, &config, records, calibration)
                .unwrap_or_else(|e| Step::not_run(name, format!("failed: {e}"))),
        };
        steps.push(step);
    }
    steps
}

/// Speedups of the measured steps over the previous measured step and over `posix`.
/// `libaio-async` is a side branch, not a rung of the ladder: it gets its speedup over `posix`
/// only, and the rungs compare with each other around it.
fn set_speedups(steps: &mut [Step]) {
    let posix = steps
        .iter()
        .find(|s| s.name == "posix" && s.status == "ok")
        .map(|s| s.tps);
    let over_posix = |tps: f64| posix.map_or(0.0, |p| tps / p);
    let mut previous: Option<f64> = None;
    for s in steps.iter_mut().filter(|s| s.status == "ok") {
        if s.name == "libaio-async" {
            continue;
        }
        s.speedup_prev = previous.map_or(0.0, |p| s.tps / p);
        s.speedup_posix = over_posix(s.tps);
        previous = Some(s.tps);
    }
    if let Some(s) = steps
        .iter_mut()
        .find(|s| s.name == "libaio-async" && s.status == "ok")
    {
        s.speedup_posix = over_posix(s.tps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sizing_is_a_few_times_the_pool() {
        let o = LadderOpts::new("/tmp/x");
        let r = o.records();
        let pages = r as f64 * (8 + 128 + RECORD_OVERHEAD) as f64 / (4096.0 * LOAD_FILL);
        assert!((pages / o.pool_pages as f64 - 3.5).abs() < 0.1);
    }
}
