//! What the transaction tests share: a fresh directory per test, options, a small table,
//! keys, and letting the other tasks run.

#![allow(dead_code)]

use ringdb::{Durability, LocalDb, Options, TableId};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

pub fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-txn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

pub fn opts(pool_pages: usize, durability: Durability) -> Options {
    Options {
        pool_pages,
        direct: false,
        fresh: true,
        durability,
        wal_bytes: 4 << 20,
        ..Options::default()
    }
}

/// A database with `keys` keys `k000`.. (value `v<i>`) in a table `t`.
pub fn small_db(name: &str, keys: u32) -> (LocalDb, TableId) {
    let mut db = LocalDb::open(&dir(name), opts(64, Durability::Off)).unwrap();
    let table = db.create_table("t").unwrap();
    for i in 0..keys {
        db.in_table(table)
            .insert(format!("k{i:03}").as_bytes(), format!("v{i}").as_bytes())
            .unwrap();
    }
    (db, table)
}

pub fn key(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

pub type Events = Rc<RefCell<Vec<&'static str>>>;

/// Lets the other tasks run a while.
pub async fn yield_rounds(rounds: u32) {
    for _ in 0..rounds {
        ringdb_io::yield_now().await;
    }
}
