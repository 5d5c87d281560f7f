//! Messages between rings (`IORING_OP_MSG_RING`, Linux 5.18): one ring posts a completion with
//! a payload of its choosing into another ring's completion queue. A thread blocked waiting on
//! the target ring wakes up as for any completion, so a thread-per-core design can hand work to
//! another core without a second wake-up mechanism.
//!
//! The sender's own completion for the message is suppressed on success
//! (`IOSQE_CQE_SKIP_SUCCESS`); only a failed post produces one on the sender's ring, carrying the
//! user data the sender chose and the negative errno.
//!
//! The entry names the target by fd, and the kernel looks the fd up only when it issues the
//! entry, which may be later than the post (at the next submit, or whenever the SQPOLL thread
//! gets to it). So the sending ring holds a reference to the target's address until the kernel
//! has consumed the entry (its SQ head has passed it); only then can the fd be closed without
//! the message reaching whatever file took the number over.

use super::Ring;
use crate::error::{IoError, Result};
use io_uring::{cqueue, opcode, squeue, types};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// Where messages to a ring go: a duplicate of that ring's fd, so the target ring stays alive
/// (as a kernel object) for as long as an address to it exists, even if its owner drops it.
/// Cheap to clone and `Send + Sync`: hand it to the threads that will post to the ring.
#[derive(Clone, Debug)]
pub struct RingAddress {
    fd: Arc<OwnedFd>,
}

/// Addresses named by message entries the kernel has not consumed yet, each with the push
/// count at which its entry went into the SQ. At most one per SQ entry.
#[derive(Default)]
pub(crate) struct MessageTargets {
    held: std::collections::VecDeque<(u64, Arc<OwnedFd>)>,
}

impl MessageTargets {
    /// Drops the addresses whose entries the kernel has consumed (`consumed` pushes so far).
    pub(crate) fn release_consumed(&mut self, consumed: u64) {
        while self
            .held
            .front()
            .is_some_and(|(pushed, _)| *pushed <= consumed)
        {
            self.held.pop_front();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }
}

/// What the target ring's completion carries: its user data and its result field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingMessage {
    /// The completion's `user_data`: tells the receiver what the message is.
    pub user_data: u64,
    /// The completion's `res`: a 32-bit payload.
    pub result: i32,
}

impl<S: squeue::EntryMarker, C: cqueue::EntryMarker> Ring<S, C> {
    /// An address other threads' rings can post messages to.
    pub fn address(&self) -> Result<RingAddress> {
        // SAFETY: the ring's fd is open for as long as `self.uring` lives, which outlasts this
        // borrow; it is only duplicated here.
        let ring_fd = unsafe { BorrowedFd::borrow_raw(self.uring.as_raw_fd()) };
        let fd = ring_fd
            .try_clone_to_owned()
            .map_err(|e| IoError::os("duplicating a ring's fd for messages", e))?;
        Ok(RingAddress { fd: Arc::new(fd) })
    }

    /// Queues a message for the ring at `to`; it is posted when this ring's entries are next
    /// submitted. If posting fails, a completion with `failure_user_data` and the negative errno
    /// arrives on *this* ring (e.g. `-EBADFD` when `to` is not a ring, `-EOVERFLOW` when the
    /// target's completion queue is full, `-EINVAL` on kernels without `MSG_RING`).
    pub fn post_message(
        &mut self,
        to: &RingAddress,
        message: RingMessage,
        failure_user_data: u64,
    ) -> Result<()>
    where
        S: From<squeue::Entry>,
    {
        let entry = opcode::MsgRingData::new(
            types::Fd(to.fd.as_raw_fd()),
            message.result,
            message.user_data,
            None,
        )
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(failure_user_data);
        // SAFETY: the entry names no memory, only the target ring's fd, which stays open until
        // the kernel has consumed the entry: `message_targets` holds the address until then
        // (and the kernel holds its own reference to the file from then on).
        unsafe { self.push(&S::from(entry)) }?;
        self.message_targets
            .held
            .push_back((self.pushed_total, Arc::clone(&to.fd)));
        assert!(self.message_targets.len() <= self.submission_entries() as usize);
        self.stats.messages_posted += 1;
        Ok(())
    }
}
