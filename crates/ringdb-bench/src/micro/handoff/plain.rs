//! Path (b): a plain client thread hands requests to the server runtime through its queue and
//! rings its doorbell (an eventfd write when the server sleeps, one atomic otherwise); the
//! server queues replies and unparks the client (a futex).

use super::measure::{Budget, Tally, Window, WAIT_LIMIT};
use super::server::{self, Replies, Requests, Wake};
use super::Pins;
use ringdb_io::{Doorbell, IoError};
use ringdb_lab::counters::CpuTime;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs the plain-thread doorbell path at `window` for `runtime`.
pub(super) fn measure(window: usize, runtime: Duration, pins: Pins) -> Result<Tally, IoError> {
    let (wake_out, wake_in) = mpsc::channel();
    let server = server::start(pins, wake_in)?;
    let (doorbell, requests, replies) = (server.doorbell, server.requests, server.replies);
    let client = std::thread::spawn(move || {
        pins.pin_client();
        let _ = wake_out.send(Wake::Unpark(std::thread::current()));
        drive(window, runtime, &doorbell, &requests, &replies)
    });
    let tally = client.join().expect("the doorbell client thread");
    let stats = server.thread.join().expect("the doorbell server thread")?;
    Ok(Tally {
        eventfd_wakes: stats.doorbell_eventfd_wakes,
        message_wakes: stats.doorbell_message_wakes,
        ..tally
    })
}

/// The client's loop: send while the window has room, then park until replies arrive.
fn drive(
    window: usize,
    runtime: Duration,
    doorbell: &Doorbell,
    requests: &Requests,
    replies: &Replies,
) -> Tally {
    let cpu_before = CpuTime::now();
    let started = Instant::now();
    let budget = Budget::new(runtime);
    let mut window = Window::new(window);
    loop {
        while let Some(id) = window.next_to_send(&budget) {
            requests.lock().expect("requests").push_back(Some(id));
            doorbell.ring();
        }
        if window.is_idle() {
            break;
        }
        for id in wait_for_replies(replies) {
            window.take_reply(id);
        }
    }
    let tally = Tally::of(window, started, cpu_before);
    requests.lock().expect("requests").push_back(None);
    doorbell.ring();
    tally
}

/// Parks until the server has queued replies (the server unparks after queueing them, and an
/// unpark before the park is kept, so none is missed); bounded by `WAIT_LIMIT`.
fn wait_for_replies(replies: &Replies) -> Vec<u64> {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let batch: Vec<u64> = replies.lock().expect("replies").drain(..).collect();
        if !batch.is_empty() {
            return batch;
        }
        let now = Instant::now();
        assert!(now < deadline, "the doorbell server did not reply");
        std::thread::park_timeout(deadline - now);
    }
}
