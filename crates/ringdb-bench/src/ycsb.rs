//! Runs YCSB-style operations against a ringdb [`LocalDb`] with N concurrent tasks on its runtime
//! (the paper's fibers): a load phase and timed run phases, with per-second throughput,
//! latency percentiles and the engine's counters per operation.
//!
//! Keys are 8-byte big-endian integers (so key order is numeric order); values are derived
//! from (key, version) so a reader can tell which write it sees.

use crate::error::{BenchError, BenchSetting, Result};
use ringdb::{DbStats, LocalDb};
use ringdb_lab::counters::{rdtsc, ticks_to_ns, tsc_hz, CpuTime, LatencyHist, LatencySummary};
use ringdb_lab::cpu_stat::{self, CpuStat};
use ringdb_lab::iowq::IowqTracker;
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
    /// The whole process's CPU time per operation in each whole second of `per_second`, in
    /// TSC cycles (`null` for a second no operation began). A VM's host can change how much
    /// every operation costs for seconds at a time; this shows when it did within a run.
    pub cycles_per_op_per_second: Vec<Option<f64>>,
    /// Operations finished on each CPU (index = CPU number), sampled every
    /// [`CPU_SAMPLE_OPS`]th operation: where the scheduler ran an unpinned thread, which
    /// decides what its I/O cost where the device's completions interrupt one CPU.
    pub ops_per_cpu: Vec<u64>,
    pub lat_us: LatencySummary,
    /// Page reads (faults), page writes, eviction rounds and restarts per operation.
    pub reads_per_op: f64,
    pub writes_per_op: f64,
    pub restarts_per_op: f64,
    /// Restarts that resumed at the page their wait brought in instead of at the root.
    pub resumes_per_op: f64,
    pub enters_per_op: f64,
    /// CPU time of the whole process (io-wq and SQPOLL threads included) per operation.
    pub cycles_per_op: f64,
    pub cpu_pct: f64,
    /// Operations that found their key missing (reads) — should be 0 after a full load.
    pub misses: u64,
    /// Most io-wq worker threads (`iou-wrk-*`) seen at once (sampled every second).
    pub iowq_workers: usize,
    /// TSC cycles the verification of a page read took, on average, where the pool timed
    /// it (`BufferManager::time_verification`); the cost model prices reads with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification_cycles_per_read: Option<f64>,
    /// The interrupt handling the kernel charged to the process, in TSC cycles per operation:
    /// hard and soft interrupt time on the CPUs its thread ran on, its share of each
    /// ([`ringdb_lab::cpu_stat`]). Only where the kernel charges interrupts to the task they
    /// interrupt (no `CONFIG_IRQ_TIME_ACCOUNTING`) and `/proc/stat` can be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupt_cycles_per_op: Option<f64>,
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

pub(crate) fn bar(
    len: u64,
    template: &str,
    label: &str,
    on: bool,
) -> Option<indicatif::ProgressBar> {
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
    db: &mut LocalDb,
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
    db: &mut LocalDb,
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

/// What the tasks of a phase share: the counters they add to, and the stop flag.
struct Shared {
    ops: Cell<u64>,
    misses: Cell<u64>,
    per_second: RefCell<Vec<u64>>,
    /// Operations finished on each CPU, sampled ([`CPU_SAMPLE_OPS`]).
    ops_per_cpu: RefCell<Vec<u64>>,
    /// The process's CPU time when the first operation of each second finished.
    cpu_at_second: RefCell<Vec<Option<Duration>>>,
    hist: RefCell<LatencyHist>,
    first_error: RefCell<Option<ringdb::DbError>>,
    stop: Cell<bool>,
    iowq: RefCell<IowqTracker>,
    /// The time-stamp counter when the phase began.
    start_tsc: u64,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            start_tsc: rdtsc(),
            ops: Cell::new(0),
            misses: Cell::new(0),
            per_second: RefCell::new(Vec::new()),
            cpu_at_second: RefCell::new(Vec::new()),
            ops_per_cpu: RefCell::new(Vec::new()),
            hist: RefCell::new(LatencyHist::new()),
            first_error: RefCell::new(None),
            stop: Cell::new(false),
            iowq: RefCell::new(IowqTracker::default()),
        }
    }

    /// Counts one finished operation that took `ns`, in the second of the phase (begun at
    /// `start`) it finished in; the first operation of each second also samples the io-wq
    /// workers. Returns the operations so far and the time since `start`.
    fn record_op(&self, ns: u64, now_tsc: u64) -> (u64, Duration) {
        self.hist.borrow_mut().record_ns(ns);
        let n = self.ops.get() + 1;
        self.ops.set(n);
        // From the time-stamp counter the latency was read with, not a clock call per
        // operation (a vDSO clock_gettime per read showed in the profile of an in-memory read:
        // docs/results/issue15-cpu-per-op.md).
        let elapsed = Duration::from_nanos(ticks_to_ns(now_tsc.saturating_sub(self.start_tsc)));
        let sec = elapsed.as_secs() as usize;
        let mut per_second = self.per_second.borrow_mut();
        if per_second.len() <= sec {
            per_second.resize(sec + 1, 0);
            // Once per second: the CPU time so far (one getrusage) and which io-wq workers
            // exist now.
            let mut cpu_at_second = self.cpu_at_second.borrow_mut();
            cpu_at_second.resize(sec + 1, None);
            cpu_at_second[sec] = Some(CpuTime::now().total());
            self.iowq.borrow_mut().sample();
        }
        per_second[sec] += 1;
        if n.is_multiple_of(CPU_SAMPLE_OPS) {
            self.sample_cpu();
        }
        (n, elapsed)
    }

    /// Counts the last [`CPU_SAMPLE_OPS`] operations as finished on the CPU the thread is on.
    fn sample_cpu(&self) {
        let Some(cpu) = ringdb_io::affinity::current_cpu() else {
            return;
        };
        let cpu = (cpu as usize).min(MAX_SAMPLED_CPUS - 1);
        let mut ops_per_cpu = self.ops_per_cpu.borrow_mut();
        if ops_per_cpu.len() <= cpu {
            ops_per_cpu.resize(cpu + 1, 0);
        }
        ops_per_cpu[cpu] += CPU_SAMPLE_OPS;
    }

    /// Keeps the phase's first error and stops every task.
    fn fail(&self, e: ringdb::DbError) {
        self.first_error.borrow_mut().get_or_insert(e);
        self.stop.set(true);
    }
}

/// Every this many operations, the CPU the phase's thread is on is sampled
/// ([`PhaseReport::ops_per_cpu`]).
pub const CPU_SAMPLE_OPS: u64 = 8;
/// CPUs `ops_per_cpu` tells apart (higher numbers count as the last).
const MAX_SAMPLED_CPUS: usize = 4096;

/// When a phase's tasks stop, and what they write.
#[derive(Clone, Copy)]
struct TaskLimits {
    value_size: usize,
    duration: Duration,
    max_ops: Option<u64>,
}

fn phase(
    db: &mut LocalDb,
    spec: &RunSpec,
    pb: Option<indicatif::ProgressBar>,
    next_op: impl FnMut(usize) -> Option<Op> + 'static,
) -> Result<PhaseReport> {
    let before: DbStats = db.stats();
    let stat0 = CpuStat::now();
    let cpu0 = CpuTime::now();
    let start = Instant::now();
    let shared = Rc::new(Shared::new());
    let next_op = Rc::new(RefCell::new(next_op));
    let limits = TaskLimits {
        value_size: spec.value_size,
        duration: spec.duration,
        max_ops: spec.max_ops,
    };
    let handles: Vec<_> = (0..spec.tasks.max(1))
        .map(|t| {
            let task = run_task(
                db.handle(),
                t,
                shared.clone(),
                next_op.clone(),
                limits,
                pb.clone(),
            );
            db.runtime().spawn(task)
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
    let cpu_stat = CpuStat::now()
        .zip(stat0)
        .map(|(now, then)| now.since(&then));
    if let Some(e) = shared.first_error.borrow_mut().take() {
        return Err(e.into());
    }
    let after = db.stats();
    let mut report = summarise(&shared, &before, &after, secs, cpu, iowq_workers);
    report.interrupt_cycles_per_op = cpu_stat
        .filter(|_| cpu_stat::interrupts_charged_to_tasks() == Some(true))
        .and_then(|delta| interrupt_cycles_per_op(&delta, cpu, &report));
    Ok(report)
}

/// The interrupt handling charged to a phase that used `cpu_secs` of CPU time over `delta`,
/// per operation, in TSC cycles ([`PhaseReport::interrupt_cycles_per_op`]).
fn interrupt_cycles_per_op(delta: &CpuStat, cpu_secs: f64, report: &PhaseReport) -> Option<f64> {
    if report.ops == 0 {
        return None;
    }
    let hz = cpu_stat::ticks_per_sec();
    let secs = cpu_stat::interrupt_secs_charged(delta, hz, cpu_secs, &report.ops_per_cpu)?;
    Some(secs * tsc_hz() / report.ops as f64)
}

/// One task of a phase: runs operations from `next_op` until it has none, the phase's time or
/// operations are up, or a task failed.
async fn run_task<F: FnMut(usize) -> Option<Op>>(
    h: ringdb::DbHandle,
    t: usize,
    sh: Rc<Shared>,
    next_op: Rc<RefCell<F>>,
    limits: TaskLimits,
    pb: Option<indicatif::ProgressBar>,
) {
    let mut value = Vec::with_capacity(limits.value_size);
    let mut version = t as u64;
    while !sh.stop.get() {
        let Some(op) = (next_op.borrow_mut())(t) else {
            break;
        };
        let t0 = rdtsc();

        version += 1 << 20;
        match exec(&h, op, version, limits.value_size, &mut value).await {
            Ok(found) => {
                if !found {
                    sh.misses.set(sh.misses.get() + 1);
                }
            }
            Err(e) => {
                sh.fail(e);
                break;
            }
        }
        let t1 = rdtsc();
        let (n, elapsed) = sh.record_op(ticks_to_ns(t1.saturating_sub(t0)), t1);
        if let Some(b) = &pb {
            if limits.max_ops.is_some() {
                b.set_position(n);
            } else if n.is_multiple_of(256) {
                b.set_position(elapsed.as_millis() as u64);
            }
        }
        if elapsed >= limits.duration || limits.max_ops.is_some_and(|m| n >= m) {
            sh.stop.set(true);
        }
        // A transaction boundary: let the others run. An operation that finds all its pages
        // resident never parks, and a task that never parks would keep the thread (and the
        // completions other tasks wait for) to itself.
        ringdb_io::yield_now().await;
    }
}

/// The phase's report from what its tasks counted and the database's counters `before` and
/// `after` it.
fn summarise(
    shared: &Shared,
    before: &DbStats,
    after: &DbStats,
    secs: f64,
    cpu: f64,
    iowq_workers: usize,
) -> PhaseReport {
    let ops = shared.ops.get();
    let per = |x: u64| if ops == 0 { 0.0 } else { x as f64 / ops as f64 };
    let mut per_second = shared.per_second.borrow().clone();
    // The last second is partial: keep whole seconds only.
    if secs.fract() > 0.0 && per_second.len() > secs as usize {
        per_second.truncate(secs as usize);
    }
    let cycles_per_op_per_second =
        cycles_per_op_each_second(&per_second, &shared.cpu_at_second.borrow());
    PhaseReport {
        ops,
        secs,
        ops_per_s: ops as f64 / secs.max(1e-9),
        per_second,
        cycles_per_op_per_second,
        ops_per_cpu: shared.ops_per_cpu.borrow().clone(),
        lat_us: shared.hist.borrow().summary(),
        reads_per_op: per(after.pool.reads - before.pool.reads),
        writes_per_op: per(after.pool.writes - before.pool.writes),
        restarts_per_op: per(after.tree.restarts - before.tree.restarts),
        resumes_per_op: per(after.tree.resumes - before.tree.resumes),
        enters_per_op: per(after.runtime.engine.enters - before.runtime.engine.enters),
        cycles_per_op: if ops == 0 {
            0.0
        } else {
            cpu * tsc_hz() / ops as f64
        },
        cpu_pct: 100.0 * cpu / secs.max(1e-9),
        misses: shared.misses.get(),
        iowq_workers,
        verification_cycles_per_read: verification_cycles_per_read(before, after),
        interrupt_cycles_per_op: None,
    }
}

/// Cycles per operation in each second of `per_second`: the CPU time between the first
/// operations of that second and of the next (`cpu_at_second`), over the second's operations;
/// `None` where a second had no operation or its end was not sampled.
fn cycles_per_op_each_second(
    per_second: &[u64],
    cpu_at_second: &[Option<Duration>],
) -> Vec<Option<f64>> {
    let hz = tsc_hz();
    per_second
        .iter()
        .enumerate()
        .map(|(sec, &ops)| {
            let from = (*cpu_at_second.get(sec)?)?;
            let to = (*cpu_at_second.get(sec + 1)?)?;
            (ops > 0).then(|| to.saturating_sub(from).as_secs_f64() * hz / ops as f64)
        })
        .collect()
}

/// The mean cycles of the verifications the pool timed between `before` and `after`.
fn verification_cycles_per_read(before: &DbStats, after: &DbStats) -> Option<f64> {
    let timed = after.pool.verifications_timed - before.pool.verifications_timed;
    let cycles = after.pool.verification_cycles - before.pool.verification_cycles;
    (timed > 0).then(|| cycles as f64 / timed as f64)
}

/// Executes one operation; `Ok(false)` when a read found nothing.
pub(crate) async fn exec(
    h: &ringdb::DbHandle,
    op: Op,
    version: u64,
    value_size: usize,
    value: &mut Vec<u8>,
) -> ringdb::Result<bool> {
    match op {
        Op::Read(k) => Ok(h.get_into(&key_bytes(k), value).await?),
        Op::Update(k) | Op::Insert(k) => {
            value_for(k, version, value_size, value);
            h.insert(&key_bytes(k), value).await?;
            Ok(true)
        }
        Op::ReadModifyWrite(k) => {
            let found = h.get_into(&key_bytes(k), value).await?;
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

/// The YCSB core workloads (and the paper's update-only mix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Workload {
    /// 50% read, 50% update.
    A,
    /// 95% read, 5% update.
    B,
    /// 100% read.
    C,
    /// 95% read, 5% insert; reads favour the latest inserts.
    D,
    /// 95% short scans (1..=100 records), 5% insert.
    E,
    /// 50% read, 50% read-modify-write.
    F,
    /// 100% update (the paper's Fig. 5 workload).
    UpdateOnly,
}

impl std::str::FromStr for Workload {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Workload> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "a" => Workload::A,
            "b" => Workload::B,
            "c" => Workload::C,
            "d" => Workload::D,
            "e" => Workload::E,
            "f" => Workload::F,
            "update-only" | "u" => Workload::UpdateOnly,
            _ => {
                return Err(BenchError::Unknown {
                    setting: BenchSetting::Workload,
                    value: s.to_string(),
                    one_of: &["a", "b", "c", "d", "e", "f", "update-only"],
                })
            }
        })
    }
}

/// How keys are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Distribution {
    Uniform,
    /// Scrambled zipfian, theta 0.99 (YCSB's default): hot keys spread over the key space.
    Zipfian,
}

impl std::str::FromStr for Distribution {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Distribution> {
        match s.to_ascii_lowercase().as_str() {
            "uniform" => Ok(Distribution::Uniform),
            "zipfian" | "zipf" => Ok(Distribution::Zipfian),
            _ => Err(BenchError::Unknown {
                setting: BenchSetting::Distribution,
                value: s.to_string(),
                one_of: &["uniform", "zipfian"],
            }),
        }
    }
}

/// YCSB's zipfian generator over ranks `0..n` (Gray et al., "Quickly generating
/// billion-record synthetic databases"), with zeta(n) computed once.
#[derive(Clone, Debug)]
pub struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    pub const THETA: f64 = 0.99;

    pub fn new(n: u64, theta: f64) -> Zipfian {
        assert!(n >= 1 && theta > 0.0 && theta < 1.0);
        let zeta = |m: u64| (1..=m).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(n);
        let zeta2 = zeta(2.min(n));
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
        }
    }

    /// A rank in `0..n`, rank 0 the most popular; `u` uniform in [0, 1).
    pub fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// FNV-1a of the 8 bytes of `x`: spreads zipfian ranks over the key space.
fn fnv64(x: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in x.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Draws the operations of a workload over `records` loaded keys (inserts add new keys).
pub struct OpGenerator {
    workload: Workload,
    dist: Distribution,
    records: u64,
    zipf: Option<Zipfian>,
    /// Next key an insert creates.
    next_insert: Rc<Cell<u64>>,
    /// Inserts that may still be in flight: reads stay below them (YCSB's acknowledged
    /// counter, approximated by the number of concurrent tasks).
    lag: u64,
    rng: rand::rngs::SmallRng,
}

impl OpGenerator {
    pub fn new(workload: Workload, dist: Distribution, records: u64, seed: u64) -> Self {
        use rand::SeedableRng;
        let zipfian = dist == Distribution::Zipfian || workload == Workload::D;
        OpGenerator {
            workload,
            dist,
            records,
            // Sized above the loaded keys so inserts stay within the generator's range.
            zipf: zipfian.then(|| Zipfian::new(records.max(2), Zipfian::THETA)),
            next_insert: Rc::new(Cell::new(records)),
            lag: 0,
            rng: rand::rngs::SmallRng::seed_from_u64(seed),
        }
    }

    /// Reads choose among keys whose insert finished for sure: all but the newest
    /// `tasks` (one insert in flight per task at most).
    pub fn with_tasks(mut self, tasks: usize) -> Self {
        self.lag = tasks as u64;
        self
    }

    fn existing_key(&mut self) -> u64 {
        use rand::RngExt;
        let n = self
            .next_insert
            .get()
            .saturating_sub(self.lag)
            .max(self.records)
            .max(1);
        if self.workload == Workload::D {
            // Latest: rank 0 is the newest insert.
            let u: f64 = self.rng.random();
            let r = self.zipf.as_ref().expect("D uses a zipfian").rank(u) % n;
            return n - 1 - r;
        }
        match (&self.zipf, self.dist) {
            (Some(z), Distribution::Zipfian) => {
                let u: f64 = self.rng.random();
                fnv64(z.rank(u)) % n
            }
            _ => self.rng.random_range(0..n),
        }
    }

    fn new_key(&mut self) -> u64 {
        let k = self.next_insert.get();
        self.next_insert.set(k + 1);
        k
    }

    pub fn next_op(&mut self) -> Op {
        use rand::RngExt;
        let p: f64 = self.rng.random();
        match self.workload {
            Workload::A if p < 0.5 => Op::Read(self.existing_key()),
            Workload::A => Op::Update(self.existing_key()),
            Workload::B if p < 0.95 => Op::Read(self.existing_key()),
            Workload::B => Op::Update(self.existing_key()),
            Workload::C => Op::Read(self.existing_key()),
            Workload::D if p < 0.95 => Op::Read(self.existing_key()),
            Workload::D => Op::Insert(self.new_key()),
            Workload::E if p < 0.95 => {
                let len = self.rng.random_range(1..=100usize);
                Op::Scan(self.existing_key(), len)
            }
            Workload::E => Op::Insert(self.new_key()),
            Workload::F if p < 0.5 => Op::Read(self.existing_key()),
            Workload::F => Op::ReadModifyWrite(self.existing_key()),
            Workload::UpdateOnly => Op::Update(self.existing_key()),
        }
    }

    /// The keys loaded before the run.
    pub fn records(&self) -> u64 {
        self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(w: Workload, n: usize) -> std::collections::HashMap<&'static str, usize> {
        let mut g = OpGenerator::new(w, Distribution::Zipfian, 10_000, 1);
        let mut m = std::collections::HashMap::new();
        for _ in 0..n {
            let k = match g.next_op() {
                Op::Read(k) => {
                    assert!(k < 20_000);
                    "read"
                }
                Op::Update(k) => {
                    assert!(k < 10_000);
                    "update"
                }
                Op::Insert(k) => {
                    assert!(k >= 10_000);
                    "insert"
                }
                Op::Scan(_, len) => {
                    assert!((1..=100).contains(&len));
                    "scan"
                }
                Op::ReadModifyWrite(_) => "rmw",
            };
            *m.entry(k).or_default() += 1;
        }
        m
    }

    #[test]
    fn each_seconds_cycles_come_from_the_cpu_time_between_its_samples() {
        let hz = tsc_hz();
        let s = Duration::from_secs;
        let cpu = [Some(s(0)), Some(s(1)), None, Some(s(3)), Some(s(5))];
        let per_op = cycles_per_op_each_second(&[1000, 2000, 0, 500], &cpu);
        assert_eq!(per_op.len(), 4);
        let close = |got: Option<f64>, want: f64| (got.unwrap() - want).abs() < 1e-6 * want;
        assert!(close(per_op[0], hz / 1000.0));
        // The second after it has no sample (no operation finished in it): unknown.
        assert_eq!(per_op[1], None);
        assert_eq!(per_op[2], None);
        assert!(close(per_op[3], 2.0 * hz / 500.0));
        // The last second's end was never sampled.
        assert_eq!(cycles_per_op_each_second(&[10], &[Some(s(0))]), vec![None]);
    }

    #[test]
    fn mixes_match_the_workload_definitions() {
        let n = 100_000;
        let share = |m: &std::collections::HashMap<&str, usize>, k| {
            *m.get(k).unwrap_or(&0) as f64 / n as f64
        };
        let a = mix(Workload::A, n);
        assert!((share(&a, "read") - 0.5).abs() < 0.01);
        let b = mix(Workload::B, n);
        assert!((share(&b, "update") - 0.05).abs() < 0.005);
        assert_eq!(share(&mix(Workload::C, n), "read"), 1.0);
        let d = mix(Workload::D, n);
        assert!((share(&d, "insert") - 0.05).abs() < 0.005);
        let e = mix(Workload::E, n);
        assert!((share(&e, "scan") - 0.95).abs() < 0.005);
        let f = mix(Workload::F, n);
        assert!((share(&f, "rmw") - 0.5).abs() < 0.01);
        assert_eq!(share(&mix(Workload::UpdateOnly, n), "update"), 1.0);
    }

    #[test]
    fn zipfian_is_skewed_and_uniform_is_not() {
        let count = |dist| {
            let mut g = OpGenerator::new(Workload::C, dist, 100_000, 7);
            let mut hits = std::collections::HashMap::<u64, u32>::new();
            for _ in 0..200_000 {
                if let Op::Read(k) = g.next_op() {
                    assert!(k < 100_000);
                    *hits.entry(k).or_default() += 1;
                }
            }
            let mut v: Vec<u32> = hits.into_values().collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            // Share of the accesses that go to the hottest 1% of keys.
            v.iter().take(1000).map(|&x| x as f64).sum::<f64>() / 200_000.0
        };
        let z = count(Distribution::Zipfian);
        let u = count(Distribution::Uniform);
        assert!(z > 0.3, "zipfian: top 1% of keys get {z}");
        assert!(u < 0.05, "uniform: top 1% of keys get {u}");
    }

    #[test]
    fn the_generator_is_deterministic_by_seed() {
        let ops = |seed| {
            let mut g = OpGenerator::new(Workload::A, Distribution::Zipfian, 1000, seed);
            (0..100).map(|_| g.next_op()).collect::<Vec<_>>()
        };
        assert_eq!(ops(3), ops(3));
        assert_ne!(ops(3), ops(4));
    }

    #[test]
    fn latest_favours_recent_inserts() {
        let mut g = OpGenerator::new(Workload::D, Distribution::Zipfian, 10_000, 5);
        let recent = (0..10_000)
            .filter_map(|_| match g.next_op() {
                Op::Read(k) => Some(k),
                _ => None,
            })
            .filter(|&k| k >= 9_000)
            .count();
        assert!(
            recent > 5_000,
            "{recent} of ~9500 reads among the newest 10%"
        );
    }

    #[test]
    fn scattered_load_order_is_a_permutation() {
        for n in [1u64, 2, 10, 97, 1000, 4096] {
            let mut seen: Vec<u64> = (0..n).map(|i| scattered(i, n)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
    }
}
