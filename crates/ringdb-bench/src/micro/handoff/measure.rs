//! What every path measures the same way: a client keeps `window` requests outstanding, each
//! reply is matched to its request (replies come back in order: one server, FIFO queues), and
//! the round trip runs from the moment the request was handed over to the moment its reply
//! was taken (`rdtsc`). CPU time is the whole process's (`getrusage(RUSAGE_SELF)`: client,
//! server, and any kernel work charged to them) over the measurement.

use ringdb_lab::counters::{rdtsc, ticks_to_ns, CpuTime, LatencyHist};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long either side waits for the other before the measurement is called broken.
pub(super) const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// Round trips per measurement at most (the time budget usually ends it first).
pub(super) const MAX_ROUND_TRIPS: u64 = 2_000_000;

/// When a measurement stops: after `runtime`, or `MAX_ROUND_TRIPS` round trips.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    pub(super) runtime: Duration,
    pub(super) started: Instant,
}

impl Budget {
    pub(super) fn new(runtime: Duration) -> Budget {
        Budget {
            runtime,
            started: Instant::now(),
        }
    }

    /// Whether a new request may still be sent after `sent` were.
    pub(super) fn allows(&self, sent: u64) -> bool {
        sent < MAX_ROUND_TRIPS && self.started.elapsed() < self.runtime
    }
}

/// The client's outstanding requests, oldest first, and what their round trips took.
pub(super) struct Window {
    size: usize,
    outstanding: VecDeque<(u64, u64)>,
    next_id: u64,
    pub(super) hist: LatencyHist,
    pub(super) round_trips: u64,
}

impl Window {
    pub(super) fn new(size: usize) -> Window {
        assert!(size > 0, "a window of at least one request");
        Window {
            size,
            outstanding: VecDeque::with_capacity(size),
            next_id: 0,
            hist: LatencyHist::new(),
            round_trips: 0,
        }
    }

    /// The id of the next request to send, when the window has room and the budget allows.
    pub(super) fn next_to_send(&mut self, budget: &Budget) -> Option<u64> {
        if self.outstanding.len() >= self.size || !budget.allows(self.next_id) {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.outstanding.push_back((id, rdtsc()));
        Some(id)
    }

    /// Takes the reply to request `id`: it must be the oldest outstanding one.
    pub(super) fn take_reply(&mut self, id: u64) {
        let (expected, sent_at) = self
            .outstanding
            .pop_front()
            .expect("a reply without a request outstanding");
        assert_eq!(id, expected, "replies come back in request order");
        self.hist
            .record_ns(ticks_to_ns(rdtsc().wrapping_sub(sent_at)));
        self.round_trips += 1;
    }

    pub(super) fn is_idle(&self) -> bool {
        self.outstanding.is_empty()
    }
}

/// One path's measurement at one window.
pub(super) struct Tally {
    pub(super) hist: LatencyHist,
    pub(super) round_trips: u64,
    pub(super) elapsed: Duration,
    pub(super) cpu: Duration,
    /// The server runtime's doorbell wake-ups (eventfd, MSG_RING); zero for the channel.
    pub(super) eventfd_wakes: u64,
    pub(super) message_wakes: u64,
}

impl Tally {
    /// A tally of `window`'s round trips since `started`, with the CPU used since `cpu_before`.
    pub(super) fn of(window: Window, started: Instant, cpu_before: CpuTime) -> Tally {
        Tally {
            hist: window.hist,
            round_trips: window.round_trips,
            elapsed: started.elapsed(),
            cpu: CpuTime::now().since(cpu_before).total(),
            eventfd_wakes: 0,
            message_wakes: 0,
        }
    }

    /// Adds another repetition of the same path and window.
    pub(super) fn merge(&mut self, other: Tally) {
        self.hist.merge(&other.hist);
        self.round_trips += other.round_trips;
        self.elapsed += other.elapsed;
        self.cpu += other.cpu;
        self.eventfd_wakes += other.eventfd_wakes;
        self.message_wakes += other.message_wakes;
    }

    pub(super) fn round_trips_per_s(&self) -> f64 {
        self.round_trips as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub(super) fn cpu_us_per_round_trip(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.round_trips.max(1) as f64
    }
}
