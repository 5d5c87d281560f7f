//! Test support: a pipe whose read end a test waits on, and the write that makes it readable.
//! Shared by `ringdb-io/tests/doorbell.rs` and `ringdb-io/tests/poll.rs` (included by path).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pipe: (read end, write end).
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both were just created and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Writes one byte into the pipe's write end.
pub fn write_byte(fd: &OwnedFd) {
    // SAFETY: writes one byte from a live array.
    let written = unsafe { libc::write(fd.as_raw_fd(), [7u8].as_ptr().cast(), 1) };
    assert_eq!(written, 1);
}
