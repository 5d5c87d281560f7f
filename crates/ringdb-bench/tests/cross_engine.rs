//! Data written by every engine and switch combination reads back bit-exact through every
//! other: each writer lays down a seeded pattern, each reader checks every byte of it.

use ringdb_bench::rawio::{self, IoSpec, RwMode};
use ringdb_bench::BenchError;
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode, SqPoll};
use std::path::PathBuf;

const BLOCKS: u64 = 64;
const BS: u64 = 4096;

fn configs() -> Vec<IoConfig> {
    let base = |engine| IoConfig {
        queue_depth: 8,
        ..IoConfig::new(engine)
    };
    let uring = || base(EngineKind::Uring);
    vec![
        base(EngineKind::Posix),
        base(EngineKind::Libaio),
        base(EngineKind::UringSync),
        uring(),
        IoConfig {
            setup: SetupMode::Coop,
            ..uring()
        },
        IoConfig {
            setup: SetupMode::Defer,
            ..uring()
        },
        IoConfig {
            sqpoll: Some(SqPoll {
                idle_ms: 10,
                cpu: None,
            }),
            ..uring()
        },
        IoConfig {
            register_ring_fd: true,
            ..uring()
        },
        IoConfig {
            register_files: true,
            ..uring()
        },
        IoConfig {
            fixed_buffers: true,
            ..uring()
        },
        IoConfig {
            force_async: true,
            ..uring()
        },
        IoConfig {
            batching: Batching::Each,
            ..uring()
        },
        IoConfig {
            batching: Batching::Fixed(3),
            ..uring()
        },
        IoConfig {
            setup: SetupMode::Defer,
            register_ring_fd: true,
            register_files: true,
            fixed_buffers: true,
            ..uring()
        },
        IoConfig {
            fixed_buffers: true,
            register_files: true,
            ..base(EngineKind::UringSync)
        },
    ]
}

struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> Self {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let p = dir.join(format!("{name}-{}.dat", std::process::id()));
        let _ = std::fs::remove_file(&p);
        TempFile(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn spec(path: &std::path::Path, io: &IoConfig, rw: RwMode, seed: u64, direct: bool) -> IoSpec {
    IoSpec {
        rw,
        bs: BS,
        size: BLOCKS * BS,
        runtime: None,
        ios: Some(BLOCKS),
        direct,
        verify: Some(seed),
        ..IoSpec::new(path, io.clone())
    }
}

#[test]
fn every_engine_reads_back_what_every_other_wrote() {
    let f = TempFile::new("cross-engine");
    let cfgs = configs();
    for (wi, w) in cfgs.iter().enumerate() {
        let seed = 1000 + wi as u64;
        let wr = rawio::run(&spec(&f.0, w, RwMode::Write, seed, true))
            .unwrap_or_else(|e| panic!("write with {}: {e}", w.label()));
        assert_eq!(wr.ios, BLOCKS, "writer {}", w.label());
        for r in &cfgs {
            let rd = rawio::run(&spec(&f.0, r, RwMode::Read, seed, true))
                .unwrap_or_else(|e| panic!("written by {}, read by {}: {e}", w.label(), r.label()));
            assert_eq!(
                rd.verified_blocks,
                Some(BLOCKS),
                "written by {}, read by {}",
                w.label(),
                r.label()
            );
        }
    }
}

#[test]
fn buffered_and_direct_paths_agree() {
    let f = TempFile::new("buffered-direct");
    let uring = IoConfig {
        queue_depth: 8,
        ..IoConfig::new(EngineKind::Uring)
    };
    let posix = IoConfig::new(EngineKind::Posix);
    rawio::run(&spec(&f.0, &uring, RwMode::Write, 7, false)).unwrap();
    let r = rawio::run(&spec(&f.0, &posix, RwMode::Read, 7, true)).unwrap();
    assert_eq!(r.verified_blocks, Some(BLOCKS));
    rawio::run(&spec(&f.0, &posix, RwMode::Write, 8, true)).unwrap();
    let r = rawio::run(&spec(&f.0, &uring, RwMode::Read, 8, false)).unwrap();
    assert_eq!(r.verified_blocks, Some(BLOCKS));
}

#[test]
fn verification_catches_foreign_data() {
    let f = TempFile::new("verify-neg");
    let uring = IoConfig {
        queue_depth: 8,
        ..IoConfig::new(EngineKind::Uring)
    };
    rawio::run(&spec(&f.0, &uring, RwMode::Write, 1, true)).unwrap();
    match rawio::run(&spec(&f.0, &uring, RwMode::Read, 2, true)) {
        Err(BenchError::Verify { .. }) => {}
        other => panic!("expected a verification failure, got {other:?}"),
    }
}
