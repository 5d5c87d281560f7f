//! A transaction's buffered writes: what its reads see first, what its scans are merged with,
//! and what its commit turns into one [`WriteBatch`](crate::WriteBatch).
//!
//! Writes stay here until commit, so an abort is simply dropping them, and nobody else sees
//! them before the batch is in the tree. Kept in key order per table, because a scan merges
//! its table's writes inside its range with what the tree returned.

use crate::catalog::TableId;
use crate::lock_manager::is_empty_range;
use crate::tree::Direction;
use crate::wal::Op;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;

/// One table's writes: a key's new value, or `None` for a delete.
type TableWrites = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Key/value pairs in scan order.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The buffered writes of one transaction (the last write of a key wins).
#[derive(Default)]
pub(super) struct WriteSet {
    tables: BTreeMap<TableId, TableWrites>,
}

impl WriteSet {
    /// What the transaction wrote to `key` of `table`: `Some(Some(value))`, `Some(None)` for
    /// a delete, `None` if it did not write the key.
    pub(super) fn get(&self, table: TableId, key: &[u8]) -> Option<Option<&[u8]>> {
        let value = self.tables.get(&table)?.get(key)?;
        Some(value.as_deref())
    }

    /// Records a put (`Some`) or a delete (`None`) of `key` in `table`.
    pub(super) fn set(&mut self, table: TableId, key: &[u8], value: Option<&[u8]>) {
        let writes = self.tables.entry(table).or_default();
        match writes.get_mut(key) {
            Some(slot) => *slot = value.map(<[u8]>::to_vec),
            None => {
                writes.insert(key.to_vec(), value.map(<[u8]>::to_vec));
            }
        }
    }

    /// Whether the transaction wrote nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.tables.values().all(BTreeMap::is_empty)
    }

    /// The writes of `table` inside (`start`, `end`), in key order.
    fn in_range<'a>(
        &'a self,
        table: TableId,
        start: Bound<&'a [u8]>,
        end: Bound<&'a [u8]>,
    ) -> impl DoubleEndedIterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)> + 'a {
        let writes = self
            .tables
            .get(&table)
            .filter(|_| !is_empty_range(start, end));
        writes
            .into_iter()
            .flat_map(move |w| w.range::<[u8], _>((start, end)))
    }

    /// Deletes of `table` inside (`start`, `end`): how many more pairs a scan must ask the
    /// tree for so that, after they are taken out, its limit can still be met.
    pub(super) fn deletes_in(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> usize {
        self.in_range(table, start, end)
            .filter(|(_, v)| v.is_none())
            .count()
    }

    /// Merges `tree` (a scan of `table` in `direction`, as the tree returned it) with the
    /// writes inside (`start`, `end`): a write replaces the tree's pair, a delete removes it;
    /// at most `limit` pairs. `tree_cut`: the tree stopped at its limit, so writes past its
    /// last pair are left out (what lies between them and that pair is unknown; there are
    /// enough pairs before it, see [`deletes_in`](Self::deletes_in)).
    pub(super) fn merge(
        &self,
        table: TableId,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        direction: Direction,
        limit: usize,
        tree: Pairs,
        tree_cut: bool,
    ) -> Pairs {
        let (mut start, mut end) = bounds;
        let last = tree.last().map(|(k, _)| k.clone());
        if let (true, Some(last)) = (tree_cut, last.as_deref()) {
            match direction {
                Direction::Forward => end = Bound::Included(last),
                Direction::Reverse => start = Bound::Included(last),
            }
        }
        let own = self.in_range(table, start, end);
        match direction {
            Direction::Forward => merge_ordered(tree, own, false, limit),
            Direction::Reverse => merge_ordered(tree, own.rev(), true, limit),
        }
    }

    /// A copy of the writes as a batch's operations, by table and key.
    pub(super) fn to_ops(&self) -> Vec<Op> {
        let mut ops = Vec::new();
        for (&table, writes) in &self.tables {
            for (key, value) in writes {
                let key = key.clone();
                ops.push(match value {
                    Some(value) => Op::Put {
                        table,
                        key,
                        value: value.clone(),
                    },
                    None => Op::Delete { table, key },
                });
            }
        }
        ops
    }

    /// The writes as a batch's operations, by table and key.
    pub(super) fn into_ops(self) -> Vec<Op> {
        let mut ops = Vec::new();
        for (table, writes) in self.tables {
            for (key, value) in writes {
                ops.push(match value {
                    Some(value) => Op::Put { table, key, value },
                    None => Op::Delete { table, key },
                });
            }
        }
        ops
    }
}

/// Merges two runs in the same order (`reverse`: descending keys); `own` wins on a tie and
/// its deletes (`None`) remove the key.
fn merge_ordered<'a>(
    tree: Pairs,
    own: impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>,
    reverse: bool,
    limit: usize,
) -> Pairs {
    let mut out = Vec::with_capacity(tree.len().min(limit));
    let mut tree = tree.into_iter().peekable();
    let mut own = own.peekable();
    while out.len() < limit {
        let order = match (tree.peek(), own.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((t, _)), Some((o, _))) => {
                let order = t.as_slice().cmp(o.as_slice());
                if reverse {
                    order.reverse()
                } else {
                    order
                }
            }
        };
        if order == Ordering::Less {
            out.extend(tree.next());
            continue;
        }
        if order == Ordering::Equal {
            tree.next();
        }
        if let Some((key, Some(value))) = own.next() {
            out.push((key.clone(), value.clone()));
        }
    }
    out
}
