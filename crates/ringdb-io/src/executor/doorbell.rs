//! The doorbell: how other threads wake a [`Runtime`](super::Runtime) (a shard of a
//! thread-per-core design: user threads hand it requests through a queue of their own, then
//! ring).
//!
//! # Why it looks like this
//! A runtime sleeps in its engine's wait (`io_uring_enter`, `io_getevents`, or `poll(2)` when
//! nothing is in flight), so a wake-up must be something that wait sees, never a flag it spins
//! on. The truth is one atomic word, `RUNG | ARMED`:
//! - [`Doorbell::ring`] swaps in `RUNG` (clearing `ARMED`): one atomic when the runtime is busy.
//!   Only a ring that finds `ARMED` makes a syscall, so at most one syscall per sleep: a
//!   doorbell message (`IORING_OP_MSG_RING`) from the ringing thread's own ring when that thread
//!   runs an io_uring runtime and the target's engine is io_uring too, else an eventfd write.
//! - The runtime sets `ARMED` right before it blocks, unless `RUNG` is already set (then it does
//!   not block), and clears it when the wait returns. So a ring either comes before the arm (the
//!   runtime sees `RUNG` and does not sleep) or after it (it finds `ARMED` and wakes the wait):
//!   no lost wake-up, whatever the waiting task does. [`Doorbell::arm`] lets a waiter arm early.
//! - After every wait and every reap the loop looks at `RUNG` and wakes the tasks awaiting
//!   [`Io::doorbell_rung`](super::Io::doorbell_rung); the first to be polled takes the ring.
//!
//! # What ends which wait
//! With nothing in flight and a task awaiting the doorbell, the runtime does not report a stall:
//! it sleeps in [`Engine::wait_for_doorbell`](crate::engine::Engine::wait_for_doorbell). With
//! requests in flight, an engine that watches the eventfd (io_uring: a poll on the ring; libaio:
//! `IOCB_CMD_POLL`) ends its completion wait at a ring; doorbell messages end an io_uring wait by
//! themselves. When the last [`Doorbell`] is dropped nobody can ring any more: the drop wakes a
//! sleeping runtime, which then reports the stall.

use super::shared::Inner;
use crate::engine::{new_eventfd, write_eventfd, DoorbellWakes};
use crate::error::Result;
use crate::ring::RingAddress;
use std::cell::RefCell;
use std::future::Future;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Rung since the last `doorbell_rung` resolved.
const RUNG: u32 = 1;
/// The runtime is (about to be) blocked: the next ring makes a syscall.
const ARMED: u32 = 2;

/// What a runtime and every [`Doorbell`] of it share.
pub(super) struct DoorbellShared {
    state: AtomicU32,
    /// [`Doorbell`] handles alive: with none, nobody can ring.
    handles: AtomicUsize,
    eventfd: Arc<OwnedFd>,
    /// Where doorbell messages go, when the runtime's engine is io_uring.
    address: Option<RingAddress>,
}

impl DoorbellShared {
    /// Makes the syscall that wakes the blocked runtime.
    fn wake(&self) {
        if let Some(address) = &self.address {
            if post_from_this_thread(address) {
                return;
            }
        }
        write_eventfd(self.eventfd.as_fd());
    }

    /// Arms unless rung; returns whether the runtime may block.
    fn arm_unless_rung(&self) -> bool {
        let previous = self.state.fetch_or(ARMED, Ordering::AcqRel);
        if previous & RUNG != 0 {
            self.disarm();
            return false;
        }
        true
    }

    fn disarm(&self) {
        self.state.fetch_and(!ARMED, Ordering::AcqRel);
    }

    fn is_rung(&self) -> bool {
        self.state.load(Ordering::Acquire) & RUNG != 0
    }

    /// Takes the ring, if any.
    fn take_rung(&self) -> bool {
        self.state.fetch_and(!RUNG, Ordering::AcqRel) & RUNG != 0
    }

    fn ringable(&self) -> bool {
        self.handles.load(Ordering::Acquire) > 0
    }
}

/// Wakes a [`Runtime`](super::Runtime) from any thread: its pending
/// [`Io::doorbell_rung`](super::Io::doorbell_rung) future resolves, and a runtime blocked
/// waiting (idle, or for completions) wakes up. `Clone + Send + Sync`; made by
/// [`Runtime::doorbell`](super::Runtime::doorbell).
pub struct Doorbell {
    shared: Arc<DoorbellShared>,
}

impl Doorbell {
    /// Rings: the runtime's pending `doorbell_rung()` future (if any) resolves and a runtime
    /// blocked waiting wakes up. One atomic when the runtime is not waiting; only a ring that
    /// finds it armed makes a syscall: from a thread running an io_uring runtime (inside
    /// `block_on`/`run`) to a runtime whose engine is io_uring too, an `IORING_OP_MSG_RING`
    /// from that thread's ring; otherwise an eventfd write.
    pub fn ring(&self) {
        let previous = self.shared.state.swap(RUNG, Ordering::AcqRel);
        if previous & ARMED != 0 {
            self.shared.wake();
        }
    }

    /// Arms the doorbell: the next [`Doorbell::ring`] makes the syscall. A waiter may call it
    /// before it re-checks its queue and awaits `doorbell_rung`; the runtime also arms it
    /// itself before it blocks, so no wake-up is lost either way.
    pub fn arm(&self) {
        self.shared.state.fetch_or(ARMED, Ordering::AcqRel);
    }
}

impl Clone for Doorbell {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::AcqRel);
        Doorbell {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // The last handle: wake a sleeping runtime so it can report that nobody can ring.
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && self.shared.state.fetch_and(!ARMED, Ordering::AcqRel) & ARMED != 0
        {
            write_eventfd(self.shared.eventfd.as_fd());
        }
    }
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbell")
            .field("state", &self.shared.state.load(Ordering::Relaxed))
            .field("messages", &self.shared.address.is_some())
            .finish()
    }
}

/// The runtime's side of its doorbell: the shared word (once made) and the tasks awaiting it.
#[derive(Default)]
pub(super) struct DoorbellHost {
    shared: Option<Arc<DoorbellShared>>,
    /// Wakers of pending [`DoorbellRung`] futures, by their id.
    waiters: Vec<(u64, Waker)>,
    next_waiter: u64,
}

/// Resolves (to `()`) once the runtime's doorbell was rung since the last one resolved. Made
/// by [`Io::doorbell_rung`](super::Io::doorbell_rung). While it is pending the runtime never
/// reports a stall as long as a [`Doorbell`] exists: it sleeps until rung.
pub struct DoorbellRung {
    inner: Rc<Inner>,
    id: Option<u64>,
}

impl DoorbellRung {
    pub(super) fn new(inner: Rc<Inner>) -> Self {
        DoorbellRung { inner, id: None }
    }
}

impl Future for DoorbellRung {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = Rc::clone(&self.inner);
        let mut host = inner.doorbell.borrow_mut();
        if host
            .shared
            .as_ref()
            .is_some_and(|shared| shared.take_rung())
        {
            if let Some(id) = self.id.take() {
                host.waiters.retain(|(waiter, _)| *waiter != id);
            }
            return Poll::Ready(());
        }
        let id = *self.id.get_or_insert_with(|| {
            host.next_waiter += 1;
            host.next_waiter
        });
        match host.waiters.iter_mut().find(|(waiter, _)| *waiter == id) {
            Some((_, waker)) => waker.clone_from(cx.waker()),
            None => host.waiters.push((id, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for DoorbellRung {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        if let Ok(mut host) = self.inner.doorbell.try_borrow_mut() {
            host.waiters.retain(|(waiter, _)| *waiter != id);
        }
    }
}

impl Inner {
    /// A new handle to the runtime's doorbell, made (with its eventfd) on the first call.
    pub(super) fn doorbell_handle(&self) -> Result<Doorbell> {
        let mut host = self.doorbell.borrow_mut();
        let shared = match &host.shared {
            Some(shared) => Arc::clone(shared),
            None => {
                let eventfd = Arc::new(new_eventfd()?);
                let mut engine = self.engine.borrow_mut();
                let address = engine.doorbell_address()?;
                engine.watch_doorbell(Some(Arc::clone(&eventfd)));
                let shared = Arc::new(DoorbellShared {
                    state: AtomicU32::new(0),
                    handles: AtomicUsize::new(0),
                    eventfd,
                    address,
                });
                host.shared = Some(Arc::clone(&shared));
                shared
            }
        };
        shared.handles.fetch_add(1, Ordering::AcqRel);
        Ok(Doorbell { shared })
    }

    /// Counts the engine's doorbell wake-ups; when rung and a task awaits the doorbell, wakes
    /// the waiting tasks. Returns whether it woke any.
    pub(super) fn check_doorbell(&self) -> bool {
        let wakes = self.engine.borrow_mut().take_doorbell_wakes();
        self.count_doorbell_wakes(wakes);
        let waiters = {
            let mut host = self.doorbell.borrow_mut();
            let rung = host.shared.as_ref().is_some_and(|shared| shared.is_rung());
            if !rung || host.waiters.is_empty() {
                return false;
            }
            std::mem::take(&mut host.waiters)
        };
        for (_, waker) in waiters {
            waker.wake();
        }
        true
    }

    fn count_doorbell_wakes(&self, wakes: DoorbellWakes) {
        if wakes != DoorbellWakes::default() {
            self.bump(|s| {
                s.doorbell_eventfd_wakes += wakes.eventfd;
                s.doorbell_message_wakes += wakes.messages;
                s.doorbell_failed_posts += wakes.failed_posts;
            });
        }
    }

    /// The doorbell, when a task awaits it and a handle can still ring it.
    fn awaited_doorbell(&self) -> Option<Arc<DoorbellShared>> {
        let host = self.doorbell.borrow();
        let shared = host.shared.as_ref()?;
        (!host.waiters.is_empty() && shared.ringable()).then(|| Arc::clone(shared))
    }

    /// Nothing in flight, no task ready: sleeps until the doorbell rings. Returns false (a
    /// stall) when no task awaits the doorbell or nobody can ring it.
    pub(super) fn sleep_for_doorbell(&self) -> Result<bool> {
        let Some(shared) = self.awaited_doorbell() else {
            return Ok(false);
        };
        if shared.arm_unless_rung() {
            self.bump(|s| s.doorbell_sleeps += 1);
            let waited = self.engine.borrow_mut().wait_for_doorbell(&shared.eventfd);
            shared.disarm();
            self.count_doorbell_wakes(waited?);
        }
        Ok(true)
    }

    /// Before a completion wait: arms the doorbell when a task awaits it. `None`: it was rung
    /// already (do not wait); `Some(armed)`: wait, then [`Inner::disarm_doorbell`] if armed.
    pub(super) fn arm_doorbell_for_wait(&self) -> Option<bool> {
        let Some(shared) = self.awaited_doorbell() else {
            return Some(false);
        };
        shared.arm_unless_rung().then_some(true)
    }

    pub(super) fn disarm_doorbell(&self) {
        if let Some(shared) = &self.doorbell.borrow().shared {
            shared.disarm();
        }
    }

    /// Stops the engine from watching the doorbell (before the drain on drop).
    pub(super) fn stop_doorbell(&self) {
        if self.doorbell.borrow().shared.is_some() {
            self.engine.borrow_mut().watch_doorbell(None);
        }
    }

    /// Posts a doorbell message to `to` from this runtime's engine; false when it cannot.
    fn post_doorbell_message(&self, to: &RingAddress) -> bool {
        let Ok(mut engine) = self.engine.try_borrow_mut() else {
            return false;
        };
        let posted = matches!(engine.post_doorbell_message(to), Ok(true));
        drop(engine);
        if posted {
            self.bump(|s| s.doorbell_messages_posted += 1);
        }
        posted
    }
}

thread_local! {
    /// The runtimes this thread is running (innermost last), for rings sent from their tasks.
    static RUNNING: RefCell<Vec<Weak<Inner>>> = const { RefCell::new(Vec::new()) };
}

/// Posts a doorbell message to `to` from the runtime this thread is running, if any can.
fn post_from_this_thread(to: &RingAddress) -> bool {
    let running = RUNNING.with(|stack| stack.borrow().last().and_then(Weak::upgrade));
    running.is_some_and(|inner| inner.post_doorbell_message(to))
}

/// While alive, marks this thread as running `inner` (`block_on`, `run`).
pub(super) struct Running(());

impl Running {
    pub(super) fn enter(inner: &Rc<Inner>) -> Running {
        RUNNING.with(|stack| stack.borrow_mut().push(Rc::downgrade(inner)));
        Running(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|stack| stack.borrow_mut().pop());
    }
}
