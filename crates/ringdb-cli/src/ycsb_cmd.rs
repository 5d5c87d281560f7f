//! `ringdb ycsb`: a YCSB workload (A-F, or update-only) on an embedded database.

use crate::config_flags::given_on_command_line;
use clap::{ArgMatches, Args};
use ringdb::{DbStats, LocalDb, Options};
use ringdb_bench::config::ConfigFile;
use ringdb_bench::units::{parse_duration, parse_size};
use ringdb_bench::ycsb::{self, Distribution, OpGenerator, PhaseReport, RunSpec, Workload};
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode};
use ringdb_lab::interrupts::{InterruptCounts, InterruptWatch};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args)]
pub struct YcsbArgs {
    /// Database directory (or a file or block device).
    #[arg(long, default_value = "ringdb-data/ycsb")]
    pub(crate) db: PathBuf,
    /// Shards of a sharded, thread-per-core database (one thread and ring each); `--tasks` is
    /// then per shard. Without it: one shard on this thread (a sharded database is opened
    /// with its own count).
    #[arg(long)]
    shards: Option<usize>,
    /// With shards: user threads calling the blocking API (0: tasks on the shards).
    #[arg(long, default_value_t = 0)]
    pub(crate) clients: usize,
    /// With clients: keys per multi-get (1: one get per call).
    #[arg(long, default_value_t = 1)]
    pub(crate) multi_get: usize,
    /// With clients: the client threads' scheduling policy, batch (their wake-ups do not
    /// preempt the shards) | normal
    #[arg(long, default_value = "batch", value_parser = ["batch", "normal"])]
    pub(crate) client_sched: String,
    /// With clients: microseconds a blocking call spins for its reply before it parks.
    #[arg(long)]
    pub(crate) spin_us: Option<u64>,
    /// a | b | c | d | e | f | update-only
    #[arg(long, default_value = "a")]
    pub(crate) workload: String,
    /// uniform | zipfian (theta 0.99); workload d always reads the latest keys.
    #[arg(long, default_value = "zipfian")]
    pub(crate) distribution: String,
    /// Records loaded (keys 0..N, 8 bytes each).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) records: u64,
    #[arg(long, default_value_t = 128)]
    pub(crate) value_size: usize,
    /// Concurrent tasks (each runs one operation at a time).
    #[arg(long, default_value_t = 128)]
    pub(crate) tasks: usize,
    #[arg(long, default_value = "10s")]
    runtime: String,
    /// The mix runs this long before the measured run, unmeasured (other keys from the same
    /// distribution): the pool fills, its memory is faulted in, evictions reach their steady
    /// state. Out of memory, a cold start adds a few percent to the cycles per operation.
    #[arg(long, default_value = "0s")]
    pub(crate) warmup: String,
    /// Buffer pool size.
    #[arg(long, default_value = "64M")]
    pool: String,
    #[arg(long, default_value = "4k")]
    page_size: String,
    /// posix | libaio | uring-sync | uring | auto (io_uring where it works here, else libaio
    /// or posix; the report says which ran)
    #[arg(long, default_value = "uring")]
    pub(crate) engine: String,
    /// each | adaptive | fixed(N)
    #[arg(long, default_value = "adaptive")]
    batch: String,
    /// Registered buffers (the buffer pool's frames).
    #[arg(long)]
    fixedbufs: bool,
    /// Pin the database's thread (its ring and io-wq workers), and the model's calibration
    /// runs with it, to this CPU (one shard only). Where the device's completions interrupt
    /// one CPU, the CPU the thread runs on moves the CPU time per operation (measured:
    /// docs/results/issue15-cpu-per-op.md): pin it for figures that are compared.
    #[arg(long)]
    pub(crate) cpu: Option<u32>,
    /// off (no log: the ladder's engine) | none | fdatasync | thread | odsync
    #[arg(long, default_value = "off")]
    durability: String,
    /// With a log: one durability point per commit instead of group commit.
    #[arg(long)]
    no_group_commit: bool,
    /// With a log: may eviction write pages back between checkpoints: auto (in mode none
    /// only) | on | off (only checkpoints write pages: the engine before stealing).
    #[arg(long, default_value = "auto")]
    steal: String,
    /// Start from an empty database and load it (default: load only when it is new).
    #[arg(long)]
    pub(crate) load: bool,
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the JSON report here.
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Skip the cost model's calibration before the run (and its prediction beside it).
    #[arg(long)]
    pub(crate) no_model: bool,
    /// Length of each of the model's three calibration measurements (the mix in memory, page
    /// reads, page writes).
    #[arg(long, default_value = "500ms")]
    pub(crate) model_time: String,
    /// Settings from a configuration file (TOML, as `ringdb advise` writes it): [io] (the
    /// engine and every switch; its queue depth replaces the one derived from --tasks), [db]
    /// (pool, page_size, shards, durability, steal, evict_batch, group_commit, direct) and
    /// [workload] (tasks, value_size, records, ycsb, distribution). A flag given on the
    /// command line overrides the file's value for that one setting; the file overrides the
    /// flags' defaults.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The file's settings, less those the command line overrides.
    #[arg(skip)]
    applied: Option<ConfigFile>,
}

pub(crate) type CmdResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

pub fn run(mut a: YcsbArgs, typed: &ArgMatches) -> CmdResult {
    take_config(&mut a, typed)?;
    let settings = Settings::parse(&a)?;
    if let Some(sharded) = run_sharded(&a, &settings) {
        return sharded;
    }
    let load = a.load || !holds_a_database(&a.db);
    let options = settings.db_options(&a, load)?;
    let (io, steal, group_commit) = (options.io.clone(), options.steal, options.group_commit);
    let mut db = LocalDb::open(&a.db, options)?;
    warn_fallbacks(&db.stats().io);
    let progress = std::io::stderr().is_terminal();
    let load_report = load_or_check(&mut db, &a, load, progress)?;
    let model = crate::ycsb_model::calibrate(&mut db, &a, &settings, io)?;
    // The model prices reads with the run's own verification cost (ycsb_model's docs).
    let timed = matches!(model, crate::ycsb_model::Model::Costs(_));
    db.handle().tree().buffer().time_verification(timed);
    warm_up(&mut db, &a, &settings, progress)?;
    let before = db.stats();
    let (r, interrupts) = measured_run(&mut db, &a, &settings, progress)?;
    let stats = db.stats();
    let durability = durability_summary(
        &before,
        &stats,
        &r,
        group_commit,
        steal.applies_to(stats.durability),
    );
    db.close()?;
    let (model_lines, model_json) = crate::ycsb_model::beside(&model, &r, &a);
    let report = json!({
        "workload": settings.workload,
        "distribution": settings.distribution,
        "records": a.records,
        "value_size": a.value_size,
        "tasks": a.tasks,
        "warmup_secs": settings.warmup.as_secs_f64(),
        "engine": a.engine,
        "engine_in_effect": stats.io,
        "load": load_report,
        "run": r,
        "model": model_json,
        "device_interrupts": interrupts,
        "height": stats.height,
        "pages": stats.pages,
        "durability": durability,
        "memory": stats.memory,
        "host": ringdb_lab::host::Host::current(),
    });
    let text = serde_json::to_string_pretty(&report)?;
    if a.json {
        println!("{text}");
    } else {
        print_table(load_report.as_ref(), &r, &stats, durability.as_ref());
        println!("{}", interrupts_line(interrupts.as_ref(), r.ops, a.cpu));
        model_lines.iter().for_each(|line| println!("{line}"));
    }
    if let Some(p) = &a.output {
        std::fs::write(p, text + "\n").map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}

/// The measured run, with the interrupts the data's device raised meanwhile (`None` where
/// it has none to count).
fn measured_run(
    db: &mut LocalDb,
    a: &YcsbArgs,
    settings: &Settings,
    progress: bool,
) -> CmdResult<(PhaseReport, Option<InterruptCounts>)> {
    let watch = InterruptWatch::start(&ringdb_bench::ycsb_model::data_file(&a.db));
    let label = format!("ycsb-{}", a.workload);
    let r = run_mix(db, a, settings, a.seed, settings.runtime, label, progress)?;
    Ok((r, watch.and_then(|watch| watch.stop())))
}

/// Runs a sharded database (`--shards`, `--clients`, or one that is sharded already); `None`
/// for a single shard.
fn run_sharded(a: &YcsbArgs, settings: &Settings) -> Option<CmdResult> {
    if a.shards.is_none() && a.clients == 0 && !a.db.join(ringdb::MANIFEST_FILE).exists() {
        return None;
    }
    if a.cpu.is_some() {
        return Some(Err(
            "--cpu pins a single shard's thread; a sharded database places \
                         the threads of its shards itself"
                .into(),
        ));
    }
    Some(crate::ycsb_shards::run(a, settings, a.shards))
}

/// Mixed into the seed of the warm-up's generator: it draws other keys than the run.
pub(crate) const WARMUP_SEED: u64 = 0x5741_524D_5550_0001;

/// Names the run, then runs the mix for `--warmup` before it; the warm-up's figures are not
/// reported.
fn warm_up(db: &mut LocalDb, a: &YcsbArgs, settings: &Settings, progress: bool) -> CmdResult {
    eprintln!(
        "ycsb: workload {:?} ({:?}), {} tasks, {:?}",
        settings.workload, settings.distribution, a.tasks, settings.runtime
    );
    if settings.warmup.is_zero() {
        return Ok(());
    }
    eprintln!("ycsb: warming up for {:?}", settings.warmup);
    let seed = a.seed ^ WARMUP_SEED;
    run_mix(
        db,
        a,
        settings,
        seed,
        settings.warmup,
        "warmup".into(),
        progress,
    )?;
    Ok(())
}

/// The workload's mix for `duration` on `a.tasks` tasks, its keys drawn from `seed`.
fn run_mix(
    db: &mut LocalDb,
    a: &YcsbArgs,
    settings: &Settings,
    seed: u64,
    duration: Duration,
    label: String,
    progress: bool,
) -> CmdResult<PhaseReport> {
    let mut gen = OpGenerator::new(settings.workload, settings.distribution, a.records, seed)
        .with_tasks(a.tasks);
    let spec = RunSpec {
        tasks: a.tasks,
        duration,
        value_size: a.value_size,
        max_ops: None,
        progress,
        label,
    };
    Ok(ycsb::run(db, &spec, move |_| Some(gen.next_op()))?)
}

/// The arguments parsed and checked.
pub(crate) struct Settings {
    pub(crate) workload: Workload,
    pub(crate) distribution: Distribution,
    engine: EngineKind,
    batching: Batching,
    page_size: usize,
    pool_pages: usize,
    pub(crate) runtime: Duration,
    pub(crate) warmup: Duration,
}

impl Settings {
    fn parse(a: &YcsbArgs) -> CmdResult<Settings> {
        let workload: Workload = a.workload.parse()?;
        let distribution: Distribution = a.distribution.parse()?;
        let engine: EngineKind = a.engine.parse()?;
        let batching: Batching = a.batch.parse()?;
        let page_size = parse_size(&a.page_size)? as usize;
        let pool_pages = parse_size(&a.pool)? as usize / page_size.max(1);
        let runtime = parse_duration(&a.runtime)?;
        let warmup = parse_duration(&a.warmup)?;
        if a.tasks == 0 || a.tasks > 4096 {
            return Err(format!("--tasks must be in 1..=4096, got {}", a.tasks).into());
        }
        if a.records == 0 {
            return Err("--records must be at least 1".into());
        }
        Ok(Settings {
            workload,
            distribution,
            engine,
            batching,
            page_size,
            pool_pages,
            runtime,
            warmup,
        })
    }

    /// The database's options; `fresh` starts from an empty database.
    pub(crate) fn db_options(&self, a: &YcsbArgs, fresh: bool) -> CmdResult<Options> {
        let mut options = Options {
            page_size: self.page_size,
            pool_pages: self.pool_pages,
            io: IoConfig {
                queue_depth: a.tasks.clamp(8, 256) as u32,
                batching: self.batching,
                fixed_buffers: a.fixedbufs,
                cpu: a.cpu,
                setup: if self.engine.accepts_uring_switches() {
                    SetupMode::Defer
                } else {
                    SetupMode::Default
                },
                ..IoConfig::new(self.engine)
            },
            fresh,
            durability: a.durability.parse()?,
            group_commit: !a.no_group_commit,
            steal: a.steal.parse()?,
            ..Options::default()
        };
        if let Some(file) = &a.applied {
            file.apply_to(&mut options);
        }
        Ok(options)
    }
}

/// With `--config`: the file's settings into `a` (see [`apply_config`]).
fn take_config(a: &mut YcsbArgs, typed: &ArgMatches) -> CmdResult {
    let Some(path) = &a.config else {
        return Ok(());
    };
    let file = crate::config_flags::load(path)?;
    apply_config(a, file, typed)
}

/// Takes `file`'s settings into `a`: each one whose flag was not typed (`typed` says which
/// were). The workload and the shard count go into the arguments; the rest stays in the file,
/// less what the command line overrides, for [`Settings::db_options`] to apply.
fn apply_config(a: &mut YcsbArgs, mut file: ConfigFile, typed: &ArgMatches) -> CmdResult {
    let given = |id: &str| given_on_command_line(typed, id);
    let workload = file.workload.clone();
    if !given("tasks") {
        a.tasks = workload.tasks.unwrap_or(a.tasks);
    }
    if !given("value_size") {
        a.value_size = workload.value_size.unwrap_or(a.value_size);
    }
    if !given("records") {
        a.records = workload.records.unwrap_or(a.records);
    }
    if let (false, Some(ycsb)) = (given("workload"), workload.ycsb) {
        a.workload = ycsb;
    }
    if let (false, Some(distribution)) = (given("distribution"), workload.distribution) {
        a.distribution = distribution;
    }
    let db = &mut file.db;
    if !given("shards") && db.shards.is_some() {
        a.shards = db.shards;
    }
    if given("pool") {
        db.pool_bytes = None;
    }
    if given("page_size") {
        db.page_size_bytes = None;
    }
    if given("durability") {
        db.durability = None;
    }
    if given("steal") {
        db.steal = None;
    }
    if given("no_group_commit") {
        db.group_commit = None;
    }
    if let Some(io) = &mut file.io {
        override_io(a, io, typed)?;
    }
    a.applied = Some(file);
    Ok(())
}

/// The file's `[io]` with the I/O flags typed on the command line over it; the engine's name
/// goes into `a` either way (the report names it).
fn override_io(a: &mut YcsbArgs, io: &mut IoConfig, typed: &ArgMatches) -> CmdResult {
    let given = |id: &str| given_on_command_line(typed, id);
    if given("engine") {
        io.engine = a.engine.parse()?;
    } else {
        a.engine = io.engine.name().to_string();
    }
    if given("batch") {
        io.batching = a.batch.parse()?;
    } else {
        a.batch = io.batching.to_string();
    }
    if given("fixedbufs") {
        io.fixed_buffers = a.fixedbufs;
    }
    Ok(())
}

/// Whether `db` already holds a database: a non-empty file or device, or a directory with a
/// data file.
fn holds_a_database(db: &Path) -> bool {
    std::fs::metadata(db).is_ok_and(|m| !m.is_dir() || m.len() > 0)
        && (!db.is_dir() || db.join(ringdb::DATA_FILE).exists())
}

/// Loads the records into a fresh database (`load`), or checks that the existing one holds
/// them all.
fn load_or_check(
    db: &mut LocalDb,
    a: &YcsbArgs,
    load: bool,
    progress: bool,
) -> CmdResult<Option<PhaseReport>> {
    if load {
        eprintln!("ycsb: loading {} records", a.records);
        let tasks = a.tasks.min(64);
        return Ok(Some(ycsb::load(
            db,
            a.records,
            a.value_size,
            tasks,
            progress,
        )?));
    }
    if db.get(&ycsb::key_bytes(a.records - 1))?.is_none() {
        return Err(format!(
            "{} holds fewer than {} records; run with --load",
            a.db.display(),
            a.records
        )
        .into());
    }
    Ok(None)
}

/// The run's share of the log's and the checkpoints' counters (`None` without a log).
fn durability_summary(
    before: &DbStats,
    after: &DbStats,
    r: &PhaseReport,
    group_commit: bool,
    steal: bool,
) -> Option<Value> {
    let (Some(w0), Some(w1), Some(c0), Some(c1)) =
        (before.wal, after.wal, before.checkpoints, after.checkpoints)
    else {
        return None;
    };
    let commits = w1.records - w0.records;
    let syncs = w1.syncs - w0.syncs;
    let per_commit = |n: u64| {
        if commits > 0 {
            n as f64 / commits as f64
        } else {
            0.0
        }
    };
    let eviction_pages = after.pool.writes - before.pool.writes;
    let page_images = w1.page_images - w0.page_images;
    Some(json!({
        "mode": after.durability,
        "group_commit": group_commit,
        "commits": commits,
        "commits_per_s": commits as f64 / r.secs,
        "log_writes": w1.writes - w0.writes,
        "durability_points": syncs,
        "commits_per_durability_point": if syncs > 0 { commits as f64 / syncs as f64 } else { 0.0 },
        "log_bytes": w1.bytes - w0.bytes,
        "checkpoints": c1.checkpoints - c0.checkpoints,
        "checkpoints_per_s": (c1.checkpoints - c0.checkpoints) as f64 / r.secs,
        "checkpoint_pages": c1.pages_written - c0.pages_written,
        "checkpoint_pages_per_commit": per_commit(c1.pages_written - c0.pages_written),
        "eviction_pages": eviction_pages,
        "eviction_pages_per_commit": per_commit(eviction_pages),
        "page_images": page_images,
        "page_images_per_commit": per_commit(page_images),
        "log_bytes_per_commit": per_commit(w1.bytes - w0.bytes),
        "log_buffer_waits": w1.buffer_waits - w0.buffer_waits,
        "steal": steal,
        "checkpoint_reasons": {
            "structural_pages": c1.by_structure - c0.by_structure,
            "log_half_full": c1.by_log_half - c0.by_log_half,
            "log_full": c1.by_log_full - c0.by_log_full,
            "eviction": c1.by_eviction - c0.by_eviction,
            "request": c1.by_request - c0.by_request,
        },
        "checkpoint_thresholds": {
            "structural_pages": c1.structural_threshold_pages,
            "live_log_bytes": c1.log_threshold_bytes,
        },
    }))
}

/// The report as text: the load, the run's throughput, latencies and counters, the tree and
/// the log.
fn print_table(
    load: Option<&PhaseReport>,
    r: &PhaseReport,
    stats: &DbStats,
    durability: Option<&Value>,
) {
    if let Some(l) = load {
        println!(
            "load: {} records in {:.1} s ({:.0}/s)",
            l.ops, l.secs, l.ops_per_s
        );
    }
    println!(
        "run:  {:.0} ops/s  p50 {:.1} us  p99 {:.1} us  p99.9 {:.1} us  max {:.1} us",
        r.ops_per_s, r.lat_us.p50, r.lat_us.p99, r.lat_us.p999, r.lat_us.max
    );
    println!(
        "      page reads/op {:.3}  writes/op {:.3}  enters/op {:.3}  cycles/op {:.0}  CPU {:.0}%  misses {}",
        r.reads_per_op, r.writes_per_op, r.enters_per_op, r.cycles_per_op, r.cpu_pct, r.misses
    );
    print_per_second(r);
    if r.restarts_per_op > 0.0 {
        println!(
            "      restarts/op {:.3} ({:.0}% resumed at the page read, not at the root)",
            r.restarts_per_op,
            100.0 * r.resumes_per_op / r.restarts_per_op
        );
    }
    println!(
        "      engine {}, tree height {}, {} pages",
        stats.io.label(),
        stats.height,
        stats.pages
    );
    if let Some(d) = durability {
        println!(
            "      durability {}: {:.0} commits/s, {:.1} commits per durability point, {} checkpoints",
            d["mode"], d["commits_per_s"].as_f64().unwrap_or(0.0),
            d["commits_per_durability_point"].as_f64().unwrap_or(0.0), d["checkpoints"]
        );
        let f = |k: &str| d[k].as_f64().unwrap_or(0.0);
        println!(
            "      checkpoints/s {:.2}  pages written/update: checkpoint {:.3} (each twice: double-write, in place)  eviction {:.3}  page images in the log {:.3}  log bytes/update {:.0}  steal {}",
            f("checkpoints_per_s"),
            f("checkpoint_pages_per_commit"),
            f("eviction_pages_per_commit"),
            f("page_images_per_commit"),
            f("log_bytes_per_commit"),
            d["steal"]
        );
        let (why, at) = (&d["checkpoint_reasons"], &d["checkpoint_thresholds"]);
        println!(
            "      checkpoints started by: structural pages > {} ({}), live log > {} MiB ({}), a full log ({}), eviction finding only unstealable pages ({}), flush/close ({})",
            at["structural_pages"],
            why["structural_pages"],
            at["live_log_bytes"].as_u64().unwrap_or(0) >> 20,
            why["log_half_full"],
            why["log_full"],
            why["eviction"],
            why["request"]
        );
    }
    println!("      {}", memory_line(&stats.memory));
}

/// The run's operations, and its cycles per operation, second by second.
fn print_per_second(r: &PhaseReport) {
    let ops: Vec<String> = r.per_second.iter().map(|n| n.to_string()).collect();
    println!("      ops per second: {}", ops.join(" "));
    let cycles: Vec<String> = r
        .cycles_per_op_per_second
        .iter()
        .map(|c| c.map_or("-".into(), |c| format!("{c:.0}")))
        .collect();
    println!("      cycles/op per second: {}", cycles.join(" "));
}

/// Which CPUs the device's completions interrupted during the run, beside the CPU the
/// database's thread was pinned to: with the kernel charging interrupt time to the task it
/// interrupts, the cycles per operation depend on it (`ringdb_lab::interrupts`).
fn interrupts_line(interrupts: Option<&InterruptCounts>, ops: u64, cpu: Option<u32>) -> String {
    let thread = cpu.map_or("the thread not pinned".into(), |c| {
        format!("the thread on CPU {c}")
    });
    match interrupts {
        Some(counts) => format!("      device interrupts {}; {thread}", counts.describe(ops)),
        None => format!(
            "      device interrupts: none to count (no PCI disk with MSI vectors); {thread}"
        ),
    }
}

/// The engine's memory by part in one line: now, and the peak where it moves.
fn memory_line(m: &ringdb::MemoryStats) -> String {
    let part = |name: &str, p: ringdb::PartBytes| {
        format!(
            "{name} {} (peak {})",
            bytes_text(p.current_bytes),
            bytes_text(p.peak_bytes)
        )
    };
    format!(
        "memory: pool frames {}, {}, {}, {}, {}",
        bytes_text(m.pool_frames.current_bytes),
        part("log buffer", m.log_buffer),
        part("checkpoint staging", m.checkpoint_staging),
        part("key locks", m.key_locks),
        part("other", m.other)
    )
}

/// `bytes` in KiB below a MiB, else in MiB.
fn bytes_text(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
    }
}

/// One warning line per thing the `auto` engine did without (the library logs the same through
/// `tracing`, which the CLI does not subscribe to).
pub fn warn_fallbacks(io: &ringdb_io::EffectiveIo) {
    for fallback in io.fallbacks.iter() {
        eprintln!("ringdb: warning: {fallback}");
    }
}
