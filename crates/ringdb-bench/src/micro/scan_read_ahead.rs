//! `scan` (issue 12, seeds/004 "batched disk reads for range scans"): a range scan of
//! 10,000 keys out of memory, leaf at a time (one descent and one wait per leaf, the scan as it
//! was) against read-ahead (the leaves under one parent that the scan is about to visit read
//! in one batch), alternated in the same run.
//!
//! Method: a database in a directory beside `--target` (`<target>.scan-db`), `O_DIRECT`,
//! engine `uring`, no log; 400,000 records of 100-byte values (20,000 with `--quick`) loaded
//! and closed, then reopened on a pool of 1,000 pages (100), a twelfth of the data or less, so
//! every scan starts cold-ish: each reads leaves a scan before it evicted. Each round runs one
//! scan of each kind, from random start keys, in alternating order; the figures are per scan,
//! and the ratio is the leaf-at-a-time time over the read-ahead time, with its spread over the
//! rounds.

use super::{MicroOpts, MicroResult};
use crate::error::Result;
use ringdb::{DbHandle, Direction, Durability, LocalDb, Options};
use ringdb_io::{Batching, EngineKind, IoConfig};
use serde_json::json;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The sizes of one run.
#[derive(Clone, Copy)]
struct Plan {
    records: u64,
    value_bytes: usize,
    pool_pages: usize,
    scan_keys: usize,
    rounds: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                records: 20_000,
                value_bytes: 100,
                pool_pages: 100,
                scan_keys: 2_000,
                rounds: 3,
            }
        } else {
            Plan {
                records: 400_000,
                value_bytes: 100,
                pool_pages: 1_000,
                scan_keys: 10_000,
                rounds: 10,
            }
        }
    }
}

/// One kind of scan: its name and read-ahead setting.
const KINDS: [(&str, usize); 2] = [
    ("leaf-at-a-time", 0),
    ("read-ahead", ringdb::tree::READ_AHEAD_PAGES),
];

/// What one kind measured over its scans.
#[derive(Default, Clone, Copy)]
struct Totals {
    scans: u64,
    time: Duration,
    leaves: u64,
    pages_read: u64,
    batches: u64,
    batch_pages: u64,
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn options(plan: Plan, fresh: bool) -> Options {
    Options {
        pool_pages: plan.pool_pages,
        io: IoConfig {
            queue_depth: 128,
            batching: Batching::Adaptive,
            ..IoConfig::new(EngineKind::Uring)
        },
        direct: true,
        fresh,
        durability: Durability::Off,
        ..Options::default()
    }
}

/// Where the database lives: a directory beside the target.
fn db_dir(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(".scan-db");
    PathBuf::from(name)
}

/// Loads the records in key order and closes the database; returns the time it took.
fn load(dir: &Path, plan: Plan) -> Result<Duration> {
    let t = Instant::now();
    let mut db = LocalDb::open(dir, options(plan, true))?;
    let h = db.handle();
    let value = vec![b'v'; plan.value_bytes];
    db.runtime().block_on(async {
        for i in 0..plan.records {
            h.insert(&key(i), &value).await?;
        }
        Ok::<_, ringdb::WriteError>(())
    })??;
    db.close()?;
    Ok(t.elapsed())
}

/// One scan of `plan.scan_keys` keys from `start`, of the kind with read-ahead `pages`.
fn one_scan(
    db: &mut LocalDb,
    h: &DbHandle,
    plan: Plan,
    start: u64,
    pages: usize,
) -> Result<Totals> {
    h.tree().set_read_ahead(pages);
    let (pool0, tree0) = (h.tree().buffer().stats(), h.tree().stats());
    let t = Instant::now();
    let from = key(start);
    let got = db.runtime().block_on(async {
        h.scan(
            Bound::Included(&from),
            Bound::Unbounded,
            Direction::Forward,
            plan.scan_keys,
        )
        .await
    })??;
    let time = t.elapsed();
    assert_eq!(got.len(), plan.scan_keys, "a scan from key {start}");
    assert_eq!(got[0].0, from, "the scan starts at its key");
    let (pool1, tree1) = (h.tree().buffer().stats(), h.tree().stats());
    Ok(Totals {
        scans: 1,
        time,
        leaves: tree1.scan_leaves - tree0.scan_leaves,
        pages_read: pool1.reads - pool0.reads,
        batches: tree1.read_ahead_batches - tree0.read_ahead_batches,
        batch_pages: tree1.read_ahead_pages - tree0.read_ahead_pages,
    })
}

fn add(a: &mut Totals, b: Totals) {
    a.scans += b.scans;
    a.time += b.time;
    a.leaves += b.leaves;
    a.pages_read += b.pages_read;
    a.batches += b.batches;
    a.batch_pages += b.batch_pages;
}

/// Runs the rounds: each a scan of both kinds (alternating which goes first) from random
/// starts. Returns the totals per kind and the per-round ratios.
fn measure(db: &mut LocalDb, plan: Plan) -> Result<([Totals; 2], Vec<f64>)> {
    let h = db.handle();
    let mut totals = [Totals::default(); 2];
    let mut ratios = Vec::with_capacity(plan.rounds);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let span = plan.records - plan.scan_keys as u64;
    for round in 0..plan.rounds {
        let mut times = [Duration::ZERO; 2];
        for step in 0..2 {
            let kind = (round + step) % 2;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = one_scan(db, &h, plan, x % span, KINDS[kind].1)?;
            times[kind] = t.time;
            add(&mut totals[kind], t);
        }
        ratios.push(times[0].as_secs_f64() / times[1].as_secs_f64().max(1e-9));
    }
    Ok((totals, ratios))
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let plan = Plan::new(opts.quick);
    let dir = db_dir(&opts.target);
    let load_time = load(&dir, plan)?;
    let mut db = LocalDb::open(&dir, options(plan, false))?;
    let (totals, ratios) = measure(&mut db, plan)?;
    let pages = db.stats().pages;
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    let mut r = MicroResult::new(
        "scan",
        "issue 12 / seeds/004: range scans read the leaves they are about to visit in one batch (>= 3x asked)",
        &["scan", "scans", "ms_per_scan", "leaves_per_scan", "pages_read_per_scan", "batches_per_scan", "pages_per_batch", "speedup"],
    );
    let base = totals[0].time.as_secs_f64() / totals[0].scans.max(1) as f64;
    for (kind, t) in KINDS.iter().zip(&totals) {
        let n = t.scans.max(1) as f64;
        let per_scan = t.time.as_secs_f64() / n;
        r.row(vec![
            json!(kind.0),
            json!(t.scans),
            json!(per_scan * 1e3),
            json!(t.leaves as f64 / n),
            json!(t.pages_read as f64 / n),
            json!(t.batches as f64 / n),
            json!(if t.batches > 0 {
                t.batch_pages as f64 / t.batches as f64
            } else {
                1.0
            }),
            json!(base / per_scan.max(1e-12)),
        ]);
    }
    notes(&mut r, opts, plan, pages, load_time, &ratios);
    Ok(r)
}

fn notes(
    r: &mut MicroResult,
    opts: &MicroOpts,
    plan: Plan,
    pages: u64,
    load: Duration,
    ratios: &[f64],
) {
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(0.0, f64::max);
    let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
    r.notes.push(format!(
        "read-ahead vs leaf-at-a-time: {mean:.2}x faster per scan (per-round {min:.2}x..{max:.2}x over {} rounds, alternated)",
        ratios.len()
    ));
    r.notes.push(format!(
        "{} records of {} B values in {pages} pages of 4 KiB (loaded in {:.1} s), pool {} pages; scans of {} keys from random starts; O_DIRECT, uring, in {}",
        plan.records,
        plan.value_bytes,
        load.as_secs_f64(),
        plan.pool_pages,
        plan.scan_keys,
        db_dir(&opts.target).display()
    ));
}
