//! What `ringdb serve` is told: where to listen and the bounds it keeps.

use std::net::SocketAddr;
use std::path::PathBuf;

/// A server's settings (the database's own are the `Db`'s).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// TCP address to listen on (127.0.0.1:6379 by default); `None` with a Unix socket only.
    pub listen: Option<SocketAddr>,
    /// A Unix socket to listen on as well.
    pub unix_socket: Option<PathBuf>,
    /// Network workers: each owns a listener (SO_REUSEPORT), a ring and its connections. 0:
    /// one per shard.
    pub workers: usize,
    /// The password of the `default` user (AUTH, HELLO AUTH).
    pub password: Option<String>,
    /// The most clients at once; one more is told `-ERR max number of clients reached`.
    pub max_clients: usize,
    /// The largest bulk string a request may carry.
    pub max_bulk_bytes: usize,
    /// Bytes of requests a connection may have waiting; beyond it the server stops reading
    /// that socket until they are answered.
    pub max_pending_request_bytes: usize,
    /// Bytes of replies a connection may have unsent; beyond it the client, which is not
    /// reading, is disconnected (Redis's client output buffer limit). From a quarter of it
    /// (at most 4 MiB) the connection's next requests wait and its socket is not read.
    pub max_reply_bytes: usize,
    /// A connection whose requests wait for it to read its replies, and that reads none of
    /// them for this long, is disconnected.
    pub reply_stall_timeout: std::time::Duration,
    /// Redis's `timeout`: a connection that sends nothing for this many seconds, with nothing
    /// running and no reply unsent, is closed; 0 (the default) never closes one.
    pub idle_timeout_secs: u64,
    /// The expiry sweep looks at this many keys per `sweep_interval` (`sweep.rs`).
    pub sweep_chunk_keys: usize,
    /// How often the expiry sweep takes a chunk.
    pub sweep_interval: std::time::Duration,
    /// How the network workers use io_uring.
    pub network: NetworkSettings,
    /// Cluster mode: the node's id and the topology its controller pushed are kept in this
    /// file. `None`: a standalone server (it answers `CLUSTER` as one node owning every slot).
    pub cluster_state_file: Option<PathBuf>,
    /// Follow this primary (`host:port`) from the start, as `REPLICAOF` does.
    pub replica_of: Option<String>,
    /// When writes are answered on a primary with replicas.
    pub replication: crate::ReplicationMode,
    /// Bytes of committed batches a primary keeps for replicas that fall behind; one further
    /// behind takes a full copy again.
    pub replication_backlog_bytes: usize,
    /// How long a write waits for a replica's acknowledgement in sync mode.
    pub replication_sync_timeout: std::time::Duration,
}

/// How a network worker talks to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetworkSettings {
    /// io_uring, epoll, or io_uring falling back to epoll where it is blocked (the default).
    pub transport: TransportKind,
    /// The ring's task-work mode: `Defer` (the default) posts completions only when the worker
    /// enters the kernel to collect them. A kernel that refuses the mode gets a plain ring.
    pub ring_mode: ringdb_io::SetupMode,
    /// Receives are multishot into the worker's provided buffers (the default), else one
    /// receive at a time into a buffer of each connection's own. Kernels without provided
    /// buffer rings or multishot receives fall back to the latter.
    pub multishot_receive: bool,
    /// Which threads the workers run on.
    pub placement: Placement,
}

/// Which threads the network workers run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the shards' threads where they can (one worker per shard, io_uring engines and
    /// network), else on threads of their own.
    Auto,
    /// Each worker is a task of one shard's runtime: the shard's own keys are served with
    /// no hop to another thread. A server that cannot (workers not one per shard, a shard
    /// engine or network without io_uring) refuses to start.
    Shards,
    /// Each worker on a thread of its own; every write hops to its shard.
    Threads,
}

impl std::str::FromStr for Placement {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Placement::Auto),
            "shards" => Ok(Placement::Shards),
            "threads" => Ok(Placement::Threads),
            _ => Err(format!(
                "{text:?}: not a placement of the network (auto, shards or threads)"
            )),
        }
    }
}

/// How a server's network workers ended up talking to the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkChoice {
    /// `io_uring` or `epoll` (INFO's `multiplexing_api`).
    pub api: &'static str,
    /// `multishot` (into provided buffers) or `single` receives.
    pub receive: &'static str,
    /// Why the workers do without io_uring or multishot receives, where they do.
    pub fallback: Option<String>,
    /// Whether the workers run on the shards' threads.
    pub on_shards: bool,
}

/// Which way the network workers talk to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    /// io_uring, falling back to epoll (with a warning) where io_uring cannot be set up.
    Auto,
    /// io_uring only: a server that cannot set it up refuses to start.
    Uring,
    /// epoll and non-blocking system calls.
    Epoll,
}

impl std::str::FromStr for TransportKind {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(TransportKind::Auto),
            "io_uring" | "uring" => Ok(TransportKind::Uring),
            "epoll" => Ok(TransportKind::Epoll),
            _ => Err(format!(
                "{text:?}: not a network transport (auto, io_uring or epoll)"
            )),
        }
    }
}

impl Default for NetworkSettings {
    fn default() -> Self {
        NetworkSettings {
            transport: TransportKind::Auto,
            ring_mode: ringdb_io::SetupMode::Defer,
            multishot_receive: true,
            placement: Placement::Auto,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 6379))),
            unix_socket: None,
            workers: 0,
            password: None,
            max_clients: 10_000,
            max_bulk_bytes: 512 * 1024 * 1024,
            max_pending_request_bytes: 1024 * 1024 * 1024,
            max_reply_bytes: 256 * 1024 * 1024,
            reply_stall_timeout: std::time::Duration::from_secs(60),
            idle_timeout_secs: 0,
            sweep_chunk_keys: 1024,
            sweep_interval: std::time::Duration::from_millis(100),
            network: NetworkSettings::default(),
            cluster_state_file: None,
            replica_of: None,
            replication: crate::ReplicationMode::Async,
            replication_backlog_bytes: 64 << 20,
            replication_sync_timeout: std::time::Duration::from_secs(10),
        }
    }
}

impl ServerConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), crate::ServeError> {
        let invalid = |text: &str| Err(crate::ServeError::Config(text.to_string()));
        if self.listen.is_none() && self.unix_socket.is_none() {
            return invalid("nothing to listen on: give a TCP address or a Unix socket");
        }
        if self.sweep_chunk_keys == 0 || self.sweep_interval.is_zero() {
            return invalid("the expiry sweep needs a chunk of at least one key and an interval");
        }
        if self.replica_of.is_some() && self.cluster_state_file.is_some() {
            return invalid(
                "a cluster node's primary comes from the topology (a replica-of line), not from the node's settings",
            );
        }
        if self.replication_backlog_bytes == 0 {
            return invalid("the replication backlog needs at least one byte");
        }
        if self.max_clients == 0 {
            return invalid("max clients must be at least 1");
        }
        if self.max_bulk_bytes == 0
            || self.max_pending_request_bytes < self.max_bulk_bytes.min(1 << 20)
        {
            return invalid("the request bounds must hold at least one request");
        }
        Ok(())
    }
}
