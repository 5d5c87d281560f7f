//! What a pin touches per slot, in one place.
//!
//! A point read pins one page per tree level, and in a pool larger than the CPU caches every
//! pin of a leaf is a cache miss per structure it touches. The pin count, the borrow counter,
//! the version, the clock's reference bit and the resident frame's address used to live in
//! five places (three arrays and the slot in the `RefCell`ed state); here they share one
//! 32-byte record, two per cache line, so pinning a resident page after the page-table lookup
//! reads one line and never borrows the pool's state.
//!
//! The frame address is a mirror of the slot's state, kept by the slot's own transitions
//! (`frame.rs`): non-null exactly while the page is resident, null while the slot is free or
//! its page is in an I/O. `try_fix` trusts it; debug builds check it against the slot.

use std::cell::Cell;

/// The hot per-slot fields (see the module documentation).
pub(super) struct SlotCells {
    /// The resident page's bytes; null while the slot is free or its page is in an I/O.
    frame: Cell<*mut u8>,
    /// Pins held on the slot's page.
    pub(super) pins: Cell<u32>,
    /// n > 0 readers, -1 one writer, 0 none (catches aliasing bugs at run time).
    pub(super) borrows: Cell<i32>,
    /// The clock's second chance: set by every pin, cleared by the sweep.
    pub(super) referenced: Cell<bool>,
    /// Bumped on every write access.
    pub(super) version: Cell<u64>,
}

impl SlotCells {
    /// Cells of a free slot.
    pub(super) fn new() -> SlotCells {
        SlotCells {
            frame: Cell::new(std::ptr::null_mut()),
            pins: Cell::new(0),
            borrows: Cell::new(0),
            referenced: Cell::new(false),
            version: Cell::new(0),
        }
    }

    /// The resident frame's address, or `None` while the slot is free or in an I/O.
    #[inline]
    pub(super) fn resident_frame(&self) -> Option<*mut u8> {
        let ptr = self.frame.get();
        (!ptr.is_null()).then_some(ptr)
    }

    /// The slot's page became resident in the frame at `ptr`.
    pub(super) fn publish(&self, ptr: *mut u8) {
        assert!(!ptr.is_null(), "a resident frame has an address");
        assert!(
            self.frame.get().is_null(),
            "a frame published twice for one slot"
        );
        self.frame.set(ptr);
    }

    /// The slot's page left its frame (an I/O took it, or the slot was released).
    pub(super) fn withdraw(&self) {
        assert!(
            !self.frame.get().is_null(),
            "a frame withdrawn that was not published"
        );
        assert_eq!(self.pins.get(), 0, "a pinned frame withdrawn");
        self.frame.set(std::ptr::null_mut());
    }
}
