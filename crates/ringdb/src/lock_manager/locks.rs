//! The lock table of one database: key locks (shared or exclusive) and scans' shared range
//! locks, per table, and the wait-die decision for each request.
//!
//! A request is answered at once ([`Attempt`]): granted, refused (the requester is younger
//! than a transaction in its way: it dies), or "wait on this lock" (everyone in the way is
//! younger), after which the requester parks on that lock (`wait.rs`) and asks again when it
//! changes. Only locks held now have entries, so the table's size follows the transactions
//! in progress; it measures itself after each change ([`LockTable::memory`]) like the commit
//! path's `KeyLocks`. A key is allocated once per lock (an `Rc<[u8]>` that the table and the
//! holding transaction share), and nothing else is allocated per lock while nobody waits.

use super::lock_entry::{self, KeyCheck, KeyEntry, RangeLock, Waiter};
use super::queued_scan::{queued_scan_before, QueuedScan};
use super::Age;
use crate::error::ConflictWith;
use crate::ids::TableId;
use crate::memory::{Meter, PartBytes};
use rustc_hash::FxHashMap;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;

/// Bytes of one key entry besides its heap parts: the map's key and value (the map's spare
/// room in its nodes is not counted).
const KEY_ENTRY_BYTES: usize = std::mem::size_of::<(Rc<[u8]>, KeyEntry)>();

/// One table's locks.
#[derive(Default)]
pub(crate) struct TableLocks {
    /// Locked keys, in key order (a scan asks for those inside its range).
    pub(crate) keys: BTreeMap<Rc<[u8]>, KeyEntry>,
    /// Range locks held now (few: one per scan in progress).
    pub(crate) ranges: Vec<RangeLock>,
    /// Scans parked until their range can be locked (see `queued_scan.rs`).
    pub(crate) queued_scans: Vec<QueuedScan>,
}

/// The answer to a lock request.
pub(crate) enum Attempt {
    /// Granted (see [`Grant`]).
    Granted(Grant),
    /// The requester is younger than `holder`, which holds or waits first: it dies.
    Die {
        holder: Age,
        with: ConflictWith,
        /// The key in question (allocated only here, on the refusal).
        key: Vec<u8>,
        /// The lock in the way: the dead transaction, its locks released, waits for it to
        /// change before it reports the conflict (so its retry does not meet it again).
        blocker: Blocker,
    },
    /// Everyone in the way is younger: park on this lock and ask again when it changes.
    Wait(Blocker),
}

/// What a granted request gave the transaction.
pub(crate) enum Grant {
    /// Nothing new: it held the key in a mode that covers the request, or it upgraded its own
    /// shared lock (the key is on its list already).
    AlreadyHeld,
    /// A key lock to release at the end (the table holds the same `Rc`).
    Key(Rc<[u8]>),
    /// The range lock of this number.
    Range(u64),
}

/// The lock a waiting request parks on.
#[derive(Clone)]
pub(crate) enum Blocker {
    Key(Rc<[u8]>),
    Range(u64),
    /// A scan waiting for its range (see `queued_scan.rs`): changes when it leaves the queue.
    QueuedScan(Age),
}

/// The lock table (see the module doc).
#[derive(Default)]
pub(crate) struct LockTable {
    pub(crate) tables: RefCell<FxHashMap<TableId, TableLocks>>,
    /// The last range-lock number or waiter ticket handed out.
    last_ticket: Cell<u64>,
    /// Bytes of the entries, range locks and their heap parts.
    bytes: Cell<usize>,
    /// Key and range locks held now (a key held by two transactions counts twice).
    pub(crate) held: Cell<u64>,
    meter: Meter,
}

/// Bytes of one key entry with a key of `key_len` bytes.
pub(crate) fn entry_bytes(key_len: usize, entry: &KeyEntry) -> usize {
    KEY_ENTRY_BYTES + lock_entry::rc_bytes(key_len) + entry.heap_bytes()
}

impl LockTable {
    /// The bytes the table holds now and at most.
    pub(crate) fn memory(&self) -> PartBytes {
        self.meter.read()
    }

    /// Key and range locks held now.
    pub(crate) fn locks_held(&self) -> u64 {
        self.held.get()
    }

    /// A number no range lock or waiter of this table had.
    pub(crate) fn next_ticket(&self) -> u64 {
        let ticket = self.last_ticket.get() + 1;
        self.last_ticket.set(ticket);
        ticket
    }

    /// Counts `after` bytes where there were `before`, and measures the table again.
    pub(crate) fn account(
        &self,
        tables: &FxHashMap<TableId, TableLocks>,
        before: usize,
        after: usize,
    ) {
        let held = self.bytes.get() + after;
        assert!(held >= before, "lock-table bytes below zero");
        self.bytes.set(held - before);
        let map = tables.capacity() * std::mem::size_of::<(TableId, TableLocks)>();
        self.meter.set((map + held - before) as u64);
    }

    /// Asks for `key` of `table` for `age`, `exclusive` or shared.
    pub(crate) fn try_key(&self, table: TableId, key: &[u8], age: Age, exclusive: bool) -> Attempt {
        let mut tables = self.tables.borrow_mut();
        let locks = tables.entry(table).or_default();
        let mut blocker = None;
        let found = locks.keys.get_key_value(key);
        let known = found.is_some();
        if let Some((k, entry)) = found {
            match entry.check(age, exclusive) {
                KeyCheck::Held => return Attempt::Granted(Grant::AlreadyHeld),
                KeyCheck::Die(holder, with) => {
                    return die(holder, with, key, Blocker::Key(k.clone()))
                }
                KeyCheck::Wait => blocker = Some(Blocker::Key(k.clone())),
                KeyCheck::Free => {}
            }
        }
        if exclusive {
            let in_range = locks
                .ranges
                .iter()
                .filter(|r| r.owner != age && r.contains(key));
            if let Some(range) = in_range.min_by_key(|r| r.owner) {
                if range.owner < age {
                    return die(
                        range.owner,
                        ConflictWith::Range,
                        key,
                        Blocker::Range(range.id),
                    );
                }
                blocker.get_or_insert(Blocker::Range(range.id));
            }
            // An older scan waiting for a range that holds the key goes first.
            if let Some(scan) = queued_scan_before(locks, key, age) {
                return die(
                    scan.age,
                    ConflictWith::Queued,
                    key,
                    Blocker::QueuedScan(scan.age),
                );
            }
        }
        if let Some(blocker) = blocker {
            return Attempt::Wait(blocker);
        }
        let (before, after, grant) = grant_key(locks, key, age, exclusive, known);
        if matches!(grant, Grant::Key(_)) {
            self.held.set(self.held.get() + 1);
        }
        self.account(&tables, before, after);
        Attempt::Granted(grant)
    }

    /// Asks for a shared lock on (`start`, `end`) of `table` for `age` (a scan).
    pub(crate) fn try_range(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        age: Age,
    ) -> Attempt {
        let mut tables = self.tables.borrow_mut();
        let locks = tables.entry(table).or_default();
        let mut blocker = None;
        if !lock_entry::is_empty_range(start, end) {
            for (k, entry) in locks.keys.range::<[u8], _>((start, end)) {
                if let Some(holder) = entry.exclusive_holder_besides(age) {
                    if holder < age {
                        let blocker = Blocker::Key(k.clone());
                        return die(holder, ConflictWith::ExclusiveKey, k, blocker);
                    }
                    blocker.get_or_insert_with(|| Blocker::Key(k.clone()));
                } else if entry.holds(age).is_none() {
                    if let Some(waiter) = entry.queued_before(age, false) {
                        let blocker = Blocker::Key(k.clone());
                        return die(waiter, ConflictWith::Queued, k, blocker);
                    }
                }
            }
        }
        if let Some((range, waiter)) = queued_in_range(locks, start, end, age) {
            let key = waiter.key.as_deref().unwrap_or_default();
            return die(waiter.age, ConflictWith::Queued, key, Blocker::Range(range));
        }
        if let Some(blocker) = blocker {
            return Attempt::Wait(blocker);
        }
        let id = self.next_ticket();
        let range = RangeLock {
            id,
            owner: age,
            start: start.map(<[u8]>::to_vec),
            end: end.map(<[u8]>::to_vec),
            waiters: Vec::new(),
        };
        let after = range.bytes();
        locks.ranges.push(range);
        self.held.set(self.held.get() + 1);
        self.account(&tables, 0, after);
        Attempt::Granted(Grant::Range(id))
    }
}

/// The oldest transaction, older than `age`, parked on a range lock of `locks` for a key
/// inside (`start`, `end`), with the range lock it is parked on: a scan over that key gives
/// way to it (unless it waits for `age`'s own range: `age` holds that part already).
fn queued_in_range<'a>(
    locks: &'a TableLocks,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    age: Age,
) -> Option<(u64, &'a Waiter)> {
    locks
        .ranges
        .iter()
        .filter(|r| r.owner != age)
        .flat_map(|r| r.waiters.iter().map(move |w| (r.id, w)))
        .filter(|(_, w)| w.queued && w.age < age)
        .filter(|(_, w)| {
            w.key
                .as_ref()
                .is_some_and(|k| lock_entry::contains(start, end, k))
        })
        .min_by_key(|(_, w)| w.age)
}

/// Grants a request [`LockTable::try_key`] found nothing in the way of (`known`: the key
/// has an entry already); returns the bytes of the key's entry before and after, and the
/// grant.
fn grant_key(
    locks: &mut TableLocks,
    key: &[u8],
    age: Age,
    exclusive: bool,
    known: bool,
) -> (usize, usize, Grant) {
    let entry = if known { locks.keys.get_mut(key) } else { None };
    let Some(entry) = entry else {
        debug_assert!(!locks.keys.contains_key(key), "a new key has no entry");
        let k: Rc<[u8]> = Rc::from(key);
        let entry = KeyEntry::new(age, exclusive);
        let after = entry_bytes(key.len(), &entry);
        locks.keys.insert(k.clone(), entry);
        return (0, after, Grant::Key(k));
    };
    let before = entry_bytes(key.len(), entry);
    if exclusive {
        entry.upgrade(age);
        return (before, entry_bytes(key.len(), entry), Grant::AlreadyHeld);
    }
    entry.add_shared(age);
    let after = entry_bytes(key.len(), entry);
    let (k, _) = locks
        .keys
        .get_key_value(key)
        .expect("the entry just changed");
    (before, after, Grant::Key(k.clone()))
}

/// The refusal of a request by a younger transaction.
fn die(holder: Age, with: ConflictWith, key: &[u8], blocker: Blocker) -> Attempt {
    Attempt::Die {
        holder,
        with,
        key: key.to_vec(),
        blocker,
    }
}
