//! [`ShardError`]: why a request could not reach the shard that owns its key, and
//! [`ShardSetupError`]: why the shards of a database could not be opened.
//!
//! A sharded database is one thread per shard. A request crosses threads twice (there and back),
//! so besides the operation's own failure it can meet three more: the shard is gone (its thread
//! stopped after a panic, or the database was closed), or the caller is itself a shard's thread
//! and a blocking call would stall that shard's ring (and deadlock if the key is its own).

use std::path::PathBuf;
use std::sync::Arc;

/// Why a request could not be served by a shard (the operation itself did not run, or its
/// reply was lost with the shard).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// The shard's thread stopped: it panicked, or its runtime failed. The other shards keep
    /// serving; this shard's data is whatever its log and pages hold (reopen to recover it).
    #[error("shard {shard} is down: {reason}")]
    #[non_exhaustive]
    Down {
        /// The shard's index.
        shard: usize,
        /// What stopped it (a panic's message, the runtime's error).
        reason: Arc<str>,
    },
    /// The database was closed (or is closing): no shard takes new work.
    #[error("the database is closed")]
    Closed,
    /// A blocking call from a shard's own thread (inside a task or a closure run on a shard):
    /// it would stall that shard's ring, and deadlock when the key is the shard's own. Use the
    /// async variant (`*_async`) or the [`Shard`](crate::Shard) the closure was given.
    #[error(
        "a blocking call from the thread of shard {shard}: it would stall the shard; use the \
         async variant from a task"
    )]
    #[non_exhaustive]
    OnShardThread {
        /// The shard whose thread made the call.
        shard: usize,
    },
}

/// Why the shards of a database could not be set up: the on-disk shard manifest, or a shard's
/// thread.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardSetupError {
    /// The database was created with another number of shards; a key's shard is its hash
    /// modulo that number, so reopening with another count would lose keys.
    #[error(
        "{}: the database has {on_disk} shards, {requested} were asked for; open it with \
         {on_disk} shards",
        path.display()
    )]
    #[non_exhaustive]
    Count {
        /// The database directory.
        path: PathBuf,
        /// Shards recorded at creation.
        on_disk: usize,
        /// Shards asked for.
        requested: usize,
    },
    /// The database was created with another key hash.
    #[error("{}: keys are placed by hash {on_disk:?}, this build places them by {expected:?}", path.display())]
    #[non_exhaustive]
    Hash {
        /// The database directory.
        path: PathBuf,
        /// The hash recorded at creation.
        on_disk: String,
        /// The hash this build uses.
        expected: &'static str,
    },
    /// The shard manifest exists but cannot be read as one.
    #[error("{}: not a shard manifest: {reason}", path.display())]
    #[non_exhaustive]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// More than one shard asked for over a single file or device (shards live in a
    /// directory, one subdirectory each).
    #[error(
        "{}: {requested} shards need a directory (one subdirectory per shard); a file or \
         device holds one shard",
        path.display()
    )]
    #[non_exhaustive]
    NeedsDirectory {
        /// The path given.
        path: PathBuf,
        /// Shards asked for.
        requested: usize,
    },
    /// Zero shards, or more than the bound.
    #[error("{requested} shards: between 1 and {maximum}")]
    #[non_exhaustive]
    CountOutOfRange {
        /// Shards asked for.
        requested: usize,
        /// The most shards a database may have.
        maximum: usize,
    },
    /// A shard's thread could not be started.
    #[error("starting the thread of shard {shard}: {source}")]
    #[non_exhaustive]
    Thread {
        /// The shard's index.
        shard: usize,
        /// The OS's error.
        #[source]
        source: std::io::Error,
    },
    /// A shard's thread stopped before its database was open.
    #[error("shard {shard} stopped while opening: {reason}")]
    #[non_exhaustive]
    Died {
        /// The shard's index.
        shard: usize,
        /// What stopped it.
        reason: Arc<str>,
    },
}
