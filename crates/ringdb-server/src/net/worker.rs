//! A network worker: one thread, one io_uring, its own listeners (SO_REUSEPORT spreads the
//! accepts over the workers) and the connections they accepted. Accepts are multishot; each
//! connection always has a receive armed while it may read; the replies of a batch leave in
//! one send. A batch that waits for a shard parks as a future and is polled again when its
//! waker queues the connection (`wake.rs`).

use super::conn::{Conn, RECV_BYTES};
use super::wake::{ConnWaker, WakeQueue};
use crate::command::Session;
use crate::exec::{run_batch, BatchOutcome};
use crate::resp::{parse, Limits, Parsed};
use crate::shared::ServerShared;
use io_uring::{opcode, squeue, types, IoUring};
use ringdb::Db;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Entries of a worker's submission queue.
const RING_ENTRIES: u32 = 1024;
/// Requests one batch may take from a connection's input.
const BATCH_REQUESTS_MAX: usize = 1024;
/// How long the ring waits before the worker looks at the shutdown flag again.
const WAIT_TIMEOUT: Duration = Duration::from_millis(100);

const OP_ACCEPT: u64 = 1;
const OP_RECV: u64 = 2;
const OP_SEND: u64 = 3;
const OP_WAKE: u64 = 4;

fn tag(op: u64, slot: u32, generation: u32) -> u64 {
    (op << 56) | (u64::from(generation & 0x00FF_FFFF) << 32) | u64::from(slot)
}

fn untag(data: u64) -> (u64, u32, u32) {
    (data >> 56, ((data >> 32) & 0x00FF_FFFF) as u32, data as u32)
}

/// A worker's state.
pub struct Worker {
    ring: IoUring,
    listeners: Vec<OwnedFd>,
    conns: Vec<Option<Box<Conn>>>,
    free_slots: Vec<u32>,
    next_generation: u32,
    wake: Arc<WakeQueue>,
    /// Written by the kernel while the eventfd read is in flight.
    wake_buffer: Box<u64>,
    db: Db,
    shared: Arc<ServerShared>,
    limits: Limits,
    /// Connections with parsed input or finished batches to look at, and woken hops.
    ready: Vec<(u32, u32)>,
    /// Hops to the shards in progress (`crate::hop`), by index.
    hops: Vec<Option<Hop>>,
    /// Requests a connection may have waiting before the worker stops reading it.
    pending_max: usize,
    /// Unsent replies past which a connection is closed.
    reply_max: usize,
    /// Unsent replies at which a connection's requests wait (and its socket is not read).
    pause_bytes: usize,
    /// How long a waiting connection may read nothing before it is closed.
    stall_timeout: Duration,
    /// When the worker last looked for stalled connections.
    last_stall_check: std::time::Instant,
}

/// A hop in progress.
type Hop = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// The generation that marks a wake as a hop's rather than a connection's.
const HOP: u32 = u32::MAX;

/// The most unsent reply bytes at which a connection's next requests still run.
const PAUSE_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Passes over woken work before the worker enters its ring again.
const PASSES_MAX: usize = 4;

impl Worker {
    /// A worker over `listeners`.
    pub fn new(
        listeners: Vec<OwnedFd>,
        db: Db,
        shared: Arc<ServerShared>,
    ) -> std::io::Result<Worker> {
        let ring = IoUring::new(RING_ENTRIES)?;
        let config = shared.config();
        let limits = Limits {
            max_bulk_bytes: config.max_bulk_bytes,
        };
        Ok(Worker {
            ring,
            listeners,
            conns: Vec::new(),
            free_slots: Vec::new(),
            next_generation: 1,
            wake: Arc::new(WakeQueue::new()?),
            wake_buffer: Box::new(0),
            db,
            shared,
            limits,
            ready: Vec::new(),
            hops: Vec::new(),
            pending_max: config.max_pending_request_bytes,
            reply_max: config.max_reply_bytes,
            pause_bytes: (config.max_reply_bytes / 4).clamp(1, PAUSE_BYTES_MAX),
            stall_timeout: config.reply_stall_timeout,
            last_stall_check: std::time::Instant::now(),
        })
    }

    fn push(&mut self, entry: squeue::Entry) {
        // SAFETY (for every caller): each entry points only at memory owned by the worker or
        // one of its connections (receive buffer, send buffer, eventfd buffer), which stays
        // in place and alive until the entry's completion is reaped: connections are freed
        // only when none of their operations is in flight, and the worker drains its ring
        // before it drops.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            if self.ring.submit().is_err() {
                std::thread::yield_now();
            }
        }
    }

    fn arm_accept(&mut self, index: usize) {
        let fd = self.listeners[index].as_raw_fd();
        let entry = opcode::AcceptMulti::new(types::Fd(fd))
            .build()
            .user_data(tag(OP_ACCEPT, index as u32, 0));
        self.push(entry);
    }

    fn arm_wake(&mut self) {
        let buffer: *mut u64 = &mut *self.wake_buffer;
        let entry = opcode::Read::new(types::Fd(self.wake.eventfd()), buffer.cast(), 8)
            .build()
            .user_data(tag(OP_WAKE, 0, 0));
        self.push(entry);
    }

    /// Serves until the server is asked to stop.
    pub fn run(mut self) -> std::io::Result<()> {
        for index in 0..self.listeners.len() {
            self.arm_accept(index);
        }
        self.arm_wake();
        crate::hop::become_worker(self.db.shard_count());
        let mut woken = Vec::new();
        let mut completions = Vec::new();
        while !self.shared.shutting_down() {
            for _ in 0..PASSES_MAX {
                self.wake.take(&mut woken);
                if woken.is_empty() && self.ready.is_empty() {
                    break;
                }
                self.ready.append(&mut woken);
                self.serve_ready();
                self.start_hops();
            }
            let wait = if self.ready.is_empty() && self.wake.prepare_sleep() {
                1
            } else {
                0
            };
            let timeout = types::Timespec::from(WAIT_TIMEOUT);
            let args = types::SubmitArgs::new().timespec(&timeout);
            match self.ring.submitter().submit_with_args(wait, &args) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
            self.wake.awake();
            self.close_stalled();
            completions.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for (data, result, flags) in completions.drain(..) {
                self.complete(data, result, flags);
            }
        }
        self.drain();
        Ok(())
    }

    fn complete(&mut self, data: u64, result: i32, flags: u32) {
        let (op, generation, slot) = untag(data);
        match op {
            OP_ACCEPT => self.accepted(slot as usize, result, flags),
            OP_WAKE => self.arm_wake(),
            OP_RECV => self.received(slot, generation, result),
            OP_SEND => self.sent(slot, generation, result),
            _ => debug_assert!(false, "unknown completion tag {data:#x}"),
        }
    }

    fn accepted(&mut self, listener: usize, result: i32, flags: u32) {
        if !io_uring::cqueue::more(flags) && !self.shared.shutting_down() {
            self.arm_accept(listener);
        }
        if result < 0 {
            return;
        }
        // SAFETY: the kernel just created this descriptor for us; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(result) };
        self.shared
            .connections_received
            .fetch_add(1, Ordering::Relaxed);
        let max = self.shared.config().max_clients;
        if self.shared.clients.fetch_add(1, Ordering::AcqRel) >= max {
            self.shared.clients.fetch_sub(1, Ordering::AcqRel);
            self.shared
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            let refusal = b"-ERR max number of clients reached\r\n";
            // SAFETY: a best-effort send of a live static buffer on a socket we own.
            unsafe {
                libc::send(
                    fd.as_raw_fd(),
                    refusal.as_ptr().cast(),
                    refusal.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            return;
        }
        let generation = self.next_generation;
        self.next_generation = (self.next_generation + 1) & 0x00FF_FFFF;
        let session = Session::new(
            self.shared.next_client_id(),
            self.shared.password().is_some(),
            peer_of(&fd),
        );
        let conn = Box::new(Conn::new(fd, generation, session));
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.conns[slot as usize] = Some(conn);
                slot
            }
            None => {
                self.conns.push(Some(conn));
                (self.conns.len() - 1) as u32
            }
        };
        self.arm_recv(slot);
    }

    fn conn(&mut self, slot: u32, generation: u32) -> Option<&mut Conn> {
        self.conns
            .get_mut(slot as usize)?
            .as_deref_mut()
            .filter(|conn| conn.generation == generation)
    }

    fn arm_recv(&mut self, slot: u32) {
        let Some(conn) = self.conns[slot as usize].as_deref_mut() else {
            return;
        };
        if conn.recv_in_flight || conn.dead || conn.close_after_send {
            return;
        }
        conn.recv_in_flight = true;
        let entry = opcode::Recv::new(
            types::Fd(conn.raw()),
            conn.recv_buffer.as_mut_ptr(),
            RECV_BYTES as u32,
        )
        .build()
        .user_data(tag(OP_RECV, slot, conn.generation));
        self.push(entry);
    }

    fn received(&mut self, slot: u32, generation: u32, result: i32) {
        let Some(conn) = self.conn(slot, generation) else {
            return;
        };
        conn.recv_in_flight = false;
        if result <= 0 {
            conn.dead = true;
            conn.running = None;
            self.release_if_idle(slot);
            return;
        }
        let length = result as usize;
        debug_assert!(length <= RECV_BYTES);
        conn.input.extend_from_slice(&conn.recv_buffer[..length]);
        self.ready.push((slot, generation));
        self.resume_reading(slot, generation);
    }

    fn sent(&mut self, slot: u32, generation: u32, result: i32) {
        let Some(conn) = self.conn(slot, generation) else {
            return;
        };
        conn.send_in_flight = false;
        if result < 0 {
            conn.kill();
            self.release_if_idle(slot);
            return;
        }
        conn.sent += result as usize;
        if result > 0 {
            conn.send_progress_at = std::time::Instant::now();
        }
        debug_assert!(conn.sent <= conn.sending.len());
        self.start_send(slot);
        self.ready.push((slot, generation));
        self.resume_reading(slot, generation);
    }

    /// Sends what is waiting, if no send is in flight.
    fn start_send(&mut self, slot: u32) {
        let Some(conn) = self.conns[slot as usize].as_deref_mut() else {
            return;
        };
        if conn.send_in_flight || conn.dead {
            return;
        }
        if conn.sent == conn.sending.len() {
            conn.sending.clear();
            conn.sent = 0;
            std::mem::swap(&mut conn.sending, &mut conn.replies);
        }
        if conn.sending.is_empty() {
            if conn.close_after_send {
                conn.kill();
                self.release_if_idle(slot);
            }
            return;
        }
        conn.send_in_flight = true;
        let rest = &conn.sending[conn.sent..];
        let entry = opcode::Send::new(types::Fd(conn.raw()), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(tag(OP_SEND, slot, conn.generation));
        self.push(entry);
    }

    /// Frees a dead connection once the kernel holds none of its buffers.
    fn release_if_idle(&mut self, slot: u32) {
        let Some(conn) = self.conns[slot as usize].as_deref_mut() else {
            return;
        };
        if !conn.dead {
            return;
        }
        if !conn.in_flight() {
            self.conns[slot as usize] = None;
            self.free_slots.push(slot);
            self.shared.clients.fetch_sub(1, Ordering::AcqRel);
        } else {
            // SAFETY: shutdown on a descriptor the connection owns: its operations end.
            unsafe { libc::shutdown(conn.raw(), libc::SHUT_RDWR) };
        }
    }

    /// Polls finished or woken batches and starts new ones from parsed input.
    fn serve_ready(&mut self) {
        let mut ready = std::mem::take(&mut self.ready);
        ready.sort_unstable();
        ready.dedup();
        for (slot, generation) in ready.drain(..) {
            if generation == HOP {
                self.poll_hop(slot as usize);
            } else if self.conn(slot, generation).is_some() {
                self.advance(slot, generation);
            }
        }
        debug_assert!(ready.is_empty());
        self.ready = ready;
    }

    /// Starts this turn's hops to the shards (the groups the batches just queued).
    fn start_hops(&mut self) {
        for hop in crate::hop::take_hops(&self.db, &self.shared.store) {
            let index = match self.hops.iter().position(Option::is_none) {
                Some(index) => index,
                None => {
                    self.hops.push(None);
                    self.hops.len() - 1
                }
            };
            self.hops[index] = Some(hop);
            self.poll_hop(index);
        }
    }

    /// Polls hop `index`; a finished hop has woken the batches it answered.
    fn poll_hop(&mut self, index: usize) {
        let waker = Waker::from(Arc::new(ConnWaker {
            queue: self.wake.clone(),
            slot: index as u32,
            generation: HOP,
        }));
        let Some(Some(hop)) = self.hops.get_mut(index) else {
            return;
        };
        if hop
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            self.hops[index] = None;
        }
    }

    /// Moves one connection on: its running batch polled, replies sent, the next batch begun.
    fn advance(&mut self, slot: u32, generation: u32) {
        // Each pass either finishes a batch or leaves; a batch consumes input, so the passes
        // are bounded by the requests waiting.
        let pause = self.pause_bytes;
        for _ in 0..BATCH_REQUESTS_MAX {
            let Some(conn) = self.conn(slot, generation) else {
                return;
            };
            if conn.dead {
                return;
            }
            // Replies the client has not taken yet pause its requests (and its socket).
            if conn.running.is_none() && conn.unsent_bytes() >= pause {
                break;
            }
            if conn.running.is_none() && !self.start_batch(slot, generation) {
                break;
            }
            match self.poll_batch(slot, generation) {
                Some(outcome) => self.finish_batch(slot, generation, outcome),
                None => return,
            }
        }
        self.start_send(slot);
        self.check_reply_limit(slot, generation);
    }

    /// Parses the waiting input into a batch and makes it the running one; false if there
    /// was no whole request.
    fn start_batch(&mut self, slot: u32, generation: u32) -> bool {
        let limits = self.limits;
        let (db, shared) = (self.db.clone(), self.shared.clone());
        let budget = self.pause_bytes;
        let Some(conn) = self.conn(slot, generation) else {
            return false;
        };
        if conn.close_after_send || conn.session.is_none() {
            return false;
        }
        if !conn.parked.is_empty() {
            let requests = std::mem::take(&mut conn.parked);
            let session = conn.session.take().expect("checked above");
            conn.running = Some(Box::pin(run_batch(db, shared, session, requests, budget)));
            return true;
        }
        let mut requests = Vec::new();
        let mut used = 0;
        while requests.len() < BATCH_REQUESTS_MAX {
            match parse(&conn.input[used..], &limits) {
                Ok(Parsed::Request(arguments, length)) => {
                    requests.push(arguments);
                    used += length;
                }
                Ok(Parsed::Skip(length)) => used += length,
                Ok(Parsed::Incomplete) => break,
                Err(error) => {
                    shared.protocol_errors.fetch_add(1, Ordering::Relaxed);
                    conn.close_after_send = true;
                    conn.input.clear();
                    used = 0;
                    if requests.is_empty() {
                        conn.replies
                            .extend_from_slice(format!("-ERR {error}\r\n").as_bytes());
                        return false;
                    }
                    break;
                }
            }
        }
        conn.input.drain(..used);
        if requests.is_empty() {
            return false;
        }
        let session = conn.session.take().expect("checked above");
        conn.running = Some(Box::pin(run_batch(db, shared, session, requests, budget)));
        true
    }

    fn poll_batch(&mut self, slot: u32, generation: u32) -> Option<BatchOutcome> {
        let waker = Waker::from(Arc::new(ConnWaker {
            queue: self.wake.clone(),
            slot,
            generation,
        }));
        let conn = self.conn(slot, generation)?;
        let running = conn.running.as_mut()?;
        match running.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(outcome) => {
                conn.running = None;
                Some(outcome)
            }
            Poll::Pending => None,
        }
    }

    fn finish_batch(&mut self, slot: u32, generation: u32, outcome: BatchOutcome) {
        let Some(conn) = self.conn(slot, generation) else {
            return;
        };
        conn.session = Some(outcome.session);
        conn.replies.extend_from_slice(&outcome.replies);
        conn.parked = outcome.leftover;
        if outcome.close {
            conn.close_after_send = true;
        }
        self.resume_reading(slot, generation);
    }

    /// Closes the connections that wait for their client to read and have read nothing for
    /// the stall timeout (looked at once per wait timeout at most).
    fn close_stalled(&mut self) {
        let now = std::time::Instant::now();
        if now.duration_since(self.last_stall_check) < WAIT_TIMEOUT.min(self.stall_timeout) {
            return;
        }
        self.last_stall_check = now;
        for slot in 0..self.conns.len() as u32 {
            let pause = self.pause_bytes;
            let Some(conn) = self.conns[slot as usize].as_deref_mut() else {
                continue;
            };
            let stalled = conn.unsent_bytes() >= pause
                && now.duration_since(conn.send_progress_at) > self.stall_timeout;
            if stalled && !conn.dead {
                conn.kill();
                self.shared
                    .output_limit_closes
                    .fetch_add(1, Ordering::Relaxed);
                self.release_if_idle(slot);
            }
        }
    }

    /// Arms the receive again once the connection has room for more requests.
    fn resume_reading(&mut self, slot: u32, generation: u32) {
        let (pending_max, pause) = (self.pending_max, self.pause_bytes);
        let Some(conn) = self.conn(slot, generation) else {
            return;
        };
        let room =
            conn.input.len() < pending_max && conn.unsent_bytes() < pause && conn.parked.is_empty();
        if !conn.recv_in_flight && room {
            self.arm_recv(slot);
        }
    }

    /// A client that does not read its replies is disconnected past the limit.
    fn check_reply_limit(&mut self, slot: u32, generation: u32) {
        let limit = self.reply_max;
        let Some(conn) = self.conn(slot, generation) else {
            return;
        };
        if conn.unsent_bytes() > limit {
            conn.kill();
            self.shared
                .output_limit_closes
                .fetch_add(1, Ordering::Relaxed);
            self.release_if_idle(slot);
        }
    }

    /// At shutdown: ends every connection and waits for the kernel to give back every buffer.
    fn drain(&mut self) {
        for slot in 0..self.conns.len() as u32 {
            if let Some(conn) = self.conns[slot as usize].as_deref_mut() {
                conn.kill();
            }
        }
        // Bounded: each connection has at most two operations in flight, each ends once its
        // socket is shut down.
        for _ in 0..1000 {
            let busy = self.conns.iter().flatten().any(|conn| conn.in_flight());
            if !busy {
                break;
            }
            let _ = self.ring.submit_and_wait(1);
            let done: Vec<_> = self.ring.completion().map(|c| c.user_data()).collect();
            for data in done {
                let (op, generation, slot) = untag(data);
                if let Some(conn) = self.conn(slot, generation) {
                    match op {
                        OP_RECV => conn.recv_in_flight = false,
                        OP_SEND => conn.send_in_flight = false,
                        _ => {}
                    }
                }
            }
        }
    }
}

fn peer_of(fd: &OwnedFd) -> String {
    // SAFETY: getpeername writes at most `length` bytes into the zeroed storage we own.
    unsafe {
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let mut length = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        if libc::getpeername(
            fd.as_raw_fd(),
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut length,
        ) != 0
        {
            return String::new();
        }
        match i32::from(storage.ss_family) {
            libc::AF_INET => {
                let v4 = &*(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
                format!("{ip}:{}", u16::from_be(v4.sin_port))
            }
            libc::AF_INET6 => {
                let v6 = &*(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                let ip = std::net::Ipv6Addr::from(v6.sin6_addr.s6_addr);
                format!("[{ip}]:{}", u16::from_be(v6.sin6_port))
            }
            _ => "unix".to_string(),
        }
    }
}
