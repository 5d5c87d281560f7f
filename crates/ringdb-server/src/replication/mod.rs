//! Replication by shipping the log: a replica copies its primary and then applies every batch
//! the primary commits, in the order each key's batches reached the primary's log.
//!
//! - **The stream** (`backlog.rs`). The engine's commit tap hands the server every committed
//!   batch while the batch's keys are still locked; batches of the server's tables (keys,
//!   chunks, hash fields) are encoded once into a bounded backlog. Nothing is recorded until a
//!   replica first syncs: a primary without replicas pays one atomic load per commit.
//! - **A replica pulls** (`replica.rs`), over an ordinary connection: `REPLSYNC` names the
//!   stream (the primary's replication id and an offset), a first copy is a fuzzy scan of the
//!   three tables (`REPLSCAN`) taken after the stream's offset was fixed, then `REPLFETCH`
//!   long-polls the batches from that offset on. Applying the batches after the scan leaves
//!   every key as the primary's last write of it: a batch committed before the offset was
//!   fixed is in the tree the scan reads (the tap runs after the apply, see the engine's
//!   `tap.rs`); one committed after is in the stream. The replica answers `-LOADING` until it
//!   has applied the stream up to where the primary was when the scan ended.
//! - **Acknowledgements.** A replica applies a fetch's batches as one batch of its own through
//!   its own log (durable when it returns) and only then asks for the next offset: the offset
//!   it asks for is its acknowledgement. With `--replication sync` a write is answered once a
//!   replica has acknowledged it; `WAIT` asks for the same on demand.
//! - **Roles.** `REPLICAOF host port` makes a node a replica (its data is replaced by the
//!   primary's), `REPLICAOF NO ONE` a primary again, with a new replication id: replicas of
//!   the old stream take a full copy. A replica refuses writes (`-READONLY`) and does not
//!   sweep expired keys: the primary's deletions arrive through the stream.

mod backlog;
mod primary;
mod replica;

pub use backlog::{encode_batch, Backlog, TABLE_TAGS};
pub use primary::run_command;

use crate::store::Store;
use ringdb::{Change, Db, TableId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

/// When a write is answered on a primary with replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReplicationMode {
    /// Once the primary's log has it (a replica may be behind).
    #[default]
    Async,
    /// Once a replica's log has it too (as `WAIT 1` gives); refused when no replica is online.
    Sync,
}

impl std::str::FromStr for ReplicationMode {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "async" => Ok(ReplicationMode::Async),
            "sync" => Ok(ReplicationMode::Sync),
            _ => Err(format!("{text:?}: not a replication mode (async or sync)")),
        }
    }
}

/// A replica as its primary last saw it.
#[derive(Clone, Debug)]
pub struct SeenReplica {
    /// The offset it asked for last: everything before it is durable there.
    pub acked: u64,
    /// When it last fetched.
    pub at: Instant,
}

/// A replica that has not fetched for this long is not counted as online.
pub const REPLICA_ONLINE_WINDOW: Duration = Duration::from_secs(2);
/// How often the replication clock wakes long polls and waits to check their deadlines.
const CLOCK_TICK: Duration = Duration::from_millis(20);
/// Replicas a primary keeps track of, at most.
const REPLICAS_MAX: usize = 64;
/// Sync-mode and `WAIT` waiters parked at once, at most (more are woken by the clock).
const ACK_WAITERS_MAX: usize = 4096;

/// A server's replication state: its role, its stream and the replicas it has seen.
pub struct Replication {
    /// When writes are answered.
    pub mode: ReplicationMode,
    /// How long a sync-mode write waits for a replica's acknowledgement.
    pub sync_timeout: Duration,
    /// The stream of committed batches.
    pub backlog: Backlog,
    /// The engine's ids of the server's tables, by stream tag (set when the tap is installed).
    tables: OnceLock<[TableId; TABLE_TAGS]>,
    /// The server's tables (set with `tables`).
    store: OnceLock<Store>,
    /// The database (set with `tables`): a replica's thread writes into it.
    db: OnceLock<Db>,
    /// This primary's stream's name; a new one at each promotion.
    replication_id: Mutex<String>,
    /// Replicas by the address they announced.
    replicas: Mutex<HashMap<String, SeenReplica>>,
    ack_waiters: Mutex<Vec<Waker>>,
    /// The follower thread while this node is a replica.
    follower: Mutex<Option<Arc<replica::Follower>>>,
    /// Whether this node is a replica now.
    is_replica: AtomicBool,
    /// Whether the database has a log (the tap runs): without one there is nothing to ship.
    logged: AtomicBool,
    /// Stream bytes no replica had acknowledged when this primary last became a replica.
    unshipped_at_demotion: std::sync::atomic::AtomicU64,
}

impl Replication {
    /// A primary with no replica yet.
    pub fn new(mode: ReplicationMode, backlog_bytes: usize, sync_timeout: Duration) -> Self {
        Replication {
            mode,
            sync_timeout,
            backlog: Backlog::new(backlog_bytes),
            tables: OnceLock::new(),
            store: OnceLock::new(),
            db: OnceLock::new(),
            replication_id: Mutex::new(fresh_replication_id()),
            replicas: Mutex::new(HashMap::new()),
            ack_waiters: Mutex::new(Vec::new()),
            follower: Mutex::new(None),
            is_replica: AtomicBool::new(false),
            logged: AtomicBool::new(false),
            unshipped_at_demotion: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Installs the commit tap that feeds the backlog. Returns false when the database has no
    /// log (nothing can be shipped: such a node can be neither primary nor replica).
    pub fn install_tap(
        self: &Arc<Self>,
        db: &Db,
        store: &Store,
    ) -> Result<bool, ringdb::ShardError> {
        let tables = [
            TableId::DEFAULT,
            store.chunks.table_id(),
            store.fields.table_id(),
        ];
        assert!(self.tables.set(tables).is_ok(), "the tap is installed once");
        let _ = self.store.set(store.clone());
        let _ = self.db.set(db.clone());
        let me = Arc::downgrade(self);
        let tap: ringdb::CommitTap = Arc::new(move |changes: &[Change<'_>]| {
            if let Some(me) = me.upgrade() {
                me.record(changes);
            }
        });
        let logged = db.set_commit_tap(Some(tap))?;
        self.logged.store(logged, Ordering::Release);
        Ok(logged)
    }

    /// Why this node cannot be a primary to replicas now, if it cannot.
    pub fn refuses_replicas(&self) -> Option<&'static str> {
        if !self.logged.load(Ordering::Acquire) {
            return Some("replication needs a log: this node runs with durability off");
        }
        if self.is_replica() {
            return Some("this node is a replica: replicate from its primary");
        }
        None
    }

    /// Makes this node a replica of `primary` (`host:port`): its data is replaced by a copy of
    /// the primary's, then follows its stream.
    pub fn become_replica(
        self: &Arc<Self>,
        shared: &crate::shared::ServerShared,
        primary: String,
    ) -> Result<(), String> {
        let db = self.db.get().ok_or("the database is not open yet")?;
        if !self.logged.load(Ordering::Acquire) {
            return Err("replication needs a log: this node runs with durability off".into());
        }
        let name = shared
            .tcp_address()
            .ok_or("a replica needs a TCP address its primary can name it by")?;
        if name == primary {
            return Err("a node cannot replicate itself".into());
        }
        let mut follower = self.follower.lock().unwrap_or_else(|p| p.into_inner());
        if follower.as_ref().is_some_and(|f| f.primary == primary) {
            return Ok(());
        }
        match follower.take() {
            Some(old) => old.stop_and_wait(),
            None => self.report_unshipped(),
        }
        self.is_replica.store(true, Ordering::Release);
        let credentials = (name, shared.password());
        let started = replica::start(db.clone(), self.clone(), primary, credentials)
            .map_err(|e| format!("cannot start the replica's thread: {e}"))?;
        *follower = Some(started);
        Ok(())
    }

    /// A primary turning replica: says how much of its stream no replica had acknowledged
    /// (writes acknowledged to clients in async mode that its new primary may lack).
    fn report_unshipped(&self) {
        if !self.backlog.active() {
            return;
        }
        let end = self.backlog.end();
        let acked = self
            .online_replicas()
            .iter()
            .map(|(_, seen)| seen.acked)
            .max()
            .unwrap_or(0);
        let unshipped = end.saturating_sub(acked);
        self.unshipped_at_demotion
            .store(unshipped, Ordering::Release);
        if unshipped > 0 {
            tracing::warn!(
                "demoted to a replica with {unshipped} bytes of committed batches no replica had acknowledged"
            );
        }
    }

    /// Makes this node a primary (`REPLICAOF NO ONE`): it stops following and starts a stream
    /// of its own, under a new replication id.
    pub fn become_primary(&self) {
        let mut follower = self.follower.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = follower.take() {
            // Before writes are taken: the follower's last write is done, and it makes none.
            old.stop_and_wait();
            *self
                .replication_id
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = fresh_replication_id();
        }
        self.is_replica.store(false, Ordering::Release);
    }

    /// The tap: a committed batch into the backlog (its changes to the server's tables).
    fn record(&self, changes: &[Change<'_>]) {
        if !self.backlog.active() {
            return;
        }
        let tables = self.tables.get().expect("set before the tap");
        let tagged = changes.iter().filter_map(|change| {
            let tag = tables.iter().position(|table| *table == change.table)?;
            Some((tag as u8, change.key, change.value))
        });
        let framed = encode_batch(tagged);
        // A batch of the engine's own tables only (a cross-shard commit's marker) is empty.
        if framed.len() > 8 {
            self.backlog.append(framed);
        }
    }

    /// The engine table of stream tag `tag`.
    pub fn table_of(&self, tag: u8) -> Option<TableId> {
        self.tables.get()?.get(tag as usize).copied()
    }

    /// The records of the table of stream tag `tag` within `bounds`, in key order.
    pub fn range(
        &self,
        db: &Db,
        tag: u8,
        bounds: (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>),
    ) -> Option<ringdb::Range> {
        let store = self.store.get()?;
        match tag {
            0 => Some(db.range::<Vec<u8>, _>(bounds)),
            1 => Some(store.chunks.table().range::<Vec<u8>, _>(bounds)),
            2 => Some(store.fields.table().range::<Vec<u8>, _>(bounds)),
            _ => None,
        }
    }

    /// This primary's replication id.
    pub fn replication_id(&self) -> String {
        self.replication_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether this node is a replica (it refuses writes).
    pub fn is_replica(&self) -> bool {
        self.is_replica.load(Ordering::Acquire)
    }

    /// Whether this replica is still taking its first copy (it refuses reads).
    pub fn loading(&self) -> bool {
        self.follower().is_some_and(|f| f.loading())
    }

    fn follower(&self) -> Option<Arc<replica::Follower>> {
        self.follower
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Notes that replica `name` asked for `offset` (so has everything before it) and wakes
    /// the writes waiting for acknowledgements.
    pub fn acknowledge(&self, name: &str, offset: u64) {
        {
            let mut replicas = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
            if replicas.len() >= REPLICAS_MAX && !replicas.contains_key(name) {
                replicas.retain(|_, seen| seen.at.elapsed() < REPLICA_ONLINE_WINDOW);
            }
            if replicas.len() < REPLICAS_MAX || replicas.contains_key(name) {
                let seen = SeenReplica {
                    acked: offset,
                    at: Instant::now(),
                };
                replicas.insert(name.to_string(), seen);
            }
        }
        self.wake_ack_waiters();
    }

    fn wake_ack_waiters(&self) {
        let waiters =
            std::mem::take(&mut *self.ack_waiters.lock().unwrap_or_else(|p| p.into_inner()));
        waiters.into_iter().for_each(Waker::wake);
    }

    /// The replicas online now, with what each has acknowledged.
    pub fn online_replicas(&self) -> Vec<(String, SeenReplica)> {
        let replicas = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
        let mut online: Vec<_> = replicas
            .iter()
            .filter(|(_, seen)| seen.at.elapsed() < REPLICA_ONLINE_WINDOW)
            .map(|(name, seen)| (name.clone(), seen.clone()))
            .collect();
        online.sort_by(|a, b| a.0.cmp(&b.0));
        online
    }

    /// Whether some replica is online (a sync-mode primary takes writes only then).
    pub fn any_replica_online(&self) -> bool {
        let replicas = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
        replicas
            .values()
            .any(|seen| seen.at.elapsed() < REPLICA_ONLINE_WINDOW)
    }

    /// Online replicas that have acknowledged `offset`.
    pub fn acknowledged(&self, offset: u64) -> usize {
        let replicas = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
        replicas
            .values()
            .filter(|seen| seen.at.elapsed() < REPLICA_ONLINE_WINDOW && seen.acked >= offset)
            .count()
    }

    /// Waits until `needed` replicas have acknowledged `offset` or `timeout` passes; returns
    /// how many have.
    pub fn wait_acknowledged(&self, offset: u64, needed: usize, timeout: Duration) -> AckWait<'_> {
        AckWait {
            replication: self,
            offset,
            needed,
            deadline: Instant::now() + timeout,
        }
    }

    /// Starts the clock that wakes long polls and waits to check their deadlines; it stops
    /// with the server.
    pub fn start_clock(
        self: &Arc<Self>,
        stopping: impl Fn() -> bool + Send + 'static,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        let me = self.clone();
        std::thread::Builder::new()
            .name("ringdb-serve-repl-clock".into())
            .spawn(move || {
                while !stopping() {
                    std::thread::sleep(CLOCK_TICK);
                    me.backlog.wake_all();
                    me.wake_ack_waiters();
                }
                if let Some(follower) = me.follower() {
                    follower.stop();
                }
            })
    }

    /// INFO's replication section.
    pub fn info(&self) -> String {
        let mut lines = Vec::new();
        match self.follower() {
            Some(follower) => follower.info(&mut lines),
            None => {
                lines.push("role:master".to_string());
                let online = self.online_replicas();
                lines.push(format!("connected_slaves:{}", online.len()));
                let end = self.backlog.end();
                for (index, (name, seen)) in online.iter().enumerate() {
                    let (ip, port) = name.rsplit_once(':').unwrap_or((name, "0"));
                    let lag = seen.at.elapsed().as_secs();
                    lines.push(format!(
                        "slave{index}:ip={ip},port={port},state=online,offset={},lag={lag}",
                        seen.acked
                    ));
                }
                lines.push(format!("master_repl_offset:{end}"));
                lines.push(format!("ringdb_repl_batches:{}", self.backlog.appended()));
            }
        }
        if !self.is_replica() {
            lines.push(format!("master_replid:{}", self.replication_id()));
        }
        lines.push(format!("ringdb_replication_mode:{:?}", self.mode).to_lowercase());
        lines.push(format!(
            "repl_backlog_active:{}",
            u8::from(self.backlog.active())
        ));
        let unshipped = self.unshipped_at_demotion.load(Ordering::Acquire);
        lines.push(format!("ringdb_unshipped_at_demotion_bytes:{unshipped}"));
        lines.push(format!(
            "repl_backlog_first_byte_offset:{}",
            self.backlog.start()
        ));
        lines.join("\r\n") + "\r\n"
    }
}

/// A wait for replicas' acknowledgements (see [`Replication::wait_acknowledged`]).
pub struct AckWait<'a> {
    replication: &'a Replication,
    offset: u64,
    needed: usize,
    deadline: Instant,
}

impl std::future::Future for AckWait<'_> {
    type Output = usize;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<usize> {
        let have = self.replication.acknowledged(self.offset);
        if have >= self.needed || Instant::now() >= self.deadline {
            return std::task::Poll::Ready(have);
        }
        let mut waiters = self
            .replication
            .ack_waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match waiters.len() < ACK_WAITERS_MAX {
            true => waiters.push(cx.waker().clone()),
            // Too many parked: poll again at once rather than risk never being woken.
            false => cx.waker().wake_by_ref(),
        }
        std::task::Poll::Pending
    }
}

/// A new 40-hex replication id.
fn fresh_replication_id() -> String {
    let high = crate::chunks::fresh_generation();
    let low = crate::chunks::fresh_generation();
    let tail = crate::chunks::fresh_generation() as u32;
    format!("{high:016x}{low:016x}{tail:08x}")
}
