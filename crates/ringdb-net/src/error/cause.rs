//! The causes [`NetError`](super::NetError) carries as data: settings, switches, frame faults,
//! node and child-process failures, and the zero-copy-receive probe's refusals.

use crate::frame::MAGIC;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

/// A transport switch: one `+word` of a transport spec (`uring+zc-send+regfds`), or the
/// placement of the nodes in network namespaces. Displayed as its spec word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NetSwitch {
    /// `zc-send`: `IORING_OP_SEND_ZC` from registered buffers.
    ZeroCopySend,
    /// `multishot`: multishot receives from a provided-buffer ring.
    Multishot,
    /// `zc-recv`: zero-copy receive (zcrx), which needs a NIC with header split.
    ZeroCopyReceive,
    /// `regfds`: registered sockets (`IORING_REGISTER_FILES`).
    RegisteredFiles,
    /// `regbufs`: registered send and receive memory (`IORING_REGISTER_BUFFERS`).
    RegisteredBuffers,
    /// `napi`: NAPI busy poll (`IORING_REGISTER_NAPI`), which needs a device queue with NAPI.
    Napi,
    /// `pollfirst`: `IORING_RECVSEND_POLL_FIRST` on sends and receives.
    PollFirst,
    /// `sqpoll`: a kernel thread polling the submission queue.
    Sqpoll,
    /// Each shuffle node in its own network namespace, joined by veth pairs (root, iproute2).
    NetworkNamespaces,
}

impl NetSwitch {
    /// The switch's word in a transport spec (`network namespaces` for the placement).
    pub fn spec_word(self) -> &'static str {
        match self {
            NetSwitch::ZeroCopySend => "zc-send",
            NetSwitch::Multishot => "multishot",
            NetSwitch::ZeroCopyReceive => "zc-recv",
            NetSwitch::RegisteredFiles => "regfds",
            NetSwitch::RegisteredBuffers => "regbufs",
            NetSwitch::Napi => "napi",
            NetSwitch::PollFirst => "pollfirst",
            NetSwitch::Sqpoll => "sqpoll",
            NetSwitch::NetworkNamespaces => "network namespaces",
        }
    }
}

impl fmt::Display for NetSwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec_word())
    }
}

/// A numeric setting of a transport, a benchmark or a shuffle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NetSetting {
    /// Bytes of one send buffer (slot).
    SendBufferSize,
    /// Send buffers (slots) of a transport.
    SendBuffers,
    /// Bytes of one receive buffer (or of one provided buffer).
    ReceiveBufferSize,
    /// Provided buffers in the multishot ring.
    ReceiveBuffers,
    /// All send buffers together (size x count): one registered buffer.
    SendMemory,
    /// Bytes of one ping-pong message.
    MessageSize,
    /// Bytes of one ping-pong message over UDP.
    UdpMessageSize,
    /// Nodes of a shuffle.
    Nodes,
    /// Worker threads per shuffle node.
    Workers,
    /// Bytes of one shuffle tuple.
    TupleSize,
    /// Bytes of one shuffle chunk (frame payload).
    Chunk,
    /// Tuples of each node's table.
    RowsPerNode,
    /// Tuples per morsel.
    Morsel,
    /// Connections one transport (one ring) drives.
    ConnectionsPerRing,
    /// Bytes of one send.
    SendLength,
    /// Connection sets handed to a shuffle node (one per worker).
    WorkerConnectionSets,
    /// Addresses in the peer list a node process receives (one per node).
    PeerAddresses,
    /// Nodes placed in network namespaces.
    NamespacedNodes,
}

impl NetSetting {
    /// The setting in words.
    pub fn describe(self) -> &'static str {
        match self {
            NetSetting::SendBufferSize => "send buffer size",
            NetSetting::SendBuffers => "send buffers",
            NetSetting::ReceiveBufferSize => "receive buffer size",
            NetSetting::ReceiveBuffers => "receive buffers (entries of the provided-buffer ring)",
            NetSetting::SendMemory => "send memory (buffer size x count, one registered buffer)",
            NetSetting::MessageSize => "message size",
            NetSetting::UdpMessageSize => "UDP message size",
            NetSetting::Nodes => "nodes",
            NetSetting::Workers => "workers",
            NetSetting::TupleSize => "tuple size",
            NetSetting::Chunk => "chunk",
            NetSetting::RowsPerNode => "rows per node",
            NetSetting::Morsel => "morsel",
            NetSetting::ConnectionsPerRing => "connections per ring",
            NetSetting::SendLength => "send length",
            NetSetting::WorkerConnectionSets => "connection sets (one per worker)",
            NetSetting::PeerAddresses => "peer addresses (one per node)",
            NetSetting::NamespacedNodes => "nodes in network namespaces",
        }
    }

    /// Whether the setting counts bytes (else it counts things).
    pub fn is_bytes(self) -> bool {
        matches!(
            self,
            NetSetting::SendBufferSize
                | NetSetting::ReceiveBufferSize
                | NetSetting::SendMemory
                | NetSetting::MessageSize
                | NetSetting::UdpMessageSize
                | NetSetting::TupleSize
                | NetSetting::Chunk
                | NetSetting::SendLength
        )
    }

    /// A value of this setting in words: bytes with the largest binary unit that divides them
    /// (`64 KiB`, `1000 B`), counts as they are.
    pub fn amount(self, value: u64) -> String {
        if !self.is_bytes() {
            return value.to_string();
        }
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if value >= 1 << shift && value.is_multiple_of(1 << shift) {
                return format!("{} {unit}", value >> shift);
            }
        }
        format!("{value} B")
    }

    /// The range `min..=max` in words (`max` = `u64::MAX`: no upper bound).
    pub fn range(self, min: u64, max: u64) -> String {
        if min == max {
            self.amount(min)
        } else if max == u64::MAX {
            format!("at least {}", self.amount(min))
        } else {
            format!("{}..={}", self.amount(min), self.amount(max))
        }
    }
}

impl fmt::Display for NetSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Where a word stands in a transport spec (`base+switch+switch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecPart {
    /// The first word: `epoll` or a `uring` flavour.
    Base,
    /// A `+word` after the base.
    Switch,
}

impl SpecPart {
    /// The words this part may be.
    pub fn expected(self) -> &'static str {
        match self {
            SpecPart::Base => "epoll, uring, uring-defer, uring-coop, uring-default, uring-sqpoll",
            SpecPart::Switch => {
                "zc-send, multishot, zc-recv, regfds, regbufs, napi, pollfirst, sqpoll"
            }
        }
    }
}

impl fmt::Display for SpecPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpecPart::Base => "base",
            SpecPart::Switch => "switch",
        })
    }
}

/// What was still due when a peer closed its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseStage {
    /// A send was asked on a connection the peer had closed.
    BeforeSend,
    /// The echo of a ping-pong round trip.
    RoundTrip {
        /// The round trip's number (warm-up included).
        index: u64,
    },
    /// The rest of a byte stream of known length.
    AfterBytes {
        /// Bytes received.
        received_bytes: u64,
        /// Bytes expected.
        expected_bytes: u64,
    },
    /// The end-of-stream frame of a shuffle node.
    BeforeEndOfStream {
        /// The node whose stream was cut.
        node: usize,
    },
}

impl fmt::Display for CloseStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseStage::BeforeSend => write!(f, "before a send"),
            CloseStage::RoundTrip { index } => write!(f, "during round trip {index}"),
            CloseStage::AfterBytes {
                received_bytes,
                expected_bytes,
            } => write!(f, "after {received_bytes} of {expected_bytes} bytes"),
            CloseStage::BeforeEndOfStream { node } => {
                write!(f, "mid-shuffle, before node {node}'s end-of-stream frame")
            }
        }
    }
}

/// What is wrong with bytes a peer sent: a frame of the shuffle's wire format, a connection
/// hello, or a ping-pong echo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameFault {
    /// A header whose first four bytes are not the frame magic.
    #[error("bad magic {found:#010x} (want {MAGIC:#010x})")]
    BadMagic {
        /// The four bytes found, little-endian.
        found: u32,
    },
    /// A payload longer than the decoder accepts.
    #[error("payload length {len_bytes} exceeds the limit {max_bytes}")]
    TooLong {
        /// The header's payload length.
        len_bytes: u32,
        /// The decoder's limit.
        max_bytes: u32,
    },
    /// Flags this format does not define.
    #[error("unknown flags {flags:#x}")]
    UnknownFlags {
        /// The header's flags.
        flags: u16,
    },
    /// An end-of-stream frame that carries a payload.
    #[error("end-of-stream frame with a payload")]
    EndOfStreamWithPayload,
    /// Bytes after the end-of-stream frame.
    #[error("{len_bytes} bytes after the end-of-stream frame")]
    BytesAfterEnd {
        /// Bytes of the read that followed it.
        len_bytes: usize,
    },
    /// A frame whose sender is not the node at the other end of the connection.
    #[error("sender {sender} on the connection of node {expected}")]
    WrongSender {
        /// The header's sender.
        sender: u16,
        /// The node the connection belongs to.
        expected: usize,
    },
    /// A frame of another tuple size than the shuffle's.
    #[error("tuple size {tuple_size} (this shuffle uses {expected})")]
    WrongTupleSize {
        /// The header's tuple size.
        tuple_size: u32,
        /// The shuffle's tuple size.
        expected: usize,
    },
    /// A payload that is not a whole number of tuples.
    #[error("payload of {len_bytes} bytes is not a whole number of {tuple_size}-byte tuples")]
    PartialTuple {
        /// The header's payload length.
        len_bytes: u32,
        /// The shuffle's tuple size.
        tuple_size: usize,
    },
    /// A payload whose checksum is not the header's.
    #[error("checksum {computed:#x} does not match the header's {header:#x}")]
    ChecksumMismatch {
        /// The payload's checksum.
        computed: u64,
        /// The header's.
        header: u64,
    },
    /// A connection hello of the shuffle mesh that names no valid peer.
    #[error("bad hello (magic {magic:#x}, node {node}, worker {worker})")]
    BadHello {
        /// The hello's magic.
        magic: u32,
        /// The node it claims to come from.
        node: usize,
        /// The worker it claims to come from.
        worker: usize,
    },
    /// A second connection from the same node and worker.
    #[error("second connection from node {node} worker {worker}")]
    DuplicateConnection {
        /// The node.
        node: usize,
        /// The worker.
        worker: usize,
    },
    /// A first ping-pong datagram that is not the hello.
    #[error("not a ping-pong hello")]
    NotHello,
    /// A ping-pong echo that differs from the message sent.
    #[error("echo of round trip {round_trip} differs from what was sent ({received_bytes} of {size_bytes} bytes, first difference at {first_difference:?})")]
    EchoMismatch {
        /// The round trip's number.
        round_trip: u64,
        /// Bytes of echo received.
        received_bytes: usize,
        /// Bytes of the message.
        size_bytes: usize,
        /// The first byte that differs, if any.
        first_difference: Option<usize>,
    },
}

/// How a shuffle node failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeFailure {
    /// A worker stopped because another worker of its node failed (the other's error is the
    /// root cause).
    #[error("aborted: another worker failed")]
    Aborted,
    /// A worker thread panicked.
    #[error("a worker thread panicked")]
    WorkerPanicked,
    /// The thread running a whole node (in-process cluster) panicked.
    #[error("a node thread panicked")]
    NodeThreadPanicked,
}

/// A child process this crate starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildProcess {
    /// One node of a multi-process shuffle.
    Node {
        /// The node's id.
        node: usize,
    },
    /// The node processes of a shuffle, together.
    Nodes,
    /// The ping-pong server process.
    PingPongServer,
    /// The `ip` command of iproute2 (network namespaces).
    IpCommand,
}

impl fmt::Display for ChildProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildProcess::Node { node } => write!(f, "node {node}"),
            ChildProcess::Nodes => write!(f, "nodes"),
            ChildProcess::PingPongServer => write!(f, "ping-pong server"),
            ChildProcess::IpCommand => write!(f, "ip (iproute2)"),
        }
    }
}

/// What went wrong with a child process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChildProblem {
    /// It could not be started.
    #[error("cannot start {}: {source}", program.display())]
    CannotStart {
        /// The program.
        program: PathBuf,
        /// The error `spawn` returned.
        source: io::Error,
    },
    /// It exited unsuccessfully.
    #[error("exited with {status}{}", colon_then(stderr))]
    Exited {
        /// How it exited.
        status: ExitStatus,
        /// What it printed on stderr, trimmed (may be empty).
        stderr: String,
    },
    /// It ended its output without the report it owed.
    #[error("exited without a report{}", colon_then(stderr))]
    NoReport {
        /// What it printed on stderr, its lines joined by `; ` (may be empty).
        stderr: String,
    },
    /// It printed a `LISTEN` line without a port.
    #[error("bad LISTEN line {line:?}")]
    BadListenLine {
        /// The line.
        line: String,
    },
    /// It ended before printing its `LISTEN` line.
    #[error("exited before listening ({line:?})")]
    ExitedBeforeListening {
        /// What it printed instead (may be empty).
        line: String,
    },
    /// Its report does not parse.
    #[error("unreadable report: {source}")]
    UnreadableReport {
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// Not every child reported.
    #[error("not every node reported")]
    MissingReports,
}

/// `": text"`, or nothing when `text` is empty.
fn colon_then(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

/// Why the zero-copy-receive probe refused `uring+zc-recv`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZcRecvRefusal {
    /// The interface of the connection's local address was not found.
    #[error("cannot find the connection's interface: {source}")]
    InterfaceUnknown {
        /// The error of the lookup.
        source: io::Error,
    },
    /// A plain ring for the opcode probe could not be set up.
    #[error("io_uring_setup failed: {source}")]
    RingSetup {
        /// The error `io_uring_setup` returned.
        source: io::Error,
    },
    /// The opcode probe failed.
    #[error("IORING_REGISTER_PROBE failed: {source}")]
    Probe {
        /// The error the registration returned.
        source: io::Error,
    },
    /// The kernel does not know `IORING_OP_RECV_ZC`.
    #[error("this kernel does not support IORING_OP_RECV_ZC (needs Linux 6.15+)")]
    KernelTooOld,
    /// A ring with the flags zcrx needs (`DEFER_TASKRUN`, 32-byte CQEs) could not be set up.
    #[error("io_uring_setup (DEFER_TASKRUN, CQE32) failed: {source}")]
    ZcrxRingSetup {
        /// The error `io_uring_setup` returned.
        source: io::Error,
    },
    /// The memory for the probe's area or refill ring could not be mapped.
    #[error("mmap {len_bytes} bytes: {source}")]
    Memory {
        /// Bytes asked for.
        len_bytes: usize,
        /// The error `mmap` returned.
        source: io::Error,
    },
    /// The interface would not take a zcrx queue (`IORING_REGISTER_ZCRX_IFQ`).
    #[error("IORING_REGISTER_ZCRX_IFQ: {source}: {}", registration_advice(source))]
    Registration {
        /// The error the registration returned.
        source: io::Error,
    },
}

/// What the error code of a refused zcrx registration says about why.
fn registration_advice(error: &io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::EOPNOTSUPP) => {
            "the device has no DMA-capable receive queue with header split (loopback and veth never do)"
        }
        Some(libc::EPERM) => "registration needs CAP_NET_ADMIN",
        Some(libc::EINVAL) => "the kernel rejected the queue setup",
        Some(libc::ENODEV) => "no such interface",
        _ => "registration failed",
    }
}
