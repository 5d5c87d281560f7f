//! A stand-in for the engine's transaction API (`ringdb::Transaction`), with its names and
//! signatures, until that API lands: writes are buffered in a map, reads go through them, and
//! commit is one `DbHandle::write`. It takes no locks, so it isolates nothing: every
//! transaction behaves as `Isolation::Off` would. Only sequential runs are correct on it.

use ringdb::{DbHandle, Direction, ReadError, TableId, WriteBatch, WriteError};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::Bound;

/// How a transaction isolates itself (the shim isolates nothing either way).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Strict two-phase locking (in the real API).
    #[default]
    Serializable,
    /// No locks.
    Off,
}

/// A transaction's age for wait-die.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxnTimestamp(u64);

thread_local! {
    static NEXT_TIMESTAMP: Cell<u64> = const { Cell::new(1) };
}

/// Why a transaction failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// A lock conflict (never raised by the shim).
    #[error("transaction {timestamp:?} died in a lock conflict")]
    Conflict {
        /// The transaction that died.
        timestamp: TxnTimestamp,
    },
    /// A read failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The commit's write failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl TxnError {
    /// Whether the transaction died in a conflict (retry it with its timestamp).
    pub fn is_conflict(&self) -> bool {
        matches!(self, TxnError::Conflict { .. })
    }
}

/// Starting transactions on a handle (the real API has these as inherent methods).
pub trait Begin {
    /// A transaction with `isolation`, aged `timestamp` or fresh.
    fn begin_with(&self, isolation: Isolation, timestamp: Option<TxnTimestamp>) -> Transaction;
}

impl Begin for DbHandle {
    fn begin_with(&self, _isolation: Isolation, timestamp: Option<TxnTimestamp>) -> Transaction {
        let timestamp = timestamp.unwrap_or_else(|| {
            NEXT_TIMESTAMP.with(|next| {
                let t = next.get();
                next.set(t + 1);
                TxnTimestamp(t)
            })
        });
        Transaction {
            handle: self.clone(),
            writes: BTreeMap::new(),
            timestamp,
        }
    }
}

/// A transaction: buffered writes over a handle.
pub struct Transaction {
    handle: DbHandle,
    /// Own writes by (table, key): `None` is a delete.
    writes: BTreeMap<(TableId, Vec<u8>), Option<Vec<u8>>>,
    timestamp: TxnTimestamp,
}

impl Transaction {
    /// The transaction's age.
    pub fn timestamp(&self) -> TxnTimestamp {
        self.timestamp
    }

    /// The value of `key`, own writes first.
    pub async fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        if let Some(own) = self.writes.get(&(table, key.to_vec())) {
            return Ok(own.clone());
        }
        Ok(self.handle.get_in(table, key).await?)
    }

    /// As `get` (the real API takes an exclusive lock).
    pub async fn get_for_update(
        &mut self,
        table: TableId,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, TxnError> {
        self.get(table, key).await
    }

    /// Buffers a put.
    pub async fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.writes
            .insert((table, key.to_vec()), Some(value.to_vec()));
        Ok(())
    }

    /// Buffers a delete.
    pub async fn delete(&mut self, table: TableId, key: &[u8]) -> Result<(), TxnError> {
        self.writes.insert((table, key.to_vec()), None);
        Ok(())
    }

    /// Up to `limit` pairs within the bounds, merged with own writes.
    pub async fn scan(
        &mut self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, TxnError> {
        let own: Vec<(Vec<u8>, Option<Vec<u8>>)> = self
            .writes
            .iter()
            .filter(|((t, k), _)| *t == table && within(k, start, end))
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        let deletes = own.iter().filter(|(_, v)| v.is_none()).count();
        let base = self
            .handle
            .scan_in(table, start, end, direction, limit.saturating_add(deletes))
            .await?;
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = base.into_iter().collect();
        for (key, value) in own {
            match value {
                Some(v) => merged.insert(key, v),
                None => merged.remove(&key),
            };
        }
        Ok(match direction {
            Direction::Forward => merged.into_iter().take(limit).collect(),
            _ => merged.into_iter().rev().take(limit).collect(),
        })
    }

    /// Commits the buffered writes as one batch.
    pub async fn commit(self) -> Result<(), TxnError> {
        let mut batch = WriteBatch::new();
        for ((table, key), value) in &self.writes {
            match value {
                Some(v) => batch.put_in(*table, key, v),
                None => batch.delete_in(*table, key),
            };
        }
        Ok(self.handle.write(&batch).await?)
    }

    /// Drops the buffered writes.
    pub fn abort(self) {}
}

/// Whether `key` lies within (`start`, `end`).
fn within(key: &[u8], start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    let after_start = match start {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
        Bound::Unbounded => true,
    };
    after_start && before_end
}
