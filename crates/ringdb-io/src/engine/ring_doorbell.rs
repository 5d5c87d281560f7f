//! The doorbell on an io_uring engine ([`RingEngine`](super::RingEngine)): a one-shot
//! `IORING_OP_POLL_ADD` of the doorbell's eventfd, armed on the ring right before a wait, so the
//! wait's `io_uring_enter` also ends when a plain thread writes the eventfd; and doorbell
//! messages (`IORING_OP_MSG_RING`) from other rings, which end the wait by themselves.
//!
//! Both arrive as completions with reserved user data ([`DOORBELL_POLL`],
//! [`DOORBELL_MESSAGE`]); the engine hands them here instead of to its caller, so the executor's
//! slots and in-flight counts see only requests.
//!
//! Invariant: at most one poll is armed (`poll_armed`), and it is re-armed only after its
//! completion was read and the eventfd reset, so an eventfd that stays readable never makes a
//! wait return at once forever. IOPOLL rings cannot poll files (nor send messages): there the
//! doorbell is not supported and the executor sleeps in `poll(2)` instead.

use super::doorbell::{
    reset_eventfd, DoorbellWakes, DOORBELL_CANCEL, DOORBELL_MESSAGE, DOORBELL_MESSAGE_FAILED,
    DOORBELL_POLL,
};
use crate::error::Result;
use crate::ring::{Ring, RingAddress, RingMessage};
use io_uring::{cqueue, opcode, squeue, types};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// Waits for the cancelled poll's completion when the engine closes, each at most
/// [`CANCEL_WAIT`]; the ring's close cancels it anyway, so giving up frees nothing early.
const CANCEL_WAITS_MAX: u32 = 100;
const CANCEL_WAIT: Duration = Duration::from_millis(10);

/// The doorbell state of one io_uring engine.
pub(crate) struct RingDoorbell {
    /// Whether this ring can poll the eventfd and send and receive messages (not IOPOLL).
    supported: bool,
    /// The eventfd the engine's waits watch, while the executor asks for it.
    eventfd: Option<Arc<OwnedFd>>,
    /// A poll of `eventfd` is on the ring and its completion has not been read.
    poll_armed: bool,
    /// Reserved entries pushed (polls, messages, cancels), kept out of the requests counted.
    pub(crate) reserved_entries: u64,
    wakes: DoorbellWakes,
}

impl RingDoorbell {
    pub(crate) fn new(supported: bool) -> Self {
        RingDoorbell {
            supported,
            eventfd: None,
            poll_armed: false,
            reserved_entries: 0,
            wakes: DoorbellWakes::default(),
        }
    }

    pub(crate) fn is_supported(&self) -> bool {
        self.supported
    }

    /// Whether `user_data` is one of the doorbell's completions.
    pub(crate) fn is_reserved(user_data: u64) -> bool {
        matches!(
            user_data,
            DOORBELL_POLL | DOORBELL_MESSAGE | DOORBELL_MESSAGE_FAILED | DOORBELL_CANCEL
        )
    }

    /// Starts (or stops) watching `eventfd`; returns whether waits will end at its writes.
    pub(crate) fn watch(&mut self, eventfd: Option<Arc<OwnedFd>>) -> bool {
        if !self.supported {
            return false;
        }
        let watching = eventfd.is_some();
        self.eventfd = eventfd;
        watching
    }

    /// Puts a poll of the watched eventfd on the ring unless one is armed; it goes to the
    /// kernel with the wait that follows.
    pub(crate) fn arm<S, C>(&mut self, ring: &mut Ring<S, C>) -> Result<()>
    where
        S: squeue::EntryMarker + From<squeue::Entry>,
        C: cqueue::EntryMarker,
    {
        let Some(eventfd) = &self.eventfd else {
            return Ok(());
        };
        if self.poll_armed {
            return Ok(());
        }
        let entry = opcode::PollAdd::new(types::Fd(eventfd.as_raw_fd()), libc::POLLIN as u32)
            .build()
            .user_data(DOORBELL_POLL);
        // SAFETY: a poll names no memory, only the eventfd; `self.eventfd` keeps it open while
        // watched, and the kernel takes its own reference to the file when it arms the poll.
        unsafe { ring.push(&S::from(entry)) }?;
        self.poll_armed = true;
        self.reserved_entries += 1;
        Ok(())
    }

    /// Takes one doorbell completion (`user_data` is reserved).
    pub(crate) fn complete(&mut self, user_data: u64, result: i32) {
        match user_data {
            DOORBELL_POLL => {
                assert!(
                    self.poll_armed,
                    "a doorbell poll completed that was not armed"
                );
                self.poll_armed = false;
                if result >= 0 {
                    self.wakes.eventfd += 1;
                    if let Some(eventfd) = &self.eventfd {
                        reset_eventfd(eventfd.as_fd());
                    }
                }
            }
            DOORBELL_MESSAGE => self.wakes.messages += 1,
            DOORBELL_MESSAGE_FAILED => self.wakes.failed_posts += 1,
            _ => {}
        }
    }

    /// Posts a doorbell message to `to` and hands it to the kernel. `false`: not on this ring.
    pub(crate) fn post<S, C>(&mut self, ring: &mut Ring<S, C>, to: &RingAddress) -> Result<bool>
    where
        S: squeue::EntryMarker + From<squeue::Entry>,
        C: cqueue::EntryMarker,
    {
        if !self.supported {
            return Ok(false);
        }
        let message = RingMessage {
            user_data: DOORBELL_MESSAGE,
            result: 0,
        };
        ring.post_message(to, message, DOORBELL_MESSAGE_FAILED)?;
        self.reserved_entries += 1;
        ring.submit(0)?;
        Ok(true)
    }

    /// The wake-ups counted since the last call.
    pub(crate) fn take_wakes(&mut self) -> DoorbellWakes {
        std::mem::take(&mut self.wakes)
    }

    /// Before the ring closes: stops watching and cancels an armed poll, waiting (bounded)
    /// for its completion. Only reserved completions can be on the ring by then (the engine
    /// drained its requests first).
    pub(crate) fn close<S, C>(&mut self, ring: &mut Ring<S, C>)
    where
        S: squeue::EntryMarker + From<squeue::Entry>,
        C: cqueue::EntryMarker + Into<cqueue::Entry>,
    {
        self.eventfd = None;
        if !self.poll_armed {
            return;
        }
        let cancel = opcode::PollRemove::new(DOORBELL_POLL)
            .build()
            .user_data(DOORBELL_CANCEL);
        // SAFETY: a cancellation names no memory, only the user data of the poll.
        if unsafe { ring.push(&S::from(cancel)) }.is_err() {
            return;
        }
        self.reserved_entries += 1;
        for _ in 0..CANCEL_WAITS_MAX {
            if ring.submit_and_wait_timeout(1, CANCEL_WAIT).is_err() {
                return;
            }
            for entry in &mut ring.completion() {
                let entry: cqueue::Entry = entry.into();
                self.complete(entry.user_data(), entry.result());
            }
            if !self.poll_armed {
                return;
            }
        }
    }
}
