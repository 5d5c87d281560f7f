//! A shard's inbox: the queue other threads hand it work through, and its doorbell.
//!
//! Any thread pushes a job (a closure run on the shard's thread with its [`ShardLocal`]) and
//! rings the shard's doorbell. Ringing costs one atomic while the shard is busy; only when the
//! shard has armed its doorbell (it found the queue empty and is about to wait) does the ring
//! make a syscall: an eventfd write, or from another shard's io_uring thread an
//! `IORING_OP_MSG_RING` straight into the shard's ring. The shard arms, re-checks the queue,
//! then waits, so a job pushed in between is never missed.
//!
//! When the shard stops (closed, panicked, its runtime failed), the inbox is marked down with
//! the reason and emptied; a job pushed after that is refused, and one that raced with the
//! stop is dropped by whichever side sees it last, which drops its reply sender: its caller
//! learns the reply is lost and asks the inbox why.

use super::reply::Loseable;
use super::shard::ShardLocal;
use crate::error::ShardError;
use crossbeam_queue::SegQueue;
use ringdb_io::Doorbell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Work for a shard: runs on its thread, usually spawning a task there.
pub(super) type Job = Box<dyn FnOnce(&ShardLocal) + Send>;

/// The queue and doorbell of one shard.
pub(super) struct Inbox {
    index: usize,
    queue: SegQueue<Job>,
    doorbell: OnceLock<Doorbell>,
    /// Why the shard stopped, once it did.
    down: OnceLock<Arc<str>>,
    /// The database is closing: a lost reply means "closed", not "down".
    closing: AtomicBool,
    /// Replies tasks (on other shards) await from this shard, lost at the stop. Entries of
    /// replies that came are pruned whenever the list is full.
    awaited: Mutex<Vec<Weak<dyn Loseable>>>,
}

/// Entries the awaited list holds before it is first pruned of the replies that came.
const AWAITED_PRUNE_AT: usize = 64;

/// The longest a waiter whose reply was lost waits for the stopping shard to mark its inbox
/// down (it takes the rest of an unwind: microseconds), and how often it looks.
const STOP_MARK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
const STOP_MARK_POLL: std::time::Duration = std::time::Duration::from_micros(50);

impl Inbox {
    /// The inbox of shard `index`, before its thread has a doorbell.
    pub(super) fn new(index: usize) -> Inbox {
        Inbox {
            index,
            queue: SegQueue::new(),
            doorbell: OnceLock::new(),
            down: OnceLock::new(),
            closing: AtomicBool::new(false),
            awaited: Mutex::new(Vec::new()),
        }
    }

    /// The doorbell of the shard's runtime, set once its database is open.
    pub(super) fn set_doorbell(&self, doorbell: Doorbell) {
        assert!(
            self.doorbell.set(doorbell).is_ok(),
            "a shard's doorbell is set once"
        );
    }

    /// Queues `job` and wakes the shard; refused when the shard is down.
    pub(super) fn push(&self, job: Job) -> Result<(), ShardError> {
        if self.down.get().is_some() {
            return Err(self.lost());
        }
        self.queue.push(job);
        if self.down.get().is_some() {
            // The shard stopped while the job went in: it may never look again.
            self.discard();
            return Err(self.lost());
        }
        if let Some(doorbell) = self.doorbell.get() {
            doorbell.ring();
        }
        Ok(())
    }

    /// The next job, in the order they were pushed.
    pub(super) fn pop(&self) -> Option<Job> {
        self.queue.pop()
    }

    /// Whether the shard stopped.
    pub(super) fn is_down(&self) -> bool {
        self.down.get().is_some()
    }

    /// Whether no job waits.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Marks the shard down for `reason`, drops every job still queued, and declares lost
    /// every reply a task still awaits from it.
    pub(super) fn stop(&self, reason: &str) {
        let _first_reason_wins = self.down.set(Arc::from(reason));
        self.discard();
        let awaited = std::mem::take(&mut *self.awaited_list());
        awaited
            .iter()
            .filter_map(Weak::upgrade)
            .for_each(|r| r.lose());
    }

    /// A task is about to await `reply` from this shard: should the shard go down first, the
    /// reply is declared lost instead of awaited forever.
    pub(super) fn watch(&self, reply: Weak<dyn Loseable>) {
        {
            let mut awaited = self.awaited_list();
            // Pruned when full, before it would grow: amortized O(1) per push, and at most
            // twice as long as the replies still awaited (or AWAITED_PRUNE_AT).
            if awaited.len() >= AWAITED_PRUNE_AT && awaited.len() == awaited.capacity() {
                awaited.retain(|r| r.strong_count() > 0);
            }
            awaited.push(reply.clone());
        }
        // Down already (the stop may have emptied the list before the push): lose it here.
        if self.is_down() {
            if let Some(reply) = reply.upgrade() {
                reply.lose();
            }
        }
    }

    fn awaited_list(&self) -> std::sync::MutexGuard<'_, Vec<Weak<dyn Loseable>>> {
        self.awaited.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The database is closing: later losses are reported as [`ShardError::Closed`].
    pub(super) fn mark_closing(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Why a reply from this shard was lost, asked by its waiter. A sender dropped unsent
    /// means the shard is stopping (a panic unwinding its tasks, a failed runtime, a close);
    /// the waiter can see the loss before the shard's thread marks the inbox down. It waits
    /// (bounded) for that mark, so the error names the real reason and every later call,
    /// including reads in place on the caller's thread, sees the shard down too.
    pub(super) fn reply_lost(&self) -> ShardError {
        let until = std::time::Instant::now() + STOP_MARK_WAIT;
        while !self.is_down()
            && !self.closing.load(Ordering::Acquire)
            && std::time::Instant::now() < until
        {
            std::thread::sleep(STOP_MARK_POLL);
        }
        self.lost()
    }

    /// Why a reply from this shard was lost.
    pub(super) fn lost(&self) -> ShardError {
        if self.closing.load(Ordering::Acquire) {
            return ShardError::Closed;
        }
        ShardError::Down {
            shard: self.index,
            reason: self
                .down
                .get()
                .cloned()
                .unwrap_or_else(|| Arc::from("its thread stopped")),
        }
    }

    /// Drops every queued job (their reply senders report the loss). Bounded: once the inbox
    /// is down no push keeps its job, so the queue only shrinks.
    fn discard(&self) {
        while let Some(job) = self.queue.pop() {
            drop(job);
        }
    }
}
