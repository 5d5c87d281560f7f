//! TPC-C on a [`Db`] of several shards, its warehouses partitioned (`placement.rs`): the
//! load writes each shard's warehouses there (and ITEM on every shard), a run starts each
//! shard's share of the tasks on that shard, homed at its own warehouses, and the check reads
//! shard's tasks on that shard, homed at its own warehouses, and the check reads
//! each shard's warehouses there. Every transaction is a `ringdb::DbTransaction` with its
//! keys placed by warehouse (`txn.rs`): one that reaches a remote warehouse on another shard
//! (1% of NewOrder lines, 15% of Payments) has a part there, the engine's.

use super::check::{check_warehouses, CheckReport};
use super::load::{population_tasks, LoadReport, PopulationPlace};
use super::placement::Placement;
use super::random::Constants;
use super::report::TpccRunReport;
use super::run::{run_task, summarise, Counts, Measured, RunContext, RunOutcome, TpccRunSpec};
use super::tables::{self, LoadedMeta, TpccTables, TABLE_NAMES};
use super::txn::PlacedContext;
use super::{population, TpccRunError, TpccScale};
use crate::error::{BenchError, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use ringdb::{Db, Shard, TableId};
use ringdb_lab::counters::CpuTime;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

/// Refuses what TPC-C cannot run on `db` with `warehouses` spread over its shards: fewer
/// warehouses than shards. The load and the run check it; call it first to refuse before
/// loading.
pub fn check_shards(db: &Db, warehouses: u32) -> Result<()> {
    let shards = db.shard_count();
    if warehouses < shards as u32 {
        return Err(TpccRunError::FewerWarehousesThanShards { warehouses, shards }.into());
    }
    Ok(())
}

/// Loads the population of `scale` into `db`, each warehouse on its shard and ITEM on every
/// shard; the meta row goes to every shard last. `db` must hold no TPC-C data.
pub fn load_sharded(
    db: &Db,
    scale: &TpccScale,
    progress: bool,
) -> Result<(TpccTables, LoadReport)> {
    scale.validate()?;
    check_shards(db, scale.warehouses)?;
    let start = Instant::now();
    let mut ids = [TableId::DEFAULT; 12];
    for (id, name) in ids.iter_mut().zip(TABLE_NAMES) {
        *id = db.table(name)?.id();
    }
    let tables = TpccTables::from_ids(ids);
    if let Some(meta) = read_every_meta(db, &tables)?.into_iter().flatten().next() {
        return Err(BenchError::TpccAlreadyLoaded {
            loaded: meta.scale,
            requested: *scale,
        });
    }
    let seed = population::now_micros();
    let constants = Constants::draw(&mut SmallRng::seed_from_u64(seed));
    let estimate = scale.rows_estimate() + u64::from(scale.items) * (db.shard_count() as u64 - 1);
    let bar = progress.then(|| crate::tpcc::progress_bar(estimate, "loading TPC-C"));
    let place = PopulationPlace {
        tables,
        scale: *scale,
        constants,
        seed,
    };
    let placement = Placement::new(db.shard_count());
    let meta = LoadedMeta {
        scale: *scale,
        constants,
    };
    let bar_for_shards = bar.clone();
    let per_shard = db.run_on_each(move |shard: Shard| {
        let bar = bar_for_shards.clone();
        async move { load_shard(&shard, &place, &placement, &meta, bar).await }
    })?;
    let mut rows = 0;
    for shard_rows in per_shard {
        rows += shard_rows?;
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = LoadReport::new(*scale, constants, rows, start);
    Ok((tables, report))
}

/// Writes `shard`'s part of the population, then its meta row; returns the rows written.
async fn load_shard(
    shard: &Shard,
    place: &PopulationPlace,
    placement: &Placement,
    meta: &LoadedMeta,
    bar: Option<indicatif::ProgressBar>,
) -> Result<u64> {
    use super::codec::Row;
    let rows = Rc::new(RefCell::new(0u64));
    let warehouses = placement.warehouses_of(shard.index(), place.scale.warehouses);
    let tasks = population_tasks(shard.local(), place, &warehouses, rows.clone(), bar);
    let handles: Vec<_> = tasks.into_iter().map(|t| shard.spawn(t)).collect();
    for handle in handles {
        handle.await?;
    }
    let meta_table = place.tables.meta;
    let encoded = meta.encode();
    shard
        .local()
        .in_table(meta_table)
        .insert(tables::META_KEY, &encoded)
        .await?;
    let total = *rows.borrow();
    Ok(total)
}

/// Every shard's meta row, in shard order.
fn read_every_meta(db: &Db, tables: &TpccTables) -> Result<Vec<Option<LoadedMeta>>> {
    let tables = *tables;
    let metas = db.run_on_each(move |shard: Shard| async move {
        tables::read_meta_in(shard.local(), &tables).await
    })?;
    metas.into_iter().collect()
}

/// The tables, scale and constants of a sharded database loaded before (C_RUN drawn afresh);
/// a typed error when a shard holds no complete population.
pub fn open_loaded_sharded(db: &Db) -> Result<(TpccTables, TpccScale, Constants)> {
    let path = db.path().to_path_buf();
    let names = db.run_on(0, |shard: Shard| async move { shard.local().tables() })?;
    let mut ids = [TableId::DEFAULT; 12];
    for (id, name) in ids.iter_mut().zip(TABLE_NAMES) {
        let found = names.iter().find(|(n, _)| n == name);
        *id = found.map(|(_, id)| *id).ok_or(BenchError::NotTpcc {
            path: path.clone(),
            missing: name,
        })?;
    }
    let tables = TpccTables::from_ids(ids);
    let mut loaded: Option<LoadedMeta> = None;
    for meta in read_every_meta(db, &tables)? {
        let meta = meta.ok_or(BenchError::NotTpcc {
            path: path.clone(),
            missing: "the row a finished load writes last, on a shard (the load was cut short)",
        })?;
        loaded.get_or_insert(meta);
    }
    let meta = loaded.expect("a database has a shard");
    let mut rng = SmallRng::seed_from_u64(population::now_micros());
    Ok((tables, meta.scale, meta.constants.for_run(&mut rng)))
}

/// Checks conditions 1-4 on every warehouse, each on its shard.
pub fn check_sharded(db: &Db, tables: &TpccTables, scale: &TpccScale) -> Result<CheckReport> {
    let (tables, scale) = (*tables, *scale);
    let placement = Placement::new(db.shard_count());
    let reports = db.run_on_each(move |shard: Shard| async move {
        let warehouses = placement.warehouses_of(shard.index(), scale.warehouses);
        check_warehouses(shard.local(), &tables, &scale, &warehouses).await
    })?;
    let mut merged: Option<CheckReport> = None;
    for report in reports {
        let report = report?;
        match &mut merged {
            None => merged = Some(report),
            Some(m) => m.merge(report),
        }
    }
    let mut report = merged.expect("a database has a shard");
    report.judge_payments();
    Ok(report)
}

/// Runs the TPC-C mix on every shard of `db` at once: `spec.tasks` split evenly over the
/// shards (and `spec.max_transactions` too), each shard's tasks homed at its warehouses.
/// With a log, a transaction whose writes span shards commits through the cross-shard batch
/// log (the engine's `DbTransaction`), atomic across a crash.
pub fn run_sharded(
    db: &Db,
    tables: &TpccTables,
    scale: &TpccScale,
    constants: &Constants,
    spec: &TpccRunSpec,
) -> Result<TpccRunReport> {
    let shards = db.shard_count();
    check_shards(db, scale.warehouses)?;
    let before = db.stats()?;
    let progress_bar = crate::ycsb::bar(
        spec.duration.as_millis() as u64,
        "{spinner} {msg} [{bar:30}] {elapsed}/{duration} {prefix}",
        &spec.label,
        spec.progress,
    );
    let mut per_shard = spec.clone();
    per_shard.tasks = spec.tasks.div_ceil(shards).max(1);
    per_shard.max_transactions = spec.max_transactions.map(|m| m.div_ceil(shards as u64));
    let job = ShardJob {
        loaded: (*tables, *scale, *constants),
        spec: per_shard,
        progress_bar: progress_bar.clone(),
    };
    let cpu_before = CpuTime::now();
    let start = Instant::now();
    let outcomes = db.run_on_each(move |shard: Shard| {
        let job = job.clone();
        async move { run_shard(shard, job).await }
    })?;
    let secs = start.elapsed().as_secs_f64();
    let cpu_secs = CpuTime::now().since(cpu_before).total().as_secs_f64();
    let after = db.stats()?;
    if let Some(bar) = progress_bar {
        bar.finish_and_clear();
    }
    let mut counts = Counts::default();
    for (b, a) in before.shards.iter().zip(&after.shards) {
        counts = counts.plus(Counts::between(b, a));
    }
    let mut merged = RunOutcome::default();
    for outcome in outcomes {
        merged.merge(outcome);
    }
    if let Some(error) = merged.error.take() {
        return Err(error);
    }
    let measured = Measured {
        secs,
        cpu_secs,
        counts,
    };
    let mut report = summarise(&merged, spec, scale, &measured);
    report.shards = shards;
    Ok(report)
}

/// What every shard's runner gets.
#[derive(Clone)]
struct ShardJob {
    loaded: (TpccTables, TpccScale, Constants),
    /// The spec of one shard's share.
    spec: TpccRunSpec,
    progress_bar: Option<indicatif::ProgressBar>,
}

/// Runs one shard's tasks to the end and returns what they counted.
async fn run_shard(shard: Shard, job: ShardJob) -> RunOutcome {
    let (tables, scale, constants) = job.loaded;
    let placement = Placement::new(shard.db().shard_count());
    let homes = placement.warehouses_of(shard.index(), scale.warehouses);
    let placed = Rc::new(PlacedContext {
        db: shard.db().clone(),
        placement,
        home_shard: shard.index(),
        tables,
        spanning_commits: Cell::new(0),
        remote_operations: Cell::new(0),
    });
    let loaded = (&tables, &scale, &constants);
    let context = Rc::new(RunContext::new(
        loaded,
        &job.spec,
        homes,
        Some(placed),
        job.progress_bar.clone(),
    ));
    let handles: Vec<_> = (0..job.spec.tasks)
        .map(|task| {
            let handle = shard.local().clone();
            shard.spawn(run_task(handle, task, context.clone()))
        })
        .collect();
    for handle in handles {
        handle.await;
    }
    context.outcome()
}
