//! What an engine does for a doorbell (the executor's wake-up from other threads, see
//! `executor/doorbell.rs`): the eventfd it is rung through, the completions it reserves, and
//! the wait of engines that have no way to watch the eventfd themselves.
//!
//! Why here: the wake-up must end the *engine's* blocking wait (an `io_uring_enter`, an
//! `io_getevents`), so an engine that can watch a file descriptor arms a poll of the eventfd on
//! its own queue (io_uring `IORING_OP_POLL_ADD`, libaio `IOCB_CMD_POLL`) and reports its
//! completion apart from the requests': those completions carry reserved user data, are never
//! counted in flight and never reach [`Engine::reap`](super::Engine::reap)'s caller. An engine
//! that cannot (posix) sleeps in `poll(2)` on the eventfd when nothing is in flight; it never
//! blocks with requests in flight anyway.
//!
//! An eventfd poll names no memory (only a file descriptor, which the kernel holds a reference
//! to while the poll is armed), so a poll left armed when a ring goes away frees nothing under
//! the kernel; the engines still cancel it before they close.

use crate::error::{IoError, Result};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// User data of an engine's own poll of the doorbell's eventfd.
pub(crate) const DOORBELL_POLL: u64 = u64::MAX - 1;
/// User data of a doorbell message (`IORING_OP_MSG_RING`) arriving from another ring.
pub(crate) const DOORBELL_MESSAGE: u64 = u64::MAX - 2;
/// User data of the completion a failed doorbell message leaves on the sending ring.
pub(crate) const DOORBELL_MESSAGE_FAILED: u64 = u64::MAX - 3;
/// User data of the cancellation of the doorbell poll (when an engine closes).
pub(crate) const DOORBELL_CANCEL: u64 = u64::MAX - 4;
/// The lowest user data engines reserve for themselves; requests must stay below it.
pub const RESERVED_USER_DATA_MIN: u64 = u64::MAX - 15;

/// Refuses a request whose user data lies in the range engines reserve.
pub(crate) fn check_user_data(user_data: u64) -> Result<()> {
    if user_data >= RESERVED_USER_DATA_MIN {
        return Err(IoError::ReservedUserData {
            user_data,
            reserved_from: RESERVED_USER_DATA_MIN,
        });
    }
    Ok(())
}

/// Doorbell wake-ups an engine saw, by the way they arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DoorbellWakes {
    /// The eventfd became readable (an `eventfd` write by a ringing thread).
    pub eventfd: u64,
    /// A doorbell message (`IORING_OP_MSG_RING`) arrived from another ring.
    pub messages: u64,
    /// Doorbell messages this engine sent that the kernel could not post (their target was
    /// then woken by its own loop, see `executor/doorbell.rs`).
    pub failed_posts: u64,
}

impl DoorbellWakes {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: DoorbellWakes) {
        self.eventfd += other.eventfd;
        self.messages += other.messages;
        self.failed_posts += other.failed_posts;
    }
}

/// A new non-blocking, close-on-exec eventfd.
pub(crate) fn new_eventfd() -> Result<OwnedFd> {
    // SAFETY: plain syscall; on success it returns a new descriptor that nobody else owns.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(IoError::os(
            "eventfd for a doorbell",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to the eventfd's counter: a reader or poller blocked on it wakes up.
pub(crate) fn write_eventfd(eventfd: BorrowedFd<'_>) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to a descriptor the caller keeps open. The only
    // failure of a non-blocking eventfd write is EAGAIN at a counter of u64::MAX - 1, when it
    // is readable anyway, so the result can be ignored.
    let _ = unsafe { libc::write(eventfd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Resets the eventfd's counter to zero (a non-blocking read), so that the next poll waits
/// for a new write.
pub(crate) fn reset_eventfd(eventfd: BorrowedFd<'_>) {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64. EAGAIN (the counter was zero) is fine.
    let _ = unsafe { libc::read(eventfd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
}

/// Signal interruptions a `poll(2)` sleep retries before it reports the failure.
const POLL_INTERRUPTED_MAX: u32 = 1000;

/// Blocks in `poll(2)` until the eventfd is readable, then resets it: the doorbell wait of
/// engines without one of their own (nothing is in flight: the sleep ends only at a ring).
pub(crate) fn sleep_on_eventfd(eventfd: BorrowedFd<'_>) -> Result<DoorbellWakes> {
    let mut poll = libc::pollfd {
        fd: eventfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    for _ in 0..POLL_INTERRUPTED_MAX {
        // SAFETY: one live pollfd; no timeout: the sleep ends when a ringing thread writes.
        let ret = unsafe { libc::poll(&mut poll, 1, -1) };
        if ret > 0 {
            reset_eventfd(eventfd);
            return Ok(DoorbellWakes {
                eventfd: 1,
                ..DoorbellWakes::default()
            });
        }
        let error = io::Error::last_os_error();
        if ret < 0 && error.raw_os_error() != Some(libc::EINTR) {
            return Err(IoError::os("poll on a doorbell's eventfd", error));
        }
    }
    Err(IoError::os(
        "poll on a doorbell's eventfd",
        io::Error::from_raw_os_error(libc::EINTR),
    ))
}
