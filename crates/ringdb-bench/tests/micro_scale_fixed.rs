//! `scale-out` and `fixed-buffers`: the shape of their results (a row per point, finite
//! positive figures, consistent ratios and deltas, plots), SQPOLL rows skipped exactly when a
//! ring has no spare core, and clear errors on bad input. No timing is asserted.

mod common;

use common::{assert_note, col, quick};
use ringdb_bench::error::BenchSetting;
use ringdb_bench::micro::{allowed_cpus, run, MicroOpts, MicroResult};
use ringdb_bench::BenchError;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn target(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "micro-scale-fixed-{name}-{}.dat",
        std::process::id()
    ))
}

fn opts(path: &Path) -> MicroOpts {
    MicroOpts {
        max_threads: Some(2),
        ..quick(path, 8 << 20)
    }
}

fn num(row: &[Value], i: usize) -> f64 {
    row[i]
        .as_f64()
        .unwrap_or_else(|| panic!("column {i} of {row:?} is not a number"))
}

#[test]
fn scale_out_quick_has_a_row_per_config_and_thread_count() {
    let path = target("scale");
    let r = run("scale-out", &opts(&path)).unwrap();
    let _ = std::fs::remove_file(&path);

    for c in [
        "config",
        "rw",
        "threads",
        "iops",
        "mib_s",
        "cpu_pct",
        "cycles_per_io",
        "enters_per_io",
        "lat_p50_us",
        "lat_p99_us",
        "speedup_vs_1_thread",
        "ratio_vs_libaio",
        "status",
    ] {
        col(&r, c);
    }
    // Quick: randread only, threads 1 and max_threads (2), five configurations.
    assert_eq!(r.rows.len(), 10, "{}", r.render_table());
    each_config_has_two_rows(&r);
    let cpus = allowed_cpus().len();
    for row in &r.rows {
        check_scale_out_row(&r, row, cpus);
    }
    let plot = r.plot.as_ref().expect("a plot");
    assert!(plot.series.len() >= 4, "{:?}", plot.series);
    assert!(plot.series.iter().all(|s| !s.points.is_empty()));
    assert_note(&r, "3.4-3.5x");
    assert_note(&r, "passthrough");
}

/// Each of the five configurations has a row per thread count (1 and 2).
fn each_config_has_two_rows(r: &MicroResult) {
    let cfg = col(r, "config");
    let configs: Vec<&str> = r
        .rows
        .iter()
        .map(|row| row[cfg].as_str().unwrap())
        .collect();
    for c in [
        "libaio",
        "uring",
        "uring+defer",
        "uring+defer+regfiles+fixedbufs",
        "uring+sqpoll+regfiles+fixedbufs",
    ] {
        assert_eq!(
            configs.iter().filter(|&&x| x == c).count(),
            2,
            "{c}: {configs:?}"
        );
    }
}

/// A randread row at 1 or 2 threads: an SQPOLL row without a spare core among `cpus` is
/// skipped (and has no figures), one the kernel refused says it failed, every other is ok.
fn check_scale_out_row(r: &MicroResult, row: &[Value], cpus: usize) {
    let (cfg, st) = (col(r, "config"), col(r, "status"));
    assert_eq!(row[col(r, "rw")], "randread");
    let t = num(row, col(r, "threads")) as usize;
    assert!(t == 1 || t == 2, "{row:?}");
    let status = row[st].as_str().unwrap();
    let sqpoll = row[cfg].as_str().unwrap().contains("sqpoll");
    if sqpoll && 2 * t > cpus {
        assert_eq!(status, "skipped: needs 2 CPUs per ring", "{row:?}");
        assert!(row[col(r, "iops")].is_null());
        return;
    }
    if sqpoll && status.starts_with("failed") {
        // A kernel that refuses SQPOLL here: the row says so instead of failing the run.
        return;
    }
    assert_eq!(status, "ok", "{row:?}");
    check_measured_scale_out_row(r, row, t);
}

/// A measured row: finite positive figures, MiB/s that is IOPS x 4 KiB, and ratios of 1
/// where the row is compared with itself (one thread; libaio).
fn check_measured_scale_out_row(r: &MicroResult, row: &[Value], threads: usize) {
    for c in [
        "iops",
        "mib_s",
        "cpu_pct",
        "cycles_per_io",
        "lat_p50_us",
        "lat_p99_us",
    ] {
        let v = num(row, col(r, c));
        assert!(v.is_finite() && v > 0.0, "{c} = {v} in {row:?}");
    }
    let enters = num(row, col(r, "enters_per_io"));
    assert!(enters.is_finite() && enters >= 0.0, "{row:?}");
    let mib = num(row, col(r, "mib_s"));
    let iops = num(row, col(r, "iops"));
    assert!(
        (mib - iops * 4096.0 / (1 << 20) as f64).abs() < 1e-6 * mib.max(1.0),
        "{row:?}"
    );
    let speedup = num(row, col(r, "speedup_vs_1_thread"));
    if threads == 1 {
        assert!((speedup - 1.0).abs() < 1e-9, "{row:?}");
    }
    let ratio = num(row, col(r, "ratio_vs_libaio"));
    if row[col(r, "config")] == "libaio" {
        assert!((ratio - 1.0).abs() < 1e-9, "{row:?}");
    } else {
        assert!(ratio.is_finite() && ratio > 0.0, "{row:?}");
    }
}

const FIXED_BUFFERS_METRICS: [&str; 8] = [
    "iops",
    "mib_s",
    "lat_avg_us",
    "lat_p50_us",
    "lat_p95_us",
    "lat_p99_us",
    "lat_p999_us",
    "cycles_per_io",
];

#[test]
fn fixed_buffers_quick_pairs_each_point_with_its_delta() {
    let path = target("fixed");
    let r = run("fixed-buffers", &opts(&path)).unwrap();
    let _ = std::fs::remove_file(&path);

    for c in ["numjobs", "iodepth", "rw", "fixedbufs"]
        .iter()
        .chain(&FIXED_BUFFERS_METRICS)
    {
        col(&r, c);
    }
    // Quick: numjobs 1 x iodepth {1, 32} x {randread, randwrite}, each without, with, delta.
    assert_eq!(r.rows.len(), 12, "{}", r.render_table());
    for (i, triple) in r.rows.chunks(3).enumerate() {
        check_triple(&r, i, triple);
    }
    let depths: Vec<f64> = r
        .rows
        .iter()
        .step_by(3)
        .map(|row| num(row, col(&r, "iodepth")))
        .collect();
    assert_eq!(depths, [1.0, 1.0, 32.0, 32.0]);
    let plot = r.plot.as_ref().expect("a plot");
    assert_eq!(plot.series.len(), 2);
    assert!(plot.series.iter().all(|s| s.points.len() == 4));
    assert_note(&r, "seeds/003");
    assert_note(&r, "noise");
}

/// The `i`-th point's three rows: without, with, and their delta, of the same point; the
/// delta of every metric is the change from without to with, in percent.
fn check_triple(r: &MicroResult, i: usize, triple: &[Vec<Value>]) {
    let fb = col(r, "fixedbufs");
    let kinds: Vec<&str> = triple.iter().map(|row| row[fb].as_str().unwrap()).collect();
    assert_eq!(kinds, ["no", "yes", "delta%"], "triple {i}");
    for k in ["numjobs", "iodepth", "rw"] {
        let c = col(r, k);
        assert!(
            triple[0][c] == triple[1][c] && triple[1][c] == triple[2][c],
            "{triple:?}"
        );
    }
    for m in FIXED_BUFFERS_METRICS {
        let c = col(r, m);
        let (without, with) = (num(&triple[0], c), num(&triple[1], c));
        assert!(
            without.is_finite() && without > 0.0,
            "{m} = {without} in {:?}",
            triple[0]
        );
        assert!(
            with.is_finite() && with > 0.0,
            "{m} = {with} in {:?}",
            triple[1]
        );
        let delta = num(&triple[2], c);
        let expect = (with - without) / without * 100.0;
        assert!(
            (delta - expect).abs() < 1e-6,
            "{m}: delta {delta}, expected {expect}"
        );
    }
}

#[test]
fn bad_target_is_a_clear_error() {
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("no-such-dir-micro-scale-fixed")
        .join("x.dat");
    for name in ["scale-out", "fixed-buffers"] {
        let e = run(name, &opts(&missing)).unwrap_err().to_string();
        assert!(e.contains("no-such-dir-micro-scale-fixed"), "{name}: {e}");
    }
}

#[test]
fn zero_threads_is_refused() {
    let o = MicroOpts {
        max_threads: Some(0),
        ..opts(&target("zero"))
    };
    let e = run("scale-out", &o).unwrap_err();
    assert!(
        matches!(
            e,
            BenchError::OutOfRange {
                setting: BenchSetting::MaxThreads,
                value: 0,
                min: 1,
                ..
            }
        ),
        "{e}"
    );
}
