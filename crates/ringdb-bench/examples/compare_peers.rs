//! ringdb's embedding API against the stores a program would pick instead, from the program's
//! own threads: LMDB (heed), redb and fjall, in one process, alternated (issue 33).
//!
//! ```text
//! cargo run --release -p ringdb-bench --example compare_peers -- \
//!     --records 1000000 --threads 2,4 --workloads c,b,a --distributions uniform,zipfian \
//!     --seconds 3 --rounds 3 [--peers ringdb,lmdb,fjall,redb] [--json FILE]
//! ```
//!
//! Every store is loaded with the same records (keys `0..N` as 8-byte big-endian integers,
//! values `ycsb::value_for(key, 0, size)`, in the same scattered order), in memory (the same
//! budget each: ringdb's pool over one shard per CPU, LMDB's map, redb's and fjall's caches),
//! with writes acknowledged without a sync of their own. Then, per workload, distribution and
//! thread count, the rounds alternate the stores, because this machine is noisy: T threads
//! call `get`/`put` as a program would (ringdb: `Db::get_into`, `Db::insert`), each drawing
//! YCSB operations from its own seed. Each row gives operations per second, per CPU second of
//! the whole process, and ringdb's ratio to the store on both (medians over the rounds).
//!
//! heed, redb and fjall are dev-dependencies of `ringdb-bench` only.

#[path = "compare_peers/peers.rs"]
mod peers;
#[path = "compare_peers/run.rs"]
mod run;

use clap::Parser;
use peers::{Pair, Peer};
use ringdb_bench::units::parse_size;
use ringdb_bench::ycsb::{key_bytes, scattered, value_for, Workload};
use run::{Measurement, Mix, TxnKind};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The command line.
#[derive(Parser, Debug)]
#[command(about = "ringdb's Db from T threads against LMDB, redb and fjall")]
struct Args {
    /// Records loaded into every store.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 128)]
    value_size: usize,
    /// Memory each store gets (ringdb's pool, LMDB's map, redb's and fjall's caches).
    #[arg(long, default_value = "1G")]
    memory: String,
    /// Thread counts (comma-separated; default: the CPUs, and twice that).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// YCSB workloads among a, b, c, `swap` (two keys' values exchanged in one serializable
    /// transaction) and `pair` (two keys read in one read-only transaction); stores without
    /// transactions sit the last two out (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "c,b,a")]
    workloads: Vec<String>,
    /// Key distributions among uniform, zipfian (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "uniform,zipfian")]
    distributions: Vec<String>,
    /// Stores (comma-separated), the first being the one the ratios are of.
    #[arg(long, value_delimiter = ',', default_value = "ringdb,lmdb,fjall,redb")]
    peers: Vec<String>,
    /// Seconds per round and store.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Rounds per workload, distribution and thread count.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Data folder (each store's subfolder is made fresh).
    #[arg(long, default_value = "ringdb-data/compare-peers")]
    dir: PathBuf,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One cell of the report: a store under one workload, distribution and thread count.
#[derive(Serialize)]
struct Row {
    workload: String,
    distribution: String,
    threads: usize,
    peer: String,
    rounds: Vec<Measurement>,
    median_ops_per_s: f64,
    median_ops_per_cpu_s: f64,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run_all(&args) {
        eprintln!("compare_peers: {e}");
        std::process::exit(1);
    }
}

/// Loads every store, runs every cell, prints the tables, writes the JSON.
fn run_all(args: &Args) -> Result<(), String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if args.threads.is_empty() {
        vec![cpus, 2 * cpus]
    } else {
        args.threads.clone()
    };
    let memory = parse_size(&args.memory).map_err(|e| e.to_string())?;
    let seconds_ok = args.seconds.is_finite() && args.seconds > 0.0;
    if args.records == 0 || args.rounds == 0 || !seconds_ok {
        return Err("--records, --rounds and --seconds must be positive".into());
    }
    let mut stores: Vec<Box<dyn Peer>> = Vec::new();
    for name in &args.peers {
        let store = peers::open(name, &args.dir.join(name), memory, cpus)?;
        load(store.as_ref(), args.records, args.value_size)?;
        stores.push(store);
    }
    let mut rows = Vec::new();
    let mut as_loaded = true;
    for workload in &args.workloads {
        for distribution in &args.distributions {
            let (workload_kind, transaction) = parse_workload(workload)?;
            let mix = Mix {
                workload: workload_kind,
                transaction,
                as_loaded,
                distribution: distribution.parse().map_err(|e| format!("{e}"))?,
                records: args.records,
                value_size: args.value_size,
            };
            for &t in &threads {
                let cell = run_cell(args, &stores, mix, t)?;
                print_cell(workload, distribution, t, &cell);
                rows.extend(
                    cell.into_iter()
                        .map(|(peer, rounds)| row(workload, distribution, t, peer, rounds)),
                );
            }
            as_loaded &= mix.workload == Workload::C && mix.transaction != Some(TxnKind::Swap);
        }
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())? + "\n";
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// A workload by name, and its transaction on two keys (`swap`: their values exchanged;
/// `pair`: both read), the keys drawn as YCSB-C's reads.
fn parse_workload(name: &str) -> Result<(Workload, Option<TxnKind>), String> {
    match name.to_ascii_lowercase().as_str() {
        "a" => Ok((Workload::A, None)),
        "b" => Ok((Workload::B, None)),
        "c" => Ok((Workload::C, None)),
        "swap" => Ok((Workload::C, Some(TxnKind::Swap))),
        "pair" => Ok((Workload::C, Some(TxnKind::ReadPair))),
        other => Err(format!(
            "workload {other:?}: compared are a, b, c, swap and pair"
        )),
    }
}

/// Loads keys `0..records` in the scattered order, in batches of 1,000, and reads a sample
/// back.
fn load(store: &dyn Peer, records: u64, value_size: usize) -> Result<(), String> {
    let start = Instant::now();
    let mut batch: Vec<Pair> = Vec::with_capacity(1000);
    for i in 0..records {
        let key = scattered(i, records);
        let mut value = Vec::with_capacity(value_size);
        value_for(key, 0, value_size, &mut value);
        batch.push((key_bytes(key).to_vec(), value));
        if batch.len() == 1000 || i + 1 == records {
            store.load(&batch)?;
            batch.clear();
        }
    }
    let (mut value, mut expected) = (Vec::new(), Vec::new());
    for key in (0..records).step_by((records / 1000).max(1) as usize) {
        value_for(key, 0, value_size, &mut expected);
        if !store.get(&key_bytes(key), &mut value)? || value != expected {
            return Err(format!("{}: key {key} did not load", store.name()));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "compare_peers: {} loaded {records} records in {secs:.1} s",
        store.name()
    );
    Ok(())
}

/// The rounds of one cell, the stores alternated in each.
fn run_cell(
    args: &Args,
    stores: &[Box<dyn Peer>],
    mix: Mix,
    threads: usize,
) -> Result<Vec<(&'static str, Vec<Measurement>)>, String> {
    let duration = Duration::from_secs_f64(args.seconds);
    // The transactions run on the stores that have them (a first one tells).
    let (first, second) = (key_bytes(0), key_bytes(1));
    let has_transactions = |s: &&dyn Peer| match mix.transaction {
        None => true,
        Some(TxnKind::Swap) => s.swap(&first, &second).is_some(),
        Some(TxnKind::ReadPair) => s.read_pair(&first, &second).is_some(),
    };
    let stores: Vec<&dyn Peer> = stores
        .iter()
        .map(|s| s.as_ref())
        .filter(has_transactions)
        .collect();
    let mut cell: Vec<(&'static str, Vec<Measurement>)> =
        stores.iter().map(|s| (s.name(), Vec::new())).collect();
    for round in 0..args.rounds {
        for (store, (_, rounds)) in stores.iter().zip(cell.iter_mut()) {
            let seed = 42 + round as u64;
            rounds.push(run::round(*store, mix, threads, duration, seed)?);
        }
    }
    Ok(cell)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn row(
    workload: &str,
    distribution: &str,
    threads: usize,
    peer: &str,
    rounds: Vec<Measurement>,
) -> Row {
    Row {
        workload: workload.to_string(),
        distribution: distribution.to_string(),
        threads,
        peer: peer.to_string(),
        median_ops_per_s: median(rounds.iter().map(|r| r.ops_per_s).collect()),
        median_ops_per_cpu_s: median(rounds.iter().map(|r| r.ops_per_cpu_s).collect()),
        rounds,
    }
}

/// Prints one cell: each store's medians and the first store's ratios to it.
fn print_cell(
    workload: &str,
    distribution: &str,
    threads: usize,
    cell: &[(&str, Vec<Measurement>)],
) {
    let medians: Vec<(f64, f64)> = cell
        .iter()
        .map(|(_, r)| {
            let wall = median(r.iter().map(|m| m.ops_per_s).collect());
            let cpu = median(r.iter().map(|m| m.ops_per_cpu_s).collect());
            (wall, cpu)
        })
        .collect();
    println!(
        "YCSB-{} {distribution}, {threads} threads:",
        workload.to_ascii_uppercase()
    );
    for ((name, rounds), (wall, cpu)) in cell.iter().zip(&medians) {
        let (first_wall, first_cpu) = medians[0];
        let per_round: Vec<String> = rounds
            .iter()
            .map(|m| format!("{:.0}k", m.ops_per_s / 1e3))
            .collect();
        println!(
            "  {name:<7} {:>9.0} ops/s {:>9.0} ops/cpu-s   {} / {name}: {:.2}x ops/s, {:.2}x per cpu-s   rounds {}",
            wall,
            cpu,
            cell[0].0,
            first_wall / wall.max(1.0),
            first_cpu / cpu.max(1.0),
            per_round.join(" ")
        );
    }
}
