//! Runs YCSB-style operations against a ringdb [`Db`] with N concurrent tasks on its runtime
//! (the paper's fibers): a load phase and timed run phases, with per-second throughput,
//! latency percentiles and the engine's counters per operation.
//!
//! Keys are 8-byte big-endian integers (so key order is numeric order); values are derived
//! from (key, version) so a reader can tell which write it sees.

use crate::error::Result;
use ringdb::{Db, DbStats};
use ringdb_io::counters::{rdtsc, ticks_to_ns, tsc_hz, CpuTime, LatencyHist, LatencySummary};
use ringdb_io::iowq::IowqTracker;
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::ops::Bound;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// One operation of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read(u64),
    Update(u64),
    Insert(u64),
    /// Start key and number of records.
    Scan(u64, usize),
    ReadModifyWrite(u64),
}

pub fn key_bytes(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// The value written for `key` at `version`: `size` bytes, cheap to make and to check.
pub fn value_for(key: u64, version: u64, size: usize, out: &mut Vec<u8>) {
    out.clear();
    let mut x = key
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(version.wrapping_mul(0xD1B5_4A32_D192_ED03));
    while out.len() < size {
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let b = x.to_le_bytes();
        let n = (size - out.len()).min(8);
        out.extend_from_slice(&b[..n]);
    }
}

/// The `i`-th key of a load in scattered order: a bijection of `0..n` (multiplication by a
/// constant coprime to `n`), so a load inserts every key once, in an order that splits
/// leaves the way random inserts do.
pub fn scattered(i: u64, n: u64) -> u64 {
    debug_assert!(i < n);
    let mut p = 0x9E37_79B9_7F4A_7C15u64 % n.max(1);
    while gcd(p, n) != 1 {
        p += 1;
    }
    ((i as u128 * p as u128) % n as u128) as u64
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// What a phase measured.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    pub ops: u64,
    pub secs: f64,
    pub ops_per_s: f64,
    /// Operations completed in each whole second of the phase.
    pub per_second: Vec<u64>,
    pub lat_us: LatencySummary,
    /// Page reads (faults), page writes, eviction rounds and restarts per operation.
    pub reads_per_op: f64,
    pub writes_per_op: f64,
    pub restarts_per_op: f64,
    pub enters_per_op: f64,
    /// CPU time of the whole process (io-wq and SQPOLL threads included) per operation.
    pub cycles_per_op: f64,
    pub cpu_pct: f64,
    /// Operations that found their key missing (reads) — should be 0 after a full load.
    pub misses: u64,
    /// Most io-wq worker threads (`iou-wrk-*`) seen at once (sampled every second).
    pub iowq_workers: usize,
}

/// Options of a run phase.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub tasks: usize,
    pub duration: Duration,
    pub value_size: usize,
    /// Stop after this many operations (for tests), whatever the duration.
    pub max_ops: Option<u64>,
    pub progress: bool,
    pub label: String,
}

fn bar(len: u64, template: &str, label: &str, on: bool) -> Option<indicatif::ProgressBar> {
    if !on {
        return None;
    }
    let b = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::stderr_with_hz(5),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_message(label.to_string());
    Some(b)
}

/// Inserts keys `0..records` in scattered order with `tasks` tasks.
pub fn load(
    db: &mut Db,
    records: u64,
    value_size: usize,
    tasks: usize,
    progress: bool,
) -> Result<PhaseReport> {
    let next = Rc::new(Cell::new(0u64));
    let pb = bar(
        records,
        "{spinner} {msg} [{bar:30}] {pos}/{len} records ({per_sec}, eta {eta})",
        "load",
        progress,
    );
    let spec = RunSpec {
        tasks,
        duration: Duration::from_secs(u64::MAX / 4),
        value_size,
        max_ops: Some(records),
        progress: false,
        label: "load".into(),
    };
    let r = phase(db, &spec, pb.clone(), move |_| {
        let i = next.get();
        next.set(i + 1);
        (i < records).then(|| Op::Insert(scattered(i, records)))
    });
    if let Some(b) = pb {
        b.finish_and_clear();
    }
    r
}

/// Runs operations from `next_op` (given the task index) with `spec.tasks` tasks for
/// `spec.duration`.
pub fn run(
    db: &mut Db,
    spec: &RunSpec,
    next_op: impl FnMut(usize) -> Option<Op> + 'static,
) -> Result<PhaseReport> {
    let pb = bar(
        spec.duration.as_millis() as u64,
        "{spinner} {msg} [{bar:30}] {elapsed}/{duration}",
        &spec.label,
        spec.progress,
    );
    let r = phase(db, spec, pb.clone(), next_op);
    if let Some(b) = pb {
        b.finish_and_clear();
    }
    r
}

struct Shared {
    ops: Cell<u64>,
    misses: Cell<u64>,
    per_second: RefCell<Vec<u64>>,
    hist: RefCell<LatencyHist>,
    first_error: RefCell<Option<ringdb::DbError>>,
    stop: Cell<bool>,
    iowq: RefCell<IowqTracker>,
}

fn phase(
    db: &mut Db,
    spec: &RunSpec,
    pb: Option<indicatif::ProgressBar>,
    next_op: impl FnMut(usize) -> Option<Op> + 'static,
) -> Result<PhaseReport> {
    let before: DbStats = db.stats();
    let cpu0 = CpuTime::now();
    let start = Instant::now();
    let shared = Rc::new(Shared {
        ops: Cell::new(0),
        misses: Cell::new(0),
        per_second: RefCell::new(Vec::new()),
        hist: RefCell::new(LatencyHist::new()),
        first_error: RefCell::new(None),
        stop: Cell::new(false),
        iowq: RefCell::new(IowqTracker::default()),
    });
    let next_op = Rc::new(RefCell::new(next_op));
    let handles: Vec<_> = (0..spec.tasks.max(1))
        .map(|t| {
            let h = db.handle();
            let sh = shared.clone();
            let next_op = next_op.clone();
            let (value_size, duration, max_ops) = (spec.value_size, spec.duration, spec.max_ops);
            let pb = pb.clone();
            db.runtime().spawn(async move {
                let mut value = Vec::with_capacity(value_size);
                let mut version = t as u64;
                while !sh.stop.get() {
                    let Some(op) = (next_op.borrow_mut())(t) else {
                        break;
                    };
                    let t0 = rdtsc();
                    version += 1 << 20;
                    let r = exec(&h, op, version, value_size, &mut value).await;
                    match r {
                        Ok(found) => {
                            if !found {
                                sh.misses.set(sh.misses.get() + 1);
                            }
                        }
                        Err(e) => {
                            sh.first_error.borrow_mut().get_or_insert(e);
                            sh.stop.set(true);
                            break;
                        }
                    }
                    sh.hist
                        .borrow_mut()
                        .record_ns(ticks_to_ns(rdtsc().saturating_sub(t0)));
                    let n = sh.ops.get() + 1;
                    sh.ops.set(n);
                    let elapsed = start.elapsed();
                    let sec = elapsed.as_secs() as usize;
                    {
                        let mut ps = sh.per_second.borrow_mut();
                        if ps.len() <= sec {
                            ps.resize(sec + 1, 0);
                            // Once per second: which io-wq workers exist now.
                            sh.iowq.borrow_mut().sample();
                        }
                        ps[sec] += 1;
                    }
                    if let Some(b) = &pb {
                        if max_ops.is_some() {
                            b.set_position(n);
                        } else if n.is_multiple_of(256) {
                            b.set_position(elapsed.as_millis() as u64);
                        }
                    }
                    if elapsed >= duration || max_ops.is_some_and(|m| n >= m) {
                        sh.stop.set(true);
                    }
                }
            })
        })
        .collect();
    db.runtime().block_on(async move {
        for h in handles {
            h.await;
        }
    })?;
    shared.iowq.borrow_mut().sample();
    let iowq_workers = shared.iowq.borrow().seen();
    let secs = start.elapsed().as_secs_f64();
    let cpu = CpuTime::now().since(cpu0).total().as_secs_f64();
    if let Some(e) = shared.first_error.borrow_mut().take() {
        return Err(e.into());
    }
    let after = db.stats();
    let ops = shared.ops.get();
    let per = |x: u64| if ops == 0 { 0.0 } else { x as f64 / ops as f64 };
    let mut per_second = shared.per_second.borrow().clone();
    // The last second is partial: keep whole seconds only.
    if secs.fract() > 0.0 && per_second.len() > secs as usize {
        per_second.truncate(secs as usize);
    }
    let lat_us = shared.hist.borrow().summary();
    Ok(PhaseReport {
        ops,
        secs,
        ops_per_s: ops as f64 / secs.max(1e-9),
        per_second,
        lat_us,
        reads_per_op: per(after.pool.reads - before.pool.reads),
        writes_per_op: per(after.pool.writes - before.pool.writes),
        restarts_per_op: per(after.tree.restarts - before.tree.restarts),
        enters_per_op: per(after.runtime.engine.enters - before.runtime.engine.enters),
        cycles_per_op: if ops == 0 {
            0.0
        } else {
            cpu * tsc_hz() / ops as f64
        },
        cpu_pct: 100.0 * cpu / secs.max(1e-9),
        misses: shared.misses.get(),
        iowq_workers,
    })
}

/// Executes one operation; `Ok(false)` when a read found nothing.
async fn exec(
    h: &ringdb::DbHandle,
    op: Op,
    version: u64,
    value_size: usize,
    value: &mut Vec<u8>,
) -> ringdb::Result<bool> {
    match op {
        Op::Read(k) => Ok(h.get(&key_bytes(k)).await?.is_some()),
        Op::Update(k) | Op::Insert(k) => {
            value_for(k, version, value_size, value);
            h.insert(&key_bytes(k), value).await?;
            Ok(true)
        }
        Op::ReadModifyWrite(k) => {
            let found = h.get(&key_bytes(k)).await?.is_some();
            value_for(k, version, value_size, value);
            h.insert(&key_bytes(k), value).await?;
            Ok(found)
        }
        Op::Scan(k, n) => {
            let start = key_bytes(k);
            let r = h
                .range(Bound::Included(&start), Bound::Unbounded, n)
                .await?;
            Ok(!r.is_empty())
        }
    }
}
