//! The server of paths (b) and (c): a thread running a ringdb-io `Runtime` (io_uring,
//! DEFER_TASKRUN) with a doorbell and a request queue. Its one task arms the doorbell, drains
//! the queue, queues the replies and wakes the client once per batch, then awaits
//! `doorbell_rung`: the runtime sleeps in `io_uring_enter` with the doorbell's eventfd polled
//! on its ring, and a doorbell message (MSG_RING) from the client's ring wakes it the same way.

use super::measure::WAIT_LIMIT;
use super::Pins;
use ringdb_io::{Doorbell, EngineKind, IoConfig, IoError, Runtime, RuntimeStats, SetupMode};
use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{JoinHandle, Thread};

/// Requests (`None` ends the run) and replies, shared with the client.
pub(super) type Requests = Arc<Mutex<VecDeque<Option<u64>>>>;
pub(super) type Replies = Arc<Mutex<VecDeque<u64>>>;

/// How the server wakes the client once a batch of replies is queued.
pub(super) enum Wake {
    /// A plain thread parked in `park_timeout` (a futex).
    Unpark(Thread),
    /// A runtime awaiting its doorbell: rung from the server's task, so as MSG_RING.
    Ring(Doorbell),
}

impl Wake {
    fn wake(&self) {
        match self {
            Wake::Unpark(thread) => thread.unpark(),
            Wake::Ring(doorbell) => doorbell.ring(),
        }
    }
}

/// The runtime both ends of the doorbell paths run: io_uring with DEFER_TASKRUN.
pub(super) fn runtime_config() -> IoConfig {
    IoConfig {
        setup: SetupMode::Defer,
        ..IoConfig::new(EngineKind::Uring)
    }
}

/// A running server: its doorbell, its queues and its thread (which returns its runtime's
/// counters).
pub(super) struct Server {
    pub(super) doorbell: Doorbell,
    pub(super) requests: Requests,
    pub(super) replies: Replies,
    pub(super) thread: JoinHandle<Result<RuntimeStats, IoError>>,
}

/// Starts the server; it serves once `wake` arrives (the client's way of being woken).
pub(super) fn start(pins: Pins, wake: mpsc::Receiver<Wake>) -> Result<Server, IoError> {
    let requests = Requests::default();
    let replies = Replies::default();
    let (doorbell_out, doorbell_in) = mpsc::channel();
    let (queue, answers) = (requests.clone(), replies.clone());
    let thread = std::thread::spawn(move || {
        pins.pin_server();
        let made = Runtime::from_config(&runtime_config(), &[], None)
            .and_then(|runtime| Ok((runtime.doorbell()?, runtime)));
        let (doorbell, mut runtime) = match made {
            Ok(made) => made,
            Err(error) => {
                let _ = doorbell_out.send(Err(error));
                return Err(IoError::RuntimeGone);
            }
        };
        let _ = doorbell_out.send(Ok(doorbell.clone()));
        let Ok(wake) = wake.recv_timeout(WAIT_LIMIT) else {
            return Ok(runtime.stats());
        };
        let io = runtime.io();
        runtime.block_on(serve(io, doorbell, queue, answers, wake))?;
        Ok(runtime.stats())
    });
    let doorbell = doorbell_in
        .recv_timeout(WAIT_LIMIT)
        .map_err(|_| IoError::RuntimeGone)??;
    Ok(Server {
        doorbell,
        requests,
        replies,
        thread,
    })
}

/// The server's task: until a `None` request arrives.
async fn serve(
    io: ringdb_io::Io,
    doorbell: Doorbell,
    requests: Requests,
    replies: Replies,
    wake: Wake,
) {
    loop {
        doorbell.arm();
        let batch: Vec<Option<u64>> = requests.lock().expect("requests").drain(..).collect();
        if !batch.is_empty() {
            let mut stop = false;
            {
                let mut replies = replies.lock().expect("replies");
                for request in batch {
                    match request {
                        Some(id) => replies.push_back(id),
                        None => stop = true,
                    }
                }
            }
            wake.wake();
            if stop {
                return;
            }
        }
        io.doorbell_rung().await;
    }
}
