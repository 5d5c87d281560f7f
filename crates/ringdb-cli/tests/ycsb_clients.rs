//! `ringdb ycsb --shards N --clients M --multi-get K`: user threads calling the blocking API,
//! reading in multi-get batches, under the scheduling policy `--client-sched` names. Nothing
//! here asserts timings: the reads must all find their keys, and the report must say what ran.

mod common;

use common::{ringdb, tmp};
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
