//! `ringdb advise`: the paper's three questions (when io_uring pays off, how to integrate it,
//! how to tune it: seeds/000 Sec. 5.1, guidelines 1-4) answered for the user's own machine,
//! device and workload.
//!
//! A run goes: calibrate the costs the ladder's cost model needs on the target (bounded by a
//! time budget), probe what the kernel and the device accept, time the workload's operation
//! in memory (a preset) or take the user's figures (custom), then price every candidate
//! configuration with the model and rank them ([`candidate`]), and say why ([`reasons`]).
//! `verify` runs the recommended configuration and the runners-up on the real engine and
//! puts the measured figures beside the predicted ones ([`verify`]).
//!
//! The candidates are the ladder's own configurations, so what is verified is exactly what
//! was priced, and the recommendation is a [`ringdb_io::IoConfig`] a program can open a
//! database with.

pub mod candidate;
mod ceiling;
mod config;
pub mod placement;
pub mod reasons;
mod rings;
mod table;
pub mod verify;
pub mod workload;

pub use candidate::{Candidate, Machine, CANDIDATES};
pub use config::{config_of, config_text};
pub use placement::Placement;
pub use reasons::Reason;
pub use table::table;
pub use verify::{Verification, VerifiedCandidate};
pub use workload::{estimate_io, IoPerOp, Preset, Workload};

use crate::error::{BenchError, Result};
use crate::ladder::{self, Calibration, LadderOpts};
use ringdb_lab::probe::{self, ProbeReport};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The least time budget a calibration fits in.
pub const MIN_BUDGET: Duration = Duration::from_secs(10);
/// Raw I/O runs a calibration makes (more where passthrough or IOPOLL can run).
const CALIBRATION_RUNS: u32 = 19;

/// What `ringdb advise` is asked.
#[derive(Clone, Debug)]
pub struct AdviseOpts {
    /// Data file or block device the advice is for (a block device's contents are destroyed).
    pub target: PathBuf,
    /// Page size of the database, bytes.
    pub page_size: usize,
    /// Buffer pool, pages.
    pub pool_pages: usize,
    /// Data set size over pool size (a preset's data set).
    pub data_ratio: f64,
    /// Value size, bytes (keys are 8 bytes).
    pub value_size: usize,
    /// What the application does per operation.
    pub workload: Workload,
    /// Threads and concurrency the application gives.
    pub machine: Machine,
    /// A mean latency per operation not to exceed, microseconds (`None`: throughput).
    pub max_latency_us: Option<f64>,
    /// Time for the calibration and the in-memory timing (verification comes on top).
    pub budget: Duration,
    /// Run the recommended configuration and the runners-up on the engine.
    pub verify: bool,
    /// Runners-up verified besides the recommendation (and `posix`, the baseline).
    pub runners_up: usize,
    /// Measured time per verified candidate.
    pub verify_runtime: Duration,
    /// CPU for the engine's thread; SQPOLL gets another.
    pub cpu: Option<u32>,
    /// Draw progress bars on stderr.
    pub progress: bool,
}

impl AdviseOpts {
    /// Defaults on `target`: the ladder's data set (a 16 MiB pool, data 3.5 times it, 128-byte
    /// values), YCSB-B, every CPU this process may use, 128 operations in flight per thread, a
    /// 60 s budget, no verification.
    pub fn new(target: impl Into<PathBuf>) -> AdviseOpts {
        let threads = ringdb_io::affinity::allowed_cpus().len().max(1);
        AdviseOpts {
            target: target.into(),
            page_size: 4096,
            pool_pages: 4096,
            data_ratio: 3.5,
            value_size: 128,
            workload: Workload::Preset {
                preset: Preset::YcsbB,
            },
            machine: Machine {
                threads,
                concurrency: 128 * threads,
            },
            max_latency_us: None,
            budget: Duration::from_secs(60),
            verify: false,
            runners_up: 2,
            verify_runtime: Duration::from_secs(3),
            cpu: None,
            progress: false,
        }
    }

    /// The ladder's options for the same data set, tasks per ring, mix and phase lengths.
    pub fn ladder_opts(&self) -> LadderOpts {
        let threads = self.machine.threads.max(1);
        let per_measurement = self.budget / (2 * CALIBRATION_RUNS);
        LadderOpts {
            page_size: self.page_size,
            pool_pages: self.pool_pages,
            data_ratio: self.data_ratio,
            value_size: self.value_size,
            tasks: self.machine.concurrency.div_ceil(threads).max(1),
            read_percent: match self.workload {
                Workload::Preset { preset } => preset.read_percent(),
                Workload::Custom { .. } => 0,
            },
            warmup: (self.verify_runtime / 3)
                .clamp(Duration::from_millis(200), Duration::from_secs(1)),
            runtime: self.verify_runtime,
            calibrate: per_measurement.clamp(Duration::from_millis(250), Duration::from_secs(1)),
            cpu: self.cpu,
            progress: self.progress,
            ..LadderOpts::new(&self.target)
        }
    }
}

/// The advice: what was measured, every candidate priced, the recommendation and why.
#[derive(Clone, Debug, Serialize)]
pub struct Advice {
    /// The target, as given.
    pub target: String,
    /// The workload, in words.
    pub workload: String,
    /// Threads and concurrency the advice is for.
    pub machine: Machine,
    /// The mean latency goal, if any, microseconds.
    pub max_latency_us: Option<f64>,
    /// The costs measured on the target.
    pub calibration: Calibration,
    /// The device's ceiling with one ring (the ladder's), reads + writes per second; the
    /// calibration's `device_iops` is the ceiling with a ring per thread.
    pub device_iops_one_ring: f64,
    /// Page reads and writes per operation the prediction assumes.
    pub io_per_op: IoPerOp,
    /// Where `io_per_op` comes from.
    pub io_source: String,
    /// What the kernel, process and device accept.
    pub probe: ProbeReport,
    /// Where the device's completions interrupt and what a read costs on two CPUs (`None`:
    /// no interrupts to count here, or a single CPU).
    pub placement: Option<Placement>,
    /// Every candidate, in [`CANDIDATES`] order.
    pub candidates: Vec<Candidate>,
    /// Indices into `candidates`, best first.
    pub ranking: Vec<usize>,
    /// The recommended candidate's name (`None`: nothing can run here).
    pub recommended: Option<String>,
    /// Why, guideline by guideline.
    pub reasons: Vec<Reason>,
    /// What could not be determined, and why.
    pub undetermined: Vec<String>,
    /// Runners-up verified besides the recommendation.
    pub runners_up: usize,
    /// The measured check of the advice, when asked.
    pub verification: Option<Verification>,
    /// Seconds the calibration and the in-memory timing took, and the budget.
    pub elapsed_s: f64,
    /// The time budget, seconds.
    pub budget_s: f64,
}

impl Advice {
    /// The recommended candidate.
    pub fn recommendation(&self) -> Option<&Candidate> {
        self.ranking.first().map(|&i| &self.candidates[i])
    }
}

/// Calibrates, probes, prices every candidate and (with `verify`) checks the advice on the
/// engine.
pub fn advise(opts: &AdviseOpts, progress: &dyn Fn(&str)) -> Result<Advice> {
    check(opts)?;
    let start = Instant::now();
    let ladder_opts = opts.ladder_opts();
    let mut calibration = ladder::prepare_calibration(&ladder_opts, progress)?;
    let device_iops_one_ring = calibration.device_iops;
    if opts.machine.threads > 1 {
        progress("calibrate: device ceiling with a ring per thread");
        (calibration.device_iops, calibration.device_iops_runs) = ceiling::device_ceiling(
            &ladder_opts,
            opts.machine.threads,
            ladder_opts.calibration_bytes(),
        )?;
    }
    progress("probe");
    let probe = probe::probe(Some(&opts.target));
    let (placement, placement_error) = measure_placement(&ladder_opts, progress);
    let (prepared, calibration, io_per_op, io_source) =
        measure_workload(opts, &ladder_opts, calibration, progress)?;
    let elapsed_s = start.elapsed().as_secs_f64();
    let candidates = candidate::predict_all(&ladder_opts, &calibration, io_per_op, opts.machine);
    let ranking = candidate::rank(&candidates, opts.max_latency_us);
    let mut reasons = reasons::reasons(&reasons::Facts {
        probe: &probe,
        calibration: &calibration,
        io: io_per_op,
        machine: opts.machine,
        candidates: &candidates,
        order: &ranking,
    });
    reasons.extend(placement.as_ref().map(|p| Reason {
        guideline: "placement",
        text: p.reason(),
    }));
    let mut advice = Advice {
        target: opts.target.display().to_string(),
        workload: opts.workload.describe(),
        machine: opts.machine,
        max_latency_us: opts.max_latency_us,
        calibration,
        device_iops_one_ring,
        io_per_op,
        io_source,
        probe,
        placement,
        recommended: ranking.first().map(|&i| candidates[i].name.clone()),
        candidates,
        ranking,
        reasons,
        undetermined: Vec::new(),
        runners_up: opts.runners_up,
        verification: None,
        elapsed_s,
        budget_s: opts.budget.as_secs_f64(),
    };
    advice.undetermined = undetermined(&advice, opts);
    advice.undetermined.extend(placement_error);
    if let Some(prepared) = prepared {
        advice.verification = Some(verify::verify(&ladder_opts, &advice, prepared, progress));
    }
    Ok(advice)
}

/// Where the device's completions interrupt ([`placement`]); a failure to measure it is
/// something the advice could not determine, not a failure of the advice.
fn measure_placement(
    ladder_opts: &LadderOpts,
    progress: &dyn Fn(&str),
) -> (Option<Placement>, Option<String>) {
    progress("placement: where the device's completions interrupt");
    let data = ladder::target::data_path(ladder_opts, ringdb_io::EngineKind::Uring);
    match placement::measure(ladder_opts, ladder_opts.calibration_bytes(), &data) {
        Ok(Some(placement)) => (Some(placement), None),
        Ok(None) => (
            None,
            Some(format!(
                "where the device's completions interrupt: {} is on no PCI disk with MSI vectors to count, or this process may run on one CPU only",
                ladder_opts.target.display()
            )),
        ),
        Err(e) => (
            None,
            Some(format!("where the device's completions interrupt: {e}")),
        ),
    }
}

/// Refuses a budget too small and a verification of a custom workload.
fn check(opts: &AdviseOpts) -> Result<()> {
    if opts.budget < MIN_BUDGET {
        return Err(BenchError::BudgetTooSmall {
            budget_secs: opts.budget.as_secs_f64(),
            min_secs: MIN_BUDGET.as_secs_f64(),
            needed_by: "the calibration",
        });
    }
    if opts.verify && matches!(opts.workload, Workload::Custom { .. }) {
        return Err(BenchError::VerifyNeedsPreset {
            presets: Preset::NAMES,
        });
    }
    use crate::error::{check_range, BenchSetting};
    check_range(BenchSetting::Threads, opts.machine.threads as u64, 1, 4096)?;
    let per_thread = opts.machine.concurrency / opts.machine.threads;
    check_range(BenchSetting::Concurrency, per_thread as u64, 1, 4096)
}

/// The workload's in-memory cycles and its reads and writes per operation: a preset loads the
/// data set and times its mix (the data stays for the verification); a custom description
/// gives them.
fn measure_workload(
    opts: &AdviseOpts,
    ladder_opts: &LadderOpts,
    mut calibration: Calibration,
    progress: &dyn Fn(&str),
) -> Result<(Option<ladder::Prepared>, Calibration, IoPerOp, String)> {
    match opts.workload {
        Workload::Preset { preset } => {
            let prepared = ladder::load(ladder_opts, calibration, progress)?;
            let calibration = prepared.calibration.clone();
            let io = estimate_io(preset.read_percent(), opts.data_ratio);
            let source = format!(
                "estimated: uniform keys on data {:.1}x the pool, {}% updates",
                opts.data_ratio,
                100 - preset.read_percent()
            );
            Ok((opts.verify.then_some(prepared), calibration, io, source))
        }
        Workload::Custom {
            cycles_per_op,
            reads_per_op,
            writes_per_op,
        } => {
            calibration.c_tx = cycles_per_op;
            // A fault restarts the operation from the root, as in the ladder's model.
            calibration.c_restart = cycles_per_op;
            calibration.c_checksum = ladder::calibrate::checksum_cycles(opts.page_size);
            let io = IoPerOp {
                reads: reads_per_op,
                writes: writes_per_op,
            };
            Ok((None, calibration, io, "given".into()))
        }
    }
}

/// What the advice could not determine here, and why.
fn undetermined(advice: &Advice, opts: &AdviseOpts) -> Vec<String> {
    let mut out = Vec::new();
    if advice.recommendation().is_none() {
        out.push("no candidate can run on this target: see each one's status".into());
    }
    if advice.elapsed_s > advice.budget_s * 1.25 {
        out.push(format!(
            "the calibration took {:.0} s of a {:.0} s budget: the data set's load is not bounded by it",
            advice.elapsed_s, advice.budget_s
        ));
    }
    if !opts.verify && opts.machine.threads > 1 {
        out.push(format!(
            "how {} rings scale on this machine is predicted, not measured: --verify runs them",
            opts.machine.threads
        ));
    }
    if advice.probe.device.is_none() {
        out.push(format!(
            "a storage device's costs: {} is on no block device (tmpfs or overlay), so its I/O copies memory; the latencies and the ceiling measured here do not transfer to a disk",
            advice.target
        ));
    }
    if advice.probe.read_path.is_none() {
        out.push(
            "whether reads complete inline or in io-wq: the target could not be read with O_DIRECT"
                .into(),
        );
    }
    out
}
