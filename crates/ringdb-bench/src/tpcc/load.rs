//! Loading the initial population: the tables created, then one task for ITEM, one per
//! warehouse (its row and STOCK) and one per district (its row, customers, history, orders),
//! all on the database's runtime, so a task that waits for a page lets the others generate
//! rows. Each task writes in key order, in batches (`DbHandle::write`) of a few hundred rows.
//! The meta row (scale and C_LOAD) is written last: a database whose load was cut short is
//! not taken for a loaded one.

use super::keys;
use super::population;
use super::random::Constants;
use super::tables::{self, LoadedMeta, TpccTables};
use super::TpccScale;
use crate::error::{BenchError, Result};
use crate::tpcc::codec::Row;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use ringdb::{DbHandle, LocalDb, TableId, WriteBatch, WriteError};
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

/// Rows per batch at most.
const BATCH_ROWS_MAX: usize = 512;
/// Bytes of keys and values per batch at most.
const BATCH_BYTES_MAX: usize = 128 << 10;

/// What a load did.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LoadReport {
    /// The scale loaded.
    pub scale: TpccScale,
    /// The constants drawn: C_LOAD is recorded with the database.
    pub constants: Constants,
    /// Rows written, every table and index counted.
    pub rows: u64,
    /// Seconds from the first table created to the meta row written.
    pub seconds: f64,
    /// Rows per second.
    pub rows_per_second: f64,
}

/// Loads the population of `scale` into `db` (which must hold no TPC-C data): creates the
/// tables, writes every row, and records the scale and C_LOAD. With `progress`, a progress bar
/// on the terminal counts rows.
pub fn load(
    db: &mut LocalDb,
    scale: &TpccScale,
    progress: bool,
) -> Result<(TpccTables, LoadReport)> {
    scale.validate()?;
    refuse_loaded(db, scale)?;
    let start = Instant::now();
    let seed = population::now_micros();
    let constants = Constants::draw(&mut SmallRng::seed_from_u64(seed));
    let tables = TpccTables::create(db)?;
    let bar = progress.then(|| crate::tpcc::progress_bar(scale.rows_estimate(), "loading TPC-C"));
    let rows = write_population(db, &tables, scale, &constants, seed, bar.clone())?;
    let meta = LoadedMeta {
        scale: *scale,
        constants,
    };
    tables::write_meta(db, &tables, &meta)?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = LoadReport::new(*scale, constants, rows, start);
    Ok((tables, report))
}

impl LoadReport {
    /// The report of a load of `scale` that wrote `rows` since `start`.
    pub(crate) fn new(scale: TpccScale, constants: Constants, rows: u64, start: Instant) -> Self {
        let seconds = start.elapsed().as_secs_f64();
        LoadReport {
            scale,
            constants,
            rows,
            seconds,
            rows_per_second: rows as f64 / seconds.max(1e-9),
        }
    }
}

/// Refuses a database that holds a TPC-C population already (naming both scales).
fn refuse_loaded(db: &mut LocalDb, scale: &TpccScale) -> Result<()> {
    let Ok(existing) = TpccTables::find(db) else {
        return Ok(());
    };
    if let Some(meta) = tables::read_meta(db, &existing)? {
        return Err(BenchError::TpccAlreadyLoaded {
            loaded: meta.scale,
            requested: *scale,
        });
    }
    Ok(())
}

/// Spawns the load's tasks and runs them to the end; returns the rows written.
fn write_population(
    db: &mut LocalDb,
    tables: &TpccTables,
    scale: &TpccScale,
    constants: &Constants,
    seed: u64,
    bar: Option<indicatif::ProgressBar>,
) -> Result<u64> {
    let rows = Rc::new(RefCell::new(0u64));
    let warehouses: Vec<u32> = (1..=scale.warehouses).collect();
    let place = PopulationPlace {
        tables: *tables,
        scale: *scale,
        constants: *constants,
        seed,
    };
    let tasks = population_tasks(&db.handle(), &place, &warehouses, rows.clone(), bar);
    let handles: Vec<_> = tasks.into_iter().map(|t| db.runtime().spawn(t)).collect();
    let results = db.runtime().block_on(async move {
        let mut results = Vec::with_capacity(handles.len());
        for h in handles {
            results.push(h.await);
        }
        results
    })?;
    for result in results {
        result?;
    }
    let total = *rows.borrow();
    Ok(total)
}

/// What every task of a load needs to know.
#[derive(Clone, Copy)]
pub(crate) struct PopulationPlace {
    pub(crate) tables: TpccTables,
    pub(crate) scale: TpccScale,
    pub(crate) constants: Constants,
    /// The load's seed: each task draws from it and its warehouse and district, so ITEM is
    /// the same on every shard that holds a copy and a warehouse's rows do not depend on
    /// which shard loads it.
    pub(crate) seed: u64,
}

/// A task of the load.
pub(crate) type LoadTask =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), WriteError>>>>;

/// The tasks that write ITEM and `warehouses` (each with its districts) through `handle`,
/// counting rows into `rows`.
pub(crate) fn population_tasks(
    handle: &DbHandle,
    place: &PopulationPlace,
    warehouses: &[u32],
    rows: Rc<RefCell<u64>>,
    bar: Option<indicatif::ProgressBar>,
) -> Vec<LoadTask> {
    let PopulationPlace {
        tables,
        scale,
        constants,
        seed,
    } = *place;
    let next_writer = |w: u32, d: u32| {
        let task_seed =
            seed ^ (u64::from(w) << 8 | u64::from(d)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let writer = BatchWriter::new(handle.clone(), rows.clone(), bar.clone());
        (writer, SmallRng::seed_from_u64(task_seed))
    };
    let mut tasks: Vec<LoadTask> = Vec::new();
    let (writer, rng) = next_writer(0, 0);
    tasks.push(Box::pin(load_items(writer, rng, tables, scale)));
    for &w in warehouses {
        let (writer, rng) = next_writer(w, 0);
        tasks.push(Box::pin(load_warehouse(writer, rng, tables, scale, w)));
        for d in 1..=scale.districts {
            let (writer, rng) = next_writer(w, d);
            let place = Place { w, d };
            let task = load_district(writer, rng, tables, scale, constants, place);
            tasks.push(Box::pin(task));
        }
    }
    tasks
}

/// A district of a warehouse.
#[derive(Clone, Copy)]
struct Place {
    w: u32,
    d: u32,
}

/// Collects rows into batches and writes each when it is full.
struct BatchWriter {
    handle: DbHandle,
    batch: WriteBatch,
    batch_bytes: usize,
    rows: Rc<RefCell<u64>>,
    bar: Option<indicatif::ProgressBar>,
}

impl BatchWriter {
    fn new(handle: DbHandle, rows: Rc<RefCell<u64>>, bar: Option<indicatif::ProgressBar>) -> Self {
        BatchWriter {
            handle,
            batch: WriteBatch::new(),
            batch_bytes: 0,
            rows,
            bar,
        }
    }

    /// Adds a row; writes the batch when it is full.
    async fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), WriteError> {
        self.batch.put_in(table, key, value);
        self.batch_bytes += key.len() + value.len();
        if self.batch.len() >= BATCH_ROWS_MAX || self.batch_bytes >= BATCH_BYTES_MAX {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes what is collected.
    async fn flush(&mut self) -> Result<(), WriteError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.handle.write(&self.batch).await?;
        let written = self.batch.len() as u64;
        *self.rows.borrow_mut() += written;
        if let Some(bar) = &self.bar {
            bar.inc(written);
        }
        self.batch = WriteBatch::new();
        self.batch_bytes = 0;
        Ok(())
    }
}

/// ITEM: every item in id order.
async fn load_items(
    mut out: BatchWriter,
    mut rng: SmallRng,
    tables: TpccTables,
    scale: TpccScale,
) -> Result<(), WriteError> {
    for i in 1..=scale.items {
        let row = population::item(&mut rng);
        out.put(tables.item, &keys::item(i), &row.encode()).await?;
    }
    out.flush().await
}

/// A warehouse's row and its STOCK, in item order.
async fn load_warehouse(
    mut out: BatchWriter,
    mut rng: SmallRng,
    tables: TpccTables,
    scale: TpccScale,
    w: u32,
) -> Result<(), WriteError> {
    let row = population::warehouse(&mut rng, &scale);
    out.put(tables.warehouse, &keys::warehouse(w), &row.encode())
        .await?;
    for i in 1..=scale.items {
        let row = population::stock(&mut rng);
        out.put(tables.stock, &keys::stock(w, i), &row.encode())
            .await?;
    }
    out.flush().await
}

/// A district: its row, its customers (with the name index and one HISTORY row each), then
/// its orders (with their lines, the order-by-customer index and NEW-ORDER).
async fn load_district(
    mut out: BatchWriter,
    mut rng: SmallRng,
    tables: TpccTables,
    scale: TpccScale,
    constants: Constants,
    place: Place,
) -> Result<(), WriteError> {
    let Place { w, d } = place;
    let row = population::district(&mut rng, &scale);
    out.put(tables.district, &keys::district(w, d), &row.encode())
        .await?;
    load_customers(&mut out, &mut rng, &tables, &scale, &constants, place).await?;
    load_orders(&mut out, &mut rng, &tables, &scale, place).await?;
    out.flush().await
}

/// A district's customers, their name index (sorted) and their first payments.
async fn load_customers(
    out: &mut BatchWriter,
    rng: &mut SmallRng,
    tables: &TpccTables,
    scale: &TpccScale,
    constants: &Constants,
    Place { w, d }: Place,
) -> Result<(), WriteError> {
    let now = population::now_micros();
    let mut name_keys = Vec::with_capacity(scale.customers_per_district as usize);
    for c in 1..=scale.customers_per_district {
        let row = population::customer(rng, constants, c, now);
        name_keys.push(keys::customer_by_name(
            w,
            d,
            row.last.as_bytes(),
            row.first.as_bytes(),
            c,
        ));
        out.put(tables.customer, &keys::customer(w, d, c), &row.encode())
            .await?;
    }
    name_keys.sort_unstable();
    for key in name_keys {
        out.put(tables.customer_by_name, &key, &[]).await?;
    }
    for c in 1..=scale.customers_per_district {
        let row = population::history(rng, w, d, now);
        out.put(
            tables.history,
            &keys::history((w, d), (w, d, c), 1),
            &row.encode(),
        )
        .await?;
    }
    Ok(())
}

/// A district's orders over a random permutation of its customers, each with its lines; the
/// last ones undelivered and in NEW-ORDER; then the order-by-customer index, sorted.
async fn load_orders(
    out: &mut BatchWriter,
    rng: &mut SmallRng,
    tables: &TpccTables,
    scale: &TpccScale,
    Place { w, d }: Place,
) -> Result<(), WriteError> {
    let now = population::now_micros();
    let customers = population::customer_permutation(rng, scale.customers_per_district);
    let first_undelivered = scale.orders_per_district - scale.new_orders_per_district + 1;
    let mut by_customer = Vec::with_capacity(customers.len());
    for (o, &c) in (1..).zip(&customers) {
        let order = population::order(rng, c, o >= first_undelivered, now);
        out.put(tables.order, &keys::order(w, d, o), &order.encode())
            .await?;
        for number in 1..=u32::from(order.line_count) {
            let line = population::order_line(rng, scale, w, &order);
            let key = keys::order_line(w, d, o, number);
            out.put(tables.order_line, &key, &line.encode()).await?;
        }
        by_customer.push(keys::order_by_customer(w, d, c, o));
    }
    for o in first_undelivered..=scale.orders_per_district {
        out.put(tables.new_order, &keys::new_order(w, d, o), &[])
            .await?;
    }
    by_customer.sort_unstable();
    for key in by_customer {
        out.put(tables.order_by_customer, &key, &[]).await?;
    }
    Ok(())
}
