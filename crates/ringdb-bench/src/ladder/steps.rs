//! The ladder's steps: what each one switches on (its I/O configuration, its tasks, its
//! eviction batch and how the model prices it), and running one beside its prediction.
//!
//! Each step keeps the switches of the steps before it: `+async` is `+batch-evict` with many
//! tasks, `+batch-submit` batches their submissions, `+regbufs` registers the buffers, and so
//! on. The steps after `+regbufs` keep only the switches of the steps before them that this
//! target can run (passthrough needs an NVMe char device, IOPOLL poll queues), so that one
//! missing feature does not take the rest of the ladder with it. `libaio-async` stands
//! beside the ladder: libaio with the batching of `+batch-submit`.

use super::calibrate::Calibration;
use super::model::{or_fixed, predict, restart_cycles, Model};
use super::target::{
    data_path, nvme_namespace, passthrough_of, passthrough_unsupported, raw_scratch, sqpoll_cpus,
    with_sqpoll,
};
use super::workload::{db_options, evict_batch, uniform_mix};
use super::{LadderOpts, Step, STEPS};
use crate::error::Result;
use crate::rawio::{self, IoSpec, RwMode};
use crate::ycsb::{self, PhaseReport, RunSpec};
use ringdb::LocalDb;
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode};
use std::time::Duration;

/// How one step configures the engine.
pub(crate) struct StepConfig {
    pub(crate) io: IoConfig,
    pub(crate) tasks: usize,
    pub(crate) evict_batch: usize,
    pub(crate) model: Model,
}

/// The error for a step name that is not one of [`STEPS`].
pub(super) fn unknown_step(name: &str) -> String {
    format!("unknown step {name:?}; one of: {}", STEPS.join(", "))
}

/// The configuration of step `name`, or why it cannot run on `target`.
pub(crate) fn step_config(
    name: &str,
    opts: &LadderOpts,
) -> std::result::Result<StepConfig, String> {
    let io = StepIo { opts };
    let batch = evict_batch(opts);
    // The synchronous steps run one task; `posix` and `uring-sync` evict one page at a time.
    let synchronous = |io, evict_batch, model| StepConfig {
        io,
        tasks: 1,
        evict_batch,
        model,
    };
    let concurrent = |io, c_read, c_write| StepConfig {
        io,
        tasks: opts.tasks,
        evict_batch: batch,
        model: Model::Async { c_read, c_write },
    };
    if let (super::CONFIG_STEP, Some(io)) = (name, &opts.config_io) {
        return Ok(from_file(opts, io.clone(), batch));
    }
    Ok(match name {
        "posix" => synchronous(io.base(EngineKind::Posix), 1, Model::Sync),
        "uring-sync" => synchronous(io.base(EngineKind::UringSync), 1, Model::Sync),
        "+batch-evict" => synchronous(io.each(), batch, Model::BatchEvict),
        "+async" => concurrent(io.each(), |c| c.c_read_single, |c| c.c_write_batch),
        "+batch-submit" => concurrent(io.batched(), |c| c.c_read_batch, |c| c.c_write_batch),
        "+regbufs" => concurrent(
            io.regbufs(),
            |c| c.c_read_batch_fixed,
            |c| c.c_write_batch_fixed,
        ),
        "+passthrough" => concurrent(
            io.passthrough()?,
            |c| or_fixed(c.c_read_passthrough, c.c_read_batch_fixed),
            |c| or_fixed(c.c_write_passthrough, c.c_write_batch_fixed),
        ),
        "+iopoll" => concurrent(
            io.iopoll()?,
            |c| or_fixed(c.c_read_iopoll, c.c_read_batch_fixed),
            |c| or_fixed(c.c_write_iopoll, c.c_write_batch_fixed),
        ),
        "+sqpoll" => concurrent(io.sqpoll()?, |c| c.c_read_sqpoll, |c| c.c_write_sqpoll),
        "libaio-async" => concurrent(io.libaio(), |c| c.c_read_libaio, |c| c.c_write_libaio),
        other => return Err(unknown_step(other)),
    })
}

/// A configuration from a file as a step: blocking engines run one task and are priced as
/// `posix`; the others run the ladder's tasks, priced with the per-I/O cycles of the switches
/// they turn on.
fn from_file(opts: &LadderOpts, io: IoConfig, evict_batch: usize) -> StepConfig {
    let synchronous = matches!(io.engine, EngineKind::Posix | EngineKind::UringSync);
    StepConfig {
        model: model_of(&io),
        tasks: if synchronous { 1 } else { opts.tasks },
        evict_batch: if synchronous { 1 } else { evict_batch },
        io,
    }
}

/// How the model prices a configuration's I/O, from the switches it turns on (the most
/// specific first: SQPOLL, IOPOLL, passthrough, registered buffers, batching).
pub(crate) fn model_of(io: &IoConfig) -> Model {
    let priced = |c_read, c_write| Model::Async { c_read, c_write };
    match io.engine {
        EngineKind::Posix | EngineKind::UringSync => Model::Sync,
        EngineKind::Libaio => priced(|c| c.c_read_libaio, |c| c.c_write_libaio),
        _ if io.sqpoll.is_some() => priced(|c| c.c_read_sqpoll, |c| c.c_write_sqpoll),
        _ if io.iopoll => priced(
            |c| or_fixed(c.c_read_iopoll, c.c_read_batch_fixed),
            |c| or_fixed(c.c_write_iopoll, c.c_write_batch_fixed),
        ),
        EngineKind::UringPassthrough => priced(
            |c| or_fixed(c.c_read_passthrough, c.c_read_batch_fixed),
            |c| or_fixed(c.c_write_passthrough, c.c_write_batch_fixed),
        ),
        _ if io.fixed_buffers => priced(|c| c.c_read_batch_fixed, |c| c.c_write_batch_fixed),
        _ if io.batching == Batching::Each => priced(|c| c.c_read_single, |c| c.c_write_batch),
        _ => priced(|c| c.c_read_batch, |c| c.c_write_batch),
    }
}

/// The I/O configurations of the steps, each built on the one before it.
struct StepIo<'a> {
    opts: &'a LadderOpts,
}

impl StepIo<'_> {
    /// `engine` at the ladder's queue depth, pinned as asked, DEFER_TASKRUN for io_uring.
    fn base(&self, engine: EngineKind) -> IoConfig {
        IoConfig {
            queue_depth: self.opts.tasks.clamp(8, 256) as u32,
            cpu: self.opts.cpu,
            setup: if engine == EngineKind::Uring || engine == EngineKind::UringSync {
                SetupMode::Defer
            } else {
                SetupMode::Default
            },
            ..IoConfig::new(engine)
        }
    }

    /// Asynchronous io_uring, one enter per request (`+batch-evict`, `+async`).
    fn each(&self) -> IoConfig {
        IoConfig {
            batching: Batching::Each,
            ..self.base(EngineKind::Uring)
        }
    }

    /// Requests submitted in batches (`+batch-submit`).
    fn batched(&self) -> IoConfig {
        IoConfig {
            batching: Batching::Adaptive,
            ..self.each()
        }
    }

    /// With registered buffers (`+regbufs`).
    fn regbufs(&self) -> IoConfig {
        IoConfig {
            fixed_buffers: true,
            ..self.batched()
        }
    }

    /// Through NVMe passthrough (`+passthrough`), on an NVMe char device only.
    fn passthrough(&self) -> std::result::Result<IoConfig, String> {
        if nvme_namespace(&self.opts.target).is_none() {
            return Err(passthrough_unsupported(&self.opts.target));
        }
        Ok(passthrough_of(self.regbufs()))
    }

    /// Polled completions (`+iopoll`), where the device has poll queues.
    fn iopoll(&self) -> std::result::Result<IoConfig, String> {
        ringdb_io::check_iopoll(&self.opts.target).map_err(|e| e.to_string())?;
        Ok(IoConfig {
            iopoll: true,
            ..self.below_sqpoll(false)
        })
    }

    /// Submissions through a SQPOLL thread on a core of its own (`+sqpoll`).
    fn sqpoll(&self) -> std::result::Result<IoConfig, String> {
        let (app, poller) = sqpoll_cpus(self.opts.cpu)?;
        Ok(with_sqpoll(self.below_sqpoll(true), app, poller))
    }

    /// libaio, batched (`libaio-async`, beside the io_uring steps).
    fn libaio(&self) -> IoConfig {
        IoConfig {
            batching: Batching::Adaptive,
            ..self.base(EngineKind::Libaio)
        }
    }

    /// `+regbufs` with the switches of the steps after it that this target can run:
    /// passthrough on an NVMe char device, and (`with_iopoll`, for `+sqpoll`) IOPOLL where
    /// the device has poll queues.
    fn below_sqpoll(&self, with_iopoll: bool) -> IoConfig {
        let target = &self.opts.target;
        let io = if nvme_namespace(target).is_some() {
            passthrough_of(self.regbufs())
        } else {
            self.regbufs()
        };
        IoConfig {
            iopoll: with_iopoll && ringdb_io::check_iopoll(target).is_ok(),
            ..io
        }
    }
}

/// Runs one step: its warm-up, its measured phase, the raw I/O baseline right after it, and
/// the model's prediction for the faults and writes it saw.
pub(super) fn run_step(
    opts: &LadderOpts,
    name: &str,
    sc: &StepConfig,
    records: u64,
    cal: &Calibration,
) -> Result<Step> {
    let measured = measure(opts, name, sc, records)?;
    let raw_after = raw_iops_after(opts, sc, cal)?;
    let prediction = predict(
        sc.model,
        &Calibration {
            // The device's ceiling as measured next to the step (see `raw_iops_after`).
            device_iops: raw_after,
            c_restart: restart_cycles(cal, measured.restarts_per_op, measured.resumes_per_op),
            ..cal.clone()
        },
        measured.reads_per_op,
        measured.writes_per_op,
    );
    Ok(measured_step(
        name, sc.tasks, &measured, prediction, raw_after,
    ))
}

/// The step's measured phase on its own database.
fn measure(opts: &LadderOpts, name: &str, sc: &StepConfig, records: u64) -> Result<PhaseReport> {
    let mut db = LocalDb::open(
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
    ycsb::run(&mut db, &warm, uniform_mix(records, opts.read_percent, 11))?;
    let spec = RunSpec {
        duration: opts.runtime,
        progress: opts.progress,
        label: name.to_string(),
        ..warm
    };
    let r = ycsb::run(&mut db, &spec, uniform_mix(records, opts.read_percent, 13))?;
    db.close()?;
    Ok(r)
}

/// The raw baseline right after the step, on the same target, at the step's queue depth:
/// this device's ceiling drifts too much between the calibration and the step to compare
/// with a figure taken minutes apart.
/// It writes, so it runs on a scratch file beside the data file (same file system), never
/// on the data itself; on a block device, and for the synchronous steps, the calibration's
/// figure stands in.
fn raw_iops_after(opts: &LadderOpts, sc: &StepConfig, cal: &Calibration) -> Result<f64> {
    let scratch = raw_scratch(&opts.target);
    let (true, Some(scratch)) = (sc.tasks > 1, scratch) else {
        return Ok(cal.device_iops);
    };
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
    Ok(rawio::run(&spec)?.iops)
}

/// A step that ran: what phase `r` measured beside the model's `prediction` (tx/s, cycles
/// per tx, bounding term) and the raw baseline `raw_after`.
fn measured_step(
    name: &str,
    tasks: usize,
    r: &PhaseReport,
    prediction: (f64, f64, &str),
    raw_after: f64,
) -> Step {
    let (predicted_tps, predicted_cycles, bound) = prediction;
    let ios_per_s = r.ops_per_s * (r.reads_per_op + r.writes_per_op);
    Step {
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
        tasks,
        ios_per_s,
        ios_vs_raw: if raw_after > 0.0 {
            ios_per_s / raw_after
        } else {
            0.0
        },
        raw_iops_after: raw_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_unsupported_steps_are_named() {
        let o = LadderOpts::new("/tmp/x");
        let e = step_config("+warp", &o).err().unwrap();
        assert!(e.contains("unknown step") && e.contains("posix"), "{e}");
        let e = step_config("+passthrough", &o).err().unwrap();
        assert!(e.contains("char device"), "{e}");
        // An existing path on a device without poll queues (unless this one has them).
        let tmp = LadderOpts::new(std::env::temp_dir());
        if ringdb_io::check_iopoll(&tmp.target).is_err() {
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
    fn a_configuration_from_a_file_is_priced_by_its_switches() {
        let c = Calibration {
            c_read_single: 1.0,
            c_read_batch: 2.0,
            c_read_batch_fixed: 3.0,
            c_read_sqpoll: 4.0,
            c_read_libaio: 5.0,
            ..Calibration::default()
        };
        let read_cost = |io: IoConfig| match model_of(&io) {
            Model::Async { c_read, .. } => c_read(&c),
            _ => 0.0,
        };
        let uring = IoConfig::new(EngineKind::Uring);
        assert_eq!(
            read_cost(IoConfig {
                batching: Batching::Each,
                ..uring.clone()
            }),
            1.0
        );
        assert_eq!(read_cost(uring.clone()), 2.0);
        assert_eq!(
            read_cost(IoConfig {
                fixed_buffers: true,
                ..uring.clone()
            }),
            3.0
        );
        let sqpoll = with_sqpoll(
            IoConfig {
                fixed_buffers: true,
                ..uring
            },
            Some(0),
            Some(1),
        );
        assert_eq!(read_cost(sqpoll), 4.0);
        assert_eq!(read_cost(IoConfig::new(EngineKind::Libaio)), 5.0);
        assert!(matches!(
            model_of(&IoConfig::new(EngineKind::Posix)),
            Model::Sync
        ));
        // The step runs only when a configuration was given.
        let mut o = LadderOpts::new("/tmp/x");
        assert!(step_config(super::super::CONFIG_STEP, &o).is_err());
        o.config_io = Some(IoConfig::new(EngineKind::Posix));
        let sc = step_config(super::super::CONFIG_STEP, &o).ok().unwrap();
        assert_eq!(sc.tasks, 1);
    }
}
