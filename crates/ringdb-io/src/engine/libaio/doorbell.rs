//! The doorbell on the libaio engine: an `IOCB_CMD_POLL` of the doorbell's eventfd (Linux
//! 4.18), submitted beside the requests, so an `io_getevents` wait also ends when a plain thread
//! writes the eventfd. Its event carries the reserved [`DOORBELL_POLL`] in `data` and is never
//! counted in flight.
//!
//! The context is set up with one event more than the depth, so the poll never takes a
//! request's room. The poll is one-shot: re-armed only after its event was collected and the
//! eventfd reset. A kernel that refuses the poll (`EINVAL`) marks it unsupported: waits then end
//! at the next completion only, and the idle sleep is a `poll(2)` on the eventfd.
//!
//! The poll names no memory: the kernel copies the iocb during `io_submit`, and `io_destroy`
//! (in the engine's drop) cancels a poll still armed and waits for it.

use super::{Iocb, LibaioEngine};
use crate::engine::doorbell::{reset_eventfd, DoorbellWakes, DOORBELL_POLL};
use crate::error::{IoError, Result};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

/// `IOCB_CMD_POLL` of linux/aio_abi.h.
const IOCB_CMD_POLL: u16 = 5;

/// Signal interruptions an idle doorbell sleep retries before it reports the failure.
const INTERRUPTED_MAX: u32 = 1000;

/// The doorbell state of the libaio engine.
#[derive(Default)]
pub(super) struct AioDoorbell {
    /// The eventfd the waits watch, while the executor asks for it.
    pub(super) eventfd: Option<Arc<OwnedFd>>,
    /// The poll is in the kernel and its event has not been collected.
    pub(super) poll_armed: bool,
    /// `Some(false)` once the kernel refused the poll.
    pub(super) poll_supported: Option<bool>,
    /// A poll event was collected since the last wait began (the wait ends early).
    pub(super) fired: bool,
    pub(super) wakes: DoorbellWakes,
}

impl LibaioEngine {
    /// Submits a poll of the watched eventfd unless one is armed (or unsupported).
    pub(super) fn arm_doorbell_poll(&mut self) -> Result<()> {
        let Some(eventfd) = &self.doorbell.eventfd else {
            return Ok(());
        };
        if self.doorbell.poll_armed || self.doorbell.poll_supported == Some(false) {
            return Ok(());
        }
        let mut iocb = Iocb {
            aio_data: DOORBELL_POLL,
            aio_lio_opcode: IOCB_CMD_POLL,
            aio_fildes: eventfd.as_raw_fd() as u32,
            aio_buf: libc::POLLIN as u64,
            ..Iocb::default()
        };
        let mut list = [&mut iocb as *mut Iocb];
        // SAFETY: one pointer to a fully initialised iocb on this stack frame; the kernel
        // copies it during the call and keeps no pointer into it (a poll names no memory).
        let ret = unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, 1, list.as_mut_ptr()) };
        self.stats.enters += 1;
        if ret == 1 {
            self.doorbell.poll_armed = true;
            self.doorbell.poll_supported = Some(true);
            return Ok(());
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => {
                self.doorbell.poll_supported = Some(false);
                Ok(())
            }
            _ => Err(IoError::os(
                "io_submit of the doorbell's poll (libaio)",
                error,
            )),
        }
    }

    /// Takes the event of the doorbell's poll: resets the eventfd, counts the wake.
    pub(super) fn complete_doorbell_poll(&mut self, result: i64) {
        assert!(
            self.doorbell.poll_armed,
            "a doorbell poll event arrived that was not armed"
        );
        self.doorbell.poll_armed = false;
        if result >= 0 {
            self.doorbell.fired = true;
            self.doorbell.wakes.eventfd += 1;
            if let Some(eventfd) = &self.doorbell.eventfd {
                reset_eventfd(eventfd.as_fd());
            }
        }
    }

    /// Starts (or stops) watching; returns whether waits end at a ring (the poll works).
    pub(super) fn watch_eventfd(&mut self, eventfd: Option<Arc<OwnedFd>>) -> bool {
        let watching = eventfd.is_some();
        self.doorbell.eventfd = eventfd;
        if !watching {
            return false;
        }
        // Arming now tells whether this kernel takes the poll; an armed poll is harmless.
        self.arm_doorbell_poll().is_ok() && self.doorbell.poll_supported == Some(true)
    }

    /// The idle sleep: the poll plus a blocking `io_getevents`, or `poll(2)` without it.
    pub(super) fn sleep_for_doorbell(&mut self, eventfd: &Arc<OwnedFd>) -> Result<DoorbellWakes> {
        if !self.watch_eventfd(Some(Arc::clone(eventfd))) {
            return crate::engine::doorbell::sleep_on_eventfd(eventfd.as_fd());
        }
        self.doorbell.fired = false;
        for _ in 0..INTERRUPTED_MAX {
            match self.get_events(1, None) {
                Ok(_) if self.doorbell.fired || !self.doorbell.poll_armed => {
                    return Ok(DoorbellWakes::default())
                }
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(IoError::os("io_getevents (libaio doorbell sleep)", e)),
            }
        }
        Err(IoError::os(
            "io_getevents (libaio doorbell sleep)",
            io::Error::from_raw_os_error(libc::EINTR),
        ))
    }
}
