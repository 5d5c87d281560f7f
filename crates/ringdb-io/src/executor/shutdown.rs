//! Dropping the runtime without freeing a buffer under the kernel.
//!
//! The tasks go first: an I/O future dropped with its request in flight moves its buffer into
//! the request's slot. Then every completion is waited for (the drain), which releases those
//! buffers one by one as their completions arrive. Only then do the engine, the slots and the
//! pool go, with the last handle (in that order: see [`Inner`]). When the drain fails (the
//! engine errs, or its waits stop returning completions), the slots with their buffers and
//! the pool are leaked rather than freed while the kernel may still write into them.

use super::runtime::Runtime;
use super::shared::Inner;
use super::stall::WaitEnds;
use crate::error::Result;

impl Drop for Runtime {
    fn drop(&mut self) {
        let inner = &self.inner;
        inner.closed.set(true);
        inner.stop_doorbell();
        // Dropping a task may run code that touches the runtime, so the slab is not borrowed
        // meanwhile; a closed runtime spawns nothing, so one round empties it.
        drop(inner.tasks.take_all());
        assert!(
            inner.tasks.is_empty(),
            "a task was spawned on a closed runtime"
        );
        let _ = inner.drain();
    }
}

impl Inner {
    /// Waits for every request in flight, routing completions as usual (orphans are released,
    /// live futures get their results). On failure the orphans and the pool are leaked: the
    /// kernel may still write into them. A no-op once leaked.
    pub(super) fn drain(&self) -> Result<()> {
        if self.leaked.get() {
            return Ok(());
        }
        let drained = self.wait_for_every_completion();
        match drained {
            Ok(()) => assert_eq!(
                self.slots.borrow().in_flight(),
                0,
                "drained with slots in flight"
            ),
            Err(_) => self.leak_buffers(),
        }
        drained
    }

    /// Bounded: each round reaps at least one completion, or fails
    /// ([`Inner::wait_for_completion`]), and no request is pushed meanwhile.
    fn wait_for_every_completion(&self) -> Result<()> {
        let mut scratch = Vec::new();
        while self.engine.borrow().in_flight() > 0 {
            self.wait_for_completion(&mut scratch, WaitEnds::AtCompletion)?;
        }
        Ok(())
    }

    /// Forgets the slots (with the orphans in them) and the pool: never freed.
    fn leak_buffers(&self) {
        self.leaked.set(true);
        let slots = std::mem::take(&mut *self.slots.borrow_mut());
        std::mem::forget(slots);
        if let Some(pool) = &self.pool {
            std::mem::forget(pool.clone());
        }
    }
}
