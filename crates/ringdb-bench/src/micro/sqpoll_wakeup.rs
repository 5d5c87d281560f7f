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

use super::qd1::one_op;
use super::target::{describe_device, open_direct_read, prepare_target, BS};
use super::{allowed_cpus, MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchError, Result};
use crate::pattern::Rng;
use ringdb_io::{
    open_engine, AlignedBuf, Engine, EngineKind, FileId, IoCompletion, IoConfig, IoRequest,
    SetupMode, SqPoll,
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
/// Time per back-to-back point with `--quick`, at most.
const QUICK_POINT: Duration = Duration::from_millis(200);
/// Gapped samples per point with `--quick`.
const QUICK_ASLEEP_SAMPLES: u64 = 30;

const MIRRORS: &str = "paper Sec. 2.1: waking a sleeping SQPOLL thread adds about 30 us of latency";

const COLUMNS: &[&str] = &[
    "op",
    "ring",
    "case",
    "samples",
    "wakeups",
    "lat_avg_us",
    "lat_p50_us",
    "lat_p99_us",
    "penalty_p50_us",
];

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

    /// The ring of this kind: QD1 (4 deep), the submitter pinned to `plan.app_cpu`, an SQPOLL
    /// poller to `plan.sq_cpu`.
    fn config(self, plan: &Plan) -> IoConfig {
        let cfg = match self {
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
        IoConfig {
            queue_depth: 4,
            cpu: Some(plan.app_cpu),
            ..cfg
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

    fn print_progress(&self) {
        eprintln!(
            "sqpoll-wakeup {} {} {}: p50 {:.1} us, p99 {:.1} us{}",
            self.op.name(),
            self.ring.name(),
            self.case(),
            self.lat.p50,
            self.lat.p99,
            self.wakeups.map_or(String::new(), |w| format!(
                ", {w} wake-ups of {}",
                self.samples
            ))
        );
    }

    /// The table row; a gapped row carries its p50 penalty over `back_to_back`, the same op
    /// and ring without the gap.
    fn row(&self, back_to_back: Option<&Point>) -> Vec<Value> {
        let penalty = match back_to_back {
            Some(q) if self.gap => json!(self.lat.p50 - q.lat.p50),
            _ => Value::Null,
        };
        vec![
            json!(self.op.name()),
            json!(self.ring.name()),
            json!(self.case()),
            json!(self.samples),
            self.wakeups.map_or(Value::Null, |w| json!(w)),
            json!(self.lat.avg),
            json!(self.lat.p50),
            json!(self.lat.p99),
            penalty,
        ]
    }
}

/// What the measuring thread decided and measured.
struct Run {
    points: Vec<Point>,
    gap: Duration,
    /// Whether the probes found the poller asleep after `gap`.
    gap_confirmed: bool,
}

impl Run {
    /// The point of (`op`, `ring`, with or without a `gap`), when there is one.
    fn at(&self, op: Op, ring: RingKind, gap: bool) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.op == op && p.ring == ring && p.gap == gap)
    }

    /// The gap before each gapped request, in milliseconds.
    fn gap_ms(&self) -> f64 {
        self.gap.as_secs_f64() * 1e3
    }
}

/// What the measuring thread runs: how long and how often, on which CPUs, over which blocks.
struct Plan {
    awake_runtime: Duration,
    asleep_samples: u64,
    app_cpu: u32,
    sq_cpu: u32,
    blocks: u64,
}

impl Plan {
    /// The plan `opts` asks for, once the target is ready.
    fn for_opts(opts: &MicroOpts) -> Result<Plan> {
        let size = prepare_target(opts, "sqpoll-wakeup")?;
        let cpus = allowed_cpus();
        let app_cpu = cpus.first().copied().unwrap_or(0);
        let sq_cpu = cpus.get(1).copied().unwrap_or(app_cpu);
        let runtime = opts.runtime_capped_when_quick(QUICK_POINT);
        let asleep_samples = if opts.quick {
            QUICK_ASLEEP_SAMPLES
        } else {
            // About `runtime` of idle gaps per point.
            (runtime.as_millis() as u64 / GAPS_MS[0]).clamp(50, 1000)
        };
        Ok(Plan {
            awake_runtime: runtime,
            asleep_samples,
            app_cpu,
            sq_cpu,
            blocks: size / BS,
        })
    }
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let plan = Plan::for_opts(opts)?;
    // The measuring thread pins itself; a thread of its own keeps the caller unpinned.
    let path = opts.target.as_path();
    let run = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("ringdb-sqpoll-wakeup".into())
            .spawn_scoped(s, || measure_all(path, &plan, opts.progress))
            .map_err(|e| BenchError::job_spawn("ringdb-sqpoll-wakeup", e))?
            .join()
            .unwrap_or_else(|payload| {
                Err(BenchError::job_panicked(
                    "ringdb-sqpoll-wakeup",
                    payload.as_ref(),
                ))
            })
    })?;
    let mut r = MicroResult::new("sqpoll-wakeup", MIRRORS, COLUMNS);
    for p in &run.points {
        r.row(p.row(run.at(p.op, p.ring, false)));
    }
    notes(&mut r, opts, &plan, &run);
    r.plot = Some(plot(&run));
    Ok(r)
}

/// p50 latency against the idle time before each request, one line per (op, ring).
fn plot(run: &Run) -> Plot {
    let gap_ms = run.gap_ms();
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
    Plot::new(
        "QD1 latency after an idle gap: SQPOLL wake-up vs no SQPOLL",
        "idle time before each request (ms; 0 = back to back)",
        "p50 latency (us)",
        series,
    )
}

/// Opens the target and both rings in turn, and measures every point.
fn measure_all(path: &Path, plan: &Plan, progress: bool) -> Result<Run> {
    let target = open_direct_read(path)?;
    let mut buf = AlignedBuf::new(BS as usize);
    let mut rng = Rng::new(0x5e9_0011);
    let mut points = Vec::new();
    let mut gap = Duration::from_millis(GAPS_MS[0]);
    let mut gap_confirmed = false;
    for ring in [RingKind::SqPoll, RingKind::Defer] {
        // Declared after `buf` and `target`: dropped (and drained) before them.
        let mut engine = open_engine(&ring.config(plan), &[target.fd()], None)?;
        if ring == RingKind::SqPoll {
            (gap, gap_confirmed) = find_gap(engine.as_mut())?;
        }
        let mut sampler = Sampler {
            engine: engine.as_mut(),
            ring,
            buf: buf.as_mut_ptr(),
            rng: &mut rng,
            plan,
            gap,
        };
        for op in [Op::Nop, Op::Read] {
            for with_gap in [false, true] {
                let p = sampler.point(op, with_gap)?;
                if progress {
                    p.print_progress();
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

/// Measures the points of one ring: QD1 requests back to back, or each after an idle gap.
struct Sampler<'a> {
    engine: &'a mut dyn Engine,
    ring: RingKind,
    /// The read buffer, [`BS`] bytes, which outlives the ring.
    buf: *mut u8,
    rng: &'a mut Rng,
    plan: &'a Plan,
    gap: Duration,
}

/// What the samples of one point add up to.
struct Tally {
    hist: LatencyHist,
    wakeups: u64,
    samples: u64,
}

impl Sampler<'_> {
    /// The warm-up, then the samples of (`op`, with or without a gap) on this ring.
    fn point(&mut self, op: Op, with_gap: bool) -> Result<Point> {
        let mut out = Vec::with_capacity(4);
        for i in 0..WARMUP_OPS {
            self.one(op, i as u64, &mut out)?;
        }
        let mut tally = Tally {
            hist: LatencyHist::new(),
            wakeups: 0,
            samples: 0,
        };
        if with_gap {
            for _ in 0..self.plan.asleep_samples {
                std::thread::sleep(self.gap);
                self.record(op, &mut out, &mut tally)?;
            }
        } else {
            let deadline = rdtsc() + (self.plan.awake_runtime.as_secs_f64() * tsc_hz()) as u64;
            while rdtsc() < deadline && tally.samples < MAX_AWAKE {
                self.record(op, &mut out, &mut tally)?;
            }
        }
        Ok(Point {
            op,
            ring: self.ring,
            gap: with_gap,
            samples: tally.samples,
            wakeups: (self.ring == RingKind::SqPoll).then_some(tally.wakeups),
            lat: tally.hist.summary(),
        })
    }

    /// One measured request: its latency, and whether its submission woke the poller.
    fn record(&mut self, op: Op, out: &mut Vec<IoCompletion>, tally: &mut Tally) -> Result<()> {
        let (ticks, entered) = self.one(op, tally.samples, out)?;
        tally.hist.record_ns(ticks_to_ns(ticks));
        tally.wakeups += entered as u64;
        tally.samples += 1;
        Ok(())
    }

    /// One request alone (`i` is its user data): on the SQPOLL ring the thread spins on the
    /// completion queue, on the other it waits in the kernel.
    fn one(&mut self, op: Op, i: u64, out: &mut Vec<IoCompletion>) -> Result<(u64, bool)> {
        let req = match op {
            Op::Nop => IoRequest::nop(i),
            Op::Read => {
                let offset = self.rng.below(self.plan.blocks) * BS;
                IoRequest::read(FileId(0), offset, self.buf, BS as u32, i)
            }
        };
        let spin = self.ring == RingKind::SqPoll;
        one_op(&mut *self.engine, &req, spin, out)
    }
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
    r.notes.extend(
        [Op::Nop, Op::Read]
            .into_iter()
            .filter_map(|op| wakeup_cost_note(run, op)),
    );
    r.notes.push(need_wakeup_note(run));
    r.notes.push(format!(
        "sq_thread_idle = {IDLE_MS} ms (the kernel rounds it up to whole jiffies, 4 ms at HZ=250), so the gap is the shortest of {:?} ms after which {GAP_PROBES} probes all found the poller asleep",
        GAPS_MS
    ));
    r.notes.push(machine_note(opts, plan));
}

/// What a sleeping poller added to `op` at p50, set against what the same gap costs without
/// SQPOLL and against the paper.
fn wakeup_cost_note(run: &Run, op: Op) -> Option<String> {
    let awake = run.at(op, RingKind::SqPoll, false)?;
    let asleep = run.at(op, RingKind::SqPoll, true)?;
    let penalty = asleep.lat.p50 - awake.lat.p50;
    let mut s = format!(
        "{}: a sleeping poller adds {penalty:.1} us at p50 ({:.1} -> {:.1} us; avg {:+.1} us), against the paper's ~{PAPER_WAKEUP_US:.0} us",
        op.name(),
        awake.lat.p50,
        asleep.lat.p50,
        asleep.lat.avg - awake.lat.avg,
    );
    if let (Some(back_to_back), Some(idle_gap)) = (
        run.at(op, RingKind::Defer, false),
        run.at(op, RingKind::Defer, true),
    ) {
        s.push_str(&idle_share(run, penalty, awake, back_to_back, idle_gap));
    }
    if op == Op::Nop {
        s.push_str("; NOPs never reach a device, so this row is the wake-up alone");
    } else if let Some(back_to_back) = run.at(op, RingKind::Defer, false) {
        if awake.lat.p50 < back_to_back.lat.p50 {
            s.push_str("; back to back, the awake poller beats the ring without SQPOLL because this thread spins on the CQ there, while without SQPOLL it sleeps in io_uring_enter and must itself be woken by the completion");
        }
    }
    Some(s)
}

/// The part of `penalty` that idling alone explains (the ring without SQPOLL pays it too),
/// and so the wake-up's own share.
fn idle_share(
    run: &Run,
    penalty: f64,
    awake: &Point,
    back_to_back: &Point,
    idle_gap: &Point,
) -> String {
    let idle = idle_gap.lat.p50 - back_to_back.lat.p50;
    format!(
        "; the same {:.0} ms gap costs {idle:.1} us on the ring without SQPOLL ({:.1} -> {:.1} us), so the wake-up's own share is about {:.1} us; awake SQPOLL vs no SQPOLL back to back: {:.1} vs {:.1} us",
        run.gap_ms(),
        back_to_back.lat.p50,
        idle_gap.lat.p50,
        penalty - idle,
        awake.lat.p50,
        back_to_back.lat.p50,
    )
}

/// Whether the engine saw NEED_WAKEUP where it should, and not where it should not.
fn need_wakeup_note(run: &Run) -> String {
    let woke = |gap: bool| -> (u64, u64) {
        run.points
            .iter()
            .filter(|p| p.ring == RingKind::SqPoll && p.gap == gap)
            .fold((0, 0), |(w, n), p| {
                (w + p.wakeups.unwrap_or(0), n + p.samples)
            })
    };
    let gap_ms = run.gap_ms();
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
    s
}

/// Where the submitter and the poller ran, and the target.
fn machine_note(opts: &MicroOpts, plan: &Plan) -> String {
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
    format!(
        "{cpus}; target {} ({}); {} CPU(s) here, shared with whatever else runs",
        opts.target.display(),
        describe_device(&opts.target),
        ringdb_io::affinity::online_cpus(),
    )
}
