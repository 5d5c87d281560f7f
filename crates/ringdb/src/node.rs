//! Slotted B+tree nodes over a page (pure, synchronous code: no I/O).
//!
//! # Layout
//!
//! ```text
//! +--------------------+---------------------------+-------------+------------------------+
//! | page header (48 B) | slot 0 | slot 1 | ...     | free space  |  records (any order)   |
//! +--------------------+---------------------------+-------------+------------------------+
//! 0                  HEADER_SIZE            slots_end     data_start               page_size
//! ```
//!
//! The header is [`crate::page`]'s; the node uses its `level`, `count`, `data_start`, `frag`,
//! `head_skip` and `link` fields. Each slot is [`SLOT_SIZE`] = 14 bytes, little-endian:
//!
//! ```text
//! offset size field
//!      0    2 offset     where the record starts in the page (0 for a record of 0 bytes)
//!      2    2 key_len
//!      4    2 value_len
//!      6    8 key_head   the 8 bytes of the key after the node's head skip, as a big-endian
//!                        integer, zero-padded
//! ```
//!
//! The key head makes a binary search read the slot array only: heads compare as integers in
//! the keys' order (see `key_order.rs`), so a search step touches the record's bytes only when
//! two heads are equal. Without it every step read a key from wherever its record lies in the
//! page (a cache miss each in a pool larger than the CPU's caches) through a `memcmp` call.
//! The head is derived from the key whenever a slot is written, and [`Node::check`] verifies it
//! against the key.
//!
//! # Head skip (prefix truncation of the heads)
//!
//! Keys that share their first eight bytes (`user:000123`, `key:000000001234`, a table's keys
//! under one prefix) would give every slot the same head, and every search step would fall
//! back to comparing whole keys. So a node's heads start after the `head_skip` bytes that all
//! of its keys share: the keys themselves are stored whole, only the heads skip the common
//! prefix. A search runs on the heads of the rest of the key, then compares the key's first
//! `head_skip` bytes with those of the key it landed on (the record its caller reads next):
//! a key without the prefix lies before or after every key of the node. The invariant ([`Node::check`]): every key is at least `head_skip`
//! bytes long and begins with slot 0's first `head_skip` bytes. A node's first key sets the
//! skip to its length; an insert of a key without the prefix shortens it (and rewrites the
//! heads); a split, a merge or a compaction sets it to the longest prefix its keys share (that
//! of the first and the last key, the keys being sorted); an empty node's skip is 0. A prefix
//! shorter than a head is not skipped (the skip is 0): heads from the start then tell most
//! keys apart already (8-byte integer keys, say), and the prefix check would be a cost with
//! no gain. Pages of format 0xB2 had no skip (the bytes were 0): they read as nodes
//! whose skip is 0.
//!
//! A record is the key's bytes immediately followed by the value's. Slots are sorted by key
//! (memcmp order, i.e. `<[u8] as Ord>`; keys are unique); records are not: they are placed
//! downwards from the end of the page as they arrive. Removing or shrinking a record leaves
//! dead bytes (`frag`, or `data_start` moves up when the record was the lowest one); an insert
//! that finds too little contiguous space compacts the page first, so an insert fails
//! ([`NodeFull`]) only when the node's total free space is too small. Invariant, checked by
//! [`Node::check`]: live record bytes + `frag` = `page_size - data_start`.
//!
//! # Leaves and inner nodes
//!
//! - **Leaf** (level 0): key -> value. `link` is reserved (0).
//! - **Inner** (level >= 1, the height above the leaves): `count` separator keys `sep[i]`, each
//!   record's value the 8-byte little-endian page id of `child[i]`; `link` holds the upper
//!   (rightmost) child `child[count]`. Child `i` holds the keys `k` with
//!   `sep[i-1] <= k < sep[i]` (no lower bound for `i = 0`, no upper bound for `i = count`):
//!   a key equal to a separator goes right. [`Node::child_index`] finds `i`.
//!
//! # Limits
//!
//! - Page sizes: powers of two, [`crate::page::MIN_PAGE_SIZE`]..=[`crate::page::MAX_PAGE_SIZE`];
//!   all offsets fit the slots' `u16`.
//! - [`max_record_size`]: the largest `key.len() + value.len()` the tree may store: with it,
//!   every node holds at least [`MIN_RECORDS_PER_NODE`] records (leaf records, or inner records
//!   whose separator is as long as a leaf record), so a full node always splits into two
//!   non-empty halves and the record that did not fit then fits into either half.
//!
//! # Split and merge
//!
//! [`Node::split_into`] moves the upper half *by bytes* (not by count) to a fresh page:
//! - leaf: the separator returned is the **shortest prefix** of the right node's first key that
//!   is greater than the left node's last key (suffix truncation), so
//!   `left keys < separator <= right keys`;
//! - inner: the middle separator moves up (it is removed from both halves); the left node's
//!   upper child becomes the middle separator's child.
//!
//! [`Node::merge_from`] is the inverse: for inner nodes it pulls the parent's separator down.
//!
//! # Trust
//!
//! [`NodeRef::new`] validates the header only (O(1)); accessors on a page whose slots are
//! corrupted may panic. Pages read from disk pass [`crate::page::verify`] first; for pages of
//! unknown state (`ringdb check`) run [`check`], which validates everything and never panics.

use crate::key_order::{compare_same_length, key_head, KeyProbe, HEAD_BYTES};
use crate::page::{self, PageError, PageType, HEADER_SIZE};
use std::cmp::Ordering;
use thiserror::Error;

/// Bytes per slot: offset, key length, value length (u16 each) and the key's head (u64).
pub const SLOT_SIZE: usize = 14;
/// Where a slot's key head lies within the slot.
const SLOT_HEAD: usize = 6;
/// Bytes of a child page id (an inner record's value).
pub const CHILD_SIZE: usize = 8;
/// Records of the largest size ([`max_record_size`]) that always fit one node: 4 so that a
/// full node splits into halves of at most half a page plus one record, and the record that
/// did not fit then fits into either half (1/2 + 1/4 + 1/4 <= 1).
pub const MIN_RECORDS_PER_NODE: usize = 4;
/// The highest level of an inner node: far above any real tree (fan-out >= 2 per level).
pub const MAX_LEVEL: u16 = 64;

/// The largest `key.len() + value.len()` a tree over `page_size`-byte pages may store
/// (990 bytes for 4 KiB pages, 222 for 1 KiB, 16350 for 64 KiB).
///
/// A leaf record costs `key + value + SLOT_SIZE` bytes; a separator record in an inner node
/// costs `separator + CHILD_SIZE + SLOT_SIZE`, and a separator is at most as long as a key.
/// Both are kept within `1 / MIN_RECORDS_PER_NODE` of the usable space.
pub const fn max_record_size(page_size: usize) -> usize {
    (page_size - HEADER_SIZE) / MIN_RECORDS_PER_NODE - SLOT_SIZE - CHILD_SIZE
}

/// The node has too little free space for the operation, even after compaction. The node is
/// unchanged.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("node is full")]
pub struct NodeFull;

/// A node violates the format's invariants. Every message names the page (the page id in its
/// header: the one `seal` stamped).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum NodeError {
    #[error(transparent)]
    Page(#[from] PageError),
    #[error("page {page}: a {found:?} page is not a B+tree node")]
    NotANode { page: u64, found: PageType },
    #[error("page {page}: level {level} is impossible for a {kind} (leaves are level 0, inner nodes 1..={MAX_LEVEL})")]
    BadLevel {
        page: u64,
        level: u16,
        kind: &'static str,
    },
    #[error("page {page}: {count} slots end at byte {slots_end}, data starts at {data_start}, fragmented {frag}, page size {page_size}")]
    BadSpace {
        page: u64,
        count: usize,
        slots_end: usize,
        data_start: usize,
        frag: usize,
        page_size: usize,
    },
    #[error("page {page}, slot {slot}: record [{start}, {end}) lies outside the record area [{data_start}, {page_size})")]
    RecordOutOfBounds {
        page: u64,
        slot: usize,
        start: usize,
        end: usize,
        data_start: usize,
        page_size: usize,
    },
    #[error("page {page}, slot {slot}: a record of 0 bytes must have offset 0, has {offset}")]
    BadEmptyRecord {
        page: u64,
        slot: usize,
        offset: usize,
    },
    #[error("page {page}, slot {slot}: an inner node's value is a {CHILD_SIZE}-byte child id, this one has {len} bytes")]
    BadChild { page: u64, slot: usize, len: usize },
    #[error("page {page}, slot {slot}: the key head in the slot does not match the key")]
    BadKeyHead { page: u64, slot: usize },
    #[error("page {page}, slot {slot}: the key does not begin with the {skip} bytes the node's heads skip")]
    BadHeadSkip { page: u64, slot: usize, skip: usize },
    #[error("page {page}: the records of slots {a} and {b} overlap")]
    Overlap { page: u64, a: usize, b: usize },
    #[error("page {page}, slot {slot}: key is not greater than the previous slot's")]
    Unsorted { page: u64, slot: usize },
    #[error("page {page}: {live} live + {frag} fragmented bytes != record area of {area} bytes")]
    SpaceMismatch {
        page: u64,
        live: usize,
        frag: usize,
        area: usize,
    },
}

/// A view of a node over a page buffer `B` (`&[u8]`, `&mut [u8]`, `Vec<u8>`, ...). Reading
/// works on any `B`; changing needs `B: AsMut<[u8]>`.
#[derive(Clone, Copy)]
pub struct Node<B> {
    buf: B,
}

impl<B: AsRef<[u8]>> std::fmt::Debug for Node<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the page's bytes: a summary fits an assertion message.
        f.debug_struct("Node")
            .field("page_id", &self.page_id())
            .field("level", &self.level())
            .field("count", &self.count())
            .field("free_space", &self.free_space())
            .finish()
    }
}

/// A read-only node over a page.
pub type NodeRef<'a> = Node<&'a [u8]>;
/// A node that can be changed, over a page.
pub type NodeMut<'a> = Node<&'a mut [u8]>;

/// One slot, decoded.
#[derive(Clone, Copy, Debug)]
struct Slot {
    offset: usize,
    key_len: usize,
    value_len: usize,
}

impl Slot {
    fn len(&self) -> usize {
        self.key_len + self.value_len
    }
}

#[inline]
fn slot_pos(i: usize) -> usize {
    HEADER_SIZE + i * SLOT_SIZE
}

/// Bytes a record of this size costs in a node, slot included.
#[inline]
pub const fn record_cost(key_len: usize, value_len: usize) -> usize {
    key_len + value_len + SLOT_SIZE
}

/// The page id in the header, for messages (0 when the buffer is too short to have one).
fn id_of(page: &[u8]) -> u64 {
    if page.len() >= HEADER_SIZE {
        page::page_id(page)
    } else {
        0
    }
}

/// O(1) validation of a node's header: page size, magic, type, level and the space fields.
fn check_node_header(page: &[u8]) -> Result<(), NodeError> {
    let id = id_of(page);
    let ty = page::check_header(page, id)?;
    let level = page::get_u16(page, page::OFF_LEVEL);
    match ty {
        PageType::Leaf if level != 0 => {
            return Err(NodeError::BadLevel {
                page: id,
                level,
                kind: "leaf",
            })
        }
        PageType::Inner if level == 0 || level > MAX_LEVEL => {
            return Err(NodeError::BadLevel {
                page: id,
                level,
                kind: "inner node",
            })
        }
        PageType::Leaf | PageType::Inner => {}
        other => {
            return Err(NodeError::NotANode {
                page: id,
                found: other,
            })
        }
    }
    let count = page::get_u16(page, page::OFF_COUNT) as usize;
    let data_start = page::get_u32(page, page::OFF_DATA_START) as usize;
    let frag = page::get_u32(page, page::OFF_FRAG) as usize;
    let slots_end = slot_pos(count);
    if slots_end > data_start || data_start > page.len() || frag > page.len() - data_start {
        return Err(NodeError::BadSpace {
            page: id,
            count,
            slots_end,
            data_start,
            frag,
            page_size: page.len(),
        });
    }
    Ok(())
}

/// Validates a whole node (header, slots, records, order, space accounting). Never panics,
/// whatever the bytes.
pub fn check(page: &[u8]) -> Result<(), NodeError> {
    Node { buf: page }.check()
}

/// Whether `right` can be merged into `left` (both valid nodes of the same kind and level);
/// `sep` is the parent's separator between them, pulled down for inner nodes, ignored for
/// leaves.
pub fn fits_merged(left: &[u8], right: &[u8], sep: &[u8]) -> bool {
    match (NodeRef::new(left), NodeRef::new(right)) {
        (Ok(l), Ok(r)) => l.fits_merge(&r, sep),
        _ => false,
    }
}

/// The head skip for keys that share `shared` bytes: all of them when they fill a head or
/// more (every head taken from the start would tie), else none. A shorter prefix leaves the
/// heads from the start telling keys apart in most steps, and a skip would only add the
/// check of the searched key's prefix to every search.
fn useful_skip(shared: usize) -> usize {
    if shared >= HEAD_BYTES {
        shared.min(u16::MAX as usize)
    } else {
        0
    }
}

/// How many bytes `a` and `b` begin with in common.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The shortest key `s` with `left < s <= right` (a prefix of `right`): the leaf separator.
pub fn shortest_separator<'k>(left: &[u8], right: &'k [u8]) -> &'k [u8] {
    debug_assert!(left < right, "separator of unordered keys");
    let common = common_prefix_len(left, right);
    // `left < right` and `right` is not a prefix of `left`, so `right` has a byte at `common`.
    &right[..(common + 1).min(right.len())]
}

impl<'a> NodeRef<'a> {
    /// A node view over a page, after an O(1) check of its header.
    pub fn new(page: &'a [u8]) -> Result<NodeRef<'a>, NodeError> {
        check_node_header(page)?;
        Ok(Node { buf: page })
    }
}

impl<'a> NodeMut<'a> {
    /// A changeable node view over a page that holds a node.
    ///
    /// # Panics
    /// If the header is not a valid node header: pages from disk go through `page::verify` and
    /// `NodeRef::new` first; a bad header here is a bug.
    pub fn new(page: &'a mut [u8]) -> NodeMut<'a> {
        if let Err(e) = check_node_header(page) {
            panic!("NodeMut over an invalid node: {e}");
        }
        Node { buf: page }
    }

    /// Formats `page` as an empty leaf (clearing it; page id and LSN become 0).
    pub fn init_leaf(page: &mut [u8]) {
        init(page, PageType::Leaf, 0, 0);
    }

    /// Formats `page` as an inner node at `level` (>= 1) with no separators and `upper` as its
    /// only child (clearing it; page id and LSN become 0).
    pub fn init_inner(page: &mut [u8], level: u16, upper: u64) {
        assert!(
            (1..=MAX_LEVEL).contains(&level),
            "inner node level {level} out of 1..={MAX_LEVEL}"
        );
        init(page, PageType::Inner, level, upper);
    }
}

fn init(page: &mut [u8], ty: PageType, level: u16, link: u64) {
    page::init(page, ty);
    page::put_u16(page, page::OFF_LEVEL, level);
    page::put_u32(page, page::OFF_DATA_START, page.len() as u32);
    page::put_u64(page, page::OFF_LINK, link);
}

/// Reading.
impl<B: AsRef<[u8]>> Node<B> {
    #[inline]
    fn page(&self) -> &[u8] {
        self.buf.as_ref()
    }

    pub fn page_size(&self) -> usize {
        self.page().len()
    }

    /// The page id in the header (set by `seal`; 0 for a page not yet written).
    pub fn page_id(&self) -> u64 {
        page::page_id(self.page())
    }

    /// Number of records (keys).
    #[inline]
    pub fn count(&self) -> usize {
        page::get_u16(self.page(), page::OFF_COUNT) as usize
    }

    /// 0 for leaves; the height above the leaves for inner nodes.
    pub fn level(&self) -> u16 {
        page::get_u16(self.page(), page::OFF_LEVEL)
    }

    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.page()[page::OFF_TYPE] == PageType::Leaf as u8
    }

    #[inline]
    pub fn is_inner(&self) -> bool {
        self.page()[page::OFF_TYPE] == PageType::Inner as u8
    }

    #[inline]
    fn data_start(&self) -> usize {
        page::get_u32(self.page(), page::OFF_DATA_START) as usize
    }

    #[inline]
    fn frag(&self) -> usize {
        page::get_u32(self.page(), page::OFF_FRAG) as usize
    }

    /// The bytes every key of the node begins with, which the slots' heads leave out.
    #[inline]
    pub fn head_skip(&self) -> usize {
        page::get_u16(self.page(), page::OFF_HEAD_SKIP) as usize
    }

    #[inline]
    fn slot(&self, i: usize) -> Slot {
        debug_assert!(i < self.count(), "slot {i} of {}", self.count());
        let p = self.page();
        let at = slot_pos(i);
        Slot {
            offset: page::get_u16(p, at) as usize,
            key_len: page::get_u16(p, at + 2) as usize,
            value_len: page::get_u16(p, at + 4) as usize,
        }
    }

    /// The key of slot `i` (< `count()`).
    #[inline]
    pub fn key(&self, i: usize) -> &[u8] {
        let s = self.slot(i);
        &self.page()[s.offset..s.offset + s.key_len]
    }

    /// The value of slot `i` (< `count()`); for inner nodes the child id's 8 bytes.
    #[inline]
    pub fn value(&self, i: usize) -> &[u8] {
        let s = self.slot(i);
        let at = s.offset + s.key_len;
        &self.page()[at..at + s.value_len]
    }

    /// The record's (key, value) pairs in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> + '_ {
        (0..self.count()).map(move |i| (self.key(i), self.value(i)))
    }

    /// Binary search: `Ok(slot)` holding `key`, or `Err(slot)` where it would be inserted.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let skip = self.head_skip();
        let count = self.count();
        if skip == 0 || count == 0 {
            return self.search_rest(key, 0);
        }
        if key.len() < skip {
            // Shorter than the prefix every key begins with: before all of them, unless a
            // byte of it is greater.
            return match key.cmp(&self.key(0)[..skip]) {
                Ordering::Greater => Err(count),
                _ => Err(0),
            };
        }
        // Searched as if the key had the prefix, then checked against the prefix of the slot
        // it lands on (every key has the same one): that record is the one the caller reads
        // next (a value, a child), so the check costs no other cache line.
        let found = self.search_rest(&key[skip..], skip);
        let witness = match found {
            Ok(at) => at,
            Err(at) => at.min(count - 1),
        };
        match compare_same_length(&key[..skip], &self.key(witness)[..skip]) {
            Ordering::Equal => found,
            Ordering::Less => Err(0),
            Ordering::Greater => Err(count),
        }
    }

    /// The binary search of the keys' rests after their first `skip` bytes for `rest`.
    #[inline]
    fn search_rest(&self, rest: &[u8], skip: usize) -> Result<usize, usize> {
        let probe = KeyProbe::new(rest);
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = slot_pos(mid);
            let p = self.page();
            let head = page::get_u64(p, at + SLOT_HEAD);
            let key_len = page::get_u16(p, at + 2) as usize;
            match probe.order_of_head(head, key_len - skip, || &self.key(mid)[skip..]) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// The first slot whose key is >= `key` (`count()` if none).
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.search(key).unwrap_or_else(|i| i)
    }

    /// Inner nodes: child `i` for `i < count()`, the upper child for `i == count()`.
    pub fn child_at(&self, i: usize) -> u64 {
        debug_assert!(self.is_inner(), "child_at on a leaf");
        assert!(
            i <= self.count(),
            "child {i} of {} separators",
            self.count()
        );
        if i == self.count() {
            return self.upper();
        }
        let v = self.value(i);
        debug_assert_eq!(v.len(), CHILD_SIZE);
        u64::from_le_bytes(v.try_into().expect("child id is 8 bytes"))
    }

    /// Inner nodes: the upper (rightmost) child, for keys >= the last separator.
    pub fn upper(&self) -> u64 {
        debug_assert!(self.is_inner(), "upper on a leaf");
        page::get_u64(self.page(), page::OFF_LINK)
    }

    /// Inner nodes: the index (0..=count) of the child whose range holds `key`: the number of
    /// separators <= `key`.
    pub fn child_index(&self, key: &[u8]) -> usize {
        debug_assert!(self.is_inner(), "child_index on a leaf");
        match self.search(key) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    #[cfg(any(test, feature = "__internal"))]
    /// Inner nodes: the child page whose range holds `key`.
    pub fn child_for(&self, key: &[u8]) -> u64 {
        self.child_at(self.child_index(key))
    }

    /// Bytes for records and slots in an empty node.
    pub fn capacity(&self) -> usize {
        self.page_size() - HEADER_SIZE
    }

    /// Free bytes, fragmented ones included (what an insert can use after compaction).
    pub fn free_space(&self) -> usize {
        self.contiguous_free() + self.frag()
    }

    /// Free bytes between the slot array and the records (usable without compaction).
    pub fn contiguous_free(&self) -> usize {
        self.data_start() - slot_pos(self.count())
    }

    /// Bytes used by slots and live records.
    pub fn used_space(&self) -> usize {
        self.capacity() - self.free_space()
    }

    /// `used_space() / capacity()`, in 0..=1.
    pub fn fill(&self) -> f64 {
        self.used_space() as f64 / self.capacity() as f64
    }

    /// Whether a new record `key`/`value` fits (after compaction).
    pub fn fits_insert(&self, key: &[u8], value: &[u8]) -> bool {
        record_cost(key.len(), value.len()) <= self.free_space()
    }

    /// Whether `upsert(key, value)` would succeed.
    pub fn fits_upsert(&self, key: &[u8], value: &[u8]) -> bool {
        match self.search(key) {
            Ok(i) => {
                let old = self.slot(i).value_len;
                value.len() <= old || value.len() - old <= self.free_space()
            }
            Err(_) => self.fits_insert(key, value),
        }
    }

    /// Inner nodes: whether `insert_split` with this separator would succeed.
    pub fn fits_separator(&self, sep: &[u8]) -> bool {
        record_cost(sep.len(), CHILD_SIZE) <= self.free_space()
    }

    /// Whether `right` (same kind and level) can be merged into this node.
    pub fn fits_merge<R: AsRef<[u8]>>(&self, right: &Node<R>, sep: &[u8]) -> bool {
        if self.page_size() != right.page_size()
            || self.is_leaf() != right.is_leaf()
            || self.level() != right.level()
        {
            return false;
        }
        let pulled = if self.is_inner() {
            record_cost(sep.len(), CHILD_SIZE)
        } else {
            0
        };
        self.used_space() + right.used_space() + pulled <= self.capacity()
    }

    /// Validates the whole node: header, slots within bounds, records inside the record area
    /// and not overlapping, keys strictly increasing, inner values 8 bytes, and live bytes +
    /// fragmented bytes = record area. Returns the first violation; never panics.
    pub fn check(&self) -> Result<(), NodeError> {
        let p = self.page();
        check_node_header(p)?;
        let id = id_of(p);
        let (page_size, data_start) = (p.len(), self.data_start());
        let inner = self.is_inner();
        // (start, end, slot) of every non-empty record, to find overlaps.
        let mut ranges = Vec::with_capacity(self.count());
        let mut live = 0;
        for i in 0..self.count() {
            let s = self.slot(i);
            if inner && s.value_len != CHILD_SIZE {
                return Err(NodeError::BadChild {
                    page: id,
                    slot: i,
                    len: s.value_len,
                });
            }
            if s.len() == 0 {
                if s.offset != 0 {
                    return Err(NodeError::BadEmptyRecord {
                        page: id,
                        slot: i,
                        offset: s.offset,
                    });
                }
            } else {
                let end = s.offset + s.len();
                if s.offset < data_start || end > page_size {
                    return Err(NodeError::RecordOutOfBounds {
                        page: id,
                        slot: i,
                        start: s.offset,
                        end,
                        data_start,
                        page_size,
                    });
                }
                ranges.push((s.offset, end, i));
                live += s.len();
            }
            // Both keys are in bounds: slot i-1 passed the checks above already.
            if i > 0 && self.key(i - 1) >= self.key(i) {
                return Err(NodeError::Unsorted { page: id, slot: i });
            }
        }
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            if w[0].1 > w[1].0 {
                return Err(NodeError::Overlap {
                    page: id,
                    a: w[0].2,
                    b: w[1].2,
                });
            }
        }
        let area = page_size - data_start;
        if live + self.frag() != area {
            return Err(NodeError::SpaceMismatch {
                page: id,
                live,
                frag: self.frag(),
                area,
            });
        }
        self.check_heads()
    }

    /// Every key begins with the prefix the heads skip, and every slot's key head matches the
    /// rest of its key (records are in bounds: `check` saw to it).
    fn check_heads(&self) -> Result<(), NodeError> {
        let p = self.page();
        let skip = self.head_skip();
        let prefix = self.iter().next().map_or(&[][..], |(first, _)| first);
        let lacking = (0..self.count()).find(|&i| {
            !self.key(i).starts_with(&prefix[..skip.min(prefix.len())]) || self.key(i).len() < skip
        });
        if let Some(slot) = lacking {
            return Err(NodeError::BadHeadSkip {
                page: id_of(p),
                slot,
                skip,
            });
        }
        for i in 0..self.count() {
            let stored = page::get_u64(p, slot_pos(i) + SLOT_HEAD);
            if stored != key_head(&self.key(i)[skip..]) {
                return Err(NodeError::BadKeyHead {
                    page: id_of(p),
                    slot: i,
                });
            }
        }
        Ok(())
    }

    /// In debug builds, the full check after every change.
    #[inline]
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        if let Err(e) = self.check() {
            panic!("node invariant broken: {e}");
        }
    }
}

/// Changing.
impl<B: AsRef<[u8]> + AsMut<[u8]>> Node<B> {
    #[inline]
    fn page_mut(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    fn set_count(&mut self, n: usize) {
        debug_assert!(n <= u16::MAX as usize);
        page::put_u16(self.page_mut(), page::OFF_COUNT, n as u16);
    }

    fn set_data_start(&mut self, v: usize) {
        page::put_u32(self.page_mut(), page::OFF_DATA_START, v as u32);
    }

    fn set_frag(&mut self, v: usize) {
        page::put_u32(self.page_mut(), page::OFF_FRAG, v as u32);
    }

    /// Writes slot `i` for a record already in place (its head is taken from its key, after
    /// the head skip; a key shorter than the skip is only ever the empty slot of a record
    /// being moved, whose head is written again with it).
    fn write_slot(&mut self, i: usize, s: Slot) {
        let at = slot_pos(i);
        let skip = self.head_skip();
        let p = self.page_mut();
        let key = &p[s.offset..s.offset + s.key_len];
        let head = key.get(skip..).map_or(0, key_head);
        page::put_u16(p, at, s.offset as u16);
        page::put_u16(p, at + 2, s.key_len as u16);
        page::put_u16(p, at + 4, s.value_len as u16);
        page::put_u64(p, at + SLOT_HEAD, head);
    }

    /// Makes the heads skip `skip` bytes (every key must begin with slot 0's first `skip`
    /// bytes), rewriting every slot's head when the skip changes.
    fn set_head_skip(&mut self, skip: usize) {
        if skip == self.head_skip() {
            return;
        }
        assert!(
            skip <= u16::MAX as usize,
            "a head skip fits the header's u16"
        );
        page::put_u16(self.page_mut(), page::OFF_HEAD_SKIP, skip as u16);
        for i in 0..self.count() {
            let slot = self.slot(i);
            self.write_slot(i, slot);
        }
    }

    /// Shortens the head skip to the prefix `key` shares with the node's keys (at least one),
    /// before `key` joins them.
    fn keep_prefix_of(&mut self, key: &[u8]) {
        let skip = self.head_skip();
        if skip == 0 {
            return;
        }
        let shared = common_prefix_len(&self.key(0)[..skip], key);
        if shared < skip {
            self.set_head_skip(useful_skip(shared));
        }
    }

    /// Sets the head skip to the longest prefix the node's keys share: that of its first and
    /// last key, the keys being sorted.
    fn widen_head_skip(&mut self) {
        let n = self.count();
        let shared = match n {
            0 => 0,
            _ => common_prefix_len(self.key(0), self.key(n - 1)),
        };
        self.set_head_skip(useful_skip(shared));
    }

    /// Takes `len` bytes from the low end of the record area (the caller made sure they are
    /// contiguous). Returns their offset; 0 for `len == 0` (empty records take no space).
    fn alloc(&mut self, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        debug_assert!(len <= self.contiguous_free());
        let at = self.data_start() - len;
        self.set_data_start(at);
        at
    }

    /// Gives a record's bytes back: they become fragmented space, unless they are the lowest
    /// record, whose bytes simply rejoin the contiguous free space.
    fn release(&mut self, offset: usize, len: usize) {
        if len == 0 {
            return;
        }
        if offset == self.data_start() {
            self.set_data_start(offset + len);
        } else {
            let f = self.frag() + len;
            self.set_frag(f);
        }
    }

    /// Writes a record into freshly allocated space; returns its slot.
    fn place(&mut self, key: &[u8], value: &[u8]) -> Slot {
        let offset = self.alloc(key.len() + value.len());
        let p = self.page_mut();
        p[offset..offset + key.len()].copy_from_slice(key);
        p[offset + key.len()..offset + key.len() + value.len()].copy_from_slice(value);
        Slot {
            offset,
            key_len: key.len(),
            value_len: value.len(),
        }
    }

    /// Rewrites the record area without holes: records packed against the page end in slot
    /// order, `frag` back to 0.
    pub fn compact(&mut self) {
        self.compact_raw();
        self.widen_head_skip();
        self.debug_check();
    }

    /// `compact` without the debug check, for callers in the middle of a change.
    fn compact_raw(&mut self) {
        let (start, size, n) = (self.data_start(), self.page_size(), self.count());
        // One copy of the record area: simple and obviously right, and compaction is rare
        // (only when an insert finds the contiguous space too small).
        let old = self.page()[start..].to_vec();
        let mut at = size;
        for i in 0..n {
            let s = self.slot(i);
            if s.len() == 0 {
                continue;
            }
            at -= s.len();
            let from = s.offset - start;
            self.page_mut()[at..at + s.len()].copy_from_slice(&old[from..from + s.len()]);
            self.write_slot(i, Slot { offset: at, ..s });
        }
        self.set_data_start(at);
        self.set_frag(0);
    }

    /// Inserts a record at slot `pos`, shifting the slots from `pos` on. The caller keeps the
    /// key order (debug-asserted); inner nodes take 8-byte child ids as values.
    pub fn insert_at(&mut self, pos: usize, key: &[u8], value: &[u8]) -> Result<(), NodeFull> {
        let n = self.count();
        assert!(pos <= n, "insert at slot {pos} of {n}");
        assert!(
            !self.is_inner() || value.len() == CHILD_SIZE,
            "inner value must be a child id"
        );
        debug_assert!(pos == 0 || self.key(pos - 1) < key, "insert out of order");
        debug_assert!(pos == n || key < self.key(pos), "insert out of order");
        let cost = record_cost(key.len(), value.len());
        if cost > self.free_space() {
            return Err(NodeFull);
        }
        if cost > self.contiguous_free() {
            self.compact();
        }
        if n == 0 {
            // A node's first key is its whole prefix; later keys shorten it.
            self.set_head_skip(useful_skip(key.len()));
        } else {
            self.keep_prefix_of(key);
        }
        let slot = self.place(key, value);
        self.page_mut()
            .copy_within(slot_pos(pos)..slot_pos(n), slot_pos(pos + 1));
        self.write_slot(pos, slot);
        self.set_count(n + 1);
        self.debug_check();
        Ok(())
    }

    #[cfg(any(test, feature = "__internal"))]
    /// Leaves: inserts a new key; returns its slot.
    ///
    /// # Panics
    /// If the key is present (use [`Node::upsert`] or [`Node::update`]).
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<usize, NodeFull> {
        debug_assert!(self.is_leaf(), "insert on an inner node: use insert_split");
        match self.search(key) {
            Ok(_) => panic!("insert of a key that is present"),
            Err(pos) => self.insert_at(pos, key, value).map(|()| pos),
        }
    }

    /// Replaces the value of slot `i`: in place when it is not longer, else the record moves
    /// (compacting if needed). On `NodeFull` the node is unchanged.
    pub fn update(&mut self, i: usize, value: &[u8]) -> Result<(), NodeFull> {
        let s = self.slot(i);
        assert!(
            !self.is_inner() || value.len() == CHILD_SIZE,
            "inner value must be a child id"
        );
        if value.len() <= s.value_len {
            self.shrink_in_place(i, s, value);
        } else {
            if value.len() - s.value_len > self.free_space() {
                return Err(NodeFull);
            }
            let key = self.key(i).to_vec();
            // Free the old bytes first, so that compaction can reclaim them.
            self.release(s.offset, s.len());
            self.write_slot(
                i,
                Slot {
                    offset: 0,
                    key_len: 0,
                    value_len: 0,
                },
            );
            if key.len() + value.len() > self.contiguous_free() {
                self.compact_raw(); // slot i is empty and out of order for now: no check
            }
            let slot = self.place(&key, value);
            self.write_slot(i, slot);
        }
        self.debug_check();
        Ok(())
    }

    fn shrink_in_place(&mut self, i: usize, s: Slot, value: &[u8]) {
        let at = s.offset + s.key_len;
        self.page_mut()[at..at + value.len()].copy_from_slice(value);
        let freed = s.value_len - value.len();
        let offset = if s.key_len + value.len() == 0 {
            0 // empty records live at offset 0
        } else {
            s.offset
        };
        if freed > 0 {
            let f = self.frag() + freed;
            self.set_frag(f);
        }
        let slot = Slot {
            offset,
            key_len: s.key_len,
            value_len: value.len(),
        };
        self.write_slot(i, slot);
    }

    /// Leaves: inserts or replaces; returns whether the key was present. On `NodeFull` the
    /// node is unchanged.
    pub fn upsert(&mut self, key: &[u8], value: &[u8]) -> Result<bool, NodeFull> {
        match self.search(key) {
            Ok(i) => self.update(i, value).map(|()| true),
            Err(pos) => self.insert_at(pos, key, value).map(|()| false),
        }
    }

    /// Removes slot `i` (< `count()`).
    pub fn remove(&mut self, i: usize) {
        let n = self.count();
        assert!(i < n, "remove slot {i} of {n}");
        let s = self.slot(i);
        self.release(s.offset, s.len());
        self.page_mut()
            .copy_within(slot_pos(i + 1)..slot_pos(n), slot_pos(i));
        self.set_count(n - 1);
        if n == 1 {
            // Empty: all of the record area is free again, no compaction needed.
            let size = self.page_size();
            self.set_data_start(size);
            self.set_frag(0);
            self.set_head_skip(0);
        }
        self.debug_check();
    }

    /// Inner nodes: sets child `i` (`i == count()`: the upper child).
    pub fn set_child(&mut self, i: usize, child: u64) {
        assert!(self.is_inner(), "set_child on a leaf");
        let n = self.count();
        assert!(i <= n, "child {i} of {n} separators");
        if i == n {
            page::put_u64(self.page_mut(), page::OFF_LINK, child);
        } else {
            let s = self.slot(i);
            page::put_u64(self.page_mut(), s.offset + s.key_len, child);
        }
    }

    /// Inner nodes: records that child `index` split into `left` and `right` at `sep`:
    /// inserts separator `sep` at slot `index` with child `left`, and makes `right` child
    /// `index + 1` (so the old child `index` is replaced; for a new root made by `init_inner(p,
    /// level, right)`, `index` is 0). On `NodeFull` the node is unchanged.
    pub fn insert_split(
        &mut self,
        index: usize,
        sep: &[u8],
        left: u64,
        right: u64,
    ) -> Result<(), NodeFull> {
        assert!(self.is_inner(), "insert_split on a leaf");
        self.insert_at(index, sep, &left.to_le_bytes())?;
        self.set_child(index + 1, right);
        Ok(())
    }

    /// Inner nodes: records that child `left_idx + 1` was merged into child `left_idx`:
    /// removes separator `left_idx`; the merged child takes over the range of both.
    pub fn remove_merged(&mut self, left_idx: usize) {
        assert!(self.is_inner(), "remove_merged on a leaf");
        assert!(left_idx < self.count(), "merge of child {left_idx}");
        let left = self.child_at(left_idx);
        self.set_child(left_idx + 1, left);
        self.remove(left_idx);
    }

    /// Drops slots `m..`, their bytes becoming free space.
    fn truncate(&mut self, m: usize) {
        for i in (m..self.count()).rev() {
            self.remove(i);
        }
    }

    /// The slot where a split cuts: the fewest leading slots holding at least half the bytes,
    /// kept so that both halves get a key (inner: and a separator moves up between them).
    fn split_point(&self) -> usize {
        let n = self.count();
        let cost = |i: usize| record_cost(self.slot(i).key_len, self.slot(i).value_len);
        let total: usize = (0..n).map(cost).sum();
        let (mut m, mut acc) = (0, 0);
        while m < n && 2 * acc < total {
            acc += cost(m);
            m += 1;
        }
        if self.is_leaf() {
            m.clamp(1, n - 1)
        } else {
            m.clamp(1, n - 2)
        }
    }

    /// Splits this node: the upper half by bytes goes to `right` (formatted here as the same
    /// kind and level; its old contents are lost). Returns the separator for the parent:
    /// every key left is `< separator`, every key right is `>= separator`.
    /// - leaf: the shortest prefix of the right's first key above the left's last key;
    /// - inner: the middle separator, removed from both halves (the left's upper child becomes
    ///   its child; the right keeps the old upper child).
    ///
    /// # Panics
    /// With fewer than 2 keys (leaf) or 3 separators (inner): a node that is full with records
    /// of at most `max_record_size` always has at least 4.
    pub fn split_into(&mut self, right: &mut [u8]) -> Vec<u8> {
        let n = self.count();
        let min = if self.is_leaf() { 2 } else { 3 };
        assert!(n >= min, "split of a node with {n} keys");
        assert_eq!(
            right.len(),
            self.page_size(),
            "split into a page of another size"
        );
        let m = self.split_point();
        let sep = if self.is_leaf() {
            NodeMut::init_leaf(right);
            self.move_tail(m, right);
            let sep = shortest_separator(self.key(m - 1), self.key(m)).to_vec();
            self.truncate(m);
            sep
        } else {
            NodeMut::init_inner(right, self.level(), self.upper());
            self.move_tail(m + 1, right);
            let sep = self.key(m).to_vec();
            let middle = self.child_at(m);
            self.truncate(m);
            self.set_child(m, middle);
            sep
        };
        self.widen_head_skip();
        NodeMut::new(right).widen_head_skip();
        self.debug_check();
        Node { buf: &*right }.debug_check();
        sep
    }

    /// Copies slots `from..` to the end of the (empty or lower-keyed) node `right`.
    fn move_tail(&self, from: usize, right: &mut [u8]) {
        let mut r = NodeMut::new(right);
        for i in from..self.count() {
            let at = r.count();
            r.insert_at(at, self.key(i), self.value(i))
                .expect("half a node fits into an empty one");
        }
    }

    /// Appends all of `right` (the next node at the same level, all keys greater) to this
    /// node. For inner nodes `sep` is the parent's separator between the two: it comes down
    /// with this node's upper child, and `right`'s upper child becomes this node's. Leaves
    /// ignore `sep`. On `NodeFull` the node is unchanged.
    pub fn merge_from(&mut self, right: &[u8], sep: &[u8]) -> Result<(), NodeFull> {
        let r = Node { buf: right };
        debug_assert!(
            check_node_header(right).is_ok(),
            "merge from an invalid node"
        );
        assert!(
            self.is_leaf() == r.is_leaf() && self.level() == r.level(),
            "merge of nodes of different kinds"
        );
        if !self.fits_merge(&r, sep) {
            return Err(NodeFull);
        }
        if self.is_inner() {
            let n = self.count();
            let upper = self.upper();
            debug_assert!(
                n == 0 || self.key(n - 1) < sep,
                "separator below the left node"
            );
            debug_assert!(
                r.count() == 0 || sep < r.key(0),
                "separator above the right node"
            );
            self.insert_at(n, sep, &upper.to_le_bytes())?;
            page::put_u64(self.page_mut(), page::OFF_LINK, r.upper());
        }
        for (k, v) in r.iter() {
            let at = self.count();
            self.insert_at(at, k, v)?;
        }
        self.widen_head_skip();
        self.debug_check();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::OFF_FRAG;

    fn leaf(size: usize) -> Vec<u8> {
        let mut p = vec![0u8; size];
        NodeMut::init_leaf(&mut p);
        p
    }

    fn keys(p: &[u8]) -> Vec<Vec<u8>> {
        NodeRef::new(p)
            .unwrap()
            .iter()
            .map(|(k, _)| k.to_vec())
            .collect()
    }

    #[test]
    fn limits() {
        assert_eq!(max_record_size(4096), 990);
        assert_eq!(max_record_size(1024), 222);
        assert_eq!(max_record_size(65536), 16350);
        for size in [1024, 4096, 65536] {
            // MIN_RECORDS_PER_NODE of the largest inner records fit.
            let inner = record_cost(max_record_size(size), CHILD_SIZE);
            assert!(MIN_RECORDS_PER_NODE * inner <= size - HEADER_SIZE);
        }
    }

    #[test]
    fn insert_search_and_order() {
        let mut p = leaf(4096);
        let mut n = NodeMut::new(&mut p);
        for k in [b"m".as_slice(), b"a", b"z", b"", b"ab", b"aa"] {
            n.insert(k, k).unwrap();
        }
        assert_eq!(n.count(), 6);
        assert_eq!(n.search(b"ab"), Ok(3));
        assert_eq!(n.search(b"b"), Err(4));
        assert_eq!(n.value(n.search(b"z").unwrap()), b"z");
        assert_eq!(n.lower_bound(b"zz"), 6);
        n.check().unwrap();
        let ks = keys(&p);
        assert_eq!(
            ks,
            vec![
                b"".to_vec(),
                b"a".to_vec(),
                b"aa".to_vec(),
                b"ab".to_vec(),
                b"m".to_vec(),
                b"z".to_vec()
            ]
        );
    }

    /// Every search of `node` answers as a binary search of its keys would.
    fn assert_searches_as_sorted_keys(node: &NodeRef, probes: &[&[u8]]) {
        let keys: Vec<&[u8]> = node.iter().map(|(k, _)| k).collect();
        for probe in probes.iter().copied().chain(keys.iter().copied()) {
            assert_eq!(node.search(probe), keys.binary_search(&probe), "{probe:?}");
        }
    }

    #[test]
    fn heads_skip_the_prefix_the_keys_share() {
        let mut p = leaf(4096);
        let mut n = NodeMut::new(&mut p);
        for i in (0..60u32).rev() {
            n.insert(format!("key:{:012}", i * 7).as_bytes(), b"v")
                .unwrap();
        }
        // "key:000000000000" ..= "key:000000000413" share "key:000000000".
        assert_eq!(n.head_skip(), 13);
        n.check().unwrap();
        let probes: [&[u8]; 9] = [
            b"",
            b"a",
            b"z",
            b"key:",
            b"key:1",
            b"key:000000000",
            b"key:0000000000000",
            b"key:000000000001",
            b"key:000000000999",
        ];
        assert_searches_as_sorted_keys(&NodeRef::new(n.page()).unwrap(), &probes);
        // A key without the prefix shortens it, and every head is written again.
        n.insert(b"key:00000001", b"v").unwrap();
        assert_eq!(n.head_skip(), 11);
        n.check().unwrap();
        assert_searches_as_sorted_keys(&NodeRef::new(n.page()).unwrap(), &probes);
        // A prefix shorter than a head is not skipped.
        n.insert(b"kex", b"v").unwrap();
        assert_eq!(n.head_skip(), 0);
        n.check().unwrap();
        assert_searches_as_sorted_keys(&NodeRef::new(n.page()).unwrap(), &probes);
        // A split gives each half the longest prefix its keys share.
        let mut right = vec![0u8; 4096];
        n.split_into(&mut right);
        let (left, right) = (
            NodeRef::new(n.page()).unwrap(),
            NodeRef::new(&right).unwrap(),
        );
        assert_eq!((left.head_skip(), right.head_skip()), (0, 11));
        right.check().unwrap();
        assert_searches_as_sorted_keys(&right, &probes);
        assert_searches_as_sorted_keys(&left, &probes);
        // An empty node skips nothing.
        while n.count() > 0 {
            n.remove(0);
        }
        assert_eq!(n.head_skip(), 0);
    }

    #[test]
    fn a_corrupt_head_skip_is_found() {
        let mut p = leaf(1024);
        let mut n = NodeMut::new(&mut p);
        for key in [&b"user:00017"[..], b"user:00020", b"user:00031"] {
            n.insert(key, b"v").unwrap();
        }
        assert_eq!(n.head_skip(), 8);
        page::put_u16(&mut p, page::OFF_HEAD_SKIP, 9);
        assert!(matches!(
            check(&p),
            Err(NodeError::BadHeadSkip {
                slot: 1,
                skip: 9,
                ..
            })
        ));
        page::put_u16(&mut p, page::OFF_HEAD_SKIP, 7);
        assert!(matches!(
            check(&p),
            Err(NodeError::BadKeyHead { slot: 0, .. })
        ));
    }

    #[test]
    fn a_page_of_the_previous_format_reads_and_is_written_in_this_one() {
        let mut p = leaf(4096);
        let mut n = NodeMut::new(&mut p);
        for key in [&b"a1"[..], b"b2", b"c3"] {
            n.insert(key, b"v").unwrap();
        }
        // Format 0xB2: no head skip (the bytes were reserved, zero), heads of whole keys.
        n.set_head_skip(0);
        p[page::OFF_MAGIC] = page::FORMAT_MAGIC_B2;
        page::seal(&mut p, 7);
        assert_eq!(p[page::OFF_MAGIC], page::FORMAT_MAGIC);
        p[page::OFF_MAGIC] = page::FORMAT_MAGIC_B2;
        let sum = page::compute_checksum(&p);
        page::put_u32(&mut p, page::OFF_CHECKSUM, sum);
        page::verify(&p, 7).unwrap();
        let node = NodeRef::new(&p).unwrap();
        node.check().unwrap();
        assert_eq!(node.search(b"b2"), Ok(1));
    }

    #[test]
    fn update_grow_shrink_and_compaction() {
        let mut p = leaf(1024);
        let mut n = NodeMut::new(&mut p);
        let mut i = 0u32;
        while n.insert(&i.to_be_bytes(), &[1u8; 20]).is_ok() {
            i += 1;
        }
        let full = n.count();
        assert!(n.free_space() < record_cost(4, 20));
        // Shrink every other value: space is fragmented, then a grow needs compaction.
        for s in (0..full).step_by(2) {
            n.update(s, &[2u8; 2]).unwrap();
        }
        assert!(n.frag() > 0);
        n.update(1, &[3u8; 60]).unwrap();
        assert_eq!(n.value(1), &[3u8; 60]);
        assert_eq!(n.value(0), &[2u8; 2]);
        assert_eq!(n.count(), full);
        n.check().unwrap();
        // A grow beyond the free space fails and changes nothing.
        let before = n.page().to_vec();
        let big = vec![9u8; n.free_space() + 21];
        assert_eq!(n.update(3, &big), Err(NodeFull));
        assert_eq!(n.page(), &before[..]);
    }

    #[test]
    fn remove_reclaims_space() {
        let mut p = leaf(1024);
        let mut n = NodeMut::new(&mut p);
        let empty = n.free_space();
        for i in 0..10u8 {
            n.insert(&[i], &[i; 30]).unwrap();
        }
        n.remove(3);
        n.remove(0);
        assert_eq!(n.count(), 8);
        assert_eq!(n.search(&[3]), Err(2));
        while n.count() > 0 {
            n.remove(n.count() / 2);
        }
        assert_eq!(n.free_space(), empty);
        assert_eq!(n.contiguous_free(), empty);
    }

    #[test]
    fn empty_key_and_value_take_no_bytes() {
        let mut p = leaf(65536);
        let mut n = NodeMut::new(&mut p);
        n.insert(b"", b"").unwrap();
        n.insert(b"k", b"").unwrap();
        assert_eq!(n.used_space(), 2 * SLOT_SIZE + 1);
        assert_eq!(n.key(0), b"");
        n.update(0, b"grown").unwrap();
        n.update(0, b"").unwrap();
        n.check().unwrap();
    }

    fn inner(size: usize, seps: &[&[u8]], children: &[u64]) -> Vec<u8> {
        assert_eq!(children.len(), seps.len() + 1);
        let mut p = vec![0u8; size];
        NodeMut::init_inner(&mut p, 1, *children.last().unwrap());
        let mut n = NodeMut::new(&mut p);
        for (i, s) in seps.iter().enumerate() {
            n.insert_at(i, s, &children[i].to_le_bytes()).unwrap();
        }
        p
    }

    #[test]
    fn inner_routing() {
        let p = inner(4096, &[b"d", b"m", b"t"], &[10, 11, 12, 13]);
        let n = NodeRef::new(&p).unwrap();
        assert_eq!(n.child_for(b""), 10);
        assert_eq!(n.child_for(b"c"), 10);
        assert_eq!(n.child_for(b"d"), 11); // equal goes right
        assert_eq!(n.child_for(b"lzz"), 11);
        assert_eq!(n.child_for(b"m"), 12);
        assert_eq!(n.child_for(b"t"), 13);
        assert_eq!(n.child_for(b"zz"), 13);
        assert_eq!(n.upper(), 13);
        n.check().unwrap();
    }

    #[test]
    fn insert_split_and_remove_merged() {
        let mut p = inner(4096, &[b"m"], &[1, 2]);
        let mut n = NodeMut::new(&mut p);
        // Child 1 (page 2, keys >= "m") splits at "t" into pages 2 and 3.
        n.insert_split(1, b"t", 2, 3).unwrap();
        assert_eq!((n.child_at(0), n.child_at(1), n.child_at(2)), (1, 2, 3));
        // Child 0 splits at "c" into 1 and 4.
        n.insert_split(0, b"c", 1, 4).unwrap();
        assert_eq!(
            (0..=3).map(|i| n.child_at(i)).collect::<Vec<_>>(),
            vec![1, 4, 2, 3]
        );
        // Page 2 merges into page 4.
        n.remove_merged(1);
        assert_eq!(
            (0..=2).map(|i| n.child_at(i)).collect::<Vec<_>>(),
            vec![1, 4, 3]
        );
        assert_eq!(n.key(1), b"t");
        assert_eq!(n.child_for(b"p"), 4);
        // A root with one separator collapses to count 0: its only child is the upper one.
        let mut r = inner(4096, &[b"m"], &[1, 2]);
        let mut rn = NodeMut::new(&mut r);
        rn.remove_merged(0);
        assert_eq!((rn.count(), rn.child_at(0)), (0, 1));
        // A new root over a split root.
        let mut q = vec![0u8; 4096];
        NodeMut::init_inner(&mut q, 2, 8);
        NodeMut::new(&mut q).insert_split(0, b"k", 7, 8).unwrap();
        let qn = NodeRef::new(&q).unwrap();
        assert_eq!((qn.child_for(b"a"), qn.child_for(b"k")), (7, 8));
    }

    #[test]
    fn leaf_split_uses_shortest_separator() {
        let mut p = leaf(1024);
        let mut n = NodeMut::new(&mut p);
        // 18 records of 15 + 20 bytes and a slot each nearly fill a 1 KiB leaf.
        for i in 0..18u8 {
            let k = [b"prefix-".as_slice(), &[b'a' + i], b"-suffix"].concat();
            n.insert(&k, &[i; 20]).unwrap();
        }
        let mut r = vec![0u8; 1024];
        let sep = n.split_into(&mut r);
        let (l, rn) = (NodeRef::new(&p).unwrap(), NodeRef::new(&r).unwrap());
        assert_eq!(l.count() + rn.count(), 18);
        assert_eq!(
            sep,
            [b"prefix-".as_slice(), &[b'a' + l.count() as u8]].concat()
        );
        assert!(l.key(l.count() - 1) < &sep[..] && &sep[..] <= rn.key(0));
    }

    #[test]
    fn inner_split_moves_the_middle_up() {
        let seps: Vec<Vec<u8>> = (0..9u8).map(|i| vec![b'a' + i; 3]).collect();
        let sep_refs: Vec<&[u8]> = seps.iter().map(|s| s.as_slice()).collect();
        let children: Vec<u64> = (100..110).collect();
        let mut p = inner(1024, &sep_refs, &children);
        let mut r = vec![0u8; 1024];
        let up = NodeMut::new(&mut p).split_into(&mut r);
        let (l, rn) = (NodeRef::new(&p).unwrap(), NodeRef::new(&r).unwrap());
        let m = l.count();
        assert_eq!(up, seps[m]);
        assert_eq!(m + 1 + rn.count(), 9);
        assert_eq!(l.upper(), children[m]);
        assert_eq!(rn.upper(), 109);
        assert_eq!(rn.child_at(0), children[m + 1]);
        assert_eq!(rn.level(), 1);
        // And back.
        assert!(fits_merged(&p, &r, &up));
        NodeMut::new(&mut p).merge_from(&r, &up).unwrap();
        let n = NodeRef::new(&p).unwrap();
        let merged: Vec<Vec<u8>> = n.iter().map(|(k, _)| k.to_vec()).collect();
        assert_eq!(merged, seps);
        let kids: Vec<u64> = (0..=n.count()).map(|i| n.child_at(i)).collect();
        assert_eq!(kids, children);
    }

    #[test]
    fn check_finds_corruption() {
        let mut p = leaf(1024);
        {
            let mut n = NodeMut::new(&mut p);
            for i in 0..5u8 {
                n.insert(&[i], &[i; 10]).unwrap();
            }
        }
        crate::page::seal(&mut p, 77);
        check(&p).unwrap();

        // Slots 1 and 2 swapped: unsorted.
        let mut u = p.clone();
        let (a, b) = (slot_pos(1), slot_pos(2));
        let s1: Vec<u8> = u[a..a + SLOT_SIZE].to_vec();
        u.copy_within(b..b + SLOT_SIZE, a);
        u[b..b + SLOT_SIZE].copy_from_slice(&s1);
        let e = check(&u).unwrap_err();
        assert_eq!(e, NodeError::Unsorted { page: 77, slot: 2 });
        assert!(e.to_string().starts_with("page 77"));

        let mut o = p.clone();
        let off = page::get_u16(&o, slot_pos(2));
        page::put_u16(&mut o, slot_pos(1), off + 1); // slot 1 overlaps slot 2
        assert!(matches!(
            check(&o),
            Err(NodeError::Overlap { .. } | NodeError::Unsorted { .. })
        ));

        let mut b = p.clone();
        page::put_u16(&mut b, slot_pos(4), 1020); // past the end
        assert!(matches!(
            check(&b),
            Err(NodeError::RecordOutOfBounds { slot: 4, .. })
        ));

        let mut f = p.clone();
        page::put_u32(&mut f, OFF_FRAG, 3);
        assert!(matches!(check(&f), Err(NodeError::SpaceMismatch { .. })));

        let mut c = p.clone();
        page::put_u16(&mut c, page::OFF_COUNT, 200);
        assert!(matches!(check(&c), Err(NodeError::BadSpace { .. })));

        let mut t = p.clone();
        t[page::OFF_TYPE] = PageType::Meta as u8;
        assert!(matches!(check(&t), Err(NodeError::NotANode { .. })));

        assert!(matches!(
            check(&[0u8; 4096]),
            Err(NodeError::Page(PageError::BadMagic { .. }))
        ));
        assert!(matches!(
            check(&[]),
            Err(NodeError::Page(PageError::BadSize { .. }))
        ));
    }
}
