//! ringdb-lab: what reports on the machine, as opposed to what runs.
//!
//! The runtime (`ringdb-io`) holds only what I/O needs while it runs: the engines, the
//! executor, buffers, opening targets, and the few kernel and sysfs queries behind its
//! refusals. The lab is everything that *looks at* the machine to explain or measure it:
//!
//! - [`probe`]: what this kernel, process and device support for io_uring, each feature tried
//!   for real, with the paper's guidelines applied as warnings, rendered as a table (JSON
//!   through `serde`).
//! - [`device`]: the block device under a path as sysfs describes it (queue limits,
//!   scheduler, NVMe nodes), built on the runtime's [`ringdb_io::sysfs`] queries.
//! - [`counters`]: rdtsc, latency histograms and CPU time, for benchmarks.
//! - [`cpu_stat`]: each CPU's time by kind, and the interrupt handling charged to a thread.
//! - [`interrupts`]: which CPUs the device under a path interrupts, counted over a run.
//! - [`iowq`]: the io-wq workers and SQPOLL threads io_uring runs for this process.
//! - [`host`]: the machine a result was measured on (kernel, CPU model, TSC rate, cpuidle),
//!   written into every benchmark report.
//!
//! The lab depends on the runtime and never the other way round, so the engine and the
//! runtime build and run without any of it. The benchmarks (`ringdb-bench`, `ringdb-net`) and
//! the `ringdb` command use it.

#![warn(missing_docs)]

pub mod counters;
pub mod cpu_stat;
pub mod device;
pub mod host;
pub mod interrupts;
pub mod iowq;
pub mod probe;
