//! One candidate run on the engine with as many rings as the advice gives it: a ring per
//! thread, shared nothing (guideline 2). Ring `i` runs on its own thread pinned to CPU `i`
//! (a SQPOLL ring takes CPUs `2i` and `2i + 1`, its poller on the second), over its own copy
//! of the loaded data, so the rings contend for nothing but the device and the cores, as the
//! shards of a thread-per-core database do. Their measured phases start together.
//!
//! A raw block device cannot hold a copy per ring: there the candidate runs one ring.

use crate::error::{BenchError, Result};
use crate::ladder::steps::StepConfig;
use crate::ladder::target::data_path;
use crate::ladder::workload::{db_options, uniform_mix};
use crate::ladder::LadderOpts;
use crate::ycsb::{self, PhaseReport, RunSpec};
use ringdb::LocalDb;
use ringdb_io::IoConfig;
use std::path::{Path, PathBuf};
use std::sync::Barrier;

/// What the rings of one candidate measured together.
#[derive(Clone, Debug, Default)]
pub(super) struct RingsReport {
    /// Operations per second of all rings.
    pub(super) ops_per_s: f64,
    /// Page reads per operation, over all rings.
    pub(super) reads_per_op: f64,
    /// Page writes per operation, over all rings.
    pub(super) writes_per_op: f64,
    /// Cycles of the whole process per operation of all rings.
    pub(super) cycles_per_op: f64,
    /// The worst ring's median latency, microseconds.
    pub(super) lat_us_p50: f64,
    /// The worst ring's 99th percentile latency, microseconds.
    pub(super) lat_us_p99: f64,
    /// io-wq workers seen.
    pub(super) iowq_workers: usize,
    /// Kernel entries per operation.
    pub(super) enters_per_op: f64,
    /// Traversals restarted per operation.
    pub(super) restarts_per_op: f64,
}

/// The data file ring `ring` runs on: the loaded target for ring 0, a copy beside it for the
/// others.
pub(super) fn ring_path(opts: &LadderOpts, engine: ringdb_io::EngineKind, ring: usize) -> PathBuf {
    let data = data_path(opts, engine);
    if ring == 0 {
        data
    } else {
        data.with_extension(format!("ring{ring}"))
    }
}

/// Rings a candidate can run on this target: `wanted` on a regular file, one on a device.
pub(super) fn rings_possible(opts: &LadderOpts, wanted: usize) -> usize {
    let is_file = std::fs::metadata(&opts.target).is_ok_and(|m| m.is_file());
    if is_file {
        wanted.max(1)
    } else {
        1
    }
}

/// Copies the loaded data for rings `1..rings` (a copy that exists is replaced: the data
/// changed under the previous candidate's updates).
pub(super) fn copy_data(opts: &LadderOpts, rings: usize) -> Result<()> {
    let source = data_path(opts, ringdb_io::EngineKind::Uring);
    for ring in 1..rings {
        let copy = ring_path(opts, ringdb_io::EngineKind::Uring, ring);
        std::fs::copy(&source, &copy).map_err(|e| BenchError::CopyData {
            from: source.clone(),
            to: copy.clone(),
            source: e,
        })?;
    }
    Ok(())
}

/// Removes the copies made by [`copy_data`].
pub(super) fn remove_copies(opts: &LadderOpts, rings: usize) {
    for ring in 1..rings {
        let _ = std::fs::remove_file(ring_path(opts, ringdb_io::EngineKind::Uring, ring));
    }
}

/// Ring `ring`'s configuration: pinned to its CPU (and its poller to the next one).
fn ring_io(io: &IoConfig, ring: usize) -> IoConfig {
    let mut io = io.clone();
    let cpus = ringdb_io::affinity::online_cpus().max(1) as u32;
    match io.sqpoll.as_mut() {
        Some(poller) => {
            io.cpu = Some((2 * ring as u32) % cpus);
            poller.cpu = Some((2 * ring as u32 + 1) % cpus);
        }
        None => io.cpu = Some(ring as u32 % cpus),
    }
    io
}

/// Runs `rings` rings of `config` at once, each warmed up first, their measured phases
/// started together.
pub(super) fn run_rings(
    opts: &LadderOpts,
    name: &str,
    config: &StepConfig,
    records: u64,
    rings: usize,
) -> Result<RingsReport> {
    assert!(rings >= 1, "a candidate runs at least one ring");
    let start = Barrier::new(rings);
    let results: Vec<Result<PhaseReport>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..rings)
            .map(|ring| {
                let start = &start;
                scope.spawn(move || run_ring(opts, name, config, records, ring, start))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or(Err(BenchError::Internal {
                    what: "a ring's thread panicked",
                }))
            })
            .collect()
    });
    let reports = results.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(combine(&reports))
}

/// One ring: open its copy, warm up, wait for the others, measure, close.
fn run_ring(
    opts: &LadderOpts,
    name: &str,
    config: &StepConfig,
    records: u64,
    ring: usize,
    start: &Barrier,
) -> Result<PhaseReport> {
    let io = ring_io(&config.io, ring);
    let path: &Path = &ring_path(opts, config.io.engine, ring);
    let opened = LocalDb::open(path, db_options(opts, io, config.evict_batch, false));
    // Every ring reaches the barrier, also one that failed, so the others are not left waiting.
    let mut db = match opened {
        Ok(db) => db,
        Err(e) => {
            start.wait();
            return Err(e.into());
        }
    };
    let warm = RunSpec {
        tasks: config.tasks,
        duration: opts.warmup,
        value_size: opts.value_size,
        max_ops: None,
        progress: false,
        label: format!("{name} ring {ring} warm-up"),
    };
    let seed = 11 + 2 * ring as u64;
    let warmed = ycsb::run(
        &mut db,
        &warm,
        uniform_mix(records, opts.read_percent, seed),
    );
    start.wait();
    warmed?;
    let spec = RunSpec {
        duration: opts.runtime,
        progress: opts.progress && ring == 0,
        label: name.to_string(),
        ..warm
    };
    let report = ycsb::run(
        &mut db,
        &spec,
        uniform_mix(records, opts.read_percent, seed + 1),
    )?;
    db.close()?;
    Ok(report)
}

/// The rings' reports as one: throughputs add up; per-operation figures are weighted by each
/// ring's operations; the process's CPU time, which every ring's report counts whole, is
/// taken once.
fn combine(reports: &[PhaseReport]) -> RingsReport {
    let ops: f64 = reports.iter().map(|r| r.ops as f64).sum::<f64>().max(1.0);
    let weighted =
        |f: fn(&PhaseReport) -> f64| reports.iter().map(|r| f(r) * r.ops as f64).sum::<f64>() / ops;
    let process_cycles = reports
        .iter()
        .map(|r| r.cycles_per_op * r.ops as f64)
        .fold(0.0, f64::max);
    RingsReport {
        ops_per_s: reports.iter().map(|r| r.ops_per_s).sum(),
        reads_per_op: weighted(|r| r.reads_per_op),
        writes_per_op: weighted(|r| r.writes_per_op),
        enters_per_op: weighted(|r| r.enters_per_op),
        restarts_per_op: weighted(|r| r.restarts_per_op),
        cycles_per_op: process_cycles / ops,
        lat_us_p50: reports.iter().map(|r| r.lat_us.p50).fold(0.0, f64::max),
        lat_us_p99: reports.iter().map(|r| r.lat_us.p99).fold(0.0, f64::max),
        iowq_workers: reports.iter().map(|r| r.iowq_workers).max().unwrap_or(0),
    }
}
