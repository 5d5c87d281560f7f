//! A replica's receive side: one socket read as a `std::io::Read`, its bytes arriving by a
//! multishot receive into provided buffers on a ring of the reader's own.
//!
//! # Why
//! A replica reads one long stream from its primary. A multishot receive stays armed across
//! replies, so the stream costs no submission per read, and the kernel picks a provided buffer
//! only when bytes arrive. The reader copies each buffer's bytes out and hands the buffer back
//! at once, so the protocol parser above (`client.rs`) runs unchanged on a `BufReader`.
//!
//! # Ownership
//! The provided buffers belong to the reader; the kernel may write into them while the receive
//! is armed. Dropping the reader cancels the receive and waits for its last completion before
//! the buffers go (bounded; past the bound their memory is leaked rather than freed under the
//! kernel). The socket belongs to whoever holds its stream, which must outlive the reader.

use super::provided::{ProvidedBuffers, GROUP};
use super::transport::{NetOp, Transport, TransportKind};
use io_uring::cqueue;
use std::io::{Error, ErrorKind, Read};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Buffers lent to the kernel, and their size: 1 MiB in flight at most between two reads.
const BUFFER_COUNT: u16 = 16;
const BUFFER_BYTES: usize = 64 * 1024;
/// The receive's user data, and the cancel's.
const RECEIVE: u64 = 1;
const CANCEL: u64 = 2;
/// Waits for the cancelled receive's last completion when the reader is dropped.
const DRAIN_WAITS_MAX: usize = 50;
const DRAIN_WAIT: Duration = Duration::from_millis(20);

/// A socket's bytes, received by a multishot receive into provided buffers.
pub struct RingReader {
    transport: Transport,
    buffers: Option<ProvidedBuffers>,
    socket: RawFd,
    /// Bytes received and not yet read, from `at` on.
    pending: Vec<u8>,
    at: usize,
    /// Whether the receive is armed (the kernel may write into the buffers).
    armed: bool,
    /// The peer closed the connection (or it failed: the error is returned once).
    closed: bool,
    /// How long a read waits for bytes before it fails with `TimedOut`.
    timeout: Duration,
}

impl RingReader {
    /// A reader of `socket`; fails where io_uring or provided-buffer rings are unavailable
    /// (the caller then reads the socket plainly).
    pub fn open(socket: RawFd, timeout: Duration) -> std::io::Result<RingReader> {
        let (transport, _) =
            Transport::open(TransportKind::Uring, ringdb_io::SetupMode::Default, 8)?;
        let ring = transport.ring().expect("an io_uring transport");
        let buffers = ProvidedBuffers::register(ring.uring(), BUFFER_COUNT, BUFFER_BYTES)?;
        Ok(RingReader {
            transport,
            buffers: Some(buffers),
            socket,
            pending: Vec::new(),
            at: 0,
            armed: false,
            closed: false,
            timeout,
        })
    }

    fn arm(&mut self) -> std::io::Result<()> {
        let receive = NetOp::RecvMulti {
            socket: self.socket,
            group: GROUP,
        };
        // SAFETY: the receive writes only into the provided buffers, which `self` keeps until
        // the receive's last completion is reaped (`Drop` waits for it).
        unsafe { self.transport.push(receive, RECEIVE) }?;
        self.armed = true;
        Ok(())
    }

    /// Waits (up to the timeout) until bytes arrive or the connection ends; the bytes go to
    /// `pending`.
    fn fill(&mut self) -> std::io::Result<()> {
        let deadline = Instant::now() + self.timeout;
        let mut done = Vec::new();
        // Each pass waits for completions; the loop ends with bytes, the end of the
        // connection, an error, or the deadline.
        loop {
            if !self.armed {
                self.arm()?;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            self.transport
                .enter(true, left.max(Duration::from_millis(1)))?;
            done.clear();
            self.transport.completions(&mut done);
            for &(data, result, flags) in &done {
                self.received(data, result, flags)?;
            }
            if self.pending.len() > self.at || self.closed {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::new(ErrorKind::TimedOut, "the primary sent nothing"));
            }
        }
    }

    /// One completion: its bytes into `pending`, or the end or failure of the receive.
    fn received(&mut self, data: u64, result: i32, flags: u32) -> std::io::Result<()> {
        if data != RECEIVE {
            return Ok(());
        }
        if !cqueue::more(flags) {
            self.armed = false;
        }
        let buffers = self.buffers.as_mut().expect("buffers while reading");
        if let Some(id) = cqueue::buffer_select(flags) {
            let length = usize::try_from(result).unwrap_or(0);
            buffers.take(id, length, |bytes| self.pending.extend_from_slice(bytes));
        }
        match result {
            length if length > 0 => Ok(()),
            0 => {
                self.closed = true;
                Ok(())
            }
            // Buffers ran out, or the receive was interrupted: armed again on the next pass.
            error if -error == libc::ENOBUFS || -error == libc::EINTR || -error == libc::EAGAIN => {
                Ok(())
            }
            error => {
                self.closed = true;
                Err(Error::from_raw_os_error(-error))
            }
        }
    }
}

impl Read for RingReader {
    fn read(&mut self, into: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.pending.len() {
            self.pending.clear();
            self.at = 0;
            if self.closed {
                return Ok(0);
            }
            self.fill()?;
        }
        let count = into.len().min(self.pending.len() - self.at);
        into[..count].copy_from_slice(&self.pending[self.at..self.at + count]);
        self.at += count;
        Ok(count)
    }
}

impl Drop for RingReader {
    fn drop(&mut self) {
        if self.armed {
            let cancel = NetOp::Cancel { target: RECEIVE };
            // SAFETY: a cancel names no memory.
            let _ = unsafe { self.transport.push(cancel, CANCEL) };
        }
        let mut done = Vec::new();
        // Bounded: the cancelled receive ends with one last completion.
        for _ in 0..DRAIN_WAITS_MAX {
            if !self.armed {
                return;
            }
            let _ = self.transport.enter(true, DRAIN_WAIT);
            done.clear();
            self.transport.completions(&mut done);
            for &(data, result, flags) in &done {
                let _ = self.received(data, result, flags);
            }
        }
        tracing::warn!("a replica's receive outlived its cancel: its buffers are leaked");
        std::mem::forget(self.buffers.take());
    }
}
