//! ringdb: an io_uring-native, durable key-value engine (see `docs/DESIGN.md`).
//!
//! Each shard is a B+tree store of byte keys and values over a buffer pool whose frames are the
//! I/O ring's registered buffers, with a write-ahead log (group commit, durability modes),
//! checkpoints through a double-write file and recovery on open. Every page is sealed with a
//! CRC32C checksum and its page id before it is written and verified when it is read, so a
//! torn, misdirected or flipped page is a typed error, never data. The I/O engine and every
//! io_uring switch come from [`IoConfig`] in [`Options::io`] (its engine an [`EngineKind`]); the default engine,
//! `auto`, falls back to libaio or posix where io_uring is blocked.
//!
//! - [`Db`]: the database as programs embed it, thread-per-core. A cheap `Clone + Send +
//!   Sync` handle on N shards (default: one per CPU), each a pinned thread with its own ring,
//!   executor, pool slice, trees and log; a key lives on the shard its hash names. Open with
//!   [`Db::open`] or [`Db::builder`]; [`Db::get`], [`Db::insert`], [`Db::remove`],
//!   [`Db::multi_get`], [`Db::write`] (atomic across tables and shards, also across a crash),
//!   [`Db::range`] and [`Db::prefix`] (streaming iterators merged across shards, both ends),
//!   named tables ([`Db::table`], [`Table`]), the `*_async` variants for tasks, and
//!   [`Db::run_on`] to run thread-per-core code on a shard ([`Shard`]). Serializable
//!   transactions across shards, from any thread: [`Db::transaction`] (retries conflicts) or
//!   [`Db::begin`] ([`DbTransaction`]: reads of its own writes, `get_many`, locked ranges,
//!   commit atomic across a crash on every shard it wrote).
//! - [`LocalDb`]: one shard on the calling thread (`!Send`), with its runtime: what each shard
//!   runs, and what the benchmarks drive directly ([`LocalDb::handle`], [`DbHandle`]: many
//!   tasks of its runtime at once; a task that faults a page parks, the others run, and their
//!   commits share one log write and one durability point).
//! - Transactions ([`DbHandle::begin`], [`Transaction`]): serializable reads, writes and
//!   scans across the tables of one [`LocalDb`] (strict two-phase locking on keys and scanned
//!   ranges, deadlock-free by wait-die: a younger transaction gets [`TxnError::Conflict`] and
//!   retries with its old [`TxnTimestamp`]), committed as one [`WriteBatch`] (one log record).
//! - Errors are one type per entry point: [`OpenError`] (open), [`WriteError`] (insert,
//!   remove, write, flush, close), [`ReadError`] (get, range), each wrapping the
//!   [`StorageError`] any operation can meet below the API and the [`ShardError`] of a request
//!   that could not reach its shard; [`DbError`] is the umbrella they all convert into. Each
//!   carries its cause as data, and `io_cause()` finds the I/O layer's error behind any of
//!   them.
//! - [`Db::verify`] walks every shard's trees and checks every page and invariant.
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
//! let db = Db::builder(&dir).options(options).shards(2).open()?;
//! db.insert(b"apple", b"red")?;
//! db.insert(b"banana", b"yellow")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"cherry", b"dark red").delete(b"apple");
//! db.write(&batch)?; // all or nothing, also across a crash and across shards
//! assert_eq!(db.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
//! assert_eq!(db.get(b"apple")?, None);
//! let keys: Vec<Vec<u8>> = db
//!     .range::<&[u8], _>(..)
//!     .map(|pair| pair.map(|(key, _value)| key))
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(keys, [b"banana".to_vec(), b"cherry".to_vec()]);
//! let other = db.clone();
//! let seen = std::thread::spawn(move || other.get(b"cherry")).join().unwrap()?;
//! assert_eq!(seen.as_deref(), Some(&b"dark red"[..]));
//! // A transaction across shards: both writes or neither, isolated from other threads.
//! db.transaction(|tx| {
//!     let banana = tx.get_for_update(b"banana")?.unwrap_or_default();
//!     tx.insert(b"apple", &banana)?;
//!     tx.remove(b"banana")
//! })?;
//! assert_eq!(db.get(b"apple")?.as_deref(), Some(&b"yellow"[..]));
//! assert!(db.verify()?.iter().all(|report| report.is_ok()));
//! db.close()?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

/// The README's embedding example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

mod chunked;
mod db;
mod durability;
mod error;
mod ids;
mod key_order;
mod keylock;
mod lock_manager;
mod memory;
mod sharded;
mod txn;

// The engine's inner layers: public only with the `__internal` feature, for this crate's
// property tests, the benchmarks' calibration and the fuzz targets (as fjall's
// `__internal_whitebox`); not part of the API, no stability promised.
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod buffer;
#[cfg(not(feature = "__internal"))]
mod buffer;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod catalog;
#[cfg(not(feature = "__internal"))]
mod catalog;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod checkpoint;
#[cfg(not(feature = "__internal"))]
mod checkpoint;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod double_write;
#[cfg(not(feature = "__internal"))]
mod double_write;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod freelist;
#[cfg(not(feature = "__internal"))]
mod freelist;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod meta;
#[cfg(not(feature = "__internal"))]
mod meta;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod node;
#[cfg(not(feature = "__internal"))]
mod node;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod page;
#[cfg(not(feature = "__internal"))]
mod page;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod racy;
#[cfg(not(feature = "__internal"))]
mod racy;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod racy_node;
#[cfg(not(feature = "__internal"))]
mod racy_node;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod tree;
#[cfg(not(feature = "__internal"))]
mod tree;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod verify;
#[cfg(not(feature = "__internal"))]
mod verify;
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub mod wal;
#[cfg(not(feature = "__internal"))]
mod wal;

pub use buffer::PoolStats;
pub use catalog::{TableId, MAX_NAME_BYTES};
pub use checkpoint::CheckpointStats;
pub use db::{
    Change, CommitTap, Db as LocalDb, DbHandle, DbStats, LocalDbTable, LocalTable, Options, Steal,
    Storage, WriteBatch,
};
pub use error::{
    CatalogFault, CheckpointFailure, CheckpointPart, Corruption, DbError, LayoutError, LogFailure,
    OpenError, ReadError, Result, ShardError, ShardSetupError, StorageError, TargetKind, TxnError,
    WaitFor, WriteError,
};
pub use memory::{MemoryStats, PartBytes};
pub use page::PageError;
/// What [`Options::io`] holds: the I/O engine and its io_uring switches, re-exported so that
/// a program configures ringdb without naming `ringdb_io`.
pub use ringdb_io::{EngineKind, IoConfig};
pub use sharded::{
    caller_reads, prefix_end, set_caller_thread_batch, CallerReads, Db, DbBuilder, DbTransaction,
    InTable, Pairs, Range, Shard, ShardedStats, Table, SHARDS_MAX, SYSTEM_PREFIX,
};
pub use tree::{Direction, TreeStats};
pub use txn::{ConflictWith, Isolation, Transaction, TxnStats, TxnTimestamp};
pub use verify::VerifyReport;
pub use wal::{Durability, WalStats};

// What the engine's own tests, the benchmarks and the command line reach besides the API
// (the `__internal` feature): the files a database consists of, the placement hash, the
// layout on a raw device and the cross-shard commit's record.
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub use db::{DeviceLayout, FileSet, DATA_FILE, DW_FILE, WAL_FILE};
#[cfg(feature = "__internal")]
#[doc(hidden)]
pub use sharded::{AcrossCommit, ShardStorage, BATCH_LOG_FILE, MANIFEST_FILE, SHARD_HASH};
