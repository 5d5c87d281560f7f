//! Page faults: [`BufferManager::load`] reads a page into a frame (the task parks, others
//! run), admitting at most `max_loads` reads at once, first come first served.
//!
//! A read in flight is a slot in state `Reading` whose frame is inside the read. If the task
//! doing it is dropped, `CancelRead` takes the slot back; the frame stays with the runtime
//! until the completion arrives, then returns to its pool (see the module documentation of
//! `buffer`).

use super::frame::{Inner, Slot, WAIT_ROUNDS_MAX};
use super::wait::{wait, WaitOn};
use super::{BufferManager, PageGuard, PageId};
use crate::error::{Corruption, StorageError, WaitFor};
use crate::page;
use ringdb_io::PoolBuf;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// Where a page stands when a task wants it.
pub(super) enum Lookup {
    /// Freed by a merge: no longer part of the tree.
    Freed,
    /// In its frame: pin it.
    Resident,
    /// In another task's read or write: wait for it.
    InIo,
    /// Not in the pool: read it.
    Absent,
}

impl BufferManager {
    /// Makes `pid` resident, reading it from the target if needed (the task parks; others
    /// run), and pins it. The caller keeps the pin only until its restarted attempt has run:
    /// that way the page cannot be evicted between the completion and the moment the task
    /// runs again (under heavy pressure it otherwise could be, again and again: a livelock).
    /// Every pin held across an `await` belongs to a task that is ready to run, so pins
    /// never block eviction for good. The page is verified (checksum, page id) before anyone
    /// can see it.
    ///
    /// Returns `None` when the page was freed (by a merge) before it could be loaded: it is
    /// no longer part of the tree, and the caller's restart will not lead to it.
    pub async fn load(&self, pid: PageId) -> Result<Option<PageGuard>, StorageError> {
        let inner = &self.inner;
        for _ in 0..WAIT_ROUNDS_MAX {
            inner.check_poisoned()?;
            match self.lookup(pid)? {
                Lookup::Freed => return Ok(None),
                Lookup::Resident => return Ok(Some(self.pin_resident(pid))),
                Lookup::InIo => {
                    inner.bump(|s| s.waits += 1);
                    wait(inner, WaitOn::PageIo(pid)).await;
                    continue;
                }
                Lookup::Absent => {}
            }
            // Admission: at most `max_loads` page reads at once, so that a crowd of faulting
            // tasks cannot evict each other's pages before they get to use them.
            let _admitted = self.admit_load().await;
            if inner.state.borrow().table.contains_key(&pid) {
                continue;
            }
            let buf = self.take_frame().await?;
            let Some((slot, buf)) = self.claim_slot(pid, buf) else {
                continue;
            };
            return self.read_into(pid, slot, buf).await.map(Some);
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::PageLoad { page: pid },
            rounds: WAIT_ROUNDS_MAX,
        })
    }

    /// Where `pid` stands; fails for a page past the end of the data.
    pub(super) fn lookup(&self, pid: PageId) -> Result<Lookup, StorageError> {
        let st = self.inner.state.borrow();
        if st.freed.contains(&pid) {
            return Ok(Lookup::Freed);
        }
        if pid >= st.next_pid {
            return Err(StorageError::corrupt(
                pid,
                Corruption::PastEnd { pages: st.next_pid },
            ));
        }
        Ok(match st.table.get(&pid) {
            Some(slot) if st.slots[slot].as_ref().expect("live slot").is_resident() => {
                Lookup::Resident
            }
            Some(_) => Lookup::InIo,
            None => Lookup::Absent,
        })
    }

    /// Enters `pid` in the table as `Reading`, with `buf` to read it into; gives `buf` back
    /// (and returns `None`) when another task faulted it in (or freed it) while this one
    /// waited for a frame.
    fn claim_slot(&self, pid: PageId, buf: PoolBuf) -> Option<(usize, PoolBuf)> {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        if st.table.contains_key(&pid) || st.freed.contains(&pid) {
            inner.free_frame(&mut st, buf);
            drop(st);
            inner.wake_frame_waiters(1);
            return None;
        }
        let slot = st
            .free_slots
            .pop()
            .expect("there are as many slots as frames");
        assert!(st.slots[slot].is_none(), "a free slot is live");
        st.slots[slot] = Some(Slot::reading(pid, &inner.cells[slot]));
        st.table.insert(pid, slot);
        Some((slot, buf))
    }

    /// Reads `pid` into `buf` for the `Reading` slot `slot`, verifies it and makes it
    /// resident and pinned; on failure the slot goes away and the frame is free again.
    async fn read_into(
        &self,
        pid: PageId,
        slot: usize,
        buf: PoolBuf,
    ) -> Result<PageGuard, StorageError> {
        let inner = &self.inner;
        let mut cancel = CancelRead {
            inner: inner.clone(),
            slot,
            pid,
            armed: true,
        };
        let (res, buf) = inner.io.read(inner.file, inner.offset(pid), buf).await;
        cancel.armed = false;
        inner.bump(|s| s.reads += 1);
        let timed = inner.time_verification.get().then(crate::ids::timestamp);
        let checked = check_read(res, &buf, pid, inner.cfg.page_size);
        if let Some(start) = timed {
            let cycles = crate::ids::timestamp().saturating_sub(start);
            inner.bump(|s| {
                s.verifications_timed += 1;
                s.verification_cycles += cycles;
            });
        }
        let mut st = inner.state.borrow_mut();
        let result = match checked {
            Ok(()) => {
                // The page's frame is known now: its hint lets a pin (or a reader on another
                // thread) start fetching the frame before it has read the slot's cells.
                if let Some(frame) = inner.frames.index_of(buf.as_slice().as_ptr()) {
                    st.table.set_frame_hint(pid, frame);
                }
                st.slot_mut(slot).finish_read(buf, &inner.cells[slot]);
                drop(st);
                Ok(self.pin_resident(pid))
            }
            Err(e) => {
                inner.release_slot(&mut st, slot);
                inner.free_frame(&mut st, buf);
                drop(st);
                Err(e)
            }
        };
        inner.wake_io(pid);
        // A failed read freed its frame; a page read in is pinned until its task runs, and
        // its unpin wakes a waiter then.
        if result.is_err() {
            inner.wake_frame_waiters(1);
        }
        result
    }

    /// Pins a page known to be resident.
    pub(super) fn pin_resident(&self, pid: PageId) -> PageGuard {
        let mut st = self.inner.state.borrow_mut();
        let slot = st.table.get(&pid).expect("resident page is in the table");
        let ptr = st.slot_mut(slot).frame_ptr();
        self.inner.cells[slot].set_referenced(true);
        drop(st);
        PageGuard::pin(&self.inner, slot, pid, ptr)
    }

    /// Waits for one of the `max_loads` page-read permits, first come first served (a task
    /// that arrives while others wait queues behind them, so none starves).
    async fn admit_load(&self) -> LoadPermit {
        let inner = &self.inner;
        if inner.loads.get() < inner.max_loads && inner.load_queue.borrow().is_empty() {
            inner.loads.set(inner.loads.get() + 1);
        } else {
            inner.bump(|s| s.waits += 1);
            let ticket = inner.next_ticket.get();
            inner.next_ticket.set(ticket + 1);
            WaitLoad {
                inner: inner.clone(),
                ticket,
                queued: false,
                done: false,
            }
            .await;
        }
        LoadPermit {
            inner: inner.clone(),
        }
    }
}

/// A whole page with the right id and checksum, or why not.
fn check_read(
    res: ringdb_io::Result<usize>,
    buf: &PoolBuf,
    pid: PageId,
    page_size: usize,
) -> Result<(), StorageError> {
    match res {
        Ok(n) if n == page_size => page::verify(buf.as_slice(), pid).map_err(StorageError::from),
        Ok(n) => Err(StorageError::corrupt(
            pid,
            Corruption::ShortRead {
                read_bytes: n,
                page_bytes: page_size,
            },
        )),
        Err(e) => Err(e.into()),
    }
}

/// Undoes a page read whose task was dropped: the slot goes away (the frame stays with the
/// runtime until the completion, then returns to its pool) and waiters retry.
struct CancelRead {
    inner: Rc<Inner>,
    slot: usize,
    pid: PageId,
    armed: bool,
}

impl Drop for CancelRead {
    fn drop(&mut self) {
        if self.armed {
            let mut st = self.inner.state.borrow_mut();
            self.inner.release_slot(&mut st, self.slot);
            drop(st);
            self.inner.wake_io(self.pid);
        }
    }
}

/// One admitted page read; frees its permit (and wakes the first waiter) when dropped.
struct LoadPermit {
    inner: Rc<Inner>,
}

impl Drop for LoadPermit {
    fn drop(&mut self) {
        self.inner.loads.set(self.inner.loads.get() - 1);
        wake_first_loader(&self.inner);
    }
}

fn wake_first_loader(inner: &Inner) {
    let w = inner.load_queue.borrow().front().map(|(_, w)| w.clone());
    if let Some(w) = w {
        w.wake();
    }
}

/// Waits in the load queue until this ticket is first and a permit is free; takes it.
struct WaitLoad {
    inner: Rc<Inner>,
    ticket: u64,
    queued: bool,
    done: bool,
}

impl Future for WaitLoad {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = self.inner.clone();
        let mut q = inner.load_queue.borrow_mut();
        if !self.queued {
            self.queued = true;
            q.push_back((self.ticket, cx.waker().clone()));
        }
        let first = q.front().is_some_and(|(t, _)| *t == self.ticket);
        if first && inner.loads.get() < inner.max_loads {
            q.pop_front();
            drop(q);
            inner.loads.set(inner.loads.get() + 1);
            self.done = true;
            // Permits may remain for the next in line.
            if inner.loads.get() < inner.max_loads {
                wake_first_loader(&inner);
            }
            return Poll::Ready(());
        }
        if let Some(e) = q.iter_mut().find(|(t, _)| *t == self.ticket) {
            if !e.1.will_wake(cx.waker()) {
                e.1 = cx.waker().clone();
            }
        }
        Poll::Pending
    }
}

impl Drop for WaitLoad {
    fn drop(&mut self) {
        if self.queued && !self.done {
            // Cancelled while queued: leave, and pass a wake-up on if it was ours.
            let was_first = {
                let mut q = self.inner.load_queue.borrow_mut();
                let first = q.front().is_some_and(|(t, _)| *t == self.ticket);
                q.retain(|(t, _)| *t != self.ticket);
                first
            };
            if was_first {
                wake_first_loader(&self.inner);
            }
        }
    }
}
