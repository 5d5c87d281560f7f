//! `ringdb ycsb --shards N --clients M --multi-get K`: user threads calling the blocking API,
//! reading in multi-get batches, under the scheduling policy `--client-sched` names. Nothing
//! here asserts timings: the reads must all find their keys, and the report must say what ran.

mod common;
#[path = "../../ringdb-io/tests/support/seccomp.rs"]
mod seccomp;

use common::{ringdb, tmp};
use seccomp::{child_scenario, run_child, CHILD_DONE};
use serde_json::Value;

/// Runs `ringdb ycsb` with `args` after `--db <db>` and returns its JSON report.
fn ycsb(db: &str, args: &[&str]) -> Value {
    let mut all = vec!["ycsb", "--db", db, "--json", "--durability", "off"];
    all.extend_from_slice(args);
    let out = ringdb(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

#[test]
fn clients_read_every_key_in_multi_gets_under_either_policy() {
    let dir = tmp("ycsb-clients");
    let _ = std::fs::remove_dir_all(&dir);
    let db = dir.to_str().expect("utf-8 path");
    let common = [
        "--workload",
        "c",
        "--distribution",
        "uniform",
        "--records",
        "20000",
        "--pool",
        "1M",
        "--runtime",
        "300ms",
    ];
    let mut load = vec!["--shards", "2", "--load", "--tasks", "8"];
    load.extend_from_slice(&common);
    ycsb(db, &load);
    for policy in ["batch", "normal"] {
        let mut run = vec![
            "--clients",
            "3",
            "--multi-get",
            "16",
            "--client-sched",
            policy,
        ];
        run.extend_from_slice(&common);
        let report = ycsb(db, &run);
        assert_eq!(report["client_sched"], policy, "{report}");
        assert_eq!(report["run"]["clients"], 3, "{report}");
        assert!(report["run"]["ops"].as_u64().unwrap() > 0, "{report}");
        // Every key drawn was loaded: a multi-get that lost or misplaced a value shows here.
        assert_eq!(report["run"]["misses"], 0, "{report}");
    }
    let out = ringdb(&[
        "ycsb",
        "--db",
        db,
        "--clients",
        "2",
        "--client-sched",
        "fifo",
    ]);
    assert_eq!(out.status.code(), Some(2), "clap refuses an unknown policy");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clients_that_cannot_be_made_batch_are_refused_with_a_hint() {
    match child_scenario().as_deref() {
        Some("sched-blocked") => clients_under_a_filter_that_blocks_the_policy(),
        Some(_) => {}
        None => {
            run_child(
                "clients_that_cannot_be_made_batch_are_refused_with_a_hint",
                "sched-blocked",
                &[],
            );
        }
    }
}

/// Under a seccomp filter that fails `sched_setscheduler` (inherited by `ringdb`): the default
/// policy is refused with a typed error and the CLI's hint, and `--client-sched normal` runs.
fn clients_under_a_filter_that_blocks_the_policy() {
    let dir = tmp("ycsb-clients-sched-blocked");
    let _ = std::fs::remove_dir_all(&dir);
    let db = dir.to_str().expect("utf-8 path");
    let common = ["--workload", "c", "--records", "2000", "--runtime", "100ms"];
    let mut load = vec!["--shards", "2", "--load", "--tasks", "4"];
    load.extend_from_slice(&common);
    ycsb(db, &load);
    seccomp::block_syscalls(&[libc::SYS_sched_setscheduler], libc::EPERM);
    let mut batch = vec!["ycsb", "--db", db, "--durability", "off", "--clients", "2"];
    batch.extend_from_slice(&common);
    let out = ringdb(&batch);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("SCHED_BATCH"), "{stderr}");
    assert!(stderr.contains("--client-sched normal"), "{stderr}");
    let mut normal = vec!["--clients", "2", "--client-sched", "normal"];
    normal.extend_from_slice(&common);
    let report = ycsb(db, &normal);
    assert_eq!(report["client_sched"], "normal", "{report}");
    assert_eq!(report["run"]["misses"], 0, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
    println!("{CHILD_DONE}");
}
