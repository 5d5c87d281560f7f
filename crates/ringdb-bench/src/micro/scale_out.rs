//! `scale-out` (paper Sec. 3.6, Fig. 7): random 4 KiB reads and writes with 1..N threads, one
//! ring per thread (thread-per-core: job `i` pinned to the `i`-th allowed CPU), libaio against
//! io_uring with its switches turned on one after the other.
//!
//! Each point is one [`rawio::run`] with `numjobs = t`, iodepth 32 per job. The paper reports
//! that io_uring beats libaio at every thread count, scales near-linearly, and that its
//! optimisations (registered buffers, NVMe passthrough, IOPoll) raise throughput 3.4-3.5x at
//! scale. Passthrough and IOPoll need an NVMe device with poll queues and are not run here.

use super::target::describe_target;
use super::{allowed_cpus, MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchSetting, Result};
use crate::rawio::{self, IoReport, IoSpec, RwMode, MAX_JOBS};
use ringdb_io::{EngineKind, IoConfig, SetupMode, SqPoll};
use serde_json::{json, Value};
use std::time::Duration;

/// Requests in flight per job (per ring).
const IODEPTH: u32 = 32;
const BS: u64 = 4096;
const SQPOLL_SKIP: &str = "skipped: needs 2 CPUs per ring";

const MIRRORS: &str = "paper Sec. 3.6, Fig. 7: random 4 KiB I/O over 1..N threads, one ring per thread; io_uring beats libaio and its switches add 3.4-3.5x at scale";

const COLUMNS: &[&str] = &[
    "config",
    "rw",
    "threads",
    "iops",
    "mib_s",
    "cpu_pct",
    "cycles_per_io",
    "enters_per_io",
    "lat_p50_us",
    "lat_p99_us",
    "speedup_vs_1_thread",
    "ratio_vs_libaio",
    "status",
];

const PAPER_NOTE: &str = "paper (Fig. 7, PCIe 5 NVMe array, many cores): io_uring beats libaio at every thread count and scales near-linearly; +RegBufs cuts CPU per I/O, and +Passthru/+IOPoll raise throughput 3.4-3.5x at scale, saturating the array with 18 and 6 cores";

/// Thread counts: every count up to 4, then powers of two below `n` plus `n`.
fn thread_counts(n: u32, quick: bool) -> Vec<u32> {
    if quick {
        return if n == 1 { vec![1] } else { vec![1, n] };
    }
    if n <= 4 {
        return (1..=n).collect();
    }
    let mut v: Vec<u32> = std::iter::successors(Some(1u32), |x| x.checked_mul(2))
        .take_while(|&x| x < n)
        .collect();
    v.push(n);
    v
}

/// The configurations of Fig. 7 that need no NVMe: each adds one switch to the one before.
/// SQPOLL excludes DEFER_TASKRUN (the submitter must run its completions), so its step keeps
/// registered files and buffers but goes back to the default setup.
fn configs() -> Vec<IoConfig> {
    let base = |engine| IoConfig {
        queue_depth: IODEPTH,
        ..IoConfig::new(engine)
    };
    let libaio = base(EngineKind::Libaio);
    let uring = base(EngineKind::Uring);
    let defer = IoConfig {
        setup: SetupMode::Defer,
        ..uring.clone()
    };
    let regs = IoConfig {
        register_files: true,
        fixed_buffers: true,
        ..defer.clone()
    };
    let sqpoll = IoConfig {
        setup: SetupMode::Default,
        sqpoll: Some(SqPoll {
            idle_ms: 1000,
            cpu: None,
        }),
        ..regs.clone()
    };
    vec![libaio, uring, defer, regs, sqpoll]
}

/// What one run measures: the CPUs to pin to, the thread counts, the access patterns and the
/// configurations, and the time per point that keeps the run within its budget.
struct Plan {
    cpus: Vec<u32>,
    usable_cpus: u32,
    max_threads: u32,
    threads: Vec<u32>,
    rws: &'static [RwMode],
    configs: Vec<IoConfig>,
    /// `configs`' labels, libaio first.
    labels: Vec<String>,
    /// Points that run (SQPOLL points without a spare core do not).
    runs: usize,
    runtime: Duration,
}

impl Plan {
    /// The plan `opts` asks for; refuses a thread count outside `1..=MAX_JOBS`.
    fn for_opts(opts: &MicroOpts) -> Result<Plan> {
        let cpus = allowed_cpus();
        let usable_cpus = cpus.len() as u32;
        let max_threads = opts.max_threads.unwrap_or(usable_cpus);
        crate::error::check_range(
            BenchSetting::MaxThreads,
            max_threads.into(),
            1,
            MAX_JOBS.into(),
        )?;
        let rws: &'static [RwMode] = if opts.quick {
            &[RwMode::RandRead]
        } else {
            &[RwMode::RandRead, RwMode::RandWrite]
        };
        let configs = configs();
        let mut plan = Plan {
            cpus,
            usable_cpus,
            max_threads,
            threads: thread_counts(max_threads, opts.quick),
            rws,
            labels: configs.iter().map(IoConfig::label).collect(),
            configs,
            runs: 0,
            runtime: Duration::ZERO,
        };
        let per_rw: usize = plan
            .threads
            .iter()
            .map(|&t| {
                plan.configs
                    .iter()
                    .filter(|c| !plan.needs_spare(c, t))
                    .count()
            })
            .sum();
        plan.runs = rws.len() * per_rw;
        plan.runtime = opts.budgeted_point_runtime(plan.runs);
        Ok(plan)
    }

    /// Whether `cfg` at `threads` would need a spare core per ring (SQPOLL) that is not here.
    fn needs_spare(&self, cfg: &IoConfig, threads: u32) -> bool {
        cfg.sqpoll.is_some() && 2 * threads > self.usable_cpus
    }

    /// The most threads measured.
    fn top(&self) -> u32 {
        *self.threads.last().unwrap_or(&1)
    }

    /// The label of the libaio configuration, the one the others are compared with.
    fn libaio(&self) -> &str {
        &self.labels[0]
    }
}

/// What one (config, rw, threads) point gave.
struct Point {
    config: String,
    rw: RwMode,
    threads: u32,
    outcome: std::result::Result<IoReport, String>,
}

impl Point {
    fn iops(&self) -> Option<f64> {
        self.report().map(|r| r.iops)
    }

    fn report(&self) -> Option<&IoReport> {
        self.outcome.as_ref().ok()
    }
}

/// The point of (`config`, `rw`, `threads`), when there is one.
fn find<'a>(points: &'a [Point], config: &str, rw: RwMode, threads: u32) -> Option<&'a Point> {
    points
        .iter()
        .find(|p| p.config == config && p.rw == rw && p.threads == threads)
}

/// The IOPS of (`config`, `rw`, `threads`), when it ran.
fn iops_at(points: &[Point], config: &str, rw: RwMode, threads: u32) -> Option<f64> {
    find(points, config, rw, threads).and_then(Point::iops)
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let plan = Plan::for_opts(opts)?;
    let points = measure_all(opts, &plan)?;
    let mut r = MicroResult::new("scale-out", MIRRORS, COLUMNS);
    for &rw in plan.rws {
        for label in &plan.labels {
            for p in points.iter().filter(|p| &p.config == label && p.rw == rw) {
                r.row(row(p, &points, plan.libaio()));
            }
        }
    }
    r.plot = Some(plot(&plan, &points));
    notes(&mut r, opts, &plan, &points);
    Ok(r)
}

/// Every point, SQPOLL points without a spare core marked skipped. Configurations alternate at
/// each (rw, threads) so that drift of the machine does not favour the one run first.
fn measure_all(opts: &MicroOpts, plan: &Plan) -> Result<Vec<Point>> {
    let mut points = Vec::new();
    let mut done = 0;
    for &rw in plan.rws {
        for &threads in &plan.threads {
            for cfg in &plan.configs {
                let outcome = if plan.needs_spare(cfg, threads) {
                    Err(SQPOLL_SKIP.into())
                } else {
                    done += 1;
                    let outcome = measure(opts, plan, cfg, rw, threads)?;
                    if opts.progress {
                        let at = format!(
                            "[{done}/{}] {} {rw} threads {threads}",
                            plan.runs,
                            cfg.label()
                        );
                        print_progress(&at, &outcome);
                    }
                    outcome
                };
                points.push(Point {
                    config: cfg.label(),
                    rw,
                    threads,
                    outcome,
                });
            }
        }
    }
    Ok(points)
}

/// One point: `threads` jobs of `cfg`, each with its ring. A kernel that refuses SQPOLL gives
/// a failed point instead of failing the run.
fn measure(
    opts: &MicroOpts,
    plan: &Plan,
    cfg: &IoConfig,
    rw: RwMode,
    threads: u32,
) -> Result<std::result::Result<IoReport, String>> {
    let spec = IoSpec {
        rw,
        bs: BS,
        size: opts.size,
        numjobs: threads,
        runtime: Some(plan.runtime),
        ios: None,
        direct: true,
        progress: false,
        // One pinned job per CPU while there are enough; more threads than CPUs
        // wrap around (rawio pins job i to cpus[i % len]).
        cpus: plan.cpus.iter().copied().take(threads as usize).collect(),
        ..IoSpec::new(&opts.target, cfg.clone())
    };
    match rawio::run(&spec) {
        Ok(r) => Ok(Ok(r)),
        // A kernel that refuses SQPOLL should not lose the other rows.
        Err(e) if cfg.sqpoll.is_some() => Ok(Err(format!("failed: {e}"))),
        Err(e) => Err(e),
    }
}

/// The progress line of the point `at` ("[done/runs] config rw threads t").
fn print_progress(at: &str, outcome: &std::result::Result<IoReport, String>) {
    match outcome {
        Ok(r) => eprintln!(
            "scale-out {at}: {:.0} IOPS, {:.0} cycles/IO",
            r.iops, r.cycles_per_io
        ),
        Err(e) => eprintln!("scale-out {at}: {e}"),
    }
}

/// The table row of `p`: its figures and its ratios to one thread and to libaio, or its status.
fn row(p: &Point, points: &[Point], libaio: &str) -> Vec<Value> {
    let ratio = |a: f64, b: Option<f64>| match b {
        Some(b) if b > 0.0 => json!(a / b),
        _ => Value::Null,
    };
    let mut row = vec![json!(p.config), json!(p.rw.name()), json!(p.threads)];
    match &p.outcome {
        Ok(rep) => row.extend([
            json!(rep.iops),
            json!(rep.mib_s),
            json!(rep.cpu_pct),
            json!(rep.cycles_per_io),
            rep.enters_per_io.map_or(Value::Null, |e| json!(e)),
            json!(rep.lat_us.p50),
            json!(rep.lat_us.p99),
            ratio(rep.iops, iops_at(points, &p.config, p.rw, 1)),
            ratio(rep.iops, iops_at(points, libaio, p.rw, p.threads)),
            json!("ok"),
        ]),
        Err(status) => {
            row.extend(std::iter::repeat_n(Value::Null, 9));
            row.push(json!(status));
        }
    }
    row
}

/// Random-read IOPS against threads, one line per configuration that ran.
fn plot(plan: &Plan, points: &[Point]) -> Plot {
    let series: Vec<Series> = plan
        .labels
        .iter()
        .map(|label| Series {
            label: label.clone(),
            points: plan
                .threads
                .iter()
                .filter_map(|&t| iops_at(points, label, RwMode::RandRead, t).map(|i| (t as f64, i)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    Plot::new(
        format!("randread 4 KiB, iodepth {IODEPTH} per ring: IOPS vs threads"),
        "threads (one ring each, pinned one per CPU)",
        "IOPS",
        series,
    )
}

fn notes(r: &mut MicroResult, opts: &MicroOpts, plan: &Plan, points: &[Point]) {
    let top = plan.top();
    r.notes.push(PAPER_NOTE.into());
    for &rw in plan.rws {
        r.notes
            .extend(versus_libaio_note(points, &plan.labels, rw, top));
        r.notes.extend(cycles_note(points, &plan.labels, rw, top));
        if top > 1 {
            r.notes.push(scaling_note(points, &plan.labels, rw, top));
        }
    }
    r.notes.extend(failure_notes(points));
    r.notes.push(machine_note(plan));
    r.notes.extend(punted_note(points));
    r.notes.push(nvme_note(opts));
    if top < 16 {
        r.notes.push(format!(
            "only {top} threads here: Fig. 7's shape needs many cores (e.g. --max-threads 16 on a 16-core machine)"
        ));
    }
    r.notes.push(format!(
        "4 KiB O_DIRECT, iodepth {IODEPTH} per ring, {:.2} s per point over {} MiB of the target; cpu_pct and cycles_per_io count the whole process (io-wq and SQPOLL threads included)",
        plan.runtime.as_secs_f64(),
        opts.size >> 20
    ));
}

/// At `top` threads: plain io_uring and the best io_uring configuration against libaio.
fn versus_libaio_note(points: &[Point], labels: &[String], rw: RwMode, top: u32) -> Option<String> {
    let lib = iops_at(points, &labels[0], rw, top)?;
    let uring = iops_at(points, &labels[1], rw, top)?;
    let (best_label, best) = labels[1..]
        .iter()
        .filter_map(|l| iops_at(points, l, rw, top).map(|i| (l, i)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(format!(
        "{rw} at {top} threads: uring (default setup) {:.2}x libaio; the best io_uring config ({best_label}) {:.2}x libaio and {:.2}x plain uring (the paper: 3.4-3.5x with passthrough+iopoll, not available here)",
        uring / lib,
        best / lib,
        best / uring,
    ))
}

/// Cycles per I/O of every configuration at `top` threads.
fn cycles_note(points: &[Point], labels: &[String], rw: RwMode, top: u32) -> Option<String> {
    let cycles: Vec<String> = labels
        .iter()
        .filter_map(|l| {
            find(points, l, rw, top)
                .and_then(Point::report)
                .map(|rep| format!("{l} {:.0}", rep.cycles_per_io))
        })
        .collect();
    (!cycles.is_empty()).then(|| format!(
        "{rw} cycles per I/O at {top} threads (whole process): {} (the paper: registered buffers cut CPU per I/O; an SQPOLL poller spins its core, so its cycles count even when idle)",
        cycles.join(", ")
    ))
}

/// How far every configuration scaled from one thread to `top`.
fn scaling_note(points: &[Point], labels: &[String], rw: RwMode, top: u32) -> String {
    let scaling: Vec<String> = labels
        .iter()
        .filter_map(
            |l| match (iops_at(points, l, rw, 1), iops_at(points, l, rw, top)) {
                (Some(one), Some(n)) if one > 0.0 => Some(format!("{l} {:.2}x", n / one)),
                _ => None,
            },
        )
        .collect();
    format!(
        "{rw} scaling from 1 to {top} threads: {} (linear would be {top}x; the paper's scaling is near-linear until the storage stack saturates)",
        scaling.join(", ")
    )
}

/// One note per point that failed (not those skipped for want of a spare core).
fn failure_notes(points: &[Point]) -> Vec<String> {
    points
        .iter()
        .filter_map(|p| match &p.outcome {
            Err(e) if e.starts_with("failed") => {
                Some(format!("{} {} threads {}: {e}", p.config, p.rw, p.threads))
            }
            _ => None,
        })
        .collect()
}

/// The CPUs here, how the rings were pinned, and why SQPOLL rows may be skipped.
fn machine_note(plan: &Plan) -> String {
    let n_cpus = plan.usable_cpus;
    let max_threads = plan.max_threads;
    format!(
        "this machine: {n_cpus} usable CPUs; rings pinned one per CPU{}; SQPOLL rows need a spare core per ring (2*threads <= {n_cpus}) and otherwise say \"{SQPOLL_SKIP}\"; SQPOLL and DEFER_TASKRUN exclude each other, so the SQPOLL step keeps regfiles+fixedbufs on the default setup, its poller threads unpinned",
        if max_threads > n_cpus {
            format!(", {max_threads} threads oversubscribe them (jobs wrap around the CPUs)")
        } else {
            String::new()
        }
    )
}

/// The points whose requests were punted to io-wq workers, when any were.
fn punted_note(points: &[Point]) -> Option<String> {
    let punted: Vec<String> = points
        .iter()
        .filter_map(|p| {
            let w = p.report()?.iowq_workers?;
            (w > 0).then(|| format!("{} {} t{}: {w}", p.config, p.rw, p.threads))
        })
        .collect();
    (!punted.is_empty()).then(|| format!(
        "io-wq workers appeared ({}): some requests were punted to worker threads instead of completing inline or by interrupt (a device without NOWAIT, such as zram, or a full queue), which costs cycles and latency",
        punted.join("; ")
    ))
}

/// The target, and why iopoll and passthrough never run here.
fn nvme_note(opts: &MicroOpts) -> String {
    let nvme = ringdb_lab::device::nvme_char_devices();
    format!(
        "{}; iopoll and NVMe passthrough are never run: they need an NVMe device with poll queues (and its /dev/ngXnY for passthrough); NVMe char devices here: {}",
        describe_target(&opts.target),
        if nvme.is_empty() {
            "none".to_string()
        } else {
            nvme.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        }
    )
}
