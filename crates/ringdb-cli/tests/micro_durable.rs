//! `ringdb micro durable`: the JSON has one row per method, measured rows carry positive
//! latencies and the io-wq worker count, `nvme-flush` on a file is refused in its row with a
//! reason, and bad input is a one-line typed error. Nothing here asserts timings.

mod common;

use common::{assert_refused, ringdb, tmp};
use serde_json::Value;
use std::path::PathBuf;

const METHODS: &[&str] = &[
    "baseline",
    "ring-write+fdatasync",
    "ring-linked",
    "thread-fdatasync",
    "sync-fdatasync",
    "odsync",
    "osync",
    "nvme-flush",
];

/// A data file under the target dir (on the block-backed filesystem of the checkout).
fn data_file(name: &str) -> PathBuf {
    let p = tmp(&format!("durable-{name}.dat"));
    let _ = std::fs::remove_file(&p);
    p
}

fn col(v: &Value, name: &str) -> usize {
    v["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

#[test]
fn every_method_has_a_row_and_nvme_flush_says_why_not() {
    let f = data_file("rows");
    let svg = tmp("durable.svg");
    let out = ringdb(&[
        "micro",
        "durable",
        "--target",
        f.to_str().unwrap(),
        "--size",
        "4M",
        "--ios",
        "20",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_file(&f);
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("O_DIRECT is not supported") {
        eprintln!("SKIP: the target dir refuses O_DIRECT: {err}");
        return;
    }
    assert!(out.status.success(), "stderr: {err}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["name"], "durable");
    let rows = v["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r[col(&v, "method")].as_str().unwrap())
        .collect();
    assert_eq!(names, METHODS);
    for r in rows {
        let method = r[col(&v, "method")].as_str().unwrap();
        let status = r[col(&v, "status")].as_str().unwrap();
        if method == "nvme-flush" {
            let reason = status
                .strip_prefix("unsupported here: ")
                .unwrap_or_else(|| panic!("nvme-flush on a file: {status}"));
            assert!(reason.contains("NVMe generic char device"), "{reason}");
            assert!(r[col(&v, "lat_avg_us")].is_null(), "no fake number: {r:?}");
            continue;
        }
        assert_eq!(status, "ok", "{method}");
        assert_eq!(r[col(&v, "ios")], 20, "{method}");
        for c in [
            "lat_avg_us",
            "lat_p50_us",
            "lat_p99_us",
            "ops_per_s",
            "vs_baseline",
        ] {
            let x = r[col(&v, c)].as_f64().unwrap_or(f64::NAN);
            assert!(x.is_finite() && x > 0.0, "{method} {c} = {x}");
        }
        assert!(r[col(&v, "iowq_workers")].is_u64(), "{method}");
        assert!(r[col(&v, "completion")].is_string(), "{method}");
    }
    let notes = v["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("io-wq workers appeared for:")),
        "{notes:?}"
    );
    let s = std::fs::read_to_string(&svg).expect("plot written");
    let _ = std::fs::remove_file(&svg);
    assert!(s.contains("<svg"));
}

#[test]
fn bad_input_is_a_typed_error() {
    let out = ringdb(&[
        "micro",
        "durable",
        "--target",
        "/nonexistent-ringdb-dir/d.dat",
        "--ios",
        "5",
    ]);
    assert_refused(&out, "no such file or device");

    let f = data_file("bs");
    let out = ringdb(&[
        "micro",
        "durable",
        "--target",
        f.to_str().unwrap(),
        "--size",
        "1M",
        "--bs",
        "1000",
        "--ios",
        "5",
    ]);
    let _ = std::fs::remove_file(&f);
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.contains("O_DIRECT is not supported") {
        assert_refused(&out, "block size = 1000 is not a multiple");
        assert_refused(&out, "use --bs and --size in multiples");
    }

    let out = ringdb(&["micro", "durable", "--ios", "0", "--target", "/dev/null"]);
    assert_refused(&out, "I/O count must be at least 1, got 0");
    assert_refused(&out, "--ios takes at least 1");

    let out = ringdb(&["micro", "nop-batch", "--ios", "5"]);
    assert_refused(&out, "--bs and --ios apply to durable only");
}
