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

mod epoll;
mod uring;
mod zcrx;

pub use zcrx::zero_copy_receive_refusal;

use crate::config::{NetConfig, TransportKind};
use crate::error::Result;
use crate::sys::Conn;
use serde::Serialize;
use std::time::Duration;

/// What `poll` reports.
#[derive(Debug)]
pub enum Event<'a> {
    /// Bytes arrived on `conn` (one datagram for UDP).
    Recv {
        /// The connection's index.
        conn: usize,
        /// The bytes; valid only during the handler call.
        data: &'a [u8],
    },
    /// A whole `send` on `conn` has left user space (its slot is released when the kernel is done).
    SendDone {
        /// The connection's index.
        conn: usize,
    },
    /// The peer closed `conn` (TCP end of stream).
    Closed {
        /// The connection's index.
        conn: usize,
    },
}

/// Counters every transport keeps.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TransportStats {
    /// Bytes that left through completed sends.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_recv: u64,
    /// Send operations completed (a resumed short send counts each part).
    pub send_ops: u64,
    /// Receive operations completed.
    pub recv_ops: u64,
    /// Sends that moved fewer bytes than asked (resumed by the transport).
    pub short_sends: u64,
    /// System calls into the kernel for I/O (`io_uring_enter`, `epoll_wait`, `send`, `recv`).
    pub syscalls: u64,
    /// SEND_ZC notifications seen.
    pub zc_notifs: u64,
    /// SEND_ZC notifications reporting `IORING_NOTIF_USAGE_ZC_COPIED`.
    pub zc_copied_notifs: u64,
    /// Bytes whose SEND_ZC notification said the kernel copied them after all.
    pub zc_copied_bytes: u64,
    /// Multishot receives that ended and were armed again.
    pub multishot_rearms: u64,
}

impl TransportStats {
    /// Adds `o`'s counters to these (totals over workers or transports).
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

/// What [`Transport::poll`] hands each event to; an error stops the poll and is returned.
pub type Handler<'h> = dyn FnMut(Event<'_>) -> Result<()> + 'h;

/// A set of connected sockets driven by one thread: send slots out, events in. See the module
/// documentation for the ownership rules of send slots and received bytes.
pub trait Transport {
    /// Which transport this is.
    fn kind(&self) -> TransportKind;
    /// Connections it drives (indexes `0..num_conns()`).
    fn num_conns(&self) -> usize;
    /// Bytes of one send slot.
    fn slot_size(&self) -> usize;
    /// A free send slot, or `None` while all are in flight (poll, then try again).
    fn alloc(&mut self) -> Option<u32>;
    /// The memory of a slot [`Self::alloc`] returned, to fill before [`Self::send`].
    fn slot_mut(&mut self, slot: u32) -> &mut [u8];
    /// Queues `len` bytes of `slot` on `conn`; the slot belongs to the transport from now on.
    fn send(&mut self, conn: usize, slot: u32, len: usize) -> Result<()>;
    /// Sends queued or in flight, not yet reported as [`Event::SendDone`].
    fn pending_sends(&self) -> usize;
    /// Submits what is queued, waits up to `timeout` (None: `io_timeout` of the config;
    /// zero: do not wait) for something to happen, and reports it. Returns the number of events.
    fn poll(&mut self, timeout: Option<Duration>, handler: &mut Handler<'_>) -> Result<usize>;
    /// The counters so far.
    fn stats(&self) -> TransportStats;
}

/// Builds the transport `cfg` names over `conns` (conn index = position in the vector).
/// `uring+zc-recv` is probed and refused with [`zero_copy_receive_refusal`]'s error.
pub fn open_transport(cfg: &NetConfig, conns: Vec<Conn>) -> Result<Box<dyn Transport>> {
    cfg.validate()?;
    match cfg.transport {
        TransportKind::Epoll => Ok(Box::new(epoll::EpollTransport::new(cfg, conns)?)),
        TransportKind::UringZcRecv => {
            // Gate by probing: refused with a typed error where the device cannot do it.
            let first = conns.first().map(|c| c.raw());
            Err(zero_copy_receive_refusal(first))
        }
        _ => Ok(Box::new(uring::UringTransport::new(cfg, conns)?)),
    }
}
