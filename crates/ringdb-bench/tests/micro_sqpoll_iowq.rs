//! `sqpoll-wakeup` and `iowq`: the shape of their results (columns, rows, finite positive
//! latencies, plots, JSON), the behaviour they must observe (a gapped SQPOLL request needs a
//! wake-up, a forced read runs on an io-wq worker, an inline NOP never does), and typed errors
//! for bad targets. Nothing here asserts timings: this machine is small and shared.

mod common;

use common::{all_positive, assert_note, col, quick};
use ringdb_bench::error::BenchSetting;
use ringdb_bench::micro::{run, MicroResult};
use ringdb_bench::BenchError;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Both benchmarks pin threads and measure the whole process: never run two at once.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_tmpfs(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return true;
    };
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: c is a valid C string and st points to writable memory of the right size.
    let ret = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
    // SAFETY: statfs succeeded (or the struct stays zeroed, which is a valid value).
    #[allow(clippy::unnecessary_cast)] // f_type is not i64 on every target
    let tmpfs = unsafe { st.assume_init() }.f_type as i64 == TMPFS_MAGIC;
    ret != 0 || tmpfs
}

/// A per-test data file on a block-backed filesystem (O_DIRECT), created by the benchmark.
fn temp_file(name: &str) -> PathBuf {
    let dir = [
        PathBuf::from("/var/tmp"),
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
    ]
    .into_iter()
    .find(|d| d.is_dir() && !is_tmpfs(d))
    .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let p = dir.join(format!(
        "ringdb-micro-sqpoll-iowq-{name}-{}.dat",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&p);
    p
}

fn text(r: &MicroResult, row: usize, name: &str) -> String {
    r.rows[row][col(r, name)]
        .as_str()
        .unwrap_or_else(|| panic!("{name} of row {row} is not a string"))
        .to_string()
}

fn num(r: &MicroResult, row: usize, name: &str) -> Option<f64> {
    r.rows[row][col(r, name)].as_f64()
}

fn json_and_plot(r: &MicroResult, name: &str) {
    let v = serde_json::to_value(r).expect("result serialises");
    assert_eq!(v["name"], name);
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(r.rows.len()));
    let s = serde_json::to_string(r).unwrap();
    assert!(!s.contains("NaN") && !s.contains("inf"), "{s}");
    let plot = r.plot.as_ref().expect("a plot");
    assert!(plot.series.iter().all(|s| !s.points.is_empty()));
    let p = temp_file(&format!("{name}-plot")).with_extension("svg");
    r.write_svg(&p).unwrap();
    let svg = std::fs::read_to_string(&p).unwrap();
    let _ = std::fs::remove_file(&p);
    assert!(svg.contains("<svg"));
    let table = r.render_table();
    assert!(table.contains(name) && table.contains("- "), "{table}");
}

#[test]
fn sqpoll_wakeup_rows_wakeups_and_plot() {
    let _g = serial();
    let path = temp_file("sqpoll");
    let r = run("sqpoll-wakeup", &quick(&path, 8 << 20));
    let _ = std::fs::remove_file(&path);
    let r = r.unwrap();

    assert_eq!(
        r.columns,
        [
            "op",
            "ring",
            "case",
            "samples",
            "wakeups",
            "lat_avg_us",
            "lat_p50_us",
            "lat_p99_us",
            "penalty_p50_us"
        ]
    );
    // Two ops x (SQPOLL awake, asleep; no-SQPOLL back to back, idle gap).
    assert_eq!(r.rows.len(), 8);
    let cases: Vec<(String, String)> = (0..r.rows.len()).map(|i| check_sqpoll_row(&r, i)).collect();
    for op in ["nop", "read-direct"] {
        for case in ["awake", "asleep", "back-to-back", "idle-gap"] {
            assert!(
                cases.iter().any(|(o, c)| o == op && c == case),
                "{op} {case} missing: {cases:?}"
            );
        }
    }
    for c in ["samples", "lat_avg_us", "lat_p50_us", "lat_p99_us"] {
        all_positive(&r, c);
    }
    let p50 = r.column_f64("lat_p50_us");
    let p99 = r.column_f64("lat_p99_us");
    assert!(p50.iter().zip(&p99).all(|(a, b)| a <= b), "{p50:?} {p99:?}");
    assert_note(&r, "NEED_WAKEUP");
    json_and_plot(&r, "sqpoll-wakeup");
}

/// Row `i`: SQPOLL rows count wake-ups (at least one after a gap), other rows none, and
/// exactly the gapped rows carry a penalty. Returns the row's (op, case).
fn check_sqpoll_row(r: &MicroResult, i: usize) -> (String, String) {
    let (op, ring, case) = (text(r, i, "op"), text(r, i, "ring"), text(r, i, "case"));
    let sqpoll = ring.starts_with("sqpoll");
    let gap = case == "asleep" || case == "idle-gap";
    let samples = num(r, i, "samples").unwrap();
    assert!(samples >= 1.0, "row {i}: {samples} samples");
    let wakeups = num(r, i, "wakeups");
    if sqpoll {
        let w = wakeups.expect("SQPOLL rows count wake-ups");
        assert!(w <= samples, "row {i}: {w} wake-ups of {samples}");
        if gap {
            // After a gap of several idle times the poller sleeps: the engine must have
            // seen NEED_WAKEUP and entered to wake it (at least once).
            assert!(w >= 1.0, "row {i} ({op} asleep): no wake-up observed");
        }
    } else {
        assert!(
            wakeups.is_none(),
            "row {i}: wake-ups on a ring without SQPOLL"
        );
    }
    assert_eq!(
        num(r, i, "penalty_p50_us").is_some(),
        gap,
        "row {i}: a penalty exactly on gapped rows"
    );
    if let Some(p) = num(r, i, "penalty_p50_us") {
        assert!(p.is_finite(), "row {i}: penalty {p}");
    }
    (op, case)
}

#[test]
fn iowq_rows_workers_and_plot() {
    let _g = serial();
    let path = temp_file("iowq");
    let r = run("iowq", &quick(&path, 8 << 20));
    let _ = std::fs::remove_file(&path);
    let r = r.unwrap();

    assert_eq!(
        r.columns,
        [
            "op",
            "mode",
            "ops",
            "lat_avg_us",
            "lat_p50_us",
            "lat_p99_us",
            "cycles_per_op",
            "iowq_workers",
            "delta_avg_us",
            "delta_p50_us"
        ]
    );
    // A regular file: NOPs, O_DIRECT reads and buffered reads, each inline and forced.
    let keys: Vec<(String, String)> = (0..r.rows.len())
        .map(|i| (text(&r, i, "op"), text(&r, i, "mode")))
        .collect();
    let want: Vec<(String, String)> = ["nop", "read-direct", "read-buffered"]
        .iter()
        .flat_map(|op| {
            ["inline", "forced-async"]
                .iter()
                .map(move |m| (op.to_string(), m.to_string()))
        })
        .collect();
    assert_eq!(keys, want);
    for c in [
        "ops",
        "lat_avg_us",
        "lat_p50_us",
        "lat_p99_us",
        "cycles_per_op",
    ] {
        all_positive(&r, c);
    }
    for (i, (op, mode)) in keys.iter().enumerate() {
        let workers = num(&r, i, "iowq_workers").expect("workers are counted");
        let forced = mode == "forced-async";
        if forced {
            // IOSQE_ASYNC always goes through io-wq: its worker must have been seen.
            assert!(workers >= 1.0, "{op} forced: {workers} workers");
            for d in ["delta_avg_us", "delta_p50_us"] {
                let v = num(&r, i, d).unwrap_or_else(|| panic!("{op}: {d} missing"));
                assert!(v.is_finite(), "{op} {d} = {v}");
            }
        } else {
            assert!(num(&r, i, "delta_avg_us").is_none());
            assert!(num(&r, i, "delta_p50_us").is_none());
        }
        if op == "nop" && !forced {
            // A NOP completes inline: it never needs a worker.
            assert_eq!(workers, 0.0, "inline NOPs spawned io-wq workers");
        }
    }
    assert_note(&r, "7.3 us");
    json_and_plot(&r, "iowq");
}

#[test]
fn bad_targets_are_typed_errors() {
    let _g = serial();
    let dir = temp_file("dir");
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("no-such-dir").join("x.dat");
    let small = temp_file("small");
    std::fs::write(&small, vec![7u8; 4096]).unwrap();
    for name in ["sqpoll-wakeup", "iowq"] {
        // A directory.
        let e = run(name, &quick(&dir, 1 << 20)).unwrap_err();
        assert!(e.to_string().contains("directory"), "{name}: {e}");
        // A file in a directory that does not exist.
        let e = run(name, &quick(&missing, 1 << 20)).unwrap_err();
        assert!(
            matches!(e, BenchError::Io(ringdb_io::IoError::NotFound { .. })),
            "{name}: {e}"
        );
        // Less than one block to use.
        let e = run(name, &quick(&small, 100)).unwrap_err();
        assert!(
            matches!(
                e,
                BenchError::TooSmall {
                    setting: BenchSetting::Size,
                    value: 100,
                    min: 4096,
                    ..
                }
            ) && e.to_string().contains("too small"),
            "{name}: {e}"
        );
    }
    assert!(!missing.exists());
    let _ = std::fs::remove_file(&small);
    let _ = std::fs::remove_dir_all(&dir);
}
