//! Range scans in both directions, in chunks a caller resumes, with read-ahead of the leaves.
//!
//! Leaves are not linked, so a scan moves from leaf to leaf through the separators of the
//! leaves' parent: one *step* descends to the parent of the leaf that holds the scan's
//! position, then walks that parent's children in the scan's direction for as long as they
//! are resident. The first child that is not resident ends the step, which names it together
//! with the next children the scan will need (up to what the limit can use, bounded by
//! [`READ_AHEAD_PAGES`] and by an eighth of the pool). The scan then reads all of those in one
//! submission ([`BufferManager::prefetch`](crate::buffer::BufferManager::prefetch)), waits for
//! them together, and takes the next step from where it stopped. Pages are verified as every
//! read is.
//!
//! With read-ahead off ([`BTree::set_read_ahead`] with 0) a step visits one leaf and waits
//! for one page: one descent and one wait per leaf, the scan as it was before read-ahead,
//! kept as the baseline of the benchmark.
//!
//! A step changes nothing and emits pairs only once it holds the leaf they are in, so a step
//! that has to wait for an inner page restarts from the root without having emitted anything.

use super::BTree;
use crate::buffer::PageGuard;
use crate::error::{StorageError, WaitFor};
use std::ops::Bound;

/// Which way a scan walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending key order, from `start` towards `end`.
    Forward,
    /// Descending key order, from `end` towards `start`.
    Reverse,
}

/// The most leaves one read-ahead batch loads (the default of [`BTree::set_read_ahead`]).
pub const READ_AHEAD_PAGES: usize = 32;

/// Consecutive steps that advance nothing (each waits for a page that a merge then freed)
/// before a scan gives up with `StorageError::Stalled`: far more than any real contention.
const IDLE_STEPS_MAX: u64 = 1 << 20;

/// Pairs of keys and values, as scans return them.
pub(super) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// What one step of a scan asks of the next.
pub(super) struct Step {
    /// Where the scan goes on (on the side it walks from); `None`: it is finished.
    pub(super) next: Option<Bound<Vec<u8>>>,
    /// Leaves to read before the next step, the one it needs first at the front.
    pub(super) missing: Vec<crate::buffer::PageId>,
}

/// What stays the same through the steps of one scan.
#[derive(Clone, Copy)]
pub(super) struct ScanPlan<'a> {
    /// The end the scan walks towards.
    pub(super) far: Bound<&'a [u8]>,
    pub(super) direction: Direction,
    /// `out` holds this many pairs when the scan has its `limit`.
    pub(super) target_len: usize,
    /// Leaves one step may ask to have read together (1: no read-ahead).
    pub(super) batch_pages: usize,
    /// Leaves one step may visit (1 without read-ahead, one descent per leaf).
    pub(super) leaves_per_step: usize,
}

fn owned(bound: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl BTree {
    /// Up to `limit` pairs with keys within (`start`, `end`), in key order
    /// ([`Direction::Forward`]) or descending key order ([`Direction::Reverse`]), appended to
    /// `out`. A caller resumes after the last key it got with `Bound::Excluded(last)` on the
    /// side it walks from (`start` forward, `end` in reverse).
    pub async fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        out: &mut Pairs,
    ) -> Result<(), StorageError> {
        let (from, far) = match direction {
            Direction::Forward => (start, end),
            Direction::Reverse => (end, start),
        };
        let mut position = owned(from);
        let target_len = out.len().saturating_add(limit);
        let mut held: Option<PageGuard> = None;
        let mut idle_steps = 0u64;
        while out.len() < target_len {
            let plan = self.scan_plan(far, direction, target_len, out.len());
            // Nothing runs between this and the step's own pins (see `run`).
            drop(held.take());
            let step = self
                .run(|t, _, resume| {
                    // A scan step descends to the leaves' parent on its own: from the root.
                    drop(resume);
                    t.scan_step_attempt(&position, plan, out)
                })
                .await?;
            let Some(next) = step.next else { break };
            idle_steps = if next == position { idle_steps + 1 } else { 0 };
            if idle_steps >= IDLE_STEPS_MAX {
                return Err(StorageError::Stalled {
                    waiting_for: WaitFor::PageLoad {
                        page: step.missing.first().copied().unwrap_or(0),
                    },
                    rounds: IDLE_STEPS_MAX,
                });
            }
            position = next;
            held = self.load_missing(&step.missing).await?;
        }
        Ok(())
    }

    /// Sets how many leaves a scan reads ahead in one batch (0: none; one leaf per descent
    /// and per wait). Applies to the scans that start afterwards.
    pub fn set_read_ahead(&self, pages: usize) {
        self.read_ahead.set(pages);
    }

    /// How many leaves a scan reads ahead in one batch (see [`set_read_ahead`](Self::set_read_ahead)).
    pub fn read_ahead(&self) -> usize {
        self.read_ahead.get()
    }

    /// The plan of the next step: how many leaves it may ask for, from the pairs per leaf the
    /// tree's scans have seen so far (one leaf when they have seen none).
    fn scan_plan<'a>(
        &self,
        far: Bound<&'a [u8]>,
        direction: Direction,
        target_len: usize,
        have: usize,
    ) -> ScanPlan<'a> {
        let read_ahead = self.read_ahead.get();
        let (batch_pages, leaves_per_step) = if read_ahead == 0 {
            (1, 1)
        } else {
            let stats = self.stats.get();
            let remaining = (target_len - have) as u64;
            // The first leaf may be entered in its middle: one more than the estimate.
            let leaves = match stats.scan_pairs.checked_div(stats.scan_leaves) {
                Some(per_leaf) if per_leaf > 0 => remaining.div_ceil(per_leaf).saturating_add(1),
                _ => 1,
            };
            let pool_share = (self.bm.config().frames / 8).max(1);
            let pages = (leaves.min(read_ahead as u64) as usize).min(pool_share);
            (pages.max(1), usize::MAX)
        };
        ScanPlan {
            far,
            direction,
            target_len,
            batch_pages,
            leaves_per_step,
        }
    }

    /// Reads the leaves a step named (several: in one batch) and pins the first, so that the
    /// next step can use it even if the pool is under pressure; `None` when it was freed.
    async fn load_missing(
        &self,
        missing: &[crate::buffer::PageId],
    ) -> Result<Option<PageGuard>, StorageError> {
        let Some(&first) = missing.first() else {
            return Ok(None);
        };
        if missing.len() > 1 {
            let read = self.bm.prefetch(missing).await?;
            self.bump(|s| {
                s.read_ahead_batches += 1;
                s.read_ahead_pages += read as u64;
            });
        }
        self.bm.load(first).await
    }
}
