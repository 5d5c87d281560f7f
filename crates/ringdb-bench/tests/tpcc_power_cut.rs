//! TPC-C across simulated power cuts (`ringdb_io::SimDisk`): a small population is loaded with
//! a log (fdatasync), 32 tasks run the transaction mix, the power is cut while commits and
//! checkpoints have writes in flight (un-synced writes dropped, one torn at a 512-byte
//! boundary), and recovery must give a database whose consistency conditions 1-4 hold and that
//! keeps every NewOrder acknowledged before the cut. Seeds replay exactly
//! (`RINGDB_SIM_SEED=<n>` runs one).

#[path = "../../ringdb/tests/sim_disk/mod.rs"]
mod sim_disk;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use ringdb::{Durability, Isolation, LocalDb, Options};
use ringdb_bench::tpcc::{self, TpccError, TpccScale, TxChoice, TxInput, TxOutcome};
use ringdb_io::SimDisk;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ops::Bound;
use std::rc::Rc;

/// Retries of one transaction after wait-die conflicts before the test gives up on it.
const RETRIES_MAX: u32 = 1_000;

fn opts() -> Options {
    Options {
        pool_pages: 256,
        durability: Durability::Fdatasync,
        wal_bytes: 4 << 20,
        ..Options::default()
    }
}

fn open(sim: &SimDisk) -> LocalDb {
    sim_disk::open(sim, opts()).unwrap_or_else(|e| panic!("seed {}: open: {e}", sim.seed()))
}

/// An acknowledged NewOrder: its warehouse, district and customer.
type Acked = (u32, u32, u32);

/// Runs `input` until it commits or rolls back; `None` once the power is off.
async fn run_one(
    h: &ringdb::DbHandle,
    tables: &tpcc::TpccTables,
    input: &TxInput,
) -> Option<TxOutcome> {
    let mut timestamp = None;
    for _ in 0..RETRIES_MAX {
        match tpcc::execute(h, tables, input, Isolation::Serializable, timestamp).await {
            Ok(outcome) => return Some(outcome),
            Err(TpccError::Conflict { timestamp: t, .. }) => timestamp = Some(t),
            Err(_) => return None, // the power is off: the write or its sync failed
        }
    }
    panic!("a transaction met {RETRIES_MAX} conflicts in a row");
}

/// Runs the mix with 32 tasks until `stop_after` transactions are acknowledged, then cuts the
/// power a seed-chosen number of scheduling rounds later. Returns the acknowledged NewOrders.
fn run_until_cut(sim: &SimDisk, stop_after: u64) -> Vec<Acked> {
    let mut db = open(sim);
    let (tables, scale, constants) = tpcc::open_loaded(&mut db).expect("a loaded database");
    let acked: Rc<RefCell<Vec<Acked>>> = Rc::default();
    let done = Rc::new(Cell::new(0u64));
    let cut = Rc::new(Cell::new(false));
    for task in 0..32u64 {
        let (h, acked, done, cut, sim) = (
            db.handle(),
            acked.clone(),
            done.clone(),
            cut.clone(),
            sim.clone(),
        );
        let mut rng = SmallRng::seed_from_u64(sim.seed() * 1000 + task);
        let home = (task % u64::from(scale.warehouses)) as u32 + 1;
        db.runtime().spawn(async move {
            while !cut.get() {
                let input = TxInput::generate(&scale, &constants, home, &mut rng);
                let Some(outcome) = run_one(&h, &tables, &input).await else {
                    return;
                };
                if let (TxOutcome::Committed, TxChoice::NewOrder(order)) = (outcome, input.choice())
                {
                    acked
                        .borrow_mut()
                        .push((order.warehouse, order.district, order.customer));
                }
                done.set(done.get() + 1);
                if done.get() >= stop_after && !cut.get() {
                    cut.set(true);
                    for _ in 0..(sim.seed() % 29) {
                        ringdb_io::yield_now().await;
                    }
                    sim.power_cut();
                    return;
                }
            }
        });
    }
    let _ = db.runtime().run();
    drop(db); // the machine is off: what the drop writes fails and changes nothing
    let acked = acked.borrow().clone();
    acked
}

/// Recovers and checks: conditions 1-4 hold, the B+trees verify, and each acknowledged
/// NewOrder's customer has at least as many orders as were acknowledged for it.
fn check_after_cut(sim: &SimDisk, acked: &[Acked]) {
    let seed = sim.seed();
    let mut db = open(sim);
    let (tables, scale, _) = tpcc::open_loaded(&mut db).expect("still a TPC-C database");
    let report = tpcc::check(&mut db, &tables, &scale).expect("the checks run");
    assert!(report.passed(), "seed {seed}: after recovery: {report:?}");
    let verified = db.verify().expect("verify runs");
    assert!(verified.is_ok(), "seed {seed}: {verified}");
    let mut wanted: HashMap<Acked, u64> = HashMap::new();
    for customer in acked {
        *wanted.entry(*customer).or_default() += 1;
    }
    for (&(w, d, c), &acknowledged) in &wanted {
        // One order per customer comes from the load, the rest from acknowledged NewOrders.
        let have = orders_of(&mut db, &tables, (w, d, c));
        assert!(
            have > acknowledged,
            "seed {seed}: customer ({w},{d},{c}): {acknowledged} NewOrders acknowledged, {have} orders after recovery"
        );
    }
    db.close().expect("close after the check");
}

/// Orders of customer (w, d, c): its rows in ORDER-BY-CUSTOMER, whose keys are
/// (W u32, D u8, C u32, O u32), big-endian.
fn orders_of(db: &mut LocalDb, tables: &tpcc::TpccTables, (w, d, c): Acked) -> u64 {
    let mut prefix = w.to_be_bytes().to_vec();
    prefix.push(u8::try_from(d).expect("a district fits a byte"));
    prefix.extend_from_slice(&c.to_be_bytes());
    let mut end = prefix.clone();
    end.extend_from_slice(&[0xff; 4]);
    let (h, table) = (db.handle(), tables.order_by_customer);
    let rows = db
        .runtime()
        .block_on(async move {
            h.in_table(table)
                .scan(
                    Bound::Included(&prefix),
                    Bound::Included(&end),
                    ringdb::Direction::Forward,
                    usize::MAX,
                )
                .await
        })
        .expect("the runtime runs")
        .expect("the scan reads");
    rows.len() as u64
}

fn seeds() -> Vec<u64> {
    match std::env::var("RINGDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("RINGDB_SIM_SEED is a number")],
        Err(_) => (1..=4).collect(),
    }
}

#[test]
fn tpcc_survives_power_cuts_with_its_consistency_conditions() {
    for seed in seeds() {
        let sim = SimDisk::new(seed, 3);
        let mut db = open(&sim);
        tpcc::load(&mut db, &TpccScale::small(1), false).expect("load");
        db.close().expect("close after the load");
        let mut acked = Vec::new();
        for round in 0..2u64 {
            acked.extend(run_until_cut(&sim, 200 + 150 * round));
            check_after_cut(&sim, &acked);
        }
        eprintln!(
            "seed {seed}: {} acknowledged NewOrders kept over 2 cuts",
            acked.len()
        );
    }
}
