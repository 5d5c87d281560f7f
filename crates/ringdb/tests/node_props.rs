//! Property tests of the on-page formats (`page`, `node`), each at page sizes 1, 4 and 16 KiB.

use proptest::prelude::*;
use ringdb::node::{self, max_record_size, record_cost, NodeFull, NodeMut, NodeRef, CHILD_SIZE};
use ringdb::page::{self, PageError, PageType};
use std::collections::{BTreeMap, BTreeSet};

const PAGE_SIZES: [usize; 3] = [1024, 4096, 16384];

/// A value of `len` bytes that differs from its neighbours (catches misplaced bytes).
fn value(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

/// Keys from a small alphabet (many collisions and shared prefixes, the empty key included)
/// or arbitrary bytes.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(0u8..4, 0..6),
        1 => prop::collection::vec(any::<u8>(), 0..40),
    ]
}

/// Non-empty keys with long shared prefixes, so that separators get shortened.
fn tree_key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..3, 1..24)
}

/// Value lengths: mostly small records, sometimes up to the limit.
fn value_len(x: u16, class: u8, size: usize, key_len: usize) -> usize {
    let limit = match class % 3 {
        0 => 8,
        1 => 64,
        _ => max_record_size(size),
    };
    let limit = limit.min(max_record_size(size) - key_len);
    x as usize % (limit + 1)
}

fn entries(p: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    NodeRef::new(p)
        .unwrap()
        .iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

fn children(p: &[u8]) -> Vec<u64> {
    let n = NodeRef::new(p).unwrap();
    (0..=n.count()).map(|i| n.child_at(i)).collect()
}

fn separators(p: &[u8]) -> Vec<Vec<u8>> {
    entries(p).into_iter().map(|(k, _)| k).collect()
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(Vec<u8>, u16, u8),
    Remove(Vec<u8>),
    RemoveNth(usize),
    Compact,
}

impl Op {
    /// The same operation on `prefix` followed by its key.
    fn prefixed(self, prefix: &[u8]) -> Op {
        match self {
            Op::Upsert(k, l, s) => Op::Upsert([prefix, &k].concat(), l, s),
            Op::Remove(k) => Op::Remove([prefix, &k].concat()),
            other => other,
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), any::<u16>(), any::<u8>()).prop_map(|(k, l, s)| Op::Upsert(k, l, s)),
        2 => key().prop_map(Op::Remove),
        1 => any::<usize>().prop_map(Op::RemoveNth),
        1 => Just(Op::Compact),
    ]
}

/// Fills a leaf with `records` (in their order, duplicates skipped) until one does not fit;
/// returns that one.
fn fill_leaf(p: &mut [u8], records: &[(Vec<u8>, u16, u8)]) -> Option<(Vec<u8>, Vec<u8>)> {
    let size = p.len();
    let mut n = NodeMut::new(p);
    for (k, l, class) in records {
        let v = value(value_len(*l, *class, size, k.len()), *l as u8);
        if n.search(k).is_ok() {
            continue;
        }
        if n.insert(k, &v).is_err() {
            return Some((k.clone(), v));
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Random upserts and removes on one leaf agree with a BTreeMap; a refused upsert leaves
    /// the page untouched and really did not fit.
    #[test]
    fn leaf_matches_btreemap(
        ops in prop::collection::vec(op(), 1..300),
        class in any::<u8>(),
        prefix in prop::collection::vec(0u8..4, 0..16),
    ) {
        // Every key begins with `prefix`: the node's heads skip it (and more where they can).
        let ops: Vec<Op> = ops.into_iter().map(|op| op.prefixed(&prefix)).collect();
        for size in PAGE_SIZES {
            let mut page = vec![0u8; size];
            NodeMut::init_leaf(&mut page);
            let mut model = BTreeMap::new();
            for op in &ops {
                let before = page.clone();
                let mut n = NodeMut::new(&mut page);
                match op {
                    Op::Upsert(k, l, seed) => {
                        let v = value(value_len(*l, class, size, k.len()), *seed);
                        let fits = n.fits_upsert(k, &v);
                        match n.upsert(k, &v) {
                            Ok(existed) => {
                                prop_assert!(fits);
                                prop_assert_eq!(existed, model.insert(k.clone(), v).is_some());
                            }
                            Err(NodeFull) => {
                                prop_assert!(!fits);
                                prop_assert!(n.free_space() < record_cost(k.len(), v.len()));
                                prop_assert!(page == before, "a refused upsert changed the page");
                            }
                        }
                    }
                    Op::Remove(k) => match n.search(k) {
                        Ok(i) => {
                            n.remove(i);
                            prop_assert!(model.remove(k).is_some());
                        }
                        Err(_) => prop_assert!(!model.contains_key(k)),
                    },
                    Op::RemoveNth(x) => {
                        if n.count() > 0 {
                            let i = x % n.count();
                            let k = n.key(i).to_vec();
                            n.remove(i);
                            prop_assert!(model.remove(&k).is_some());
                        }
                    }
                    Op::Compact => {
                        n.compact();
                        prop_assert_eq!(n.contiguous_free(), n.free_space());
                    }
                }
                prop_assert_eq!(node::check(&page), Ok(()));
                let skip = NodeRef::new(&page).unwrap().head_skip();
                // A prefix of a head or more is skipped (shorter ones are not, `node.rs`).
                let skipped = model.is_empty() || prefix.len() < 8 || skip >= prefix.len();
                prop_assert!(skipped, "skip {} < {}", skip, prefix.len());
                let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                prop_assert_eq!(entries(&page), want);
                let used: usize = model.iter().map(|(k, v)| record_cost(k.len(), v.len())).sum();
                prop_assert_eq!(NodeRef::new(&page).unwrap().used_space(), used);
            }
        }
    }

    /// A full leaf splits into two valid halves, balanced by bytes, with
    /// left < separator <= right, the union being the original; the record that did not fit
    /// then fits its half; merging the halves gives the original back.
    #[test]
    fn leaf_split_and_merge(records in prop::collection::vec((tree_key(), any::<u16>(), any::<u8>()), 2..400)) {
        for size in PAGE_SIZES {
            let mut left = vec![0u8; size];
            NodeMut::init_leaf(&mut left);
            let overflow = fill_leaf(&mut left, &records);
            let original = entries(&left);
            if original.len() < 2 {
                continue;
            }
            let total = NodeRef::new(&left).unwrap().used_space();
            let mut right = vec![0xEEu8; size]; // stale bytes: split must format it
            let sep = NodeMut::new(&mut left).split_into(&mut right);
            prop_assert_eq!(node::check(&left), Ok(()));
            prop_assert_eq!(node::check(&right), Ok(()));
            let (l, r) = (NodeRef::new(&left).unwrap(), NodeRef::new(&right).unwrap());
            prop_assert!(l.count() >= 1 && r.count() >= 1);
            prop_assert!(l.key(l.count() - 1) < &sep[..]);
            prop_assert!(&sep[..] <= r.key(0));
            prop_assert!(r.key(0).starts_with(&sep), "leaf separator is a prefix of the right's first key");
            let largest = record_cost(max_record_size(size), 0);
            prop_assert!(l.used_space() <= total / 2 + largest);
            prop_assert!(r.used_space() <= total / 2 + largest);
            let mut union = entries(&left);
            union.extend(entries(&right));
            prop_assert_eq!(&union, &original);

            if let Some((k, v)) = &overflow {
                // The guarantee `max_record_size` buys: after one split, the record fits.
                let mut l2 = left.clone();
                let mut r2 = right.clone();
                let half = if k[..] >= sep[..] { &mut r2 } else { &mut l2 };
                prop_assert!(NodeMut::new(half).upsert(k, v).is_ok());
            }

            prop_assert!(node::fits_merged(&left, &right, &sep));
            NodeMut::new(&mut left).merge_from(&right, &sep).unwrap();
            prop_assert_eq!(node::check(&left), Ok(()));
            prop_assert_eq!(entries(&left), original);
        }
    }

    /// A full inner node splits around a middle separator that moves up; children keep their
    /// order; a separator of the largest size then fits its half; merging with the separator
    /// pulled down round-trips.
    #[test]
    fn inner_split_and_merge(
        keys in prop::collection::btree_set(tree_key(), 3..600),
        pad in any::<u16>(),
        first in any::<u64>(),
    ) {
        for size in PAGE_SIZES {
            let max = max_record_size(size);
            // Separators padded to random lengths (kept sorted and unique by a unique prefix).
            let seps: Vec<Vec<u8>> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let mut s = k.clone();
                    s.resize(k.len() + (pad as usize).wrapping_mul(i + 7) % 40, 0);
                    s.truncate(max);
                    s
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let mut p = vec![0u8; size];
            NodeMut::init_inner(&mut p, 3, first);
            let mut n = NodeMut::new(&mut p);
            for (i, s) in seps.iter().enumerate() {
                if !n.fits_separator(s) {
                    break;
                }
                let at = n.count();
                n.insert_at(at, s, &(first ^ (i as u64 + 1)).to_le_bytes()).unwrap();
            }
            let count = n.count();
            if count < 3 {
                continue;
            }
            let (orig_seps, orig_children) = (separators(&p), children(&p));
            let mut right = vec![0x55u8; size];
            let up = NodeMut::new(&mut p).split_into(&mut right);
            prop_assert_eq!(node::check(&p), Ok(()));
            prop_assert_eq!(node::check(&right), Ok(()));
            let (l, r) = (NodeRef::new(&p).unwrap(), NodeRef::new(&right).unwrap());
            prop_assert_eq!((l.level(), r.level()), (3, 3));
            prop_assert!(l.count() >= 1 && r.count() >= 1);
            prop_assert_eq!(l.count() + 1 + r.count(), count);
            prop_assert_eq!(&up, &orig_seps[l.count()]);
            prop_assert!(l.key(l.count() - 1) < &up[..] && &up[..] < r.key(0));
            let mut kids = children(&p);
            kids.extend(children(&right));
            prop_assert_eq!(&kids, &orig_children);

            // A largest separator fits whichever half it lands in.
            let big = vec![1u8; max];
            let half = if big[..] >= up[..] { &right } else { &p };
            prop_assert!(NodeRef::new(half).unwrap().fits_separator(&big));

            prop_assert!(node::fits_merged(&p, &right, &up));
            NodeMut::new(&mut p).merge_from(&right, &up).unwrap();
            prop_assert_eq!(node::check(&p), Ok(()));
            prop_assert_eq!(separators(&p), orig_seps);
            prop_assert_eq!(children(&p), orig_children);
        }
    }

    /// `child_for` agrees with a linear reference: the first separator above the key, else
    /// the upper child.
    #[test]
    fn child_for_matches_reference(
        seps in prop::collection::btree_set(key(), 0..80),
        probes in prop::collection::vec(key(), 1..50),
        base in any::<u64>(),
    ) {
        for size in PAGE_SIZES {
            let seps: Vec<Vec<u8>> = seps.iter().cloned().collect();
            let kids: Vec<u64> = (0..=seps.len() as u64).map(|i| base.wrapping_add(i * 3)).collect();
            let mut p = vec![0u8; size];
            NodeMut::init_inner(&mut p, 1, kids[0]);
            let mut n = NodeMut::new(&mut p);
            let mut used = 0;
            // Built the way a tree builds it: child i splits at separator i.
            for (i, s) in seps.iter().enumerate() {
                if n.insert_split(i, s, kids[i], kids[i + 1]).is_err() {
                    break;
                }
                used = i + 1;
            }
            let n = NodeRef::new(&p).unwrap();
            prop_assert_eq!(node::check(&p), Ok(()));
            let seps = &seps[..used];
            for probe in probes.iter().chain(seps) {
                let want = seps.iter().position(|s| probe < s).unwrap_or(seps.len());
                prop_assert_eq!(n.child_index(probe), want);
                prop_assert_eq!(n.child_for(probe), kids[want]);
            }
        }
    }

    /// Up to 3 flipped bits anywhere in a sealed page fail `verify` with a checksum error;
    /// a wrong expected id is a misdirected page; nothing panics.
    #[test]
    fn flipped_bits_fail_verify(
        records in prop::collection::vec((tree_key(), any::<u16>(), any::<u8>()), 0..50),
        bits in prop::collection::btree_set(any::<u32>(), 1..=3),
        id in any::<u64>(),
        lsn in any::<u64>(),
    ) {
        for size in PAGE_SIZES {
            let mut p = vec![0u8; size];
            NodeMut::init_leaf(&mut p);
            fill_leaf(&mut p, &records);
            page::set_lsn(&mut p, lsn);
            page::seal(&mut p, id);
            prop_assert_eq!(page::verify(&p, id), Ok(()));
            prop_assert_eq!(page::lsn(&p), lsn);
            prop_assert_eq!(
                page::verify(&p, id ^ 1),
                Err(PageError::WrongPageId { expected: id ^ 1, found: id })
            );
            let positions: BTreeSet<usize> = bits.iter().map(|b| *b as usize % (size * 8)).collect();
            let mut q = p.clone();
            for b in &positions {
                q[b / 8] ^= 1 << (b % 8);
            }
            match page::verify(&q, id) {
                Err(PageError::Checksum { page, .. }) => prop_assert_eq!(page, id),
                other => prop_assert!(false, "flipped bits {:?}: {:?}", positions, other),
            }
        }
    }

    /// `check` (and `verify`) on arbitrary bytes returns, never panics; garbage that passes
    /// `check` is a usable node.
    #[test]
    fn check_never_panics_on_garbage(
        bytes in prop::collection::vec(any::<u8>(), 16384),
        header in any::<bool>(),
        ty in prop_oneof![Just(PageType::Leaf), Just(PageType::Inner), Just(PageType::Meta)],
    ) {
        for size in PAGE_SIZES {
            let mut p = bytes[..size].to_vec();
            if header {
                // Get past the magic/type/size checks to reach the slot checks.
                p[4] = page::FORMAT_MAGIC;
                p[5] = ty as u8;
                p[6] = u8::from(ty == PageType::Inner);
                p[7] = 0;
                p[26] = size.trailing_zeros() as u8;
                // A few slots, a record area of up to 255 bytes, a little fragmentation.
                let (count, area) = (p[24] % 8, p[29] as usize);
                let frag = p[33] as usize % (area + 1);
                p[24] = count;
                p[25] = 0;
                p[28..32].copy_from_slice(&((size - area) as u32).to_le_bytes());
                p[32..36].copy_from_slice(&(frag as u32).to_le_bytes());
            }
            prop_assert!(page::verify(&p, 1).is_err());
            exercise(&p)?;
        }
    }

    /// `check` on a valid node with random bytes overwritten returns, never panics.
    #[test]
    fn check_never_panics_on_corrupted_nodes(
        records in prop::collection::vec((key(), any::<u16>(), any::<u8>()), 1..60),
        hits in prop::collection::vec((any::<u16>(), any::<u8>()), 1..8),
        inner in any::<bool>(),
    ) {
        for size in PAGE_SIZES {
            let mut p = vec![0u8; size];
            if inner {
                NodeMut::init_inner(&mut p, 1, 9);
                let keys: BTreeSet<&Vec<u8>> = records.iter().map(|r| &r.0).collect();
                let mut n = NodeMut::new(&mut p);
                for k in keys {
                    let at = n.count();
                    if n.insert_at(at, k, &7u64.to_le_bytes()).is_err() {
                        break;
                    }
                }
            } else {
                NodeMut::init_leaf(&mut p);
                fill_leaf(&mut p, &records);
            }
            prop_assert_eq!(node::check(&p), Ok(()));
            // Mostly the header and the slot array, where the structure is.
            for (at, b) in &hits {
                let at = if at % 2 == 0 { *at as usize % 128 } else { *at as usize % size };
                p[at] = *b;
            }
            exercise(&p)?;
        }
    }
}

/// Runs `check`; if the node passes, every accessor must work and agree.
fn exercise(p: &[u8]) -> Result<(), TestCaseError> {
    let checked = node::check(p);
    let Ok(n) = NodeRef::new(p) else {
        prop_assert!(checked.is_err());
        return Ok(());
    };
    if checked.is_err() {
        return Ok(());
    }
    for (i, (k, v)) in n.iter().enumerate() {
        prop_assert_eq!(n.search(k), Ok(i));
        if n.is_inner() {
            prop_assert_eq!(v.len(), CHILD_SIZE);
            prop_assert_eq!(n.child_index(k), i + 1);
        }
    }
    prop_assert!(n.used_space() <= n.capacity());
    Ok(())
}
