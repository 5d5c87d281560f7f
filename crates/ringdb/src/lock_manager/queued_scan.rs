//! Scans waiting for their range lock, as the lock table sees them: an exclusive key request
//! inside such a range, younger than the scan, gives way to it.
//!
//! Why: a scan that finds an exclusive key lock in its range parks on that key. Without this
//! record, the other keys of the range stayed free for anyone: a stream of younger inserts
//! into the range (TPC-C's NewOrders into the NEW-ORDER rows of a district) took a new key
//! each time the old one was released, and the older scan (Delivery's) woke, met the next
//! insert and parked again, for hundreds of milliseconds. With the record, a younger insert
//! dies instead (wait-die, as for any older request in its way) and the scan gets its turn.

use super::lock_entry::{as_ref, bound_bytes, contains, waiters_bytes, Waiter};
use super::locks::{LockTable, TableLocks};
use super::Age;
use crate::ids::TableId;
use std::ops::Bound;

/// A scan parked until its range can be locked.
pub(crate) struct QueuedScan {
    pub(crate) age: Age,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// Requests that gave way to it, parked until it leaves the queue (granted, refused or
    /// dropped): woken earlier, a retry could die against it again and again before the scan
    /// itself ran once (seen: a transaction refused 10,000 times in a row).
    pub(crate) waiters: Vec<Waiter>,
}

impl QueuedScan {
    /// Bytes it holds, in the table's list and on the heap.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of::<QueuedScan>()
            + bound_bytes(&self.start)
            + bound_bytes(&self.end)
            + waiters_bytes(&self.waiters)
    }
}

/// The oldest scan of `locks` queued for a range holding `key`, if it is older than `age`.
pub(crate) fn queued_scan_before<'a>(
    locks: &'a TableLocks,
    key: &[u8],
    age: Age,
) -> Option<&'a QueuedScan> {
    locks
        .queued_scans
        .iter()
        .filter(|s| s.age < age && contains(as_ref(&s.start), as_ref(&s.end), key))
        .min_by_key(|s| s.age)
}

/// A scan's place in its table's queue while it waits for its range; dropping it (the
/// request granted, refused, or its future dropped) takes the place away.
pub(crate) struct ScanInQueue<'a> {
    locks: &'a LockTable,
    table: TableId,
    age: Age,
}

impl<'a> ScanInQueue<'a> {
    /// Queues the scan of `age` over (`start`, `end`), unless it is queued already (it
    /// parks again).
    pub(crate) fn enter(
        queue: &mut Option<ScanInQueue<'a>>,
        locks: &'a LockTable,
        (table, start, end): (TableId, Bound<&[u8]>, Bound<&[u8]>),
        age: Age,
    ) {
        if queue.is_some() {
            return;
        }
        let scan = QueuedScan {
            age,
            start: start.map(<[u8]>::to_vec),
            end: end.map(<[u8]>::to_vec),
            waiters: Vec::new(),
        };
        locks.queue_scan(table, scan);
        *queue = Some(ScanInQueue { locks, table, age });
    }
}

impl Drop for ScanInQueue<'_> {
    fn drop(&mut self) {
        self.locks.dequeue_scan(self.table, self.age);
    }
}

impl LockTable {
    fn queue_scan(&self, table: TableId, scan: QueuedScan) {
        let mut tables = self.tables.borrow_mut();
        let locks = tables.entry(table).or_default();
        assert!(
            locks.queued_scans.iter().all(|s| s.age != scan.age),
            "a transaction queued two scans at once"
        );
        let after = scan.bytes();
        locks.queued_scans.push(scan);
        self.account(&tables, 0, after);
    }

    fn dequeue_scan(&self, table: TableId, age: Age) {
        let mut tables = self.tables.borrow_mut();
        let Some(locks) = tables.get_mut(&table) else {
            return;
        };
        let Some(at) = locks.queued_scans.iter().position(|s| s.age == age) else {
            return;
        };
        let scan = locks.queued_scans.swap_remove(at);
        self.account(&tables, scan.bytes(), 0);
        drop(tables);
        for waiter in scan.waiters {
            waiter.waker.wake();
        }
    }
}
