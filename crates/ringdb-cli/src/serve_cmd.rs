//! `ringdb serve`: the database behind the Redis protocol (the `ringdb-server` crate); this
//! file only turns flags into its settings.

use crate::kv_cmd::DbArgs;
use clap::Args;
use ringdb_bench::units::parse_size;
use ringdb_server::{NetworkSettings, Server, ServerConfig};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// TCP port (0: any free port, printed at start; with --unixsocket only, give --port -1).
    #[arg(long, default_value_t = 6379, allow_negative_numbers = true)]
    port: i32,
    /// Also listen on this Unix socket.
    #[arg(long)]
    unixsocket: Option<PathBuf>,
    /// The password clients must give (AUTH, HELLO AUTH).
    #[arg(long)]
    requirepass: Option<String>,
    /// Network workers (0: one per shard).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// The most clients at once.
    #[arg(long, default_value_t = 10_000)]
    maxclients: usize,
    /// Close a connection idle for this many seconds (Redis's `timeout`; 0: never).
    #[arg(long, default_value_t = 0)]
    timeout: u64,
    /// The largest bulk string a request may carry.
    #[arg(long, default_value = "512M")]
    proto_max_bulk_len: String,
    /// Unsent replies past which a client that does not read is disconnected.
    #[arg(long, default_value = "256M")]
    client_output_limit: String,
    /// How the network talks to the kernel: auto (io_uring, or epoll with a warning where
    /// io_uring is blocked), io_uring (refuse to start without it) or epoll.
    #[arg(long, default_value = "auto")]
    net: ringdb_server::TransportKind,
    /// How each network worker's io_uring runs completions' task work: default, coop or
    /// defer (DEFER_TASKRUN; a kernel without it gets a plain ring).
    #[arg(long, default_value = "defer")]
    net_ring: ringdb_io::SetupMode,
    /// How connections are read: multishot (into provided buffers shared by a worker's
    /// connections) or single (one receive at a time, a buffer per connection).
    #[arg(long, default_value = "multishot", value_parser = ["multishot", "single"])]
    recv: String,
    /// Where the network workers run: shards (each a task on one shard's thread and ring, so
    /// a shard's own keys are served with no hop), threads (a thread each), or auto (shards
    /// where the engine and network are io_uring and there is one worker per shard).
    #[arg(long, default_value = "auto")]
    net_placement: ringdb_server::Placement,
    /// Cluster mode (the Redis Cluster protocol): the node serves the slots its controller
    /// assigns (`ringdb cluster push`) and redirects the others with -MOVED.
    #[arg(long)]
    cluster: bool,
    /// Where a cluster node keeps its id and topology (default: cluster-state in the
    /// database's folder).
    #[arg(long)]
    cluster_config_file: Option<PathBuf>,
    /// Start as a replica of this primary (host:port): its data replaces this node's, then
    /// its log's stream follows (`REPLICAOF` at run time).
    #[arg(long, value_name = "HOST:PORT")]
    replicaof: Option<String>,
    /// When a primary answers a write: async (once its own log has it) or sync (once a
    /// replica's log has it too; refused with -NOREPLICAS while no replica is online).
    #[arg(long, default_value = "async")]
    replication: ringdb_server::ReplicationMode,
    /// Committed batches a primary keeps for replicas that fall behind (a replica further
    /// behind takes a full copy again).
    #[arg(long, default_value = "64M")]
    repl_backlog_size: String,
    /// How long a write waits for a replica in sync mode before it is answered -NOREPLICAS.
    #[arg(long, default_value_t = 10_000)]
    repl_sync_timeout_ms: u64,
}

/// The cluster state file of `--cluster` (the database's folder must exist: it is opened first).
fn cluster_state_file(args: &ServeArgs) -> Result<Option<PathBuf>, Box<dyn std::error::Error>> {
    if !args.cluster {
        if args.cluster_config_file.is_some() {
            return Err("--cluster-config-file is for cluster mode: add --cluster".into());
        }
        return Ok(None);
    }
    if let Some(file) = &args.cluster_config_file {
        return Ok(Some(file.clone()));
    }
    let folder = args.db.path();
    if !folder.is_dir() {
        return Err(format!(
            "{} is not a folder: give the cluster state file with --cluster-config-file",
            folder.display()
        )
        .into());
    }
    Ok(Some(folder.join("cluster-state")))
}

pub fn run(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let listen = match args.port {
        -1 => None,
        port => Some(SocketAddr::new(
            args.bind,
            u16::try_from(port).map_err(|_| format!("--port {port}: not a port"))?,
        )),
    };
    let config = ServerConfig {
        listen,
        unix_socket: args.unixsocket.clone(),
        workers: args.workers,
        password: args.requirepass.clone(),
        max_clients: args.maxclients,
        idle_timeout_secs: args.timeout,
        max_bulk_bytes: parse_size(&args.proto_max_bulk_len)? as usize,
        max_reply_bytes: parse_size(&args.client_output_limit)? as usize,
        network: NetworkSettings {
            transport: args.net,
            ring_mode: args.net_ring,
            multishot_receive: args.recv == "multishot",
            placement: args.net_placement,
        },
        cluster_state_file: None,
        replica_of: args.replicaof.clone(),
        replication: args.replication,
        replication_backlog_bytes: parse_size(&args.repl_backlog_size)? as usize,
        replication_sync_timeout: std::time::Duration::from_millis(args.repl_sync_timeout_ms),
        ..ServerConfig::default()
    };
    let db = args.db.open_pinned_by_default(false, false)?;
    let config = ServerConfig {
        cluster_state_file: cluster_state_file(&args)?,
        ..config
    };
    let shards = db.shard_count();
    let server = Server::start(db, config)?;
    match server.local_address() {
        Some(address) => eprintln!(
            "ringdb serve: {shards} shard(s), listening on {address} (redis-cli -p {})",
            address.port()
        ),
        None => eprintln!(
            "ringdb serve: {shards} shard(s), listening on {:?}",
            args.unixsocket
        ),
    }
    if let Some(id) = server.cluster_node_id() {
        eprintln!("ringdb serve: cluster node {id} (its slots come from `ringdb cluster push`)");
    }
    if let Some(primary) = &args.replicaof {
        eprintln!("ringdb serve: replica of {primary} (read-only; REPLICAOF NO ONE promotes it)");
    }
    if let Some(reason) = server.network().and_then(|choice| choice.fallback) {
        eprintln!("ringdb: warning: {reason}");
    }
    server.wait()?;
    eprintln!("ringdb serve: stopped; everything acknowledged is durable");
    Ok(())
}
