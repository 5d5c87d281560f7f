//! The comparison's report: what ran, each round of each store, the medians over the rounds,
//! and the ratio ringdb / LMDB of reads per CPU second (per round and its median). Printed as
//! a table; the same data is what `--json` writes.

use crate::measurement::{median, median_of, Measurement};
use serde::Serialize;

/// What both stores ran with.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    /// Records loaded (keys `0..records`).
    pub records: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// ringdb's pool and LMDB's map, in bytes.
    pub memory_bytes: u64,
    /// ringdb tasks on its one shard.
    pub ringdb_tasks: usize,
    /// Seconds per round and store.
    pub round_secs: f64,
    /// Rounds (each: ringdb, LMDB, LMDB batched).
    pub rounds: usize,
    /// Seed of round 1's read stream (round r uses seed + r - 1).
    pub seed: u64,
    /// Gets per read transaction of the batched LMDB row.
    pub lmdb_batched_gets_per_txn: u64,
    /// Whether LMDB's reader slots are tied to transactions (`MDB_NOTLS`).
    pub lmdb_no_tls: bool,
    /// How CPU time is measured.
    pub cpu_time_source: &'static str,
    /// The TSC rate used for cycles, in Hz.
    pub tsc_hz: f64,
}

/// What each store looked like after its load.
#[derive(Clone, Debug, Serialize)]
pub struct Loaded {
    /// ringdb's load, wall seconds.
    pub ringdb_load_secs: f64,
    /// ringdb's data file pages x page size.
    pub ringdb_data_bytes: u64,
    /// ringdb's tree height.
    pub ringdb_height: u32,
    /// The engine ringdb ran.
    pub ringdb_engine: String,
    /// LMDB's load, wall seconds.
    pub lmdb_load_secs: f64,
    /// LMDB's data file size.
    pub lmdb_data_bytes: u64,
}

/// One round: the three rows, and ringdb / LMDB (one transaction per read) in reads per CPU
/// second.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// 1-based.
    pub round: usize,
    /// The read stream's seed (the same for all three rows).
    pub seed: u64,
    /// ringdb.
    pub ringdb: Measurement,
    /// LMDB, one read transaction per get: the comparable row.
    pub lmdb: Measurement,
    /// LMDB, one read transaction per batch of gets: context only, not comparable.
    pub lmdb_batched: Measurement,
    /// ringdb / LMDB in reads per CPU second.
    pub ratio: f64,
}

impl Round {
    /// A round's rows, with the ratio computed.
    pub fn new(
        round: usize,
        seed: u64,
        ringdb: Measurement,
        lmdb: Measurement,
        lmdb_batched: Measurement,
    ) -> Round {
        Round {
            round,
            seed,
            ratio: ratio(&ringdb, &lmdb),
            ringdb,
            lmdb,
            lmdb_batched,
        }
    }
}

/// ringdb / LMDB in reads per CPU second (0 when LMDB did nothing).
fn ratio(ringdb: &Measurement, lmdb: &Measurement) -> f64 {
    if lmdb.ops_per_cpu_s > 0.0 {
        ringdb.ops_per_cpu_s / lmdb.ops_per_cpu_s
    } else {
        0.0
    }
}

/// The medians over the rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Medians {
    /// ringdb.
    pub ringdb: Measurement,
    /// LMDB, one read transaction per get.
    pub lmdb: Measurement,
    /// LMDB batched (not comparable).
    pub lmdb_batched: Measurement,
    /// The median of the rounds' ratios.
    pub ratio: f64,
}

/// Everything the comparison measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// What ran.
    pub setup: Setup,
    /// The loads.
    pub loaded: Loaded,
    /// Each round.
    pub rounds: Vec<Round>,
    /// The medians.
    pub median: Medians,
}

impl Report {
    /// The report of `rounds`, with their medians.
    pub fn new(setup: Setup, loaded: Loaded, rounds: Vec<Round>) -> Report {
        let column = |f: fn(&Round) -> Measurement| rounds.iter().map(f).collect::<Vec<_>>();
        let median = Medians {
            ringdb: median_of(&column(|r| r.ringdb)),
            lmdb: median_of(&column(|r| r.lmdb)),
            lmdb_batched: median_of(&column(|r| r.lmdb_batched)),
            ratio: median(rounds.iter().map(|r| r.ratio)),
        };
        Report {
            setup,
            loaded,
            rounds,
            median,
        }
    }

    /// Prints the setup, one row per store and round, and the medians.
    pub fn print(&self) {
        let s = &self.setup;
        let l = &self.loaded;
        println!(
            "YCSB-C uniform, {} records, {} B values, memory {} MiB, {} s x {} rounds, CPU: {}",
            s.records,
            s.value_size,
            s.memory_bytes >> 20,
            s.round_secs,
            s.rounds,
            s.cpu_time_source
        );
        println!(
            "ringdb: {} tasks, {}, height {}, data {:.1} MiB (load {:.2} s); LMDB: data {:.1} MiB (load {:.2} s){}",
            s.ringdb_tasks,
            l.ringdb_engine,
            l.ringdb_height,
            l.ringdb_data_bytes as f64 / 1048576.0,
            l.ringdb_load_secs,
            l.lmdb_data_bytes as f64 / 1048576.0,
            l.lmdb_load_secs,
            if s.lmdb_no_tls { ", MDB_NOTLS" } else { "" }
        );
        println!(
            "{:<7} {:<30} {:>12} {:>8} {:>14} {:>10} {:>12}",
            "round", "store", "ops/s", "CPU s", "ops/CPU-s", "cycles/op", "ringdb/LMDB"
        );
        for r in &self.rounds {
            self.print_round(
                &r.round.to_string(),
                &r.ringdb,
                &r.lmdb,
                &r.lmdb_batched,
                r.ratio,
            );
        }
        let m = &self.median;
        self.print_round("median", &m.ringdb, &m.lmdb, &m.lmdb_batched, m.ratio);
    }

    fn print_round(
        &self,
        round: &str,
        ringdb: &Measurement,
        lmdb: &Measurement,
        batched: &Measurement,
        ratio: f64,
    ) {
        let batched_label = format!(
            "LMDB {} gets/txn (not comp.)",
            self.setup.lmdb_batched_gets_per_txn
        );
        print_row(round, "ringdb", ringdb, "");
        print_row(round, "LMDB 1 get/txn", lmdb, &format!("{ratio:.2}"));
        print_row(round, &batched_label, batched, "");
    }
}

fn print_row(round: &str, store: &str, m: &Measurement, ratio: &str) {
    println!(
        "{:<7} {:<30} {:>12.0} {:>8.2} {:>14.0} {:>10.0} {:>12}",
        round, store, m.ops_per_s, m.cpu_secs, m.ops_per_cpu_s, m.cycles_per_op, ratio
    );
}
