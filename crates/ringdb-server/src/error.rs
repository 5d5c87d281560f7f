//! The server's one error type.

use thiserror::Error;

/// Why the server could not start or stopped.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The settings do not hold together.
    #[error("invalid server settings: {0}")]
    Config(String),
    /// A listener could not be made.
    #[error("cannot listen ({what}): {source}")]
    Listen {
        /// The step that failed.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The tables of large values' chunks and of hashes' fields could not be opened or
    /// created.
    #[error("cannot open the server's tables: {source}")]
    Tables {
        /// The engine's error.
        source: ringdb::WriteError,
    },
    /// The cluster state file could not be read or created.
    #[error("cluster state: {0}")]
    Cluster(String),
    /// Replication could not start (no log to ship, or a replica's thread failed to start).
    #[error("replication: {0}")]
    Replication(String),
    /// A worker's io_uring could not be set up (io_uring disabled, blocked by seccomp, or
    /// out of locked memory), or a worker failed.
    #[error("network worker: {source} (io_uring is required by ringdb serve)")]
    Ring {
        /// The system's error.
        source: std::io::Error,
    },
}
