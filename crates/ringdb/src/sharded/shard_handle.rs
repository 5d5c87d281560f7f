//! [`Shard`]: what a closure run on a shard ([`Db::run_on`]) gets: the shard's own database
//! (zero hops, no locks: the thread-per-core path) and its runtime to spawn tasks on, with the
//! whole [`Db`] for keys that live elsewhere.

use super::Db;
use crate::db::DbHandle;
use crate::error::ShardError;
use ringdb_io::{Io, JoinHandle};
use std::future::Future;

/// A shard, as code running on its thread sees it. Not `Send`: it lives on the shard.
pub struct Shard {
    index: usize,
    handle: DbHandle,
    io: Io,
    db: Db,
}

impl Shard {
    /// The shard's index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The shard's own database: every key it holds is one whose [`Db::shard_of`] is this
    /// shard. Operations through it take no hop and no lock; a key of another shard written
    /// here would be found by nobody, so [`Shard::owns`] says which keys belong.
    pub fn local(&self) -> &DbHandle {
        &self.handle
    }

    /// Whether `key` belongs to this shard.
    pub fn owns(&self, key: &[u8]) -> bool {
        self.db.shard_of(key) == self.index
    }

    /// The whole database: its `*_async` methods reach any shard from here (in place for
    /// this shard's keys).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The shard's runtime, for I/O of its own.
    pub fn io(&self) -> &Io {
        &self.io
    }

    /// The doorbell of the shard's runtime: ringing it (from any thread) ends the runtime's
    /// sleep in its ring, so a task woken from another thread is polled at once.
    pub fn doorbell(&self) -> Option<ringdb_io::Doorbell> {
        super::context::current_doorbell()
    }

    /// Starts a task on the shard.
    pub fn spawn<T: 'static>(&self, future: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        self.io.spawn(future)
    }
}

impl Db {
    /// Runs `task` on shard `shard` (its thread, its runtime) and blocks until the future it
    /// returns finishes: the way to run thread-per-core code (many tasks per shard, each
    /// using [`Shard::local`]) from an ordinary thread.
    pub fn run_on<T, F, Fut>(&self, shard: usize, task: F) -> Result<T, ShardError>
    where
        F: FnOnce(Shard) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        self.check_blocking_allowed()?;
        let reply = self.spawn_on(shard, task)?;
        self.wait(shard, reply)
    }

    /// Runs `request` with the own database of shard `shard` and awaits its output, from a
    /// task (on a shard or any runtime): in place when the task runs on that shard already,
    /// else through the shard's inbox, the reply waking this task's ring. The way one shard's
    /// task works on another's data, e.g. a transaction's part there.
    pub async fn call_on_async<T, F, Fut>(&self, shard: usize, request: F) -> Result<T, ShardError>
    where
        F: FnOnce(DbHandle) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        assert!(shard < self.shard_count(), "shard {shard} out of range");
        self.call_async(shard, request).await
    }

    /// Runs `task` on the shard that owns `key` (see [`Db::run_on`]).
    pub fn run_on_key<T, F, Fut>(&self, key: &[u8], task: F) -> Result<T, ShardError>
    where
        F: FnOnce(Shard) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        self.run_on(self.shard_of(key), task)
    }

    /// Runs `task` on every shard at once and blocks until all have finished; their outputs
    /// in shard order.
    pub fn run_on_each<T, F, Fut>(&self, task: F) -> Result<Vec<T>, ShardError>
    where
        F: Fn(Shard) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        self.check_blocking_allowed()?;
        let replies = (0..self.shard_count())
            .map(|shard| self.spawn_on(shard, task.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        self.wait_all(replies)
    }

    /// Starts `task` on `shard`; its output comes through the receiver.
    fn spawn_on<T, F, Fut>(
        &self,
        shard: usize,
        task: F,
    ) -> Result<super::reply::ReplyReceiver<T>, ShardError>
    where
        F: FnOnce(Shard) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let db = self.clone();
        self.submit_local(shard, move |local, reply| {
            let future = task(Shard {
                index: local.index,
                handle: local.handle.clone(),
                io: local.io.clone(),
                db,
            });
            drop(local.io.spawn(async move { reply.send(future.await) }));
        })
    }
}
