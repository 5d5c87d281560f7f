//! Where the ladder's data lives and what the target and the machine let a step switch on.
//!
//! A target is a data file, a block device, or an NVMe namespace's generic char device
//! (`/dev/ngXnY`). Only NVMe passthrough can use the char device; every other engine reaches
//! the same blocks through the namespace's block device, so a char-device target runs the
//! whole ladder on one set of blocks.

use super::LadderOpts;
use ringdb_io::{EngineKind, IoConfig, SetupMode, SqPoll};
use std::path::{Path, PathBuf};

/// How long the SQPOLL thread spins without work before it sleeps, in the ladder's steps and
/// in their calibration.
const SQPOLL_IDLE_MS: u32 = 50;

/// The NVMe namespace behind `target` when it is an NVMe generic char device (`/dev/ngXnY`):
/// its block device `/dev/nvmeXnY`, through which the steps that use the block layer (and
/// the calibration and the load) reach the same blocks.
pub(crate) fn nvme_namespace(target: &Path) -> Option<PathBuf> {
    ringdb_io::nvme_block_device_of_char(target).map(|b| Path::new("/dev").join(b))
}

/// Where a step with engine `engine` opens the data: the char device for passthrough, the
/// namespace's block device for the other engines when the target is a char device.
pub(crate) fn data_path(opts: &LadderOpts, engine: EngineKind) -> PathBuf {
    match nvme_namespace(&opts.target) {
        Some(block) if engine != EngineKind::UringPassthrough => block,
        _ => opts.target.clone(),
    }
}

/// A scratch file beside a regular data file, for raw baselines that write.
pub(crate) fn raw_scratch(target: &Path) -> Option<PathBuf> {
    let m = std::fs::metadata(target).ok()?;
    m.is_file().then(|| target.with_extension("raw-baseline"))
}

/// `io` with the NVMe passthrough engine instead of `uring`.
pub(crate) fn passthrough_of(io: IoConfig) -> IoConfig {
    IoConfig {
        engine: EngineKind::UringPassthrough,
        ..io
    }
}

/// Why `+passthrough` cannot run on `target`.
pub(crate) fn passthrough_unsupported(target: &Path) -> String {
    format!(
        "NVMe passthrough needs an NVMe namespace's char device (/dev/ngXnY); {} is not one \
         (see the NVMe VM lab)",
        target.display()
    )
}

/// SQPOLL needs a core of its own (seeds/002): the app on one CPU, the poller on another.
pub(crate) fn sqpoll_cpus(
    app: Option<u32>,
) -> std::result::Result<(Option<u32>, Option<u32>), String> {
    // Online CPUs, not this thread's affinity (a pinned step leaves the thread on one CPU).
    // SAFETY: sysconf only reads a system value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    if n < 2 {
        return Err("SQPOLL needs a spare core for its kernel thread; this machine has one".into());
    }
    let app = app.unwrap_or(0);
    Ok((Some(app), Some(if app == 0 { 1 } else { 0 })))
}

/// `io` submitted through a SQPOLL thread on CPU `poller`, the application on CPU `app`
/// (from [`sqpoll_cpus`]). SQPOLL rings are set up without DEFER_TASKRUN.
pub(crate) fn with_sqpoll(io: IoConfig, app: Option<u32>, poller: Option<u32>) -> IoConfig {
    IoConfig {
        sqpoll: Some(SqPoll {
            idle_ms: SQPOLL_IDLE_MS,
            cpu: poller,
        }),
        setup: SetupMode::Default,
        cpu: app,
        ..io
    }
}
