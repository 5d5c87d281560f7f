//! `ringdb ycsb` prints the cost model beside its run: the JSON report carries the model's
//! terms, its prediction and the ratio, in memory (all data resident) and out of memory (a hot
//! key range), and `--no-model` skips it. Nothing here asserts timings; `ringdb micro
//! point-cost` reports every part of the breakdown.

mod common;

use common::{assert_refused, ringdb, tmp};
use serde_json::Value;

fn number(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{} is not a number in {v}", path.join(".")))
}

/// Runs a short `ringdb ycsb` on a fresh database and returns its JSON report.
fn ycsb(name: &str, extra: &[&str]) -> Value {
    let db = tmp(name);
    let db_arg = db.to_str().expect("utf-8 path");
    let mut args = vec![
        "ycsb",
        "--db",
        db_arg,
        "--load",
        "--tasks",
        "8",
        "--runtime",
        "400ms",
        "--model-time",
        "150ms",
        "--distribution",
        "uniform",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = ringdb(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&db);
    assert!(out.status.success(), "stderr: {err}");
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn check_prediction(v: &Value) {
    let m = &v["model"];
    for term in [
        "c_tx",
        "c_restart",
        "c_checksum",
        "c_checksum_read",
        "c_read",
        "c_write",
    ] {
        assert!(number(m, &["costs", term]) > 0.0, "{term}: {m}");
    }
    let predicted = number(m, &["predicted_cycles_per_op"]);
    let read_term = number(m, &["read_term_cycles"]);
    let write_term = number(m, &["write_term_cycles"]);
    let c_tx = number(m, &["costs", "c_tx"]);
    // Counted in the run where the kernel charges interrupts to tasks (null elsewhere).
    let interrupts = m["interrupt_term_cycles"].as_f64().unwrap_or(0.0);
    assert!(interrupts >= 0.0, "{m}");
    assert_eq!(
        m["interrupt_term_cycles"].as_f64(),
        v["run"]["interrupt_cycles_per_op"].as_f64(),
        "{v}"
    );
    assert!(
        (predicted - (c_tx + read_term + write_term + interrupts)).abs() <= 1e-6 * predicted,
        "{m}"
    );
    let measured = number(m, &["measured_cycles_per_op"]);
    assert_eq!(measured, number(v, &["run", "cycles_per_op"]));
    let ratio = number(m, &["measured_over_predicted"]);
    assert!((ratio - measured / predicted).abs() < 1e-9, "{m}");
    assert!(number(m, &["costs", "c_tx_reads_per_op"]) <= 0.01, "{m}");
}

#[test]
fn in_memory_the_model_is_c_tx_over_all_the_data() {
    let v = ycsb(
        "model-in-memory",
        &["--workload", "c", "--records", "5000", "--pool", "16M"],
    );
    check_prediction(&v);
    assert_eq!(
        v["model"]["costs"]["c_tx_source"]["kind"], "in_memory",
        "{v}"
    );
    assert_eq!(number(&v, &["model", "reads_per_op"]), 0.0);
    assert_eq!(v["model"]["checksum_read_timed_in_run"], false, "{v}");
}

#[test]
fn out_of_memory_the_model_prices_reads_and_writes_from_a_hot_range() {
    let v = ycsb(
        "model-out-of-memory",
        &["--workload", "a", "--records", "40000", "--pool", "2M"],
    );
    check_prediction(&v);
    assert_eq!(
        v["model"]["costs"]["c_tx_source"]["kind"], "hot_range",
        "{v}"
    );
    assert!(number(&v, &["model", "reads_per_op"]) > 0.0, "{v}");
    // Reads are priced with the run's own verification of each page read.
    assert_eq!(v["model"]["checksum_read_timed_in_run"], true, "{v}");
    assert_eq!(
        number(&v, &["model", "costs", "c_checksum_read"]),
        number(&v, &["run", "verification_cycles_per_read"]),
        "{v}"
    );
}

#[test]
fn no_model_skips_the_calibration() {
    let v = ycsb(
        "model-off",
        &["--workload", "c", "--records", "2000", "--no-model"],
    );
    assert!(v["model"].is_null(), "{v}");
    assert!(number(&v, &["run", "cycles_per_op"]) > 0.0);
}

#[test]
fn point_cost_reports_every_part() {
    let target = tmp("point-cost");
    let out = ringdb(&[
        "micro",
        "point-cost",
        "--quick",
        "--target",
        target.to_str().expect("utf-8 path"),
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {err}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let columns: Vec<&str> = v["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c.as_str().expect("column name"))
        .collect();
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3, "{v}");
    let positive = |row: &Value, part: &str| {
        let i = columns.iter().position(|c| *c == part).expect(part);
        assert!(row[i].as_f64().is_some_and(|x| x > 0.0), "{part}: {row}");
    };
    for (row, op) in rows.iter().zip(["read", "update", "read in place"]) {
        assert_eq!(row[0], op);
        for part in ["descent", "leaf_search", "copy", "parts", "total"] {
            positive(row, part);
        }
        // On the shard an operation pays a task switch; in place, a validation.
        positive(
            row,
            if op == "read in place" {
                "validate"
            } else {
                "executor"
            },
        );
    }
}

/// `--warmup` runs the mix before the measured run (stderr says so, the report carries its
/// length) and the run's own figures start after it; a bad length is refused by name.
#[test]
fn a_warmup_runs_before_the_measured_run_and_a_bad_one_is_refused() {
    let db = tmp("ycsb-warmup");
    let db_arg = db.to_str().expect("utf-8 path");
    let args = |warmup: &'static str| {
        vec![
            "ycsb",
            "--db",
            db_arg,
            "--tasks",
            "8",
            "--records",
            "3000",
            "--runtime",
            "300ms",
            "--workload",
            "b",
            "--no-model",
            "--json",
            "--warmup",
            warmup,
        ]
    };
    let out = ringdb(&args("250ms"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {err}");
    assert!(err.contains("warming up for 250ms"), "stderr: {err}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(number(&v, &["warmup_secs"]), 0.25, "{v}");
    let secs = number(&v, &["run", "secs"]);
    assert!(secs < 0.5, "the run's time counts the warm-up: {secs} s");
    assert_refused(&ringdb(&args("soon")), "soon");
    let _ = std::fs::remove_dir_all(&db);
}

/// `--cpu` pins the database's thread and the calibration with it; a sharded run refuses it
/// (its shards' threads are placed by the database).
#[test]
fn cpu_pins_one_shard_and_a_sharded_run_refuses_it() {
    let v = ycsb(
        "model-cpu",
        &["--workload", "c", "--records", "3000", "--cpu", "0"],
    );
    check_prediction(&v);
    let db = tmp("ycsb-cpu-shards");
    let out = ringdb(&[
        "ycsb",
        "--db",
        db.to_str().expect("utf-8 path"),
        "--shards",
        "2",
        "--cpu",
        "0",
        "--runtime",
        "100ms",
    ]);
    let _ = std::fs::remove_dir_all(&db);
    assert_refused(&out, "--cpu");
}
