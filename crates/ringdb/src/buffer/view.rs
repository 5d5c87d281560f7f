//! The pool as threads other than the shard's see it: pages read in place, optimistically.
//!
//! A [`PoolView`] (`Clone + Send + Sync`) shares the shard's page table entries, its slot
//! cells and its frames' memory. A reader looks a page up ([`PoolView::open`]), takes the
//! slot's version (a sequence lock, see `cells.rs`), reads the bytes it needs through
//! [`RacyPage`], and checks the version again ([`OptimisticPage::still_valid`]): unchanged and
//! even means what it read was one consistent image of the page, else it retries. It takes no
//! pin and writes nothing but, where it is clear, the clock's reference bit; the shard's hot
//! path takes no lock for it.
//!
//! # Why this is sound
//! - **The memory stays mapped.** Every frame is a buffer of the runtime's pool; the view holds
//!   a [`PoolMapping`], which keeps the pool's memory allocated as long as a reader holds the
//!   view, also after the shard and its runtime are gone. A frame address is checked to lie
//!   inside that mapping before it is read.
//! - **Bytes another thread may be writing are never read through `&[u8]`.** [`RacyPage`]
//!   (`racy.rs`) reads with `AtomicU64` loads of aligned words only (frames are page-aligned), so a read
//!   racing the shard's writes (or the kernel's DMA into a frame that was reused) returns
//!   some value, never undefined behaviour in the reader, and the version check throws that
//!   value away. The shard writes pages through `&mut [u8]` as before: the mixed access is
//!   the sequence-lock pattern (Boehm, "Can seqlocks get along with programming language
//!   memory models?", 2012) with plain stores on the writer's side; the orderings on the
//!   version (release fence after it goes odd, release store when it goes even, acquire load
//!   and acquire fence on the reader's side) are the ones that paper gives. Rust has no
//!   byte-wise atomic memcpy yet (RFC 3301); this is the same compromise crossbeam's
//!   `AtomicCell` and the `seqlock` crate make.
//! - **Nothing read is trusted before it is validated.** Every offset a reader derives from
//!   page bytes is bounds-checked by [`RacyPage`] (a read outside the page is `None`), every
//!   loop over page contents is bounded by the page size, so a torn image can make a decoder
//!   give up, never panic or loop; only a validated result leaves the reader.

use super::cells::{SlotCells, SlotSnapshot};
use super::guard::prefetch_head;
use super::page_table::{Entries, NO_FRAME};
use super::PageId;
use crate::racy::{RacyPage, WORD_BYTES};
use ringdb_io::{HugeSlice, PoolMapping};
use std::sync::Arc;

/// One shard's pool as readers on other threads see it (see the module documentation).
#[derive(Clone)]
pub struct PoolView {
    cells: Arc<HugeSlice<SlotCells>>,
    table: Arc<Entries>,
    mapping: PoolMapping,
    page_size: usize,
}

/// What [`PoolView::open`] found.
pub enum Open<'v> {
    /// The page, resident and stable when looked at: read it, then validate.
    Page(OptimisticPage<'v>),
    /// Not resident (or moving between slots): the shard must bring it in.
    Absent,
    /// Being changed or written back right now: try again.
    Busy,
}

impl PoolView {
    pub(super) fn new(
        cells: Arc<HugeSlice<SlotCells>>,
        table: Arc<Entries>,
        mapping: PoolMapping,
        page_size: usize,
    ) -> PoolView {
        assert!(page_size.is_multiple_of(WORD_BYTES) && page_size > 0);
        PoolView {
            cells,
            table,
            mapping,
            page_size,
        }
    }

    /// Bytes per page.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Looks page `pid` up and takes its slot's version (see [`Open`]).
    #[inline]
    pub fn open(&self, pid: PageId) -> Open<'_> {
        let Some((slot, hint)) = self.table.lookup(pid) else {
            return Open::Absent;
        };
        if hint != NO_FRAME {
            // The frame's header and first slots are on their way while the cells are read
            // (a stale hint costs a useless prefetch; prefetching never faults).
            prefetch_head(
                self.mapping
                    .base()
                    .wrapping_add(hint as usize * self.page_size),
            );
        }
        let Some(cells) = self.cells.get(slot) else {
            return Open::Busy;
        };
        let Some(snapshot) = cells.snapshot() else {
            return Open::Busy;
        };
        if snapshot.pid != pid {
            // The entry's words were read while the shard moved it, or the slot was reused
            // since: look again.
            return Open::Busy;
        }
        if !self.mapping.contains(snapshot.frame, self.page_size) {
            debug_assert!(false, "frame {:?} outside the pool", snapshot.frame);
            return Open::Absent;
        }
        cells.touch();
        Open::Page(OptimisticPage {
            cells,
            snapshot,
            // SAFETY: the frame lies inside the pool's mapping (checked above), which the view
            // keeps allocated for as long as the page borrows the view; frames are
            // page-aligned and `page_size` bytes long.
            page: unsafe { RacyPage::from_raw(snapshot.frame, self.page_size) },
        })
    }
}

/// A page read without a pin (see the module documentation).
pub struct OptimisticPage<'v> {
    cells: &'v SlotCells,
    snapshot: SlotSnapshot,
    page: RacyPage<'v>,
}

impl<'v> OptimisticPage<'v> {
    /// The page's bytes, for racy reads.
    #[inline]
    pub fn bytes(&self) -> &RacyPage<'v> {
        &self.page
    }

    /// Whether everything read since [`PoolView::open`] was one consistent image of the page.
    #[inline]
    pub fn still_valid(&self) -> bool {
        self.cells.still(self.snapshot.version)
    }
}
