//! The one error type of ringdb-net: every failure names what failed and why, and none of them
//! is a hang (every wait has a deadline).

use std::io;
use std::time::Duration;

pub type Result<T, E = NetError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The io_uring ring under a transport refused its setup, a registration or a submission.
    #[error(transparent)]
    Ring(#[from] ringdb_io::IoError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("connection {conn} ({peer}): {source}")]
    Peer {
        conn: usize,
        peer: String,
        #[source]
        source: io::Error,
    },
    #[error("peer {peer} closed the connection {when}")]
    PeerClosed { peer: String, when: String },
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },
    #[error("malformed frame from {peer}: {reason}")]
    MalformedFrame { peer: String, reason: String },
    #[error("{switch} is not available here: {reason}")]
    Unsupported { switch: String, reason: String },
    #[error("zero-copy receive (uring+zc-recv) refused on interface {ifname}: {reason}")]
    ZcRecvUnsupported { ifname: String, reason: String },
    #[error("invalid setting {what}: {reason}")]
    Invalid { what: String, reason: String },
    #[error("node {node}: {reason}")]
    Node { node: usize, reason: String },
    #[error("child process {what}: {reason}")]
    Child { what: String, reason: String },
    #[error("join result differs from the reference: got count {got_count} checksum {got_sum:#x}, want count {want_count} checksum {want_sum:#x}")]
    JoinMismatch {
        got_count: u64,
        got_sum: u64,
        want_count: u64,
        want_sum: u64,
    },
}

impl NetError {
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        NetError::Io {
            what: what.into(),
            source,
        }
    }

    pub fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        NetError::Invalid {
            what: what.into(),
            reason: reason.into(),
        }
    }

    pub fn unsupported(switch: impl Into<String>, reason: impl Into<String>) -> Self {
        NetError::Unsupported {
            switch: switch.into(),
            reason: reason.into(),
        }
    }
}
