//! The page table: page id -> slot, an open-addressing hash table sized once for the pool.
//!
//! Every pin starts here, so a lookup should cost one cache line. A general-purpose map
//! (hashbrown's SwissTable) reads a line of control bytes and then the line of the entry; this
//! table keeps `(page id, slot, frame hint)` entries of 16 bytes in one array, four per line,
//! filled to at
//! most half (its capacity is twice the pool's frames, rounded up to a power of two, and the
//! pool never holds more pages than frames), so a lookup mostly reads the one line its hash
//! names. Page ids are dense integers: Fibonacci hashing (one multiply, the top bits) spreads
//! neighbours across the table. Collisions probe linearly; a removal shifts the entries that
//! follow back (no tombstones), so probe runs stay as short as the load allows.
//!
//! The frame hint is the index, in the runtime's buffer pool, of the frame the page was last
//! seen resident in. A pin reads the entry, then the slot's cells (pin count, frame address),
//! then the frame's header: in a pool larger than the caches, three misses one after the
//! other. With the hint, the header's prefetch starts as soon as the entry is read, beside
//! the cells' miss. It is only ever prefetched, never read through: a stale hint (the page
//! moved to another frame) costs one useless prefetch and is corrected by the pin
//! (`BufferManager::try_fix`).
//!
//! Readers on other threads probe the same entries (`optimistic.rs`): they are atomics, the
//! shard alone changes them, and what a reader finds is checked against the slot it names.

use super::PageId;
use ringdb_io::HugeSlice;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An empty entry's page id (no page has it: ids are file offsets / page size).
const EMPTY: PageId = PageId::MAX;
/// Fibonacci hashing's multiplier: 2^64 / the golden ratio, odd.
const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

/// A frame hint that names no frame.
pub(super) const NO_FRAME: u32 = u32::MAX;

/// One entry: a page, and its slot (low half) and frame hint (high half). Atomics, so that
/// readers on other threads may probe the table while the shard changes it (see
/// [`Entries::lookup`]); the shard's own loads and stores are plain (`Relaxed`).
#[repr(C, align(16))]
struct Entry {
    pid: AtomicU64,
    slot_and_hint: AtomicU64,
}

impl Entry {
    fn empty() -> Entry {
        Entry {
            pid: AtomicU64::new(EMPTY),
            slot_and_hint: AtomicU64::new(pack(0, NO_FRAME)),
        }
    }

    #[inline]
    fn pid(&self) -> PageId {
        self.pid.load(Ordering::Relaxed)
    }

    #[inline]
    fn slot_and_hint(&self) -> (usize, u32) {
        let word = self.slot_and_hint.load(Ordering::Relaxed);
        ((word & u64::from(u32::MAX)) as usize, (word >> 32) as u32)
    }

    /// Copies `other`'s contents into this entry (the shard's backward shift).
    fn set_from(&self, other: &Entry) {
        self.store(other.pid(), other.slot_and_hint.load(Ordering::Relaxed));
    }

    fn store(&self, pid: PageId, slot_and_hint: u64) {
        self.pid.store(pid, Ordering::Relaxed);
        self.slot_and_hint.store(slot_and_hint, Ordering::Relaxed);
    }
}

/// A slot and a frame hint in one word.
fn pack(slot: u32, hint: u32) -> u64 {
    u64::from(slot) | (u64::from(hint) << 32)
}

/// The table's entries: shared with readers on other threads (`Send + Sync`), changed only
/// by the shard through [`PageTable`].
pub(crate) struct Entries {
    /// On huge pages once large (every lookup lands somewhere random in it).
    entries: HugeSlice<Entry>,
    /// `64 - log2(entries.len())`: a hash's top bits index the table.
    shift: u32,
}

impl Entries {
    /// Where `pid`'s probe starts.
    #[inline]
    fn home(&self, pid: PageId) -> usize {
        (pid.wrapping_mul(FIBONACCI) >> self.shift) as usize
    }

    #[inline]
    fn next(&self, index: usize) -> usize {
        (index + 1) & (self.entries.len() - 1)
    }

    /// The index holding `pid`, or `None`. Bounded: the table always has empty entries (and
    /// a reader on another thread stops after one lap whatever it finds).
    #[inline]
    fn find(&self, pid: PageId) -> Option<usize> {
        let mut index = self.home(pid);
        for _ in 0..self.entries.len() {
            let found = self.entries[index].pid();
            if found == pid {
                return Some(index);
            }
            if found == EMPTY {
                return None;
            }
            index = self.next(index);
        }
        None
    }

    /// `pid`'s slot and frame hint as a reader on another thread sees them, while the shard
    /// may be changing the table: hints, not facts. It may miss a page that is there (an
    /// entry moving back under a removal) or name a slot that no longer holds `pid` (the
    /// entry's two words read from two moments): the caller checks the slot's own page id
    /// under its version (`SlotCells::snapshot`) and treats a miss as "not resident".
    #[inline]
    pub(crate) fn lookup(&self, pid: PageId) -> Option<(usize, u32)> {
        self.find(pid).map(|i| self.entries[i].slot_and_hint())
    }
}

/// Page id -> slot for at most `max_len` pages (see the module documentation): the shard's
/// side of [`Entries`].
pub(super) struct PageTable {
    shared: Arc<Entries>,
    len: usize,
    max_len: usize,
}

impl PageTable {
    /// A table for up to `max_len` pages.
    pub(super) fn with_max_len(max_len: usize) -> PageTable {
        assert!(
            max_len < u32::MAX as usize,
            "a page table for {max_len} slots (at most 2^32 - 1)"
        );
        let capacity = (2 * max_len).next_power_of_two().max(16);
        PageTable {
            shared: Arc::new(Entries {
                entries: HugeSlice::from_fn(capacity, |_| Entry::empty()),
                shift: 64 - capacity.trailing_zeros(),
            }),
            len: 0,
            max_len,
        }
    }

    /// The entries, for readers on other threads.
    pub(super) fn entries(&self) -> Arc<Entries> {
        self.shared.clone()
    }

    /// Pages in the table.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// `pid`'s slot.
    #[inline]
    pub(super) fn get(&self, pid: &PageId) -> Option<usize> {
        let t = &self.shared;
        t.find(*pid).map(|i| t.entries[i].slot_and_hint().0)
    }

    /// Starts fetching the line of the entry where `pid`'s probe starts (see
    /// `BufferManager::prefetch_pin`).
    #[inline]
    pub(super) fn prefetch_home(&self, pid: PageId) {
        let t = &self.shared;
        super::guard::prefetch_line((&t.entries[t.home(pid)] as *const Entry).cast());
    }

    /// `pid`'s slot and frame hint ([`NO_FRAME`] until one is set).
    #[inline]
    pub(super) fn get_with_hint(&self, pid: PageId) -> Option<(usize, u32)> {
        let t = &self.shared;
        t.find(pid).map(|i| t.entries[i].slot_and_hint())
    }

    /// Records that `pid` is resident in pool frame `frame`; nothing if `pid` is not in the
    /// table.
    pub(super) fn set_frame_hint(&mut self, pid: PageId, frame: u32) {
        let t = &self.shared;
        if let Some(i) = t.find(pid) {
            let (slot, _) = t.entries[i].slot_and_hint();
            let word = pack(slot as u32, frame);
            t.entries[i].slot_and_hint.store(word, Ordering::Relaxed);
        }
    }

    /// Whether `pid` is in the table.
    pub(super) fn contains_key(&self, pid: &PageId) -> bool {
        self.shared.find(*pid).is_some()
    }

    /// Adds `pid` -> `slot`; `pid` must not be in the table yet.
    pub(super) fn insert(&mut self, pid: PageId, slot: usize) {
        assert_ne!(pid, EMPTY, "page id {pid} is the table's empty marker");
        assert!(
            slot < NO_FRAME as usize,
            "slot {slot} does not fit an entry"
        );
        assert!(
            self.len < self.max_len,
            "page table holds {} pages already (as many as the pool's frames)",
            self.len
        );
        let t = &self.shared;
        let mut index = t.home(pid);
        for _ in 0..t.entries.len() {
            let e = &t.entries[index];
            assert_ne!(
                e.pid(),
                pid,
                "page {pid} inserted twice into the page table"
            );
            if e.pid() == EMPTY {
                // The slot first: a reader that finds the page id finds its slot with it.
                e.slot_and_hint
                    .store(pack(slot as u32, NO_FRAME), Ordering::Relaxed);
                e.pid.store(pid, Ordering::Release);
                self.len += 1;
                return;
            }
            index = t.next(index);
        }
        unreachable!("a page table at most half full has an empty entry")
    }

    /// Removes `pid`, returning its slot.
    pub(super) fn remove(&mut self, pid: &PageId) -> Option<usize> {
        let t = &self.shared;
        let mut hole = t.find(*pid)?;
        let slot = t.entries[hole].slot_and_hint().0;
        self.len -= 1;
        // Backward shift: move up every entry of the run after the hole whose home does not
        // lie strictly between the hole and it (cyclically), so every entry stays reachable.
        let mask = t.entries.len() - 1;
        let mut index = t.next(hole);
        for _ in 0..t.entries.len() {
            let e = &t.entries[index];
            if e.pid() == EMPTY {
                break;
            }
            let home = t.home(e.pid());
            let distance_from_home = index.wrapping_sub(home) & mask;
            let distance_from_hole = index.wrapping_sub(hole) & mask;
            if distance_from_home >= distance_from_hole {
                t.entries[hole].set_from(e);
                hole = index;
            }
            index = t.next(index);
        }
        t.entries[hole].store(EMPTY, pack(0, NO_FRAME));
        Some(slot)
    }

    /// Every `(page id, slot)`, in table order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (PageId, usize)> + '_ {
        self.shared
            .entries
            .iter()
            .filter(|e| e.pid() != EMPTY)
            .map(|e| (e.pid(), e.slot_and_hint().0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn entries_are_sixteen_bytes_and_the_table_stays_half_empty() {
        assert_eq!(std::mem::size_of::<Entry>(), 16);
        let t = PageTable::with_max_len(1000);
        assert!(t.shared.entries.len() >= 2000);
        assert!(t.shared.entries.len().is_power_of_two());
    }

    #[test]
    #[should_panic(expected = "as many as the pool's frames")]
    fn refuses_more_pages_than_frames() {
        let mut t = PageTable::with_max_len(2);
        for pid in 0..3 {
            t.insert(pid, pid as usize);
        }
    }

    #[test]
    fn frame_hints_start_empty_and_move_with_their_entries() {
        // Neighbouring ids in a small table collide, so removals shift entries back.
        let mut t = PageTable::with_max_len(8);
        for pid in 0..8 {
            t.insert(pid, pid as usize);
            assert_eq!(t.get_with_hint(pid), Some((pid as usize, NO_FRAME)));
            t.set_frame_hint(pid, 100 + pid as u32);
        }
        t.remove(&3);
        t.set_frame_hint(3, 7); // not in the table: nothing
        assert_eq!(t.get_with_hint(3), None);
        for pid in (0..8).filter(|&p| p != 3) {
            assert_eq!(t.get_with_hint(pid), Some((pid as usize, 100 + pid as u32)));
        }
        // A page inserted again starts without a hint.
        t.insert(3, 5);
        assert_eq!(t.get_with_hint(3), Some((5, NO_FRAME)));
    }

    #[derive(Clone, Debug)]
    enum Step {
        Insert(PageId),
        Remove(PageId),
    }

    proptest! {
        /// Any mix of inserts and removes (ids from a small range, so collisions, runs that
        /// wrap around the end and removals inside runs are common) agrees with a HashMap.
        #[test]
        fn agrees_with_a_hash_map(steps in proptest::collection::vec(
            prop_oneof![(0u64..64).prop_map(Step::Insert), (0u64..64).prop_map(Step::Remove)],
            0..400,
        )) {
            let max_len = 24;
            let mut table = PageTable::with_max_len(max_len);
            let mut model: HashMap<PageId, usize> = HashMap::new();
            for (n, step) in steps.into_iter().enumerate() {
                match step {
                    Step::Insert(pid) if !model.contains_key(&pid) && model.len() < max_len => {
                        table.insert(pid * 1_000_003, n);
                        model.insert(pid, n);
                    }
                    Step::Insert(_) => {}
                    Step::Remove(pid) => {
                        prop_assert_eq!(table.remove(&(pid * 1_000_003)), model.remove(&pid));
                    }
                }
                prop_assert_eq!(table.len(), model.len());
                for pid in 0..64u64 {
                    prop_assert_eq!(table.get(&(pid * 1_000_003)), model.get(&pid).copied());
                }
            }
        }
    }
}
