//! The io_uring engine's contract: counters, depth limit, refusals, every setup mode.

use ringdb_io::{
    open_engine, Batching, Engine, EngineKind, FileId, IoCompletion, IoConfig, IoError, IoRequest,
    OpKind, SetupMode, SqPoll,
};

fn nops(engine: &mut dyn Engine, n: usize) -> Vec<IoCompletion> {
    let mut out = Vec::new();
    for i in 0..n {
        // SAFETY: NOPs carry no buffer.
        unsafe { engine.push(&IoRequest::nop(i as u64)).unwrap() };
    }
    while out.len() < n {
        engine.submit(1).unwrap();
        engine.reap(&mut out);
    }
    out
}

#[test]
fn nops_complete_in_every_setup_mode_with_one_enter_per_batch() {
    let modes = [
        IoConfig {
            setup: SetupMode::Default,
            ..IoConfig::new(EngineKind::Uring)
        },
        IoConfig {
            setup: SetupMode::Coop,
            ..IoConfig::new(EngineKind::Uring)
        },
        IoConfig {
            setup: SetupMode::Defer,
            ..IoConfig::new(EngineKind::Uring)
        },
        IoConfig {
            register_ring_fd: true,
            ..IoConfig::new(EngineKind::Uring)
        },
        IoConfig {
            sqpoll: Some(SqPoll {
                idle_ms: 10,
                cpu: None,
            }),
            ..IoConfig::new(EngineKind::Uring)
        },
    ];
    for cfg in modes {
        let mut e = open_engine(&cfg, &[], None).unwrap();
        let out = nops(e.as_mut(), 64);
        let mut ids: Vec<u64> = out.iter().map(|c| c.user_data).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..64).collect::<Vec<_>>(), "{}", cfg.label());
        assert!(out.iter().all(|c| c.result == 0));
        let s = e.stats();
        assert_eq!(s.completed, 64);
        assert_eq!(e.in_flight(), 0);
        // 64 requests went out in one batch: a handful of enters at most, never one each.
        assert!(s.enters <= 4, "{}: {} enters", cfg.label(), s.enters);
        assert!(s.cqes_per_reap() >= 16.0, "{}: {:?}", cfg.label(), s);
    }
}

#[test]
fn uring_sync_makes_one_enter_per_request() {
    let cfg = IoConfig::new(EngineKind::UringSync);
    let mut e = open_engine(&cfg, &[], None).unwrap();
    assert_eq!(e.depth(), 1);
    for _ in 0..10 {
        // The completion is ready as soon as push returns: push submitted and waited.
        assert_eq!(nops(e.as_mut(), 1).len(), 1);
    }
    assert_eq!(e.stats().enters, 10);
}

#[test]
fn pushing_past_the_depth_is_an_error_not_an_overflow() {
    let cfg = IoConfig {
        queue_depth: 4,
        batching: Batching::Fixed(4),
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut e = open_engine(&cfg, &[], None).unwrap();
    for i in 0..4 {
        // SAFETY: NOPs carry no buffer.
        unsafe { e.push(&IoRequest::nop(i)).unwrap() };
    }
    // SAFETY: as above.
    let err = unsafe { e.push(&IoRequest::nop(99)) }.unwrap_err();
    assert!(
        matches!(
            err,
            IoError::QueueFull {
                in_flight: 4,
                depth: 4,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("reap completions first"), "{err}");
    e.drain().unwrap();
    assert_eq!(e.in_flight(), 0);
}

#[test]
fn fsync_on_an_iopoll_ring_is_refused_clearly() {
    let f = tempfile_in_target("iopoll-fsync");
    let file = std::fs::File::create(&f).unwrap();
    use std::os::fd::AsRawFd;
    let cfg = IoConfig {
        iopoll: true,
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut e = open_engine(&cfg, &[file.as_raw_fd()], None).unwrap();
    // SAFETY: fsync carries no buffer.
    let err = unsafe { e.push(&IoRequest::sync(OpKind::Fdatasync, FileId(0), 1)) }.unwrap_err();
    assert!(
        matches!(
            err,
            IoError::Unsupported {
                switch: ringdb_io::Switch::Iopoll,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("second ring"), "{err}");
    drop(e);
    let _ = std::fs::remove_file(&f);
}

#[test]
fn fixed_buffers_without_a_pool_are_refused() {
    let cfg = IoConfig {
        fixed_buffers: true,
        ..IoConfig::new(EngineKind::Uring)
    };
    let err = open_engine(&cfg, &[], None).err().expect("refused");
    assert!(err.to_string().contains("buffer pool"), "{err}");
}

#[test]
fn bad_sqpoll_cpu_is_a_setup_refusal() {
    let cfg = IoConfig {
        sqpoll: Some(SqPoll {
            idle_ms: 10,
            cpu: Some(4000),
        }),
        ..IoConfig::new(EngineKind::Uring)
    };
    let err = open_engine(&cfg, &[], None).err().expect("refused");
    assert!(err.to_string().contains("SQPOLL"), "{err}");
}

fn tempfile_in_target(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}.dat", std::process::id()))
}
