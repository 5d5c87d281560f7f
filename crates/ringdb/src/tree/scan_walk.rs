//! One step of a scan: the descent to the parent of the leaf that holds the scan's position,
//! and the walk over that parent's children in the scan's direction.
//!
//! Child `i` of an inner node holds the keys in `[separator i-1, separator i)`, so after
//! child `i` a forward scan goes on at `Included(separator i)` and a reverse scan at
//! `Excluded(separator i-1)`; past the parent's last child (either way) it goes on at the
//! nearest separator of the levels above (the parent's *fence* on that side), or ends at the
//! edge of the tree.

use super::scan::{Direction, Pairs, ScanPlan, Step};
use super::scan_leaf::{emit_leaf, range_is_empty};
use super::{Attempt, BTree, Need};
use crate::buffer::{PageGuard, PageId};
use crate::error::{Corruption, StorageError};
use crate::node::NodeRef;
use std::ops::Bound;

/// A child of the leaves' parent, in the order the scan visits them.
struct Child {
    page: PageId,
    /// Where the scan goes on after this child; `None` at the edge of the tree.
    after: Option<Bound<Vec<u8>>>,
}

/// The child of an inner node that holds the scan's position, and the separator beyond it on
/// the side the scan walks to.
struct Route {
    child: PageId,
    fence: Option<Vec<u8>>,
}

/// The child index a position leads to: forward, the child holding the position's first key;
/// in reverse, the one holding its last (for `Excluded(k)`: the keys below `k`).
fn child_index(node: &NodeRef<'_>, position: &Bound<Vec<u8>>, direction: Direction) -> usize {
    match (direction, position) {
        (Direction::Forward, Bound::Unbounded) => 0,
        (Direction::Reverse, Bound::Unbounded) => node.count(),
        (_, Bound::Included(k)) | (Direction::Forward, Bound::Excluded(k)) => node.child_index(k),
        (Direction::Reverse, Bound::Excluded(k)) => node.lower_bound(k),
    }
}

/// Where the scan goes on after child `index` of `node` (`outer`: the fence above `node`).
fn after_child(
    node: &NodeRef<'_>,
    index: usize,
    direction: Direction,
    outer: Option<&[u8]>,
) -> Option<Bound<Vec<u8>>> {
    match direction {
        Direction::Forward if index < node.count() => {
            Some(Bound::Included(node.key(index).to_vec()))
        }
        Direction::Forward => outer.map(|k| Bound::Included(k.to_vec())),
        Direction::Reverse if index > 0 => Some(Bound::Excluded(node.key(index - 1).to_vec())),
        Direction::Reverse => outer.map(|k| Bound::Excluded(k.to_vec())),
    }
}

impl BTree {
    /// One step of a scan from `position` (see the module documentation): appends what the
    /// resident leaves give and says where to go on and what to read first.
    pub(super) fn scan_step_attempt(
        &self,
        position: &Bound<Vec<u8>>,
        plan: ScanPlan<'_>,
        out: &mut Pairs,
    ) -> Result<Attempt<Step>, StorageError> {
        let root = self.root.get();
        let mut node = fix!(self, root.root);
        if root.height == 1 {
            self.check_leaf(&node, 1)?;
            let (_, emitted) = emit_leaf(&node, position, plan, out)?;
            self.count_leaf(emitted);
            return Ok(Ok(Step {
                next: None,
                missing: Vec::new(),
            }));
        }
        let mut outer: Option<Vec<u8>> = None;
        for depth in 1..root.height - 1 {
            let route = self.route_scan(&node, position, plan.direction, depth as usize)?;
            if route.fence.is_some() {
                outer = route.fence;
            }
            node = fix!(self, route.child);
        }
        let children = self.children_from(&node, position, plan.direction, outer.as_deref())?;
        drop(node);
        self.walk_children(&children, position, plan, out)
    }

    /// Reads the inner node `node` at `depth` (the root at 1) for `position`.
    fn route_scan(
        &self,
        node: &PageGuard,
        position: &Bound<Vec<u8>>,
        direction: Direction,
        depth: usize,
    ) -> Result<Route, StorageError> {
        node.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(node.pid(), e))?;
            if n.is_leaf() {
                return Err(self.leaf_depth(node.pid(), depth));
            }
            let index = child_index(&n, position, direction);
            let fence = match direction {
                Direction::Forward => (index < n.count()).then(|| n.key(index).to_vec()),
                Direction::Reverse => (index > 0).then(|| n.key(index - 1).to_vec()),
            };
            Ok(Route {
                child: n.child_at(index),
                fence,
            })
        })
    }

    /// The children of the leaves' parent `node` the scan visits from `position` on, in order.
    fn children_from(
        &self,
        node: &PageGuard,
        position: &Bound<Vec<u8>>,
        direction: Direction,
        outer: Option<&[u8]>,
    ) -> Result<Vec<Child>, StorageError> {
        let height = self.root.get().height as usize;
        node.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(node.pid(), e))?;
            if n.is_leaf() {
                return Err(self.leaf_depth(node.pid(), height - 1));
            }
            let first = child_index(&n, position, direction);
            let indexes: Box<dyn Iterator<Item = usize>> = match direction {
                Direction::Forward => Box::new(first..=n.count()),
                Direction::Reverse => Box::new((0..=first).rev()),
            };
            Ok(indexes
                .map(|i| Child {
                    page: n.child_at(i),
                    after: after_child(&n, i, direction, outer),
                })
                .collect())
        })
    }

    /// Visits `children` in order while they are resident (at most `leaves_per_step`), then
    /// names the ones to read next.
    fn walk_children(
        &self,
        children: &[Child],
        position: &Bound<Vec<u8>>,
        plan: ScanPlan<'_>,
        out: &mut Pairs,
    ) -> Result<Attempt<Step>, StorageError> {
        let mut at = position.clone();
        for (visited, child) in children.iter().enumerate() {
            if visited == plan.leaves_per_step {
                break;
            }
            let Some(leaf) = self.bm.try_fix(child.page) else {
                let missing = Self::to_read(&children[visited..], plan);
                return Ok(Ok(Step {
                    next: Some(at),
                    missing,
                }));
            };
            self.check_leaf(&leaf, self.root.get().height as usize)?;
            let (done, emitted) = emit_leaf(&leaf, &at, plan, out)?;
            self.count_leaf(emitted);
            match &child.after {
                Some(after) if !done && !range_is_empty(after, plan.far, plan.direction) => {
                    at = after.clone();
                }
                _ => {
                    return Ok(Ok(Step {
                        next: None,
                        missing: Vec::new(),
                    }))
                }
            }
        }
        Ok(Ok(Step {
            next: Some(at),
            missing: Vec::new(),
        }))
    }

    /// The pages to read before the next step: the first of `ahead` (not resident) and the
    /// next ones the scan will enter, up to the plan's batch.
    fn to_read(ahead: &[Child], plan: ScanPlan<'_>) -> Vec<PageId> {
        let mut pages = vec![ahead[0].page];
        for pair in ahead.windows(2).take(plan.batch_pages.saturating_sub(1)) {
            match &pair[0].after {
                Some(entry) if !range_is_empty(entry, plan.far, plan.direction) => {
                    pages.push(pair[1].page)
                }
                _ => break,
            }
        }
        pages
    }

    /// Fails unless `node` is a leaf (found at `depth`, which the tree's height must equal).
    fn check_leaf(&self, node: &PageGuard, depth: usize) -> Result<(), StorageError> {
        let is_leaf = node.read(|p| NodeRef::new(p).map(|n| n.is_leaf()));
        match is_leaf {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.leaf_depth(node.pid(), depth + 1)),
            Err(e) => Err(Self::corrupt(node.pid(), e)),
        }
    }

    /// A leaf (or its absence) at the wrong depth.
    fn leaf_depth(&self, page: PageId, depth: usize) -> StorageError {
        Self::corrupt(
            page,
            Corruption::LeafDepth {
                depth,
                height: self.root.get().height,
            },
        )
    }

    /// Counts one leaf visited by a scan and the pairs it gave.
    fn count_leaf(&self, emitted: usize) {
        self.bump(|s| {
            s.scan_leaves += 1;
            s.scan_pairs += emitted as u64;
        });
    }
}
