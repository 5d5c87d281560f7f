//! The model's arithmetic with known inputs, and the report's fields.

use super::*;
use std::path::Path;

pub(super) fn costs(c_write: Option<f64>) -> ModelCosts {
    ModelCosts {
        tsc_ghz: 2.0,
        c_tx: 4100.0,
        c_tx_source: TxSource::InMemory,
        c_tx_reads_per_op: 0.0,
        c_restart: 4100.0,
        c_descent: 2000.0,
        c_checksum: 300.0,
        c_checksum_read: 0.0,
        c_read: 2400.0,
        c_write,
        write_target: None,
        interrupt_cpu: None,
        io_by_cpu: Vec::new(),
        raw_buffer_bytes: 64 << 20,
        secs: 1.0,
    }
}

fn run(reads_per_op: f64, writes_per_op: f64, cycles_per_op: f64) -> PhaseReport {
    PhaseReport {
        ops: 1000,
        secs: 1.0,
        ops_per_s: 1000.0,
        per_second: vec![1000],
        cycles_per_op_per_second: vec![Some(cycles_per_op)],
        ops_per_cpu: vec![1000],
        lat_us: Default::default(),
        reads_per_op,
        writes_per_op,
        restarts_per_op: reads_per_op,
        resumes_per_op: 0.0,
        enters_per_op: 0.1,
        cycles_per_op,
        cpu_pct: 100.0,
        misses: 0,
        iowq_workers: 0,
        verification_cycles_per_read: None,
        interrupt_cycles_per_op: None,
    }
}

#[test]
fn the_prediction_is_the_ladders_engine_formula() {
    let (predicted, per_read, per_write) =
        predict(&costs(Some(3000.0)), 0.85, 0.1, 0.0, Path::new("/x")).unwrap();
    // c_restart + c_checksum + c_read = 4100 + 300 + 2400; c_checksum + c_write = 300 + 3000.
    assert_eq!(per_read, 6800.0);
    assert_eq!(per_write, 3300.0);
    // 4100 + 0.85 x 6800 + 0.1 x 3300 = 4100 + 5780 + 330.
    assert!((predicted - 10_210.0).abs() < 1e-6, "{predicted}");
    // In memory the prediction is c_tx alone.
    let (in_memory, _, _) = predict(&costs(Some(3000.0)), 0.0, 0.0, 0.0, Path::new("/x")).unwrap();
    assert_eq!(in_memory, 4100.0);
}

#[test]
fn reads_are_priced_with_the_checksum_of_a_page_just_read_where_it_was_measured() {
    let mut measured = costs(Some(3000.0));
    measured.c_checksum_read = 900.0;
    let (predicted, per_read, per_write) =
        predict(&measured, 0.85, 0.1, 0.0, Path::new("/x")).unwrap();
    // Reads: 4100 + 900 + 2400; write-backs still seal a cold page: 300 + 3000.
    assert_eq!(per_read, 7400.0);
    assert_eq!(per_write, 3300.0);
    assert!((predicted - (4100.0 + 0.85 * 7400.0 + 0.1 * 3300.0)).abs() < 1e-6);
    let p = compare(&measured, &run(0.85, 0.1, 12_000.0), Path::new("/x")).unwrap();
    assert!(
        p.costs_line().contains("c_checksum_read 900"),
        "{}",
        p.costs_line()
    );
    assert!(p.costs_line().contains("per write: c_checksum 300"));
}

#[test]
fn restarts_that_resume_below_the_root_skip_the_descent() {
    let mut resumed = run(0.85, 0.1, 15_315.0);
    resumed.resumes_per_op = 0.85 * 0.75;
    let p = compare(&costs(Some(3000.0)), &resumed, Path::new("/x")).unwrap();
    // 4100 - 0.75 x 2000 = 2600 per restart; per read 2600 + 300 + 2400.
    assert!((p.resumed_share - 0.75).abs() < 1e-9);
    assert!((p.restart_cycles - 2600.0).abs() < 1e-6);
    assert!((p.cycles_per_read - 5300.0).abs() < 1e-6);
    // 4100 + 0.85 x 5300 + 0.1 x 3300.
    assert!((p.predicted_cycles_per_op - 8935.0).abs() < 1e-6);
    assert!(p
        .costs_line()
        .contains("c_restart 2,600 (c_tx - 75% resumed x c_descent 2,000)"));
}

#[test]
fn the_comparison_relates_measured_to_predicted() {
    let p = compare(
        &costs(Some(3000.0)),
        &run(0.85, 0.1, 15_315.0),
        Path::new("/x"),
    )
    .unwrap();
    assert!((p.read_term_cycles - 5780.0).abs() < 1e-6);
    assert!((p.write_term_cycles - 330.0).abs() < 1e-6);
    assert!((p.measured_over_predicted - 1.5).abs() < 1e-9);
    assert_eq!(
        p.line(),
        "model: 10,210 cycles/op predicted (c_tx 4,100 + 0.85 reads x 6,800 + 0.10 writes x \
         3,300), measured 15,315: 1.50x"
    );
}

#[test]
fn an_unpinned_runs_io_is_priced_where_its_operations_finished() {
    let mut c = costs(Some(3000.0));
    c.interrupt_cpu = Some(1);
    c.io_by_cpu = vec![
        placement::CpuIoCosts {
            cpu: Some(0),
            c_read: 6000.0,
            c_checksum_read: 0.0,
            c_write: Some(5000.0),
        },
        placement::CpuIoCosts {
            cpu: Some(1),
            c_read: 2000.0,
            c_checksum_read: 0.0,
            c_write: Some(3000.0),
        },
    ];
    let mut r = run(0.85, 0.1, 15_315.0);
    r.ops_per_cpu = vec![250, 750];
    let p = compare(&c, &r, Path::new("/x")).unwrap();
    assert_eq!(p.on_interrupt_cpu, Some(0.75));
    assert_eq!(p.costs.c_read, 0.25 * 6000.0 + 0.75 * 2000.0);
    assert_eq!(p.costs.c_write, Some(0.25 * 5000.0 + 0.75 * 3000.0));
    assert!(
        p.costs_line().contains("75% of operations on CPU 1"),
        "{}",
        p.costs_line()
    );
    // Without samples of where it ran, the first CPU's costs stand.
    r.ops_per_cpu.clear();
    let p = compare(&c, &r, Path::new("/x")).unwrap();
    assert_eq!((p.on_interrupt_cpu, p.costs.c_read), (None, 2400.0));
}

#[test]
fn interrupt_handling_counted_in_the_run_is_added_to_the_prediction() {
    let mut charged = run(0.85, 0.1, 15_315.0);
    charged.interrupt_cycles_per_op = Some(2_500.0);
    let p = compare(&costs(Some(3000.0)), &charged, Path::new("/x")).unwrap();
    // 10,210 from c_tx, reads and writes, and the 2,500 the run was charged.
    assert_eq!(p.interrupt_term_cycles, Some(2_500.0));
    assert!((p.predicted_cycles_per_op - 12_710.0).abs() < 1e-6);
    assert!(p
        .line()
        .contains("0.10 writes x 3,300 + interrupts 2,500), measured 15,315"));
    assert!(p
        .costs_line()
        .contains("interrupts: hard and soft interrupt time"));
    // Where the run could not count it, the term is absent, not zero.
    let p = compare(
        &costs(Some(3000.0)),
        &run(0.85, 0.1, 15_315.0),
        Path::new("/x"),
    )
    .unwrap();
    assert_eq!(p.interrupt_term_cycles, None);
    assert!(!p.line().contains("interrupts"));
}

#[test]
fn writes_without_a_write_cost_are_refused_not_guessed() {
    let e = compare(&costs(None), &run(0.5, 0.2, 9000.0), Path::new("/dev/vdb")).unwrap_err();
    assert!(
        matches!(e, BenchError::NoScratchForWrites { writes_per_op, .. } if writes_per_op == 0.2)
    );
    // A read-only run needs no write cost.
    let p = compare(&costs(None), &run(0.5, 0.0, 9000.0), Path::new("/dev/vdb")).unwrap();
    assert_eq!(p.write_term_cycles, 0.0);
}

#[test]
fn the_report_has_the_terms_the_prediction_and_the_ratio() {
    let p = compare(
        &costs(Some(3000.0)),
        &run(0.85, 0.1, 15_315.0),
        Path::new("/x"),
    )
    .unwrap();
    let v = serde_json::to_value(&p).unwrap();
    for field in [
        "reads_per_op",
        "writes_per_op",
        "resumed_share",
        "restart_cycles",
        "cycles_per_read",
        "cycles_per_write",
        "read_term_cycles",
        "write_term_cycles",
        "predicted_cycles_per_op",
        "measured_cycles_per_op",
        "measured_over_predicted",
    ] {
        assert!(v[field].is_number(), "{field} in {v}");
    }
    for field in [
        "c_tx",
        "c_restart",
        "c_descent",
        "c_checksum",
        "c_checksum_read",
        "c_read",
        "c_write",
        "tsc_ghz",
    ] {
        assert!(v["costs"][field].is_number(), "costs.{field} in {v}");
    }
    assert_eq!(v["costs"]["c_tx_source"]["kind"], "in_memory");
    let hot = TxSource::HotRange {
        first_key: 10,
        keys: 100,
        pages: 5,
        pool_pages: 10,
    };
    assert_eq!(serde_json::to_value(&hot).unwrap()["kind"], "hot_range");
}

#[test]
fn thousands_groups_digits() {
    assert_eq!(thousands(0.4), "0");
    assert_eq!(thousands(999.0), "999");
    assert_eq!(thousands(1000.0), "1,000");
    assert_eq!(thousands(9870.2), "9,870");
    assert_eq!(thousands(1_234_567.0), "1,234,567");
    assert_eq!(thousands(-1500.0), "-1,500");
}
