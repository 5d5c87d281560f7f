//! The `auto` engine: io_uring where it works, a fallback where it is blocked. Each scenario
//! that changes the process for good (a seccomp filter, a memlock limit) runs in a child: this
//! binary re-executed, filtered to one test (see `support/seccomp.rs`).
//!
//! Under the filter, `auto` must run (libaio over `O_DIRECT` files, posix over buffered ones),
//! do real I/O, say what it did without (one typed [`Fallback`] and exactly one warning), while
//! the explicit `uring` engine is still the typed error it always was.

#[path = "support/seccomp.rs"]
mod seccomp;

use ringdb_io::{
    AlignedBuf, EffectiveIo, EngineKind, FallbackReason, FileId, FixedBufferPool, IoConfig,
    IoError, Runtime, SetupMode, Switch, Target, TargetOptions,
};
use seccomp::{child_scenario, run_child, CHILD_DONE};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A file in the target's temporary directory (on the root filesystem, which takes
/// `O_DIRECT`), opened with or without it.
fn scratch_file(name: &str, direct: bool) -> (Target, PathBuf) {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("auto-{name}-{}.dat", std::process::id()));
    let options = TargetOptions {
        direct,
        write: true,
        create: true,
    };
    let target = Target::open(&path, options).expect("open the scratch file");
    (target, path)
}

/// Writes a block through `runtime` and reads it back.
fn write_and_read_back(runtime: &mut Runtime) {
    let io = runtime.io();
    let block = runtime
        .block_on(async move {
            let mut block = AlignedBuf::new(4096);
            block.as_mut_slice().fill(0x5a);
            let (written, _) = io.write(FileId(0), 8192, block).await;
            assert_eq!(written?, 4096);
            let (read, block) = io.read(FileId(0), 8192, AlignedBuf::new(4096)).await;
            assert_eq!(read?, 4096);
            Ok::<_, IoError>(block)
        })
        .expect("the runtime runs")
        .expect("the I/O succeeds");
    assert!(block.as_slice().iter().all(|&byte| byte == 0x5a));
}

/// A `tracing` subscriber that counts warnings and keeps their messages.
#[derive(Clone, Default)]
struct Warnings {
    count: Arc<AtomicUsize>,
    messages: Arc<Mutex<Vec<String>>>,
}

struct MessageVisitor<'a>(&'a mut String);

impl tracing::field::Visit for MessageVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut message = String::new();
            event.record(&mut MessageVisitor(&mut message));
            self.count.fetch_add(1, Ordering::SeqCst);
            self.messages.lock().unwrap().push(message);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Opens a runtime for `config` over `target`, counting the warnings it logs.
fn open_counting(
    config: &IoConfig,
    target: &Target,
    pool: Option<FixedBufferPool>,
) -> (Result<Runtime, IoError>, Vec<String>) {
    let warnings = Warnings::default();
    let runtime = tracing::subscriber::with_default(warnings.clone(), || {
        Runtime::from_config(config, &[target.fd()], pool)
    });
    let messages = warnings.messages.lock().unwrap().clone();
    assert_eq!(warnings.count.load(Ordering::SeqCst), messages.len());
    (runtime, messages)
}

/// `auto` over `target` under a blocked io_uring: runs `expected`, one fallback, one warning.
fn auto_falls_back_to(config: &IoConfig, target: &Target, expected: EngineKind) -> EffectiveIo {
    let pool = FixedBufferPool::new(8, 4096).unwrap();
    let (runtime, warnings) = open_counting(config, target, Some(pool));
    let mut runtime = runtime.expect("auto opens where io_uring is blocked");
    let effective = runtime.effective_io();
    assert_eq!(effective.requested, EngineKind::Auto);
    assert_eq!(effective.engine, expected, "{effective:?}");
    let switches = effective
        .switches
        .expect("the runtime opened the engine itself");
    assert!(!switches.fixed_buffers && switches.setup == SetupMode::Default);
    assert_eq!(effective.fallbacks.len(), 1, "{effective:?}");
    let fallback = effective.fallbacks.iter().next().unwrap();
    assert_eq!(fallback.refused, Switch::IoUring);
    assert_eq!(fallback.instead, Some(expected));
    assert_eq!(warnings.len(), 1, "exactly one warning: {warnings:?}");
    assert!(warnings[0].contains(expected.name()), "{warnings:?}");
    write_and_read_back(&mut runtime);
    effective
}

/// The child's body: io_uring blocked with `errno`; `auto` falls back, `uring` is refused.
fn blocked_io_uring(errno: i32) {
    seccomp::block_syscalls(&[seccomp::IO_URING_SETUP], errno);
    let (direct, direct_path) = scratch_file("direct", true);
    let (buffered, buffered_path) = scratch_file("buffered", false);
    assert!(direct.direct);
    let auto = IoConfig::new(EngineKind::Auto);
    // With the paper's switches asked for: still exactly one fallback (io_uring itself).
    let auto_with_switches = IoConfig {
        setup: SetupMode::Defer,
        fixed_buffers: true,
        ..IoConfig::new(EngineKind::Auto)
    };
    let mut reasons = Vec::new();
    for config in [&auto, &auto_with_switches] {
        let effective = auto_falls_back_to(config, &direct, EngineKind::Libaio);
        reasons.push(effective.fallbacks.iter().next().unwrap().reason);
        auto_falls_back_to(config, &buffered, EngineKind::Posix);
    }
    let expected = match errno {
        libc::ENOSYS => FallbackReason::UringAbsent,
        errno => FallbackReason::UringBlocked { errno },
    };
    assert_eq!(reasons, [expected, expected]);
    let (explicit, warnings) = open_counting(&IoConfig::new(EngineKind::Uring), &direct, None);
    let error = explicit.err().expect("explicit uring is refused");
    match errno {
        libc::ENOSYS => assert!(
            matches!(
                error,
                IoError::Unsupported {
                    switch: Switch::IoUring,
                    ..
                }
            ),
            "{error}"
        ),
        errno => assert!(
            matches!(&error, IoError::SetupRefused { source, .. } if source.raw_os_error() == Some(errno)),
            "{error}"
        ),
    }
    assert!(
        warnings.is_empty(),
        "an explicit engine never warns: {warnings:?}"
    );
    let _ = std::fs::remove_file(direct_path);
    let _ = std::fs::remove_file(buffered_path);
}

#[test]
fn seccomp_eperm_on_io_uring_setup_falls_back() {
    match child_scenario().as_deref() {
        Some("eperm") => {
            blocked_io_uring(libc::EPERM);
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            run_child("seccomp_eperm_on_io_uring_setup_falls_back", "eperm", &[]);
        }
    }
}

#[test]
fn seccomp_enosys_on_io_uring_setup_falls_back() {
    match child_scenario().as_deref() {
        Some("enosys") => {
            blocked_io_uring(libc::ENOSYS);
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            run_child("seccomp_enosys_on_io_uring_setup_falls_back", "enosys", &[]);
        }
    }
}

/// Locked memory far below the pool: `auto` keeps io_uring without registered buffers (and its
/// I/O works with the unregistered pool); explicit fixed buffers are refused with the limit.
fn small_memlock() {
    seccomp::limit_locked_memory(64 * 1024);
    let (direct, path) = scratch_file("memlock", true);
    let pool = || FixedBufferPool::new(256, 4096).unwrap();
    let auto = IoConfig {
        fixed_buffers: true,
        ..IoConfig::new(EngineKind::Auto)
    };
    let (runtime, warnings) = open_counting(&auto, &direct, Some(pool()));
    let mut runtime = runtime.expect("auto opens without registered buffers");
    let effective = runtime.effective_io();
    assert_eq!(effective.engine, EngineKind::Uring, "{effective:?}");
    assert!(!effective.switches.unwrap().fixed_buffers);
    let fallbacks: Vec<_> = effective.fallbacks.iter().copied().collect();
    assert_eq!(fallbacks.len(), 1, "{fallbacks:?}");
    assert_eq!(fallbacks[0].refused, Switch::FixedBuffers);
    assert_eq!(fallbacks[0].instead, None);
    assert!(matches!(
        fallbacks[0].reason,
        FallbackReason::LockedMemory { bytes, limit_bytes: Some(65536) } if bytes == 256 * 4096
    ));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    write_and_read_back(&mut runtime);
    let io = runtime.io();
    let read_back = runtime
        .block_on(async move {
            let mut page = io.lease().await?;
            page.as_mut_slice().fill(0xc3);
            let (written, _page) = io.write(FileId(0), 0, page).await;
            assert_eq!(written?, 4096);
            let (read, page) = io.read(FileId(0), 0, io.lease().await?).await;
            assert_eq!(read?, 4096);
            Ok::<_, IoError>(page.as_slice().iter().all(|&byte| byte == 0xc3))
        })
        .unwrap()
        .expect("pool buffers move through the ring unregistered");
    assert!(read_back);
    drop(runtime);
    let explicit = IoConfig {
        fixed_buffers: true,
        ..IoConfig::new(EngineKind::Uring)
    };
    let error = Runtime::from_config(&explicit, &[direct.fd()], Some(pool()))
        .err()
        .expect("explicit fixed buffers are refused");
    assert!(
        matches!(error, IoError::Memlock { bytes, .. } if bytes == 256 * 4096),
        "{error}"
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn small_memlock_drops_registered_buffers_only() {
    match child_scenario().as_deref() {
        Some("memlock") => {
            small_memlock();
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            run_child(
                "small_memlock_drops_registered_buffers_only",
                "memlock",
                &[],
            );
        }
    }
}

#[test]
fn auto_where_io_uring_works_is_uring_with_every_switch() {
    if child_scenario().is_some() {
        return;
    }
    let (direct, path) = scratch_file("works", true);
    let config = IoConfig {
        setup: SetupMode::Defer,
        register_files: true,
        ..IoConfig::new(EngineKind::Auto)
    };
    let (runtime, warnings) = open_counting(&config, &direct, None);
    let mut runtime = runtime.expect("auto opens");
    let effective = runtime.effective_io();
    assert_eq!(effective.engine, EngineKind::Uring, "{effective:?}");
    let switches = effective.switches.unwrap();
    assert!(switches.register_files && switches.setup == SetupMode::Defer);
    assert!(effective.fallbacks.is_empty() && warnings.is_empty());
    assert_eq!(effective.label(), "uring+defer+regfiles (from auto)");
    write_and_read_back(&mut runtime);
    drop(runtime);
    let _ = std::fs::remove_file(path);
}

#[test]
fn auto_drops_iopoll_where_there_are_no_poll_queues() {
    if child_scenario().is_some() {
        return;
    }
    let (buffered, path) = scratch_file("iopoll", false);
    let config = IoConfig {
        iopoll: true,
        ..IoConfig::new(EngineKind::Auto)
    };
    let (runtime, warnings) = open_counting(&config, &buffered, None);
    let mut runtime = runtime.expect("auto opens without IOPOLL");
    let effective = runtime.effective_io();
    assert_eq!(effective.engine, EngineKind::Uring);
    assert!(!effective.switches.unwrap().iopoll);
    let fallback = *effective.fallbacks.iter().next().unwrap();
    assert_eq!(fallback.refused, Switch::Iopoll);
    assert_eq!(fallback.reason, FallbackReason::NotDirect { file: 0 });
    assert_eq!(warnings.len(), 1);
    write_and_read_back(&mut runtime);
    drop(runtime);
    let _ = std::fs::remove_file(path);
}
