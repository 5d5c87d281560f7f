//! The advice as text: what was measured, the candidates ranked, the recommendation, why, and
//! the verification beside the prediction.

use super::{Advice, Candidate, Verification};
use crate::ladder::table::costs_line;

/// The advice as a table and lines of reasons.
pub fn table(a: &Advice) -> String {
    let mut s = format!(
        "advice for {}: {}, {} thread(s), {} operations in flight{}\n",
        a.target,
        a.workload,
        a.machine.threads,
        a.machine.concurrency,
        a.max_latency_us.map_or(String::new(), |l| format!(
            ", mean latency at most {l:.0} us"
        ))
    );
    s.push_str(&format!(
        "per operation: {:.2} reads, {:.2} writes ({}); calibrated in {:.0} s (budget {:.0} s)\n",
        a.io_per_op.reads, a.io_per_op.writes, a.io_source, a.elapsed_s, a.budget_s
    ));
    s.push_str(&format!(
        "device ceiling: {:.0} reads+writes/s with {} ring(s) ({:.0} with one)\n",
        a.calibration.device_iops, a.machine.threads, a.device_iops_one_ring
    ));
    s.push_str(&costs_line(&a.calibration));
    s.push_str(&format!(
        "{:<4} {:<14} {:>5} {:>12} {:>10} {:>10} {:>10} {:<12} {}\n",
        "rank", "candidate", "rings", "pred ops/s", "app cyc", "cpu cyc", "lat us", "bound", "what"
    ));
    for (rank, &i) in a.ranking.iter().enumerate() {
        s.push_str(&candidate_row(&(rank + 1).to_string(), &a.candidates[i]));
    }
    for c in a.candidates.iter().filter(|c| c.status != "ok") {
        s.push_str(&format!("{:<4} {:<14} {}\n", "-", c.name, c.status));
    }
    s.push('\n');
    match a.recommendation() {
        Some(c) => s.push_str(&format!(
            "recommended: {} ({}), {} ring(s) x {} tasks\n",
            c.name, c.description, c.rings, c.tasks_per_ring
        )),
        None => s.push_str("recommended: nothing (no candidate can run here)\n"),
    }
    for r in &a.reasons {
        s.push_str(&format!("  [{}] {}\n", r.guideline, r.text));
    }
    for u in &a.undetermined {
        s.push_str(&format!("  not determined: {u}\n"));
    }
    if let Some(v) = &a.verification {
        s.push_str(&verification(v));
    }
    s
}

fn candidate_row(rank: &str, c: &Candidate) -> String {
    format!(
        "{:<4} {:<14} {:>5} {:>12.0} {:>10.0} {:>10.0} {:>10.1} {:<12} {}\n",
        rank,
        c.name,
        c.rings,
        c.ops_per_s,
        c.app_cycles_per_op,
        c.cpu_cycles_per_op,
        c.latency_us,
        c.bound,
        c.description
    )
}

fn verification(v: &Verification) -> String {
    let mut s = format!(
        "\nverification (each candidate with its rings, on the engine):\n{:<14} {:>5} {:>12} {:>12} {:>12} {:>7} {:>7} {:>9} {:>9} {:>8} {:>8} {:>5}\n",
        "candidate", "rings", "pred ops/s", "meas ops/s", "model(meas)", "reads", "writes", "cyc/op", "model cyc", "p50 us", "p99 us", "iowq"
    );
    for c in &v.candidates {
        if c.status != "ok" {
            s.push_str(&format!("{:<14} {}\n", c.name, c.status));
            continue;
        }
        s.push_str(&format!(
            "{:<14} {:>5} {:>12.0} {:>12.0} {:>12.0} {:>7.2} {:>7.2} {:>9.0} {:>9.0} {:>8.0} {:>8.0} {:>5}\n",
            c.name,
            c.rings,
            c.predicted_ops_per_s,
            c.measured_ops_per_s,
            c.predicted_with_measured_io,
            c.reads_per_op,
            c.writes_per_op,
            c.cycles_per_op,
            c.predicted_cycles_per_op,
            c.lat_us_p50,
            c.lat_us_p99,
            c.iowq_workers
        ));
    }
    s.push_str(&format!("verdict: {}\n", v.verdict));
    s
}
