//! What the runtime counts, beside its engine's counters: how often it polled, submitted and
//! waited, and how many requests each submit carried (the batching the module docs explain).

use super::shared::Inner;
use crate::engine::EngineStats;
use serde::Serialize;

/// What the runtime counts, beside its engine's counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RuntimeStats {
    /// The engine's own counters.
    pub engine: EngineStats,
    /// Tasks started with `spawn`.
    pub tasks_spawned: u64,
    /// Polls of tasks and of `block_on`'s future.
    pub polls: u64,
    /// Submits by the runtime that handed at least one request to the kernel.
    pub submit_batches: u64,
    /// Requests per such submit.
    pub requests_per_batch: f64,
    /// Times the loop blocked in the kernel waiting for completions.
    pub waits: u64,
    /// Buffers of dropped I/O futures released once their completion arrived.
    pub orphans_released: u64,
    /// Times the runtime slept (nothing ready, nothing in flight) until its doorbell rang.
    pub doorbell_sleeps: u64,
    /// Doorbell wake-ups that arrived as an eventfd write (seen by the engine's poll of the
    /// eventfd or by a `poll(2)` sleep).
    pub doorbell_eventfd_wakes: u64,
    /// Doorbell wake-ups that arrived as a message from another ring (`IORING_OP_MSG_RING`).
    pub doorbell_message_wakes: u64,
    /// Doorbell messages this runtime's ring sent for rings made on its thread.
    pub doorbell_messages_posted: u64,
    /// Doorbell messages the kernel could not post (their targets still see the ring: a full
    /// completion queue does not let them sleep).
    pub doorbell_failed_posts: u64,
}

impl Inner {
    /// The runtime's counters with the engine's, and the requests per batch worked out.
    pub(super) fn stats_now(&self) -> RuntimeStats {
        let mut stats = self.stats.get();
        stats.engine = self.engine.borrow().stats();
        stats.requests_per_batch = if stats.submit_batches == 0 {
            0.0
        } else {
            self.batched_requests.get() as f64 / stats.submit_batches as f64
        };
        stats
    }
}
