//! The engine's errors: one type per entry point, each carrying its cause as data.
//!
//! A program that opens a database wants to match on *why* it could not (an option out of
//! range, a database created with another page size, a durability mode the target cannot
//! serve); one that writes wants to tell a full target from a failed database. So:
//!
//! - [`OpenError`]: [`Db::open`](crate::Db::open), [`Db::open_on`](crate::Db::open_on) and the
//!   checks of the options ([`PoolConfig::validate`](crate::PoolConfig::validate) included);
//! - [`WriteError`]: insert, remove, write (a batch), flush and close;
//! - [`ReadError`]: get and range (a database that refuses work after a failed commit says so;
//!   everything else is a [`StorageError`]);
//! - [`StorageError`]: what any operation can meet below the API: the I/O layer, a page that is
//!   not what was written, the log or a checkpoint failing, a bounded wait running out. Every
//!   type above wraps it as `Storage`;
//! - [`DbError`]: the umbrella for code that does not care which entry point failed: every type
//!   above converts into it, so `?` works in a function that returns [`Result`].
//!
//! Messages reach users verbatim, so each names the cause and what to change, in the
//! library's words (option names, never command-line flags): a front end with flags maps the
//! variants to its own hints. The `io_cause` methods find the I/O layer's error behind any of
//! them without knowing the nesting.

mod open;
mod shard;
mod storage;
mod txn;
mod write;

pub use open::{LayoutError, OpenError, TargetKind};
pub use shard::{ShardError, ShardSetupError};
pub use storage::{
    CatalogFault, CheckpointFailure, CheckpointPart, Corruption, LogFailure, StorageError, WaitFor,
};
pub use txn::ConflictWith;
pub use txn::TxnError;
pub use write::{ReadError, WriteError};

use ringdb_io::IoError;

/// A result whose error is the umbrella [`DbError`] unless another is named
/// (`Result<T, WriteError>`): the most convenient type for code that calls several entry
/// points and only reports what failed.
pub type Result<T, E = DbError> = std::result::Result<T, E>;

/// Any of the engine's errors, for code that does not care which entry point failed. Every
/// message is the wrapped error's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// Opening the database failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A write (insert, remove, batch, flush, close) failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A read (get, range) failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Something below the API failed (the buffer manager, the tree, the log).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A request could not reach its shard.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// A transaction failed (a wait-die conflict included).
    #[error(transparent)]
    Txn(#[from] TxnError),
}

impl DbError {
    /// The I/O layer's error behind this one, if an I/O failure caused it, however deeply it
    /// is wrapped.
    pub fn io_cause(&self) -> Option<&IoError> {
        match self {
            DbError::Open(e) => e.io_cause(),
            DbError::Write(e) => e.io_cause(),
            DbError::Read(e) => e.io_cause(),
            DbError::Storage(e) => e.io_cause(),
            DbError::Txn(e) => e.io_cause(),
            DbError::Shard(_) => None,
        }
    }
}

/// An I/O failure (a runtime's `block_on`, say) in code that returns [`Result`].
impl From<IoError> for DbError {
    fn from(e: IoError) -> Self {
        DbError::Storage(StorageError::Io(e))
    }
}
