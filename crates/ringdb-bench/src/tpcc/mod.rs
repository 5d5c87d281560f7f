//! TPC-C on the engine (standard specification 5.11): the schema, the initial population,
//! the five transactions and the consistency checks, on ringdb tables and its transactions.
//!
//! Why each piece is where it is:
//! - `scale.rs` ([`TpccScale`]): the cardinalities, standard or small (tests);
//! - `keys.rs` and `rows.rs` (over `codec.rs`): big-endian composite keys, so key order is
//!   the clause's order and scans find the oldest NEW-ORDER or a customer's newest order; a
//!   hand-written row encoding per table, money in cents;
//! - `tables.rs` ([`TpccTables`]): nine tables, two indexes and a meta row that records the
//!   scale and C_LOAD, which is how a loaded database is recognised ([`open_loaded`]);
//! - `random.rs` and `population.rs`: NURand and its constants, names and strings; the rows
//!   of clause 4.3.3.1; `load.rs` ([`load`]) writes them with several tasks in batches;
//! - `mix.rs` and `input.rs` ([`TxKind`], [`TxInput`]): the mix and every random choice of a
//!   transaction, drawn before it runs (a retry repeats it exactly);
//! - `new_order.rs`, `payment.rs`, `order_status.rs`, `delivery.rs`, `stock_level.rs`: the
//!   transactions of clauses 2.4-2.8 on a `Transaction`; `execute.rs` ([`execute`]) begins,
//!   runs and commits one;
//! - `check.rs` ([`check`]): the consistency conditions 1-4 of clause 3.3.2;
//! - `phases.rs` and `cost.rs`: a transaction's cycles by phase, one at a time
//!   (`ringdb micro txn-cost`).

mod access;
mod check;
mod codec;
mod cost;
mod delivery;
mod delivery_queue;
mod error;
mod execute;
mod input;
mod keys;
mod ladder;
mod load;
mod mix;
mod new_order;
mod order_status;
mod payment;
pub mod phases;
mod placement;
mod population;
mod prefetch;
mod random;
mod report;
mod rows;
#[cfg(test)]
mod rows_tests;
mod run;
mod scale;
mod sharded;
mod stock_level;
mod tables;
mod txn;

pub use check::{check, CheckReport, ConditionResult, PaymentSums};
pub use codec::RowError;
pub use cost::{measure_cost, CostPlan, CostReport, KindCost};
pub use error::TpccError;
pub use execute::{execute, execute_with, LockRelease, TxOptions, TxOutcome};
pub use input::{
    CustomerChoice, DeliveryInput, NewOrderInput, NewOrderLine, OrderStatusInput, PaymentInput,
    StockLevelInput, TxChoice, TxInput,
};
pub use ladder::{
    run_ladder, TpccLadderOpts, TpccLadderReport, TpccStep, TypeLatency, WarehouseGroup,
    OUT_OF_MEMORY_RATIO, TPCC_STEPS,
};
pub use load::{load, LoadReport};
pub use mix::{TxKind, MIX_PERCENT};
pub use placement::Placement;
pub use random::{nurand, Constants};
pub use report::{every_type_ran, ladder_svg, ladder_table, TpccRunReport, TxTypeReport};
pub use ringdb::{Isolation, TxnTimestamp};
pub use run::{
    check_loaded_scale, check_pool, hot_set_pages, run, TpccRunError, TpccRunSpec, MAX_ATTEMPTS,
    TX_KINDS,
};
pub use scale::{TpccScale, DISTRICTS_STANDARD, WAREHOUSES_MAX};
pub use sharded::{check_sharded, check_shards, load_sharded, open_loaded_sharded, run_sharded};
pub use tables::{TpccTables, TABLE_NAMES};

use crate::error::{BenchError, Result};
use rand::SeedableRng;
use ringdb::LocalDb;

/// The tables, scale and constants of a database loaded before (C_RUN drawn afresh for this
/// run); a typed error when it holds no complete TPC-C population.
pub fn open_loaded(db: &mut LocalDb) -> Result<(TpccTables, TpccScale, Constants)> {
    let path = db.path().to_path_buf();
    let tables = TpccTables::find(db).map_err(|missing| BenchError::NotTpcc {
        path: path.clone(),
        missing,
    })?;
    let meta = tables::read_meta(db, &tables)?.ok_or(BenchError::NotTpcc {
        path,
        missing: "the row a finished load writes last (the load was cut short)",
    })?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(population::now_micros());
    Ok((tables, meta.scale, meta.constants.for_run(&mut rng)))
}

/// A progress bar over `total` rows or transactions, for loads and runs.
pub(crate) fn progress_bar(total: u64, message: &'static str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({per_sec})",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    bar.set_message(message);
    bar
}
