//! What `durable` reports: a row per method, the notes that set the methods against each
//! other and against the paper's Fig. 9, and a plot of their latencies.

use super::{measured, Measured, Method, Plan, Point, WARMUP_OPS};
use crate::micro::target::describe_device;
use crate::micro::{MicroOpts, MicroResult, Plot, Series};
use ringdb_lab::counters::{tsc_hz, LatencySummary};
use ringdb_lab::device::DeviceInfo;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// Paper Fig. 9: `O_SYNC` writes are "more than twice as slow as explicit writes followed by
/// `fsync`" (the text gives ratios only; the bars' values are not in it).
const PAPER_OSYNC_VS_FSYNC: f64 = 2.0;
/// Paper Fig. 9: not pinning the fsync io-wq worker to the local chiplet costs about 5%.
const PAPER_CHIPLET_PCT: f64 = 5.0;

/// Where the durability point ran, as the counters show it.
fn path_of(method: Method, m: &Measured) -> String {
    let ring = if m.workers > 0 {
        format!("io-wq ({} worker(s))", m.workers)
    } else {
        "inline".to_string()
    };
    match method {
        Method::ThreadFdatasync => format!("{ring} + helper thread"),
        Method::SyncFdatasync => format!("{ring} + fdatasync(2)"),
        _ => ring,
    }
}

const MIRRORS: &str = "paper Sec. 3.6, Fig. 9: durable writes; fsync through io_uring runs on io-wq workers, O_SYNC is over 2x slower than write+fsync, linking gains nothing, NVMe flush via passthrough is the asynchronous path";

const COLUMNS: &[&str] = &[
    "method",
    "how",
    "ios",
    "lat_avg_us",
    "lat_p50_us",
    "lat_p99_us",
    "ops_per_s",
    "vs_baseline",
    "iowq_workers",
    "completion",
    "status",
];

/// The result of a run: a row per method, the notes, and a plot of the methods that ran.
pub(super) fn result(
    opts: &MicroOpts,
    plan: &Plan,
    points: &[Point],
    took: Duration,
) -> MicroResult {
    let mut r = MicroResult::new("durable", MIRRORS, COLUMNS);
    let baseline = measured(points, Method::Baseline).map(|m| m.lat.avg);
    for p in points {
        r.row(row(p, baseline));
    }
    notes(&mut r, opts, plan, points, took);
    r.plot = plot(plan, points);
    r
}

/// The row of `p`, its average latency against `baseline`'s; a refused method's row says why.
fn row(p: &Point, baseline: Option<f64>) -> Vec<Value> {
    let mut row = vec![json!(p.method.name()), json!(p.method.how())];
    match &p.outcome {
        Ok(m) => row.extend([
            json!(m.ops),
            json!(m.lat.avg),
            json!(m.lat.p50),
            json!(m.lat.p99),
            json!(m.ops_per_s()),
            baseline.map_or(Value::Null, |b| json!(m.lat.avg / b.max(1e-9))),
            json!(m.workers),
            json!(path_of(p.method, m)),
            json!("ok"),
        ]),
        Err(why) => {
            row.extend(std::iter::repeat_n(Value::Null, 8));
            row.push(json!(format!("unsupported here: {why}")));
        }
    }
    row
}

/// Average, p50 and p99 latency per method that ran; none when no method ran.
fn plot(plan: &Plan, points: &[Point]) -> Option<Plot> {
    let measured: Vec<(usize, &Point, &Measured)> = points
        .iter()
        .filter_map(|p| p.measured().map(|m| (p, m)))
        .enumerate()
        .map(|(i, (p, m))| (i + 1, p, m))
        .collect();
    if measured.is_empty() {
        return None;
    }
    let series = |label: &str, f: fn(&LatencySummary) -> f64| Series {
        label: label.into(),
        points: measured
            .iter()
            .map(|(i, _, m)| (*i as f64, f(&m.lat)))
            .collect(),
    };
    let names: Vec<String> = measured
        .iter()
        .map(|(i, p, _)| format!("{i} = {}", p.method.name()))
        .collect();
    Some(Plot::new(
        format!(
            "QD1 durable {} KiB writes: latency per method",
            plan.bs / 1024
        ),
        format!("method ({})", names.join(", ")),
        "latency (us)",
        vec![
            series("average", |l| l.avg),
            series("p50", |l| l.p50),
            series("p99", |l| l.p99),
        ],
    ))
}

/// `write back`, `write through`, or `None` when the target's device does not say.
fn write_cache(path: &Path) -> Option<String> {
    let d = DeviceInfo::for_path(path).ok().flatten()?;
    let disk = d.disk.clone().unwrap_or(d.name.clone());
    std::fs::read_to_string(Path::new("/sys/block").join(disk).join("queue/write_cache"))
        .ok()
        .map(|s| s.trim().to_string())
}

const MODES_NOTE: &str = "thread-fdatasync is ringdb's WAL durability mode `thread` (fdatasync(2) on a helper thread the ring thread waits for); sync-fdatasync is the paper's PostgreSQL port (Sec. 5: fsync() called directly, not through io_uring, to keep io-wq off the path); the paper's Fig. 9 itself compares ring fsync, linked, O_SYNC and passthrough flush";

fn notes(r: &mut MicroResult, opts: &MicroOpts, plan: &Plan, points: &[Point], took: Duration) {
    let at = |m: Method| measured(points, m);
    r.notes.push(format!(
        "paper (Fig. 9, consumer and enterprise SSDs; the text gives ratios, not the bars' values): fsync through io_uring runs on io-wq workers; consumer SSDs are dominated by millisecond-scale fsync, enterprise SSDs with PLP reach microseconds; O_SYNC is more than {PAPER_OSYNC_VS_FSYNC}x slower than write+fsync; linking write and fsync gains nothing over issuing them in sequence; an unpinned fsync worker costs ~{PAPER_CHIPLET_PCT}%; passthrough write + NVMe flush is the truly asynchronous path but needs raw device access"
    ));
    if let (Some(b), Some(f)) = (at(Method::Baseline), at(Method::RingFdatasync)) {
        r.notes.push(durability_cost_note(b, f));
    }
    if let (Some(f), Some(l)) = (at(Method::RingFdatasync), at(Method::RingLinked)) {
        r.notes.push(linked_note(f, l));
    }
    if let Some(f) = at(Method::RingFdatasync) {
        r.notes.extend(versus_ring_fdatasync_notes(f, at));
    }
    r.notes.extend(bimodal_notes(points));
    r.notes.push(iowq_note(points));
    if let Some(wc) = write_cache(&opts.target) {
        r.notes.push(write_cache_note(&wc));
    }
    r.notes.push(MODES_NOTE.into());
    r.notes.push(method_note(plan));
    r.notes.push(format!(
        "target {} ({}); TSC {:.2} GHz; {} CPU(s) here, shared; took {:.1} s",
        opts.target.display(),
        describe_device(&opts.target),
        tsc_hz() / 1e9,
        ringdb_io::affinity::online_cpus(),
        took.as_secs_f64()
    ));
}

/// What durability costs: ring write+fdatasync against the bare write.
fn durability_cost_note(b: &Measured, f: &Measured) -> String {
    format!(
        "durability costs {:+.1} us per write here ({:.1} -> {:.1} us on average, {:.2}x): ring write+fdatasync vs the bare write",
        f.lat.avg - b.lat.avg,
        b.lat.avg,
        f.lat.avg,
        f.lat.avg / b.lat.avg.max(1e-9)
    )
}

/// Linking the write to its fdatasync against issuing them one after the other.
fn linked_note(f: &Measured, l: &Measured) -> String {
    format!(
        "ring-linked vs ring-write+fdatasync: {:.1} vs {:.1} us on average ({:+.1}%), p99 {:.1} vs {:.1} us; the paper found linking no better than issuing in sequence",
        l.lat.avg,
        f.lat.avg,
        (l.lat.avg / f.lat.avg.max(1e-9) - 1.0) * 100.0,
        l.lat.p99,
        f.lat.p99
    )
}

/// The open flags (`osync`, `odsync`) and the fdatasync(2) methods against ring
/// write+fdatasync `f`, each that ran.
fn versus_ring_fdatasync_notes<'a>(
    f: &Measured,
    at: impl Fn(Method) -> Option<&'a Measured>,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (m, what) in [(Method::Osync, "osync"), (Method::Odsync, "odsync")] {
        if let Some(o) = at(m) {
            let mut s = format!(
                "{what} vs ring-write+fdatasync: {:.1} vs {:.1} us on average ({:.2}x)",
                o.lat.avg,
                f.lat.avg,
                o.lat.avg / f.lat.avg.max(1e-9)
            );
            if m == Method::Osync {
                s.push_str(&format!(
                    "; the paper found O_SYNC more than {PAPER_OSYNC_VS_FSYNC}x slower"
                ));
            }
            notes.push(s);
        }
    }
    for (m, what) in [
        (Method::ThreadFdatasync, "thread-fdatasync"),
        (Method::SyncFdatasync, "sync-fdatasync"),
    ] {
        if let Some(t) = at(m) {
            notes.push(format!(
                "{what} vs ring-write+fdatasync: {:.1} vs {:.1} us on average ({:+.1}%), io-wq workers {} vs {}",
                t.lat.avg,
                f.lat.avg,
                (t.lat.avg / f.lat.avg.max(1e-9) - 1.0) * 100.0,
                t.workers,
                f.workers
            ));
        }
    }
    notes
}

/// One note per method whose p99 is far above its p50: some of its writes waited long.
fn bimodal_notes(points: &[Point]) -> Vec<String> {
    points
        .iter()
        .filter_map(|p| {
            let m = p.measured().filter(|m| m.lat.p99 > 8.0 * m.lat.p50)?;
            Some(format!(
                "{}: bimodal latency, p50 {:.0} us but p99 {:.0} us: some writes waited milliseconds (its average moves from run to run; compare p50)",
                p.method.name(),
                m.lat.p50,
                m.lat.p99
            ))
        })
        .collect()
}

/// Which durability points ran on io-wq, as the worker counts show.
fn iowq_note(points: &[Point]) -> String {
    let list = |pred: &dyn Fn(&Measured) -> bool| -> String {
        let v: Vec<&str> = points
            .iter()
            .filter(|p| p.measured().is_some_and(pred))
            .map(|p| p.method.name())
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    };
    format!(
        "io-wq workers appeared for: {}; every request completed without one for: {} (thread-fdatasync's helper and sync-fdatasync's fdatasync(2) are not io-wq: their rings saw only the write)",
        list(&|m| m.workers > 0),
        list(&|m| m.workers == 0)
    )
}

/// What the device's write cache `wc` means for the cost of a flush.
fn write_cache_note(wc: &str) -> String {
    let what = if wc == "write through" {
        "the device reports no volatile cache, so a flush costs the kernel nothing and durability costs little"
    } else {
        "the device reports a volatile cache, so every durability point sends it a flush"
    };
    format!("write cache: {wc}: {what}")
}

/// How each method ran: QD1, pinning, the region written, when it stops.
fn method_note(plan: &Plan) -> String {
    format!(
        "QD1; each method on a fresh thread pinned to CPU {} with its io-wq workers (IORING_REGISTER_IOWQ_AFF) and helper thread on that CPU; {} byte O_DIRECT writes cycling through the first {} MiB of the target (preallocated, so fdatasync has no size change to log); latency = push of the write to completion of its durability point (rdtsc); each method stops after {} writes or {:.1} s; {} unrecorded warm-up writes first",
        plan.cpu,
        plan.bs,
        plan.region >> 20,
        plan.ios,
        plan.runtime.as_secs_f64(),
        WARMUP_OPS
    )
}
