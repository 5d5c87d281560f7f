//! `scan`: both kinds run, alternated; read-ahead reads its leaves in batches (counts, not
//! timings), and both scans return the same number of leaves per scan.

use ringdb_bench::micro::{run, MicroOpts};

#[test]
fn scan_reads_leaves_in_batches_beside_the_leaf_at_a_time_baseline() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("micro-scan");
    let _ = std::fs::create_dir_all(&dir);
    let opts = MicroOpts {
        quick: true,
        ..MicroOpts::new(dir.join("micro.dat"))
    };
    let r = run("scan", &opts).unwrap();
    assert_eq!(r.rows.len(), 2, "one row per kind of scan");
    let batches = r.column_f64("batches_per_scan");
    let per_batch = r.column_f64("pages_per_batch");
    let read = r.column_f64("pages_read_per_scan");
    let leaves = r.column_f64("leaves_per_scan");
    assert_eq!(batches[0], 0.0, "the baseline reads no batches");
    assert!(batches[1] >= 1.0, "read-ahead reads batches: {batches:?}");
    assert!(
        per_batch[1] >= 2.0,
        "several pages per batch: {per_batch:?}"
    );
    assert!(
        read.iter().all(|&p| p >= 1.0),
        "the pool is cold-ish: {read:?}"
    );
    assert!(
        leaves[0] > 1.0 && (leaves[0] - leaves[1]).abs() <= 2.0,
        "{leaves:?}"
    );
    assert!(r.notes.iter().any(|n| n.contains("faster per scan")));
}
