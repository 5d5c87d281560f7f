//! ringdb against LMDB (through heed) on in-memory YCSB-C uniform reads, in one invocation
//! (issue 15's comparison): the same keys, values and memory, and the same read stream.
//!
//! ```text
//! cargo run --release -p ringdb-bench --example compare_lmdb -- \
//!     --records 200000 --value-size 128 --pool 256M --seconds 3 --rounds 3 [--json FILE]
//! ```
//!
//! Both stores are loaded once (fresh folders under `--dir`), every key of each is read back
//! and checked, then the rounds alternate, because this machine is noisy: ringdb, LMDB (one
//! read transaction per get: the comparable row), LMDB with a transaction per batch of gets
//! (context, not comparable), and again. Each row reports reads per second, the process's CPU
//! seconds over the round (`getrusage(RUSAGE_SELF)`), reads per CPU second, and cycles per
//! read; each round and the medians give ringdb / LMDB in reads per CPU second.
//!
//! heed is a dev-dependency of `ringdb-bench` only: no engine crate links LMDB.

// The example's parts live beside it, in `compare_lmdb/` (a crate root looks for its
// modules in its own folder, hence the paths).
#[path = "compare_lmdb/dataset.rs"]
mod dataset;
#[path = "compare_lmdb/error.rs"]
mod error;
#[path = "compare_lmdb/lmdb_side.rs"]
mod lmdb_side;
#[path = "compare_lmdb/measurement.rs"]
mod measurement;
#[path = "compare_lmdb/report.rs"]
mod report;
#[path = "compare_lmdb/ringdb_side.rs"]
mod ringdb_side;
#[cfg(test)]
#[path = "compare_lmdb/tests.rs"]
mod tests;

use clap::Parser;
use dataset::Dataset;
use error::{CompareError, Result, Store};
use heed::Env;
use lmdb_side::{LmdbEnv, LmdbStore};
use report::{Loaded, Report, Round, Setup};
use ringdb_bench::units::parse_size;
use ringdb_lab::counters::tsc_hz;
use ringdb_side::RingdbStore;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The command line.
#[derive(Parser, Debug)]
#[command(about = "ringdb against LMDB (heed) on in-memory YCSB-C uniform reads")]
struct Args {
    /// Records loaded into both stores (keys 0..N, 8 bytes each).
    #[arg(long, default_value_t = 200_000)]
    records: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 128)]
    value_size: usize,
    /// ringdb's buffer pool, and LMDB's map size: the memory both get.
    #[arg(long, default_value = "256M")]
    pool: String,
    /// Seconds per round and store.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Rounds (each runs ringdb, LMDB, LMDB batched).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// ringdb tasks on its shard.
    #[arg(long, default_value_t = 128)]
    tasks: usize,
    /// Gets per read transaction in the batched LMDB row.
    #[arg(long, default_value_t = 100)]
    lmdb_batch: u64,
    /// LMDB reader slots tied to transactions (MDB_NOTLS) instead of threads.
    #[arg(long)]
    lmdb_no_tls: bool,
    /// Seed of the first round's read stream.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Data folder (its `ringdb/` and `lmdb/` are made fresh each run).
    #[arg(long, default_value = "ringdb-data/compare-lmdb")]
    dir: PathBuf,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("compare_lmdb: {e}");
        std::process::exit(1);
    }
}

/// Checks the settings, loads and verifies both stores, runs the rounds and reports.
fn run(args: &Args) -> Result<()> {
    let setup = setup(args)?;
    let data = Dataset {
        records: setup.records,
        value_size: setup.value_size,
    };
    let ringdb_dir = fresh_folder(&args.dir.join("ringdb"))?;
    let lmdb_dir = fresh_folder(&args.dir.join("lmdb"))?;
    eprintln!("compare_lmdb: loading {} records into ringdb", data.records);
    let mut ringdb =
        RingdbStore::create(&ringdb_dir, data, setup.memory_bytes, setup.ringdb_tasks)?;
    ringdb.verify_all()?;
    let report = match LmdbEnv::open(&lmdb_dir, setup.memory_bytes, setup.lmdb_no_tls)? {
        LmdbEnv::Tls(env) => compare(setup, ringdb, &env)?,
        LmdbEnv::NoTls(env) => compare(setup, ringdb, &env)?,
    };
    report.print();
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(path, text).map_err(|source| CompareError::File {
            step: "writing the report to",
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}

/// The settings checked, as the report states them.
fn setup(args: &Args) -> Result<Setup> {
    let bad = |setting, expected, value| CompareError::Setting {
        setting,
        expected,
        value,
    };
    if args.records == 0 {
        return Err(bad("records", "at least 1", 0.0));
    }
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(bad("seconds", "in (0, 3600]", args.seconds));
    }
    if args.rounds == 0 {
        return Err(bad("rounds", "at least 1", 0.0));
    }
    if !(1..=4096).contains(&args.tasks) {
        return Err(bad("tasks", "in 1..=4096", args.tasks as f64));
    }
    if args.lmdb_batch == 0 {
        return Err(bad("lmdb batch", "at least 1", 0.0));
    }
    Ok(Setup {
        records: args.records,
        value_size: args.value_size,
        memory_bytes: parse_size(&args.pool)?,
        ringdb_tasks: args.tasks,
        round_secs: args.seconds,
        rounds: args.rounds,
        seed: args.seed,
        lmdb_batched_gets_per_txn: args.lmdb_batch,
        lmdb_no_tls: args.lmdb_no_tls,
        cpu_time_source: "getrusage(RUSAGE_SELF), user + system",
        tsc_hz: tsc_hz(),
    })
}

/// Removes `path` if it exists and makes it again, empty.
fn fresh_folder(path: &Path) -> Result<PathBuf> {
    let file_error = |step| {
        move |source| CompareError::File {
            step,
            path: path.to_path_buf(),
            source,
        }
    };
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(file_error("emptying"))?;
    }
    std::fs::create_dir_all(path).map_err(file_error("making"))?;
    Ok(path.to_path_buf())
}

/// Loads LMDB in `env`, checks it, then runs the rounds alternately on both stores.
fn compare<T: 'static>(setup: Setup, mut ringdb: RingdbStore, env: &Env<T>) -> Result<Report>
where
    for<'t> heed::RoTxn<'t, T>: std::ops::Deref<Target = heed::RoTxn<'t>>,
{
    let data = Dataset {
        records: setup.records,
        value_size: setup.value_size,
    };
    eprintln!("compare_lmdb: loading {} records into LMDB", data.records);
    let lmdb = LmdbStore::create(env, data)?;
    let lmdb_data_bytes = lmdb.data_bytes()?;
    if lmdb_data_bytes > setup.memory_bytes {
        return Err(CompareError::DataExceedsMemory {
            store: Store::Lmdb,
            data_bytes: lmdb_data_bytes,
            memory_bytes: setup.memory_bytes,
        });
    }
    lmdb.verify_all()?;
    let loaded = Loaded {
        ringdb_load_secs: ringdb.load_secs,
        ringdb_data_bytes: ringdb.data_bytes(),
        ringdb_height: ringdb.height(),
        ringdb_engine: ringdb.engine(),
        lmdb_load_secs: lmdb.load_secs,
        lmdb_data_bytes,
    };
    let mut rounds = Vec::with_capacity(setup.rounds);
    for round in 1..=setup.rounds {
        rounds.push(one_round(&setup, round, &mut ringdb, &lmdb)?);
    }
    ringdb.close()?;
    Ok(Report::new(setup, loaded, rounds))
}

/// Round `round`: ringdb, LMDB one get per transaction, LMDB batched, on the same stream.
fn one_round<T: 'static>(
    setup: &Setup,
    round: usize,
    ringdb: &mut RingdbStore,
    lmdb: &LmdbStore<'_, T>,
) -> Result<Round>
where
    for<'t> heed::RoTxn<'t, T>: std::ops::Deref<Target = heed::RoTxn<'t>>,
{
    let seed = setup.seed.wrapping_add(round as u64 - 1);
    let duration = Duration::from_secs_f64(setup.round_secs);
    let tasks = setup.ringdb_tasks;
    let r = ringdb.round(seed, duration)?;
    let l = lmdb.round(seed, tasks, duration, 1)?;
    let b = lmdb.round(seed, tasks, duration, setup.lmdb_batched_gets_per_txn)?;
    let round = Round::new(round, seed, r, l, b);
    eprintln!(
        "round {}/{}: ringdb {:.0} ops/s {:.0} cyc/op | LMDB {:.0} ops/s {:.0} cyc/op | \
         LMDB {}/txn {:.0} ops/s | ringdb/LMDB per CPU-s {:.2}",
        round.round,
        setup.rounds,
        r.ops_per_s,
        r.cycles_per_op,
        l.ops_per_s,
        l.cycles_per_op,
        setup.lmdb_batched_gets_per_txn,
        b.ops_per_s,
        round.ratio
    );
    Ok(round)
}
