//! The expiry sweep: a thread that walks the keys in order, a chunk per interval, and has each
//! shard remove the expired ones it found (checked again there, under the keys' locks). Reads
//! already treat an expired key as absent; the sweep gives its space back, including for keys
//! nobody reads again. A full pass over N keys takes N / chunk intervals.

use crate::shared::ServerShared;
use crate::value::{now_ms, Physical};
use ringdb::Db;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Starts the sweep; it ends when the server is asked to stop.
pub fn start(
    db: Db,
    shared: Arc<ServerShared>,
    interval: Duration,
    chunk_keys: usize,
) -> std::io::Result<JoinHandle<()>> {
    assert!(chunk_keys > 0);
    std::thread::Builder::new()
        .name("ringdb-serve-sweep".into())
        .spawn(move || {
            let mut cursor: Option<Vec<u8>> = None;
            // One chunk per interval until the server stops.
            while !shared.shutting_down() {
                // A replica's expired keys are deleted by its primary's stream.
                if !shared.replication.is_replica() {
                    cursor = sweep_chunk(&db, &shared, cursor, chunk_keys);
                }
                sleep_unless_stopping(&shared, interval);
            }
        })
}

/// Sweeps the chunk after `cursor`; the cursor to go on from (`None`: start over).
fn sweep_chunk(
    db: &Db,
    shared: &ServerShared,
    cursor: Option<Vec<u8>>,
    chunk_keys: usize,
) -> Option<Vec<u8>> {
    let start = cursor.map_or(Bound::Unbounded, Bound::Excluded);
    let now = now_ms();
    let mut expired: Vec<Vec<Vec<u8>>> = vec![Vec::new(); db.shard_count()];
    let mut last = None;
    let mut seen = 0;
    for pair in db
        .range::<Vec<u8>, _>((start, Bound::Unbounded))
        .take(chunk_keys)
    {
        let Ok((key, value)) = pair else {
            return None;
        };
        seen += 1;
        if Physical::decode(&value).is_ok_and(|physical| physical.expired_at(now)) {
            expired[db.shard_of(&key)].push(key.clone());
        }
        last = Some(key);
    }
    for (shard, keys) in expired
        .into_iter()
        .enumerate()
        .filter(|(_, keys)| !keys.is_empty())
    {
        let store = shared.store.clone();
        let removed = db.run_on(shard, move |shard| {
            let handle = shard.local().clone();
            async move { crate::apply::sweep(store, handle, keys).await }
        });
        if let Ok(Ok(removed)) = removed {
            shared
                .expired_keys
                .fetch_add(removed as u64, Ordering::Relaxed);
        }
    }
    if seen < chunk_keys {
        return None;
    }
    last
}

/// Sleeps `interval`, in steps short enough to notice a shutdown.
fn sleep_unless_stopping(shared: &ServerShared, interval: Duration) {
    let step = Duration::from_millis(50).min(interval);
    let mut slept = Duration::ZERO;
    // Bounded by interval / step steps.
    while slept < interval && !shared.shutting_down() {
        std::thread::sleep(step);
        slept += step;
    }
}
