//! Inserts: an update in place when the leaf has room, else a split of the leaf that may carry
//! up the path to the root (a new root above the old one). An attempt first checks that the
//! target has room for a split of every level and holds the frames for them, so it never stops
//! halfway.

use super::invariants::{debug_check_parent, debug_check_split};
use super::resume::{Descent, Resume};
use super::{Attempt, BTree, Need, PathStep, TreeRoot};
use crate::buffer::{PageGuard, PageId, Reservation};
use crate::error::{Corruption, StorageError, WriteError};
use crate::node::{NodeMut, NodeRef};

/// A node that split in two: the separator for its parent and the two halves.
pub(super) struct Split {
    pub(super) sep: Vec<u8>,
    pub(super) left: PageId,
    pub(super) right: PageId,
    /// The halves' level (0: leaves).
    pub(super) level: u16,
}

impl BTree {
    /// One attempt at inserting `key` -> `value`: in place if the leaf has room, else a
    /// split (asking for the frames first); returns whether the key existed.
    pub(super) fn insert_attempt(
        &self,
        key: &[u8],
        value: &[u8],
        res: &mut Reservation,
        resume: Option<Resume>,
    ) -> Result<Attempt<bool>, WriteError> {
        let Descent {
            mut path,
            leaf,
            from_root,
        } = match self.descend_from(key, resume)? {
            Ok(x) => x,
            Err(n) => return Ok(Err(n)),
        };
        // Fits as is (an update frees the old value first)?
        let (exists, fits) = leaf.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(leaf.pid(), e))?;
            let exists = n.search(key).is_ok();
            Ok::<_, StorageError>((exists, n.fits_upsert(key, value)))
        })?;
        if fits {
            // Records change inside the leaf, its key range stays: stealable under a log.
            leaf.write_content(|p| NodeMut::new(p).upsert(key, value))
                .map_err(|e| Self::corrupt(leaf.pid(), e))?;
            self.remember_insert(leaf.pid());
            return Ok(Ok(exists));
        }
        // A split may carry up to the root: it needs the whole path.
        if !from_root {
            return Ok(Err(Need::FromRoot));
        }
        // A split of every level on the path plus a new root, all without waiting.
        let needed = path.len() + 2;
        self.bm.check_room(needed)?;
        if res.len() < needed {
            return Ok(Err(Need::Frames(needed)));
        }
        let split = self.split_leaf(leaf, key, value, res)?;
        if let Some(root_split) = self.split_upwards(&mut path, split, res)? {
            self.grow_root(root_split, res)?;
        }
        Ok(Ok(exists))
    }

    /// Splits the full `leaf` into a new right sibling and puts `key` -> `value` into the half
    /// it belongs to.
    fn split_leaf(
        &self,
        leaf: PageGuard,
        key: &[u8],
        value: &[u8],
        res: &mut Reservation,
    ) -> Result<Split, WriteError> {
        let right = self.bm.alloc_page(Some(res))?;
        self.reshaped();
        let sep = leaf.write(|l| right.write(|r| NodeMut::new(l).split_into(r)));
        let target = if key >= sep.as_slice() { &right } else { &leaf };
        target
            .write(|p| NodeMut::new(p).upsert(key, value))
            .map_err(|e| Self::corrupt(target.pid(), e))?;
        self.bump(|s| s.splits += 1);
        debug_check_split(&leaf, &right, &sep);
        Ok(Split {
            sep,
            left: leaf.pid(),
            right: right.pid(),
            level: 0,
        })
    }

    /// Carries a split up the `path`: each parent takes the new separator, or splits in turn.
    /// Returns the split of the root when it split too.
    fn split_upwards(
        &self,
        path: &mut Vec<PathStep>,
        mut split: Split,
        res: &mut Reservation,
    ) -> Result<Option<Split>, WriteError> {
        while let Some(PathStep {
            guard: parent,
            index,
        }) = path.pop()
        {
            let fits = parent
                .read(|p| NodeRef::new(p).map(|n| n.fits_separator(&split.sep)))
                .map_err(|e| Self::corrupt(parent.pid(), e))?;
            if fits {
                parent
                    .write(|p| {
                        NodeMut::new(p).insert_split(index, &split.sep, split.left, split.right)
                    })
                    .map_err(|e| Self::corrupt(parent.pid(), e))?;
                debug_check_parent(&parent, index, &split);
                return Ok(None);
            }
            split = self.split_inner(&parent, index, split, res)?;
        }
        Ok(Some(split))
    }

    /// Splits the full inner node `parent` and records `child` (the split of its child
    /// `index`) in the half that now holds that child.
    fn split_inner(
        &self,
        parent: &PageGuard,
        index: usize,
        child: Split,
        res: &mut Reservation,
    ) -> Result<Split, WriteError> {
        let pright = self.bm.alloc_page(Some(res))?;
        self.reshaped();
        let up = parent.write(|l| pright.write(|r| NodeMut::new(l).split_into(r)));
        let left_count = parent
            .read(|p| NodeRef::new(p).map(|n| n.count()))
            .map_err(|e| Self::corrupt(parent.pid(), e))?;
        let (half, idx) = if index <= left_count {
            (parent, index)
        } else {
            (&pright, index - left_count - 1)
        };
        half.write(|p| NodeMut::new(p).insert_split(idx, &child.sep, child.left, child.right))
            .map_err(|e| Self::corrupt(half.pid(), e))?;
        self.bump(|s| s.splits += 1);
        debug_check_parent(half, idx, &child);
        debug_check_split(parent, &pright, &up);
        Ok(Split {
            sep: up,
            left: parent.pid(),
            right: pright.pid(),
            level: child.level + 1,
        })
    }

    /// The root split: a new root above the two halves, one level higher.
    fn grow_root(&self, split: Split, res: &mut Reservation) -> Result<(), WriteError> {
        let root = self.root.get();
        let nr = self.bm.alloc_page(Some(res))?;
        self.reshaped();
        let level = u16::try_from(root.height)
            .map_err(|_| Self::corrupt(nr.pid(), Corruption::TreeTooHigh))?;
        nr.write(|p| {
            NodeMut::init_inner(p, level, split.left);
            NodeMut::new(p).insert_split(0, &split.sep, split.left, split.right)
        })
        .map_err(|e| Self::corrupt(nr.pid(), e))?;
        debug_assert_eq!(
            u32::from(split.level) + 1,
            root.height,
            "the root split at level {} in a tree of height {}",
            split.level,
            root.height
        );
        debug_check_parent(&nr, 0, &split);
        self.set_root(TreeRoot {
            root: nr.pid(),
            height: root.height + 1,
        });
        Ok(())
    }
}
