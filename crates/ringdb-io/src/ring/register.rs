//! Registrations that go with a ring: its own fd (so enters skip the fd lookup), files,
//! fixed buffers (counted against `RLIMIT_MEMLOCK`) and the CPU of its io-wq workers. Each
//! refusal is typed and names what was being registered.

use super::enter::{EnterTarget, ENTER_REGISTERED_RING};
use super::Ring;
use crate::error::{IoError, Result, Switch};
use io_uring::{cqueue, squeue, IoUring};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

const IORING_REGISTER_RING_FDS: u32 = 20;

/// `struct io_uring_rsrc_update` from linux/io_uring.h.
#[repr(C)]
struct ResourceUpdate {
    offset: u32,
    reserved: u32,
    data: u64,
}

/// Registers the ring's fd and returns the index to enter it by. (The `io-uring` crate keeps
/// such a registration only in one short-lived `Submitter`, so the core does it itself.)
pub(super) fn register_ring_fd<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
    uring: &IoUring<S, C>,
) -> Result<EnterTarget> {
    let mut update = ResourceUpdate {
        offset: u32::MAX, // let the kernel pick a slot
        reserved: 0,
        data: uring.as_raw_fd() as u64,
    };
    // SAFETY: `update` is a valid io_uring_rsrc_update for the duration of the call; nr_args = 1.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            uring.as_raw_fd(),
            IORING_REGISTER_RING_FDS,
            &mut update as *mut ResourceUpdate,
            1u32,
        )
    };
    if ret < 0 {
        return Err(IoError::Unsupported {
            switch: Switch::RegisteredRingFd,
            reason: format!(
                "IORING_REGISTER_RING_FDS failed: {}",
                io::Error::last_os_error()
            ),
        });
    }
    Ok(EnterTarget {
        fd: update.offset as i32,
        flags: ENTER_REGISTERED_RING,
    })
}

impl<S: squeue::EntryMarker, C: cqueue::EntryMarker> Ring<S, C> {
    /// Registers `files` so entries can name them by index (`IOSQE_FIXED_FILE`).
    pub fn register_files(&self, files: &[RawFd]) -> Result<()> {
        self.uring
            .submitter()
            .register_files(files)
            .map_err(|e| IoError::os("registering files with the ring", e))
    }

    /// Registers fixed buffers (`READ_FIXED`/`WRITE_FIXED`). A locked-memory refusal is
    /// [`IoError::Memlock`], with the limit.
    ///
    /// # Safety
    /// The memory behind `buffers` must stay valid, and not be freed, until the ring is dropped.
    pub unsafe fn register_buffers(&self, buffers: &[libc::iovec]) -> Result<()> {
        // SAFETY: the caller keeps the memory alive for the ring's lifetime (this function's
        // contract).
        unsafe { self.uring.submitter().register_buffers(buffers) }
            .map_err(|e| register_buffers_error(buffers, e))
    }

    /// Pins the ring's io-wq workers to `cpu`. Workers inherit the creator's mask, but say it
    /// explicitly: a worker on another core turns every punted request into a cross-core wake-up.
    pub fn pin_io_workers(&self, cpu: u32) -> Result<()> {
        self.uring
            .submitter()
            .register_iowq_aff(&crate::affinity::cpu_set(cpu)?)
            .map_err(|e| IoError::os(format!("pinning io-wq workers to CPU {cpu}"), e))
    }
}

fn register_buffers_error(buffers: &[libc::iovec], error: io::Error) -> IoError {
    let bytes: u64 = buffers.iter().map(|v| v.iov_len as u64).sum();
    if error.raw_os_error() == Some(libc::ENOMEM) {
        let limit = match crate::limits::memlock_limit().0 {
            Some(b) => format!("{} KiB", b / 1024),
            None => "unlimited".into(),
        };
        return IoError::Memlock { bytes, limit };
    }
    IoError::os(format!("registering {bytes} bytes of fixed buffers"), error)
}
