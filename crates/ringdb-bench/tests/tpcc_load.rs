//! The TPC-C population: loaded at the small scale, it passes the consistency checks, is
//! found again after a reopen, and a second load (with another scale) is refused.

mod tpcc_common;

use ringdb_bench::tpcc::{self, TpccScale};
use ringdb_bench::BenchError;
use tpcc_common::{open, TempDir};

#[test]
fn tpcc_small_load_passes_the_checks_and_reopens() {
    let dir = TempDir::new("load");
    let scale = TpccScale::small(2);
    let mut db = open(&dir, 4096, true);
    let (tables, report) = tpcc::load(&mut db, &scale, false).expect("load");
    assert_eq!(report.scale, scale);
    // Every row but the order lines is exact; lines are 5-15 per order.
    let exact_per_district = 30 * 3 + 30 * 2 + 9 + 1;
    let fixed = 1_000 + 2 * (1 + 1_000 + 10 * exact_per_district);
    let orders = 2 * 10 * 30;
    assert!(
        report.rows >= fixed + orders * 5 && report.rows <= fixed + orders * 15,
        "{report:?}"
    );
    let checks = tpcc::check(&mut db, &tables, &scale).expect("check");
    assert!(checks.passed(), "{checks:#?}");
    assert_eq!(
        checks.conditions.len(),
        5,
        "conditions 1-4 and the payments condition"
    );
    assert_eq!(checks.conditions[0].checked, 2);
    assert_eq!(checks.conditions[3].checked, 20);
    assert_eq!(checks.conditions[4].number, 0);
    assert_eq!(
        checks.payments,
        tpcc::PaymentSums::default(),
        "nothing paid yet"
    );
    db.close().expect("close");

    let mut db = open(&dir, 4096, false);
    let (found, loaded_scale, constants) = tpcc::open_loaded(&mut db).expect("open loaded");
    assert_eq!(found, tables);
    assert_eq!(loaded_scale, scale);
    assert_eq!(constants.last_name_load, report.constants.last_name_load);
    assert!(tpcc::check(&mut db, &found, &loaded_scale)
        .unwrap()
        .passed());
}

#[test]
fn tpcc_a_second_load_is_refused_naming_both_scales() {
    let dir = TempDir::new("twice");
    let mut db = open(&dir, 4096, true);
    tpcc::load(&mut db, &TpccScale::small(1), false).expect("first load");
    let err = tpcc::load(&mut db, &TpccScale::small(3), false).unwrap_err();
    match &err {
        BenchError::TpccAlreadyLoaded { loaded, requested } => {
            assert_eq!(loaded.warehouses, 1);
            assert_eq!(requested.warehouses, 3);
        }
        other => panic!("expected TpccAlreadyLoaded, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("1 warehouses") && text.contains("3 warehouses"),
        "{text}"
    );
}

#[test]
fn tpcc_bad_scales_and_empty_databases_are_typed_errors() {
    let dir = TempDir::new("bad");
    let mut db = open(&dir, 4096, true);
    let err = tpcc::load(&mut db, &TpccScale::small(0), false).unwrap_err();
    assert!(
        matches!(err, BenchError::OutOfRange { value: 0, .. }),
        "{err:?}"
    );
    let uneven = TpccScale {
        orders_per_district: 20,
        ..TpccScale::small(1)
    };
    let err = tpcc::load(&mut db, &uneven, false).unwrap_err();
    assert!(matches!(err, BenchError::TpccShape { .. }), "{err:?}");
    let err = tpcc::open_loaded(&mut db).unwrap_err();
    assert!(matches!(err, BenchError::NotTpcc { .. }), "{err:?}");
}
