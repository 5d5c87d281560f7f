//! Bad input and damaged files: a typed error with a clear message, never a panic, never
//! wrong data.

use ringdb::page::PageError;
use ringdb::Corruption;
use ringdb::{Durability, LocalDb, OpenError, Options, ReadError, StorageError, WriteError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-err-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts() -> Options {
    Options {
        pool_pages: 64,
        direct: false,
        fresh: true,
        ..Options::default()
    }
}

#[test]
fn a_pool_below_the_minimum_is_refused() {
    let d = dir("pool");
    let e = LocalDb::open(
        &d,
        Options {
            pool_pages: 8,
            ..opts()
        },
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            OpenError::Pool {
                frames: 8,
                minimum: 16,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("too small"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_bad_page_size_is_refused() {
    let d = dir("ps");
    for ps in [3000, 2048, 1 << 17] {
        let e = LocalDb::open(
            &d,
            Options {
                page_size: ps,
                ..opts()
            },
        )
        .err()
        .unwrap();
        assert!(
            matches!(e, OpenError::PageSize { requested, .. } if requested == ps),
            "{ps}: {e:?}"
        );
        assert!(e.to_string().contains("page size"), "{ps}: {e}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn records_too_large_and_empty_keys_are_refused() {
    let d = dir("big");
    let mut db = LocalDb::open(&d, opts()).unwrap();
    let max = db.handle().max_record();
    assert!(max >= 900, "4 KiB pages hold records of {max} bytes");
    db.insert(b"k", &vec![7u8; max - 1]).unwrap();
    let e = db.insert(b"k", &vec![7u8; max]).unwrap_err();
    assert!(matches!(e, WriteError::TooLarge { .. }), "{e:?}");
    assert!(e.to_string().contains("too large"), "{e}");
    let e = db.insert(b"", b"v").unwrap_err();
    assert!(matches!(e, WriteError::EmptyKey), "{e:?}");
    assert!(e.to_string().contains("empty"), "{e}");
    // The database is still usable.
    assert_eq!(db.get(b"k").unwrap().unwrap().len(), max - 1);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn reopening_with_another_page_size_names_the_right_one() {
    let d = dir("reps");
    let mut db = LocalDb::open(&d, opts()).unwrap();
    db.insert(b"a", b"1").unwrap();
    db.close().unwrap();
    let e = LocalDb::open(
        &d,
        Options {
            page_size: 8192,
            fresh: false,
            ..opts()
        },
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            OpenError::PageSizeMismatch {
                on_disk: 4096,
                requested: 8192,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("4096"), "{e}");
    assert!(!e.to_string().contains("--"), "no command-line flag: {e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A flipped bit in a data page is reported as a checksum error naming the page; `get`
/// never returns the damaged bytes.
#[test]
fn a_flipped_bit_is_an_error_not_data() {
    let d = dir("flip");
    let mut db = LocalDb::open(&d, opts()).unwrap();
    let v = vec![0x5au8; 100];
    for i in 0..2000u32 {
        db.insert(&i.to_be_bytes(), &v).unwrap();
    }
    db.close().unwrap();
    let file = d.join(ringdb::DATA_FILE);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&file)
        .unwrap();
    let pages = f.metadata().unwrap().len() / 4096;
    assert!(pages > 10);
    // Flip one bit in every page but the meta page.
    for p in 1..pages {
        let at = p * 4096 + 2000;
        let mut b = [0u8];
        f.seek(SeekFrom::Start(at)).unwrap();
        f.read_exact(&mut b).unwrap();
        b[0] ^= 0x10;
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&b).unwrap();
    }
    drop(f);
    let mut db = LocalDb::open(
        &d,
        Options {
            fresh: false,
            ..opts()
        },
    )
    .unwrap();
    let e = db.get(&7u32.to_be_bytes()).unwrap_err();
    assert!(
        matches!(
            e,
            ReadError::Storage(StorageError::Page(PageError::Checksum { .. }))
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.contains("checksum") && msg.contains("page"), "{msg}");
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_truncated_file_is_an_error() {
    let d = dir("trunc");
    let mut db = LocalDb::open(&d, opts()).unwrap();
    for i in 0..3000u32 {
        db.insert(&i.to_be_bytes(), &[1u8; 100]).unwrap();
    }
    db.close().unwrap();
    // Open and close once more: the last checkpoint's double-write copy (which recovery
    // writes in place again, and which would repair the truncation) then holds no pages.
    LocalDb::open(
        &d,
        Options {
            fresh: false,
            ..opts()
        },
    )
    .unwrap()
    .close()
    .unwrap();
    let file = d.join(ringdb::DATA_FILE);
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let e = LocalDb::open(
        &d,
        Options {
            fresh: false,
            ..opts()
        },
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            OpenError::Storage(StorageError::Corrupt {
                reason: Corruption::Truncated { .. },
                ..
            })
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("pages"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A data set larger than the target (a block device of fixed size) is a clear error for
/// the insert that does not fit, and the tree stays readable.
#[test]
fn a_data_set_larger_than_the_target_is_refused() {
    use ringdb::buffer::{BufferManager, PoolConfig};
    use ringdb::tree::BTree;
    use ringdb_io::Runtime;
    use ringdb_io::{FileId, FixedBufferPool, IoConfig};
    let d = dir("full");
    std::fs::create_dir_all(&d).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(d.join("dev"))
        .unwrap();
    use std::os::fd::AsRawFd;
    let pool = FixedBufferPool::new(32, 4096).unwrap();
    let mut rt =
        Runtime::from_config(&IoConfig::default(), &[file.as_raw_fd()], Some(pool)).unwrap();
    let mut cfg = PoolConfig::new(4096, 32);
    // A "device" of 12 pages.
    cfg.capacity_pages = Some(12);
    let bm = BufferManager::new(rt.io(), FileId(0), cfg, 0).unwrap();
    let (inserted, err) = rt
        .block_on(async move {
            let tree = BTree::create(bm).await.unwrap();
            let v = [3u8; 200];
            for i in 0..10_000u32 {
                if let Err(e) = tree.insert(&i.to_be_bytes(), &v).await {
                    // Everything acknowledged before the error is still there.
                    for j in 0..i {
                        assert_eq!(tree.get(&j.to_be_bytes()).await.unwrap().unwrap(), v);
                    }
                    return (i, e);
                }
            }
            panic!("12 pages held 10000 records of 200 bytes");
        })
        .unwrap();
    assert!(inserted > 50, "{inserted} records fit");
    assert!(
        matches!(
            err,
            WriteError::Full {
                capacity_pages: 12,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("12 pages"), "{err}");
    drop(rt);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_logged_database_refuses_an_iopoll_ring() {
    // Its log and checkpoints need fsync/fdatasync, which cannot run on an IOPOLL ring.
    let d = dir("iopoll");
    let mut o = opts();
    o.io.iopoll = true;
    let e = LocalDb::open(&d, o).err().expect("refused");
    assert!(
        matches!(
            e,
            OpenError::DurabilityOnIopoll {
                mode: Durability::Fdatasync,
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("IOPOLL ring") && msg.contains("fdatasync"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
