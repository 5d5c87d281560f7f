//! How `durable` issues its writes: one [`Issuer`] per method, run by [`job`] on a fresh
//! thread pinned to one CPU (see the parent module for what each method does and why).
//!
//! The buffer and the file a ring points at outlive it: every issuer is dropped (its ring
//! drained, its helper thread joined) before them, and no call returns before the kernel has
//! completed the requests it pushed.

use super::{Measured, Method, Plan, Point, WARMUP_OPS};
use crate::error::{BenchError, JobFailure, Result};
use crate::micro::qd1::{one_op, run_sampling_workers};
use ringdb_io::{
    open_engine, AlignedBuf, Engine, EngineKind, FileId, IoConfig, IoError, IoRequest, OpKind,
};
use ringdb_io::{Target, TargetOptions};
use ringdb_lab::counters::{rdtsc, ticks_to_ns, LatencyHist};
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

/// `user_data` of the linked pair's two requests.
const UD_WRITE: u64 = 1;
const UD_SYNC: u64 = 2;

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
            .map_err(|e| BenchError::job_spawn("ringdb-durable-sync", e))?;
        Ok(SyncThread {
            tx: Some(tx),
            rx,
            handle: Some(handle),
        })
    }

    /// One `fdatasync` on the helper thread; blocks until it is done.
    fn sync(&self) -> Result<()> {
        let gone = || BenchError::Job {
            thread: "ringdb-durable-sync".into(),
            failure: JobFailure::Gone,
        };
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
                .map_err(|_| BenchError::Internal {
                    what: "the linked ring's SQ is full",
                })?;
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
            return Err(BenchError::ShortTransfer {
                op: "linked write (its fdatasync cancelled)",
                offset,
                transferred_bytes: w as u64,
                requested_bytes: len.into(),
            });
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
    /// The issuer of `method` over `file`, its ring (or helper thread) pinned to `plan.cpu`.
    fn open(plan: &Plan, method: Method, file: &File) -> Result<Issuer> {
        let fd = file.as_raw_fd();
        let engine = || open_engine(&ring_config(plan.cpu), &[fd], None);
        Ok(match method {
            Method::Baseline | Method::Odsync | Method::Osync => Issuer::Engine {
                engine: engine()?,
                sync: None,
            },
            Method::RingFdatasync => Issuer::Engine {
                engine: engine()?,
                sync: Some(OpKind::Fdatasync),
            },
            Method::ThreadFdatasync => {
                let engine = engine()?;
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
                engine: engine()?,
                fd,
            },
            Method::RingLinked => {
                ringdb_io::affinity::pin_current_thread(plan.cpu)?;
                Issuer::Linked(Box::new(LinkedRing::new(fd, plan.cpu)?))
            }
            Method::NvmeFlush => Issuer::Engine {
                engine: open_engine(
                    &IoConfig {
                        // By name, so that this builds with or without the passthrough engine.
                        engine: "uring-passthrough".parse()?,
                        ..ring_config(plan.cpu)
                    },
                    &[fd],
                    None,
                )?,
                // The passthrough engine turns Fdatasync into an NVMe Flush.
                sync: Some(OpKind::Fdatasync),
            },
        })
    }

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
    let file = open_target(plan, method)?;
    let mut buf = AlignedBuf::new(plan.bs as usize);
    for (i, b) in buf.as_mut_slice().iter_mut().enumerate() {
        *b = (i % 251) as u8 ^ 0x5a;
    }
    let mut issuer = Issuer::open(plan, method, &file)?;
    let measured = write_durably(plan, &mut issuer, &mut buf)?;
    drop(issuer);
    drop(buf);
    drop(file);
    Ok(measured)
}

/// The target as `method` writes it: `O_DIRECT` (with `O_DSYNC` or `O_SYNC` for the flag
/// methods), or plain for the passthrough engine, which takes an NVMe char device.
fn open_target(plan: &Plan, method: Method) -> Result<File> {
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
    Ok(match method {
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
    })
}

/// A few unrecorded durable writes, then recorded ones until `plan.ios` writes or
/// `plan.runtime` (at least one). Returns (ops, seconds, latency histogram).
fn write_durably(
    plan: &Plan,
    issuer: &mut Issuer,
    buf: &mut AlignedBuf,
) -> Result<(u64, f64, LatencyHist)> {
    let len = plan.bs as u32;
    for i in 0..WARMUP_OPS.min(plan.ios) {
        issuer.once(buf, len, plan.offset(i), i)?;
    }
    let mut hist = LatencyHist::new();
    let started = Instant::now();
    let mut ops = 0u64;
    while ops < plan.ios && (ops == 0 || started.elapsed() < plan.runtime) {
        let ticks = issuer.once(buf, len, plan.offset(WARMUP_OPS + ops), ops)?;
        hist.record_ns(ticks_to_ns(ticks).max(1));
        ops += 1;
    }
    Ok((ops, started.elapsed().as_secs_f64(), hist))
}

/// Runs `method` on a fresh thread while this thread samples its io-wq workers.
pub(super) fn measure(plan: &Plan, method: Method) -> Result<Measured> {
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
pub(super) fn nvme_point(plan: &Plan) -> Result<Point> {
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
