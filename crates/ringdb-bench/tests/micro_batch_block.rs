//! `batch-latency` and `block-size`: the shape of their results (columns, one row per point,
//! finite positive numbers, plots), the counts they report (one enter per batch), the device
//! limits they mark, and clear errors on bad input. Nothing here asserts performance.

mod common;

use common::{all_positive, assert_note, quick};
use ringdb_bench::error::BenchSetting;
use ringdb_bench::micro::{run, MicroResult};
use ringdb_bench::BenchError;
use ringdb_lab::device::DeviceInfo;
use std::path::PathBuf;

/// A per-test data file under the target's temp dir (created and filled by the benchmark).
fn temp_file(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "micro-batch-block-{name}-{}.dat",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&p);
    p
}

fn column<'a>(r: &'a MicroResult, name: &str) -> Vec<&'a serde_json::Value> {
    let i = common::col(r, name);
    r.rows.iter().map(|row| &row[i]).collect()
}

#[test]
fn batch_latency_rows_counts_and_plot() {
    let path = temp_file("lat");
    let r = run("batch-latency", &quick(&path, 16 << 20)).unwrap();
    let _ = std::fs::remove_file(&path);

    assert_eq!(
        r.columns,
        [
            "batch",
            "target_iops",
            "achieved_iops",
            "lat_avg_us",
            "lat_stddev_us",
            "lat_p99_us",
            "lat_max_us",
            "enters_per_write"
        ]
    );
    let batches = r.column_f64("batch");
    assert_eq!(batches, vec![1.0, 8.0, 128.0], "quick: three batch sizes");
    for c in [
        "target_iops",
        "achieved_iops",
        "lat_avg_us",
        "lat_p99_us",
        "lat_max_us",
        "enters_per_write",
    ] {
        all_positive(&r, c);
    }
    let sd = r.column_f64("lat_stddev_us");
    assert!(sd.iter().all(|x| x.is_finite() && *x >= 0.0), "{sd:?}");
    // One rate for every point.
    let rate = r.column_f64("target_iops");
    assert!(rate.windows(2).all(|w| w[0] == w[1]), "{rate:?}");
    check_latency_bounds(&r);
    check_one_enter_per_batch(&r, &batches);
    let plot = r.plot.as_ref().expect("a plot");
    assert!(plot.log_x);
    assert_eq!(plot.series.len(), 2, "average and standard deviation");
    for s in &plot.series {
        assert_eq!(s.points.len(), 3, "{}", s.label);
    }
    assert_note(&r, "target rate");
    assert_note(&r, "Table 2");
}

/// Percentiles are ordered against the average's bounds.
fn check_latency_bounds(r: &MicroResult) {
    for ((avg, p99), max) in r
        .column_f64("lat_avg_us")
        .iter()
        .zip(r.column_f64("lat_p99_us"))
        .zip(r.column_f64("lat_max_us"))
    {
        assert!(
            p99 <= max * 1.001 && *avg <= max * 1.001,
            "{avg} {p99} {max}"
        );
    }
}

/// A batch goes to the kernel with one enter: at least 1/B enters per write, and batches of
/// 8 or more need far fewer than one per write.
fn check_one_enter_per_batch(r: &MicroResult, batches: &[f64]) {
    for (b, e) in batches.iter().zip(r.column_f64("enters_per_write")) {
        assert!(e >= 1.0 / b - 1e-9, "batch {b}: {e} enters per write");
        if *b >= 8.0 {
            assert!(e < 0.5, "batch {b}: {e} enters per write");
        }
    }
}

#[test]
fn block_size_rows_limits_and_plot() {
    let path = temp_file("bs");
    let r = run("block-size", &quick(&path, 4 << 20)).unwrap();
    let dev = DeviceInfo::for_path(&path).unwrap();
    let _ = std::fs::remove_file(&path);

    for c in [
        "rw",
        "config",
        "bs_kib",
        "gib_s",
        "cycles_per_byte",
        "iowq_workers",
        "enters_per_io",
        "lat_p50_us",
        "lat_p99_us",
        "above_split_limit",
    ] {
        assert!(r.columns.iter().any(|x| x == c), "no column {c}");
    }
    // 2 rw x 3 sizes for plain io_uring, and as many with registered buffers unless the
    // locked-memory limit refused them (then a note says so).
    let skipped = r.notes.iter().any(|n| n.starts_with("skipped"));
    if skipped {
        assert!(r.rows.len() >= 6, "{}", r.render_table());
    } else {
        assert_eq!(r.rows.len(), 12, "{}", r.render_table());
    }
    let rws: Vec<&str> = column(&r, "rw").iter().filter_map(|v| v.as_str()).collect();
    assert!(rws.iter().all(|rw| *rw == "randread" || *rw == "randwrite"));
    assert!(rws.contains(&"randread") && rws.contains(&"randwrite"));
    let bs = r.column_f64("bs_kib");
    assert!(
        bs.iter().all(|b| [4.0, 128.0, 1024.0].contains(b)),
        "{bs:?}"
    );
    for c in [
        "gib_s",
        "iops",
        "cycles_per_byte",
        "cycles_per_io",
        "lat_p50_us",
        "lat_p99_us",
    ] {
        all_positive(&r, c);
    }
    check_cycles_per_byte(&r, &bs);
    check_split_marks(&r, &bs, dev.as_ref().and_then(|d| d.split_limit_kb()));
    assert!(r
        .column_f64("iowq_workers")
        .iter()
        .all(|w| w.is_finite() && *w >= 0.0));
    check_block_size_plot(&r);
    assert_note(&r, "Fig. 8");
    assert_note(&r, "io-wq");
}

/// Cycles per byte is cycles per I/O over the block size (`bs`, in KiB per row).
fn check_cycles_per_byte(r: &MicroResult, bs: &[f64]) {
    for ((cpb, cpi), b) in r
        .column_f64("cycles_per_byte")
        .iter()
        .zip(r.column_f64("cycles_per_io"))
        .zip(bs)
    {
        assert!(
            (cpb - cpi / (b * 1024.0)).abs() <= 1e-9 * cpi.max(1.0),
            "{cpb} {cpi} {b}"
        );
    }
}

/// Every row is marked against the device's split limit (`split_kb`), as true/false.
fn check_split_marks(r: &MicroResult, bs: &[f64], split_kb: Option<u32>) {
    for (v, b) in column(r, "above_split_limit").iter().zip(bs) {
        let expect = split_kb.is_some_and(|l| *b > l as f64);
        assert_eq!(
            v.as_bool(),
            Some(expect),
            "bs {b} KiB, split limit {split_kb:?}"
        );
    }
}

/// A log-x plot whose every line has finite points with positive throughput.
fn check_block_size_plot(r: &MicroResult) {
    let plot = r.plot.as_ref().expect("a plot");
    assert!(plot.log_x);
    assert!(!plot.series.is_empty());
    for s in &plot.series {
        assert!(!s.points.is_empty(), "{}", s.label);
        assert!(s
            .points
            .iter()
            .all(|(x, y)| x.is_finite() && y.is_finite() && *y > 0.0));
    }
}

#[test]
fn missing_target_is_a_clear_error() {
    let path = PathBuf::from("/nonexistent-ringdb-dir/sub/data.dat");
    for name in ["batch-latency", "block-size"] {
        let e = run(name, &quick(&path, 16 << 20)).unwrap_err().to_string();
        assert!(e.contains("no such file"), "{name}: {e}");
    }
}

#[test]
fn block_size_refuses_a_size_below_its_largest_block() {
    let path = temp_file("small");
    let e = run("block-size", &quick(&path, 64 << 10)).unwrap_err();
    let _ = std::fs::remove_file(&path);
    assert!(
        matches!(
            e,
            BenchError::TooSmall {
                setting: BenchSetting::Size,
                value: 65536,
                min: 1048576,
                ..
            }
        ) && e.to_string().contains("1 MiB"),
        "{e}"
    );
}

#[test]
fn batch_latency_refuses_a_size_below_one_block() {
    let path = temp_file("tiny");
    let e = run("batch-latency", &quick(&path, 1000)).unwrap_err();
    let _ = std::fs::remove_file(&path);
    assert!(
        matches!(
            e,
            BenchError::TooSmall {
                setting: BenchSetting::Size,
                min: 4096,
                ..
            }
        ),
        "{e}"
    );
}
