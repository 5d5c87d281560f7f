//! Helpers shared by the CLI's integration tests.

use std::path::PathBuf;
use std::process::{Command, Output};

/// A path under cargo's per-target temp dir, unique to this test process.
pub fn tmp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}-{name}", std::process::id()))
}

/// Runs the `ringdb` binary with `args`.
pub fn ringdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringdb"))
        .args(args)
        .output()
        .expect("run ringdb")
}
