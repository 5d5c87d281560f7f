//! The B+tree over the buffer manager's pages (paper Sec. 3.3.2: cooperative tasks, no latches,
//! traversals restart after a task was parked).
//!
//! Every operation is a synchronous *attempt* that pins pages only while it runs (no `await`
//! inside) and either finishes or says what it needs: a page that is not resident, or free
//! frames for a split. The async wrapper drops every pin, waits for that (the task parks, other
//! tasks run and may change the tree), and restarts from the root. Since an attempt never
//! yields, it sees and leaves the tree consistent; since it changes nothing before it knows it
//! can finish, a restart never has to undo anything.
//!
//! Inner nodes: see `node.rs` (child `i` holds keys below separator `i`, the upper child holds
//! the rest). Leaves are not linked; a range scan finds the next leaf through the smallest
//! separator above the current one (its *fence*), one descent per leaf.

use crate::buffer::{BufferManager, PageGuard, PageId, Reservation};
use crate::error::{DbError, Result};
use crate::node::{self, NodeMut, NodeRef};
use serde::Serialize;
use std::cell::Cell;
use std::ops::Bound;

/// What an attempt needs before it can run to the end.
enum Need {
    Page(PageId),
    Frames(usize),
}

type Attempt<T> = std::result::Result<T, Need>;

/// Pins `pid` or returns from the attempt asking for it.
macro_rules! fix {
    ($tree:expr, $pid:expr) => {
        match $tree.bm.try_fix($pid) {
            Some(g) => g,
            None => return Ok(Err(Need::Page($pid))),
        }
    };
}

/// A leaf is merged with a sibling when it is less full than this (and the two fit in one).
const MERGE_BELOW_FILL: f64 = 0.25;

/// What the tree counts.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TreeStats {
    /// Attempts abandoned to wait for a page or frames, then restarted from the root.
    pub restarts: u64,
    pub splits: u64,
    pub merges: u64,
}

/// Where the tree starts (kept in the meta page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeRoot {
    pub root: PageId,
    /// 1 when the root is a leaf.
    pub height: u32,
}

pub struct BTree {
    bm: BufferManager,
    root: Cell<TreeRoot>,
    stats: Cell<TreeStats>,
    max_record: usize,
}

/// One step of a descent: the inner node's guard and the child index taken.
struct PathStep {
    guard: PageGuard,
    index: usize,
}

/// A node that split in two: the separator for its parent and the two halves.
struct Split {
    sep: Vec<u8>,
    left: PageId,
    right: PageId,
    /// The halves' level (0: leaves).
    level: u16,
}

impl BTree {
    /// Creates an empty tree: one empty leaf as the root.
    pub async fn create(bm: BufferManager) -> Result<BTree> {
        bm.ensure_free(1).await?;
        let g = bm.alloc_page(None)?;
        g.write(NodeMut::init_leaf);
        let root = TreeRoot {
            root: g.pid(),
            height: 1,
        };
        drop(g);
        Ok(Self::open(bm, root))
    }

    /// A tree whose root is known (from the meta page).
    pub fn open(bm: BufferManager, root: TreeRoot) -> BTree {
        let max_record = node::max_record_size(bm.page_size());
        BTree {
            bm,
            root: Cell::new(root),
            stats: Cell::new(TreeStats::default()),
            max_record,
        }
    }

    pub fn root(&self) -> TreeRoot {
        self.root.get()
    }

    pub fn buffer(&self) -> &BufferManager {
        &self.bm
    }

    pub fn stats(&self) -> TreeStats {
        self.stats.get()
    }

    /// The largest key + value this tree stores.
    pub fn max_record(&self) -> usize {
        self.max_record
    }

    fn bump(&self, f: impl FnOnce(&mut TreeStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// Runs `attempt` until it finishes, waiting for what it needs in between.
    async fn run<T>(
        &self,
        mut attempt: impl FnMut(&Self, &mut Reservation) -> Result<Attempt<T>>,
    ) -> Result<T> {
        // The page the last wait brought in stays pinned until the next attempt starts; the
        // frames reserved for a split stay this task's until it is done.
        let mut loaded: Option<PageGuard> = None;
        let mut res = self.bm.reservation();
        loop {
            // From here to the attempt's own pins nothing else runs: the pin can go now (and
            // must, since the attempt may free that very page in a merge).
            drop(loaded.take());
            let r = attempt(self, &mut res)?;
            match r {
                Ok(v) => return Ok(v),
                Err(need) => {
                    self.bump(|s| s.restarts += 1);
                    match need {
                        Need::Page(pid) => {
                            // Frames held while waiting for a page could be the ones the
                            // page (or another task's) needs: give them back first.
                            res = self.bm.reservation();
                            loaded = self.bm.load(pid).await?;
                        }
                        Need::Frames(n) => self.bm.reserve(&mut res, n).await?,
                    }
                }
            }
        }
    }

    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.run(|t, _| t.get_attempt(key)).await
    }

    /// Inserts or replaces; returns whether the key existed.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.check_record(key, value)?;
        self.run(|t, res| t.insert_attempt(key, value, res)).await
    }

    /// Removes; returns whether the key existed.
    pub async fn remove(&self, key: &[u8]) -> Result<bool> {
        self.run(|t, _| t.remove_attempt(key)).await
    }

    /// Up to `limit` pairs with keys in `range`, in key order.
    pub async fn range(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut from: Bound<Vec<u8>> = match start {
            Bound::Included(k) => Bound::Included(k.to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        while out.len() < limit {
            let next = self
                .run(|t, _| t.scan_leaf_attempt(&from, end, limit, &mut out))
                .await?;
            match next {
                Some(fence) => from = Bound::Included(fence),
                None => break,
            }
        }
        Ok(out)
    }

    pub(crate) fn check_record(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(DbError::InvalidArg("keys must not be empty".into()));
        }
        if key.len() + value.len() > self.max_record {
            return Err(DbError::TooLarge {
                key: key.len(),
                value: value.len(),
                max: self.max_record,
                page_size: self.bm.page_size(),
            });
        }
        Ok(())
    }

    fn corrupt(pid: PageId, e: impl std::fmt::Display) -> DbError {
        DbError::Corrupt {
            page: pid,
            what: e.to_string(),
        }
    }

    /// Reads the node in `g`: `Ok(None)` for a leaf, else the child index and page for `key`.
    fn route(g: &PageGuard, key: &[u8]) -> Result<Option<(usize, PageId)>> {
        g.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(g.pid(), e))?;
            if n.is_leaf() {
                Ok(None)
            } else {
                let i = n.child_index(key);
                Ok(Some((i, n.child_at(i))))
            }
        })
    }

    /// Descends from the root to the leaf for `key`, keeping the inner nodes pinned.
    fn descend(&self, key: &[u8]) -> Result<Attempt<(Vec<PathStep>, PageGuard)>> {
        let root = self.root.get();
        let mut path = Vec::with_capacity(root.height as usize);
        let mut g = fix!(self, root.root);
        while let Some((index, child)) = Self::route(&g, key)? {
            let c = fix!(self, child);
            path.push(PathStep { guard: g, index });
            g = c;
        }
        if path.len() + 1 != root.height as usize {
            return Err(Self::corrupt(
                g.pid(),
                format!(
                    "leaf at depth {} in a tree of height {}",
                    path.len() + 1,
                    root.height
                ),
            ));
        }
        Ok(Ok((path, g)))
    }

    fn get_attempt(&self, key: &[u8]) -> Result<Attempt<Option<Vec<u8>>>> {
        let (_path, leaf) = match self.descend(key)? {
            Ok(x) => x,
            Err(n) => return Ok(Err(n)),
        };
        leaf.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(leaf.pid(), e))?;
            Ok(Ok(n.search(key).ok().map(|i| n.value(i).to_vec())))
        })
    }

    fn insert_attempt(
        &self,
        key: &[u8],
        value: &[u8],
        res: &mut Reservation,
    ) -> Result<Attempt<bool>> {
        let (mut path, leaf) = match self.descend(key)? {
            Ok(x) => x,
            Err(n) => return Ok(Err(n)),
        };
        // Fits as is (an update frees the old value first)?
        let (exists, fits) = leaf.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(leaf.pid(), e))?;
            let exists = n.search(key).is_ok();
            Ok::<_, DbError>((exists, n.fits_upsert(key, value)))
        })?;
        if fits {
            leaf.write(|p| NodeMut::new(p).upsert(key, value))
                .map_err(|e| Self::corrupt(leaf.pid(), e))?;
            return Ok(Ok(exists));
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
    ) -> Result<Split> {
        let right = self.bm.alloc_page(Some(res))?;
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
    ) -> Result<Option<Split>> {
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
    ) -> Result<Split> {
        let pright = self.bm.alloc_page(Some(res))?;
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
    fn grow_root(&self, split: Split, res: &mut Reservation) -> Result<()> {
        let root = self.root.get();
        let nr = self.bm.alloc_page(Some(res))?;
        let level =
            u16::try_from(root.height).map_err(|_| Self::corrupt(nr.pid(), "tree too high"))?;
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
        self.root.set(TreeRoot {
            root: nr.pid(),
            height: root.height + 1,
        });
        Ok(())
    }

    fn remove_attempt(&self, key: &[u8]) -> Result<Attempt<bool>> {
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
        leaf.write(|p| NodeMut::new(p).remove(slot));
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
    fn collapse_root(&self) -> Result<()> {
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
            self.root.set(TreeRoot {
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
    ) -> Result<Option<PageId>> {
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
            Ok::<_, DbError>((
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
        lg.write(|l| rg.read(|r| NodeMut::new(l).merge_from(r, &sep)))
            .map_err(|e| Self::corrupt(lg.pid(), e))?;
        parent.write(|p| NodeMut::new(p).remove_merged(left_idx));
        self.bump(|s| s.merges += 1);
        debug_check_merged(parent, left_idx, lg);
        Ok(Some(rpid))
    }

    /// Appends the pairs of the leaf that holds `from` (up to `limit` in all, stopping at
    /// `end`); returns the fence where the next leaf starts, if the scan goes on.
    fn scan_leaf_attempt(
        &self,
        from: &Bound<Vec<u8>>,
        end: Bound<&[u8]>,
        limit: usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<Attempt<Option<Vec<u8>>>> {
        let probe: &[u8] = match from {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let root = self.root.get();
        let mut fence: Option<Vec<u8>> = None;
        let mut g = fix!(self, root.root);
        while let Some((index, child)) = Self::route(&g, probe)? {
            let f = g
                .read(|p| {
                    NodeRef::new(p).map(|n| (index < n.count()).then(|| n.key(index).to_vec()))
                })
                .map_err(|e| Self::corrupt(g.pid(), e))?;
            if f.is_some() {
                fence = f;
            }
            g = fix!(self, child);
        }
        let done = g.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(g.pid(), e))?;
            let first = match from {
                Bound::Included(k) => n.search(k).unwrap_or_else(|i| i),
                Bound::Excluded(k) => match n.search(k) {
                    Ok(i) => i + 1,
                    Err(i) => i,
                },
                Bound::Unbounded => 0,
            };
            for i in first..n.count() {
                if out.len() >= limit {
                    return Ok::<_, DbError>(true);
                }
                let k = n.key(i);
                let past = match end {
                    Bound::Included(e) => k > e,
                    Bound::Excluded(e) => k >= e,
                    Bound::Unbounded => false,
                };
                if past {
                    return Ok(true);
                }
                out.push((k.to_vec(), n.value(i).to_vec()));
            }
            Ok(out.len() >= limit)
        })?;
        if done {
            return Ok(Ok(None));
        }
        Ok(Ok(fence))
    }
}

// B+tree invariants after structural changes, in debug builds (cheap enough for the tests):
// each node's own format is checked by `node.rs` after every change; these check what ties
// nodes together. Their pair on the read side is `BTree::descend` (every leaf at the root's
// height) and `verify.rs` (fences and levels of the whole tree).

/// Reads a node that a structural change just wrote (a bad one here is a bug).
fn debug_node<R>(g: &PageGuard, f: impl FnOnce(NodeRef) -> R) -> R {
    g.read(|p| f(NodeRef::new(p).expect("a node the tree just wrote is valid")))
}

/// `left` and `right`, the halves of a split at `sep`: one level, both non-empty, every key
/// of `left` below `sep` and every key of `right` at or above it.
fn debug_check_split(left: &PageGuard, right: &PageGuard, sep: &[u8]) {
    if !cfg!(debug_assertions) {
        return;
    }
    debug_node(left, |l| {
        debug_node(right, |r| {
            assert_eq!(l.level(), r.level(), "split halves at two levels");
            assert!(l.count() > 0 && r.count() > 0, "a split left a half empty");
            assert!(
                l.key(l.count() - 1) < sep && sep <= r.key(0),
                "separator does not divide the split pages {} and {}",
                left.pid(),
                right.pid()
            );
        })
    });
}

/// `parent` records `split` as its children `index` and `index + 1`, one level above them,
/// with the split's separator between them.
fn debug_check_parent(parent: &PageGuard, index: usize, split: &Split) {
    if !cfg!(debug_assertions) {
        return;
    }
    debug_node(parent, |p| {
        assert_eq!(p.level(), split.level + 1, "parent {} level", parent.pid());
        assert_eq!(
            p.child_at(index),
            split.left,
            "left child of {}",
            parent.pid()
        );
        assert_eq!(p.child_at(index + 1), split.right, "right child");
        assert_eq!(p.key(index), split.sep.as_slice(), "separator of the split");
    });
}

/// `merged`, child `index` of `parent` after a merge, lies one level below it and within the
/// fences the parent's separators give it.
fn debug_check_merged(parent: &PageGuard, index: usize, merged: &PageGuard) {
    if !cfg!(debug_assertions) {
        return;
    }
    debug_node(parent, |p| {
        debug_node(merged, |m| {
            assert_eq!(
                p.level(),
                m.level() + 1,
                "merged node {} level",
                merged.pid()
            );
            assert_eq!(p.child_at(index), merged.pid(), "merged node's place");
            if m.count() == 0 {
                return;
            }
            let (first, last) = (m.key(0), m.key(m.count() - 1));
            assert!(
                index == 0 || p.key(index - 1) <= first,
                "merged node {} below its lower fence",
                merged.pid()
            );
            assert!(
                index == p.count() || last < p.key(index),
                "merged node {} above its upper fence",
                merged.pid()
            );
        })
    });
}
