//! `handoff` (issue 12): what handing a request to a shard thread and getting its reply costs,
//! on three paths measured in the same run, alternated, against a plain channel:
//! - (a) `channel`, the baseline: `std::sync::mpsc` both ways, blocking `recv`;
//! - (b) `doorbell`: a plain client thread pushes into the server runtime's queue and rings
//!   its `Doorbell` (an eventfd write when the server sleeps); the reply comes back through a
//!   queue and a thread unpark (a futex);
//! - (c) `shard-msg-ring`: both threads run io_uring runtimes; requests and replies are woken
//!   with `IORING_OP_MSG_RING` from the ringing thread's ring.
//!
//! Each at windows of 1 (ping-pong latency), 16 and 64 requests outstanding (throughput). Per
//! path: round trips/s, p50/p99 round-trip latency, the process's CPU time per round trip, and
//! the ratios to the channel at the same window. Beside them, the cost of one bare
//! cross-thread wake-up (an eventfd write waking a blocked reader), measured in the same run.
//! Server and client are pinned to two different CPUs when there are two.

mod channel;
mod measure;
mod plain;
mod server;
mod shard;
mod wake;

use super::{allowed_cpus, available_cpus, MicroOpts, MicroResult};
use crate::error::Result;
use measure::Tally;
use serde_json::{json, Value};
use std::time::Duration;

/// Requests outstanding per measured point.
const WINDOWS: &[usize] = &[1, 16, 64];
/// Repetitions of every (path, window), alternating the paths; merged.
const REPEATS: usize = 2;
const QUICK_REPEATS: usize = 1;

const MIRRORS: &str = "issue 12: a shard's queue plus a wake-up its ring sees, vs a plain channel";

const COLUMNS: &[&str] = &[
    "path",
    "window",
    "round_trips",
    "round_trips_per_s",
    "lat_p50_us",
    "lat_p99_us",
    "cpu_us_per_round_trip",
    "rate_vs_channel",
    "p50_vs_channel",
    "cpu_vs_channel",
    "server_eventfd_wakes",
    "server_msg_ring_wakes",
    "status",
];

/// The paths, in the order they alternate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Channel,
    Doorbell,
    Shard,
}

impl Path {
    const ALL: [Path; 3] = [Path::Channel, Path::Doorbell, Path::Shard];

    fn name(self) -> &'static str {
        match self {
            Path::Channel => "channel",
            Path::Doorbell => "doorbell",
            Path::Shard => "shard-msg-ring",
        }
    }

    fn measure(self, window: usize, runtime: Duration, pins: Pins) -> Result<Tally> {
        Ok(match self {
            Path::Channel => channel::measure(window, runtime, pins),
            Path::Doorbell => plain::measure(window, runtime, pins)?,
            Path::Shard => shard::measure(window, runtime, pins)?,
        })
    }
}

/// Where the server and the client threads run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pins {
    server: Option<u32>,
    client: Option<u32>,
}

impl Pins {
    /// Two different CPUs when this process may use two; otherwise unpinned.
    fn plan() -> Pins {
        match allowed_cpus()[..] {
            [server, client, ..] => Pins {
                server: Some(server),
                client: Some(client),
            },
            _ => Pins {
                server: None,
                client: None,
            },
        }
    }

    fn pin(cpu: Option<u32>) {
        if let Some(cpu) = cpu {
            // Unpinned is still a valid measurement; the notes say where threads ran.
            let _ = ringdb_io::affinity::pin_current_thread(cpu);
        }
    }

    pub(super) fn pin_server(self) {
        Self::pin(self.server);
    }

    pub(super) fn pin_client(self) {
        Self::pin(self.client);
    }
}

/// Runs the hand-off benchmark.
pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let pins = Pins::plan();
    let repeats = if opts.quick { QUICK_REPEATS } else { REPEATS };
    let points = WINDOWS.len() * Path::ALL.len() * repeats + 1;
    let runtime = opts.budgeted_point_runtime(points);
    let mut result = MicroResult::new("handoff", MIRRORS, COLUMNS);
    for &window in WINDOWS {
        let tallies = measure_window(window, repeats, runtime, pins, opts.progress);
        add_rows(&mut result, window, &tallies);
    }
    let wake = wake::measure(runtime, pins);
    add_wake_row(&mut result, &wake);
    add_notes(&mut result, pins, runtime, repeats);
    Ok(result)
}

/// Every path at `window`, `repeats` times, alternated; each path's tallies merged (or why it
/// could not run).
fn measure_window(
    window: usize,
    repeats: usize,
    runtime: Duration,
    pins: Pins,
    progress: bool,
) -> Vec<(Path, std::result::Result<Tally, String>)> {
    let mut tallies: Vec<(Path, std::result::Result<Tally, String>)> = Vec::new();
    for _ in 0..repeats {
        for path in Path::ALL {
            let measured = path
                .measure(window, runtime, pins)
                .map_err(|e| e.to_string());
            if progress {
                if let Ok(tally) = &measured {
                    eprintln!(
                        "handoff {} window {window}: {:.0} round trips/s, p50 {:.1} us",
                        path.name(),
                        tally.round_trips_per_s(),
                        tally.hist.summary().p50
                    );
                }
            }
            match tallies.iter_mut().find(|(p, _)| *p == path) {
                Some((_, Ok(merged))) => {
                    if let Ok(tally) = measured {
                        merged.merge(tally);
                    }
                }
                Some((_, Err(_))) => {}
                None => tallies.push((path, measured)),
            }
        }
    }
    tallies
}

/// One row per path at `window`, with its ratios to the channel's.
fn add_rows(
    result: &mut MicroResult,
    window: usize,
    tallies: &[(Path, std::result::Result<Tally, String>)],
) {
    let baseline = tallies
        .iter()
        .find(|(path, _)| *path == Path::Channel)
        .and_then(|(_, tally)| tally.as_ref().ok());
    for (path, tally) in tallies {
        let row = match tally {
            Ok(tally) => measured_row(path.name(), window, tally, baseline),
            Err(reason) => unsupported_row(path.name(), window, reason),
        };
        result.row(row);
    }
}

fn ratio(value: f64, baseline: f64) -> Value {
    if baseline > 0.0 && value.is_finite() {
        json!(value / baseline)
    } else {
        Value::Null
    }
}

fn measured_row(name: &str, window: usize, tally: &Tally, baseline: Option<&Tally>) -> Vec<Value> {
    let latency = tally.hist.summary();
    let (rate, cpu) = (tally.round_trips_per_s(), tally.cpu_us_per_round_trip());
    let against = |value: f64, of: fn(&Tally) -> f64| match baseline {
        Some(baseline) => ratio(value, of(baseline)),
        None => Value::Null,
    };
    vec![
        json!(name),
        json!(window),
        json!(tally.round_trips),
        json!(rate),
        json!(latency.p50),
        json!(latency.p99),
        json!(cpu),
        against(rate, Tally::round_trips_per_s),
        against(latency.p50, |t| t.hist.summary().p50),
        against(cpu, Tally::cpu_us_per_round_trip),
        json!(tally.eventfd_wakes),
        json!(tally.message_wakes),
        json!("ok"),
    ]
}

fn unsupported_row(name: &str, window: usize, reason: &str) -> Vec<Value> {
    let mut row = vec![json!(name), json!(window)];
    row.extend(std::iter::repeat_n(Value::Null, COLUMNS.len() - 3));
    row.push(json!(format!("unsupported here: {reason}")));
    row
}

/// The bare wake-up: one eventfd write waking a blocked reader (half a ping-pong).
fn add_wake_row(result: &mut MicroResult, wake: &Tally) {
    let latency = wake.hist.summary();
    let mut row = vec![
        json!("eventfd-wake (one way)"),
        json!(1),
        json!(wake.round_trips),
        json!(wake.round_trips_per_s()),
        json!(latency.p50),
        json!(latency.p99),
        json!(wake.cpu_us_per_round_trip()),
    ];
    row.extend(std::iter::repeat_n(Value::Null, 5));
    row.push(json!("ok"));
    result.row(row);
}

fn add_notes(result: &mut MicroResult, pins: Pins, runtime: Duration, repeats: usize) {
    let placement = match (pins.server, pins.client) {
        (Some(server), Some(client)) => format!("server on CPU {server}, client on CPU {client}"),
        _ => "threads unpinned (fewer than two CPUs allowed)".into(),
    };
    result.notes.push(format!(
        "{placement} of {} available; {repeats} alternated repetition(s) of {:.2} s per path and \
         window, merged",
        available_cpus(),
        runtime.as_secs_f64()
    ));
    result.notes.push(
        "round trip: request handed over -> its reply taken (rdtsc); cpu: getrusage of the whole \
         process per round trip; *_vs_channel: this path / the channel at the same window"
            .into(),
    );
    result.notes.push(
        "server_*_wakes: the server runtime's doorbell wake-ups by eventfd and by MSG_RING (a ring \
         makes a syscall only when it finds the server asleep)"
            .into(),
    );
    result.notes.push(
        "eventfd-wake (one way): half an eventfd ping-pong between two blocked threads, the \
         floor under every path's window-1 round trip (two wake-ups)"
            .into(),
    );
}
