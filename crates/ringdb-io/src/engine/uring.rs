//! `uring` and `uring-sync`: io_uring through the `io-uring` crate, with every switch of
//! [`IoConfig`]. This module makes its own `io_uring_enter` calls so that each one is counted
//! and so that a registered ring fd can be used for every entry.

use super::{Engine, EngineStats, IoCompletion, IoRequest, OpKind};
use crate::config::{EngineKind, IoConfig, SetupMode};
use crate::error::{IoError, Result};
use io_uring::{opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{fence, Ordering};

const IORING_ENTER_GETEVENTS: u32 = 1 << 0;
const IORING_ENTER_SQ_WAKEUP: u32 = 1 << 1;
const IORING_ENTER_REGISTERED_RING: u32 = 1 << 4;
const IORING_REGISTER_RING_FDS: u32 = 20;

/// `struct io_uring_rsrc_update` from linux/io_uring.h.
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

pub struct UringEngine {
    ring: IoUring,
    /// The fd (or registered index) passed to `io_uring_enter`, and the flag that says which.
    enter_fd: i32,
    enter_flags: u32,
    files: Vec<RawFd>,
    fixed_files: bool,
    fixed_buffers: bool,
    sqe_flags: squeue::Flags,
    sqpoll: bool,
    iopoll: bool,
    /// `uring-sync`: every push is submitted and waited for at once.
    sync: bool,
    depth: usize,
    in_flight: usize,
    /// Entries written to the SQ but not yet passed to `io_uring_enter`.
    pending: usize,
    stats: EngineStats,
}

impl UringEngine {
    pub fn new(cfg: &IoConfig, files: &[RawFd], buffers: Option<&[libc::iovec]>) -> Result<Self> {
        debug_assert!(cfg.engine.is_uring());
        let sync = cfg.engine == EngineKind::UringSync;
        let depth = cfg.effective_depth() as usize;
        let ring = build_ring(cfg)?;

        if cfg.register_files && !files.is_empty() {
            ring.submitter().register_files(files).map_err(|e| {
                IoError::os("registering files with the ring (--register-files)", e)
            })?;
        }
        if cfg.fixed_buffers {
            let iov = buffers.ok_or_else(|| {
                IoError::InvalidArg("--fixedbufs needs a registered buffer pool".into())
            })?;
            // SAFETY: the caller owns the memory behind `iov` and keeps it alive (and does not
            // free it) for the engine's whole lifetime, as `open_engine` documents.
            unsafe { ring.submitter().register_buffers(iov) }
                .map_err(|e| register_buffers_error(iov, e))?;
        }

        if let Some(cpu) = cfg.cpu {
            // Workers inherit the creator's mask, but say it explicitly: a worker on another
            // core turns every punted request into a cross-core wake-up.
            ring.submitter()
                .register_iowq_aff(&crate::affinity::cpu_set(cpu)?)
                .map_err(|e| IoError::os(format!("pinning io-wq workers to CPU {cpu}"), e))?;
        }
        let (enter_fd, enter_flags) = if cfg.register_ring_fd {
            (register_ring_fd(&ring)?, IORING_ENTER_REGISTERED_RING)
        } else {
            (ring.as_raw_fd(), 0)
        };

        let mut sqe_flags = squeue::Flags::empty();
        if cfg.force_async {
            sqe_flags |= squeue::Flags::ASYNC;
        }
        if cfg.register_files {
            sqe_flags |= squeue::Flags::FIXED_FILE;
        }
        Ok(UringEngine {
            ring,
            enter_fd,
            enter_flags,
            files: files.to_vec(),
            fixed_files: cfg.register_files,
            fixed_buffers: cfg.fixed_buffers,
            sqe_flags,
            sqpoll: cfg.sqpoll.is_some(),
            iopoll: cfg.iopoll,
            sync,
            depth,
            in_flight: 0,
            pending: 0,
            stats: EngineStats::default(),
        })
    }

    fn entry(&self, req: &IoRequest) -> Result<squeue::Entry> {
        if req.op == OpKind::Nop {
            // A NOP names no file, so FIXED_FILE must not be set on it.
            let flags = self.sqe_flags - squeue::Flags::FIXED_FILE;
            return Ok(opcode::Nop::new()
                .build()
                .flags(flags)
                .user_data(req.user_data));
        }
        let idx = req.file.0 as usize;
        let fd = *self.files.get(idx).ok_or_else(|| {
            IoError::InvalidArg(format!("file index {idx} out of {}", self.files.len()))
        })?;
        // One builder call per target kind: the crate's opcodes are generic over Fd and Fixed.
        macro_rules! with_target {
            ($build:expr) => {
                if self.fixed_files {
                    $build(types::Fixed(idx as u32))
                } else {
                    $build(types::Fd(fd))
                }
            };
        }
        let entry = match (
            req.op,
            self.fixed_buffers.then_some(req.buf_index).flatten(),
        ) {
            (OpKind::Read, Some(bi)) => {
                with_target!(|t| opcode::ReadFixed::new(t, req.buf, req.len, bi)
                    .offset(req.offset)
                    .build())
            }
            (OpKind::Write, Some(bi)) => {
                with_target!(|t| opcode::WriteFixed::new(t, req.buf, req.len, bi)
                    .offset(req.offset)
                    .build())
            }
            (OpKind::Read, None) => with_target!(|t| opcode::Read::new(t, req.buf, req.len)
                .offset(req.offset)
                .build()),
            (OpKind::Write, None) => with_target!(|t| opcode::Write::new(t, req.buf, req.len)
                .offset(req.offset)
                .build()),
            (OpKind::Fsync | OpKind::Fdatasync, _) => {
                if self.iopoll {
                    return Err(IoError::Unsupported {
                        switch: "--iopoll",
                        reason: "fsync/fdatasync cannot run on an IOPOLL ring; issue durability syncs on a second ring without --iopoll".into(),
                    });
                }
                let flags = if req.op == OpKind::Fdatasync {
                    types::FsyncFlags::DATASYNC
                } else {
                    types::FsyncFlags::empty()
                };
                with_target!(|t| opcode::Fsync::new(t).flags(flags).build())
            }
            (OpKind::Nop, _) => unreachable!("handled above"),
        };
        Ok(entry.flags(self.sqe_flags).user_data(req.user_data))
    }

    /// One counted `io_uring_enter`. Retries EINTR; EBUSY/EAGAIN mean "reap first" and are
    /// reported to the caller as zero progress.
    fn enter(&mut self, to_submit: u32, min_complete: u32, flags: u32) -> Result<usize> {
        loop {
            // SAFETY: enter_fd is this ring's fd (or its registered index with the matching
            // flag); no argument pointer is passed.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_io_uring_enter,
                    self.enter_fd,
                    to_submit,
                    min_complete,
                    flags | self.enter_flags,
                    std::ptr::null::<libc::c_void>(),
                    0usize,
                )
            };
            self.stats.enters += 1;
            if ret >= 0 {
                return Ok(ret as usize);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EBUSY) | Some(libc::EAGAIN) => return Ok(0),
                _ => return Err(IoError::os("io_uring_enter", err)),
            }
        }
    }

    fn sq_needs_wakeup(&mut self) -> bool {
        // The SeqCst fence pairs with the poller's: without it we could miss that it slept.
        fence(Ordering::SeqCst);
        self.ring.submission().need_wakeup()
    }

    fn cq_ready(&mut self) -> usize {
        self.ring.completion().len()
    }

    /// Whether completions may be waiting in task work that only an enter will run.
    fn taskrun_pending(&mut self) -> bool {
        self.ring.submission().taskrun()
    }
}

fn build_ring(cfg: &IoConfig) -> Result<IoUring> {
    let mut b = IoUring::builder();
    let mut feature = Vec::new();
    match cfg.setup {
        SetupMode::Default => {}
        SetupMode::Coop => {
            b.setup_coop_taskrun().setup_taskrun_flag();
            feature.push("COOP_TASKRUN");
        }
        SetupMode::Defer => {
            b.setup_defer_taskrun()
                .setup_single_issuer()
                .setup_taskrun_flag();
            feature.push("DEFER_TASKRUN|SINGLE_ISSUER");
        }
    }
    if let Some(sq) = cfg.sqpoll {
        b.setup_sqpoll(sq.idle_ms);
        if let Some(cpu) = sq.cpu {
            b.setup_sqpoll_cpu(cpu);
        }
        feature.push("SQPOLL");
    }
    if cfg.iopoll {
        b.setup_iopoll();
        feature.push("IOPOLL");
    }
    let sq_entries = cfg.effective_depth().next_power_of_two().max(2);
    let cq = cfg.cq_size.unwrap_or(2 * sq_entries).max(sq_entries);
    b.setup_cqsize(cq);
    b.build(sq_entries)
        .map_err(|e| setup_error(cfg, &feature, e))
}

fn setup_error(cfg: &IoConfig, feature: &[&str], e: io::Error) -> IoError {
    if e.raw_os_error() == Some(libc::EPERM) {
        if let Some(value) = crate::limits::io_uring_disabled().filter(|v| *v != 0) {
            return IoError::UringDisabled { value };
        }
    }
    if e.raw_os_error() == Some(libc::ENOSYS) {
        return IoError::Unsupported {
            switch: "io_uring",
            reason: "this kernel has no io_uring (ENOSYS); use --engine posix or libaio".into(),
        };
    }
    let hint = match (cfg.sqpoll.is_some(), e.raw_os_error()) {
        (true, Some(libc::EINVAL)) => {
            "check the --sqpoll-cpu value (an online CPU) or drop --sqpoll"
        }
        (_, Some(libc::EINVAL)) => {
            "this kernel does not support that setup flag; run `ringdb probe` to see which work"
        }
        (_, Some(libc::ENOMEM)) => {
            "the ring does not fit the locked-memory limit; raise `ulimit -l` or lower --iodepth"
        }
        _ => "run `ringdb probe` to see which io_uring features work here",
    };
    let feature = if feature.is_empty() {
        format!("{} entries", cfg.effective_depth())
    } else {
        feature.join("+")
    };
    IoError::SetupRefused {
        feature,
        hint,
        source: e,
    }
}

fn register_buffers_error(iov: &[libc::iovec], e: io::Error) -> IoError {
    let bytes: u64 = iov.iter().map(|v| v.iov_len as u64).sum();
    if e.raw_os_error() == Some(libc::ENOMEM) {
        let limit = match crate::limits::memlock_limit().0 {
            Some(b) => format!("{} KiB", b / 1024),
            None => "unlimited".into(),
        };
        return IoError::Memlock { bytes, limit };
    }
    IoError::os(
        format!("registering {bytes} bytes of fixed buffers (--fixedbufs)"),
        e,
    )
}

fn register_ring_fd(ring: &IoUring) -> Result<i32> {
    let mut up = RsrcUpdate {
        offset: u32::MAX, // let the kernel pick a slot
        resv: 0,
        data: ring.as_raw_fd() as u64,
    };
    // SAFETY: `up` is a valid io_uring_rsrc_update for the duration of the call; nr_args = 1.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring.as_raw_fd(),
            IORING_REGISTER_RING_FDS,
            &mut up as *mut RsrcUpdate,
            1u32,
        )
    };
    if ret < 0 {
        return Err(IoError::Unsupported {
            switch: "--register-ring-fd",
            reason: format!(
                "IORING_REGISTER_RING_FDS failed: {}",
                io::Error::last_os_error()
            ),
        });
    }
    Ok(up.offset as i32)
}

impl Engine for UringEngine {
    fn kind(&self) -> EngineKind {
        if self.sync {
            EngineKind::UringSync
        } else {
            EngineKind::Uring
        }
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn pending(&self) -> usize {
        self.pending
    }

    unsafe fn push(&mut self, req: &IoRequest) -> Result<()> {
        if self.in_flight >= self.depth {
            return Err(IoError::InvalidArg(format!(
                "ring full: {} requests in flight (depth {}); reap first",
                self.in_flight, self.depth
            )));
        }
        let entry = self.entry(req)?;
        {
            let mut sq = self.ring.submission();
            // SAFETY: the push contract makes the caller keep the buffer valid until the
            // completion is reaped; the entry holds only that pointer and plain values.
            // The SQ cannot be full: in_flight < depth <= SQ entries.
            unsafe { sq.push(&entry) }
                .map_err(|_| IoError::InvalidArg("submission queue full".into()))?;
        }
        self.in_flight += 1;
        self.pending += 1;
        if self.sync {
            // uring-sync: submit this one request and wait for it.
            self.submit(1)?;
        }
        Ok(())
    }

    fn submit(&mut self, wait_for: usize) -> Result<()> {
        let wait_for = wait_for.min(self.in_flight);
        if self.sqpoll {
            // The poller consumes the SQ by itself; enter only to wake it or to wait.
            let wake = self.pending > 0 && self.sq_needs_wakeup();
            self.stats.submitted += self.pending as u64;
            self.pending = 0;
            let must_wait = wait_for > 0 && self.cq_ready() < wait_for;
            if wake || must_wait {
                let mut flags = 0;
                if wake {
                    flags |= IORING_ENTER_SQ_WAKEUP;
                }
                if must_wait {
                    flags |= IORING_ENTER_GETEVENTS;
                }
                self.enter(0, if must_wait { wait_for as u32 } else { 0 }, flags)?;
            }
            return Ok(());
        }
        let to_submit = self.pending as u32;
        let already = if wait_for > 0 { self.cq_ready() } else { 0 };
        let min_complete = wait_for.saturating_sub(already) as u32;
        if to_submit == 0 && min_complete == 0 {
            return Ok(());
        }
        let mut flags = 0;
        if min_complete > 0 || self.iopoll || self.taskrun_pending() {
            flags |= IORING_ENTER_GETEVENTS;
        }
        let done = self.enter(to_submit, min_complete, flags)?;
        let done = done.min(self.pending);
        self.pending -= done;
        self.stats.submitted += done as u64;
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        if self.in_flight > 0 && self.cq_ready() == 0 {
            // Polled rings post completions only when asked; deferred task work only runs
            // inside an enter. Either way one GETEVENTS enter without waiting brings them.
            let needs_enter = (self.iopoll && !self.sqpoll) || self.taskrun_pending();
            if needs_enter {
                let to_submit = if self.sqpoll { 0 } else { self.pending as u32 };
                if let Ok(done) = self.enter(to_submit, 0, IORING_ENTER_GETEVENTS) {
                    let done = done.min(self.pending);
                    self.pending -= done;
                    self.stats.submitted += done as u64;
                }
            }
        }
        let before = out.len();
        for cqe in &mut self.ring.completion() {
            out.push(IoCompletion {
                user_data: cqe.user_data(),
                result: cqe.result(),
            });
        }
        let n = out.len() - before;
        debug_assert!(
            n <= self.in_flight,
            "more completions than requests in flight"
        );
        self.in_flight -= n.min(self.in_flight);
        if n > 0 {
            self.stats.reaps += 1;
            self.stats.completed += n as u64;
        }
        n
    }

    fn stats(&self) -> EngineStats {
        self.stats
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        // Never let the ring (and with it the caller's buffers) go while the kernel may still
        // write into them.
        let _ = self.drain();
    }
}
