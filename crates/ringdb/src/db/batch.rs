//! Write batches: the unit of atomicity. With a log a batch is one log record, replayed whole
//! or not at all after a crash; without one its operations simply run in order. A batch may
//! span tables: each operation names its own.

use crate::catalog::TableId;
use crate::wal::Op;

/// A write batch: puts and deletes that commit atomically (with a log: all or nothing after a
/// crash, and durable when [`DbHandle::write`](super::DbHandle::write) returns, per the
/// durability mode).
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    ops: Vec<Op>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put of `key` -> `value` in the default table (a later operation on the same
    /// key wins).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.put_in(TableId::DEFAULT, key, value)
    }

    /// Adds a delete of `key` in the default table.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.delete_in(TableId::DEFAULT, key)
    }

    /// Adds a put of `key` -> `value` in `table` (a later operation on the same key of the
    /// same table wins). A table the database does not hold fails the whole batch.
    pub fn put_in(&mut self, table: TableId, key: &[u8], value: &[u8]) -> &mut Self {
        self.ops.push(Op::Put {
            table,
            key: key.to_vec(),
            value: value.to_vec(),
        });
        self
    }

    /// Adds a delete of `key` in `table`.
    pub fn delete_in(&mut self, table: TableId, key: &[u8]) -> &mut Self {
        self.ops.push(Op::Delete {
            table,
            key: key.to_vec(),
        });
        self
    }

    /// Moves every operation of `other` to the end of this batch (later operations win, as
    /// always): the parts several tasks prepared, committed as one.
    pub fn append(&mut self, other: WriteBatch) -> &mut Self {
        self.ops.extend(other.ops);
        self
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The operations, in the order they were added.
    pub(crate) fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// A batch of `ops` (one shard's part of a batch that spans shards).
    pub(crate) fn from_ops(ops: Vec<Op>) -> WriteBatch {
        WriteBatch { ops }
    }
}
