//! Probing where many keys' leaves are, level by level for all of them at once.
//!
//! A probe ([`BTree::probe_resident`]) is a descent that copies nothing: it tells whether every
//! page on the way is resident and leaves the leaf as the key's hint. A transaction's prefetch
//! probes all of its keys before it locks anything (NewOrder: some twenty-three, in six
//! trees). One key after another, each level's pin waits for its misses (the page-table entry,
//! then the slot's cells and the frame's header) and its node search for the node's lines,
//! and nothing overlaps them. Here the keys advance one level per round: every key's next
//! entry is asked for first, then every key's cells and header, then each key pins and routes
//! (its lines now on their way or in the cache), so a round costs about one key's misses
//! instead of one per key (the group prefetching of Chen et al., "Improving hash join
//! performance through prefetching", applied to descents).

use super::BTree;
use crate::buffer::{PageId, PinStep};
use crate::error::{Corruption, StorageError};

/// Rounds a probe takes at most (a tree's height is far below it; see `probe_all`).
const LEVELS_MAX: usize = 64;

/// Where one key's probe stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// At this page, this many levels below the root.
    At(PageId, usize),
    /// Finished: whether every page on the way was resident.
    Done(bool),
}

/// One key to probe in one tree.
pub(crate) struct Probe<'a> {
    tree: &'a BTree,
    key: &'a [u8],
    step: Step,
}

impl<'a> Probe<'a> {
    /// A probe of `key` in `tree`.
    pub(crate) fn new(tree: &'a BTree, key: &'a [u8]) -> Probe<'a> {
        Probe {
            tree,
            key,
            step: Step::At(tree.root.get().root, 0),
        }
    }

    /// Whether every page on the way to the key's leaf was resident (after
    /// [`probe_all`]).
    pub(crate) fn resident(&self) -> bool {
        self.step == Step::Done(true)
    }
}

/// Probes every key of `probes` (see the module documentation): afterwards each says whether
/// its pages were all resident, and the leaves found are the keys' hints. Nothing is read
/// from the file and nothing waits.
pub(crate) fn probe_all(probes: &mut [Probe<'_>]) -> Result<(), StorageError> {
    for probe in probes.iter_mut() {
        if probe.tree.hint_covers(probe.key) {
            probe.step = Step::Done(true);
        } else if let Step::At(pid, _) = probe.step {
            probe.tree.bm.prefetch_pin(pid, PinStep::Lookup);
        }
    }
    for _ in 0..LEVELS_MAX {
        let mut active = 0;
        for probe in probes.iter() {
            if let Step::At(pid, _) = probe.step {
                probe.tree.bm.prefetch_pin(pid, PinStep::Frame);
                active += 1;
            }
        }
        if active == 0 {
            return Ok(());
        }
        for probe in probes.iter_mut() {
            probe.step = probe.tree.probe_step(probe.key, probe.step)?;
        }
    }
    // Every probe ends within its tree's height, far below the bound; one that did not is
    // left to the read, which reports a damaged tree.
    for probe in probes.iter_mut() {
        if matches!(probe.step, Step::At(..)) {
            probe.step = Step::Done(false);
        }
    }
    Ok(())
}

impl BTree {
    /// One level of a probe of `key` at `step`: pins the page, remembers the leaf or moves
    /// to the child (asking for its page-table entry at once).
    fn probe_step(&self, key: &[u8], step: Step) -> Result<Step, StorageError> {
        let Step::At(pid, depth) = step else {
            return Ok(step);
        };
        let Some(guard) = self.bm.try_fix(pid) else {
            return Ok(Step::Done(false));
        };
        let height = self.root.get().height;
        let levels = height as usize;
        match Self::route(&guard, key)? {
            Some((_, child)) if depth + 1 < levels => {
                self.bm.prefetch_pin(child, PinStep::Lookup);
                Ok(Step::At(child, depth + 1))
            }
            None if depth + 1 == levels => {
                self.remember_leaf(key, pid);
                Ok(Step::Done(true))
            }
            _ => Err(Self::corrupt(
                pid,
                Corruption::LeafDepth {
                    depth: depth + 1,
                    height,
                },
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{TestPool, TreeRoot};

    /// A level at a time for all keys says what one key at a time says: resident or not,
    /// in two trees, with a pool far smaller than the data (most leaves are not resident).
    #[test]
    fn probing_all_at_once_agrees_with_one_at_a_time() {
        let mut pool = TestPool::new("probe-test", 64);
        let bm = pool.bm.clone();
        let (all, one_by_one) = pool
            .runtime
            .block_on(async move {
                let key = |i: u32| i.to_be_bytes();
                let first = BTree::create(bm.clone()).await.expect("tree");
                let second = BTree::create(bm).await.expect("tree");
                for i in 0..3_000u32 {
                    first.insert(&key(i), &[7u8; 200]).await.expect("insert");
                    second.insert(&key(i), &[8u8; 200]).await.expect("insert");
                }
                let keys: Vec<[u8; 4]> = (0..40u32).map(|i| key(i * 73 % 3_000)).collect();
                // Even keys in the first tree, odd ones in the second.
                let tree_of = |i: usize| if i.is_multiple_of(2) { &first } else { &second };
                let mut probes: Vec<Probe<'_>> = (keys.iter().enumerate())
                    .map(|(i, k)| Probe::new(tree_of(i), k))
                    .collect();
                probe_all(&mut probes).expect("probe");
                let all: Vec<bool> = probes.iter().map(Probe::resident).collect();
                let one_by_one: Vec<bool> = (keys.iter().enumerate())
                    .map(|(i, k)| tree_of(i).probe_resident(k).expect("probe"))
                    .collect();
                (all, one_by_one)
            })
            .expect("runs");
        assert_eq!(all, one_by_one);
        assert!(all.iter().any(|r| *r) && all.iter().any(|r| !r), "{all:?}");
        let _ = std::fs::remove_dir_all(&pool.dir);
    }

    /// A leaf found above the depth the tree's height names (a damaged tree, forged here by
    /// a wrong height) is reported as corruption by the probe, as by a read, never a panic.
    #[test]
    fn a_leaf_at_the_wrong_depth_is_corruption() {
        let mut pool = TestPool::new("probe-depth-test", 64);
        let bm = pool.bm.clone();
        let (probed, read) = pool
            .runtime
            .block_on(async move {
                let tree = BTree::create(bm).await.expect("tree");
                tree.insert(b"k", b"v").await.expect("insert");
                let root = tree.root.get();
                tree.root.set(TreeRoot {
                    height: root.height + 1,
                    ..root
                });
                let mut probes = [Probe::new(&tree, b"k"), Probe::new(&tree, b"j")];
                let probed = probe_all(&mut probes).map(|_| ());
                let read = tree.get(b"k").await.map(|_| ());
                tree.root.set(root);
                (probed, read)
            })
            .expect("runs");
        for result in [probed, read] {
            let error = result.expect_err("a leaf above its depth is damage");
            assert!(format!("{error}").contains("depth"), "{error}");
        }
        let _ = std::fs::remove_dir_all(&pool.dir);
    }
}
