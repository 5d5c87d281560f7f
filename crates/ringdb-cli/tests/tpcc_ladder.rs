//! `ringdb tpcc --ladder` end to end on the small population: an in-memory and an
//! out-of-memory warehouse count, each step on its own copy of the loaded data, the checks'
//! verdict per step, the steps this target cannot run named with their reason, JSON and SVG.

mod common;

use common::{assert_refused, ringdb, tmp};
use std::path::Path;

/// Runs a small ladder in `dir` (pool 1 MiB, 32 tasks, 1 s per step after 200 ms of warm-up)
/// with `extra` arguments, writing the JSON report to `json`; asserts it succeeded and
/// returns its table.
fn small_ladder(dir: &Path, json: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "tpcc",
        "--ladder",
        "--small",
        "--path",
        dir.to_str().unwrap(),
        "--pool",
        "1M",
        "--tasks",
        "32",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = ringdb(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn a_small_ladder_runs_both_warehouse_counts_and_checks_each_step() {
    let dir = tmp("tpcc-ladder");
    let _ = std::fs::remove_dir_all(&dir);
    let json = tmp("tpcc-ladder.json");
    let svg = tmp("tpcc-ladder.svg");
    let text = small_ladder(
        &dir,
        &json,
        &[
            "--warehouses-out",
            "3",
            "--steps",
            "posix,+async,+passthrough",
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    assert!(text.contains("W=1") && text.contains("W=3"), "{text}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    // The out-of-memory count's data is larger than the in-memory one's.
    assert!(groups[1]["data_pages"].as_u64() > groups[0]["data_pages"].as_u64());
    for g in groups {
        for s in g["steps"].as_array().unwrap() {
            let (name, status) = (s["name"].as_str().unwrap(), s["status"].as_str().unwrap());
            if name == "+passthrough" {
                assert!(status.starts_with("unsupported here: "), "{status}");
                continue;
            }
            assert_eq!(status, "ok", "W={} {name}", g["warehouses"]);
            assert!(s["tx_per_s"].as_f64().unwrap() > 0.0, "{name}");
            assert_eq!(
                s["checks_passed"], true,
                "{name}: {}",
                s["check_violations"]
            );
            assert_eq!(s["latencies"].as_array().unwrap().len(), 5);
        }
        let posix = &g["steps"][0];
        assert_eq!(posix["tasks"], 1, "posix runs one transaction at a time");
        assert!((posix["speedup_posix"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    }
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(
        picture.starts_with("<svg") && picture.contains("W=3"),
        "{picture}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&svg);
}

#[test]
fn unknown_steps_are_refused() {
    let dir = tmp("tpcc-ladder-bad");
    let out = ringdb(&[
        "tpcc",
        "--ladder",
        "--small",
        "--path",
        dir.to_str().unwrap(),
        "--steps",
        "posix,+warp",
    ]);
    assert_refused(&out, "+warp");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_ladder_with_a_log_loads_apart_commits_through_it_and_checks_each_step() {
    let dir = tmp("tpcc-ladder-log");
    let _ = std::fs::remove_dir_all(&dir);
    let json = tmp("tpcc-ladder-log.json");
    let text = small_ladder(
        &dir,
        &json,
        &[
            "--warehouses-out",
            "0",
            "--steps",
            "posix,+async",
            "--durability",
            "fdatasync",
        ],
    );
    assert!(text.contains("durability fdatasync"), "{text}");
    // Loaded with a log, apart from a database without one.
    assert!(dir.join("w1-log").join(ringdb::WAL_FILE).exists());
    assert!(!dir.join("w1").exists());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["durability"], "fdatasync");
    let steps = v["groups"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for s in steps {
        let name = s["name"].as_str().unwrap();
        assert_eq!(s["status"], "ok", "{name}");
        assert_eq!(
            s["checks_passed"], true,
            "{name}: {}",
            s["check_violations"]
        );
        let syncs = s["log_syncs_per_tx"].as_f64().unwrap();
        let per_sync = s["commits_per_log_sync"].as_f64().unwrap();
        assert!(syncs > 0.0 && per_sync >= 1.0, "{name}: {s}");
    }
    // With 32 tasks, commits share their log syncs (group commit); one task cannot.
    let async_per_sync = steps[1]["commits_per_log_sync"].as_f64().unwrap();
    assert!(
        async_per_sync > 1.5,
        "+async: {async_per_sync} commits per sync"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&json);
}
