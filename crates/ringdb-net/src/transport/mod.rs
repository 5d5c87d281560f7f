//! One interface over every transport. A transport owns a set of connected sockets, a pool of
//! send buffers (slots) and its receive memory; it is used by exactly one thread (ring per
//! thread).
//!
//! Sending: `alloc` a slot, fill it through `slot_mut`, `send(conn, slot, len)`. The transport
//! owns the slot from then on: it sends all of `len` (short writes are resumed), keeps at most one
//! send in flight per connection so the byte stream stays in order, and returns the slot to the
//! pool only when the kernel is done with it (for `SEND_ZC`, after the notification CQE).
//!
//! Receiving: every connection always has a receive armed. `poll` hands received bytes to the
//! handler as [`Event::Recv`] slices that are valid only during the call (then the memory is
//! re-armed or, for multishot, given back to the provided-buffer ring).

pub mod epoll;
pub mod uring;
pub mod zcrx;

use crate::config::{NetConfig, TransportKind};
use crate::error::Result;
use crate::sys::Conn;
use serde::Serialize;
use std::time::Duration;

/// What `poll` reports.
#[derive(Debug)]
pub enum Event<'a> {
    /// Bytes arrived on `conn` (one datagram for UDP).
    Recv { conn: usize, data: &'a [u8] },
    /// A whole `send` on `conn` has left user space (its slot is released when the kernel is done).
    SendDone { conn: usize },
    /// The peer closed `conn` (TCP end of stream).
    Closed { conn: usize },
}

/// Counters every transport keeps.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TransportStats {
    pub bytes_sent: u64,
    pub bytes_recv: u64,
    pub send_ops: u64,
    pub recv_ops: u64,
    /// Sends that moved fewer bytes than asked (resumed by the transport).
    pub short_sends: u64,
    /// System calls into the kernel for I/O (`io_uring_enter`, `epoll_wait`, `send`, `recv`).
    pub syscalls: u64,
    /// SEND_ZC notifications seen, and those reporting `IORING_NOTIF_USAGE_ZC_COPIED`.
    pub zc_notifs: u64,
    pub zc_copied_notifs: u64,
    /// Bytes whose SEND_ZC notification said the kernel copied them after all.
    pub zc_copied_bytes: u64,
    /// Multishot receives that ended and were armed again.
    pub multishot_rearms: u64,
}

impl TransportStats {
    pub fn add(&mut self, o: &TransportStats) {
        self.bytes_sent += o.bytes_sent;
        self.bytes_recv += o.bytes_recv;
        self.send_ops += o.send_ops;
        self.recv_ops += o.recv_ops;
        self.short_sends += o.short_sends;
        self.syscalls += o.syscalls;
        self.zc_notifs += o.zc_notifs;
        self.zc_copied_notifs += o.zc_copied_notifs;
        self.zc_copied_bytes += o.zc_copied_bytes;
        self.multishot_rearms += o.multishot_rearms;
    }
}

pub type Handler<'h> = dyn FnMut(Event<'_>) -> Result<()> + 'h;

pub trait Transport {
    fn kind(&self) -> TransportKind;
    fn num_conns(&self) -> usize;
    fn slot_size(&self) -> usize;
    /// A free send slot, or `None` while all are in flight (poll, then try again).
    fn alloc(&mut self) -> Option<u32>;
    fn slot_mut(&mut self, slot: u32) -> &mut [u8];
    /// Queues `len` bytes of `slot` on `conn`; the slot belongs to the transport from now on.
    fn send(&mut self, conn: usize, slot: u32, len: usize) -> Result<()>;
    /// Sends queued or in flight, not yet reported as [`Event::SendDone`].
    fn pending_sends(&self) -> usize;
    /// Submits what is queued, waits up to `timeout` (None: `io_timeout` of the config;
    /// zero: do not wait) for something to happen, and reports it. Returns the number of events.
    fn poll(&mut self, timeout: Option<Duration>, handler: &mut Handler<'_>) -> Result<usize>;
    fn stats(&self) -> TransportStats;
}

/// Builds the transport `cfg` names over `conns` (conn index = position in the vector).
pub fn open(cfg: &NetConfig, conns: Vec<Conn>) -> Result<Box<dyn Transport>> {
    cfg.validate()?;
    match cfg.transport {
        TransportKind::Epoll => Ok(Box::new(epoll::EpollTransport::new(cfg, conns)?)),
        TransportKind::UringZcRecv => {
            // Gate by probing: refused with a typed error where the device cannot do it.
            let first = conns.first().map(|c| c.raw());
            Err(zcrx::refusal(first))
        }
        _ => Ok(Box::new(uring::UringTransport::new(cfg, conns)?)),
    }
}
