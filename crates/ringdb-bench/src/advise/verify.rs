//! `--verify`: the recommended configuration, the runners-up and the `posix` baseline run on
//! the real engine over the data the advice loaded, each for a short time, measured beside
//! what was predicted.
//!
//! A verified run is one ring. Its throughput is carried to the advice's rings the way the
//! model carries it (times the rings, at most the device's ceiling for the reads and writes
//! it measured), so candidates with different ring counts (SQPOLL takes a core for its
//! poller) compare on the same machine. The check: the recommendation's figure is within 10%
//! of the best measured one; otherwise the verdict says the advice was wrong, and by how much.

use super::Advice;
use crate::ladder::{self, LadderOpts, LadderReport, Prepared};
use serde::Serialize;

/// How close to the best measured candidate the recommendation must come.
pub const WITHIN: f64 = 0.10;

/// One candidate run on the engine.
#[derive(Clone, Debug, Serialize)]
pub struct VerifiedCandidate {
    /// The candidate.
    pub name: String,
    /// `"ok"`, or why it did not run.
    pub status: String,
    /// Rings the advice gives it.
    pub rings: usize,
    /// Predicted before anything ran, operations per second of all rings.
    pub predicted_ops_per_s: f64,
    /// Measured on one ring, operations per second.
    pub measured_one_ring: f64,
    /// The model's figure for one ring with the reads and writes the run measured.
    pub predicted_one_ring: f64,
    /// `measured_one_ring` carried to `rings` rings and capped by the device.
    pub measured_ops_per_s: f64,
    /// Page reads per operation measured.
    pub reads_per_op: f64,
    /// Page writes per operation measured.
    pub writes_per_op: f64,
    /// Cycles per operation measured (the whole process).
    pub cycles_per_op: f64,
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

/// Runs the recommendation, `opts`' runners-up and `posix` on the prepared data.
pub(super) fn verify(
    opts: &LadderOpts,
    advice: &Advice,
    prepared: Prepared,
    progress: &dyn Fn(&str),
) -> Verification {
    let names = chosen(advice);
    let steps = ladder::run_named_steps(opts, &names, &prepared, progress);
    let device_iops = prepared.calibration.device_iops;
    let candidates: Vec<VerifiedCandidate> = steps
        .iter()
        .map(|s| carried(advice, s, device_iops))
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

/// A ladder step as a verified candidate, its one-ring figure carried to the advice's rings.
fn carried(advice: &Advice, step: &ladder::Step, device_iops: f64) -> VerifiedCandidate {
    let candidate = advice.candidates.iter().find(|c| c.name == step.name);
    let rings = candidate.map_or(1, |c| c.rings.max(1));
    let ios = step.faults_per_tx + step.writes_per_tx;
    let mut measured = step.tps * rings as f64;
    if ios > 0.0 && device_iops > 0.0 {
        measured = measured.min(device_iops / ios);
    }
    VerifiedCandidate {
        name: step.name.clone(),
        status: step.status.clone(),
        rings,
        predicted_ops_per_s: candidate.map_or(0.0, |c| c.ops_per_s),
        measured_one_ring: step.tps,
        predicted_one_ring: step.predicted_tps,
        measured_ops_per_s: if step.status == "ok" { measured } else { 0.0 },
        reads_per_op: step.faults_per_tx,
        writes_per_op: step.writes_per_tx,
        cycles_per_op: step.cycles_per_tx,
        lat_us_p50: step.lat_us_p50,
        lat_us_p99: step.lat_us_p99,
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
