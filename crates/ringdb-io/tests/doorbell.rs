//! The doorbell through the public API, on every engine that runs here (posix, libaio, and
//! io_uring in the default, coop and defer-taskrun setup modes): rings from another thread all
//! reach the task awaiting `doorbell_rung` (none lost), a ring ends a wait for I/O that is still
//! in flight, a ring from a thread running another io_uring runtime travels as MSG_RING,
//! dropping a runtime with its doorbell armed neither hangs nor leaks descriptors, and a runtime
//! with nothing to do and no doorbell waiter still reports the stall.
//!
//! Every wait in these tests is bounded (channel receives with a timeout, a watchdog that
//! unblocks a stuck read), so a lost wake-up fails a test instead of hanging it.

#[path = "support/pipe.rs"]
mod pipe_support;
use pipe_support::{pipe, write_byte};
use ringdb_io::{
    Doorbell, Engine, EngineKind, FileId, Io, IoConfig, IoError, LibaioEngine, Runtime,
    RuntimeStats, SetupMode,
};
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long any single hand-off may take before the test calls the wake-up lost.
const HANDOFF_LIMIT: Duration = Duration::from_secs(10);
const RINGS: u64 = 10_000;

/// The tests of this file run one at a time: one of them counts the process's descriptors.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The engines under test, by name.
fn configs() -> Vec<(&'static str, IoConfig)> {
    let uring = |setup| IoConfig {
        setup,
        ..IoConfig::new(EngineKind::Uring)
    };
    vec![
        ("posix", IoConfig::new(EngineKind::Posix)),
        ("libaio", IoConfig::new(EngineKind::Libaio)),
        ("uring-default", uring(SetupMode::Default)),
        ("uring-coop", uring(SetupMode::Coop)),
        ("uring-defer", uring(SetupMode::Defer)),
    ]
}

/// A runtime for `config` on this thread, or `None` (said on stderr) where the engine cannot
/// run on this machine.
fn runtime(name: &str, config: &IoConfig, files: &[i32]) -> Option<Runtime> {
    match Runtime::from_config(config, files, None) {
        Ok(runtime) => Some(runtime),
        Err(error @ (IoError::UringDisabled { .. } | IoError::Unsupported { .. })) => {
            eprintln!("SKIP {name}: {error}");
            None
        }
        Err(error) => panic!("{name}: {error}"),
    }
}

/// A queue of numbers shared with another thread.
type Queue = Arc<Mutex<VecDeque<u64>>>;

/// The server's loop: arm, drain the queue (acknowledging each item), await the doorbell;
/// returns the items seen once `until` of them arrived.
async fn serve(
    io: Io,
    doorbell: Doorbell,
    queue: Queue,
    acks: mpsc::Sender<u64>,
    until: u64,
) -> u64 {
    let mut seen = 0;
    while seen < until {
        doorbell.arm();
        let drained: Vec<u64> = queue.lock().unwrap().drain(..).collect();
        for item in drained {
            seen += 1;
            acks.send(item).unwrap();
        }
        if seen < until {
            io.doorbell_rung().await;
        }
    }
    seen
}

/// `RINGS` rings, each waiting for its acknowledgement before the next: each must reach the
/// task (the runtime sleeps between them, so nearly every ring is a real wake-up).
fn ping_pong_rings_all_arrive(name: &str, config: &IoConfig) {
    let Some(mut runtime) = runtime(name, config, &[]) else {
        return;
    };
    let doorbell = runtime.doorbell().unwrap();
    let queue = Queue::default();
    let (acks, acks_in) = mpsc::channel();
    let ringer = {
        let (doorbell, queue) = (doorbell.clone(), queue.clone());
        std::thread::spawn(move || {
            for i in 0..RINGS {
                queue.lock().unwrap().push_back(i);
                doorbell.ring();
                let acked = acks_in.recv_timeout(HANDOFF_LIMIT);
                assert_eq!(acked, Ok(i), "ring {i} was lost");
            }
        })
    };
    let io = runtime.io();
    let seen = runtime
        .block_on(serve(io, doorbell, queue, acks, RINGS))
        .unwrap();
    ringer.join().unwrap();
    assert_eq!(seen, RINGS);
    let stats = runtime.stats();
    assert!(stats.doorbell_sleeps > 0, "{name}: never slept: {stats:?}");
    assert!(stats.doorbell_eventfd_wakes > 0, "{name}: {stats:?}");
    assert_eq!(stats.doorbell_message_wakes, 0, "{name}: no runtime rang");
}

/// `RINGS` items pushed and rung as fast as possible: rings coalesce, but the last one must
/// still wake the task, so it sees every item.
fn burst_rings_are_not_lost(name: &str, config: &IoConfig) {
    let Some(mut runtime) = runtime(name, config, &[]) else {
        return;
    };
    let doorbell = runtime.doorbell().unwrap();
    let queue = Queue::default();
    let (acks, _acks_in) = mpsc::channel();
    let ringer = {
        let (doorbell, queue) = (doorbell.clone(), queue.clone());
        std::thread::spawn(move || {
            for i in 0..RINGS {
                queue.lock().unwrap().push_back(i);
                doorbell.ring();
            }
        })
    };
    let io = runtime.io();
    let seen = runtime
        .block_on(serve(io, doorbell, queue, acks, RINGS))
        .unwrap();
    ringer.join().unwrap();
    assert_eq!(seen, RINGS, "{name}");
}

#[test]
fn ten_thousand_rings_from_another_thread_each_reach_the_waiting_task() {
    let _serial = serial();
    for (name, config) in configs() {
        ping_pong_rings_all_arrive(name, &config);
    }
}

#[test]
fn a_burst_of_rings_is_never_lost() {
    let _serial = serial();
    for (name, config) in configs() {
        burst_rings_are_not_lost(name, &config);
    }
}

/// io_uring: a read of an empty pipe stays in flight until someone writes. A task awaiting
/// the doorbell must be woken by a ring from another thread while that read is in flight (the
/// woken task then writes the byte that completes the read). A watchdog writes the byte after
/// `HANDOFF_LIMIT` so a lost wake-up fails instead of hanging.
fn ring_ends_a_wait_with_io_in_flight(name: &str, config: &IoConfig) {
    let (read_end, write_end) = pipe();
    let Some(mut runtime) = runtime(name, config, &[read_end.as_raw_fd()]) else {
        return;
    };
    let doorbell = runtime.doorbell().unwrap();
    let read_done = Arc::new(AtomicBool::new(false));
    let io = runtime.io();
    let done = read_done.clone();
    runtime.spawn(async move {
        let (result, _) = io.read(FileId(0), 0, vec![0u8; 1]).await;
        assert_eq!(result.unwrap(), 1);
        done.store(true, Ordering::SeqCst);
    });
    let write_end = Arc::new(write_end);
    let (ringer, watchdog) = ring_later_and_watch(doorbell, write_end.clone(), read_done.clone());
    let io = runtime.io();
    let done = read_done.clone();
    let woke_before_read_completed = runtime
        .block_on(async move {
            io.doorbell_rung().await;
            let before = !done.load(Ordering::SeqCst);
            write_byte(&write_end);
            before
        })
        .unwrap();
    runtime.run().unwrap();
    ringer.join().unwrap();
    watchdog.join().unwrap();
    assert!(
        woke_before_read_completed,
        "{name}: the ring was seen only after the read completed"
    );
    assert!(read_done.load(Ordering::SeqCst));
    assert!(runtime.stats().doorbell_eventfd_wakes > 0, "{name}");
}

/// Rings after 50 ms; the watchdog completes the read after `HANDOFF_LIMIT` if nobody did.
fn ring_later_and_watch(
    doorbell: Doorbell,
    write_end: Arc<OwnedFd>,
    read_done: Arc<AtomicBool>,
) -> (std::thread::JoinHandle<()>, std::thread::JoinHandle<()>) {
    let ringer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        doorbell.ring();
    });
    let watchdog = std::thread::spawn(move || {
        let start = Instant::now();
        while !read_done.load(Ordering::SeqCst) && start.elapsed() < HANDOFF_LIMIT {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !read_done.load(Ordering::SeqCst) {
            write_byte(&write_end);
        }
    });
    (ringer, watchdog)
}

#[test]
fn a_ring_wakes_the_waiter_before_in_flight_io_completes() {
    let _serial = serial();
    // posix performs each request inside push and never waits with one in flight; libaio
    // cannot read a pipe asynchronously (see the libaio test below).
    for (name, config) in configs()
        .into_iter()
        .filter(|(n, _)| n.starts_with("uring"))
    {
        ring_ends_a_wait_with_io_in_flight(name, &config);
    }
}

/// libaio: kernel AIO has no request that stays in flight here (a pipe or socket read blocks
/// inside `io_submit`; O_DIRECT file reads finish in microseconds), so a wait cut short by the
/// doorbell cannot be staged. What is checked: this kernel takes the doorbell's `IOCB_CMD_POLL`
/// (so waits with requests in flight do end at a ring), and rings while a task keeps reads in
/// flight all arrive.
#[test]
fn libaio_watches_the_eventfd_and_loses_no_ring_while_reading() {
    let _serial = serial();
    let Ok(mut engine) = LibaioEngine::new(4, &[]) else {
        eprintln!("SKIP: libaio is not available");
        return;
    };
    // SAFETY: plain syscall; the descriptor is owned below.
    let eventfd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(eventfd >= 0);
    // SAFETY: just created, owned by nothing else.
    let eventfd = Arc::new(unsafe { OwnedFd::from_raw_fd(eventfd) });
    assert!(
        engine.watch_doorbell(Some(eventfd)),
        "this kernel refused IOCB_CMD_POLL on an eventfd"
    );
    drop(engine);

    let file = std::fs::File::open("/proc/self/exe").unwrap();
    let config = IoConfig::new(EngineKind::Libaio);
    let mut runtime = runtime("libaio", &config, &[file.as_raw_fd()]).unwrap();
    let reading = Arc::new(AtomicBool::new(true));
    let io = runtime.io();
    let keep = reading.clone();
    runtime.spawn(async move {
        let mut buf = vec![0u8; 4096];
        while keep.load(Ordering::SeqCst) {
            let (result, back) = io.read(FileId(0), 0, buf).await;
            result.unwrap();
            buf = back;
        }
    });
    rings_with_acks(&mut runtime, 1_000);
    reading.store(false, Ordering::SeqCst);
    runtime.run().unwrap();
}

/// `count` rings from another thread, each acknowledged before the next.
fn rings_with_acks(runtime: &mut Runtime, count: u64) -> RuntimeStats {
    let doorbell = runtime.doorbell().unwrap();
    let queue = Queue::default();
    let (acks, acks_in) = mpsc::channel();
    let ringer = {
        let (doorbell, queue) = (doorbell.clone(), queue.clone());
        std::thread::spawn(move || {
            for i in 0..count {
                queue.lock().unwrap().push_back(i);
                doorbell.ring();
                assert_eq!(acks_in.recv_timeout(HANDOFF_LIMIT), Ok(i), "ring {i} lost");
            }
        })
    };
    let io = runtime.io();
    let seen = runtime
        .block_on(serve(io, doorbell, queue, acks, count))
        .unwrap();
    ringer.join().unwrap();
    assert_eq!(seen, count);
    runtime.stats()
}

/// A thread running its own io_uring runtime rings `target` from inside `block_on`, `count`
/// times, each acknowledged; returns that runtime's stats.
fn ring_from_a_uring_runtime(
    config: IoConfig,
    target: Doorbell,
    queue: Queue,
    acks: mpsc::Receiver<u64>,
    count: u64,
) -> std::thread::JoinHandle<RuntimeStats> {
    std::thread::spawn(move || {
        let mut runtime = Runtime::from_config(&config, &[], None).unwrap();
        runtime
            .block_on(async move {
                for i in 0..count {
                    queue.lock().unwrap().push_back(i);
                    target.ring();
                    assert_eq!(acks.recv_timeout(HANDOFF_LIMIT), Ok(i), "ring {i} lost");
                }
            })
            .unwrap();
        runtime.stats()
    })
}

#[test]
fn a_ring_from_a_thread_running_a_uring_runtime_travels_as_msg_ring() {
    let _serial = serial();
    let uring = configs()
        .into_iter()
        .filter(|(n, _)| n.starts_with("uring"));
    for (name, config) in uring {
        let Some(mut runtime) = runtime(name, &config, &[]) else {
            return;
        };
        let doorbell = runtime.doorbell().unwrap();
        let queue = Queue::default();
        let (acks, acks_in) = mpsc::channel();
        let count = 2_000;
        let sender =
            ring_from_a_uring_runtime(config, doorbell.clone(), queue.clone(), acks_in, count);
        let io = runtime.io();
        let seen = runtime
            .block_on(serve(io, doorbell, queue, acks, count))
            .unwrap();
        let sent = sender.join().unwrap();
        assert_eq!(seen, count);
        let received = runtime.stats();
        assert!(sent.doorbell_messages_posted > 0, "{name}: {sent:?}");
        assert_eq!(sent.doorbell_failed_posts, 0, "{name}: {sent:?}");
        // Every ring arrived (the acks above). A ring that found the doorbell armed by the
        // task itself (not by a sleep) sends a message the runtime reads only at its next
        // wait (with DEFER_TASKRUN: its next enter), so the last few may still be unread.
        assert!(received.doorbell_message_wakes > 0, "{name}: {received:?}");
        assert!(
            received.doorbell_message_wakes <= sent.doorbell_messages_posted,
            "{name}: {sent:?} {received:?}"
        );
        assert_eq!(received.doorbell_eventfd_wakes, 0, "{name}: {received:?}");
    }
}

/// A runtime with nothing in flight: a ring from a plain thread goes to the eventfd even when
/// the ringing thread has run a uring runtime before (only a *running* runtime's ring sends).
#[test]
fn a_ring_from_a_plain_thread_to_a_uring_runtime_is_an_eventfd_write() {
    let _serial = serial();
    let config = IoConfig::new(EngineKind::Uring);
    let Some(mut runtime) = runtime("uring", &config, &[]) else {
        return;
    };
    let stats = rings_with_acks(&mut runtime, 200);
    assert_eq!(stats.doorbell_message_wakes, 0);
    assert!(stats.doorbell_eventfd_wakes > 0);
}

/// Descriptors of this process that are eventfds or rings (the tests of this file run one at
/// a time, see [`serial`], so nothing else opens them meanwhile).
fn doorbell_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| {
            let target = target.to_string_lossy();
            target.contains("eventfd") || target.contains("io_uring")
        })
        .count()
}

/// Drops a runtime whose engine has the doorbell's poll armed (woken by a message, so the
/// poll was still on the ring) and whose doorbell was armed by hand, with a task awaiting it:
/// the drop returns, and once the handles are gone no eventfd or ring is left open.
fn drop_with_the_doorbell_armed(name: &str, config: &IoConfig) -> bool {
    let before = doorbell_fds();
    let Some(mut runtime) = runtime(name, config, &[]) else {
        return true;
    };
    let doorbell = runtime.doorbell().unwrap();
    let queue = Queue::default();
    let (acks, acks_in) = mpsc::channel();
    let uring = IoConfig::new(EngineKind::Uring);
    let sender = ring_from_a_uring_runtime(uring, doorbell.clone(), queue.clone(), acks_in, 1);
    let io = runtime.io();
    runtime
        .block_on(serve(io, doorbell.clone(), queue, acks, 1))
        .unwrap();
    sender.join().unwrap();
    let io = runtime.io();
    runtime.spawn(async move { io.doorbell_rung().await });
    doorbell.arm();
    drop(runtime);
    doorbell.ring();
    drop(doorbell);
    doorbell_fds() <= before
}

#[test]
fn dropping_a_runtime_with_its_doorbell_armed_neither_hangs_nor_leaks() {
    let _serial = serial();
    for (name, config) in configs() {
        // Runtimes are not Send: the drop runs on a thread of its own, watched from here.
        let (dropped, dropped_in) = mpsc::channel();
        std::thread::spawn(move || {
            let closed = drop_with_the_doorbell_armed(name, &config);
            dropped.send(closed).unwrap();
        });
        let closed = dropped_in.recv_timeout(HANDOFF_LIMIT);
        assert_eq!(
            closed,
            Ok(true),
            "{name}: the drop hung (Err) or left descriptors open"
        );
    }
}

#[test]
fn nothing_to_do_and_no_doorbell_waiter_is_still_a_stall() {
    let _serial = serial();
    for (name, config) in configs() {
        let Some(mut runtime) = runtime(name, &config, &[]) else {
            continue;
        };
        let stalled = runtime.block_on(std::future::pending::<()>());
        assert!(matches!(stalled, Err(IoError::Stalled { .. })), "{name}");
        // A doorbell nobody waits for changes nothing.
        let doorbell = runtime.doorbell().unwrap();
        let stalled = runtime.block_on(std::future::pending::<()>());
        assert!(matches!(stalled, Err(IoError::Stalled { .. })), "{name}");
        // A waiter whose doorbell has no handle left can never be woken: a stall too.
        drop(doorbell);
        let io = runtime.io();
        let stalled = runtime.block_on(async move { io.doorbell_rung().await });
        assert!(matches!(stalled, Err(IoError::Stalled { .. })), "{name}");
    }
}

/// A runtime asleep on its doorbell whose last handle is dropped by another thread wakes up
/// and reports the stall instead of sleeping forever.
#[test]
fn dropping_the_last_doorbell_wakes_a_sleeping_runtime_into_a_stall() {
    let _serial = serial();
    for (name, config) in configs() {
        let Some(mut runtime) = runtime(name, &config, &[]) else {
            continue;
        };
        let doorbell = runtime.doorbell().unwrap();
        let dropper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(doorbell);
        });
        let io = runtime.io();
        let stalled = runtime.block_on(async move { io.doorbell_rung().await });
        dropper.join().unwrap();
        assert!(
            matches!(stalled, Err(IoError::Stalled { .. })),
            "{name}: {stalled:?}"
        );
        assert!(runtime.stats().doorbell_sleeps > 0, "{name}");
    }
}
