//! Reads on the caller's thread: a `get` (a table's, a multi-get's keys, a scan's chunks) from
//! any thread first reads the owning shard's pages in place, optimistically
//! (`tree/optimistic.rs`), and only hands the request to the shard when a page is not
//! resident or keeps changing. The hand-over costs two cross-thread wake-ups (tens of
//! thousands of cycles); a lookup in place costs what the shard's own costs.
//!
//! Each shard gives the database a [`ShardView`] when it opens: its pool's [`PoolView`] and its
//! trees' published roots, both `Send + Sync` and kept alive by the handles (the pool's memory
//! stays mapped while a view exists, also after the shard stopped). A read in place that
//! succeeds is returned only if the shard is still up: after a shard panicked or the database
//! closed, its callers get the same [`ShardError`] as through the hand-over, not what its
//! memory last held.

use super::Db;
use crate::buffer::PoolView;
use crate::error::ShardError;
use crate::tree::optimistic::{self, Optimistic};
use crate::tree::{Direction, PublishedRoots};
use crate::TableId;
use std::cell::Cell;
use std::ops::Bound;
use std::sync::Arc;

/// What the reads of the calling thread did so far, on every database: how many were answered
/// in place on the thread, and how many the shards answered instead (a page not resident, or
/// one that kept changing). Per thread, so counting costs no shared write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallerReads {
    /// Gets (each key of a multi-get) and scan chunks answered on the calling thread.
    pub in_place: u64,
    /// Those the shards answered.
    pub handed_over: u64,
}

thread_local! {
    static CALLER_READS: Cell<CallerReads> = const { Cell::new(CallerReads { in_place: 0, handed_over: 0 }) };
}

/// This thread's [`CallerReads`] so far.
pub fn caller_reads() -> CallerReads {
    CALLER_READS.with(Cell::get)
}

/// Counts one read of this thread.
fn count(in_place: bool) {
    CALLER_READS.with(|c| {
        let mut reads = c.get();
        if in_place {
            reads.in_place += 1;
        } else {
            reads.handed_over += 1;
        }
        c.set(reads);
    });
}

/// What readers on other threads need of one shard.
#[derive(Clone)]
pub(super) struct ShardView {
    pool: PoolView,
    roots: Arc<PublishedRoots>,
}

impl ShardView {
    pub(super) fn new(pool: PoolView, roots: Arc<PublishedRoots>) -> ShardView {
        ShardView { pool, roots }
    }
}

impl Db {
    /// `key` of `table` read in place on shard `shard`: `Some(found)` with the value in `out`,
    /// or `None` when the shard must answer (see the module documentation).
    pub(super) fn get_here(
        &self,
        shard: usize,
        table: TableId,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<bool>, ShardError> {
        let view = &self.shared.views[shard];
        let read = optimistic::get_into(&view.pool, &view.roots, table_index(table), key, out);
        count(matches!(read, Optimistic::Done(_)));
        match read {
            Optimistic::Done(found) => {
                self.check_up(shard)?;
                Ok(Some(found))
            }
            Optimistic::Fallback => Ok(None),
        }
    }

    /// One chunk of a forward scan of `table` on shard `shard` read in place (see
    /// [`optimistic::scan_chunk`]): `Some(next start)` or `None` when the shard must serve it.
    #[allow(clippy::type_complexity)]
    pub(super) fn scan_here(
        &self,
        shard: usize,
        table: TableId,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        direction: Direction,
        limit: usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<Option<Option<Bound<Vec<u8>>>>, ShardError> {
        let view = &self.shared.views[shard];
        let index = table_index(table);
        let read = optimistic::scan_chunk(
            &view.pool,
            &view.roots,
            index,
            bounds,
            direction,
            limit,
            out,
        );
        count(matches!(read, Optimistic::Done(_)));
        match read {
            Optimistic::Done(next) => {
                self.check_up(shard)?;
                Ok(Some(next))
            }
            Optimistic::Fallback => Ok(None),
        }
    }

    /// Fails as the hand-over would when shard `shard` stopped (closed or down).
    fn check_up(&self, shard: usize) -> Result<(), ShardError> {
        let inbox = &self.shared.inboxes[shard];
        if inbox.is_down() {
            return Err(inbox.lost());
        }
        Ok(())
    }
}

/// A table's place in a shard's published roots.
fn table_index(table: TableId) -> usize {
    table.get() as usize
}
