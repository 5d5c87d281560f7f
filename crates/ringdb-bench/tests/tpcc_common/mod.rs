//! What the TPC-C tests share: a fresh database in a temporary folder.
#![allow(dead_code)]

use ringdb::{Durability, LocalDb, Options};
use std::path::PathBuf;

/// A folder removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new empty folder named after `name` and the process.
    pub fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("ringdb-tpcc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create the test folder");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Options for a test database: no O_DIRECT (the temporary folder may be tmpfs), no log, a
/// pool of `pool_pages`.
pub fn options(pool_pages: usize, fresh: bool) -> Options {
    Options {
        fresh,
        direct: false,
        durability: Durability::Off,
        pool_pages,
        ..Options::default()
    }
}

/// Opens (or creates, with `fresh`) the database in `dir`.
pub fn open(dir: &TempDir, pool_pages: usize, fresh: bool) -> LocalDb {
    LocalDb::open(&dir.0, options(pool_pages, fresh)).expect("open the test database")
}
