//! The figures of one timed round of one store, all derived the same way for both stores:
//! operations, wall time, and the CPU time of the whole process over the round
//! (`getrusage(RUSAGE_SELF)`, user + system, so any helper thread ringdb's engine starts is
//! counted too). Cycles per operation are CPU seconds x the TSC rate / operations, the
//! definition `ringdb ycsb` uses.

use ringdb_lab::counters::tsc_hz;
use serde::Serialize;

/// One round of one store.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Measurement {
    /// Reads completed.
    pub ops: u64,
    /// Wall time of the round.
    pub wall_secs: f64,
    /// CPU time of the process during the round (user + system).
    pub cpu_secs: f64,
    /// Reads per wall second.
    pub ops_per_s: f64,
    /// Reads per CPU second: the figure the issue compares.
    pub ops_per_cpu_s: f64,
    /// CPU seconds x TSC Hz / reads.
    pub cycles_per_op: f64,
    /// Reads whose value was compared with the loaded one.
    pub values_checked: u64,
    /// Pages read from storage per read (ringdb; 0 for LMDB, whose faults the kernel counts).
    pub page_reads_per_op: f64,
}

impl Measurement {
    /// The figures of `ops` reads over `wall_secs` that cost `cpu_secs` of process CPU time.
    pub fn new(ops: u64, wall_secs: f64, cpu_secs: f64, values_checked: u64) -> Measurement {
        assert!(values_checked <= ops, "checked more reads than were made");
        let per = |x: f64| if x > 0.0 { ops as f64 / x } else { 0.0 };
        Measurement {
            ops,
            wall_secs,
            cpu_secs,
            ops_per_s: per(wall_secs),
            ops_per_cpu_s: per(cpu_secs),
            cycles_per_op: if ops == 0 {
                0.0
            } else {
                cpu_secs * tsc_hz() / ops as f64
            },
            values_checked,
            page_reads_per_op: 0.0,
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count; 0 when empty).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// The median round of a store: the median of each figure over the rounds.
pub fn median_of(rounds: &[Measurement]) -> Measurement {
    let m = |f: fn(&Measurement) -> f64| median(rounds.iter().map(f));
    Measurement {
        ops: m(|r| r.ops as f64) as u64,
        wall_secs: m(|r| r.wall_secs),
        cpu_secs: m(|r| r.cpu_secs),
        ops_per_s: m(|r| r.ops_per_s),
        ops_per_cpu_s: m(|r| r.ops_per_cpu_s),
        cycles_per_op: m(|r| r.cycles_per_op),
        values_checked: m(|r| r.values_checked as f64) as u64,
        page_reads_per_op: m(|r| r.page_reads_per_op),
    }
}
