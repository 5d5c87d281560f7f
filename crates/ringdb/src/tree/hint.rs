//! Leaf hints: where a recent read of a key found its leaf, so that a write or another read of
//! the same key soon after starts at that leaf instead of descending from the root again.
//!
//! Read-modify-write is the common shape of a write: the server reads a key's old value (its
//! kind, its expiry, the chunks a large value leaves behind) and then writes the new one in
//! the group's batch; a task reads a record and updates it. Without a hint the write repeats
//! the read's descent (a page-table lookup and a node search per level).
//!
//! A transaction reads a key twice the same way: its prefetch probes the key's leaf before it
//! takes a lock (`BTree::probe_resident`), then its read copies the value. And inserts come
//! in runs near each other (an order's lines): besides the hints by key, a tree remembers the
//! leaf its last insert went to, and an insert of a key without a hint tries that leaf.
//!
//! A hint is the key's hash, the leaf's page and the tree's shape when the read found it. A
//! write or read uses it only when all of these hold, else it descends from the root as before:
//! - the tree's shape is the same (no split, merge or root change since), so the page still
//!   covers the key range it covered (`resume.rs` relies on the same rule);
//! - the page is resident (no wait: a hint is an optimisation, never a reason to read);
//! - the leaf holds the written key, or a key below it and one above it, so its range holds
//!   the key, whichever key the hint was taken for (two keys' hashes may share a slot or
//!   collide).
//!
//! The write then starts as a descent resumed at the leaf: an update that fits is done there,
//! a split asks for the path from the root (`Need::FromRoot`), as any resumed descent does. A
//! read copies the value from the leaf (or finds the key absent between two of its keys).

use super::resume::Resume;
use super::BTree;
use crate::buffer::{PageGuard, PageId};
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

    /// The hint for `key` when it was taken under the present shape and its leaf is
    /// resident: the leaf, pinned, and the shape.
    fn hinted_guard(&self, key: &[u8]) -> Option<(PageGuard, u64)> {
        let hash = key_hash(key);
        let hint = self.hints[hash as usize % HINT_SLOTS].get();
        if !hint.set || hint.hash != hash || hint.shape != self.shape.get() {
            return None;
        }
        Some((self.bm.try_fix(hint.leaf)?, hint.shape))
    }

    /// Where a write of `key` may start: the hinted leaf, pinned, when the module's
    /// conditions hold.
    pub(super) fn hinted_leaf(&self, key: &[u8]) -> Option<Resume> {
        let (guard, shape) = self.hinted_guard(key)?;
        self.resume_at_leaf(guard, shape, key)
    }

    /// A descent resumed at the pinned leaf `guard` (taken under `shape`, the present one),
    /// when the leaf covers `key`; counted as a hint used.
    fn resume_at_leaf(&self, guard: PageGuard, shape: u64, key: &[u8]) -> Option<Resume> {
        // The key, or a key on each side of it: the search the read just made, on pages it
        // left in the cache (two whole keys compared would fetch the last one's record).
        let covers = guard
            .read(|page| NodeRef::new(page).is_ok_and(|node| leaf_covers(&node, key).is_some()));
        if !covers {
            return None;
        }
        self.bump(|s| s.leaf_hints += 1);
        let height = self.root.get().height as usize;
        debug_assert!(height >= 1, "a tree has a root");
        Some(Resume {
            guard,
            depth: height - 1,
            shape,
        })
    }

    /// Remembers `leaf` as where the last insert that fit went, under the present shape.
    pub(super) fn remember_insert(&self, leaf: PageId) {
        self.last_insert.set(LeafHint {
            hash: 0,
            leaf,
            shape: self.shape.get(),
            set: true,
        });
    }

    /// Where an insert of `key` may start when its own key has no hint: the leaf the last
    /// insert went to, when the module's conditions hold for it (inserts in key order, the
    /// lines of an order, land on one leaf until it splits).
    pub(super) fn last_insert_leaf(&self, key: &[u8]) -> Option<Resume> {
        let last = self.last_insert.get();
        if !last.set || last.shape != self.shape.get() {
            return None;
        }
        let guard = self.bm.try_fix(last.leaf)?;
        self.resume_at_leaf(guard, last.shape, key)
    }

    /// Whether `key` has a hint whose leaf covers it (see the module documentation).
    pub(super) fn hint_covers(&self, key: &[u8]) -> bool {
        self.hinted_guard(key).is_some_and(|(guard, _)| {
            guard.read(|page| NodeRef::new(page).is_ok_and(|n| leaf_covers(&n, key).is_some()))
        })
    }

    /// A read of `key` at its hinted leaf, when the hint holds: whether the key is there
    /// (its value copied into `out`, cleared first). `None`: no usable hint, nothing read.
    /// A page that does not decode is left to the descent, which reports it.
    pub(super) fn hinted_get(&self, key: &[u8], out: &mut Vec<u8>) -> Option<bool> {
        let (guard, _) = self.hinted_guard(key)?;
        let found = guard.read(|page| {
            let node = NodeRef::new(page).ok()?;
            let at = leaf_covers(&node, key)?;
            out.clear();
            if let Ok(i) = at {
                out.extend_from_slice(node.value(i));
            }
            Some(at.is_ok())
        })?;
        self.bump(|s| s.leaf_hints += 1);
        Some(found)
    }
}

/// Where `key` is in `node` when the leaf's range holds it: found (`Ok`), or absent between
/// two of its keys (`Err`); `None` when `node` is no leaf or the key lies beyond its keys
/// (its range may end before it: another leaf may hold it).
fn leaf_covers(node: &NodeRef<'_>, key: &[u8]) -> Option<Result<usize, usize>> {
    if !node.is_leaf() {
        return None;
    }
    match node.search(key) {
        Ok(i) => Some(Ok(i)),
        Err(at) if at > 0 && at < node.count() => Some(Err(at)),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TestPool;

    fn key(i: u32) -> [u8; 4] {
        i.to_be_bytes()
    }

    /// A hint that names the wrong leaf (as two keys whose hashes collide would leave) must
    /// not answer for a key beyond that leaf's keys: the read descends and finds it.
    #[test]
    fn a_hint_naming_another_leaf_never_answers_for_a_key_beyond_it() {
        let mut pool = TestPool::new("hint-test", 256);
        let bm = pool.bm.clone();
        let found = pool.runtime.block_on(async move {
            let tree = BTree::create(bm).await.expect("tree");
            for i in 0..2_000u32 {
                tree.insert(&key(i), &[7u8; 100]).await.expect("insert");
            }
            let mut out = Vec::new();
            assert!(tree.get_into(&key(0), &mut out).await.expect("get"));
            let first_leaf = tree.hints[key_hash(&key(0)) as usize % HINT_SLOTS]
                .get()
                .leaf;
            // The last key lives in another leaf, past every key of the first one.
            tree.remember_leaf(&key(1_999), first_leaf);
            assert_eq!(tree.hinted_get(&key(1_999), &mut out), None);
            let found = tree.get_into(&key(1_999), &mut out).await.expect("get");
            (found, out.len())
        });
        assert_eq!(found.expect("runs"), (true, 100));
        let _ = std::fs::remove_dir_all(&pool.dir);
    }

    /// Inserts in a run start at the leaf the one before went to; a remembered leaf that
    /// does not cover the key (here forged: the first leaf, for a key past it) is not used.
    #[test]
    fn inserts_in_a_run_start_at_the_last_leaf_and_only_where_it_covers_the_key() {
        let mut pool = TestPool::new("run-test", 256);
        let bm = pool.bm.clone();
        let (hinted, found, all) = pool
            .runtime
            .block_on(async move {
                let tree = BTree::create(bm).await.expect("tree");
                for i in (0..4_000u32).step_by(2) {
                    tree.insert(&key(i), &[7u8; 100]).await.expect("insert");
                }
                let before = tree.stats().leaf_hints;
                for i in (1_001..1_101u32).step_by(2) {
                    tree.insert(&key(i), &[1u8; 100]).await.expect("insert");
                }
                let hinted = tree.stats().leaf_hints - before;
                let mut out = Vec::new();
                assert!(tree.get_into(&key(0), &mut out).await.expect("get"));
                let first_leaf = tree.hints[key_hash(&key(0)) as usize % HINT_SLOTS]
                    .get()
                    .leaf;
                tree.remember_insert(first_leaf);
                tree.insert(&key(3_001), &[2u8; 100]).await.expect("insert");
                // Found by a descent from the root (the key has no hint of its own).
                let found = tree.get_into(&key(3_001), &mut out).await.expect("get");
                let unbounded = std::ops::Bound::Unbounded;
                let all = tree.range(unbounded, unbounded, usize::MAX).await;
                (hinted, found, all.expect("scan"))
            })
            .expect("runs");
        // 50 inserts; those after a split (a new shape) descend from the root.
        assert!(
            hinted >= 25,
            "{hinted} of 50 inserts started at the last leaf"
        );
        assert!(found, "the key went to the leaf that covers it");
        assert_eq!(all.len(), 2_000 + 50 + 1);
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "keys in order");
        let _ = std::fs::remove_dir_all(&pool.dir);
    }
}
