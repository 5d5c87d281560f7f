//! A large buffer pool's memory, mapped on its own and backed by transparent huge pages.
//!
//! A buffer manager touches a different frame on almost every page it pins. With 4 KiB pages a pool
//! of 256 MiB spans 65,536 TLB entries, far beyond any TLB, so every pin of a cold frame pays a
//! page walk (in a virtual machine a two-dimensional one): once other costs were cut, the largest
//! single cost of an in-memory point read (measured: docs/results/issue15-cpu-per-op.md). Backed by
//! 2 MiB pages the same pool needs 128 entries. The region is an anonymous mapping aligned to 2 MiB
//! with `MADV_HUGEPAGE`, which works when the kernel's THP mode is `always` or `madvise`; where THP
//! is off the advice is refused or ignored and the memory is ordinary pages (never an error). The
//! kernel zeroes it, and pages are only populated when first touched.

/// Bytes of a huge page (x86_64 and arm64 with 4 KiB base pages).
pub(crate) const HUGE_PAGE_BYTES: usize = 2 << 20;

/// An anonymous, zeroed mapping of at least `len` bytes starting on a huge-page boundary.
pub(crate) struct MappedRegion {
    /// Where the mapping starts (not necessarily aligned).
    map: *mut u8,
    /// Bytes mapped, alignment slack included.
    map_len: usize,
    /// The aligned start handed out.
    start: *mut u8,
    len: usize,
    /// Whether the kernel accepted `MADV_HUGEPAGE`.
    huge_advised: bool,
}

// SAFETY: the region uniquely owns its mapping, like a Box<[u8]>.
unsafe impl Send for MappedRegion {}
// SAFETY: shared access only hands out pointers and `&[u8]`.
unsafe impl Sync for MappedRegion {}

impl MappedRegion {
    /// Maps `len` bytes (rounded up to a huge page); `None` if the kernel has no room.
    pub(crate) fn new(len: usize) -> Option<MappedRegion> {
        let len = len.max(1).div_ceil(HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES;
        let map_len = len.checked_add(HUGE_PAGE_BYTES)?;
        // SAFETY: an anonymous private mapping at an address the kernel picks touches no
        // existing memory; the result is checked for MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let map = map.cast::<u8>();
        let slack = (HUGE_PAGE_BYTES - map as usize % HUGE_PAGE_BYTES) % HUGE_PAGE_BYTES;
        let start = map.wrapping_add(slack);
        // SAFETY: [start, start + len) lies inside the mapping just made (slack < one huge
        // page, map_len = len + one huge page); madvise only changes how it is backed.
        let advised = unsafe { libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE) } == 0;
        Some(MappedRegion {
            map,
            map_len,
            start,
            len,
            huge_advised: advised,
        })
    }

    /// The aligned start.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.start
    }

    /// Bytes usable from [`as_ptr`](Self::as_ptr).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the kernel took the huge-page advice.
    pub(crate) fn huge_advised(&self) -> bool {
        self.huge_advised
    }
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; the pool that owns the region
        // outlives every I/O into it (see `FixedBufferPool`).
        let rc = unsafe { libc::munmap(self.map.cast(), self.map_len) };
        debug_assert_eq!(rc, 0, "munmap of the pool's region failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        let r = MappedRegion::new(3 << 20).expect("mapping");
        assert_eq!(r.as_ptr() as usize % HUGE_PAGE_BYTES, 0);
        assert_eq!(r.len(), 4 << 20);
        // SAFETY: the region owns len bytes from as_ptr.
        let bytes = unsafe { std::slice::from_raw_parts_mut(r.as_ptr(), r.len()) };
        assert!(bytes.iter().step_by(4096).all(|&b| b == 0));
        bytes[r.len() - 1] = 7;
        assert_eq!(bytes[r.len() - 1], 7);
    }
}
