//! io_uring transports: `uring` (SEND/RECV, or WRITE_FIXED/READ_FIXED with `regbufs`),
//! `uring+zc-send` (SEND_ZC from a registered buffer, slot reused only after its notification)
//! and `uring+multishot` (one multishot RECV per connection drawing from a provided-buffer ring).
//!
//! Ownership rule: memory named in an SQE belongs to the kernel until that SQE's last CQE (for
//! SEND_ZC: the notification; for multishot: the CQE without `IORING_CQE_F_MORE`). `inflight`
//! counts those; `Drop` cancels everything and waits for them, and leaks the memory instead of
//! freeing it if the kernel does not answer in time.

use super::{Event, Handler, Transport, TransportStats};
use crate::config::{NetConfig, TransportKind};
use crate::error::{CloseStage, NetError, NetSetting, NetSwitch, Result};
use crate::sys::{incoming_napi_id, set_nonblocking, Conn, Region, SlotPool};
use io_uring::{cqueue, opcode, squeue, types};
use ringdb_io::{Ring, RingSetup};
use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

// uapi constants the io-uring crate keeps private (include/uapi/linux/io_uring.h).
const IORING_RECVSEND_POLL_FIRST: u16 = 1 << 0;
const IORING_RECV_MULTISHOT: u16 = 1 << 1;
const IORING_SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
const IORING_NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;

const OP_SEND: u64 = 1;
const OP_RECV: u64 = 2;
const OP_RECV_MULTI: u64 = 3;
const OP_SEND_ZC: u64 = 4;
const OP_CANCEL: u64 = 5;

/// Buffer indexes in the registered-buffer table.
const REG_SEND: u16 = 0;
const REG_RECV: u16 = 1;
const BGID: u16 = 0;

fn ud(op: u64, conn: usize, slot: u32) -> u64 {
    (op << 56) | ((conn as u64 & 0xff_ffff) << 32) | slot as u64
}

fn ud_split(u: u64) -> (u64, usize, u32) {
    (u >> 56, ((u >> 32) & 0xff_ffff) as usize, u as u32)
}

struct Inflight {
    slot: u32,
    off: usize,
    len: usize,
}

struct UConn {
    conn: Conn,
    fixed: Option<u32>,
    queue: VecDeque<(u32, usize)>,
    cur: Option<Inflight>,
    recv_armed: bool,
    closed: bool,
}

/// Provided-buffer ring (`IORING_REGISTER_PBUF_RING`): `entries` buffers of `size` bytes.
struct BufRing {
    ring: Region,
    bufs: Region,
    entries: u16,
    size: usize,
    tail: u16,
}

impl BufRing {
    /// Maps `cfg.recv_bufs` provided buffers, registers their ring with `ring` and hands every
    /// buffer to the kernel.
    fn register(ring: &Ring, cfg: &NetConfig) -> Result<BufRing> {
        let entries = cfg.recv_bufs as u16;
        let ring_memory =
            Region::new(entries as usize * std::mem::size_of::<types::BufRingEntry>())?;
        let bufs = Region::new(entries as usize * cfg.recv_buf_size)?;
        let mut buffer_ring = BufRing {
            ring: ring_memory,
            bufs,
            entries,
            size: cfg.recv_buf_size,
            tail: 0,
        };
        // SAFETY: the ring memory is page-aligned, holds `entries` entries and stays mapped
        // until the ring is gone (BufRing lives in the transport, dropped after the drain in
        // Drop).
        unsafe {
            ring.uring().submitter().register_buf_ring_with_flags(
                buffer_ring.ring.as_ptr() as u64,
                entries,
                BGID,
                0,
            )
        }
        .map_err(|e| NetError::io("IORING_REGISTER_PBUF_RING", e))?;
        for bid in 0..entries {
            buffer_ring.push(bid);
        }
        buffer_ring.publish();
        Ok(buffer_ring)
    }

    fn push(&mut self, bid: u16) {
        let mask = self.entries - 1;
        let idx = (self.tail & mask) as usize;
        let base = self.ring.as_ptr() as *mut types::BufRingEntry;
        // SAFETY: idx < entries, and the ring region holds `entries` BufRingEntry values; the
        // kernel reads an entry only after the tail store below publishes it.
        unsafe {
            let e = &mut *base.add(idx);
            e.set_addr(self.bufs.as_ptr().add(bid as usize * self.size) as u64);
            e.set_len(self.size as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        let base = self.ring.as_ptr() as *const types::BufRingEntry;
        // SAFETY: the tail field lives in entry 0 of our mapping; the kernel reads it
        // concurrently, so it is written with a release store.
        unsafe {
            let tail = types::BufRingEntry::tail(base) as *const std::sync::atomic::AtomicU16;
            (*tail).store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }
}

pub struct UringTransport {
    // Declared first: dropped (after the explicit drain in Drop) before the memory below.
    ring: Ring,
    kind: TransportKind,
    conns: Vec<UConn>,
    pool: SlotPool,
    /// Per slot: SEND_ZC notifications still due, the lengths they cover, and whether the send
    /// itself finished (a slot goes back to the pool when both are done).
    zc_pending: Vec<VecDeque<u32>>,
    zc_sent: Vec<bool>,
    recv: Option<Region>,
    recv_size: usize,
    bufring: Option<BufRing>,
    reg_bufs: bool,
    poll_first: bool,
    io_timeout: Duration,
    inflight: usize,
    /// Set by Drop: nothing new is issued while the ring drains.
    closing: bool,
    done: VecDeque<usize>,
    cqes: Vec<(u64, i32, u32)>,
    stats: TransportStats,
}

impl UringTransport {
    pub fn new(cfg: &NetConfig, conns: Vec<Conn>) -> Result<Self> {
        // Connection indexes travel in 24 bits of the user data.
        NetError::check_range(NetSetting::ConnectionsPerRing, conns.len(), 0, 0xff_ffff)?;
        let ring = Ring::new(&RingSetup {
            mode: cfg.setup,
            sqpoll: cfg.sqpoll,
            single_issuer: true,
            completion_entries: Some((cfg.ring_entries * 4).max(conns.len() as u32 * 8)),
            ..RingSetup::new(cfg.ring_entries)
        })?;
        let kind = cfg.transport;
        let reg_bufs = cfg.reg_bufs || kind == TransportKind::UringZcSend;
        let pool = SlotPool::new(cfg.send_buf_size, cfg.send_bufs)?;
        let (recv, bufring) = if kind == TransportKind::UringMultishot {
            (None, Some(BufRing::register(&ring, cfg)?))
        } else {
            let recv = Region::new(cfg.recv_buf_size * conns.len().max(1))?;
            (Some(recv), None)
        };
        if reg_bufs {
            register_memory(&ring, &pool, recv.as_ref())?;
        }
        let conns = prepare_connections(&ring, cfg, conns)?;
        let slots = cfg.send_bufs;
        Ok(UringTransport {
            ring,
            kind,
            conns,
            pool,
            zc_pending: (0..slots).map(|_| VecDeque::new()).collect(),
            zc_sent: vec![false; slots],
            recv,
            recv_size: cfg.recv_buf_size,
            bufring,
            reg_bufs,
            poll_first: cfg.poll_first,
            io_timeout: cfg.io_timeout,
            inflight: 0,
            closing: false,
            done: VecDeque::new(),
            cqes: Vec::with_capacity(256),
            stats: TransportStats::default(),
        })
    }

    fn push_sqe(&mut self, e: squeue::Entry) -> Result<()> {
        // SAFETY: every entry built in this file points at memory owned by self (slots,
        // receive regions, the buffer ring) that stays valid until its last CQE is reaped;
        // `inflight` tracks those and Drop waits for them. A full SQ is the core's to wait out.
        unsafe { self.ring.push(&e) }?;
        self.inflight += 1;
        Ok(())
    }

    fn prio(&self) -> u16 {
        if self.poll_first {
            IORING_RECVSEND_POLL_FIRST
        } else {
            0
        }
    }

    /// Issues the next piece of `i`'s current send.
    fn issue_send(&mut self, i: usize) -> Result<()> {
        let Some(cur) = &self.conns[i].cur else {
            return Ok(());
        };
        if self.closing {
            return Ok(());
        }
        let (slot, off, len) = (cur.slot, cur.off, cur.len);
        let p = self.pool.ptr(slot, off);
        let n = (len - off) as u32;
        let raw = self.conns[i].conn.raw();
        let fixed = self.conns[i].fixed;
        let prio = self.prio();
        let e = match self.kind {
            TransportKind::UringZcSend => {
                let zc = prio | IORING_SEND_ZC_REPORT_USAGE;
                let mk = |e: opcode::SendZc| {
                    e.buf_index(Some(REG_SEND))
                        .zc_flags(zc)
                        .flags(libc::MSG_NOSIGNAL)
                        .build()
                        .user_data(ud(OP_SEND_ZC, i, slot))
                };
                match fixed {
                    Some(f) => mk(opcode::SendZc::new(types::Fixed(f), p, n)),
                    None => mk(opcode::SendZc::new(types::Fd(raw), p, n)),
                }
            }
            _ if self.reg_bufs => {
                let u = ud(OP_SEND, i, slot);
                match fixed {
                    Some(f) => opcode::WriteFixed::new(types::Fixed(f), p, n, REG_SEND)
                        .offset(u64::MAX)
                        .build()
                        .user_data(u),
                    None => opcode::WriteFixed::new(types::Fd(raw), p, n, REG_SEND)
                        .offset(u64::MAX)
                        .build()
                        .user_data(u),
                }
            }
            _ => {
                let u = ud(OP_SEND, i, slot);
                match fixed {
                    Some(f) => opcode::Send::new(types::Fixed(f), p, n)
                        .flags(libc::MSG_NOSIGNAL)
                        .ioprio(prio)
                        .build()
                        .user_data(u),
                    None => opcode::Send::new(types::Fd(raw), p, n)
                        .flags(libc::MSG_NOSIGNAL)
                        .ioprio(prio)
                        .build()
                        .user_data(u),
                }
            }
        };
        self.push_sqe(e)
    }

    fn start_next_send(&mut self, i: usize) -> Result<()> {
        if self.conns[i].cur.is_some() {
            return Ok(());
        }
        if let Some((slot, len)) = self.conns[i].queue.pop_front() {
            self.conns[i].cur = Some(Inflight { slot, off: 0, len });
            self.issue_send(i)?;
        }
        Ok(())
    }

    fn arm_recv(&mut self, i: usize) -> Result<()> {
        let c = &self.conns[i];
        if c.recv_armed || c.closed || self.closing {
            return Ok(());
        }
        let raw = c.conn.raw();
        let fixed = c.fixed;
        let prio = self.prio();
        let e = if self.kind == TransportKind::UringMultishot {
            let u = ud(OP_RECV_MULTI, i, 0);
            let mk = |e: opcode::Recv| {
                e.buf_group(BGID)
                    .ioprio(IORING_RECV_MULTISHOT | prio)
                    .build()
                    .flags(squeue::Flags::BUFFER_SELECT)
                    .user_data(u)
            };
            match fixed {
                Some(f) => mk(opcode::Recv::new(types::Fixed(f), std::ptr::null_mut(), 0)),
                None => mk(opcode::Recv::new(types::Fd(raw), std::ptr::null_mut(), 0)),
            }
        } else {
            let region = self.recv.as_ref().expect("single-shot receive memory");
            // SAFETY: conn i's receive area lies inside the region (conns x recv_size bytes).
            let p = unsafe { region.as_ptr().add(i * self.recv_size) };
            let n = self.recv_size as u32;
            let u = ud(OP_RECV, i, 0);
            if self.reg_bufs {
                match fixed {
                    Some(f) => opcode::ReadFixed::new(types::Fixed(f), p, n, REG_RECV)
                        .offset(u64::MAX)
                        .build()
                        .user_data(u),
                    None => opcode::ReadFixed::new(types::Fd(raw), p, n, REG_RECV)
                        .offset(u64::MAX)
                        .build()
                        .user_data(u),
                }
            } else {
                match fixed {
                    Some(f) => opcode::Recv::new(types::Fixed(f), p, n)
                        .ioprio(prio)
                        .build()
                        .user_data(u),
                    None => opcode::Recv::new(types::Fd(raw), p, n)
                        .ioprio(prio)
                        .build()
                        .user_data(u),
                }
            }
        };
        self.conns[i].recv_armed = true;
        self.push_sqe(e)
    }

    /// Submits queued SQEs and, if `wait` and nothing is ready, waits up to `wait`. Running
    /// out of time is not an error (the caller's deadline decides).
    fn enter(&mut self, wait: Option<Duration>) -> Result<()> {
        match wait {
            Some(timeout) => self.ring.submit_and_wait_timeout(1, timeout)?,
            None => self.ring.submit_and_collect()?,
        };
        Ok(())
    }

    fn peer_err(&self, i: usize, errno: i32) -> NetError {
        NetError::Peer {
            conn: i,
            peer: self
                .conns
                .get(i)
                .map(|c| c.conn.peer.clone())
                .unwrap_or_default(),
            source: io::Error::from_raw_os_error(errno),
        }
    }

    fn release_zc_slot_if_done(&mut self, slot: u32) {
        let s = slot as usize;
        if self.zc_sent[s] && self.zc_pending[s].is_empty() {
            self.zc_sent[s] = false;
            self.pool.free(slot);
        }
    }

    /// Send-side completion (SEND, WRITE_FIXED, SEND_ZC result).
    fn on_send(&mut self, i: usize, slot: u32, res: i32, more: bool) -> Result<()> {
        let zc = self.kind == TransportKind::UringZcSend;
        if zc && more {
            // A notification will follow; until then the kernel may still read the slot.
            self.zc_pending[slot as usize].push_back(res.max(0) as u32);
        } else {
            self.inflight -= 1;
        }
        if res < 0 {
            if res == -libc::EAGAIN || res == -libc::EINTR {
                return self.issue_send(i);
            }
            return Err(self.peer_err(i, -res));
        }
        let n = res as usize;
        self.stats.bytes_sent += n as u64;
        self.stats.send_ops += 1;
        let cur = self.conns[i].cur.as_mut().expect("a send in flight");
        debug_assert_eq!(cur.slot, slot);
        cur.off += n;
        if cur.off < cur.len {
            self.stats.short_sends += 1;
            if n == 0 {
                return Err(self.peer_err(i, libc::EPIPE));
            }
            return self.issue_send(i);
        }
        self.conns[i].cur = None;
        if zc {
            self.zc_sent[slot as usize] = true;
            self.release_zc_slot_if_done(slot);
        } else {
            self.pool.free(slot);
        }
        self.done.push_back(i);
        self.start_next_send(i)
    }

    fn dispatch(&mut self, u: u64, res: i32, flags: u32, h: &mut Handler<'_>) -> Result<usize> {
        let (op, i, slot) = ud_split(u);
        let more = cqueue::more(flags);
        match op {
            OP_SEND => self.on_send(i, slot, res, false).map(|_| 0),
            OP_SEND_ZC if cqueue::notif(flags) => {
                self.on_zc_notification(slot, res);
                Ok(0)
            }
            OP_SEND_ZC => self.on_send(i, slot, res, more).map(|_| 0),
            OP_RECV => self.on_recv(i, res, h),
            OP_RECV_MULTI => self.on_recv_multishot(i, res, flags, h),
            OP_CANCEL => {
                self.inflight -= 1;
                Ok(0)
            }
            _ => Ok(0),
        }
    }

    /// A SEND_ZC notification: the kernel no longer reads the slot's memory.
    fn on_zc_notification(&mut self, slot: u32, res: i32) {
        self.inflight -= 1;
        self.stats.zc_notifs += 1;
        let part = self.zc_pending[slot as usize].pop_front().unwrap_or(0);
        if res as u32 & IORING_NOTIF_USAGE_ZC_COPIED != 0 {
            self.stats.zc_copied_notifs += 1;
            self.stats.zc_copied_bytes += part as u64;
        }
        self.release_zc_slot_if_done(slot);
    }

    /// A single-shot receive into connection `i`'s area; re-armed unless the peer closed.
    fn on_recv(&mut self, i: usize, res: i32, h: &mut Handler<'_>) -> Result<usize> {
        self.inflight -= 1;
        self.conns[i].recv_armed = false;
        if res < 0 {
            if res == -libc::EAGAIN || res == -libc::EINTR || res == -libc::ENOBUFS {
                return self.arm_recv(i).map(|_| 0);
            }
            return Err(self.peer_err(i, -res));
        }
        let n = res as usize;
        self.stats.recv_ops += 1;
        if n == 0 && !self.conns[i].conn.datagram {
            self.conns[i].closed = true;
            h(Event::Closed { conn: i })?;
            return Ok(1);
        }
        self.stats.bytes_recv += n as u64;
        let region = self.recv.as_ref().expect("single-shot receive memory");
        h(Event::Recv {
            conn: i,
            data: region.slice(i * self.recv_size, n),
        })?;
        self.arm_recv(i)?;
        Ok(1)
    }

    /// One completion of a multishot receive: data in a provided buffer (given back to the
    /// ring once handled), and, on the last completion, a re-arm or the end of the stream.
    fn on_recv_multishot(
        &mut self,
        i: usize,
        res: i32,
        flags: u32,
        h: &mut Handler<'_>,
    ) -> Result<usize> {
        let more = cqueue::more(flags);
        if !more {
            self.inflight -= 1;
            self.conns[i].recv_armed = false;
        }
        let mut n_ev = 0;
        if let Some(bid) = cqueue::buffer_select(flags) {
            let n = res.max(0) as usize;
            let br = self.bufring.as_mut().expect("buffer ring");
            let r = if n > 0 || self.conns[i].conn.datagram {
                self.stats.bytes_recv += n as u64;
                self.stats.recv_ops += 1;
                n_ev += 1;
                h(Event::Recv {
                    conn: i,
                    data: br.bufs.slice(bid as usize * br.size, n),
                })
            } else {
                Ok(())
            };
            // The data has been consumed: the buffer goes back to the ring.
            br.push(bid);
            br.publish();
            r?;
        }
        if more {
            return Ok(n_ev);
        }
        if res == 0 && !self.conns[i].conn.datagram {
            self.conns[i].closed = true;
            h(Event::Closed { conn: i })?;
            return Ok(n_ev + 1);
        }
        if res < 0 && res != -libc::ENOBUFS && res != -libc::EAGAIN && res != -libc::EINTR {
            return Err(self.peer_err(i, -res));
        }
        self.stats.multishot_rearms += 1;
        self.arm_recv(i)?;
        Ok(n_ev)
    }

    /// Reaps every ready CQE. All are processed even when one fails, so the in-flight
    /// accounting stays exact; the first error is returned.
    fn reap(&mut self, h: &mut Handler<'_>) -> Result<usize> {
        let mut n_ev = 0;
        let mut first_err = None;
        loop {
            self.cqes.clear();
            self.cqes.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            if self.cqes.is_empty() {
                break;
            }
            let batch = std::mem::take(&mut self.cqes);
            for &(u, res, flags) in &batch {
                match self.dispatch(u, res, flags, h) {
                    Ok(n) => n_ev += n,
                    Err(e) => {
                        if first_err.is_none() {
                            first_err = Some(e);
                        }
                    }
                }
            }
            self.cqes = batch;
        }
        while let Some(c) = self.done.pop_front() {
            n_ev += 1;
            if let Err(e) = h(Event::SendDone { conn: c }) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(n_ev),
        }
    }
}

/// Registers the send slots and the receive area as fixed buffers (`REG_SEND`, `REG_RECV`).
fn register_memory(ring: &Ring, pool: &SlotPool, recv: Option<&Region>) -> Result<()> {
    let mut iov = vec![libc::iovec {
        iov_base: pool.region.as_ptr() as *mut libc::c_void,
        iov_len: pool.region.len(),
    }];
    if let Some(r) = recv {
        iov.push(libc::iovec {
            iov_base: r.as_ptr() as *mut libc::c_void,
            iov_len: r.len(),
        });
    }
    // SAFETY: both regions stay mapped for the life of the ring (they are fields of the
    // transport, and its Drop drains the ring before they go).
    unsafe { ring.register_buffers(&iov) }?;
    Ok(())
}

/// Puts the sockets in blocking mode (io_uring arms its own poll; O_NONBLOCK would leak EAGAIN
/// to us), registers them when asked, and turns on NAPI busy poll when asked.
fn prepare_connections(ring: &Ring, cfg: &NetConfig, conns: Vec<Conn>) -> Result<Vec<UConn>> {
    let mut uconns = Vec::with_capacity(conns.len());
    for c in conns {
        set_nonblocking(c.raw(), false)?;
        uconns.push(UConn {
            conn: c,
            fixed: None,
            queue: VecDeque::new(),
            cur: None,
            recv_armed: false,
            closed: false,
        });
    }
    if cfg.reg_files {
        let fds: Vec<i32> = uconns.iter().map(|c| c.conn.raw()).collect();
        ring.register_files(&fds)?;
        for (i, c) in uconns.iter_mut().enumerate() {
            c.fixed = Some(i as u32);
        }
    }
    if cfg.napi {
        check_napi(&uconns)?;
        let mut napi = types::Napi::new()
            .set_busy_poll_timeout(50)
            .set_prefer_busy_poll(true);
        ring.uring()
            .submitter()
            .register_napi(&mut napi)
            .map_err(|e| NetError::io("IORING_REGISTER_NAPI", e))?;
    }
    Ok(uconns)
}

/// NAPI busy poll needs a device queue with a NAPI context; loopback and veth have none (the
/// socket's incoming NAPI id stays 0), so the switch is refused there.
fn check_napi(conns: &[UConn]) -> Result<()> {
    for c in conns {
        let id = incoming_napi_id(c.conn.raw())
            .map_err(|e| NetError::io("getsockopt SO_INCOMING_NAPI_ID", e))?;
        if id == 0 {
            return Err(NetError::Unsupported {
                switch: NetSwitch::Napi,
                reason: format!(
                    "the connection to {} has no NAPI context (SO_INCOMING_NAPI_ID = 0): loopback and veth do not busy-poll a device queue",
                    c.conn.peer
                ),
            });
        }
    }
    Ok(())
}

impl Transport for UringTransport {
    fn kind(&self) -> TransportKind {
        self.kind
    }

    fn num_conns(&self) -> usize {
        self.conns.len()
    }

    fn slot_size(&self) -> usize {
        self.pool.slot_size
    }

    fn alloc(&mut self) -> Option<u32> {
        self.pool.alloc()
    }

    fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        self.pool.slot_mut(slot)
    }

    fn send(&mut self, conn: usize, slot: u32, len: usize) -> Result<()> {
        NetError::check_range(NetSetting::SendLength, len, 1, self.pool.slot_size)?;
        if self.conns[conn].closed {
            return Err(NetError::PeerClosed {
                peer: self.conns[conn].conn.peer.clone(),
                when: CloseStage::BeforeSend,
            });
        }
        self.conns[conn].queue.push_back((slot, len));
        self.start_next_send(conn)
    }

    fn pending_sends(&self) -> usize {
        self.conns
            .iter()
            .map(|c| c.queue.len() + c.cur.is_some() as usize)
            .sum::<usize>()
            + self.done.len()
    }

    fn poll(&mut self, timeout: Option<Duration>, h: &mut Handler<'_>) -> Result<usize> {
        for i in 0..self.conns.len() {
            self.arm_recv(i)?;
        }
        let wait = timeout.unwrap_or(self.io_timeout);
        let wait = if self.done.is_empty() {
            wait
        } else {
            Duration::ZERO
        };
        self.enter(Some(wait))?;
        self.reap(h)
    }

    fn stats(&self) -> TransportStats {
        TransportStats {
            syscalls: self.ring.stats().enters,
            ..self.stats
        }
    }
}

impl Drop for UringTransport {
    fn drop(&mut self) {
        self.closing = true;
        if self.inflight > 0 {
            let e = opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(ud(OP_CANCEL, 0, 0));
            let _ = self.push_sqe(e);
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut ignore = |_: Event<'_>| Ok(());
            while self.inflight > 0 && Instant::now() < deadline {
                if self.enter(Some(Duration::from_millis(50))).is_err() {
                    break;
                }
                let _ = self.reap(&mut ignore);
            }
        }
        if self.inflight > 0 {
            // The kernel may still write into this memory: never free it.
            std::mem::replace(&mut self.pool.region, Region::empty()).leak();
            if let Some(r) = self.recv.take() {
                r.leak();
            }
            if let Some(br) = self.bufring.take() {
                br.ring.leak();
                br.bufs.leak();
            }
        }
    }
}
