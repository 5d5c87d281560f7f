//! Runs the TPC-C mix on a loaded database with many concurrent tasks (the paper's fibers):
//! each task has a home warehouse, draws its transactions' inputs before they run
//! ([`TxInput::generate`]), runs them as serializable transactions (or without isolation, to
//! show what goes wrong), and retries a transaction that lost a wait-die conflict with its
//! first timestamp, so that it grows older and eventually wins.
//!
//! A transaction's latency runs from its first attempt to its commit (retries included): what
//! a terminal would see. The database's counters before and after the run give the page faults,
//! writes and kernel entries per transaction, and the process's CPU time the cycles per
//! transaction (io-wq and SQPOLL threads included), as in `ycsb`.

use super::delivery_queue::DeliveryQueue;
use super::execute::{execute_in, execute_placed};
use super::report::{TpccRunReport, TxTypeReport};
use super::txn::PlacedContext;
use super::{
    Constants, LockRelease, TpccError, TpccScale, TpccTables, TxChoice, TxInput, TxKind, TxOptions,
    TxOutcome,
};
use crate::error::{BenchError, Result};
use ringdb::{DbHandle, DbStats, LocalDb};
use ringdb::{Isolation, TxnTimestamp};
use ringdb_lab::counters::{rdtsc, ticks_to_ns, tsc_hz, CpuTime, LatencyHist};
use ringdb_lab::iowq::IowqTracker;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Most attempts one transaction gets before the run fails: under wait-die a retry keeps its
/// first timestamp, so it becomes the oldest transaction within a bounded number of attempts;
/// a transaction that still loses after this many means the concurrency control is broken.
pub const MAX_ATTEMPTS: u32 = 100_000;

/// The five transaction types, in the order the reports list them.
pub const TX_KINDS: [TxKind; 5] = [
    TxKind::NewOrder,
    TxKind::Payment,
    TxKind::OrderStatus,
    TxKind::Delivery,
    TxKind::StockLevel,
];

/// Bytes an ITEM row takes in a leaf, key, slot and lengths included (its value is clause
/// 1.3.1's I_IM_ID, I_NAME up to 24, I_PRICE and I_DATA up to 50 bytes).
const ITEM_RECORD_BYTES: u64 = 100;
/// Leaf fill after a load (B+tree inserts: about ln 2).
const LOAD_FILL: f64 = 0.69;

/// What a TPC-C run refuses or fails with, beyond the population's and the engine's errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TpccRunError {
    /// A buffer pool smaller than the pages every transaction of one warehouse keeps reading.
    #[error(
        "a buffer pool of {pool_pages} pages ({} KiB) is too small for TPC-C's hot set: about {hot_set_pages} pages ({} KiB: the ITEM table of {items} rows, the warehouse and district rows, and a frame for each of {tasks} tasks' faults)",
        pool_pages * page_size_bytes / 1024,
        hot_set_pages * *page_size_bytes as u64 / 1024
    )]
    PoolTooSmallForHotSet {
        /// Pages in the pool asked for.
        pool_pages: usize,
        /// The hot set's estimated pages.
        hot_set_pages: u64,
        /// The page size in bytes.
        page_size_bytes: usize,
        /// Rows of ITEM.
        items: u32,
        /// Concurrent tasks.
        tasks: usize,
    },

    /// Fewer warehouses than shards: a shard would have no home warehouse for its tasks.
    #[error("{warehouses} warehouses cannot be spread over {shards} shards: every shard needs a warehouse")]
    FewerWarehousesThanShards {
        /// Warehouses loaded.
        warehouses: u32,
        /// The database's shards.
        shards: usize,
    },

    /// A transaction that kept losing conflicts.
    #[error("a {kind:?} transaction lost {attempts} conflicts in a row: the concurrency control does not let the oldest transaction win")]
    RetriesExhausted {
        /// Its type.
        kind: TxKind,
        /// Attempts it made.
        attempts: u32,
    },
}

/// The pages TPC-C touches in nearly every transaction, whatever the warehouse count: the
/// ITEM table (every NewOrder reads 5-15 random items), the warehouse's and its districts'
/// rows, and one frame per task for the page its fault is reading in.
pub fn hot_set_pages(scale: &TpccScale, page_size: usize, tasks: usize) -> u64 {
    let item_bytes = scale.items as f64 * ITEM_RECORD_BYTES as f64;
    let item_pages = (item_bytes / (page_size as f64 * LOAD_FILL)).ceil() as u64;
    let row_pages = 1 + scale.districts as u64;
    item_pages + row_pages + (tasks.max(ringdb::buffer::MIN_FRAMES)) as u64
}

/// Refuses a pool too small for the hot set of one warehouse at `scale` (see
/// [`hot_set_pages`]), before anything is loaded.
pub fn check_pool(
    scale: &TpccScale,
    page_size: usize,
    pool_pages: usize,
    tasks: usize,
) -> Result<()> {
    let hot_set_pages = hot_set_pages(scale, page_size, tasks);
    if (pool_pages as u64) < hot_set_pages {
        return Err(TpccRunError::PoolTooSmallForHotSet {
            pool_pages,
            hot_set_pages,
            page_size_bytes: page_size,
            items: scale.items,
            tasks,
        }
        .into());
    }
    Ok(())
}

/// Refuses a loaded database whose scale is not the one asked for (another warehouse count,
/// or the other population at the same count), naming both.
pub fn check_loaded_scale(loaded: &TpccScale, asked: &TpccScale) -> Result<()> {
    if loaded != asked {
        return Err(BenchError::TpccScaleMismatch {
            loaded: *loaded,
            requested: *asked,
        });
    }
    Ok(())
}

/// What a TPC-C run does: how many tasks, for how long, how isolated.
#[derive(Clone, Debug)]
pub struct TpccRunSpec {
    /// Concurrent tasks; task `t` has home warehouse `t % W + 1` (with fewer tasks than
    /// warehouses, each transaction draws its home warehouse).
    pub tasks: usize,
    /// How long the run lasts.
    pub duration: Duration,
    /// Stop after this many finished transactions (committed or rolled back), whatever the
    /// duration.
    pub max_transactions: Option<u64>,
    /// How the transactions isolate themselves.
    pub isolation: Isolation,
    /// When a commit releases its locks (with a log: before or after the sync).
    pub lock_release: LockRelease,
    /// Delivery as one database transaction per district (clause 2.7 allows one to ten), the
    /// Deliveries of a warehouse one at a time (its deferred queue, clause 2.7.2), each from
    /// its own first district; or all ten districts in one transaction, any number at once.
    pub delivery_per_district: bool,
    /// Under `Serializable`, run StockLevel at read committed, as clause 2.8.2.3 allows ("full
    /// serializability and repeatable reads are not required").
    pub stock_level_read_committed: bool,
    /// NewOrder and Payment fault in the rows they will read, together, before they lock
    /// anything (see `ringdb::Transaction::prefetch`).
    pub prefetch: bool,
    /// Seed of the tasks' random choices (task `t` draws from `seed` and `t`).
    pub seed: u64,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Name of the run in the progress bar and the report.
    pub label: String,
}

impl TpccRunSpec {
    /// `tasks` serializable tasks for `duration`, seed 42, no progress bar.
    pub fn new(tasks: usize, duration: Duration) -> TpccRunSpec {
        TpccRunSpec {
            tasks,
            duration,
            max_transactions: None,
            isolation: Isolation::Serializable,
            lock_release: LockRelease::Early,
            delivery_per_district: true,
            stock_level_read_committed: true,
            prefetch: true,
            seed: 42,
            progress: false,
            label: "tpcc".into(),
        }
    }
}

/// The position of `kind` in [`TX_KINDS`].
pub(crate) fn kind_index(kind: TxKind) -> usize {
    match kind {
        TxKind::NewOrder => 0,
        TxKind::Payment => 1,
        TxKind::OrderStatus => 2,
        TxKind::Delivery => 3,
        TxKind::StockLevel => 4,
    }
}

/// A conflict's cause as the report counts it: the table and the lock the transaction met
/// there, or ("at commit", "a part") for one its body never saw (a part on another shard that
/// died while the commit ran).
pub(crate) type CauseKey = (&'static str, &'static str);

/// The [`CauseKey`] of a conflict whose error named `cause`.
pub(crate) fn cause_key(
    tables: &TpccTables,
    cause: Option<(ringdb::TableId, ringdb::ConflictWith)>,
) -> CauseKey {
    use ringdb::ConflictWith;
    let Some((table, with)) = cause else {
        return ("at commit", "a part");
    };
    let lock = match with {
        ConflictWith::SharedKey => "shared key lock",
        ConflictWith::ExclusiveKey => "exclusive key lock",
        ConflictWith::Range => "range lock",
        ConflictWith::Queued => "queued first",
        _ => "another lock",
    };
    (tables.name_of(table), lock)
}

/// What the tasks of one transaction type counted.
#[derive(Default)]
pub(crate) struct TypeCounters {
    /// Transactions committed.
    pub(crate) committed: u64,
    /// Transactions rolled back on purpose (NewOrder's invalid item).
    pub(crate) rolled_back: u64,
    /// Attempts that lost a conflict and were retried.
    pub(crate) conflicts: u64,
    /// Those conflicts by cause (bounded: a table name and a lock kind of a few each).
    pub(crate) causes: std::collections::BTreeMap<CauseKey, u64>,
    /// Latency from the first attempt to the commit (or the rollback), nanoseconds.
    pub(crate) latency: LatencyHist,
}

/// What the tasks of a run share: the counters they add to, and the stop flag.
pub(crate) struct Shared {
    pub(crate) per_type: RefCell<[TypeCounters; 5]>,
    /// Transactions finished (committed or rolled back).
    pub(crate) finished: Cell<u64>,
    /// Transactions finished in each second of the run.
    pub(crate) per_second: RefCell<Vec<u64>>,
    first_error: RefCell<Option<BenchError>>,
    stop: Cell<bool>,
    pub(crate) iowq: RefCell<IowqTracker>,
    /// The time-stamp counter when the run began.
    start_tsc: u64,
    /// Transactions abandoned because a row they needed was missing, which only a run
    /// without isolation produces (it sees another transaction's half-applied writes).
    anomalies: Cell<u64>,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            per_type: RefCell::new(Default::default()),
            finished: Cell::new(0),
            per_second: RefCell::new(Vec::new()),
            first_error: RefCell::new(None),
            stop: Cell::new(false),
            iowq: RefCell::new(IowqTracker::default()),
            start_tsc: rdtsc(),
            anomalies: Cell::new(0),
        }
    }

    /// Counts one finished transaction of `kind` begun (first attempt) at `started_tsc`, after
    /// `conflicts` lost attempts. Returns the transactions finished so far and the time since
    /// the run began.
    fn record(
        &self,
        kind: TxKind,
        outcome: &TxOutcome,
        conflicts: u64,
        started_tsc: u64,
    ) -> (u64, Duration) {
        let now = rdtsc();
        {
            let mut per_type = self.per_type.borrow_mut();
            let counters = &mut per_type[kind_index(kind)];
            match outcome {
                TxOutcome::Committed => counters.committed += 1,
                TxOutcome::RolledBack => counters.rolled_back += 1,
            }
            counters.conflicts += conflicts;
            counters
                .latency
                .record_ns(ticks_to_ns(now.saturating_sub(started_tsc)));
        }
        let finished = self.finished.get() + 1;
        self.finished.set(finished);
        let elapsed = Duration::from_nanos(ticks_to_ns(now.saturating_sub(self.start_tsc)));
        let second = elapsed.as_secs() as usize;
        let mut per_second = self.per_second.borrow_mut();
        if per_second.len() <= second {
            per_second.resize(second + 1, 0);
            self.iowq.borrow_mut().sample();
        }
        per_second[second] += 1;
        (finished, elapsed)
    }

    /// Counts the cause of one conflict a transaction of `kind` lost.
    pub(crate) fn note_conflict(&self, kind: TxKind, cause: CauseKey) {
        let mut per_type = self.per_type.borrow_mut();
        *per_type[kind_index(kind)].causes.entry(cause).or_default() += 1;
    }

    /// Keeps the run's first error and stops every task.
    fn fail(&self, error: BenchError) {
        self.first_error.borrow_mut().get_or_insert(error);
        self.stop.set(true);
    }
}

/// What every task of a run reads: the schema, the scale, the run's limits.
pub(crate) struct RunContext {
    tables: TpccTables,
    scale: TpccScale,
    constants: Constants,
    isolation: Isolation,
    lock_release: LockRelease,
    delivery_per_district: bool,
    stock_level_read_committed: bool,
    prefetch: bool,
    seed: u64,
    tasks: usize,
    duration: Duration,
    max_transactions: Option<u64>,
    shared: Shared,
    /// Deliveries run one at a time per warehouse (the deferred queue of clause 2.7.2).
    deliveries: DeliveryQueue,
    progress_bar: Option<indicatif::ProgressBar>,
    /// The home warehouses of this runner's tasks: all of them on one database, the
    /// shard's own on a database of several shards.
    homes: Vec<u32>,
    /// With warehouses on several shards: what the shard's transactions share.
    placed: Option<Rc<PlacedContext>>,
}

impl RunContext {
    /// The context of `spec`'s tasks homed at `homes`; `placed` when warehouses span shards.
    pub(crate) fn new(
        loaded: (&TpccTables, &TpccScale, &Constants),
        spec: &TpccRunSpec,
        homes: Vec<u32>,
        placed: Option<Rc<PlacedContext>>,
        progress_bar: Option<indicatif::ProgressBar>,
    ) -> RunContext {
        let (tables, scale, constants) = loaded;
        assert!(!homes.is_empty(), "a runner has a home warehouse");
        RunContext {
            tables: *tables,
            scale: *scale,
            constants: *constants,
            isolation: spec.isolation,
            lock_release: spec.lock_release,
            delivery_per_district: spec.delivery_per_district,
            stock_level_read_committed: spec.stock_level_read_committed,
            prefetch: spec.prefetch,
            seed: spec.seed,
            tasks: spec.tasks,
            duration: spec.duration,
            max_transactions: spec.max_transactions,
            shared: Shared::new(),
            deliveries: DeliveryQueue::new(scale.warehouses),
            progress_bar,
            homes,
            placed,
        }
    }
}

/// Runs the TPC-C mix on `db` (loaded by [`super::load`]) as `spec` says, and reports what
/// it measured.
pub fn run(
    db: &mut LocalDb,
    tables: &TpccTables,
    scale: &TpccScale,
    constants: &Constants,
    spec: &TpccRunSpec,
) -> Result<TpccRunReport> {
    crate::error::check_range(
        crate::error::BenchSetting::Tasks,
        spec.tasks as u64,
        1,
        4096,
    )?;
    let progress_bar = crate::ycsb::bar(
        spec.duration.as_millis() as u64,
        "{spinner} {msg} [{bar:30}] {elapsed}/{duration} {prefix}",
        &spec.label,
        spec.progress,
    );
    let homes = (1..=scale.warehouses).collect();
    let loaded = (tables, scale, constants);
    let context = Rc::new(RunContext::new(
        loaded,
        spec,
        homes,
        None,
        progress_bar.clone(),
    ));
    let before = db.stats();
    let cpu_before = CpuTime::now();
    let start = Instant::now();
    let handles: Vec<_> = (0..spec.tasks)
        .map(|task| {
            let handle = db.handle();
            db.runtime().spawn(run_task(handle, task, context.clone()))
        })
        .collect();
    db.runtime().block_on(async move {
        for handle in handles {
            handle.await;
        }
    })?;
    if let Some(bar) = progress_bar {
        bar.finish_and_clear();
    }
    let measured = Measured {
        secs: start.elapsed().as_secs_f64(),
        cpu_secs: CpuTime::now().since(cpu_before).total().as_secs_f64(),
        counts: Counts::between(&before, &db.stats()),
    };
    let outcome = context.outcome();
    if let Some(error) = outcome.error {
        return Err(error);
    }
    Ok(summarise(&outcome, spec, scale, &measured))
}

/// One task: draws and runs transactions for its home warehouse until the run's time or
/// transactions are up, or a task failed.
pub(crate) async fn run_task(handle: DbHandle, task: usize, context: Rc<RunContext>) {
    use rand::SeedableRng;
    let shared = &context.shared;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(
        context.seed ^ (task as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    let homes = &context.homes;
    // A terminal per task, homed at the runner's `task % homes`-th warehouse; with fewer
    // tasks than warehouses (posix's one task) each transaction draws its home, so every
    // warehouse's data is touched.
    let fixed_home = (context.tasks >= homes.len()).then(|| homes[task % homes.len()]);
    while !shared.stop.get() {
        let home_warehouse = fixed_home.unwrap_or_else(|| {
            use rand::RngExt;
            homes[rng.random_range(0..homes.len())]
        });
        let input = TxInput::generate(&context.scale, &context.constants, home_warehouse, &mut rng);
        let started_tsc = rdtsc();
        let (outcome, conflicts) = match run_to_the_end(&handle, &context, &input).await {
            Ok(done) => done,
            Err(BenchError::Tpcc(TpccError::MissingRow { .. }))
                if context.isolation == Isolation::Off =>
            {
                shared.anomalies.set(shared.anomalies.get() + 1);
                continue;
            }
            Err(error) => {
                shared.fail(error);
                break;
            }
        };
        let (finished, elapsed) = shared.record(input.kind(), &outcome, conflicts, started_tsc);
        if let Some(bar) = &context.progress_bar {
            if finished.is_multiple_of(64) {
                bar.set_position(elapsed.as_millis() as u64);
                bar.set_prefix(format!("{finished} tx"));
            }
        }
        if elapsed >= context.duration || context.max_transactions.is_some_and(|m| finished >= m) {
            shared.stop.set(true);
        }
        // A transaction boundary: let the others run (a transaction whose pages are all
        // resident never parks, and would keep the thread to itself).
        ringdb_io::yield_now().await;
    }
}

/// Runs `input` until it commits or rolls back, retrying a lost conflict with the first
/// attempt's timestamp; a Delivery in the per-district mode runs each district as a
/// transaction of its own, in order. Returns the outcome and the attempts that were retried.
async fn run_to_the_end(
    handle: &DbHandle,
    context: &RunContext,
    input: &TxInput,
) -> Result<(TxOutcome, u64)> {
    match input.choice() {
        TxChoice::Delivery(delivery) if context.delivery_per_district => {
            let _turn = context.deliveries.turn(delivery.warehouse).await;
            let mut retried = 0;
            // Each Delivery starts at its own district (the carrier drawn for it, 1-10), so
            // concurrent Deliveries of a warehouse do not walk the districts in step, all
            // after the same oldest NEW-ORDER row (the clause names no order).
            let first = u32::from(delivery.carrier) % delivery.districts;
            for i in 0..delivery.districts {
                let d = (first + i) % delivery.districts + 1;
                retried += run_part(handle, context, input, Some(d)).await?.1;
            }
            Ok((TxOutcome::Committed, retried))
        }
        _ => run_part(handle, context, input, None).await,
    }
}

/// Runs `input` (only `district`'s part of a Delivery, when given) as one transaction until
/// it commits or rolls back, retrying a lost conflict with the first attempt's timestamp.
async fn run_part(
    handle: &DbHandle,
    context: &RunContext,
    input: &TxInput,
    district: Option<u32>,
) -> Result<(TxOutcome, u64)> {
    let mut timestamp: Option<TxnTimestamp> = None;
    let tables = &context.tables;
    let isolation = match input.choice() {
        TxChoice::StockLevel(_)
            if context.stock_level_read_committed
                && context.isolation == Isolation::Serializable =>
        {
            Isolation::ReadCommitted
        }
        _ => context.isolation,
    };
    let options = TxOptions {
        isolation,
        release: context.lock_release,
        prefetch: context.prefetch,
    };
    if let Some(placed) = &context.placed {
        let note = |cause| {
            let key = cause_key(tables, cause);
            context.shared.note_conflict(input.kind(), key)
        };
        let run = execute_placed(&placed.db, placed, input, (options, district), &note);
        return Ok(run.await?);
    }
    for attempt in 0..MAX_ATTEMPTS {
        let txn = handle.begin_with(isolation, timestamp);
        let first_attempt = timestamp.is_none();
        let run = execute_in(txn, tables, input, options, first_attempt, district);
        match run.await {
            Ok(outcome) => return Ok((outcome, attempt as u64)),
            Err(TpccError::Conflict {
                timestamp: first,
                cause,
            }) => {
                let key = cause_key(tables, cause);
                context.shared.note_conflict(input.kind(), key);
                timestamp = Some(first);
                // Let the older transaction that won go on before this one tries again.
                ringdb_io::yield_now().await;
            }
            Err(other) => return Err(other.into()),
        }
    }
    Err(TpccRunError::RetriesExhausted {
        kind: input.kind(),
        attempts: MAX_ATTEMPTS,
    }
    .into())
}

/// The run's time, CPU time and what the database counted during it.
pub(crate) struct Measured {
    pub(crate) secs: f64,
    pub(crate) cpu_secs: f64,
    pub(crate) counts: Counts,
}

/// What the database (all its shards) counted during a run.
#[derive(Clone, Copy, Default)]
pub(crate) struct Counts {
    faults: u64,
    writes: u64,
    enters: u64,
    log_syncs: u64,
    log_records: u64,
}

impl Counts {
    /// The counters of `after` less those of `before`.
    pub(crate) fn between(before: &DbStats, after: &DbStats) -> Counts {
        let (log_syncs, log_records) = match (&before.wal, &after.wal) {
            (Some(b), Some(a)) => (a.syncs - b.syncs, a.records - b.records),
            _ => (0, 0),
        };
        Counts {
            faults: after.pool.reads - before.pool.reads,
            writes: after.pool.writes - before.pool.writes,
            enters: after.runtime.engine.enters - before.runtime.engine.enters,
            log_syncs,
            log_records,
        }
    }

    /// The sum of two shards' counts.
    pub(crate) fn plus(self, other: Counts) -> Counts {
        Counts {
            faults: self.faults + other.faults,
            writes: self.writes + other.writes,
            enters: self.enters + other.enters,
            log_syncs: self.log_syncs + other.log_syncs,
            log_records: self.log_records + other.log_records,
        }
    }
}

/// What a runner's tasks counted, taken out of their shared state once they have ended
/// (`Send`: a shard's runner hands it to the thread that merges the shards').
#[derive(Default)]
pub(crate) struct RunOutcome {
    pub(crate) per_type: [TypeCounters; 5],
    pub(crate) per_second: Vec<u64>,
    pub(crate) anomalies: u64,
    pub(crate) iowq_workers: usize,
    /// Transactions committed with a part on another shard, and the operations sent there.
    pub(crate) spanning_commits: u64,
    pub(crate) remote_operations: u64,
    pub(crate) error: Option<BenchError>,
}

impl RunOutcome {
    /// Adds another runner's outcome (the first error kept).
    pub(crate) fn merge(&mut self, other: RunOutcome) {
        for (mine, theirs) in self.per_type.iter_mut().zip(other.per_type) {
            mine.committed += theirs.committed;
            mine.rolled_back += theirs.rolled_back;
            mine.conflicts += theirs.conflicts;
            for (cause, count) in theirs.causes {
                *mine.causes.entry(cause).or_default() += count;
            }
            mine.latency.merge(&theirs.latency);
        }
        if self.per_second.len() < other.per_second.len() {
            self.per_second.resize(other.per_second.len(), 0);
        }
        for (mine, theirs) in self.per_second.iter_mut().zip(&other.per_second) {
            *mine += theirs;
        }
        self.anomalies += other.anomalies;
        self.iowq_workers = self.iowq_workers.max(other.iowq_workers);
        self.spanning_commits += other.spanning_commits;
        self.remote_operations += other.remote_operations;
        if self.error.is_none() {
            self.error = other.error;
        }
    }
}

impl RunContext {
    /// Takes what the tasks counted (once they have all ended).
    pub(crate) fn outcome(&self) -> RunOutcome {
        let shared = &self.shared;
        shared.iowq.borrow_mut().sample();
        let (spanning_commits, remote_operations) = self.placed.as_ref().map_or((0, 0), |s| {
            (s.spanning_commits.get(), s.remote_operations.get())
        });
        RunOutcome {
            per_type: std::mem::take(&mut *shared.per_type.borrow_mut()),
            per_second: shared.per_second.borrow().clone(),
            anomalies: shared.anomalies.get(),
            iowq_workers: shared.iowq.borrow().seen(),
            spanning_commits,
            remote_operations,
            error: shared.first_error.borrow_mut().take(),
        }
    }
}

/// The run's report from what its tasks counted and the counters around it.
pub(crate) fn summarise(
    outcome: &RunOutcome,
    spec: &TpccRunSpec,
    scale: &TpccScale,
    measured: &Measured,
) -> TpccRunReport {
    let per_type = &outcome.per_type;
    let types: Vec<TxTypeReport> = TX_KINDS
        .iter()
        .map(|&kind| TxTypeReport::from_counters(kind, &per_type[kind_index(kind)]))
        .collect();
    let counts = &measured.counts;
    let committed: u64 = types.iter().map(|t| t.committed).sum();
    let per_tx = |count: u64| {
        if committed == 0 {
            0.0
        } else {
            count as f64 / committed as f64
        }
    };
    let secs = measured.secs.max(1e-9);
    let mut per_second = outcome.per_second.clone();
    // The last second is partial: keep whole seconds only.
    per_second.truncate((measured.secs as usize).max(1));
    let (faults, writes) = (counts.faults, counts.writes);
    let (log_syncs, log_records) = (counts.log_syncs, counts.log_records);
    TpccRunReport {
        label: spec.label.clone(),
        warehouses: scale.warehouses,
        tasks: spec.tasks,
        isolation: format!("{:?}", spec.isolation).to_lowercase(),
        lock_release: spec.lock_release,
        delivery_per_district: spec.delivery_per_district,
        stock_level_read_committed: spec.stock_level_read_committed,
        prefetch: spec.prefetch,
        anomalies: outcome.anomalies,
        secs: measured.secs,
        committed,
        rolled_back: types.iter().map(|t| t.rolled_back).sum(),
        conflicts: types.iter().map(|t| t.conflicts).sum(),
        tx_per_s: committed as f64 / secs,
        tpmc: types[kind_index(TxKind::NewOrder)].committed as f64 * 60.0 / secs,
        faults_per_tx: per_tx(faults),
        writes_per_tx: per_tx(writes),
        ios_per_tx: per_tx(faults + writes),
        enters_per_tx: per_tx(counts.enters),
        cycles_per_tx: if committed == 0 {
            0.0
        } else {
            measured.cpu_secs * tsc_hz() / committed as f64
        },
        log_syncs_per_tx: per_tx(log_syncs),
        commits_per_log_sync: if log_syncs == 0 {
            0.0
        } else {
            log_records as f64 / log_syncs as f64
        },
        cpu_pct: 100.0 * measured.cpu_secs / secs,
        per_second,
        iowq_workers: outcome.iowq_workers,
        shards: 1,
        spanning_per_tx: per_tx(outcome.spanning_commits),
        remote_operations_per_tx: per_tx(outcome.remote_operations),
        per_type: types,
    }
}
