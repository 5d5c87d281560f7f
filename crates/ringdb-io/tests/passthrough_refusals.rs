//! `uring-passthrough` refusals that can be checked without NVMe: every wrong target and
//! missing capability is a typed one-line error, raised before any I/O is queued. The
//! positive path is verified in the NVMe VM (`scripts/nvme-vm`).

use ringdb_io::{check_iopoll, Target, TargetOptions};
use ringdb_io::{open_engine, EngineKind, IoConfig, IoError};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

fn passthrough() -> IoConfig {
    IoConfig {
        queue_depth: 8,
        ..IoConfig::new(EngineKind::UringPassthrough)
    }
}

/// The error of an engine that must not open (`Box<dyn Engine>` has no `Debug`).
fn refused(r: ringdb_io::Result<Box<dyn ringdb_io::Engine>>) -> IoError {
    match r {
        Ok(_) => panic!("the engine opened; it should have been refused"),
        Err(e) => e,
    }
}

fn assert_names_ng(e: &IoError) {
    let msg = e.to_string();
    assert!(matches!(e, IoError::NotNvmeNamespace { .. }), "{msg}");
    assert!(msg.contains("(/dev/ngXnY)"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
}

#[test]
fn a_regular_file_is_refused() {
    let path = std::env::temp_dir().join(format!("ringdb-pt-{}", std::process::id()));
    let f = std::fs::File::create(&path).unwrap();
    let e = refused(open_engine(&passthrough(), &[f.as_raw_fd()], None));
    assert_names_ng(&e);
    assert!(e.to_string().contains("not a device"), "{e}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_char_device_that_is_not_nvme_is_refused() {
    let f = std::fs::File::open("/dev/null").unwrap();
    let e = refused(open_engine(&passthrough(), &[f.as_raw_fd()], None));
    assert_names_ng(&e);
    assert!(e.to_string().contains("not an NVMe namespace"), "{e}");
    // The target layer refuses it the same way.
    let e = Target::open(
        Path::new("/dev/null"),
        TargetOptions {
            direct: true,
            write: false,
            create: false,
        },
    )
    .expect_err("refused");
    assert_names_ng(&e);
}

#[test]
fn a_block_device_is_refused_with_the_char_device_hint() {
    let Some(node) = ringdb_io::sysfs::BlockDevice::for_path(Path::new("/"))
        .ok()
        .flatten()
        .map(|d| Path::new("/dev").join(d.name()))
        .filter(|p| p.metadata().is_ok_and(|m| m.file_type().is_block_device()))
    else {
        return; // no block device visible here
    };
    let Ok(f) = std::fs::File::open(&node) else {
        return;
    };
    let e = refused(open_engine(&passthrough(), &[f.as_raw_fd()], None));
    assert_names_ng(&e);
    assert!(e.to_string().contains("is a block device"), "{e}");
}

#[test]
fn iopoll_without_poll_queues_is_refused() {
    for p in ["/dev/null", "/proc/self/status"] {
        let e = check_iopoll(Path::new(p)).expect_err("refused");
        let msg = e.to_string();
        assert!(
            matches!(
                e,
                IoError::Unsupported {
                    switch: ringdb_io::Switch::Iopoll,
                    ..
                }
            ),
            "{msg}"
        );
        assert!(msg.contains("poll queues") && !msg.contains('\n'), "{msg}");
    }
}

#[test]
fn the_sqe128_ring_builds_or_is_refused_with_a_typed_error() {
    // No files: only the SQE128/CQE32 ring is built. Linux 5.19+ builds it; an older kernel
    // (or a disabled io_uring) must refuse with a typed error, never a panic.
    match open_engine(&passthrough(), &[], None) {
        Ok(e) => assert_eq!(e.kind(), EngineKind::UringPassthrough),
        Err(
            e @ (IoError::SetupRefused { .. }
            | IoError::UringDisabled { .. }
            | IoError::Unsupported { .. }),
        ) => assert!(!e.to_string().contains('\n')),
        Err(e) => panic!("untyped refusal: {e}"),
    }
}

/// The ring configurations the positive path runs on: default, SQPOLL, and IOPOLL when the
/// namespace's device has poll queues.
fn passthrough_configs(dev: &str) -> Vec<(&'static str, IoConfig)> {
    let mut configs = vec![("default", passthrough())];
    configs.push((
        "sqpoll",
        IoConfig {
            sqpoll: Some(ringdb_io::SqPoll {
                idle_ms: 100,
                cpu: None,
            }),
            ..passthrough()
        },
    ));
    if check_iopoll(Path::new(dev)).is_ok() {
        configs.push((
            "iopoll",
            IoConfig {
                iopoll: true,
                ..passthrough()
            },
        ));
    }
    configs
}

fn wait_all(e: &mut dyn ringdb_io::Engine, n: usize) -> Vec<ringdb_io::IoCompletion> {
    let mut out = Vec::new();
    while out.len() < n {
        e.submit(1).unwrap();
        e.reap(&mut out);
    }
    out
}

/// Pushes one request per buffer `first..first + 4` of `pool` (block `i` at `i * bs`) and
/// waits for them, checking each moved `bs` bytes.
fn four_blocks(
    eng: &mut dyn ringdb_io::Engine,
    pool: &ringdb_io::FixedBufferPool,
    first: usize,
    write: bool,
    bs: usize,
    what: &str,
) {
    use ringdb_io::{FileId, IoRequest};
    for i in 0..4 {
        let (offset, buf) = ((i * bs) as u64, pool.ptr(first + i));
        let r = if write {
            IoRequest::write(FileId(0), offset, buf, bs as u32, i as u64)
        } else {
            IoRequest::read(FileId(0), offset, buf, bs as u32, i as u64)
        }
        .with_buf_index(Some(pool.fixed_index(first + i)));
        // SAFETY: the pool outlives the engine's completions (waited for right below).
        unsafe { eng.push(&r) }.unwrap();
    }
    for c in wait_all(eng, 4) {
        assert_eq!(c.result, bs as i32, "{what} {c:?}");
    }
}

/// Writes a pattern, flushes, reads it back bit-exact, and checks a misaligned request is
/// refused before it is queued, on one ring configuration.
fn round_trip(dev_fd: i32, name: &str, cfg: &IoConfig, tag: u8, bs: usize) {
    use ringdb_io::{FileId, FixedBufferPool, IoRequest, OpKind};
    let fixed = cfg.fixed_buffers;
    let what = format!("{name} fixed={fixed}");
    let mut pool = FixedBufferPool::new(8, bs).unwrap();
    let iov = pool.iovecs();
    let mut eng = open_engine(cfg, &[dev_fd], fixed.then_some(&iov[..])).unwrap();
    for i in 0..4 {
        for (j, b) in pool.slice_mut(i).iter_mut().enumerate() {
            *b = (j as u8) ^ (i as u8).wrapping_mul(31) ^ tag;
        }
    }
    four_blocks(eng.as_mut(), &pool, 0, true, bs, &format!("{what} write"));
    // SAFETY: a flush carries no buffer.
    unsafe { eng.push(&IoRequest::sync(OpKind::Fsync, FileId(0), 99)) }.unwrap();
    let c = wait_all(eng.as_mut(), 1);
    assert_eq!((c[0].user_data, c[0].result), (99, 0), "{what} flush");
    four_blocks(eng.as_mut(), &pool, 4, false, bs, &format!("{what} read"));
    // The pool rounds each buffer up to a page; only the first `bs` bytes moved.
    for i in 0..4 {
        assert!(
            pool.slice(i)[..bs] == pool.slice(4 + i)[..bs],
            "{what}: block {i} differs"
        );
    }
    let bad = IoRequest::read(FileId(0), 1, pool.ptr(0), bs as u32, 7);
    // SAFETY: refused before queueing; nothing reaches the kernel.
    let e = unsafe { eng.push(&bad) }.expect_err("misaligned refused");
    assert!(matches!(e, IoError::Misaligned { .. }), "{e}");
    assert_eq!(eng.in_flight(), 0);
    drop(eng);
    eprintln!("verified: passthrough {name} fixedbufs={fixed}: write, flush, read back");
}

/// The positive path, on a real NVMe namespace only: set `RINGDB_NVME_CHAR=/dev/ngXnY` (the
/// NVMe VM does). Writes a pattern, flushes (NVMe Flush), reads it back bit-exact, with plain
/// and registered buffers, on a default, an SQPOLL and (when the device has poll queues) an
/// IOPOLL ring, and checks that a misaligned request is refused before it is queued.
#[test]
fn nvme_roundtrip_flush_and_alignment_when_a_namespace_is_given() {
    let Ok(dev) = std::env::var("RINGDB_NVME_CHAR") else {
        eprintln!("RINGDB_NVME_CHAR not set: no NVMe namespace to test on");
        return;
    };
    let target = Target::open(
        Path::new(&dev),
        TargetOptions {
            direct: true,
            write: true,
            create: false,
        },
    )
    .unwrap();
    let geo = target.nvme.expect("an NVMe char device has a geometry");
    assert!(target.is_block_device && target.size == geo.capacity());
    let bs = 4 * geo.lba_size as usize;
    for (round, (name, base)) in passthrough_configs(&dev).into_iter().enumerate() {
        for fixed in [false, true] {
            let cfg = IoConfig {
                fixed_buffers: fixed,
                ..base.clone()
            };
            let tag = (round * 2 + usize::from(fixed)) as u8;
            round_trip(target.fd(), name, &cfg, tag, bs);
        }
    }
}

#[test]
fn fsync_on_an_iopoll_ring_is_refused_before_it_is_queued() {
    use ringdb_io::{FileId, IoRequest, OpKind};
    // IOPOLL rings build anywhere; only their I/O needs poll queues. A sync cannot be polled,
    // so the block-layer engine refuses it with a typed error instead of a failed completion.
    let path = std::env::temp_dir().join(format!("ringdb-iopoll-sync-{}", std::process::id()));
    let f = std::fs::File::create(&path).unwrap();
    let cfg = IoConfig {
        iopoll: true,
        queue_depth: 8,
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut eng = match open_engine(&cfg, &[f.as_raw_fd()], None) {
        Ok(e) => e,
        Err(e) => {
            // No io_uring here (disabled, or too old): that refusal must be typed too.
            assert!(!e.to_string().contains('\n'), "{e}");
            eprintln!("SKIP: no IOPOLL ring here: {e}");
            let _ = std::fs::remove_file(&path);
            return;
        }
    };
    for op in [OpKind::Fsync, OpKind::Fdatasync] {
        // SAFETY: a sync carries no buffer; it is refused before it reaches the kernel.
        let e = unsafe { eng.push(&IoRequest::sync(op, FileId(0), 1)) }.expect_err("refused");
        let msg = e.to_string();
        assert!(
            matches!(
                e,
                IoError::Unsupported {
                    switch: ringdb_io::Switch::Iopoll,
                    ..
                }
            ),
            "{msg}"
        );
        assert!(msg.contains("IOPOLL ring") && !msg.contains('\n'), "{msg}");
        assert_eq!(eng.in_flight(), 0);
    }
    drop(eng);
    let _ = std::fs::remove_file(&path);
}
