//! What a network worker asks of the kernel, said once for both ways of asking it: an io_uring
//! (the default) or, where io_uring is blocked (a container's seccomp profile, an old kernel),
//! epoll with non-blocking system calls (`epoll.rs`). The worker states operations and reads
//! completions the same way for both; the epoll side produces the completions io_uring would.

use super::epoll::EpollLoop;
pub use crate::config::TransportKind;
use io_uring::{opcode, squeue, types};
use ringdb_io::{Ring, RingSetup, SetupMode};
use std::os::fd::RawFd;
use std::time::Duration;

/// The worker's operations. Buffers are the worker's, valid until the completion of the
/// operation that names them is reaped (the contract of [`Transport::push`]).
#[derive(Clone, Copy, Debug)]
pub enum NetOp {
    /// Accept connections for as long as the listener lives (completions flagged "more").
    AcceptMulti { listener: RawFd },
    /// Receive for as long as data comes, into the buffers of `group` (io_uring only).
    RecvMulti { socket: RawFd, group: u16 },
    /// Receive once into `buffer`.
    Recv {
        socket: RawFd,
        buffer: *mut u8,
        length: u32,
    },
    /// Send once from `buffer` (a short send completes with the bytes it took).
    Send {
        socket: RawFd,
        buffer: *const u8,
        length: u32,
    },
    /// Read an eventfd's counter into `buffer`.
    ReadCounter { fd: RawFd, buffer: *mut u64 },
    /// End the operation whose user data is `target` (it completes with `ECANCELED`).
    Cancel { target: u64 },
    /// End every operation in flight.
    CancelAll,
    /// Complete at once (a completion for a waiter on the ring's descriptor to see).
    Nop,
    /// Complete (with `ETIME`) after the interval at `spec` (io_uring only).
    Timeout { spec: *const types::Timespec },
}

/// A worker's ring or epoll loop.
pub enum Transport {
    /// Boxed: a ring's state is three times the epoll loop's.
    Uring(Box<Ring>),
    Epoll(EpollLoop),
}

impl Transport {
    /// Opens the transport `kind` asks for (the ring in `mode`), and says why it fell back to
    /// epoll where it did.
    pub fn open(
        kind: TransportKind,
        mode: SetupMode,
        entries: u32,
    ) -> std::io::Result<(Transport, Option<String>)> {
        if kind == TransportKind::Epoll {
            return Ok((Transport::Epoll(EpollLoop::new()?), None));
        }
        match open_ring(mode, entries) {
            Ok(ring) => Ok((Transport::Uring(Box::new(ring)), None)),
            Err(error) if kind == TransportKind::Auto => {
                let reason = format!("{error}: the network falls back to epoll");
                tracing::warn!("{reason}");
                Ok((Transport::Epoll(EpollLoop::new()?), Some(reason)))
            }
            Err(error) => Err(error),
        }
    }

    /// The ring, when the transport is one.
    pub fn ring(&self) -> Option<&Ring> {
        match self {
            Transport::Uring(ring) => Some(ring),
            Transport::Epoll(_) => None,
        }
    }

    /// Starts `op`; its completions carry `user_data`.
    ///
    /// # Safety
    /// The memory `op` names must stay valid, and untouched by the caller, until the
    /// completion that ends the operation has been taken from [`Transport::completions`].
    pub unsafe fn push(&mut self, op: NetOp, user_data: u64) -> std::io::Result<()> {
        match self {
            Transport::Uring(ring) => {
                let entry = entry_of(op).user_data(user_data);
                // SAFETY: this function's contract is the ring's.
                unsafe { ring.push(&entry) }.map_err(|error| ring_error("push", error))
            }
            // SAFETY: this function's contract is the loop's.
            Transport::Epoll(epoll) => unsafe { epoll.push(op, user_data) },
        }
    }

    /// Hands the operations to the kernel and, when `wait`, waits at most `timeout` for a
    /// completion.
    pub fn enter(&mut self, wait: bool, timeout: Duration) -> std::io::Result<()> {
        let entered = match self {
            Transport::Uring(ring) if wait => ring.submit_and_wait_timeout(1, timeout),
            Transport::Uring(ring) => ring.submit_and_collect(),
            Transport::Epoll(epoll) => {
                return epoll.wait(if wait { timeout } else { Duration::ZERO })
            }
        };
        entered
            .map(drop)
            .map_err(|error| ring_error("enter", error))
    }

    /// Hands the operations queued to the kernel and lets it post what has finished, without
    /// waiting, and without a system call when there is neither (io_uring).
    pub fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Transport::Uring(ring) if ring.pending() == 0 => ring
                .prepare_reap()
                .map_err(|error| ring_error("enter", error)),
            _ => self.enter(false, Duration::ZERO),
        }
    }

    /// Moves the completions ready into `into`: (user data, result, flags).
    pub fn completions(&mut self, into: &mut Vec<(u64, i32, u32)>) {
        match self {
            Transport::Uring(ring) => into.extend(
                ring.completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            ),
            Transport::Epoll(epoll) => epoll.completions(into),
        }
    }

    /// `socket` is about to be closed: the epoll loop forgets it (its number may be reused).
    pub fn forget(&mut self, socket: RawFd) {
        if let Transport::Epoll(epoll) = self {
            epoll.forget(socket);
        }
    }
}

/// The io_uring entry of `op`.
fn entry_of(op: NetOp) -> squeue::Entry {
    match op {
        NetOp::AcceptMulti { listener } => opcode::AcceptMulti::new(types::Fd(listener)).build(),
        NetOp::RecvMulti { socket, group } => {
            opcode::RecvMulti::new(types::Fd(socket), group).build()
        }
        NetOp::Recv {
            socket,
            buffer,
            length,
        } => opcode::Recv::new(types::Fd(socket), buffer, length).build(),
        NetOp::Send {
            socket,
            buffer,
            length,
        } => opcode::Send::new(types::Fd(socket), buffer, length)
            .flags(libc::MSG_NOSIGNAL)
            .build(),
        NetOp::ReadCounter { fd, buffer } => {
            opcode::Read::new(types::Fd(fd), buffer.cast(), 8).build()
        }
        NetOp::Cancel { target } => opcode::AsyncCancel::new(target).build(),
        NetOp::CancelAll => opcode::AsyncCancel2::new(types::CancelBuilder::any()).build(),
        NetOp::Timeout { spec } => opcode::Timeout::new(spec).build(),
        NetOp::Nop => opcode::Nop::new().build(),
    }
}

fn ring_error(what: &str, error: ringdb_io::IoError) -> std::io::Error {
    std::io::Error::other(format!("the network ring ({what}): {error}"))
}

/// A worker's ring in `mode`, or a plain one where the kernel refuses that mode.
fn open_ring(mode: SetupMode, entries: u32) -> std::io::Result<Ring> {
    let setup = RingSetup {
        mode,
        single_issuer: true,
        completion_entries: Some(entries * 4),
        ..RingSetup::new(entries)
    };
    let plain = RingSetup {
        completion_entries: setup.completion_entries,
        ..RingSetup::new(entries)
    };
    Ring::new(&setup)
        .or_else(|error| {
            tracing::warn!(
                "network ring in mode {}: {error}; a plain ring",
                mode.name()
            );
            Ring::new(&plain)
        })
        .map_err(|error| ring_error("setup", error))
}
