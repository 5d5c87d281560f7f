//! `durable` (paper Sec. 3.6 "The durable write problem", Fig. 9): what one durable write
//! costs by each method a database can use to make it durable. Every method does the same
//! thing: one `--bs` (4 KiB) `O_DIRECT` write at the next position of a preallocated region
//! (a log's pattern), which must be durable before the next one starts. One row per method:
//!
//! - `baseline`: the write alone, nothing made durable (the lower bound);
//! - `ring-write+fdatasync`: the write through the ring, wait, then `IORING_OP_FSYNC` with
//!   `IORING_FSYNC_DATASYNC` through the ring, wait (the paper's "issued sequentially");
//! - `ring-linked`: the write and the fdatasync submitted together, the write carrying
//!   `IOSQE_IO_LINK`, one `io_uring_enter` that waits for both;
//! - `thread-fdatasync`: the write through the ring, then `fdatasync(2)` on a helper thread
//!   while the ring thread waits for it (ringdb's WAL durability mode `thread`);
//! - `sync-fdatasync`: the write through the ring, then `fdatasync(2)` called by the ring
//!   thread itself (the paper's PostgreSQL port, Sec. 5: "invokes fsync() directly ... rather
//!   than through io_uring");
//! - `odsync` / `osync`: the file opened `O_DIRECT|O_DSYNC` / `O_DIRECT|O_SYNC`, the write
//!   through the ring is durable when it completes;
//! - `nvme-flush`: on an NVMe generic char device (`/dev/ngXnY`) only: an NVMe Write, then an
//!   NVMe Flush, both as passthrough commands (`uring-passthrough` engine); elsewhere the row
//!   says `unsupported here: <reason>`.
//!
//! Method: QD1. Every method runs on a fresh thread (its own ring, hence its own io-wq), pinned
//! to one CPU with its io-wq workers (`IORING_REGISTER_IOWQ_AFF`) and the helper thread of
//! `thread-fdatasync` (which inherits the pin) on the same CPU. A few unrecorded writes warm
//! it up; then it runs `--ios` durable writes or `--runtime`, whichever ends first. Latency runs
//! from pushing the write to the completion of its durability point (`rdtsc`). While the
//! method runs, the main thread samples the `iou-wrk-<tid>` threads of that thread every 5 ms.
//!
//! Here: the methods, the plan they share, and the run; [`job`]: how each method issues its
//! writes on its measuring thread; [`report`]: the table, the notes and the plot.

mod job;
mod report;

use super::target::prepare_target;
use super::{first_allowed_cpu, MicroOpts, MicroResult};
use crate::error::check_range;
use crate::error::{BenchError, BenchSetting, Result};
use job::{measure, nvme_point};
use ringdb_io::{Target, TargetOptions};
use ringdb_lab::counters::LatencySummary;
use ringdb_lab::device::DeviceInfo;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Durable writes per method when `--ios` is not given: a second or two per method at what a
/// 4 KiB write + fdatasync takes on a virtio disk (measured: docs/results/micro.md, `durable`).
pub const DEFAULT_IOS: u64 = 10_000;
/// The same with `--quick`.
const QUICK_IOS: u64 = 200;
/// Default bytes per write.
pub const DEFAULT_BS: u64 = 4096;
/// Durable writes before each measured run (not recorded): brings up the io-wq worker.
const WARMUP_OPS: u64 = 8;
/// Time per method with `--quick`, at most.
const QUICK_RUNTIME: Duration = Duration::from_millis(300);

/// One way to make a write durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Baseline,
    RingFdatasync,
    RingLinked,
    ThreadFdatasync,
    SyncFdatasync,
    Odsync,
    Osync,
    NvmeFlush,
}

impl Method {
    const ALL: [Method; 8] = [
        Method::Baseline,
        Method::RingFdatasync,
        Method::RingLinked,
        Method::ThreadFdatasync,
        Method::SyncFdatasync,
        Method::Odsync,
        Method::Osync,
        Method::NvmeFlush,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::Baseline => "baseline",
            Method::RingFdatasync => "ring-write+fdatasync",
            Method::RingLinked => "ring-linked",
            Method::ThreadFdatasync => "thread-fdatasync",
            Method::SyncFdatasync => "sync-fdatasync",
            Method::Odsync => "odsync",
            Method::Osync => "osync",
            Method::NvmeFlush => "nvme-flush",
        }
    }

    /// What the method issues, in a few words (the table's `how` column).
    fn how(self) -> &'static str {
        match self {
            Method::Baseline => "ring write, no sync",
            Method::RingFdatasync => "ring write; wait; ring FSYNC(DATASYNC); wait",
            Method::RingLinked => "ring write -> IO_LINK -> FSYNC(DATASYNC), one enter",
            Method::ThreadFdatasync => "ring write; wait; fdatasync(2) on a helper thread",
            Method::SyncFdatasync => "ring write; wait; fdatasync(2) on the ring thread",
            Method::Odsync => "ring write to an O_DIRECT|O_DSYNC fd",
            Method::Osync => "ring write to an O_DIRECT|O_SYNC fd",
            Method::NvmeFlush => "passthrough NVMe Write; wait; NVMe Flush",
        }
    }
}

/// What one method measured.
struct Measured {
    ops: u64,
    secs: f64,
    lat: LatencySummary,
    workers: usize,
}

impl Measured {
    fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
}

/// One row: measured, or why this target cannot run it.
struct Point {
    method: Method,
    outcome: std::result::Result<Measured, String>,
}

impl Point {
    fn measured(&self) -> Option<&Measured> {
        self.outcome.as_ref().ok()
    }

    fn print_progress(&self) {
        match &self.outcome {
            Ok(m) => eprintln!(
                "durable {}: {} writes, avg {:.1} us, p50 {:.1} us, p99 {:.1} us, {} io-wq worker(s)",
                self.method.name(),
                m.ops,
                m.lat.avg,
                m.lat.p50,
                m.lat.p99,
                m.workers
            ),
            Err(why) => eprintln!("durable {}: unsupported here: {why}", self.method.name()),
        }
    }
}

/// What `method` measured among `points`, when it ran.
fn measured(points: &[Point], method: Method) -> Option<&Measured> {
    points
        .iter()
        .find(|p| p.method == method)
        .and_then(Point::measured)
}

/// What the methods share.
struct Plan {
    path: PathBuf,
    bs: u64,
    /// Writes cycle through `[0, region)`.
    region: u64,
    ios: u64,
    runtime: Duration,
    cpu: u32,
}

impl Plan {
    fn offset(&self, i: u64) -> u64 {
        (i % (self.region / self.bs)) * self.bs
    }
}

/// `ngXnY` when `path` is (a link to) an NVMe generic char device.
fn nvme_char_name(path: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    if !std::fs::metadata(&real).ok()?.file_type().is_char_device() {
        return None;
    }
    let name = real.file_name()?.to_str()?.to_string();
    let rest = name.strip_prefix("ng")?;
    let (ctrl, ns) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(ctrl) && digits(ns)).then_some(name)
}

/// Why `nvme-flush` cannot run on a target that is not an NVMe generic char device.
fn nvme_flush_refusal(path: &Path) -> String {
    let dev = DeviceInfo::for_path(path).ok().flatten();
    let ng = dev.as_ref().and_then(|d| d.nvme_char_device.clone());
    match (dev, ng) {
        (_, Some(ng)) => format!(
            "not an NVMe generic char device; NVMe Flush via passthrough needs --target {} (raw, destroys its data)",
            ng.display()
        ),
        (Some(d), None) => format!(
            "target is on {}, not an NVMe generic char device (/dev/ngXnY); passthrough flush has no filesystem path",
            d.name
        ),
        (None, None) => {
            "target is on no block device, not an NVMe generic char device (/dev/ngXnY)".into()
        }
    }
}

/// Checks `--bs` and `--ios` and the target; returns the plan and the target's description.
fn plan(opts: &MicroOpts, ng: bool) -> Result<Plan> {
    let bs = opts.bs.unwrap_or(DEFAULT_BS);
    check_range(BenchSetting::BlockSize, bs, 1, u32::MAX.into())?;
    let ios = opts
        .ios
        .unwrap_or(if opts.quick { QUICK_IOS } else { DEFAULT_IOS });
    check_range(BenchSetting::Ios, ios, 1, u64::MAX)?;
    let runtime = opts.runtime_capped_when_quick(QUICK_RUNTIME);
    let cpu = first_allowed_cpu();
    let region = if ng {
        // The namespace's LBA size is checked by the engine on the first write.
        opts.size - opts.size % bs
    } else {
        let size = prepare_target(opts, "durable")?;
        let t = Target::open(
            &opts.target,
            TargetOptions {
                direct: true,
                write: true,
                create: false,
            },
        )?;
        t.check_aligned("block size", bs)?;
        size - size % bs
    };
    if region < bs {
        return Err(BenchError::TooSmall {
            setting: BenchSetting::Size,
            value: opts.size,
            min: bs,
            needed_by: "one block of durable",
        });
    }
    Ok(Plan {
        path: opts.target.clone(),
        bs,
        region,
        ios,
        runtime,
        cpu,
    })
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let ng = nvme_char_name(&opts.target);
    let plan = plan(opts, ng.is_some())?;
    let started = Instant::now();
    let mut points: Vec<Point> = Vec::new();
    for method in Method::ALL {
        let p = point(opts, &plan, method, ng.as_deref())?;
        if opts.progress {
            p.print_progress();
        }
        points.push(p);
    }
    Ok(report::result(opts, &plan, &points, started.elapsed()))
}

/// The row of `method`: measured, or refused with the reason. On an NVMe generic char device
/// (`ng`, its name) only `nvme-flush` can run; elsewhere every method but `nvme-flush`.
fn point(opts: &MicroOpts, plan: &Plan, method: Method, ng: Option<&str>) -> Result<Point> {
    Ok(match (method, ng) {
        (Method::NvmeFlush, Some(_)) => nvme_point(plan)?,
        (Method::NvmeFlush, None) => Point {
            method,
            outcome: Err(nvme_flush_refusal(&opts.target)),
        },
        (_, Some(name)) => Point {
            method,
            outcome: Err(format!(
                "{name} is an NVMe generic char device, which takes passthrough commands only (no read/write, no fdatasync); point --target at its block device /dev/{} or a file on it for this row",
                name.replacen("ng", "nvme", 1)
            )),
        },
        (_, None) => Point {
            method,
            outcome: Ok(measure(plan, method)?),
        },
    })
}
