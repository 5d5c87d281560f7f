//! A scan inside one leaf, either way, and the test of whether a scan's remaining range can
//! still hold a key.

use super::scan::{Direction, Pairs, ScanPlan};
use super::BTree;
use crate::buffer::PageGuard;
use crate::error::StorageError;
use crate::node::NodeRef;
use std::ops::Bound;

/// Appends the pairs of `leaf` from `at` on in the plan's direction, stopping at the far end
/// or when `out` has its target length. Returns whether the scan is finished (limit reached
/// or far end passed) and how many pairs the leaf gave.
pub(super) fn emit_leaf(
    leaf: &PageGuard,
    at: &Bound<Vec<u8>>,
    plan: ScanPlan<'_>,
    out: &mut Pairs,
) -> Result<(bool, usize), StorageError> {
    let before = out.len();
    let done = leaf.read(|p| {
        let n = NodeRef::new(p).map_err(|e| BTree::corrupt(leaf.pid(), e))?;
        Ok::<_, StorageError>(match plan.direction {
            Direction::Forward => emit_forward(&n, at, plan, out),
            Direction::Reverse => emit_reverse(&n, at, plan, out),
        })
    })?;
    Ok((done, out.len() - before))
}

fn emit_forward(n: &NodeRef<'_>, at: &Bound<Vec<u8>>, plan: ScanPlan<'_>, out: &mut Pairs) -> bool {
    let first = match at {
        Bound::Included(k) => n.lower_bound(k),
        Bound::Excluded(k) => match n.search(k) {
            Ok(i) => i + 1,
            Err(i) => i,
        },
        Bound::Unbounded => 0,
    };
    for i in first..n.count() {
        if out.len() >= plan.target_len {
            return true;
        }
        let k = n.key(i);
        let past = match plan.far {
            Bound::Included(e) => k > e,
            Bound::Excluded(e) => k >= e,
            Bound::Unbounded => false,
        };
        if past {
            return true;
        }
        out.push((k.to_vec(), n.value(i).to_vec()));
    }
    out.len() >= plan.target_len
}

fn emit_reverse(n: &NodeRef<'_>, at: &Bound<Vec<u8>>, plan: ScanPlan<'_>, out: &mut Pairs) -> bool {
    // Keys below index `upper` are at or before the position.
    let upper = match at {
        Bound::Included(k) => match n.search(k) {
            Ok(i) => i + 1,
            Err(i) => i,
        },
        Bound::Excluded(k) => n.lower_bound(k),
        Bound::Unbounded => n.count(),
    };
    for i in (0..upper).rev() {
        if out.len() >= plan.target_len {
            return true;
        }
        let k = n.key(i);
        let past = match plan.far {
            Bound::Included(s) => k < s,
            Bound::Excluded(s) => k <= s,
            Bound::Unbounded => false,
        };
        if past {
            return true;
        }
        out.push((k.to_vec(), n.value(i).to_vec()));
    }
    out.len() >= plan.target_len
}

/// Whether no key can lie between the position `at` and the far end `far` (walking in
/// `direction`). Errs towards "not empty": a scan then visits a leaf that gives nothing.
pub(super) fn range_is_empty(at: &Bound<Vec<u8>>, far: Bound<&[u8]>, direction: Direction) -> bool {
    let (a, a_included) = match at {
        Bound::Included(a) => (a.as_slice(), true),
        Bound::Excluded(a) => (a.as_slice(), false),
        Bound::Unbounded => return false,
    };
    let (b, b_included) = match far {
        Bound::Included(b) => (b, true),
        Bound::Excluded(b) => (b, false),
        Bound::Unbounded => return false,
    };
    let (low, high) = match direction {
        Direction::Forward => (a, b),
        Direction::Reverse => (b, a),
    };
    if a_included && b_included {
        low > high
    } else {
        low >= high
    }
}
