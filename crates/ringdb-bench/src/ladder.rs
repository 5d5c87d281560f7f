//! `ringdb ladder`: the paper's Fig. 5 (seeds/000 Sec. 3.3-3.4). YCSB with 100% uniform
//! updates (one per transaction) on a data set a few times the buffer pool, with the buffer
//! manager's I/O design switched on step by step, each step measured beside the **cost
//! model's prediction** (Sec. 3.3, Table 1) computed from costs this command measures first on
//! the same target.
//!
//! The model, per transaction, with `r` page reads and `w` page writes measured in the step:
//! - synchronous steps (`posix`, `uring-sync`): every fault waits for its read and for the
//!   write of its victim: `t = c_tx/f + r * lat_read + w * lat_write`;
//! - `+batch-evict`: the victims' writes go out in batches, their latency is amortised, their
//!   CPU cost stays: `t = c_tx/f + r * lat_read + w * c_write_batch/f`;
//! - asynchronous steps: the core is the bottleneck unless the device is:
//!   `t = max((c_tx + r * c_read + w * c_write)/f, (r + w) / device_iops)`, with the per-I/O
//!   cycles of the step's submission mode (single or batched, plain or registered buffers,
//!   libaio, or the application thread's share under SQPOLL).

use crate::error::{BenchError, Result};
use crate::rawio::{self, IoReport, IoSpec, RwMode};
use crate::ycsb::{self, Op, PhaseReport, RunSpec};
use ringdb::{Db, Options};
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode, SqPoll};
use ringdb_lab::counters::tsc_hz;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The steps, in the paper's order.
pub const STEPS: &[&str] = &[
    "posix",
    "uring-sync",
    "+batch-evict",
    "+async",
    "+batch-submit",
    "+regbufs",
    "+passthrough",
    "+iopoll",
    "+sqpoll",
    "libaio-async",
];

/// Bytes a record takes in a leaf besides its key and value (slot + lengths), for sizing.
const RECORD_OVERHEAD: usize = 8;
/// Leaf fill after inserts in scattered order (random B+tree inserts: about ln 2).
const LOAD_FILL: f64 = 0.69;

#[derive(Clone, Debug)]
pub struct LadderOpts {
    /// Data file (or block device; its contents are destroyed).
    pub target: PathBuf,
    pub page_size: usize,
    pub pool_pages: usize,
    /// Records loaded (`None`: enough for a data set `data_ratio` times the pool).
    pub records: Option<u64>,
    pub data_ratio: f64,
    pub value_size: usize,
    /// Concurrent tasks in the asynchronous steps.
    pub tasks: usize,
    pub warmup: Duration,
    pub runtime: Duration,
    /// Time per calibration measurement.
    pub calibrate: Duration,
    /// Only these steps (names from [`STEPS`]).
    pub steps: Option<Vec<String>>,
    /// CPU for the engine's thread (and its io-wq workers); the SQPOLL thread gets another.
    pub cpu: Option<u32>,
    pub progress: bool,
}

impl LadderOpts {
    pub fn new(target: impl Into<PathBuf>) -> Self {
        LadderOpts {
            target: target.into(),
            page_size: 4096,
            pool_pages: 4096,
            records: None,
            data_ratio: 3.5,
            value_size: 128,
            tasks: 128,
            warmup: Duration::from_secs(2),
            runtime: Duration::from_secs(8),
            calibrate: Duration::from_secs(1),
            steps: None,
            cpu: None,
            progress: false,
        }
    }

    /// Shorter phases, for a smoke run.
    pub fn quick(mut self) -> Self {
        self.warmup = Duration::from_millis(500);
        self.runtime = Duration::from_secs(2);
        self.calibrate = Duration::from_millis(300);
        self
    }

    pub fn records(&self) -> u64 {
        self.records.unwrap_or_else(|| {
            let per_leaf = (self.page_size as f64 * LOAD_FILL)
                / (8 + self.value_size + RECORD_OVERHEAD) as f64;
            (self.data_ratio * self.pool_pages as f64 * per_leaf) as u64
        })
    }
}

/// Costs measured on the target before the ladder runs (the paper's Table 1).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Calibration {
    pub tsc_ghz: f64,
    /// QD1 latency of one page read / write (`uring-sync`), microseconds.
    pub read_lat_us: f64,
    pub write_lat_us: f64,
    /// Cycles of one transaction with every page in memory.
    pub c_tx: f64,
    /// What a page fault costs this engine beside the read itself: the traversal restarts
    /// from the root after the task was parked (taken as one more in-memory transaction),
    /// and every page read is verified and every page write sealed with a CRC32C
    /// (`c_checksum`, timed on a page here).
    pub c_restart: f64,
    pub c_checksum: f64,
    /// Cycles per read/write: submitted one per enter, or batched (adaptive, queue full).
    pub c_read_single: f64,
    pub c_read_batch: f64,
    pub c_write_batch: f64,
    /// The same with registered buffers.
    pub c_read_batch_fixed: f64,
    pub c_write_batch_fixed: f64,
    /// The application thread's cycles per read/write under SQPOLL (registered buffers).
    pub c_read_sqpoll: f64,
    pub c_write_sqpoll: f64,
    /// NVMe passthrough (registered buffers, batched) on the target's char device, and the
    /// same polled (`+iopoll`: passthrough on a char device, else the block device's poll
    /// queues); 0 when the target cannot run them (the model then uses the fixed-buffer costs).
    pub c_read_passthrough: f64,
    pub c_write_passthrough: f64,
    pub c_read_iopoll: f64,
    pub c_write_iopoll: f64,
    /// libaio, batched.
    pub c_read_libaio: f64,
    pub c_write_libaio: f64,
    /// Reads + writes per second the device sustains (50/50 mix, queue of `tasks`).
    pub device_iops: f64,
    /// The three runs behind `device_iops` (its spread).
    pub device_iops_runs: Vec<f64>,
    /// Time for one eviction batch of writes submitted together to complete, per write
    /// (microseconds): what a synchronous task waits per victim in `+batch-evict`.
    pub batch_write_us_per_write: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub name: String,
    /// "ok", or "unsupported here: <reason>", or "failed: <error>".
    pub status: String,
    pub tps: f64,
    pub predicted_tps: f64,
    /// Which term of the model bounds it: "latency", "cpu" or "device".
    pub bound: String,
    pub faults_per_tx: f64,
    pub writes_per_tx: f64,
    pub cycles_per_tx: f64,
    pub predicted_cycles_per_tx: f64,
    pub enters_per_tx: f64,
    pub restarts_per_tx: f64,
    /// io-wq worker threads seen during the step (requests the kernel could not issue
    /// inline: on zram every read and write).
    pub iowq_workers: usize,
    pub lat_us_p50: f64,
    pub lat_us_p99: f64,
    pub speedup_prev: f64,
    pub speedup_posix: f64,
    pub tasks: usize,
    /// Page reads + writes per second, and their share of what raw I/O (`ringdb io`, 50/50
    /// random read/write at the same queue depth) reaches on the same target.
    pub ios_per_s: f64,
    pub ios_vs_raw: f64,
    /// The raw baseline for `ios_vs_raw`: `ringdb io` 50/50 random read/write at the step's
    /// queue depth, run right after the step (synchronous steps: the calibration's figure).
    pub raw_iops_after: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LadderReport {
    pub target: String,
    pub records: u64,
    pub value_size: usize,
    pub page_size: usize,
    pub pool_pages: usize,
    pub data_pages: u64,
    pub calibration: Calibration,
    pub steps: Vec<Step>,
}

/// How one step configures the engine.
struct StepConfig {
    io: IoConfig,
    tasks: usize,
    evict_batch: usize,
    model: Model,
}

#[derive(Clone, Copy)]
enum Model {
    Sync,
    BatchEvict,
    Async {
        c_read: fn(&Calibration) -> f64,
        c_write: fn(&Calibration) -> f64,
    },
}

fn unsupported(name: &str, why: String) -> Step {
    Step {
        name: name.into(),
        status: format!("unsupported here: {why}"),
        tps: 0.0,
        predicted_tps: 0.0,
        bound: String::new(),
        faults_per_tx: 0.0,
        writes_per_tx: 0.0,
        cycles_per_tx: 0.0,
        predicted_cycles_per_tx: 0.0,
        enters_per_tx: 0.0,
        restarts_per_tx: 0.0,
        iowq_workers: 0,
        lat_us_p50: 0.0,
        lat_us_p99: 0.0,
        speedup_prev: 0.0,
        speedup_posix: 0.0,
        tasks: 0,
        ios_per_s: 0.0,
        ios_vs_raw: 0.0,
        raw_iops_after: 0.0,
    }
}

/// The configuration of step `name`, or why it cannot run on `target`.
fn step_config(name: &str, opts: &LadderOpts) -> std::result::Result<StepConfig, String> {
    let base = |engine| IoConfig {
        queue_depth: opts.tasks.clamp(8, 256) as u32,
        cpu: opts.cpu,
        setup: if engine == EngineKind::Uring || engine == EngineKind::UringSync {
            SetupMode::Defer
        } else {
            SetupMode::Default
        },
        ..IoConfig::new(engine)
    };
    let batch = evict_batch(opts);
    let cfg = |io, tasks, evict_batch, model| {
        Ok(StepConfig {
            io,
            tasks,
            evict_batch,
            model,
        })
    };
    let async_each = IoConfig {
        batching: Batching::Each,
        ..base(EngineKind::Uring)
    };
    let batched = IoConfig {
        batching: Batching::Adaptive,
        ..async_each.clone()
    };
    let regbufs = IoConfig {
        fixed_buffers: true,
        ..batched.clone()
    };
    // The steps after `+regbufs` keep the switches of the steps before them that this
    // target can run: passthrough on an NVMe char device, and (for `+sqpoll`) IOPOLL where
    // the device has poll queues.
    let below_sqpoll = |io: IoConfig, with_iopoll: bool| {
        let io = if nvme_namespace(&opts.target).is_some() {
            passthrough_of(io)
        } else {
            io
        };
        IoConfig {
            iopoll: with_iopoll && ringdb_io::target::check_iopoll(&opts.target).is_ok(),
            ..io
        }
    };
    match name {
        "posix" => cfg(base(EngineKind::Posix), 1, 1, Model::Sync),
        "uring-sync" => cfg(base(EngineKind::UringSync), 1, 1, Model::Sync),
        "+batch-evict" => cfg(
            IoConfig {
                batching: Batching::Each,
                ..base(EngineKind::Uring)
            },
            1,
            batch,
            Model::BatchEvict,
        ),
        "+async" => cfg(
            async_each,
            opts.tasks,
            batch,
            Model::Async {
                c_read: |c| c.c_read_single,
                c_write: |c| c.c_write_batch,
            },
        ),
        "+batch-submit" => cfg(
            batched,
            opts.tasks,
            batch,
            Model::Async {
                c_read: |c| c.c_read_batch,
                c_write: |c| c.c_write_batch,
            },
        ),
        "+regbufs" => cfg(
            regbufs,
            opts.tasks,
            batch,
            Model::Async {
                c_read: |c| c.c_read_batch_fixed,
                c_write: |c| c.c_write_batch_fixed,
            },
        ),
        "+passthrough" => {
            if nvme_namespace(&opts.target).is_none() {
                return Err(passthrough_unsupported(&opts.target));
            }
            cfg(
                passthrough_of(regbufs),
                opts.tasks,
                batch,
                Model::Async {
                    c_read: |c| or_fixed(c.c_read_passthrough, c.c_read_batch_fixed),
                    c_write: |c| or_fixed(c.c_write_passthrough, c.c_write_batch_fixed),
                },
            )
        }
        "+iopoll" => {
            ringdb_io::target::check_iopoll(&opts.target).map_err(|e| e.to_string())?;
            cfg(
                IoConfig {
                    iopoll: true,
                    ..below_sqpoll(regbufs, false)
                },
                opts.tasks,
                batch,
                Model::Async {
                    c_read: |c| or_fixed(c.c_read_iopoll, c.c_read_batch_fixed),
                    c_write: |c| or_fixed(c.c_write_iopoll, c.c_write_batch_fixed),
                },
            )
        }
        "+sqpoll" => {
            let (app, sq) = sqpoll_cpus(opts.cpu)?;
            cfg(
                IoConfig {
                    sqpoll: Some(SqPoll {
                        idle_ms: 50,
                        cpu: sq,
                    }),
                    setup: SetupMode::Default,
                    cpu: app,
                    ..below_sqpoll(regbufs, true)
                },
                opts.tasks,
                batch,
                Model::Async {
                    c_read: |c| c.c_read_sqpoll,
                    c_write: |c| c.c_write_sqpoll,
                },
            )
        }
        "libaio-async" => cfg(
            IoConfig {
                batching: Batching::Adaptive,
                ..base(EngineKind::Libaio)
            },
            opts.tasks,
            batch,
            Model::Async {
                c_read: |c| c.c_read_libaio,
                c_write: |c| c.c_write_libaio,
            },
        ),
        other => Err(format!(
            "unknown step {other:?}; one of: {}",
            STEPS.join(", ")
        )),
    }
}

/// A scratch file beside a regular data file, for raw baselines that write.
fn raw_scratch(target: &Path) -> Option<PathBuf> {
    let m = std::fs::metadata(target).ok()?;
    m.is_file().then(|| target.with_extension("raw-baseline"))
}

/// Victims per eviction round in the batched steps.
fn evict_batch(opts: &LadderOpts) -> usize {
    64.min(opts.pool_pages / 16).max(1)
}

/// Average time for `n` page writes at random offsets, submitted together, to all complete,
/// divided by `n` (microseconds per write).
fn batch_write_time(opts: &LadderOpts, size: u64, n: usize) -> Result<f64> {
    use ringdb_io::executor::Runtime;
    use ringdb_io::target::{Target, TargetOptions};
    use ringdb_io::{AlignedBuf, FileId};
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
        // Incompressible contents: zram stores zero pages almost for free.
        let mut bufs: Vec<AlignedBuf> = (0..n)
            .map(|i| {
                let mut b = AlignedBuf::new(ps);
                let mut y = 0x2545_F491_4F6C_DD1Du64 ^ i as u64;
                for chunk in b.as_mut_slice().chunks_mut(8) {
                    y ^= y << 13;
                    y ^= y >> 7;
                    y ^= y << 17;
                    chunk.copy_from_slice(&y.to_le_bytes()[..chunk.len()]);
                }
                b
            })
            .collect();
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

/// `io` with the NVMe passthrough engine instead of `uring`.
fn passthrough_of(io: IoConfig) -> IoConfig {
    IoConfig {
        engine: EngineKind::UringPassthrough,
        ..io
    }
}

/// A measured cost, or the fixed-buffer cost when it could not be measured here.
fn or_fixed(measured: f64, fixed: f64) -> f64 {
    if measured > 0.0 {
        measured
    } else {
        fixed
    }
}

/// The NVMe namespace behind `target` when it is an NVMe generic char device (`/dev/ngXnY`):
/// its block device `/dev/nvmeXnY`, through which the steps that use the block layer (and
/// the calibration and the load) reach the same blocks.
fn nvme_namespace(target: &Path) -> Option<PathBuf> {
    ringdb_io::target::nvme_block_device_of_char(target).map(|b| Path::new("/dev").join(b))
}

/// Where a step with engine `engine` opens the data: the char device for passthrough, the
/// namespace's block device for the other engines when the target is a char device.
fn data_path(opts: &LadderOpts, engine: EngineKind) -> PathBuf {
    match nvme_namespace(&opts.target) {
        Some(block) if engine != EngineKind::UringPassthrough => block,
        _ => opts.target.clone(),
    }
}

fn passthrough_unsupported(target: &Path) -> String {
    format!(
        "NVMe passthrough needs an NVMe namespace's char device (/dev/ngXnY); {} is not one \
         (see the NVMe VM lab)",
        target.display()
    )
}

/// SQPOLL needs a core of its own (seeds/002): the app on one CPU, the poller on another.
fn sqpoll_cpus(app: Option<u32>) -> std::result::Result<(Option<u32>, Option<u32>), String> {
    // Online CPUs, not this thread's affinity (a pinned step leaves the thread on one CPU).
    // SAFETY: sysconf only reads a system value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    if n < 2 {
        return Err("SQPOLL needs a spare core for its kernel thread; this machine has one".into());
    }
    let app = app.unwrap_or(0);
    Ok((Some(app), Some(if app == 0 { 1 } else { 0 })))
}

fn db_options(opts: &LadderOpts, io: IoConfig, evict_batch: usize, fresh: bool) -> Options {
    Options {
        page_size: opts.page_size,
        pool_pages: opts.pool_pages,
        io,
        evict_batch: Some(evict_batch),
        free_target: Some(evict_batch.max(opts.pool_pages / 32).max(4)),
        direct: true,
        fresh,
        // The paper's ladder measures the engine without a log (pages written on eviction).
        durability: ringdb::Durability::Off,
        ..Options::default()
    }
}

/// Uniform updates over `0..records`, one per transaction.
fn uniform_updates(records: u64, seed: u64) -> impl FnMut(usize) -> Option<Op> {
    let mut x = seed | 1;
    move |_| {
        // xorshift64*: the key choice must cost next to nothing beside a B+tree update.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        Some(Op::Update(((r as u128 * records as u128) >> 64) as u64))
    }
}

fn rawio_cycles(
    target: &Path,
    size: u64,
    opts: &LadderOpts,
    rw: RwMode,
    io: IoConfig,
) -> Result<IoReport> {
    let mut spec = IoSpec::new(target, io);
    spec.rw = rw;
    spec.bs = opts.page_size as u64;
    spec.size = size;
    spec.runtime = Some(opts.calibrate);
    spec.cpus = opts.cpu.into_iter().collect();
    rawio::run(&spec)
}

/// Measures the costs the model needs, on the target, before the data is loaded.
pub fn calibrate(opts: &LadderOpts, size: u64, progress: &dyn Fn(&str)) -> Result<Calibration> {
    let t = &data_path(opts, EngineKind::Uring);
    let depth = opts.tasks.clamp(8, 256) as u32;
    let io = |engine: EngineKind, batching, fixed| IoConfig {
        queue_depth: if engine == EngineKind::UringSync {
            1
        } else {
            depth
        },
        batching,
        fixed_buffers: fixed,
        setup: if engine.is_uring() {
            SetupMode::Defer
        } else {
            SetupMode::Default
        },
        cpu: opts.cpu,
        ..IoConfig::new(engine)
    };
    let mut c = Calibration {
        tsc_ghz: tsc_hz() / 1e9,
        ..Default::default()
    };
    progress("calibrate: read/write latency");
    c.read_lat_us = rawio_cycles(
        t,
        size,
        opts,
        RwMode::RandRead,
        io(EngineKind::UringSync, Batching::Each, false),
    )?
    .lat_us
    .avg;
    c.write_lat_us = rawio_cycles(
        t,
        size,
        opts,
        RwMode::RandWrite,
        io(EngineKind::UringSync, Batching::Each, false),
    )?
    .lat_us
    .avg;
    progress("calibrate: cycles per read/write");
    let cyc = |rw, cfg| rawio_cycles(t, size, opts, rw, cfg).map(|r| r.cycles_per_io);
    c.c_read_single = cyc(
        RwMode::RandRead,
        io(EngineKind::Uring, Batching::Each, false),
    )?;
    c.c_read_batch = cyc(
        RwMode::RandRead,
        io(EngineKind::Uring, Batching::Adaptive, false),
    )?;
    c.c_write_batch = cyc(
        RwMode::RandWrite,
        io(EngineKind::Uring, Batching::Adaptive, false),
    )?;
    c.c_read_batch_fixed = cyc(
        RwMode::RandRead,
        io(EngineKind::Uring, Batching::Adaptive, true),
    )?;
    c.c_write_batch_fixed = cyc(
        RwMode::RandWrite,
        io(EngineKind::Uring, Batching::Adaptive, true),
    )?;
    c.c_read_libaio = cyc(
        RwMode::RandRead,
        io(EngineKind::Libaio, Batching::Adaptive, false),
    )?;
    c.c_write_libaio = cyc(
        RwMode::RandWrite,
        io(EngineKind::Libaio, Batching::Adaptive, false),
    )?;
    if let Ok((app, sq)) = sqpoll_cpus(opts.cpu) {
        let sqp = |rw| {
            let cfg = IoConfig {
                sqpoll: Some(SqPoll {
                    idle_ms: 50,
                    cpu: sq,
                }),
                setup: SetupMode::Default,
                cpu: app,
                ..io(EngineKind::Uring, Batching::Adaptive, true)
            };
            let mut spec = IoSpec::new(t, cfg);
            spec.rw = rw;
            spec.bs = opts.page_size as u64;
            spec.size = size;
            spec.runtime = Some(opts.calibrate);
            spec.cpus = app.into_iter().collect();
            rawio::run(&spec).map(|r| r.cycles_per_io_submitter)
        };
        c.c_read_sqpoll = sqp(RwMode::RandRead)?;
        c.c_write_sqpoll = sqp(RwMode::RandWrite)?;
    }
    if nvme_namespace(&opts.target).is_some() {
        progress("calibrate: NVMe passthrough cycles per read/write");
        let pt = io(EngineKind::UringPassthrough, Batching::Adaptive, true);
        let cyc = |rw| rawio_cycles(&opts.target, size, opts, rw, pt.clone());
        c.c_read_passthrough = cyc(RwMode::RandRead)?.cycles_per_io;
        c.c_write_passthrough = cyc(RwMode::RandWrite)?.cycles_per_io;
    }
    if ringdb_io::target::check_iopoll(&opts.target).is_ok() {
        progress("calibrate: polled (IOPOLL) cycles per read/write");
        let engine = if nvme_namespace(&opts.target).is_some() {
            EngineKind::UringPassthrough
        } else {
            EngineKind::Uring
        };
        let polled = IoConfig {
            iopoll: true,
            ..io(engine, Batching::Adaptive, true)
        };
        let cyc = |rw| rawio_cycles(&opts.target, size, opts, rw, polled.clone());
        c.c_read_iopoll = cyc(RwMode::RandRead)?.cycles_per_io;
        c.c_write_iopoll = cyc(RwMode::RandWrite)?.cycles_per_io;
    }
    progress("calibrate: eviction batch");
    c.batch_write_us_per_write = batch_write_time(opts, size, evict_batch(opts))?;
    progress("calibrate: device ceiling");
    let mut spec = IoSpec::new(t, io(EngineKind::Uring, Batching::Adaptive, false));
    spec.rw = RwMode::RandRw;
    spec.rwmixread = 50;
    spec.bs = opts.page_size as u64;
    spec.size = size;
    spec.runtime = Some(opts.calibrate);
    spec.cpus = opts.cpu.into_iter().collect();
    // This device's ceiling moves a lot from one second to the next (virtio on a shared
    // host): the median of three runs.
    let mut runs = Vec::with_capacity(3);
    for _ in 0..3 {
        runs.push(rawio::run(&spec)?.iops);
    }
    runs.sort_by(f64::total_cmp);
    c.device_iops = runs[1];
    c.device_iops_runs = runs;
    Ok(c)
}

/// The model's prediction for a step with `r` reads and `w` writes per transaction:
/// (tx/s, cycles per tx, the bounding term).
fn predict(model: Model, c: &Calibration, r: f64, w: f64) -> (f64, f64, &'static str) {
    let f = c.tsc_ghz * 1e9;
    match model {
        Model::Sync => {
            let t = engine_cycles(c, r, w) / f + (r * c.read_lat_us + w * c.write_lat_us) * 1e-6;
            (
                1.0 / t,
                engine_cycles(c, r, w) + (r + w) * c.c_read_single,
                "latency",
            )
        }
        Model::BatchEvict => {
            // The task still waits for each batch, but once per batch: per victim, the
            // batch's completion time over its size (the paper's model drops it entirely;
            // on a device with slow writes it does not vanish).
            let per_write = if c.batch_write_us_per_write > 0.0 {
                c.batch_write_us_per_write * 1e-6
            } else {
                c.c_write_batch / f
            };
            let t = engine_cycles(c, r, w) / f + r * c.read_lat_us * 1e-6 + w * per_write;
            (
                1.0 / t,
                engine_cycles(c, r, w) + r * c.c_read_single + w * c.c_write_batch,
                "latency",
            )
        }
        Model::Async { c_read, c_write } => {
            let cycles = engine_cycles(c, r, w) + r * c_read(c) + w * c_write(c);
            let t_cpu = cycles / f;
            let t_dev = if c.device_iops > 0.0 {
                (r + w) / c.device_iops
            } else {
                0.0
            };
            if t_dev > t_cpu {
                (1.0 / t_dev, cycles, "device")
            } else {
                (1.0 / t_cpu, cycles, "cpu")
            }
        }
    }
}

/// Cycles per transaction spent by the engine itself: the transaction, plus per fault a
/// restarted traversal and a checksum, plus per write-back a checksum.
fn engine_cycles(c: &Calibration, r: f64, w: f64) -> f64 {
    c.c_tx + r * (c.c_restart + c.c_checksum) + w * c.c_checksum
}

/// Cycles to seal (checksum) one page.
fn checksum_cycles(page_size: usize) -> f64 {
    let mut page = vec![0u8; page_size];
    ringdb::node::NodeMut::init_leaf(&mut page);
    let n = 2000u64;
    let t0 = ringdb_lab::counters::rdtsc();
    for i in 0..n {
        ringdb::page::seal(std::hint::black_box(&mut page), i);
    }
    ringdb_lab::counters::rdtsc().saturating_sub(t0) as f64 / n as f64
}

/// Runs the whole ladder.
pub fn run(opts: &LadderOpts, progress: &dyn Fn(&str)) -> Result<LadderReport> {
    if opts.tasks == 0 || opts.tasks > 4096 {
        return Err(BenchError::InvalidArg(format!(
            "tasks must be in 1..=4096, got {}",
            opts.tasks
        )));
    }
    let names: Vec<String> = match &opts.steps {
        Some(s) => s.clone(),
        None => STEPS.iter().map(|s| s.to_string()).collect(),
    };
    for n in &names {
        if !STEPS.contains(&n.as_str()) {
            return Err(BenchError::InvalidArg(format!(
                "unknown step {n:?}; one of: {}",
                STEPS.join(", ")
            )));
        }
    }
    if opts.pool_pages < ringdb::buffer::MIN_FRAMES {
        return Err(BenchError::InvalidArg(format!(
            "a buffer pool of {} pages is too small: at least {} ({} KiB with {}-byte pages)",
            opts.pool_pages,
            ringdb::buffer::MIN_FRAMES,
            ringdb::buffer::MIN_FRAMES * opts.page_size / 1024,
            opts.page_size
        )));
    }
    let records = opts.records();
    if records < 1000 {
        return Err(BenchError::InvalidArg(format!(
            "{records} records is too small a data set for the ladder (at least 1000)"
        )));
    }
    if let Some(block) = nvme_namespace(&opts.target) {
        if !block.exists() {
            return Err(BenchError::InvalidArg(format!(
                "{} is an NVMe char device, but its namespace's block device {} (which the \
                 steps that go through the block layer use) is missing",
                opts.target.display(),
                block.display()
            )));
        }
    }
    let est_bytes =
        (opts.data_ratio.max(1.0) * opts.pool_pages as f64 * opts.page_size as f64) as u64;
    // Calibrate on the target itself (its region the data will occupy), before loading.
    let mut cal = calibrate(opts, est_bytes.max(64 << 20), progress)?;

    // Load with a pool that holds everything, and measure in-memory cycles per transaction.
    progress("load");
    let big_pool = ((est_bytes as f64 * 1.6) as usize / opts.page_size).max(opts.pool_pages);
    let mem_io = IoConfig {
        queue_depth: 128,
        batching: Batching::Adaptive,
        cpu: opts.cpu,
        setup: SetupMode::Defer,
        ..IoConfig::new(EngineKind::Uring)
    };
    let data_pages;
    {
        let mut o = db_options(opts, mem_io, 64, true);
        o.pool_pages = big_pool;
        let mut db = Db::open(&data_path(opts, EngineKind::Uring), o)?;
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
        let r = ycsb::run(&mut db, &spec, uniform_updates(records, 7))?;
        if r.reads_per_op > 0.01 {
            return Err(BenchError::InvalidArg(format!(
                "the in-memory run still faulted ({:.2} reads/tx): not enough memory for a pool of {big_pool} pages",
                r.reads_per_op
            )));
        }
        cal.c_tx = r.cycles_per_op;
        cal.c_restart = r.cycles_per_op;
        cal.c_checksum = checksum_cycles(opts.page_size);
        data_pages = db.stats().pages;
        db.close()?;
    }

    let mut steps: Vec<Step> = Vec::new();
    for name in &names {
        progress(name);
        let sc = match step_config(name, opts) {
            Ok(sc) => sc,
            Err(why) => {
                steps.push(unsupported(name, why));
                continue;
            }
        };
        let step = run_step(opts, name, &sc, records, &cal);
        steps.push(match step {
            Ok(s) => s,
            Err(e) => {
                let mut s = unsupported(name, String::new());
                s.status = format!("failed: {e}");
                s
            }
        });
    }
    // Speedups over the previous measured step and over posix.
    let posix = steps
        .iter()
        .find(|s| s.name == "posix" && s.status == "ok")
        .map(|s| s.tps);
    let mut prev: Option<f64> = None;
    for s in steps.iter_mut().filter(|s| s.status == "ok") {
        if s.name == "libaio-async" {
            continue;
        }
        s.speedup_prev = prev.map_or(0.0, |p| s.tps / p);
        s.speedup_posix = posix.map_or(0.0, |p| s.tps / p);
        prev = Some(s.tps);
    }
    if let Some(s) = steps
        .iter_mut()
        .find(|s| s.name == "libaio-async" && s.status == "ok")
    {
        s.speedup_posix = posix.map_or(0.0, |p| s.tps / p);
    }
    if let Some(scratch) = raw_scratch(&opts.target) {
        let _ = std::fs::remove_file(scratch);
    }
    Ok(LadderReport {
        target: opts.target.display().to_string(),
        records,
        value_size: opts.value_size,
        page_size: opts.page_size,
        pool_pages: opts.pool_pages,
        data_pages,
        calibration: cal,
        steps,
    })
}

fn run_step(
    opts: &LadderOpts,
    name: &str,
    sc: &StepConfig,
    records: u64,
    cal: &Calibration,
) -> Result<Step> {
    let mut db = Db::open(
        &data_path(opts, sc.io.engine),
        db_options(opts, sc.io.clone(), sc.evict_batch, false),
    )?;
    // Warm up: fill the pool, then run the warm-up time, so the step measures the steady
    // state of a full pool.
    let warm = RunSpec {
        tasks: sc.tasks,
        duration: opts.warmup,
        value_size: opts.value_size,
        max_ops: None,
        progress: false,
        label: format!("{name} warm-up"),
    };
    ycsb::run(&mut db, &warm, uniform_updates(records, 11))?;
    let spec = RunSpec {
        duration: opts.runtime,
        progress: opts.progress,
        label: name.to_string(),
        ..warm
    };
    let r: PhaseReport = ycsb::run(&mut db, &spec, uniform_updates(records, 13))?;
    db.close()?;
    // The raw baseline right after the step, on the same target, at the step's queue depth:
    // this device's ceiling drifts too much between the calibration and the step to compare
    // with a figure taken minutes apart.
    // It writes, so it runs on a scratch file beside the data file (same file system), never
    // on the data itself; on a block device the calibration's figure stands in.
    let scratch = raw_scratch(&opts.target);
    let raw_after = if let (true, Some(scratch)) = (sc.tasks > 1, scratch) {
        let mut spec = IoSpec::new(
            &scratch,
            IoConfig {
                queue_depth: opts.tasks.clamp(8, 256) as u32,
                batching: Batching::Adaptive,
                setup: SetupMode::Defer,
                cpu: opts.cpu,
                ..IoConfig::new(EngineKind::Uring)
            },
        );
        spec.rw = RwMode::RandRw;
        spec.rwmixread = 50;
        spec.bs = opts.page_size as u64;
        spec.size = std::fs::metadata(&opts.target)
            .map(|m| m.len())
            .unwrap_or(0)
            .max(64 << 20);
        spec.runtime = Some(opts.calibrate.max(Duration::from_secs(1)));
        spec.cpus = opts.cpu.into_iter().collect();
        rawio::run(&spec)?.iops
    } else {
        cal.device_iops
    };
    let (predicted_tps, predicted_cycles, bound) = predict(
        sc.model,
        &Calibration {
            // The device's ceiling as measured next to the step (see `raw_after`).
            device_iops: raw_after,
            ..cal.clone()
        },
        r.reads_per_op,
        r.writes_per_op,
    );
    Ok(Step {
        name: name.into(),
        status: "ok".into(),
        tps: r.ops_per_s,
        predicted_tps,
        bound: bound.into(),
        faults_per_tx: r.reads_per_op,
        writes_per_tx: r.writes_per_op,
        cycles_per_tx: r.cycles_per_op,
        predicted_cycles_per_tx: predicted_cycles,
        enters_per_tx: r.enters_per_op,
        restarts_per_tx: r.restarts_per_op,
        iowq_workers: r.iowq_workers,
        lat_us_p50: r.lat_us.p50,
        lat_us_p99: r.lat_us.p99,
        speedup_prev: 0.0,
        speedup_posix: 0.0,
        tasks: sc.tasks,
        ios_per_s: r.ops_per_s * (r.reads_per_op + r.writes_per_op),
        ios_vs_raw: if raw_after > 0.0 {
            r.ops_per_s * (r.reads_per_op + r.writes_per_op) / raw_after
        } else {
            0.0
        },
        raw_iops_after: raw_after,
    })
}

/// The ladder as a table.
pub fn table(r: &LadderReport) -> String {
    let mut s = String::new();
    let c = &r.calibration;
    s.push_str(&format!(
        "target {}  records {}  value {} B  page {} B  pool {} pages  data {} pages ({:.1}x pool)\n",
        r.target,
        r.records,
        r.value_size,
        r.page_size,
        r.pool_pages,
        r.data_pages,
        r.data_pages as f64 / r.pool_pages as f64
    ));
    s.push_str(&format!(
        "costs: read {:.1} us, write {:.1} us (batched: {:.1} us per write), c_tx {:.0} cyc (restart {:.0}, checksum {:.0}), read single/batch/fixed {:.0}/{:.0}/{:.0} cyc, write batch/fixed {:.0}/{:.0} cyc, passthrough r/w {:.0}/{:.0} cyc, iopoll r/w {:.0}/{:.0} cyc, sqpoll app r/w {:.0}/{:.0} cyc, libaio r/w {:.0}/{:.0} cyc, device {:.0} IOPS (runs {:.0?}), TSC {:.2} GHz\n\n",
        c.read_lat_us, c.write_lat_us, c.batch_write_us_per_write, c.c_tx, c.c_restart, c.c_checksum, c.c_read_single, c.c_read_batch,
        c.c_read_batch_fixed, c.c_write_batch, c.c_write_batch_fixed, c.c_read_passthrough,
        c.c_write_passthrough, c.c_read_iopoll, c.c_write_iopoll, c.c_read_sqpoll,
        c.c_write_sqpoll, c.c_read_libaio, c.c_write_libaio, c.device_iops, c.device_iops_runs, c.tsc_ghz
    ));
    s.push_str(&format!(
        "{:<14} {:>10} {:>10} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8} {:>5} {:>6}  {}\n",
        "step",
        "tx/s",
        "model",
        "meas/m",
        "vs prev",
        "vs posix",
        "faults",
        "cyc/tx",
        "model cyc",
        "enters",
        "writes",
        "p50 us",
        "p99 us",
        "iowq",
        "io/raw",
        "bound"
    ));
    for st in &r.steps {
        if st.status != "ok" {
            s.push_str(&format!("{:<14} {}\n", st.name, st.status));
            continue;
        }
        let f = |x: f64| {
            if x > 0.0 {
                format!("{x:.2}x")
            } else {
                "-".into()
            }
        };
        s.push_str(&format!(
            "{:<14} {:>10.0} {:>10.0} {:>7.2} {:>7} {:>7} {:>7.2} {:>9.0} {:>9.0} {:>7.2} {:>7.2} {:>8.1} {:>8.1} {:>5} {:>6.2}  {}\n",
            st.name,
            st.tps,
            st.predicted_tps,
            st.tps / st.predicted_tps.max(1e-9),
            f(st.speedup_prev),
            f(st.speedup_posix),
            st.faults_per_tx,
            st.cycles_per_tx,
            st.predicted_cycles_per_tx,
            st.enters_per_tx,
            st.writes_per_tx,
            st.lat_us_p50,
            st.lat_us_p99,
            st.iowq_workers,
            st.ios_vs_raw,
            st.bound
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's Table 1 costs, 3.7 GHz, 70% faults with one write per fault.
    fn paper() -> Calibration {
        Calibration {
            tsc_ghz: 3.7,
            read_lat_us: 70.0,
            write_lat_us: 12.0,
            c_tx: 8264.0,
            c_read_single: 10200.0,
            c_read_batch: 5400.0,
            c_write_batch: 5700.0,
            ..Default::default()
        }
    }

    #[test]
    fn the_model_reproduces_the_papers_predictions() {
        let c = paper();
        let (sync, _, b) = predict(Model::Sync, &c, 0.7, 0.7);
        // Paper: 1 / (0.7 x 82 us) = 17.4k, without the 2.2 us of c_tx we add.
        assert!((16_500.0..17_500.0).contains(&sync), "sync {sync}");
        assert_eq!(b, "latency");
        let (be, _, _) = predict(Model::BatchEvict, &c, 0.7, 0.7);
        assert!((19_000.0..20_500.0).contains(&be), "batch-evict {be}");
        let fibers = Model::Async {
            c_read: |c| c.c_read_single,
            c_write: |c| c.c_write_batch,
        };
        let (a, cyc, b) = predict(fibers, &c, 0.7, 0.7);
        assert!((a - 190_800.0).abs() < 500.0, "+fibers {a} (paper 190.8k)");
        assert!((cyc - (8264.0 + 0.7 * 15_900.0)).abs() < 1.0);
        assert_eq!(b, "cpu");
        let batched = Model::Async {
            c_read: |c| c.c_read_batch,
            c_write: |c| c.c_write_batch,
        };
        let (bs, _, _) = predict(batched, &c, 0.7, 0.7);
        assert!(
            (bs - 230_000.0).abs() < 1_500.0,
            "+batch-submit {bs} (paper 230k)"
        );
    }

    #[test]
    fn a_slow_device_bounds_the_async_steps() {
        let c = Calibration {
            device_iops: 50_000.0,
            ..paper()
        };
        let m = Model::Async {
            c_read: |c| c.c_read_batch,
            c_write: |c| c.c_write_batch,
        };
        let (tps, _, b) = predict(m, &c, 0.7, 0.7);
        assert_eq!(b, "device");
        assert!((tps - 50_000.0 / 1.4).abs() < 1.0);
    }

    #[test]
    fn unknown_and_unsupported_steps_are_named() {
        let o = LadderOpts::new("/tmp/x");
        let e = step_config("+warp", &o).err().unwrap();
        assert!(e.contains("unknown step") && e.contains("posix"), "{e}");
        let e = step_config("+passthrough", &o).err().unwrap();
        assert!(e.contains("char device"), "{e}");
        // An existing path on a device without poll queues (unless this one has them).
        let tmp = LadderOpts::new(std::env::temp_dir());
        if ringdb_io::target::check_iopoll(&tmp.target).is_err() {
            let e = step_config("+iopoll", &tmp).err().unwrap();
            assert!(e.contains("poll queues"), "{e}");
        }
    }

    #[test]
    fn a_file_target_keeps_the_block_layer_steps_on_it() {
        let o = LadderOpts::new("/tmp/x");
        assert!(nvme_namespace(&o.target).is_none());
        assert_eq!(data_path(&o, EngineKind::Uring), o.target);
        assert_eq!(data_path(&o, EngineKind::UringPassthrough), o.target);
        // Without passthrough or poll queues, +sqpoll builds on +regbufs alone.
        let sc = step_config("+sqpoll", &o);
        if let Ok(sc) = sc {
            assert_eq!(sc.io.engine, EngineKind::Uring);
            assert!(sc.io.fixed_buffers && !sc.io.iopoll && sc.io.sqpoll.is_some());
        }
    }

    #[test]
    fn default_sizing_is_a_few_times_the_pool() {
        let o = LadderOpts::new("/tmp/x");
        let r = o.records();
        let pages = r as f64 * (8 + 128 + RECORD_OVERHEAD) as f64 / (4096.0 * LOAD_FILL);
        assert!((pages / o.pool_pages as f64 - 3.5).abs() < 0.1);
    }
}
