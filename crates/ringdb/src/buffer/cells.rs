//! What a pin touches per slot, in one place, and what readers on other threads look at.
//!
//! A point read pins one page per tree level, and in a pool larger than the CPU caches every
//! pin of a leaf is a cache miss per structure it touches. The pin count, the borrow counter,
//! the version, the clock's reference bit, the resident frame's address and its page id share
//! one 32-byte record, two per cache line, so pinning a resident page after the page-table
//! lookup reads one line and never borrows the pool's state.
//!
//! The frame address and page id mirror the slot's state, kept by the slot's own transitions
//! (`frame.rs`): the frame is non-null exactly while the page is resident, null while the
//! slot is free or its page is in an I/O. `try_fix` trusts it; debug builds check it against
//! the slot.
//!
//! # Shared with readers on other threads
//! The fields are atomics so that threads other than the shard's can read a resident page
//! optimistically (`optimistic.rs`). Only the shard's thread writes them; it uses plain loads
//! and stores (`Relaxed`, never a read-modify-write), which compile to the same instructions
//! as the `Cell`s they replace. Fields only the shard reads (pins, borrows) are wrapped in
//! [`OwnerCell`]s that offer nothing else.
//!
//! The version is a sequence lock over the slot's bytes: even while the slot holds a stable
//! image of page `pid` in `frame`, odd while its bytes change (a `PageGuard::write`), while its
//! page is in an I/O, and while the slot is free. The shard makes it odd before the bytes (or
//! the frame, or the page id) can change and even again after, with release ordering; a
//! reader takes it with acquire ordering, reads, and takes it again after an acquire fence:
//! the same value, even, means what it read between was one consistent image of `pid`.

use std::sync::atomic::{fence, AtomicBool, AtomicI16, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// A field only the shard's thread reads and writes, kept in an atomic so that the record is
/// `Sync` (readers on other threads share the record, not this field): plain loads and
/// stores, the same instructions as a `Cell`.
pub(super) struct OwnerCell<A>(A);

impl OwnerCell<AtomicU32> {
    #[inline(always)]
    pub(super) fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(super) fn set(&self, value: u32) {
        self.0.store(value, Ordering::Relaxed)
    }
}

impl OwnerCell<AtomicI16> {
    #[inline(always)]
    pub(super) fn get(&self) -> i16 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(super) fn set(&self, value: i16) {
        self.0.store(value, Ordering::Relaxed)
    }
}

/// The per-slot fields (see the module documentation).
#[repr(C, align(32))]
pub(crate) struct SlotCells {
    /// The resident page's bytes; null while the slot is free or its page is in an I/O.
    frame: AtomicPtr<u8>,
    /// The sequence lock over the slot's bytes (see the module documentation).
    version: AtomicU64,
    /// The page the slot holds (meaningful while the version is even).
    pid: AtomicU64,
    /// Pins held on the slot's page.
    pub(super) pins: OwnerCell<AtomicU32>,
    /// n > 0 readers, -1 one writer, 0 none (catches aliasing bugs at run time).
    pub(super) borrows: OwnerCell<AtomicI16>,
    /// The clock's second chance: set by every pin and by readers on other threads, cleared
    /// by the sweep.
    referenced: AtomicBool,
}

const _: () = assert!(std::mem::size_of::<SlotCells>() == 32);

/// What a reader on another thread saw of a slot: the version it must see again, and the
/// page and frame that version names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotSnapshot {
    pub(crate) version: u64,
    pub(crate) pid: u64,
    pub(crate) frame: *const u8,
}

impl SlotCells {
    /// Cells of a free slot (odd version, no frame).
    pub(super) fn new() -> SlotCells {
        SlotCells {
            frame: AtomicPtr::new(std::ptr::null_mut()),
            version: AtomicU64::new(1),
            pid: AtomicU64::new(u64::MAX),
            pins: OwnerCell(AtomicU32::new(0)),
            borrows: OwnerCell(AtomicI16::new(0)),
            referenced: AtomicBool::new(false),
        }
    }

    /// The resident frame's address, or `None` while the slot is free or in an I/O.
    #[inline]
    pub(super) fn resident_frame(&self) -> Option<*mut u8> {
        let ptr = self.frame.load(Ordering::Relaxed);
        (!ptr.is_null()).then_some(ptr)
    }

    /// The version: bumped by two per change of the page's bytes and per trip of its frame
    /// through an I/O (a caller can tell whether the page changed).
    #[inline]
    pub(super) fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Whether the page was pinned (or read by another thread) since the sweep last looked.
    #[inline]
    pub(super) fn referenced(&self) -> bool {
        self.referenced.load(Ordering::Relaxed)
    }

    /// Sets or clears the reference bit (the shard's pins and sweep).
    #[inline]
    pub(super) fn set_referenced(&self, on: bool) {
        self.referenced.store(on, Ordering::Relaxed)
    }

    /// The slot's page `pid` became resident in the frame at `ptr`: odd -> even.
    pub(super) fn publish(&self, ptr: *mut u8, pid: u64) {
        assert!(!ptr.is_null(), "a resident frame has an address");
        assert!(
            self.frame.load(Ordering::Relaxed).is_null(),
            "a frame published twice for one slot"
        );
        let version = self.version.load(Ordering::Relaxed);
        assert!(version % 2 == 1, "a slot published while stable");
        self.pid.store(pid, Ordering::Relaxed);
        self.frame.store(ptr, Ordering::Relaxed);
        // Release: a reader that sees the even version sees the page id, the frame and the
        // bytes the read or the allocation put there.
        self.version.store(version + 1, Ordering::Release);
    }

    /// The slot's page left its frame (an I/O took it, or the slot was released): even ->
    /// odd before anything can touch the frame's bytes.
    pub(super) fn withdraw(&self) {
        assert!(
            !self.frame.load(Ordering::Relaxed).is_null(),
            "a frame withdrawn that was not published"
        );
        assert_eq!(self.pins.get(), 0, "a pinned frame withdrawn");
        self.begin_change();
        self.frame.store(std::ptr::null_mut(), Ordering::Relaxed);
    }

    /// The page's bytes are about to change: even -> odd, ordered before the writes.
    #[inline]
    pub(super) fn begin_change(&self) {
        let version = self.version.load(Ordering::Relaxed);
        assert!(version.is_multiple_of(2), "a change began inside another");
        self.version.store(version + 1, Ordering::Relaxed);
        // Orders the odd version before every later store of this thread (the page's
        // bytes): a reader that read any of them sees an odd or a later version after it.
        fence(Ordering::Release);
    }

    /// The change is done: odd -> even, ordered after the writes; returns the new version.
    #[inline]
    pub(super) fn end_change(&self) -> u64 {
        let version = self.version.load(Ordering::Relaxed);
        debug_assert!(version % 2 == 1, "a change ended that did not begin");
        self.version.store(version + 1, Ordering::Release);
        version + 1
    }

    /// A reader's first look (any thread): the version (acquire) and what it names. `None`
    /// while the slot is changing, in an I/O or free.
    #[inline]
    pub(crate) fn snapshot(&self) -> Option<SlotSnapshot> {
        let version = self.version.load(Ordering::Acquire);
        if version % 2 == 1 {
            return None;
        }
        let frame = self.frame.load(Ordering::Relaxed);
        let pid = self.pid.load(Ordering::Relaxed);
        (!frame.is_null()).then_some(SlotSnapshot {
            version,
            pid,
            frame,
        })
    }

    /// A reader's check after it read the bytes: whether the version is still `version`
    /// (so everything read since [`snapshot`](Self::snapshot) was one consistent image).
    #[inline]
    pub(crate) fn still(&self, version: u64) -> bool {
        // Orders the reads of the page's bytes before the version's second load.
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == version
    }

    /// A reader on another thread used the page: the sweep gives it a second chance. Stores
    /// only when the bit is clear, so that hot pages' lines are not written by every reader.
    #[inline]
    pub(crate) fn touch(&self) {
        if !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
    }
}
