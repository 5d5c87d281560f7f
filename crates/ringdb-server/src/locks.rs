//! Per-key locks on a shard's thread, for the server's key operations: a command that reads a
//! key and writes it back (INCR, APPEND, SET NX) holds the key from its read until its write is
//! in the tree, so two clients' INCRs never both read the same value. Only the shard's thread
//! touches its table (thread-local: the shard runs the operations of its keys), so it takes no
//! atomic operation; a batch locks its keys in sorted order, so two batches never wait for each
//! other in a cycle.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

thread_local! {
    /// Keys held on this thread, with the tasks waiting for each.
    static HELD: RefCell<HashMap<Vec<u8>, Vec<Waker>>> = RefCell::new(HashMap::new());
}

/// Keys held until dropped.
pub struct KeyGuard {
    keys: Vec<Vec<u8>>,
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            for key in &self.keys {
                let waiters = held.remove(key);
                debug_assert!(waiters.is_some(), "a held key is in the table");
                waiters.into_iter().flatten().for_each(Waker::wake);
            }
        });
    }
}

/// Waits for one key and takes it.
struct Acquire<'a> {
    key: &'a [u8],
}

impl Future for Acquire<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            match held.get_mut(self.key) {
                Some(waiters) => {
                    if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        waiters.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
                None => {
                    held.insert(self.key.to_vec(), Vec::new());
                    Poll::Ready(())
                }
            }
        })
    }
}

/// Takes every key of `keys` (any order, duplicates allowed), waiting for holders.
pub async fn lock_all(mut keys: Vec<Vec<u8>>) -> KeyGuard {
    keys.sort_unstable();
    keys.dedup();
    let mut guard = KeyGuard {
        keys: Vec::with_capacity(keys.len()),
    };
    for key in keys {
        Acquire { key: &key }.await;
        guard.keys.push(key);
    }
    guard
}
