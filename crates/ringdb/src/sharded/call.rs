//! How a request reaches the shard that owns it and how its reply comes back.
//!
//! A request is a closure over the shard's [`DbHandle`] that returns a future; it travels as a
//! job through the shard's inbox, runs there as a task of its own (so that a request that
//! faults a page waits without holding up the others), and its output comes back through a
//! one-shot reply slot. Blocking callers wait on the slot ([`Db::call`]); tasks await it
//! ([`Db::call_async`]), and when they run on the owning shard already they skip the trip.

use super::context;
use super::inbox::Job;
use super::reply::{self, ReplyReceiver};
use super::shard::ShardLocal;
use super::Db;
use crate::db::DbHandle;
use crate::error::ShardError;
use std::future::Future;

impl Db {
    /// Sends `request` to `shard`; the reply comes through the returned receiver.
    pub(super) fn submit<T, F, Fut>(
        &self,
        shard: usize,
        request: F,
    ) -> Result<ReplyReceiver<T>, ShardError>
    where
        F: FnOnce(DbHandle) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = reply::channel();
        self.submit_to(shard, request, move |value| tx.send(value))?;
        Ok(rx)
    }

    /// Sends `request` to `shard`; its output goes to `deliver` (on the shard's thread). A
    /// request that never runs drops `deliver` unsent.
    pub(super) fn submit_to<T, F, Fut, D>(
        &self,
        shard: usize,
        request: F,
        deliver: D,
    ) -> Result<(), ShardError>
    where
        F: FnOnce(DbHandle) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        D: FnOnce(T) + Send + 'static,
    {
        assert!(shard < self.shard_count(), "shard {shard} out of range");
        let job: Job = Box::new(move |local: &ShardLocal| {
            let future = request(local.handle.clone());
            drop(local.io.spawn(async move { deliver(future.await) }));
        });
        self.shared.inboxes[shard].push(job)
    }

    /// Sends a job that runs on `shard` with its [`ShardLocal`] (its runtime, to spawn tasks).
    pub(super) fn submit_local<T, F>(
        &self,
        shard: usize,
        job: F,
    ) -> Result<ReplyReceiver<T>, ShardError>
    where
        F: FnOnce(&ShardLocal, reply::ReplySender<T>) + Send + 'static,
        T: Send + 'static,
    {
        assert!(shard < self.shard_count(), "shard {shard} out of range");
        let (tx, rx) = reply::channel();
        let job: Job = Box::new(move |local: &ShardLocal| job(local, tx));
        self.shared.inboxes[shard].push(job)?;
        Ok(rx)
    }

    /// Waits (blocking) for a reply from `shard`.
    pub(super) fn wait<T>(&self, shard: usize, reply: ReplyReceiver<T>) -> Result<T, ShardError> {
        let inbox = &self.shared.inboxes[shard];
        reply
            .wait_unless(self.shared.spin, || inbox.is_down())
            .ok_or_else(|| inbox.reply_lost())
    }

    /// Waits (blocking) for one reply from every shard, `replies[i]` from shard `i`.
    pub(super) fn wait_all<T>(&self, replies: Vec<ReplyReceiver<T>>) -> Result<Vec<T>, ShardError> {
        replies
            .into_iter()
            .enumerate()
            .map(|(shard, reply)| self.wait(shard, reply))
            .collect()
    }

    /// Runs `request` on `shard` and blocks for its output (not on a shard's thread).
    pub(super) fn call<T, F, Fut>(&self, shard: usize, request: F) -> Result<T, ShardError>
    where
        F: FnOnce(DbHandle) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        self.check_blocking_allowed()?;
        let reply = self.submit(shard, request)?;
        self.wait(shard, reply)
    }

    /// Runs `request` on `shard` from a task: in place when the task runs on that shard
    /// already, else through its inbox (the reply rings this task's runtime).
    pub(super) async fn call_async<T, F, Fut>(
        &self,
        shard: usize,
        request: F,
    ) -> Result<T, ShardError>
    where
        F: FnOnce(DbHandle) -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        if let Some(handle) = context::local_handle(self.shared.id, shard) {
            return Ok(request(handle).await);
        }
        let reply = self.submit(shard, request)?;
        let inbox = &self.shared.inboxes[shard];
        inbox.watch(reply.loseable());
        reply.await.ok_or_else(|| inbox.reply_lost())
    }

    /// Refuses a blocking call on a shard's thread: it would stall that shard's ring (and
    /// wait for itself when the key is its own).
    pub(super) fn check_blocking_allowed(&self) -> Result<(), ShardError> {
        match context::current_shard_index() {
            Some(shard) => Err(ShardError::OnShardThread { shard }),
            None => Ok(()),
        }
    }
}
