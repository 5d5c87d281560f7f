//! One client connection as its worker holds it: the socket, the receive buffer the kernel
//! writes into, the bytes not yet parsed, the replies not yet sent, and the batch running.
//!
//! Buffer ownership: while a receive is in flight the kernel may write `recv_buffer`; while a
//! send is in flight it reads `sending`. Neither is touched, moved or freed before its
//! completion arrives: the worker frees a connection only once it has no operation in flight.

use crate::clients::Registration;
use crate::command::Session;
use crate::exec::BatchOutcome;
use std::future::Future;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;

/// Bytes of one receive into a connection's own buffer.
pub const RECV_BYTES: usize = 16 * 1024;

/// A batch in progress.
pub type Running = Pin<Box<dyn Future<Output = BatchOutcome>>>;

/// A connection.
pub struct Conn {
    /// First, so that it drops first: the connection leaves the table of clients before its
    /// socket is closed (`clients.rs`).
    pub registration: Registration,
    pub fd: OwnedFd,
    pub generation: u32,
    /// Written by the kernel while a receive into it is in flight; only where receives are
    /// not multishot (those land in the worker's provided buffers).
    pub recv_buffer: Option<Box<[u8]>>,
    pub recv_in_flight: bool,
    /// A cancel of the multishot receive in flight was asked for.
    pub recv_cancelling: bool,
    /// Bytes received and not yet parsed into a batch.
    pub input: Vec<u8>,
    /// Requests parsed but not run (a batch stopped at its reply budget): they run first.
    pub parked: Vec<Vec<Vec<u8>>>,
    /// Read by the kernel while `send_in_flight`, from `sent` on.
    pub sending: Vec<u8>,
    pub sent: usize,
    pub send_in_flight: bool,
    /// When a send last moved bytes (or the connection started).
    pub send_progress_at: std::time::Instant,
    /// Replies waiting for the send in flight to finish.
    pub replies: Vec<u8>,
    /// `None` while a batch runs (the batch holds it).
    pub session: Option<Session>,
    pub running: Option<Running>,
    /// Close once the replies are out (QUIT, a protocol error).
    pub close_after_send: bool,
    /// The peer closed, or the connection failed: free it once nothing is in flight.
    pub dead: bool,
}

impl Conn {
    /// A connection on `stream`.
    pub fn new(registration: Registration, fd: OwnedFd, generation: u32, session: Session) -> Conn {
        let on: libc::c_int = 1;
        // SAFETY: passes a live int of the size given; a Unix socket refuses it, harmlessly.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        Conn {
            registration,
            fd,
            generation,
            recv_buffer: None,
            recv_in_flight: false,
            recv_cancelling: false,
            input: Vec::new(),
            parked: Vec::new(),
            sending: Vec::new(),
            sent: 0,
            send_in_flight: false,
            send_progress_at: std::time::Instant::now(),
            replies: Vec::new(),
            session: Some(session),
            running: None,
            close_after_send: false,
            dead: false,
        }
    }

    /// The socket's descriptor.
    pub fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Whether the kernel holds one of its buffers.
    pub fn in_flight(&self) -> bool {
        self.recv_in_flight || self.send_in_flight
    }

    /// Replies not yet sent.
    pub fn unsent_bytes(&self) -> usize {
        self.replies.len() + self.sending.len().saturating_sub(self.sent)
    }

    /// Ends the connection: the peer sees it closed, and the operations in flight complete
    /// (with an error or 0) so that the worker can free it.
    pub fn kill(&mut self) {
        self.dead = true;
        self.running = None;
        // SAFETY: shutdown on a descriptor this connection owns; no memory is passed.
        unsafe { libc::shutdown(self.raw(), libc::SHUT_RDWR) };
    }
}
