//! Per-key write locks for commits: a batch holds its keys from the moment its log record is
//! appended until it is in the tree, so two batches that write the same key reach the tree in
//! the order of their log records (recovery replays them in that order).

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct KeyLocks {
    /// Locked keys and the tasks waiting for each.
    held: RefCell<HashMap<Vec<u8>, Vec<Waker>>>,
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
                held.insert(self.key.to_vec(), Vec::new());
                Poll::Ready(())
            }
            Some(waiters) => {
                waiters.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        let mut held = self.locks.held.borrow_mut();
        let mut wake = Vec::new();
        for k in &self.keys {
            if let Some(w) = held.remove(k) {
                wake.extend(w);
            }
        }
        drop(held);
        for w in wake {
            w.wake();
        }
    }
}
