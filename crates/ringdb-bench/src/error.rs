//! Errors of the benchmark layer: I/O and database errors from below, plus what the workloads
//! refuse or fail with themselves.
//!
//! Every variant carries its cause as data (which [`BenchSetting`], which value, which limit,
//! which path, which helper thread) and its message says what went wrong and what to change in
//! the library's own words. No message names a command-line flag: a front end turns the
//! setting into its own vocabulary (the `ringdb` CLI prints its flags as a hint line).

use ringdb_io::IoError;
use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;

/// Result alias for the benchmark layer.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Everything a workload or benchmark can refuse or fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The I/O layer refused or failed.
    #[error(transparent)]
    Io(#[from] IoError),

    /// The database refused or failed.
    #[error(transparent)]
    Db(#[from] ringdb::DbError),

    /// A name that is not one of the choices of its setting.
    #[error("unknown {setting} {value:?}; one of: {}", one_of.join(", "))]
    Unknown {
        /// The setting that was given the name.
        setting: BenchSetting,
        /// The name given.
        value: String,
        /// The names it accepts.
        one_of: &'static [&'static str],
    },

    /// Text that does not spell a quantity (a size or a duration).
    #[error("bad {quantity} {value:?}; use e.g. {}", quantity.examples())]
    Unparsable {
        /// What the text should have spelled.
        quantity: Quantity,
        /// The text given.
        value: String,
    },

    /// A setting outside the range the workload can run with.
    #[error("{setting} must be {}, got {}", range_text(*setting, *min, *max), setting.amount(*value))]
    OutOfRange {
        /// The setting.
        setting: BenchSetting,
        /// The value given.
        value: u64,
        /// The smallest value accepted.
        min: u64,
        /// The largest value accepted (`u64::MAX`: no upper limit).
        max: u64,
    },

    /// A setting that must be a multiple of some granule but is not.
    #[error("{setting} must be a multiple of {}, got {}", setting.amount(*multiple), setting.amount(*value))]
    NotMultiple {
        /// The setting.
        setting: BenchSetting,
        /// The value given.
        value: u64,
        /// The granule it must be a multiple of.
        multiple: u64,
    },

    /// A setting too small for what the workload must fit in it (one block, its largest
    /// block, the smallest data set worth measuring).
    #[error("{setting} {} is too small for {needed_by}: at least {}", setting.amount(*value), setting.amount(*min))]
    TooSmall {
        /// The setting.
        setting: BenchSetting,
        /// The value given.
        value: u64,
        /// The least that works.
        min: u64,
        /// What needs at least `min`, in a few words ("one block", "the ladder").
        needed_by: &'static str,
    },

    /// None of the settings of which one must be given was given.
    #[error("no {} given; {purpose}", setting_list(one_of))]
    Missing {
        /// The settings, any one of which would do.
        one_of: &'static [BenchSetting],
        /// Why one is needed, in a few words.
        purpose: &'static str,
    },

    /// A buffer pool smaller than the buffer manager can run with.
    #[error(
        "a buffer pool of {pool_pages} pages is too small: at least {min_pages} ({} KiB with {page_size_bytes}-byte pages)",
        min_pages * page_size_bytes / 1024
    )]
    PoolTooSmall {
        /// Pages in the pool asked for.
        pool_pages: usize,
        /// The fewest pages the buffer manager runs with.
        min_pages: usize,
        /// The page size in bytes.
        page_size_bytes: usize,
    },

    /// A size beyond the end of a block device.
    #[error("size {size_bytes} exceeds the capacity of {} ({capacity_bytes} bytes)", path.display())]
    SizeExceedsDevice {
        /// The block device.
        path: PathBuf,
        /// The bytes asked for.
        size_bytes: u64,
        /// The bytes the device holds.
        capacity_bytes: u64,
    },

    /// A target that holds fewer bytes than the workload needs.
    #[error("{} holds {size_bytes} bytes; {needed_by} needs at least {needed_bytes}", path.display())]
    TargetTooSmall {
        /// The file or device.
        path: PathBuf,
        /// The bytes it holds.
        size_bytes: u64,
        /// The least the workload needs.
        needed_bytes: u64,
        /// The workload.
        needed_by: &'static str,
    },

    /// A target that is neither a regular file nor a block device (a FIFO, a socket, a char
    /// device the workload cannot use).
    #[error("{} is neither a regular file nor a block device", path.display())]
    UnsupportedTarget {
        /// The path.
        path: PathBuf,
    },

    /// An NVMe generic char device whose namespace's block device is missing.
    #[error(
        "{} is an NVMe char device, but its namespace's block device {} (which the steps that go through the block layer use) is missing",
        char_device.display(),
        block_device.display()
    )]
    MissingBlockDevice {
        /// The char device given (`/dev/ngXnY`).
        char_device: PathBuf,
        /// The block device of the same namespace (`/dev/nvmeXnY`).
        block_device: PathBuf,
    },

    /// Filling a file ran out of space.
    #[error("filling {} to {size_bytes} bytes: the filesystem is full (ENOSPC); free space or use a smaller size", path.display())]
    FilesystemFull {
        /// The file being filled.
        path: PathBuf,
        /// The size it was being filled to.
        size_bytes: u64,
    },

    /// A read or write that moved fewer bytes than asked.
    #[error("short {op} at offset {offset}: {transferred_bytes} of {requested_bytes} bytes")]
    ShortTransfer {
        /// The operation ("read", "write", "linked write (its fdatasync cancelled)").
        op: &'static str,
        /// Its offset in bytes.
        offset: u64,
        /// The bytes it moved.
        transferred_bytes: u64,
        /// The bytes it was asked to move.
        requested_bytes: u64,
    },

    /// Bit-exact verification found blocks whose content differs from the pattern written.
    #[error("verification failed: {mismatches} of {checked} blocks differ; first at offset {first_offset}")]
    Verify {
        /// Blocks that differ.
        mismatches: u64,
        /// Blocks checked.
        checked: u64,
        /// Offset of the first block that differs, in bytes.
        first_offset: u64,
    },

    /// A calibration that measured too little to pace a rate-limited run.
    #[error("calibration on {} reached {write_iops:.1} write IOPS; too few to pace", path.display())]
    TooSlowToPace {
        /// The target calibrated on.
        path: PathBuf,
        /// The write IOPS it reached.
        write_iops: f64,
    },

    /// A measured window in which nothing completed.
    #[error("batch {batch}: no write completed in the measured window")]
    NothingCompleted {
        /// The batch size of the point.
        batch: u32,
    },

    /// A batch larger than the ring it is submitted to.
    #[error("batch {batch} exceeds the ring depth {depth}")]
    BatchExceedsDepth {
        /// The batch size.
        batch: u32,
        /// The ring's depth.
        depth: usize,
    },

    /// An in-memory calibration run that still read pages from the target.
    #[error("the in-memory run still faulted ({reads_per_transaction:.2} reads/tx): not enough memory for a pool of {pool_pages} pages")]
    StillFaulting {
        /// Page reads per transaction measured.
        reads_per_transaction: f64,
        /// The pool, in pages, meant to hold the whole data set.
        pool_pages: usize,
    },

    /// `ringdb ycsb`'s model: the run of its mix with every page meant to be resident still
    /// read pages from storage.
    #[error("the cost model's in-memory run still read {reads_per_op:.3} pages per operation (its keys span {range_pages} pages of a pool of {pool_pages})")]
    CalibrationFaulted {
        /// Page reads per operation measured.
        reads_per_op: f64,
        /// Pages the calibration's keys span.
        range_pages: u64,
        /// The pool, in pages.
        pool_pages: usize,
    },

    /// `ringdb ycsb`'s model: the memory left (a cgroup's limit, the machine's available
    /// memory) cannot hold the raw runs' buffers beside the pool.
    #[error("the cost model's raw runs need {} MiB of buffers (one page per task) and {} MiB to spare, but only {} MiB are left ({within})", needed_bytes >> 20, spare_bytes >> 20, left_bytes >> 20)]
    CalibrationMemory {
        /// The least the buffers may take.
        needed_bytes: u64,
        /// What is kept free beside them.
        spare_bytes: u64,
        /// What is left to the process.
        left_bytes: u64,
        /// Which limit leaves that ("the memory cgroup ...", "the machine's available memory").
        within: String,
    },

    /// `ringdb ycsb`'s model: the run wrote pages, and the cost of a write could not be
    /// measured without overwriting the database (a block device has no room beside it).
    #[error("the run wrote {writes_per_op:.3} pages per operation, and the cycles of a page write cannot be measured on {} without overwriting the database", path.display())]
    NoScratchForWrites {
        /// The database's device.
        path: PathBuf,
        /// Page writes per operation the run made.
        writes_per_op: f64,
    },

    /// A figure of a workload description that makes no sense.
    #[error("{what} {value} {reason}")]
    BadFigure {
        /// The figure, in a few words ("cycles per operation").
        what: &'static str,
        /// The value given.
        value: f64,
        /// Why it cannot be used.
        reason: &'static str,
    },

    /// A time budget too small for the least the command must measure.
    #[error("a time budget of {budget_secs:.1} s is too small: {needed_by} needs at least {min_secs:.0} s")]
    BudgetTooSmall {
        /// The budget given, seconds.
        budget_secs: f64,
        /// The least that works, seconds.
        min_secs: f64,
        /// What needs it.
        needed_by: &'static str,
    },

    /// A copy of the loaded data, for a ring of its own, could not be made.
    #[error("copying {} to {}: {source}", from.display(), to.display())]
    CopyData {
        /// The loaded data.
        from: PathBuf,
        /// The copy.
        to: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },

    /// Verifying advice runs the engine's own workload, which a custom description is not.
    #[error("the advice for a custom workload cannot be verified: verification runs one of the engine's workloads ({})", presets.join(", "))]
    VerifyNeedsPreset {
        /// The workloads that can be verified.
        presets: &'static [&'static str],
    },

    /// A benchmark's own bookkeeping broke an invariant (a bug, not a setting).
    #[error("internal error: {what}")]
    Internal {
        /// The invariant that broke, in a few words.
        what: &'static str,
    },

    /// A result asked to be plotted that has no plot.
    #[error("{benchmark} has no plot")]
    NoPlot {
        /// The benchmark's name.
        benchmark: String,
    },

    /// Drawing a plot failed.
    #[error("plotting {}: {reason}", path.display())]
    Plot {
        /// The file being drawn.
        path: PathBuf,
        /// What the plotting library said.
        reason: String,
    },

    /// A report (an HTML page, an SVG chart, or the folder holding them) could not be written.
    #[error("writing the report {}: {source}", path.display())]
    WriteReport {
        /// The file or folder being written.
        path: PathBuf,
        /// What the filesystem said.
        source: std::io::Error,
    },

    /// fio, run for a side-by-side comparison, failed.
    #[error("fio: {0}")]
    Fio(#[from] FioError),

    /// TPC-C cardinalities that break a rule of the population's shape.
    #[error("TPC-C scale {scale} breaks a rule: {rule}")]
    TpccShape {
        /// The scale given.
        scale: crate::tpcc::TpccScale,
        /// The rule it breaks, in a few words.
        rule: &'static str,
    },

    /// A TPC-C load into a database that holds a TPC-C population already.
    #[error(
        "the database holds TPC-C data already ({loaded}); loading {requested} needs a fresh one"
    )]
    TpccAlreadyLoaded {
        /// The scale the database was loaded with.
        loaded: crate::tpcc::TpccScale,
        /// The scale asked for.
        requested: crate::tpcc::TpccScale,
    },

    /// A TPC-C run or check on a database loaded with another scale.
    #[error("the database was loaded with {loaded}, not {requested}")]
    TpccScaleMismatch {
        /// The scale the database was loaded with.
        loaded: crate::tpcc::TpccScale,
        /// The scale asked for.
        requested: crate::tpcc::TpccScale,
    },

    /// A database without (a complete) TPC-C population.
    #[error("{} holds no complete TPC-C population: {missing} is missing", path.display())]
    NotTpcc {
        /// The database.
        path: PathBuf,
        /// What is missing (a table's name, or the row a finished load writes last).
        missing: &'static str,
    },

    /// A TPC-C row that does not decode.
    #[error("TPC-C data is damaged: {source}")]
    TpccRow {
        /// The row's decoding error.
        source: crate::tpcc::RowError,
    },

    /// A TPC-C row that the population always holds is missing (the check reads it).
    #[error("TPC-C data is damaged: {table} has no row for key {key:02x?}")]
    TpccMissingRow {
        /// The table.
        table: &'static str,
        /// The key.
        key: Vec<u8>,
    },

    /// A TPC-C transaction failed (other than by the rollback the workload asks for).
    #[error(transparent)]
    Tpcc(#[from] crate::tpcc::TpccError),

    /// A TPC-C run refused its settings or failed (the runner's own errors).
    #[error(transparent)]
    TpccRun(#[from] crate::tpcc::TpccRunError),

    /// A helper thread of a benchmark failed.
    #[error("the {thread} thread {failure}")]
    Job {
        /// The thread's name.
        thread: String,
        /// How it failed.
        #[source]
        failure: JobFailure,
    },

    /// A client thread could not be made `SCHED_BATCH`.
    #[error("cannot make a client thread SCHED_BATCH: {source}")]
    ClientPolicy {
        /// The kernel's error.
        source: std::io::Error,
    },
}

/// A setting of a workload or benchmark, named in errors in the library's words; a front end
/// maps each to its own spelling (the CLI's flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BenchSetting {
    /// The read/write mode of a raw I/O run (read, write, randread, ...).
    ReadWriteMode,
    /// The percentage of reads in a mixed run.
    ReadMix,
    /// Bytes per request.
    BlockSize,
    /// Bytes of the target to use.
    Size,
    /// Jobs (threads, each with its ring) of a raw I/O run.
    Jobs,
    /// How long a run lasts.
    Runtime,
    /// I/Os per job (or per method) before a run stops.
    Ios,
    /// The most threads a scaling benchmark goes up to.
    MaxThreads,
    /// Concurrent tasks of a database workload.
    Tasks,
    /// Records loaded into the database.
    Records,
    /// The buffer pool.
    Pool,
    /// A step of the ladder.
    Step,
    /// A YCSB workload (a-f, update-only).
    Workload,
    /// How keys are chosen.
    Distribution,
    /// Which microbenchmark runs.
    Microbenchmark,
    /// Threads (cores) an application gives the engine.
    Threads,
    /// Operations an application keeps in flight per thread.
    Concurrency,
    /// TPC-C warehouses.
    Warehouses,
    /// TPC-C districts per warehouse.
    Districts,
    /// Memory one raw I/O job's buffers span.
    BufferSpan,
}

impl BenchSetting {
    /// The setting's unit, for [`BenchSetting::amount`].
    fn unit(self) -> Unit {
        match self {
            BenchSetting::BlockSize | BenchSetting::Size | BenchSetting::BufferSpan => Unit::Bytes,
            BenchSetting::ReadMix => Unit::Percent,
            _ => Unit::Count,
        }
    }

    /// `value` in this setting's unit: "4 KiB", "1000 bytes", "50%", "16".
    pub fn amount(self, value: u64) -> String {
        match self.unit() {
            Unit::Bytes => bytes_text(value),
            Unit::Percent => format!("{value}%"),
            Unit::Count => value.to_string(),
        }
    }
}

impl fmt::Display for BenchSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BenchSetting::ReadWriteMode => "read/write mode",
            BenchSetting::ReadMix => "read mix",
            BenchSetting::BlockSize => "block size",
            BenchSetting::Size => "size",
            BenchSetting::Jobs => "job count",
            BenchSetting::Runtime => "runtime",
            BenchSetting::Ios => "I/O count",
            BenchSetting::MaxThreads => "maximum thread count",
            BenchSetting::Tasks => "task count",
            BenchSetting::Records => "record count",
            BenchSetting::Pool => "buffer pool",
            BenchSetting::Step => "step",
            BenchSetting::Workload => "YCSB workload",
            BenchSetting::Distribution => "key distribution",
            BenchSetting::Microbenchmark => "microbenchmark",
            BenchSetting::Threads => "thread count",
            BenchSetting::Concurrency => "operations in flight per thread",
            BenchSetting::Warehouses => "warehouse count",
            BenchSetting::Districts => "districts per warehouse",
            BenchSetting::BufferSpan => "buffer span",
        })
    }
}

/// What a setting's values count.
#[derive(Clone, Copy)]
enum Unit {
    Bytes,
    Percent,
    Count,
}

/// A byte count in the largest binary unit that divides it ("4 KiB", "1 GiB"), else in bytes.
fn bytes_text(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    if bytes == 1 {
        "1 byte".into()
    } else {
        format!("{bytes} bytes")
    }
}

/// "between 1 and 1024", or "at least 1" when there is no upper limit.
fn range_text(setting: BenchSetting, min: u64, max: u64) -> String {
    if max == u64::MAX {
        format!("at least {}", setting.amount(min))
    } else {
        format!(
            "between {} and {}",
            setting.amount(min),
            setting.amount(max)
        )
    }
}

/// "runtime or I/O count".
fn setting_list(settings: &[BenchSetting]) -> String {
    let names: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
    names.join(" or ")
}

/// What a piece of text was meant to spell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Quantity {
    /// A byte size (`4k`, `1M`, `2G`).
    Size,
    /// A duration (`10s`, `500ms`).
    Duration,
}

impl Quantity {
    /// Examples of the spelling.
    fn examples(self) -> &'static str {
        match self {
            Quantity::Size => "4k, 1M, 2G",
            Quantity::Duration => "10s, 500ms",
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Quantity::Size => "size",
            Quantity::Duration => "duration",
        })
    }
}

/// How running fio for a comparison failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FioError {
    /// No `fio` on the `PATH`.
    #[error(
        "fio is not installed; install it (apt-get install fio) or run without the fio comparison"
    )]
    NotInstalled,

    /// `fio` could not be started.
    #[error("could not start fio: {source}")]
    Start {
        /// The error from spawning it.
        source: std::io::Error,
    },

    /// `fio` ran and exited with a failure.
    #[error("fio exited with {status}: {message}")]
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The first non-empty line of its stderr (else of its stdout).
        message: String,
    },

    /// fio's output holds no JSON object.
    #[error("no JSON in fio's output")]
    NoJson,

    /// fio's JSON could not be read.
    #[error("unreadable JSON from fio: {source}")]
    Json {
        /// The parser's error.
        source: serde_json::Error,
    },

    /// fio's JSON report has no job.
    #[error("fio's JSON has no job")]
    NoJob,

    /// A setting of the run fio has no equal for: the two would not run the same thing.
    #[error("fio has no equal of the {setting}; compare without it")]
    NoEqual {
        /// The setting.
        setting: BenchSetting,
    },
}

/// How a helper thread of a benchmark failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobFailure {
    /// The thread could not be started.
    #[error("could not be started: {source}")]
    Spawn {
        /// The error from spawning it.
        source: std::io::Error,
    },

    /// The thread panicked.
    #[error("panicked: {message}")]
    Panicked {
        /// The panic's message (or a placeholder when the payload was not text).
        message: String,
    },

    /// The thread went away while work was still being handed to it.
    #[error("is gone")]
    Gone,
}

/// Refuses `value` of `setting` outside `min..=max`.
pub(crate) fn check_range(setting: BenchSetting, value: u64, min: u64, max: u64) -> Result<()> {
    if value < min || value > max {
        return Err(BenchError::OutOfRange {
            setting,
            value,
            min,
            max,
        });
    }
    Ok(())
}

impl BenchError {
    /// A job thread named `thread` that could not be started.
    pub fn job_spawn(thread: impl Into<String>, source: std::io::Error) -> BenchError {
        BenchError::Job {
            thread: thread.into(),
            failure: JobFailure::Spawn { source },
        }
    }

    /// A job thread named `thread` that panicked with `payload` (what `join` returned).
    pub fn job_panicked(
        thread: impl Into<String>,
        payload: &(dyn std::any::Any + Send),
    ) -> BenchError {
        let message = if let Some(text) = payload.downcast_ref::<&str>() {
            (*text).to_string()
        } else if let Some(text) = payload.downcast_ref::<String>() {
            text.clone()
        } else {
            "(no message)".to_string()
        };
        BenchError::Job {
            thread: thread.into(),
            failure: JobFailure::Panicked { message },
        }
    }
}

/// Opening a database fails with the engine's `OpenError`: a benchmark reports it as any
/// other engine error.
impl From<ringdb::OpenError> for BenchError {
    fn from(e: ringdb::OpenError) -> Self {
        BenchError::Db(e.into())
    }
}

/// A write (or a close) fails with the engine's `WriteError`.
impl From<ringdb::WriteError> for BenchError {
    fn from(e: ringdb::WriteError) -> Self {
        BenchError::Db(e.into())
    }
}

/// A read fails with the engine's `ReadError`.
impl From<ringdb::ShardError> for BenchError {
    fn from(e: ringdb::ShardError) -> Self {
        BenchError::Db(e.into())
    }
}

impl From<ringdb::ReadError> for BenchError {
    fn from(e: ringdb::ReadError) -> Self {
        BenchError::Db(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_in_the_settings_unit() {
        assert_eq!(BenchSetting::Size.amount(1 << 20), "1 MiB");
        assert_eq!(BenchSetting::BlockSize.amount(1000), "1000 bytes");
        assert_eq!(BenchSetting::BlockSize.amount(1), "1 byte");
        assert_eq!(BenchSetting::ReadMix.amount(50), "50%");
        assert_eq!(BenchSetting::Jobs.amount(16), "16");
    }

    #[test]
    fn messages_name_the_setting_and_the_limit() {
        let e = BenchError::OutOfRange {
            setting: BenchSetting::Ios,
            value: 0,
            min: 1,
            max: u64::MAX,
        };
        assert_eq!(e.to_string(), "I/O count must be at least 1, got 0");
        let e = BenchError::OutOfRange {
            setting: BenchSetting::BlockSize,
            value: 0,
            min: 1,
            max: 1 << 30,
        };
        assert_eq!(
            e.to_string(),
            "block size must be between 1 byte and 1 GiB, got 0 bytes"
        );
        let e = BenchError::Missing {
            one_of: &[BenchSetting::Runtime, BenchSetting::Ios],
            purpose: "a run needs one to stop",
        };
        assert_eq!(
            e.to_string(),
            "no runtime or I/O count given; a run needs one to stop"
        );
        let e = BenchError::TooSmall {
            setting: BenchSetting::Size,
            value: 64 << 10,
            min: 1 << 20,
            needed_by: "its largest block",
        };
        assert_eq!(
            e.to_string(),
            "size 64 KiB is too small for its largest block: at least 1 MiB"
        );
    }

    #[test]
    fn a_panic_message_is_kept() {
        let payload: Box<dyn std::any::Any + Send> = Box::new("boom");
        let e = BenchError::job_panicked("ringdb-job0", payload.as_ref());
        assert_eq!(e.to_string(), "the ringdb-job0 thread panicked: boom");
        let payload: Box<dyn std::any::Any + Send> = Box::new(String::from("bang"));
        let e = BenchError::job_panicked("ringdb-job1", payload.as_ref());
        assert!(e.to_string().ends_with("panicked: bang"));
    }
}
