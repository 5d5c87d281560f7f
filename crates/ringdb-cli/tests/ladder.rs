//! `ringdb ladder` end to end on a small data set: every step it can run here reports
//! throughput beside the model; the ones it cannot say why; bad arguments are refused.

mod common;

use common::{ringdb, tmp};

#[test]
fn a_small_ladder_runs_and_explains_what_it_cannot_run() {
    let target = tmp("ladder.ringdb");
    let out = ringdb(&[
        "ladder",
        "--target",
        target.to_str().unwrap(),
        "--pool",
        "512k",
        "--records",
        "6000",
        "--tasks",
        "16",
        "--quick",
        "--runtime",
        "300ms",
        "--steps",
        "posix,uring-sync,+batch-evict,+async,+batch-submit,+regbufs,+passthrough,libaio-async",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("ladder: posix"),
        "progress on stderr: {stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8);
    for s in steps {
        let name = s["name"].as_str().unwrap();
        let status = s["status"].as_str().unwrap();
        if name == "+passthrough" {
            assert!(status.starts_with("unsupported here: "), "{status}");
            continue;
        }
        assert_eq!(status, "ok", "{name}");
        assert!(s["tps"].as_f64().unwrap() > 0.0, "{name}");
        assert!(s["predicted_tps"].as_f64().unwrap() > 0.0, "{name}");
        // A data set several times the pool: most updates fault.
        let faults = s["faults_per_tx"].as_f64().unwrap();
        assert!(faults > 0.2, "{name}: {faults} faults per tx");
    }
    // One enter per I/O when each request is submitted alone; fewer when batched.
    let enters = |n: &str| {
        steps.iter().find(|s| s["name"] == n).unwrap()["enters_per_tx"]
            .as_f64()
            .unwrap()
    };
    assert!(enters("+batch-submit") < enters("+async"));
    assert!(v["calibration"]["read_lat_us"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_file(&target);
}

#[test]
fn unknown_steps_and_tiny_data_sets_are_refused() {
    let target = tmp("bad.ringdb");
    let t = target.to_str().unwrap();
    let out = ringdb(&["ladder", "--target", t, "--steps", "posix,+warp"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("unknown step") && e.contains("+batch-submit"),
        "{e}"
    );
    let out = ringdb(&["ladder", "--target", t, "--records", "10"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("too small"), "{e}");
    assert!(e.contains("hint: raise --records to at least"), "{e}");
    let out = ringdb(&["ladder", "--target", t, "--pool", "16k"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("pool"), "{e}");
    assert!(e.contains("hint: raise --pool to at least"), "{e}");
}
