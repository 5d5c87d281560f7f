//! Resuming a descent at the page its wait brought in, instead of at the root.
//!
//! An attempt that finds a page missing gives up and its task waits for the read (see `run`).
//! The paper's engine then restarts the operation from the root: out of memory that repeats the
//! whole descent once per page read (its cost model's `c_restart = c_tx`), although the inner
//! nodes above the missing page rarely change in the meantime.
//!
//! A tree counts the changes of its shape (splits, merges, a new or collapsed root). A page's
//! key range, and its depth, can only change with the shape: a change of records inside a leaf
//! (an update, an insert that fits, a removal without a merge) leaves every page's range as it
//! was. So when the shape is the same after the wait as when the attempt stopped, the page the
//! wait brought in is still the one that covers the key at that depth, and the next attempt
//! starts there, with the page already pinned. When the shape changed, it starts at the root.
//!
//! A resumed descent knows only the path below the page it resumed at. An attempt that would
//! need the whole path (an insert that splits) asks for a descent from the root instead
//! ([`Need::FromRoot`]); removes, whose merges walk up the path, and scans always start at the
//! root.

use super::{Attempt, BTree, Need, PathStep};
use crate::buffer::PageGuard;
use crate::error::{Corruption, StorageError};
use crate::node::NodeRef;

/// Where a restarted attempt may begin: the page its wait brought in (pinned since), at its
/// depth (0: the root), valid while the tree's shape is `shape`.
pub(super) struct Resume {
    pub(super) guard: PageGuard,
    pub(super) depth: usize,
    pub(super) shape: u64,
}

/// A descent to the leaf for a key.
pub(super) struct Descent {
    /// The inner nodes passed on the way, each with the child index taken: all of them from
    /// the root, or those from the page the descent resumed at.
    pub(super) path: Vec<PathStep>,
    pub(super) leaf: PageGuard,
    /// Whether `path` starts at the root.
    pub(super) from_root: bool,
}

impl BTree {
    /// Records a change of the tree's shape: no descent may resume across it.
    pub(super) fn reshaped(&self) {
        self.shape.set(self.shape.get() + 1);
    }

    /// `resume` when the tree's shape is still the one it was taken under; else `None` (its
    /// pin goes).
    pub(super) fn still_valid(&self, resume: Option<Resume>) -> Option<Resume> {
        let resume = resume?;
        if resume.shape != self.shape.get() {
            return None;
        }
        self.bump(|s| s.resumes += 1);
        Some(resume)
    }

    /// Descends to the leaf for `key`, keeping the inner nodes pinned: from `resume`'s page
    /// when given (see the module documentation), else from the root. A missing page is asked
    /// for with its depth, so that the next attempt can resume there.
    pub(super) fn descend_from(
        &self,
        key: &[u8],
        resume: Option<Resume>,
    ) -> Result<Attempt<Descent>, StorageError> {
        let mut path = Vec::new();
        let keep = |guard, index| path.push(PathStep { guard, index });
        Ok(self
            .descend_with(key, resume, keep)?
            .map(|(leaf, from_root)| Descent {
                path,
                leaf,
                from_root,
            }))
    }

    /// [`descend_from`](Self::descend_from) for a read: the leaf alone, each inner node's pin
    /// dropped once its child is pinned (nothing else runs in between on this thread, and a
    /// read changes nothing above the leaf), so no path is built.
    pub(super) fn descend_to_leaf(
        &self,
        key: &[u8],
        resume: Option<Resume>,
    ) -> Result<Attempt<PageGuard>, StorageError> {
        Ok(self
            .descend_with(key, resume, |_, _| {})?
            .map(|(leaf, _)| leaf))
    }

    /// The descent both forms share: each inner node passed goes to `passed` with the child
    /// index taken; returns the leaf and whether the descent started at the root.
    fn descend_with(
        &self,
        key: &[u8],
        resume: Option<Resume>,
        mut passed: impl FnMut(PageGuard, usize),
    ) -> Result<Attempt<(PageGuard, bool)>, StorageError> {
        let root = self.root.get();
        let height = root.height as usize;
        let from_root = resume.as_ref().is_none_or(|r| r.depth == 0);
        let (mut g, mut depth) = match resume {
            Some(r) => {
                debug_assert_eq!(
                    r.shape,
                    self.shape.get(),
                    "resumed across a change of shape"
                );
                Self::assert_level(&r.guard, r.depth, height);
                (r.guard, r.depth)
            }
            None => match self.bm.try_fix(root.root) {
                Some(g) => (g, 0),
                None => return Ok(Err(self.need_child(root.root, 0))),
            },
        };
        // A bound on the walk: one level per step, the height at most.
        while let Some((index, child)) = Self::route(&g, key)? {
            let Some(c) = self.bm.try_fix(child) else {
                return Ok(Err(self.need_child(child, depth + 1)));
            };
            passed(std::mem::replace(&mut g, c), index);
            depth += 1;
            if depth >= height {
                break;
            }
        }
        if depth + 1 != height {
            return Err(Self::corrupt(
                g.pid(),
                Corruption::LeafDepth {
                    depth: depth + 1,
                    height: root.height,
                },
            ));
        }
        Ok(Ok((g, from_root)))
    }

    /// What a descent that stopped before `pid` (at `depth`) asks for.
    fn need_child(&self, pid: crate::buffer::PageId, depth: usize) -> Need {
        Need::Child {
            pid,
            depth,
            shape: self.shape.get(),
        }
    }

    /// A page resumed at sits where the tree's height says a page at `depth` does: the shape
    /// check guarantees it, this states it.
    fn assert_level(g: &PageGuard, depth: usize, height: usize) {
        let level = g.read(|p| NodeRef::new(p).map(|n| usize::from(n.level())));
        if let Ok(level) = level {
            assert_eq!(
                level + depth + 1,
                height,
                "page {} resumed at depth {depth} in a tree of height {height} is at level {level}",
                g.pid()
            );
        }
    }
}
