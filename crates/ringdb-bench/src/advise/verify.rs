//! `--verify`: the recommended configuration, the runners-up and the `posix` baseline run on
//! the real engine over the data the advice loaded, each for a short time, measured beside
//! what was predicted.
//!
//! Each candidate runs with the rings the advice gives it (see `rings`), so candidates with
//! different ring counts (SQPOLL takes a core for its poller) compare on the same machine.
//! Beside each measured figure: the prediction made before anything ran, and the model's
//! figure with the reads and writes the run measured (which separates a wrong guess of the
//! workload's I/O from a wrong price of it). The check: the recommendation's figure is within
//! 10% of the best measured one; otherwise the verdict says the advice was wrong, and by how
//! much.

use super::candidate::{self, Machine};
use super::{rings, Advice, IoPerOp};
use crate::ladder::steps::step_config;
use crate::ladder::{LadderOpts, LadderReport, Prepared, Step};
use serde::Serialize;

/// How close to the best measured candidate the recommendation must come.
pub const WITHIN: f64 = 0.10;

/// One candidate run on the engine.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifiedCandidate {
    /// The candidate.
    pub name: String,
    /// `"ok"`, or why it did not run.
    pub status: String,
    /// Rings it ran.
    pub rings: usize,
    /// Concurrent tasks per ring.
    pub tasks_per_ring: usize,
    /// Predicted before anything ran, operations per second of all rings.
    pub predicted_ops_per_s: f64,
    /// The model's figure with the reads and writes the run measured.
    pub predicted_with_measured_io: f64,
    /// The model's cycles per operation with the reads and writes the run measured.
    pub predicted_cycles_per_op: f64,
    /// Measured, operations per second of all rings.
    pub measured_ops_per_s: f64,
    /// Page reads per operation measured.
    pub reads_per_op: f64,
    /// Page writes per operation measured.
    pub writes_per_op: f64,
    /// Cycles per operation measured (the whole process).
    pub cycles_per_op: f64,
    /// Kernel entries per operation.
    pub enters_per_op: f64,
    /// Traversals restarted per operation (after waiting for a page).
    pub restarts_per_op: f64,
    /// io-wq workers seen while it ran.
    pub iowq_workers: usize,
    /// Median latency, microseconds.
    pub lat_us_p50: f64,
    /// 99th percentile latency, microseconds.
    pub lat_us_p99: f64,
}

/// The measured check of an advice.
#[derive(Clone, Debug, Serialize)]
pub struct Verification {
    /// Every candidate run, recommendation first.
    pub candidates: Vec<VerifiedCandidate>,
    /// The runs as a ladder report (for the charts).
    pub ladder: LadderReport,
    /// The candidate measured best.
    pub best_measured: Option<String>,
    /// The recommendation's measured figure over the best's.
    pub recommended_vs_best: f64,
    /// Whether that is at least `1 - WITHIN`.
    pub within: bool,
    /// One line saying what the check found.
    pub verdict: String,
}

/// Runs the recommendation, `opts`' runners-up and `posix` on the prepared data, each with
/// the rings the advice gives it.
pub(super) fn verify(
    opts: &LadderOpts,
    advice: &Advice,
    prepared: Prepared,
    progress: &dyn Fn(&str),
) -> Verification {
    let names = chosen(advice);
    let most_rings = names
        .iter()
        .filter_map(|n| advice.candidates.iter().find(|c| &c.name == n))
        .map(|c| rings::rings_possible(opts, c.rings))
        .max()
        .unwrap_or(1);
    let copied = rings::copy_data(opts, most_rings);
    let mut candidates = Vec::with_capacity(names.len());
    for name in &names {
        progress(&format!("verify {name}"));
        let run = match &copied {
            Ok(()) => run_candidate(opts, advice, name, prepared.records),
            Err(e) => Err(format!("failed: {e}")),
        };
        candidates.push(run.unwrap_or_else(|status| not_run(advice, name, status)));
    }
    rings::remove_copies(opts, most_rings);
    let posix = candidates
        .iter()
        .find(|c| c.name == "posix" && c.status == "ok")
        .map(|c| c.measured_ops_per_s);
    let steps = candidates
        .iter()
        .map(|c| Step {
            speedup_posix: posix.map_or(0.0, |p| c.measured_ops_per_s / p.max(f64::MIN_POSITIVE)),
            ..as_step(c)
        })
        .collect();
    let report = prepared.report(opts, steps);
    judge(advice, candidates, report)
}

/// The candidates to run: the recommendation, the runners-up, and `posix`.
fn chosen(advice: &Advice) -> Vec<String> {
    let runners = advice.ranking.len().min(1 + advice.runners_up);
    let mut names: Vec<String> = advice.ranking[..runners]
        .iter()
        .map(|&i| advice.candidates[i].name.clone())
        .collect();
    if !names.iter().any(|n| n == "posix") {
        names.push("posix".into());
    }
    names
}

/// Runs candidate `name` with its rings; `Err` carries the status of one that did not run.
fn run_candidate(
    opts: &LadderOpts,
    advice: &Advice,
    name: &str,
    records: u64,
) -> std::result::Result<VerifiedCandidate, String> {
    let candidate = advice
        .candidates
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| format!("failed: {name} is not a candidate"))?;
    let config = step_config(name, opts).map_err(|why| format!("unsupported here: {why}"))?;
    let rings = rings::rings_possible(opts, candidate.rings);
    let measured = rings::run_rings(opts, name, &config, records, rings)
        .map_err(|e| format!("failed: {e}"))?;
    let io = IoPerOp {
        reads: measured.reads_per_op,
        writes: measured.writes_per_op,
    };
    let threads = if name == "+sqpoll" { 2 * rings } else { rings };
    let machine = Machine {
        threads,
        concurrency: config.tasks * rings,
    };
    let model = candidate::predict_one(opts, name, &advice.calibration, io, machine);
    Ok(VerifiedCandidate {
        name: name.to_string(),
        status: "ok".into(),
        rings,
        predicted_ops_per_s: candidate.ops_per_s,
        predicted_with_measured_io: model.ops_per_s,
        predicted_cycles_per_op: model.app_cycles_per_op,
        measured_ops_per_s: measured.ops_per_s,
        reads_per_op: measured.reads_per_op,
        writes_per_op: measured.writes_per_op,
        cycles_per_op: measured.cycles_per_op,
        enters_per_op: measured.enters_per_op,
        restarts_per_op: measured.restarts_per_op,
        iowq_workers: measured.iowq_workers,
        lat_us_p50: measured.lat_us_p50,
        lat_us_p99: measured.lat_us_p99,
        tasks_per_ring: config.tasks,
    })
}

/// A candidate that did not run, with `status` saying why.
fn not_run(advice: &Advice, name: &str, status: String) -> VerifiedCandidate {
    VerifiedCandidate {
        name: name.to_string(),
        status,
        predicted_ops_per_s: advice
            .candidates
            .iter()
            .find(|c| c.name == name)
            .map_or(0.0, |c| c.ops_per_s),
        ..VerifiedCandidate::default()
    }
}

/// A verified candidate as a ladder step, for the charts.
fn as_step(c: &VerifiedCandidate) -> Step {
    Step {
        name: c.name.clone(),
        status: c.status.clone(),
        tps: c.measured_ops_per_s,
        predicted_tps: c.predicted_with_measured_io,
        faults_per_tx: c.reads_per_op,
        writes_per_tx: c.writes_per_op,
        cycles_per_tx: c.cycles_per_op,
        predicted_cycles_per_tx: c.predicted_cycles_per_op,
        enters_per_tx: c.enters_per_op,
        restarts_per_tx: c.restarts_per_op,
        iowq_workers: c.iowq_workers,
        lat_us_p50: c.lat_us_p50,
        lat_us_p99: c.lat_us_p99,
        tasks: c.tasks_per_ring * c.rings,
        ..Step::default()
    }
}

/// Compares the recommendation with the best measured candidate.
fn judge(
    advice: &Advice,
    candidates: Vec<VerifiedCandidate>,
    ladder: LadderReport,
) -> Verification {
    let best = candidates
        .iter()
        .filter(|c| c.status == "ok")
        .max_by(|a, b| a.measured_ops_per_s.total_cmp(&b.measured_ops_per_s));
    let recommended = candidates
        .iter()
        .find(|c| Some(&c.name) == advice.recommended.as_ref());
    let (ratio, verdict) = match (recommended, best) {
        (Some(r), Some(b)) if r.status == "ok" && b.measured_ops_per_s > 0.0 => {
            let ratio = r.measured_ops_per_s / b.measured_ops_per_s;
            (ratio, verdict_line(r, b, ratio))
        }
        (Some(r), _) => (
            0.0,
            format!("the recommendation {} did not run: {}", r.name, r.status),
        ),
        _ => (0.0, "nothing could be measured".to_string()),
    };
    Verification {
        best_measured: best.map(|b| b.name.clone()),
        recommended_vs_best: ratio,
        within: ratio >= 1.0 - WITHIN,
        verdict,
        candidates,
        ladder,
    }
}

fn verdict_line(r: &VerifiedCandidate, b: &VerifiedCandidate, ratio: f64) -> String {
    if r.name == b.name {
        format!(
            "confirmed: {} measured best ({:.0} ops/s, predicted {:.0})",
            r.name, r.measured_ops_per_s, r.predicted_ops_per_s
        )
    } else if ratio >= 1.0 - WITHIN {
        format!(
            "confirmed within {:.0}%: {} measured {:.0} ops/s, {:.1}% below the best, {} ({:.0})",
            WITHIN * 100.0,
            r.name,
            r.measured_ops_per_s,
            (1.0 - ratio) * 100.0,
            b.name,
            b.measured_ops_per_s
        )
    } else {
        format!(
            "the advice was wrong here: {} measured {:.0} ops/s, {:.0}% below {} ({:.0}); see the \
             measured reads/writes and cycles per operation beside the prediction",
            r.name,
            r.measured_ops_per_s,
            (1.0 - ratio) * 100.0,
            b.name,
            b.measured_ops_per_s
        )
    }
}
