//! The network worker's fallback where io_uring is blocked: epoll and non-blocking system
//! calls, producing the completions an io_uring would.
//!
//! # How
//! Every descriptor an operation names is registered once, edge-triggered, for reading and
//! writing. An operation is tried at once when it is pushed; one that would block waits in its
//! descriptor's read or write slot (a worker has at most one of each per descriptor) and is
//! tried again on the descriptor's next readiness edge. Because each operation is tried right
//! after its registration, an edge that came while nothing waited is never needed. Accepts run
//! until the listener would block, bounded per turn ([`ACCEPTS_PER_TURN`]); a listener cut
//! short is tried again on the next turn without waiting for an edge. Listeners are made
//! non-blocking; receives and sends use `MSG_DONTWAIT`, so the sockets stay as accepted.
//!
//! A closed descriptor leaves epoll by itself; the worker tells the loop first
//! ([`EpollLoop::forget`]) so that a new descriptor of the same number is registered again.

use super::transport::NetOp;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Connections one listener accepts per turn before the others get theirs.
const ACCEPTS_PER_TURN: usize = 256;
/// `IORING_CQE_F_MORE`: the flag of a completion whose operation goes on (a multishot one).
const MORE: u32 = 1 << 1;
/// Readiness events taken per wait.
const EVENTS_PER_WAIT: usize = 256;

/// An operation waiting for its descriptor.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    op: NetOp,
    user_data: u64,
}

/// What waits on one descriptor.
#[derive(Default)]
struct Interest {
    read: Option<Waiting>,
    write: Option<Waiting>,
}

/// An epoll instance and the operations waiting on it.
pub struct EpollLoop {
    epoll: OwnedFd,
    /// Registered descriptors (a key here is registered with epoll).
    interests: HashMap<RawFd, Interest>,
    /// Completions not yet taken: (user data, result, flags).
    done: Vec<(u64, i32, u32)>,
    /// Listeners whose accepts stopped at the per-turn bound.
    again: Vec<RawFd>,
    events: Vec<libc::epoll_event>,
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Makes accepts on `listener` return instead of blocking (io_uring's accepts do not care).
fn set_nonblocking(listener: RawFd) -> bool {
    // SAFETY: fcntl on a descriptor the worker owns; no memory is passed.
    unsafe {
        let flags = libc::fcntl(listener, libc::F_GETFL);
        flags >= 0 && libc::fcntl(listener, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
    }
}

impl EpollLoop {
    /// A new epoll instance.
    pub fn new() -> std::io::Result<EpollLoop> {
        // SAFETY: takes no pointers; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(EpollLoop {
            // SAFETY: a new descriptor that nothing else owns.
            epoll: unsafe { OwnedFd::from_raw_fd(fd) },
            interests: HashMap::new(),
            done: Vec::new(),
            again: Vec::new(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_PER_WAIT],
        })
    }

    /// Starts `op` (see the module documentation).
    ///
    /// # Safety
    /// The memory `op` names stays valid and untouched by the caller until the completion
    /// that ends the operation has been taken.
    pub unsafe fn push(&mut self, op: NetOp, user_data: u64) -> std::io::Result<()> {
        let waiting = Waiting { op, user_data };
        match op {
            NetOp::AcceptMulti { listener } if !set_nonblocking(listener) => {
                self.done.push((user_data, -errno(), 0));
            }
            NetOp::AcceptMulti { listener: fd }
            | NetOp::Recv { socket: fd, .. }
            | NetOp::ReadCounter { fd, .. } => {
                if self.register(fd, user_data) {
                    let interest = self.interests.get_mut(&fd).expect("registered");
                    debug_assert!(interest.read.is_none(), "two reads on one descriptor");
                    interest.read = Some(waiting);
                    self.attempt_read(fd);
                }
            }
            NetOp::Send { socket, .. } => {
                if self.register(socket, user_data) {
                    let interest = self.interests.get_mut(&socket).expect("registered");
                    debug_assert!(interest.write.is_none(), "two sends on one descriptor");
                    interest.write = Some(waiting);
                    self.attempt_write(socket);
                }
            }
            // The worker receives one at a time here (it has no provided buffers).
            NetOp::RecvMulti { .. } => self.done.push((user_data, -libc::EINVAL, 0)),
            // Only workers on a shard's ring tick, and those need io_uring.
            NetOp::Timeout { .. } => self.done.push((user_data, -libc::EOPNOTSUPP, 0)),
            NetOp::Nop => self.done.push((user_data, 0, 0)),
            NetOp::Cancel { target } => {
                let found = self.cancel(|waiting| waiting.user_data == target);
                let result = if found > 0 { 0 } else { -libc::ENOENT };
                self.done.push((user_data, result, 0));
            }
            NetOp::CancelAll => {
                let found = self.cancel(|_| true);
                self.done.push((user_data, found as i32, 0));
            }
        }
        Ok(())
    }

    /// Registers `fd` unless it is; false (and a failed completion for `user_data`) if epoll
    /// refuses it.
    fn register(&mut self, fd: RawFd, user_data: u64) -> bool {
        if self.interests.contains_key(&fd) {
            return true;
        }
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: fd as u64,
        };
        // SAFETY: passes a live event for the kernel to copy.
        let added =
            unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
        if added != 0 && errno() != libc::EEXIST {
            self.done.push((user_data, -errno(), 0));
            return false;
        }
        self.interests.insert(fd, Interest::default());
        true
    }

    /// Ends the waiting operations `matches` picks with `ECANCELED`; returns how many.
    fn cancel(&mut self, matches: impl Fn(&Waiting) -> bool) -> usize {
        let mut found = 0;
        for interest in self.interests.values_mut() {
            for slot in [&mut interest.read, &mut interest.write] {
                if let Some(waiting) = slot.take_if(|waiting| matches(waiting)) {
                    self.done.push((waiting.user_data, -libc::ECANCELED, 0));
                    found += 1;
                }
            }
        }
        found
    }

    /// Tries the read waiting on `fd`, if any.
    fn attempt_read(&mut self, fd: RawFd) {
        let Some(waiting) = self.interests.get(&fd).and_then(|interest| interest.read) else {
            return;
        };
        // SAFETY (each call): the buffers are the pushed operation's, valid until its
        // completion (the contract of `push`), and hold the lengths given.
        let result = match waiting.op {
            NetOp::AcceptMulti { listener } => return self.accept_all(listener, waiting),
            NetOp::Recv {
                socket,
                buffer,
                length,
            } => unsafe { libc::recv(socket, buffer.cast(), length as usize, libc::MSG_DONTWAIT) },
            NetOp::ReadCounter { fd, buffer } => unsafe { libc::read(fd, buffer.cast(), 8) },
            _ => unreachable!("only reads wait in a read slot"),
        };
        self.finish(fd, waiting, result, true);
    }

    /// Tries the send waiting on `fd`, if any.
    fn attempt_write(&mut self, fd: RawFd) {
        let Some(waiting) = self.interests.get(&fd).and_then(|interest| interest.write) else {
            return;
        };
        let NetOp::Send {
            socket,
            buffer,
            length,
        } = waiting.op
        else {
            unreachable!("only sends wait in a write slot")
        };
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        // SAFETY: the buffer is the pushed send's, valid for `length` bytes until its
        // completion (the contract of `push`).
        let result = unsafe { libc::send(socket, buffer.cast(), length as usize, flags) };
        self.finish(fd, waiting, result, false);
    }

    /// Completes a read or send that did not block (or failed); one that would block waits on.
    fn finish(&mut self, fd: RawFd, waiting: Waiting, result: isize, read: bool) {
        let result = if result < 0 { -errno() } else { result as i32 };
        if result == -libc::EAGAIN || result == -libc::EINTR {
            return;
        }
        let interest = self.interests.get_mut(&fd).expect("registered");
        let slot = if read {
            &mut interest.read
        } else {
            &mut interest.write
        };
        *slot = None;
        self.done.push((waiting.user_data, result, 0));
    }

    /// Accepts until the listener would block, or the per-turn bound.
    fn accept_all(&mut self, listener: RawFd, waiting: Waiting) {
        for _ in 0..ACCEPTS_PER_TURN {
            // SAFETY: no address is asked for (null pointers are allowed).
            let socket = unsafe {
                libc::accept4(
                    listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            if socket >= 0 {
                self.done.push((waiting.user_data, socket, MORE));
                continue;
            }
            match errno() {
                libc::EAGAIN | libc::EINTR => return,
                libc::ECONNABORTED => continue,
                error => {
                    // The accept ends as a multishot one does; the worker arms it again.
                    self.interests.get_mut(&listener).expect("registered").read = None;
                    self.done.push((waiting.user_data, -error, 0));
                    return;
                }
            }
        }
        self.again.push(listener);
    }

    /// Waits at most `timeout` (none if completions are ready) for readiness, and tries what
    /// waits on the descriptors that became ready.
    pub fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        for listener in std::mem::take(&mut self.again) {
            self.attempt_read(listener);
        }
        let idle = self.done.is_empty() && self.again.is_empty();
        let timeout_ms = match idle {
            true => timeout.as_millis().min(i32::MAX as u128) as i32,
            false => 0,
        };
        // SAFETY: the kernel writes at most `events.len()` events into our vector.
        let ready = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                timeout_ms,
            )
        };
        if ready < 0 {
            return match errno() {
                libc::EINTR => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            };
        }
        for index in 0..ready as usize {
            let event = self.events[index];
            let (fd, flags) = (event.u64 as RawFd, event.events as i32);
            let broken = libc::EPOLLERR | libc::EPOLLHUP;
            if flags & (libc::EPOLLIN | libc::EPOLLRDHUP | broken) != 0 {
                self.attempt_read(fd);
            }
            if flags & (libc::EPOLLOUT | broken) != 0 {
                self.attempt_write(fd);
            }
        }
        Ok(())
    }

    /// Moves the completions into `into`.
    pub fn completions(&mut self, into: &mut Vec<(u64, i32, u32)>) {
        into.append(&mut self.done);
    }

    /// Forgets `fd`, which is about to be closed with nothing waiting on it.
    pub fn forget(&mut self, fd: RawFd) {
        if let Some(interest) = self.interests.remove(&fd) {
            debug_assert!(interest.read.is_none() && interest.write.is_none());
            // SAFETY: removes a descriptor we registered; no memory is passed.
            unsafe {
                libc::epoll_ctl(
                    self.epoll.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    fd,
                    std::ptr::null_mut(),
                )
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accept_completion_says_more_as_io_uring_does() {
        assert!(io_uring::cqueue::more(MORE));
        assert!(!io_uring::cqueue::more(0));
    }
}
