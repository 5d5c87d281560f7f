//! Path (a), the baseline: `std::sync::mpsc` channels both ways, each side blocked in `recv`
//! (a futex wait) while it has nothing to do.

use super::measure::{Budget, Tally, Window, WAIT_LIMIT};
use super::Pins;
use ringdb_lab::counters::CpuTime;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs the channel path at `window` for `runtime`.
pub(super) fn measure(window: usize, runtime: Duration, pins: Pins) -> Tally {
    let (requests, requests_in) = mpsc::channel::<Option<u64>>();
    let (replies, replies_in) = mpsc::channel::<u64>();
    let server = std::thread::spawn(move || {
        pins.pin_server();
        // `None` ends the run; so does a closed channel.
        while let Ok(Some(id)) = requests_in.recv_timeout(WAIT_LIMIT) {
            if replies.send(id).is_err() {
                break;
            }
        }
    });
    let client = std::thread::spawn(move || {
        pins.pin_client();
        let cpu_before = CpuTime::now();
        let started = Instant::now();
        let budget = Budget::new(runtime);
        let mut window = Window::new(window);
        loop {
            while let Some(id) = window.next_to_send(&budget) {
                requests
                    .send(Some(id))
                    .expect("the channel server is alive");
            }
            if window.is_idle() {
                break;
            }
            let id = replies_in
                .recv_timeout(WAIT_LIMIT)
                .expect("the channel server replies");
            window.take_reply(id);
        }
        let tally = Tally::of(window, started, cpu_before);
        let _ = requests.send(None);
        tally
    });
    let tally = client.join().expect("the channel client thread");
    server.join().expect("the channel server thread");
    tally
}
