//! ringdb: an io_uring-native, durable key-value engine (see `docs/DESIGN.md`).
//!
//! A [`Db`] is a B+tree of byte keys and values over a buffer pool whose frames are the I/O
//! ring's registered buffers, with a write-ahead log (group commit, durability modes), no-steal
//! checkpoints through a double-write file and recovery on open. Every page is sealed with a
//! CRC32C checksum and its page id before it is written and verified when it is read, so a torn,
//! misdirected or flipped page is a typed error, never data. The I/O engine and every io_uring
//! switch come from [`ringdb_io::IoConfig`] in [`Options::io`].
//!
//! - Open with [`Db::open`] (a directory holding the data, log and double-write files, a file, a
//!   block device, or an NVMe namespace's generic char device) and [`Options`].
//! - Use it synchronously from the thread that opened it ([`Db::get`], [`Db::insert`],
//!   [`Db::remove`], [`Db::range`], [`Db::write`] of a [`WriteBatch`], [`Db::flush`],
//!   [`Db::close`]), or from many tasks of its runtime at once through a [`DbHandle`]
//!   ([`Db::handle`], [`Db::runtime`]): a task that faults a page parks, the others run, and
//!   their commits share one log write and one durability point.
//! - Errors are one type per entry point: [`OpenError`] (open), [`WriteError`] (insert,
//!   remove, write, flush, close), [`ReadError`] (get, range), each wrapping the
//!   [`StorageError`] any operation can meet below the API; [`DbError`] is the umbrella they
//!   all convert into. Each carries its cause as data, and `io_cause()` finds the I/O layer's
//!   error behind any of them.
//! - [`Db::verify`] walks the whole tree and checks every page and invariant.
//!
//! # Example
//!
//! ```
//! use ringdb::{Db, Durability, Options, WriteBatch};
//!
//! # fn main() -> Result<(), ringdb::DbError> {
//! let dir = std::env::temp_dir().join(format!("ringdb-doc-{}", std::process::id()));
//! let options = Options {
//!     fresh: true,
//!     // No O_DIRECT, so the example runs on any filesystem (tmpfs too).
//!     direct: false,
//!     durability: Durability::Fdatasync,
//!     ..Options::default()
//! };
//! # let io = ringdb_io::IoConfig::new(ringdb_io::EngineKind::Posix);
//! # let options = if ringdb_io::limits::io_uring_disabled().unwrap_or(0) == 0 { options } else { Options { io, ..options } };
//! let mut db = Db::open(&dir, options)?;
//! db.insert(b"apple", b"red")?;
//! db.insert(b"banana", b"yellow")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"cherry", b"dark red").delete(b"apple");
//! db.write(&batch)?; // all or nothing, also across a crash
//! assert_eq!(db.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
//! assert_eq!(db.get(b"apple")?, None);
//! let keys: Vec<Vec<u8>> = db
//!     .range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, 10)?
//!     .into_iter()
//!     .map(|(key, _value)| key)
//!     .collect();
//! assert_eq!(keys, [b"banana".to_vec(), b"cherry".to_vec()]);
//! assert!(db.verify().is_ok());
//! db.close()?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod chunked;
mod db;
mod error;
mod keylock;

// The engine's inner layers, public only for this crate's property tests, the benchmarks'
// calibration and the fuzz targets: not part of the API, no stability promised.
#[doc(hidden)]
pub mod buffer;
#[doc(hidden)]
pub mod checkpoint;
#[doc(hidden)]
pub mod freelist;
#[doc(hidden)]
pub mod meta;
#[doc(hidden)]
pub mod node;
#[doc(hidden)]
pub mod page;
#[doc(hidden)]
pub mod tree;
#[doc(hidden)]
pub mod verify;
#[doc(hidden)]
pub mod wal;

pub use buffer::PoolStats;
pub use checkpoint::CheckpointStats;
pub use db::{
    Db, DbHandle, DbStats, DeviceLayout, FileSet, Options, Storage, WriteBatch, DATA_FILE, DW_FILE,
    WAL_FILE,
};
pub use error::{
    CheckpointFailure, CheckpointPart, Corruption, DbError, LayoutError, LogFailure, OpenError,
    ReadError, Result, StorageError, TargetKind, WaitFor, WriteError,
};
pub use page::PageError;
pub use tree::TreeStats;
pub use verify::VerifyReport;
pub use wal::{Durability, WalStats};
