//! The ring core: one io_uring driver, written once, that every io_uring user in ringdb sits on
//! (the `uring`/`uring-sync` and `uring-passthrough` engines, and `ringdb-net`'s transports).
//!
//! A [`Ring`] is an `io_uring` instance plus the policy around it that is easy to get subtly
//! wrong when it is written several times:
//! - **setup** from a [`RingSetup`] (setup mode, SQPOLL, IOPOLL, queue sizes, a registered ring
//!   fd), generic over the entry size (64-byte SQEs and 16-byte CQEs, or SQE128/CQE32 for NVMe
//!   passthrough), with typed refusals that say why the kernel said no;
//! - **entering** the kernel: every `io_uring_enter` goes through one counted function that uses
//!   the registered ring index when there is one, retries `EINTR`, and reports `EBUSY`/`EAGAIN` as
//!   no progress;
//! - **submitting by policy**: without SQPOLL, queued entries go to the kernel with the next enter
//!   (together with a wait when one is asked for); with SQPOLL the poller takes them by itself
//!   and the core enters only to wake it or to wait; on IOPOLL rings and rings with deferred task
//!   work, reaping enters with `GETEVENTS` so completions are found;
//! - **room in the submission queue**: a full SQ is waited out, never reported as an error. With
//!   SQPOLL the poller can post a completion *before* it publishes the SQ head it consumed, so a
//!   caller that counts "fewer requests in flight than the depth" can still find the SQ full: the
//!   core then waits with `IORING_ENTER_SQ_WAIT` (waking the poller if it sleeps) and retries;
//! - **messages between rings** (`IORING_OP_MSG_RING`): post a completion with a payload to
//!   another thread's ring ([`Ring::post_message`] to a [`RingAddress`]); the thread waiting on that
//!   ring wakes up. This is how a thread-per-core design hands work between cores.
//!
//! What a request *means* (reads, writes, NVMe commands, sends) is the user's business: the core
//! only moves entries. The kernel may write into memory an entry names until that entry's
//! completion arrives; the core never frees anything, so that contract stays with the user
//! (see the `unsafe` [`Ring::push`]).

mod enter;
mod message;
mod register;
mod setup;
mod submit;

pub use message::{RingAddress, RingMessage};
pub use setup::RingSetup;

use enter::EnterTarget;
use io_uring::{cqueue, squeue, IoUring};

/// Counters of one ring, as it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// `io_uring_enter` calls made (submits, waits, wake-ups, reaps).
    pub enters: u64,
    /// Entries handed to the kernel (for SQPOLL: to the poller).
    pub submitted: u64,
    /// Times a push found the submission queue full and waited for room.
    pub submission_queue_full_waits: u64,
    /// Messages posted to other rings.
    pub messages_posted: u64,
}

/// One io_uring instance and the policy of driving it (see the module docs).
///
/// `S` and `C` are the entry types: [`squeue::Entry`]/[`cqueue::Entry`] for ordinary rings,
/// [`squeue::Entry128`]/[`cqueue::Entry32`] for NVMe passthrough.
pub struct Ring<S = squeue::Entry, C = cqueue::Entry>
where
    S: squeue::EntryMarker,
    C: cqueue::EntryMarker,
{
    uring: IoUring<S, C>,
    enter_target: EnterTarget,
    sqpoll: bool,
    iopoll: bool,
    /// Entries written to the SQ but not yet handed to the kernel by an enter (always 0 right
    /// after a submit with SQPOLL, where the poller takes them by itself).
    pending: u32,
    /// Entries ever pushed (the kernel has consumed all but those still in the SQ).
    pushed_total: u64,
    /// Message targets held until the kernel has consumed the entries that name them.
    message_targets: message::MessageTargets,
    stats: RingStats,
}

impl<S: squeue::EntryMarker, C: cqueue::EntryMarker> Ring<S, C> {
    /// Builds a ring as `setup` says (and registers its fd when asked).
    pub fn new(setup: &RingSetup) -> crate::Result<Self> {
        let uring = setup.build::<S, C>()?;
        let enter_target = if setup.register_ring_fd {
            register::register_ring_fd(&uring)?
        } else {
            EnterTarget::raw(&uring)
        };
        Ok(Ring {
            uring,
            enter_target,
            sqpoll: setup.sqpoll.is_some(),
            iopoll: setup.iopoll,
            pending: 0,
            pushed_total: 0,
            message_targets: message::MessageTargets::default(),
            stats: RingStats::default(),
        })
    }

    /// The io_uring instance, for registrations the core does not wrap (provided-buffer rings,
    /// NAPI, ...). Entries must still go through [`Ring::push`] so they are counted.
    pub fn uring(&self) -> &IoUring<S, C> {
        &self.uring
    }

    /// Entries pushed but not yet handed to the kernel.
    pub fn pending(&self) -> usize {
        self.pending as usize
    }

    /// Whether a kernel thread polls this ring's submission queue.
    pub fn is_sqpoll(&self) -> bool {
        self.sqpoll
    }

    /// Whether completions are polled from the device (`IORING_SETUP_IOPOLL`).
    pub fn is_iopoll(&self) -> bool {
        self.iopoll
    }

    /// Submission-queue entries (a power of two).
    pub fn submission_entries(&self) -> u32 {
        self.uring.params().sq_entries()
    }

    /// Completion-queue entries.
    pub fn completion_entries(&self) -> u32 {
        self.uring.params().cq_entries()
    }

    /// Counters so far.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// Completions ready to be read without entering the kernel.
    pub fn completions_ready(&mut self) -> usize {
        self.uring.completion().len()
    }

    /// The completion queue, to read what is ready. Reading it does not enter the kernel: call
    /// [`Ring::prepare_reap`] first on rings whose completions need an enter to appear.
    pub fn completion(&mut self) -> io_uring::CompletionQueue<'_, C> {
        self.uring.completion()
    }
}
