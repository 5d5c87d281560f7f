//! B+tree invariants after structural changes, checked in debug builds (cheap enough for the
//! tests): each node's own format is checked by `node.rs` after every change; these check what
//! ties nodes together: levels, separators and fences. Their pair on the read side is
//! `BTree::descend` (every leaf at the root's height) and `verify.rs` (fences and levels of the
//! whole tree).

use super::insert::Split;
use crate::buffer::PageGuard;
use crate::node::NodeRef;

/// Reads a node that a structural change just wrote (a bad one here is a bug).
fn debug_node<R>(g: &PageGuard, f: impl FnOnce(NodeRef) -> R) -> R {
    g.read(|p| f(NodeRef::new(p).expect("a node the tree just wrote is valid")))
}

/// `left` and `right`, the halves of a split at `sep`: one level, both non-empty, every key
/// of `left` below `sep` and every key of `right` at or above it.
pub(super) fn debug_check_split(left: &PageGuard, right: &PageGuard, sep: &[u8]) {
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
pub(super) fn debug_check_parent(parent: &PageGuard, index: usize, split: &Split) {
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
pub(super) fn debug_check_merged(parent: &PageGuard, index: usize, merged: &PageGuard) {
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
