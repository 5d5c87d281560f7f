//! Helpers shared by the CLI's integration tests.

use std::path::PathBuf;
use std::process::{Command, Output};

/// A path under cargo's per-target temp dir, unique to this test process.
/// `RINGDB_TEST_TMP` overrides the directory (e.g. inside the NVMe VM, where the build's
/// paths do not exist).
pub fn tmp(name: &str) -> PathBuf {
    let base = std::env::var_os("RINGDB_TEST_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    base.join(format!("{}-{name}", std::process::id()))
}

/// The `ringdb` binary: `RINGDB_BIN`, or the one cargo built for this test.
pub fn ringdb_bin() -> PathBuf {
    std::env::var_os("RINGDB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ringdb")))
}

/// Runs the `ringdb` binary with `args`.
pub fn ringdb(args: &[&str]) -> Output {
    Command::new(ringdb_bin())
        .args(args)
        .output()
        .expect("run ringdb")
}
