//! `sqpoll-wakeup` (paper Sec. 2.1): what it costs when the SQPOLL thread has gone to sleep.
//! An SQPOLL poller spins on the submission queue for `sq_thread_idle` after its last work and
//! then sleeps, setting `IORING_SQ_NEED_WAKEUP`; the next submission must then enter the kernel
//! (`IORING_ENTER_SQ_WAKEUP`) and wait for the poller to be scheduled. The paper measured about
//! 30 us of added latency for that wake-up.
//!
//! Method: one request at a time, NOPs (no device: the wake-up alone) and 4 KiB `O_DIRECT`
//! random reads, on an SQPOLL ring with a 1 ms idle time, poller pinned to a second CPU and the
//! submitting thread to the first. "awake": requests back to back, so the poller never idles
//! long enough to sleep; "asleep": the thread sleeps longer than the idle time before each
//! request. The same two cases run on a DEFER_TASKRUN ring without SQPOLL, where the idle gap
//! costs only what idling itself costs (cold caches, a halted vCPU); the difference between the
//! two penalties is the wake-up's own.
//!
//! Latency runs from push to reap (`rdtsc`); on the SQPOLL ring the thread polls the completion
//! queue (it never waits in the kernel). The engine enters the kernel on an SQPOLL ring only
//! when it saw NEED_WAKEUP (`Engine::submit` with nothing to wait for), so the count of
//! requests whose submission took an `io_uring_enter` is the count of wake-ups it observed.

use super::batch_latency::describe_target;
use super::iowq::{one_op, prepare_target, BS};
use super::{MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchError, Result};
use crate::pattern::Rng;
use ringdb_io::target::{Target, TargetOptions};
use ringdb_io::{
    open_engine, AlignedBuf, Engine, EngineKind, FileId, IoConfig, IoRequest, SetupMode, SqPoll,
};
use ringdb_lab::counters::{rdtsc, ticks_to_ns, tsc_hz, LatencyHist, LatencySummary};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// `sq_thread_idle` in milliseconds (the kernel rounds it up to whole jiffies).
const IDLE_MS: u32 = 1;
/// Idle gaps tried, shortest first, until the poller is seen asleep after each of them.
const GAPS_MS: &[u64] = &[10, 25, 60];
/// Probes per candidate gap; all must find the poller asleep.
const GAP_PROBES: u32 = 3;
/// Paper Sec. 2.1: waking the SQPOLL thread adds about this much latency.
const PAPER_WAKEUP_US: f64 = 30.0;
const WARMUP_OPS: u32 = 32;
/// Back-to-back samples per point at most.
const MAX_AWAKE: u64 = 200_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RingKind {
    SqPoll,
    Defer,
}

impl RingKind {
    fn name(self) -> String {
        match self {
            RingKind::SqPoll => format!("sqpoll(idle {IDLE_MS} ms)"),
            RingKind::Defer => "defer (no sqpoll)".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Nop,
    Read,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Nop => "nop",
            Op::Read => "read-direct",
        }
    }
}

struct Point {
    op: Op,
    ring: RingKind,
    /// Whether an idle gap preceded each request.
    gap: bool,
    samples: u64,
    /// Requests whose submission had to wake the poller (SQPOLL ring only).
    wakeups: Option<u64>,
    lat: LatencySummary,
}

impl Point {
    fn case(&self) -> &'static str {
        match (self.ring, self.gap) {
            (RingKind::SqPoll, false) => "awake",
            (RingKind::SqPoll, true) => "asleep",
            (RingKind::Defer, false) => "back-to-back",
            (RingKind::Defer, true) => "idle-gap",
        }
    }
}

/// What the measuring thread decided and measured.
struct Run {
    points: Vec<Point>,
    gap: Duration,
    /// Whether the probes found the poller asleep after `gap`.
    gap_confirmed: bool,
}

struct Plan {
    awake_runtime: Duration,
    asleep_samples: u64,
    app_cpu: u32,
    sq_cpu: u32,
    blocks: u64,
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let size = prepare_target(opts, "sqpoll-wakeup")?;
    let cpus = super::scale_out::allowed_cpus();
    let app_cpu = cpus.first().copied().unwrap_or(0);
    let sq_cpu = cpus.get(1).copied().unwrap_or(app_cpu);
    let runtime = if opts.quick {
        opts.runtime.min(Duration::from_millis(200))
    } else {
        opts.runtime
    };
    let asleep_samples = if opts.quick {
        30
    } else {
        // About `runtime` of idle gaps per point.
        (runtime.as_millis() as u64 / GAPS_MS[0]).clamp(50, 1000)
    };
    let plan = Plan {
        awake_runtime: runtime,
        asleep_samples,
        app_cpu,
        sq_cpu,
        blocks: size / BS,
    };
    // The measuring thread pins itself; a thread of its own keeps the caller unpinned.
    let path = opts.target.as_path();
    let run = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("ringdb-sqpoll-wakeup".into())
            .spawn_scoped(s, || measure_all(path, &plan, opts.progress))
            .map_err(|e| BenchError::Job(format!("spawning the measuring thread: {e}")))?
            .join()
            .unwrap_or_else(|_| Err(BenchError::Job("the measuring thread panicked".into())))
    })?;

    let mut r = MicroResult::new(
        "sqpoll-wakeup",
        "paper Sec. 2.1: waking a sleeping SQPOLL thread adds about 30 us of latency",
        &[
            "op",
            "ring",
            "case",
            "samples",
            "wakeups",
            "lat_avg_us",
            "lat_p50_us",
            "lat_p99_us",
            "penalty_p50_us",
        ],
    );
    for p in &run.points {
        let penalty = if p.gap {
            run.points
                .iter()
                .find(|q| q.op == p.op && q.ring == p.ring && !q.gap)
                .map_or(Value::Null, |q| json!(p.lat.p50 - q.lat.p50))
        } else {
            Value::Null
        };
        r.row(vec![
            json!(p.op.name()),
            json!(p.ring.name()),
            json!(p.case()),
            json!(p.samples),
            p.wakeups.map_or(Value::Null, |w| json!(w)),
            json!(p.lat.avg),
            json!(p.lat.p50),
            json!(p.lat.p99),
            penalty,
        ]);
    }
    notes(&mut r, opts, &plan, &run);
    let gap_ms = run.gap.as_secs_f64() * 1e3;
    let mut series = Vec::new();
    for ring in [RingKind::SqPoll, RingKind::Defer] {
        for op in [Op::Nop, Op::Read] {
            let points: Vec<(f64, f64)> = run
                .points
                .iter()
                .filter(|p| p.ring == ring && p.op == op)
                .map(|p| (if p.gap { gap_ms } else { 0.0 }, p.lat.p50))
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    label: format!("{} {}", op.name(), ring.name()),
                    points,
                });
            }
        }
    }
    r.plot = Some(Plot {
        title: "QD1 latency after an idle gap: SQPOLL wake-up vs no SQPOLL".into(),
        x_label: "idle time before each request (ms; 0 = back to back)".into(),
        y_label: "p50 latency (us)".into(),
        log_x: false,
        log_y: false,
        series,
    });
    Ok(r)
}

/// Opens the target and both rings in turn, and measures every point.
fn measure_all(path: &Path, plan: &Plan, progress: bool) -> Result<Run> {
    let target = Target::open(
        path,
        TargetOptions {
            direct: true,
            write: false,
            create: false,
        },
    )?;
    let mut buf = AlignedBuf::new(BS as usize);
    let mut rng = Rng::new(0x5e9_0011);
    let mut points = Vec::new();
    let mut gap = Duration::from_millis(GAPS_MS[0]);
    let mut gap_confirmed = false;
    for ring in [RingKind::SqPoll, RingKind::Defer] {
        let cfg = match ring {
            RingKind::SqPoll => IoConfig {
                sqpoll: Some(SqPoll {
                    idle_ms: IDLE_MS,
                    cpu: Some(plan.sq_cpu),
                }),
                ..IoConfig::new(EngineKind::Uring)
            },
            RingKind::Defer => IoConfig {
                setup: SetupMode::Defer,
                ..IoConfig::new(EngineKind::Uring)
            },
        };
        let cfg = IoConfig {
            queue_depth: 4,
            cpu: Some(plan.app_cpu),
            ..cfg
        };
        // Declared after `buf` and `target`: dropped (and drained) before them.
        let mut engine = open_engine(&cfg, &[target.fd()], None)?;
        let spin = ring == RingKind::SqPoll;
        if spin {
            (gap, gap_confirmed) = find_gap(engine.as_mut())?;
        }
        for op in [Op::Nop, Op::Read] {
            for with_gap in [false, true] {
                let ptr = buf.as_mut_ptr();
                let mut next = |i: u64| match op {
                    Op::Nop => IoRequest::nop(i),
                    Op::Read => {
                        IoRequest::read(FileId(0), rng.below(plan.blocks) * BS, ptr, BS as u32, i)
                    }
                };
                let mut out = Vec::with_capacity(4);
                for i in 0..WARMUP_OPS {
                    one_op(engine.as_mut(), &next(i as u64), spin, &mut out)?;
                }
                let mut hist = LatencyHist::new();
                let mut wakeups = 0u64;
                let mut samples = 0u64;
                let mut one = |i: u64| -> Result<()> {
                    let (ticks, entered) = one_op(engine.as_mut(), &next(i), spin, &mut out)?;
                    hist.record_ns(ticks_to_ns(ticks));
                    wakeups += entered as u64;
                    Ok(())
                };
                if with_gap {
                    for i in 0..plan.asleep_samples {
                        std::thread::sleep(gap);
                        one(i)?;
                        samples += 1;
                    }
                } else {
                    let deadline = rdtsc() + (plan.awake_runtime.as_secs_f64() * tsc_hz()) as u64;
                    while rdtsc() < deadline && samples < MAX_AWAKE {
                        one(samples)?;
                        samples += 1;
                    }
                }
                let p = Point {
                    op,
                    ring,
                    gap: with_gap,
                    samples,
                    wakeups: spin.then_some(wakeups),
                    lat: hist.summary(),
                };
                if progress {
                    eprintln!(
                        "sqpoll-wakeup {} {} {}: p50 {:.1} us, p99 {:.1} us{}",
                        op.name(),
                        ring.name(),
                        p.case(),
                        p.lat.p50,
                        p.lat.p99,
                        p.wakeups
                            .map_or(String::new(), |w| format!(", {w} wake-ups of {samples}"))
                    );
                }
                points.push(p);
            }
        }
        drop(engine);
    }
    drop(buf);
    Ok(Run {
        points,
        gap,
        gap_confirmed,
    })
}

/// The shortest gap of [`GAPS_MS`] after which every probe NOP found the poller asleep (its
/// submission needed a wake-up enter), and whether one did.
fn find_gap(engine: &mut dyn Engine) -> Result<(Duration, bool)> {
    let mut out = Vec::with_capacity(4);
    for &ms in GAPS_MS {
        let gap = Duration::from_millis(ms);
        let mut woke = 0;
        for i in 0..GAP_PROBES {
            std::thread::sleep(gap);
            let (_, entered) = one_op(engine, &IoRequest::nop(i as u64), true, &mut out)?;
            woke += entered as u32;
        }
        if woke == GAP_PROBES {
            return Ok((gap, true));
        }
    }
    Ok((Duration::from_millis(GAPS_MS[GAPS_MS.len() - 1]), false))
}

fn notes(r: &mut MicroResult, opts: &MicroOpts, plan: &Plan, run: &Run) {
    let gap_ms = run.gap.as_secs_f64() * 1e3;
    let at = |op: Op, ring: RingKind, gap: bool| {
        run.points
            .iter()
            .find(|p| p.op == op && p.ring == ring && p.gap == gap)
    };
    for op in [Op::Nop, Op::Read] {
        let (Some(sa), Some(ss)) = (
            at(op, RingKind::SqPoll, false),
            at(op, RingKind::SqPoll, true),
        ) else {
            continue;
        };
        let penalty = ss.lat.p50 - sa.lat.p50;
        let mut s = format!(
            "{}: a sleeping poller adds {penalty:.1} us at p50 ({:.1} -> {:.1} us; avg {:+.1} us), against the paper's ~{PAPER_WAKEUP_US:.0} us",
            op.name(),
            sa.lat.p50,
            ss.lat.p50,
            ss.lat.avg - sa.lat.avg,
        );
        if let (Some(da), Some(dg)) = (
            at(op, RingKind::Defer, false),
            at(op, RingKind::Defer, true),
        ) {
            let idle = dg.lat.p50 - da.lat.p50;
            s.push_str(&format!(
                "; the same {gap_ms:.0} ms gap costs {idle:.1} us on the ring without SQPOLL ({:.1} -> {:.1} us), so the wake-up's own share is about {:.1} us; awake SQPOLL vs no SQPOLL back to back: {:.1} vs {:.1} us",
                da.lat.p50,
                dg.lat.p50,
                penalty - idle,
                sa.lat.p50,
                da.lat.p50,
            ));
        }
        if op == Op::Nop {
            s.push_str("; NOPs never reach a device, so this row is the wake-up alone");
        } else if let Some(da) = at(op, RingKind::Defer, false) {
            if sa.lat.p50 < da.lat.p50 {
                s.push_str("; back to back, the awake poller beats the ring without SQPOLL because this thread spins on the CQ there, while without SQPOLL it sleeps in io_uring_enter and must itself be woken by the completion");
            }
        }
        r.notes.push(s);
    }
    // Did the engine see NEED_WAKEUP where it should, and not where it should not?
    let woke = |gap: bool| -> (u64, u64) {
        run.points
            .iter()
            .filter(|p| p.ring == RingKind::SqPoll && p.gap == gap)
            .fold((0, 0), |(w, n), p| {
                (w + p.wakeups.unwrap_or(0), n + p.samples)
            })
    };
    let (w_asleep, n_asleep) = woke(true);
    let (w_awake, n_awake) = woke(false);
    let mut s = format!(
        "IORING_SQ_NEED_WAKEUP observed (the submission entered with IORING_ENTER_SQ_WAKEUP) for {w_asleep} of {n_asleep} requests after a {gap_ms:.0} ms gap and {w_awake} of {n_awake} back-to-back ones"
    );
    if !run.gap_confirmed {
        s.push_str(&format!(
            "; WARNING: even after {gap_ms:.0} ms the probes did not always find the poller asleep, so the asleep rows mix sleeping and spinning pollers"
        ));
    } else if w_asleep < n_asleep {
        s.push_str("; some gapped requests found the poller awake (it was woken by something else, or a late completion reset its idle clock)");
    }
    if w_awake > 0 {
        s.push_str(
            "; some back-to-back requests found it asleep (this thread was descheduled longer than the idle time)",
        );
    }
    r.notes.push(s);
    r.notes.push(format!(
        "sq_thread_idle = {IDLE_MS} ms (the kernel rounds it up to whole jiffies, 4 ms at HZ=250), so the gap is the shortest of {:?} ms after which {GAP_PROBES} probes all found the poller asleep",
        GAPS_MS
    ));
    let cpus = if plan.sq_cpu == plan.app_cpu {
        format!(
            "WARNING: only one CPU is allowed, so the poller (CPU {}) shares the core with the submitting thread and the awake numbers mean little",
            plan.sq_cpu
        )
    } else {
        format!(
            "submitting thread pinned to CPU {}, SQPOLL thread to CPU {} (IORING_SETUP_SQ_AFF); it spins on the CQ while a request is in flight",
            plan.app_cpu, plan.sq_cpu
        )
    };
    r.notes.push(format!(
        "{cpus}; target {} ({}); {} CPU(s) here, shared with whatever else runs",
        opts.target.display(),
        describe_target(&opts.target),
        ringdb_io::affinity::online_cpus(),
    ));
}
