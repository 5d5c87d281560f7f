//! One shuffle node: W worker threads, each with its own transport (ring per thread) and one
//! connection to every other node. Workers take morsels from a shared cursor, partition tuples by
//! key, fill 1 MiB chunks per destination straight in the transport's send slots, and build a
//! probe table from what they receive while they scan.

use super::data::{key_of, partition, JoinResult, ShuffleSpec};
use super::table::ProbeTable;
use crate::config::NetConfig;
use crate::error::{CloseStage, FrameFault, NetError, NetSetting, NodeFailure, Result};
use crate::frame::{checksum, FrameDecoder, FrameSink, Header, FLAG_EOS, HEADER_LEN};
use crate::sys::{process_cpu_secs, Conn};
use crate::transport::{open_transport, Event, Transport, TransportStats};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one node measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node's id.
    pub node: usize,
    /// The transport's spec.
    pub transport: String,
    /// Network bytes this node sent (frames, headers included) and received.
    pub bytes_sent: u64,
    /// Network bytes this node received.
    pub bytes_recv: u64,
    /// Tuples that stayed on this node (their key partitions here).
    pub local_tuples: u64,
    /// Wall-clock seconds of the shuffle (scan, send, receive, probe-table build).
    pub shuffle_secs: f64,
    /// Process CPU time (all threads, kernel threads of the ring included) during the shuffle.
    pub cpu_secs: f64,
    /// Seconds of the join after the shuffle.
    pub join_secs: f64,
    /// This node's part of the join.
    pub join: JoinResult,
    /// System calls of the node's transports, summed over workers.
    pub syscalls: u64,
    /// Sends resumed after moving fewer bytes than asked.
    pub short_sends: u64,
    /// SEND_ZC notifications.
    pub zc_notifs: u64,
    /// SEND_ZC notifications that reported a copy.
    pub zc_copied_notifs: u64,
    /// Bytes the kernel copied after all despite SEND_ZC.
    pub zc_copied_bytes: u64,
    /// Multishot receives armed again.
    pub multishot_rearms: u64,
    /// Worker seconds spent waiting for a free send buffer (peers not reading fast enough),
    /// and waiting at the end for the peers' last frames (summed over workers).
    pub wait_send_buf_secs: f64,
    /// Worker seconds spent waiting at the end (see above).
    pub wait_end_secs: f64,
}

impl NodeReport {
    /// Egress bandwidth during the shuffle, GiB per second.
    pub fn egress_gib_s(&self) -> f64 {
        self.bytes_sent as f64 / (1u64 << 30) as f64 / self.shuffle_secs.max(1e-9)
    }

    /// CPU use during the shuffle, percent of one CPU.
    pub fn cpu_pct(&self) -> f64 {
        100.0 * self.cpu_secs / self.shuffle_secs.max(1e-9)
    }
}

/// The receive side of one worker: frames to probe-table tuples.
struct Sink<'a> {
    table: &'a mut ProbeTable,
    spec: &'a ShuffleSpec,
    peer_node: usize,
    peer: &'a str,
    /// Where the current frame's payload starts in the arena (kept across receive events).
    start: &'a mut usize,
}

impl Sink<'_> {
    fn bad(&self, fault: FrameFault) -> NetError {
        NetError::MalformedFrame {
            peer: self.peer.to_string(),
            fault,
        }
    }
}

impl FrameSink for Sink<'_> {
    fn begin(&mut self, h: &Header) -> Result<()> {
        if h.sender as usize != self.peer_node {
            return Err(self.bad(FrameFault::WrongSender {
                sender: h.sender,
                expected: self.peer_node,
            }));
        }
        if h.flags & FLAG_EOS == 0 {
            if h.tuple_size as usize != self.spec.tuple_size {
                return Err(self.bad(FrameFault::WrongTupleSize {
                    tuple_size: h.tuple_size,
                    expected: self.spec.tuple_size,
                }));
            }
            if !(h.len as usize).is_multiple_of(self.spec.tuple_size) {
                return Err(self.bad(FrameFault::PartialTuple {
                    len_bytes: h.len,
                    tuple_size: self.spec.tuple_size,
                }));
            }
        }
        *self.start = self.table.arena.len();
        Ok(())
    }

    fn payload(&mut self, data: &[u8]) -> Result<()> {
        self.table.arena.extend_from_slice(data);
        Ok(())
    }

    fn end(&mut self, h: &Header) -> Result<()> {
        if h.is_eos() {
            return Ok(());
        }
        let start = *self.start;
        let got = checksum(&self.table.arena[start..]);
        if got != h.checksum {
            self.table.arena.truncate(start);
            return Err(self.bad(FrameFault::ChecksumMismatch {
                computed: got,
                header: h.checksum,
            }));
        }
        let n = (self.table.arena.len() - start) / self.spec.tuple_size;
        self.table.index_tail(n);
        Ok(())
    }
}

struct WorkerOut {
    wait_slot_secs: f64,
    wait_end_secs: f64,
    /// One probe table per peer connection (frames from different peers interleave, and each
    /// frame's payload must land contiguously for its checksum) and one for local tuples.
    tables: Vec<ProbeTable>,
    stats: TransportStats,
    local: u64,
}

struct Shared {
    spec: ShuffleSpec,
    node: usize,
    table: Vec<u8>,
    cursor: AtomicUsize,
    abort: AtomicBool,
}

/// Peers of `node` in connection order.
pub fn peers_of(nodes: usize, node: usize) -> Vec<usize> {
    (0..nodes).filter(|&n| n != node).collect()
}

/// The error of a worker that stops because another worker of its node failed.
fn aborted(node: usize) -> NetError {
    NetError::Node {
        node,
        failure: NodeFailure::Aborted,
    }
}

/// Whether `e` is only the follow-up of another worker's failure ([`aborted`]).
fn is_abort_follow_up(e: &NetError) -> bool {
    matches!(
        e,
        NetError::Node {
            failure: NodeFailure::Aborted,
            ..
        }
    )
}

/// The receive side of one worker: per peer connection, a frame decoder and the probe table
/// its frames fill.
struct Receiver<'a> {
    spec: &'a ShuffleSpec,
    /// The node id and the address of each peer connection.
    peers: Vec<usize>,
    names: Vec<String>,
    decoders: Vec<FrameDecoder>,
    tables: Vec<ProbeTable>,
    /// Where the current frame's payload starts in each table's arena.
    starts: Vec<usize>,
}

impl<'a> Receiver<'a> {
    fn new(spec: &'a ShuffleSpec, peers: Vec<usize>, names: Vec<String>) -> Self {
        assert_eq!(peers.len(), names.len(), "one name per peer connection");
        let max_len = (spec.chunk_payload() + 64) as u32;
        Receiver {
            decoders: names
                .iter()
                .map(|n| FrameDecoder::new(n.clone(), max_len))
                .collect(),
            tables: (0..peers.len())
                .map(|_| ProbeTable::new(spec.tuple_size))
                .collect(),
            starts: vec![0; peers.len()],
            spec,
            peers,
            names,
        }
    }

    /// Everything the receive path does with one transport event.
    fn handle(&mut self, event: Event<'_>) -> Result<()> {
        match event {
            Event::Recv { conn, data } => {
                let mut sink = Sink {
                    table: &mut self.tables[conn],
                    spec: self.spec,
                    peer_node: self.peers[conn],
                    peer: &self.names[conn],
                    start: &mut self.starts[conn],
                };
                self.decoders[conn].feed(data, &mut sink)
            }
            Event::Closed { conn } => {
                if self.decoders[conn].finished() {
                    Ok(())
                } else {
                    Err(NetError::PeerClosed {
                        peer: self.names[conn].clone(),
                        when: CloseStage::BeforeEndOfStream {
                            node: self.peers[conn],
                        },
                    })
                }
            }
            Event::SendDone { .. } => Ok(()),
        }
    }

    /// Peers whose end-of-stream frame arrived.
    fn finished(&self) -> usize {
        self.decoders.iter().filter(|d| d.finished()).count()
    }
}

/// One worker while it scans, shuffles and receives: its transport, the chunk it fills per
/// peer, and the probe tables it builds.
struct Worker<'a> {
    shared: &'a Shared,
    cfg: &'a NetConfig,
    transport: Box<dyn Transport>,
    receiver: Receiver<'a>,
    /// The connection index of each destination node (`usize::MAX` for this node).
    conn_of: Vec<usize>,
    /// Per peer connection: the send slot being filled and the payload bytes in it.
    filling: Vec<Option<(u32, usize)>>,
    /// The tuples whose key partitions to this node.
    local_table: ProbeTable,
    local_tuples: u64,
    wait_slot_secs: f64,
    wait_end_secs: f64,
    /// The last time an event arrived: waits fail after `cfg.io_timeout` without one.
    last_progress: Instant,
    /// The longest single wait, so that an abort is seen quickly.
    tick: Duration,
    /// Payload bytes of a chunk (whole tuples).
    chunk_capacity: usize,
}

impl<'a> Worker<'a> {
    fn open(shared: &'a Shared, cfg: &'a NetConfig, conns: Vec<Conn>) -> Result<Self> {
        let spec = &shared.spec;
        let peers = peers_of(spec.nodes, shared.node);
        let names: Vec<String> = conns.iter().map(|c| c.peer.clone()).collect();
        let transport = open_transport(cfg, conns)?;
        let mut conn_of = vec![usize::MAX; spec.nodes];
        for (j, &p) in peers.iter().enumerate() {
            conn_of[p] = j;
        }
        Ok(Worker {
            shared,
            cfg,
            transport,
            filling: vec![None; peers.len()],
            receiver: Receiver::new(spec, peers, names),
            conn_of,
            local_table: ProbeTable::new(spec.tuple_size),
            local_tuples: 0,
            wait_slot_secs: 0.0,
            wait_end_secs: 0.0,
            last_progress: Instant::now(),
            tick: Duration::from_millis(50).min(cfg.io_timeout),
            chunk_capacity: spec.chunk_payload(),
        })
    }

    /// Fails when another worker of this node failed.
    fn check_abort(&self) -> Result<()> {
        if self.shared.abort.load(Ordering::Relaxed) {
            return Err(aborted(self.shared.node));
        }
        Ok(())
    }

    /// Polls the transport, handing every event to the receive path.
    fn poll(&mut self, timeout: Duration) -> Result<usize> {
        let receiver = &mut self.receiver;
        self.transport
            .poll(Some(timeout), &mut |event| receiver.handle(event))
    }

    /// One bounded wait (receiving meanwhile): fails when another worker failed, or when
    /// nothing has happened for the I/O timeout (`waiting_for` names what was awaited).
    /// Returns the seconds waited.
    fn wait_step(&mut self, waiting_for: impl FnOnce(&Self) -> String) -> Result<f64> {
        self.check_abort()?;
        let started = Instant::now();
        let events = self.poll(self.tick)?;
        let waited_secs = started.elapsed().as_secs_f64();
        if events > 0 {
            self.last_progress = Instant::now();
        } else if self.last_progress.elapsed() > self.cfg.io_timeout {
            return Err(NetError::Timeout {
                what: waiting_for(self),
                after: self.cfg.io_timeout,
            });
        }
        Ok(waited_secs)
    }

    /// A free send slot, waiting (receiving meanwhile) until one is.
    fn alloc_slot(&mut self) -> Result<u32> {
        loop {
            if let Some(slot) = self.transport.alloc() {
                return Ok(slot);
            }
            self.wait_slot_secs +=
                self.wait_step(|_| "a free send buffer (peers stopped reading)".into())?;
        }
    }

    /// A header from this node.
    fn header(&self, flags: u16, len: usize, checksum: u64) -> Header {
        Header {
            sender: self.shared.node as u16,
            flags,
            len: len as u32,
            tuple_size: self.shared.spec.tuple_size as u32,
            checksum,
        }
    }

    /// Seals the chunk in `slot` (`fill` payload bytes) with its header and sends it to peer
    /// connection `conn`.
    fn send_chunk(&mut self, conn: usize, slot: u32, fill: usize) -> Result<()> {
        let sum = checksum(&self.transport.slot_mut(slot)[HEADER_LEN..HEADER_LEN + fill]);
        let header = self.header(0, fill, sum);
        header.encode(&mut self.transport.slot_mut(slot)[..HEADER_LEN]);
        self.transport.send(conn, slot, HEADER_LEN + fill)
    }

    /// Scans morsels of this node's table until none is left, sending every tuple to the node
    /// its key partitions to.
    fn scan(&mut self) -> Result<()> {
        let shared = self.shared;
        let spec = &shared.spec;
        loop {
            let start = shared.cursor.fetch_add(spec.morsel, Ordering::Relaxed);
            if start >= spec.rows_per_node {
                return Ok(());
            }
            let end = (start + spec.morsel).min(spec.rows_per_node);
            for row in start..end {
                self.shuffle_tuple(row)?;
            }
            self.check_abort()?;
            if self.poll(Duration::ZERO)? > 0 {
                self.last_progress = Instant::now();
            }
        }
    }

    /// Keeps tuple `row` here or appends it to the chunk of its destination, sending the chunk
    /// when the next tuple would not fit.
    fn shuffle_tuple(&mut self, row: usize) -> Result<()> {
        let shared = self.shared;
        let tuple_size = shared.spec.tuple_size;
        let tuple = &shared.table[row * tuple_size..(row + 1) * tuple_size];
        let dest = partition(key_of(tuple), shared.spec.nodes);
        if dest == shared.node {
            self.local_table.insert_copy(tuple);
            self.local_tuples += 1;
            return Ok(());
        }
        let conn = self.conn_of[dest];
        let (slot, fill) = match self.filling[conn] {
            Some(filling) => filling,
            None => (self.alloc_slot()?, 0),
        };
        let at = HEADER_LEN + fill;
        self.transport.slot_mut(slot)[at..at + tuple_size].copy_from_slice(tuple);
        let fill = fill + tuple_size;
        if fill + tuple_size > self.chunk_capacity {
            self.send_chunk(conn, slot, fill)?;
            self.filling[conn] = None;
        } else {
            self.filling[conn] = Some((slot, fill));
        }
        Ok(())
    }

    /// Sends the partly filled chunks, then ends every stream with an end-of-stream frame.
    fn end_streams(&mut self) -> Result<()> {
        let partial: Vec<Option<(u32, usize)>> =
            self.filling.iter_mut().map(Option::take).collect();
        for (conn, part) in partial.into_iter().enumerate() {
            if let Some((slot, fill)) = part {
                self.send_chunk(conn, slot, fill)?;
            }
            let slot = self.alloc_slot()?;
            let eos = self.header(FLAG_EOS, 0, 0);
            eos.encode(&mut self.transport.slot_mut(slot)[..HEADER_LEN]);
            self.transport.send(conn, slot, HEADER_LEN)?;
        }
        Ok(())
    }

    /// Receives until every peer ended its stream and this worker's sends are done.
    fn drain(&mut self) -> Result<()> {
        self.last_progress = Instant::now();
        while !(self.receiver.finished() == self.receiver.decoders.len()
            && self.transport.pending_sends() == 0)
        {
            self.wait_end_secs += self.wait_step(|w| {
                format!(
                    "the rest of the shuffle ({} of {} peers finished, {} sends pending)",
                    w.receiver.finished(),
                    w.receiver.decoders.len(),
                    w.transport.pending_sends()
                )
            })?;
        }
        Ok(())
    }

    fn finish(self) -> WorkerOut {
        let mut tables = self.receiver.tables;
        tables.push(self.local_table);
        WorkerOut {
            wait_slot_secs: self.wait_slot_secs,
            wait_end_secs: self.wait_end_secs,
            tables,
            stats: self.transport.stats(),
            local: self.local_tuples,
        }
    }
}

/// One worker's whole shuffle: scan and send, end the streams, receive the rest.
fn worker(shared: &Shared, cfg: &NetConfig, conns: Vec<Conn>) -> Result<WorkerOut> {
    let mut worker = Worker::open(shared, cfg, conns)?;
    worker.scan()?;
    worker.end_streams()?;
    worker.drain()?;
    Ok(worker.finish())
}

/// Runs node `node` of `spec` over `conns[w][j]` (worker w, j-th peer in [`peers_of`] order).
/// `cfg`'s send buffers are sized here from the chunk size.
pub fn run_node(
    spec: &ShuffleSpec,
    node: usize,
    cfg: &NetConfig,
    conns: Vec<Vec<Conn>>,
) -> Result<NodeReport> {
    spec.validate()?;
    NetError::check_range(
        NetSetting::WorkerConnectionSets,
        conns.len(),
        spec.workers,
        spec.workers,
    )?;
    let cfg = node_config(spec, cfg)?;
    let shared = Arc::new(Shared {
        spec: spec.clone(),
        node,
        table: super::data::generate_table(spec, node),
        cursor: AtomicUsize::new(0),
        abort: AtomicBool::new(false),
    });
    let cpu0 = process_cpu_secs();
    let t0 = Instant::now();
    let handles = spawn_workers(&shared, &cfg, conns)?;
    let outs = join_workers(handles, node)?;
    let shuffle_secs = t0.elapsed().as_secs_f64();
    let cpu_secs = process_cpu_secs() - cpu0;
    Ok(node_report(spec, node, &cfg, &outs, shuffle_secs, cpu_secs))
}

/// `cfg` with the send and receive buffers a node of `spec` uses.
fn node_config(spec: &ShuffleSpec, cfg: &NetConfig) -> Result<NetConfig> {
    let npeers = spec.nodes - 1;
    let mut cfg = cfg.clone();
    cfg.send_buf_size = HEADER_LEN + spec.chunk_payload();
    // Per peer: one chunk filling, two in flight (or waiting for their zc notification).
    cfg.send_bufs = (npeers * 3).max(2);
    cfg.recv_buf_size = cfg.recv_buf_size.clamp(64 * 1024, 1 << 20);
    cfg.validate()?;
    Ok(cfg)
}

type WorkerHandle = std::thread::JoinHandle<Result<WorkerOut>>;

/// Starts one thread per worker; a worker that fails tells the others to abort.
fn spawn_workers(
    shared: &Arc<Shared>,
    cfg: &NetConfig,
    conns: Vec<Vec<Conn>>,
) -> Result<Vec<WorkerHandle>> {
    let node = shared.node;
    conns
        .into_iter()
        .enumerate()
        .map(|(w, c)| {
            let shared = shared.clone();
            let cfg = cfg.clone();
            std::thread::Builder::new()
                .name(format!("shuffle-n{node}w{w}"))
                .spawn(move || {
                    let r = worker(&shared, &cfg, c);
                    if r.is_err() {
                        shared.abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
                .map_err(|e| NetError::io("spawn worker thread", e))
        })
        .collect()
}

/// Waits for every worker; the first root cause wins over "aborted" follow-ups.
fn join_workers(handles: Vec<WorkerHandle>, node: usize) -> Result<Vec<WorkerOut>> {
    let mut outs = Vec::new();
    let mut first_err: Option<NetError> = None;
    for h in handles {
        match h.join() {
            Ok(Ok(o)) => outs.push(o),
            Ok(Err(e)) => {
                // Prefer the root cause over "aborted" follow-ups.
                let replaces = match &first_err {
                    None => true,
                    Some(first) => !is_abort_follow_up(&e) && is_abort_follow_up(first),
                };
                if replaces {
                    first_err = Some(e);
                }
            }
            Err(_) => {
                first_err.get_or_insert(NetError::Node {
                    node,
                    failure: NodeFailure::WorkerPanicked,
                });
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(outs),
    }
}

/// The node's report from its workers' results (the join runs here, and is timed).
fn node_report(
    spec: &ShuffleSpec,
    node: usize,
    cfg: &NetConfig,
    outs: &[WorkerOut],
    shuffle_secs: f64,
    cpu_secs: f64,
) -> NodeReport {
    let j0 = Instant::now();
    let mut join = JoinResult::default();
    let mut stats = TransportStats::default();
    let mut local = 0;
    let (mut wsb, mut we) = (0.0, 0.0);
    for o in outs {
        wsb += o.wait_slot_secs;
        we += o.wait_end_secs;
        for t in &o.tables {
            join.merge(&t.join_s_part(spec, node));
        }
        stats.add(&o.stats);
        local += o.local;
    }
    NodeReport {
        node,
        transport: cfg.spec(),
        bytes_sent: stats.bytes_sent,
        bytes_recv: stats.bytes_recv,
        local_tuples: local,
        shuffle_secs,
        cpu_secs,
        join_secs: j0.elapsed().as_secs_f64(),
        join,
        syscalls: stats.syscalls,
        short_sends: stats.short_sends,
        zc_notifs: stats.zc_notifs,
        zc_copied_notifs: stats.zc_copied_notifs,
        zc_copied_bytes: stats.zc_copied_bytes,
        multishot_rearms: stats.multishot_rearms,
        wait_send_buf_secs: wsb,
        wait_end_secs: we,
    }
}
