//! Page-aligned memory for O_DIRECT I/O, and the pool of buffers registered with a ring.
//!
//! Both types own their memory; callers hand out raw pointers into it only to an engine, and the
//! engine's contract (see [`crate::engine::Engine::push`]) keeps the memory alive until the
//! completion is reaped.

use crate::error::Setting;
use crate::mapped::{MappedRegion, HUGE_PAGE_BYTES};
use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::Arc;

/// Alignment of every buffer: a page, which satisfies any logical block size up to 4 KiB.
pub const BUF_ALIGN: usize = 4096;

/// io_uring limits: at most 16384 registered buffers, each at most 1 GiB.
pub const MAX_FIXED_BUFFERS: usize = 1 << 14;
const MAX_FIXED_BUFFER_BYTES: usize = 1 << 30;

/// A zeroed, page-aligned heap buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    /// The buffer's bytes: what I/O reads or writes.
    len: usize,
    /// The allocation's bytes: `len` rounded up to a page.
    capacity: usize,
}

// SAFETY: AlignedBuf uniquely owns its allocation, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes aligned to [`BUF_ALIGN`]. `len` is rounded up to a page.
    pub fn new(len: usize) -> Self {
        let capacity = len.max(1).div_ceil(BUF_ALIGN) * BUF_ALIGN;
        Self::exact(capacity)
    }

    /// Allocates `len` zeroed bytes aligned to [`BUF_ALIGN`], exactly: I/O through it moves
    /// `len` bytes, also where `len` is not a page multiple (a 1 KiB page, a block). The
    /// allocation behind it is rounded up to a page.
    pub fn exact(len: usize) -> Self {
        let capacity = len.max(1).div_ceil(BUF_ALIGN) * BUF_ALIGN;
        let layout = Layout::from_size_align(capacity, BUF_ALIGN).expect("buffer layout");
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        debug_assert!(len <= capacity && capacity.is_multiple_of(BUF_ALIGN));
        AlignedBuf { ptr, len, capacity }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first byte, for handing to the kernel.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The first byte, writable, for handing to the kernel.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.capacity, BUF_ALIGN).expect("buffer layout");
        // SAFETY: allocated in `exact` with this exact layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

/// `count` equal buffers in one aligned allocation, laid out so they can be registered with
/// `IORING_REGISTER_BUFFERS`. Buffer `i` is registered under [`FixedBufferPool::fixed_index`].
pub struct FixedBufferPool {
    /// Shared with every [`PoolMapping`] handed out: it outlives the pool while one exists.
    mem: Arc<PoolMemory>,
    buf_len: usize,
    count: usize,
    /// Consecutive buffers that share one registration entry (1 unless count > 16384).
    per_entry: usize,
}

impl FixedBufferPool {
    /// `buf_len` is rounded up to a page. Fails when the pool cannot be registered at all.
    pub fn new(count: usize, buf_len: usize) -> crate::Result<Self> {
        let buf_len = buf_len.max(1).div_ceil(BUF_ALIGN) * BUF_ALIGN;
        if count == 0 {
            return Err(crate::IoError::OutOfRange {
                setting: Setting::BufferCount,
                value: 0,
                min: 1,
                max: u32::MAX as u64,
            });
        }
        if buf_len > MAX_FIXED_BUFFER_BYTES {
            return Err(crate::IoError::OutOfRange {
                setting: Setting::BufferSize,
                value: buf_len as u64,
                min: 1,
                max: MAX_FIXED_BUFFER_BYTES as u64,
            });
        }
        let per_entry = count.div_ceil(MAX_FIXED_BUFFERS);
        if per_entry * buf_len > MAX_FIXED_BUFFER_BYTES {
            // io_uring registers at most 16384 buffers of at most 1 GiB each.
            return Err(crate::IoError::OutOfRange {
                setting: Setting::BufferCount,
                value: count as u64,
                min: 1,
                max: (MAX_FIXED_BUFFERS * (MAX_FIXED_BUFFER_BYTES / buf_len)) as u64,
            });
        }
        let total = count
            .checked_mul(buf_len)
            .ok_or(crate::IoError::OutOfRange {
                setting: Setting::BufferCount,
                value: count as u64,
                min: 1,
                max: (usize::MAX / buf_len) as u64,
            })?;
        Ok(FixedBufferPool {
            mem: Arc::new(PoolMemory::new(total)),
            buf_len,
            count,
            per_entry,
        })
    }

    /// Buffers in the pool.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bytes in one buffer (a multiple of [`BUF_ALIGN`]).
    pub fn buf_len(&self) -> usize {
        self.buf_len
    }

    /// Bytes in the whole pool.
    pub fn total_bytes(&self) -> usize {
        self.count * self.buf_len
    }

    /// Start of buffer `i`.
    pub fn ptr(&self, i: usize) -> *mut u8 {
        assert!(i < self.count, "buffer {i} out of {}", self.count);
        // SAFETY: i < count, so the offset stays inside the allocation.
        unsafe { self.mem.as_ptr().add(i * self.buf_len) }
    }

    /// Index of the registration entry that covers buffer `i`.
    pub fn fixed_index(&self, i: usize) -> u16 {
        assert!(i < self.count);
        (i / self.per_entry) as u16
    }

    /// The `iovec`s to register, in registration-index order.
    pub fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.count)
            .step_by(self.per_entry)
            .map(|first| {
                let n = self.per_entry.min(self.count - first);
                libc::iovec {
                    iov_base: self.ptr(first).cast(),
                    iov_len: n * self.buf_len,
                }
            })
            .collect()
    }

    /// Whether the pool's memory is advised to be backed by transparent huge pages (pools
    /// of at least one huge page, where the kernel allows it).
    pub fn huge_pages(&self) -> bool {
        matches!(&*self.mem, PoolMemory::Mapped(r) if r.huge_advised())
    }

    /// A share of the pool's memory that keeps it mapped (see [`PoolMapping`]).
    pub fn mapping(&self) -> PoolMapping {
        PoolMapping {
            memory: self.mem.clone(),
            len: self.total_bytes(),
        }
    }

    /// Read access to buffer `i`. The caller must not have I/O in flight on it.
    pub fn slice(&self, i: usize) -> &[u8] {
        let ptr = self.ptr(i);
        // SAFETY: `ptr(i)` checked i < count: the buffer's bytes lie inside the pool's
        // memory, initialised (zeroed at allocation), and `&self` rules out `slice_mut`.
        unsafe { std::slice::from_raw_parts(ptr, self.buf_len) }
    }

    /// Write access to buffer `i`. The caller must not have I/O in flight on it.
    pub fn slice_mut(&mut self, i: usize) -> &mut [u8] {
        let ptr = self.ptr(i);
        // SAFETY: as in `slice`; `&mut self` makes this the only live view.
        unsafe { std::slice::from_raw_parts_mut(ptr, self.buf_len) }
    }
}

/// A share of a pool's memory, `Send + Sync`: while one exists the memory stays allocated,
/// also after the pool and its runtime are gone (it is never unmapped under a holder).
///
/// For readers on other threads that look at the pool's frames optimistically (the engine's
/// reads from the caller's thread): they load bytes with atomic operations and validate them
/// against a version before using them, and only need the addresses to stay mapped. It hands
/// out addresses only, never a reference to the bytes: what they hold is whoever leases the
/// buffer's business.
#[derive(Clone)]
pub struct PoolMapping {
    memory: Arc<PoolMemory>,
    len: usize,
}

impl PoolMapping {
    /// Where the pool's memory starts (buffer 0), aligned to [`BUF_ALIGN`].
    pub fn base(&self) -> *const u8 {
        self.memory.as_ptr()
    }

    /// Bytes of the pool's buffers from [`base`](Self::base) on.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the pool has no bytes (never: a pool holds at least one buffer).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `[ptr, ptr + len_bytes)` lies inside the pool's memory.
    pub fn contains(&self, ptr: *const u8, len_bytes: usize) -> bool {
        let (start, base) = (ptr as usize, self.base() as usize);
        start >= base
            && start
                .checked_add(len_bytes)
                .is_some_and(|end| end <= base + self.len)
    }
}

impl std::fmt::Debug for PoolMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolMapping")
            .field("base", &self.base())
            .field("len", &self.len)
            .finish()
    }
}

/// The pool's memory: its own huge-page mapping when it is at least a huge page (see
/// `mapped.rs`), else (or when the mapping fails) an aligned heap allocation.
enum PoolMemory {
    Heap(AlignedBuf),
    Mapped(MappedRegion),
}

impl PoolMemory {
    fn new(len: usize) -> PoolMemory {
        if len >= HUGE_PAGE_BYTES {
            if let Some(region) = MappedRegion::new(len) {
                assert!(region.len() >= len, "a region smaller than asked for");
                return PoolMemory::Mapped(region);
            }
        }
        PoolMemory::Heap(AlignedBuf::new(len))
    }

    fn as_ptr(&self) -> *mut u8 {
        match self {
            PoolMemory::Heap(b) => b.as_ptr() as *mut u8,
            PoolMemory::Mapped(r) => r.as_ptr(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let b = AlignedBuf::new(5000);
        assert_eq!(b.len(), 8192);
        assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        let e = AlignedBuf::exact(1024);
        assert_eq!(e.len(), 1024);
        assert_eq!(e.as_slice().len(), 1024);
        assert_eq!(e.as_ptr() as usize % BUF_ALIGN, 0);
    }

    #[test]
    fn pool_registration_covers_every_buffer() {
        let p = FixedBufferPool::new(20000, 4096).unwrap();
        let iov = p.iovecs();
        assert!(iov.len() <= MAX_FIXED_BUFFERS);
        let total: usize = iov.iter().map(|v| v.iov_len).sum();
        assert_eq!(total, p.total_bytes());
        for i in [0, 1, 19999] {
            let e = &iov[p.fixed_index(i) as usize];
            let base = e.iov_base as usize;
            let ptr = p.ptr(i) as usize;
            assert!(ptr >= base && ptr + p.buf_len() <= base + e.iov_len);
        }
    }
}
