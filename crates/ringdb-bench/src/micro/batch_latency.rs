//! `batch-latency` (paper Sec. 3.6, Table 2): write latency at a fixed target rate against the
//! number of writes released together. Batching saves `io_uring_enter` calls, but a batch puts
//! all its writes at the device at once, so the last of them waits behind the others: latency
//! and its spread grow with the batch (the paper: about 24 us at batch 8, 200 us at batch 128,
//! writing 1.5 MIOPS to one SSD).
//!
//! Method: 4 KiB `O_DIRECT` random writes through one ring (512 deep), open loop. The rate is
//! half of what an unpaced QD-32 random-write calibration (one enter per write, the cost batch
//! 1 pays) reaches on the same target. Every
//! `batch / rate` seconds the next batch is due: its writes are pushed and handed to the kernel
//! with one `io_uring_enter`. A write's latency runs from the time its batch was due to the
//! time its completion is seen (the thread spins on the completion queue while writes are in
//! flight), so a batch released late, or held back by a full ring, counts its wait.

use super::target::{describe_device, usable_size};
use super::{available_cpus, MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchError, BenchSetting, Result};
use crate::pattern::{self, Rng};
use crate::rawio::{self, IoSpec, RwMode};
use ringdb_io::{
    open_engine, Batching, Engine, EngineKind, FileId, FixedBufferPool, IoCompletion, IoConfig,
    IoError, IoRequest,
};
use ringdb_io::{Target, TargetOptions};
use ringdb_lab::counters::{rdtsc, tsc_hz, LatencyHist};
use ringdb_lab::iowq::IowqTracker;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const BS: u64 = 4096;
const BATCHES: &[u32] = &[1, 8, 32, 64, 128, 256];
const QUICK_BATCHES: &[u32] = &[1, 8, 128];
/// Ring depth: room for two of the largest batches, so a late batch can follow at once.
const RING_DEPTH: u32 = 512;
const CALIBRATION_QD: u32 = 32;
/// Fraction of the calibrated IOPS used as the target rate.
const RATE_FRACTION: f64 = 0.5;
/// Table 2 of the paper (8 workers, 1.5 MIOPS, one SSD): batch, average us, stddev us.
const PAPER_TABLE2: &[(u32, f64, f64)] = &[
    (1, 11.51, 0.95),
    (8, 24.22, 1.71),
    (32, 60.62, 3.91),
    (64, 116.40, 12.17),
    (128, 200.85, 7.47),
    (256, 317.51, 33.88),
];
/// Spinning on the completion queue this long without progress falls back to a blocking wait.
const STALL: Duration = Duration::from_millis(20);

/// Waiting for the next batch sleeps when it is due further off than this; shorter waits spin.
const SLEEP_ABOVE: Duration = Duration::from_millis(1);
/// A sleep ends this much before the batch is due, so that a late wake-up does not delay it.
const SLEEP_MARGIN: Duration = Duration::from_micros(300);
/// Time per point with `--quick`, at most.
const QUICK_POINT: Duration = Duration::from_millis(300);

const MIRRORS: &str = "paper Sec. 3.6, Table 2: write latency vs batch size at a fixed rate (batch 8 mostly < 25 us, batch 128 up to 200 us)";

const COLUMNS: &[&str] = &[
    "batch",
    "target_iops",
    "achieved_iops",
    "lat_avg_us",
    "lat_stddev_us",
    "lat_p99_us",
    "lat_max_us",
    "enters_per_write",
];

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let batches = if opts.quick { QUICK_BATCHES } else { BATCHES };
    let runtime = opts.runtime_capped_when_quick(QUICK_POINT);
    let size = usable_size(&opts.target, opts.size)?;
    if size < BS {
        return Err(BenchError::TooSmall {
            setting: BenchSetting::Size,
            value: size,
            min: BS,
            needed_by: "batch-latency",
        });
    }
    let calibrated_iops = calibrate(opts, size, runtime)?;
    let rate = calibrated_iops * RATE_FRACTION;
    if !rate.is_finite() || rate < 1.0 {
        return Err(BenchError::TooSlowToPace {
            path: opts.target.clone(),
            write_iops: calibrated_iops,
        });
    }
    if opts.progress {
        eprintln!(
            "batch-latency: calibration {calibrated_iops:.0} IOPS (QD {CALIBRATION_QD}), target rate {rate:.0} IOPS"
        );
    }
    let (points, iowq_workers) = measure_batches(opts, size, batches, rate, runtime)?;
    let mut r = MicroResult::new("batch-latency", MIRRORS, COLUMNS);
    for (b, p) in &points {
        r.row(p.row(*b, rate));
    }
    notes(&mut r, opts, &points, rate, calibrated_iops, iowq_workers);
    r.plot = Some(plot(&points, rate));
    Ok(r)
}

/// The write IOPS an unpaced QD-32 random-write run reaches (which also creates and fills a
/// file).
fn calibrate(opts: &MicroOpts, size: u64, runtime: Duration) -> Result<f64> {
    let calibration = if opts.quick {
        runtime.min(Duration::from_millis(200))
    } else {
        (runtime / 2).clamp(Duration::from_millis(100), Duration::from_secs(1))
    };
    let report = rawio::run(&IoSpec {
        rw: RwMode::RandWrite,
        bs: BS,
        size,
        runtime: Some(calibration),
        progress: false,
        ..IoSpec::new(
            &opts.target,
            IoConfig {
                queue_depth: CALIBRATION_QD,
                // One enter per write, as batch 1 pays: the rate must suit every batch size.
                batching: Batching::Each,
                ..IoConfig::new(EngineKind::Uring)
            },
        )
    })?;
    Ok(report.iops)
}

/// Every batch size paced at `rate`, one after the other on one ring; returns the points and
/// the io-wq workers seen over all of them.
fn measure_batches(
    opts: &MicroOpts,
    size: u64,
    batches: &[u32],
    rate: f64,
    runtime: Duration,
) -> Result<(Vec<(u32, Point)>, usize)> {
    let mut writer = Writer::open(&opts.target, size)?;
    let mut rng = Rng::new(0xba7c_4e11);
    let mut iowq = IowqTracker::default();
    let warmup = (runtime / 10).min(Duration::from_millis(200));
    let mut points = Vec::new();
    for &b in batches {
        let p = writer.measure(b, rate, warmup, runtime, &mut rng)?;
        iowq.sample();
        if opts.progress {
            eprintln!(
                "batch-latency batch {b}: {:.0} IOPS, avg {:.1} us, stddev {:.1} us, p99 {:.1} us",
                p.achieved_iops, p.mean_us, p.std_us, p.p99_us
            );
        }
        points.push((b, p));
    }
    drop(writer);
    Ok((points, iowq.seen()))
}

/// Average latency and its standard deviation against batch size.
fn plot(points: &[(u32, Point)], rate: f64) -> Plot {
    let series = |label: &str, f: fn(&Point) -> f64| Series {
        label: label.into(),
        points: points.iter().map(|(b, p)| (*b as f64, f(p))).collect(),
    };
    Plot::new(
        format!("4 KiB O_DIRECT write latency vs batch size at {rate:.0} IOPS"),
        "writes per batch (one io_uring_enter)",
        "latency (us)",
        vec![
            series("average", |p| p.mean_us),
            series("standard deviation", |p| p.std_us),
        ],
    )
    .log_x()
}

fn notes(
    r: &mut MicroResult,
    opts: &MicroOpts,
    points: &[(u32, Point)],
    rate: f64,
    calibrated_iops: f64,
    iowq_workers: usize,
) {
    r.notes.push(format!(
        "target rate {rate:.0} IOPS = {:.0}% of the {calibrated_iops:.0} IOPS an unpaced QD-{CALIBRATION_QD} 4 KiB random-write run (one enter per write) reached on {} ({}); one thread, one ring of depth {RING_DEPTH}; the paper paces 8 workers at 1.5 MIOPS on one SSD",
        RATE_FRACTION * 100.0,
        opts.target.display(),
        describe_device(&opts.target),
    ));
    r.notes.extend(trend_note(points));
    r.notes.extend(batch_8_and_128_note(points));
    r.notes.extend(below_rate_note(points, rate));
    if iowq_workers > 0 {
        r.notes.push(format!(
            "{iowq_workers} io-wq worker(s) appeared: some writes were punted to the slow path (no NOWAIT on this device or filesystem), which adds to their latency"
        ));
    }
    r.notes.push(format!(
        "latency = completion seen - time the batch was due (the thread spins on the CQ while writes are in flight); {} CPU(s) here, shared with whatever else runs",
        available_cpus()
    ));
}

/// How latency and its spread grew from the smallest batch to the largest, against Table 2.
fn trend_note(points: &[(u32, Point)]) -> Option<String> {
    let ((b0, p0), (b1, p1)) = (points.first()?, points.last()?);
    let paper = |b: u32| PAPER_TABLE2.iter().find(|t| t.0 == b);
    let rising = points.windows(2).all(|w| w[1].1.mean_us >= w[0].1.mean_us);
    let mut s = format!(
        "average latency goes from {:.1} us at batch {b0} to {:.1} us at batch {b1} ({:.1}x), stddev from {:.1} to {:.1} us",
        p0.mean_us,
        p1.mean_us,
        p1.mean_us / p0.mean_us.max(1e-9),
        p0.std_us,
        p1.std_us,
    );
    if let (Some(a), Some(z)) = (paper(*b0), paper(*b1)) {
        s.push_str(&format!(
            "; the paper's Table 2 goes from {:.1} to {:.1} us ({:.1}x), stddev {:.2} to {:.2} us",
            a.1,
            z.1,
            z.1 / a.1,
            a.2,
            z.2
        ));
    }
    s.push_str(if rising {
        "; here the average rises with every step in batch size, as in Table 2"
    } else {
        "; here the average does not rise at every step (Table 2's does)"
    });
    Some(s)
}

/// Batches 8 and 128, the two the paper's text quotes.
fn batch_8_and_128_note(points: &[(u32, Point)]) -> Option<String> {
    let at = |b: u32| points.iter().find(|(x, _)| *x == b).map(|(_, p)| p);
    let (p8, p128) = (at(8)?, at(128)?);
    Some(format!(
        "batch 8: avg {:.1} us, p99 {:.1} us (paper: mostly below 25 us); batch 128: avg {:.1} us, max {:.1} us (paper: spikes up to 200 us); batch 128 makes {:.3} enters per write against {:.3} at batch 8",
        p8.mean_us, p8.p99_us, p128.mean_us, p128.max_us, p128.enters_per_write, p8.enters_per_write
    ))
}

/// The batch sizes that fell below 90% of the target rate, when any did.
fn below_rate_note(points: &[(u32, Point)], rate: f64) -> Option<String> {
    let short: Vec<String> = points
        .iter()
        .filter(|(_, p)| p.achieved_iops < 0.9 * rate)
        .map(|(b, p)| format!("batch {b} ({:.0} IOPS)", p.achieved_iops))
        .collect();
    (!short.is_empty()).then(|| format!(
        "below 90% of the target rate: {}; the device (or this CPU) could not keep up there, so those latencies include queueing behind late batches",
        short.join(", ")
    ))
}

/// What one batch size measured.
struct Point {
    achieved_iops: f64,
    mean_us: f64,
    std_us: f64,
    p99_us: f64,
    max_us: f64,
    enters_per_write: f64,
}

impl Point {
    /// The table row of batch size `batch`, paced at `rate`.
    fn row(&self, batch: u32, rate: f64) -> Vec<Value> {
        vec![
            json!(batch),
            json!(rate),
            json!(self.achieved_iops),
            json!(self.mean_us),
            json!(self.std_us),
            json!(self.p99_us),
            json!(self.max_us),
            json!(self.enters_per_write),
        ]
    }
}

/// Running mean and variance (Welford), in microseconds.
#[derive(Default)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Population standard deviation.
    fn std_dev(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / self.n as f64).max(0.0).sqrt()
        }
    }
}

/// The ring, its write buffers and the target. Field order matters: the engine is dropped (and
/// drained) before the buffers it may still read from, and both before the file.
struct Writer {
    engine: Box<dyn Engine>,
    pool: FixedBufferPool,
    _target: Target,
    blocks: u64,
}

/// Per-point bookkeeping of the writes in flight and of what was measured.
struct Tally {
    hz: f64,
    /// Batches due from this tick on are measured; earlier ones are warm-up.
    record_from: u64,
    due: Vec<u64>,
    offset: Vec<u64>,
    free: Vec<usize>,
    hist: LatencyHist,
    moments: Moments,
    recorded: u64,
    last_done: u64,
    last_progress: u64,
    /// Batches released from `record_from` on.
    batches_recorded: u64,
    /// The first of those: (due tick, enters before it).
    first_recorded: Option<(u64, u64)>,
}

impl Tally {
    /// The bookkeeping of a point that starts at tick `start`, its first `warmup` not
    /// measured, on a ring `depth` deep.
    fn new(hz: f64, start: u64, warmup: Duration, depth: usize) -> Tally {
        Tally {
            hz,
            record_from: start + (warmup.as_secs_f64() * hz) as u64,
            due: vec![0; depth],
            offset: vec![0; depth],
            free: (0..depth).rev().collect(),
            hist: LatencyHist::new(),
            moments: Moments::default(),
            recorded: 0,
            last_done: start,
            last_progress: start,
            batches_recorded: 0,
            first_recorded: None,
        }
    }

    /// What the point of `batch` measured, `interval` ticks between its batches, `enters`
    /// the ring's enters at its end.
    fn point(&self, batch: u32, interval: u64, enters: u64) -> Result<Point> {
        let (first_due, enters0) = self.first_recorded.unwrap_or((self.record_from, 0));
        if self.recorded == 0 {
            return Err(BenchError::NothingCompleted { batch });
        }
        // The schedule's span, or longer when the last write completed after it would have
        // been time for another batch (the device or this thread fell behind).
        let scheduled = self.batches_recorded * interval;
        let span =
            (self.last_done.saturating_sub(first_due).max(scheduled) as f64 / self.hz).max(1e-9);
        let s = self.hist.summary();
        Ok(Point {
            achieved_iops: self.recorded as f64 / span,
            mean_us: self.moments.mean,
            std_us: self.moments.std_dev(),
            p99_us: s.p99,
            max_us: s.max,
            enters_per_write: (enters - enters0) as f64 / self.recorded as f64,
        })
    }
}

/// When the batches of one point are due, in TSC ticks.
struct Schedule {
    hz: f64,
    /// Ticks from one batch to the next: `batch / rate` seconds.
    interval: u64,
    /// No batch is due from this tick on.
    stop_at: u64,
    /// Without a completion for this long, wait for one in the kernel.
    stall_ticks: u64,
}

impl Schedule {
    /// Batches of `batch` writes at `rate` writes per second, from the tally's start of
    /// recording on for `window` (and at least 3 batches).
    fn new(batch: u32, rate: f64, window: Duration, tally: &Tally) -> Schedule {
        let hz = tally.hz;
        let interval = ((batch as f64 / rate) * hz).max(1.0) as u64;
        let window_ticks = ((window.as_secs_f64() * hz) as u64).max(3 * interval);
        Schedule {
            hz,
            interval,
            stop_at: tally.record_from + window_ticks,
            stall_ticks: (STALL.as_secs_f64() * hz) as u64,
        }
    }

    /// Waits, with nothing in flight, toward the batch due at tick `due`: sleeps when it is
    /// far off (waking a little early), spins once otherwise.
    fn idle_toward(&self, due: u64, now: u64) {
        let wait = due - now;
        if wait > (SLEEP_ABOVE.as_secs_f64() * self.hz) as u64 {
            let d = Duration::from_secs_f64(wait as f64 / self.hz);
            std::thread::sleep(d.saturating_sub(SLEEP_MARGIN));
        } else {
            std::hint::spin_loop();
        }
    }
}

impl Writer {
    fn open(path: &Path, size: u64) -> Result<Writer> {
        let target = Target::open(
            path,
            TargetOptions {
                direct: true,
                write: true,
                create: false,
            },
        )?;
        target.check_aligned("block size", BS)?;
        let depth = RING_DEPTH as usize;
        let mut pool = FixedBufferPool::new(depth, BS as usize)?;
        for i in 0..depth {
            // Real data, not zeros (zram and some devices special-case zero pages).
            pattern::fill(pool.slice_mut(i), i as u64 * BS, 0x77);
        }
        let cfg = IoConfig {
            queue_depth: RING_DEPTH,
            ..IoConfig::new(EngineKind::Uring)
        };
        let engine = open_engine(&cfg, &[target.fd()], None)?;
        Ok(Writer {
            engine,
            pool,
            _target: target,
            blocks: size / BS,
        })
    }

    /// Releases a batch of `batch` writes every `batch / rate` seconds for `warmup` (not
    /// measured) and then at least `window` (and at least 3 batches), then drains.
    fn measure(
        &mut self,
        batch: u32,
        rate: f64,
        warmup: Duration,
        window: Duration,
        rng: &mut Rng,
    ) -> Result<Point> {
        let hz = tsc_hz();
        let depth = self.engine.depth();
        if batch as usize > depth {
            return Err(BenchError::BatchExceedsDepth { batch, depth });
        }
        let start = rdtsc();
        let mut t = Tally::new(hz, start, warmup, depth);
        let schedule = Schedule::new(batch, rate, window, &t);
        let mut comps: Vec<IoCompletion> = Vec::with_capacity(depth);
        let mut due = start;
        loop {
            let now = rdtsc();
            if due < schedule.stop_at {
                if now >= due {
                    self.release_batch(&mut t, &mut comps, batch as usize, due, rng)?;
                    due += schedule.interval;
                    continue;
                }
                if self.engine.in_flight() == 0 {
                    schedule.idle_toward(due, now);
                    continue;
                }
            } else if self.engine.in_flight() == 0 {
                break;
            }
            self.poll(&mut t, &mut comps, schedule.stall_ticks)?;
        }
        t.point(batch, schedule.interval, self.engine.stats().enters)
    }

    /// Hands the `batch` writes due at tick `due` to the kernel with one enter, once the ring
    /// has room for all of them (a full ring holds the batch back, and that counts).
    fn release_batch(
        &mut self,
        t: &mut Tally,
        comps: &mut Vec<IoCompletion>,
        batch: usize,
        due: u64,
        rng: &mut Rng,
    ) -> Result<()> {
        let depth = self.engine.depth();
        while depth - self.engine.in_flight() < batch {
            self.engine.submit(1)?;
            self.collect(t, comps)?;
        }
        if due >= t.record_from {
            t.batches_recorded += 1;
            if t.first_recorded.is_none() {
                t.first_recorded = Some((due, self.engine.stats().enters));
            }
        }
        for _ in 0..batch {
            let offset = rng.below(self.blocks) * BS;
            self.push_write(t, due, offset)?;
        }
        // One enter for the whole batch (retried only if the kernel took part).
        self.engine.submit(0)?;
        while self.engine.pending() > 0 {
            self.collect(t, comps)?;
            self.engine.submit(0)?;
        }
        t.last_progress = rdtsc();
        Ok(())
    }

    /// Pushes one write to `offset` of the batch due at tick `due`, from a free slot.
    fn push_write(&mut self, t: &mut Tally, due: u64, offset: u64) -> Result<()> {
        let slot = t.free.pop().ok_or(BenchError::Internal {
            what: "no free write slot (ring bookkeeping)",
        })?;
        t.due[slot] = due;
        t.offset[slot] = offset;
        let req = IoRequest::write(
            FileId(0),
            offset,
            self.pool.ptr(slot),
            BS as u32,
            slot as u64,
        );
        // SAFETY: the buffer belongs to `self.pool`, which outlives the engine (field order),
        // and writes only read it; the slot is not reused until its completion has been
        // reaped.
        unsafe { self.engine.push(&req)? };
        Ok(())
    }

    /// Reaps what has completed; when nothing has for `stall_ticks`, waits for one completion
    /// in the kernel instead of spinning on.
    fn poll(
        &mut self,
        t: &mut Tally,
        comps: &mut Vec<IoCompletion>,
        stall_ticks: u64,
    ) -> Result<()> {
        if self.collect(t, comps)? == 0 {
            if rdtsc().saturating_sub(t.last_progress) > stall_ticks {
                // Completions are not arriving by themselves: wait for one in the kernel.
                self.engine.submit(1)?;
                self.collect(t, comps)?;
            } else {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Reaps what has completed (without blocking) and records it; returns how many.
    fn collect(&mut self, t: &mut Tally, comps: &mut Vec<IoCompletion>) -> Result<usize> {
        comps.clear();
        let n = self.engine.reap(comps);
        if n == 0 {
            return Ok(0);
        }
        let now = rdtsc();
        t.last_progress = now;
        for c in comps.iter() {
            let slot = c.user_data as usize;
            if c.result < 0 {
                return Err(IoError::from_completion("write", t.offset[slot], c.result).into());
            }
            if c.result as u64 != BS {
                return Err(BenchError::ShortTransfer {
                    op: "write",
                    offset: t.offset[slot],
                    transferred_bytes: c.result as u64,
                    requested_bytes: BS,
                });
            }
            let due = t.due[slot];
            if due >= t.record_from {
                let ns = now.saturating_sub(due) as f64 * 1e9 / t.hz;
                t.hist.record_ns(ns as u64);
                t.moments.push(ns / 1000.0);
                t.recorded += 1;
                t.last_done = now;
            }
            t.free.push(slot);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::Moments;

    #[test]
    fn moments_match_the_two_pass_formula() {
        let xs = [3.0, 7.0, 7.0, 19.0, 24.5, 1.0];
        let mut m = Moments::default();
        for x in xs {
            m.push(x);
        }
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((m.mean - mean).abs() < 1e-9);
        assert!((m.std_dev() - var.sqrt()).abs() < 1e-9);
        assert_eq!(Moments::default().std_dev(), 0.0);
    }
}
