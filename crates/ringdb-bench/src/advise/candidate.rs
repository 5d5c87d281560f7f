//! The configurations the advisor weighs, and the model's prediction for each on this machine.
//!
//! A candidate is one of the ladder's asynchronous configurations (or `posix`, the blocking
//! baseline), so that `--verify` runs exactly what was priced. The ladder's model gives one
//! ring's throughput and cycles; the advisor adds what one ring does not show:
//! - **rings**: one per thread the application gives (guideline 2, ring per thread); a SQPOLL
//!   ring needs a second core for its poller, so it gets half as many rings;
//! - **the device**: reads and writes per second it sustains bound every configuration;
//! - **concurrency**: an asynchronous ring cannot run more operations at once than the
//!   application offers it (Little's law with the unloaded latency);
//! - **CPU per operation**: the application's cycles, plus for SQPOLL its pollers' whole cores.

use super::workload::IoPerOp;
use crate::ladder::model::{predict as ladder_predict, Model};
use crate::ladder::steps::step_config;
use crate::ladder::{Calibration, LadderOpts};
use ringdb_io::IoConfig;
use serde::Serialize;

/// The candidates, blocking baseline first.
pub const CANDIDATES: &[&str] = &[
    "posix",
    "libaio-async",
    "+async",
    "+batch-submit",
    "+regbufs",
    "+passthrough",
    "+iopoll",
    "+sqpoll",
];

/// Predictions within this fraction of the best count as a tie, settled by CPU per operation.
pub const TIE_FRACTION: f64 = 0.03;

/// What the application gives the engine.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Machine {
    /// Threads (cores) the engine may use.
    pub threads: usize,
    /// Operations the application can have in flight at once, over all threads.
    pub concurrency: usize,
}

/// One configuration with its prediction, or why it cannot run here.
#[derive(Clone, Debug, Serialize)]
pub struct Candidate {
    /// The ladder's name for it.
    pub name: String,
    /// What it switches on, in words.
    pub description: String,
    /// `"ok"`, or `"unsupported here: <reason>"`.
    pub status: String,
    /// The engine and switches it runs with (one ring).
    pub io: Option<IoConfig>,
    /// Concurrent tasks per ring.
    pub tasks_per_ring: usize,
    /// Rings it would run.
    pub rings: usize,
    /// Predicted operations per second of one ring, alone.
    pub per_ring_ops_per_s: f64,
    /// Predicted operations per second of all rings, the device and the concurrency
    /// considered.
    pub ops_per_s: f64,
    /// Predicted cycles per operation on the application's threads.
    pub app_cycles_per_op: f64,
    /// Predicted cycles per operation of every core it occupies (SQPOLL pollers included).
    pub cpu_cycles_per_op: f64,
    /// Predicted mean latency per operation, microseconds.
    pub latency_us: f64,
    /// What bounds it: `latency`, `cpu`, `device` or `concurrency`.
    pub bound: String,
}

/// What the candidate `name` switches on.
pub fn describe(name: &str) -> &'static str {
    match name {
        "posix" => "pread/pwrite, one blocking operation at a time per thread",
        "libaio-async" => "libaio, many tasks per thread, batched submission",
        "+async" => "io_uring (DEFER_TASKRUN), many tasks per thread, one enter per I/O",
        "+batch-submit" => "io_uring, many tasks, I/Os submitted in batches",
        "+regbufs" => "io_uring, batched, registered (fixed) buffers",
        "+passthrough" => "NVMe passthrough (URING_CMD on /dev/ngXnY), registered buffers",
        "+iopoll" => "io_uring with polled completions (IOPOLL), registered buffers",
        "+sqpoll" => "io_uring with a SQPOLL kernel thread on a core of its own",
        _ => "unknown",
    }
}

/// The prediction for every candidate, in [`CANDIDATES`] order.
pub fn predict_all(
    opts: &LadderOpts,
    cal: &Calibration,
    io: IoPerOp,
    machine: Machine,
) -> Vec<Candidate> {
    CANDIDATES
        .iter()
        .map(|name| predict_one(opts, name, cal, io, machine))
        .collect()
}

/// One candidate's prediction, or why it cannot run.
pub(super) fn predict_one(
    opts: &LadderOpts,
    name: &str,
    cal: &Calibration,
    io: IoPerOp,
    machine: Machine,
) -> Candidate {
    let mut candidate = Candidate {
        name: name.to_string(),
        description: describe(name).to_string(),
        status: "ok".into(),
        io: None,
        tasks_per_ring: 0,
        rings: 0,
        per_ring_ops_per_s: 0.0,
        ops_per_s: 0.0,
        app_cycles_per_op: 0.0,
        cpu_cycles_per_op: 0.0,
        latency_us: 0.0,
        bound: String::new(),
    };
    let rings = rings_for(name, machine.threads);
    let config = match (rings, step_config(name, opts)) {
        (Err(why), _) | (_, Err(why)) => {
            candidate.status = format!("unsupported here: {why}");
            return candidate;
        }
        (Ok(rings), Ok(config)) => {
            candidate.rings = rings;
            config
        }
    };
    candidate.tasks_per_ring = config.tasks;
    candidate.io = Some(config.io.clone());
    price(&mut candidate, config.model, cal, io, machine);
    candidate
}

/// Rings a candidate runs on `threads` threads: one per thread, or one per two for SQPOLL
/// (its poller spins on a core of its own).
fn rings_for(name: &str, threads: usize) -> Result<usize, String> {
    if name != "+sqpoll" {
        return Ok(threads.max(1));
    }
    if threads < 2 {
        return Err(format!(
            "a SQPOLL poller needs a spare core; {threads} thread(s) given"
        ));
    }
    Ok(threads / 2)
}

/// Fills in the prediction of a candidate that can run: one ring from the ladder's model, then
/// the rings, the device and the concurrency.
fn price(
    candidate: &mut Candidate,
    model: Model,
    cal: &Calibration,
    io: IoPerOp,
    machine: Machine,
) {
    let hz = cal.tsc_ghz * 1e9;
    // One ring alone: the device's ceiling is applied to all rings together below.
    let alone = Calibration {
        device_iops: 0.0,
        ..cal.clone()
    };
    let (per_ring, cycles, ring_bound) = ladder_predict(model, &alone, io.reads, io.writes);
    let synchronous = matches!(model, Model::Sync | Model::BatchEvict);
    let rings = candidate.rings as f64;
    let mut bounds = vec![(rings * per_ring, ring_bound)];
    let ios = io.reads + io.writes;
    if ios > 0.0 && cal.device_iops > 0.0 {
        bounds.push((cal.device_iops / ios, "device"));
    }
    let unloaded_latency_s = cycles / hz + io.reads * cal.read_lat_us * 1e-6;
    if !synchronous && unloaded_latency_s > 0.0 {
        bounds.push((
            machine.concurrency as f64 / unloaded_latency_s,
            "concurrency",
        ));
    }
    let (ops_per_s, bound) = bounds
        .into_iter()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap_or((0.0, "cpu"));
    let pollers = if candidate.name == "+sqpoll" {
        rings
    } else {
        0.0
    };
    candidate.per_ring_ops_per_s = per_ring;
    candidate.ops_per_s = ops_per_s;
    candidate.app_cycles_per_op = cycles;
    candidate.cpu_cycles_per_op = cycles
        + if ops_per_s > 0.0 {
            pollers * hz / ops_per_s
        } else {
            0.0
        };
    candidate.latency_us = if synchronous {
        1e6 / per_ring.max(f64::MIN_POSITIVE)
    } else {
        (machine.concurrency as f64 / ops_per_s.max(f64::MIN_POSITIVE) * 1e6)
            .max(unloaded_latency_s * 1e6)
    };
    candidate.bound = bound.to_string();
}

/// The candidates that run, best first: the highest throughput, and among those within
/// [`TIE_FRACTION`] of it the one with the fewest cycles per operation; then the rest by
/// throughput. With a mean latency goal, candidates that miss it come after those that meet it.
pub fn rank(candidates: &[Candidate], max_latency_us: Option<f64>) -> Vec<usize> {
    let meets = |c: &Candidate| max_latency_us.is_none_or(|l| c.latency_us <= l);
    let mut order: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].status == "ok")
        .collect();
    order.sort_by(|&a, &b| {
        let (ca, cb) = (&candidates[a], &candidates[b]);
        meets(cb)
            .cmp(&meets(ca))
            .then(cb.ops_per_s.total_cmp(&ca.ops_per_s))
    });
    let Some(&first) = order.first() else {
        return order;
    };
    let best = candidates[first].ops_per_s;
    let tied = order
        .iter()
        .take_while(|&&i| {
            meets(&candidates[i]) == meets(&candidates[first])
                && candidates[i].ops_per_s >= best * (1.0 - TIE_FRACTION)
        })
        .count();
    order[..tied].sort_by(|&a, &b| {
        candidates[a]
            .cpu_cycles_per_op
            .total_cmp(&candidates[b].cpu_cycles_per_op)
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's Table 1, with the costs of the other configurations filled in.
    fn paper() -> Calibration {
        Calibration {
            c_read_batch_fixed: 4800.0,
            c_write_batch_fixed: 5000.0,
            c_read_sqpoll: 2000.0,
            c_write_sqpoll: 2000.0,
            c_read_libaio: 6000.0,
            c_write_libaio: 6000.0,
            device_iops: 0.0,
            ..crate::ladder::model::paper_costs()
        }
    }

    fn machine(threads: usize) -> Machine {
        Machine {
            threads,
            concurrency: 128 * threads,
        }
    }

    #[test]
    fn cpu_bound_prefers_registered_buffers_and_a_device_bound_tie_goes_to_the_cheapest() {
        let opts = LadderOpts::new("/tmp/advise-test");
        let io = IoPerOp {
            reads: 0.7,
            writes: 0.7,
        };
        let all = predict_all(&opts, &paper(), io, machine(1));
        let order = rank(&all, None);
        assert_eq!(all[order[0]].name, "+regbufs", "{:?}", all[order[0]]);
        let posix = all.iter().find(|c| c.name == "posix").unwrap();
        assert_eq!(posix.bound, "latency");
        let slow = Calibration {
            device_iops: 20_000.0,
            ..paper()
        };
        let all = predict_all(&opts, &slow, io, machine(1));
        let order = rank(&all, None);
        let best = &all[order[0]];
        assert_eq!(best.bound, "device");
        let tied: Vec<_> = all.iter().filter(|c| c.bound == "device").collect();
        assert!(tied
            .iter()
            .all(|c| c.cpu_cycles_per_op >= best.cpu_cycles_per_op));
    }

    #[test]
    fn sqpoll_takes_a_core_and_one_thread_cannot_run_it() {
        let opts = LadderOpts::new("/tmp/advise-test");
        let io = IoPerOp {
            reads: 0.7,
            writes: 0.7,
        };
        let one = predict_all(&opts, &paper(), io, machine(1));
        let sq = one.iter().find(|c| c.name == "+sqpoll").unwrap();
        assert!(sq.status.contains("spare core"), "{}", sq.status);
        let two = predict_all(&opts, &paper(), io, machine(2));
        let sq = two.iter().find(|c| c.name == "+sqpoll").unwrap();
        if sq.status == "ok" {
            assert_eq!(sq.rings, 1);
            assert!(sq.cpu_cycles_per_op > sq.app_cycles_per_op);
        }
        let regbufs = two.iter().find(|c| c.name == "+regbufs").unwrap();
        assert_eq!(regbufs.rings, 2);
    }

    #[test]
    fn a_latency_goal_puts_the_candidates_that_miss_it_last() {
        let opts = LadderOpts::new("/tmp/advise-test");
        let io = IoPerOp {
            reads: 0.7,
            writes: 0.7,
        };
        let all = predict_all(&opts, &paper(), io, machine(1));
        let posix = all.iter().position(|c| c.name == "posix").unwrap();
        let order = rank(&all, Some(all[posix].latency_us * 1.01));
        assert!(all[order[0]].latency_us <= all[posix].latency_us * 1.01);
    }
}
