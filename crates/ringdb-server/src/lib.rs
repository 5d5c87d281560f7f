//! `ringdb serve`: a ringdb database behind the Redis protocol, so every language's Redis
//! client, `redis-cli` and `redis-benchmark` can use it.
//!
//! - `resp/`: the protocol (RESP2 and RESP3 replies, requests as arrays or inline lines),
//!   parsed incrementally with every declared size bounded before anything is allocated.
//! - `command/`: what each command means. A command on keys is a pure function of one key's
//!   value (`KeyOp`), so it runs wherever is cheapest: reads on the network worker, in place
//!   in the shard's pages; writes on the key's shard, under the key's lock.
//! - `exec.rs`: a connection's batch (a pipeline) grouped by shard: one hop per shard with
//!   writes, one commit (one log record, one wait for durability) per shard and batch.
//! - `across.rs`: EXEC, and MSET/MSETNX over several shards: one transaction that locks its
//!   keys on every shard it touches, then commits one batch atomic across shards;
//!   `watch.rs`: WATCH, the keys whose writes make a connection's EXEC abort.
//! - `net/`: one worker thread per shard, each with its own io_uring: multishot accept on a
//!   SO_REUSEPORT listener, a receive armed per connection, one send per batch of replies.
//! - `sweep.rs`: a thread that walks the keys a chunk at a time and has their shards remove
//!   the expired ones.
//! - `value.rs`: values carry their type and expiry deadline in a 9-byte header, logged with
//!   the value, so an expiry is as durable as the write that set it.
//! - `chunks.rs`: a value too large for one B+tree record is a header and chunks on the same
//!   shard, written in one batch, read without tearing from any thread.
//! - `hashes.rs`: a hash is a header under its key and a record per field on the same shard;
//!   `group.rs` is what a group of commands on one shard has written and commits as one batch.
//!
//! Replies to writes are sent after the write is durable (per the database's durability
//! mode): `--durability fdatasync` is Redis's `appendfsync always` with group commit.
//!
//! ```no_run
//! let db = ringdb::Db::open("ringdb-data/serve")?;
//! let server = ringdb_server::Server::start(db, ringdb_server::ServerConfig::default())?;
//! println!("listening on {:?}", server.local_address());
//! server.wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod across;
mod apply;
mod chunks;
pub mod client;
mod clients;
pub mod cluster;
mod command;
mod config;
mod error;
mod exec;
mod glob;
mod group;
mod hashes;
mod hop;
mod info;
mod locks;
mod net;
mod rename;
mod replication;
pub mod resp;
mod sample;
mod shared;
mod store;
mod sweep;
mod value;
mod watch;
mod whole;

pub use config::{NetworkChoice, NetworkSettings, Placement, ServerConfig, TransportKind};
pub use error::ServeError;
pub use replication::ReplicationMode;

use ringdb::Db;
use shared::ServerShared;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The Redis version the server reports (`INFO`, `HELLO`): the one whose commands and
/// error texts it follows.
pub const REDIS_VERSION: &str = "7.0.15";

/// A running server.
pub struct Server {
    shared: Arc<ServerShared>,
    threads: Vec<JoinHandle<Result<(), std::io::Error>>>,
    sweeper: JoinHandle<()>,
    clock: JoinHandle<()>,
    local_address: Option<SocketAddr>,
    db: Db,
}

impl Server {
    /// Starts serving `db`: one network worker per shard (or `config.workers`).
    pub fn start(db: Db, config: ServerConfig) -> Result<Server, ServeError> {
        config.validate()?;
        let workers = if config.workers == 0 {
            db.shard_count()
        } else {
            config.workers
        };
        let unix = match &config.unix_socket {
            Some(path) => Some(net::unix_listener(path)?),
            None => None,
        };
        let listen = config.listen;
        let (interval, chunk) = (config.sweep_interval, config.sweep_chunk_keys);
        let store = store::Store::open(&db).map_err(|source| ServeError::Tables { source })?;
        let cluster = match &config.cluster_state_file {
            Some(path) => cluster::ClusterState::open(path).map_err(ServeError::Cluster)?,
            None => cluster::ClusterState::standalone(),
        };
        let replication = start_replication(&db, &store, &config)?;
        let replica_of = config.replica_of.clone();
        let shared = Arc::new(ServerShared::new(config, store, cluster, replication));
        let threads = net::start_workers(&db, &shared, workers, listen, unix)?;
        let stopping = shared.clone();
        let clock = shared
            .replication
            .start_clock(move || stopping.shutting_down())
            .map_err(|source| ServeError::Ring { source })?;
        let sweeper = match sweep::start(db.clone(), shared.clone(), interval, chunk) {
            Ok(sweeper) => sweeper,
            Err(source) => {
                shared.request_shutdown();
                return Err(ServeError::Ring { source });
            }
        };
        let local_address = match listen {
            Some(address) if address.port() != 0 => Some(address),
            Some(_) => threads_bound_address(&shared),
            None => None,
        };
        if let Err(text) = cluster::apply_role(&shared) {
            shared.request_shutdown();
            return Err(ServeError::Replication(text));
        }
        if let Some(primary) = replica_of {
            let replication = shared.replication.clone();
            if let Err(text) = replication.become_replica(&shared, primary) {
                shared.request_shutdown();
                return Err(ServeError::Replication(text));
            }
        }
        Ok(Server {
            shared,
            threads,
            sweeper,
            clock,
            local_address,
            db,
        })
    }

    /// The TCP address the server listens on (the port it was given when asked for port 0).
    pub fn local_address(&self) -> Option<SocketAddr> {
        self.local_address
    }

    /// How the network workers talk to the kernel (and why not as asked, where they could not).
    pub fn network(&self) -> Option<crate::NetworkChoice> {
        self.shared.network.get().cloned()
    }

    /// In cluster mode, this node's id (`CLUSTER MYID`).
    pub fn cluster_node_id(&self) -> Option<String> {
        let cluster = &self.shared.cluster;
        cluster.enabled().then(|| cluster.my_id().to_string())
    }

    /// Asks the workers to stop (SHUTDOWN does the same).
    pub fn shutdown(&self) {
        self.shared.request_shutdown();
    }

    /// Waits until the server stops (SHUTDOWN, or [`Server::shutdown`]), then makes
    /// everything written durable.
    pub fn wait(self) -> Result<(), ServeError> {
        let mut first = None;
        for thread in self.threads {
            let result = thread
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a network worker panicked")));
            if let Err(source) = result {
                first.get_or_insert(ServeError::Ring { source });
            }
        }
        let _ = self.clock.join();
        if self.sweeper.join().is_err() {
            first.get_or_insert(ServeError::Ring {
                source: std::io::Error::other("the expiry sweep panicked"),
            });
        }
        let _ = self.db.flush();
        first.map_or(Ok(()), Err)
    }
}

/// The replication state, its commit tap installed; refused where `config` asks for
/// replication and the database has no log.
fn start_replication(
    db: &Db,
    store: &store::Store,
    config: &ServerConfig,
) -> Result<Arc<replication::Replication>, ServeError> {
    let replication = Arc::new(replication::Replication::new(
        config.replication,
        config.replication_backlog_bytes,
        config.replication_sync_timeout,
    ));
    let logged = replication
        .install_tap(db, store)
        .map_err(|e| ServeError::Replication(e.to_string()))?;
    let sync = config.replication == ReplicationMode::Sync;
    if (config.replica_of.is_some() || sync) && !logged {
        let text = "replication needs a log: the database runs with durability off";
        return Err(ServeError::Replication(text.into()));
    }
    Ok(replication)
}

/// The port chosen for port 0 is recorded by the first worker's listener.
fn threads_bound_address(shared: &ServerShared) -> Option<SocketAddr> {
    shared.bound_address()
}
