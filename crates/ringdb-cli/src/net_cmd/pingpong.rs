//! `ringdb pingpong`: round-trip latency (paper Fig. 15) between a client and a server
//! process, one row per protocol and transport mode.

use super::{comma_list, exe, mode_cfg, parse_size, secs, CmdResult};
use clap::Args;
use ringdb_net::pingpong::{self, PingResult, Proto, ServerSocket};
use ringdb_net::{ChildProblem, ChildProcess, Children, NetError};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

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

/// Starts `ringdb pingpong --serve` and waits for its `LISTEN port` line.
fn spawn_server(
    a: &PingArgs,
    proto: Proto,
    mode: &str,
) -> Result<(Children, SocketAddr), NetError> {
    let program = exe()?;
    let mut c = Command::new(&program);
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
    let mut child = c.spawn().map_err(|source| NetError::Child {
        process: ChildProcess::PingPongServer,
        problem: ChildProblem::CannotStart { program, source },
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
            process: ChildProcess::PingPongServer,
            problem: ChildProblem::ExitedBeforeListening {
                line: line.trim().to_string(),
            },
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
                    process: ChildProcess::PingPongServer,
                    problem: ChildProblem::Exited {
                        status: st,
                        stderr: msg.trim().to_string(),
                    },
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
            let addr: SocketAddr = a
                .addr
                .parse()
                .map_err(|_| format!("invalid setting --addr: {:?} is not host:port", a.addr))?;
            let mut r = pingpong::run_client(&cfg, protos[0], addr, a.size, a.iters, a.warmup)?;
            r.mode = a.mode.clone();
            return print_ping(&a, &[PingRow::Done(r)]);
        }
        Some(other) => {
            return Err(format!("invalid setting --role: {other:?} (server or client)").into())
        }
        None => {}
    }
    let modes: Vec<String> = if a.compare {
        comma_list(&a.modes)
    } else {
        vec![a.mode.clone()]
    };
    for m in &modes {
        mode_cfg(m, a.timeout)?; // refuse bad specs before starting anything
    }
    let bar = ringdb_net::progress((modes.len() * protos.len()) as u64, "pingpong");
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
    if a.json {
        return print_ping_json(a, rows);
    }
    println!(
        "ping-pong, {} B messages, {} round trips, loopback, {}",
        a.size,
        a.iters,
        ringdb_net::machine_description()
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
        println!("{}", ping_row(r, rows));
    }
    Ok(())
}

/// The median round trip of epoll over `p` among `rows`, the baseline of the ratios.
fn epoll_p50(rows: &[PingRow], p: Proto) -> Option<f64> {
    rows.iter().find_map(|r| match r {
        PingRow::Done(x) if x.proto == p && x.mode == "epoll" => Some(x.rtt_p50_us),
        _ => None,
    })
}

fn print_ping_json(a: &PingArgs, rows: &[PingRow]) -> CmdResult {
    let v: Vec<_> = rows
        .iter()
        .map(|r| match r {
            PingRow::Done(x) => {
                let mut j = serde_json::to_value(x).unwrap_or_default();
                if let Some(e) = epoll_p50(rows, x.proto) {
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
            "machine": ringdb_net::machine_description(),
            "size": a.size,
            "iters": a.iters,
            "results": v,
        }))?
    );
    Ok(())
}

/// One row of the ping-pong table (`rows` for the epoll baseline).
fn ping_row(r: &PingRow, rows: &[PingRow]) -> String {
    match r {
        PingRow::Done(x) => {
            let ratio = epoll_p50(rows, x.proto)
                .map(|e| format!("{:.2}", x.rtt_p50_us / e))
                .unwrap_or_else(|| "-".into());
            format!(
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
            )
        }
        PingRow::Skipped {
            proto,
            mode,
            reason,
        } => format!("{:<5} {:<30} skipped: {reason}", proto.to_string(), mode),
    }
}
