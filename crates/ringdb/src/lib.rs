//! ringdb: an io_uring-native storage engine (see `docs/DESIGN.md`).
//!
//! - [`page`]: the common page header every on-disk page starts with (type, page id, LSN,
//!   CRC32C checksum), and the seal/verify pair the buffer manager runs around each write and read.
//! - [`node`]: slotted B+tree nodes (leaves and inner nodes) over such a page: pure, synchronous
//!   code over `&[u8]`/`&mut [u8]` frames, no I/O.

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
pub use error::{DbError, Result};
pub use tree::{BTree, TreeRoot, TreeStats};
pub use wal::{Durability, Op, WalStats};
