//! `ringdb tpcc --ladder`: the paper's Fig. 6. TPC-C with the buffer manager's I/O design
//! switched on step by step (the steps and their target checks are the YCSB ladder's, see
//! `ladder::steps`), for a warehouse count whose data fits in the pool and one whose data is a
//! few times the pool.
//!
//! Each warehouse count is loaded once (without a log, flushed and closed), and every step runs
//! on its own copy of the loaded files, so every step starts from the same data: TPC-C inserts
//! orders and deletes new orders, and a step that ran on what the step before it left would
//! measure a bigger database. After each step the consistency checks run on the step's copy,
//! and their verdict is part of the step's row.
//!
//! `posix` is the vmcache-style baseline: one task (one transaction at a time), blocking reads,
//! eviction writes batched; the other steps run the ladder's tasks (128 by default).

use super::report::TpccRunReport;
use super::run::{check_pool, run, TpccRunSpec, TX_KINDS};
use super::{check, load, open_loaded, LockRelease, TpccScale, TxKind};
use crate::error::{BenchError, BenchSetting, Result};
use crate::ladder::steps::step_config;
use crate::ladder::workload::{db_options, evict_batch};
use crate::ladder::LadderOpts;
use ringdb::LocalDb;
use ringdb::{Durability, Isolation};
use ringdb_io::{EngineKind, IoConfig};
use ringdb_lab::host::Host;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The steps of Fig. 6, in the paper's order.
pub const TPCC_STEPS: &[&str] = &[
    "posix",
    "libaio-async",
    "+async",
    "+batch-submit",
    "+regbufs",
    "+passthrough",
    "+iopoll",
    "+sqpoll",
];

/// Data over pool the out-of-memory warehouse count aims at when it is not given.
pub const OUT_OF_MEMORY_RATIO: f64 = 3.5;

/// What `ringdb tpcc --ladder` runs.
#[derive(Clone, Debug)]
pub struct TpccLadderOpts {
    /// A directory for the loaded databases and the steps' copies.
    pub dir: PathBuf,
    /// The small population ([`TpccScale::small`]) instead of the standard one.
    pub small: bool,
    /// The warehouse count that fits in the pool (1).
    pub warehouses: u32,
    /// The warehouse count whose data is a few times the pool (`None`: computed from the
    /// loaded size of `warehouses` so that the data is [`OUT_OF_MEMORY_RATIO`] pools;
    /// `Some(0)`: no out-of-memory group).
    pub warehouses_out: Option<u32>,
    /// Page size in bytes.
    pub page_size: usize,
    /// Buffer pool, in pages.
    pub pool_pages: usize,
    /// Concurrent tasks of the asynchronous steps.
    pub tasks: usize,
    /// Time each step runs before it is measured.
    pub warmup: Duration,
    /// Measured time per step.
    pub duration: Duration,
    /// Stop each measured phase after this many transactions (for tests).
    pub max_transactions: Option<u64>,
    /// Only these steps (names from [`TPCC_STEPS`]).
    pub steps: Option<Vec<String>>,
    /// CPU for the engine's thread; SQPOLL's poller gets another.
    pub cpu: Option<u32>,
    /// Seed of the transactions' random choices.
    pub seed: u64,
    /// The log of every step: `Off` (no log, as in the paper) or a mode with a log and group
    /// commit, whose databases are loaded with a log (in their own directories).
    pub durability: Durability,
    /// NewOrder and Payment prefetch their rows before they lock (see `TpccRunSpec`).
    pub prefetch: bool,
    /// Progress bars on stderr.
    pub progress: bool,
}

impl TpccLadderOpts {
    /// The paper's setup in `dir`: W=1 and a computed out-of-memory W, 4 KiB pages, a pool of
    /// 64 Ki pages (256 MiB), 128 tasks, 2 s of warm-up and 8 s per step.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        TpccLadderOpts {
            dir: dir.into(),
            small: false,
            warehouses: 1,
            warehouses_out: None,
            page_size: 4096,
            pool_pages: 64 << 10,
            tasks: 128,
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(8),
            max_transactions: None,
            steps: None,
            cpu: None,
            seed: 42,
            durability: Durability::Off,
            prefetch: true,
            progress: false,
        }
    }

    /// The directory of the loaded database of `warehouses` (a database with a log is
    /// loaded apart: one made without a log cannot be opened with one).
    fn loaded_dir(&self, warehouses: u32) -> PathBuf {
        match self.durability {
            Durability::Off => self.dir.join(format!("w{warehouses}")),
            _ => self.dir.join(format!("w{warehouses}-log")),
        }
    }

    /// The database options of a step (or the load) with this ladder's durability.
    fn with_durability(&self, mut options: ringdb::Options) -> ringdb::Options {
        options.durability = self.durability;
        options.group_commit = true;
        options
    }

    /// The population of `warehouses` warehouses at this ladder's scale.
    pub fn scale(&self, warehouses: u32) -> TpccScale {
        if self.small {
            TpccScale::small(warehouses)
        } else {
            TpccScale::standard(warehouses)
        }
    }

    /// The YCSB ladder's options for a step on `target`: its step configurations come from
    /// there, with this ladder's tasks, pool and CPU.
    fn ladder_opts(&self, target: &Path) -> LadderOpts {
        let mut opts = LadderOpts::new(target);
        opts.page_size = self.page_size;
        opts.pool_pages = self.pool_pages;
        opts.tasks = self.tasks;
        opts.cpu = self.cpu;
        opts.progress = self.progress;
        opts
    }
}

/// One step of one warehouse count.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TpccStep {
    /// The step's name, from [`TPCC_STEPS`].
    pub name: String,
    /// `"ok"`, `"unsupported here: <reason>"` or `"failed: <error>"`.
    pub status: String,
    /// Concurrent tasks the step ran.
    pub tasks: usize,
    /// Transactions committed per second.
    pub tx_per_s: f64,
    /// NewOrders committed per minute.
    pub tpmc: f64,
    /// Page reads (faults) per transaction.
    pub faults_per_tx: f64,
    /// Page reads and writes per transaction.
    pub ios_per_tx: f64,
    /// CPU cycles of the whole process per transaction.
    pub cycles_per_tx: f64,
    /// Kernel entries per transaction.
    pub enters_per_tx: f64,
    /// With a log: log syncs per transaction and commits per sync (0 without one).
    pub log_syncs_per_tx: f64,
    pub commits_per_log_sync: f64,
    /// Attempts that lost a conflict (retried) over attempts.
    pub conflict_rate: f64,
    /// NewOrders rolled back (invalid item) over NewOrders finished.
    pub rollback_rate: f64,
    /// Median and 99th percentile latency per transaction type, microseconds.
    pub latencies: Vec<TypeLatency>,
    /// Throughput over `posix`'s in the same warehouse count (0: posix did not run).
    pub speedup_posix: f64,
    /// Whether the consistency checks passed on the step's data afterwards (`None`: the step
    /// did not run).
    pub checks_passed: Option<bool>,
    /// The first violations the checks found.
    pub check_violations: Vec<String>,
    /// The whole measured run.
    #[serde(skip)]
    pub run: Option<TpccRunReport>,
}

/// A transaction type's latency in a step.
#[derive(Clone, Debug, Serialize)]
pub struct TypeLatency {
    /// The type.
    pub kind: TxKind,
    /// Median, microseconds.
    pub p50_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
}

/// The steps of one warehouse count.
#[derive(Clone, Debug, Serialize)]
pub struct WarehouseGroup {
    /// Warehouses.
    pub warehouses: u32,
    /// Pages the loaded data takes.
    pub data_pages: u64,
    /// Data pages over pool pages.
    pub data_over_pool: f64,
    /// Seconds the load took (0: a database loaded before was reused).
    pub load_secs: f64,
    /// The steps, in the order they ran.
    pub steps: Vec<TpccStep>,
}

/// What `ringdb tpcc --ladder` reports.
#[derive(Clone, Debug, Serialize)]
pub struct TpccLadderReport {
    /// The directory, as given.
    pub dir: String,
    /// Whether the small population ran.
    pub small: bool,
    /// Page size in bytes.
    pub page_size: usize,
    /// Buffer pool in pages.
    pub pool_pages: usize,
    /// Tasks of the asynchronous steps.
    pub tasks: usize,
    /// The steps' durability (`off`: no log, as in the paper).
    pub durability: String,
    /// Whether NewOrder and Payment prefetched their rows.
    pub prefetch: bool,
    /// One group per warehouse count: in memory first, then out of memory.
    pub groups: Vec<WarehouseGroup>,
    /// The machine it ran on.
    pub host: Host,
}

/// Runs the ladder: the in-memory warehouse count, then the out-of-memory one.
pub fn run_ladder(opts: &TpccLadderOpts, progress: &dyn Fn(&str)) -> Result<TpccLadderReport> {
    let names = selected_steps(opts)?;
    check_pool(&opts.scale(1), opts.page_size, opts.pool_pages, opts.tasks)?;
    std::fs::create_dir_all(&opts.dir)
        .map_err(|source| copy_error(&opts.dir, &opts.dir, source))?;
    let mut groups = vec![run_group(opts, opts.warehouses, &names, progress)?];
    let out = match opts.warehouses_out {
        Some(w) => w,
        None => out_of_memory_warehouses(opts, &groups[0]),
    };
    if out > 0 && out != opts.warehouses {
        groups.push(run_group(opts, out, &names, progress)?);
    }
    Ok(TpccLadderReport {
        dir: opts.dir.display().to_string(),
        small: opts.small,
        page_size: opts.page_size,
        pool_pages: opts.pool_pages,
        tasks: opts.tasks,
        durability: opts.durability.to_string(),
        prefetch: opts.prefetch,
        groups,
        host: Host::current(),
    })
}

/// The steps asked for (all of [`TPCC_STEPS`] by default), each checked to be one of them.
fn selected_steps(opts: &TpccLadderOpts) -> Result<Vec<String>> {
    let names: Vec<String> = match &opts.steps {
        Some(s) => s.clone(),
        None => TPCC_STEPS.iter().map(|s| s.to_string()).collect(),
    };
    if let Some(unknown) = names.iter().find(|n| !TPCC_STEPS.contains(&n.as_str())) {
        return Err(BenchError::Unknown {
            setting: BenchSetting::Step,
            value: unknown.clone(),
            one_of: TPCC_STEPS,
        });
    }
    Ok(names)
}

/// Warehouses whose data is [`OUT_OF_MEMORY_RATIO`] pools, from the pages per warehouse of
/// the in-memory group (its ITEM table, shared by all warehouses, counted in each: a slight
/// overestimate of a warehouse's pages, so the ratio comes out a little under the aim).
fn out_of_memory_warehouses(opts: &TpccLadderOpts, in_memory: &WarehouseGroup) -> u32 {
    let per_warehouse = in_memory.data_pages as f64 / in_memory.warehouses.max(1) as f64;
    let aim = OUT_OF_MEMORY_RATIO * opts.pool_pages as f64 / per_warehouse.max(1.0);
    (aim.ceil() as u32).max(opts.warehouses + 1)
}

/// Loads `warehouses` (or reuses their earlier load) and runs every step on a copy of it.
fn run_group(
    opts: &TpccLadderOpts,
    warehouses: u32,
    names: &[String],
    progress: &dyn Fn(&str),
) -> Result<WarehouseGroup> {
    let loaded = opts.loaded_dir(warehouses);
    let (data_pages, load_secs) = load_once(opts, warehouses, &loaded, progress)?;
    let mut steps = Vec::with_capacity(names.len());
    for name in names {
        progress(&format!("W={warehouses} {name}"));
        steps.push(run_step(opts, name, &loaded, warehouses));
    }
    set_speedups(&mut steps);
    Ok(WarehouseGroup {
        warehouses,
        data_pages,
        data_over_pool: data_pages as f64 / opts.pool_pages.max(1) as f64,
        load_secs,
        steps,
    })
}

/// The load's database options: the ladder's pages, pool and durability, `auto` I/O.
fn load_options(opts: &TpccLadderOpts, loaded: &Path, fresh: bool) -> ringdb::Options {
    let ladder = opts.ladder_opts(loaded);
    let io = IoConfig {
        queue_depth: 128,
        ..IoConfig::new(EngineKind::Auto)
    };
    opts.with_durability(db_options(&ladder, io, evict_batch(&ladder), fresh))
}

/// Loads `warehouses` into `loaded` unless a database of that scale is there already.
/// Returns the data's pages and the seconds the load took (0 when reused).
fn load_once(
    opts: &TpccLadderOpts,
    warehouses: u32,
    loaded: &Path,
    progress: &dyn Fn(&str),
) -> Result<(u64, f64)> {
    let scale = opts.scale(warehouses);
    if loaded.join(ringdb::DATA_FILE).exists() {
        if let Ok(mut db) = LocalDb::open(loaded, load_options(opts, loaded, false)) {
            if open_loaded(&mut db).is_ok_and(|(_, found, _)| found == scale) {
                progress(&format!(
                    "W={warehouses}: reusing the database loaded in {}",
                    loaded.display()
                ));
                let pages = db.stats().pages;
                db.close()?;
                return Ok((pages, 0.0));
            }
        }
    }
    progress(&format!("W={warehouses}: loading {scale}"));
    let started = Instant::now();
    let mut db = LocalDb::open(loaded, load_options(opts, loaded, true))?;
    load(&mut db, &scale, opts.progress)?;
    let pages = db.stats().pages;
    db.close()?;
    Ok((pages, started.elapsed().as_secs_f64()))
}

/// One step on its own copy of the loaded data; a step the target cannot run, or one that
/// fails, is reported with its reason.
fn run_step(opts: &TpccLadderOpts, name: &str, loaded: &Path, warehouses: u32) -> TpccStep {
    let config = match step_config(name, &opts.ladder_opts(loaded)) {
        Ok(config) => config,
        Err(why) => return TpccStep::not_run(name, format!("unsupported here: {why}")),
    };
    // vmcache's baseline evicts in batches too; only its reads block the one task.
    let batch = if name == "posix" {
        evict_batch(&opts.ladder_opts(loaded))
    } else {
        config.evict_batch
    };
    let copy = opts.dir.join(format!("w{warehouses}-step"));
    let outcome = copy_database(loaded, &copy)
        .and_then(|()| measure_step(opts, name, &copy, config.io, config.tasks, batch));
    let _ = std::fs::remove_dir_all(&copy);
    outcome.unwrap_or_else(|e| TpccStep::not_run(name, format!("failed: {e}")))
}

/// Warms the step's copy up, measures it, then runs the consistency checks on it.
fn measure_step(
    opts: &TpccLadderOpts,
    name: &str,
    copy: &Path,
    io: IoConfig,
    tasks: usize,
    batch: usize,
) -> Result<TpccStep> {
    let options = opts.with_durability(db_options(&opts.ladder_opts(copy), io, batch, false));
    let mut db = LocalDb::open(copy, options)?;
    let (tables, scale, constants) = open_loaded(&mut db)?;
    let mut spec = TpccRunSpec {
        tasks,
        duration: opts.warmup,
        max_transactions: opts.max_transactions,
        isolation: Isolation::Serializable,
        lock_release: LockRelease::Early,
        delivery_per_district: true,
        stock_level_read_committed: true,
        prefetch: opts.prefetch,
        seed: opts.seed,
        progress: false,
        label: format!("W={} {name} warm-up", scale.warehouses),
    };
    run(&mut db, &tables, &scale, &constants, &spec)?;
    spec.duration = opts.duration;
    spec.seed = opts.seed.wrapping_add(1);
    spec.progress = opts.progress;
    spec.label = format!("W={} {name}", scale.warehouses);
    let report = run(&mut db, &tables, &scale, &constants, &spec)?;
    let checks = check(&mut db, &tables, &scale)?;
    db.close()?;
    let violations = checks
        .conditions
        .iter()
        .flat_map(|c| {
            c.violations
                .iter()
                .map(move |v| format!("condition {}: {v}", c.number))
        })
        .take(5)
        .collect();
    Ok(TpccStep::measured(
        name,
        report,
        checks.passed(),
        violations,
    ))
}

impl TpccStep {
    /// A step that did not run (or did not finish), with `status` saying why.
    fn not_run(name: &str, status: String) -> TpccStep {
        TpccStep {
            name: name.into(),
            status,
            ..TpccStep::default()
        }
    }

    /// A step that ran: what its measured run reported and the checks' verdict after it.
    fn measured(name: &str, r: TpccRunReport, passed: bool, violations: Vec<String>) -> TpccStep {
        let latencies = TX_KINDS
            .iter()
            .filter_map(|&kind| r.of(kind))
            .map(|t| TypeLatency {
                kind: t.kind,
                p50_us: t.lat_us.p50,
                p99_us: t.lat_us.p99,
            })
            .collect();
        TpccStep {
            name: name.into(),
            status: "ok".into(),
            tasks: r.tasks,
            tx_per_s: r.tx_per_s,
            tpmc: r.tpmc,
            faults_per_tx: r.faults_per_tx,
            ios_per_tx: r.ios_per_tx,
            cycles_per_tx: r.cycles_per_tx,
            enters_per_tx: r.enters_per_tx,
            log_syncs_per_tx: r.log_syncs_per_tx,
            commits_per_log_sync: r.commits_per_log_sync,
            conflict_rate: r.conflict_rate(),
            rollback_rate: r.rollback_rate(),
            latencies,
            speedup_posix: 0.0,
            checks_passed: Some(passed),
            check_violations: violations,
            run: Some(r),
        }
    }
}

/// Each measured step's throughput over `posix`'s.
fn set_speedups(steps: &mut [TpccStep]) {
    let posix = steps
        .iter()
        .find(|s| s.name == "posix" && s.status == "ok")
        .map(|s| s.tx_per_s);
    if let Some(posix) = posix.filter(|&p| p > 0.0) {
        for s in steps.iter_mut().filter(|s| s.status == "ok") {
            s.speedup_posix = s.tx_per_s / posix;
        }
    }
}

/// Copies the files of the database in `from` into a fresh directory `to`.
fn copy_database(from: &Path, to: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).map_err(|source| copy_error(from, to, source))?;
    let entries = std::fs::read_dir(from).map_err(|source| copy_error(from, to, source))?;
    for entry in entries {
        let entry = entry.map_err(|source| copy_error(from, to, source))?;
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            let target = to.join(entry.file_name());
            std::fs::copy(entry.path(), &target)
                .map_err(|source| copy_error(&entry.path(), &target, source))?;
        }
    }
    Ok(())
}

/// The error for a copy of the loaded data that failed.
fn copy_error(from: &Path, to: &Path, source: std::io::Error) -> BenchError {
    BenchError::CopyData {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        source,
    }
}
