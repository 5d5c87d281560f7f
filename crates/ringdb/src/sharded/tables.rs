//! Named tables (keyspaces) of a [`Db`]: each its own B+tree on every shard.
//!
//! A table's id names it in log records and batches, so it must be the same on every shard:
//! tables are created on all shards, one at a time and in the same order (under a lock), and
//! at open the shards are reconciled (a crash between two shards' creations leaves the last
//! table on some shards only: it is created on the others, which then assign the same id).
//! Names that start with `ringdb.system.` are the engine's own and refused.

use super::Db;
use crate::catalog::TableId;
use crate::db::WriteBatch;
use crate::error::{OpenError, ReadError, ShardError, WriteError};
use std::ops::RangeBounds;
use std::sync::Arc;

pub use crate::catalog::SYSTEM_PREFIX;

/// A table of a [`Db`]: a cheap handle (`Clone + Send + Sync`) with the same operations as
/// the database's default table.
#[derive(Clone)]
pub struct Table {
    db: Db,
    id: TableId,
    name: Arc<str>,
}

impl Db {
    /// The table `name`, created (on every shard, durably) if it does not exist yet.
    pub fn table(&self, name: &str) -> Result<Table, WriteError> {
        if name.starts_with(SYSTEM_PREFIX) {
            return Err(WriteError::ReservedTableName {
                name: name.to_string(),
            });
        }
        self.check_blocking_allowed()?;
        let _one_creation_at_a_time = self
            .shared
            .table_creation
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let id = self.create_everywhere(name)?;
        Ok(Table {
            db: self.clone(),
            id,
            name: Arc::from(name),
        })
    }

    /// The names of the tables (the default table and the engine's own left out).
    pub fn tables(&self) -> Result<Vec<String>, ReadError> {
        let tables = self.call(0, |h| async move { h.tables() })?;
        Ok(tables
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| !name.is_empty() && !name.starts_with(SYSTEM_PREFIX))
            .collect())
    }

    /// Installs `tap` (or with `None` removes it) on every shard: from its return on, every
    /// logged commit runs it (see [`CommitTap`](crate::CommitTap) for the order it sees).
    /// Returns whether the database has a log; without one, no tap ever runs.
    pub fn set_commit_tap(&self, tap: Option<crate::CommitTap>) -> Result<bool, ShardError> {
        let mut logged = true;
        for shard in 0..self.shard_count() {
            let tap = tap.clone();
            logged &= self.call(shard, move |h| async move { h.set_commit_tap(tap) })?;
        }
        Ok(logged)
    }

    /// Creates `name` on every shard, in shard order; every shard must give it the same id.
    pub(super) fn create_everywhere(&self, name: &str) -> Result<TableId, WriteError> {
        let mut ids = Vec::with_capacity(self.shard_count());
        for shard in 0..self.shard_count() {
            let name = name.to_string();
            ids.push(self.call(shard, move |h| async move { h.create_table(&name).await })??);
        }
        let first = ids[0];
        match ids.iter().position(|&id| id != first) {
            None => Ok(first),
            Some(shard) => Err(WriteError::TableIdsDiffer {
                name: name.to_string(),
                shard,
            }),
        }
    }

    /// At open: creates on every shard the tables some shards lack, in the order of the shard
    /// that has the most, so that ids agree everywhere.
    pub(super) fn reconcile_tables(&self) -> Result<(), OpenError> {
        let mut lists = Vec::with_capacity(self.shard_count());
        for shard in 0..self.shard_count() {
            let mut tables = self.call(shard, |h| async move { h.tables() })?;
            tables.sort_by_key(|(_, id)| *id);
            lists.push(tables);
        }
        let longest = lists
            .iter()
            .max_by_key(|l| l.len())
            .cloned()
            .unwrap_or_default();
        for (name, _) in longest.iter().filter(|(name, _)| !name.is_empty()) {
            self.create_everywhere(name)?;
        }
        Ok(())
    }
}

impl Table {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table's id, for [`WriteBatch::put_in`] and [`WriteBatch::delete_in`].
    pub fn id(&self) -> TableId {
        self.id
    }

    /// The value of `key`, if present (read on the caller's thread when its pages are in
    /// the pool, as [`Db::get`]).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let mut value = Vec::new();
        let found = self.db.get_into_in(self.id, key, &mut value)?;
        Ok(found.then_some(value))
    }

    /// [`Table::get`] from a task (on a shard, or any code that may not block): read in place
    /// when its pages are in the pool, else handed over to the key's shard, as
    /// [`Db::get_async`].
    pub async fn get_async(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.db.get_async_in(self.id, key).await
    }

    /// [`Table::get`] into `out` (cleared first): whether `key` was present.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, ReadError> {
        self.db.get_into_in(self.id, key, out)
    }

    /// Inserts or replaces; returns whether the key existed.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        let (key, value, table) = (key.to_vec(), value.to_vec(), self.id);
        let shard = self.db.shard_of(&key);
        self.db.call(shard, move |h| async move {
            h.insert_in(table, &key, &value).await
        })?
    }

    /// Removes; returns whether the key existed.
    pub fn remove(&self, key: &[u8]) -> Result<bool, WriteError> {
        let (key, table) = (key.to_vec(), self.id);
        let shard = self.db.shard_of(&key);
        self.db.call(
            shard,
            move |h| async move { h.remove_in(table, &key).await },
        )?
    }

    /// The pairs with keys in `range`, in key order (`.rev()` for descending), streamed.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> super::Range {
        self.db.range(range).in_table(self.id)
    }

    /// The pairs whose keys start with `prefix`, in key order, streamed.
    pub fn prefix(&self, prefix: &[u8]) -> super::Range {
        self.db.prefix(prefix).in_table(self.id)
    }

    /// A batch with a put into this table added (a shorthand for [`WriteBatch::put_in`]).
    pub fn put_into(&self, batch: &mut WriteBatch, key: &[u8], value: &[u8]) {
        batch.put_in(self.id, key, value);
    }
}
