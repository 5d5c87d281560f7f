//! `ringdb pingpong` and `ringdb shuffle`: the network experiments of paper Sec. 4 over the
//! transports of ringdb-net. Client/server and nodes run as separate processes: the command
//! re-executes its own binary with a hidden role (`--serve`, `--node-id`).

use clap::Args;
use ringdb_net::pingpong::{self, PingResult, Proto, ServerSocket};
use ringdb_net::shuffle::netns::NetnsGuard;
use ringdb_net::shuffle::{self, cluster::Children, NodeCommand, ShuffleReport, ShuffleSpec};
use ringdb_net::sweep::{self, SweepPoint};
use ringdb_net::{NetConfig, NetError, TransportKind};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

type CmdResult = Result<(), Box<dyn std::error::Error>>;

/// Parses `8`, `64K`, `1MiB`, `4k`, `2m`, `1G` as bytes.
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = [
        ("gib", 1usize << 30),
        ("mib", 1 << 20),
        ("kib", 1 << 10),
        ("gb", 1 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1 << 30),
        ("m", 1 << 20),
        ("k", 1 << 10),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((lower.clone(), 1));
    let n: usize = num
        .parse()
        .map_err(|_| format!("{t:?} is not a size (e.g. 8, 64K, 1MiB)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{t:?} is too large"))
}

fn secs(s: &str) -> Result<Duration, String> {
    let t = s.trim().trim_end_matches('s');
    t.parse::<f64>()
        .ok()
        .filter(|v| *v > 0.0 && *v < 86400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?} is not a duration in seconds (e.g. 10 or 2.5s)"))
}

/// This binary, for re-executing it in a child role. `/proc/self/exe` still works when the
/// file was replaced by a rebuild in the meantime.
fn exe() -> Result<PathBuf, NetError> {
    let p = PathBuf::from("/proc/self/exe");
    if p.exists() {
        return Ok(p);
    }
    std::env::current_exe().map_err(|e| NetError::io("finding the ringdb binary", e))
}

/// Round-trip latency ping-pong (paper Fig. 15): TCP/UDP, client and server in separate
/// processes, RTT p50/p99/p99.9 and the one-way estimate; --compare runs several modes.
#[derive(Args, Debug)]
#[command(
    about = "Round-trip latency ping-pong over TCP/UDP (paper Fig. 15): epoll vs io_uring DeferTR/SQPoll, +regfds/+regbufs/+napi"
)]
pub struct PingArgs {
    /// tcp, udp or both.
    #[arg(long, default_value = "tcp")]
    proto: String,
    /// Message size (bytes; K/M suffixes).
    #[arg(long, default_value = "8", value_parser = parse_size)]
    size: usize,
    /// Measured round trips (after the warm-up).
    #[arg(long, default_value_t = 20_000)]
    iters: u64,
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// epoll, uring-defer, uring-sqpoll, with +regfds, +regbufs, +napi, +pollfirst,
    /// +multishot, +zc-send.
    #[arg(long, default_value = "uring-defer")]
    mode: String,
    /// Run every mode of --modes in one invocation and print ratios against epoll.
    #[arg(long)]
    compare: bool,
    #[arg(
        long,
        default_value = "epoll,uring-defer,uring-sqpoll,uring-defer+regfds,uring-defer+regfds+regbufs,uring-defer+napi"
    )]
    modes: String,
    /// Run only one side: `server` (listens on --addr, serves one client) or `client`
    /// (connects to --addr). Without it, the command starts its own server process.
    #[arg(long)]
    role: Option<String>,
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: String,
    /// Give up on any step that makes no progress for this long (seconds).
    #[arg(long, default_value = "10", value_parser = secs)]
    timeout: Duration,
    /// JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Internal: the server child started by the command itself.
    #[arg(long, hide = true)]
    serve: bool,
}

fn protos(s: &str) -> Result<Vec<Proto>, NetError> {
    match s {
        "both" => Ok(vec![Proto::Tcp, Proto::Udp]),
        p => Ok(vec![p.parse()?]),
    }
}

fn mode_cfg(mode: &str, timeout: Duration) -> Result<NetConfig, NetError> {
    let mut c: NetConfig = mode.parse()?;
    c.io_timeout = timeout;
    Ok(c)
}

/// Starts `ringdb pingpong --serve` and waits for its `LISTEN port` line.
fn spawn_server(
    a: &PingArgs,
    proto: Proto,
    mode: &str,
) -> Result<(Children, SocketAddr), NetError> {
    let mut c = Command::new(exe()?);
    c.args([
        "pingpong",
        "--serve",
        "--proto",
        &proto.to_string(),
        "--size",
        &a.size.to_string(),
        "--mode",
        mode,
        "--timeout",
        &a.timeout.as_secs_f64().to_string(),
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| NetError::Child {
        what: "ping-pong server".into(),
        reason: format!("cannot start: {e}"),
    })?;
    let out = child.stdout.take().expect("piped stdout");
    let kids = Children { kids: vec![child] };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(a.timeout).map_err(|_| NetError::Timeout {
        what: "the ping-pong server to listen".into(),
        after: a.timeout,
    })?;
    let port: u16 = line
        .trim()
        .strip_prefix("LISTEN ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| NetError::Child {
            what: "ping-pong server".into(),
            reason: format!("exited before listening ({:?})", line.trim()),
        })?;
    Ok((kids, SocketAddr::from(([127, 0, 0, 1], port))))
}

fn wait_child(mut kids: Children, timeout: Duration) -> Result<(), NetError> {
    let t0 = std::time::Instant::now();
    let c = &mut kids.kids[0];
    loop {
        match c.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(()),
            Ok(Some(st)) => {
                let mut msg = String::new();
                if let Some(e) = c.stderr.as_mut() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut msg);
                }
                return Err(NetError::Child {
                    what: "ping-pong server".into(),
                    reason: format!("exited with {st}: {}", msg.trim()),
                });
            }
            Ok(None) if t0.elapsed() > timeout => {
                return Err(NetError::Timeout {
                    what: "the ping-pong server to exit".into(),
                    after: timeout,
                })
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(NetError::io("waiting for the server", e)),
        }
    }
}

enum PingRow {
    Done(PingResult),
    Skipped {
        proto: Proto,
        mode: String,
        reason: String,
    },
}

fn ping_one(a: &PingArgs, proto: Proto, mode: &str) -> Result<PingRow, NetError> {
    let cfg = mode_cfg(mode, a.timeout)?;
    let (kids, addr) = spawn_server(a, proto, mode)?;
    match pingpong::run_client(&cfg, proto, addr, a.size, a.iters, a.warmup) {
        Ok(mut r) => {
            r.mode = mode.to_string();
            wait_child(kids, a.timeout)?;
            Ok(PingRow::Done(r))
        }
        // A switch this device cannot do: reported, not fatal (the server child is killed).
        Err(NetError::Unsupported { switch, reason }) => Ok(PingRow::Skipped {
            proto,
            mode: mode.to_string(),
            reason: format!("{switch}: {reason}"),
        }),
        Err(e) => Err(e),
    }
}

pub fn run_pingpong(a: PingArgs) -> CmdResult {
    let protos = protos(&a.proto)?;
    if a.serve {
        // Child role: one client, then exit.
        let cfg = mode_cfg(&a.mode, a.timeout)?;
        let sock = ServerSocket::bind(protos[0], "127.0.0.1:0")?;
        println!("LISTEN {}", sock.local_addr()?.port());
        std::io::stdout().flush()?;
        pingpong::serve(&cfg, sock, a.size)?;
        return Ok(());
    }
    match a.role.as_deref() {
        Some("server") => {
            let cfg = mode_cfg(&a.mode, a.timeout)?;
            let sock = ServerSocket::bind(protos[0], &a.addr)?;
            eprintln!(
                "ringdb pingpong: serving {} on {}",
                protos[0],
                sock.local_addr()?
            );
            let n = pingpong::serve(&cfg, sock, a.size)?;
            eprintln!("ringdb pingpong: echoed {n} messages");
            return Ok(());
        }
        Some("client") => {
            let cfg = mode_cfg(&a.mode, a.timeout)?;
            let addr: SocketAddr = a.addr.parse().map_err(|_| {
                NetError::invalid("--addr", format!("{:?} is not host:port", a.addr))
            })?;
            let mut r = pingpong::run_client(&cfg, protos[0], addr, a.size, a.iters, a.warmup)?;
            r.mode = a.mode.clone();
            return print_ping(&a, &[PingRow::Done(r)]);
        }
        Some(other) => {
            return Err(NetError::invalid("--role", format!("{other:?} (server or client)")).into())
        }
        None => {}
    }
    let modes: Vec<String> = if a.compare {
        a.modes
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    } else {
        vec![a.mode.clone()]
    };
    for m in &modes {
        mode_cfg(m, a.timeout)?; // refuse bad specs before starting anything
    }
    let bar = ringdb_net::report::progress((modes.len() * protos.len()) as u64, "pingpong");
    let mut rows = Vec::new();
    for &p in &protos {
        for m in &modes {
            bar.set_message(format!("{p} {m}"));
            rows.push(ping_one(&a, p, m)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    print_ping(&a, &rows)
}

fn print_ping(a: &PingArgs, rows: &[PingRow]) -> CmdResult {
    let epoll_p50 = |p: Proto| {
        rows.iter().find_map(|r| match r {
            PingRow::Done(x) if x.proto == p && x.mode == "epoll" => Some(x.rtt_p50_us),
            _ => None,
        })
    };
    if a.json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| match r {
                PingRow::Done(x) => {
                    let mut j = serde_json::to_value(x).unwrap_or_default();
                    if let Some(e) = epoll_p50(x.proto) {
                        j["p50_ratio_vs_epoll"] = json!(x.rtt_p50_us / e);
                    }
                    j
                }
                PingRow::Skipped {
                    proto,
                    mode,
                    reason,
                } => {
                    json!({"proto": proto, "mode": mode, "skipped": reason})
                }
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "machine": ringdb_net::sys::machine_description(),
                "size": a.size,
                "iters": a.iters,
                "results": v,
            }))?
        );
        return Ok(());
    }
    println!(
        "ping-pong, {} B messages, {} round trips, loopback, {}",
        a.size,
        a.iters,
        ringdb_net::sys::machine_description()
    );
    println!(
        "{:<5} {:<30} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10} {:>9}",
        "proto",
        "mode",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "1-way us",
        "sys/RTT",
        "cpu us/RTT",
        "p50/epoll"
    );
    for r in rows {
        match r {
            PingRow::Done(x) => {
                let ratio = epoll_p50(x.proto)
                    .map(|e| format!("{:.2}", x.rtt_p50_us / e))
                    .unwrap_or_else(|| "-".into());
                println!(
                    "{:<5} {:<30} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>9.2} {:>10.1} {:>9}",
                    x.proto.to_string(),
                    x.mode,
                    x.rtt_p50_us,
                    x.rtt_p99_us,
                    x.rtt_p999_us,
                    x.one_way_p50_us,
                    x.syscalls_per_rtt,
                    x.client_cpu_us_per_rtt,
                    ratio
                );
            }
            PingRow::Skipped {
                proto,
                mode,
                reason,
            } => {
                println!("{:<5} {:<30} skipped: {reason}", proto.to_string(), mode);
            }
        }
    }
    Ok(())
}

/// Distributed shuffle and join (paper Figs. 10-13), one process per node over loopback (or
/// network namespaces with --netns); --sweep measures cycles per byte against message size
/// (Fig. 16).
#[derive(Args, Debug)]
#[command(
    about = "Distributed shuffle + join over epoll/io_uring transports (paper Figs. 10-13); --sweep: cycles per byte vs message size (Fig. 16)"
)]
pub struct ShuffleArgs {
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Worker threads per node (each with its own ring and connections).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Tuple size, 64 B..4 KiB (the first 8 bytes are the join key).
    #[arg(long, default_value = "64", value_parser = parse_size)]
    tuple_size: usize,
    /// Table size per node (the number of tuples follows from the tuple size).
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    table_size: usize,
    /// Network chunk (frame payload) size.
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    chunk: usize,
    #[arg(long, default_value_t = 16_384)]
    morsel: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Comma-separated transports: epoll, uring, uring+zc-send, uring+multishot, uring+zc-recv
    /// (each may carry switches: uring+regfds+regbufs, uring-sqpoll, ...). Ratios are against
    /// the first epoll entry.
    #[arg(
        long,
        default_value = "epoll,uring,uring+zc-send,uring+multishot,uring+zc-recv"
    )]
    transport: String,
    /// Each node in its own network namespace, joined by veth pairs through a bridge (root).
    #[arg(long)]
    netns: bool,
    /// Nodes as threads of this process instead of processes.
    #[arg(long)]
    in_process: bool,
    /// Run every transport this many times, alternating, and report the median run (this
    /// machine is shared and noisy).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Seconds without progress before a node gives up.
    #[arg(long, default_value = "10", value_parser = secs)]
    timeout: Duration,
    #[arg(long)]
    json: bool,
    /// Message-size sweep instead of the shuffle: cycles per byte per transport.
    #[arg(long)]
    sweep: bool,
    #[arg(
        long,
        default_value = "epoll,uring,uring+regbufs,uring+zc-send,uring+multishot"
    )]
    sweep_transports: String,
    /// Comma-separated sizes (default 64 B..1 MiB).
    #[arg(long)]
    sweep_sizes: Option<String>,
    /// Bytes to move per sweep point (bounded to 256..200000 messages).
    #[arg(long, default_value = "128MiB", value_parser = parse_size)]
    sweep_bytes: usize,
    /// Write the sweep as an SVG plot.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Write the sweep as CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Internal: run as node N of a multi-process shuffle.
    #[arg(long, hide = true)]
    node_id: Option<usize>,
    #[arg(long, hide = true, default_value = "127.0.0.1")]
    bind_ip: String,
}

fn shuffle_spec(a: &ShuffleArgs) -> Result<ShuffleSpec, NetError> {
    let rows = a.table_size / a.tuple_size.max(1);
    let s = ShuffleSpec {
        nodes: a.nodes,
        workers: a.workers,
        tuple_size: a.tuple_size,
        rows_per_node: rows,
        seed: a.seed,
        chunk: a.chunk,
        morsel: a.morsel,
    };
    s.validate()?;
    if a.nodes < 2 {
        return Err(NetError::invalid(
            "--nodes",
            "a shuffle needs at least 2 nodes",
        ));
    }
    Ok(s)
}

pub fn run_shuffle(a: ShuffleArgs) -> CmdResult {
    if a.sweep {
        return run_sweep(&a);
    }
    let spec = shuffle_spec(&a)?;
    if let Some(node) = a.node_id {
        let mut cfg: NetConfig = a.transport.parse()?;
        cfg.io_timeout = a.timeout;
        shuffle::serve_node(&spec, node, &cfg, &a.bind_ip)?;
        return Ok(());
    }
    let transports: Vec<String> = a
        .transport
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let mut cfgs = Vec::new();
    for t in &transports {
        let mut c: NetConfig = t.parse()?;
        c.io_timeout = a.timeout;
        cfgs.push(c);
    }
    let ns = if a.netns {
        Some(NetnsGuard::create(a.nodes)?)
    } else {
        None
    };
    let repeat = a.repeat.max(1);
    let bar = ringdb_net::report::progress((repeat * transports.len() * a.nodes) as u64, "shuffle");
    let mut runs: Vec<Vec<ShuffleReport>> = vec![Vec::new(); transports.len()];
    let mut refused: Vec<Option<String>> = vec![None; transports.len()];
    for _rep in 0..repeat {
        for (k, (t, cfg)) in transports.iter().zip(&cfgs).enumerate() {
            if refused[k].is_some() {
                bar.inc(a.nodes as u64);
                continue;
            }
            bar.set_message(t.clone());
            if cfg.transport == TransportKind::UringZcRecv && !a.netns && !a.in_process {
                // Probe the interface the nodes use (loopback) up front and report the refusal.
                let e = ringdb_net::transport::zcrx::refusal(None);
                refused[k] = Some(e.to_string());
                bar.inc(a.nodes as u64);
                continue;
            }
            let r = if a.in_process {
                shuffle::run_local(&spec, cfg)
            } else {
                let base_done = bar.position();
                let progress = |n: usize| bar.set_position(base_done + n as u64);
                // `ip netns exec` runs the program itself: it needs the real path.
                let program = if a.netns {
                    std::env::current_exe()
                        .map_err(|e| NetError::io("finding the ringdb binary", e))?
                } else {
                    exe()?
                };
                let timeout_s = a.timeout.as_secs_f64().to_string();
                let spec_c = spec.clone();
                let tname = t.clone();
                let netns = a.netns;
                let cmd = NodeCommand {
                    program,
                    args: Box::new(move |i| {
                        let ip = if netns {
                            NetnsGuard::addr(i)
                        } else {
                            "127.0.0.1".to_string()
                        };
                        vec![
                            "shuffle".into(),
                            "--node-id".into(),
                            i.to_string(),
                            "--bind-ip".into(),
                            ip,
                            "--nodes".into(),
                            spec_c.nodes.to_string(),
                            "--workers".into(),
                            spec_c.workers.to_string(),
                            "--tuple-size".into(),
                            spec_c.tuple_size.to_string(),
                            "--table-size".into(),
                            (spec_c.rows_per_node * spec_c.tuple_size).to_string(),
                            "--chunk".into(),
                            spec_c.chunk.to_string(),
                            "--morsel".into(),
                            spec_c.morsel.to_string(),
                            "--seed".into(),
                            spec_c.seed.to_string(),
                            "--transport".into(),
                            tname.clone(),
                            "--timeout".into(),
                            timeout_s.clone(),
                        ]
                    }),
                    netns: ns.as_ref().map(|g| {
                        let names = g.names.clone();
                        Box::new(move |i: usize| names[i].clone()) as Box<dyn Fn(usize) -> String>
                    }),
                };
                let node_ip = |i: usize| {
                    if netns {
                        NetnsGuard::addr(i)
                    } else {
                        "127.0.0.1".to_string()
                    }
                };
                // Overall bound: table generation, the shuffle and the join, generously.
                let overall = a.timeout * 6 + Duration::from_secs(120);
                shuffle::run_processes(&spec, cfg, &cmd, &node_ip, overall, &progress)
            };
            match r {
                Ok(r) => runs[k].push(r),
                // zc-recv refused inside the nodes (e.g. on veth): reported, not fatal.
                Err(e) if cfg.transport == TransportKind::UringZcRecv => {
                    refused[k] = Some(e.to_string())
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    // The median run of each transport (by mean egress bandwidth).
    let mut reports: Vec<(String, Result<ShuffleReport, String>, Vec<f64>)> = Vec::new();
    for (k, t) in transports.iter().enumerate() {
        if let Some(e) = refused[k].take() {
            reports.push((t.clone(), Err(e), Vec::new()));
            continue;
        }
        let mut rs = std::mem::take(&mut runs[k]);
        rs.sort_by(|x, y| x.egress_gib_s().total_cmp(&y.egress_gib_s()));
        let all: Vec<f64> = rs.iter().map(|r| r.egress_gib_s()).collect();
        let mid = rs.swap_remove(rs.len() / 2);
        reports.push((t.clone(), Ok(mid), all));
    }
    bar.finish_and_clear();
    drop(ns);
    print_shuffle(&a, &spec, &reports)
}

fn copies_per_byte(r: &ShuffleReport) -> (String, Option<f64>) {
    match r.zc_copied_per_byte() {
        Some(x) => (format!("{x:.2} (zc notif)"), Some(x)),
        None => ("1 (copying send)".to_string(), None),
    }
}

fn print_shuffle(
    a: &ShuffleArgs,
    spec: &ShuffleSpec,
    reports: &[(String, Result<ShuffleReport, String>, Vec<f64>)],
) -> CmdResult {
    let base = reports.iter().find_map(|(t, r, _)| match r {
        Ok(r) if t.starts_with("epoll") => Some(r.egress_gib_s()),
        _ => None,
    });
    let place = if a.netns {
        "network namespaces + veth"
    } else if a.in_process {
        "loopback, nodes as threads"
    } else {
        "loopback, nodes as processes"
    };
    if a.json {
        let v: Vec<_> = reports
            .iter()
            .map(|(t, r, all)| match r {
                Ok(r) => json!({
                    "transport": t,
                    "egress_gib_s_all_runs": all,
                    "egress_gib_s_per_node": r.egress_gib_s(),
                    "cpu_pct_per_node": r.cpu_pct(),
                    "ratio_vs_epoll": base.map(|b| r.egress_gib_s() / b),
                    "zc_copied_per_byte": r.zc_copied_per_byte(),
                    "join_ok": r.join == r.reference,
                    "report": r,
                }),
                Err(e) => json!({"transport": t, "skipped": e}),
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "machine": ringdb_net::sys::machine_description(),
                "where": place,
                "spec": spec,
                "results": v,
            }))?
        );
        return Ok(());
    }
    println!(
        "shuffle: {} nodes x {} workers, {} B tuples, {} MiB per node, {} KiB chunks, {place}; {}",
        spec.nodes,
        spec.workers,
        spec.tuple_size,
        (spec.rows_per_node * spec.tuple_size) >> 20,
        spec.chunk >> 10,
        ringdb_net::sys::machine_description()
    );
    println!(
        "{:<24} {:>5} {:>12} {:>7} {:>9} {:>18} {:>12} {:>10}",
        "transport",
        "node",
        "egress GiB/s",
        "CPU%",
        "secs",
        "copies/byte sent",
        "syscalls",
        "vs epoll"
    );
    for (t, r, all) in reports {
        match r {
            Ok(r) => {
                for n in &r.nodes {
                    let cp = if n.zc_notifs > 0 {
                        format!(
                            "{:.2} (zc notif)",
                            n.zc_copied_bytes as f64 / n.bytes_sent.max(1) as f64
                        )
                    } else {
                        "1 (copying send)".into()
                    };
                    println!(
                        "{:<24} {:>5} {:>12.3} {:>7.0} {:>9.3} {:>18} {:>12} {:>10}",
                        t,
                        n.node,
                        n.egress_gib_s(),
                        n.cpu_pct(),
                        n.shuffle_secs,
                        cp,
                        n.syscalls,
                        ""
                    );
                }
                let (cp, _) = copies_per_byte(r);
                println!(
                    "{:<24} {:>5} {:>12.3} {:>7.0} {:>9} {:>18} {:>12} {:>10}",
                    t,
                    "mean",
                    r.egress_gib_s(),
                    r.cpu_pct(),
                    "",
                    cp,
                    "",
                    base.map(|b| format!("{:.2}x", r.egress_gib_s() / b))
                        .unwrap_or_else(|| "-".into())
                );
                if all.len() > 1 {
                    let v: Vec<String> = all.iter().map(|x| format!("{x:.3}")).collect();
                    println!(
                        "{:<24} runs (GiB/s per node): {} (median shown)",
                        "",
                        v.join(" ")
                    );
                }
                println!(
                    "{:<24} join: {} pairs, checksum {:#018x} = reference ({} pairs, {:#018x})",
                    "", r.join.count, r.join.checksum, r.reference.count, r.reference.checksum
                );
            }
            Err(e) => println!("{t:<24} skipped: {e}"),
        }
    }
    Ok(())
}

fn run_sweep(a: &ShuffleArgs) -> CmdResult {
    let sizes: Vec<usize> = match &a.sweep_sizes {
        Some(s) => s
            .split(',')
            .map(|x| parse_size(x).map_err(|e| NetError::invalid("--sweep-sizes", e)))
            .collect::<Result<_, _>>()?,
        None => sweep::DEFAULT_SIZES.to_vec(),
    };
    let mut cfgs = Vec::new();
    for t in a
        .sweep_transports
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let mut c: NetConfig = t.parse()?;
        c.io_timeout = a.timeout;
        if c.transport == TransportKind::UringZcRecv {
            return Err(ringdb_net::transport::zcrx::refusal(None).into());
        }
        cfgs.push((t.to_string(), c));
    }
    let bar = ringdb_net::report::progress((sizes.len() * cfgs.len()) as u64, "sweep");
    let mut points: Vec<SweepPoint> = Vec::new();
    for &size in &sizes {
        for (t, c) in &cfgs {
            bar.set_message(format!("{t} {size} B"));
            let msgs = sweep::messages_for(size, a.sweep_bytes as u64);
            let mut p = sweep::run_point(c, size, msgs)?;
            p.transport = t.clone();
            points.push(p);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let title = format!(
        "CPU cycles per byte, one TCP connection over loopback ({})",
        ringdb_net::sys::machine_description()
    );
    if let Some(p) = &a.plot {
        sweep::plot_svg(&points, p, &title)?;
    }
    if let Some(p) = &a.csv {
        let mut f = std::fs::File::create(p)?;
        writeln!(
            f,
            "transport,size,messages,bytes,secs,gib_s,cycles_per_byte,send_thread_cycles_per_byte,recv_thread_cycles_per_byte,send_syscalls_per_msg,zc_copied_ratio"
        )?;
        for p in &points {
            writeln!(
                f,
                "{},{},{},{},{:.6},{:.4},{:.4},{:.4},{:.4},{:.4},{}",
                p.transport,
                p.size,
                p.messages,
                p.bytes,
                p.secs,
                p.gib_s,
                p.cycles_per_byte,
                p.send_thread_cycles_per_byte,
                p.recv_thread_cycles_per_byte,
                p.send_syscalls_per_msg,
                p.zc_copied_ratio
                    .map(|x| format!("{x:.3}"))
                    .unwrap_or_default()
            )?;
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "machine": ringdb_net::sys::machine_description(),
                "where": "one TCP connection over loopback, sender and receiver threads in one process",
                "points": points,
            }))?
        );
        return Ok(());
    }
    println!("{title}");
    println!(
        "{:<22} {:>8} {:>9} {:>10} {:>12} {:>12} {:>10} {:>10}",
        "transport", "size", "GiB/s", "cyc/B", "send cyc/B", "recv cyc/B", "sys/msg", "zc copied"
    );
    for p in &points {
        println!(
            "{:<22} {:>8} {:>9.3} {:>10.3} {:>12.3} {:>12.3} {:>10.2} {:>10}",
            p.transport,
            p.size,
            p.gib_s,
            p.cycles_per_byte,
            p.send_thread_cycles_per_byte,
            p.recv_thread_cycles_per_byte,
            p.send_syscalls_per_msg,
            p.zc_copied_ratio
                .map(|x| format!("{:.0}%", x * 100.0))
                .unwrap_or_else(|| "-".into())
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2m"), Ok(2 << 20));
        assert!(parse_size("lots").is_err());
        assert_eq!(secs("2.5s"), Ok(Duration::from_millis(2500)));
        assert!(secs("0").is_err());
    }

    #[test]
    fn shuffle_specs_are_checked_before_anything_starts() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: ShuffleArgs,
        }
        let t = T::try_parse_from(["t", "--nodes", "1"]).unwrap();
        assert!(shuffle_spec(&t.a).is_err());
        let t = T::try_parse_from(["t", "--tuple-size", "32"]).unwrap();
        assert!(shuffle_spec(&t.a).is_err());
        let t = T::try_parse_from(["t", "--tuple-size", "4K", "--table-size", "1M"]).unwrap();
        assert_eq!(shuffle_spec(&t.a).unwrap().rows_per_node, 256);
    }
}
