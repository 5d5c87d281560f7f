//! [`Transaction::prefetch`]: bring the pages of keys a transaction is about to read into the
//! pool together, before it locks them.
//!
//! Why: a transaction's reads fault one after another (each read needs the previous one's
//! lock first), and every lock it holds is held across the faults that follow. TPC-C's
//! NewOrder holds its district's row while it reads ten STOCK rows; out of memory that is ten
//! page faults in a row with the district locked. Prefetched, the faults go out as one batch
//! (one submission, their latencies overlapped: the paper's point about asynchronous I/O)
//! before any lock is taken, and the locked part then runs from memory. A prefetch reads
//! without locks and returns nothing: it changes no result, only where the waiting happens.

use super::transaction::Transaction;
use crate::catalog::TableId;
use crate::db::DbHandle;
use crate::error::TxnError;
use futures_util::future::join_all;

/// Keys one prefetch reads at most (a bound on the reads it puts in flight at once).
pub(crate) const PREFETCH_KEYS_MAX: usize = 64;

impl Transaction {
    /// Reads the pages that hold `keys` (table, key) into the buffer pool, all at once,
    /// taking no lock and returning no value; later reads of those keys then find their
    /// pages resident. At most 64 keys are read (`PREFETCH_KEYS_MAX`); any beyond are ignored
    /// (it is a hint). An error of the storage (EIO, a page that fails its check) is
    /// returned as the read would return it.
    pub async fn prefetch(&self, keys: &[(TableId, &[u8])]) -> Result<(), TxnError> {
        self.check_alive()?;
        prefetch_keys(&self.handle, keys.iter().map(|(table, key)| (*table, *key))).await
    }
}

/// Reads the pages of the first [`PREFETCH_KEYS_MAX`] of `keys` into `handle`'s pool, all at
/// once, without locks (see [`Transaction::prefetch`]).
pub(crate) async fn prefetch_keys<'k>(
    handle: &DbHandle,
    keys: impl Iterator<Item = (TableId, &'k [u8])>,
) -> Result<(), TxnError> {
    // First the pages already in the pool, without a task each, probed a level at a time for
    // all keys (`tree/probe.rs`): a probe is the descent the read will not repeat (it starts
    // at the leaf the probe remembered). Then the rest, read together.
    let keys: Vec<(TableId, &[u8])> = keys.take(PREFETCH_KEYS_MAX).collect();
    let resident = handle.probe_resident_all(&keys)?;
    let missing: Vec<(TableId, &[u8])> = (keys.iter().zip(resident))
        .filter(|(_, resident)| !resident)
        .map(|(key, _)| *key)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let reads = missing.into_iter().map(|(table, key)| async move {
        let mut value = Vec::new();
        handle.get_into_in(table, key, &mut value).await.map(|_| ())
    });
    for result in join_all(reads).await {
        result?;
    }
    Ok(())
}
