//! One key's lock (its holders and the transactions parked on it) and one scan's range lock:
//! the records of the lock table, and the wait-die decision for a request against each.

use super::Age;
use crate::error::ConflictWith;
use std::ops::Bound;
use std::rc::Rc;
use std::task::Waker;

/// A transaction parked on a lock, until the lock changes.
pub(crate) struct Waiter {
    /// Who waits.
    pub(crate) age: Age,
    /// Whether it wants the key exclusively (a scan waiting on a key wants it shared).
    pub(crate) exclusive: bool,
    /// The key it wants, when it waits on a range lock (exclusive key requests only).
    pub(crate) key: Option<Rc<[u8]>>,
    /// Whether it waits for the lock (false: a transaction that died waits only for the lock
    /// to change before it retries; nobody gives way to it).
    pub(crate) queued: bool,
    /// Its registration, to take it off the list when its wait ends without a wake-up.
    pub(crate) ticket: u64,
    pub(crate) waker: Waker,
}

/// What a request against a key's lock may do.
pub(crate) enum KeyCheck {
    /// The requester holds the lock in a mode that covers the request.
    Held,
    /// An older transaction holds (or waits first for) the key: the requester dies.
    Die(Age, ConflictWith),
    /// Only younger transactions stand in the way: the requester waits.
    Wait,
    /// Nothing stands in the way: it may be granted (a shared holder added, or an upgrade of
    /// the sole holder).
    Free,
}

/// The holders of one locked key (at least one, always) and its waiters.
pub(crate) struct KeyEntry {
    /// Whether the key is held exclusively (then by `holder` alone).
    exclusive: bool,
    /// The first holder.
    holder: Age,
    /// Further shared holders (empty, and unallocated, while one transaction holds the key).
    more: Vec<Age>,
    /// Who waits for the key to change.
    pub(crate) waiters: Vec<Waiter>,
}

impl KeyEntry {
    /// A key locked by `age` alone.
    pub(crate) fn new(age: Age, exclusive: bool) -> KeyEntry {
        KeyEntry {
            exclusive,
            holder: age,
            more: Vec::new(),
            waiters: Vec::new(),
        }
    }

    /// Whether `age` holds the key: `Some(exclusive)`, or `None`.
    pub(crate) fn holds(&self, age: Age) -> Option<bool> {
        (self.holder == age || self.more.contains(&age)).then_some(self.exclusive)
    }

    /// Whether the key is held exclusively by a transaction other than `age`: by whom.
    pub(crate) fn exclusive_holder_besides(&self, age: Age) -> Option<Age> {
        (self.exclusive && self.holder != age).then_some(self.holder)
    }

    /// The wait-die decision for `age` asking for the key (`exclusive` or shared).
    pub(crate) fn check(&self, age: Age, exclusive: bool) -> KeyCheck {
        let mine = self.holds(age);
        if mine == Some(true) || (mine.is_some() && !exclusive) {
            return KeyCheck::Held;
        }
        if let Some((holder, with)) = self.oldest_conflicting_holder(age, exclusive) {
            return if holder < age {
                KeyCheck::Die(holder, with)
            } else {
                KeyCheck::Wait
            };
        }
        if mine.is_none() {
            if let Some(waiter) = self.queued_before(age, exclusive) {
                return KeyCheck::Die(waiter, ConflictWith::Queued);
            }
        }
        KeyCheck::Free
    }

    /// The oldest holder other than `age` whose lock a request in this mode conflicts with.
    fn oldest_conflicting_holder(&self, age: Age, exclusive: bool) -> Option<(Age, ConflictWith)> {
        if !exclusive && !self.exclusive {
            return None;
        }
        let with = if self.exclusive {
            ConflictWith::ExclusiveKey
        } else {
            ConflictWith::SharedKey
        };
        std::iter::once(self.holder)
            .chain(self.more.iter().copied())
            .filter(|h| *h != age)
            .min()
            .map(|h| (h, with))
    }

    /// The oldest transaction, older than `age`, that waits for the key in a mode a request
    /// in this mode conflicts with: it came first by age, so a new request gives way (without
    /// this, younger readers could starve an older writer forever).
    pub(crate) fn queued_before(&self, age: Age, exclusive: bool) -> Option<Age> {
        self.waiters
            .iter()
            .filter(|w| w.queued && w.age < age && (w.exclusive || exclusive))
            .map(|w| w.age)
            .min()
    }

    /// Adds `age` as a shared holder.
    pub(crate) fn add_shared(&mut self, age: Age) {
        assert!(!self.exclusive, "a shared lock granted on an exclusive key");
        assert!(self.holds(age).is_none(), "a shared lock granted twice");
        self.more.push(age);
    }

    /// Makes the shared lock of `age`, the key's only holder, exclusive.
    pub(crate) fn upgrade(&mut self, age: Age) {
        assert!(
            self.holder == age && self.more.is_empty(),
            "an upgrade granted beside other holders"
        );
        self.exclusive = true;
    }

    /// Drops the lock of `age`; returns whether nobody holds the key now.
    pub(crate) fn release(&mut self, age: Age) -> bool {
        if self.holder == age {
            match self.more.pop() {
                Some(next) => self.holder = next,
                None => return true,
            }
        } else {
            let at = self.more.iter().position(|h| *h == age);
            let at = at.expect("a lock released by a transaction that does not hold it");
            self.more.swap_remove(at);
        }
        false
    }

    /// Heap bytes of the holder and waiter lists (their capacities, and waiters' keys).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.more.capacity() * std::mem::size_of::<Age>() + waiters_bytes(&self.waiters)
    }
}

/// Heap bytes of a waiter list: its capacity, and the keys its waiters allocated.
pub(crate) fn waiters_bytes(waiters: &Vec<Waiter>) -> usize {
    let keys: usize = waiters
        .iter()
        .filter_map(|w| w.key.as_ref())
        .map(|k| rc_bytes(k.len()))
        .sum();
    waiters.capacity() * std::mem::size_of::<Waiter>() + keys
}

/// Heap bytes of an `Rc<[u8]>` of `len` bytes (two counters, then the bytes).
pub(crate) fn rc_bytes(len: usize) -> usize {
    2 * std::mem::size_of::<usize>() + len
}

/// A scan's shared lock on a range of one table's keys.
pub(crate) struct RangeLock {
    /// Its number in the lock table (the scan's handle on it).
    pub(crate) id: u64,
    pub(crate) owner: Age,
    pub(crate) start: Bound<Vec<u8>>,
    pub(crate) end: Bound<Vec<u8>>,
    /// Exclusive key requests parked on it (each with its key).
    pub(crate) waiters: Vec<Waiter>,
}

impl RangeLock {
    /// Whether the range holds `key`.
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        contains(as_ref(&self.start), as_ref(&self.end), key)
    }

    /// Heap bytes of the lock: itself (in the table's list), its bounds and its waiters.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of::<RangeLock>()
            + bound_bytes(&self.start)
            + bound_bytes(&self.end)
            + waiters_bytes(&self.waiters)
    }
}

/// Heap bytes of an owned bound's key.
pub(crate) fn bound_bytes(bound: &Bound<Vec<u8>>) -> usize {
    match bound {
        Bound::Included(k) | Bound::Excluded(k) => k.capacity(),
        Bound::Unbounded => 0,
    }
}

/// A borrowed view of an owned bound.
pub(crate) fn as_ref(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether (`start`, `end`) holds `key`.
pub(crate) fn contains(start: Bound<&[u8]>, end: Bound<&[u8]>, key: &[u8]) -> bool {
    let after_start = match start {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
        Bound::Unbounded => true,
    };
    after_start && before_end
}

/// Whether (`start`, `end`) holds no key at all (start past end, or one key excluded): an
/// ordered map's `range` refuses such bounds, so they are answered before it is asked.
pub(crate) fn is_empty_range(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    }
}
