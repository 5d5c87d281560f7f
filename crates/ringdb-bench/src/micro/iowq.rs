//! `iowq` (paper Sec. 2.2, Fig. 3 path 2c): what the io-wq fallback costs. One request at a
//! time (QD1) is issued inline and with `IOSQE_ASYNC` (`IoConfig::force_async`), which makes
//! io_uring hand it to an io-wq worker thread (`iou-wrk-*`) instead of trying it in the
//! submitting task. The paper measured 7.3 us more per NOP on the worker path.
//!
//! Operations: NOPs (no device at all), 4 KiB `O_DIRECT` random reads of the target, and, when
//! the target is a regular file, buffered 4 KiB reads of a region just read into the page cache
//! (a hit on the page cache completes inline when nothing forces it out).
//!
//! Method: every (operation, mode) runs on a fresh thread, so that it gets its own io-wq (the
//! workers belong to the task that submits; a thread's io-wq keeps one worker until the thread
//! exits). The thread is pinned to one CPU, and its io-wq workers with it
//! (`IORING_REGISTER_IOWQ_AFF`), so a punted request costs a hand-off on the same core, not a
//! wake-up across vCPUs. Latency runs from push to reap (`rdtsc`); cycles per op are the whole
//! process's CPU time (io-wq workers included) x TSC rate / ops; workers are the distinct
//! `iou-wrk-<tid>` threads of that job thread seen while it ran.

use super::qd1::{gettid, one_op, run_sampling_workers, workers_of};
use super::target::{describe_device, prepare_target, BS};
use super::{first_allowed_cpu, MicroOpts, MicroResult, Plot, Series};
use crate::error::Result;
use crate::pattern::Rng;
use ringdb_io::{
    open_engine, AlignedBuf, EngineKind, FileId, IoConfig, IoError, IoRequest, SetupMode,
};
use ringdb_io::{Target, TargetOptions};
use ringdb_lab::counters::{rdtsc, ticks_to_ns, tsc_hz, CpuTime, LatencyHist, LatencySummary};
use ringdb_lab::device::DeviceInfo;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};
/// Paper Sec. 2.2: NOPs forced to io-wq workers cost this much more on average.
const PAPER_FORCED_NOP_US: f64 = 7.3;
/// Buffered reads go to the first this-many bytes of the target, read into the page cache first.
const HOT_REGION: u64 = 8 << 20;
/// Requests before each measured run (not recorded): brings up the worker, warms the caches.
const WARMUP_OPS: u32 = 64;
/// Time per point with `--quick`, at most.
const QUICK_POINT: Duration = Duration::from_millis(200);

const MIRRORS: &str = "paper Sec. 2.2, Fig. 3 path 2c: IOSQE_ASYNC forces the io-wq worker path (NOPs +7.3 us each in the paper)";

const COLUMNS: &[&str] = &[
    "op",
    "mode",
    "ops",
    "lat_avg_us",
    "lat_p50_us",
    "lat_p99_us",
    "cycles_per_op",
    "iowq_workers",
    "delta_avg_us",
    "delta_p50_us",
];

/// Which requests one row issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Nop,
    /// 4 KiB `O_DIRECT` random reads over the whole target.
    ReadDirect,
    /// 4 KiB buffered random reads of a page-cache-hot region.
    ReadBuffered,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Nop => "nop",
            Op::ReadDirect => "read-direct",
            Op::ReadBuffered => "read-buffered",
        }
    }
}

/// What one (op, mode) run measured.
struct Point {
    op: Op,
    forced: bool,
    ops: u64,
    lat: LatencySummary,
    cycles_per_op: f64,
    workers: usize,
}

impl Point {
    fn mode(&self) -> &'static str {
        if self.forced {
            "forced-async"
        } else {
            "inline"
        }
    }

    fn print_progress(&self) {
        eprintln!(
            "iowq {} {}: avg {:.2} us, p50 {:.2} us, {:.0} cycles/op, {} io-wq worker(s)",
            self.op.name(),
            self.mode(),
            self.lat.avg,
            self.lat.p50,
            self.cycles_per_op,
            self.workers
        );
    }

    /// The table row; a forced row carries its difference from `inline`, the same op's
    /// inline row.
    fn row(&self, inline: Option<&Point>) -> Vec<Value> {
        let delta = |f: fn(&LatencySummary) -> f64| -> Value {
            match inline {
                Some(i) if self.forced => json!(f(&self.lat) - f(&i.lat)),
                _ => Value::Null,
            }
        };
        vec![
            json!(self.op.name()),
            json!(self.mode()),
            json!(self.ops),
            json!(self.lat.avg),
            json!(self.lat.p50),
            json!(self.lat.p99),
            json!(self.cycles_per_op),
            json!(self.workers),
            delta(|l| l.avg),
            delta(|l| l.p50),
        ]
    }
}

/// The measuring thread's part: opens the ring pinned to `cpu`, issues QD1 requests for
/// `runtime`, and returns (ops, latency histogram, process CPU time, workers it saw at the end).
fn job(
    path: &Path,
    op: Op,
    forced: bool,
    size: u64,
    runtime: Duration,
    cpu: u32,
) -> Result<(u64, LatencyHist, CpuTime, HashSet<u32>)> {
    // Field order of the locals does not matter here: `engine` is declared after `buf` and
    // `target`, so it is dropped (and drained) first.
    let target = match op {
        Op::Nop => None,
        Op::ReadDirect | Op::ReadBuffered => Some(Target::open(
            path,
            TargetOptions {
                direct: op == Op::ReadDirect,
                write: false,
                create: false,
            },
        )?),
    };
    let region = match op {
        Op::ReadBuffered => {
            let region = size.min(HOT_REGION);
            if let Some(t) = &target {
                warm_page_cache(t, region)?;
            }
            region
        }
        _ => size,
    };
    let mut buf = AlignedBuf::new(BS as usize);
    let files: Vec<i32> = target.iter().map(|t| t.fd()).collect();
    let cfg = IoConfig {
        setup: SetupMode::Defer,
        queue_depth: 4,
        force_async: forced,
        cpu: Some(cpu),
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut engine = open_engine(&cfg, &files, None)?;
    let blocks = region / BS;
    let mut rng = Rng::new(0x10a5c ^ blocks);
    let mut out = Vec::with_capacity(4);
    let ptr = buf.as_mut_ptr();
    let mut next = |i: u64| match op {
        Op::Nop => IoRequest::nop(i),
        _ => IoRequest::read(FileId(0), rng.below(blocks) * BS, ptr, BS as u32, i),
    };
    for i in 0..WARMUP_OPS {
        one_op(engine.as_mut(), &next(i as u64), false, &mut out)?;
    }
    let mut hist = LatencyHist::new();
    let deadline = rdtsc() + (runtime.as_secs_f64() * tsc_hz()) as u64;
    let cpu0 = CpuTime::now();
    let mut ops = 0u64;
    while rdtsc() < deadline {
        let (ticks, _) = one_op(engine.as_mut(), &next(ops), false, &mut out)?;
        hist.record_ns(ticks_to_ns(ticks));
        ops += 1;
    }
    let cpu = CpuTime::now().since(cpu0);
    let seen = workers_of(gettid());
    drop(engine);
    drop(buf);
    Ok((ops, hist, cpu, seen))
}

/// Reads `region` bytes of `t` (a buffered file) twice, so that they sit in the page cache.
fn warm_page_cache(t: &Target, region: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut chunk = vec![0u8; 1 << 20];
    for _ in 0..2 {
        let mut off = 0;
        while off < region {
            let n = (region - off).min(chunk.len() as u64) as usize;
            t.file().read_exact_at(&mut chunk[..n], off).map_err(|e| {
                IoError::os(
                    format!("reading {} into the page cache", t.path().display()),
                    e,
                )
            })?;
            off += n as u64;
        }
    }
    Ok(())
}

/// Runs one (op, mode) on a fresh thread while this thread samples its io-wq workers.
fn measure(
    opts: &MicroOpts,
    op: Op,
    forced: bool,
    size: u64,
    runtime: Duration,
    cpu: u32,
) -> Result<Point> {
    let path = opts.target.as_path();
    let (res, mut seen) = run_sampling_workers(&format!("iowq-{}", op.name()), || {
        job(path, op, forced, size, runtime, cpu)
    });
    let (ops, hist, cpu_time, at_end) = res?;
    seen.extend(at_end);
    let cycles_per_op = cpu_time.total().as_secs_f64() * tsc_hz() / ops.max(1) as f64;
    Ok(Point {
        op,
        forced,
        ops,
        lat: hist.summary(),
        cycles_per_op,
        workers: seen.len(),
    })
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let size = prepare_target(opts, "iowq")?;
    let runtime = opts.runtime_capped_when_quick(QUICK_POINT);
    let ops = ops_for(&opts.target);
    let cpu = first_allowed_cpu();
    let mut r = MicroResult::new("iowq", MIRRORS, COLUMNS);
    let mut points: Vec<Point> = Vec::new();
    let started = Instant::now();
    for &op in &ops {
        for forced in [false, true] {
            let p = measure(opts, op, forced, size, runtime, cpu)?;
            if opts.progress {
                p.print_progress();
            }
            r.row(p.row(points.iter().find(|q| q.op == op && !q.forced)));
            points.push(p);
        }
    }
    notes(&mut r, opts, &points, cpu, size, started.elapsed());
    r.plot = Some(plot(&ops, &points));
    Ok(r)
}

/// The operations a target allows: NOPs and direct reads, and buffered reads of a regular file.
fn ops_for(target: &Path) -> Vec<Op> {
    let regular = std::fs::metadata(target).is_ok_and(|m| m.is_file());
    let mut ops = vec![Op::Nop, Op::ReadDirect];
    if regular {
        ops.push(Op::ReadBuffered);
    }
    ops
}

/// Average latency per operation, inline against forced.
fn plot(ops: &[Op], points: &[Point]) -> Plot {
    let index = |op: Op| ops.iter().position(|o| *o == op).unwrap_or(0) as f64 + 1.0;
    let series = [false, true]
        .into_iter()
        .map(|forced| Series {
            label: if forced {
                "forced-async (IOSQE_ASYNC)"
            } else {
                "inline"
            }
            .into(),
            points: points
                .iter()
                .filter(|p| p.forced == forced)
                .map(|p| (index(p.op), p.lat.avg))
                .collect(),
        })
        .collect();
    let names: Vec<String> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| format!("{} = {}", i + 1, o.name()))
        .collect();
    Plot::new(
        "QD1 latency: inline vs forced to io-wq",
        format!("operation ({})", names.join(", ")),
        "average latency (us)",
        series,
    )
}

fn notes(
    r: &mut MicroResult,
    opts: &MicroOpts,
    points: &[Point],
    cpu: u32,
    size: u64,
    took: Duration,
) {
    let at = |op: Op, forced: bool| points.iter().find(|p| p.op == op && p.forced == forced);
    let zram = DeviceInfo::for_path(&opts.target)
        .ok()
        .flatten()
        .is_some_and(|d| d.name.starts_with("zram"));
    for op in [Op::Nop, Op::ReadDirect, Op::ReadBuffered] {
        if let (Some(inline), Some(forced)) = (at(op, false), at(op, true)) {
            r.notes.push(forced_cost_note(inline, forced, zram));
        }
    }
    r.notes.push(format!(
        "QD1, one request in flight; each row on a fresh thread pinned to CPU {cpu} with its io-wq workers pinned there too (IORING_REGISTER_IOWQ_AFF), DEFER_TASKRUN ring; a forced request costs a hand-off to a worker on the same core and the completion's return (on this VM, a worker on another vCPU costs a cross-vCPU wake-up of tens of us instead, see docs/DESIGN.md)"
    ));
    let buffered = at(Op::ReadBuffered, false).is_some();
    r.notes.push(method_note(opts, size, buffered, took));
}

/// What forcing one op to io-wq cost, against its inline row, and what that figure means here.
fn forced_cost_note(inline: &Point, forced: &Point, zram: bool) -> String {
    let (i, f, op) = (inline, forced, inline.op);
    let d = f.lat.avg - i.lat.avg;
    let mut s = format!(
        "{}: forced-async costs {d:+.2} us on average ({:.2} -> {:.2} us; p50 {:+.2} us) and {:+.0} cycles per op ({:.0} -> {:.0}); io-wq workers {} inline, {} forced",
        op.name(),
        i.lat.avg,
        f.lat.avg,
        f.lat.p50 - i.lat.p50,
        f.cycles_per_op - i.cycles_per_op,
        i.cycles_per_op,
        f.cycles_per_op,
        i.workers,
        f.workers,
    );
    if op == Op::Nop {
        s.push_str(&format!(
            "; the paper measured +{PAPER_FORCED_NOP_US} us per NOP ({:.1}x that here)",
            d / PAPER_FORCED_NOP_US
        ));
    }
    if i.workers > 0 && op != Op::Nop {
        s.push_str(&punted_either_way(op, zram));
    } else if op != Op::Nop && d.abs() < 0.1 * i.lat.avg {
        s.push_str(&format!(
            "; the worker hand-off is within the noise of this device's {:.0} us reads",
            i.lat.avg
        ));
    }
    if f.workers == 0 {
        s.push_str(
            "; no io-wq worker was seen in forced mode (it may have come and gone between samples)",
        );
    }
    s
}

/// The caveat of a device op whose inline row had workers too: both rows ran on io-wq.
fn punted_either_way(op: Op, zram: bool) -> String {
    format!(
        "; NOTE: io-wq workers appeared in inline mode too, so this {} path is punted to io-wq either way ({}): the two rows compare worker against worker, not inline against worker, and their difference is not the cost of the fallback",
        op.name(),
        if zram {
            "zram is bio-based and has no NOWAIT support, so every read is retried on io-wq"
        } else {
            "the device or filesystem could not take this request without blocking (no NOWAIT)"
        }
    )
}

/// The target, what the reads covered, and how latency and cycles were counted.
fn method_note(opts: &MicroOpts, size: u64, buffered: bool, took: Duration) -> String {
    format!(
        "target {} ({}), O_DIRECT reads over {} MiB{}; latency = push to reap (rdtsc); cycles/op = whole-process CPU time (io-wq workers included) x {:.2} GHz TSC / ops; {} CPU(s) here, shared; took {:.1} s",
        opts.target.display(),
        describe_device(&opts.target),
        size >> 20,
        if buffered {
            format!(", buffered reads over the first {} MiB, read into the page cache first", size.min(HOT_REGION) >> 20)
        } else {
            ", no buffered rows (the target is a block device)".into()
        },
        tsc_hz() / 1e9,
        ringdb_io::affinity::online_cpus(),
        took.as_secs_f64(),
    )
}
