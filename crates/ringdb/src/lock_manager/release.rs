//! The end of locks: a transaction releasing everything it holds (commit or abort), and a
//! scan narrowing its range lock to the part it observed. Both wake the transactions parked
//! on the locks that changed, after the table is no longer borrowed (a woken task runs later,
//! on the same thread, and asks the table again).

use super::locks::{entry_bytes, LockTable};
use super::Age;
use crate::ids::TableId;
use std::collections::btree_map::Entry;
use std::ops::Bound;
use std::rc::Rc;
use std::task::Waker;

impl LockTable {
    /// Releases the key locks `keys` and the range locks `ranges` that `age` holds, and wakes
    /// every transaction parked on them.
    pub(crate) fn release(
        &self,
        age: Age,
        keys: &[(TableId, Rc<[u8]>)],
        ranges: &[(TableId, u64)],
    ) {
        let mut wake: Vec<Waker> = Vec::new();
        let mut tables = self.tables.borrow_mut();
        let (mut before, mut after) = (0, 0);
        for (table, key) in keys {
            let locks = tables.get_mut(table).expect("a held key's table has locks");
            // One search per key: the entry found is the one removed (the `Rc` is the
            // table's own key, so the clone allocates nothing).
            let Entry::Occupied(mut found) = locks.keys.entry(key.clone()) else {
                panic!("a held key has an entry");
            };
            let entry = found.get_mut();
            before += entry_bytes(key.len(), entry);
            wake.extend(entry.waiters.drain(..).map(|w| w.waker));
            if entry.release(age) {
                found.remove();
            } else {
                after += entry_bytes(key.len(), entry);
            }
        }
        for (table, id) in ranges {
            let locks = tables
                .get_mut(table)
                .expect("a held range's table has locks");
            let at = locks.ranges.iter().position(|r| r.id == *id);
            let range = locks
                .ranges
                .swap_remove(at.expect("a held range is in the table"));
            assert_eq!(
                range.owner, age,
                "a range lock released by another transaction"
            );
            before += range.bytes();
            wake.extend(range.waiters.into_iter().map(|w| w.waker));
        }
        let released = (keys.len() + ranges.len()) as u64;
        assert!(self.held.get() >= released, "more locks released than held");
        self.held.set(self.held.get() - released);
        self.account(&tables, before, after);
        drop(tables);
        for waker in wake {
            waker.wake();
        }
    }

    /// Narrows the range lock `id` of `table` to (`start`, `end`) (a scan whose limit cut it
    /// observed only that part), and wakes the transactions parked on it.
    pub(crate) fn narrow(&self, table: TableId, id: u64, start: Bound<&[u8]>, end: Bound<&[u8]>) {
        let mut tables = self.tables.borrow_mut();
        let locks = tables
            .get_mut(&table)
            .expect("a held range's table has locks");
        let range = locks.ranges.iter_mut().find(|r| r.id == id);
        let range = range.expect("a narrowed range is in the table");
        let before = range.bytes();
        range.start = start.map(<[u8]>::to_vec);
        range.end = end.map(<[u8]>::to_vec);
        let wake: Vec<Waker> = range.waiters.drain(..).map(|w| w.waker).collect();
        let after = range.bytes();
        self.account(&tables, before, after);
        drop(tables);
        for waker in wake {
            waker.wake();
        }
    }
}
