//! Entering the kernel: the one place that calls `io_uring_enter`. Every call is counted, uses
//! the registered ring index when the ring fd is registered (saving the kernel an fd lookup),
//! retries `EINTR`, and turns `EBUSY`/`EAGAIN` ("reap first") into zero progress.

use super::Ring;
use crate::error::{IoError, Result};
use io_uring::{cqueue, squeue, IoUring};
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// `IORING_ENTER_GETEVENTS`: wait for (or, with 0, just collect) completions; runs task work.
pub(crate) const ENTER_GETEVENTS: u32 = 1 << 0;
/// `IORING_ENTER_SQ_WAKEUP`: wake a sleeping SQPOLL thread.
pub(crate) const ENTER_SQ_WAKEUP: u32 = 1 << 1;
/// `IORING_ENTER_SQ_WAIT`: wait until the SQPOLL thread has made room in the SQ.
pub(crate) const ENTER_SQ_WAIT: u32 = 1 << 2;
/// `IORING_ENTER_EXT_ARG`: the argument is a `struct io_uring_getevents_arg`.
const ENTER_EXT_ARG: u32 = 1 << 3;
/// `IORING_ENTER_REGISTERED_RING`: the fd argument is a registered ring index.
pub(crate) const ENTER_REGISTERED_RING: u32 = 1 << 4;

/// EINTR retries before an enter gives up (a signal storm, not a normal condition).
const MAX_INTERRUPTED_RETRIES: u32 = 1000;

/// What `io_uring_enter` is called with: the ring's fd, or its registered index and the flag
/// that says so.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EnterTarget {
    pub(crate) fd: i32,
    pub(crate) flags: u32,
}

impl EnterTarget {
    pub(crate) fn raw<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
        uring: &IoUring<S, C>,
    ) -> Self {
        EnterTarget {
            fd: uring.as_raw_fd(),
            flags: 0,
        }
    }
}

/// `struct __kernel_timespec`.
#[repr(C)]
struct KernelTimespec {
    seconds: i64,
    nanoseconds: i64,
}

/// `struct io_uring_getevents_arg` (linux/io_uring.h).
#[repr(C)]
struct GeteventsArg {
    sigmask: u64,
    sigmask_size: u32,
    min_wait_usec: u32,
    timespec: u64,
}

impl<S: squeue::EntryMarker, C: cqueue::EntryMarker> Ring<S, C> {
    /// One counted `io_uring_enter`; returns how many entries the kernel consumed.
    pub(crate) fn enter(&mut self, to_submit: u32, min_complete: u32, flags: u32) -> Result<usize> {
        self.enter_with_arg(to_submit, min_complete, flags, std::ptr::null(), 0)
            .map_err(|error| IoError::os("io_uring_enter", error))
    }

    /// An enter that waits at most `timeout` for `min_complete` completions; a timeout is not
    /// an error (it returns what was submitted).
    pub(crate) fn enter_with_timeout(
        &mut self,
        to_submit: u32,
        min_complete: u32,
        flags: u32,
        timeout: Duration,
    ) -> Result<usize> {
        let timespec = KernelTimespec {
            seconds: timeout.as_secs().min(i64::MAX as u64) as i64,
            nanoseconds: timeout.subsec_nanos() as i64,
        };
        let arg = GeteventsArg {
            sigmask: 0,
            sigmask_size: 0,
            min_wait_usec: 0,
            timespec: &timespec as *const KernelTimespec as u64,
        };
        let ret = self.enter_with_arg(
            to_submit,
            min_complete,
            flags | ENTER_EXT_ARG,
            &arg as *const GeteventsArg as *const libc::c_void,
            std::mem::size_of::<GeteventsArg>(),
        );
        match ret {
            Err(error) if error.raw_os_error() == Some(libc::ETIME) => Ok(0),
            Err(error) => Err(IoError::os("io_uring_enter (with a timeout)", error)),
            Ok(consumed) => Ok(consumed),
        }
    }

    fn enter_with_arg(
        &mut self,
        to_submit: u32,
        min_complete: u32,
        flags: u32,
        arg: *const libc::c_void,
        arg_size: usize,
    ) -> io::Result<usize> {
        for _ in 0..MAX_INTERRUPTED_RETRIES {
            // SAFETY: the fd is this ring's (or its registered index, with the flag that says
            // so); `arg` is null with size 0, or points at a getevents argument (and the
            // timespec it names) that live on the caller's stack for the whole call.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_io_uring_enter,
                    self.enter_target.fd,
                    to_submit,
                    min_complete,
                    flags | self.enter_target.flags,
                    arg,
                    arg_size,
                )
            };
            self.stats.enters += 1;
            if ret >= 0 {
                return Ok(ret as usize);
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EBUSY) | Some(libc::EAGAIN) => return Ok(0),
                _ => return Err(error),
            }
        }
        Err(io::Error::from_raw_os_error(libc::EINTR))
    }
}
