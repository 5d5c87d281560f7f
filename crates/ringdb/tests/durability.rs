//! The log: commits survive a crash (simulated by abandoning the `LocalDb` without closing it),
//! batches are atomic, checkpoints bound the log, recovery replays it.

use ringdb::TargetKind;
use ringdb::{Durability, LocalDb, OpenError, Options};
use ringdb::{WriteBatch, DW_FILE, WAL_FILE};
use std::path::PathBuf;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-durability-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts(pool: usize, durability: Durability) -> Options {
    Options {
        pool_pages: pool,
        direct: false,
        fresh: true,
        durability,
        wal_bytes: 1 << 20,
        ..Options::default()
    }
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

/// Abandons a database as a crash would: nothing is flushed or checkpointed on the way out.
fn crash(db: LocalDb) {
    std::mem::forget(db);
}

#[test]
fn commits_survive_a_crash_and_recovery_replays_the_log() {
    for mode in [
        Durability::Fdatasync,
        Durability::Thread,
        Durability::Odsync,
        Durability::None,
    ] {
        let d = dir(&format!("replay-{mode}"));
        let mut db = LocalDb::open(&d, opts(64, mode)).unwrap();
        for i in 0..3000u64 {
            db.insert(format!("k{i:06}").as_bytes(), &value(i)).unwrap();
        }
        for i in (0..3000u64).step_by(3) {
            assert!(db.remove(format!("k{i:06}").as_bytes()).unwrap());
        }
        let st = db.stats();
        assert!(st.checkpoints.unwrap().checkpoints > 1, "{mode}: {st:?}");
        crash(db);
        let mut o = opts(64, mode);
        o.fresh = false;
        let mut db = LocalDb::open(&d, o).unwrap();
        for i in 0..3000u64 {
            let got = db.get(format!("k{i:06}").as_bytes()).unwrap();
            if i % 3 == 0 {
                assert_eq!(got, None, "{mode}: k{i} was removed");
            } else {
                assert_eq!(got, Some(value(i)), "{mode}: k{i}");
            }
        }
        db.close().unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn the_log_wraps_and_stays_bounded() {
    let d = dir("wrap");
    let mut db = LocalDb::open(&d, opts(256, Durability::Fdatasync)).unwrap();
    // Far more log than its 1 MiB: it must wrap, checkpoints making room.
    for round in 0..10u64 {
        for i in 0..2000u64 {
            let v = format!("{round}-{i}-{}", "y".repeat(100));
            db.insert(format!("k{i:05}").as_bytes(), v.as_bytes())
                .unwrap();
        }
    }
    let wal_len = std::fs::metadata(d.join(WAL_FILE)).unwrap().len();
    assert!(wal_len <= 1 << 20, "log file grew to {wal_len}");
    assert!(db.stats().wal.unwrap().bytes > 2 << 20);
    crash(db);
    let mut o = opts(256, Durability::Fdatasync);
    o.fresh = false;
    let mut db = LocalDb::open(&d, o).unwrap();
    for i in 0..2000u64 {
        let v = format!("9-{i}-{}", "y".repeat(100));
        assert_eq!(
            db.get(format!("k{i:05}").as_bytes()).unwrap(),
            Some(v.into_bytes())
        );
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn batches_commit_whole() {
    let d = dir("batch");
    let mut db = LocalDb::open(&d, opts(64, Durability::Fdatasync)).unwrap();
    for b in 0..200u64 {
        let mut batch = WriteBatch::new();
        for j in 0..10u64 {
            batch.put(format!("b{b:04}-{j}").as_bytes(), &value(b * 10 + j));
        }
        if b > 0 {
            batch.delete(format!("b{:04}-0", b - 1).as_bytes());
        }
        db.write(&batch).unwrap();
    }
    crash(db);
    let mut o = opts(64, Durability::Fdatasync);
    o.fresh = false;
    let mut db = LocalDb::open(&d, o).unwrap();
    for b in 0..200u64 {
        for j in 0..10u64 {
            let got = db.get(format!("b{b:04}-{j}").as_bytes()).unwrap();
            if j == 0 && b < 199 {
                assert_eq!(got, None);
            } else {
                assert_eq!(got, Some(value(b * 10 + j)));
            }
        }
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_torn_double_write_file_leaves_the_previous_checkpoint() {
    let d = dir("torn-dw");
    let mut db = LocalDb::open(&d, opts(64, Durability::Fdatasync)).unwrap();
    for i in 0..500u64 {
        db.insert(format!("k{i:05}").as_bytes(), &value(i)).unwrap();
    }
    crash(db);
    // Tear the double-write file: recovery must ignore it and replay the log instead.
    let dw = d.join(DW_FILE);
    let mut bytes = std::fs::read(&dw).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&dw, &bytes).unwrap();
    let mut o = opts(64, Durability::Fdatasync);
    o.fresh = false;
    let mut db = LocalDb::open(&d, o).unwrap();
    for i in 0..500u64 {
        assert_eq!(
            db.get(format!("k{i:05}").as_bytes()).unwrap(),
            Some(value(i))
        );
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn modes_are_checked() {
    let d = dir("modes");
    let e = LocalDb::open(&d, opts(64, Durability::NvmeFlush))
        .err()
        .unwrap();
    assert!(
        matches!(
            e,
            OpenError::Durability {
                mode: Durability::NvmeFlush,
                target: TargetKind::Directory,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("NVMe"), "{e}");
    let mut db = LocalDb::open(&d, opts(64, Durability::Fdatasync)).unwrap();
    db.insert(b"a", b"1").unwrap();
    db.close().unwrap();
    let mut o = opts(64, Durability::Off);
    o.fresh = false;
    let e = LocalDb::open(&d, o).err().unwrap();
    assert!(matches!(e, OpenError::HasLog { .. }), "{e:?}");
    assert!(e.to_string().contains("write-ahead log"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_raw_device_is_split_into_data_log_and_double_write_regions() {
    use ringdb::DeviceLayout;
    use ringdb::LayoutError;
    let o = Options {
        pool_pages: 4096,
        ..Options::default()
    };
    let mib = 1u64 << 20;
    let l = DeviceLayout::plan(256 * mib, 4096, 512, &o).unwrap();
    assert_eq!((l.data.base, l.data.len), (0, 128 * mib));
    assert_eq!((l.log.base, l.log.len), (128 * mib, 64 * mib));
    assert_eq!(
        (l.double_write.base, l.double_write.len),
        (192 * mib, 64 * mib)
    );
    // Too small for the log and double-write area.
    let e = DeviceLayout::plan(100 * mib, 4096, 512, &o).unwrap_err();
    assert!(
        matches!(
            e,
            LayoutError::DeviceTooSmall {
                log_bytes: 67_108_864,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("hold no database"), "{e}");
    // A pool whose checkpoint would not fit the double-write area.
    let big = Options {
        pool_pages: 20_000,
        ..Options::default()
    };
    let e = DeviceLayout::plan(1024 * mib, 4096, 512, &big).unwrap_err();
    assert!(
        matches!(
            e,
            LayoutError::DoubleWriteTooSmall {
                pool_pages: 20_000,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("double-write"), "{e}");
    // A log size that is not a whole number of pages.
    let odd = Options {
        wal_bytes: (1 << 20) + 8,
        ..o
    };
    assert!(matches!(
        DeviceLayout::plan(1024 * mib, 4096, 512, &odd),
        Err(LayoutError::LogAlignment { .. })
    ));
}

/// The key of record `i` of generation `generation` in
/// [`a_batch_larger_than_the_pool_commits_without_stealing`].
fn large_batch_key(generation: u64, i: u64) -> Vec<u8> {
    format!("large-{generation}-{i:06}").into_bytes()
}

/// One batch that dirties more pages than the pool has (a multi-megabyte value stored as
/// chunks), then one that replaces it (deletes every old record, writes every new one), in a
/// pool that may not steal: only checkpoints run mid-batch make room. Eviction once freed the
/// last clean frame or two per round and never ran the checkpoint, so the second batch
/// traded those frames among its own pages forever. Crashed and reopened, the second
/// batch's records are there and the first's are gone.
#[test]
fn a_batch_larger_than_the_pool_commits_without_stealing() {
    const RECORDS: u64 = 6_000;
    const POOL_PAGES: usize = 1_024;
    let d = dir("large-batch");
    let (done_sender, done) = std::sync::mpsc::channel();
    let writer_dir = d.clone();
    std::thread::spawn(move || {
        let mut o = opts(POOL_PAGES, Durability::Fdatasync);
        o.wal_bytes = 64 << 20;
        o.steal = ringdb::Steal::Never;
        let mut db = LocalDb::open(&writer_dir, o).unwrap();
        for generation in 0..2u64 {
            let mut batch = WriteBatch::new();
            for i in 0..RECORDS {
                if generation > 0 {
                    batch.delete(&large_batch_key(generation - 1, i));
                }
                batch.put(&large_batch_key(generation, i), &[generation as u8; 960]);
            }
            db.write(&batch).unwrap();
        }
        crash(db);
        done_sender.send(()).unwrap();
    });
    // Seconds here; a livelock never ends.
    let waited = done.recv_timeout(std::time::Duration::from_secs(120));
    assert!(
        waited.is_ok(),
        "a batch larger than the pool never committed"
    );
    let mut o = opts(POOL_PAGES, Durability::Fdatasync);
    o.fresh = false;
    let mut db = LocalDb::open(&d, o).unwrap();
    for i in (0..RECORDS).step_by(7) {
        assert_eq!(db.get(&large_batch_key(0, i)).unwrap(), None);
        assert_eq!(
            db.get(&large_batch_key(1, i)).unwrap(),
            Some(vec![1u8; 960])
        );
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}
