//! A network worker: one thread, one io_uring, its own listeners (SO_REUSEPORT spreads the
//! accepts over the workers) and the connections they accepted. Accepts are multishot; each
//! connection has a receive armed while it may read: multishot, into the worker's provided
//! buffers (`provided.rs`), or where the kernel lacks those, one at a time into a buffer of the
//! connection's own. The replies of a batch leave in one send. A batch that waits for a shard
//! parks as a future and is polled again when its waker queues the connection (`wake.rs`).
//!
//! The ring defers its task work to this thread's own enters (`DEFER_TASKRUN`, with
//! `SINGLE_ISSUER`): completions are posted in batches when the worker asks, never by an
//! interrupt while it parses or runs commands. A kernel that refuses it gets a plain ring;
//! where io_uring is blocked altogether, the same operations run on epoll (`transport.rs`).

use super::conn::{Conn, RECV_BYTES};
use super::provided::{self, ProvidedBuffers};
use super::transport::{NetOp, Transport};
use super::wake::{ConnWaker, WakeQueue};
use crate::command::Session;
use crate::exec::{run_batch, BatchOutcome};
use crate::resp::{parse, Limits, Parsed};
use crate::shared::ServerShared;
use io_uring::cqueue;
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
const OP_CANCEL: u64 = 5;
const OP_TICK: u64 = 6;

/// Provided buffers per worker (a power of two), and the bytes of each: what arrives on all
/// the worker's connections between two turns of its loop.
const PROVIDED_COUNT: u16 = 512;
const PROVIDED_BYTES: usize = 4096;

fn tag(op: u64, slot: u32, generation: u32) -> u64 {
    (op << 56) | (u64::from(generation & 0x00FF_FFFF) << 32) | u64::from(slot)
}

fn untag(data: u64) -> (u64, u32, u32) {
    (data >> 56, ((data >> 32) & 0x00FF_FFFF) as u32, data as u32)
}

/// A worker's state.
pub struct Worker {
    transport: Transport,
    /// Where multishot receives land; `None` where the kernel has no provided-buffer rings.
    provided: Option<ProvidedBuffers>,
    /// Receives are multishot (cleared if the kernel refuses them: before 6.0).
    multishot: bool,
    /// The ring refused an entry: the worker stops with this error.
    failure: Option<std::io::Error>,
    listeners: Vec<OwnedFd>,
    conns: Vec<Option<Box<Conn>>>,
    free_slots: Vec<u32>,
    next_generation: u32,
    wake: Arc<WakeQueue>,
    /// Written by the kernel while the eventfd read is in flight.
    wake_buffer: Box<u64>,
    wake_in_flight: bool,
    /// The tick's interval, read by the kernel while the tick is in flight (workers on a
    /// shard only).
    tick_spec: Box<io_uring::types::Timespec>,
    tick_in_flight: bool,
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

/// The worker's transport in the mode `network` asks for (on a shard: completions posted
/// without an enter of its ring), its provided buffers where it can have them, and why it does
/// without io_uring or multishot receives, where it does.
fn open_transport(
    network: crate::NetworkSettings,
    on_shard: bool,
) -> std::io::Result<(Transport, Option<ProvidedBuffers>, Option<String>)> {
    // A ring another ring waits on must post its completions without being entered.
    let mode = match network.ring_mode {
        ringdb_io::SetupMode::Defer if on_shard => ringdb_io::SetupMode::Coop,
        mode => mode,
    };
    let (transport, mut fallback) = Transport::open(network.transport, mode, RING_ENTRIES)?;
    let provided = match (network.multishot_receive, transport.ring()) {
        (true, Some(ring)) => {
            match ProvidedBuffers::register(ring.uring(), PROVIDED_COUNT, PROVIDED_BYTES) {
                Ok(provided) => Some(provided),
                Err(error) => {
                    let reason =
                        format!("no provided-buffer ring ({error}): receives one at a time");
                    tracing::warn!("{reason}");
                    fallback = Some(reason);
                    None
                }
            }
        }
        _ => None,
    };
    Ok((transport, provided, fallback))
}

/// A poll of a worker's ring on its shard's ring, kept armed across sleeps.
type RingPoll = std::pin::Pin<Box<dyn std::future::Future<Output = ringdb_io::Result<()>>>>;

/// How a worker on a shard woke up.
enum Slept {
    /// Its ring has completions (or the poll failed).
    Ring(ringdb_io::Result<()>),
    /// A connection was woken.
    Woken,
}

/// A worker's sleep on a shard (see [`Worker::serve_on_shard`]).
struct ShardSleep<'a> {
    ring_poll: &'a mut RingPoll,
    wake: &'a WakeQueue,
    doorbell: Option<&'a ringdb_io::Doorbell>,
}

impl std::future::Future for ShardSleep<'_> {
    type Output = Slept;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Slept> {
        if let Poll::Ready(result) = self.ring_poll.as_mut().poll(cx) {
            return Poll::Ready(Slept::Ring(result));
        }
        if self.wake.prepare_task_sleep(cx.waker(), self.doorbell) {
            Poll::Pending
        } else {
            Poll::Ready(Slept::Woken)
        }
    }
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
    /// A worker over `listeners`; `on_shard`: it will run on a shard's runtime
    /// ([`Worker::serve_on_shard`]).
    pub fn new(
        listeners: Vec<OwnedFd>,
        db: Db,
        shared: Arc<ServerShared>,
        on_shard: bool,
    ) -> std::io::Result<Worker> {
        let config = shared.config();
        let (transport, provided, fallback) = open_transport(config.network, on_shard)?;
        let limits = Limits {
            max_bulk_bytes: config.max_bulk_bytes,
        };
        let api = match transport {
            Transport::Uring(_) => "io_uring",
            Transport::Epoll(_) => "epoll",
        };
        let receive = if provided.is_some() {
            "multishot"
        } else {
            "single"
        };
        let _ = shared.network.set(crate::NetworkChoice {
            api,
            receive,
            fallback,
            on_shards: on_shard,
        });
        Ok(Worker {
            transport,
            multishot: provided.is_some(),
            provided,
            failure: None,
            listeners,
            conns: Vec::new(),
            free_slots: Vec::new(),
            next_generation: 1,
            wake: Arc::new(WakeQueue::new()?),
            wake_buffer: Box::new(0),
            wake_in_flight: false,
            tick_spec: Box::new(io_uring::types::Timespec::from(WAIT_TIMEOUT)),
            tick_in_flight: false,
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

    fn push(&mut self, op: NetOp, user_data: u64) {
        // SAFETY (for every caller): each operation points only at memory owned by the worker
        // or one of its connections (receive buffer, provided buffers, send buffer, eventfd
        // buffer), which stays in place and alive until the operation's completion is reaped:
        // connections are freed only when none of their operations is in flight, and the
        // worker drains its transport before it drops (or leaks that memory if it cannot).
        if let Err(error) = unsafe { self.transport.push(op, user_data) } {
            self.failure.get_or_insert(error);
        }
    }

    fn arm_accept(&mut self, index: usize) {
        let listener = self.listeners[index].as_raw_fd();
        self.push(
            NetOp::AcceptMulti { listener },
            tag(OP_ACCEPT, index as u32, 0),
        );
    }

    fn arm_wake(&mut self) {
        let buffer: *mut u64 = &mut *self.wake_buffer;
        let fd = self.wake.eventfd();
        self.wake_in_flight = true;
        self.push(NetOp::ReadCounter { fd, buffer }, tag(OP_WAKE, 0, 0));
    }

    /// Serves until the server is asked to stop, on a thread of its own.
    pub fn run(mut self) -> std::io::Result<()> {
        self.begin();
        let mut woken = Vec::new();
        let mut completions = Vec::new();
        while !self.shared.shutting_down() && self.failure.is_none() {
            self.serve_woken(&mut woken);
            let sleep = self.ready.is_empty() && self.wake.prepare_sleep();
            if let Err(error) = self.transport.enter(sleep, WAIT_TIMEOUT) {
                self.failure.get_or_insert(error);
            }
            self.wake.awake();
            self.close_stalled();
            self.reap(&mut completions);
        }
        self.drain();
        self.failure.take().map_or(Ok(()), Err)
    }

    /// Serves until the server is asked to stop, as a task of the runtime of the shard whose
    /// thread this is (`io`, `doorbell`): requests for the shard's own keys run in place, with
    /// no hop and no wake-up of another thread. With nothing to do the task sleeps until its
    /// ring has completions (a tick every [`WAIT_TIMEOUT`] among them: a poll of the ring's
    /// descriptor on the shard's ring) or a connection is woken, so the shard's I/O and the
    /// network share one sleep.
    pub async fn serve_on_shard(
        mut self,
        io: ringdb_io::Io,
        doorbell: Option<ringdb_io::Doorbell>,
    ) -> std::io::Result<()> {
        let Some(ring) = self.transport.ring() else {
            return Err(std::io::Error::other(
                "a worker on a shard needs an io_uring",
            ));
        };
        let ring_fd = ring.uring().as_raw_fd();
        self.begin();
        self.arm_tick();
        let mut woken = Vec::new();
        let mut completions = Vec::new();
        let mut ring_poll: Option<RingPoll> = None;
        while !self.shared.shutting_down() && self.failure.is_none() {
            self.serve_woken(&mut woken);
            if let Err(error) = self.transport.flush() {
                self.failure.get_or_insert(error);
            }
            let reaped = self.reap(&mut completions);
            self.close_stalled();
            if reaped > 0 || !self.ready.is_empty() {
                io.yield_now().await;
                continue;
            }
            let poll = ring_poll.get_or_insert_with(|| {
                let io = io.clone();
                Box::pin(async move { io.wait_readable(ring_fd).await })
            });
            let slept = ShardSleep {
                ring_poll: poll,
                wake: &self.wake,
                doorbell: doorbell.as_ref(),
            }
            .await;
            self.wake.awake();
            match slept {
                Slept::Ring(result) => {
                    ring_poll = None;
                    if let Err(error) = result {
                        let error = std::io::Error::other(error.to_string());
                        self.failure.get_or_insert(error);
                    }
                }
                Slept::Woken => {}
            }
        }
        self.drain();
        self.settle(ring_poll).await;
        self.failure.take().map_or(Ok(()), Err)
    }

    /// After the drain: a poll of the ring still armed on the shard's ring must complete before
    /// the ring goes (the shard's runtime waits for every request it has in flight), so the
    /// ring is given a completion to see.
    async fn settle(&mut self, ring_poll: Option<RingPoll>) {
        let Some(poll) = ring_poll else {
            return;
        };
        self.push(NetOp::Nop, tag(OP_CANCEL, 0, 0));
        if let Err(error) = self.transport.enter(false, Duration::ZERO) {
            tracing::warn!("a network worker could not settle its ring: {error}");
            std::mem::forget(poll);
            return;
        }
        let _ = poll.await;
    }

    /// Arms the accepts and the wake-up read, and queues groups for the turn's hops.
    fn begin(&mut self) {
        for index in 0..self.listeners.len() {
            self.arm_accept(index);
        }
        self.arm_wake();
        crate::hop::become_worker(self.db.shard_count());
    }

    /// Serves what was woken and parsed, a bounded number of passes.
    fn serve_woken(&mut self, woken: &mut Vec<(u32, u32)>) {
        for _ in 0..PASSES_MAX {
            self.wake.take(woken);
            if woken.is_empty() && self.ready.is_empty() {
                break;
            }
            self.ready.append(woken);
            self.serve_ready();
            self.start_hops();
        }
    }

    /// Takes the ring's completions and acts on each; returns how many there were.
    fn reap(&mut self, completions: &mut Vec<(u64, i32, u32)>) -> usize {
        self.transport.completions(completions);
        let reaped = completions.len();
        for (data, result, flags) in completions.drain(..) {
            self.complete(data, result, flags);
        }
        reaped
    }

    /// Arms the tick: a timeout on the worker's ring that ends a wait on a shard after
    /// [`WAIT_TIMEOUT`], so stalled clients and the shutdown are looked at.
    fn arm_tick(&mut self) {
        let spec: *const io_uring::types::Timespec = &*self.tick_spec;
        self.tick_in_flight = true;
        self.push(NetOp::Timeout { spec }, tag(OP_TICK, 0, 0));
    }

    fn complete(&mut self, data: u64, result: i32, flags: u32) {
        let (op, generation, slot) = untag(data);
        match op {
            OP_ACCEPT => self.accepted(slot as usize, result, flags),
            OP_WAKE => {
                self.wake_in_flight = false;
                self.arm_wake();
            }
            OP_TICK => {
                self.tick_in_flight = false;
                if !self.shared.shutting_down() {
                    self.arm_tick();
                }
            }
            OP_RECV => self.received(slot, generation, result, flags),
            OP_SEND => self.sent(slot, generation, result),
            OP_CANCEL => {}
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
        let (peer, local) = (address_of(&fd, Side::Peer), address_of(&fd, Side::Local));
        let session = Session::new(
            self.shared.next_client_id(),
            self.shared.password().is_some(),
            peer.clone(),
        );
        let registration =
            self.shared
                .client_table
                .register(session.id, fd.as_raw_fd(), peer, local);
        let conn = Box::new(Conn::new(registration, fd, generation, session));
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
        let multishot = self.multishot;
        let Some(conn) = self.conns[slot as usize].as_deref_mut() else {
            return;
        };
        if conn.recv_in_flight || conn.dead || conn.close_after_send {
            return;
        }
        conn.recv_in_flight = true;
        let socket = conn.raw();
        let op = if multishot {
            NetOp::RecvMulti {
                socket,
                group: provided::GROUP,
            }
        } else {
            let buffer = conn
                .recv_buffer
                .get_or_insert_with(|| vec![0u8; RECV_BYTES].into_boxed_slice());
            NetOp::Recv {
                socket,
                buffer: buffer.as_mut_ptr(),
                length: RECV_BYTES as u32,
            }
        };
        let user_data = tag(OP_RECV, slot, conn.generation);
        self.push(op, user_data);
    }

    /// Ends a multishot receive early (its last completion comes with `ECANCELED`).
    fn cancel_recv(&mut self, slot: u32, generation: u32) {
        let target = tag(OP_RECV, slot, generation);
        self.push(NetOp::Cancel { target }, tag(OP_CANCEL, slot, generation));
    }

    /// A receive's completion: its bytes go to the connection's input (a provided buffer goes
    /// back to the ring whatever became of the connection); its last completion ends the
    /// receive, which is armed again while the connection has room.
    fn received(&mut self, slot: u32, generation: u32, result: i32, flags: u32) {
        let length = usize::try_from(result).unwrap_or(0);
        self.take_received(slot, generation, length, cqueue::buffer_select(flags));
        let multishot = self.multishot;
        let Some(conn) = self.conn(slot, generation) else {
            return;
        };
        let last = !cqueue::more(flags);
        if last {
            conn.recv_in_flight = false;
            conn.recv_cancelling = false;
        }
        let errno = result.saturating_neg();
        let retry = matches!(
            errno,
            libc::ENOBUFS | libc::ECANCELED | libc::EINTR | libc::EAGAIN
        );
        if result > 0 || (result < 0 && retry) {
            if result > 0 {
                self.ready.push((slot, generation));
            }
            self.resume_reading(slot, generation);
        } else if errno == libc::EINVAL && multishot && last {
            tracing::warn!("the kernel refuses multishot receives: receives one at a time");
            self.multishot = false;
            self.resume_reading(slot, generation);
        } else if last {
            conn.dead = true;
            conn.running = None;
            self.release_if_idle(slot);
        }
    }

    /// Appends `length` received bytes to the connection's input: from provided buffer `id`
    /// (given back at once), else from the connection's own buffer.
    fn take_received(&mut self, slot: u32, generation: u32, length: usize, id: Option<u16>) {
        let conn = self
            .conns
            .get_mut(slot as usize)
            .and_then(|conn| conn.as_deref_mut())
            .filter(|conn| conn.generation == generation);
        match (id, self.provided.as_mut()) {
            (Some(id), Some(provided)) => provided.take(id, length, |bytes| {
                if let Some(conn) = conn.filter(|conn| !conn.dead) {
                    conn.input.extend_from_slice(bytes);
                }
            }),
            (None, _) if length > 0 => {
                let Some(conn) = conn else { return };
                let own = conn.recv_buffer.as_deref().unwrap_or_default();
                debug_assert!(length <= own.len());
                conn.input.extend_from_slice(&own[..length.min(own.len())]);
            }
            _ => debug_assert!(id.is_none() || self.provided.is_some()),
        }
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
        let op = NetOp::Send {
            socket: conn.raw(),
            buffer: rest.as_ptr(),
            length: rest.len().min(u32::MAX as usize) as u32,
        };
        let user_data = tag(OP_SEND, slot, conn.generation);
        self.push(op, user_data);
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
            self.transport.forget(conn.raw());
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
        conn.registration.touch();
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
    /// the stall timeout, and those idle past Redis's `timeout` (looked at once per wait
    /// timeout at most).
    fn close_stalled(&mut self) {
        let now = std::time::Instant::now();
        if now.duration_since(self.last_stall_check) < WAIT_TIMEOUT.min(self.stall_timeout) {
            return;
        }
        self.last_stall_check = now;
        self.close_idle(self.shared.idle_timeout_secs());
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

    /// Closes the connections that sent nothing for `timeout_secs` (0: none), have no batch
    /// running and no reply unsent, as Redis's `timeout` does.
    fn close_idle(&mut self, timeout_secs: u64) {
        if timeout_secs == 0 {
            return;
        }
        let timeout = Duration::from_secs(timeout_secs);
        for slot in 0..self.conns.len() as u32 {
            let Some(conn) = self.conns[slot as usize].as_deref_mut() else {
                continue;
            };
            let quiet = conn.session.is_some() && conn.unsent_bytes() == 0 && conn.input.is_empty();
            if quiet && !conn.dead && conn.registration.idle() > timeout {
                conn.kill();
                self.release_if_idle(slot);
            }
        }
    }

    /// Arms the receive again once the connection has room for more requests.
    fn resume_reading(&mut self, slot: u32, generation: u32) {
        let (pending_max, pause) = (self.pending_max, self.pause_bytes);
        let multishot = self.multishot;
        let Some(conn) = self.conn(slot, generation) else {
            return;
        };
        let room =
            conn.input.len() < pending_max && conn.unsent_bytes() < pause && conn.parked.is_empty();
        if !conn.recv_in_flight && room {
            self.arm_recv(slot);
        } else if conn.recv_in_flight && !room && multishot && !conn.recv_cancelling {
            // A multishot receive would go on reading: end it until there is room again.
            conn.recv_cancelling = true;
            self.cancel_recv(slot, generation);
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

    /// At shutdown: ends every connection and the wake-up read, and waits for the kernel to
    /// give back every buffer. Memory the kernel still holds after the bound is leaked, never
    /// freed under it.
    fn drain(&mut self) {
        for slot in 0..self.conns.len() as u32 {
            if let Some(conn) = self.conns[slot as usize].as_deref_mut() {
                conn.kill();
            }
        }
        self.push(NetOp::CancelAll, tag(OP_CANCEL, 0, 0));
        // Bounded: each connection has at most two operations in flight, each ends once its
        // socket is shut down; the cancel ends the wake-up read.
        for _ in 0..DRAIN_WAITS_MAX {
            if !self.busy() {
                return;
            }
            let _ = self.transport.enter(true, DRAIN_WAIT);
            let mut done = Vec::new();
            self.transport.completions(&mut done);
            for (data, _, flags) in done {
                self.drained(data, flags);
            }
        }
        tracing::warn!("the network kept buffers past shutdown: their memory is leaked");
        std::mem::forget(std::mem::take(&mut self.conns));
        std::mem::forget(self.provided.take());
        std::mem::forget(std::mem::replace(&mut self.wake_buffer, Box::new(0)));
        let spec = io_uring::types::Timespec::new();
        std::mem::forget(std::mem::replace(&mut self.tick_spec, Box::new(spec)));
    }

    /// Whether the kernel may still write or read memory of this worker.
    fn busy(&self) -> bool {
        self.wake_in_flight
            || self.tick_in_flight
            || self.conns.iter().flatten().any(|conn| conn.in_flight())
    }

    /// A completion reaped at shutdown: only what it ends is recorded.
    fn drained(&mut self, data: u64, flags: u32) {
        let (op, generation, slot) = untag(data);
        if op == OP_WAKE {
            self.wake_in_flight = false;
        }
        if op == OP_TICK {
            self.tick_in_flight = false;
        }
        if let (Some(id), Some(provided)) = (cqueue::buffer_select(flags), self.provided.as_mut()) {
            provided.take(id, 0, |_| ());
        }
        let Some(conn) = self.conn(slot, generation) else {
            return;
        };
        match op {
            OP_RECV if !cqueue::more(flags) => conn.recv_in_flight = false,
            OP_SEND => conn.send_in_flight = false,
            _ => {}
        }
    }
}

/// How long shutdown waits for the kernel to give back buffers: at most this many waits of
/// [`DRAIN_WAIT`].
const DRAIN_WAITS_MAX: usize = 500;
const DRAIN_WAIT: Duration = Duration::from_millis(10);

/// Which end of a socket [`address_of`] names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Peer,
    Local,
}

/// A socket's address (its peer's or its own) as `CLIENT LIST` writes it.
fn address_of(fd: &OwnedFd, side: Side) -> String {
    // SAFETY: getpeername and getsockname write at most `length` bytes into the zeroed
    // storage we own.
    unsafe {
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let mut length = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let pointer = (&mut storage as *mut libc::sockaddr_storage).cast();
        let status = match side {
            Side::Peer => libc::getpeername(fd.as_raw_fd(), pointer, &mut length),
            Side::Local => libc::getsockname(fd.as_raw_fd(), pointer, &mut length),
        };
        if status != 0 {
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
            // A Unix socket's client is unnamed: both ends read as the server's path, as
            // Redis writes them (`/path/to.sock:0`).
            libc::AF_UNIX if side == Side::Peer => address_of(fd, Side::Local),
            libc::AF_UNIX => {
                let unix =
                    &*(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_un>();
                let path: Vec<u8> = unix
                    .sun_path
                    .iter()
                    .take_while(|&&byte| byte != 0)
                    .map(|&byte| byte as u8)
                    .collect();
                format!("{}:0", String::from_utf8_lossy(&path))
            }
            _ => "unknown:0".to_string(),
        }
    }
}
