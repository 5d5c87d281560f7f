//! The buffer manager's sizes and policies ([`PoolConfig`]) and what it counts
//! ([`PoolStats`]).

use crate::error::OpenError;
use serde::Serialize;

/// The fewest frames a pool may have: a root-to-leaf path, a split of every level, and room
/// for eviction to make progress.
pub const MIN_FRAMES: usize = 16;
/// The page sizes a pool accepts (powers of two in this range).
const PAGE_SIZES: std::ops::RangeInclusive<usize> = 4096..=65536;

/// The buffer manager's sizes and policies.
#[derive(Clone, Copy, Debug)]
pub struct PoolConfig {
    /// Bytes per page (and per frame).
    pub page_size: usize,
    /// Frames in the pool.
    pub frames: usize,
    /// Victims collected and written together by one eviction round (1: one at a time).
    pub evict_batch: usize,
    /// An eviction round starts when fewer frames than this are free.
    pub free_target: usize,
    /// Pages the target can hold (`None`: a file that grows).
    pub capacity_pages: Option<u64>,
    /// Whether eviction may write a dirty page back. Without a log, any page. Under a
    /// write-ahead log (`write_ahead`), only pages whose structure the last complete
    /// checkpoint holds, and only once the hook installed with
    /// [`BufferManager::set_write_ahead`](super::BufferManager::set_write_ahead) has made the
    /// log durable past them; a pool left with only other dirty pages asks for a checkpoint.
    /// Off: no dirty page leaves the pool outside a checkpoint (no-steal).
    pub steal: bool,
    /// The pool is under a write-ahead log (see `steal`).
    pub write_ahead: bool,
}

impl PoolConfig {
    /// The defaults for `frames` frames of `page_size` bytes: evict 1/16 of the pool at a
    /// time (up to 64), start below 10% free.
    pub fn new(page_size: usize, frames: usize) -> Self {
        let evict_batch = (frames / 16).clamp(1, 64);
        PoolConfig {
            page_size,
            frames,
            evict_batch,
            free_target: (frames / 10).max(evict_batch).max(4),
            capacity_pages: None,
            steal: true,
            write_ahead: false,
        }
    }

    /// Refuses sizes the buffer manager cannot work with, naming the limit.
    pub fn validate(&self) -> Result<(), OpenError> {
        if !self.page_size.is_power_of_two() || !PAGE_SIZES.contains(&self.page_size) {
            return Err(OpenError::PageSize {
                requested: self.page_size,
                supported: PAGE_SIZES,
            });
        }
        if self.frames < MIN_FRAMES {
            return Err(OpenError::Pool {
                frames: self.frames,
                minimum: MIN_FRAMES,
                page_size: self.page_size,
            });
        }
        let half_pool = self.frames / 2;
        if self.evict_batch == 0 || self.evict_batch > half_pool {
            return Err(OpenError::EvictBatch {
                requested: self.evict_batch,
                maximum: half_pool,
            });
        }
        if self.free_target == 0 || self.free_target > half_pool {
            return Err(OpenError::FreeTarget {
                requested: self.free_target,
                maximum: half_pool,
            });
        }
        Ok(())
    }
}

/// What the buffer manager counts.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PoolStats {
    /// `try_fix` calls that found the page resident.
    pub hits: u64,
    /// `try_fix` calls that did not (the caller then loads it).
    pub misses: u64,
    /// Pages read from the target.
    pub reads: u64,
    /// Pages written to the target (eviction and flush).
    pub writes: u64,
    /// Eviction rounds run.
    pub evict_rounds: u64,
    /// Pages those rounds freed.
    pub evicted: u64,
    /// Times a task waited for a frame or for another task's I/O on a page.
    pub waits: u64,
    /// Of those, the times a task found no free frame (and no round to run) and waited.
    pub frame_waits: u64,
    /// Page reads whose verification (checksum and header) was timed, while
    /// the buffer manager's `time_verification` was on.
    pub verifications_timed: u64,
    /// TSC cycles those verifications took.
    pub verification_cycles: u64,
    /// Pins that found their page's frame hint missing or stale and corrected it. A page gets
    /// its hint when it is read into or allocated in a frame, so pins find it right (see the
    /// page table's documentation); this counts what a later path could leave stale.
    pub frame_hints_corrected: u64,
}
