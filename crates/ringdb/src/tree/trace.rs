//! A measurement hook, not part of the API: the point read and the in-place update done the
//! way [`BTree::get`] and [`BTree::insert`] do them, step by step, with a time-stamp counter
//! read between the steps, so `ringdb micro point-cost` can say where an in-memory operation's
//! cycles go (descent through the inner nodes, leaf search, copy) and a regression shows in the
//! step that grew.
//!
//! It calls the tree's own steps (`descend`, `NodeRef::search`, the value copy, the leaf's
//! upsert), so it measures the code that runs, not a copy of it. It never waits: it works on
//! resident pages only and answers `None` when the descent meets a page that is not resident
//! (or an update needs a split), where the real operation would park and restart. Each traced
//! operation pays for its time-stamp reads (four, ~20-40 cycles each on x86_64); the caller
//! can measure that cost with [`timestamp`] and report it.
//!
//! An update goes straight into the tree, as [`BTree::insert`] does: a database with a log
//! must not be changed through it (the log would not know).

use super::BTree;
use crate::error::{StorageError, WriteError};
pub use crate::ids::timestamp;
use crate::node::{NodeMut, NodeRef};

/// Cycles (time-stamp counter ticks) one traced point operation spent in each step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PointTrace {
    /// Fixing the pages from the root down and routing through the inner nodes to the leaf.
    pub descent_cycles: u64,
    /// Reading the leaf and searching it for the key (an update: also checking that the new
    /// value fits in place).
    pub search_cycles: u64,
    /// A read: copying the value out; an update: changing the leaf. Both with the release of
    /// every pin the operation held.
    pub copy_cycles: u64,
    /// Whether the key was in the tree.
    pub found: bool,
}

impl PointTrace {
    /// The three steps together.
    pub fn total_cycles(&self) -> u64 {
        self.descent_cycles + self.search_cycles + self.copy_cycles
    }
}

/// The ticks between two time stamps (0 if the counter went backwards, as it may across CPUs).
fn ticks(from: u64, to: u64) -> u64 {
    to.saturating_sub(from)
}

impl BTree {
    /// Measurement hook: [`get`](Self::get)'s attempt for `key`, timed step by step; the value
    /// found is copied out (as `get` does) and dropped. `Ok(None)` when a page on the way is not
    /// resident: the hook never waits for I/O.
    pub fn trace_get(&self, key: &[u8]) -> Result<Option<PointTrace>, StorageError> {
        let start = timestamp();
        let Ok((path, leaf)) = self.descend(key)? else {
            return Ok(None);
        };
        let descended = timestamp();
        let (value, searched) = leaf.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(leaf.pid(), e))?;
            let slot = n.search(key);
            let searched = timestamp();
            Ok::<_, StorageError>((slot.ok().map(|i| n.value(i).to_vec()), searched))
        })?;
        drop(leaf);
        drop(path);
        let copied = timestamp();
        let found = value.is_some();
        // Dropped after the last time stamp: freeing the value is the caller's cost in `get`.
        drop(value);
        Ok(Some(PointTrace {
            descent_cycles: ticks(start, descended),
            search_cycles: ticks(descended, searched),
            copy_cycles: ticks(searched, copied),
            found,
        }))
    }

    /// Measurement hook: [`insert`](Self::insert)'s attempt for `key` -> `value` when the leaf
    /// takes it in place (an update of a value of the same size always does), timed step by
    /// step. `Ok(None)` when a page on the way is not resident or the leaf would have to split:
    /// nothing was changed then. Straight into the tree: never on a database with a log.
    pub fn trace_update(&self, key: &[u8], value: &[u8]) -> Result<Option<PointTrace>, WriteError> {
        self.check_record(key, value)?;
        let start = timestamp();
        let Ok((path, leaf)) = self.descend(key)? else {
            return Ok(None);
        };
        let descended = timestamp();
        let (found, fits) = leaf.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(leaf.pid(), e))?;
            Ok::<_, StorageError>((n.search(key).is_ok(), n.fits_upsert(key, value)))
        })?;
        let searched = timestamp();
        if !fits {
            return Ok(None);
        }
        leaf.write_content(|p| NodeMut::new(p).upsert(key, value))
            .map_err(|e| Self::corrupt(leaf.pid(), e))?;
        drop(leaf);
        drop(path);
        let copied = timestamp();
        Ok(Some(PointTrace {
            descent_cycles: ticks(start, descended),
            search_cycles: ticks(descended, searched),
            copy_cycles: ticks(searched, copied),
            found,
        }))
    }
}
