//! A fixed-length slice whose memory is backed by transparent huge pages once it is large.
//!
//! The buffer manager's per-frame tables (the page table, the pin cells) are read at random, one
//! entry per pinned page. A pool of 65,536 frames makes each of them 1-2 MiB: hundreds of 4 KiB
//! pages, so a lookup in a cold part of them pays a TLB miss (in a virtual machine a
//! two-dimensional page walk) on top of the cache miss. On one huge page it pays neither walk.
//! Small slices (below [`HUGE_SLICE_MIN_BYTES`]) stay on the heap: a huge page is populated
//! whole on first touch and would waste memory there.

use crate::mapped::{MappedRegion, HUGE_PAGE_BYTES};
use std::ops::{Deref, DerefMut};

/// Slices of at least this many bytes are mapped on huge pages.
pub const HUGE_SLICE_MIN_BYTES: usize = HUGE_PAGE_BYTES / 2;

/// `len` values of `T`, on huge pages when large (see the module documentation).
pub struct HugeSlice<T> {
    memory: Memory<T>,
}

enum Memory<T> {
    Heap(Box<[T]>),
    Mapped {
        region: MappedRegion,
        len: usize,
        /// The region holds `T`s (for `Send`/`Sync` and drop checking).
        _values: std::marker::PhantomData<T>,
    },
}

impl<T> HugeSlice<T> {
    /// A slice of `len` values, value `i` made by `make(i)`.
    pub fn from_fn(len: usize, mut make: impl FnMut(usize) -> T) -> HugeSlice<T> {
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        assert!(
            std::mem::align_of::<T>() <= HUGE_PAGE_BYTES,
            "a type aligned beyond a huge page"
        );
        let region = (bytes >= HUGE_SLICE_MIN_BYTES)
            .then(|| MappedRegion::new(bytes))
            .flatten();
        let Some(region) = region else {
            return HugeSlice {
                memory: Memory::Heap((0..len).map(make).collect()),
            };
        };
        assert!(region.len() >= bytes, "a region smaller than asked for");
        let first = region.as_ptr().cast::<T>();
        for i in 0..len {
            // SAFETY: the region is huge-page aligned (so aligned for T, checked above) and
            // holds `len` values of T (checked above); slot i is written once, before any
            // reference to the slice exists.
            unsafe { first.add(i).write(make(i)) };
        }
        HugeSlice {
            memory: Memory::Mapped {
                region,
                len,
                _values: std::marker::PhantomData,
            },
        }
    }

    /// Whether the values live on a mapping advised to use huge pages.
    pub fn on_huge_pages(&self) -> bool {
        matches!(&self.memory, Memory::Mapped { region, .. } if region.huge_advised())
    }
}

impl<T> Deref for HugeSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.memory {
            Memory::Heap(values) => values,
            // SAFETY: `from_fn` initialised `len` values from the region's start, and the
            // region lives as long as `self`.
            Memory::Mapped { region, len, .. } => unsafe {
                std::slice::from_raw_parts(region.as_ptr().cast::<T>(), *len)
            },
        }
    }
}

impl<T> DerefMut for HugeSlice<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.memory {
            Memory::Heap(values) => values,
            // SAFETY: as in `deref`; `&mut self` makes this the only view.
            Memory::Mapped { region, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(region.as_ptr().cast::<T>(), *len)
            },
        }
    }
}

impl<T> Drop for HugeSlice<T> {
    fn drop(&mut self) {
        if let Memory::Mapped { region, len, .. } = &mut self.memory {
            let values = std::ptr::slice_from_raw_parts_mut(region.as_ptr().cast::<T>(), *len);
            // SAFETY: the `len` values were initialised in `from_fn` and are dropped once,
            // here; the region is unmapped after (its own Drop).
            unsafe { std::ptr::drop_in_place(values) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn large_slices_are_mapped_small_ones_are_not_and_values_drop_once() {
        let witness = Rc::new(());
        let big = HugeSlice::from_fn(200_000, |i| (i, witness.clone()));
        assert!(matches!(big.memory, Memory::Mapped { .. }));
        assert_eq!(big.len(), 200_000);
        assert_eq!(big[199_999].0, 199_999);
        let small = HugeSlice::from_fn(10, |i| (i, witness.clone()));
        assert!(matches!(small.memory, Memory::Heap(_)));
        assert_eq!(Rc::strong_count(&witness), 200_011);
        drop(big);
        drop(small);
        assert_eq!(Rc::strong_count(&witness), 1);
    }
}
