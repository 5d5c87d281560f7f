//! The bare cross-thread wake-up, measured in the same run: one thread writes an eventfd that
//! another is blocked reading; that one writes a second eventfd back. A round trip is two
//! wake-ups, so one wake-up is half of it (reported as such).

use super::measure::{Budget, Tally, Window, WAIT_LIMIT};
use super::Pins;
use ringdb_lab::counters::{rdtsc, ticks_to_ns, CpuTime, LatencyHist};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A blocking eventfd (the reader sleeps in `read`).
fn blocking_eventfd() -> OwnedFd {
    // SAFETY: plain syscall; the descriptor is owned below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    // SAFETY: just created, owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn write_one(fd: &OwnedFd, value: u64) {
    // SAFETY: writes 8 bytes from a live u64.
    let written = unsafe { libc::write(fd.as_raw_fd(), (&value as *const u64).cast(), 8) };
    assert_eq!(written, 8, "eventfd write");
}

/// Blocks until the eventfd is non-zero; returns (and clears) its value.
fn read_one(fd: &OwnedFd) -> u64 {
    let mut value = 0u64;
    // SAFETY: reads 8 bytes into a live u64.
    let read = unsafe { libc::read(fd.as_raw_fd(), (&mut value as *mut u64).cast(), 8) };
    assert_eq!(read, 8, "eventfd read");
    value
}

/// One-way wake-up latency: eventfd ping-pong for `runtime`, each round trip halved.
pub(super) fn measure(runtime: Duration, pins: Pins) -> Tally {
    let ping = Arc::new(blocking_eventfd());
    let pong = Arc::new(blocking_eventfd());
    let (ping_in, pong_out) = (ping.clone(), pong.clone());
    // The echo thread: a value of 2 ends it.
    let echo = std::thread::spawn(move || {
        pins.pin_server();
        while read_one(&ping_in) == 1 {
            write_one(&pong_out, 1);
        }
    });
    let pinger = std::thread::spawn(move || {
        pins.pin_client();
        let cpu_before = CpuTime::now();
        let started = Instant::now();
        let budget = Budget::new(runtime.min(WAIT_LIMIT));
        let mut hist = LatencyHist::new();
        let mut round_trips = 0;
        while budget.allows(round_trips) {
            let sent = rdtsc();
            write_one(&ping, 1);
            read_one(&pong);
            hist.record_ns(ticks_to_ns(rdtsc().wrapping_sub(sent)) / 2);
            round_trips += 1;
        }
        let mut tally = Tally::of(Window::new(1), started, cpu_before);
        (tally.hist, tally.round_trips) = (hist, round_trips);
        write_one(&ping, 2);
        tally
    });
    let tally = pinger.join().expect("the eventfd ping thread");
    echo.join().expect("the eventfd echo thread");
    tally
}
