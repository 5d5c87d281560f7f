//! The TPC-C mix from many tasks at once over a pool smaller than the data (so transactions
//! interleave at every page fault), serializable, conflicts retried with their timestamps:
//! the consistency checks still pass.

mod tpcc_common;

use rand::SeedableRng;
use ringdb::DbHandle;
use ringdb_bench::tpcc::{self, Constants, Isolation, TpccError, TpccScale, TpccTables, TxInput};
use std::cell::Cell;
use std::rc::Rc;
use tpcc_common::{open, TempDir};

const TASKS: u32 = 24;
const TRANSACTIONS_PER_TASK: u32 = 120;
/// Attempts of one transaction before the test gives up (wait-die makes a retry older, so it
/// wins long before this).
const ATTEMPTS_MAX: u32 = 10_000;

async fn terminal(
    h: DbHandle,
    tables: TpccTables,
    scale: TpccScale,
    constants: Constants,
    task: u32,
    conflicts: Rc<Cell<u64>>,
) -> Result<(), TpccError> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(task.into());
    let home = task % scale.warehouses + 1;
    for _ in 0..TRANSACTIONS_PER_TASK {
        let input = TxInput::generate(&scale, &constants, home, &mut rng);
        let mut timestamp = None;
        for attempt in 1..=ATTEMPTS_MAX {
            match tpcc::execute(&h, &tables, &input, Isolation::Serializable, timestamp).await {
                Ok(_) => break,
                Err(TpccError::Conflict {
                    timestamp: first, ..
                }) if attempt < ATTEMPTS_MAX => {
                    conflicts.set(conflicts.get() + 1);
                    timestamp = Some(first);
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[test]
fn tpcc_concurrent_serializable_run_passes_the_checks() {
    let dir = TempDir::new("concurrent");
    let scale = TpccScale::small(2);
    let mut db = open(&dir, 256, true);
    let (tables, report) = tpcc::load(&mut db, &scale, false).expect("load");
    let conflicts = Rc::new(Cell::new(0));
    let before = db.stats().pool;
    let handles: Vec<_> = (0..TASKS)
        .map(|task| {
            let run = terminal(
                db.handle(),
                tables,
                scale,
                report.constants,
                task,
                conflicts.clone(),
            );
            db.runtime().spawn(run)
        })
        .collect();
    let results = db
        .runtime()
        .block_on(async move {
            let mut results = Vec::new();
            for h in handles {
                results.push(h.await);
            }
            results
        })
        .expect("runtime");
    for result in results {
        result.expect("every transaction commits or rolls back in the end");
    }
    let after = db.stats().pool;
    println!(
        "{} conflicts retried; {} page reads",
        conflicts.get(),
        after.reads - before.reads
    );
    assert!(
        after.reads > before.reads,
        "the pool is smaller than the data"
    );
    let checks = tpcc::check(&mut db, &tables, &scale).expect("check");
    assert!(checks.passed(), "{checks:#?}");
}
