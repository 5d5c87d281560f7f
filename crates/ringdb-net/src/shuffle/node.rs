//! One shuffle node: W worker threads, each with its own transport (ring per thread) and one
//! connection to every other node. Workers take morsels from a shared cursor, partition tuples by
//! key, fill 1 MiB chunks per destination straight in the transport's send slots, and build a
//! probe table from what they receive while they scan.

use super::data::{key_of, partition, JoinResult, ShuffleSpec};
use super::table::ProbeTable;
use crate::config::NetConfig;
use crate::error::{NetError, Result};
use crate::frame::{checksum, FrameDecoder, FrameSink, Header, FLAG_EOS, HEADER_LEN};
use crate::sys::{process_cpu_secs, Conn};
use crate::transport::{self, Event, Transport, TransportStats};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one node measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeReport {
    pub node: usize,
    pub transport: String,
    /// Network bytes this node sent (frames, headers included) and received.
    pub bytes_sent: u64,
    pub bytes_recv: u64,
    /// Tuples that stayed on this node (their key partitions here).
    pub local_tuples: u64,
    pub shuffle_secs: f64,
    /// Process CPU time (all threads, kernel threads of the ring included) during the shuffle.
    pub cpu_secs: f64,
    pub join_secs: f64,
    pub join: JoinResult,
    pub syscalls: u64,
    pub short_sends: u64,
    pub zc_notifs: u64,
    pub zc_copied_notifs: u64,
    pub zc_copied_bytes: u64,
    pub multishot_rearms: u64,
    /// Worker seconds spent waiting for a free send buffer (peers not reading fast enough),
    /// and waiting at the end for the peers' last frames (summed over workers).
    pub wait_send_buf_secs: f64,
    pub wait_end_secs: f64,
}

impl NodeReport {
    pub fn egress_gib_s(&self) -> f64 {
        self.bytes_sent as f64 / (1u64 << 30) as f64 / self.shuffle_secs.max(1e-9)
    }

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
    fn bad(&self, reason: String) -> NetError {
        NetError::MalformedFrame {
            peer: self.peer.to_string(),
            reason,
        }
    }
}

impl FrameSink for Sink<'_> {
    fn begin(&mut self, h: &Header) -> Result<()> {
        if h.sender as usize != self.peer_node {
            return Err(self.bad(format!(
                "sender {} on the connection of node {}",
                h.sender, self.peer_node
            )));
        }
        if h.flags & FLAG_EOS == 0 {
            if h.tuple_size as usize != self.spec.tuple_size {
                return Err(self.bad(format!(
                    "tuple size {} (this shuffle uses {})",
                    h.tuple_size, self.spec.tuple_size
                )));
            }
            if !(h.len as usize).is_multiple_of(self.spec.tuple_size) {
                return Err(self.bad(format!(
                    "payload of {} bytes is not a whole number of {}-byte tuples",
                    h.len, self.spec.tuple_size
                )));
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
            return Err(self.bad(format!(
                "checksum {got:#x} does not match the header's {:#x}",
                h.checksum
            )));
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

fn worker(sh: &Shared, cfg: &NetConfig, conns: Vec<Conn>) -> Result<WorkerOut> {
    let spec = &sh.spec;
    let peers = peers_of(spec.nodes, sh.node);
    let names: Vec<String> = conns.iter().map(|c| c.peer.clone()).collect();
    let mut t: Box<dyn Transport> = transport::open(cfg, conns)?;
    let ts = spec.tuple_size;
    let cap = spec.chunk_payload();
    let mut conn_of = vec![usize::MAX; spec.nodes];
    for (j, &p) in peers.iter().enumerate() {
        conn_of[p] = j;
    }
    let mut tables: Vec<ProbeTable> = (0..peers.len()).map(|_| ProbeTable::new(ts)).collect();
    let mut table = ProbeTable::new(ts);
    let mut decoders: Vec<FrameDecoder> = names
        .iter()
        .map(|n| FrameDecoder::new(n.clone(), (cap + 64) as u32))
        .collect();
    let mut cur: Vec<Option<(u32, usize)>> = vec![None; peers.len()];
    let mut starts = vec![0usize; peers.len()];
    let (mut wait_slot_secs, mut wait_end_secs) = (0.0f64, 0.0f64);
    let mut local = 0u64;
    let mut last_progress = Instant::now();
    let tick = Duration::from_millis(50).min(cfg.io_timeout);

    // Everything the receive path does, as one handler.
    macro_rules! handler {
        () => {
            &mut |ev: Event<'_>| -> Result<()> {
                match ev {
                    Event::Recv { conn, data } => {
                        let mut sink = Sink {
                            table: &mut tables[conn],
                            spec,
                            peer_node: peers[conn],
                            peer: &names[conn],
                            start: &mut starts[conn],
                        };
                        decoders[conn].feed(data, &mut sink)
                    }
                    Event::Closed { conn } => {
                        if decoders[conn].finished() {
                            Ok(())
                        } else {
                            Err(NetError::PeerClosed {
                                peer: format!("node {} ({})", peers[conn], names[conn]),
                                when: "mid-shuffle, before its end-of-stream frame".into(),
                            })
                        }
                    }
                    Event::SendDone { .. } => Ok(()),
                }
            }
        };
    }

    // Waits (receiving meanwhile) until a send slot is free.
    macro_rules! alloc_slot {
        () => {{
            loop {
                if let Some(s) = t.alloc() {
                    break s;
                }
                if sh.abort.load(Ordering::Relaxed) {
                    return Err(NetError::Node {
                        node: sh.node,
                        reason: "aborted: another worker failed".into(),
                    });
                }
                let w0 = Instant::now();
                let n = t.poll(Some(tick), handler!())?;
                wait_slot_secs += w0.elapsed().as_secs_f64();
                if n > 0 {
                    last_progress = Instant::now();
                } else if last_progress.elapsed() > cfg.io_timeout {
                    return Err(NetError::Timeout {
                        what: "a free send buffer (peers stopped reading)".into(),
                        after: cfg.io_timeout,
                    });
                }
            }
        }};
    }

    let send_chunk = |t: &mut Box<dyn Transport>, j: usize, slot: u32, fill: usize| {
        let buf = t.slot_mut(slot);
        let sum = checksum(&buf[HEADER_LEN..HEADER_LEN + fill]);
        Header {
            sender: sh.node as u16,
            flags: 0,
            len: fill as u32,
            tuple_size: ts as u32,
            checksum: sum,
        }
        .encode(&mut buf[..HEADER_LEN]);
        t.send(j, slot, HEADER_LEN + fill)
    };

    // Scan and shuffle.
    loop {
        let start = sh.cursor.fetch_add(spec.morsel, Ordering::Relaxed);
        if start >= spec.rows_per_node {
            break;
        }
        let end = (start + spec.morsel).min(spec.rows_per_node);
        for row in start..end {
            let tuple = &sh.table[row * ts..(row + 1) * ts];
            let dest = partition(key_of(tuple), spec.nodes);
            if dest == sh.node {
                table.insert_copy(tuple);
                local += 1;
                continue;
            }
            let j = conn_of[dest];
            let (slot, fill) = match cur[j] {
                Some(c) => c,
                None => (alloc_slot!(), 0),
            };
            t.slot_mut(slot)[HEADER_LEN + fill..HEADER_LEN + fill + ts].copy_from_slice(tuple);
            let fill = fill + ts;
            if fill + ts > cap {
                send_chunk(&mut t, j, slot, fill)?;
                cur[j] = None;
            } else {
                cur[j] = Some((slot, fill));
            }
        }
        if sh.abort.load(Ordering::Relaxed) {
            return Err(NetError::Node {
                node: sh.node,
                reason: "aborted: another worker failed".into(),
            });
        }
        if t.poll(Some(Duration::ZERO), handler!())? > 0 {
            last_progress = Instant::now();
        }
    }
    // Flush partial chunks, then end every stream.
    let partial: Vec<Option<(u32, usize)>> = cur.iter_mut().map(Option::take).collect();
    for (j, part) in partial.into_iter().enumerate() {
        if let Some((slot, fill)) = part {
            send_chunk(&mut t, j, slot, fill)?;
        }
        let slot = alloc_slot!();
        Header {
            sender: sh.node as u16,
            flags: FLAG_EOS,
            len: 0,
            tuple_size: ts as u32,
            checksum: 0,
        }
        .encode(&mut t.slot_mut(slot)[..HEADER_LEN]);
        t.send(j, slot, HEADER_LEN)?;
    }
    last_progress = Instant::now();
    // Receive until every peer ended its stream and our sends are done.
    while !(decoders.iter().all(|d| d.finished()) && t.pending_sends() == 0) {
        if sh.abort.load(Ordering::Relaxed) {
            return Err(NetError::Node {
                node: sh.node,
                reason: "aborted: another worker failed".into(),
            });
        }
        let w0 = Instant::now();
        let n = t.poll(Some(tick), handler!())?;
        wait_end_secs += w0.elapsed().as_secs_f64();
        if n > 0 {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > cfg.io_timeout {
            let done = decoders.iter().filter(|d| d.finished()).count();
            return Err(NetError::Timeout {
                what: format!(
                    "the rest of the shuffle ({done} of {} peers finished, {} sends pending)",
                    decoders.len(),
                    t.pending_sends()
                ),
                after: cfg.io_timeout,
            });
        }
    }
    tables.push(table);
    Ok(WorkerOut {
        wait_slot_secs,
        wait_end_secs,
        tables,
        stats: t.stats(),
        local,
    })
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
    if conns.len() != spec.workers {
        return Err(NetError::invalid("connections", "one set per worker"));
    }
    let npeers = spec.nodes - 1;
    let mut cfg = cfg.clone();
    cfg.send_buf_size = HEADER_LEN + spec.chunk_payload();
    // Per peer: one chunk filling, two in flight (or waiting for their zc notification).
    cfg.send_bufs = (npeers * 3).max(2);
    cfg.recv_buf_size = cfg.recv_buf_size.clamp(64 * 1024, 1 << 20);
    cfg.validate()?;
    let sh = Arc::new(Shared {
        spec: spec.clone(),
        node,
        table: super::data::generate_table(spec, node),
        cursor: AtomicUsize::new(0),
        abort: AtomicBool::new(false),
    });
    let cpu0 = process_cpu_secs();
    let t0 = Instant::now();
    let handles: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(w, c)| {
            let sh = sh.clone();
            let cfg = cfg.clone();
            std::thread::Builder::new()
                .name(format!("shuffle-n{node}w{w}"))
                .spawn(move || {
                    let r = worker(&sh, &cfg, c);
                    if r.is_err() {
                        sh.abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
                .map_err(|e| NetError::io("spawn worker thread", e))
        })
        .collect::<Result<_>>()?;
    let mut outs = Vec::new();
    let mut first_err: Option<NetError> = None;
    for h in handles {
        match h.join() {
            Ok(Ok(o)) => outs.push(o),
            Ok(Err(e)) => {
                // Prefer the root cause over "aborted" follow-ups.
                let follow_up =
                    matches!(&e, NetError::Node { reason, .. } if reason.starts_with("aborted"));
                if first_err.is_none()
                    || (!follow_up
                        && matches!(&first_err, Some(NetError::Node { reason, .. }) if reason.starts_with("aborted")))
                {
                    first_err = Some(e);
                }
            }
            Err(_) => {
                first_err.get_or_insert(NetError::Node {
                    node,
                    reason: "a worker thread panicked".into(),
                });
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let shuffle_secs = t0.elapsed().as_secs_f64();
    let cpu_secs = process_cpu_secs() - cpu0;
    let j0 = Instant::now();
    let mut join = JoinResult::default();
    let mut stats = TransportStats::default();
    let mut local = 0;
    let (mut wsb, mut we) = (0.0, 0.0);
    for o in &outs {
        wsb += o.wait_slot_secs;
        we += o.wait_end_secs;
        for t in &o.tables {
            join.merge(&t.join_s_part(spec, node));
        }
        stats.add(&o.stats);
        local += o.local;
    }
    Ok(NodeReport {
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
    })
}
