//! Pushing entries and handing them to the kernel by policy; getting completions to appear.

use super::enter::{ENTER_GETEVENTS, ENTER_SQ_WAIT, ENTER_SQ_WAKEUP};
use super::Ring;
use crate::error::{IoError, Result};
use io_uring::{cqueue, squeue};
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

/// Times a push waits for room in a full submission queue before it gives up. Each wait is an
/// enter that hands queued entries to the kernel (or, with SQPOLL, blocks until the poller has
/// consumed some), so a handful always suffices unless the kernel is refusing work.
const MAX_ROOM_WAITS: u32 = 64;

impl<S: squeue::EntryMarker, C: cqueue::EntryMarker> Ring<S, C> {
    /// Writes `entry` into the submission queue. A full queue is waited out (see the module
    /// docs), never an error unless the kernel stops taking entries altogether.
    ///
    /// # Safety
    /// Everything `entry` points at (buffers, iovecs, command payloads, the ring of another
    /// message target) must stay valid, and must not be freed, reused or (for reads) accessed,
    /// until the completion carrying the entry's user data has been read from this ring: the
    /// kernel may access it until then.
    pub unsafe fn push(&mut self, entry: &S) -> Result<()> {
        for _ in 0..MAX_ROOM_WAITS {
            // SAFETY: the caller keeps what the entry names valid until its completion (this
            // function's contract); the queue copies the entry itself.
            if unsafe { self.uring.submission().push(entry) }.is_ok() {
                self.pending += 1;
                self.pushed_total += 1;
                return Ok(());
            }
            self.wait_for_room()?;
        }
        Err(IoError::SubmissionQueueFull {
            entries: self.submission_entries(),
            waits: MAX_ROOM_WAITS,
        })
    }

    /// Makes room in a full submission queue: hands queued entries to the kernel, or with
    /// SQPOLL waits until the poller has published the head it consumed.
    fn wait_for_room(&mut self) -> Result<()> {
        self.stats.submission_queue_full_waits += 1;
        if self.sqpoll {
            let mut flags = ENTER_SQ_WAIT;
            if self.submission_needs_wakeup() {
                flags |= ENTER_SQ_WAKEUP;
            }
            self.enter(0, 0, flags)?;
            self.account_consumed(0);
            return Ok(());
        }
        let flags = self.task_work_flag();
        let consumed = self.enter(self.pending, 0, flags)?;
        self.account_consumed(consumed);
        Ok(())
    }

    /// Hands pending entries to the kernel and, if `wait_for > 0`, blocks until at least
    /// `wait_for` completions (counting those already waiting) can be read. Returns how many
    /// entries went to the kernel.
    pub fn submit(&mut self, wait_for: usize) -> Result<usize> {
        if self.sqpoll {
            return self.submit_polled(wait_for);
        }
        let to_submit = self.pending;
        let already = if wait_for > 0 {
            self.completions_ready()
        } else {
            0
        };
        let min_complete = wait_for.saturating_sub(already) as u32;
        if to_submit == 0 && min_complete == 0 {
            return Ok(0);
        }
        let mut flags = self.task_work_flag();
        if min_complete > 0 || self.iopoll {
            flags |= ENTER_GETEVENTS;
        }
        let consumed = self.enter(to_submit, min_complete, flags)?;
        Ok(self.account_consumed(consumed))
    }

    /// SQPOLL: the poller consumes the queue by itself; enter only to wake it or to wait.
    fn submit_polled(&mut self, wait_for: usize) -> Result<usize> {
        let handed = self.pending as usize;
        let wake = handed > 0 && self.submission_needs_wakeup();
        self.stats.submitted += handed as u64;
        self.pending = 0;
        let must_wait = wait_for > 0 && self.completions_ready() < wait_for;
        if wake || must_wait {
            let mut flags = 0;
            if wake {
                flags |= ENTER_SQ_WAKEUP;
            }
            if must_wait {
                flags |= ENTER_GETEVENTS;
            }
            self.enter(0, if must_wait { wait_for as u32 } else { 0 }, flags)?;
        }
        self.account_consumed(0);
        Ok(handed)
    }

    /// Hands pending entries over and waits at most `timeout` for `wait_for` completions (none
    /// if some are already ready). Returns how many entries went to the kernel; running out of
    /// time is not an error.
    pub fn submit_and_wait_timeout(&mut self, wait_for: u32, timeout: Duration) -> Result<usize> {
        if self.completions_ready() > 0 || timeout.is_zero() || wait_for == 0 {
            return self.submit_and_collect();
        }
        if !self.sqpoll {
            let consumed =
                self.enter_with_timeout(self.pending, wait_for, ENTER_GETEVENTS, timeout)?;
            return Ok(self.account_consumed(consumed));
        }
        let handed = self.pending;
        self.stats.submitted += handed as u64;
        self.pending = 0;
        let mut flags = ENTER_GETEVENTS;
        if handed > 0 && self.submission_needs_wakeup() {
            flags |= ENTER_SQ_WAKEUP;
        }
        self.enter_with_timeout(0, wait_for, flags, timeout)?;
        self.account_consumed(0);
        Ok(handed as usize)
    }

    /// Hands pending entries over without waiting, and lets the kernel post what has finished
    /// (deferred task work, polled completions). Returns how many entries went to the kernel.
    pub fn submit_and_collect(&mut self) -> Result<usize> {
        if self.sqpoll {
            return self.submit_polled(0);
        }
        let consumed = self.enter(self.pending, 0, ENTER_GETEVENTS)?;
        Ok(self.account_consumed(consumed))
    }

    /// Before reading completions: rings whose completions only appear inside an enter (IOPOLL
    /// without SQPOLL; deferred or cooperative task work waiting to run) get one `GETEVENTS`
    /// enter that does not wait, when nothing is ready yet. Call it only while requests are in
    /// flight.
    pub fn prepare_reap(&mut self) -> Result<()> {
        if self.completions_ready() > 0 {
            return Ok(());
        }
        let needs_enter = (self.iopoll && !self.sqpoll) || self.task_work_pending();
        if !needs_enter {
            return Ok(());
        }
        let to_submit = if self.sqpoll { 0 } else { self.pending };
        let consumed = self.enter(to_submit, 0, ENTER_GETEVENTS)?;
        self.account_consumed(consumed);
        Ok(())
    }

    /// Counts entries the kernel consumed in an enter (never more than were pending), and lets
    /// go of message targets whose entries it has consumed.
    fn account_consumed(&mut self, consumed: usize) -> usize {
        if self.message_targets.len() > 0 {
            let in_queue = self.uring.submission().len() as u64;
            self.message_targets
                .release_consumed(self.pushed_total - in_queue);
        }
        if self.sqpoll {
            return 0;
        }
        let consumed = consumed.min(self.pending as usize);
        self.pending -= consumed as u32;
        self.stats.submitted += consumed as u64;
        consumed
    }

    /// Whether the SQPOLL thread has gone to sleep and needs `IORING_ENTER_SQ_WAKEUP`.
    fn submission_needs_wakeup(&mut self) -> bool {
        // The SeqCst fence pairs with the poller's: without it we could miss that it slept.
        fence(Ordering::SeqCst);
        self.uring.submission().need_wakeup()
    }

    /// Whether completions may be waiting in task work that only an enter will run.
    fn task_work_pending(&mut self) -> bool {
        self.uring.submission().taskrun()
    }

    fn task_work_flag(&mut self) -> u32 {
        if self.task_work_pending() {
            ENTER_GETEVENTS
        } else {
            0
        }
    }
}
