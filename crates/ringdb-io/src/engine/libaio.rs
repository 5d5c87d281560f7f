//! `libaio`: Linux AIO through the raw `io_setup`/`io_submit`/`io_getevents`/`io_destroy`
//! syscalls; the libaio C library is not used.
//!
//! `push` fills one of `depth` preallocated `iocb` slots and queues a pointer to it; `submit`
//! hands the queue to the kernel with `io_submit` (several calls when the kernel takes only part
//! of it) and, when asked to wait, blocks in `io_getevents`; `reap` hands out what was collected.
//! The slot index travels in `aio_data` and comes back in `io_event.data`.
//!
//! Kernel AIO has no working no-op command, so [`OpKind::Nop`] completes in user space during
//! `submit`, without a syscall. Kernel AIO is only asynchronous on O_DIRECT files: on buffered
//! files `io_submit` performs the I/O before it returns.

mod doorbell;

use super::doorbell::{DoorbellWakes, DOORBELL_POLL};
use super::{Engine, EngineStats, IoCompletion, IoRequest, OpKind};
use crate::config::{EngineKind, MAX_QUEUE_DEPTH};
use crate::error::{IoError, Result, Setting, Switch};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

/// `aio_context_t` of linux/aio_abi.h.
type AioContext = libc::c_ulong;

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
const IOCB_CMD_FSYNC: u16 = 2;
const IOCB_CMD_FDSYNC: u16 = 3;
/// Defined by aio_abi.h but refused by the kernel (`EINVAL`). Marks a slot that holds an
/// [`OpKind::Nop`]; such a slot is completed in user space and never handed to `io_submit`.
const IOCB_CMD_NOOP: u16 = 6;

/// `struct iocb` of linux/aio_abi.h (64 bytes). `aio_key` and `aio_rw_flags` share one 64-bit
/// word whose halves swap with the byte order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Iocb {
    /// Returned unchanged in `io_event.data`: the slot index.
    aio_data: u64,
    #[cfg(target_endian = "little")]
    aio_key: u32,
    aio_rw_flags: i32,
    #[cfg(target_endian = "big")]
    aio_key: u32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// `struct io_event` of linux/aio_abi.h (32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct IoEvent {
    /// `aio_data` of the iocb.
    data: u64,
    /// Address of the iocb.
    obj: u64,
    /// Bytes transferred, or a negative errno.
    res: i64,
    res2: i64,
}

const _: () = {
    assert!(std::mem::size_of::<Iocb>() == 64);
    assert!(std::mem::offset_of!(Iocb, aio_lio_opcode) == 16);
    assert!(std::mem::offset_of!(Iocb, aio_fildes) == 20);
    assert!(std::mem::offset_of!(Iocb, aio_buf) == 24);
    assert!(std::mem::offset_of!(Iocb, aio_offset) == 40);
    assert!(std::mem::offset_of!(Iocb, aio_reserved2) == 48);
    assert!(std::mem::offset_of!(Iocb, aio_resfd) == 60);
    assert!(std::mem::size_of::<IoEvent>() == 32);
};

/// The `libaio` engine: Linux AIO through raw `io_setup`/`io_submit`/`io_getevents` calls.
pub struct LibaioEngine {
    ctx: AioContext,
    files: Vec<RawFd>,
    /// One iocb per slot, at a stable address for the engine's lifetime. `UnsafeCell` because
    /// the kernel reads each queued iocb (and writes its `aio_key`) through the raw pointer in
    /// `pending` while `io_submit` runs.
    slots: Box<[UnsafeCell<Iocb>]>,
    /// `user_data` of the request in each slot.
    user_data: Box<[u64]>,
    /// Slots not holding a request that is pending or in the kernel.
    free: Vec<u32>,
    /// Pushed and not yet handed to the kernel, in push order.
    pending: Vec<*mut Iocb>,
    /// Handed to the kernel and not yet collected by `io_getevents`.
    in_kernel: usize,
    /// `io_getevents` writes here.
    events: Box<[IoEvent]>,
    /// Collected completions waiting for `reap`.
    ready: VecDeque<IoCompletion>,
    stats: EngineStats,
    /// The doorbell's poll of an eventfd (see `libaio/doorbell.rs`), never counted in flight.
    doorbell: doorbell::AioDoorbell,
}

impl LibaioEngine {
    /// Creates an AIO context for `depth` requests in flight over `files`.
    pub fn new(depth: usize, files: &[RawFd]) -> Result<Self> {
        if depth == 0 || depth > MAX_QUEUE_DEPTH as usize {
            return Err(IoError::OutOfRange {
                setting: Setting::QueueDepth,
                value: depth as u64,
                min: 1,
                max: MAX_QUEUE_DEPTH as u64,
            });
        }
        let mut ctx: AioContext = 0;
        // SAFETY: io_setup writes one aio_context_t through the pointer, which is valid, and
        // reads it first: it must be zero, as it is. One event more than the depth: the
        // doorbell's poll.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_io_setup,
                (depth + 1) as libc::c_long,
                &mut ctx as *mut AioContext,
            )
        };
        if ret < 0 {
            let err = io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EAGAIN) => IoError::Unsupported {
                    switch: Switch::Libaio,
                    reason: aio_limit_reason(depth),
                },
                Some(libc::ENOSYS) => IoError::Unsupported {
                    switch: Switch::Libaio,
                    reason: "io_setup is not available (kernel built without CONFIG_AIO, or the \
                             syscall is blocked by a seccomp filter); use the posix or uring \
                             engine"
                        .into(),
                },
                _ => IoError::os(format!("io_setup({depth}) for the libaio engine"), err),
            });
        }
        Ok(LibaioEngine {
            ctx,
            files: files.to_vec(),
            slots: (0..depth)
                .map(|_| UnsafeCell::new(Iocb::default()))
                .collect(),
            user_data: vec![0; depth].into_boxed_slice(),
            // Reversed so that slot 0 is used first.
            free: (0..depth as u32).rev().collect(),
            pending: Vec::with_capacity(depth),
            in_kernel: 0,
            events: vec![IoEvent::default(); depth + 1].into_boxed_slice(),
            ready: VecDeque::with_capacity(depth),
            stats: EngineStats::default(),
            doorbell: doorbell::AioDoorbell::default(),
        })
    }

    fn fd(&self, req: &IoRequest) -> Result<RawFd> {
        self.files.get(req.file.0 as usize).copied().ok_or({
            IoError::NoSuchFile {
                index: req.file.0,
                files: self.files.len(),
            }
        })
    }

    /// Moves the request in `slot` to the ready queue with `result` and frees the slot.
    fn complete_slot(&mut self, slot: usize, result: i32) {
        if let Some(&user_data) = self.user_data.get(slot) {
            self.ready.push_back(IoCompletion { user_data, result });
            self.free.push(slot as u32);
        }
    }

    /// Completes every pending [`OpKind::Nop`] in user space; the others stay pending, in order.
    fn complete_nops(&mut self) {
        let mut kept = 0;
        for i in 0..self.pending.len() {
            let iocb = self.pending[i];
            // SAFETY: pending pointers point into `self.slots`, which lives as long as self; the
            // kernel has not seen this iocb yet, so nothing writes it concurrently.
            let (opcode, slot) = unsafe { ((*iocb).aio_lio_opcode, (*iocb).aio_data) };
            if opcode == IOCB_CMD_NOOP {
                self.stats.submitted += 1;
                self.complete_slot(slot as usize, 0);
            } else {
                self.pending[kept] = iocb;
                kept += 1;
            }
        }
        self.pending.truncate(kept);
    }

    /// One `io_getevents(min, depth, timeout)`: collects what it returns into the ready queue.
    /// `timeout` `None` blocks until `min` events are there.
    fn get_events(&mut self, min: usize, timeout: Option<&libc::timespec>) -> io::Result<usize> {
        let timeout = timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `events` is valid for `events.len()` io_events, the most the call may write;
        // `timeout` is null or points to a live timespec; `ctx` came from io_setup.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.ctx,
                min as libc::c_long,
                self.events.len() as libc::c_long,
                self.events.as_mut_ptr(),
                timeout,
            )
        };
        self.stats.enters += 1;
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = (ret as usize).min(self.events.len());
        let mut requests = 0;
        for i in 0..n {
            let ev = self.events[i];
            if ev.data == DOORBELL_POLL {
                self.complete_doorbell_poll(ev.res);
                continue;
            }
            requests += 1;
            self.in_kernel = self.in_kernel.saturating_sub(1);
            // res is at most MAX_RW_COUNT bytes or a negative errno; saturate anything else.
            let result =
                i32::try_from(ev.res).unwrap_or(if ev.res < 0 { -libc::EIO } else { i32::MAX });
            self.complete_slot(ev.data as usize, result);
        }
        Ok(requests)
    }

    /// Blocks until at least `min` more events have been collected (`min <= in_kernel`), or,
    /// while the doorbell's poll is armed, until it fires.
    fn wait_events(&mut self, min: usize) -> Result<()> {
        let mut need = min.min(self.in_kernel);
        self.doorbell.fired = false;
        while need > 0 && !self.doorbell.fired {
            // The poll's event counts toward io_getevents' minimum: ask for one at a time.
            let at_least = if self.doorbell.poll_armed { 1 } else { need };
            match self.get_events(at_least, None) {
                Ok(n) => need = need.saturating_sub(n),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(IoError::os("io_getevents (libaio engine)", e)),
            }
        }
        Ok(())
    }

    /// Hands every pending iocb to the kernel.
    fn submit_pending(&mut self) -> Result<()> {
        let mut done = 0;
        while done < self.pending.len() {
            let rest = &mut self.pending[done..];
            let nr = rest.len();
            // SAFETY: `rest` is an array of `nr` pointers to fully initialised iocbs in
            // `self.slots`; the kernel reads them (and writes their aio_key) during the call only.
            // Their buffers are valid until reaped by the push contract.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    self.ctx,
                    nr as libc::c_long,
                    rest.as_mut_ptr(),
                )
            };
            self.stats.enters += 1;
            if ret > 0 {
                let n = (ret as usize).min(nr);
                done += n;
                self.in_kernel += n;
                self.stats.submitted += n as u64;
                continue;
            }
            let errno = if ret == 0 {
                libc::EAGAIN
            } else {
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO)
            };
            if errno == libc::EAGAIN && self.in_kernel > 0 {
                // The context is out of request slots: make room, then try again.
                self.wait_events(1)?;
                continue;
            }
            // The first iocb was refused (bad fd, bad arguments, ...): that request fails
            // alone, with the errno as its result.
            let iocb = self.pending[done];
            // SAFETY: points into `self.slots`; the kernel refused it and holds no reference.
            let slot = unsafe { (*iocb).aio_data };
            self.stats.submitted += 1;
            self.complete_slot(slot as usize, -errno);
            done += 1;
        }
        self.pending.clear();
        Ok(())
    }
}

/// The reason given when `io_setup` fails with EAGAIN.
fn aio_limit_reason(depth: usize) -> String {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/fs/{name}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    format!(
        "io_setup({depth}) failed with EAGAIN: the system-wide limit on AIO events \
         fs.aio-max-nr = {} would be exceeded (fs.aio-nr = {} already in use); raise it as root \
         with `sysctl -w fs.aio-max-nr=1048576`, or lower the queue depth or the thread count",
        read("aio-max-nr"),
        read("aio-nr"),
    )
}

impl Engine for LibaioEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Libaio
    }

    fn depth(&self) -> usize {
        self.slots.len()
    }

    fn in_flight(&self) -> usize {
        self.pending.len() + self.in_kernel + self.ready.len()
    }

    fn pending(&self) -> usize {
        self.pending.len()
    }

    unsafe fn push(&mut self, req: &IoRequest) -> Result<()> {
        if self.in_flight() >= self.depth() {
            return Err(IoError::QueueFull {
                engine: EngineKind::Libaio,
                in_flight: self.in_flight(),
                depth: self.depth(),
            });
        }
        let (opcode, fd) = match req.op {
            OpKind::PollIn => return Err(super::poll_refused(self.kind())),
            OpKind::Read => (IOCB_CMD_PREAD, self.fd(req)?),
            OpKind::Write => (IOCB_CMD_PWRITE, self.fd(req)?),
            OpKind::Fsync => (IOCB_CMD_FSYNC, self.fd(req)?),
            OpKind::Fdatasync => (IOCB_CMD_FDSYNC, self.fd(req)?),
            OpKind::Nop => (IOCB_CMD_NOOP, -1),
        };
        let Some(slot) = self.free.pop() else {
            // Unreachable: every used slot is pending or in the kernel, both counted above.
            return Err(IoError::QueueFull {
                engine: EngineKind::Libaio,
                in_flight: self.in_flight(),
                depth: self.depth(),
            });
        };
        let rw = matches!(req.op, OpKind::Read | OpKind::Write);
        let iocb = Iocb {
            aio_data: u64::from(slot),
            aio_lio_opcode: opcode,
            aio_fildes: fd as u32,
            // The kernel refuses fsync iocbs with a buffer, length or offset.
            aio_buf: if rw { req.buf as usize as u64 } else { 0 },
            aio_nbytes: if rw { u64::from(req.len) } else { 0 },
            aio_offset: if rw { req.offset as i64 } else { 0 },
            ..Iocb::default()
        };
        let cell = &self.slots[slot as usize];
        // SAFETY: the slot was free: no pending pointer refers to it and the kernel holds no
        // copy in progress (it only reads iocbs during io_submit), so this write is exclusive.
        unsafe { *cell.get() = iocb };
        self.user_data[slot as usize] = req.user_data;
        self.pending.push(cell.get());
        Ok(())
    }

    fn submit(&mut self, wait_for: usize) -> Result<()> {
        self.complete_nops();
        self.submit_pending()?;
        // Waiting for more than can ever complete would block forever: wait for all instead.
        if wait_for > self.ready.len() {
            self.arm_doorbell_poll()?;
            self.wait_events(wait_for - self.ready.len())?;
        }
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        if self.ready.is_empty() && self.in_kernel > 0 {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // Errors (EINTR) only mean nothing was collected this time; reap cannot fail.
            let _ = self.get_events(0, Some(&zero));
        }
        super::deliver_ready(&mut self.ready, out, &mut self.stats)
    }

    fn stats(&self) -> EngineStats {
        self.stats
    }

    fn watch_doorbell(&mut self, eventfd: Option<Arc<OwnedFd>>) -> bool {
        self.watch_eventfd(eventfd)
    }

    fn wait_for_doorbell(&mut self, eventfd: &Arc<OwnedFd>) -> Result<DoorbellWakes> {
        debug_assert_eq!(
            self.in_flight(),
            0,
            "a doorbell sleep with requests in flight"
        );
        self.sleep_for_doorbell(eventfd)
    }

    fn take_doorbell_wakes(&mut self) -> DoorbellWakes {
        std::mem::take(&mut self.doorbell.wakes)
    }
}

impl Drop for LibaioEngine {
    fn drop(&mut self) {
        // Buffers must not be released while the kernel may still write into them. The
        // doorbell stops first, so no ring wakes the drain's waits.
        self.doorbell.eventfd = None;
        let _ = self.drain();
        // SAFETY: `ctx` came from io_setup and is destroyed once, here. io_destroy also waits
        // for any request the drain could not collect before it returns, so neither the iocbs
        // nor the callers' buffers are released under the kernel. It also cancels the
        // doorbell's poll if one is armed (a poll names no memory).
        unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::FileId;
    use crate::AlignedBuf;
    use std::fs::{File, OpenOptions};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};

    const BLOCK: usize = 4096;

    /// A temporary file, opened O_DIRECT where the filesystem allows it; removed on drop.
    struct TempFile {
        file: File,
        path: PathBuf,
        direct: bool,
    }

    impl TempFile {
        fn new(tag: &str) -> TempFile {
            static SEQ: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "ringdb-libaio-{tag}-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            let open = |flags| {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .custom_flags(flags)
                    .open(&path)
            };
            let (file, direct) = match open(libc::O_DIRECT) {
                Ok(f) => (f, true),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    let _ = std::fs::remove_file(&path);
                    (open(0).expect("create temp file"), false)
                }
                Err(e) => panic!("create {}: {e}", path.display()),
            };
            TempFile { file, path, direct }
        }

        fn fd(&self) -> RawFd {
            self.file.as_raw_fd()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// The engine, or `None` (test skipped) where this kernel or sandbox has no Linux AIO.
    fn engine(depth: usize, files: &[RawFd]) -> Option<LibaioEngine> {
        match LibaioEngine::new(depth, files) {
            Ok(e) => Some(e),
            Err(e @ IoError::Unsupported { .. }) => {
                eprintln!("skipped: {e}");
                None
            }
            Err(e) => panic!("LibaioEngine::new: {e}"),
        }
    }

    fn pattern(block: usize, i: usize) -> u8 {
        (block.wrapping_mul(131) ^ i.wrapping_mul(7) ^ (i >> 8)) as u8
    }

    /// Pushes `reqs` keeping at most the engine's depth in flight; returns the completions.
    fn run_all(eng: &mut LibaioEngine, reqs: &[IoRequest]) -> Vec<IoCompletion> {
        let mut done = Vec::new();
        let mut next = 0;
        while done.len() < reqs.len() {
            while next < reqs.len() && eng.in_flight() < eng.depth() {
                // SAFETY: every buffer outlives the engine run (owned by the caller).
                unsafe { eng.push(&reqs[next]) }.expect("push");
                next += 1;
            }
            eng.submit(1).expect("submit");
            eng.reap(&mut done);
        }
        assert_eq!(eng.in_flight(), 0);
        done
    }

    /// `blocks` buffers of one block, each filled with its block's pattern.
    fn patterned_blocks(blocks: usize) -> Vec<AlignedBuf> {
        (0..blocks)
            .map(|b| {
                let mut buf = AlignedBuf::new(BLOCK);
                for (i, byte) in buf.as_mut_slice().iter_mut().enumerate() {
                    *byte = pattern(b, i);
                }
                buf
            })
            .collect()
    }

    /// One request of `op` per buffer, buffer `b` at block `b` with user data
    /// `first_user_data + b`.
    fn block_requests(op: OpKind, bufs: &mut [AlignedBuf], first_user_data: u64) -> Vec<IoRequest> {
        bufs.iter_mut()
            .enumerate()
            .map(|(b, buf)| {
                let off = (b * BLOCK) as u64;
                let request = IoRequest::read(
                    FileId(0),
                    off,
                    buf.as_mut_ptr(),
                    BLOCK as u32,
                    first_user_data + b as u64,
                );
                IoRequest { op, ..request }
            })
            .collect()
    }

    /// Asserts that `done` holds one whole-block completion per user data from
    /// `first_user_data`, in any order.
    fn assert_whole_blocks(
        what: &str,
        mut done: Vec<IoCompletion>,
        blocks: usize,
        first_user_data: u64,
    ) {
        done.sort_by_key(|c| c.user_data);
        let want: Vec<IoCompletion> = (0..blocks)
            .map(|b| IoCompletion {
                user_data: first_user_data + b as u64,
                result: BLOCK as i32,
            })
            .collect();
        assert_eq!(done, want, "{what}");
    }

    #[test]
    fn libaio_write_read_back_64_blocks_qd16() {
        let tmp = TempFile::new("rw");
        let Some(mut eng) = engine(16, &[tmp.fd()]) else {
            return;
        };
        let blocks = 64;
        let mut wbufs = patterned_blocks(blocks);
        let writes = block_requests(OpKind::Write, &mut wbufs, 0);
        let done = run_all(&mut eng, &writes);
        let what = format!("writes (O_DIRECT: {})", tmp.direct);
        assert_whole_blocks(&what, done, blocks, 0);

        let sync = run_all(
            &mut eng,
            &[IoRequest::sync(OpKind::Fdatasync, FileId(0), 999)],
        );
        assert_eq!(
            sync,
            [IoCompletion {
                user_data: 999,
                result: 0
            }]
        );

        let mut rbufs: Vec<AlignedBuf> = (0..blocks).map(|_| AlignedBuf::new(BLOCK)).collect();
        // Read in reverse order so that completions do not simply mirror the writes.
        let mut reads = block_requests(OpKind::Read, &mut rbufs, 1000);
        reads.reverse();
        assert_whole_blocks("reads", run_all(&mut eng, &reads), blocks, 1000);
        for b in 0..blocks {
            assert!(
                rbufs[b].as_slice() == wbufs[b].as_slice(),
                "block {b} read back differs from what was written"
            );
        }

        let st = eng.stats();
        let requests = 2 * blocks as u64 + 1;
        assert_eq!(st.submitted, requests);
        assert_eq!(st.completed, requests);
        assert!(st.enters > 0 && st.reaps > 0);
        drop(eng);
    }

    #[test]
    fn libaio_bad_fd_and_past_eof_complete_with_results() {
        let tmp = TempFile::new("err");
        let Some(mut eng) = engine(8, &[tmp.fd(), -1]) else {
            return;
        };
        // One written block, so that the file has a well-defined end.
        let mut buf = AlignedBuf::new(BLOCK);
        buf.as_mut_slice().fill(0xab);
        let w = IoRequest::write(FileId(0), 0, buf.as_mut_ptr(), BLOCK as u32, 1);
        assert_eq!(
            run_all(&mut eng, &[w]),
            [IoCompletion {
                user_data: 1,
                result: BLOCK as i32
            }]
        );

        let mut a = AlignedBuf::new(BLOCK);
        let mut b = AlignedBuf::new(BLOCK);
        let mut c = AlignedBuf::new(BLOCK);
        let reqs = [
            IoRequest::read(FileId(0), 0, a.as_mut_ptr(), BLOCK as u32, 10),
            // fd -1: io_submit refuses this iocb; the others must still go through.
            IoRequest::read(FileId(1), 0, b.as_mut_ptr(), BLOCK as u32, 11),
            // Past the end of the file: a short (empty) read, not an error.
            IoRequest::read(
                FileId(0),
                64 * BLOCK as u64,
                c.as_mut_ptr(),
                BLOCK as u32,
                12,
            ),
            IoRequest::sync(OpKind::Fsync, FileId(1), 13),
        ];
        let mut done = run_all(&mut eng, &reqs);
        done.sort_by_key(|c| c.user_data);
        assert_eq!(
            done,
            [
                IoCompletion {
                    user_data: 10,
                    result: BLOCK as i32
                },
                IoCompletion {
                    user_data: 11,
                    result: -libc::EBADF
                },
                IoCompletion {
                    user_data: 12,
                    result: 0
                },
                IoCompletion {
                    user_data: 13,
                    result: -libc::EBADF
                },
            ]
        );
        assert!(a.as_slice().iter().all(|&x| x == 0xab));
        assert_eq!(eng.stats().submitted, 5);
    }

    #[test]
    fn libaio_push_beyond_depth_is_refused() {
        let tmp = TempFile::new("depth");
        let Some(mut eng) = engine(4, &[tmp.fd()]) else {
            return;
        };
        let mut buf = AlignedBuf::new(BLOCK);
        // SAFETY: `buf` outlives the engine's use of it (reaped below).
        let oob = unsafe {
            eng.push(&IoRequest::read(
                FileId(7),
                0,
                buf.as_mut_ptr(),
                BLOCK as u32,
                0,
            ))
        };
        assert!(
            matches!(oob, Err(IoError::NoSuchFile { index: 7, .. })),
            "{oob:?}"
        );
        assert_eq!(eng.in_flight(), 0);
        for i in 0..4 {
            // SAFETY: nops carry no buffer.
            unsafe { eng.push(&IoRequest::nop(i)) }.expect("push within depth");
        }
        assert_eq!((eng.pending(), eng.in_flight()), (4, 4));
        // SAFETY: refused before anything is queued.
        let full = unsafe {
            eng.push(&IoRequest::read(
                FileId(0),
                0,
                buf.as_mut_ptr(),
                BLOCK as u32,
                9,
            ))
        };
        match full {
            Err(IoError::QueueFull {
                in_flight: 4,
                depth: 4,
                ..
            }) => {}
            other => panic!("push beyond depth: {other:?}"),
        }
        assert_eq!(eng.in_flight(), 4);
        eng.submit(0).expect("submit");
        let mut out = Vec::new();
        assert_eq!(eng.reap(&mut out), 4);
        // Room again after the reap.
        // SAFETY: nops carry no buffer.
        unsafe { eng.push(&IoRequest::nop(5)) }.expect("push after reap");
    }

    #[test]
    fn libaio_nop_completes_in_user_space() {
        let Some(mut eng) = engine(8, &[]) else {
            return;
        };
        for i in 0..3 {
            // SAFETY: nops carry no buffer.
            unsafe { eng.push(&IoRequest::nop(100 + i)) }.expect("push nop");
        }
        eng.submit(3).expect("submit");
        assert_eq!(eng.pending(), 0);
        let mut out = Vec::new();
        assert_eq!(eng.reap(&mut out), 3);
        let want: Vec<IoCompletion> = (100..103)
            .map(|user_data| IoCompletion {
                user_data,
                result: 0,
            })
            .collect();
        assert_eq!(out, want);
        let st = eng.stats();
        assert_eq!(
            (st.submitted, st.completed, st.reaps, st.enters),
            (3, 3, 1, 0)
        );
        assert_eq!(eng.in_flight(), 0);
    }

    #[test]
    fn libaio_drop_drains_in_flight_requests() {
        let tmp = TempFile::new("drop");
        // Buffers declared first so that they are dropped after the engine.
        let mut bufs: Vec<AlignedBuf> = (0..7).map(|_| AlignedBuf::new(BLOCK)).collect();
        let Some(mut eng) = engine(8, &[tmp.fd()]) else {
            return;
        };
        for (i, buf) in bufs.iter_mut().enumerate() {
            let req = IoRequest::write(
                FileId(0),
                (i * BLOCK) as u64,
                buf.as_mut_ptr(),
                BLOCK as u32,
                i as u64,
            );
            // SAFETY: `bufs` outlives the engine, whose drop waits for every request.
            unsafe { eng.push(&req) }.expect("push");
        }
        eng.submit(0).expect("submit");
        // SAFETY: nops carry no buffer.
        unsafe { eng.push(&IoRequest::nop(99)) }.expect("push pending nop");
        assert_eq!((eng.pending(), eng.in_flight()), (1, 8));
        drop(eng);
        assert_eq!(
            tmp.file.metadata().expect("metadata").len(),
            7 * BLOCK as u64
        );
    }
}
