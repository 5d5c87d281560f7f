//! The five TPC-C transactions, run one after another from `TxInput::generate`: the checks
//! still pass, every kind ran, about 1% of NewOrders rolled back; and a district damaged on
//! purpose makes condition 2 fail (so the checks can fail).

mod tpcc_common;

use rand::SeedableRng;
use ringdb_bench::tpcc::{self, Isolation, TpccScale, TxInput, TxKind, TxOutcome};
use tpcc_common::{open, TempDir};

const TRANSACTIONS: usize = 4_000;

#[test]
fn tpcc_sequential_run_keeps_the_database_consistent() {
    let dir = TempDir::new("run");
    let scale = TpccScale::small(2);
    let mut db = open(&dir, 4096, true);
    let (tables, report) = tpcc::load(&mut db, &scale, false).expect("load");
    let constants = report.constants;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    let mut committed = [0u32; 5];
    let mut rolled_back = 0u32;
    let h = db.handle();
    for n in 0..TRANSACTIONS {
        let home = (n as u32 % scale.warehouses) + 1;
        let input = TxInput::generate(&scale, &constants, home, &mut rng);
        let run = tpcc::execute(&h, &tables, &input, Isolation::Serializable, None);
        let outcome = db
            .runtime()
            .block_on(run)
            .expect("runtime")
            .expect("transaction");
        match outcome {
            TxOutcome::Committed => committed[input.kind().index()] += 1,
            TxOutcome::RolledBack => {
                assert_eq!(input.kind(), TxKind::NewOrder);
                rolled_back += 1;
            }
        }
    }
    for kind in TxKind::ALL {
        assert!(
            committed[kind.index()] > 0,
            "{kind} never committed: {committed:?}"
        );
    }
    let new_orders = committed[TxKind::NewOrder.index()] + rolled_back;
    let share = f64::from(rolled_back) / f64::from(new_orders);
    assert!(
        (0.002..=0.025).contains(&share),
        "{rolled_back} of {new_orders} NewOrders rolled back"
    );
    let checks = tpcc::check(&mut db, &tables, &scale).expect("check");
    assert!(checks.passed(), "{checks:#?}");
}

#[test]
fn tpcc_a_damaged_district_fails_condition_two() {
    let dir = TempDir::new("damaged");
    let scale = TpccScale::small(1);
    let mut db = open(&dir, 4096, true);
    let (tables, _) = tpcc::load(&mut db, &scale, false).expect("load");
    assert!(tpcc::check(&mut db, &tables, &scale).unwrap().passed());
    // District 1/3's D_NEXT_O_ID is its last 4 bytes (rows.rs): move it on by one.
    let key = [0, 0, 0, 1, 3];
    let mut row = db
        .in_table(tables.district)
        .get(&key)
        .unwrap()
        .expect("district 1/3");
    let at = row.len() - 4;
    let next = u32::from_le_bytes(row[at..].try_into().unwrap());
    assert_eq!(next, scale.orders_per_district + 1);
    row[at..].copy_from_slice(&(next + 1).to_le_bytes());
    let h = db.handle();
    db.runtime()
        .block_on(async move { h.in_table(tables.district).insert(&key, &row).await })
        .unwrap()
        .unwrap();
    let checks = tpcc::check(&mut db, &tables, &scale).expect("check");
    assert!(!checks.passed());
    let failed: Vec<u32> = checks
        .conditions
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.number)
        .collect();
    assert_eq!(failed, [2], "{checks:#?}");
    let two = &checks.conditions[1];
    assert_eq!(two.violation_count, 1);
    assert!(
        two.violations[0].contains("district 1/3"),
        "{:?}",
        two.violations
    );
}

#[test]
fn tpcc_hand_built_inputs_out_of_range_are_refused() {
    use ringdb_bench::tpcc::{
        CustomerChoice, NewOrderInput, NewOrderLine, OrderStatusInput, TpccError, TxChoice,
    };
    let dir = TempDir::new("inputs");
    let scale = TpccScale::small(1);
    let mut db = open(&dir, 4096, true);
    let (tables, _) = tpcc::load(&mut db, &scale, false).expect("load");
    let line = NewOrderLine {
        item: 1,
        supply_warehouse: 1,
        quantity: 1,
    };
    let too_many_lines = TxChoice::NewOrder(NewOrderInput {
        warehouse: 1,
        district: 1,
        customer: 1,
        lines: vec![line; 300],
        rollback: false,
    });
    let long_name = TxChoice::OrderStatus(OrderStatusInput {
        warehouse: 1,
        district: 1,
        customer: CustomerChoice::LastName("X".repeat(40)),
    });
    let no_such_district = TxChoice::OrderStatus(OrderStatusInput {
        warehouse: 1,
        district: 300,
        customer: CustomerChoice::Id(1),
    });
    let h = db.handle();
    for choice in [too_many_lines, long_name, no_such_district] {
        let input = TxInput::from_choice(choice);
        let run = tpcc::execute(&h, &tables, &input, Isolation::Serializable, None);
        let result = db.runtime().block_on(run).expect("runtime");
        assert!(
            matches!(result, Err(TpccError::InvalidInput { .. })),
            "{result:?}"
        );
    }
    assert!(tpcc::check(&mut db, &tables, &scale).unwrap().passed());
}
