//! The one error type of ringdb-net, [`NetError`]: every failure names what failed and why, and
//! none of them is a hang (every wait has a deadline).
//!
//! The cause is data a program can match on, not text: which [`NetSetting`] left its range and
//! what the range is, which [`NetSwitch`] this machine or build cannot do, what was wrong with a
//! frame ([`FrameFault`]), when a peer closed ([`CloseStage`]), which node failed and how
//! ([`NodeFailure`]), which child process failed and how ([`ChildProcess`], [`ChildProblem`],
//! exit status included), and why zero-copy receive was refused ([`ZcRecvRefusal`]). Messages
//! speak the library's vocabulary only (settings, switches, transport specs): a front end adds
//! hints in its own words, the way the `ringdb` CLI turns a setting into its flag.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

mod cause;

pub use cause::{
    ChildProblem, ChildProcess, CloseStage, FrameFault, NetSetting, NetSwitch, NodeFailure,
    SpecPart, ZcRecvRefusal,
};

/// Result alias of ringdb-net.
pub type Result<T, E = NetError> = std::result::Result<T, E>;

/// Everything ringdb-net can refuse or fail with. Each variant carries its cause as data; its
/// message names the cause and, where there is one, what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The io_uring ring under a transport refused its setup, a registration or a submission.
    #[error(transparent)]
    Ring(#[from] ringdb_io::IoError),

    /// A system call on a socket, a pipe, a thread or memory failed.
    #[error("{what}: {source}")]
    Io {
        /// The operation that failed, in words (`setsockopt SO_SNDBUF`, `bind 127.0.0.1:0`).
        what: String,
        /// The error the system call returned.
        #[source]
        source: io::Error,
    },

    /// A connection to a peer could not be made.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address dialled.
        addr: SocketAddr,
        /// The error `connect` returned.
        #[source]
        source: io::Error,
    },

    /// A send or receive on a connected socket failed (a reset peer, for instance).
    #[error("connection {conn} ({peer}): {source}")]
    Peer {
        /// The connection's index in its transport.
        conn: usize,
        /// The peer's address.
        peer: String,
        /// The error the kernel reported.
        #[source]
        source: io::Error,
    },

    /// The peer closed the connection where more was due.
    #[error("peer {peer} closed the connection {when}")]
    PeerClosed {
        /// The peer's address (or role).
        peer: String,
        /// What was still due when it closed.
        when: CloseStage,
    },

    /// Nothing happened for the whole deadline.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited, in words.
        what: String,
        /// The deadline that passed.
        after: Duration,
    },

    /// A peer sent bytes that break the protocol.
    #[error("malformed frame from {peer}: {fault}")]
    MalformedFrame {
        /// The peer's address (or name).
        peer: String,
        /// What was wrong.
        fault: FrameFault,
    },

    /// A switch this machine, device or build cannot do.
    #[error("{switch} is not available here: {reason}")]
    Unsupported {
        /// The switch.
        switch: NetSwitch,
        /// Why, with what was found.
        reason: String,
    },

    /// Zero-copy receive (`uring+zc-recv`) refused: the probe found no way to run it.
    #[error("zero-copy receive (uring+zc-recv) refused on interface {ifname}: {refusal}")]
    ZcRecvUnsupported {
        /// The interface the connection runs over (`?` when it could not be found).
        ifname: String,
        /// Why the probe failed.
        refusal: ZcRecvRefusal,
    },

    /// A numeric setting outside the range it may take.
    #[error("invalid setting {setting}: got {}, must be {}", setting.amount(*value), setting.range(*min, *max))]
    OutOfRange {
        /// The setting.
        setting: NetSetting,
        /// The value given.
        value: u64,
        /// The least it may be.
        min: u64,
        /// The most it may be.
        max: u64,
    },

    /// A setting that must be a power of two (and at most `max`) and is not.
    #[error("invalid setting {setting}: got {}, must be a power of two up to {}", setting.amount(*value), setting.amount(*max))]
    NotPowerOfTwo {
        /// The setting.
        setting: NetSetting,
        /// The value given.
        value: u64,
        /// The largest power of two it may be.
        max: u64,
    },

    /// A setting that must be a multiple of `step` and is not.
    #[error("invalid setting {setting}: got {}, must be a multiple of {}", setting.amount(*value), setting.amount(*step))]
    NotMultiple {
        /// The setting.
        setting: NetSetting,
        /// The value given.
        value: u64,
        /// What it must be a multiple of.
        step: u64,
    },

    /// A transport spec with a word that names no base or switch.
    #[error("invalid setting transport: unknown {part} {word:?} in {spec:?} ({})", part.expected())]
    UnknownTransportWord {
        /// The whole spec, e.g. `uring+zerocopy`.
        spec: String,
        /// Where the word stands.
        part: SpecPart,
        /// The word.
        word: String,
    },

    /// An io_uring switch asked of the epoll transport.
    #[error("invalid setting transport: {switch} is an io_uring switch; epoll has none of them (use a uring base)")]
    NeedsUring {
        /// The switch.
        switch: NetSwitch,
    },

    /// Two switches that exclude each other.
    #[error("invalid setting transport: {first} and {second} exclude each other ({reason}); drop one of them")]
    Conflict {
        /// One switch.
        first: NetSwitch,
        /// The other.
        second: NetSwitch,
        /// Why they cannot go together.
        reason: &'static str,
    },

    /// A protocol name that is neither `tcp` nor `udp`.
    #[error("invalid setting protocol: {name:?} (tcp or udp)")]
    UnknownProtocol {
        /// The name given.
        name: String,
    },

    /// An address in the peer list a node process received that does not parse.
    #[error("invalid setting peer list: bad address {address:?}")]
    BadPeerAddress {
        /// The text given.
        address: String,
    },

    /// A node failed, or stopped because one of its workers failed.
    #[error("node {node}: {failure}")]
    Node {
        /// The node's id.
        node: usize,
        /// What happened.
        failure: NodeFailure,
    },

    /// A thread of this process (not a node's) panicked.
    #[error("the {thread} thread panicked")]
    ThreadPanicked {
        /// Which thread, in words (`sweep receiver`).
        thread: &'static str,
    },

    /// A child process (a node, the ping-pong server, `ip`) failed.
    #[error("child process {process}: {problem}")]
    Child {
        /// Which child.
        process: ChildProcess,
        /// What went wrong with it.
        problem: ChildProblem,
    },

    /// A node's report could not be encoded for its parent.
    #[error("cannot encode the node report: {source}")]
    EncodeReport {
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },

    /// A plot could not be drawn or written.
    #[error("cannot draw the plot: {reason}")]
    Plot {
        /// The plotting library's error, in words.
        reason: String,
    },

    /// The distributed join disagrees with the single-process reference.
    #[error("join result differs from the reference: got count {got_count} checksum {got_sum:#x}, want count {want_count} checksum {want_sum:#x}")]
    JoinMismatch {
        /// Pairs the shuffle's join produced.
        got_count: u64,
        /// Their checksum.
        got_sum: u64,
        /// Pairs the reference join produced.
        want_count: u64,
        /// Their checksum.
        want_sum: u64,
    },
}

impl NetError {
    /// A failed system call: `what` names the operation.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        NetError::Io {
            what: what.into(),
            source,
        }
    }

    /// `value` of `setting` outside `min..=max` (`max` = `usize::MAX`: no upper bound).
    pub(crate) fn out_of_range(setting: NetSetting, value: usize, min: usize, max: usize) -> Self {
        NetError::OutOfRange {
            setting,
            value: value as u64,
            min: min as u64,
            max: max as u64,
        }
    }

    /// Checks that `value` of `setting` lies in `min..=max`.
    pub(crate) fn check_range(
        setting: NetSetting,
        value: usize,
        min: usize,
        max: usize,
    ) -> Result<()> {
        if (min..=max).contains(&value) {
            Ok(())
        } else {
            Err(Self::out_of_range(setting, value, min, max))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_setting_and_its_range_in_units() {
        let e = NetError::out_of_range(NetSetting::SendBufferSize, 0, 1, 64 << 10);
        assert_eq!(
            e.to_string(),
            "invalid setting send buffer size: got 0 B, must be 1 B..=64 KiB"
        );
        let e = NetError::out_of_range(NetSetting::Morsel, 0, 1, usize::MAX);
        assert_eq!(
            e.to_string(),
            "invalid setting morsel: got 0, must be at least 1"
        );
        let e = NetError::out_of_range(NetSetting::WorkerConnectionSets, 3, 2, 2);
        assert!(e.to_string().ends_with("got 3, must be 2"), "{e}");
        let e = NetError::NotPowerOfTwo {
            setting: NetSetting::ReceiveBuffers,
            value: 3,
            max: 32768,
        };
        assert!(e.to_string().contains("power of two up to 32768"), "{e}");
    }

    #[test]
    fn no_message_speaks_in_flags() {
        let errors = [
            NetError::Unsupported {
                switch: NetSwitch::NetworkNamespaces,
                reason: "`ip netns add x` failed".into(),
            },
            NetError::out_of_range(NetSetting::NamespacedNodes, 300, 1, 200),
            NetError::NeedsUring {
                switch: NetSwitch::Napi,
            },
        ];
        for e in errors {
            assert!(!e.to_string().contains("--"), "{e}");
        }
    }
}
