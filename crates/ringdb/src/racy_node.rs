//! Node reads over a [`RacyPage`]: what a point read and a scan need of `node.rs`'s format
//! (the header, a search, a child, a value, the pairs from a slot on), for bytes another
//! thread may be writing.
//!
//! Same layout, same order as `node.rs` and `key_order.rs` (the property tests check that
//! every answer on a stable page is [`NodeRef`](crate::node::NodeRef)'s); the difference is
//! trust. Nothing here assumes the page is consistent: every field is read through
//! [`RacyPage`] (bounds-checked, `None` outside the page), a count is checked against the room
//! the page has for slots, a record against the page's end, a child against its 8 bytes, and
//! every loop is bounded (a binary search by the slot count's bits, a copy by the page's
//! size). So a torn image makes a function return `None` (the caller validates the page's
//! version, then retries or falls back), never panic or loop.

use crate::key_order::{key_head, HEAD_BYTES};
use crate::node::{CHILD_SIZE, MAX_LEVEL, SLOT_SIZE};
use crate::page::{PageType, HEADER_SIZE, OFF_COUNT, OFF_HEAD_SKIP, OFF_LEVEL, OFF_LINK, OFF_TYPE};
use crate::racy::RacyPage;
use std::cmp::Ordering;

/// Where a slot's key length and key head lie within the slot.
const SLOT_KEY_LEN: usize = 2;
const SLOT_VALUE_LEN: usize = 4;
const SLOT_HEAD: usize = 6;

/// A node's header as read (not yet validated by the page's version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RacyHeader {
    /// 0 for a leaf, the height above the leaves for an inner node.
    pub level: u16,
    /// Slots (records).
    pub count: usize,
    /// The bytes every key begins with, left out of the slots' heads (`node.rs`).
    pub head_skip: usize,
    /// Inner nodes: the upper child.
    pub upper: u64,
}

impl RacyHeader {
    /// Whether the node is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }
}

/// A record's place in the page.
#[derive(Clone, Copy, Debug)]
struct Record {
    offset: usize,
    key_len: usize,
    value_len: usize,
}

/// The node's header, if the page reads as a B+tree node whose slots fit the page.
pub fn header(page: &RacyPage) -> Option<RacyHeader> {
    let kind = page.u8(OFF_TYPE)?;
    let level = page.u16_le(OFF_LEVEL)?;
    let leaf = match kind {
        k if k == PageType::Leaf as u8 => true,
        k if k == PageType::Inner as u8 => false,
        _ => return None,
    };
    if leaf != (level == 0) || level > MAX_LEVEL {
        return None;
    }
    let count = usize::from(page.u16_le(OFF_COUNT)?);
    if HEADER_SIZE + count * SLOT_SIZE > page.len() {
        return None;
    }
    let upper = if leaf { 0 } else { page.u64_le(OFF_LINK)? };
    let head_skip = usize::from(page.u16_le(OFF_HEAD_SKIP)?);
    if head_skip > page.len() {
        return None;
    }
    Some(RacyHeader {
        level,
        count,
        head_skip,
        upper,
    })
}

/// Where slot `i` starts.
fn slot_at(i: usize) -> usize {
    HEADER_SIZE + i * SLOT_SIZE
}

/// Slot `i`'s record, if it lies inside the page.
fn record(page: &RacyPage, i: usize) -> Option<Record> {
    let at = slot_at(i);
    let record = Record {
        offset: usize::from(page.u16_le(at)?),
        key_len: usize::from(page.u16_le(at + SLOT_KEY_LEN)?),
        value_len: usize::from(page.u16_le(at + SLOT_VALUE_LEN)?),
    };
    let end = record.offset + record.key_len + record.value_len;
    (end <= page.len()).then_some(record)
}

/// Binary search of the node for `key`: `Ok(slot)` holding it, `Err(slot)` where it would go
/// (as `NodeRef::search`).
pub fn search(page: &RacyPage, header: &RacyHeader, key: &[u8]) -> Option<Result<usize, usize>> {
    let (skip, count) = (header.head_skip, header.count);
    if skip == 0 || count == 0 {
        return search_rest(page, count, key, 0);
    }
    // As `NodeRef::search`: the rest searched by the heads, then the key's first `skip`
    // bytes checked against those of the slot it landed on (slot 0 for a key shorter than
    // the prefix); a key without the prefix lies before or after every key.
    let found = match key.get(skip..) {
        Some(rest) => search_rest(page, count, rest, skip)?,
        None => Err(0),
    };
    let witness = match found {
        Ok(at) => at,
        Err(at) => at.min(count - 1),
    };
    let r = record(page, witness)?;
    if r.key_len < skip {
        return None;
    }
    Some(
        match page.compare(r.offset, skip, &key[..skip.min(key.len())])? {
            Ordering::Equal if key.len() >= skip => found,
            Ordering::Greater | Ordering::Equal => Err(0),
            Ordering::Less => Err(count),
        },
    )
}

/// The binary search of the keys' rests after their first `skip` bytes for `rest`.
fn search_rest(
    page: &RacyPage,
    count: usize,
    rest: &[u8],
    skip: usize,
) -> Option<Result<usize, usize>> {
    let probe = key_head(rest);
    let (mut lo, mut hi) = (0, count);
    // Bounded: the range halves every step (at most 17 steps for 65,536 slots).
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let at = slot_at(mid);
        let head = page.u64_le(at + SLOT_HEAD)?;
        let key_len = usize::from(page.u16_le(at + SLOT_KEY_LEN)?);
        // A torn slot may claim a key shorter than the skip: the copy is inconsistent.
        let rest_len = key_len.checked_sub(skip)?;
        let order = if head != probe {
            head.cmp(&probe)
        } else if rest_len <= HEAD_BYTES && rest.len() <= HEAD_BYTES {
            rest_len.cmp(&rest.len())
        } else {
            let r = record(page, mid)?;
            page.compare(r.offset + skip, rest_len, rest)?
        };
        match order {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Some(Ok(mid)),
        }
    }
    Some(Err(lo))
}

/// Inner nodes: the child page whose range holds `key`, and its index (0..=count).
pub fn child_for(page: &RacyPage, header: &RacyHeader, key: &[u8]) -> Option<(usize, u64)> {
    let index = match search(page, header, key)? {
        Ok(i) => i + 1,
        Err(i) => i,
    };
    Some((index, child_at(page, header, index)?))
}

/// Inner nodes: child `index` (the upper child for `index == count`).
pub fn child_at(page: &RacyPage, header: &RacyHeader, index: usize) -> Option<u64> {
    if header.is_leaf() || index > header.count {
        return None;
    }
    if index == header.count {
        return Some(header.upper);
    }
    let r = record(page, index)?;
    if r.value_len != CHILD_SIZE {
        return None;
    }
    page.u64_le(r.offset + r.key_len)
}

/// Inner nodes: separator `index`'s key appended to `out` (the fence of the child before it).
pub fn separator_into(
    page: &RacyPage,
    header: &RacyHeader,
    index: usize,
    out: &mut Vec<u8>,
) -> Option<()> {
    if header.is_leaf() || index >= header.count {
        return None;
    }
    let r = record(page, index)?;
    page.copy_to(r.offset, r.key_len, out)
}

/// Leaves: appends the value of `key` to `out` when it is present; says whether it was.
pub fn value_into(
    page: &RacyPage,
    header: &RacyHeader,
    key: &[u8],
    out: &mut Vec<u8>,
) -> Option<bool> {
    if !header.is_leaf() {
        return None;
    }
    match search(page, header, key)? {
        Ok(i) => {
            value_at(page, header, i, out)?;
            Some(true)
        }
        Err(_) => Some(false),
    }
}

/// Leaves: appends the value in slot `index` to `out`.
pub fn value_at(
    page: &RacyPage,
    header: &RacyHeader,
    index: usize,
    out: &mut Vec<u8>,
) -> Option<()> {
    if !header.is_leaf() || index >= header.count {
        return None;
    }
    let r = record(page, index)?;
    page.copy_to(r.offset + r.key_len, r.value_len, out)
}

/// Leaves: appends the pair in slot `index` to `keys` and `values` (each record's bytes
/// after the last).
pub fn pair_into(
    page: &RacyPage,
    header: &RacyHeader,
    index: usize,
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> Option<()> {
    if !header.is_leaf() || index >= header.count {
        return None;
    }
    let r = record(page, index)?;
    page.copy_to(r.offset, r.key_len, key)?;
    page.copy_to(r.offset + r.key_len, r.value_len, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{NodeMut, NodeRef};
    use crate::racy::words_of;
    use proptest::prelude::*;

    /// Keys from few byte values, so that shared prefixes, zeros and equal heads are common.
    fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(1u8), Just(b'k'), Just(255u8)],
            0..14,
        )
    }

    proptest! {
        /// On a stable leaf, the racy search and value read answer as `NodeRef` does.
        #[test]
        fn a_stable_leaf_reads_as_node_ref_does(
            keys in proptest::collection::btree_set(key_strategy(), 0..60),
            probes in proptest::collection::vec(key_strategy(), 1..20),
        ) {
            let mut page = vec![0u8; 4096];
            NodeMut::init_leaf(&mut page);
            for k in &keys {
                let value = [k.as_slice(), b"-value"].concat();
                NodeMut::new(&mut page).insert(k, &value).unwrap();
            }
            let words = words_of(&page);
            let racy = RacyPage::over(&words);
            let header = header(&racy).unwrap();
            let node = NodeRef::new(&page).unwrap();
            prop_assert_eq!(header.count, node.count());
            for probe in probes.iter().chain(&keys) {
                prop_assert_eq!(search(&racy, &header, probe), Some(node.search(probe)));
                let mut out = Vec::new();
                let found = value_into(&racy, &header, probe, &mut out).unwrap();
                let want = node.search(probe).ok().map(|i| node.value(i).to_vec());
                prop_assert_eq!(found.then_some(out), want);
            }
            for i in 0..node.count() {
                let (mut k, mut v) = (Vec::new(), Vec::new());
                pair_into(&racy, &header, i, &mut k, &mut v).unwrap();
                prop_assert_eq!((k.as_slice(), v.as_slice()), (node.key(i), node.value(i)));
            }
        }

        /// On a stable inner node, the racy routing answers as `NodeRef` does.
        #[test]
        fn a_stable_inner_node_routes_as_node_ref_does(
            separators in proptest::collection::btree_set(key_strategy(), 0..40),
            probes in proptest::collection::vec(key_strategy(), 1..20),
        ) {
            let mut page = vec![0u8; 4096];
            NodeMut::init_inner(&mut page, 2, 9999);
            for (i, s) in separators.iter().enumerate() {
                NodeMut::new(&mut page).insert_at(i, s, &(100 + i as u64).to_le_bytes()).unwrap();
            }
            let words = words_of(&page);
            let racy = RacyPage::over(&words);
            let header = header(&racy).unwrap();
            prop_assert_eq!(header.level, 2);
            let node = NodeRef::new(&page).unwrap();
            for probe in &probes {
                let index = node.child_index(probe);
                prop_assert_eq!(child_for(&racy, &header, probe), Some((index, node.child_at(index))));
            }
            for (i, s) in separators.iter().enumerate() {
                let mut out = Vec::new();
                separator_into(&racy, &header, i, &mut out).unwrap();
                prop_assert_eq!(&out, s);
            }
        }

        /// Any bytes at all (a torn image): every function returns, `None` or an answer,
        /// without panicking, looping or reading outside the page.
        #[test]
        fn garbage_never_panics(
            mut page in proptest::collection::vec(any::<u8>(), 1024..=1024),
            leaf in any::<bool>(),
            count in 0u16..200,
            probe in key_strategy(),
        ) {
            // Often a plausible header, so that the slot and record paths run.
            page[OFF_TYPE] = if leaf { PageType::Leaf as u8 } else { PageType::Inner as u8 };
            page[OFF_LEVEL..OFF_LEVEL + 2].copy_from_slice(&u16::from(!leaf).to_le_bytes());
            page[OFF_COUNT..OFF_COUNT + 2].copy_from_slice(&count.to_le_bytes());
            let words = words_of(&page);
            let racy = RacyPage::over(&words);
            if let Some(h) = header(&racy) {
                let mut out = Vec::new();
                let _ = search(&racy, &h, &probe);
                let _ = child_for(&racy, &h, &probe);
                let _ = value_into(&racy, &h, &probe, &mut out);
                for i in 0..h.count.min(64) {
                    let (mut k, mut v) = (Vec::new(), Vec::new());
                    let _ = pair_into(&racy, &h, i, &mut k, &mut v);
                    let _ = separator_into(&racy, &h, i, &mut k);
                }
                prop_assert!(out.len() <= racy.len());
            }
        }
    }
}
