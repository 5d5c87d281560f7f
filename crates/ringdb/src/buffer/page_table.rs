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

use super::PageId;
use ringdb_io::HugeSlice;

/// An empty entry's page id (no page has it: ids are file offsets / page size).
const EMPTY: PageId = PageId::MAX;
/// Fibonacci hashing's multiplier: 2^64 / the golden ratio, odd.
const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

/// A frame hint that names no frame.
pub(super) const NO_FRAME: u32 = u32::MAX;

/// One entry: a page, its slot and its frame hint.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Entry {
    pid: PageId,
    slot: u32,
    frame_hint: u32,
}

impl Entry {
    const EMPTY: Entry = Entry {
        pid: EMPTY,
        slot: 0,
        frame_hint: NO_FRAME,
    };
}

/// Page id -> slot for at most `max_len` pages (see the module documentation).
pub(super) struct PageTable {
    /// On huge pages once large (every lookup lands somewhere random in it).
    entries: HugeSlice<Entry>,
    /// `64 - log2(entries.len())`: a hash's top bits index the table.
    shift: u32,
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
            entries: HugeSlice::from_fn(capacity, |_| Entry::EMPTY),
            shift: 64 - capacity.trailing_zeros(),
            len: 0,
            max_len,
        }
    }

    /// Pages in the table.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Where `pid`'s probe starts.
    #[inline]
    fn home(&self, pid: PageId) -> usize {
        (pid.wrapping_mul(FIBONACCI) >> self.shift) as usize
    }

    #[inline]
    fn next(&self, index: usize) -> usize {
        (index + 1) & (self.entries.len() - 1)
    }

    /// The index holding `pid`, or `None`. Bounded: the table always has empty entries.
    #[inline]
    fn find(&self, pid: PageId) -> Option<usize> {
        let mut index = self.home(pid);
        for _ in 0..self.entries.len() {
            let e = self.entries[index];
            if e.pid == pid {
                return Some(index);
            }
            if e.pid == EMPTY {
                return None;
            }
            index = self.next(index);
        }
        unreachable!("a page table at most half full has an empty entry")
    }

    /// `pid`'s slot.
    #[inline]
    pub(super) fn get(&self, pid: &PageId) -> Option<usize> {
        self.find(*pid).map(|i| self.entries[i].slot as usize)
    }

    /// `pid`'s slot and frame hint ([`NO_FRAME`] until one is set).
    #[inline]
    pub(super) fn get_with_hint(&self, pid: PageId) -> Option<(usize, u32)> {
        self.find(pid).map(|i| {
            let e = &self.entries[i];
            (e.slot as usize, e.frame_hint)
        })
    }

    /// Records that `pid` is resident in pool frame `frame`; nothing if `pid` is not in the
    /// table.
    pub(super) fn set_frame_hint(&mut self, pid: PageId, frame: u32) {
        if let Some(i) = self.find(pid) {
            self.entries[i].frame_hint = frame;
        }
    }

    /// Whether `pid` is in the table.
    pub(super) fn contains_key(&self, pid: &PageId) -> bool {
        self.find(*pid).is_some()
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
        let mut index = self.home(pid);
        for _ in 0..self.entries.len() {
            let e = &mut self.entries[index];
            assert_ne!(e.pid, pid, "page {pid} inserted twice into the page table");
            if e.pid == EMPTY {
                *e = Entry {
                    pid,
                    slot: slot as u32,
                    frame_hint: NO_FRAME,
                };
                self.len += 1;
                return;
            }
            index = self.next(index);
        }
        unreachable!("a page table at most half full has an empty entry")
    }

    /// Removes `pid`, returning its slot.
    pub(super) fn remove(&mut self, pid: &PageId) -> Option<usize> {
        let mut hole = self.find(*pid)?;
        let slot = self.entries[hole].slot as usize;
        self.len -= 1;
        // Backward shift: move up every entry of the run after the hole whose home does not
        // lie strictly between the hole and it (cyclically), so every entry stays reachable.
        let mut index = self.next(hole);
        for _ in 0..self.entries.len() {
            let e = self.entries[index];
            if e.pid == EMPTY {
                break;
            }
            let home = self.home(e.pid);
            let distance_from_home = index.wrapping_sub(home) & (self.entries.len() - 1);
            let distance_from_hole = index.wrapping_sub(hole) & (self.entries.len() - 1);
            if distance_from_home >= distance_from_hole {
                self.entries[hole] = e;
                hole = index;
            }
            index = self.next(index);
        }
        self.entries[hole] = Entry::EMPTY;
        Some(slot)
    }

    /// Every `(page id, slot)`, in table order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (PageId, usize)> + '_ {
        self.entries
            .iter()
            .filter(|e| e.pid != EMPTY)
            .map(|e| (e.pid, e.slot as usize))
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
        assert!(t.entries.len() >= 2000);
        assert!(t.entries.len().is_power_of_two());
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
