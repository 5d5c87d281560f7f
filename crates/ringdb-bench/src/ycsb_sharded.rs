//! YCSB on a sharded, thread-per-core [`Db`]: either tasks on the shards (each shard runs its
//! own tasks on its own keys: zero hops, the paper's guideline 2), or user threads calling the
//! blocking API (`clients`), optionally reading in `multi_get` batches.
//!
//! Tasks on a shard draw operations like the single-shard benchmark and keep those whose key
//! the shard owns (a draw is redrawn up to [`OWNED_DRAWS_MAX`] times; the rare operation still
//! owned elsewhere crosses to its shard through the async API), so each shard sees the
//! workload's distribution restricted to its keys. The report gives total and per-shard
//! throughput, latency percentiles, and the whole process's CPU time per operation (shard
//! threads, client threads and io-wq workers included).

use crate::error::{BenchError, Result};
use crate::ycsb::{self, key_bytes, scattered, Distribution, Op, OpGenerator, Workload};
use ringdb::{Db, Shard};
use ringdb_lab::counters::{rdtsc, ticks_to_ns, tsc_hz, CpuTime, LatencyHist, LatencySummary};
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Draws a task makes for an operation on a key its shard owns before it takes one owned
/// elsewhere.
pub const OWNED_DRAWS_MAX: usize = 64;

/// A sharded run's settings.
#[derive(Clone, Copy, Debug)]
pub struct ShardedSpec {
    /// The workload.
    pub workload: Workload,
    /// How keys are drawn.
    pub distribution: Distribution,
    /// Records loaded.
    pub records: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Tasks per shard (clients = 0).
    pub tasks_per_shard: usize,
    /// User threads calling the blocking API (0: tasks on the shards).
    pub clients: usize,
    /// Keys per `multi_get` for the clients' reads (1: one `get` each).
    pub batch: usize,
    /// Whether the client threads run `SCHED_BATCH` ([`ringdb::set_caller_thread_batch`]).
    pub batch_clients: bool,
    /// How long the run lasts.
    pub duration: Duration,
    /// Seed of the generators.
    pub seed: u64,
}

/// What a sharded phase measured.
#[derive(Clone, Debug, Serialize)]
pub struct ShardedReport {
    /// Shards.
    pub shards: usize,
    /// User threads (0: tasks on the shards).
    pub clients: usize,
    /// Operations completed.
    pub ops: u64,
    /// Wall time in seconds.
    pub secs: f64,
    /// Operations per second, all shards.
    pub ops_per_s: f64,
    /// Per shard: operations per second with tasks on the shards; with clients, requests
    /// served per second (one request is one call's part on that shard: a `multi_get` of 16
    /// keys over two shards is one request on each).
    pub per_shard_ops_per_s: Vec<f64>,
    /// Latency of one operation (clients: of one call, a whole `multi_get` batch included).
    pub lat_us: LatencySummary,
    /// CPU time of the whole process per operation, in TSC cycles.
    pub cycles_per_op: f64,
    /// CPU time of the whole process over wall time, in percent (200 = two CPUs busy).
    pub cpu_pct: f64,
    /// Page reads per operation, all shards.
    pub reads_per_op: f64,
    /// Page writes per operation, all shards.
    pub writes_per_op: f64,
    /// Operations that took a hop to another shard (tasks on the shards only).
    pub hops: u64,
    /// Reads that found nothing.
    pub misses: u64,
}

/// What one shard's (or client's) loop counted.
struct Counted {
    ops: u64,
    hops: u64,
    misses: u64,
    hist: LatencyHist,
}

impl Counted {
    fn new() -> Counted {
        Counted {
            ops: 0,
            hops: 0,
            misses: 0,
            hist: LatencyHist::new(),
        }
    }

    /// Counts one operation that took `ns`.
    fn record(&mut self, owned: bool, found: bool, ns: u64) {
        self.hops += u64::from(!owned);
        self.misses += u64::from(!found);
        self.hist.record_ns(ns);
        self.ops += 1;
    }

    fn add(&mut self, other: &Counted) {
        self.ops += other.ops;
        self.hops += other.hops;
        self.misses += other.misses;
        self.hist.merge(&other.hist);
    }
}

/// Loads keys `0..records` (scattered order), each shard inserting its own with `tasks`
/// tasks; a progress bar on stderr when `progress`.
pub fn load(
    db: &Db,
    records: u64,
    value_size: usize,
    tasks: usize,
    progress: bool,
) -> Result<ShardedReport> {
    let inserted = Arc::new(AtomicU64::new(0));
    let shared = inserted.clone();
    let measure = Measure::start(db)?;
    let template = "{spinner} {msg} [{bar:30}] {pos}/{len} records ({per_sec}, eta {eta})";
    let bar = ProgressBar::start(records, template, "load", progress, move || {
        inserted.load(Ordering::Relaxed)
    });
    let counted = db.run_on_each(move |shard: Shard| {
        let inserted = shared.clone();
        async move { load_shard(shard, records, value_size, tasks, inserted).await }
    });
    bar.finish();
    measure.finish(
        db,
        counted?
            .into_iter()
            .collect::<std::result::Result<_, _>>()?,
        0,
    )
}

/// One shard's part of the load: its keys, by `tasks` tasks counting into one tally (see
/// `run_shard`).
async fn load_shard(
    shard: Shard,
    records: u64,
    value_size: usize,
    tasks: usize,
    inserted: Arc<AtomicU64>,
) -> std::result::Result<Counted, ringdb::DbError> {
    let next = Rc::new(std::cell::Cell::new(0u64));
    let shard = Rc::new(shard);
    let tally = Rc::new(RefCell::new(Counted::new()));
    let handles: Vec<_> = (0..tasks.max(1))
        .map(|task| {
            let (next, shard, tally) = (next.clone(), shard.clone(), tally.clone());
            let inserted = inserted.clone();
            shard.clone().spawn(async move {
                let mut value = Vec::with_capacity(value_size);
                // Each round takes the next index; ends at `records`.
                loop {
                    let i = next.get();
                    if i >= records {
                        return Ok::<(), ringdb::DbError>(());
                    }
                    next.set(i + 1);
                    let key = scattered(i, records);
                    if !shard.owns(&key_bytes(key)) {
                        continue;
                    }
                    let started = rdtsc();
                    ycsb::value_for(key, task as u64, value_size, &mut value);
                    shard.local().insert(&key_bytes(key), &value).await?;
                    let ns = ticks_to_ns(rdtsc() - started);
                    tally.borrow_mut().record(true, true, ns);
                    inserted.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await?;
    }
    let counted = std::mem::replace(&mut *tally.borrow_mut(), Counted::new());
    Ok(counted)
}

/// A progress bar on stderr fed by a counter the shards' tasks (or the clock) advance, drawn
/// by a thread of its own while the calling thread blocks on the shards.
struct ProgressBar {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressBar {
    /// Polls `position` five times a second up to `len` (nothing when not `on`).
    fn start(
        len: u64,
        template: &str,
        label: &str,
        on: bool,
        position: impl Fn() -> u64 + Send + 'static,
    ) -> ProgressBar {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = ycsb::bar(len, template, label, on).map(|bar| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // Ends when the phase does (`finish`).
                while !stop.load(Ordering::Relaxed) {
                    bar.set_position(position().min(len));
                    std::thread::sleep(Duration::from_millis(200));
                }
                bar.finish_and_clear();
            })
        });
        ProgressBar { stop, thread }
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs the workload for `spec.duration`: tasks on the shards, or client threads; a progress
/// bar on stderr when `progress`.
pub fn run(db: &Db, spec: &ShardedSpec, progress: bool) -> Result<ShardedReport> {
    let measure = Measure::start(db)?;
    let started = Instant::now();
    let template = "{spinner} {msg} [{bar:30}] {elapsed}/{duration}";
    let total_ms = spec.duration.as_millis() as u64;
    let bar = ProgressBar::start(total_ms, template, "run", progress, move || {
        started.elapsed().as_millis() as u64
    });
    let counted = run_phase(db, spec);
    bar.finish();
    measure.finish(db, counted?, spec.clients)
}

/// The run's counts: per shard (tasks on the shards) or per client thread.
fn run_phase(db: &Db, spec: &ShardedSpec) -> Result<Vec<Counted>> {
    Ok(if spec.clients == 0 {
        let spec = *spec;
        let per_shard =
            db.run_on_each(move |shard: Shard| async move { run_shard(shard, spec).await })?;
        per_shard
            .into_iter()
            .collect::<std::result::Result<Vec<_>, _>>()?
    } else {
        run_clients(db, spec)?
    })
}

/// One shard's tasks, counting into one shared tally (one histogram per shard: a histogram
/// per task would spread the counting over 128 of them and miss the cache on every record).
async fn run_shard(
    shard: Shard,
    spec: ShardedSpec,
) -> std::result::Result<Counted, ringdb::DbError> {
    let shard = Rc::new(shard);
    let tally = Rc::new(RefCell::new(Counted::new()));
    let deadline = Instant::now() + spec.duration;
    let handles: Vec<_> = (0..spec.tasks_per_shard.max(1))
        .map(|task| {
            let seed = spec.seed ^ ((shard.index() as u64) << 32) ^ task as u64;
            let generator = OpGenerator::new(spec.workload, spec.distribution, spec.records, seed);
            let task = run_task(
                shard.clone(),
                generator,
                spec,
                deadline,
                task,
                tally.clone(),
            );
            shard.clone().spawn(task)
        })
        .collect();
    for handle in handles {
        handle.await?;
    }
    let counted = std::mem::replace(&mut *tally.borrow_mut(), Counted::new());
    Ok(counted)
}

/// One task on a shard: operations on the shard's keys until the deadline.
async fn run_task(
    shard: Rc<Shard>,
    mut generator: OpGenerator,
    spec: ShardedSpec,
    deadline: Instant,
    task: usize,
    tally: Rc<RefCell<Counted>>,
) -> std::result::Result<(), ringdb::DbError> {
    let mut value = Vec::with_capacity(spec.value_size);
    let mut version = task as u64;
    while Instant::now() < deadline {
        let op = owned_op(&shard, &mut generator);
        let started = rdtsc();
        version += 1 << 20;
        let owned = shard.owns(&key_bytes(op_key(op)));
        let found = if owned {
            ycsb::exec(shard.local(), op, version, spec.value_size, &mut value).await?
        } else {
            hop(&shard, op, version, spec.value_size, &mut value).await?
        };
        tally
            .borrow_mut()
            .record(owned, found, ticks_to_ns(rdtsc() - started));
        // A transaction boundary: let the shard's other tasks run.
        ringdb_io::yield_now().await;
    }
    Ok(())
}

/// An operation on a key the shard owns, if one comes within [`OWNED_DRAWS_MAX`] draws.
fn owned_op(shard: &Shard, generator: &mut OpGenerator) -> Op {
    let mut op = generator.next_op();
    for _ in 1..OWNED_DRAWS_MAX {
        if shard.owns(&key_bytes(op_key(op))) {
            break;
        }
        op = generator.next_op();
    }
    op
}

/// The key an operation starts at.
fn op_key(op: Op) -> u64 {
    match op {
        Op::Read(k) | Op::Update(k) | Op::Insert(k) | Op::ReadModifyWrite(k) | Op::Scan(k, _) => k,
    }
}

/// An operation on another shard's key, through the async API (one hop each way).
async fn hop(
    shard: &Shard,
    op: Op,
    version: u64,
    value_size: usize,
    value: &mut Vec<u8>,
) -> std::result::Result<bool, ringdb::DbError> {
    let key = key_bytes(op_key(op));
    match op {
        Op::Read(_) | Op::Scan(..) => Ok(shard.db().get_async(&key).await?.is_some()),
        _ => {
            ycsb::value_for(op_key(op), version, value_size, value);
            shard.db().insert_async(&key, value).await?;
            Ok(true)
        }
    }
}

/// `spec.clients` user threads calling the blocking API until the deadline.
fn run_clients(db: &Db, spec: &ShardedSpec) -> Result<Vec<Counted>> {
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..spec.clients)
        .map(|client| {
            let (db, spec, stop) = (db.clone(), *spec, stop.clone());
            std::thread::spawn(move || {
                if spec.batch_clients {
                    ringdb::set_caller_thread_batch()
                        .map_err(|source| BenchError::ClientPolicy { source })?;
                }
                Ok::<_, BenchError>(run_client(&db, &spec, client, &stop)?)
            })
        })
        .collect();
    std::thread::sleep(spec.duration);
    stop.store(true, Ordering::Relaxed);
    let mut counted = Vec::with_capacity(threads.len());
    for thread in threads {
        let client = thread.join().expect("a client thread panicked")?;
        counted.push(client);
    }
    Ok(counted)
}

/// One client thread: reads in `multi_get` batches of `spec.batch` (1: single gets), writes one
/// at a time.
fn run_client(
    db: &Db,
    spec: &ShardedSpec,
    client: usize,
    stop: &AtomicBool,
) -> std::result::Result<Counted, ringdb::DbError> {
    let seed = spec.seed ^ (client as u64) << 40;
    let mut generator = OpGenerator::new(spec.workload, spec.distribution, spec.records, seed);
    let mut counted = Counted::new();
    let mut value = Vec::with_capacity(spec.value_size);
    let mut keys: Vec<[u8; 8]> = Vec::with_capacity(spec.batch);
    let mut version = client as u64;
    while !stop.load(Ordering::Relaxed) {
        let started = rdtsc();
        keys.clear();
        let mut write = None;
        while keys.len() < spec.batch.max(1) {
            match generator.next_op() {
                Op::Read(k) | Op::Scan(k, _) => keys.push(key_bytes(k)),
                other => {
                    write = Some(op_key(other));
                    break;
                }
            }
        }
        if !keys.is_empty() {
            let values = if keys.len() == 1 {
                vec![db.get(&keys[0])?]
            } else {
                db.multi_get(&keys)?
            };
            counted.misses += values.iter().filter(|v| v.is_none()).count() as u64;
            counted.ops += keys.len() as u64;
        }
        if let Some(key) = write {
            version += 1 << 20;
            ycsb::value_for(key, version, spec.value_size, &mut value);
            db.insert(&key_bytes(key), &value)?;
            counted.ops += 1;
        }
        counted.hist.record_ns(ticks_to_ns(rdtsc() - started));
    }
    Ok(counted)
}

/// The counters and clocks at a phase's start.
struct Measure {
    started: Instant,
    cpu: CpuTime,
    reads: u64,
    writes: u64,
    per_shard_ops: Vec<u64>,
}

impl Measure {
    fn start(db: &Db) -> Result<Measure> {
        let stats = db.stats()?;
        Ok(Measure {
            started: Instant::now(),
            cpu: CpuTime::now(),
            reads: stats.page_reads(),
            writes: stats.page_writes(),
            per_shard_ops: stats
                .shards
                .iter()
                .map(|s| s.runtime.tasks_spawned)
                .collect(),
        })
    }

    /// The report: `counted` per shard (tasks) or per client.
    fn finish(self, db: &Db, counted: Vec<Counted>, clients: usize) -> Result<ShardedReport> {
        let secs = self.started.elapsed().as_secs_f64();
        let cpu = CpuTime::now().since(self.cpu).total().as_secs_f64();
        let stats = db.stats()?;
        let mut total = Counted::new();
        counted.iter().for_each(|c| total.add(c));
        let ops = total.ops;
        let per = |x: u64| if ops == 0 { 0.0 } else { x as f64 / ops as f64 };
        let per_shard_ops_per_s = if clients == 0 {
            counted
                .iter()
                .map(|c| c.ops as f64 / secs.max(1e-9))
                .collect()
        } else {
            // Served per shard: the tasks each shard ran for the clients' requests.
            stats
                .shards
                .iter()
                .zip(&self.per_shard_ops)
                .map(|(s, before)| (s.runtime.tasks_spawned - before) as f64 / secs.max(1e-9))
                .collect()
        };
        Ok(ShardedReport {
            shards: db.shard_count(),
            clients,
            ops,
            secs,
            ops_per_s: ops as f64 / secs.max(1e-9),
            per_shard_ops_per_s,
            lat_us: total.hist.summary(),
            cycles_per_op: if ops == 0 {
                0.0
            } else {
                cpu * tsc_hz() / ops as f64
            },
            cpu_pct: 100.0 * cpu / secs.max(1e-9),
            reads_per_op: per(stats.page_reads() - self.reads),
            writes_per_op: per(stats.page_writes() - self.writes),
            hops: total.hops,
            misses: total.misses,
        })
    }
}

/// The cost of one cross-thread wake-up here: two threads hand a token back and forth with
/// `unpark`, `rounds` times; the median one-way time in microseconds (a round trip is two
/// wake-ups).
pub fn wake_up_cost_us(rounds: usize) -> f64 {
    let turn = Arc::new(AtomicU64::new(0));
    let main = std::thread::current();
    let other_turn = turn.clone();
    let other = std::thread::spawn(move || {
        for round in 0..rounds as u64 {
            while other_turn.load(Ordering::Acquire) != 2 * round + 1 {
                std::thread::park();
            }
            other_turn.store(2 * round + 2, Ordering::Release);
            main.unpark();
        }
    });
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds as u64 {
        let started = Instant::now();
        turn.store(2 * round + 1, Ordering::Release);
        other.thread().unpark();
        while turn.load(Ordering::Acquire) != 2 * round + 2 {
            std::thread::park();
        }
        samples.push(started.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    other.join().expect("the wake-up thread");
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(0.0)
}
