//! WATCH: optimistic locking for MULTI/EXEC, as Redis does it. A connection watches keys; any
//! write of one of them (by anyone, itself included) or its expiry before EXEC makes that EXEC
//! answer null and run nothing.
//!
//! The watched keys live in one table for the server ([`Watches`]), shared by the workers (which
//! register them) and by every path that writes (which flags the watchers of what it wrote):
//! the groups on the shards, transactions across shards, the sweep, FLUSHDB, RENAME across
//! shards, slot purges and a replica's applied batches. A write flags its keys after its batch
//! is in the tree and before its keys' locks are released; EXEC checks its flag under the locks
//! of the watched keys (`across.rs`), so no write slips between the check and the transaction.
//!
//! Nothing watched, a write pays one fence and one atomic load: registration and writes meet
//! as in Dekker's protocol. A watcher counts itself in, then reads (the client's GET after
//! WATCH); a writer writes, then reads the count. With a `SeqCst` fence on each side, either the
//! writer sees the watcher counted (and flags it) or the watcher's read sees the write.

use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Watched keys a connection may hold (past it, WATCH is refused).
pub const WATCHED_KEYS_MAX: usize = 16 * 1024;

/// Who watches a key: the watch's number and its flag.
type Watchers = Vec<(u64, Arc<AtomicBool>)>;

/// The server's watched keys.
#[derive(Default)]
pub struct Watches {
    /// Entries in `keys` (a key watched by two connections counts twice).
    watched: AtomicUsize,
    /// Each watched key and its watchers.
    keys: Mutex<HashMap<Vec<u8>, Watchers>>,
    /// The last watch's number.
    last_id: AtomicU64,
}

impl Watches {
    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Watchers>> {
        // Nothing panics while the lock is held; recover from poison anyway.
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Flags the watchers of `keys`: called by every write once it is in the tree, before its
    /// keys are unlocked.
    pub fn touch<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        fence(Ordering::SeqCst);
        if self.watched.load(Ordering::Relaxed) == 0 {
            return;
        }
        let table = self.lock();
        for key in keys {
            for (_, flag) in table.get(key).into_iter().flatten() {
                flag.store(true, Ordering::Release);
            }
        }
    }

    /// Flags every watcher (FLUSHDB, a slot purge, a replica's applied batch: writes whose keys
    /// are not listed one by one).
    pub fn touch_all(&self) {
        fence(Ordering::SeqCst);
        if self.watched.load(Ordering::Relaxed) == 0 {
            return;
        }
        let table = self.lock();
        for (_, flag) in table.values().flatten() {
            flag.store(true, Ordering::Release);
        }
    }

    /// Keys watched now by any connection (a key two connections watch counts once, as in
    /// Redis's `total_watched_keys`).
    pub fn watched(&self) -> usize {
        match self.watched.load(Ordering::Relaxed) {
            0 => 0,
            _ => self.lock().len(),
        }
    }
}

/// One connection's watch: its keys (with each key's expiry deadline when it was watched) and
/// the flag writes raise. Dropping it unregisters every key.
pub struct Watching {
    id: u64,
    touched: Arc<AtomicBool>,
    /// The keys, each with its deadline in ms when watched (`None`: no expiry, or absent).
    keys: Vec<(Vec<u8>, Option<u64>)>,
    watches: Arc<Watches>,
}

impl std::fmt::Debug for Watching {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watching")
            .field("keys", &self.keys.len())
            .field("touched", &self.touched.load(Ordering::Relaxed))
            .finish()
    }
}

impl Watching {
    /// A watch of no key yet.
    pub fn new(watches: &Arc<Watches>) -> Watching {
        Watching {
            id: watches.last_id.fetch_add(1, Ordering::Relaxed) + 1,
            touched: Arc::new(AtomicBool::new(false)),
            keys: Vec::new(),
            watches: watches.clone(),
        }
    }

    /// Registers `keys` (those already watched are skipped); returns the new ones, whose
    /// deadlines the caller reads next ([`Watching::set_deadline`]).
    pub fn add(&mut self, keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut added = Vec::new();
        let mut table = self.watches.lock();
        for key in keys {
            if self.keys.iter().any(|(k, _)| k == key) || added.contains(key) {
                continue;
            }
            table
                .entry(key.clone())
                .or_default()
                .push((self.id, self.touched.clone()));
            added.push(key.clone());
        }
        self.keys
            .extend(added.iter().map(|key| (key.clone(), None)));
        self.watches
            .watched
            .fetch_add(added.len(), Ordering::Relaxed);
        drop(table);
        // Counted in before the caller reads the keys (see the module documentation).
        fence(Ordering::SeqCst);
        debug_assert!(self.keys.len() <= WATCHED_KEYS_MAX + keys.len());
        added
    }

    /// Records the expiry deadline `key` had when it was watched.
    pub fn set_deadline(&mut self, key: &[u8], deadline_ms: Option<u64>) {
        if let Some(entry) = self.keys.iter_mut().find(|(k, _)| k == key) {
            entry.1 = deadline_ms;
        }
    }

    /// How many keys are watched.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The watched keys.
    pub fn keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.keys.iter().map(|(key, _)| key)
    }

    /// Whether EXEC must abort: a watched key was written, or has expired since it was
    /// watched.
    pub fn broken(&self, now_ms: u64) -> bool {
        self.touched.load(Ordering::Acquire)
            || self
                .keys
                .iter()
                .any(|(_, deadline)| deadline.is_some_and(|d| d <= now_ms))
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut table = self.watches.lock();
        for (key, _) in &self.keys {
            if let Some(watchers) = table.get_mut(key) {
                watchers.retain(|(id, _)| *id != self.id);
                if watchers.is_empty() {
                    table.remove(key);
                }
            }
        }
        self.watches
            .watched
            .fetch_sub(self.keys.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_flags_only_the_watchers_of_its_keys_and_a_drop_unregisters() {
        let watches = Arc::new(Watches::default());
        let mut first = Watching::new(&watches);
        let mut second = Watching::new(&watches);
        assert_eq!(
            first
                .add(&[b"a".to_vec(), b"b".to_vec(), b"a".to_vec()])
                .len(),
            2
        );
        assert!(
            first.add(&[b"a".to_vec()]).is_empty(),
            "a key is watched once"
        );
        second.add(&[b"b".to_vec()]);
        assert_eq!(
            watches.watched(),
            2,
            "a key two connections watch counts once"
        );
        watches.touch([&b"a"[..]]);
        assert!(first.broken(0));
        assert!(!second.broken(0));
        drop(first);
        assert_eq!(watches.watched(), 1);
        assert_eq!(watches.watched.load(Ordering::Relaxed), 1);
        watches.touch([&b"a"[..]]);
        assert!(!second.broken(0));
        second.set_deadline(b"b", Some(50));
        assert!(!second.broken(49));
        assert!(second.broken(50), "an expiry since WATCH breaks it");
        watches.touch_all();
        drop(second);
        assert_eq!(watches.watched(), 0);
        assert!(watches.lock().is_empty());
    }
}
