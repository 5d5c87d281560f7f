//! A shard's thread: it opens the shard's database (its own ring, executor, buffer pool slice,
//! B+trees and log), then serves its inbox until the database closes.
//!
//! The thread runs one future on its runtime, the dispatcher: it takes up to
//! [`JOBS_PER_PASS_MAX`] jobs from the inbox (each usually spawns a task, so requests that
//! fault pages overlap like the paper's fibers), lets the tasks run, and when the inbox is
//! empty arms the doorbell, checks once more, and awaits the doorbell. The runtime then
//! sleeps in its ring until a completion or a ring arrives: no spin.
//!
//! A panic anywhere on the shard (a task, a job) ends its thread: the inbox is marked down
//! with the panic's message, every caller waiting on it gets [`ShardError::Down`]
//! (crate::ShardError::Down), and the shard's database is leaked rather than dropped, since its
//! buffers may still be the kernel's to write into. The other shards go on.

use super::context::{self, CurrentShard};
use super::here::ShardView;
use super::inbox::Inbox;
use super::reply::{self, ReplySender};
use crate::db::{Db as LocalDb, DbHandle, Options};
use crate::error::{OpenError, ShardSetupError, WriteError};
use ringdb_io::{Doorbell, Io};
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Jobs the dispatcher takes from the inbox before it lets the tasks they spawned run.
const JOBS_PER_PASS_MAX: usize = 256;

/// What a job sees of its shard (on the shard's thread).
pub(super) struct ShardLocal {
    /// The shard's index.
    pub(super) index: usize,
    /// The shard's database.
    pub(super) handle: DbHandle,
    /// The shard's runtime, to spawn tasks.
    pub(super) io: Io,
    /// The engine and switches the shard's runtime runs with.
    pub(super) effective_io: ringdb_io::EffectiveIo,
    /// The data file, when a flush must sync it off the ring (an IOPOLL ring), and its path.
    pub(super) off_ring_sync: Option<(std::fs::File, PathBuf)>,
    /// Set by the close job: the dispatcher stops taking jobs.
    pub(super) stopping: Cell<bool>,
    /// Where the result of closing goes, once the dispatcher has stopped.
    pub(super) close_reply: RefCell<Option<ReplySender<Result<(), WriteError>>>>,
}

/// How to start a shard.
pub(super) struct ShardStart {
    /// The shard's index.
    pub(super) index: usize,
    /// The database's identity.
    pub(super) db_id: u64,
    /// The shard's directory (or file).
    pub(super) path: PathBuf,
    /// Its options (its slice of the pool, its engine; `io.cpu` pins it).
    pub(super) options: Options,
    /// Where its files are, when not at `path`.
    pub(super) storage: Option<Arc<dyn super::storage::ShardStorage>>,
}

/// A started shard: its inbox, its thread, and what readers on other threads read in place.
pub(super) type Started = (Arc<Inbox>, JoinHandle<()>, ShardView);

/// Starts shard `start.index`'s thread and waits until its database is open.
pub(super) fn start(start: ShardStart) -> Result<Started, OpenError> {
    let index = start.index;
    let inbox = Arc::new(Inbox::new(index));
    let (opened_tx, opened_rx) = reply::channel::<Result<ShardView, OpenError>>();
    let thread_inbox = inbox.clone();
    let thread = std::thread::Builder::new()
        .name(format!("ringdb-shard-{index}"))
        .spawn(move || run(start, thread_inbox, opened_tx))
        .map_err(|source| ShardSetupError::Thread {
            shard: index,
            source,
        })?;
    match opened_rx.wait(Duration::ZERO) {
        Some(Ok(view)) => Ok((inbox, thread, view)),
        Some(Err(source)) => {
            let _ = thread.join();
            Err(OpenError::Shard {
                shard: index,
                source: Box::new(source),
            })
        }
        None => {
            let _ = thread.join();
            let reason = match inbox.lost() {
                crate::ShardError::Down { reason, .. } => reason,
                other => Arc::from(other.to_string()),
            };
            Err(ShardSetupError::Died {
                shard: index,
                reason,
            }
            .into())
        }
    }
}

/// The shard's thread.
fn run(start: ShardStart, inbox: Arc<Inbox>, opened: ReplySender<Result<ShardView, OpenError>>) {
    let (mut db, doorbell) = match open(&start) {
        Ok(opened_db) => opened_db,
        Err(e) => {
            inbox.stop("its database could not be opened");
            opened.send(Err(e));
            return;
        }
    };
    inbox.set_doorbell(doorbell.clone());
    context::enter(CurrentShard {
        db_id: start.db_id,
        index: start.index,
        doorbell: doorbell.clone(),
        handle: db.handle(),
    });
    let (pool, roots) = db.handle().read_view();
    opened.send(Ok(ShardView::new(pool, roots)));
    let local = ShardLocal {
        index: start.index,
        handle: db.handle(),
        io: db.runtime().io(),
        effective_io: db.runtime().effective_io(),
        off_ring_sync: db
            .off_ring_sync_file()
            .map(|f| (f, db.path().to_path_buf())),
        stopping: Cell::new(false),
        close_reply: RefCell::new(None),
    };
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        serve(&mut db, &local, &inbox, &doorbell)
    }));
    finish(db, local, &inbox, served);
}

/// Opens the shard's database and its runtime's doorbell.
fn open(start: &ShardStart) -> Result<(LocalDb, Doorbell), OpenError> {
    let mut db = match &start.storage {
        Some(storage) => LocalDb::open_on(
            storage.shard(start.index),
            &start.path,
            start.options.clone(),
        )?,
        None => LocalDb::open(&start.path, start.options.clone())?,
    };
    let doorbell = db.runtime().doorbell().map_err(OpenError::Io)?;
    Ok((db, doorbell))
}

/// Runs the dispatcher until the database closes, then the tasks still live.
fn serve(
    db: &mut LocalDb,
    local: &ShardLocal,
    inbox: &Inbox,
    doorbell: &Doorbell,
) -> Result<(), ringdb_io::IoError> {
    let io = db.runtime().io();
    db.runtime()
        .block_on(dispatch(local, inbox, doorbell, io))?;
    db.runtime().run()
}

/// Takes jobs from the inbox until a close stops it; sleeps on the doorbell when idle.
async fn dispatch(local: &ShardLocal, inbox: &Inbox, doorbell: &Doorbell, io: Io) {
    // Ends with the close job (see `Db::close`); every round takes a job or sleeps until one
    // is pushed.
    loop {
        let mut taken = 0;
        while taken < JOBS_PER_PASS_MAX {
            let Some(job) = inbox.pop() else { break };
            job(local);
            taken += 1;
        }
        if local.stopping.get() {
            return;
        }
        if taken == JOBS_PER_PASS_MAX {
            io.yield_now().await;
            continue;
        }
        doorbell.arm();
        if !inbox.is_empty() {
            continue;
        }
        io.doorbell_rung().await;
    }
}

/// After serving: close the database and report it, or, after a failure, mark the shard
/// down (and after a panic leak its database: the kernel may still own its buffers).
fn finish(
    db: LocalDb,
    local: ShardLocal,
    inbox: &Inbox,
    served: std::thread::Result<Result<(), ringdb_io::IoError>>,
) {
    let close_reply = local.close_reply.borrow_mut().take();
    drop(local);
    context::leave();
    match served {
        Ok(Ok(())) => {
            let closed = db.close();
            if let Err(e) = &closed {
                tracing::error!("closing a shard's database failed: {e}");
            }
            inbox.stop("the database was closed");
            if let Some(reply) = close_reply {
                reply.send(closed);
            }
        }
        Ok(Err(e)) => {
            tracing::error!("shard runtime failed: {e}");
            inbox.stop(&format!("its runtime failed: {e}"));
            drop(db);
        }
        Err(panic) => {
            let message = panic_message(&panic);
            tracing::error!("shard panicked: {message}");
            inbox.stop(&format!("it panicked: {message}"));
            std::mem::forget(db);
        }
    }
}

/// A panic payload's message.
fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}
