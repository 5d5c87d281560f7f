//! `ringdb shuffle --sweep`: CPU cycles per byte against message size (paper Fig. 16), one
//! TCP connection over loopback per point, as a table, JSON, CSV or an SVG plot.

use super::shuffle::ShuffleArgs;
use super::{comma_list, mode_cfg, parse_size, CmdResult};
use ringdb_net::sweep::{self, SweepPoint};
use ringdb_net::{NetConfig, NetError, TransportKind};
use serde_json::json;
use std::io::Write;
use std::path::Path;

/// Runs the sweep `a` asks for (`ringdb shuffle --sweep`).
pub(super) fn run(a: &ShuffleArgs) -> CmdResult {
    let sizes: Vec<usize> = match &a.sweep_sizes {
        Some(s) => s
            .split(',')
            .map(|x| parse_size(x).map_err(|e| format!("invalid setting --sweep-sizes: {e}")))
            .collect::<Result<_, _>>()?,
        None => sweep::DEFAULT_SIZES.to_vec(),
    };
    let cfgs = sweep_configs(a)?;
    let points = measure_sweep(a, &sizes, &cfgs)?;
    let title = format!(
        "CPU cycles per byte, one TCP connection over loopback ({})",
        ringdb_net::machine_description()
    );
    if let Some(p) = &a.plot {
        sweep::plot_svg(&points, p, &title)?;
    }
    if let Some(p) = &a.csv {
        write_sweep_csv(p, &points)?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "machine": ringdb_net::machine_description(),
                "where": "one TCP connection over loopback, sender and receiver threads in one process",
                "points": points,
            }))?
        );
        return Ok(());
    }
    print_sweep_table(&title, &points);
    Ok(())
}

/// The sweep's transports, each with its configuration; zero-copy receive cannot run over
/// loopback and is refused.
fn sweep_configs(a: &ShuffleArgs) -> Result<Vec<(String, NetConfig)>, NetError> {
    let mut cfgs = Vec::new();
    for t in comma_list(&a.sweep_transports) {
        let c = mode_cfg(&t, a.timeout)?;
        if c.transport == TransportKind::UringZcRecv {
            return Err(ringdb_net::zero_copy_receive_refusal(None));
        }
        cfgs.push((t, c));
    }
    Ok(cfgs)
}

/// One point per message size and transport, sizes outermost.
fn measure_sweep(
    a: &ShuffleArgs,
    sizes: &[usize],
    cfgs: &[(String, NetConfig)],
) -> Result<Vec<SweepPoint>, NetError> {
    let bar = ringdb_net::progress((sizes.len() * cfgs.len()) as u64, "sweep");
    let mut points: Vec<SweepPoint> = Vec::new();
    for &size in sizes {
        for (t, c) in cfgs {
            bar.set_message(format!("{t} {size} B"));
            let msgs = sweep::messages_for(size, a.sweep_bytes as u64);
            let mut p = sweep::run_point(c, size, msgs)?;
            p.transport = t.clone();
            points.push(p);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(points)
}

fn write_sweep_csv(path: &Path, points: &[SweepPoint]) -> CmdResult {
    let mut f = std::fs::File::create(path)?;
    writeln!(
        f,
        "transport,size,messages,bytes,secs,gib_s,cycles_per_byte,send_thread_cycles_per_byte,recv_thread_cycles_per_byte,send_syscalls_per_msg,zc_copied_ratio"
    )?;
    for p in points {
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
    Ok(())
}

fn print_sweep_table(title: &str, points: &[SweepPoint]) {
    println!("{title}");
    println!(
        "{:<22} {:>8} {:>9} {:>10} {:>12} {:>12} {:>10} {:>10}",
        "transport", "size", "GiB/s", "cyc/B", "send cyc/B", "recv cyc/B", "sys/msg", "zc copied"
    );
    for p in points {
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
}
