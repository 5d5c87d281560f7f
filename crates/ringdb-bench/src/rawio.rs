//! The raw I/O driver behind `ringdb io`: fio's vocabulary and figures over any engine and
//! switch set of `ringdb-io`, one thread and one ring per job.
//!
//! Each job keeps `iodepth` requests in flight in a closed loop: reap what completed, refill
//! those slots, and hand the refills to the kernel together with the next wait (one
//! `io_uring_enter` per reap pass under the adaptive policy).

use crate::error::{check_range, BenchError, BenchSetting, Result};
use crate::pattern::{self, Rng};
use ringdb_io::{
    open_engine, EngineKind, EngineStats, FileId, FixedBufferPool, IoCompletion, IoConfig, IoError,
    IoRequest,
};
use ringdb_io::{Target, TargetOptions};
use ringdb_lab::counters::{rdtsc, tsc_hz, CpuTime, LatencyHist, LatencySummary};
use ringdb_lab::interrupts::{InterruptCounts, InterruptWatch};
use ringdb_lab::iowq::IowqTracker;
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Most jobs (threads, rings) one run may start.
pub const MAX_JOBS: u32 = 1024;
/// Largest block size: one request carries at most this much (and it must fit an i32 result).
pub const MAX_BS: u64 = 1 << 30;
/// Most memory one job's buffers may span ([`IoSpec::buffer_span`]).
pub const MAX_BUFFER_SPAN: u64 = 64 << 30;

/// fio's `--rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RwMode {
    Read,
    Write,
    RandRead,
    RandWrite,
    RandRw,
}

impl RwMode {
    /// The names [`RwMode`] parses from (besides `rw`, an alias of `randrw`).
    pub const NAMES: &'static [&'static str] =
        &["read", "write", "randread", "randwrite", "randrw"];

    pub fn name(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::RandRead => "randread",
            RwMode::RandWrite => "randwrite",
            RwMode::RandRw => "randrw",
        }
    }

    pub fn writes(self) -> bool {
        matches!(self, RwMode::Write | RwMode::RandWrite | RwMode::RandRw)
    }

    pub fn random(self) -> bool {
        matches!(self, RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw)
    }
}

impl fmt::Display for RwMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RwMode {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "randrw" | "rw" => RwMode::RandRw,
            _ => {
                return Err(BenchError::Unknown {
                    setting: BenchSetting::ReadWriteMode,
                    value: s.to_string(),
                    one_of: RwMode::NAMES,
                })
            }
        })
    }
}

/// One `ringdb io` run.
#[derive(Clone, Debug)]
pub struct IoSpec {
    pub path: PathBuf,
    pub rw: RwMode,
    /// Percentage of reads for `randrw`.
    pub rwmixread: u32,
    pub bs: u64,
    /// Bytes of the file or device to use, from offset 0. For a block device, 0 means all of it.
    pub size: u64,
    pub numjobs: u32,
    /// Stop after this long (per job) ...
    pub runtime: Option<Duration>,
    /// ... or after this many I/Os per job, whichever comes first.
    pub ios: Option<u64>,
    pub direct: bool,
    /// Engine and switches; `queue_depth` is the iodepth.
    pub io: IoConfig,
    /// Writes carry the pattern of this seed and reads check it (bit-exact verification).
    pub verify: Option<u64>,
    pub seed: u64,
    /// Draw a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
    /// CPUs for the jobs: job `i` (its thread, ring and io-wq workers) runs on
    /// `cpus[i % cpus.len()]` (fio's `cpus_allowed` with `cpus_allowed_policy=split`).
    pub cpus: Vec<u32>,
    /// Memory each job's buffers span, in bytes; `None`: one buffer per slot (iodepth x bs,
    /// as fio). With more, each slot cycles through its own share of `span / bs` buffers, so
    /// the device writes into as much memory as a database's buffer pool spans. Where the
    /// device's DMA is translated by a hypervisor, that can cost device time (measured:
    /// docs/results/issue12-thread-per-core.md, twelfth session).
    pub buffer_span: Option<u64>,
    /// Each block read is checksummed (CRC32C, as a database verifies a page it has just read)
    /// when its completion is reaped, and the cycles that took are reported
    /// ([`IoReport::checksum_cycles_per_read`]). Such a block is not in the CPU's caches: the
    /// device (or, in a VM, the host) has just written it, and how dear reading it is depends
    /// on where the writer left it.
    pub checksum_reads: bool,
}

impl IoSpec {
    pub fn new(path: impl Into<PathBuf>, io: IoConfig) -> Self {
        IoSpec {
            path: path.into(),
            rw: RwMode::RandRead,
            rwmixread: 50,
            bs: 4096,
            size: 1 << 30,
            numjobs: 1,
            runtime: Some(Duration::from_secs(10)),
            ios: None,
            direct: true,
            io,
            verify: None,
            seed: 0x5eed,
            progress: false,
            cpus: Vec::new(),
            buffer_span: None,
            checksum_reads: false,
        }
    }

    pub fn iodepth(&self) -> u32 {
        self.io.queue_depth
    }

    /// Buffers each slot cycles through: one, or its share of [`IoSpec::buffer_span`].
    fn buffers_per_slot(&self) -> usize {
        let slot_bytes = self.bs * u64::from(self.io.effective_depth());
        self.buffer_span
            .map_or(1, |span| (span / slot_bytes.max(1)).max(1) as usize)
    }

    /// Memory one job's buffers span, in bytes.
    pub fn buffer_span_bytes(&self) -> u64 {
        self.bs * u64::from(self.io.effective_depth()) * self.buffers_per_slot() as u64
    }

    fn validate_buffer_span(&self) -> Result<()> {
        let Some(span) = self.buffer_span else {
            return Ok(());
        };
        // Registered, the pool groups its buffers into at most 16,384 entries itself.
        let slot_bytes = self.bs * u64::from(self.io.effective_depth());
        check_range(BenchSetting::BufferSpan, span, slot_bytes, MAX_BUFFER_SPAN)
    }

    fn validate(&self) -> Result<()> {
        self.io.validate()?;
        check_range(BenchSetting::BlockSize, self.bs, 1, MAX_BS)?;
        if !self.bs.is_multiple_of(8) {
            return Err(BenchError::NotMultiple {
                setting: BenchSetting::BlockSize,
                value: self.bs,
                multiple: 8,
            });
        }
        check_range(BenchSetting::Jobs, self.numjobs.into(), 1, MAX_JOBS.into())?;
        check_range(BenchSetting::ReadMix, self.rwmixread.into(), 0, 100)?;
        if self.runtime.is_none() && self.ios.is_none() {
            return Err(BenchError::Missing {
                one_of: &[BenchSetting::Runtime, BenchSetting::Ios],
                purpose: "a run needs one to stop",
            });
        }
        if let Some(ios) = self.ios {
            check_range(BenchSetting::Ios, ios, 1, u64::MAX)?;
        }
        self.validate_buffer_span()?;
        if self.io.iopoll && !self.direct {
            return Err(IoError::Unsupported {
                switch: ringdb_io::Switch::Iopoll,
                reason: "polled completions need O_DIRECT".into(),
            }
            .into());
        }
        Ok(())
    }
}

/// The figures of one run, in fio's terms. `tool` says who produced them.
#[derive(Clone, Debug, Serialize)]
pub struct IoReport {
    pub tool: String,
    pub label: String,
    pub rw: String,
    pub bs: u64,
    pub iodepth: u32,
    pub numjobs: u32,
    /// Memory each job's buffers span (`None`: not known, e.g. fio's own runs).
    pub buffer_span_bytes: Option<u64>,
    pub target: String,
    pub direct: bool,
    pub ios: u64,
    pub bytes: u64,
    pub runtime_s: f64,
    pub iops: f64,
    pub mib_s: f64,
    pub lat_us: LatencySummary,
    /// CPU time of the whole process over the run, in percent of one core.
    pub cpu_pct: f64,
    pub cpu_user_pct: f64,
    pub cpu_sys_pct: f64,
    /// CPU of the submitting threads alone (what fio reports as usr_cpu + sys_cpu), without
    /// the kernel threads (io-wq workers, SQPOLL) that work for them.
    pub cpu_submitter_pct: f64,
    /// CPU cycles spent per I/O by the whole process: CPU time x TSC rate / I/Os
    /// (seeds/001's definition, with io-wq and SQPOLL threads counted).
    pub cycles_per_io: f64,
    /// The same for the submitting threads alone.
    pub cycles_per_io_submitter: f64,
    /// Kernel entries per I/O (`io_uring_enter`; `io_submit`+`io_getevents`; `pread`/`pwrite`).
    pub enters_per_io: Option<f64>,
    pub cqes_per_reap: Option<f64>,
    /// Distinct io-wq worker threads (`iou-wrk-*`) seen during the run.
    pub iowq_workers: Option<u64>,
    /// Blocks whose content was checked bit-exactly (with `verify`).
    pub verified_blocks: Option<u64>,
    /// With [`IoSpec::checksum_reads`]: TSC cycles of one block's CRC32C right after its read
    /// completed (these cycles are part of `cycles_per_io` too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum_cycles_per_read: Option<f64>,
    /// The target's device's interrupts during the run, per CPU, where it has MSI vectors to
    /// count (`ringdb_lab::interrupts`): with a queue per CPU (NVMe) they follow the jobs'
    /// CPUs, with one vector (virtio-blk) they all go to one CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_interrupts: Option<InterruptCounts>,
}

/// Per-job outcome.
struct JobResult {
    /// CPU time of the job's own thread over its run.
    thread_cpu: Duration,
    ios: u64,
    bytes: u64,
    hist: LatencyHist,
    stats: EngineStats,
    verified: u64,
    checksums: Checksums,
    elapsed: Duration,
}

/// Reads checksummed on completion ([`IoSpec::checksum_reads`]) and the TSC cycles they took.
#[derive(Clone, Copy, Debug, Default)]
struct Checksums {
    reads: u64,
    cycles: u64,
}

/// Runs `spec` (filling the file first when it is shorter than `spec.size`).
pub fn run(spec: &IoSpec) -> Result<IoReport> {
    spec.validate()?;
    let mut spec = spec.clone();
    prepare_target(&mut spec)?;

    let barrier = Arc::new(Barrier::new(spec.numjobs as usize + 1));
    let done_ios = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::with_capacity(spec.numjobs as usize);
    let main_thread = std::thread::current();
    for job in 0..spec.numjobs {
        let spec = spec.clone();
        let barrier = barrier.clone();
        let done_ios = done_ios.clone();
        let stop = stop.clone();
        let main_thread = main_thread.clone();
        let h = std::thread::Builder::new()
            .name(format!("ringdb-job{job}"))
            .spawn(move || {
                let r = run_job(&spec, job, &barrier, &done_ios, &stop);
                main_thread.unpark();
                r
            })
            .map_err(|e| BenchError::job_spawn(format!("ringdb-job{job}"), e))?;
        handles.push(h);
    }

    // Jobs open their rings before the barrier; one that fails there still reaches it, so the
    // main thread never waits forever.
    barrier.wait();
    let interrupts = InterruptWatch::start(&spec.path);
    let cpu0 = CpuTime::now();
    let t0 = Instant::now();
    let mut iowq = IowqTracker::default();
    iowq.sample();
    let bar = progress_bar(&spec);
    while handles.iter().any(|h| !h.is_finished()) {
        std::thread::park_timeout(Duration::from_millis(100));
        iowq.sample();
        if let Some(bar) = &bar {
            match spec.runtime {
                Some(rt) => bar.set_position(t0.elapsed().as_millis().min(rt.as_millis()) as u64),
                None => bar.set_position(done_ios.load(Ordering::Relaxed)),
            }
        }
    }
    let wall = t0.elapsed();
    let cpu = CpuTime::now().since(cpu0);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }

    let interrupts = interrupts.and_then(|watch| watch.stop());
    let results = join_jobs(handles)?;
    let report = summarise(&spec, &results, wall, cpu, iowq.seen() as u64);
    Ok(IoReport {
        device_interrupts: interrupts,
        ..report
    })
}

/// Joins every job thread; the first error (in job order) wins, a panic counting as one.
fn join_jobs(handles: Vec<std::thread::JoinHandle<Result<JobResult>>>) -> Result<Vec<JobResult>> {
    let mut results = Vec::with_capacity(handles.len());
    let mut first_err = None;
    for (job, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(r)) => results.push(r),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(payload) => {
                first_err.get_or_insert_with(|| {
                    BenchError::job_panicked(format!("ringdb-job{job}"), payload.as_ref())
                });
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(results),
    }
}

fn progress_bar(spec: &IoSpec) -> Option<indicatif::ProgressBar> {
    if !spec.progress {
        return None;
    }
    let (len, template) = match (spec.runtime, spec.ios) {
        (Some(rt), _) => (
            rt.as_millis() as u64,
            "{spinner} {msg} [{bar:30}] {elapsed}/{duration}",
        ),
        (None, Some(n)) => (
            n * spec.numjobs as u64,
            "{spinner} {msg} [{bar:30}] {pos}/{len} I/Os",
        ),
        (None, None) => return None,
    };
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::stderr_with_hz(5),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(format!("{} {}", spec.io.label(), spec.rw));
    Some(bar)
}

/// Validates the target against the spec and fills a short regular file.
fn prepare_target(spec: &mut IoSpec) -> Result<()> {
    let exists = spec.path.exists();
    let target = Target::open(
        &spec.path,
        TargetOptions {
            direct: spec.direct,
            write: spec.rw.writes() || !exists || !is_block_device(&spec.path),
            create: true,
        },
    )
    .or_else(|e| match e {
        // A read-only file that is already long enough can still be read.
        IoError::PermissionDenied { .. } if exists && !spec.rw.writes() => Target::open(
            &spec.path,
            TargetOptions {
                direct: spec.direct,
                write: false,
                create: false,
            },
        ),
        e => Err(e),
    })?;
    if target.is_block_device {
        if spec.size == 0 {
            spec.size = target.size;
        }
        if spec.size > target.size {
            return Err(BenchError::SizeExceedsDevice {
                path: spec.path.clone(),
                size_bytes: spec.size,
                capacity_bytes: target.size,
            });
        }
    } else if spec.size == 0 {
        return Err(BenchError::Missing {
            one_of: &[BenchSetting::Size],
            purpose: "a file needs one (only a block device defaults to all of it)",
        });
    }
    target.check_aligned("block size", spec.bs)?;
    if spec.io.iopoll {
        ringdb_io::check_iopoll(&spec.path)?;
    }
    if spec.size < spec.bs {
        return Err(BenchError::TooSmall {
            setting: BenchSetting::Size,
            value: spec.size,
            min: spec.bs,
            needed_by: "one block",
        });
    }
    if !target.is_block_device && target.size < spec.size {
        drop(target);
        fill_file(&spec.path, spec.size, spec.progress)?;
    }
    Ok(())
}

fn is_block_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false)
}

/// Bytes [`fill_file`] writes before it syncs them and drops them from the page cache.
const FILL_FLUSH_BYTES: u64 = 8 << 20;

/// Extends a regular file to `size` bytes of pattern data (seed 0), 1 MiB at a time. Bytes the
/// file already holds are never rewritten: the target may be somebody's data (a database's own
/// file, read to compare the engine with raw I/O on it), so the pattern starts at the file's
/// end (after zeros up to the pattern's next 8-byte word). Every 8 MiB (`FILL_FLUSH_BYTES`) are
/// synced and dropped from the page cache as they go: a fill never holds more than that in
/// memory (a process under a memory cgroup's limit is charged for its page cache, and dirty
/// pages cannot be reclaimed until written), and the runs read with `O_DIRECT` anyway.
pub fn fill_file(path: &Path, size: u64, progress: bool) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| IoError::os(format!("open {} to fill it", path.display()), e))?;
    let end = f
        .seek(SeekFrom::End(0))
        .map_err(|e| IoError::os("seek", e))?;
    let start = end.next_multiple_of(8);
    if start > end && start <= size {
        let zeros = [0u8; 8];
        f.write_all(&zeros[..(start - end) as usize])
            .map_err(|e| fill_error(path, size, e))?;
    }
    let bar = progress.then(|| {
        let b = indicatif::ProgressBar::with_draw_target(
            Some(size.saturating_sub(start)),
            indicatif::ProgressDrawTarget::stderr_with_hz(5),
        );
        if let Ok(s) = indicatif::ProgressStyle::with_template(
            "filling {msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
        ) {
            b.set_style(s.progress_chars("=> "));
        }
        b.set_message(path.display().to_string());
        b
    });
    let mut chunk = vec![0u8; 1 << 20];
    let mut off = start;
    let mut flushed = start;
    while off < size {
        let n = (size - off).min(chunk.len() as u64) as usize;
        pattern::fill(&mut chunk[..n], off, 0);
        // A last partial word (a size that is not a multiple of 8) is zeros, not a stale word.
        chunk[n - n % 8..n].fill(0);
        f.write_all(&chunk[..n])
            .map_err(|e| fill_error(path, size, e))?;
        off += n as u64;
        if off - flushed >= FILL_FLUSH_BYTES || off >= size {
            f.sync_data().map_err(|e| fill_error(path, size, e))?;
            drop_cached(&f, flushed, off - flushed);
            flushed = off;
        }
        if let Some(b) = &bar {
            b.set_position(off - start);
        }
    }
    f.sync_data().map_err(|e| fill_error(path, size, e))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(())
}

/// Asks the kernel to drop `len` bytes of `file` from `offset` on from the page cache (they are
/// written: clean pages go at once). Advice only: a failure changes nothing that matters.
fn drop_cached(file: &std::fs::File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return;
    };
    // SAFETY: `posix_fadvise` only reads its arguments; the descriptor is `file`'s, open for
    // the whole call.
    let _ =
        unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED) };
}

fn fill_error(path: &Path, size: u64, e: std::io::Error) -> BenchError {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        BenchError::FilesystemFull {
            path: path.to_path_buf(),
            size_bytes: size,
        }
    } else {
        IoError::os(format!("filling {}", path.display()), e).into()
    }
}

/// What a job has completed so far.
struct Completed {
    hist: LatencyHist,
    ios: u64,
    bytes: u64,
    /// Reads checked against the pattern.
    verified: u64,
    checksums: Checksums,
    /// Nanoseconds per TSC tick, for the latencies.
    ns_per_tick: f64,
}

impl Completed {
    fn new() -> Completed {
        Completed {
            hist: LatencyHist::new(),
            ios: 0,
            bytes: 0,
            verified: 0,
            checksums: Checksums::default(),
            ns_per_tick: 1e9 / tsc_hz(),
        }
    }
}

/// What one slot of the job is doing.
#[derive(Clone, Copy, Default)]
struct Slot {
    start: u64,
    offset: u64,
    read: bool,
    /// The pool buffer the request reads into or writes from.
    buffer: usize,
}

struct Job<'a> {
    spec: &'a IoSpec,
    rng: Rng,
    blocks: u64,
    next_seq: u64,
    issued: u64,
    write_pattern: bool,
}

impl Job<'_> {
    /// Job number `job` of `spec`: its own random stream, and its own start in the file for
    /// sequential access (the jobs split the file evenly).
    fn new(spec: &IoSpec, job: u32) -> Job<'_> {
        Job {
            spec,
            rng: Rng::new(spec.seed ^ (job as u64).wrapping_mul(0x9E37_79B9)),
            blocks: spec.size / spec.bs,
            next_seq: (job as u64 * (spec.size / spec.bs)) / spec.numjobs as u64,
            issued: 0,
            write_pattern: spec.verify.is_some(),
        }
    }

    /// The next request's offset, and whether it reads.
    fn next(&mut self) -> (u64, bool) {
        let spec = self.spec;
        let block = if spec.rw.random() {
            self.rng.below(self.blocks)
        } else {
            let b = self.next_seq % self.blocks;
            self.next_seq += 1;
            b
        };
        let read = match spec.rw {
            RwMode::Read | RwMode::RandRead => true,
            RwMode::Write | RwMode::RandWrite => false,
            RwMode::RandRw => self.rng.below(100) < spec.rwmixread as u64,
        };
        self.issued += 1;
        (block * spec.bs, read)
    }
}

fn run_job(
    spec: &IoSpec,
    job: u32,
    barrier: &Barrier,
    done_ios: &AtomicU64,
    stop: &AtomicBool,
) -> Result<JobResult> {
    // Set up the ring and buffers, then meet the others at the barrier even on failure.
    let setup = JobSetup::open(spec, job);
    barrier.wait();
    let mut setup = setup?;
    let r = setup.run(spec, job, done_ios, stop);
    if r.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    r
}

/// A job's resources. Field order matters: the engine is dropped (and drained) before the
/// buffer pool it may still be writing into, and both before the file.
struct JobSetup {
    engine: Box<dyn ringdb_io::Engine>,
    pool: FixedBufferPool,
    _target: Target,
}

impl JobSetup {
    fn open(spec: &IoSpec, job: u32) -> Result<JobSetup> {
        let target = Target::open(
            &spec.path,
            TargetOptions {
                direct: spec.direct,
                write: spec.rw.writes(),
                create: false,
            },
        )?;
        let buffers = spec.io.effective_depth() as usize * spec.buffers_per_slot();
        let mut pool = FixedBufferPool::new(buffers, spec.bs as usize)?;
        for i in 0..buffers {
            // Writes carry real data, not zeros (zram and some devices special-case zeros).
            pattern::fill(pool.slice_mut(i), i as u64 * spec.bs, spec.seed);
        }
        let iov = pool.iovecs();
        let mut io = spec.io.clone();
        if !spec.cpus.is_empty() {
            io.cpu = Some(spec.cpus[job as usize % spec.cpus.len()]);
        }
        let engine = open_engine(
            &io,
            &[target.fd()],
            spec.io.fixed_buffers.then_some(&iov[..]),
        )?;
        Ok(JobSetup {
            engine,
            pool,
            _target: target,
        })
    }

    /// Runs the job's closed loop: `iodepth` requests in flight until the runtime or the
    /// I/O count is reached (or another job failed), then drains what is in flight.
    fn run(
        &mut self,
        spec: &IoSpec,
        job: u32,
        done_ios: &AtomicU64,
        stop: &AtomicBool,
    ) -> Result<JobResult> {
        let depth = self.engine.depth();
        let cpu0 = CpuTime::thread_now();
        let mut done = Completed::new();
        let t0 = Instant::now();
        let start_tick = rdtsc();
        let deadline = spec
            .runtime
            .map(|rt| start_tick + (rt.as_secs_f64() * tsc_hz()) as u64);
        let max_ios = spec.ios.unwrap_or(u64::MAX);
        let mut job_state = Job::new(spec, job);
        let mut slots = vec![Slot::default(); depth];
        let mut comps: Vec<IoCompletion> = Vec::with_capacity(depth);
        let mut unreported = 0u64;
        let mut stopping = false;

        let initial = depth.min(max_ios as usize);
        for slot in 0..initial {
            self.issue(&mut job_state, &mut slots, slot, slot + 1 < initial)?;
        }
        while self.engine.in_flight() > 0 {
            self.engine.submit(1)?;
            comps.clear();
            self.engine.reap(&mut comps);
            let now = rdtsc();
            if deadline.is_some_and(|d| now >= d) || stop.load(Ordering::Relaxed) {
                stopping = true;
            }
            for (i, c) in comps.iter().enumerate() {
                let slot = c.user_data as usize;
                self.complete(spec, slots[slot], c.result, now, &mut done)?;
                if !stopping && job_state.issued < max_ios {
                    self.issue(&mut job_state, &mut slots, slot, i + 1 < comps.len())?;
                }
            }
            unreported += comps.len() as u64;
            if unreported >= 256 {
                done_ios.fetch_add(unreported, Ordering::Relaxed);
                unreported = 0;
            }
        }
        done_ios.fetch_add(unreported, Ordering::Relaxed);
        Ok(JobResult {
            thread_cpu: CpuTime::thread_now().since(cpu0).total(),
            ios: done.ios,
            bytes: done.bytes,
            hist: done.hist,
            stats: self.engine.stats(),
            verified: done.verified,
            checksums: done.checksums,
            elapsed: t0.elapsed(),
        })
    }

    /// Accounts for the completion of request `s` with `result`, reaped at tick `now`: a
    /// failed or short transfer ends the job, a read is checked against the pattern under
    /// `verify`.
    fn complete(
        &self,
        spec: &IoSpec,
        s: Slot,
        result: i32,
        now: u64,
        done: &mut Completed,
    ) -> Result<()> {
        let op = if s.read { "read" } else { "write" };
        if result < 0 {
            return Err(IoError::from_completion(op, s.offset, result).into());
        }
        if result as u64 != spec.bs {
            return Err(BenchError::ShortTransfer {
                op,
                offset: s.offset,
                transferred_bytes: result as u64,
                requested_bytes: spec.bs,
            });
        }
        done.hist
            .record_ns((now.saturating_sub(s.start) as f64 * done.ns_per_tick) as u64);
        done.ios += 1;
        done.bytes += spec.bs;
        if let (Some(seed), true) = (spec.verify, s.read) {
            if !pattern::check(self.pool.slice(s.buffer), s.offset, seed) {
                return Err(BenchError::Verify {
                    mismatches: 1,
                    checked: done.verified + 1,
                    first_offset: s.offset,
                });
            }
            done.verified += 1;
        }
        if spec.checksum_reads && s.read {
            let start = rdtsc();
            std::hint::black_box(ringdb::page::compute_checksum(self.pool.slice(s.buffer)));
            done.checksums.cycles += rdtsc().saturating_sub(start);
            done.checksums.reads += 1;
        }
        Ok(())
    }

    /// Prepares and queues the next request in `slot`. `more_coming` says whether other
    /// refills follow in this pass; the last one always goes to the kernel with the next wait,
    /// so a pass never costs a submit-only enter followed by a wait-only one.
    fn issue(
        &mut self,
        job: &mut Job<'_>,
        slots: &mut [Slot],
        slot: usize,
        more_coming: bool,
    ) -> Result<()> {
        let (offset, read) = job.next();
        // The slot's own buffers are slot, slot + depth, slot + 2 x depth, ...: one request
        // per slot is in flight, so none of them is in use by another request.
        let turns = self.pool.count() / slots.len();
        let buffer = slot + slots.len() * (job.issued as usize % turns);
        let buf = self.pool.ptr(buffer);
        if !read && job.write_pattern {
            pattern::fill(
                self.pool.slice_mut(buffer),
                offset,
                job.spec.verify.unwrap_or(0),
            );
        }
        let len = job.spec.bs as u32;
        let req = if read {
            IoRequest::read(FileId(0), offset, buf, len, slot as u64)
        } else {
            IoRequest::write(FileId(0), offset, buf, len, slot as u64)
        }
        .with_buf_index(Some(self.pool.fixed_index(buffer)));
        slots[slot] = Slot {
            start: rdtsc(),
            offset,
            read,
            buffer,
        };
        // SAFETY: the buffer belongs to `self.pool`, which outlives the engine (field order),
        // and this slot is not touched again until its completion has been reaped.
        unsafe { self.engine.push(&req)? };
        let e = &mut self.engine;
        if more_coming
            && job
                .spec
                .io
                .batching
                .flush_now(e.pending(), e.in_flight(), e.depth())
        {
            e.submit(0)?;
        }
        Ok(())
    }
}

fn summarise(
    spec: &IoSpec,
    results: &[JobResult],
    wall: Duration,
    cpu: CpuTime,
    iowq: u64,
) -> IoReport {
    let mut hist = LatencyHist::new();
    let mut stats = EngineStats::default();
    let (mut ios, mut bytes, mut verified) = (0, 0, 0);
    let mut checksums = Checksums::default();
    let mut runtime = Duration::ZERO;
    let mut thread_cpu = Duration::ZERO;
    for r in results {
        thread_cpu += r.thread_cpu;
        hist.merge(&r.hist);
        ios += r.ios;
        bytes += r.bytes;
        verified += r.verified;
        checksums.reads += r.checksums.reads;
        checksums.cycles += r.checksums.cycles;
        stats.enters += r.stats.enters;
        stats.reaps += r.stats.reaps;
        stats.completed += r.stats.completed;
        stats.submitted += r.stats.submitted;
        runtime = runtime.max(r.elapsed);
    }
    let secs = runtime.as_secs_f64().max(1e-9);
    let wall_s = wall.as_secs_f64().max(1e-9);
    let per_io = |x: f64| if ios == 0 { 0.0 } else { x / ios as f64 };
    IoReport {
        tool: "ringdb".into(),
        label: report_label(spec),
        rw: spec.rw.name().into(),
        bs: spec.bs,
        iodepth: spec.io.queue_depth,
        numjobs: spec.numjobs,
        buffer_span_bytes: Some(spec.buffer_span_bytes()),
        target: spec.path.display().to_string(),
        direct: spec.direct,
        ios,
        bytes,
        runtime_s: secs,
        iops: ios as f64 / secs,
        mib_s: bytes as f64 / secs / (1 << 20) as f64,
        lat_us: hist.summary(),
        cpu_pct: 100.0 * cpu.total().as_secs_f64() / wall_s,
        cpu_user_pct: 100.0 * cpu.user.as_secs_f64() / wall_s,
        cpu_sys_pct: 100.0 * cpu.sys.as_secs_f64() / wall_s,
        cpu_submitter_pct: 100.0 * thread_cpu.as_secs_f64() / wall_s,
        cycles_per_io: per_io(cpu.total().as_secs_f64() * tsc_hz()),
        cycles_per_io_submitter: per_io(thread_cpu.as_secs_f64() * tsc_hz()),
        enters_per_io: Some(per_io(stats.enters as f64)),
        cqes_per_reap: (spec.io.engine != EngineKind::Posix).then(|| stats.cqes_per_reap()),
        iowq_workers: Some(iowq),
        verified_blocks: spec.verify.map(|_| verified),
        checksum_cycles_per_read: (spec.checksum_reads && checksums.reads > 0)
            .then(|| checksums.cycles as f64 / checksums.reads as f64),
        device_interrupts: None,
    }
}

/// The engine's label, with the CPUs the jobs ran on and the buffer span when given.
fn report_label(spec: &IoSpec) -> String {
    let mut label = spec.io.label();
    if spec.buffer_span.is_some() {
        label.push_str(&format!(
            "+span{}",
            crate::units::fio_size(spec.buffer_span_bytes())
        ));
    }
    if !spec.cpus.is_empty() {
        label.push_str(&format!("@cpus{}", cpu_list(&spec.cpus)));
    }
    label
}

/// Column headers of [`report_row`].
pub const TABLE_HEADER: &str = "tool    config                               IOPS     MiB/s   avg_us   p50_us   p95_us   p99_us p99.9_us   max_us   cpu%(usr/sys) subm%   cyc/IO  enters/IO iowq";

/// One aligned table row for a report.
pub fn report_row(r: &IoReport) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    format!(
        "{:<7} {:<32} {:>10.0} {:>9.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>6.1}({:>4.1}/{:>4.1}) {:>5.1} {:>8.0} {:>10} {:>4}",
        r.tool,
        format!("{} {} qd{}", r.label, r.rw, r.iodepth),
        r.iops,
        r.mib_s,
        r.lat_us.avg,
        r.lat_us.p50,
        r.lat_us.p95,
        r.lat_us.p99,
        r.lat_us.p999,
        r.lat_us.max,
        r.cpu_pct,
        r.cpu_user_pct,
        r.cpu_sys_pct,
        r.cpu_submitter_pct,
        r.cycles_per_io,
        opt(r.enters_per_io),
        r.iowq_workers.map_or("-".to_string(), |w| w.to_string()),
    )
}

/// `0,1,3` for a CPU list.
pub fn cpu_list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file shorter than the run's size (e.g. a database's data file) is only extended: each
    /// byte it held stays as it was, whatever its length.
    #[test]
    fn filling_a_short_file_never_rewrites_what_it_holds() {
        let dir = std::env::temp_dir().join(format!("ringdb-fill-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for held in [3u64, (1 << 20) + (1 << 19) + 5, 2 << 20] {
            let path = dir.join(format!("held-{held}"));
            let old: Vec<u8> = (0..held).map(|i| (i % 251) as u8 | 1).collect();
            std::fs::write(&path, &old).unwrap();
            fill_file(&path, 4 << 20, false).unwrap();
            let now = std::fs::read(&path).unwrap();
            assert_eq!(now.len(), 4 << 20);
            assert!(
                now[..held as usize] == old[..],
                "{held} bytes held: rewritten"
            );
            let block = (3 << 20) as usize;
            assert!(pattern::check(&now[block..block + 4096], block as u64, 0));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
