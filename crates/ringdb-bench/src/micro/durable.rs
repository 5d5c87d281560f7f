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

use super::batch_latency::describe_target;
use super::iowq::{one_op, prepare_target, run_sampling_workers};
use super::{MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchError, Result};
use ringdb_io::target::{Target, TargetOptions};
use ringdb_io::{
    open_engine, AlignedBuf, Engine, EngineKind, FileId, IoConfig, IoError, IoRequest, OpKind,
};
use ringdb_lab::counters::{rdtsc, ticks_to_ns, tsc_hz, LatencyHist, LatencySummary};
use ringdb_lab::device::DeviceInfo;
use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Durable writes per method when `--ios` is not given: about 1.5 s per method at the
/// ~160 us a 4 KiB write + fdatasync takes on this machine's virtio disk.
pub const DEFAULT_IOS: u64 = 10_000;
/// The same with `--quick`.
const QUICK_IOS: u64 = 200;
/// Default bytes per write.
pub const DEFAULT_BS: u64 = 4096;
/// Durable writes before each measured run (not recorded): brings up the io-wq worker.
const WARMUP_OPS: u64 = 8;
/// Paper Fig. 9: `O_SYNC` writes are "more than twice as slow as explicit writes followed by
/// `fsync`" (the text gives ratios only; the bars' values are not in it).
const PAPER_OSYNC_VS_FSYNC: f64 = 2.0;
/// Paper Fig. 9: not pinning the fsync io-wq worker to the local chiplet costs about 5%.
const PAPER_CHIPLET_PCT: f64 = 5.0;
/// `user_data` of the linked pair's two requests.
const UD_WRITE: u64 = 1;
const UD_SYNC: u64 = 2;

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

/// Opens the target for the O_DIRECT write, with `extra` open flags (`O_DSYNC`, `O_SYNC`).
fn open_direct(path: &Path, extra: i32) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT | extra)
        .open(path)
        .map_err(|e| {
            match e.raw_os_error() {
                Some(libc::ENOENT) => IoError::NotFound {
                    path: path.to_path_buf(),
                },
                Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => {
                    IoError::PermissionDenied {
                        path: path.to_path_buf(),
                        source: e,
                    }
                }
                Some(libc::EINVAL) => IoError::DirectUnsupported {
                    path: path.to_path_buf(),
                },
                _ => IoError::os(format!("opening {}", path.display()), e),
            }
            .into()
        })
}

/// The helper thread of `thread-fdatasync`: syncs `file` on request, answers with the result.
struct SyncThread {
    tx: Option<std::sync::mpsc::Sender<()>>,
    rx: std::sync::mpsc::Receiver<std::io::Result<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl SyncThread {
    fn start(file: File) -> Result<SyncThread> {
        let (tx, req) = std::sync::mpsc::channel::<()>();
        let (done, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("ringdb-durable-sync".into())
            .spawn(move || {
                while req.recv().is_ok() {
                    if done.send(file.sync_data()).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| BenchError::Job(format!("starting the fdatasync thread: {e}")))?;
        Ok(SyncThread {
            tx: Some(tx),
            rx,
            handle: Some(handle),
        })
    }

    /// One `fdatasync` on the helper thread; blocks until it is done.
    fn sync(&self) -> Result<()> {
        let gone = || BenchError::Job("the fdatasync thread is gone".into());
        self.tx
            .as_ref()
            .ok_or_else(gone)?
            .send(())
            .map_err(|_| gone())?;
        self.rx
            .recv()
            .map_err(|_| gone())?
            .map_err(|e| IoError::os("fdatasync on the helper thread", e).into())
    }
}

impl Drop for SyncThread {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A bare ring for `ring-linked`: [`Engine`] has no way to link two requests, so this one
/// method builds its SQEs itself with the `io-uring` crate.
struct LinkedRing {
    ring: io_uring::IoUring,
    fd: RawFd,
}

impl LinkedRing {
    fn new(fd: RawFd, cpu: u32) -> Result<LinkedRing> {
        let ring = io_uring::IoUring::new(4)
            .map_err(|e| IoError::os("io_uring_setup for the linked ring", e))?;
        ring.submitter()
            .register_iowq_aff(&ringdb_io::affinity::cpu_set(cpu)?)
            .map_err(|e| IoError::os(format!("pinning io-wq workers to CPU {cpu}"), e))?;
        Ok(LinkedRing { ring, fd })
    }

    /// Write `len` bytes of `buf` at `offset`, linked to an fdatasync; one submit, wait for
    /// both. Returns the TSC ticks from push to the second completion.
    fn write_sync(&mut self, buf: *const u8, len: u32, offset: u64) -> Result<u64> {
        use io_uring::{opcode, squeue, types};
        let fd = types::Fd(self.fd);
        let write = opcode::Write::new(fd, buf, len)
            .offset(offset)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data(UD_WRITE);
        let sync = opcode::Fsync::new(fd)
            .flags(types::FsyncFlags::DATASYNC)
            .build()
            .user_data(UD_SYNC);
        let t0 = rdtsc();
        // SAFETY: `buf` is valid for `len` bytes and the caller keeps it alive and unchanged
        // until this call returns; this call returns only after both completions are reaped
        // (on an error the ring is dropped first, and closing it waits for its requests).
        unsafe {
            let mut sq = self.ring.submission();
            sq.push(&write)
                .and_then(|_| sq.push(&sync))
                .map_err(|_| BenchError::Job("the linked ring's SQ is full".into()))?;
        }
        let (mut write_res, mut sync_res) = (None, None);
        while write_res.is_none() || sync_res.is_none() {
            let want = 2 - write_res.is_some() as usize - sync_res.is_some() as usize;
            match self.ring.submit_and_wait(want) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    return Err(IoError::os("io_uring_enter (linked write+fdatasync)", e).into())
                }
            }
            for cqe in self.ring.completion() {
                match cqe.user_data() {
                    UD_WRITE => write_res = Some(cqe.result()),
                    _ => sync_res = Some(cqe.result()),
                }
            }
        }
        let t1 = rdtsc();
        let (w, s) = (write_res.unwrap_or(0), sync_res.unwrap_or(0));
        if w < 0 {
            return Err(IoError::from_completion("write", offset, w).into());
        }
        if w as u32 != len {
            return Err(BenchError::InvalidArg(format!(
                "short linked write at offset {offset}: {w} of {len} bytes (the fdatasync was cancelled)"
            )));
        }
        if s < 0 {
            return Err(IoError::from_completion("fdatasync", offset, s).into());
        }
        Ok(t1.saturating_sub(t0))
    }
}

/// How the measuring thread issues one durable write.
enum Issuer {
    /// An engine over one file; `sync` is pushed after the write when set.
    Engine {
        engine: Box<dyn Engine>,
        sync: Option<OpKind>,
    },
    /// An engine for the write, then a helper thread for the fdatasync.
    Thread {
        engine: Box<dyn Engine>,
        helper: SyncThread,
    },
    /// An engine for the write, then `fdatasync(2)` on this thread.
    Syscall {
        engine: Box<dyn Engine>,
        fd: RawFd,
    },
    Linked(Box<LinkedRing>),
}

impl Issuer {
    /// One durable write of `buf` at `offset`; returns the TSC ticks it took.
    fn once(&mut self, buf: &mut AlignedBuf, len: u32, offset: u64, i: u64) -> Result<u64> {
        let mut out = Vec::with_capacity(2);
        let ptr = buf.as_mut_ptr();
        let write = IoRequest::write(FileId(0), offset, ptr, len, i);
        match self {
            Issuer::Engine { engine, sync } => {
                let (t, _) = one_op(engine.as_mut(), &write, false, &mut out)?;
                match sync {
                    Some(op) => {
                        let req = IoRequest::sync(*op, FileId(0), i);
                        let (s, _) = one_op(engine.as_mut(), &req, false, &mut out)?;
                        Ok(t + s)
                    }
                    None => Ok(t),
                }
            }
            Issuer::Thread { engine, helper } => {
                let t0 = rdtsc();
                one_op(engine.as_mut(), &write, false, &mut out)?;
                helper.sync()?;
                Ok(rdtsc().saturating_sub(t0))
            }
            Issuer::Syscall { engine, fd } => {
                let t0 = rdtsc();
                one_op(engine.as_mut(), &write, false, &mut out)?;
                // SAFETY: `fd` is the target's open descriptor, kept open by the caller for
                // as long as this issuer lives; fdatasync takes no pointer.
                if unsafe { libc::fdatasync(*fd) } != 0 {
                    return Err(IoError::os("fdatasync(2)", std::io::Error::last_os_error()).into());
                }
                Ok(rdtsc().saturating_sub(t0))
            }
            Issuer::Linked(ring) => ring.write_sync(ptr, len, offset),
        }
    }
}

/// The ring every engine row uses: plain io_uring, QD1 (4 deep), pinned with its workers.
fn ring_config(cpu: u32) -> IoConfig {
    IoConfig {
        queue_depth: 4,
        cpu: Some(cpu),
        ..IoConfig::new(EngineKind::Uring)
    }
}

/// The measuring thread's part: opens what `method` needs, warms up, then issues durable
/// writes until `plan.ios` or `plan.runtime`. Returns (ops, seconds, latency histogram).
fn job(plan: &Plan, method: Method) -> Result<(u64, f64, LatencyHist)> {
    // Locals drop in reverse order: the issuer (ring, helper thread) goes before the buffer
    // and the files it points at.
    let direct = TargetOptions {
        direct: true,
        write: true,
        create: false,
    };
    let extra = match method {
        Method::Odsync => libc::O_DSYNC,
        Method::Osync => libc::O_SYNC,
        _ => 0,
    };
    let file = match method {
        Method::NvmeFlush => OpenOptions::new()
            .read(true)
            .write(true)
            .open(&plan.path)
            .map_err(|e| IoError::os(format!("opening {}", plan.path.display()), e))?,
        Method::Odsync | Method::Osync => open_direct(&plan.path, extra)?,
        _ => Target::open(&plan.path, direct)?
            .file()
            .try_clone()
            .map_err(|e| IoError::os(format!("duplicating {}", plan.path.display()), e))?,
    };
    let fd = file.as_raw_fd();
    let mut buf = AlignedBuf::new(plan.bs as usize);
    for (i, b) in buf.as_mut_slice().iter_mut().enumerate() {
        *b = (i % 251) as u8 ^ 0x5a;
    }
    let len = plan.bs as u32;
    let mut issuer = match method {
        Method::Baseline | Method::Odsync | Method::Osync => Issuer::Engine {
            engine: open_engine(&ring_config(plan.cpu), &[fd], None)?,
            sync: None,
        },
        Method::RingFdatasync => Issuer::Engine {
            engine: open_engine(&ring_config(plan.cpu), &[fd], None)?,
            sync: Some(OpKind::Fdatasync),
        },
        Method::ThreadFdatasync => {
            let engine = open_engine(&ring_config(plan.cpu), &[fd], None)?;
            // Started after the engine pinned this thread: the helper inherits the CPU.
            let dup = file
                .try_clone()
                .map_err(|e| IoError::os("duplicating the target for the helper", e))?;
            Issuer::Thread {
                engine,
                helper: SyncThread::start(dup)?,
            }
        }
        Method::SyncFdatasync => Issuer::Syscall {
            engine: open_engine(&ring_config(plan.cpu), &[fd], None)?,
            fd,
        },
        Method::RingLinked => {
            ringdb_io::affinity::pin_current_thread(plan.cpu)?;
            Issuer::Linked(Box::new(LinkedRing::new(fd, plan.cpu)?))
        }
        Method::NvmeFlush => {
            // By name, so that this builds with or without the passthrough engine.
            let kind: EngineKind = "uring-passthrough".parse()?;
            Issuer::Engine {
                engine: open_engine(
                    &IoConfig {
                        engine: kind,
                        ..ring_config(plan.cpu)
                    },
                    &[fd],
                    None,
                )?,
                // The passthrough engine turns Fdatasync into an NVMe Flush.
                sync: Some(OpKind::Fdatasync),
            }
        }
    };
    for i in 0..WARMUP_OPS.min(plan.ios) {
        issuer.once(&mut buf, len, plan.offset(i), i)?;
    }
    let mut hist = LatencyHist::new();
    let started = Instant::now();
    let mut ops = 0u64;
    while ops < plan.ios && (ops == 0 || started.elapsed() < plan.runtime) {
        let ticks = issuer.once(&mut buf, len, plan.offset(WARMUP_OPS + ops), ops)?;
        hist.record_ns(ticks_to_ns(ticks).max(1));
        ops += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    drop(issuer);
    drop(buf);
    drop(file);
    Ok((ops, secs, hist))
}

/// Runs `method` on a fresh thread while this thread samples its io-wq workers.
fn measure(plan: &Plan, method: Method) -> Result<Measured> {
    let (res, seen) =
        run_sampling_workers(&format!("durable-{}", method.name()), || job(plan, method));
    let (ops, secs, hist) = res?;
    Ok(Measured {
        ops,
        secs,
        lat: hist.summary(),
        workers: seen.len(),
    })
}

/// The `nvme-flush` row on an NVMe generic char device: measured when this build has the
/// passthrough engine and it opens; refused with the reason otherwise.
fn nvme_point(plan: &Plan) -> Result<Point> {
    let outcome = match measure(plan, Method::NvmeFlush) {
        Ok(m) => Ok(m),
        Err(BenchError::Io(IoError::Unparsable { what: "engine", .. })) => Err(
            "nvme-flush: not wired into micro durable yet (this build has no uring-passthrough engine)"
                .to_string(),
        ),
        Err(BenchError::Io(
            e @ (IoError::Unsupported { .. }
            | IoError::SetupRefused { .. }
            | IoError::UringDisabled { .. }),
        )) => Err(e.to_string()),
        Err(e) => return Err(e),
    };
    Ok(Point {
        method: Method::NvmeFlush,
        outcome,
    })
}

/// Checks `--bs` and `--ios` and the target; returns the plan and the target's description.
fn plan(opts: &MicroOpts, ng: bool) -> Result<Plan> {
    let bs = opts.bs.unwrap_or(DEFAULT_BS);
    if bs == 0 || bs > u32::MAX as u64 {
        return Err(BenchError::InvalidArg(format!(
            "durable needs --bs between 1 byte and 4 GiB, got {bs}"
        )));
    }
    let ios = opts
        .ios
        .unwrap_or(if opts.quick { QUICK_IOS } else { DEFAULT_IOS });
    if ios == 0 {
        return Err(BenchError::InvalidArg(
            "durable needs --ios of at least 1".into(),
        ));
    }
    let runtime = if opts.quick {
        opts.runtime.min(Duration::from_millis(300))
    } else {
        opts.runtime
    };
    let cpu = super::scale_out::allowed_cpus()
        .first()
        .copied()
        .unwrap_or(0);
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
        t.check_aligned("--bs", bs)?;
        size - size % bs
    };
    if region < bs {
        return Err(BenchError::InvalidArg(format!(
            "durable needs --size of at least --bs ({bs} bytes), got {}",
            opts.size
        )));
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
        let p = match (method, &ng) {
            (Method::NvmeFlush, Some(_)) => nvme_point(&plan)?,
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
                outcome: Ok(measure(&plan, method)?),
            },
        };
        if opts.progress {
            match &p.outcome {
                Ok(m) => eprintln!(
                    "durable {}: {} writes, avg {:.1} us, p50 {:.1} us, p99 {:.1} us, {} io-wq worker(s)",
                    method.name(),
                    m.ops,
                    m.lat.avg,
                    m.lat.p50,
                    m.lat.p99,
                    m.workers
                ),
                Err(why) => eprintln!("durable {}: unsupported here: {why}", method.name()),
            }
        }
        points.push(p);
    }
    Ok(result(opts, &plan, &points, started.elapsed()))
}

/// Where the durability point ran, as the counters show it.
fn path_of(method: Method, m: &Measured) -> String {
    let ring = if m.workers > 0 {
        format!("io-wq ({} worker(s))", m.workers)
    } else {
        "inline".to_string()
    };
    match method {
        Method::ThreadFdatasync => format!("{ring} + helper thread"),
        Method::SyncFdatasync => format!("{ring} + fdatasync(2)"),
        _ => ring,
    }
}

fn result(opts: &MicroOpts, plan: &Plan, points: &[Point], took: Duration) -> MicroResult {
    let mut r = MicroResult::new(
        "durable",
        "paper Sec. 3.6, Fig. 9: durable writes; fsync through io_uring runs on io-wq workers, O_SYNC is over 2x slower than write+fsync, linking gains nothing, NVMe flush via passthrough is the asynchronous path",
        &[
            "method",
            "how",
            "ios",
            "lat_avg_us",
            "lat_p50_us",
            "lat_p99_us",
            "ops_per_s",
            "vs_baseline",
            "iowq_workers",
            "completion",
            "status",
        ],
    );
    let baseline = points
        .iter()
        .find(|p| p.method == Method::Baseline)
        .and_then(|p| p.measured())
        .map(|m| m.lat.avg);
    for p in points {
        match &p.outcome {
            Ok(m) => r.row(vec![
                json!(p.method.name()),
                json!(p.method.how()),
                json!(m.ops),
                json!(m.lat.avg),
                json!(m.lat.p50),
                json!(m.lat.p99),
                json!(m.ops_per_s()),
                baseline.map_or(Value::Null, |b| json!(m.lat.avg / b.max(1e-9))),
                json!(m.workers),
                json!(path_of(p.method, m)),
                json!("ok"),
            ]),
            Err(why) => r.row(vec![
                json!(p.method.name()),
                json!(p.method.how()),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                json!(format!("unsupported here: {why}")),
            ]),
        }
    }
    notes(&mut r, opts, plan, points, took);
    let measured: Vec<(usize, &Point, &Measured)> = points
        .iter()
        .filter_map(|p| p.measured().map(|m| (p, m)))
        .enumerate()
        .map(|(i, (p, m))| (i + 1, p, m))
        .collect();
    if !measured.is_empty() {
        let series = |label: &str, f: fn(&LatencySummary) -> f64| Series {
            label: label.into(),
            points: measured
                .iter()
                .map(|(i, _, m)| (*i as f64, f(&m.lat)))
                .collect(),
        };
        r.plot = Some(Plot {
            title: format!(
                "QD1 durable {} KiB writes: latency per method",
                plan.bs / 1024
            ),
            x_label: format!(
                "method ({})",
                measured
                    .iter()
                    .map(|(i, p, _)| format!("{i} = {}", p.method.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            y_label: "latency (us)".into(),
            log_x: false,
            log_y: false,
            series: vec![
                series("average", |l| l.avg),
                series("p50", |l| l.p50),
                series("p99", |l| l.p99),
            ],
        });
    }
    r
}

/// `write back`, `write through`, or `None` when the target's device does not say.
fn write_cache(path: &Path) -> Option<String> {
    let d = DeviceInfo::for_path(path).ok().flatten()?;
    let disk = d.disk.clone().unwrap_or(d.name.clone());
    std::fs::read_to_string(Path::new("/sys/block").join(disk).join("queue/write_cache"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn notes(r: &mut MicroResult, opts: &MicroOpts, plan: &Plan, points: &[Point], took: Duration) {
    let at = |m: Method| {
        points
            .iter()
            .find(|p| p.method == m)
            .and_then(|p| p.measured())
    };
    r.notes.push(format!(
        "paper (Fig. 9, consumer and enterprise SSDs; the text gives ratios, not the bars' values): fsync through io_uring runs on io-wq workers; consumer SSDs are dominated by millisecond-scale fsync, enterprise SSDs with PLP reach microseconds; O_SYNC is more than {PAPER_OSYNC_VS_FSYNC}x slower than write+fsync; linking write and fsync gains nothing over issuing them in sequence; an unpinned fsync worker costs ~{PAPER_CHIPLET_PCT}%; passthrough write + NVMe flush is the truly asynchronous path but needs raw device access"
    ));
    if let (Some(b), Some(f)) = (at(Method::Baseline), at(Method::RingFdatasync)) {
        r.notes.push(format!(
            "durability costs {:+.1} us per write here ({:.1} -> {:.1} us on average, {:.2}x): ring write+fdatasync vs the bare write",
            f.lat.avg - b.lat.avg,
            b.lat.avg,
            f.lat.avg,
            f.lat.avg / b.lat.avg.max(1e-9)
        ));
    }
    if let (Some(f), Some(l)) = (at(Method::RingFdatasync), at(Method::RingLinked)) {
        r.notes.push(format!(
            "ring-linked vs ring-write+fdatasync: {:.1} vs {:.1} us on average ({:+.1}%), p99 {:.1} vs {:.1} us; the paper found linking no better than issuing in sequence",
            l.lat.avg,
            f.lat.avg,
            (l.lat.avg / f.lat.avg.max(1e-9) - 1.0) * 100.0,
            l.lat.p99,
            f.lat.p99
        ));
    }
    if let Some(f) = at(Method::RingFdatasync) {
        for (m, what) in [(Method::Osync, "osync"), (Method::Odsync, "odsync")] {
            if let Some(o) = at(m) {
                let mut s = format!(
                    "{what} vs ring-write+fdatasync: {:.1} vs {:.1} us on average ({:.2}x)",
                    o.lat.avg,
                    f.lat.avg,
                    o.lat.avg / f.lat.avg.max(1e-9)
                );
                if m == Method::Osync {
                    s.push_str(&format!(
                        "; the paper found O_SYNC more than {PAPER_OSYNC_VS_FSYNC}x slower"
                    ));
                }
                r.notes.push(s);
            }
        }
        for (m, what) in [
            (Method::ThreadFdatasync, "thread-fdatasync"),
            (Method::SyncFdatasync, "sync-fdatasync"),
        ] {
            if let Some(t) = at(m) {
                r.notes.push(format!(
                    "{what} vs ring-write+fdatasync: {:.1} vs {:.1} us on average ({:+.1}%), io-wq workers {} vs {}",
                    t.lat.avg,
                    f.lat.avg,
                    (t.lat.avg / f.lat.avg.max(1e-9) - 1.0) * 100.0,
                    t.workers,
                    f.workers
                ));
            }
        }
    }
    for p in points {
        if let Some(m) = p.measured().filter(|m| m.lat.p99 > 8.0 * m.lat.p50) {
            r.notes.push(format!(
                "{}: bimodal latency, p50 {:.0} us but p99 {:.0} us: some writes waited milliseconds (its average moves from run to run; compare p50)",
                p.method.name(),
                m.lat.p50,
                m.lat.p99
            ));
        }
    }
    // Which durability points ran on io-wq, as the worker counts show.
    let list = |pred: &dyn Fn(&Measured) -> bool| -> String {
        let v: Vec<&str> = points
            .iter()
            .filter(|p| p.measured().is_some_and(pred))
            .map(|p| p.method.name())
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    };
    r.notes.push(format!(
        "io-wq workers appeared for: {}; every request completed without one for: {} (thread-fdatasync's helper and sync-fdatasync's fdatasync(2) are not io-wq: their rings saw only the write)",
        list(&|m| m.workers > 0),
        list(&|m| m.workers == 0)
    ));
    if let Some(wc) = write_cache(&opts.target) {
        let what = if wc == "write through" {
            "the device reports no volatile cache, so a flush costs the kernel nothing and durability costs little"
        } else {
            "the device reports a volatile cache, so every durability point sends it a flush"
        };
        r.notes.push(format!("write cache: {wc}: {what}"));
    }
    r.notes.push(
        "thread-fdatasync is ringdb's WAL durability mode `thread` (fdatasync(2) on a helper thread the ring thread waits for); sync-fdatasync is the paper's PostgreSQL port (Sec. 5: fsync() called directly, not through io_uring, to keep io-wq off the path); the paper's Fig. 9 itself compares ring fsync, linked, O_SYNC and passthrough flush".into(),
    );
    r.notes.push(format!(
        "QD1; each method on a fresh thread pinned to CPU {} with its io-wq workers (IORING_REGISTER_IOWQ_AFF) and helper thread on that CPU; {} byte O_DIRECT writes cycling through the first {} MiB of the target (preallocated, so fdatasync has no size change to log); latency = push of the write to completion of its durability point (rdtsc); each method stops after {} writes or {:.1} s; {} unrecorded warm-up writes first",
        plan.cpu,
        plan.bs,
        plan.region >> 20,
        plan.ios,
        plan.runtime.as_secs_f64(),
        WARMUP_OPS
    ));
    r.notes.push(format!(
        "target {} ({}); TSC {:.2} GHz; {} CPU(s) here, shared; took {:.1} s",
        opts.target.display(),
        describe_target(&opts.target),
        tsc_hz() / 1e9,
        ringdb_io::affinity::online_cpus(),
        took.as_secs_f64()
    ));
}
