//! `nop-batch`: one enter per batch (a count, not a timing), a row per (mode, batch), a plot.

use ringdb_bench::micro::{run, MicroOpts};
use std::time::Duration;

#[test]
fn nop_batch_makes_one_enter_per_batch() {
    let opts = MicroOpts {
        quick: true,
        runtime: Duration::from_millis(50),
        ..MicroOpts::new(env!("CARGO_TARGET_TMPDIR"))
    };
    let r = run("nop-batch", &opts).unwrap();
    assert_eq!(r.rows.len(), 6, "2 setup modes x 3 batch sizes");
    let batches = r.column_f64("batch");
    let enters = r.column_f64("enters_per_nop");
    for (b, e) in batches.iter().zip(&enters) {
        assert!((e - 1.0 / b).abs() < 1e-9, "batch {b}: {e} enters per NOP");
    }
    assert!(r
        .column_f64("cycles_per_nop")
        .iter()
        .all(|c| c.is_finite() && *c > 0.0));
    let plot = r.plot.as_ref().expect("a plot");
    assert_eq!(plot.series.len(), 2);
    assert!(r.notes.iter().any(|n| n.contains("batch 16")));
}

#[test]
fn unknown_microbenchmark_is_a_clear_error() {
    let e = run("warp-drive", &MicroOpts::new("/tmp"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown microbenchmark") && e.contains("nop-batch"),
        "{e}"
    );
}
