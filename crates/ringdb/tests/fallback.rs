//! A database with the default options runs where io_uring does not: under a seccomp filter
//! that fails `io_uring_setup` (EPERM as in Docker, or ENOSYS), under
//! `kernel.io_uring_disabled`, and with too little locked memory for registered buffers; and
//! when io_uring is taken away mid-run, operations fail with typed errors and nothing
//! acknowledged is lost.
//!
//! Scenarios that change the process for good run in a child: this binary re-executed,
//! filtered to one test (`ringdb-io/tests/support/seccomp.rs`).

#[path = "../../ringdb-io/tests/support/seccomp.rs"]
mod seccomp;

use ringdb::{LocalDb, OpenError, Options};
use ringdb_io::{EngineKind, FallbackReason, IoConfig, IoError, Switch};
use seccomp::{child_scenario, run_child, CHILD_DONE};
use std::path::PathBuf;

/// Records each scenario writes and reads back.
const RECORDS: u64 = 1000;

/// A fresh directory in the target's temporary directory (on the root filesystem).
fn dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fallback-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The default options on a small pool and log (so that pages are evicted, written and read
/// back).
fn small(fresh: bool) -> Options {
    Options {
        pool_pages: 16,
        wal_bytes: 1 << 20,
        fresh,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key-{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat((i % 64) as usize)).into_bytes()
}

/// Checks that `db` holds records `0..count` as written.
fn check_records(db: &mut LocalDb, count: u64) {
    for i in 0..count {
        let got = db.get(&key(i)).expect("read");
        assert_eq!(got.as_deref(), Some(&value(i)[..]), "record {i}");
    }
}

/// Opens `options` at `path`, writes, reads back, closes, reopens and reads again; returns
/// what the database said runs.
fn round_trip(path: &std::path::Path, options: Options) -> ringdb_io::EffectiveIo {
    let mut db = LocalDb::open(
        path,
        Options {
            fresh: true,
            ..options.clone()
        },
    )
    .expect("open");
    for i in 0..RECORDS {
        db.insert(&key(i), &value(i)).expect("insert");
    }
    check_records(&mut db, RECORDS);
    let effective = db.stats().io;
    db.close().expect("close");
    let mut db = LocalDb::open(
        path,
        Options {
            fresh: false,
            ..options
        },
    )
    .expect("reopen");
    check_records(&mut db, RECORDS);
    assert_eq!(db.stats().io, effective, "the same resolution on reopening");
    db.close().expect("close");
    effective
}

/// The sharded database with its defaults (two shards, two writer threads) at `path`:
/// writes, reads back, reopens; returns what shard 0 runs (every shard resolves alike).
fn sharded_round_trip(path: &std::path::Path) -> ringdb_io::EffectiveIo {
    let db = ringdb::Db::builder(path)
        .options(Options {
            pool_pages: 64,
            ..small(true)
        })
        .shards(2)
        .open()
        .expect("open the sharded database");
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in (t..RECORDS).step_by(2) {
                    db.insert(&key(i), &value(i)).expect("insert");
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().expect("writer"));
    let stats = db.stats().expect("stats");
    let effective = stats.shards[0].io;
    assert!(stats.shards.iter().all(|s| s.io == effective), "{stats:?}");
    db.close().expect("close");
    let db = ringdb::Db::builder(path)
        .options(Options {
            pool_pages: 64,
            ..small(false)
        })
        .open()
        .expect("reopen");
    for i in 0..RECORDS {
        assert_eq!(
            db.get(&key(i)).expect("get").as_deref(),
            Some(&value(i)[..])
        );
    }
    db.close().expect("close");
    effective
}

/// Asserts that `effective` is `expected` instead of io_uring, for `reason`.
fn assert_fell_back(
    effective: &ringdb_io::EffectiveIo,
    expected: EngineKind,
    reason: FallbackReason,
) {
    assert_eq!(effective.requested, EngineKind::Auto);
    assert_eq!(effective.engine, expected, "{effective:?}");
    let fallbacks: Vec<_> = effective.fallbacks.iter().copied().collect();
    assert_eq!(fallbacks.len(), 1, "{fallbacks:?}");
    assert_eq!(fallbacks[0].refused, Switch::IoUring);
    assert_eq!(fallbacks[0].reason, reason);
    assert_eq!(fallbacks[0].instead, Some(expected));
    let json = serde_json::to_string(effective).expect("serializable");
    let engine = format!("\"engine\":\"{}\"", expected.name());
    assert!(
        json.contains(&engine) && json.contains("\"refused\":\"IoUring\""),
        "{json}"
    );
}

/// The child's body: io_uring_setup fails with `errno`; the default options run (libaio over
/// the O_DIRECT data file, posix without O_DIRECT); the explicit `uring` engine is refused.
fn blocked_setup(errno: i32) {
    seccomp::block_syscalls(&[seccomp::IO_URING_SETUP], errno);
    let reason = match errno {
        libc::ENOSYS => FallbackReason::UringAbsent,
        errno => FallbackReason::UringBlocked { errno },
    };
    let direct = round_trip(&dir("direct"), small(true));
    assert_fell_back(&direct, EngineKind::Libaio, reason);
    let buffered = round_trip(
        &dir("buffered"),
        Options {
            direct: false,
            ..small(true)
        },
    );
    assert_fell_back(&buffered, EngineKind::Posix, reason);
    let sharded = sharded_round_trip(&dir("sharded"));
    assert_fell_back(&sharded, EngineKind::Libaio, reason);
    let explicit = Options {
        io: IoConfig::new(EngineKind::Uring),
        ..small(true)
    };
    let error = LocalDb::open(&dir("explicit"), explicit)
        .err()
        .expect("explicit uring is refused");
    match (&error, errno) {
        (
            OpenError::Io(IoError::Unsupported {
                switch: Switch::IoUring,
                ..
            }),
            libc::ENOSYS,
        ) => {}
        (OpenError::Io(IoError::SetupRefused { source, .. }), _)
            if source.raw_os_error() == Some(errno) => {}
        _ => panic!("explicit uring under errno {errno}: {error:?}"),
    }
}

#[test]
fn default_options_run_where_seccomp_fails_io_uring_setup_with_eperm() {
    match child_scenario().as_deref() {
        Some("db-eperm") => {
            blocked_setup(libc::EPERM);
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            let test = "default_options_run_where_seccomp_fails_io_uring_setup_with_eperm";
            run_child(test, "db-eperm", &[]);
        }
    }
}

#[test]
fn default_options_run_where_seccomp_fails_io_uring_setup_with_enosys() {
    match child_scenario().as_deref() {
        Some("db-enosys") => {
            blocked_setup(libc::ENOSYS);
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            let test = "default_options_run_where_seccomp_fails_io_uring_setup_with_enosys";
            run_child(test, "db-enosys", &[]);
        }
    }
}

/// Run by `scripts/io-uring-disabled-check`, which sets `kernel.io_uring_disabled = 2` around
/// this one test (the sysctl is machine-wide: flipping it from a test would break the tests
/// running beside it).
#[test]
fn default_options_run_where_io_uring_is_disabled_by_sysctl() {
    if child_scenario().is_some() {
        return;
    }
    if std::env::var("RINGDB_TEST_IO_URING_DISABLED").as_deref() != Ok("1") {
        eprintln!("SKIP: run scripts/io-uring-disabled-check (sets kernel.io_uring_disabled = 2)");
        return;
    }
    let value = ringdb_io::limits::io_uring_disabled().expect("the sysctl exists");
    assert_eq!(value, 2, "the caller set kernel.io_uring_disabled = 2");
    let reason = FallbackReason::UringDisabled { sysctl_value: 2 };
    let direct = round_trip(&dir("disabled-direct"), small(true));
    assert_fell_back(&direct, EngineKind::Libaio, reason);
    let buffered = round_trip(
        &dir("disabled-buffered"),
        Options {
            direct: false,
            ..small(true)
        },
    );
    assert_fell_back(&buffered, EngineKind::Posix, reason);
    let sharded = sharded_round_trip(&dir("disabled-sharded"));
    assert_fell_back(&sharded, EngineKind::Libaio, reason);
    let explicit = Options {
        io: IoConfig::new(EngineKind::Uring),
        ..small(true)
    };
    let error = LocalDb::open(&dir("disabled-explicit"), explicit)
        .err()
        .expect("refused");
    assert!(
        matches!(error, OpenError::Io(IoError::UringDisabled { value: 2 })),
        "{error:?}"
    );
    println!(
        "io_uring disabled: auto ran {} and {}",
        direct.label(),
        buffered.label()
    );
}

/// The child's body: 64 KiB of locked memory, far below the pool. `auto` with registered
/// buffers asked for keeps io_uring without them; explicit `uring` with them is refused.
fn small_memlock() {
    seccomp::limit_locked_memory(64 * 1024);
    let with_fixed_buffers = |engine| Options {
        io: IoConfig {
            fixed_buffers: true,
            ..IoConfig::new(engine)
        },
        ..small(true)
    };
    let effective = round_trip(&dir("memlock"), with_fixed_buffers(EngineKind::Auto));
    assert_eq!(effective.engine, EngineKind::Uring, "{effective:?}");
    assert!(!effective.switches.unwrap().fixed_buffers);
    let fallbacks: Vec<_> = effective.fallbacks.iter().copied().collect();
    assert_eq!(fallbacks.len(), 1, "{fallbacks:?}");
    assert_eq!(fallbacks[0].refused, Switch::FixedBuffers);
    assert!(matches!(
        fallbacks[0].reason,
        FallbackReason::LockedMemory { .. }
    ));
    let error = LocalDb::open(
        &dir("memlock-explicit"),
        with_fixed_buffers(EngineKind::Uring),
    )
    .err()
    .expect("explicit fixed buffers are refused");
    assert!(
        matches!(error, OpenError::Io(IoError::Memlock { .. })),
        "{error:?}"
    );
}

#[test]
fn small_memlock_keeps_io_uring_without_registered_buffers() {
    match child_scenario().as_deref() {
        Some("db-memlock") => {
            small_memlock();
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            let test = "small_memlock_keeps_io_uring_without_registered_buffers";
            run_child(test, "db-memlock", &[]);
        }
    }
}

/// The child's body: a database on io_uring commits `RECORDS` records (each acknowledged),
/// then io_uring is blocked (enter, setup, register fail with EPERM). The next operations that
/// need I/O fail with typed errors; nothing panics; `auto` reopens the database on libaio and
/// finds every acknowledged record.
fn blocked_mid_run(path: &std::path::Path) {
    let mut db = LocalDb::open(path, small(true)).expect("open");
    assert_eq!(
        db.stats().io.engine,
        EngineKind::Uring,
        "io_uring works before the filter"
    );
    for i in 0..RECORDS {
        db.insert(&key(i), &value(i)).expect("acknowledged insert");
    }
    seccomp::block_syscalls(
        &[
            seccomp::IO_URING_SETUP,
            seccomp::IO_URING_ENTER,
            seccomp::IO_URING_REGISTER,
        ],
        libc::EPERM,
    );
    let mut failures = 0;
    for i in RECORDS..RECORDS + 50 {
        match db.insert(&key(i), &value(i)) {
            Ok(_) => {}
            Err(error) => {
                println!("insert {i} after the filter: {error}");
                failures += 1;
            }
        }
    }
    assert!(
        failures > 0,
        "a commit needs the log written, which needs io_uring_enter"
    );
    let flushed = db.flush();
    println!("flush after the filter: {flushed:?}");
    assert!(flushed.is_err(), "a flush needs io_uring_enter");
    drop(db);
    let explicit = Options {
        io: IoConfig::new(EngineKind::Uring),
        ..small(false)
    };
    let error = LocalDb::open(path, explicit)
        .err()
        .expect("no ring can be built now");
    assert!(
        matches!(error, OpenError::Io(IoError::SetupRefused { .. })),
        "{error:?}"
    );
    // `auto` reopens it without io_uring, and recovery finds every acknowledged record.
    let mut db = LocalDb::open(path, small(false)).expect("auto reopens under the filter");
    assert_eq!(db.stats().io.engine, EngineKind::Libaio);
    check_records(&mut db, RECORDS);
    db.close().expect("close under the filter");
}

#[test]
fn io_uring_blocked_mid_run_fails_typed_and_loses_nothing_acknowledged() {
    let test = "io_uring_blocked_mid_run_fails_typed_and_loses_nothing_acknowledged";
    let path_env = "RINGDB_FALLBACK_DB";
    match child_scenario().as_deref() {
        Some("db-mid-run") => {
            let path = PathBuf::from(std::env::var(path_env).expect("the database path"));
            blocked_mid_run(&path);
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            let path = dir("mid-run");
            let output = run_child(test, "db-mid-run", &[(path_env, path.to_str().unwrap())]);
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(!stdout.contains("panicked"), "{stdout}");
            // Reopened here, without the filter: recovery replays the log.
            let mut db = LocalDb::open(&path, small(false)).expect("reopen after the child");
            assert_eq!(db.stats().io.engine, EngineKind::Uring);
            check_records(&mut db, RECORDS);
            assert!(db.verify().expect("verify").is_ok());
            db.close().expect("close");
        }
    }
}
