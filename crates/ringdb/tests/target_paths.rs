//! Paths are classified by what they are, never by their names: a database in a directory on
//! tmpfs under `/dev/shm` opens (or is refused with tmpfs's real limitation), a missing parent
//! is still "create it", and a mistyped device name creates nothing among the device nodes.

use ringdb::{Durability, LocalDb, OpenError, Options};
use ringdb_io::IoError;
use std::path::{Path, PathBuf};

/// A directory of this test process's own under `/dev/shm`, when that is tmpfs here.
fn shm_dir(name: &str) -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let on_tmpfs = mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some("/dev/shm") && l.split(' ').nth(2) == Some("tmpfs"));
    if !shm.is_dir() || !on_tmpfs {
        eprintln!("skipped: /dev/shm is not a tmpfs directory here");
        return None;
    }
    let d = shm.join(format!("ringdb-paths-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    Some(d)
}

fn opts(durability: Durability) -> Options {
    Options {
        pool_pages: 64,
        fresh: true,
        durability,
        ..Options::default()
    }
}

/// Opens `dir` with `O_DIRECT` (the default), writes and reads back, closes and reopens:
/// tmpfs takes `O_DIRECT` from Linux 6.6 on; before, the refusal must be tmpfs's reason.
fn open_write_reopen(dir: &Path, durability: Durability) {
    let mut db = match LocalDb::open(dir, opts(durability)) {
        Ok(db) => db,
        Err(OpenError::Io(IoError::DirectUnsupported { path })) => {
            assert!(path.starts_with(dir), "{}", path.display());
            eprintln!("tmpfs refuses O_DIRECT on this kernel: refused with that reason");
            return;
        }
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    db.insert(b"key", b"value").unwrap();
    db.close().unwrap();
    let mut db = LocalDb::open(
        dir,
        Options {
            fresh: false,
            ..opts(durability)
        },
    )
    .unwrap();
    assert_eq!(db.get(b"key").unwrap().as_deref(), Some(&b"value"[..]));
    db.close().unwrap();
}

#[test]
fn a_new_directory_on_dev_shm_holds_a_database_with_and_without_a_log() {
    for durability in [Durability::Off, Durability::Fdatasync] {
        let Some(d) = shm_dir(durability.name()) else {
            return;
        };
        open_write_reopen(&d, durability);
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn an_existing_directory_on_dev_shm_holds_a_database() {
    let Some(d) = shm_dir("existing") else {
        return;
    };
    std::fs::create_dir_all(&d).unwrap();
    open_write_reopen(&d, Durability::None);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_file_whose_directory_is_missing_is_still_create_it() {
    let Some(d) = shm_dir("missing-parent") else {
        return;
    };
    let e = LocalDb::open(&d.join("data.db"), opts(Durability::Off))
        .err()
        .expect("a file in a missing directory opened");
    assert!(
        matches!(&e, OpenError::Io(IoError::NotFound { .. })),
        "{e:?}"
    );
    assert!(e.to_string().contains("create it"), "{e}");
    assert!(!d.exists(), "the missing directory was created");
}

#[test]
fn a_mistyped_device_name_creates_nothing_among_the_device_nodes() {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if !mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some("/dev") && l.starts_with("devtmpfs "))
    {
        eprintln!("skipped: /dev is not devtmpfs here");
        return;
    }
    let typo = PathBuf::from(format!("/dev/ringdb-typo-{}", std::process::id()));
    let e = LocalDb::open(&typo, opts(Durability::Off))
        .err()
        .expect("a missing device opened");
    assert!(
        matches!(&e, OpenError::Io(IoError::NotFound { .. })),
        "{e:?}"
    );
    assert!(!typo.exists(), "{} was created", typo.display());
}
