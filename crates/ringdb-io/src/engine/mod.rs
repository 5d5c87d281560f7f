//! The I/O engines behind one trait: `posix`, `libaio`, `uring-sync`, `uring` and
//! `uring-passthrough` (NVMe commands on `/dev/ngXnY`).
//!
//! An engine is owned by one thread (ring per thread). Callers queue requests with
//! [`Engine::push`], hand them to the kernel with [`Engine::submit`] and collect completions
//! with [`Engine::reap`]. What a request points at must stay valid until its completion has
//! been reaped; that is the contract of the unsafe `push`.

mod auto;
mod doorbell;
mod effective;
mod libaio;
mod nvme;
mod passthrough;
mod posix;
mod region;
mod ring_doorbell;
mod ring_engine;
mod sim;
mod uring;

pub(crate) use doorbell::{new_eventfd, write_eventfd};
pub use doorbell::{DoorbellWakes, RESERVED_USER_DATA_MIN};
pub use effective::{EffectiveIo, Fallbacks, Switches, MAX_FALLBACKS};
pub use libaio::LibaioEngine;
pub use nvme::{nvme_geometry, NvmeGeometry};
pub use passthrough::{NvmeCommands, PassthroughEngine};
pub use posix::PosixEngine;
pub use region::{Region, RegionEngine};
pub use ring_engine::{RingCommands, RingEngine};
pub use sim::{SimBlockingFile, SimDisk, SimFault, SimStats, SimTear, SIM_MAX_FILE_LEN};
pub use uring::{FileCommands, UringEngine};

use crate::config::{EngineKind, IoConfig};
use crate::error::Result;
use crate::ring::RingAddress;
use serde::Serialize;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Index of a file in the table an engine was opened with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// What a request does.
pub enum OpKind {
    /// Read `len` bytes at `offset` into the buffer.
    Read,
    /// Write `len` bytes from the buffer at `offset`.
    Write,
    /// `fsync`: data and metadata.
    Fsync,
    /// `fdatasync`: data and the metadata needed to read it back.
    Fdatasync,
    /// Does nothing; measures the pure submission path.
    Nop,
    /// Waits until a descriptor (`offset` holds it, `file` is unused) is readable: how a
    /// runtime sleeps on another ring or an eventfd together with its own I/O. Only engines
    /// whose [`Engine::supports_poll`] is true take it; the others refuse it at `push`.
    PollIn,
}

impl OpKind {
    /// The operation's name (`read`, `write`, `fsync`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Fsync => "fsync",
            OpKind::Fdatasync => "fdatasync",
            OpKind::Nop => "nop",
            OpKind::PollIn => "poll",
        }
    }
}

/// One request. `buf`/`len` are used by reads and writes only.
#[derive(Clone, Copy, Debug)]
pub struct IoRequest {
    /// What to do.
    pub op: OpKind,
    /// The file, as an index into the engine's table.
    pub file: FileId,
    /// Byte offset in the file.
    pub offset: u64,
    /// The buffer (reads and writes): valid for `len` bytes until the completion is reaped.
    pub buf: *mut u8,
    /// Bytes to move.
    pub len: u32,
    /// Registration index of the buffer when it lies in a registered [`crate::FixedBufferPool`];
    /// engines with fixed buffers on use `READ_FIXED`/`WRITE_FIXED` for it.
    pub buf_index: Option<u16>,
    /// Returned unchanged in the completion.
    pub user_data: u64,
}

impl IoRequest {
    /// A read of `len` bytes at `offset` into `buf`.
    pub fn read(file: FileId, offset: u64, buf: *mut u8, len: u32, user_data: u64) -> Self {
        IoRequest {
            op: OpKind::Read,
            file,
            offset,
            buf,
            len,
            buf_index: None,
            user_data,
        }
    }

    /// A write of `len` bytes from `buf` at `offset`.
    pub fn write(file: FileId, offset: u64, buf: *mut u8, len: u32, user_data: u64) -> Self {
        IoRequest {
            op: OpKind::Write,
            ..IoRequest::read(file, offset, buf, len, user_data)
        }
    }

    /// A request that does nothing (measures the submission path).
    pub fn nop(user_data: u64) -> Self {
        IoRequest {
            op: OpKind::Nop,
            ..IoRequest::read(FileId(0), 0, std::ptr::null_mut(), 0, user_data)
        }
    }

    /// An `fsync` or `fdatasync` of `file`.
    pub fn sync(op: OpKind, file: FileId, user_data: u64) -> Self {
        debug_assert!(matches!(op, OpKind::Fsync | OpKind::Fdatasync));
        IoRequest {
            op,
            ..IoRequest::read(file, 0, std::ptr::null_mut(), 0, user_data)
        }
    }

    /// A wait until descriptor `fd` is readable (see [`OpKind::PollIn`]).
    pub fn poll_in(fd: std::os::fd::RawFd, user_data: u64) -> Self {
        debug_assert!(fd >= 0, "a poll of a closed descriptor");
        IoRequest {
            op: OpKind::PollIn,
            offset: fd as u64,
            ..IoRequest::nop(user_data)
        }
    }

    /// The same request, naming the registered buffer `index` its memory lies in.
    pub fn with_buf_index(mut self, index: Option<u16>) -> Self {
        self.buf_index = index;
        self
    }
}

/// A finished request: `result` is bytes transferred (or 0), or a negative errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoCompletion {
    /// The request's `user_data`, unchanged.
    pub user_data: u64,
    /// Bytes transferred (or 0), or a negative errno.
    pub result: i32,
}

/// What an engine counts as it runs.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct EngineStats {
    /// Requests handed to the kernel.
    pub submitted: u64,
    /// Completions delivered by `reap`.
    pub completed: u64,
    /// Kernel entries made for I/O: `io_uring_enter` for io_uring, `io_submit` and
    /// `io_getevents` for libaio, `pread`/`pwrite`/`fsync` for posix.
    pub enters: u64,
    /// `reap` calls that returned at least one completion.
    pub reaps: u64,
}

impl EngineStats {
    /// Completions per `reap` that returned any: how well completions are batched.
    pub fn cqes_per_reap(&self) -> f64 {
        if self.reaps == 0 {
            0.0
        } else {
            self.completed as f64 / self.reaps as f64
        }
    }
}

/// Moves the completions an engine collected itself (posix, libaio) to `out`, counting them.
fn deliver_ready(
    ready: &mut std::collections::VecDeque<IoCompletion>,
    out: &mut Vec<IoCompletion>,
    stats: &mut EngineStats,
) -> usize {
    let n = ready.len();
    if n > 0 {
        out.extend(ready.drain(..));
        stats.completed += n as u64;
        stats.reaps += 1;
    }
    n
}

/// The error of an [`OpKind::PollIn`] pushed to an engine that cannot wait for descriptors.
pub(crate) fn poll_refused(engine: EngineKind) -> crate::error::IoError {
    crate::error::IoError::Unsupported {
        switch: crate::error::Switch::IoUring,
        reason: format!(
            "waiting for a descriptor on the runtime's own ring needs the uring engine, not {}",
            engine.name()
        ),
    }
}

/// A ring-per-thread I/O engine. Not `Send`: it belongs to the thread that opened it.
pub trait Engine {
    /// Which engine this is.
    fn kind(&self) -> EngineKind;

    /// Requests this engine can have in flight at once (pushed and not yet reaped).
    fn depth(&self) -> usize;

    /// Requests pushed and not yet reaped.
    fn in_flight(&self) -> usize;

    /// Requests pushed but not yet handed to the kernel.
    fn pending(&self) -> usize;

    /// Queues a request. Engines that cannot queue (`posix`, `uring-sync`) perform it at once.
    /// Fails without queueing when `in_flight() == depth()`.
    ///
    /// # Safety
    /// For reads and writes, `req.buf` must be valid for `req.len` bytes and must not be freed,
    /// reused or (for reads) accessed until the completion carrying `req.user_data` has been
    /// returned by [`Engine::reap`]. The kernel may write into it until then.
    unsafe fn push(&mut self, req: &IoRequest) -> Result<()>;

    /// Hands pending requests to the kernel and, if `wait_for > 0`, blocks until at least
    /// `wait_for` completions (counting those already waiting) can be reaped.
    fn submit(&mut self, wait_for: usize) -> Result<()>;

    /// Appends every completion that is ready to `out` without blocking; returns how many.
    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize;

    /// What the engine counted so far.
    fn stats(&self) -> EngineStats;

    /// Whether [`OpKind::PollIn`] requests complete asynchronously here (io_uring engines
    /// that queue, outside IOPOLL). Elsewhere `push` refuses them.
    fn supports_poll(&self) -> bool {
        false
    }

    /// Waits for every request in flight and drops their completions. Engines call this on
    /// drop so that no buffer is released while the kernel may still write into it.
    ///
    /// Deliberately without a bound on the rounds: giving up would hand the caller back
    /// buffers the kernel may still write into, so a request that never completes (a kernel
    /// or device bug) hangs here, visibly, blocked in the kernel rather than spinning. The
    /// executor above bounds its own waits (`IoError::NoCompletion`) and leaks its buffers when
    /// it gives up, before it ever drops the engine.
    fn drain(&mut self) -> Result<()> {
        let mut sink = Vec::new();
        while self.in_flight() > 0 {
            self.submit(1)?;
            sink.clear();
            self.reap(&mut sink);
        }
        Ok(())
    }

    /// Lets this engine's waits with requests in flight ([`Engine::submit`] with
    /// `wait_for > 0`) also end when `eventfd` becomes readable (a doorbell), or stops that
    /// (`None`: stop before dropping the engine's last requests, so the drain is not woken).
    /// Returns whether the engine can: `false` means its waits end only at a completion (the
    /// wake is then seen at the next one). The engine resets the eventfd when its watch fires.
    fn watch_doorbell(&mut self, eventfd: Option<Arc<OwnedFd>>) -> bool {
        let _ = eventfd;
        false
    }

    /// Blocks, with nothing in flight, until `eventfd` becomes readable or (io_uring) a
    /// doorbell message arrives, and resets the eventfd. Returns the wake-ups the wait saw
    /// itself; those found in completions are counted by [`Engine::take_doorbell_wakes`].
    /// The default sleeps in `poll(2)`.
    fn wait_for_doorbell(&mut self, eventfd: &Arc<OwnedFd>) -> Result<DoorbellWakes> {
        debug_assert_eq!(
            self.in_flight(),
            0,
            "a doorbell sleep with requests in flight"
        );
        doorbell::sleep_on_eventfd(eventfd.as_fd())
    }

    /// The doorbell wake-ups found among completions since the last call (then zeroed).
    fn take_doorbell_wakes(&mut self) -> DoorbellWakes {
        DoorbellWakes::default()
    }

    /// Where other rings post doorbell messages for this engine (`IORING_OP_MSG_RING`), when
    /// its waits end at such a message (io_uring engines, except on IOPOLL rings).
    fn doorbell_address(&self) -> Result<Option<RingAddress>> {
        Ok(None)
    }

    /// Posts a doorbell message from this engine's ring to the ring at `to` and hands it to
    /// the kernel at once (with whatever else is queued). Returns `false` when this engine
    /// cannot send messages (then the caller writes the target's eventfd instead).
    fn post_doorbell_message(&mut self, to: &RingAddress) -> Result<bool> {
        let _ = to;
        Ok(false)
    }
}

/// Opens the engine `cfg` names over `files`. With `cfg.fixed_buffers`, `buffers` are registered
/// (the caller keeps them alive for the engine's lifetime). `auto` resolves here; use
/// [`open_engine_resolved`] to learn what it resolved to.
pub fn open_engine(
    cfg: &IoConfig,
    files: &[RawFd],
    buffers: Option<&[libc::iovec]>,
) -> Result<Box<dyn Engine>> {
    open_engine_resolved(cfg, files, buffers).map(|(engine, _)| engine)
}

/// [`open_engine`], and what runs: for an explicit engine exactly what `cfg` says (or the
/// typed error why it cannot run); for [`EngineKind::Auto`] io_uring with the switches this
/// machine allows, or an engine without io_uring where io_uring is unavailable, each fallback
/// logged once with `tracing::warn!` and listed in [`EffectiveIo::fallbacks`].
pub fn open_engine_resolved(
    cfg: &IoConfig,
    files: &[RawFd],
    buffers: Option<&[libc::iovec]>,
) -> Result<(Box<dyn Engine>, EffectiveIo)> {
    cfg.validate()?;
    if cfg.engine == EngineKind::Auto {
        return auto::open_auto(cfg, files, buffers);
    }
    let engine = open_exactly(cfg, files, buffers)?;
    Ok((engine, EffectiveIo::exact(cfg)))
}

/// Opens the explicit engine `cfg` names, as it says.
fn open_exactly(
    cfg: &IoConfig,
    files: &[RawFd],
    buffers: Option<&[libc::iovec]>,
) -> Result<Box<dyn Engine>> {
    if let Some(cpu) = cfg.cpu {
        crate::affinity::pin_current_thread(cpu)?;
    }
    Ok(match cfg.engine {
        EngineKind::Posix => Box::new(PosixEngine::new(files)),
        EngineKind::Libaio => Box::new(LibaioEngine::new(cfg.queue_depth as usize, files)?),
        EngineKind::UringSync | EngineKind::Uring => {
            Box::new(UringEngine::new(cfg, files, buffers)?)
        }
        EngineKind::UringPassthrough => Box::new(PassthroughEngine::new(cfg, files, buffers)?),
        EngineKind::Auto => unreachable!("auto is resolved before an engine is opened"),
    })
}
