//! Message-size sweep (paper Fig. 16): one TCP connection over loopback, a sender thread and a
//! receiver thread (each its own transport and ring), `size`-byte messages; reports CPU cycles
//! per byte of the whole process, of the sending thread and of the receiving thread.
//!
//! Over loopback the receiver's TCP processing runs in the sender's context (softirq at the end
//! of the send system call), so the sender's figure contains most of the receive path's kernel
//! work; the receiver's figure is its own system calls and copies out.
//!
//! The sender and the receiver are threads of one process so that the process's CPU time
//! covers both ends and the kernel work between them; each thread also reads its own CPU
//! clock, which splits the cost between sending and receiving.

use crate::config::NetConfig;
use crate::error::{CloseStage, NetError, Result};
use crate::sys::{accept_tcp, connect_tcp, process_cpu_secs, thread_cpu_secs, Conn};
use crate::transport::{open_transport, Event, TransportStats};
use ringdb_lab::counters::tsc_hz;
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

/// One measured point: one transport at one message size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The transport's spec (the CLI puts the name it was given here).
    pub transport: String,
    /// Bytes of each message.
    pub size: usize,
    /// Messages sent.
    pub messages: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Wall-clock seconds of the whole point.
    pub secs: f64,
    /// Throughput, GiB per second.
    pub gib_s: f64,
    /// Process CPU cycles (TSC ticks of CPU time) per byte moved.
    pub cycles_per_byte: f64,
    /// The sending thread's CPU cycles per byte (loopback delivery included, see the module
    /// documentation).
    pub send_thread_cycles_per_byte: f64,
    /// The receiving thread's CPU cycles per byte.
    pub recv_thread_cycles_per_byte: f64,
    /// The sending transport's system calls per message.
    pub send_syscalls_per_msg: f64,
    /// SEND_ZC only: share of the bytes the kernel reported as copied (IORING_NOTIF_USAGE_ZC_COPIED).
    pub zc_copied_ratio: Option<f64>,
}

/// The message sizes of a sweep unless told otherwise: 64 B to 1 MiB.
pub const DEFAULT_SIZES: [usize; 9] = [
    64,
    256,
    1024,
    4096,
    16 << 10,
    64 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
];

/// Messages to send at `size` so that each point moves about `bytes` (bounded both ways).
pub fn messages_for(size: usize, bytes: u64) -> u64 {
    (bytes / size as u64).clamp(256, 200_000)
}

/// Streams `messages` messages of `size` bytes from one thread to another over loopback.
pub fn run_point(cfg: &NetConfig, size: usize, messages: u64) -> Result<SweepPoint> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| NetError::io("bind", e))?;
    let addr = l.local_addr().map_err(|e| NetError::io("local_addr", e))?;
    let total = size as u64 * messages;
    let mut rcfg = cfg.clone();
    rcfg.send_buf_size = 64;
    rcfg.send_bufs = 1;
    rcfg.recv_buf_size = 64 << 10;
    rcfg.recv_bufs = 64;
    let receiver = std::thread::spawn(move || receive_all(&l, &rcfg, total));
    let p0 = process_cpu_secs();
    let w0 = Instant::now();
    let sres = send_all(cfg, addr, size, messages);
    let rres = receiver.join().map_err(|_| NetError::ThreadPanicked {
        thread: "sweep receiver",
    })?;
    let wall = w0.elapsed().as_secs_f64();
    let pcpu = process_cpu_secs() - p0;
    let (_, scpu, stats) = sres?;
    let (got, rcpu) = rres?;
    let hz = tsc_hz();
    let b = got as f64;
    Ok(SweepPoint {
        transport: cfg.spec(),
        size,
        messages,
        bytes: got,
        secs: wall,
        gib_s: b / (1u64 << 30) as f64 / wall.max(1e-9),
        cycles_per_byte: pcpu * hz / b,
        send_thread_cycles_per_byte: scpu * hz / b,
        recv_thread_cycles_per_byte: rcpu * hz / b,
        send_syscalls_per_msg: stats.syscalls as f64 / messages as f64,
        zc_copied_ratio: (stats.zc_notifs > 0)
            .then(|| stats.zc_copied_bytes as f64 / stats.bytes_sent.max(1) as f64),
    })
}

/// The receiving thread: accepts the sender and counts `total` bytes; returns the bytes and
/// the thread's CPU seconds.
fn receive_all(l: &TcpListener, cfg: &NetConfig, total: u64) -> Result<(u64, f64)> {
    let timeout = cfg.io_timeout;
    let s = accept_tcp(l, timeout)?;
    let mut t = open_transport(cfg, vec![Conn::tcp(s)?])?;
    let c0 = thread_cpu_secs();
    let mut got = 0u64;
    let mut closed = false;
    let mut last = Instant::now();
    while got < total && !closed {
        let n = t.poll(Some(Duration::from_millis(100)), &mut |ev| {
            match ev {
                Event::Recv { data, .. } => got += data.len() as u64,
                Event::Closed { .. } => closed = true,
                Event::SendDone { .. } => {}
            }
            Ok(())
        })?;
        if n > 0 {
            last = Instant::now();
        } else if last.elapsed() > timeout {
            return Err(NetError::Timeout {
                what: "sweep data".into(),
                after: timeout,
            });
        }
    }
    if got < total {
        return Err(NetError::PeerClosed {
            peer: "sweep sender".into(),
            when: CloseStage::AfterBytes {
                received_bytes: got,
                expected_bytes: total,
            },
        });
    }
    Ok((got, thread_cpu_secs() - c0))
}

/// The sending side: connects to `addr` and sends `messages` messages of `size` bytes through
/// eight slots; returns the seconds and the thread's CPU seconds the measured part took, and
/// the transport's counters.
fn send_all(
    cfg: &NetConfig,
    addr: SocketAddr,
    size: usize,
    messages: u64,
) -> Result<(f64, f64, TransportStats)> {
    let timeout = cfg.io_timeout;
    let s = connect_tcp(addr, timeout)?;
    let mut scfg = cfg.clone();
    scfg.send_buf_size = size;
    scfg.send_bufs = 8;
    scfg.recv_buf_size = 4096;
    scfg.recv_bufs = 8;
    let mut t = open_transport(&scfg, vec![Conn::tcp(s)?])?;
    for slot in 0..8u32 {
        // Touch the memory once so page faults stay out of the measurement.
        if let Some(s) = t.alloc() {
            debug_assert_eq!(s, 7 - slot);
            t.slot_mut(s).fill(0x5a);
            t.send(0, s, size)?;
        }
    }
    let t0 = Instant::now();
    let c0 = thread_cpu_secs();
    let mut sent = 8u64;
    let mut last = Instant::now();
    while sent < messages || t.pending_sends() > 0 {
        while sent < messages {
            match t.alloc() {
                Some(s) => {
                    t.send(0, s, size)?;
                    sent += 1;
                }
                None => break,
            }
        }
        let n = t.poll(Some(Duration::from_millis(100)), &mut |_| Ok(()))?;
        if n > 0 {
            last = Instant::now();
        } else if last.elapsed() > timeout {
            return Err(NetError::Timeout {
                what: "sweep sends to complete".into(),
                after: timeout,
            });
        }
    }
    Ok((
        t0.elapsed().as_secs_f64(),
        thread_cpu_secs() - c0,
        t.stats(),
    ))
}

/// Writes the sweep as an SVG: cycles per byte against message size (log-log), send thread on
/// the left, receive thread on the right, one line per transport.
pub fn plot_svg(points: &[SweepPoint], path: &std::path::Path, title: &str) -> Result<()> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let root = root.titled(title, ("sans-serif", 18)).map_err(plot_error)?;
    let panels = root.split_evenly((1, 2));
    for (panel, (name, metric)) in panels.iter().zip([
        (
            "send thread (includes loopback delivery)",
            (|p: &SweepPoint| p.send_thread_cycles_per_byte) as fn(&SweepPoint) -> f64,
        ),
        (
            "receive thread",
            (|p: &SweepPoint| p.recv_thread_cycles_per_byte) as fn(&SweepPoint) -> f64,
        ),
    ]) {
        draw_panel(panel, name, metric, points)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

/// A plotting failure, as this crate's error.
fn plot_error(e: impl std::fmt::Display) -> NetError {
    NetError::Plot {
        reason: e.to_string(),
    }
}

/// One panel of [`plot_svg`]: `metric` of every point against its size, one line per transport.
fn draw_panel(
    panel: &plotters::drawing::DrawingArea<
        plotters::prelude::SVGBackend<'_>,
        plotters::coord::Shift,
    >,
    name: &str,
    metric: fn(&SweepPoint) -> f64,
    points: &[SweepPoint],
) -> Result<()> {
    use plotters::prelude::*;
    let mut transports: Vec<String> = Vec::new();
    for p in points {
        if !transports.contains(&p.transport) {
            transports.push(p.transport.clone());
        }
    }
    let xmin = points.iter().map(|p| p.size).min().unwrap_or(64) as f64;
    let xmax = points.iter().map(|p| p.size).max().unwrap_or(1 << 20) as f64;
    let vals: Vec<f64> = points.iter().map(metric).filter(|v| *v > 0.0).collect();
    let ymin = vals.iter().cloned().fold(f64::MAX, f64::min).max(1e-4) * 0.7;
    let ymax = vals.iter().cloned().fold(0.0, f64::max).max(ymin * 10.0) * 1.4;
    let mut chart = ChartBuilder::on(panel)
        .caption(name, ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d((xmin..xmax).log_scale(), (ymin..ymax).log_scale())
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc("CPU cycles per byte")
        .x_label_formatter(&size_label)
        .draw()
        .map_err(plot_error)?;
    for (k, tname) in transports.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        let series: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| &p.transport == tname && metric(p) > 0.0)
            .map(|p| (p.size as f64, metric(p)))
            .collect();
        chart
            .draw_series(LineSeries::new(series.clone(), color.stroke_width(2)))
            .map_err(plot_error)?
            .label(tname.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                series
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(plot_error)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)
}

/// A message size as an axis label: 64, 4K, 1M.
fn size_label(x: &f64) -> String {
    if *x >= 1048576.0 {
        format!("{}M", (*x / 1048576.0).round())
    } else if *x >= 1024.0 {
        format!("{}K", (*x / 1024.0).round())
    } else {
        format!("{}", x.round())
    }
}
