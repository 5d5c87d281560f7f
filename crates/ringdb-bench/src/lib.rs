//! ringdb-bench: workloads and benchmarks over `ringdb-io`.
//!
//! - [`rawio`]: the fio-like raw I/O driver behind `ringdb io`.
//! - [`fio`]: runs fio with equivalent options for side-by-side comparisons.
//! - [`micro`]: the paper's microbenchmarks (`ringdb micro <name>`).
//! - [`pattern`]: deterministic block contents for fills and bit-exact verification.
//! - [`units`]: parsing of sizes (`4k`, `2G`) and durations (`10s`).

pub mod error;
pub mod fio;
pub mod micro;
pub mod pattern;
pub mod rawio;
pub mod units;

pub use error::{BenchError, Result};
