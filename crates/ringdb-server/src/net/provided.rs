//! A worker's provided-buffer ring (`IORING_REGISTER_PBUF_RING`): the memory its multishot
//! receives land in, shared by every connection of the worker.
//!
//! # Why
//! With one receive buffer per connection, a thousand idle clients hold a thousand buffers. With
//! a provided ring, the kernel picks a free buffer only when data arrives; the worker copies the
//! bytes into the connection's input and hands the buffer straight back, so the ring only has to
//! cover what arrives between two turns of the worker's loop. A receive that finds the ring
//! empty ends with `ENOBUFS` and is armed again on the next turn (the data waits in the socket).
//!
//! # Ownership
//! The kernel owns a buffer from the moment its entry is published until the completion that
//! names it (by buffer id) is reaped; the worker owns it from then until [`ProvidedBuffers::give_back`].
//! Only the bytes of a buffer the worker owns are ever read, through a slice of that buffer alone:
//! the rest of the memory may be under the kernel's writes at the same time.

use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use std::sync::atomic::{AtomicU16, Ordering};

/// Anonymous memory mapped for the kernel: page-aligned, zero, and resident only once
/// written (an idle worker's buffers cost no memory).
struct Mapping {
    base: *mut u8,
    length: usize,
}

impl Mapping {
    fn new(length: usize) -> std::io::Result<Mapping> {
        assert!(length > 0);
        // SAFETY: a fresh private anonymous mapping; no existing memory is named.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            base: base.cast(),
            length,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made, which nothing uses any more (the
        // owner outlives the kernel's use of it).
        unsafe { libc::munmap(self.base.cast(), self.length) };
    }
}

/// The buffer group the worker's receives select from.
pub const GROUP: u16 = 0;

/// The ring and the buffers it hands out.
pub struct ProvidedBuffers {
    /// `count` entries the kernel reads: written here only before their tail is published.
    entries: Mapping,
    /// `count` buffers of `size` bytes.
    memory: Mapping,
    count: u16,
    size: usize,
    /// The tail this side has written up to (published with a release store).
    tail: u16,
    /// Buffers the kernel holds (published and not yet reaped).
    lent: u16,
}

impl ProvidedBuffers {
    /// Registers `count` buffers (a power of two) of `size` bytes with `ring` and lends them
    /// all to the kernel. Fails on kernels without provided-buffer rings (before 5.19).
    pub fn register(ring: &IoUring, count: u16, size: usize) -> std::io::Result<ProvidedBuffers> {
        assert!(count.is_power_of_two() && size > 0 && size <= u32::MAX as usize);
        let mut buffers = ProvidedBuffers {
            entries: Mapping::new(usize::from(count) * std::mem::size_of::<BufRingEntry>())?,
            memory: Mapping::new(usize::from(count) * size)?,
            count,
            size,
            tail: 0,
            lent: 0,
        };
        // SAFETY: the entries are page-aligned, hold `count` entries and live in `self`, which
        // the worker drops only after its ring has ended every receive (see `Worker::drain`).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                buffers.entries.base as u64,
                count,
                GROUP,
                0,
            )?
        };
        for id in 0..count {
            buffers.lend(id);
        }
        buffers.publish();
        debug_assert_eq!(buffers.lent, count);
        Ok(buffers)
    }

    /// Writes buffer `id`'s entry at the tail (seen by the kernel once published).
    fn lend(&mut self, id: u16) {
        assert!(id < self.count && self.lent < self.count);
        let index = usize::from(self.tail & (self.count - 1));
        let base = self.entries.base.cast::<BufRingEntry>();
        // SAFETY: `index < count`, the entries hold `count` values, and the kernel reads the
        // entry at `index` only after the tail that covers it is published below. Buffer `id`
        // lies inside `memory` (`id < count`).
        unsafe {
            let entry = &mut *base.add(index);
            entry.set_addr(self.memory.base.add(usize::from(id) * self.size) as u64);
            entry.set_len(self.size as u32);
            entry.set_bid(id);
        }
        self.tail = self.tail.wrapping_add(1);
        self.lent += 1;
    }

    fn publish(&self) {
        let base = self.entries.base.cast::<BufRingEntry>();
        // SAFETY: the tail lies in the first entry of our mapping and the kernel reads it
        // concurrently, so it is written through an atomic with release ordering (the entries
        // written before it become visible first).
        unsafe {
            let tail = BufRingEntry::tail(base).cast::<AtomicU16>();
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// The first `length` bytes of buffer `id`, which a completion just handed over, passed
    /// to `read`; then the buffer goes back to the kernel.
    pub fn take<T>(&mut self, id: u16, length: usize, read: impl FnOnce(&[u8]) -> T) -> T {
        assert!(id < self.count && length <= self.size && self.lent > 0);
        self.lent -= 1;
        // SAFETY: the completion naming buffer `id` was reaped, so the kernel wrote its bytes
        // and holds it no more until `give_back` lends it again; the slice covers that buffer
        // alone, never memory the kernel may be writing.
        let bytes = unsafe {
            std::slice::from_raw_parts(self.memory.base.add(usize::from(id) * self.size), length)
        };
        let result = read(bytes);
        self.give_back(id);
        result
    }

    /// Lends buffer `id` to the kernel again.
    fn give_back(&mut self, id: u16) {
        self.lend(id);
        self.publish();
    }
}
