//! `ringdb tpcc`: TPC-C on an embedded database. Loads the population (once, or with
//! `--load`), runs the five transactions with many tasks, and ends every run with the
//! consistency checks of clause 3.3.2 (the exit status is 1 when they fail); `--check` runs
//! only the checks, `--ladder` the paper's Fig. 6.

use crate::ycsb_cmd::CmdResult;
use clap::Args;
use ringdb::{Durability, LocalDb, Options};
use ringdb_bench::tpcc::Isolation;
use ringdb_bench::tpcc::{
    self, check_loaded_scale, check_pool, every_type_ran, CheckReport, LockRelease, TpccLadderOpts,
    TpccRunSpec, TpccScale,
};
use ringdb_bench::units::{parse_duration, parse_size};
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct TpccArgs {
    /// Database directory (with --ladder: the directory of the loaded databases and the
    /// steps' copies).
    #[arg(long, default_value = "ringdb-data/tpcc")]
    pub(crate) path: PathBuf,
    /// Warehouses (default: those of the database there, or 1 for a new one).
    #[arg(long)]
    pub(crate) warehouses: Option<u32>,
    /// The small population (1,000 items, 30 customers per district), for quick runs.
    #[arg(long)]
    pub(crate) small: bool,
    /// Buffer pool size.
    #[arg(long, default_value = "256M")]
    pub(crate) pool: String,
    #[arg(long, default_value = "4k")]
    pub(crate) page_size: String,
    /// Spread the warehouses over this many shards (a thread each, pinned, with its own ring,
    /// pool slice and trees); a transaction that reaches another shard's warehouse runs a
    /// part there. A database made with shards keeps its count. With a log, a transaction
    /// whose writes span shards commits through the cross-shard batch log (all or nothing
    /// across a crash).
    #[arg(long, conflicts_with = "ladder")]
    pub(crate) shards: Option<usize>,
    /// Concurrent tasks (each runs one transaction at a time; with --shards, in all): the
    /// paper's 128, say. Without it (and without --terminals-per-warehouse) a run has the
    /// spec's 10 terminals per warehouse, and the ladder the paper's 128 tasks.
    #[arg(long, conflicts_with = "terminals_per_warehouse")]
    pub(crate) tasks: Option<usize>,
    /// Tasks per warehouse (TPC-C's terminals, each homed at its warehouse; the spec has 10):
    /// --tasks is then this times the warehouses.
    #[arg(long)]
    pub(crate) terminals_per_warehouse: Option<usize>,
    /// How long the run lasts (with --ladder: each step's measured time).
    #[arg(long, default_value = "10s")]
    pub(crate) duration: String,
    /// Stop after this many transactions (with --ladder: per step).
    #[arg(long, hide = true)]
    pub(crate) max_transactions: Option<u64>,
    /// Start from an empty database and load it (default: load only when there is none).
    #[arg(long)]
    pub(crate) load: bool,
    /// Only run the consistency checks on the database there.
    #[arg(long, conflicts_with_all = ["load", "ladder"])]
    pub(crate) check: bool,
    /// The paper's Fig. 6: the I/O steps for W=--warehouses (fits in the pool) and an
    /// out-of-memory W.
    #[arg(long)]
    pub(crate) ladder: bool,
    /// With --ladder: only these steps (comma-separated: posix, libaio-async, +async,
    /// +batch-submit, +regbufs, +passthrough, +iopoll, +sqpoll).
    #[arg(long, value_delimiter = ',')]
    pub(crate) steps: Option<Vec<String>>,
    /// With --ladder: the out-of-memory warehouse count (default: data 3.5 times the pool,
    /// from W=1's loaded size; 0: none).
    #[arg(long)]
    pub(crate) warehouses_out: Option<u32>,
    /// With --ladder: warm-up per step.
    #[arg(long, default_value = "2s")]
    pub(crate) warmup: String,
    /// With --ladder: pin the engine's thread to this CPU; SQPOLL gets another.
    #[arg(long)]
    pub(crate) cpu: Option<u32>,
    /// off (no log, as in the paper) | fdatasync (group commit) | none | thread | odsync.
    /// Default: off, or fdatasync for a database that has a log (so that it is recovered).
    /// With --ladder: every step's log (default off); a database with a log is loaded apart
    /// (wN-log).
    #[arg(long)]
    pub(crate) durability: Option<String>,
    /// posix | libaio | uring-sync | uring | auto
    #[arg(long, default_value = "uring")]
    pub(crate) engine: String,
    /// each | adaptive | fixed(N)
    #[arg(long, default_value = "adaptive")]
    pub(crate) batch: String,
    /// Registered buffers (the buffer pool's frames).
    #[arg(long)]
    pub(crate) fixedbufs: bool,
    /// serializable | off (no locks: shows what goes wrong without concurrency control).
    #[arg(long, default_value = "serializable", hide = true)]
    pub(crate) isolation: String,
    /// With a log, release a transaction's locks only after its commit is durable (strict
    /// two-phase locking across the sync) instead of once its writes are applied.
    #[arg(long, hide = true)]
    pub(crate) hold_locks_until_durable: bool,
    /// Run each Delivery as one transaction over its ten districts instead of one transaction
    /// per district (clause 2.7 allows either).
    #[arg(long, hide = true)]
    pub(crate) delivery_one_transaction: bool,
    /// Run StockLevel serializable too, instead of at read committed (clause 2.8.2.3).
    #[arg(long, hide = true)]
    pub(crate) stock_level_serializable: bool,
    /// Do not prefetch NewOrder's and Payment's rows before they lock (each read faults
    /// on its own, locks held).
    #[arg(long, hide = true)]
    pub(crate) no_prefetch: bool,
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Also write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// With --ladder: draw tx/s per step for each warehouse count as an SVG chart here.
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) plot: Option<PathBuf>,
}

/// Runs `ringdb tpcc`; `Ok(false)` when the consistency checks failed.
pub fn run(a: TpccArgs) -> CmdResult<bool> {
    let settings = Settings::parse(&a)?;
    if a.ladder {
        return run_ladder(&a, &settings);
    }
    if a.shards.is_some() || a.path.join(ringdb::MANIFEST_FILE).exists() {
        return crate::tpcc_shards::run(&a, &settings);
    }
    let has_database = holds_a_database(&a.path);
    if a.check && !has_database {
        return Err(format!("{} holds no database to check", a.path.display()).into());
    }
    let load_report = if a.load || !has_database {
        Some(load(&a, &settings)?)
    } else {
        None
    };
    let mut db = LocalDb::open(&a.path, settings.options(&a, false)?)?;
    crate::ycsb_cmd::warn_fallbacks(&db.stats().io);
    let (tables, scale, constants) = tpcc::open_loaded(&mut db)?;
    if let Some(w) = a.warehouses {
        check_loaded_scale(&scale, &settings.scale(w))?;
    }
    if a.check {
        let checks = tpcc::check(&mut db, &tables, &scale)?;
        db.close()?;
        print_checks(&checks);
        write_json(
            &a.json,
            &json!({ "scale": scale, "checks": checks_json(&checks) }),
        )?;
        return Ok(checks.passed());
    }
    eprintln!(
        "tpcc: {scale}, {} tasks, {:?}",
        a.tasks_for(scale.warehouses),
        settings.duration
    );
    let spec = run_spec(&a, &settings, scale.warehouses);
    let report = tpcc::run(&mut db, &tables, &scale, &constants, &spec)?;
    let checks = tpcc::check(&mut db, &tables, &scale)?;
    let stats = db.stats();
    db.close()?;
    print_run(&report, &checks);
    let document = json!({
        "scale": scale,
        "load": load_report,
        "run": report,
        "checks": checks_json(&checks),
        "durability": stats.durability,
        "engine_in_effect": stats.io,
        "host": ringdb_lab::host::Host::current(),
    });
    write_json(&a.json, &document)?;
    Ok(checks.passed())
}

/// The tasks of a run the spec's way: 10 terminals per warehouse.
const TERMINALS_PER_WAREHOUSE: usize = 10;
/// The tasks of each ladder step: the paper's.
const LADDER_TASKS: usize = 128;

impl TpccArgs {
    /// The tasks of a run over `warehouses`: `--tasks`, else `--terminals-per-warehouse`
    /// (default [`TERMINALS_PER_WAREHOUSE`]) times the warehouses.
    pub(crate) fn tasks_for(&self, warehouses: u32) -> usize {
        let terminals = self
            .terminals_per_warehouse
            .unwrap_or(TERMINALS_PER_WAREHOUSE);
        self.tasks
            .unwrap_or(terminals.saturating_mul(warehouses.max(1) as usize))
            .max(1)
    }
}

/// The run the arguments ask for, over `warehouses`.
pub(crate) fn run_spec(a: &TpccArgs, settings: &Settings, warehouses: u32) -> TpccRunSpec {
    TpccRunSpec {
        tasks: a.tasks_for(warehouses),
        duration: settings.duration,
        max_transactions: a.max_transactions,
        isolation: settings.isolation,
        lock_release: if a.hold_locks_until_durable {
            LockRelease::AfterSync
        } else {
            LockRelease::Early
        },
        delivery_per_district: !a.delivery_one_transaction,
        stock_level_read_committed: !a.stock_level_serializable,
        prefetch: !a.no_prefetch,
        seed: a.seed,
        progress: std::io::stderr().is_terminal(),
        label: "tpcc".into(),
    }
}

/// The arguments parsed and checked.
pub(crate) struct Settings {
    pub(crate) small: bool,
    pub(crate) page_size: usize,
    pub(crate) pool_pages: usize,
    pub(crate) duration: std::time::Duration,
    pub(crate) isolation: Isolation,
    engine: EngineKind,
    batching: Batching,
}

impl Settings {
    fn parse(a: &TpccArgs) -> CmdResult<Settings> {
        let page_size = parse_size(&a.page_size)? as usize;
        let isolation = match a.isolation.as_str() {
            "serializable" => Isolation::Serializable,
            "read-committed" => Isolation::ReadCommitted,
            "off" => Isolation::Off,
            other => {
                return Err(format!(
                    "unknown isolation {other:?}; one of: serializable, read-committed, off"
                )
                .into())
            }
        };
        if let Some(w) = a.warehouses {
            TpccScale::small(w).validate()?;
        }
        Ok(Settings {
            small: a.small,
            page_size,
            pool_pages: parse_size(&a.pool)? as usize / page_size.max(1),
            duration: parse_duration(&a.duration)?,
            isolation,
            engine: a.engine.parse()?,
            batching: a.batch.parse()?,
        })
    }

    /// The population of `warehouses` at the scale asked for.
    pub(crate) fn scale(&self, warehouses: u32) -> TpccScale {
        if self.small {
            TpccScale::small(warehouses)
        } else {
            TpccScale::standard(warehouses)
        }
    }

    /// The database's options: the I/O flags, and the durability asked for (or, not asked,
    /// `off` for a new database and `fdatasync` for one that has a log, so that opening it
    /// recovers what the log holds). `fresh`: the load, without a log unless one is asked for
    /// (a database made without a log cannot be opened with one later).
    pub(crate) fn options(&self, a: &TpccArgs, fresh: bool) -> CmdResult<Options> {
        let durability = match (&a.durability, fresh) {
            (Some(mode), _) => mode.parse()?,
            (None, true) => Durability::Off,
            (None, false) if a.path.join(ringdb::WAL_FILE).exists() => Durability::Fdatasync,
            (None, false) => Durability::Off,
        };
        Ok(Options {
            page_size: self.page_size,
            pool_pages: self.pool_pages,
            io: IoConfig {
                queue_depth: a.tasks_for(a.warehouses.unwrap_or(1)).clamp(8, 256) as u32,
                batching: self.batching,
                fixed_buffers: a.fixedbufs,
                setup: if self.engine.accepts_uring_switches() {
                    SetupMode::Defer
                } else {
                    SetupMode::Default
                },
                ..IoConfig::new(self.engine)
            },
            fresh,
            durability,
            group_commit: true,
            ..Options::default()
        })
    }
}

/// Loads a fresh database at the scale asked for (after checking the pool holds its hot set),
/// flushes and closes it.
fn load(a: &TpccArgs, settings: &Settings) -> CmdResult<Value> {
    let scale = settings.scale(a.warehouses.unwrap_or(1));
    scale.validate()?;
    let tasks = a.tasks_for(scale.warehouses);
    check_pool(&scale, settings.page_size, settings.pool_pages, tasks)?;
    eprintln!("tpcc: loading {scale}");
    let mut db = LocalDb::open(&a.path, settings.options(a, true)?)?;
    let started = std::time::Instant::now();
    let (_, report) = tpcc::load(&mut db, &scale, std::io::stderr().is_terminal())?;
    db.close()?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!("tpcc: loaded in {secs:.1} s");
    Ok(json!({ "secs": secs, "report": report }))
}

/// `--ladder`: Fig. 6, printed as a table, with `--json` and `--plot`; `Ok(false)` when the
/// checks failed after a step.
fn run_ladder(a: &TpccArgs, settings: &Settings) -> CmdResult<bool> {
    let mut opts = TpccLadderOpts::new(&a.path);
    opts.small = a.small;
    opts.warehouses = a.warehouses.unwrap_or(1);
    opts.warehouses_out = a.warehouses_out;
    opts.page_size = settings.page_size;
    opts.pool_pages = settings.pool_pages;
    opts.tasks = match (a.tasks, a.terminals_per_warehouse) {
        (None, None) => LADDER_TASKS,
        _ => a.tasks_for(opts.warehouses),
    };
    opts.warmup = parse_duration(&a.warmup)?;
    opts.duration = settings.duration;
    opts.max_transactions = a.max_transactions;
    opts.steps = a.steps.clone();
    opts.cpu = a.cpu;
    opts.seed = a.seed;
    opts.prefetch = !a.no_prefetch;
    if let Some(mode) = &a.durability {
        opts.durability = mode.parse()?;
    }
    opts.progress = std::io::stderr().is_terminal();
    let progress = |s: &str| eprintln!("tpcc ladder: {s}");
    let report = tpcc::run_ladder(&opts, &progress)?;
    print!("{}", tpcc::ladder_table(&report));
    write_json(&a.json, &serde_json::to_value(&report)?)?;
    if let Some(path) = &a.plot {
        ringdb_bench::report::write_file(path, &tpcc::ladder_svg(&report))?;
        eprintln!("tpcc ladder: chart written to {}", path.display());
    }
    let failed = report
        .groups
        .iter()
        .flat_map(|g| &g.steps)
        .any(|s| s.checks_passed == Some(false));
    Ok(!failed)
}

/// A run's report, then its checks.
pub(crate) fn print_run(report: &tpcc::TpccRunReport, checks: &CheckReport) {
    print!("{}", report.text());
    if !every_type_ran(report) {
        println!("  (not every transaction type ran: a longer run draws them all)");
    }
    print_checks(checks);
}

/// The checks, one line per condition, then the verdict.
pub(crate) fn print_checks(checks: &CheckReport) {
    println!("consistency checks (clause 3.3.2):");
    for c in &checks.conditions {
        let verdict = if c.passed { "passed" } else { "FAILED" };
        println!("  condition {} ({}): {verdict}", c.number, c.name);
        for v in c.violations.iter().take(3) {
            println!("    {v}");
        }
    }
    println!(
        "checks: {}",
        if checks.passed() { "passed" } else { "FAILED" }
    );
}

/// The checks as JSON.
pub(crate) fn checks_json(checks: &CheckReport) -> Value {
    let conditions: Vec<Value> = checks
        .conditions
        .iter()
        .map(|c| {
            json!({
                "number": c.number,
                "name": c.name,
                "passed": c.passed,
                "violations": c.violations,
            })
        })
        .collect();
    json!({ "passed": checks.passed(), "conditions": conditions })
}

/// With `--json FILE`: `document` there.
pub(crate) fn write_json(path: &Option<PathBuf>, document: &Value) -> CmdResult {
    if let Some(p) = path {
        let text = serde_json::to_string_pretty(document)?;
        std::fs::write(p, text + "\n").map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Whether `path` holds a database (its data file).
fn holds_a_database(path: &Path) -> bool {
    path.join(ringdb::DATA_FILE).exists()
}
