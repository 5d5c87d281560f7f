//! The runtime's buffer pool: [`PoolBuf`] leases of a [`FixedBufferPool`] the runtime owns,
//! so that the pool outlives the engine it may be registered with, and every lease outlives
//! the I/Os on it.
//!
//! A lease is exclusive: the free list holds each index at most once (asserted), a lease's
//! index returns to it only when the lease is dropped, and a lease moves into an I/O by value,
//! so it cannot be dropped while its request is in flight (a dropped I/O future hands it to
//! the request's slot until the completion). Leases that find the pool empty wait in a
//! [`Fifo`], woken as buffers return.

use super::buffers::IoBuf;
use super::fifo::Fifo;
use crate::buf::FixedBufferPool;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// The registered pool shared by the runtime and the buffers leased from it.
pub(super) struct SharedPool {
    pool: FixedBufferPool,
    /// The registration, in index order, when the pool is registered with the ring.
    registered: Option<Vec<libc::iovec>>,
    free: RefCell<Vec<usize>>,
    waiters: Fifo,
}

impl SharedPool {
    /// Every buffer of `pool` free; `registered` when the ring has the pool registered.
    pub(super) fn new(pool: FixedBufferPool, registered: bool) -> SharedPool {
        SharedPool {
            registered: registered.then(|| pool.iovecs()),
            free: RefCell::new((0..pool.count()).rev().collect()),
            pool,
            waiters: Fifo::default(),
        }
    }

    /// Wakes as many waiting leases as there are free buffers.
    pub(super) fn wake_waiters(&self) {
        self.waiters.wake_first(self.free.borrow().len());
    }

    /// `index` if `[ptr, ptr + len_bytes)` lies inside this pool's registered buffer `index`.
    pub(super) fn registered_index_of(
        &self,
        index: u16,
        ptr: *mut u8,
        len_bytes: usize,
    ) -> Option<u16> {
        let iov = self.registered.as_ref()?.get(index as usize)?;
        let (base, start) = (iov.iov_base as usize, ptr as usize);
        (start >= base && start.checked_add(len_bytes)? <= base + iov.iov_len).then_some(index)
    }

    /// A free buffer, if more are free than leases wait for (those go first).
    pub(super) fn try_lease(self: &Rc<Self>) -> Option<PoolBuf> {
        if self.free.borrow().len() <= self.waiters.len() {
            return None;
        }
        let index = self.free.borrow_mut().pop()?;
        Some(PoolBuf::leased(self.clone(), index))
    }

    /// A buffer, waiting (FIFO) for one to be returned if all are leased.
    pub(super) fn lease(self: Rc<Self>) -> Lease {
        Lease {
            shared: self,
            ticket: None,
        }
    }
}

/// A buffer leased from the runtime's pool (see [`Io::lease_buf`], [`Io::lease`]); it returns
/// to the pool's free list when dropped. When the pool is registered with the ring
/// (`IoConfig::fixed_buffers`), I/O on it uses `READ_FIXED`/`WRITE_FIXED`.
///
/// [`Io::lease_buf`]: super::Io::lease_buf
/// [`Io::lease`]: super::Io::lease
pub struct PoolBuf {
    shared: Rc<SharedPool>,
    index: usize,
}

impl PoolBuf {
    /// The lease of buffer `index`, just taken off the free list.
    fn leased(shared: Rc<SharedPool>, index: usize) -> PoolBuf {
        assert!(
            index < shared.pool.count(),
            "pool buffer {index} of {}",
            shared.pool.count()
        );
        debug_assert!(
            !shared.free.borrow().contains(&index),
            "pool buffer {index} is leased and free at once"
        );
        PoolBuf { shared, index }
    }

    /// Index of this buffer in the pool.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Where the pool's first buffer starts: buffer `i` of the pool starts `i * len()` bytes
    /// further (the pool is one mapping). For prefetching a buffer by its index; reading or
    /// writing through it would bypass the lease that owns that buffer.
    pub fn pool_base(&self) -> *const u8 {
        self.shared.pool.ptr(0)
    }

    /// A share of the whole pool's memory, which keeps it mapped while it lives (see
    /// [`PoolMapping`](crate::PoolMapping)).
    pub fn pool_mapping(&self) -> crate::buf::PoolMapping {
        self.shared.pool.mapping()
    }

    /// Bytes in this buffer (every buffer of the pool has the same length).
    pub fn len(&self) -> usize {
        self.shared.pool.buf_len()
    }

    /// Whether the buffer holds no bytes (a pool of empty buffers).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the pool's memory is initialised (zeroed at allocation) and lives as long as
        // `shared`; this lease is the only owner of buffer `index`, and no I/O is in flight on
        // it while the caller can reach the PoolBuf (I/Os take it by value). The slice is built
        // from the raw pointer so that no reference to other leases' buffers is created.
        unsafe { std::slice::from_raw_parts(self.shared.pool.ptr(self.index), self.len()) }
    }

    /// The buffer's bytes, to fill before a write.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.shared.pool.ptr(self.index), self.len()) }
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        {
            let mut free = self.shared.free.borrow_mut();
            debug_assert!(
                !free.contains(&self.index),
                "pool buffer {} returned twice",
                self.index
            );
            free.push(self.index);
            assert!(
                free.len() <= self.shared.pool.count(),
                "more free buffers than the pool has"
            );
        }
        self.shared.wake_waiters();
    }
}

// SAFETY: the pool's memory is one heap allocation that lives as long as `shared` (an Rc held
// by this value), does not move, and buffer `index` is leased exclusively to this value.
unsafe impl IoBuf for PoolBuf {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.shared.pool.ptr(self.index)
    }
    fn bytes_len(&self) -> usize {
        self.shared.pool.buf_len()
    }
    fn fixed_index(&self) -> Option<u16> {
        self.shared
            .registered
            .as_ref()
            .map(|_| self.shared.pool.fixed_index(self.index))
    }
}

/// Waits for a free buffer of the pool, in FIFO order.
pub(super) struct Lease {
    shared: Rc<SharedPool>,
    ticket: Option<u64>,
}

impl Lease {
    /// Whether this lease's turn has come: when it is (or, a newcomer, would be) among the first
    /// as many waiters as buffers are free; a parked lease then leaves the FIFO, a newcomer
    /// never joins it (the ring room's rule, `OpFuture::take_turn`).
    fn take_turn(&mut self, cx: &Context<'_>) -> bool {
        let shared = &self.shared;
        let free = shared.free.borrow().len();
        match self.ticket {
            None => free > shared.waiters.len(),
            Some(ticket) => shared.waiters.try_leave(ticket, free, cx.waker()),
        }
    }
}

impl Future for Lease {
    type Output = PoolBuf;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<PoolBuf> {
        let this = &mut *self;
        if this.take_turn(cx) {
            // The turn came with at least one free buffer (`free > position`).
            let index = this.shared.free.borrow_mut().pop();
            let index = index.expect("a lease's turn comes only with a free buffer");
            this.ticket = None;
            return Poll::Ready(PoolBuf::leased(this.shared.clone(), index));
        }
        if this.ticket.is_none() {
            this.ticket = Some(this.shared.waiters.park(cx.waker()));
        }
        Poll::Pending
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            // Leave the queue; a wake-up meant for this lease goes to the next waiter.
            self.shared.waiters.cancel(ticket);
            self.shared.wake_waiters();
        }
    }
}
