//! The costs the model needs (the paper's Table 1), measured on the ladder's own target
//! before the steps run: I/O latencies and per-I/O cycles from raw I/O runs over the region
//! the data will occupy, the device's ceiling, and (on the loaded data) what a transaction
//! costs in memory.

use super::target::{data_path, nvme_namespace, sqpoll_cpus, with_sqpoll};
use super::workload::{db_options, evict_batch, uniform_mix};
use super::LadderOpts;
use crate::error::{BenchError, Result};
use crate::rawio::{self, IoReport, IoSpec, RwMode};
use crate::ycsb::{self, RunSpec};
use ringdb::LocalDb;
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode};
use ringdb_lab::counters::tsc_hz;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Costs measured on the target before the ladder runs (the paper's Table 1).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Calibration {
    /// The TSC's rate, GHz: every cycle count here is in TSC cycles.
    pub tsc_ghz: f64,
    /// QD1 latency of one page read (`uring-sync`), microseconds.
    pub read_lat_us: f64,
    /// QD1 latency of one page write (`uring-sync`), microseconds.
    pub write_lat_us: f64,
    /// Cycles of one transaction with every page in memory.
    pub c_tx: f64,
    /// What a page fault costs this engine beside the read itself: the traversal restarts
    /// from the root after the task was parked (taken as one more in-memory transaction).
    pub c_restart: f64,
    /// Cycles of a descent from the root to a resident leaf: what a restart that resumes at
    /// the page its wait read skips of `c_restart` (a step's prediction subtracts it for the
    /// share of its restarts that resumed).
    pub c_descent: f64,
    /// Every page read is verified and every page write sealed with a CRC32C: the cycles of
    /// one, timed here on pages not in the CPU's caches (as a page just read, or an eviction
    /// victim, is).
    pub c_checksum: f64,
    /// Cycles to verify a page just read from the target: the CRC32C of each block of a raw
    /// read run, timed as its completion is reaped (the device, or in a VM the host, has just
    /// written it, and what reading it costs depends on where that left it). 0 where it was
    /// not measured: reads are then priced with `c_checksum`.
    pub c_checksum_read: f64,
    /// Cycles per read submitted one per enter.
    pub c_read_single: f64,
    /// Cycles per read, batched (adaptive, queue full).
    pub c_read_batch: f64,
    /// Cycles per write, batched (adaptive, queue full).
    pub c_write_batch: f64,
    /// Cycles per read, batched, with registered buffers.
    pub c_read_batch_fixed: f64,
    /// Cycles per write, batched, with registered buffers.
    pub c_write_batch_fixed: f64,
    /// The application thread's cycles per read under SQPOLL (registered buffers).
    pub c_read_sqpoll: f64,
    /// The application thread's cycles per write under SQPOLL (registered buffers).
    pub c_write_sqpoll: f64,
    /// Cycles per read with NVMe passthrough (registered buffers, batched) on the target's
    /// char device; 0 when the target cannot run it (the model then uses the fixed-buffer
    /// costs).
    pub c_read_passthrough: f64,
    /// Cycles per write with NVMe passthrough, as `c_read_passthrough`.
    pub c_write_passthrough: f64,
    /// Cycles per read polled (`+iopoll`: passthrough on a char device, else the block
    /// device's poll queues); 0 when the target cannot poll.
    pub c_read_iopoll: f64,
    /// Cycles per write polled, as `c_read_iopoll`.
    pub c_write_iopoll: f64,
    /// Cycles per read with libaio, batched.
    pub c_read_libaio: f64,
    /// Cycles per write with libaio, batched.
    pub c_write_libaio: f64,
    /// Reads + writes per second the device sustains (50/50 mix, queue of `tasks`).
    pub device_iops: f64,
    /// The three runs behind `device_iops` (its spread).
    pub device_iops_runs: Vec<f64>,
    /// Time for one eviction batch of writes submitted together to complete, per write
    /// (microseconds): what a synchronous task waits per victim in `+batch-evict`.
    pub batch_write_us_per_write: f64,
}

/// Measures the costs the model needs, on the target, before the data is loaded.
pub fn calibrate(opts: &LadderOpts, size: u64, progress: &dyn Fn(&str)) -> Result<Calibration> {
    let probe = Probe::new(opts, size);
    let mut c = Calibration {
        tsc_ghz: tsc_hz() / 1e9,
        ..Default::default()
    };
    progress("calibrate: read/write latency");
    let qd1 = probe.io(EngineKind::UringSync, Batching::Each, false);
    (c.read_lat_us, c.write_lat_us) = probe.read_and_write(&probe.data, &qd1, |r| r.lat_us.avg)?;
    progress("calibrate: cycles per read/write");
    probe.measure_submission_cycles(&mut c)?;
    probe.measure_sqpoll_cycles(&mut c)?;
    probe.measure_passthrough_cycles(&mut c, progress)?;
    probe.measure_iopoll_cycles(&mut c, progress)?;
    progress("calibrate: eviction batch");
    c.batch_write_us_per_write = batch_write_time(opts, size, evict_batch(opts))?;
    progress("calibrate: device ceiling");
    (c.device_iops, c.device_iops_runs) = probe.device_ceiling()?;
    Ok(c)
}

/// The cycles per I/O of a raw I/O run, the whole process counted.
fn cycles(r: &IoReport) -> f64 {
    r.cycles_per_io
}

/// Raw I/O runs of page-sized requests over the calibration's region of the target, each
/// `opts.calibrate` long.
#[derive(Clone)]
struct Probe<'a> {
    opts: &'a LadderOpts,
    /// Bytes of the target the runs spread over (the region the data will occupy).
    size: u64,
    /// Where the engines that go through the block layer reach the data.
    data: PathBuf,
    /// CPUs the runs are pinned to.
    cpus: Vec<u32>,
}

impl Probe<'_> {
    fn new(opts: &LadderOpts, size: u64) -> Probe<'_> {
        Probe {
            opts,
            size,
            data: data_path(opts, EngineKind::Uring),
            cpus: opts.cpu.into_iter().collect(),
        }
    }

    /// `engine` at the ladder's queue depth (QD1 for `uring-sync`), DEFER_TASKRUN for
    /// io_uring, pinned as asked.
    fn io(&self, engine: EngineKind, batching: Batching, fixed_buffers: bool) -> IoConfig {
        IoConfig {
            queue_depth: if engine == EngineKind::UringSync {
                1
            } else {
                self.opts.tasks.clamp(8, 256) as u32
            },
            batching,
            fixed_buffers,
            setup: if engine.is_uring() {
                SetupMode::Defer
            } else {
                SetupMode::Default
            },
            cpu: self.opts.cpu,
            ..IoConfig::new(engine)
        }
    }

    fn spec(&self, target: &Path, rw: RwMode, io: IoConfig) -> IoSpec {
        let mut spec = IoSpec::new(target, io);
        spec.rw = rw;
        spec.bs = self.opts.page_size as u64;
        spec.size = self.size;
        spec.runtime = Some(self.opts.calibrate);
        spec.cpus = self.cpus.clone();
        spec
    }

    fn run(&self, target: &Path, rw: RwMode, io: IoConfig) -> Result<IoReport> {
        rawio::run(&self.spec(target, rw, io))
    }

    /// `figure` of a random-read run, then of a random-write run, with `io` on `target`.
    fn read_and_write(
        &self,
        target: &Path,
        io: &IoConfig,
        figure: impl Fn(&IoReport) -> f64,
    ) -> Result<(f64, f64)> {
        let read = figure(&self.run(target, RwMode::RandRead, io.clone())?);
        let write = figure(&self.run(target, RwMode::RandWrite, io.clone())?);
        Ok((read, write))
    }

    /// Cycles per I/O submitted one per enter, batched, batched with registered buffers,
    /// and through libaio; the batched reads also time the verification of each page read
    /// (`c_checksum_read`, taken out of `c_read_batch`).
    fn measure_submission_cycles(&self, c: &mut Calibration) -> Result<()> {
        let data = &self.data;
        let single = self.io(EngineKind::Uring, Batching::Each, false);
        c.c_read_single = self.run(data, RwMode::RandRead, single)?.cycles_per_io;
        let batched = self.io(EngineKind::Uring, Batching::Adaptive, false);
        let mut reads = self.spec(data, RwMode::RandRead, batched.clone());
        reads.checksum_reads = true;
        let report = rawio::run(&reads)?;
        c.c_checksum_read = report.checksum_cycles_per_read.unwrap_or(0.0);
        c.c_read_batch = (report.cycles_per_io - c.c_checksum_read).max(0.0);
        c.c_write_batch = self.run(data, RwMode::RandWrite, batched)?.cycles_per_io;
        let fixed = self.io(EngineKind::Uring, Batching::Adaptive, true);
        (c.c_read_batch_fixed, c.c_write_batch_fixed) =
            self.read_and_write(data, &fixed, cycles)?;
        let libaio = self.io(EngineKind::Libaio, Batching::Adaptive, false);
        (c.c_read_libaio, c.c_write_libaio) = self.read_and_write(data, &libaio, cycles)?;
        Ok(())
    }

    /// The application thread's cycles per I/O under SQPOLL, when the machine has a core
    /// for the poller.
    fn measure_sqpoll_cycles(&self, c: &mut Calibration) -> Result<()> {
        let Ok((app, poller)) = sqpoll_cpus(self.opts.cpu) else {
            return Ok(());
        };
        let io = with_sqpoll(
            self.io(EngineKind::Uring, Batching::Adaptive, true),
            app,
            poller,
        );
        let on_app_cpu = Probe {
            cpus: app.into_iter().collect(),
            ..self.clone()
        };
        (c.c_read_sqpoll, c.c_write_sqpoll) =
            on_app_cpu.read_and_write(&self.data, &io, |r| r.cycles_per_io_submitter)?;
        Ok(())
    }

    /// Cycles per I/O through NVMe passthrough, when the target is an NVMe char device.
    fn measure_passthrough_cycles(
        &self,
        c: &mut Calibration,
        progress: &dyn Fn(&str),
    ) -> Result<()> {
        if nvme_namespace(&self.opts.target).is_none() {
            return Ok(());
        }
        progress("calibrate: NVMe passthrough cycles per read/write");
        let passthrough = self.io(EngineKind::UringPassthrough, Batching::Adaptive, true);
        (c.c_read_passthrough, c.c_write_passthrough) =
            self.read_and_write(&self.opts.target, &passthrough, cycles)?;
        Ok(())
    }

    /// Cycles per polled I/O (passthrough on a char device, else the block device's poll
    /// queues), when the target can poll.
    fn measure_iopoll_cycles(&self, c: &mut Calibration, progress: &dyn Fn(&str)) -> Result<()> {
        let target = &self.opts.target;
        if ringdb_io::check_iopoll(target).is_err() {
            return Ok(());
        }
        progress("calibrate: polled (IOPOLL) cycles per read/write");
        let engine = if nvme_namespace(target).is_some() {
            EngineKind::UringPassthrough
        } else {
            EngineKind::Uring
        };
        let polled = IoConfig {
            iopoll: true,
            ..self.io(engine, Batching::Adaptive, true)
        };
        (c.c_read_iopoll, c.c_write_iopoll) = self.read_and_write(target, &polled, cycles)?;
        Ok(())
    }

    /// Reads + writes per second the device sustains (50/50 random mix at the ladder's
    /// queue depth), and the runs behind the figure.
    fn device_ceiling(&self) -> Result<(f64, Vec<f64>)> {
        let io = self.io(EngineKind::Uring, Batching::Adaptive, false);
        let mut spec = self.spec(&self.data, RwMode::RandRw, io);
        spec.rwmixread = 50;
        // This device's ceiling moves a lot from one second to the next (virtio on a shared
        // host): the median of three runs.
        let mut runs = Vec::with_capacity(3);
        for _ in 0..3 {
            runs.push(rawio::run(&spec)?.iops);
        }
        runs.sort_by(f64::total_cmp);
        Ok((runs[1], runs))
    }
}

/// Cycles per I/O (the whole process counted) of a raw random-`rw` run of `io`, `opts.calibrate`
/// long, over the first `size` bytes of `target` in pages of `opts.page_size`: what the ladder
/// measures per submission mode, for any engine and switches (`ringdb ycsb`'s model prices its
/// own run's with it). A regular file shorter than `size` is filled first. `buffer_span`:
/// the memory the requests' buffers spread over ([`rawio::IoSpec::buffer_span`]; `None`: one
/// buffer per request in flight).
pub(crate) fn io_cycles(
    opts: &LadderOpts,
    size: u64,
    target: &Path,
    rw: RwMode,
    io: IoConfig,
    buffer_span: Option<u64>,
) -> Result<f64> {
    let mut spec = Probe::new(opts, size).spec(target, rw, io);
    spec.buffer_span = buffer_span.map(|span| span.max(spec.bs * u64::from(spec.iodepth())));
    Ok(rawio::run(&spec)?.cycles_per_io)
}

/// Cycles per page read of a raw random-read run of `io` over the first `size` bytes of
/// `target` (as [`io_cycles`]), with each page checksummed as its completion is reaped: the
/// read's cycles without the checksum, and the checksum's (the verification of a page just
/// read). `buffer_span` as in [`io_cycles`].
pub(crate) fn read_cycles_and_checksum(
    opts: &LadderOpts,
    size: u64,
    target: &Path,
    io: IoConfig,
    buffer_span: Option<u64>,
) -> Result<(f64, f64)> {
    let probe = Probe::new(opts, size);
    let mut spec = probe.spec(target, RwMode::RandRead, io);
    spec.buffer_span = buffer_span.map(|span| span.max(spec.bs * u64::from(spec.iodepth())));
    spec.checksum_reads = true;
    let report = rawio::run(&spec)?;
    let checksum = report.checksum_cycles_per_read.unwrap_or(0.0);
    Ok(((report.cycles_per_io - checksum).max(0.0), checksum))
}

/// Average time for `n` page writes at random offsets, submitted together, to all complete,
/// divided by `n` (microseconds per write).
fn batch_write_time(opts: &LadderOpts, size: u64, n: usize) -> Result<f64> {
    use ringdb_io::Runtime;
    use ringdb_io::{AlignedBuf, FileId};
    use ringdb_io::{Target, TargetOptions};
    let target = Target::open(
        &data_path(opts, EngineKind::Uring),
        TargetOptions {
            direct: true,
            write: true,
            create: false,
        },
    )?;
    let cfg = IoConfig {
        queue_depth: (n as u32).clamp(8, 256),
        batching: Batching::Each,
        setup: SetupMode::Defer,
        cpu: opts.cpu,
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut rt = Runtime::from_config(&cfg, &[target.fd()], None)?;
    let io = rt.io();
    let ps = opts.page_size;
    let pages = (size.min(target.size) / ps as u64).max(1);
    let dur = opts.calibrate;
    let per_write = rt.block_on(async move {
        let mut bufs: Vec<AlignedBuf> = (0..n).map(|i| incompressible_page(i, ps)).collect();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let start = std::time::Instant::now();
        let mut batches = 0u64;
        while start.elapsed() < dur || batches < 4 {
            let writes = futures_util::future::join_all(bufs.drain(..).map(|b| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                io.write(FileId(0), (x % pages) * ps as u64, b)
            }));
            for (r, b) in io.submit_together(writes).await {
                r?;
                bufs.push(b);
            }
            batches += 1;
        }
        Ok::<_, ringdb_io::IoError>(
            start.elapsed().as_secs_f64() * 1e6 / (batches * n as u64) as f64,
        )
    })??;
    Ok(per_write)
}

/// Page `i` of a batch, filled with xorshift output: zram stores zero pages almost for free.
fn incompressible_page(i: usize, page_size: usize) -> ringdb_io::AlignedBuf {
    let mut b = ringdb_io::AlignedBuf::new(page_size);
    let mut y = 0x2545_F491_4F6C_DD1Du64 ^ i as u64;
    for chunk in b.as_mut_slice().chunks_mut(8) {
        y ^= y << 13;
        y ^= y >> 7;
        y ^= y << 17;
        chunk.copy_from_slice(&y.to_le_bytes()[..chunk.len()]);
    }
    b
}

/// Bytes of pages the checksum is timed over: several times any L3 cache, so every page is
/// cold when its turn comes.
pub(crate) const CHECKSUM_REGION_BYTES: usize = 64 << 20;

/// Cycles to seal (checksum) one page that is not in the CPU's caches. A page being verified
/// has just arrived from storage, and a page being sealed for write-back is an eviction victim
/// nobody touched for a while: neither is in the caches, and a checksum over a cold page costs
/// its 64 cache-line fills too (dearer than the same checksum over a cached page; measured:
/// docs/results/issue15-cpu-per-op.md). Pages
/// are visited in a scattered order, so the hardware prefetcher cannot run ahead of the
/// next page.
pub(crate) fn checksum_cycles(page_size: usize) -> f64 {
    checksum_cycles_over(page_size, CHECKSUM_REGION_BYTES)
}

/// [`checksum_cycles`] over `region_bytes` of pages (less where memory is short: pages of a
/// region that fits in the caches are warmer, and the figure lower).
pub(crate) fn checksum_cycles_over(page_size: usize, region_bytes: usize) -> f64 {
    let pages = (region_bytes / page_size).max(1);
    let mut region = vec![0u8; pages * page_size];
    for page in region.chunks_exact_mut(page_size) {
        ringdb::node::NodeMut::init_leaf(page);
    }
    // A stride coprime with the page count visits every page once, far from the last.
    let stride = (pages / 2 + 1..).find(|s| gcd(*s, pages) == 1).unwrap_or(1);
    let t0 = ringdb_lab::counters::rdtsc();
    for i in 0..pages {
        let at = (i * stride) % pages * page_size;
        let page = &mut region[at..at + page_size];
        ringdb::page::seal(std::hint::black_box(page), i as u64);
    }
    ringdb_lab::counters::rdtsc().saturating_sub(t0) as f64 / pages as f64
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Loads the data set with a pool that holds all of it, and measures on it the costs that
/// need the data: a transaction with every page in memory (`c_tx`, and `c_restart`, taken as
/// one more of them) and sealing a page (`c_checksum`). Returns the data's size in pages.
pub(super) fn load_measuring_in_memory_costs(
    opts: &LadderOpts,
    records: u64,
    estimated_bytes: u64,
    c: &mut Calibration,
    progress: &dyn Fn(&str),
) -> Result<u64> {
    progress("load");
    let big_pool = ((estimated_bytes as f64 * 1.6) as usize / opts.page_size).max(opts.pool_pages);
    let in_memory_io = IoConfig {
        queue_depth: 128,
        batching: Batching::Adaptive,
        cpu: opts.cpu,
        setup: SetupMode::Defer,
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut options = db_options(opts, in_memory_io, 64, true);
    options.pool_pages = big_pool;
    let mut db = LocalDb::open(&data_path(opts, EngineKind::Uring), options)?;
    ycsb::load(&mut db, records, opts.value_size, 64, opts.progress)?;
    progress("in-memory cycles per transaction");
    let spec = RunSpec {
        tasks: 1,
        duration: opts.calibrate.max(Duration::from_millis(500)),
        value_size: opts.value_size,
        max_ops: None,
        progress: false,
        label: "in-memory".into(),
    };
    let r = ycsb::run(&mut db, &spec, uniform_mix(records, opts.read_percent, 7))?;
    if r.reads_per_op > 0.01 {
        return Err(BenchError::StillFaulting {
            reads_per_transaction: r.reads_per_op,
            pool_pages: big_pool,
        });
    }
    c.c_tx = r.cycles_per_op;
    c.c_restart = r.cycles_per_op;
    c.c_descent = crate::ycsb_model::descent_cycles_over(&mut db, 0, records)?;
    c.c_checksum = checksum_cycles(opts.page_size);
    let data_pages = db.stats().pages;
    db.close()?;
    Ok(data_pages)
}
