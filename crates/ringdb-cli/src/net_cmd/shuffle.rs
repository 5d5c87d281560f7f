//! `ringdb shuffle`: the distributed shuffle and join (paper Figs. 10-13), one process per
//! node, every transport run `--repeat` times alternating and reported by its median run.

use super::{comma_list, exe, mode_cfg, parse_size, secs, sweep, CmdResult};
use clap::Args;
use ringdb_net::shuffle::{self, NetnsGuard, NodeCommand, ShuffleReport, ShuffleSpec};
use ringdb_net::{NetConfig, NetError, NetSetting, TransportKind};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

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
    pub(super) timeout: Duration,
    #[arg(long)]
    pub(super) json: bool,
    /// Message-size sweep instead of the shuffle: cycles per byte per transport.
    #[arg(long)]
    sweep: bool,
    #[arg(
        long,
        default_value = "epoll,uring,uring+regbufs,uring+zc-send,uring+multishot"
    )]
    pub(super) sweep_transports: String,
    /// Comma-separated sizes (default 64 B..1 MiB).
    #[arg(long)]
    pub(super) sweep_sizes: Option<String>,
    /// Bytes to move per sweep point (bounded to 256..200000 messages).
    #[arg(long, default_value = "128MiB", value_parser = parse_size)]
    pub(super) sweep_bytes: usize,
    /// Write the sweep as an SVG plot.
    #[arg(long)]
    pub(super) plot: Option<PathBuf>,
    /// Write the sweep as CSV.
    #[arg(long)]
    pub(super) csv: Option<PathBuf>,
    /// Internal: run as node N of a multi-process shuffle.
    #[arg(long, hide = true)]
    node_id: Option<usize>,
    #[arg(long, hide = true, default_value = "127.0.0.1")]
    bind_ip: String,
}

/// The shuffle `a` describes, checked before anything starts (a shuffle needs 2 nodes or more).
fn shuffle_spec(a: &ShuffleArgs) -> Result<ShuffleSpec, NetError> {
    if a.nodes < 2 {
        return Err(NetError::OutOfRange {
            setting: NetSetting::Nodes,
            value: a.nodes as u64,
            min: 2,
            max: 64,
        });
    }
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
    Ok(s)
}

pub fn run_shuffle(a: ShuffleArgs) -> CmdResult {
    if a.sweep {
        return sweep::run(&a);
    }
    let spec = shuffle_spec(&a)?;
    if let Some(node) = a.node_id {
        let cfg = mode_cfg(&a.transport, a.timeout)?;
        shuffle::serve_node(&spec, node, &cfg, &a.bind_ip)?;
        return Ok(());
    }
    let transports = comma_list(&a.transport);
    let cfgs = transports
        .iter()
        .map(|t| mode_cfg(t, a.timeout))
        .collect::<Result<Vec<_>, _>>()?;
    let ns = if a.netns {
        Some(NetnsGuard::create(a.nodes)?)
    } else {
        None
    };
    let repeat = a.repeat.max(1);
    let bar = ringdb_net::progress((repeat * transports.len() * a.nodes) as u64, "shuffle");
    let mut outcomes: Vec<TransportRuns> = vec![TransportRuns::default(); transports.len()];
    for _rep in 0..repeat {
        for ((t, cfg), outcome) in transports.iter().zip(&cfgs).zip(&mut outcomes) {
            if outcome.refused.is_none() {
                bar.set_message(t.clone());
                outcome.refused = refused_up_front(&a, cfg);
            }
            if outcome.refused.is_some() {
                bar.inc(a.nodes as u64);
                continue;
            }
            let base_done = bar.position();
            let progress = |n: usize| bar.set_position(base_done + n as u64);
            shuffle_once(&a, &spec, t, cfg, ns.as_ref(), &progress, outcome)?;
        }
    }
    let results: Vec<TransportResult> = transports
        .into_iter()
        .zip(outcomes)
        .map(|(t, outcome)| outcome.median(t))
        .collect();
    bar.finish_and_clear();
    drop(ns);
    print_shuffle(&a, &spec, &results)
}

/// What the repeated shuffles over one transport gave so far: its runs, or why it cannot run.
#[derive(Clone, Default)]
struct TransportRuns {
    runs: Vec<ShuffleReport>,
    refused: Option<String>,
}

/// A transport's line of the report: its median run (by mean egress bandwidth) or why it was
/// refused, and the egress bandwidth of every run.
struct TransportResult {
    transport: String,
    median: Result<ShuffleReport, String>,
    egress_gib_s_all_runs: Vec<f64>,
}

impl TransportRuns {
    fn median(self, transport: String) -> TransportResult {
        if let Some(e) = self.refused {
            return TransportResult {
                transport,
                median: Err(e),
                egress_gib_s_all_runs: Vec::new(),
            };
        }
        let mut rs = self.runs;
        rs.sort_by(|x, y| x.egress_gib_s().total_cmp(&y.egress_gib_s()));
        let all: Vec<f64> = rs.iter().map(|r| r.egress_gib_s()).collect();
        let mid = rs.swap_remove(rs.len() / 2);
        TransportResult {
            transport,
            median: Ok(mid),
            egress_gib_s_all_runs: all,
        }
    }
}

/// Why transport `cfg` cannot run before trying: zero-copy receive over loopback (the nodes'
/// interface unless they run in network namespaces or in this process).
fn refused_up_front(a: &ShuffleArgs, cfg: &NetConfig) -> Option<String> {
    let loopback = !a.netns && !a.in_process;
    (cfg.transport == TransportKind::UringZcRecv && loopback)
        .then(|| ringdb_net::zero_copy_receive_refusal(None).to_string())
}

/// One shuffle over transport `t`, its report added to `outcome`; a zero-copy receive the
/// nodes refuse is recorded as the transport's refusal instead (not fatal). `progress` hears
/// how many nodes finished.
fn shuffle_once(
    a: &ShuffleArgs,
    spec: &ShuffleSpec,
    t: &str,
    cfg: &NetConfig,
    ns: Option<&NetnsGuard>,
    progress: &dyn Fn(usize),
    outcome: &mut TransportRuns,
) -> CmdResult {
    let r = if a.in_process {
        shuffle::run_local(spec, cfg)
    } else {
        let cmd = node_command(a, spec, t, ns)?;
        let netns = a.netns;
        let node_ip = |i: usize| node_ip(netns, i);
        // Overall bound: table generation, the shuffle and the join, generously.
        let overall = a.timeout * 6 + Duration::from_secs(120);
        shuffle::run_processes(spec, cfg, &cmd, &node_ip, overall, progress)
    };
    match r {
        Ok(r) => outcome.runs.push(r),
        // zc-recv refused inside the nodes (e.g. on veth): reported, not fatal.
        Err(e) if cfg.transport == TransportKind::UringZcRecv => {
            outcome.refused = Some(e.to_string())
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// The address node `i` listens on: its veth address with `--netns`, else loopback.
fn node_ip(netns: bool, i: usize) -> String {
    if netns {
        NetnsGuard::addr(i)
    } else {
        "127.0.0.1".to_string()
    }
}

/// How to start the nodes of a shuffle over transport `t`: this binary in the node role with
/// the same table, each node in its own network namespace with `--netns`.
fn node_command(
    a: &ShuffleArgs,
    spec: &ShuffleSpec,
    t: &str,
    ns: Option<&NetnsGuard>,
) -> Result<NodeCommand, NetError> {
    // `ip netns exec` runs the program itself: it needs the real path.
    let program = if a.netns {
        std::env::current_exe().map_err(|e| NetError::io("finding the ringdb binary", e))?
    } else {
        exe()?
    };
    let shared_args = node_args(spec, t, a.timeout);
    let netns = a.netns;
    Ok(NodeCommand {
        program,
        args: Box::new(move |i| {
            let mut args = vec![
                "shuffle".into(),
                "--node-id".into(),
                i.to_string(),
                "--bind-ip".into(),
                node_ip(netns, i),
            ];
            args.extend(shared_args.iter().cloned());
            args
        }),
        netns: ns.map(|g| {
            let names = g.names.clone();
            Box::new(move |i: usize| names[i].clone()) as Box<dyn Fn(usize) -> String>
        }),
    })
}

/// The node role's arguments that every node shares: the table, the transport `t` and the
/// timeout.
fn node_args(spec: &ShuffleSpec, t: &str, timeout: Duration) -> Vec<String> {
    [
        ("--nodes", spec.nodes.to_string()),
        ("--workers", spec.workers.to_string()),
        ("--tuple-size", spec.tuple_size.to_string()),
        (
            "--table-size",
            (spec.rows_per_node * spec.tuple_size).to_string(),
        ),
        ("--chunk", spec.chunk.to_string()),
        ("--morsel", spec.morsel.to_string()),
        ("--seed", spec.seed.to_string()),
        ("--transport", t.to_string()),
        ("--timeout", timeout.as_secs_f64().to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

/// How many times each byte sent was copied: the share the kernel reported copying for
/// zero-copy sends (`Some`), or 1 for a copying send.
fn copies_text(zc_copied_per_byte: Option<f64>) -> String {
    match zc_copied_per_byte {
        Some(x) => format!("{x:.2} (zc notif)"),
        None => "1 (copying send)".to_string(),
    }
}

fn print_shuffle(a: &ShuffleArgs, spec: &ShuffleSpec, results: &[TransportResult]) -> CmdResult {
    let base = results.iter().find_map(|r| match &r.median {
        Ok(m) if r.transport.starts_with("epoll") => Some(m.egress_gib_s()),
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
        return print_shuffle_json(spec, results, base, place);
    }
    println!(
        "shuffle: {} nodes x {} workers, {} B tuples, {} MiB per node, {} KiB chunks, {place}; {}",
        spec.nodes,
        spec.workers,
        spec.tuple_size,
        (spec.rows_per_node * spec.tuple_size) >> 20,
        spec.chunk >> 10,
        ringdb_net::machine_description()
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
    for r in results {
        match &r.median {
            Ok(m) => print_transport_rows(&r.transport, m, &r.egress_gib_s_all_runs, base),
            Err(e) => println!("{:<24} skipped: {e}", r.transport),
        }
    }
    Ok(())
}

/// `base`: epoll's egress bandwidth, the baseline of the ratios; `place`: where the nodes ran.
fn print_shuffle_json(
    spec: &ShuffleSpec,
    results: &[TransportResult],
    base: Option<f64>,
    place: &str,
) -> CmdResult {
    let v: Vec<_> = results
        .iter()
        .map(|r| match &r.median {
            Ok(m) => json!({
                "transport": r.transport,
                "egress_gib_s_all_runs": r.egress_gib_s_all_runs,
                "egress_gib_s_per_node": m.egress_gib_s(),
                "cpu_pct_per_node": m.cpu_pct(),
                "ratio_vs_epoll": base.map(|b| m.egress_gib_s() / b),
                "zc_copied_per_byte": m.zc_copied_per_byte(),
                "join_ok": m.join == m.reference,
                "report": m,
            }),
            Err(e) => json!({"transport": r.transport, "skipped": e}),
        })
        .collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "machine": ringdb_net::machine_description(),
            "where": place,
            "spec": spec,
            "results": v,
        }))?
    );
    Ok(())
}

/// Transport `t`'s rows: one per node of its median run `r`, their mean (with the ratio to
/// epoll's `base`), every run's bandwidth when it ran more than once (`all`), and the join.
fn print_transport_rows(t: &str, r: &ShuffleReport, all: &[f64], base: Option<f64>) {
    for n in &r.nodes {
        let copied =
            (n.zc_notifs > 0).then(|| n.zc_copied_bytes as f64 / n.bytes_sent.max(1) as f64);
        println!(
            "{:<24} {:>5} {:>12.3} {:>7.0} {:>9.3} {:>18} {:>12} {:>10}",
            t,
            n.node,
            n.egress_gib_s(),
            n.cpu_pct(),
            n.shuffle_secs,
            copies_text(copied),
            n.syscalls,
            ""
        );
    }
    println!(
        "{:<24} {:>5} {:>12.3} {:>7.0} {:>9} {:>18} {:>12} {:>10}",
        t,
        "mean",
        r.egress_gib_s(),
        r.cpu_pct(),
        "",
        copies_text(r.zc_copied_per_byte()),
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

#[cfg(test)]
mod tests {
    use super::*;

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
