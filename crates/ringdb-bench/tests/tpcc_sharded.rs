//! TPC-C with its warehouses partitioned across the shards of a `ringdb::Db`: transactions
//! whose remote warehouse lives on another shard have a part there (a `ringdb::DbTransaction`
//! placed by warehouse, `tpcc/txn.rs`). A run of
//! many tasks on both shards, over a pool smaller than the data, keeps conditions 1-4 and
//! the payments condition across shards; a half-committed cross-shard payment fails that
//! condition (so it can fail); with a log, commits that span shards go through the batch log;
//! too few warehouses are refused.

mod tpcc_common;

use ringdb::{Db, Durability, Options};
use ringdb_bench::tpcc::{self, Isolation, TpccRunSpec, TpccScale};
use std::time::Duration;
use tpcc_common::TempDir;

fn open(dir: &TempDir, pool_pages: usize, durability: Durability, fresh: bool) -> Db {
    Db::builder(&dir.0)
        .options(Options {
            fresh,
            direct: false,
            durability,
            pool_pages,
            ..Options::default()
        })
        .shards(2)
        .open()
        .expect("open the sharded database")
}

fn spec(isolation: Isolation, transactions: u64) -> TpccRunSpec {
    let mut spec = TpccRunSpec::new(64, Duration::from_secs(120));
    spec.isolation = isolation;
    spec.max_transactions = Some(transactions);
    spec
}

#[test]
fn tpcc_across_two_shards_keeps_the_checks_and_spans_shards() {
    let dir = TempDir::new("sharded");
    let scale = TpccScale::small(4);
    let db = open(&dir, 2 * 160, Durability::Off, true);
    let (tables, load) = tpcc::load_sharded(&db, &scale, false).expect("load");
    assert!(tpcc::check_sharded(&db, &tables, &scale)
        .expect("check")
        .passed());
    let report = tpcc::run_sharded(
        &db,
        &tables,
        &scale,
        &load.constants,
        &spec(Isolation::Serializable, 4_000),
    )
    .expect("run");
    println!(
        "{} committed, {} conflicts, {:.3} spanning/tx, {:.3} remote ops/tx, {:.2} faults/tx",
        report.committed,
        report.conflicts,
        report.spanning_per_tx,
        report.remote_operations_per_tx,
        report.faults_per_tx
    );
    assert_eq!(report.shards, 2);
    assert!(report.committed >= 4_000, "{report:?}");
    assert!(
        report.spanning_per_tx > 0.0,
        "some transactions reach the other shard"
    );
    assert!(
        report.faults_per_tx > 0.0,
        "the pool is smaller than the data"
    );
    assert!(tpcc::every_type_ran(&report));
    let checks = tpcc::check_sharded(&db, &tables, &scale).expect("check");
    assert!(checks.passed(), "{checks:#?}");
    db.close().expect("close");
    // Reopened, it is recognised with its scale.
    let db = open(&dir, 2 * 160, Durability::Off, false);
    let (_, loaded, _) = tpcc::open_loaded_sharded(&db).expect("open loaded");
    assert_eq!(loaded, scale);
}

/// A Payment whose home part committed and whose customer's part on the other shard did
/// not (what a crash between the two would leave with a log): warehouse 2's W_YTD (on
/// shard 1) grows by 5.00 and no customer's C_YTD_PAYMENT does. Its district's D_YTD grows
/// alike, so conditions 1-4 cannot see it; the payments condition does.
#[test]
fn tpcc_a_half_committed_cross_shard_payment_fails_the_payments_condition() {
    let dir = TempDir::new("sharded-half");
    let scale = TpccScale::small(2);
    let db = open(&dir, 2 * 160, Durability::Off, true);
    let (tables, _) = tpcc::load_sharded(&db, &scale, false).expect("load");
    assert!(tpcc::check_sharded(&db, &tables, &scale).unwrap().passed());
    // W_YTD is the last 8 bytes of a WAREHOUSE row, D_YTD bytes 8..16 from the end of a
    // DISTRICT row (rows.rs: little-endian).
    let bump = |table, key: Vec<u8>, at_from_end: usize| {
        db.run_on(1, move |shard| async move {
            let h = shard.local();
            let mut row = h.in_table(table).get(&key).await.unwrap().expect("the row");
            let at = row.len() - at_from_end;
            let ytd = i64::from_le_bytes(row[at..at + 8].try_into().unwrap());
            row[at..at + 8].copy_from_slice(&(ytd + 500).to_le_bytes());
            h.in_table(table).insert(&key, &row).await.unwrap();
        })
        .unwrap()
    };
    bump(tables.warehouse, vec![0, 0, 0, 2], 8);
    bump(tables.district, vec![0, 0, 0, 2, 1], 12);
    let checks = tpcc::check_sharded(&db, &tables, &scale).expect("check");
    let failed: Vec<u32> = checks
        .conditions
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.number)
        .collect();
    assert_eq!(failed, [0], "{checks:#?}");
    assert_eq!(checks.payments.warehouse_growth_cents, 500);
    assert_eq!(checks.payments.customer_growth_cents, 0);
}

/// With a log, transactions whose writes span shards commit through the batch log; the
/// checks pass after the run, and again after a reopen (which replays every log).
#[test]
fn tpcc_across_two_shards_with_a_log_commits_through_the_batch_log() {
    let dir = TempDir::new("sharded-log");
    let scale = TpccScale::small(4);
    let db = open(&dir, 2 * 160, Durability::Fdatasync, true);
    let (tables, load) = tpcc::load_sharded(&db, &scale, false).expect("load");
    let report = tpcc::run_sharded(
        &db,
        &tables,
        &scale,
        &load.constants,
        &spec(Isolation::Serializable, 1_500),
    )
    .expect("run");
    assert!(report.spanning_per_tx > 0.0, "{report:?}");
    assert!(report.log_syncs_per_tx > 0.0, "{report:?}");
    let checks = tpcc::check_sharded(&db, &tables, &scale).expect("check");
    assert!(checks.passed(), "{checks:#?}");
    db.close().expect("close");
    assert!(
        std::fs::metadata(dir.0.join(ringdb::BATCH_LOG_FILE)).is_ok_and(|m| m.len() > 0),
        "commits across shards went through the batch log"
    );
    let db = open(&dir, 2 * 160, Durability::Fdatasync, false);
    let checks = tpcc::check_sharded(&db, &tables, &scale).expect("check after reopen");
    assert!(checks.passed(), "{checks:#?}");
}

#[test]
fn tpcc_across_shards_refuses_fewer_warehouses_than_shards_and_a_second_load() {
    let scale = TpccScale::small(2);
    let dir = TempDir::new("sharded-refused");
    let db = open(&dir, 2 * 160, Durability::Off, true);
    let err = tpcc::load_sharded(&db, &TpccScale::small(1), false).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("1 warehouses cannot be spread over 2 shards"),
        "{text}"
    );
    let (tables, load) = tpcc::load_sharded(&db, &scale, false).expect("load");
    let err = tpcc::load_sharded(&db, &scale, false).unwrap_err();
    assert!(
        err.to_string().contains("holds TPC-C data already"),
        "{err}"
    );
    let report = tpcc::run_sharded(
        &db,
        &tables,
        &scale,
        &load.constants,
        &spec(Isolation::Serializable, 10),
    );
    assert!(report.is_ok(), "{:?}", report.err());
}
