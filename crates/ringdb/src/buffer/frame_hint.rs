//! The page table's frame hints (see `page_table.rs`): where a page was last seen resident, so
//! a pin can start fetching the frame's header before it has read the slot's cells.
//!
//! In a pool larger than the CPU caches, pinning a leaf costs a miss on its page-table entry, then
//! one on its slot's cells (which hold the frame's address), then one on the frame's header: each
//! waits for the one before. Those three led the profile of an in-memory point read (`try_fix`,
//! `PageTable::get`, `Node::new`, the header's miss after the cells' one; measured:
//! docs/results/issue15-cpu-per-op.md, fifteenth session). The entry also records the frame's index
//! in the runtime's buffer pool; the header's prefetch starts from it, and its miss overlaps the
//! cells'. A hint is only prefetched, never read through; a stale one costs a useless prefetch and
//! is corrected by the pin that finds it stale.

use super::frame::Inner;
use super::guard::prefetch_head;
use super::page_table::NO_FRAME;
use super::PageId;
use ringdb_io::PoolBuf;

/// Where the pool's frames lie: every frame is a buffer of the runtime's pool, one mapping.
pub(super) struct FrameAddresses {
    /// Where the pool's buffer 0 starts.
    base: *const u8,
    /// Bytes per buffer (the page size).
    stride: usize,
}

impl FrameAddresses {
    /// The addresses of the pool `frame` was leased from.
    pub(super) fn of_pool(frame: &PoolBuf) -> FrameAddresses {
        FrameAddresses {
            base: frame.pool_base(),
            stride: frame.len(),
        }
    }

    /// The index, in the pool, of the frame starting at `ptr` (`None`, and a failed debug
    /// assertion, were it outside the pool: every frame is leased from it).
    pub(super) fn index_of(&self, ptr: *const u8) -> Option<u32> {
        let offset = (ptr as usize).checked_sub(self.base as usize);
        debug_assert!(
            offset.is_some_and(|o| o % self.stride == 0),
            "frame {ptr:?} is not a buffer of the pool at {:?}",
            self.base
        );
        u32::try_from(offset? / self.stride)
            .ok()
            .filter(|&i| i != NO_FRAME)
    }
}

impl Inner {
    /// Starts fetching the header of the frame `hint` names (nothing for [`NO_FRAME`]).
    #[inline]
    pub(super) fn prefetch_frame(&self, hint: u32) {
        if hint != NO_FRAME {
            let frames = &self.frames;
            // Inside the pool's mapping: the hint was the index of one of its buffers.
            prefetch_head(frames.base.wrapping_add(hint as usize * frames.stride));
        }
    }

    /// Records `ptr`'s frame as `pid`'s hint when `hint` named another one. Skipped while the
    /// pool's state is borrowed elsewhere: the hint is only ever a hint.
    #[inline]
    pub(super) fn correct_frame_hint(&self, pid: PageId, hint: u32, ptr: *const u8) {
        let Some(frame) = self.frames.index_of(ptr) else {
            return;
        };
        if frame != hint {
            if let Ok(mut state) = self.state.try_borrow_mut() {
                state.table.set_frame_hint(pid, frame);
                self.bump(|s| s.frame_hints_corrected += 1);
            }
        }
    }
}
