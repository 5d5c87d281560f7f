//! What the microbenchmark tests share: the options of a quick run, finding a result's
//! columns, and the checks every result gets. Each test file uses a part of it.
#![allow(dead_code)]

use ringdb_bench::micro::{MicroOpts, MicroResult};
use std::path::Path;
use std::time::Duration;

/// A quick run over `size` bytes of `target`, 100 ms per point.
pub fn quick(target: &Path, size: u64) -> MicroOpts {
    MicroOpts {
        quick: true,
        runtime: Duration::from_millis(100),
        size,
        ..MicroOpts::new(target)
    }
}

/// Where column `name` is in `r`'s rows; panics when `r` has no such column.
pub fn col(r: &MicroResult, name: &str) -> usize {
    r.columns
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", r.columns))
}

/// Checks that column `name` is a finite positive number in every row.
pub fn all_positive(r: &MicroResult, name: &str) {
    let v = r.column_f64(name);
    assert_eq!(v.len(), r.rows.len(), "{name} is numeric in every row");
    assert!(v.iter().all(|x| x.is_finite() && *x > 0.0), "{name}: {v:?}");
}

/// Checks that some note of `r` contains `needle`.
pub fn assert_note(r: &MicroResult, needle: &str) {
    assert!(
        r.notes.iter().any(|n| n.contains(needle)),
        "no note contains {needle:?}: {:?}",
        r.notes
    );
}
