//! Path (c), shard to shard: the client thread runs an io_uring runtime too, with a doorbell
//! of its own. Its task queues requests and rings the server's doorbell, the server's task
//! queues replies and rings the client's: both rings leave from the ringing thread's ring as
//! `IORING_OP_MSG_RING` (when the target sleeps), and both sides sleep in `io_uring_enter`.

use super::measure::{Budget, Tally, Window};
use super::server::{self, runtime_config, Replies, Requests, Wake};
use super::Pins;
use ringdb_io::{Doorbell, Io, IoError, Runtime};
use ringdb_lab::counters::CpuTime;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs the shard-to-shard path at `window` for `runtime`.
pub(super) fn measure(window: usize, runtime: Duration, pins: Pins) -> Result<Tally, IoError> {
    let (wake_out, wake_in) = mpsc::channel();
    let server = server::start(pins, wake_in)?;
    let (doorbell, requests, replies) = (server.doorbell, server.requests, server.replies);
    let client = std::thread::spawn(move || -> Result<Tally, IoError> {
        pins.pin_client();
        let mut client_runtime = Runtime::from_config(&runtime_config(), &[], None)?;
        let own = client_runtime.doorbell()?;
        let _ = wake_out.send(Wake::Ring(own.clone()));
        let io = client_runtime.io();
        let cpu_before = CpuTime::now();
        let started = Instant::now();
        let run = drive(io, window, runtime, own, doorbell, requests, replies);
        let window = client_runtime.block_on(run)?;
        Ok(Tally::of(window, started, cpu_before))
    });
    let tally = client.join().expect("the shard client thread");
    let stats = server.thread.join().expect("the shard server thread")?;
    let tally = tally?;
    Ok(Tally {
        eventfd_wakes: stats.doorbell_eventfd_wakes,
        message_wakes: stats.doorbell_message_wakes,
        ..tally
    })
}

/// The client's task: send while the window has room, then await its own doorbell until
/// replies arrive.
async fn drive(
    io: Io,
    window: usize,
    runtime: Duration,
    own: Doorbell,
    server: Doorbell,
    requests: Requests,
    replies: Replies,
) -> Window {
    let budget = Budget::new(runtime);
    let mut window = Window::new(window);
    loop {
        while let Some(id) = window.next_to_send(&budget) {
            requests.lock().expect("requests").push_back(Some(id));
            server.ring();
        }
        if window.is_idle() {
            break;
        }
        own.arm();
        let batch: Vec<u64> = replies.lock().expect("replies").drain(..).collect();
        if batch.is_empty() {
            io.doorbell_rung().await;
        }
        for id in batch {
            window.take_reply(id);
        }
    }
    requests.lock().expect("requests").push_back(None);
    server.ring();
    window
}
