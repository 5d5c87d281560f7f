//! Per-key write locks for commits: a batch holds its keys from the moment its log record is
//! appended until it is in the tree, so two batches that write the same key reach the tree in
//! the order of their log records (recovery replays them in that order).
//!
//! The table holds only the keys locked now (an entry goes when its batch unlocks), so its size
//! follows the commits in progress, not the keys ever written; it reports what it holds
//! ([`KeyLocks::memory`]) so that stays visible.

use crate::memory::{Meter, PartBytes};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Bytes of one entry of the table besides its key's and waiters' heap bytes (the key and
/// waiter vectors' headers, and the hash table's control byte).
const ENTRY_BYTES: usize = std::mem::size_of::<(Vec<u8>, Vec<Waker>)>() + 1;

#[derive(Default)]
pub struct KeyLocks {
    /// Locked keys and the tasks waiting for each.
    held: RefCell<HashMap<Vec<u8>, Vec<Waker>>>,
    /// Heap bytes of the locked keys and of their waiter lists (capacities).
    heap_bytes: Cell<usize>,
    /// What the table holds: its entries (by capacity) and their heap bytes.
    meter: Meter,
}

/// The keys a batch holds; unlocked (and waiters woken) on drop.
pub struct KeyGuard {
    locks: Rc<KeyLocks>,
    keys: Vec<Vec<u8>>,
}

impl KeyLocks {
    /// Locks `keys` (sorted and deduplicated here, so batches cannot deadlock), waiting for
    /// those other batches hold.
    pub async fn lock(self: &Rc<Self>, mut keys: Vec<Vec<u8>>) -> KeyGuard {
        keys.sort_unstable();
        keys.dedup();
        let mut guard = KeyGuard {
            locks: self.clone(),
            keys: Vec::with_capacity(keys.len()),
        };
        for k in keys {
            LockOne {
                locks: self,
                key: &k,
            }
            .await;
            guard.keys.push(k);
        }
        guard
    }

    /// The bytes the table holds now and at most.
    pub fn memory(&self) -> PartBytes {
        self.meter.read()
    }

    /// Counts `added` heap bytes more and `released` fewer, and measures the table again.
    fn account(&self, held: &HashMap<Vec<u8>, Vec<Waker>>, added: usize, released: usize) {
        let heap = self.heap_bytes.get() + added;
        assert!(heap >= released, "key-lock heap bytes below zero");
        self.heap_bytes.set(heap - released);
        let table = held.capacity() * ENTRY_BYTES;
        self.meter.set((table + heap - released) as u64);
    }
}

/// Heap bytes of a waiter list of this capacity.
fn waiter_bytes(capacity: usize) -> usize {
    capacity * std::mem::size_of::<Waker>()
}

struct LockOne<'a> {
    locks: &'a KeyLocks,
    key: &'a [u8],
}

impl Future for LockOne<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut held = self.locks.held.borrow_mut();
        match held.get_mut(self.key) {
            None => {
                let key = self.key.to_vec();
                let added = key.capacity();
                held.insert(key, Vec::new());
                self.locks.account(&held, added, 0);
                Poll::Ready(())
            }
            Some(waiters) => {
                let before = waiter_bytes(waiters.capacity());
                waiters.push(cx.waker().clone());
                let after = waiter_bytes(waiters.capacity());
                self.locks.account(&held, after, before);
                Poll::Pending
            }
        }
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        let mut held = self.locks.held.borrow_mut();
        let mut wake = Vec::new();
        let mut released = 0;
        for k in &self.keys {
            if let Some((key, w)) = held.remove_entry(k) {
                released += key.capacity() + waiter_bytes(w.capacity());
                wake.extend(w);
            }
        }
        self.locks.account(&held, 0, released);
        drop(held);
        for w in wake {
            w.wake();
        }
    }
}
