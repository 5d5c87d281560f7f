//! `uring-passthrough`: NVMe commands straight to the driver through io_uring's `URING_CMD`
//! (`NVME_URING_CMD_IO`) on the NVMe generic char device (`/dev/ngXnY`), bypassing the block
//! layer. Needs a ring with 128-byte SQEs and 32-byte CQEs (Linux 5.19+; registered buffers
//! and IOPOLL with passthrough need 6.1).
//!
//! Requests keep the byte-offset vocabulary of [`Engine`]: an offset and a length that are
//! multiples of the namespace's LBA size become a starting LBA and a block count.
//! `Fsync`/`Fdatasync` become an NVMe Flush, which (unlike `fsync` on an IOPOLL ring) is fully
//! asynchronous. Like `uring.rs`, this module makes its own counted `io_uring_enter` calls.

use super::{Engine, EngineStats, IoCompletion, IoRequest, OpKind};
use crate::config::{EngineKind, IoConfig, SetupMode};
use crate::error::{IoError, Result};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{fence, Ordering};

const IORING_ENTER_GETEVENTS: u32 = 1 << 0;
const IORING_ENTER_SQ_WAKEUP: u32 = 1 << 1;
const IORING_ENTER_REGISTERED_RING: u32 = 1 << 4;
const IORING_REGISTER_RING_FDS: u32 = 20;

/// `_IO('N', 0x40)`: the namespace id behind an NVMe namespace node.
const NVME_IOCTL_ID: libc::c_ulong = 0x4E40;
/// `_IOWR('N', 0x41, struct nvme_passthru_cmd)` (72 bytes).
const NVME_IOCTL_ADMIN_CMD: libc::c_ulong = 0xC048_4E41;
/// `_IOWR('N', 0x80, struct nvme_uring_cmd)` (72 bytes): the `cmd_op` of an NVMe I/O command.
const NVME_URING_CMD_IO: u32 = 0xC048_4E80;

const NVME_CMD_FLUSH: u8 = 0x00;
const NVME_CMD_WRITE: u8 = 0x01;
const NVME_CMD_READ: u8 = 0x02;
const NVME_ADMIN_IDENTIFY: u8 = 0x06;
/// Identify CNS 0: the namespace data structure (4096 bytes).
const NVME_ID_CNS_NS: u32 = 0x00;
/// A Read or Write moves at most 65536 logical blocks (NLB is a 16-bit, 0-based count).
const MAX_BLOCKS_PER_CMD: u64 = 1 << 16;

/// `struct nvme_uring_cmd` and `struct nvme_passthru_cmd` from linux/nvme_ioctl.h; they share
/// this layout (the admin ioctl's last word is `result`, the uring command's is reserved).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct NvmeCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

const _: () = assert!(std::mem::size_of::<NvmeCmd>() == 72);

impl NvmeCmd {
    fn to_bytes(self) -> [u8; 80] {
        let mut out = [0u8; 80];
        // SAFETY: NvmeCmd is repr(C), 72 bytes of plain integers without padding, so every
        // byte is initialised; it fits in the 80-byte command area.
        let bytes: [u8; 72] = unsafe { std::mem::transmute(self) };
        out[..72].copy_from_slice(&bytes);
        out
    }
}

/// An NVMe namespace as its generic char device reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvmeGeometry {
    pub nsid: u32,
    /// Logical block (LBA) size in bytes of the namespace's current format.
    pub lba_size: u32,
    /// Namespace size in logical blocks (`NSZE`).
    pub lba_count: u64,
}

impl NvmeGeometry {
    pub fn capacity(&self) -> u64 {
        self.lba_count.saturating_mul(self.lba_size as u64)
    }
}

fn fd_path(fd: RawFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_else(|_| format!("fd {fd}").into())
}

fn not_nvme_char(what: String) -> IoError {
    IoError::Unsupported {
        switch: "--engine uring-passthrough",
        reason: format!(
            "{what}; NVMe passthrough needs an NVMe generic char device: use /dev/ngXnY"
        ),
    }
}

/// Reads the geometry of the NVMe namespace open as `fd` (`NVME_IOCTL_ID`, then an admin
/// Identify Namespace). Refuses, with a typed one-line error, anything that is not an NVMe
/// generic char device (including the namespace's block device).
pub fn nvme_geometry(fd: RawFd) -> Result<NvmeGeometry> {
    let path = fd_path(fd);
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: st is writable memory for one `struct stat`; a bad fd only fails with EBADF.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Err(IoError::os(
            format!("fstat {}", path.display()),
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fstat succeeded and filled the struct (zeroed before in any case).
    let mode = unsafe { st.assume_init() }.st_mode & libc::S_IFMT;
    if mode == libc::S_IFBLK {
        return Err(not_nvme_char(format!(
            "{} is a block device, not a char device",
            path.display()
        )));
    }
    if mode != libc::S_IFCHR {
        return Err(not_nvme_char(format!("{} is not a device", path.display())));
    }
    // SAFETY: NVME_IOCTL_ID takes no argument; other drivers answer ENOTTY or EINVAL.
    let nsid = unsafe { libc::ioctl(fd, NVME_IOCTL_ID as _) };
    if nsid <= 0 {
        return Err(not_nvme_char(format!(
            "{} is not an NVMe namespace ({})",
            path.display(),
            io::Error::last_os_error()
        )));
    }
    let nsid = nsid as u32;
    let mut id = crate::buf::AlignedBuf::new(4096);
    let mut cmd = NvmeCmd {
        opcode: NVME_ADMIN_IDENTIFY,
        nsid,
        addr: id.as_mut_ptr() as u64,
        data_len: 4096,
        cdw10: NVME_ID_CNS_NS,
        ..NvmeCmd::default()
    };
    // SAFETY: cmd is a valid nvme_passthru_cmd; the ioctl is synchronous and writes at most
    // data_len (4096) bytes into `id`, which is 4096 bytes long and outlives the call.
    let ret = unsafe { libc::ioctl(fd, NVME_IOCTL_ADMIN_CMD as _, &mut cmd as *mut NvmeCmd) };
    if ret != 0 {
        let why = if ret < 0 {
            io::Error::last_os_error().to_string()
        } else {
            format!("NVMe status {ret:#x}")
        };
        return Err(IoError::os(
            format!("identify namespace {nsid} on {}", path.display()),
            io::Error::other(why),
        ));
    }
    parse_identify_ns(nsid, id.as_slice()).ok_or_else(|| {
        IoError::InvalidArg(format!(
            "{}: identify namespace {nsid} reports no usable LBA format",
            path.display()
        ))
    })
}

/// NSZE (bytes 0..8), FLBAS (byte 26) and the LBA format table (from byte 128) of an Identify
/// Namespace structure.
fn parse_identify_ns(nsid: u32, id: &[u8]) -> Option<NvmeGeometry> {
    let nsze = u64::from_le_bytes(id.get(0..8)?.try_into().ok()?);
    let flbas = *id.get(26)?;
    // Bits 3:0 pick the format; bits 6:5 extend the index beyond 16 formats.
    let index = (flbas & 0x0f) as usize | (((flbas >> 5) & 0x03) as usize) << 4;
    let lbads = *id.get(128 + 4 * index + 2)?;
    if !(9..=16).contains(&lbads) || nsze == 0 {
        return None;
    }
    Some(NvmeGeometry {
        nsid,
        lba_size: 1 << lbads,
        lba_count: nsze,
    })
}

/// What the engine remembers about a request between push and completion.
#[derive(Clone, Copy)]
struct Slot {
    user_data: u64,
    /// Bytes a successful read or write moved (0 for flush and nop).
    bytes: u32,
}

pub struct PassthroughEngine {
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    enter_fd: i32,
    enter_flags: u32,
    files: Vec<RawFd>,
    geometry: Vec<NvmeGeometry>,
    fixed_files: bool,
    fixed_buffers: bool,
    sqe_flags: squeue::Flags,
    sqpoll: bool,
    iopoll: bool,
    depth: usize,
    in_flight: usize,
    pending: usize,
    /// Requests in flight, indexed by the SQE's user_data; `free` lists the unused indexes.
    slots: Vec<Slot>,
    free: Vec<u32>,
    stats: EngineStats,
}

impl PassthroughEngine {
    pub fn new(cfg: &IoConfig, files: &[RawFd], buffers: Option<&[libc::iovec]>) -> Result<Self> {
        debug_assert_eq!(cfg.engine, EngineKind::UringPassthrough);
        // Refuse a wrong target before any ring exists.
        let geometry = files
            .iter()
            .map(|&fd| nvme_geometry(fd))
            .collect::<Result<Vec<_>>>()?;
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
            unsafe { ring.submitter().register_buffers(iov) }.map_err(|e| {
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
            })?;
        }
        if let Some(cpu) = cfg.cpu {
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
        Ok(PassthroughEngine {
            ring,
            enter_fd,
            enter_flags,
            files: files.to_vec(),
            geometry,
            fixed_files: cfg.register_files,
            fixed_buffers: cfg.fixed_buffers,
            sqe_flags,
            sqpoll: cfg.sqpoll.is_some(),
            iopoll: cfg.iopoll,
            depth,
            in_flight: 0,
            pending: 0,
            slots: vec![
                Slot {
                    user_data: 0,
                    bytes: 0
                };
                depth
            ],
            free: (0..depth as u32).rev().collect(),
            stats: EngineStats::default(),
        })
    }

    /// The namespace geometry of file `idx` of this engine.
    pub fn geometry(&self, idx: usize) -> Option<NvmeGeometry> {
        self.geometry.get(idx).copied()
    }

    /// The SQE for `req`, tagged with `slot`; also the bytes a success moves.
    fn entry(&self, req: &IoRequest, slot: u32) -> Result<(squeue::Entry128, u32)> {
        if req.op == OpKind::Nop {
            let flags = self.sqe_flags - squeue::Flags::FIXED_FILE;
            let e = opcode::Nop::new()
                .build()
                .flags(flags)
                .user_data(slot as u64);
            return Ok((e.into(), 0));
        }
        let idx = req.file.0 as usize;
        let (fd, geo) = match (self.files.get(idx), self.geometry.get(idx)) {
            (Some(fd), Some(geo)) => (*fd, *geo),
            _ => {
                return Err(IoError::InvalidArg(format!(
                    "file index {idx} out of {}",
                    self.files.len()
                )))
            }
        };
        let mut cmd = NvmeCmd {
            nsid: geo.nsid,
            ..NvmeCmd::default()
        };
        let mut bytes = 0;
        let mut buf_index = None;
        match req.op {
            OpKind::Read | OpKind::Write => {
                let lba = geo.lba_size as u64;
                if !req.offset.is_multiple_of(lba) {
                    return Err(IoError::Misaligned {
                        what: "offset",
                        value: req.offset,
                        block: geo.lba_size,
                    });
                }
                if req.len == 0 || !(req.len as u64).is_multiple_of(lba) {
                    return Err(IoError::Misaligned {
                        what: "length",
                        value: req.len as u64,
                        block: geo.lba_size,
                    });
                }
                let slba = req.offset / lba;
                let nlb = req.len as u64 / lba;
                if nlb > MAX_BLOCKS_PER_CMD || slba + nlb > geo.lba_count {
                    return Err(IoError::InvalidArg(format!(
                        "{} of {} bytes at offset {} is beyond the namespace ({} blocks of {}) or longer than 65536 blocks",
                        req.op.name(),
                        req.len,
                        req.offset,
                        geo.lba_count,
                        geo.lba_size
                    )));
                }
                cmd.opcode = if req.op == OpKind::Read {
                    NVME_CMD_READ
                } else {
                    NVME_CMD_WRITE
                };
                cmd.addr = req.buf as u64;
                cmd.data_len = req.len;
                cmd.cdw10 = slba as u32;
                cmd.cdw11 = (slba >> 32) as u32;
                cmd.cdw12 = (nlb - 1) as u32;
                bytes = req.len;
                if self.fixed_buffers {
                    buf_index = req.buf_index;
                }
            }
            OpKind::Fsync | OpKind::Fdatasync => cmd.opcode = NVME_CMD_FLUSH,
            OpKind::Nop => unreachable!("handled above"),
        }
        let build = |b: opcode::UringCmd80| {
            b.cmd(cmd.to_bytes())
                .buf_index(buf_index)
                .build()
                .flags(self.sqe_flags)
                .user_data(slot as u64)
        };
        let e = if self.fixed_files {
            build(opcode::UringCmd80::new(
                types::Fixed(idx as u32),
                NVME_URING_CMD_IO,
            ))
        } else {
            build(opcode::UringCmd80::new(types::Fd(fd), NVME_URING_CMD_IO))
        };
        Ok((e, bytes))
    }

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

    fn taskrun_pending(&mut self) -> bool {
        self.ring.submission().taskrun()
    }
}

fn build_ring(cfg: &IoConfig) -> Result<IoUring<squeue::Entry128, cqueue::Entry32>> {
    let mut b = IoUring::<squeue::Entry128, cqueue::Entry32>::builder();
    let mut feature = vec!["SQE128|CQE32"];
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
        .map_err(|e| setup_error(&feature.join("+"), e))
}

/// The typed refusal for a ring the kernel would not build.
fn setup_error(feature: &str, e: io::Error) -> IoError {
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
    let hint = match e.raw_os_error() {
        Some(libc::EINVAL) => {
            "NVMe passthrough needs SQE128/CQE32 rings (Linux 5.19+); run `ringdb probe` to see which setup flags work, or use --engine uring on /dev/nvmeXnY"
        }
        Some(libc::ENOMEM) => {
            "the ring does not fit the locked-memory limit; raise `ulimit -l` or lower --iodepth"
        }
        _ => "run `ringdb probe` to see which io_uring features work here",
    };
    IoError::SetupRefused {
        feature: feature.to_string(),
        hint,
        source: e,
    }
}

fn register_ring_fd(ring: &IoUring<squeue::Entry128, cqueue::Entry32>) -> Result<i32> {
    #[repr(C)]
    struct RsrcUpdate {
        offset: u32,
        resv: u32,
        data: u64,
    }
    let mut up = RsrcUpdate {
        offset: u32::MAX,
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

impl Engine for PassthroughEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::UringPassthrough
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
        let Some(&slot) = self.free.last() else {
            return Err(IoError::InvalidArg(format!(
                "ring full: {} requests in flight (depth {}); reap first",
                self.in_flight, self.depth
            )));
        };
        let (entry, bytes) = self.entry(req, slot)?;
        {
            let mut sq = self.ring.submission();
            // SAFETY: the push contract makes the caller keep the buffer valid until the
            // completion is reaped; the command holds only that pointer and plain values.
            // The SQ cannot be full: in_flight < depth <= SQ entries.
            unsafe { sq.push(&entry) }
                .map_err(|_| IoError::InvalidArg("submission queue full".into()))?;
        }
        self.free.pop();
        self.slots[slot as usize] = Slot {
            user_data: req.user_data,
            bytes,
        };
        self.in_flight += 1;
        self.pending += 1;
        Ok(())
    }

    fn submit(&mut self, wait_for: usize) -> Result<()> {
        let wait_for = wait_for.min(self.in_flight);
        if self.sqpoll {
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
        let mut done = Vec::new();
        for cqe in &mut self.ring.completion() {
            done.push((cqe.user_data(), cqe.result()));
        }
        for (slot, res) in done {
            let Some(s) = self.slots.get(slot as usize).copied() else {
                debug_assert!(false, "completion for unknown slot {slot}");
                continue;
            };
            self.free.push(slot as u32);
            // Negative: an errno from the kernel; positive: an NVMe status code.
            let result = match res {
                0 => s.bytes as i32,
                r if r < 0 => r,
                _ => -libc::EIO,
            };
            out.push(IoCompletion {
                user_data: s.user_data,
                result,
            });
        }
        let n = out.len() - before;
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

impl Drop for PassthroughEngine {
    fn drop(&mut self) {
        // Never let the ring (and with it the caller's buffers) go while the device may still
        // write into them.
        let _ = self.drain();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identify_namespace_parsing() {
        let mut id = vec![0u8; 4096];
        id[0..8].copy_from_slice(&(1u64 << 20).to_le_bytes());
        // Format 1 is current: 4 KiB blocks; format 0 is 512 bytes.
        id[26] = 1;
        id[128 + 2] = 9;
        id[128 + 4 + 2] = 12;
        let g = parse_identify_ns(1, &id).unwrap();
        assert_eq!(g.lba_size, 4096);
        assert_eq!(g.lba_count, 1 << 20);
        assert_eq!(g.capacity(), 4u64 << 30);
        id[26] = 0;
        assert_eq!(parse_identify_ns(1, &id).unwrap().lba_size, 512);
        id[128 + 2] = 0;
        assert!(parse_identify_ns(1, &id).is_none());
        assert!(parse_identify_ns(1, &id[..100]).is_none());
    }

    #[test]
    fn commands_have_the_kernel_layout() {
        let c = NvmeCmd {
            opcode: NVME_CMD_READ,
            nsid: 7,
            addr: 0x1122,
            data_len: 4096,
            cdw10: 5,
            cdw12: 0,
            ..NvmeCmd::default()
        };
        let b = c.to_bytes();
        assert_eq!(b[0], NVME_CMD_READ);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), 0x1122);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), 4096);
        assert_eq!(u32::from_le_bytes(b[40..44].try_into().unwrap()), 5);
    }

    #[test]
    fn sqe128_refusal_is_typed_and_says_why() {
        let e = setup_error("SQE128|CQE32", io::Error::from_raw_os_error(libc::EINVAL));
        assert!(matches!(e, IoError::SetupRefused { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("SQE128") && msg.contains("5.19"), "{msg}");
        assert!(!msg.contains('\n'));
    }
}
