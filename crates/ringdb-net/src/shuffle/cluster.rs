//! Wiring nodes together: the connection mesh (one TCP connection per node pair and worker),
//! an in-process cluster (threads, for tests) and a multi-process cluster (one child process per
//! node, the way `ringdb shuffle` runs), with children killed and reaped on every error path.

use super::data::{reference_join, JoinResult, ShuffleSpec};
use super::node::{peers_of, run_node, NodeReport};
use crate::config::NetConfig;
use crate::error::{
    ChildProblem, ChildProcess, FrameFault, NetError, NetSetting, NodeFailure, Result,
};
use crate::sys::{accept_tcp, connect_tcp, Conn};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The first bytes on every mesh connection: which node dialled, for which of its workers.
struct MeshHello {
    magic: u32,
    node: usize,
    worker: usize,
}

impl MeshHello {
    const MAGIC: u32 = 0x4c4c_4548;
    const LEN: usize = 8;

    /// The hello of `node`'s worker `worker`.
    fn encode(node: usize, worker: usize) -> [u8; Self::LEN] {
        let mut hello = [0u8; Self::LEN];
        hello[..4].copy_from_slice(&Self::MAGIC.to_le_bytes());
        hello[4..6].copy_from_slice(&(node as u16).to_le_bytes());
        hello[6..8].copy_from_slice(&(worker as u16).to_le_bytes());
        hello
    }

    /// Reads a hello (validity is the accepting side's check).
    fn decode(hello: &[u8; Self::LEN]) -> MeshHello {
        MeshHello {
            magic: u32::from_le_bytes(hello[..4].try_into().expect("4 bytes")),
            node: u16::from_le_bytes([hello[4], hello[5]]) as usize,
            worker: u16::from_le_bytes([hello[6], hello[7]]) as usize,
        }
    }
}

/// Connects node `node` to every other node: it dials the nodes with a lower id and accepts
/// from those with a higher id. Returns `conns[worker][j]`, `j` in [`peers_of`] order.
pub fn connect_mesh(
    spec: &ShuffleSpec,
    node: usize,
    listener: &TcpListener,
    addrs: &[SocketAddr],
    timeout: Duration,
) -> Result<Vec<Vec<Conn>>> {
    let peers = peers_of(spec.nodes, node);
    let mut slots: Vec<Vec<Option<TcpStream>>> = (0..spec.workers)
        .map(|_| (0..peers.len()).map(|_| None).collect())
        .collect();
    dial_lower_nodes(&mut slots, &peers, node, addrs, timeout)?;
    let expect = peers.iter().filter(|&&p| p > node).count() * spec.workers;
    let deadline = Instant::now() + timeout;
    for _ in 0..expect {
        let left = deadline.saturating_duration_since(Instant::now());
        let (s, hello) = accept_hello(listener, left.max(Duration::from_millis(1)), timeout)?;
        let (from, w) = (hello.node, hello.worker);
        let peer = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        if hello.magic != MeshHello::MAGIC
            || from <= node
            || from >= spec.nodes
            || w >= spec.workers
        {
            return Err(NetError::MalformedFrame {
                peer,
                fault: FrameFault::BadHello {
                    magic: hello.magic,
                    node: from,
                    worker: w,
                },
            });
        }
        let j = peers.iter().position(|&p| p == from).expect("peer in list");
        if slots[w][j].is_some() {
            return Err(NetError::MalformedFrame {
                peer,
                fault: FrameFault::DuplicateConnection {
                    node: from,
                    worker: w,
                },
            });
        }
        slots[w][j] = Some(s);
    }
    slots
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|s| Conn::tcp(s.expect("every slot filled")))
                .collect()
        })
        .collect()
}

/// Dials every peer with a lower id than `node`, once per worker, and says hello; fills
/// `slots[worker][j]` (`j`: the peer's index in `peers`).
fn dial_lower_nodes(
    slots: &mut [Vec<Option<TcpStream>>],
    peers: &[usize],
    node: usize,
    addrs: &[SocketAddr],
    timeout: Duration,
) -> Result<()> {
    for (j, &p) in peers.iter().enumerate().filter(|(_, &p)| p < node) {
        for (w, row) in slots.iter_mut().enumerate() {
            let mut s = connect_tcp(addrs[p], timeout)?;
            s.write_all(&MeshHello::encode(node, w))
                .map_err(|e| NetError::io(format!("hello to node {p}"), e))?;
            row[j] = Some(s);
        }
    }
    Ok(())
}

/// Accepts one connection (waiting up to `accept_timeout`) and reads its hello (waiting up to
/// `timeout`).
fn accept_hello(
    listener: &TcpListener,
    accept_timeout: Duration,
    timeout: Duration,
) -> Result<(TcpStream, MeshHello)> {
    let mut s = accept_tcp(listener, accept_timeout)?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let mut hello = [0u8; MeshHello::LEN];
    s.read_exact(&mut hello)
        .map_err(|e| NetError::io("reading a peer's hello", e))?;
    s.set_read_timeout(None)
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    Ok((s, MeshHello::decode(&hello)))
}

/// Everything one shuffle run produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShuffleReport {
    /// What was shuffled.
    pub spec: ShuffleSpec,
    /// The transport's spec.
    pub transport: String,
    /// Every node's report, by node id.
    pub nodes: Vec<NodeReport>,
    /// The join of all nodes together.
    pub join: JoinResult,
    /// The single-process reference join (equal to `join`, or the run failed).
    pub reference: JoinResult,
}

impl ShuffleReport {
    /// The report of a run whose nodes reported `nodes`; fails with
    /// [`NetError::JoinMismatch`] unless their join equals the reference.
    pub fn new(spec: &ShuffleSpec, cfg: &NetConfig, mut nodes: Vec<NodeReport>) -> Result<Self> {
        nodes.sort_by_key(|n| n.node);
        let mut join = JoinResult::default();
        for n in &nodes {
            join.merge(&n.join);
        }
        let reference = reference_join(spec);
        let r = ShuffleReport {
            spec: spec.clone(),
            transport: cfg.spec(),
            nodes,
            join,
            reference,
        };
        if join != reference {
            return Err(NetError::JoinMismatch {
                got_count: join.count,
                got_sum: join.checksum,
                want_count: reference.count,
                want_sum: reference.checksum,
            });
        }
        Ok(r)
    }

    /// Mean per-node egress bandwidth.
    pub fn egress_gib_s(&self) -> f64 {
        self.nodes.iter().map(|n| n.egress_gib_s()).sum::<f64>() / self.nodes.len().max(1) as f64
    }

    /// Mean per-node CPU use, percent of one CPU.
    pub fn cpu_pct(&self) -> f64 {
        self.nodes.iter().map(|n| n.cpu_pct()).sum::<f64>() / self.nodes.len().max(1) as f64
    }

    /// Bytes all nodes sent.
    pub fn bytes_sent(&self) -> u64 {
        self.nodes.iter().map(|n| n.bytes_sent).sum()
    }

    /// Bytes the kernel reported copying per byte sent with SEND_ZC (None: not zero-copy).
    pub fn zc_copied_per_byte(&self) -> Option<f64> {
        let notifs: u64 = self.nodes.iter().map(|n| n.zc_notifs).sum();
        if notifs == 0 {
            return None;
        }
        let copied: u64 = self.nodes.iter().map(|n| n.zc_copied_bytes).sum();
        Some(copied as f64 / self.bytes_sent().max(1) as f64)
    }
}

/// All nodes as threads of this process over loopback (tests, quick checks).
pub fn run_local(spec: &ShuffleSpec, cfg: &NetConfig) -> Result<ShuffleReport> {
    spec.validate()?;
    cfg.validate()?;
    let listeners: Vec<TcpListener> = (0..spec.nodes)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(|e| NetError::io("bind", e)))
        .collect::<Result<_>>()?;
    let addrs: Vec<SocketAddr> = listeners
        .iter()
        .map(|l| l.local_addr().map_err(|e| NetError::io("local_addr", e)))
        .collect::<Result<_>>()?;
    let handles: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(n, l)| {
            let (spec, cfg, addrs) = (spec.clone(), cfg.clone(), addrs.clone());
            std::thread::spawn(move || {
                let conns = connect_mesh(&spec, n, &l, &addrs, cfg.io_timeout)?;
                run_node(&spec, n, &cfg, conns)
            })
        })
        .collect();
    let mut nodes = Vec::new();
    let mut err = None;
    for (node, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(r)) => nodes.push(r),
            Ok(Err(e)) => {
                err.get_or_insert(e);
            }
            Err(_) => {
                err.get_or_insert(NetError::Node {
                    node,
                    failure: NodeFailure::NodeThreadPanicked,
                });
            }
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    ShuffleReport::new(spec, cfg, nodes)
}

/// The child side of [`run_processes`]: bind, announce the port on stdout, read the peer list
/// from stdin, shuffle, print the report as one JSON line.
pub fn serve_node(spec: &ShuffleSpec, node: usize, cfg: &NetConfig, bind_ip: &str) -> Result<()> {
    die_with_parent();
    let l = TcpListener::bind((bind_ip, 0)).map_err(|e| NetError::io("bind", e))?;
    let port = l
        .local_addr()
        .map_err(|e| NetError::io("local_addr", e))?
        .port();
    let mut out = std::io::stdout();
    writeln!(out, "LISTEN {port}").map_err(|e| NetError::io("stdout", e))?;
    out.flush().map_err(|e| NetError::io("stdout", e))?;
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| NetError::io("reading the peer list", e))?;
    let addrs: Vec<SocketAddr> = line
        .split_whitespace()
        .skip(1)
        .map(|a| {
            a.parse().map_err(|_| NetError::BadPeerAddress {
                address: a.to_string(),
            })
        })
        .collect::<Result<_>>()?;
    NetError::check_range(
        NetSetting::PeerAddresses,
        addrs.len(),
        spec.nodes,
        spec.nodes,
    )?;
    let conns = connect_mesh(spec, node, &l, &addrs, cfg.io_timeout)?;
    let r = run_node(spec, node, cfg, conns)?;
    let json = serde_json::to_string(&r).map_err(|source| NetError::EncodeReport { source })?;
    writeln!(out, "RESULT {json}").map_err(|e| NetError::io("stdout", e))?;
    out.flush().map_err(|e| NetError::io("stdout", e))?;
    Ok(())
}

/// Asks the kernel to kill this process when its parent dies, so no node outlives the run.
fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
}

/// Child processes that are killed and reaped when this guard goes, whatever happened (an
/// error path included), so no benchmark process outlives the run that started it.
pub struct Children {
    /// The children, killed (if still running) and waited for on drop.
    pub kids: Vec<Child>,
}

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.kids {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

enum Msg {
    Line(usize, String),
    Eof(usize),
}

/// How to start one node process: the program, and the arguments that make it run
/// [`serve_node`] for node `i`.
pub struct NodeCommand {
    /// The program to start.
    pub program: PathBuf,
    /// The arguments of node `i`.
    pub args: Box<dyn Fn(usize) -> Vec<String>>,
    /// Run each node inside this network namespace (`ip netns exec NAME`), if any.
    pub netns: Option<Box<dyn Fn(usize) -> String>>,
}

/// One process per node; the parent relays the listening addresses and collects the reports.
/// `node_ip(i)` is the address node i listens on (loopback, or its veth address).
pub fn run_processes(
    spec: &ShuffleSpec,
    cfg: &NetConfig,
    cmd: &NodeCommand,
    node_ip: &dyn Fn(usize) -> String,
    overall: Duration,
    progress: &dyn Fn(usize),
) -> Result<ShuffleReport> {
    spec.validate()?;
    let mut procs = NodeProcesses::spawn(spec.nodes, cmd)?;
    let reports = procs.collect_reports(node_ip, overall, progress)?;
    procs.wait_all()?;
    let nodes: Vec<NodeReport> = reports.into_iter().flatten().collect();
    if nodes.len() != spec.nodes {
        return Err(NetError::Child {
            process: ChildProcess::Nodes,
            problem: ChildProblem::MissingReports,
        });
    }
    ShuffleReport::new(spec, cfg, nodes)
}

/// The node processes of one run and the pipes to them. (Fields drop in this order: the
/// children are killed and reaped last, after their stdin closed.)
struct NodeProcesses {
    /// What each node printed on stderr (complete once it exited).
    stderrs: Vec<Arc<Mutex<String>>>,
    /// Every line the nodes print on stdout, and the end of each stdout.
    lines: mpsc::Receiver<Msg>,
    stdins: Vec<ChildStdin>,
    kids: Children,
}

impl NodeProcesses {
    /// Starts the `nodes` processes of `cmd`, with a thread per pipe that reads it.
    fn spawn(nodes: usize, cmd: &NodeCommand) -> Result<NodeProcesses> {
        let (tx, lines) = mpsc::channel::<Msg>();
        let mut procs = NodeProcesses {
            stderrs: Vec::new(),
            lines,
            stdins: Vec::new(),
            kids: Children { kids: Vec::new() },
        };
        for i in 0..nodes {
            let mut child = node_command(cmd, i)
                .spawn()
                .map_err(|source| NetError::Child {
                    process: ChildProcess::Node { node: i },
                    problem: ChildProblem::CannotStart {
                        program: cmd.program.clone(),
                        source,
                    },
                })?;
            let out = child.stdout.take().expect("piped stdout");
            let err = child.stderr.take().expect("piped stderr");
            procs.stdins.push(child.stdin.take().expect("piped stdin"));
            procs.kids.kids.push(child);
            let tx = tx.clone();
            std::thread::spawn(move || forward_lines(i, out, tx));
            let buf = Arc::new(Mutex::new(String::new()));
            procs.stderrs.push(buf.clone());
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = BufReader::new(err).read_to_string(&mut s);
                if let Ok(mut b) = buf.lock() {
                    *b = s;
                }
            });
        }
        Ok(procs)
    }

    /// Relays the listening ports as the peer list, and gathers every node's report, until
    /// all reported or `overall` passed.
    fn collect_reports(
        &mut self,
        node_ip: &dyn Fn(usize) -> String,
        overall: Duration,
        progress: &dyn Fn(usize),
    ) -> Result<Vec<Option<NodeReport>>> {
        let nodes = self.stdins.len();
        let deadline = Instant::now() + overall;
        let mut ports = vec![None; nodes];
        let mut reports: Vec<Option<NodeReport>> = vec![None; nodes];
        let mut sent_peers = false;
        while !reports.iter().all(|r| r.is_some()) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NetError::Timeout {
                    what: "the node processes to finish".into(),
                    after: overall,
                });
            }
            match self.lines.recv_timeout(left) {
                Ok(Msg::Line(i, l)) => {
                    if read_node_line(i, &l, &mut ports, &mut reports)? {
                        progress(reports.iter().filter(|r| r.is_some()).count());
                    }
                    if !sent_peers && ports.iter().all(|p| p.is_some()) {
                        self.send_peers(&ports, node_ip)?;
                        sent_peers = true;
                    }
                }
                Ok(Msg::Eof(i)) => {
                    if reports[i].is_none() {
                        return Err(self.no_report_error(i));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(reports)
    }

    /// Tells every node where all nodes listen.
    fn send_peers(
        &mut self,
        ports: &[Option<u16>],
        node_ip: &dyn Fn(usize) -> String,
    ) -> Result<()> {
        let list: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(n, p)| format!("{}:{}", node_ip(n), p.expect("all ports known")))
            .collect();
        let line = format!("PEERS {}\n", list.join(" "));
        for s in &mut self.stdins {
            s.write_all(line.as_bytes())
                .and_then(|_| s.flush())
                .map_err(|e| NetError::io("sending the peer list", e))?;
        }
        Ok(())
    }

    /// Node `i` ended without its report: the error, with what the node printed on stderr.
    fn no_report_error(&mut self, i: usize) -> NetError {
        // Give the child a moment to exit so its stderr is complete.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(500) {
            if let Ok(Some(_)) = self.kids.kids[i].try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(20));
        let msg = self.stderrs[i]
            .lock()
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let msg = msg
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim_start_matches("ringdb: error: "))
            .collect::<Vec<_>>()
            .join("; ");
        NetError::Child {
            process: ChildProcess::Node { node: i },
            problem: ChildProblem::NoReport { stderr: msg },
        }
    }

    /// Waits for every node to exit; fails on the first that did not exit successfully.
    fn wait_all(&mut self) -> Result<()> {
        for (i, c) in self.kids.kids.iter_mut().enumerate() {
            let st = c.wait().map_err(|e| NetError::io("wait for node", e))?;
            if !st.success() {
                return Err(NetError::Child {
                    process: ChildProcess::Node { node: i },
                    problem: ChildProblem::Exited {
                        status: st,
                        stderr: String::new(),
                    },
                });
            }
        }
        Ok(())
    }
}

/// The command that starts node `i` (inside its network namespace, if any), its standard
/// streams piped.
fn node_command(cmd: &NodeCommand, i: usize) -> Command {
    let mut c = match &cmd.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns(i)]).arg(&cmd.program);
            c
        }
        None => Command::new(&cmd.program),
    };
    c.args((cmd.args)(i))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Sends node `i`'s stdout lines to `tx`, then its end.
fn forward_lines(i: usize, out: ChildStdout, tx: mpsc::Sender<Msg>) {
    for line in BufReader::new(out).lines() {
        match line {
            Ok(l) => {
                if tx.send(Msg::Line(i, l)).is_err() {
                    return;
                }
            }
            Err(_) => break,
        }
    }
    let _ = tx.send(Msg::Eof(i));
}

/// Reads one stdout line of node `i`: its listening port, or its report (then returns true).
/// (Matched anywhere in the line: a test harness may print before it.)
fn read_node_line(
    i: usize,
    l: &str,
    ports: &mut [Option<u16>],
    reports: &mut [Option<NodeReport>],
) -> Result<bool> {
    if let Some(p) = l.find("LISTEN ").map(|k| &l[k + 7..]) {
        let port: u16 = p.trim().parse().map_err(|_| NetError::Child {
            process: ChildProcess::Node { node: i },
            problem: ChildProblem::BadListenLine {
                line: l.to_string(),
            },
        })?;
        ports[i] = Some(port);
    } else if let Some(j) = l.find("RESULT ").map(|k| &l[k + 7..]) {
        let r: NodeReport = serde_json::from_str(j).map_err(|source| NetError::Child {
            process: ChildProcess::Node { node: i },
            problem: ChildProblem::UnreadableReport { source },
        })?;
        reports[i] = Some(r);
        return Ok(true);
    }
    Ok(false)
}
