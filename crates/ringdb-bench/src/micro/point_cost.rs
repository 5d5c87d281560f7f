//! `point-cost` (issue 15 item 3): where the cycles of an in-memory point read and update go,
//! so a regression shows in the part that grew. Each operation is split into **descent** (fixing
//! the pages from the root and routing through the inner nodes), **leaf search**, **copy** (the
//! value out, or the leaf's change for an update) and **executor** (one task switch: a yield
//! and the poll that resumes the task, as every YCSB task does per operation), beside the
//! **total** of the real `get`/`insert` through a `DbHandle` followed by that yield.
//!
//! A third row (issue 33) is the read a program's thread makes in place, without the shard:
//! the optimistic descent (`tree::optimistic`: every level's lookup, version and routing, the
//! parent validated after each child is opened), the leaf search and the copy over atomic word
//! loads, and the leaf's **validation** (its version read again), beside the total of
//! `optimistic::get_into` (no executor: it runs on the caller's thread).
//!
//! Method: a database in a file beside `--target` (`<target>.point-cost.ringdb`), engine
//! `uring`, no log, 4 KiB pages; 200,000 records (20,000 with `--quick`) of 8-byte keys and
//! 128-byte values loaded in scattered order into a pool that holds all of them twice over.
//! The parts come from the tree's measurement hook (`BTree::trace_get`/`trace_update`: the
//! tree's own steps with a time-stamp read between them), the executor from one task that
//! yields per iteration against one that does not, on the database's runtime, and the total
//! from timing batches of 32 real operations. Every measurement runs the same uniformly drawn
//! keys; rounds alternate the order of the measurements and each figure is the median over the
//! rounds. The time-stamp counter measures wall time, so samples a preemption spans (far above
//! the median) are dropped before the means are taken (`preempted`). The remainder (total
//! minus the parts) is what the parts do not cover: the async wrapper and its restart loop,
//! the handle's dispatch, freeing the value.

use super::{preempted, MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchError, Result};
use crate::ycsb;
use ringdb::tree::optimistic::{self, OptimisticTrace};
use ringdb::tree::{timestamp, PointTrace};
use ringdb::{DbHandle, Durability, LocalDb, Options};
use ringdb_io::{Batching, EngineKind, IoConfig};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Bytes of every value.
const VALUE_BYTES: usize = 128;
/// Page size of the database.
const PAGE_BYTES: usize = 4096;
/// Bytes a record takes in a leaf besides key and value, and the leaves' fill after a
/// scattered load (see the ladder's sizing), for the pool's size.
const RECORD_OVERHEAD_BYTES: usize = 8;
const LOAD_FILL: f64 = 0.69;

/// The sizes of one run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// Records loaded (keys `0..records`).
    pub(crate) records: u64,
    /// Operations per measurement and round.
    pub(crate) ops: usize,
    /// Rounds; each figure is the median over them.
    pub(crate) rounds: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                records: 20_000,
                ops: 20_000,
                rounds: 3,
            }
        } else {
            Plan {
                records: 200_000,
                ops: 100_000,
                rounds: 5,
            }
        }
    }

    /// A pool that holds the loaded data twice over.
    fn pool_pages(&self) -> usize {
        let per_leaf =
            PAGE_BYTES as f64 * LOAD_FILL / (8 + VALUE_BYTES + RECORD_OVERHEAD_BYTES) as f64;
        ((2.0 * self.records as f64 / per_leaf) as usize).max(ringdb::buffer::MIN_FRAMES * 4)
    }
}

/// Cycles per operation of each part, for one kind of operation (median over the rounds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Breakdown {
    pub(crate) descent: f64,
    pub(crate) leaf_search: f64,
    pub(crate) copy: f64,
    pub(crate) executor: f64,
    /// Reads in place: the leaf's version checked again (0 for the shard's operations).
    pub(crate) validate: f64,
    /// The real operation through the handle plus the yield.
    pub(crate) total: f64,
}

impl Breakdown {
    /// The parts added up.
    pub(crate) fn parts(&self) -> f64 {
        self.descent + self.leaf_search + self.copy + self.executor + self.validate
    }
}

/// Which operation a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A point read of a loaded key.
    Read,
    /// An update in place of a loaded key (a value of the same size).
    Update,
    /// A point read of a loaded key on the caller's thread, in place (optimistic).
    InPlace,
}

fn options(plan: Plan) -> Options {
    Options {
        pool_pages: plan.pool_pages(),
        io: IoConfig {
            queue_depth: 64,
            batching: Batching::Adaptive,
            ..IoConfig::new(EngineKind::Uring)
        },
        direct: true,
        fresh: true,
        durability: Durability::Off,
        ..Options::default()
    }
}

/// Where the database lives: a data file beside the target (a path with an extension is a
/// file to `LocalDb::open`; without a log it is the only file).
fn db_file(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(".point-cost.ringdb");
    PathBuf::from(name)
}

/// `n` keys drawn uniformly from `0..records` (xorshift: the same keys for every measurement).
fn keys(records: u64, n: usize) -> Vec<[u8; 8]> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ycsb::key_bytes(((x as u128 * records as u128) >> 64) as u64)
        })
        .collect()
}

/// Operations per timed batch for the total and the executor (a time stamp per batch).
const BATCH_OPS: usize = 32;

/// The traced steps of `kind` over `keys`, cycles per operation, without the operations a
/// preemption spans ([`super::preempted`]); a page that is not resident is an error (the pool
/// holds everything, so it means the data did not stay in memory).
fn traced(h: &DbHandle, kind: Kind, keys: &[[u8; 8]], value: &[u8]) -> Result<[f64; 3]> {
    let tree = h.tree();
    let mut traces = Vec::with_capacity(keys.len());
    for key in keys {
        let trace = match kind {
            Kind::Read => tree.trace_get(key).map_err(ringdb::DbError::from)?,
            Kind::Update => tree
                .trace_update(key, value)
                .map_err(ringdb::DbError::from)?,
            Kind::InPlace => unreachable!("reads in place are traced by `traced_in_place`"),
        };
        let Some(t) = trace else {
            return Err(BenchError::StillFaulting {
                reads_per_transaction: 1.0 / keys.len() as f64,
                pool_pages: tree.buffer().config().frames,
            });
        };
        if !t.found {
            return Err(BenchError::Internal {
                what: "a traced point operation missed a loaded key",
            });
        }
        traces.push(t);
    }
    let totals: Vec<u64> = traces.iter().map(PointTrace::total_cycles).collect();
    let limit = preempted::cutoff(&totals);
    let kept: Vec<&PointTrace> = traces
        .iter()
        .filter(|t| t.total_cycles() <= limit)
        .collect();
    let n = kept.len().max(1) as f64;
    let mean = |part: fn(&PointTrace) -> u64| kept.iter().map(|t| part(t)).sum::<u64>() as f64 / n;
    Ok([
        mean(|t| t.descent_cycles),
        mean(|t| t.search_cycles),
        mean(|t| t.copy_cycles),
    ])
}

/// Cycles per operation of the real `kind` through the handle, each followed by a yield (as
/// a YCSB task does), in one task on the database's runtime; timed per batch of
/// [`BATCH_OPS`], without the batches a preemption spans.
fn total(db: &mut LocalDb, kind: Kind, keys: &[[u8; 8]], value: &[u8]) -> Result<f64> {
    let h = db.handle();
    let batches = db.runtime().block_on(async {
        let mut batches = Vec::with_capacity(keys.len() / BATCH_OPS + 1);
        for chunk in keys.chunks_exact(BATCH_OPS) {
            let start = timestamp();
            for key in chunk {
                one_op(&h, kind, key, value).await?;
                ringdb_io::yield_now().await;
            }
            batches.push(timestamp().saturating_sub(start));
        }
        Ok::<_, BenchError>(batches)
    })??;
    Ok(preempted::mean(&batches).0 / BATCH_OPS as f64)
}

/// The real `kind` for `key` through the handle.
async fn one_op(h: &DbHandle, kind: Kind, key: &[u8], value: &[u8]) -> Result<()> {
    match kind {
        Kind::Read => {
            let found = h.get(key).await.map_err(ringdb::DbError::from)?;
            if found.is_none() {
                return Err(BenchError::Internal {
                    what: "a read through the handle missed a loaded key",
                });
            }
        }
        Kind::Update => {
            h.insert(key, value).await.map_err(ringdb::DbError::from)?;
        }
        Kind::InPlace => unreachable!("reads in place are timed by `total_in_place`"),
    }
    Ok(())
}

/// The traced steps of reads in place of `keys` (descent, search, copy, validation), cycles
/// per read, without the reads a preemption spans; a read that did not end validated (a page
/// not resident) is an error, as in [`traced`].
fn traced_in_place(h: &DbHandle, keys: &[[u8; 8]]) -> Result<[f64; 4]> {
    let (view, roots) = h.read_view();
    let mut out = Vec::with_capacity(VALUE_BYTES);
    let mut traces = Vec::with_capacity(keys.len());
    for key in keys {
        let trace = optimistic::trace_get(&view, &roots, 0, key, &mut out);
        match trace {
            Some(t) if t.found => traces.push(t),
            _ => {
                return Err(BenchError::Internal {
                    what: "a read in place of a loaded key did not validate",
                })
            }
        }
    }
    let totals: Vec<u64> = traces.iter().map(OptimisticTrace::total_cycles).collect();
    let limit = preempted::cutoff(&totals);
    let kept: Vec<&OptimisticTrace> = (traces.iter())
        .filter(|t| t.total_cycles() <= limit)
        .collect();
    let n = kept.len().max(1) as f64;
    let mean =
        |part: fn(&OptimisticTrace) -> u64| kept.iter().map(|t| part(t)).sum::<u64>() as f64 / n;
    Ok([
        mean(|t| t.descent_cycles),
        mean(|t| t.search_cycles),
        mean(|t| t.copy_cycles),
        mean(|t| t.validate_cycles),
    ])
}

/// Cycles per read of `optimistic::get_into` on this thread, timed per batch of
/// [`BATCH_OPS`], without the batches a preemption spans.
fn total_in_place(h: &DbHandle, keys: &[[u8; 8]]) -> Result<f64> {
    let (view, roots) = h.read_view();
    let mut out = Vec::with_capacity(VALUE_BYTES);
    let mut batches = Vec::with_capacity(keys.len() / BATCH_OPS + 1);
    for chunk in keys.chunks_exact(BATCH_OPS) {
        let start = timestamp();
        for key in chunk {
            let read = optimistic::get_into(&view, &roots, 0, key, &mut out);
            if read != optimistic::Optimistic::Done(true) {
                return Err(BenchError::Internal {
                    what: "a read in place missed a loaded key",
                });
            }
        }
        batches.push(timestamp().saturating_sub(start));
    }
    Ok(preempted::mean(&batches).0 / BATCH_OPS as f64)
}

/// Cycles of one task switch: a task that yields `n` times against one that loops `n` times
/// without yielding, on the same runtime, timed per batch of [`BATCH_OPS`].
fn executor_cycles(db: &mut LocalDb, n: usize) -> Result<f64> {
    let batches = (n / BATCH_OPS).max(1);
    let yielding = db.runtime().block_on(async move {
        let mut samples = Vec::with_capacity(batches);
        for _ in 0..batches {
            let start = timestamp();
            for i in 0..BATCH_OPS {
                std::hint::black_box(i);
                ringdb_io::yield_now().await;
            }
            samples.push(timestamp().saturating_sub(start));
        }
        samples
    })?;
    let mut plain = Vec::with_capacity(batches);
    for _ in 0..batches {
        let start = timestamp();
        for i in 0..BATCH_OPS {
            std::hint::black_box(i);
        }
        plain.push(timestamp().saturating_sub(start));
    }
    let switch = preempted::mean(&yielding).0 - preempted::mean(&plain).0;
    Ok(switch.max(0.0) / BATCH_OPS as f64)
}

/// Cycles of one time-stamp read (each traced step includes one), per batch of 100.
fn timestamp_cycles() -> f64 {
    let samples: Vec<u64> = (0..1000)
        .map(|_| {
            let start = timestamp();
            for _ in 0..100 {
                std::hint::black_box(timestamp());
            }
            timestamp().saturating_sub(start)
        })
        .collect();
    preempted::mean(&samples).0 / 100.0
}

/// The median of `values` (0 for none).
fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One round for `kind`: the traced parts, the executor and the total, in an order that
/// alternates with `round`. Returns [descent, search, copy, executor, total].
fn round(db: &mut LocalDb, kind: Kind, round: usize, keys: &[[u8; 8]]) -> Result<[f64; 6]> {
    if kind == Kind::InPlace {
        let h = db.handle();
        let (parts, total) = if round.is_multiple_of(2) {
            (traced_in_place(&h, keys)?, total_in_place(&h, keys)?)
        } else {
            let total = total_in_place(&h, keys)?;
            (traced_in_place(&h, keys)?, total)
        };
        return Ok([parts[0], parts[1], parts[2], 0.0, parts[3], total]);
    }
    let mut value = Vec::with_capacity(VALUE_BYTES);
    ycsb::value_for(round as u64, round as u64, VALUE_BYTES, &mut value);
    let h = db.handle();
    let (parts, total) = if round.is_multiple_of(2) {
        let parts = traced(&h, kind, keys, &value)?;
        (parts, total(db, kind, keys, &value)?)
    } else {
        let total = total(db, kind, keys, &value)?;
        (traced(&h, kind, keys, &value)?, total)
    };
    let executor = executor_cycles(db, keys.len())?;
    Ok([parts[0], parts[1], parts[2], executor, 0.0, total])
}

/// Measures `kind` over `plan.rounds` rounds on the loaded database.
pub(crate) fn breakdown(db: &mut LocalDb, plan: Plan, kind: Kind) -> Result<Breakdown> {
    let keys = keys(plan.records, plan.ops);
    let mut samples: [Vec<f64>; 6] = Default::default();
    for r in 0..plan.rounds.max(1) {
        let figures = round(db, kind, r, &keys)?;
        for (sample, figure) in samples.iter_mut().zip(figures) {
            sample.push(figure);
        }
    }
    let [descent, leaf_search, copy, executor, validate, total] = samples.map(median);
    Ok(Breakdown {
        descent,
        leaf_search,
        copy,
        executor,
        validate,
        total,
    })
}

/// Opens a fresh database in `file` and loads `plan.records` records into it.
pub(crate) fn open_loaded(file: &Path, plan: Plan, progress: bool) -> Result<LocalDb> {
    let mut db = LocalDb::open(file, options(plan))?;
    ycsb::load(&mut db, plan.records, VALUE_BYTES, 64, progress)?;
    Ok(db)
}

/// Runs the benchmark: load, measure reads and updates, report.
pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let plan = Plan::new(opts.quick);
    let file = db_file(&opts.target);
    let measured = measure(&file, plan, opts.progress);
    let _ = std::fs::remove_file(&file);
    let (read, update, in_place, pool_reads, pages) = measured?;
    let mut r = MicroResult::new(
        "point-cost",
        "issues 15 and 33: the in-memory point read and update on the shard, and the read in place on the caller's thread, broken down (descent, leaf search, copy, executor, validation)",
        &["op", "descent", "leaf_search", "copy", "executor", "validate", "parts", "total", "remainder", "remainder_pct"],
    );
    for (name, b) in [
        ("read", read),
        ("update", update),
        ("read in place", in_place),
    ] {
        r.row(row(name, &b));
    }
    r.plot = Some(plot(&[
        ("read", &read),
        ("update", &update),
        ("read in place", &in_place),
    ]));
    notes(&mut r, plan, pool_reads, pages);
    Ok(r)
}

/// Loads, then measures both kinds. Returns them, the pool's page reads during the
/// measurements (0 when everything stayed resident) and the data's pages.
fn measure(file: &Path, plan: Plan, progress: bool) -> Result<Measured> {
    let mut db = open_loaded(file, plan, progress)?;
    let reads_before = db.stats().pool.reads;
    let read = breakdown(&mut db, plan, Kind::Read)?;
    let update = breakdown(&mut db, plan, Kind::Update)?;
    let in_place = breakdown(&mut db, plan, Kind::InPlace)?;
    let stats = db.stats();
    db.close()?;
    let pool_reads = stats.pool.reads - reads_before;
    Ok((read, update, in_place, pool_reads, stats.pages))
}

/// Reads, updates and reads in place, the pool's page reads during them, the data's pages.
type Measured = (Breakdown, Breakdown, Breakdown, u64, u64);

fn row(name: &str, b: &Breakdown) -> Vec<serde_json::Value> {
    let remainder = b.total - b.parts();
    vec![
        json!(name),
        json!(b.descent),
        json!(b.leaf_search),
        json!(b.copy),
        json!(b.executor),
        json!(b.validate),
        json!(b.parts()),
        json!(b.total),
        json!(remainder),
        json!(100.0 * remainder / b.total.max(1e-9)),
    ]
}

/// Cycles per part (1 descent, 2 leaf search, 3 copy, 4 executor, 5 validation, 6 total),
/// one line per operation.
fn plot(rows: &[(&str, &Breakdown)]) -> Plot {
    let series = |label: &str, b: &Breakdown| Series {
        label: label.into(),
        points: [
            b.descent,
            b.leaf_search,
            b.copy,
            b.executor,
            b.validate,
            b.total,
        ]
        .iter()
        .enumerate()
        .map(|(i, &c)| ((i + 1) as f64, c))
        .collect(),
    };
    Plot::new(
        "in-memory point cost: 1 descent, 2 leaf search, 3 copy, 4 executor, 5 validation, 6 total",
        "part",
        "cycles per operation",
        rows.iter().map(|(label, b)| series(label, b)).collect(),
    )
}

fn notes(r: &mut MicroResult, plan: Plan, pool_reads: u64, pages: u64) {
    r.notes.push(format!(
        "{} records (8 B keys, {VALUE_BYTES} B values) in {pages} pages of 4 KiB, pool {} pages; {} uniform keys per measurement, median of {} rounds (order alternated)",
        plan.records,
        plan.pool_pages(),
        plan.ops,
        plan.rounds
    ));
    r.notes.push(format!(
        "cycles are TSC ticks; each traced part includes one time-stamp read (~{:.0} cycles here); total = the real get/insert through the DbHandle plus one yield, timed per batch of 32; samples a preemption spans are dropped (mean of the rest)",
        timestamp_cycles()
    ));
    r.notes.push(format!(
        "remainder = total - parts: the async wrapper and its restart loop, the handle's dispatch, allocating and freeing the value; page reads during the measurements: {pool_reads} (0: all resident)"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_are_measured_and_add_up_to_about_the_total() {
        let file = std::env::temp_dir().join(format!(
            "ringdb-point-cost-test-{}.ringdb",
            std::process::id()
        ));
        let plan = Plan {
            records: 5_000,
            ops: 5_000,
            rounds: 3,
        };
        let mut db = open_loaded(&file, plan, false).expect("load");
        for kind in [Kind::Read, Kind::Update, Kind::InPlace] {
            let b = breakdown(&mut db, plan, kind).expect("measure");
            let executor = if kind == Kind::InPlace {
                1.0
            } else {
                b.executor
            };
            let validate = if kind == Kind::InPlace {
                b.validate
            } else {
                1.0
            };
            for (part, cycles) in [
                ("descent", b.descent),
                ("leaf search", b.leaf_search),
                ("copy", b.copy),
                ("executor", executor),
                ("validate", validate),
                ("total", b.total),
            ] {
                assert!(cycles > 0.0, "{part} of {kind:?}: {b:?}");
            }
            // Not a speed assertion: the parts cover the operation, within a sane factor.
            let ratio = b.parts() / b.total;
            assert!(
                (0.2..5.0).contains(&ratio),
                "parts/total {ratio} of {kind:?}: {b:?}"
            );
        }
        db.close().expect("close");
        let _ = std::fs::remove_file(&file);
    }
}
