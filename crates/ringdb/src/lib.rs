//! ringdb: an io_uring-native storage engine (see `docs/DESIGN.md`).
//!
//! From the top down:
//! - [`db`]: the database ([`Db`], [`DbHandle`]): opening a path, the commit path, recovery,
//!   and the three files (data, log, double-write) on a directory or a raw device.
//! - [`tree`]: the B+tree: synchronous attempts that restart after a page fault.
//! - [`wal`]: the write-ahead log (group commit, durability modes) and [`checkpoint`]s through a
//!   double-write area; [`meta`]: the meta page that ties them together.
//! - [`buffer`]: the buffer manager: frames, page faults, eviction.
//! - [`node`]: slotted B+tree nodes (leaves and inner nodes) over a page: pure, synchronous
//!   code over `&[u8]`/`&mut [u8]` frames, no I/O.
//! - [`page`]: the common page header every on-disk page starts with (type, page id, LSN,
//!   CRC32C checksum), and the seal/verify pair the buffer manager runs around each write and
//!   read.
//! - [`verify`]: the full check of a tree (`ringdb check`); [`error`]: the errors, one type per
//!   entry point ([`OpenError`], [`WriteError`], [`ReadError`]) over [`StorageError`], and the
//!   umbrella [`DbError`].

pub mod buffer;
pub mod checkpoint;
mod chunked;
pub mod db;
pub mod error;
mod keylock;
pub mod meta;
pub mod node;
pub mod page;
pub mod tree;
pub mod verify;
pub mod wal;

pub use buffer::{BufferManager, PageGuard, PageId, PoolConfig, PoolStats, Reservation};
pub use db::{Db, DbHandle, DbStats, Options};
pub use error::{DbError, OpenError, ReadError, Result, StorageError, WriteError};
pub use tree::{BTree, TreeRoot, TreeStats};
pub use wal::{Durability, Op, WalStats};
