//! Round-trip latency with small messages (paper Fig. 15): a client sends `size` bytes, the
//! server echoes them, the client measures the round trip into an HDR histogram. TCP or UDP,
//! any transport on both ends.
//!
//! The server and the client are separate calls ([`serve`], [`run_client`]) so that they can
//! run in separate processes, as `ringdb pingpong` runs them: in one process the two ends would
//! share CPU caches and scheduler decisions, and the measurement would flatter every transport.
//! Both ends first exchange a hello over plain sockets, then hand the connection to a
//! transport; UDP ends with a goodbye byte, TCP with the client closing.

use crate::config::NetConfig;
use crate::error::{CloseStage, FrameFault, NetError, NetSetting, Result};
use crate::sys::{accept_tcp, connect_tcp, Conn};
use crate::transport::{open_transport, Event, Transport};
use hdrhistogram::Histogram;
use ringdb_lab::counters::{rdtsc, tsc_hz};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::{Duration, Instant};

/// The protocol of a ping-pong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Proto {
    /// A TCP stream: messages are cut from the byte stream by size.
    Tcp,
    /// Connected UDP sockets: one datagram per message.
    Udp,
}

/// Parses `tcp` or `udp`.
impl std::str::FromStr for Proto {
    type Err = NetError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "tcp" => Ok(Proto::Tcp),
            "udp" => Ok(Proto::Udp),
            other => Err(NetError::UnknownProtocol {
                name: other.to_string(),
            }),
        }
    }
}

impl std::fmt::Display for Proto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        })
    }
}

const HELLO: &[u8; 4] = b"PING";
const BYE: u8 = 0xB7;

/// A server socket before the client arrived.
pub enum ServerSocket {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A UDP socket that will be connected to the first client that says hello.
    Udp(UdpSocket),
}

impl ServerSocket {
    /// Binds a socket of `proto` to `addr` (`host:port`; port 0 picks a free one).
    pub fn bind(proto: Proto, addr: &str) -> Result<ServerSocket> {
        Ok(match proto {
            Proto::Tcp => ServerSocket::Tcp(
                TcpListener::bind(addr).map_err(|e| NetError::io(format!("bind {addr}"), e))?,
            ),
            Proto::Udp => ServerSocket::Udp(
                UdpSocket::bind(addr).map_err(|e| NetError::io(format!("bind {addr}"), e))?,
            ),
        })
    }

    /// The address the socket is bound to (where clients connect).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        match self {
            ServerSocket::Tcp(l) => l.local_addr(),
            ServerSocket::Udp(s) => s.local_addr(),
        }
        .map_err(|e| NetError::io("local_addr", e))
    }
}

/// Waits for one client, then echoes everything it sends until it says goodbye (UDP) or
/// closes (TCP). Returns the number of messages echoed.
pub fn serve(cfg: &NetConfig, sock: ServerSocket, size: usize) -> Result<u64> {
    let timeout = cfg.io_timeout;
    let conn = match sock {
        ServerSocket::Tcp(l) => accept_tcp_client(&l, timeout)?,
        ServerSocket::Udp(s) => accept_udp_client(s, timeout)?,
    };
    let mut inbox = Inbox {
        size,
        datagram: conn.datagram,
        rx: Vec::new(),
        msgs: Vec::new(),
        closed: false,
    };
    let mut cfg = cfg.clone();
    cfg.send_buf_size = size.max(8);
    cfg.send_bufs = 64;
    cfg.recv_buf_size = (size.max(64)).next_power_of_two().max(4096);
    let mut t = open_transport(&cfg, vec![conn])?;
    let mut echoed = 0u64;
    let mut idle = Instant::now();
    loop {
        let n = t.poll(Some(Duration::from_millis(100)), &mut |ev| {
            inbox.handle(ev);
            Ok(())
        })?;
        if n > 0 {
            idle = Instant::now();
        }
        for m in inbox.msgs.drain(..) {
            let slot = wait_slot(&mut *t, timeout)?;
            t.slot_mut(slot)[..m.len()].copy_from_slice(&m);
            t.send(0, slot, m.len())?;
            echoed += 1;
        }
        if inbox.closed {
            // Let the last echoes leave before the socket goes.
            drain_sends(&mut *t, timeout)?;
            return Ok(echoed);
        }
        if idle.elapsed() > timeout {
            return Err(NetError::Timeout {
                what: "the ping-pong client's next message".into(),
                after: timeout,
            });
        }
    }
}

/// Accepts the TCP client and answers its hello.
fn accept_tcp_client(listener: &TcpListener, timeout: Duration) -> Result<Conn> {
    let mut s = accept_tcp(listener, timeout)?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let mut h = [0u8; 4];
    s.read_exact(&mut h)
        .map_err(|e| NetError::io("reading the client's hello", e))?;
    s.write_all(&h)
        .map_err(|e| NetError::io("answering the hello", e))?;
    s.set_read_timeout(None)
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    Conn::tcp(s)
}

/// Waits for the UDP client's hello, connects the socket to it and answers.
fn accept_udp_client(s: UdpSocket, timeout: Duration) -> Result<Conn> {
    s.set_read_timeout(Some(timeout))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let mut h = [0u8; 16];
    let (n, from) = s.recv_from(&mut h).map_err(|e| NetError::Timeout {
        what: format!("a UDP client hello ({e})"),
        after: timeout,
    })?;
    if &h[..n] != HELLO {
        return Err(NetError::MalformedFrame {
            peer: from.to_string(),
            fault: FrameFault::NotHello,
        });
    }
    s.connect(from)
        .map_err(|e| NetError::io("connect UDP", e))?;
    s.send(HELLO)
        .map_err(|e| NetError::io("answering the hello", e))?;
    s.set_read_timeout(None)
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    Conn::udp(s)
}

/// What the server received and has not echoed yet: whole messages, and whether the client
/// is gone.
struct Inbox {
    size: usize,
    datagram: bool,
    /// TCP: bytes of the next message that arrived so far.
    rx: Vec<u8>,
    msgs: Vec<Vec<u8>>,
    closed: bool,
}

impl Inbox {
    fn handle(&mut self, ev: Event<'_>) {
        match ev {
            Event::Recv { data, .. } => {
                if self.datagram {
                    if data.len() == 1 && data[0] == BYE {
                        self.closed = true;
                    } else if data != HELLO {
                        // (a retried hello that arrived after the first one was answered
                        // is dropped; message bytes are always odd, so never equal to it)
                        self.msgs.push(data.to_vec());
                    }
                } else {
                    self.rx.extend_from_slice(data);
                    while self.rx.len() >= self.size {
                        self.msgs.push(self.rx.drain(..self.size).collect());
                    }
                }
            }
            Event::Closed { .. } => self.closed = true,
            Event::SendDone { .. } => {}
        }
    }
}

/// Lets the sends in flight leave (for at most `timeout`).
fn drain_sends(t: &mut dyn Transport, timeout: Duration) -> Result<()> {
    let t0 = Instant::now();
    while t.pending_sends() > 0 && t0.elapsed() < timeout {
        t.poll(Some(Duration::from_millis(10)), &mut |_| Ok(()))?;
    }
    Ok(())
}

fn wait_slot(t: &mut dyn Transport, timeout: Duration) -> Result<u32> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = t.alloc() {
            return Ok(s);
        }
        if t0.elapsed() > timeout {
            return Err(NetError::Timeout {
                what: "a free send buffer".into(),
                after: timeout,
            });
        }
        t.poll(Some(Duration::from_millis(10)), &mut |_| Ok(()))?;
    }
}

/// Round-trip times of one client run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PingResult {
    /// The protocol.
    pub proto: Proto,
    /// The client's transport spec (the CLI puts the mode name it was given here).
    pub mode: String,
    /// Bytes of each message.
    pub size: usize,
    /// Measured round trips (after the warm-up).
    pub iters: u64,
    /// Median round trip, microseconds.
    pub rtt_p50_us: f64,
    /// 99th percentile round trip, microseconds.
    pub rtt_p99_us: f64,
    /// 99.9th percentile round trip, microseconds.
    pub rtt_p999_us: f64,
    /// Mean round trip, microseconds.
    pub rtt_avg_us: f64,
    /// Longest round trip, microseconds.
    pub rtt_max_us: f64,
    /// RTT/2 at the median: the one-way estimate.
    pub one_way_p50_us: f64,
    /// The client transport's system calls per round trip.
    pub syscalls_per_rtt: f64,
    /// Process CPU per round trip on the client side (microseconds).
    pub client_cpu_us_per_rtt: f64,
}

/// Connects to `addr`, exchanges a hello, then measures `iters` round trips after `warmup`.
pub fn run_client(
    cfg: &NetConfig,
    proto: Proto,
    addr: SocketAddr,
    size: usize,
    iters: u64,
    warmup: u64,
) -> Result<PingResult> {
    check_message_size(proto, size)?;
    let timeout = cfg.io_timeout;
    let conn = match proto {
        Proto::Tcp => connect_tcp_client(addr, timeout)?,
        Proto::Udp => connect_udp_client(addr, timeout)?,
    };
    let mut cfg = cfg.clone();
    cfg.send_buf_size = size;
    cfg.send_bufs = 4;
    cfg.recv_buf_size = (size.max(64)).next_power_of_two().max(4096);
    let t = open_transport(&cfg, vec![conn])?;
    let mut client = PingClient {
        t,
        proto,
        addr,
        size,
        timeout,
        got: Vec::with_capacity(size * 2),
    };
    let measured = client.measure(iters, warmup)?;
    // Say goodbye so the server ends at once.
    if proto == Proto::Udp {
        client.say_goodbye()?;
    }
    drop(client);
    Ok(measured.result(proto, cfg.spec(), size, iters))
}

/// Refuses message sizes the protocol cannot carry.
fn check_message_size(proto: Proto, size: usize) -> Result<()> {
    NetError::check_range(NetSetting::MessageSize, size, 1, 1 << 20)?;
    if proto == Proto::Udp {
        // A 1-byte datagram is the goodbye.
        NetError::check_range(NetSetting::UdpMessageSize, size, 2, 65000)?;
    }
    Ok(())
}

/// Connects over TCP and waits for the server to answer the hello.
fn connect_tcp_client(addr: SocketAddr, timeout: Duration) -> Result<Conn> {
    let mut s = connect_tcp(addr, timeout)?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    s.write_all(HELLO).map_err(|e| NetError::io("hello", e))?;
    let mut h = [0u8; 4];
    s.read_exact(&mut h)
        .map_err(|e| NetError::io(format!("waiting for the server at {addr}"), e))?;
    s.set_read_timeout(None)
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    Conn::tcp(s)
}

/// Connects a UDP socket to `addr` and repeats the hello until the server answers it.
fn connect_udp_client(addr: SocketAddr, timeout: Duration) -> Result<Conn> {
    let bind = if addr.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let connect_error = |e| NetError::Connect { addr, source: e };
    let s = UdpSocket::bind(bind).map_err(|e| NetError::io("bind UDP", e))?;
    s.connect(addr).map_err(connect_error)?;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let t0 = Instant::now();
    let mut h = [0u8; 16];
    loop {
        // A refused port shows up as ECONNREFUSED on a connected UDP socket.
        s.send(HELLO).map_err(connect_error)?;
        match s.recv(&mut h) {
            Ok(4) if &h[..4] == HELLO => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(connect_error(e))
            }
            Err(_) => {}
        }
        if t0.elapsed() > timeout {
            return Err(NetError::Timeout {
                what: format!("the UDP server at {addr} to answer"),
                after: timeout,
            });
        }
    }
    s.set_read_timeout(None)
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    Conn::udp(s)
}

/// Byte `k` of the message of round trip `i` (always odd, so never the hello's bytes).
fn message_byte(i: u64, k: usize) -> u8 {
    (i as u8).wrapping_add(k as u8).wrapping_mul(31) | 1
}

/// The client's side of the measured exchange.
struct PingClient {
    t: Box<dyn Transport>,
    proto: Proto,
    addr: SocketAddr,
    size: usize,
    timeout: Duration,
    /// The echo of the current round trip, as it arrives.
    got: Vec<u8>,
}

/// What the measured round trips gave.
struct Measured {
    hist: Histogram<u64>,
    syscalls: u64,
    cpu_secs: f64,
}

impl PingClient {
    /// Runs `warmup` round trips, then `iters` measured ones.
    fn measure(&mut self, iters: u64, warmup: u64) -> Result<Measured> {
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
            .expect("constant histogram bounds are valid");
        let hz = tsc_hz();
        let (mut sys0, mut cpu0) = (0u64, 0.0f64);
        for i in 0..warmup + iters {
            if i == warmup {
                sys0 = self.t.stats().syscalls;
                cpu0 = crate::sys::process_cpu_secs();
            }
            let ticks = self.round_trip(i)?;
            if i >= warmup {
                let ns = ticks as f64 * 1e9 / hz;
                hist.saturating_record(ns.max(1.0) as u64);
            }
        }
        Ok(Measured {
            hist,
            syscalls: self.t.stats().syscalls - sys0,
            cpu_secs: crate::sys::process_cpu_secs() - cpu0,
        })
    }

    /// Sends message `i`, waits for its echo and checks it; returns the TSC ticks it took.
    fn round_trip(&mut self, i: u64) -> Result<u64> {
        let slot = wait_slot(&mut *self.t, self.timeout)?;
        let buf = self.t.slot_mut(slot);
        for (k, b) in buf[..self.size].iter_mut().enumerate() {
            *b = message_byte(i, k);
        }
        let c0 = rdtsc();
        self.t.send(0, slot, self.size)?;
        self.await_echo(i)?;
        let c1 = rdtsc();
        self.check_echo(i)?;
        Ok(c1.wrapping_sub(c0))
    }

    /// Receives until `size` bytes of echo arrived.
    fn await_echo(&mut self, i: u64) -> Result<()> {
        self.got.clear();
        let (proto, got) = (self.proto, &mut self.got);
        let mut closed = false;
        let mut last = Instant::now();
        while got.len() < self.size {
            let n = self.t.poll(Some(self.timeout), &mut |ev| {
                match ev {
                    // A late answer to a retried UDP hello is not an echo.
                    Event::Recv { data, .. } if proto == Proto::Udp && data == HELLO => {}
                    Event::Recv { data, .. } => got.extend_from_slice(data),
                    Event::Closed { .. } => closed = true,
                    Event::SendDone { .. } => {}
                }
                Ok(())
            })?;
            if closed {
                return Err(NetError::PeerClosed {
                    peer: self.addr.to_string(),
                    when: CloseStage::RoundTrip { index: i },
                });
            }
            if n > 0 {
                last = Instant::now();
            } else if last.elapsed() >= self.timeout {
                return Err(NetError::Timeout {
                    what: format!("the echo of round trip {i} from {}", self.addr),
                    after: self.timeout,
                });
            }
        }
        Ok(())
    }

    /// Fails unless the echo is exactly message `i`.
    fn check_echo(&self, i: u64) -> Result<()> {
        let size = self.size;
        let first_difference = self
            .got
            .iter()
            .enumerate()
            .position(|(k, &b)| b != message_byte(i, k));
        if self.got.len() != size || first_difference.is_some() {
            return Err(NetError::MalformedFrame {
                peer: self.addr.to_string(),
                fault: FrameFault::EchoMismatch {
                    round_trip: i,
                    received_bytes: self.got.len(),
                    size_bytes: size,
                    first_difference,
                },
            });
        }
        Ok(())
    }

    /// Tells a UDP server that the client is done, and lets the message leave.
    fn say_goodbye(&mut self) -> Result<()> {
        let slot = wait_slot(&mut *self.t, self.timeout)?;
        self.t.slot_mut(slot)[0] = BYE;
        self.t.send(0, slot, 1)?;
        drain_sends(&mut *self.t, self.timeout)
    }
}

impl Measured {
    fn result(&self, proto: Proto, mode: String, size: usize, iters: u64) -> PingResult {
        let hist = &self.hist;
        let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
        PingResult {
            proto,
            mode,
            size,
            iters,
            rtt_p50_us: us(0.5),
            rtt_p99_us: us(0.99),
            rtt_p999_us: us(0.999),
            rtt_avg_us: hist.mean() / 1000.0,
            rtt_max_us: hist.max() as f64 / 1000.0,
            one_way_p50_us: us(0.5) / 2.0,
            syscalls_per_rtt: self.syscalls as f64 / iters.max(1) as f64,
            client_cpu_us_per_rtt: self.cpu_secs * 1e6 / iters.max(1) as f64,
        }
    }
}
