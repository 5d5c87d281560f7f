//! How a batch that waits for a shard wakes its worker: the shard's reply calls the batch's
//! waker (any thread), which queues the connection and, only when the worker sleeps, wakes
//! it: a worker on a thread of its own sleeps in its ring, and the waker writes the worker's
//! eventfd (a read of which the ring always has armed); a worker that is a task of a shard's
//! runtime sleeps as a task, and the waker wakes the task and, from another thread, rings the
//! shard's doorbell (which ends the runtime's sleep). Either way one wake-up per sleep.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::thread::ThreadId;

/// How a worker that is a shard's task is woken: its task's waker, and from other threads
/// also the shard's doorbell.
struct TaskWake {
    waker: Waker,
    doorbell: Option<ringdb_io::Doorbell>,
    thread: ThreadId,
}

/// The connections woken since the worker last looked.
pub struct WakeQueue {
    woken: Mutex<Vec<(u32, u32)>>,
    /// The worker is about to wait in its ring (or waits there).
    sleeping: AtomicBool,
    eventfd: OwnedFd,
    /// Set while a worker on a shard sleeps as a task.
    task: Mutex<Option<TaskWake>>,
}

impl WakeQueue {
    /// A queue with its eventfd.
    pub fn new() -> std::io::Result<WakeQueue> {
        // SAFETY: eventfd takes no pointers; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let eventfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(WakeQueue {
            woken: Mutex::new(Vec::new()),
            sleeping: AtomicBool::new(false),
            eventfd,
            task: Mutex::new(None),
        })
    }

    /// The eventfd the worker's ring reads.
    pub fn eventfd(&self) -> i32 {
        self.eventfd.as_raw_fd()
    }

    /// Takes the woken connections (slot, generation).
    pub fn take(&self, into: &mut Vec<(u32, u32)>) {
        let mut woken = self.woken.lock().unwrap_or_else(|p| p.into_inner());
        into.append(&mut woken);
    }

    /// Marks the worker about to sleep; false if something was woken meanwhile (do not sleep).
    pub fn prepare_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        let empty = self
            .woken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty();
        if !empty {
            self.sleeping.store(false, Ordering::SeqCst);
        }
        empty
    }

    /// The worker is awake again.
    pub fn awake(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// A worker on a shard is about to sleep as the task `waker` wakes (the shard's
    /// `doorbell` ends the runtime's sleep); false if something was woken meanwhile.
    pub fn prepare_task_sleep(
        &self,
        waker: &Waker,
        doorbell: Option<&ringdb_io::Doorbell>,
    ) -> bool {
        *self.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(TaskWake {
            waker: waker.clone(),
            doorbell: doorbell.cloned(),
            thread: std::thread::current().id(),
        });
        self.prepare_sleep()
    }

    /// Wakes the sleeping worker: its task, or its ring through the eventfd.
    fn wake_worker(&self) {
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            task.waker.wake();
            if std::thread::current().id() != task.thread {
                task.doorbell.iter().for_each(ringdb_io::Doorbell::ring);
            }
            return;
        }
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd. A full counter (EAGAIN)
        // already means a wake is pending, so the result is not needed.
        unsafe { libc::write(self.eventfd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    fn push(&self, slot: u32, generation: u32) {
        self.woken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((slot, generation));
        if self.sleeping.swap(false, Ordering::SeqCst) {
            self.wake_worker();
        }
    }
}

/// The waker of one connection's running batch.
pub struct ConnWaker {
    pub queue: Arc<WakeQueue>,
    pub slot: u32,
    pub generation: u32,
}

impl Wake for ConnWaker {
    fn wake(self: Arc<Self>) {
        self.queue.push(self.slot, self.generation);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.queue.push(self.slot, self.generation);
    }
}
