//! Reads from any thread, without the shard: a descent over pages read in place, each
//! validated by its slot's version (optimistic lock coupling, as in vmcache and LeanStore).
//!
//! The shard publishes each tree's root in a [`PublishedRoots`] directory; a reader loads the
//! root, opens its page through the pool's [`PoolView`], and checks that the root is still
//! that page (a root that split or collapsed meanwhile changed its page's version too). At
//! each inner node it finds the child, opens the child's page, and only then checks that the
//! parent did not change: the child it opened was the one the parent named at that moment.
//! At the leaf it copies what it needs and checks the leaf. A check that fails means the page
//! changed under the reader: it starts again from the root, up to [`OPTIMISTIC_TRIES`]
//! times. A page that is not resident, or a page that keeps changing, ends the attempt with
//! [`Optimistic::Fallback`]: the caller hands the request to the shard, which faults the page
//! in (and serves it in place).
//!
//! What a reader sees is what a read handed to the shard sees: the tree as the applied writes
//! left it. A write is applied before it is acknowledged; a batch is atomic, not isolated (its
//! operations are applied one after the other, and a reader, here or on the shard, may see
//! some of them before the rest).

use super::Direction;
use crate::buffer::{Open, OptimisticPage, PageId, PoolView};
use crate::racy_node::{self, RacyHeader};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Attempts a reader makes before it hands the request to the shard: each failed one met a
/// page that changed while it was read.
pub const OPTIMISTIC_TRIES: usize = 16;

/// A root no tree has published.
const NO_ROOT: u64 = u64::MAX;

/// The roots of one shard's trees, by table index, as the shard publishes them (see
/// [`BTree::publish_root`](super::BTree::publish_root)). `Send + Sync`.
pub struct PublishedRoots {
    roots: Box<[AtomicU64]>,
}

impl PublishedRoots {
    /// A directory for tables `0..tables` (a table beyond it is not published: its reads go
    /// to the shard).
    pub fn new(tables: usize) -> Arc<PublishedRoots> {
        Arc::new(PublishedRoots {
            roots: (0..tables).map(|_| AtomicU64::new(NO_ROOT)).collect(),
        })
    }

    /// Table `index`'s tree now starts at `root` (the shard, after the change).
    pub(super) fn set(&self, index: usize, root: PageId) {
        if let Some(cell) = self.roots.get(index) {
            cell.store(root, Ordering::Release);
        }
    }

    /// Table `index`'s root, if published.
    fn get(&self, index: usize) -> Option<PageId> {
        let root = self.roots.get(index)?.load(Ordering::Acquire);
        (root != NO_ROOT).then_some(root)
    }
}

/// What an optimistic read ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Optimistic<T> {
    /// The answer, read from pages validated by their versions.
    Done(T),
    /// Not here: a page is not resident, kept changing, or the table is not published. Ask
    /// the shard.
    Fallback,
}

/// One attempt's end.
enum Step<T> {
    Done(T),
    /// A page changed while it was read: again from the root.
    Retry,
    Fallback,
}

/// A leaf reached by a descent: its page and header, not yet validated.
struct Leaf<'v> {
    page: OptimisticPage<'v>,
    header: RacyHeader,
}

/// The value of `key` in table `table` appended to `out` (cleared first), with whether it was
/// present; `Fallback` when the shard must answer.
pub fn get_into(
    view: &PoolView,
    roots: &PublishedRoots,
    table: usize,
    key: &[u8],
    out: &mut Vec<u8>,
) -> Optimistic<bool> {
    for _ in 0..OPTIMISTIC_TRIES {
        out.clear();
        let step = match descend(view, roots, table, key, None) {
            Step::Done(leaf) => read_leaf(&leaf, |page, header| {
                racy_node::value_into(page, header, key, out)
            }),
            Step::Retry => Step::Retry,
            Step::Fallback => Step::Fallback,
        };
        match step {
            Step::Done(found) => return Optimistic::Done(found),
            Step::Retry => continue,
            Step::Fallback => return Optimistic::Fallback,
        }
    }
    out.clear();
    Optimistic::Fallback
}

#[cfg(any(test, feature = "__internal"))]
/// The cycles of one read's steps on the caller's thread: a measurement hook for
/// `ringdb micro point-cost` (time-stamp reads between the steps of [`get_into`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct OptimisticTrace {
    /// From the root's published page to the leaf opened: every level's lookup, version and
    /// routing, and the parent's validation after each child was opened.
    pub descent_cycles: u64,
    /// The leaf's binary search.
    pub search_cycles: u64,
    /// The value copied out with atomic word loads.
    pub copy_cycles: u64,
    /// The leaf's version checked again.
    pub validate_cycles: u64,
    /// Whether the key was present.
    pub found: bool,
}

#[cfg(any(test, feature = "__internal"))]
impl OptimisticTrace {
    /// The steps added up.
    pub fn total_cycles(&self) -> u64 {
        self.descent_cycles + self.search_cycles + self.copy_cycles + self.validate_cycles
    }
}

#[cfg(any(test, feature = "__internal"))]
/// [`get_into`] once, timed step by step; `None` when the attempt did not end with a
/// validated answer (the caller measures resident, quiet pages).
pub fn trace_get(
    view: &PoolView,
    roots: &PublishedRoots,
    table: usize,
    key: &[u8],
    out: &mut Vec<u8>,
) -> Option<OptimisticTrace> {
    use super::timestamp;
    let start = timestamp();
    let Step::Done(leaf) = descend(view, roots, table, key, None) else {
        return None;
    };
    let descended = timestamp();
    let found = racy_node::search(leaf.page.bytes(), &leaf.header, key)?;
    let searched = timestamp();
    out.clear();
    if let Ok(index) = found {
        racy_node::value_at(leaf.page.bytes(), &leaf.header, index, out)?;
    }
    let copied = timestamp();
    let valid = leaf.page.still_valid();
    let validated = timestamp();
    valid.then_some(OptimisticTrace {
        descent_cycles: descended - start,
        search_cycles: searched - descended,
        copy_cycles: copied - searched,
        validate_cycles: validated - copied,
        found: found.is_ok(),
    })
}

/// Runs `read` over the leaf and validates it: `Done` only for a read of one consistent
/// image; a read that made no sense of a page that did not change is a `Fallback` (the
/// shard's path reports what is wrong with it).
fn read_leaf<T>(
    leaf: &Leaf<'_>,
    read: impl FnOnce(&crate::racy::RacyPage<'_>, &RacyHeader) -> Option<T>,
) -> Step<T> {
    let result = read(leaf.page.bytes(), &leaf.header);
    match (leaf.page.still_valid(), result) {
        (false, _) => Step::Retry,
        (true, Some(value)) => Step::Done(value),
        (true, None) => Step::Fallback,
    }
}

/// Opens `pid`: the page, or the step that ends the attempt.
fn open(view: &PoolView, pid: PageId) -> Result<OptimisticPage<'_>, Step<()>> {
    match view.open(pid) {
        Open::Page(page) => Ok(page),
        Open::Absent => Err(Step::Fallback),
        Open::Busy => Err(Step::Retry),
    }
}

/// Descends from table `table`'s root to the leaf for `key` with lock coupling (see the
/// module documentation). With `fence`, it receives the smallest separator above the leaf's
/// keys (the key the next leaf starts at), or is left empty for the last leaf.
fn descend<'v>(
    view: &'v PoolView,
    roots: &PublishedRoots,
    table: usize,
    key: &[u8],
    mut fence: Option<&mut Vec<u8>>,
) -> Step<Leaf<'v>> {
    let Some(root) = roots.get(table) else {
        return Step::Fallback;
    };
    let mut node = match open(view, root) {
        Ok(page) => page,
        Err(step) => return relabel(step),
    };
    if roots.get(table) != Some(root) {
        return Step::Retry;
    }
    if let Some(f) = fence.as_deref_mut() {
        f.clear();
    }
    let mut level_above: Option<u16> = None;
    // Bounded: a tree is at most MAX_LEVEL + 1 nodes deep (each level checked below).
    for _ in 0..=crate::node::MAX_LEVEL {
        let page = node.bytes();
        let Some(header) = racy_node::header(page) else {
            return if node.still_valid() {
                Step::Fallback
            } else {
                Step::Retry
            };
        };
        if level_above.is_some_and(|above| header.level + 1 != above) {
            return if node.still_valid() {
                Step::Fallback
            } else {
                Step::Retry
            };
        }
        if header.is_leaf() {
            return Step::Done(Leaf { page: node, header });
        }
        let Some((index, child)) = racy_node::child_for(page, &header, key) else {
            return if node.still_valid() {
                Step::Fallback
            } else {
                Step::Retry
            };
        };
        if let Some(f) = fence.as_deref_mut() {
            if index < header.count {
                f.clear();
                if racy_node::separator_into(page, &header, index, f).is_none() {
                    return Step::Retry;
                }
            }
        }
        let next = match open(view, child) {
            Ok(next) => next,
            Err(step) if node.still_valid() => return relabel(step),
            Err(_) => return Step::Retry,
        };
        if !node.still_valid() {
            return Step::Retry;
        }
        level_above = Some(header.level);
        node = next;
    }
    Step::Fallback
}

/// A step without a value, as a step of another type.
fn relabel<T>(step: Step<()>) -> Step<T> {
    match step {
        Step::Done(()) | Step::Fallback => Step::Fallback,
        Step::Retry => Step::Retry,
    }
}

/// One chunk of a scan read optimistically: up to `limit` pairs of table `table` within
/// (`start`, `end`) in `direction`, appended to `out`, all from one leaf; returns where the
/// next chunk starts (`None`: the range is done). Only forward scans are read here; a
/// backward one is a `Fallback`.
pub fn scan_chunk(
    view: &PoolView,
    roots: &PublishedRoots,
    table: usize,
    (start, end): (Bound<&[u8]>, Bound<&[u8]>),
    direction: Direction,
    limit: usize,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> Optimistic<Option<Bound<Vec<u8>>>> {
    if direction != Direction::Forward || limit == 0 {
        return Optimistic::Fallback;
    }
    let seek: &[u8] = match start {
        Bound::Included(k) | Bound::Excluded(k) => k,
        Bound::Unbounded => &[],
    };
    let mut fence = Vec::new();
    for _ in 0..OPTIMISTIC_TRIES {
        let mark = out.len();
        let step = match descend(view, roots, table, seek, Some(&mut fence)) {
            Step::Done(leaf) => read_leaf(&leaf, |page, header| {
                leaf_pairs(page, header, (start, end), limit, out)
            }),
            Step::Retry => Step::Retry,
            Step::Fallback => Step::Fallback,
        };
        match step {
            Step::Done(LeafEnd::Full(last)) => return Optimistic::Done(Some(last)),
            Step::Done(LeafEnd::PastEnd) => return Optimistic::Done(None),
            Step::Done(LeafEnd::Exhausted) if fence.is_empty() => {
                return Optimistic::Done(None);
            }
            Step::Done(LeafEnd::Exhausted) => {
                return Optimistic::Done(Some(Bound::Included(fence)));
            }
            Step::Retry => out.truncate(mark),
            Step::Fallback => {
                out.truncate(mark);
                return Optimistic::Fallback;
            }
        }
    }
    Optimistic::Fallback
}

/// How a leaf's pairs ended for a chunk.
enum LeafEnd {
    /// The limit was reached: the next chunk starts after this key.
    Full(Bound<Vec<u8>>),
    /// A key past the range's end: the range is done.
    PastEnd,
    /// The leaf has no more pairs: the next chunk starts at its fence.
    Exhausted,
}

/// Appends the leaf's pairs within the bounds, up to `limit`.
fn leaf_pairs(
    page: &crate::racy::RacyPage<'_>,
    header: &RacyHeader,
    (start, end): (Bound<&[u8]>, Bound<&[u8]>),
    limit: usize,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> Option<LeafEnd> {
    let first = match start {
        Bound::Included(k) => racy_node::search(page, header, k)?.unwrap_or_else(|i| i),
        Bound::Excluded(k) => match racy_node::search(page, header, k)? {
            Ok(i) => i + 1,
            Err(i) => i,
        },
        Bound::Unbounded => 0,
    };
    let mut taken = 0;
    // Bounded by the slot count.
    for index in first..header.count {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        racy_node::pair_into(page, header, index, &mut key, &mut value)?;
        let beyond = match end {
            Bound::Included(e) => key.as_slice() > e,
            Bound::Excluded(e) => key.as_slice() >= e,
            Bound::Unbounded => false,
        };
        if beyond {
            return Some(LeafEnd::PastEnd);
        }
        out.push((key, value));
        taken += 1;
        if taken == limit {
            let last = out.last().map(|(k, _)| k.clone()).unwrap_or_default();
            return Some(LeafEnd::Full(Bound::Excluded(last)));
        }
    }
    Some(LeafEnd::Exhausted)
}
