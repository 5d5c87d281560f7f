//! Removes: the key leaves its leaf, then underfull nodes merge upwards with a resident
//! sibling (opportunistically: a sibling that is not resident is not loaded for it), and a
//! root left with a single child hands the root to it.

use super::invariants::debug_check_merged;
use super::resume::Resume;
use super::{Attempt, BTree, PathStep, TreeRoot};
use crate::buffer::{PageGuard, PageId};
use crate::error::StorageError;
use crate::node::{self, NodeMut, NodeRef};

/// A leaf is merged with a sibling when it is less full than this (and the two fit in one).
const MERGE_BELOW_FILL: f64 = 0.25;

impl BTree {
    /// One attempt at removing `key`, merging underfull nodes on the way up; returns whether
    /// the key existed.
    pub(super) fn remove_attempt(
        &self,
        key: &[u8],
        resume: Option<Resume>,
    ) -> Result<Attempt<bool>, StorageError> {
        // Merges walk up the whole path: always from the root (and the page resumed at could
        // be the one a merge frees, so its pin goes first).
        drop(resume);
        let (mut path, leaf) = match self.descend(key)? {
            Ok(x) => x,
            Err(n) => return Ok(Err(n)),
        };
        let slot = leaf
            .read(|p| NodeRef::new(p).map(|n| n.search(key).ok()))
            .map_err(|e| Self::corrupt(leaf.pid(), e))?;
        let Some(slot) = slot else {
            return Ok(Ok(false));
        };
        // Records change inside the leaf (a merge below is a structural change of its own).
        leaf.write_content(|p| NodeMut::new(p).remove(slot));
        // Merge upwards while a node is underfull and a resident sibling can take it in.
        // Merging is opportunistic: a sibling that is not resident is not loaded for it.
        let mut freed = Vec::new();
        let mut child = leaf;
        while let Some(PathStep {
            guard: parent,
            index,
        }) = path.pop()
        {
            match self.try_merge(&parent, index, &child)? {
                Some(pid) => freed.push(pid),
                None => break,
            }
            child = parent;
        }
        drop(child);
        drop(path);
        for pid in &freed {
            self.bm.free_page(*pid);
        }
        if !freed.is_empty() {
            self.collapse_root()?;
        }
        Ok(Ok(true))
    }

    /// A root inner node left without separators hands the root to its only child.
    fn collapse_root(&self) -> Result<(), StorageError> {
        loop {
            let root = self.root.get();
            if root.height == 1 {
                return Ok(());
            }
            let Some(rg) = self.bm.try_fix(root.root) else {
                return Ok(());
            };
            let only = rg.read(|p| {
                NodeRef::new(p)
                    .map(|n| {
                        debug_assert_eq!(
                            u32::from(n.level()) + 1,
                            root.height,
                            "root {} at level {} in a tree of height {}",
                            root.root,
                            n.level(),
                            root.height
                        );
                        (n.count() == 0).then(|| n.child_at(0))
                    })
                    .map_err(|e| Self::corrupt(rg.pid(), e))
            })?;
            drop(rg);
            let Some(c) = only else {
                return Ok(());
            };
            self.bm.free_page(root.root);
            self.reshaped();
            self.set_root(TreeRoot {
                root: c,
                height: root.height - 1,
            });
        }
    }

    /// Merges `child` (child `index` of `parent`) with a neighbour when it is underfull and
    /// both fit in one page. Returns the page that emptied (to free once unpinned), if any.
    fn try_merge(
        &self,
        parent: &PageGuard,
        index: usize,
        child: &PageGuard,
    ) -> Result<Option<PageId>, StorageError> {
        let under = child
            .read(|p| NodeRef::new(p).map(|n| n.fill() < MERGE_BELOW_FILL))
            .map_err(|e| Self::corrupt(child.pid(), e))?;
        if !under {
            return Ok(None);
        }
        let pcount = parent
            .read(|p| NodeRef::new(p).map(|n| n.count()))
            .map_err(|e| Self::corrupt(parent.pid(), e))?;
        if pcount == 0 {
            return Ok(None);
        }
        // Merge children left_idx and left_idx + 1, separated by parent key left_idx.
        let left_idx = if index < pcount { index } else { index - 1 };
        let (lpid, rpid, sep) = parent.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(parent.pid(), e))?;
            Ok::<_, StorageError>((
                n.child_at(left_idx),
                n.child_at(left_idx + 1),
                n.key(left_idx).to_vec(),
            ))
        })?;
        let child_is_left = lpid == child.pid();
        let other = if child_is_left { rpid } else { lpid };
        let Some(og) = self.bm.try_fix(other) else {
            return Ok(None);
        };
        let (lg, rg) = if child_is_left {
            (child, &og)
        } else {
            (&og, child)
        };
        let fits = lg.read(|l| rg.read(|r| node::fits_merged(l, r, &sep)));
        if !fits {
            return Ok(None);
        }
        self.reshaped();
        lg.write(|l| rg.read(|r| NodeMut::new(l).merge_from(r, &sep)))
            .map_err(|e| Self::corrupt(lg.pid(), e))?;
        parent.write(|p| NodeMut::new(p).remove_merged(left_idx));
        self.bump(|s| s.merges += 1);
        debug_check_merged(parent, left_idx, lg);
        Ok(Some(rpid))
    }
}
