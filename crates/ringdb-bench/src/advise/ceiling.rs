//! The device's ceiling as all the advice's rings see it. The ladder measures it with one
//! ring, which on a fast device is one core's limit, not the device's: on ext4 over zram a
//! read completes inside the submitting thread, so two rings read twice as fast. Here the
//! same raw 50/50 random read/write runs with one job per thread, each pinned to its CPU.

use crate::error::Result;
use crate::ladder::LadderOpts;
use crate::rawio::{self, IoSpec, RwMode};
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode};

/// Runs taken; the median is kept (this machine's devices drift from one second to the next).
const RUNS: usize = 3;

/// Reads + writes per second of `threads` jobs of batched io_uring at the ladder's queue
/// depth over the first `size` bytes of the target (which the calibration has written), and
/// the runs behind the median.
pub(super) fn device_ceiling(
    opts: &LadderOpts,
    threads: usize,
    size: u64,
) -> Result<(f64, Vec<f64>)> {
    let io = IoConfig {
        queue_depth: opts.tasks.clamp(8, 256) as u32,
        batching: Batching::Adaptive,
        setup: SetupMode::Defer,
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut spec = IoSpec::new(
        crate::ladder::target::data_path(opts, EngineKind::Uring),
        io,
    );
    spec.rw = RwMode::RandRw;
    spec.rwmixread = 50;
    spec.bs = opts.page_size as u64;
    spec.size = size;
    spec.numjobs = threads.max(1) as u32;
    spec.cpus = (0..threads as u32).collect();
    spec.runtime = Some(opts.calibrate);
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        runs.push(rawio::run(&spec)?.iops);
    }
    runs.sort_by(f64::total_cmp);
    Ok((runs[RUNS / 2], runs))
}
