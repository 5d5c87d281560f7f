//! `block-size` (paper Sec. 3.6, Fig. 8): one thread, random reads and writes from 4 KiB to
//! 2 MiB. Larger blocks spread the fixed cost of a request (syscall, io_uring, block layer) over
//! more bytes, so CPU cycles per byte fall and GiB/s rise, until a request crosses a limit of
//! the device's queue: above `max_hw_sectors_kb`/`max_sectors_kb` (or more than `max_segments`
//! pages) it is split, and with `O_DIRECT` batches above `nr_requests` cannot be queued without
//! waiting; io_uring then hands the request to io-wq workers, the slow path.
//!
//! Method: [`crate::rawio::run`] at iodepth 8 for every (switch set, rw, block size): plain
//! io_uring and io_uring with registered buffers and files. Each row carries GiB/s, cycles per
//! byte (whole-process CPU time, io-wq workers included, x TSC rate / bytes), the io-wq
//! workers seen, and whether the block size is above the device's split limit.

use super::target::{describe_device, usable_size};
use super::{available_cpus, MicroOpts, MicroResult, Plot, Series};
use crate::error::{BenchError, BenchSetting, Result};
use crate::rawio::{self, IoReport, IoSpec, RwMode};
use ringdb_io::{EngineKind, IoConfig, IoError};
use ringdb_lab::device::DeviceInfo;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const KIB: u64 = 1024;
const SIZES: &[u64] = &[
    4 * KIB,
    16 * KIB,
    64 * KIB,
    128 * KIB,
    256 * KIB,
    512 * KIB,
    1024 * KIB,
    2048 * KIB,
];
const QUICK_SIZES: &[u64] = &[4 * KIB, 128 * KIB, 1024 * KIB];
/// Time per point with `--quick`, at most.
const QUICK_POINT: Duration = Duration::from_millis(250);
const IODEPTH: u32 = 8;
/// One segment is assumed to carry one 4 KiB page of a user buffer.
const SEGMENT_BYTES: u64 = 4 * KIB;

/// The queue limits of the target's device, in KiB where sizes.
struct Limits {
    device: Option<DeviceInfo>,
    split_kb: Option<u64>,
    seg_kb: Option<u64>,
}

impl Limits {
    fn for_target(path: &Path) -> Result<Limits> {
        // A file that does not exist yet will be created in its directory.
        let probe = if path.exists() {
            path
        } else {
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
        };
        let device = DeviceInfo::for_path(probe)?;
        let split_kb = device
            .as_ref()
            .and_then(|d| d.split_limit_kb())
            .map(u64::from);
        let seg_kb = device
            .as_ref()
            .and_then(|d| d.max_segments)
            .map(|s| s as u64 * SEGMENT_BYTES / KIB);
        Ok(Limits {
            device,
            split_kb,
            seg_kb,
        })
    }

    fn above_split(&self, bs: u64) -> bool {
        self.split_kb.is_some_and(|l| bs > l * KIB)
    }

    fn above_segments(&self, bs: u64) -> bool {
        self.seg_kb.is_some_and(|l| bs > l * KIB)
    }

    /// Whether a block of `bs` bytes crosses either limit.
    fn above_either(&self, bs: u64) -> bool {
        self.above_split(bs) || self.above_segments(bs)
    }
}

fn switch_sets() -> [IoConfig; 2] {
    let plain = IoConfig {
        queue_depth: IODEPTH,
        ..IoConfig::new(EngineKind::Uring)
    };
    let registered = IoConfig {
        fixed_buffers: true,
        register_files: true,
        ..plain.clone()
    };
    [plain, registered]
}

const MIRRORS: &str = "paper Sec. 3.6, Fig. 8: cycles per byte and GiB/s vs block size, one thread; blocks above the device's limits fall back to io-wq";

const COLUMNS: &[&str] = &[
    "rw",
    "config",
    "bs_kib",
    "gib_s",
    "iops",
    "cycles_per_byte",
    "cycles_per_io",
    "lat_p50_us",
    "lat_p99_us",
    "enters_per_io",
    "iowq_workers",
    "above_split_limit",
    "above_seg_limit",
];

const PAPER_NOTE: &str = "paper (Fig. 8): cycles per byte fall steeply with block size; one core reaches 90 GiB/s reads at 256 KiB and 50 GiB/s writes at 128 KiB (PCIe 5 SSD array, passthrough + IOPoll); io-wq workers appear above max_hw_sectors_kb, above nr_requests batched requests, and above 512 KiB (max_segments)";

/// One measured point.
struct Point {
    rw: RwMode,
    label: String,
    bs: u64,
    report: IoReport,
}

impl Point {
    fn gib_s(&self) -> f64 {
        self.report.mib_s / 1024.0
    }

    fn cycles_per_byte(&self) -> f64 {
        self.report.cycles_per_io / self.bs as f64
    }

    fn workers(&self) -> u64 {
        self.report.iowq_workers.unwrap_or(0)
    }

    /// Whether this point belongs to the series of (`rw`, switch set `label`).
    fn is_in(&self, rw: RwMode, label: &str) -> bool {
        self.rw == rw && self.label == label
    }

    fn print_progress(&self) {
        eprintln!(
            "block-size {} {} {} KiB: {:.2} GiB/s, {:.3} cycles/B, {} io-wq workers",
            self.label,
            self.rw,
            self.bs / KIB,
            self.gib_s(),
            self.cycles_per_byte(),
            self.workers()
        );
    }

    /// The table row, marked against the device's `limits`.
    fn row(&self, limits: &Limits) -> Vec<Value> {
        vec![
            json!(self.rw.name()),
            json!(self.label),
            json!(self.bs / KIB),
            json!(self.gib_s()),
            json!(self.report.iops),
            json!(self.cycles_per_byte()),
            json!(self.report.cycles_per_io),
            json!(self.report.lat_us.p50),
            json!(self.report.lat_us.p99),
            json!(self.report.enters_per_io.unwrap_or(0.0)),
            json!(self.workers()),
            json!(limits.above_split(self.bs)),
            json!(limits.above_segments(self.bs)),
        ]
    }
}

/// What one run sweeps: the block sizes, the time per point, and the bytes of the target.
struct Sweep {
    sizes: &'static [u64],
    runtime: Duration,
    size: u64,
}

impl Sweep {
    /// The sweep `opts` asks for; refuses a target smaller than the largest block.
    fn for_opts(opts: &MicroOpts) -> Result<Sweep> {
        let sizes = if opts.quick { QUICK_SIZES } else { SIZES };
        let runtime = opts.runtime_capped_when_quick(QUICK_POINT);
        let largest = sizes.iter().copied().max().unwrap_or(4 * KIB);
        let size = usable_size(&opts.target, opts.size)?;
        if size < largest {
            return Err(BenchError::TooSmall {
                setting: BenchSetting::Size,
                value: size,
                min: largest,
                needed_by: "block-size's largest block",
            });
        }
        Ok(Sweep {
            sizes,
            runtime,
            size,
        })
    }
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let sweep = Sweep::for_opts(opts)?;
    let limits = Limits::for_target(&opts.target)?;
    let mut r = MicroResult::new("block-size", MIRRORS, COLUMNS);
    let (points, skipped) = measure_all(opts, &sweep)?;
    for p in &points {
        r.row(p.row(&limits));
    }
    notes(&mut r, opts, &points, &limits, &skipped);
    r.plot = Some(plot(&points));
    Ok(r)
}

/// Every (switch set, rw, block size) point in table order, and the series cut short.
fn measure_all(opts: &MicroOpts, sweep: &Sweep) -> Result<(Vec<Point>, Vec<String>)> {
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    for io in switch_sets() {
        for rw in [RwMode::RandRead, RwMode::RandWrite] {
            if let Some(why) = measure_series(opts, sweep, &io, rw, &mut points)? {
                skipped.push(why);
            }
        }
    }
    Ok((points, skipped))
}

/// Measures one (switch set, rw) series over the block sizes, smallest first, into `points`.
/// Returns what was skipped when registered buffers ran out of locked memory.
fn measure_series(
    opts: &MicroOpts,
    sweep: &Sweep,
    io: &IoConfig,
    rw: RwMode,
    points: &mut Vec<Point>,
) -> Result<Option<String>> {
    let label = io.label();
    for &bs in sweep.sizes {
        let spec = IoSpec {
            rw,
            bs,
            size: sweep.size,
            runtime: Some(sweep.runtime),
            progress: false,
            ..IoSpec::new(&opts.target, io.clone())
        };
        let report = match rawio::run(&spec) {
            Ok(rep) => rep,
            Err(BenchError::Io(e @ IoError::Memlock { .. })) if io.fixed_buffers => {
                // Larger blocks need more registered memory still: skip the rest.
                return Ok(Some(format!("{label} {rw} from {} KiB on: {e}", bs / KIB)));
            }
            Err(e) => return Err(e),
        };
        let p = Point {
            rw,
            label: label.clone(),
            bs,
            report,
        };
        if opts.progress {
            p.print_progress();
        }
        points.push(p);
    }
    Ok(None)
}

/// GiB/s against block size, one line per (rw, switch set).
fn plot(points: &[Point]) -> Plot {
    let mut series: Vec<Series> = Vec::new();
    for p in points {
        let name = format!("{} {}", p.rw, p.label);
        let point = ((p.bs / KIB) as f64, p.gib_s());
        match series.iter_mut().find(|s| s.label == name) {
            Some(s) => s.points.push(point),
            None => series.push(Series {
                label: name,
                points: vec![point],
            }),
        }
    }
    Plot::new(
        format!("One thread, iodepth {IODEPTH}: throughput vs block size"),
        "block size (KiB)",
        "GiB/s",
        series,
    )
    .log_x()
}

fn notes(
    r: &mut MicroResult,
    opts: &MicroOpts,
    points: &[Point],
    limits: &Limits,
    skipped: &[String],
) {
    r.notes.push(PAPER_NOTE.into());
    let keys = series_keys(points);
    r.notes
        .extend(keys.iter().filter_map(|&key| series_note(points, key)));
    r.notes.extend(
        [RwMode::RandRead, RwMode::RandWrite]
            .into_iter()
            .filter_map(|rw| registration_note(points, rw)),
    );
    r.notes.push(device_limits_note(opts, limits));
    r.notes.push(iowq_note(points, limits, &keys));
    r.notes
        .extend(skipped.iter().map(|s| format!("skipped {s}")));
    r.notes.push(format!(
        "one thread, iodepth {IODEPTH}, {} CPU(s) here; cycles are whole-process CPU time (io-wq workers included) x TSC rate",
        available_cpus()
    ));
}

/// The (rw, switch set) of every series, in the order they were measured.
fn series_keys(points: &[Point]) -> Vec<(RwMode, &str)> {
    let mut keys: Vec<(RwMode, &str)> = Vec::new();
    for p in points {
        if !keys.contains(&(p.rw, p.label.as_str())) {
            keys.push((p.rw, p.label.as_str()));
        }
    }
    keys
}

/// How far cycles per byte fell over one series, and where its throughput peaked.
fn series_note(points: &[Point], (rw, label): (RwMode, &str)) -> Option<String> {
    let s: Vec<&Point> = points.iter().filter(|p| p.is_in(rw, label)).collect();
    let (first, last) = (s.first()?, s.last()?);
    let peak = s.iter().max_by(|a, b| a.gib_s().total_cmp(&b.gib_s()))?;
    Some(format!(
        "{rw} {label}: {:.3} cycles/B at {} KiB, {:.4} at {} KiB ({:.0}x fewer); peak {:.2} GiB/s at {} KiB",
        first.cycles_per_byte(),
        first.bs / KIB,
        last.cycles_per_byte(),
        last.bs / KIB,
        first.cycles_per_byte() / last.cycles_per_byte().max(1e-12),
        peak.gib_s(),
        peak.bs / KIB,
    ))
}

/// Registered buffers and files against plain io_uring for `rw`, at the smallest and largest
/// block: pinning a buffer's pages per request grows with its size, registration pins them once.
fn registration_note(points: &[Point], rw: RwMode) -> Option<String> {
    let smallest = points.iter().map(|p| p.bs).min();
    let largest = points.iter().map(|p| p.bs).max();
    let at = |bs: Option<u64>, fixed: bool| {
        points
            .iter()
            .find(|p| p.rw == rw && Some(p.bs) == bs && p.label.contains("fixedbufs") == fixed)
    };
    let mut parts: Vec<(u64, String)> = Vec::new();
    for bs in [smallest, largest] {
        let (Some(plain), Some(reg)) = (at(bs, false), at(bs, true)) else {
            continue;
        };
        if parts.iter().any(|(b, _)| *b == plain.bs) {
            continue;
        }
        parts.push((
            plain.bs,
            format!(
                "{:.0} against {:.0} cycles/IO at {} KiB ({:.2}x)",
                reg.report.cycles_per_io,
                plain.report.cycles_per_io,
                plain.bs / KIB,
                reg.report.cycles_per_io / plain.report.cycles_per_io.max(1e-9),
            ),
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let parts: Vec<String> = parts.into_iter().map(|(_, s)| s).collect();
    Some(format!(
        "{rw}: registered buffers + files cost {} of plain io_uring",
        parts.join(", ")
    ))
}

/// The device's queue limits, and whether a batch of `IODEPTH` fits its request queue.
fn device_limits_note(opts: &MicroOpts, limits: &Limits) -> String {
    let Some(d) = &limits.device else {
        return format!(
            "{} is on no block device (tmpfs or similar): no queue limits to cross",
            opts.target.display()
        );
    };
    let opt = |v: Option<u32>| v.map_or("-".to_string(), |x| x.to_string());
    let opt_kb = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
    format!(
        "{} ({}): max_hw_sectors_kb {}, max_sectors_kb {}, so requests above {} KiB are split; max_segments {} (~{} KiB of 4 KiB pages); nr_requests {} against iodepth {IODEPTH}{}",
        opts.target.display(),
        describe_device(&opts.target),
        opt(d.max_hw_sectors_kb),
        opt(d.max_sectors_kb),
        opt_kb(limits.split_kb),
        opt(d.max_segments),
        opt_kb(limits.seg_kb),
        opt(d.nr_requests),
        match d.nr_requests {
            Some(n) if n < IODEPTH => " (batches exceed it)",
            Some(_) => " (batches stay below it)",
            None => " (bio-based device, no request queue)",
        }
    )
}

/// Where io-wq workers appeared, against the device's limits.
fn iowq_note(points: &[Point], limits: &Limits, keys: &[(RwMode, &str)]) -> String {
    let with_workers: Vec<&Point> = points.iter().filter(|p| p.workers() > 0).collect();
    if with_workers.is_empty() {
        no_workers_note(points, limits)
    } else {
        workers_note(&with_workers, limits, keys)
    }
}

/// The block sizes of `points` in KiB, ascending, each once.
fn distinct_kib<'a>(points: impl Iterator<Item = &'a Point>) -> Vec<u64> {
    let mut kib: Vec<u64> = points.map(|p| p.bs / KIB).collect();
    kib.sort_unstable();
    kib.dedup();
    kib
}

/// No worker anywhere: expected below the limits; above them, this kernel issued inline.
fn no_workers_note(points: &[Point], limits: &Limits) -> String {
    let above = distinct_kib(points.iter().filter(|p| limits.above_either(p.bs)));
    if above.is_empty() {
        return "no io-wq worker appeared at any block size; no block here is above the split or segment limit".to_string();
    }
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    format!(
        "no io-wq worker appeared at any block size, although blocks of {} KiB are above the split or segment limit: this kernel ({kernel}) issued those requests inline (the paper saw workers there: kernels that refuse to split a NOWAIT bio make io_uring retry it on io-wq)",
        above
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The points that brought up workers, per series, and how many of them crossed a limit.
fn workers_note(with_workers: &[&Point], limits: &Limits, keys: &[(RwMode, &str)]) -> String {
    let mut parts = Vec::new();
    for &(rw, label) in keys {
        let kib: Vec<String> = with_workers
            .iter()
            .filter(|p| p.is_in(rw, label))
            .map(|p| format!("{}", p.bs / KIB))
            .collect();
        if !kib.is_empty() {
            parts.push(format!("{rw} {label} at {} KiB", kib.join(", ")));
        }
    }
    let n = with_workers.len();
    let split = with_workers
        .iter()
        .filter(|p| limits.above_split(p.bs))
        .count();
    let seg = with_workers
        .iter()
        .filter(|p| limits.above_segments(p.bs))
        .count();
    let below = distinct_kib(
        with_workers
            .iter()
            .copied()
            .filter(|p| !limits.above_either(p.bs)),
    );
    let mut s = format!(
        "io-wq workers appeared for {}; of those {n} points {split} are above the split limit and {seg} above the segment limit",
        parts.join("; ")
    );
    if below.is_empty() {
        s.push_str(": workers only where a request crosses a limit, as Fig. 8 describes");
    } else {
        let below: Vec<String> = below.iter().map(|k| format!("{k} KiB")).collect();
        s.push_str(&format!(
            "; workers also below both limits (at {}), so this device or filesystem punts requests whatever their size (no NOWAIT support, as on zram)",
            below.join(", ")
        ));
    }
    s
}
