//! `Io::wait_readable`: a task waits, on its runtime's own ring, for a descriptor to become
//! readable (how a runtime serves a second ring from its thread). On io_uring engines a wait
//! for an empty pipe ends when another thread writes, and one for a readable pipe at once; the
//! engines that cannot wait for descriptors (posix, libaio, uring-sync) refuse it with a typed
//! error and say so in `supports_poll`.
//!
//! Every wait is bounded: a watchdog writes the byte after `WATCHDOG`, so a lost completion
//! fails the timing assertion instead of hanging.

#[path = "support/pipe.rs"]
mod pipe_support;
use pipe_support::{pipe, write_byte};
use ringdb_io::{EngineKind, IoConfig, IoError, Runtime, SetupMode};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WATCHDOG: Duration = Duration::from_secs(10);
const WRITE_AFTER: Duration = Duration::from_millis(50);

/// A runtime for `config`, or `None` (said on stderr) where the engine cannot run here.
fn runtime(name: &str, config: &IoConfig) -> Option<Runtime> {
    match Runtime::from_config(config, &[], None) {
        Ok(runtime) => Some(runtime),
        Err(error @ (IoError::UringDisabled { .. } | IoError::Unsupported { .. })) => {
            eprintln!("SKIP {name}: {error}");
            None
        }
        Err(error) => panic!("{name}: {error}"),
    }
}

#[test]
fn a_wait_for_a_pipe_ends_when_another_thread_writes_on_uring_rings() {
    for setup in [SetupMode::Default, SetupMode::Coop, SetupMode::Defer] {
        let config = IoConfig {
            setup,
            ..IoConfig::new(EngineKind::Uring)
        };
        let Some(mut runtime) = runtime(setup.name(), &config) else {
            continue;
        };
        let io = runtime.io();
        assert!(io.supports_poll(), "{}", setup.name());
        let (read_end, write_end) = pipe();
        let write_end = Arc::new(write_end);
        let writer = write_end.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(WRITE_AFTER);
            write_byte(&writer);
        });
        let watchdog_end = write_end.clone();
        let watchdog = std::thread::spawn(move || {
            std::thread::sleep(WATCHDOG);
            write_byte(&watchdog_end);
        });
        let started = Instant::now();
        let fd = read_end.as_raw_fd();
        runtime.block_on(io.wait_readable(fd)).unwrap().unwrap();
        let waited = started.elapsed();
        thread.join().unwrap();
        assert!(
            waited >= WRITE_AFTER / 2 && waited < WATCHDOG,
            "{}: waited {waited:?}",
            setup.name()
        );
        // Readable already (the byte is still there): the wait ends at once.
        runtime.block_on(io.wait_readable(fd)).unwrap().unwrap();
        drop(watchdog);
    }
}

#[test]
fn engines_that_cannot_wait_for_descriptors_refuse_it() {
    for kind in [EngineKind::Posix, EngineKind::Libaio, EngineKind::UringSync] {
        let Some(mut runtime) = runtime(kind.name(), &IoConfig::new(kind)) else {
            continue;
        };
        let io = runtime.io();
        assert!(!io.supports_poll(), "{}", kind.name());
        let (read_end, _write_end) = pipe();
        let refused = runtime
            .block_on(io.wait_readable(read_end.as_raw_fd()))
            .unwrap();
        match refused {
            Err(IoError::Unsupported { reason, .. }) => {
                assert!(reason.contains("needs the uring engine"), "{reason}")
            }
            other => panic!("{}: {other:?}", kind.name()),
        }
    }
}
