//! `scale-out` (paper Sec. 3.6, Fig. 7): random 4 KiB reads and writes with 1..N threads, one
//! ring per thread (thread-per-core: job `i` pinned to the `i`-th allowed CPU), libaio against
//! io_uring with its switches turned on one after the other.
//!
//! Each point is one [`rawio::run`] with `numjobs = t`, iodepth 32 per job. The paper reports
//! that io_uring beats libaio at every thread count, scales near-linearly, and that its
//! optimisations (registered buffers, NVMe passthrough, IOPoll) raise throughput 3.4-3.5x at
//! scale. Passthrough and IOPoll need an NVMe device with poll queues and are not run here.

use super::{MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchError, Result};
use crate::rawio::{self, IoReport, IoSpec, RwMode, MAX_JOBS};
use ringdb_io::{EngineKind, IoConfig, SetupMode, SqPoll};
use ringdb_lab::device::DeviceInfo;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// Requests in flight per job (per ring).
const IODEPTH: u32 = 32;
const BS: u64 = 4096;
/// The whole default run aims to stay within this many seconds (per-point runtime is shortened
/// when `points x runtime` would exceed it).
const BUDGET_S: f64 = 55.0;
/// Shortest per-point runtime the budget may impose.
const MIN_POINT: Duration = Duration::from_millis(500);
/// Per-point runtime with `--quick`.
const QUICK_POINT: Duration = Duration::from_millis(300);
const SQPOLL_SKIP: &str = "skipped: needs 2 CPUs per ring";

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

/// The CPUs this process may run on (`Cpus_allowed_list` of /proc/self/status), in order;
/// `0..online` when that cannot be read.
pub(super) fn allowed_cpus() -> Vec<u32> {
    let parsed = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .and_then(|list| ringdb_io::affinity::parse_cpu_list(&list).ok())
        .filter(|c| !c.is_empty());
    parsed.unwrap_or_else(|| (0..ringdb_io::affinity::online_cpus() as u32).collect())
}

/// One line describing the target's storage, for the notes.
pub(super) fn describe_target(path: &Path) -> String {
    let kind = match std::fs::metadata(path) {
        Ok(m) if std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()) => "block device",
        Ok(_) => "file",
        Err(_) => "path",
    };
    match DeviceInfo::for_path(path) {
        Ok(Some(d)) => format!(
            "target {} is a {kind} on {} ({}{}, io_poll {})",
            path.display(),
            d.name,
            d.disk.as_deref().unwrap_or("whole disk"),
            if d.rotational { ", rotational" } else { "" },
            if d.io_poll { "yes" } else { "no" },
        ),
        Ok(None) => format!(
            "target {} is a {kind} on no block device (tmpfs or similar: no DMA, no device queue)",
            path.display()
        ),
        Err(e) => format!("target {}: {e}", path.display()),
    }
}

/// The per-point runtime: `opts.runtime`, shorter with `--quick` or when `points` of it would
/// exceed the run's budget.
pub(super) fn point_runtime(opts: &MicroOpts, points: usize) -> Duration {
    if opts.quick {
        return opts.runtime.min(QUICK_POINT);
    }
    let fair = Duration::from_secs_f64(BUDGET_S / points.max(1) as f64).max(MIN_POINT);
    opts.runtime.min(fair)
}

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

/// What one (config, rw, threads) point gave.
struct Point {
    config: String,
    rw: RwMode,
    threads: u32,
    outcome: std::result::Result<IoReport, String>,
}

impl Point {
    fn iops(&self) -> Option<f64> {
        self.outcome.as_ref().ok().map(|r| r.iops)
    }
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let cpus = allowed_cpus();
    let n_cpus = cpus.len() as u32;
    let max_threads = opts.max_threads.unwrap_or(n_cpus);
    if max_threads == 0 || max_threads > MAX_JOBS {
        return Err(BenchError::InvalidArg(format!(
            "--max-threads must be in 1..={MAX_JOBS}, got {max_threads}"
        )));
    }
    let threads = thread_counts(max_threads, opts.quick);
    let rws: &[RwMode] = if opts.quick {
        &[RwMode::RandRead]
    } else {
        &[RwMode::RandRead, RwMode::RandWrite]
    };
    let configs = configs();
    let needs_spare = |c: &IoConfig, t: u32| c.sqpoll.is_some() && 2 * t > n_cpus;
    let runs = rws.len()
        * threads
            .iter()
            .map(|&t| configs.iter().filter(|c| !needs_spare(c, t)).count())
            .sum::<usize>();
    let runtime = point_runtime(opts, runs);

    // Configurations alternate at each (rw, threads) so that drift of the machine does not
    // favour the one run first.
    let mut points = Vec::new();
    let mut done = 0;
    for &rw in rws {
        for &t in &threads {
            for cfg in &configs {
                let label = cfg.label();
                if needs_spare(cfg, t) {
                    points.push(Point {
                        config: label,
                        rw,
                        threads: t,
                        outcome: Err(SQPOLL_SKIP.into()),
                    });
                    continue;
                }
                let spec = IoSpec {
                    rw,
                    bs: BS,
                    size: opts.size,
                    numjobs: t,
                    runtime: Some(runtime),
                    ios: None,
                    direct: true,
                    progress: false,
                    // One pinned job per CPU while there are enough; more threads than CPUs
                    // wrap around (rawio pins job i to cpus[i % len]).
                    cpus: cpus.iter().copied().take(t as usize).collect(),
                    ..IoSpec::new(&opts.target, cfg.clone())
                };
                let outcome = match rawio::run(&spec) {
                    Ok(r) => Ok(r),
                    // A kernel that refuses SQPOLL should not lose the other rows.
                    Err(e) if cfg.sqpoll.is_some() => Err(format!("failed: {e}")),
                    Err(e) => return Err(e),
                };
                done += 1;
                if opts.progress {
                    match &outcome {
                        Ok(r) => eprintln!(
                            "scale-out [{done}/{runs}] {label} {rw} threads {t}: {:.0} IOPS, {:.0} cycles/IO",
                            r.iops, r.cycles_per_io
                        ),
                        Err(e) => eprintln!("scale-out [{done}/{runs}] {label} {rw} threads {t}: {e}"),
                    }
                }
                points.push(Point {
                    config: label,
                    rw,
                    threads: t,
                    outcome,
                });
            }
        }
    }

    let mut r = MicroResult::new(
        "scale-out",
        "paper Sec. 3.6, Fig. 7: random 4 KiB I/O over 1..N threads, one ring per thread; io_uring beats libaio and its switches add 3.4-3.5x at scale",
        COLUMNS,
    );
    let find = |config: &str, rw: RwMode, t: u32| {
        points
            .iter()
            .find(|p| p.config == config && p.rw == rw && p.threads == t)
            .and_then(Point::iops)
    };
    let ratio = |a: f64, b: Option<f64>| match b {
        Some(b) if b > 0.0 => json!(a / b),
        _ => Value::Null,
    };
    let labels: Vec<String> = configs.iter().map(IoConfig::label).collect();
    let libaio = &labels[0];
    for &rw in rws {
        for label in &labels {
            for p in points.iter().filter(|p| &p.config == label && p.rw == rw) {
                let mut row = vec![json!(p.config), json!(rw.name()), json!(p.threads)];
                match &p.outcome {
                    Ok(rep) => row.extend([
                        json!(rep.iops),
                        json!(rep.mib_s),
                        json!(rep.cpu_pct),
                        json!(rep.cycles_per_io),
                        rep.enters_per_io.map_or(Value::Null, |e| json!(e)),
                        json!(rep.lat_us.p50),
                        json!(rep.lat_us.p99),
                        ratio(rep.iops, find(label, rw, 1)),
                        ratio(rep.iops, find(libaio, rw, p.threads)),
                        json!("ok"),
                    ]),
                    Err(status) => {
                        row.extend(std::iter::repeat_n(Value::Null, 9));
                        row.push(json!(status));
                    }
                }
                r.row(row);
            }
        }
    }

    let series: Vec<Series> = labels
        .iter()
        .map(|label| Series {
            label: label.clone(),
            points: threads
                .iter()
                .filter_map(|&t| find(label, RwMode::RandRead, t).map(|i| (t as f64, i)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    r.plot = Some(Plot {
        title: format!("randread 4 KiB, iodepth {IODEPTH} per ring: IOPS vs threads"),
        x_label: "threads (one ring each, pinned one per CPU)".into(),
        y_label: "IOPS".into(),
        log_x: false,
        log_y: false,
        series,
    });

    notes(
        &mut r,
        &points,
        &labels,
        rws,
        &threads,
        n_cpus,
        max_threads,
        runtime,
        opts,
    );
    Ok(r)
}

#[allow(clippy::too_many_arguments)]
fn notes(
    r: &mut MicroResult,
    points: &[Point],
    labels: &[String],
    rws: &[RwMode],
    threads: &[u32],
    n_cpus: u32,
    max_threads: u32,
    runtime: Duration,
    opts: &MicroOpts,
) {
    let find = |config: &str, rw: RwMode, t: u32| {
        points
            .iter()
            .find(|p| p.config == config && p.rw == rw && p.threads == t)
            .and_then(Point::iops)
    };
    let top = *threads.last().unwrap_or(&1);
    r.notes.push(
        "paper (Fig. 7, PCIe 5 NVMe array, many cores): io_uring beats libaio at every thread count and scales near-linearly; +RegBufs cuts CPU per I/O, and +Passthru/+IOPoll raise throughput 3.4-3.5x at scale, saturating the array with 18 and 6 cores"
            .into(),
    );
    for &rw in rws {
        let lib = find(&labels[0], rw, top);
        let uring = find(&labels[1], rw, top);
        let best = labels[1..]
            .iter()
            .filter_map(|l| find(l, rw, top).map(|i| (l, i)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(lib), Some(uring), Some((best_label, best))) = (lib, uring, best) {
            r.notes.push(format!(
                "{rw} at {top} threads: uring (default setup) {:.2}x libaio; the best io_uring config ({best_label}) {:.2}x libaio and {:.2}x plain uring (the paper: 3.4-3.5x with passthrough+iopoll, not available here)",
                uring / lib,
                best / lib,
                best / uring,
            ));
        }
        let cycles: Vec<String> = labels
            .iter()
            .filter_map(|l| {
                points
                    .iter()
                    .find(|p| &p.config == l && p.rw == rw && p.threads == top)
                    .and_then(|p| p.outcome.as_ref().ok())
                    .map(|rep| format!("{l} {:.0}", rep.cycles_per_io))
            })
            .collect();
        if !cycles.is_empty() {
            r.notes.push(format!(
                "{rw} cycles per I/O at {top} threads (whole process): {} (the paper: registered buffers cut CPU per I/O; an SQPOLL poller spins its core, so its cycles count even when idle)",
                cycles.join(", ")
            ));
        }
        if top > 1 {
            let scaling: Vec<String> = labels
                .iter()
                .filter_map(|l| match (find(l, rw, 1), find(l, rw, top)) {
                    (Some(one), Some(n)) if one > 0.0 => Some(format!("{l} {:.2}x", n / one)),
                    _ => None,
                })
                .collect();
            r.notes.push(format!(
                "{rw} scaling from 1 to {top} threads: {} (linear would be {top}x; the paper's scaling is near-linear until the storage stack saturates)",
                scaling.join(", ")
            ));
        }
    }
    for p in points {
        if let Err(e) = &p.outcome {
            if e.starts_with("failed") {
                r.notes
                    .push(format!("{} {} threads {}: {e}", p.config, p.rw, p.threads));
            }
        }
    }
    r.notes.push(format!(
        "this machine: {n_cpus} usable CPUs; rings pinned one per CPU{}; SQPOLL rows need a spare core per ring (2*threads <= {n_cpus}) and otherwise say \"{SQPOLL_SKIP}\"; SQPOLL and DEFER_TASKRUN exclude each other, so the SQPOLL step keeps regfiles+fixedbufs on the default setup, its poller threads unpinned",
        if max_threads > n_cpus {
            format!(", {max_threads} threads oversubscribe them (jobs wrap around the CPUs)")
        } else {
            String::new()
        }
    ));
    let punted: Vec<String> = points
        .iter()
        .filter_map(|p| {
            let w = p.outcome.as_ref().ok()?.iowq_workers?;
            (w > 0).then(|| format!("{} {} t{}: {w}", p.config, p.rw, p.threads))
        })
        .collect();
    if !punted.is_empty() {
        r.notes.push(format!(
            "io-wq workers appeared ({}): some requests were punted to worker threads instead of completing inline or by interrupt (a device without NOWAIT, such as zram, or a full queue), which costs cycles and latency",
            punted.join("; ")
        ));
    }
    let nvme = ringdb_lab::device::nvme_char_devices();
    r.notes.push(format!(
        "{}; iopoll and NVMe passthrough are never run: they need an NVMe device with poll queues (and its /dev/ngXnY for passthrough); NVMe char devices here: {}",
        describe_target(&opts.target),
        if nvme.is_empty() {
            "none".to_string()
        } else {
            nvme.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        }
    ));
    if top < 16 {
        r.notes.push(format!(
            "only {top} threads here: Fig. 7's shape needs many cores (e.g. --max-threads 16 on a 16-core machine)"
        ));
    }
    r.notes.push(format!(
        "4 KiB O_DIRECT, iodepth {IODEPTH} per ring, {:.2} s per point over {} MiB of the target; cpu_pct and cycles_per_io count the whole process (io-wq and SQPOLL threads included)",
        runtime.as_secs_f64(),
        opts.size >> 20
    ));
}
