//! ringdb-bench: workloads and benchmarks over `ringdb-io`.
//!
//! - [`rawio`]: the fio-like raw I/O driver behind `ringdb io`.
//! - [`fio`]: runs fio with equivalent options for side-by-side comparisons.
//! - [`micro`]: the paper's microbenchmarks (`ringdb micro <name>`).
//! - [`pattern`]: deterministic block contents for fills and bit-exact verification.
//! - [`ycsb`]: runs YCSB-style operations on a ringdb `LocalDb` with many tasks.
//! - [`ycsb_model`]: the cost model beside a YCSB run (`c_tx` + reads and writes x their costs).

//! - [`ladder`]: the paper's Fig. 5 ladder with its cost model (`ringdb ladder`).
//! - [`report`]: SVG charts and self-contained HTML report pages.
//! - [`tpcc`]: TPC-C: schema, population, the five transactions, consistency checks.
//! - [`units`]: parsing of sizes (`4k`, `2G`) and durations (`10s`).

pub mod advise;
pub mod config;
pub mod error;
pub mod fio;
pub mod ladder;
pub mod micro;
pub mod pattern;
pub mod rawio;
pub mod report;
pub mod tpcc;
pub mod units;
pub mod ycsb;
pub mod ycsb_model;
pub mod ycsb_sharded;

pub use error::{BenchError, Result};
