//! When queued requests go to the kernel (the module docs' *Batching*): right after a push,
//! when the policy says so; at the end of a pass; or together with the loop's wait.
//!
//! The policy itself is [`Batching::flush_now`] in `config.rs`; this is where the executor
//! applies it, and where it counts what each submit handed over.

use super::shared::Inner;
use crate::config::Batching;
use crate::error::Result;

impl Inner {
    /// Hands queued requests to the kernel (waiting for `wait_for` completions).
    pub(super) fn submit(&self, wait_for: usize) -> Result<()> {
        let mut engine = self.engine.borrow_mut();
        let before = engine.stats().submitted;
        let result = engine.submit(wait_for);
        let handed = engine.stats().submitted - before;
        drop(engine);
        self.bump(|s| {
            if wait_for > 0 {
                s.waits += 1;
            }
            if handed > 0 {
                s.submit_batches += 1;
            }
        });
        self.batched_requests
            .set(self.batched_requests.get() + handed);
        result
    }

    /// After a push: submits at once when the policy says so and nothing holds requests
    /// back. Without other ready tasks the loop submits right away with its wait anyway.
    /// A failure leaves the requests queued (their buffers stay with their futures) and is
    /// reported by the loop.
    pub(super) fn flush_after_push(&self) {
        let flush = self.hold.get() == 0
            && match self.batching {
                Batching::Each => true,
                policy => {
                    self.has_ready() && {
                        let engine = self.engine.borrow();
                        policy.flush_now(engine.pending(), engine.in_flight(), engine.depth())
                    }
                }
            };
        if flush {
            if let Err(error) = self.submit(0) {
                self.record_failure(error);
            }
        }
    }

    /// Whether requests still queued at the end of a pass go to the kernel now (`pass_pushed`:
    /// the pass queued something new); the rule is [`Batching::flush_at_end_of_pass`].
    pub(super) fn flush_at_end_of_pass(&self, pass_pushed: bool) -> bool {
        let engine = self.engine.borrow();
        self.batching.flush_at_end_of_pass(
            engine.pending(),
            engine.in_flight(),
            engine.depth(),
            pass_pushed,
        )
    }
}
