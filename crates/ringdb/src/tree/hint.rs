//! Leaf hints: where a recent read of a key found its leaf, so that a write of the same key
//! soon after starts at that leaf instead of descending from the root again.
//!
//! Read-modify-write is the common shape of a write: the server reads a key's old value (its
//! kind, its expiry, the chunks a large value leaves behind) and then writes the new one in
//! the group's batch; a task reads a record and updates it. Without a hint the write repeats
//! the read's descent (a page-table lookup and a node search per level).
//!
//! A hint is the key's hash, the leaf's page and the tree's shape when the read found it. The
//! write uses it only when all of these hold, else it descends from the root as before:
//! - the tree's shape is the same (no split, merge or root change since), so the page still
//!   covers the key range it covered (`resume.rs` relies on the same rule);
//! - the page is resident (no wait: a hint is an optimisation, never a reason to read);
//! - the leaf holds the written key, or a key below it and one above it, so its range holds
//!   the key, whichever key the hint was taken for (two keys' hashes may share a slot or
//!   collide).
//!
//! The write then starts as a descent resumed at the leaf: an update that fits is done there,
//! a split asks for the path from the root (`Need::FromRoot`), as any resumed descent does.

use super::resume::Resume;
use super::BTree;
use crate::buffer::PageId;
use crate::node::NodeRef;
use std::cell::Cell;
use std::hash::BuildHasher;

/// Hints a tree keeps (direct-mapped by the key's hash).
pub(super) const HINT_SLOTS: usize = 256;

/// One hint: where the leaf of a key with this hash was, under which shape.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LeafHint {
    hash: u64,
    leaf: PageId,
    shape: u64,
    /// Whether the slot holds a hint at all.
    set: bool,
}

/// The hints of one tree.
pub(super) type LeafHints = [Cell<LeafHint>; HINT_SLOTS];

/// The hash hints are kept and found by.
fn key_hash(key: &[u8]) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(key)
}

impl BTree {
    /// Remembers that `leaf` covers `key` under the tree's present shape.
    pub(super) fn remember_leaf(&self, key: &[u8], leaf: PageId) {
        let hash = key_hash(key);
        self.hints[hash as usize % HINT_SLOTS].set(LeafHint {
            hash,
            leaf,
            shape: self.shape.get(),
            set: true,
        });
    }

    /// Where a write of `key` may start: the hinted leaf, pinned, when the module's
    /// conditions hold.
    pub(super) fn hinted_leaf(&self, key: &[u8]) -> Option<Resume> {
        let hash = key_hash(key);
        let hint = self.hints[hash as usize % HINT_SLOTS].get();
        if !hint.set || hint.hash != hash || hint.shape != self.shape.get() {
            return None;
        }
        let guard = self.bm.try_fix(hint.leaf)?;
        // The key, or a key on each side of it: the search the read just made, on pages it
        // left in the cache (two whole keys compared would fetch the last one's record).
        let covers = guard.read(|page| {
            NodeRef::new(page).is_ok_and(|node| {
                node.is_leaf()
                    && match node.search(key) {
                        Ok(_) => true,
                        Err(at) => at > 0 && at < node.count(),
                    }
            })
        });
        if !covers {
            return None;
        }
        self.bump(|s| s.leaf_hints += 1);
        let height = self.root.get().height as usize;
        debug_assert!(height >= 1, "a tree has a root");
        Some(Resume {
            guard,
            depth: height - 1,
            shape: hint.shape,
        })
    }
}
