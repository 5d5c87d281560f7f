//! `ringdb micro handoff`: the JSON has the columns, one row per path and window plus the bare
//! wake-up, every measured figure positive and finite, and the channel rows are their own
//! baseline (ratio 1). Nothing here asserts timings.

mod common;

use common::ringdb;
use serde_json::Value;

const PATHS: &[&str] = &["channel", "doorbell", "shard-msg-ring"];
const WINDOWS: &[u64] = &[1, 16, 64];
const POSITIVE: &[&str] = &[
    "round_trips",
    "round_trips_per_s",
    "lat_p50_us",
    "lat_p99_us",
    "cpu_us_per_round_trip",
];

fn col(v: &Value, name: &str) -> usize {
    v["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

fn positive(row: &Value, index: usize, name: &str) {
    let value = row[index]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} is not a number: {row}"));
    assert!(value.is_finite() && value > 0.0, "{name} = {value}: {row}");
}

#[test]
fn handoff_reports_every_path_and_window_with_sane_figures() {
    let out = ringdb(&[
        "micro",
        "handoff",
        "--quick",
        "--runtime",
        "150ms",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {err}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["name"], "handoff");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), PATHS.len() * WINDOWS.len() + 1, "{v}");
    for (i, row) in rows.iter().enumerate() {
        let path = row[col(&v, "path")].as_str().expect("path");
        let status = row[col(&v, "status")].as_str().expect("status");
        if i == rows.len() - 1 {
            assert_eq!(path, "eventfd-wake (one way)");
        } else {
            assert_eq!(path, PATHS[i % PATHS.len()], "{row}");
            assert_eq!(row[col(&v, "window")], WINDOWS[i / PATHS.len()], "{row}");
        }
        if let Some(reason) = status.strip_prefix("unsupported here: ") {
            eprintln!("SKIP {path}: {reason}");
            assert!(
                row[col(&v, "lat_p50_us")].is_null(),
                "no fake number: {row}"
            );
            continue;
        }
        assert_eq!(status, "ok", "{row}");
        for name in POSITIVE {
            positive(row, col(&v, name), name);
        }
        if path != "eventfd-wake (one way)" {
            for name in ["rate_vs_channel", "p50_vs_channel", "cpu_vs_channel"] {
                positive(row, col(&v, name), name);
            }
        }
        if path == "channel" {
            assert_eq!(row[col(&v, "rate_vs_channel")].as_f64(), Some(1.0), "{row}");
        }
        if path == "shard-msg-ring" {
            positive(
                row,
                col(&v, "server_msg_ring_wakes"),
                "server_msg_ring_wakes",
            );
        }
    }
}
