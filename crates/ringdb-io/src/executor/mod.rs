//! A single-threaded executor whose tasks park on I/O (the paper's fibers, Sec. 3.3.2, as
//! stackless futures), over one [`Engine`] owned by the thread (ring per thread).
//!
//! # The loop
//! One *pass* polls every task that was ready when the pass began, once (each may queue
//! requests; tasks woken during the pass run in the next one, so a task spinning on
//! [`yield_now`] cannot starve the I/O). Then: hand queued requests to the kernel as the
//! [`Batching`] policy says -> reap completions -> wake their tasks. When no task is ready, what
//! is queued goes to the kernel together with the wait (one `io_uring_enter`). When no task is
//! ready and nothing is in flight while tasks still wait, [`Runtime::block_on`] and
//! [`Runtime::run`] return an "executor stalled" error instead of hanging, unless a task awaits
//! the [`Doorbell`]: then the runtime sleeps until it rings.
//!
//! # Batching (paper Sec. 3.3.3)
//! - [`Batching::Each`]: every request is submitted right after it is queued (one enter each).
//! - [`Batching::Fixed`]`(n)`: submit once `n` requests are queued; otherwise they wait until no
//!   task is ready (and go out with the wait), the ring is full, or a pass queued nothing new
//!   (so a task spinning on `yield_now` cannot hold back requests it waits for).
//! - [`Batching::Adaptive`]: after each request, if fewer than
//!   [`adaptive_low_water`](crate::config::adaptive_low_water)`(depth) = max(1, depth / 4)`
//!   requests are *at the device* (`in_flight - pending`), submit at once so the device does not
//!   idle; otherwise let them accumulate until
//!   [`adaptive_batch`](crate::config::adaptive_batch)`(depth)` (an eighth of the depth, 3 to
//!   16) are queued, and hand a partial batch over with the loop's next enter (the reap that
//!   runs completions' task work, or the wait when no task is ready) rather than with an enter
//!   of its own. A quarter of the depth still outstanding covers the time the loop takes to
//!   get there, and every enter that hands requests over may ring the device's doorbell (in a
//!   VM, an exit to the host). A pass that queued nothing new flushes what is left. The rules
//!   are [`Batching::flush_now`] and [`Batching::flush_at_end_of_pass`] in `config.rs`.
//!
//! # Buffers and in-flight safety
//! Buffers pass by value into an I/O and come back with its result (`(Result, B)`), so the
//! runtime owns them while the kernel may write into them. When an I/O future is dropped while
//! its request is in flight (e.g. its task is dropped), its buffer moves into the runtime's
//! orphan table, keyed by the request's slot, and is released only when the completion is
//! reaped. Dropping the runtime drops the tasks, then waits for every completion, and only then
//! releases the orphans, the buffer pool and the engine. If that wait fails, the orphans and
//! the pool are leaked rather than freed under the kernel.
//!
//! # Ring depth
//! A request that finds the engine full (`in_flight == depth`), or other requests already
//! waiting, parks in a FIFO and is woken when a completion frees a slot: no busy loop, no error.
//! A parked future that is dropped leaves the FIFO and passes its wake-up on.
//!
//! # Wakers
//! Wakers are ordinary `std::task::Waker`s built from an `Arc` (no unsafe code): waking pushes
//! the task's id onto a mutex-protected ready queue, at most once until the task is polled.
//! They are `Send` and may be woken from any thread, but the runtime is driven by its own
//! thread only: a waker woken from another thread does not interrupt a blocking wait, and the
//! stall check cannot know about it. What does is the [`Doorbell`]: other threads ring it and a
//! task awaits [`Io::doorbell_rung`]; the runtime then sleeps until rung instead of stalling,
//! and its engine's waits end at a ring (`doorbell.rs`). Waking a finished task is harmless
//! (ids carry a generation).
//!
//! # Invariants, asserted where the state lives
//! - A task is polled only when it was woken (its waker is in the ready queue), and never
//!   while it is already being polled.
//! - A request slot goes `Free -> InFlight -> Completed -> Free` (the future takes the
//!   result), or `InFlight -> Abandoned -> Free` (the future was dropped; its buffer waits for
//!   the completion); every other change is a bug and panics. The slots in flight always
//!   number what the engine says it has in flight.
//! - An I/O future returns its buffer only before its request was pushed or after the
//!   result was taken: never while the kernel may write into it.
//! - The FIFOs of parked futures (ring room, buffer leases) hold tickets in increasing order,
//!   and a parked ticket is in its FIFO until it takes its turn or is cancelled.
//! - Loops that wait (the drain on drop, the wait for a completion) are bounded and fail with
//!   a typed [`IoError`](crate::error::IoError) when the bound is met.
//!
//! # Layout
//! - `runtime.rs`: [`Runtime`]: construction, [`Runtime::block_on`], [`Runtime::run`], the
//!   pass loop. `shutdown.rs`: dropping it (tasks, then the drain, then the buffers).
//! - `shared.rs`: the state the runtime, its [`Io`] handles and its futures share.
//! - `task.rs`: the task slab; `waker.rs`: the ready queue and the wakers that fill it;
//!   `join.rs`: [`JoinHandle`] and [`yield_now`].
//! - `io.rs`: the [`Io`] handle; `op.rs`: the future of one request; `slots.rs`: the request
//!   slots (and the buffers of dropped futures); `fifo.rs`: futures waiting for their turn.
//! - `batching.rs`: when queued requests go to the kernel; `submit_together.rs`:
//!   [`Io::submit_together`]; `stall.rs`: telling a stall from a wait.
//! - `buffers.rs`: [`IoBuf`]; `pool.rs`: the runtime's buffer pool and [`PoolBuf`] leases.
//! - `stats.rs`: [`RuntimeStats`].
//! - `doorbell.rs`: [`Doorbell`] and [`DoorbellRung`]: waking the runtime from other threads.
//!
//! [`Engine`]: crate::engine::Engine
//! [`Batching`]: crate::config::Batching
//! [`Batching::Each`]: crate::config::Batching::Each
//! [`Batching::Fixed`]: crate::config::Batching::Fixed
//! [`Batching::Adaptive`]: crate::config::Batching::Adaptive
//! [`Batching::flush_now`]: crate::config::Batching::flush_now

#![warn(missing_docs)]

mod batching;
mod buffers;
mod doorbell;
mod fifo;
mod io;
mod join;
mod op;
mod pool;
mod runtime;
mod shared;
mod shutdown;
mod slots;
mod stall;
mod stats;
mod submit_together;
mod task;
mod waker;

#[cfg(test)]
mod tests;

pub use buffers::IoBuf;
pub use doorbell::{Doorbell, DoorbellRung};
pub use io::Io;
pub use join::{yield_now, JoinHandle, YieldNow};
pub use pool::PoolBuf;
pub use runtime::Runtime;
pub use stats::RuntimeStats;
pub use submit_together::SubmitTogether;
