//! [`Transaction::scan`]: a range of a table under a shared range lock, merged with the
//! transaction's own writes.
//!
//! The range lock is taken over the whole range asked for before the tree is read (an
//! exclusive key lock of another transaction inside it conflicts, so no uncommitted write is
//! in the tree there and no insert or delete can land there until this transaction ends:
//! no phantoms). When the limit cut the result, the lock is narrowed to the part the scan
//! observed (up to its last pair), so inserts beyond it (a new order at the end of a
//! district) do not wait for this transaction. Under read committed the range lock is
//! released as soon as the tree was read: what it saw was committed, nothing more.

use super::transaction::Transaction;
use super::Isolation;
use crate::catalog::TableId;
use crate::error::TxnError;
use crate::tree::Direction;
use std::ops::Bound;

impl Transaction {
    /// Up to `limit` pairs of `table` with keys within (`start`, `end`), ascending
    /// (`Forward`) or descending (`Reverse`), with this transaction's own writes merged in
    /// (its puts replace or add pairs, its deletes remove them), under a shared range lock.
    pub async fn scan(
        &mut self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, TxnError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.check_alive()?;
        let range = if self.isolation != Isolation::Off {
            let waits_for_older = self.waits_for_older();
            let locked = (self.shared)
                .lock_range(table, start, end, self.age, waits_for_older)
                .await;
            let id = match locked {
                Ok(id) => id,
                Err(refusal) => return Err(self.refused(refusal).await),
            };
            Some(id)
        } else {
            None
        };
        let deletes = self.writes.deletes_in(table, start, end);
        let tree_limit = limit.saturating_add(deletes);
        let tree = self
            .handle
            .scan_in(table, start, end, direction, tree_limit)
            .await;
        if let Some(id) = range {
            if self.isolation == Isolation::ReadCommitted {
                // Read committed: the range lock lasted only for the read.
                self.shared.locks.release(self.age, &[], &[(table, id)]);
            } else {
                self.ranges.push((table, id));
            }
        }
        let tree = tree?;
        let tree_cut = tree.len() == tree_limit;
        let pairs = self
            .writes
            .merge(table, (start, end), direction, limit, tree, tree_cut);
        if self.isolation == Isolation::Serializable && pairs.len() == limit {
            if let Some(id) = range {
                self.narrow(table, id, (start, end), direction, &pairs);
            }
        }
        Ok(pairs)
    }

    /// Narrows the range lock `id` to the part of (`start`, `end`) up to the last of `pairs`.
    fn narrow(
        &self,
        table: TableId,
        id: u64,
        (start, end): (Bound<&[u8]>, Bound<&[u8]>),
        direction: Direction,
        pairs: &[(Vec<u8>, Vec<u8>)],
    ) {
        let Some((last, _)) = pairs.last() else {
            return;
        };
        let last = Bound::Included(last.as_slice());
        let (start, end) = match direction {
            Direction::Forward => (start, last),
            Direction::Reverse => (last, end),
        };
        self.shared.locks.narrow(table, id, start, end);
    }
}
