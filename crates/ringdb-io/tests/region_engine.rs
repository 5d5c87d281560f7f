//! `RegionEngine`: logical files as regions of one O_DIRECT target, with bounds checks and
//! bounce buffers for unaligned reads and unaligned-length writes.

use ringdb_io::{Engine, FileId, IoCompletion, IoRequest, OpKind};
use ringdb_io::{PosixEngine, Region, RegionEngine};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

const BLOCK: u64 = 512;

fn file() -> (std::fs::File, std::path::PathBuf) {
    let p = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "ringdb-region-{}-{}",
        std::process::id(),
        rand_tag()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&p)
        .unwrap();
    f.set_len(64 * 1024).unwrap();
    (f, p)
}

fn one(e: &mut dyn Engine, req: IoRequest) -> ringdb_io::Result<i32> {
    // SAFETY: every buffer passed here outlives the call, which reaps the completion.
    unsafe { e.push(&req)? };
    e.submit(1)?;
    let mut out: Vec<IoCompletion> = Vec::new();
    while out.is_empty() {
        e.reap(&mut out);
    }
    assert_eq!(out[0].user_data, req.user_data);
    Ok(out[0].result)
}

fn regions() -> Vec<Region> {
    vec![
        Region {
            base: 0,
            len: 16 * 1024,
        },
        Region {
            base: 16 * 1024,
            len: 8 * 1024,
        },
    ]
}

#[test]
fn regions_map_offsets_and_bounce_unaligned_io() {
    let (f, p) = file();
    let inner = Box::new(PosixEngine::new(&[f.as_raw_fd()]));
    let mut e = RegionEngine::new(inner, regions(), BLOCK).unwrap();

    // A write of 100 bytes (not a whole block) from unaligned memory at offset 1024 of
    // region 1 lands at 16 KiB + 1024 of the device, zero-padded to the block.
    let mut data: Vec<u8> = (0..101u8).collect();
    let src = data[1..].as_mut_ptr();
    let w = one(&mut e, IoRequest::write(FileId(1), 1024, src, 100, 1)).unwrap();
    assert_eq!(w, 100);
    let mut back = vec![0u8; 512];
    // Read through an aligned plain handle (O_DIRECT needs aligned memory: use a fresh
    // non-direct handle instead).
    let plain = std::fs::File::open(&p).unwrap();
    plain.read_exact_at(&mut back, 16 * 1024 + 1024).unwrap();
    assert_eq!(&back[..100], &data[1..]);
    assert!(back[100..].iter().all(|&b| b == 0));

    // An unaligned read (offset 1030, 37 bytes) into unaligned memory is bounced.
    let mut out = [0u8; 40];
    let dst = out[3..].as_mut_ptr();
    let r = one(&mut e, IoRequest::read(FileId(1), 1030, dst, 37, 2)).unwrap();
    assert_eq!(r, 37);
    assert_eq!(&out[3..40], &data[7..44]);
    assert_eq!(e.bounced(), 2);

    // Syncs of any region reach the device.
    let s = one(&mut e, IoRequest::sync(OpKind::Fdatasync, FileId(1), 3)).unwrap();
    assert_eq!(s, 0);
    drop(e);
    let _ = std::fs::remove_file(&p);
}

#[test]
fn out_of_region_and_unaligned_writes_are_refused() {
    let (f, p) = file();
    let inner = Box::new(PosixEngine::new(&[f.as_raw_fd()]));
    let mut e = RegionEngine::new(inner, regions(), BLOCK).unwrap();
    let mut buf = ringdb_io::AlignedBuf::new(4096);
    let ptr = buf.as_mut_ptr();
    let err = one(&mut e, IoRequest::write(FileId(1), 6 * 1024, ptr, 4096, 1)).unwrap_err();
    assert!(
        matches!(&err, ringdb_io::IoError::PastEnd { target, .. } if target == "region 1"),
        "{err}"
    );
    assert!(
        err.to_string().contains("past the end of region 1"),
        "{err}"
    );
    let err = one(&mut e, IoRequest::write(FileId(0), 100, ptr, 512, 2)).unwrap_err();
    assert!(
        matches!(err, ringdb_io::IoError::Misaligned { value: 100, .. }),
        "{err}"
    );
    let err = one(&mut e, IoRequest::read(FileId(7), 0, ptr, 512, 3)).unwrap_err();
    assert!(
        matches!(err, ringdb_io::IoError::NoSuchFile { index: 7, .. }),
        "{err}"
    );
    // Overlapping or unaligned regions are refused up front.
    let inner = Box::new(PosixEngine::new(&[f.as_raw_fd()]));
    let overlap = vec![
        Region { base: 0, len: 4096 },
        Region {
            base: 2048,
            len: 4096,
        },
    ];
    assert!(RegionEngine::new(inner, overlap, BLOCK).is_err());
    let inner = Box::new(PosixEngine::new(&[f.as_raw_fd()]));
    assert!(RegionEngine::new(
        inner,
        vec![Region {
            base: 100,
            len: 512
        }],
        BLOCK
    )
    .is_err());
    drop(e);
    let _ = std::fs::remove_file(&p);
}

#[test]
fn a_sync_of_any_region_is_one_sync_of_the_whole_device() {
    // One simulated device holding both regions: writes to regions 0 and 1 are volatile
    // until a sync of region 1 (what the log syncs) makes the whole device durable.
    let disk = ringdb_io::SimDisk::new(7, 1);
    disk.set_len(0, 24 * 1024);
    let mut e = RegionEngine::new(disk.engine(8), regions(), BLOCK).unwrap();
    let s = one(&mut e, IoRequest::sync(OpKind::Fsync, FileId(0), 1)).unwrap();
    assert_eq!(s, 0);
    let mut a = ringdb_io::AlignedBuf::new(512);
    a.as_mut_slice().fill(0xaa);
    let mut b = ringdb_io::AlignedBuf::new(512);
    b.as_mut_slice().fill(0xbb);
    assert_eq!(
        one(
            &mut e,
            IoRequest::write(FileId(0), 512, a.as_mut_ptr(), 512, 2)
        )
        .unwrap(),
        512
    );
    assert_eq!(
        one(
            &mut e,
            IoRequest::write(FileId(1), 0, b.as_mut_ptr(), 512, 3)
        )
        .unwrap(),
        512
    );
    assert_eq!(disk.unsynced_writes(0), 2);
    let s = one(&mut e, IoRequest::sync(OpKind::Fdatasync, FileId(1), 4)).unwrap();
    assert_eq!(s, 0);
    assert_eq!(disk.unsynced_writes(0), 0);
    // The bytes sit at the regions' bases on the device, and survive a power cut.
    drop(e);
    disk.power_cut();
    let img = disk.durable_image(0);
    assert!(img[512..1024].iter().all(|&x| x == 0xaa));
    assert!(img[16 * 1024..16 * 1024 + 512].iter().all(|&x| x == 0xbb));
    // A request whose end overflows is past the end, not a wrap-around.
    let mut e = RegionEngine::new(disk.engine(8), regions(), BLOCK).unwrap();
    let err = one(
        &mut e,
        IoRequest::read(FileId(0), u64::MAX - 100, a.as_mut_ptr(), 512, 5),
    )
    .unwrap_err();
    assert!(err.to_string().contains("past the end"), "{err}");
}

/// Tests in this file run in parallel: one file each.
fn rand_tag() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
