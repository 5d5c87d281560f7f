//! Per-key locks on a shard's thread, for the server's key operations: a command that reads a
//! key and writes it back (INCR, APPEND, SET NX) holds the key from its read until its write is
//! in the tree, so two clients' INCRs never both read the same value. Only the shard's thread
//! touches its table (thread-local: the shard runs the operations of its keys), so it takes no
//! atomic operation; a batch locks its keys in sorted order, so two batches never wait for each
//! other in a cycle.
//!
//! A key is locked by its 64-bit hash, not its bytes: taking a lock copies and allocates
//! nothing. Two keys whose hashes are equal share one lock, which only makes a group wait for
//! another it did not have to (never a lost update: each key is still held by one group at a
//! time); the order by hash is one total order, so no cycle of waits can form either.

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

thread_local! {
    /// Lock ids (key hashes) held on this thread, with the tasks waiting for each.
    static HELD: RefCell<FxHashMap<u64, Vec<Waker>>> = RefCell::new(FxHashMap::default());
}

/// The lock that holds `key`.
fn lock_id(key: &[u8]) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(key)
}

/// Keys held until dropped.
pub struct KeyGuard {
    ids: Vec<u64>,
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            for id in &self.ids {
                let waiters = held.remove(id);
                debug_assert!(waiters.is_some(), "a held lock is in the table");
                waiters.into_iter().flatten().for_each(Waker::wake);
            }
        });
    }
}

/// Waits for one lock and takes it.
struct Acquire {
    id: u64,
}

impl Future for Acquire {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            match held.get_mut(&self.id) {
                Some(waiters) => {
                    if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        waiters.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
                None => {
                    held.insert(self.id, Vec::new());
                    Poll::Ready(())
                }
            }
        })
    }
}

/// Takes every key of `keys` (any order, duplicates allowed), waiting for holders.
pub async fn lock_all<'k>(keys: impl IntoIterator<Item = &'k [u8]>) -> KeyGuard {
    let mut ids: Vec<u64> = keys.into_iter().map(lock_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut guard = KeyGuard {
        ids: Vec::with_capacity(ids.len()),
    };
    for id in ids {
        Acquire { id }.await;
        guard.ids.push(id);
    }
    debug_assert!(guard.ids.is_sorted(), "locks are taken in one order");
    guard
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_held_key_makes_the_next_group_wait_until_it_is_released() {
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut first = Box::pin(lock_all([&b"a"[..], b"b", b"a"]));
        let Poll::Ready(guard) = first.as_mut().poll(&mut cx) else {
            panic!("free keys are taken at once");
        };
        let mut second = Box::pin(lock_all([&b"b"[..]]));
        assert!(second.as_mut().poll(&mut cx).is_pending());
        let mut other = Box::pin(lock_all([&b"c"[..]]));
        assert!(
            other.as_mut().poll(&mut cx).is_ready(),
            "another key is free"
        );
        drop(guard);
        assert!(
            flag.0.load(std::sync::atomic::Ordering::SeqCst),
            "the waiter is woken"
        );
        assert!(second.as_mut().poll(&mut cx).is_ready());
    }
}
