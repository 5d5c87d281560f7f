//! The database as programs embed it: [`Db`], a `Send + Sync + Clone` handle on N shards,
//! thread-per-core (the paper's guideline 2: a ring per thread, each thread doing its own
//! computation and I/O).
//!
//! Each shard is a thread, pinned to a CPU, that owns a whole single-thread database
//! ([`LocalDb`](crate::LocalDb)): its ring (DEFER_TASKRUN + SINGLE_ISSUER where io_uring runs),
//! its executor, its slice of the buffer pool, its B+trees and its log, in its own
//! subdirectory. A key belongs to the shard its hash names ([`Db::shard_of`]); the count and
//! the hash are recorded at creation (`manifest.rs`). Nothing is shared between shards, so a
//! shard's hot path takes no lock.
//!
//! Any thread may call a `Db`: a call becomes a job pushed into the owning shard's inbox
//! (`inbox.rs`), whose doorbell wakes the shard's ring only when it sleeps, and the reply comes
//! back through a one-shot slot (`reply.rs`) the caller spins on briefly and then parks on.
//! Code that already runs on a shard (a task, or a closure given to [`Db::run_on`]) uses the
//! `*_async` variants: for the shard's own keys they run in place (zero hops), for other
//! shards' keys the reply wakes the caller's ring through `IORING_OP_MSG_RING`. The blocking
//! calls refuse to run on a shard's thread ([`ShardError::OnShardThread`]): they would stall
//! its ring.
//!
//! Where to look:
//! - this file: [`Db`], opening and closing;
//! - `builder.rs`: [`DbBuilder`] (shards, pool, durability, engine);
//! - `call.rs`: how a request reaches a shard and its reply comes back;
//! - `ops.rs`: get, insert, remove, multi-get, batches; `cross.rs`: batches across shards;
//!   `across.rs`: transactions with parts on several shards, committed through the same log;
//! - `iter.rs`: [`Range`], the streaming iterator merged across shards;
//! - `shard.rs`: a shard's thread; `inbox.rs`: its queue and doorbell; `context.rs`: what a
//!   shard's thread knows about itself; `manifest.rs`: the shard count and hash on disk;
//! - `stats.rs`: [`ShardedStats`].
//!
//! [`ShardError::OnShardThread`]: crate::ShardError::OnShardThread

mod across;
mod batch_log;
mod block;
mod builder;
mod call;
mod caller;
mod context;
mod cross;
mod gather;
mod here;
mod inbox;
mod iter;
mod manifest;
mod ops;
mod packed;
mod part;
mod reply;
mod shard;
mod shard_handle;
mod stats;
mod storage;
mod syncer;
mod tables;
mod transaction;
mod transaction_parts;

pub use crate::txn::AcrossCommit;
#[cfg(feature = "__internal")]
pub use batch_log::BATCH_LOG_FILE;
pub use builder::DbBuilder;
pub use caller::set_caller_thread_batch;
pub use here::{caller_reads, CallerReads};
pub use iter::{prefix_end, Range};
pub use manifest::SHARDS_MAX;
#[cfg(feature = "__internal")]
pub use manifest::{MANIFEST_FILE, SHARD_HASH};
pub use shard_handle::Shard;
pub use stats::ShardedStats;
#[cfg(feature = "__internal")]
pub use storage::ShardStorage;
pub use tables::{Table, SYSTEM_PREFIX};
pub use transaction::{DbTransaction, InTable, Pairs};

use crate::error::{OpenError, ShardError, WriteError};
use inbox::Inbox;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// An open database: a cheap handle (`Clone`) usable from any thread (`Send + Sync`). The
/// database closes when the last handle (and the last iterator) is dropped, or at
/// [`Db::close`].
#[derive(Clone)]
pub struct Db {
    shared: Arc<Shared>,
}

/// What every handle shares.
struct Shared {
    /// Unique per open database in this process: tells a shard thread of this database from
    /// one of another.
    id: u64,
    path: PathBuf,
    inboxes: Vec<Arc<Inbox>>,
    /// Per shard, what a read on the caller's thread reads in place (`here.rs`).
    views: Vec<here::ShardView>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// How long a blocking call spins for its reply before it parks.
    spin: Duration,
    closed: AtomicBool,
    /// Commits batches across shards; set once at open, after the batch log's recovery.
    coordinator: OnceLock<cross::Coordinator>,
    /// Held while a table is created on every shard (ids must agree, see `tables.rs`).
    table_creation: Mutex<()>,
    /// The clock transactions draw their timestamps (and part ids) from, shared by every
    /// shard so that wait-die compares one age on all of them (`transaction.rs`).
    clock: AtomicU64,
}

/// Identities of open databases.
static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

impl Db {
    /// Opens (or creates) the database in directory `path` with the defaults: one shard per
    /// CPU this process may use, the `auto` engine, a log made durable with `fdatasync` and
    /// group commit. See [`Db::builder`] for the rest.
    pub fn open(path: impl AsRef<Path>) -> Result<Db, OpenError> {
        DbBuilder::new(path.as_ref()).open()
    }

    /// A builder for a database at `path` with other settings.
    pub fn builder(path: impl AsRef<Path>) -> DbBuilder {
        DbBuilder::new(path.as_ref())
    }

    /// Starts the shards' threads, each opening its database; on any failure the ones already
    /// started are closed again.
    fn start(path: &Path, starts: Vec<shard::ShardStart>, spin: Duration) -> Result<Db, OpenError> {
        let mut inboxes = Vec::with_capacity(starts.len());
        let mut threads = Vec::with_capacity(starts.len());
        let mut views = Vec::with_capacity(starts.len());
        let id = starts.first().map_or(0, |s| s.db_id);
        for start in starts {
            match shard::start(start) {
                Ok((inbox, thread, view)) => {
                    inboxes.push(inbox);
                    threads.push(thread);
                    views.push(view);
                }
                Err(e) => {
                    close_started(&inboxes, threads);
                    return Err(e);
                }
            }
        }
        Ok(Db {
            shared: Arc::new(Shared {
                id,
                path: path.to_path_buf(),
                inboxes,
                views,
                threads: Mutex::new(threads),
                spin,
                closed: AtomicBool::new(false),
                coordinator: OnceLock::new(),
                table_creation: Mutex::new(()),
                clock: AtomicU64::new(1),
            }),
        })
    }

    /// Sets up cross-shard batches: with a log and several shards, recovers the batch log
    /// in `dir` (applying what a crash left half done); otherwise they need no log.
    fn start_coordinator(
        &self,
        dir: &Path,
        durability: crate::Durability,
        storage: Option<&dyn storage::ShardStorage>,
    ) -> Result<(), OpenError> {
        self.reconcile_tables()?;
        self.create_everywhere(cross::SYSTEM_TABLE)?;
        let coordinator = if durability.logged() && self.shard_count() > 1 {
            let sync = durability != crate::Durability::None;
            self.recover_batches(dir, sync, storage)?
        } else {
            cross::Coordinator::unlogged()
        };
        assert!(
            self.shared.coordinator.set(coordinator).is_ok(),
            "the coordinator is set once"
        );
        Ok(())
    }

    /// The database's directory (or file).
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The number of shards.
    pub fn shard_count(&self) -> usize {
        self.shared.inboxes.len()
    }

    /// Whether the calling thread is shard `shard`'s own (a task there).
    pub(super) fn is_local(&self, shard: usize) -> bool {
        context::local_handle(self.shared.id, shard).is_some()
    }

    /// The handle of shard `shard`'s own database when this thread runs that shard.
    pub(super) fn local_handle(&self, shard: usize) -> Option<crate::db::DbHandle> {
        context::local_handle(self.shared.id, shard)
    }

    /// The shard that owns `key`.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        manifest::shard_of(key, self.shard_count())
    }

    /// Makes everything written so far durable on every shard (and checkpoints it).
    pub fn flush(&self) -> Result<(), WriteError> {
        self.check_blocking_allowed()?;
        let replies = (0..self.shard_count())
            .map(|shard| self.submit_local(shard, flush_shard))
            .collect::<Result<Vec<_>, _>>()?;
        self.wait_all(replies)?.into_iter().collect()
    }

    /// Closes the database for every handle: each shard finishes its work, flushes and stops.
    /// The first failure is returned; later calls through any handle fail with
    /// [`ShardError::Closed`].
    pub fn close(self) -> Result<(), WriteError> {
        self.check_blocking_allowed()?;
        self.shared.close()
    }
}

impl Shared {
    /// The cross-shard commit (set before the database is handed out).
    /// Whether commits across shards go through the cross-shard batch log (the shards have
    /// a log).
    pub(super) fn logs_across(&self) -> bool {
        self.coordinator().logged
    }

    fn coordinator(&self) -> &cross::Coordinator {
        self.coordinator
            .get()
            .expect("the coordinator is set at open")
    }

    /// Sends every shard the close job, waits for each to report, joins the threads.
    fn close(&self) -> Result<(), WriteError> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Err(ShardError::Closed.into());
        }
        let waits: Vec<_> = self.inboxes.iter().map(|inbox| close_one(inbox)).collect();
        if context::current_shard_index().is_some() {
            // The last handle went away on a shard's thread (a task kept it): waiting for the
            // shards here would wait for this very thread. Each shard still flushes and stops
            // on its close job; a failure is only logged there.
            self.inboxes.iter().for_each(|inbox| inbox.mark_closing());
            return Ok(());
        }
        let mut first_failure = Ok(());
        for (inbox, reply) in self.inboxes.iter().zip(waits) {
            let outcome = match reply {
                Some(reply) => reply
                    .wait(Duration::ZERO)
                    .unwrap_or_else(|| Err(WriteError::Shard(inbox.reply_lost()))),
                None => Ok(()),
            };
            inbox.mark_closing();
            if first_failure.is_ok() {
                first_failure = outcome;
            }
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for thread in threads {
            let _ = thread.join();
        }
        first_failure
    }
}

/// Flushes a shard's database from a task (and syncs its data file off the ring when its ring
/// polls, see [`LocalDb::flush`](crate::LocalDb::flush)).
fn flush_shard(local: &shard::ShardLocal, reply: reply::ReplySender<Result<(), WriteError>>) {
    let handle = local.handle.clone();
    let off_ring = local
        .off_ring_sync
        .as_ref()
        .and_then(|(file, path)| Some((file.try_clone().ok()?, path.clone())));
    drop(local.io.spawn(async move {
        let mut flushed = handle.flush(off_ring.is_none()).await;
        if let (Ok(()), Some((file, path))) = (&flushed, off_ring) {
            flushed = file
                .sync_data()
                .map_err(|source| WriteError::Sync { path, source });
        }
        reply.send(flushed)
    }));
}

/// Pushes the close job to one shard; `None` when the shard is already down.
fn close_one(inbox: &Inbox) -> Option<reply::ReplyReceiver<Result<(), WriteError>>> {
    let (tx, rx) = reply::channel();
    let job: inbox::Job = Box::new(move |local: &shard::ShardLocal| {
        local.stopping.set(true);
        *local.close_reply.borrow_mut() = Some(tx);
    });
    inbox.push(job).ok().map(|()| rx)
}

/// Closes the shards started before a later one failed to open.
fn close_started(inboxes: &[Arc<Inbox>], threads: Vec<JoinHandle<()>>) {
    for inbox in inboxes {
        if let Some(reply) = close_one(inbox) {
            if let Some(Err(e)) = reply.wait(Duration::ZERO) {
                tracing::warn!("closing a shard after another failed to open: {e}");
            }
        }
    }
    for thread in threads {
        let _ = thread.join();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = self.close() {
            tracing::warn!("closing {} on drop failed: {e}", self.path.display());
        }
    }
}

/// Hands out identities for databases.
fn next_db_id() -> u64 {
    NEXT_DB_ID.fetch_add(1, Ordering::Relaxed)
}
