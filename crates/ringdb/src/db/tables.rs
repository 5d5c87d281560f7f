//! Named tables as the tasks see them: creating one, finding one, and reads and writes in one.
//!
//! Creating a table is one synchronous step, so that no other task (and no checkpoint's cut)
//! can see half of it: the waits it may need (room in the log, free frames for its root leaf
//! and, for the first table, the catalog page) come first, each followed by a fresh look at
//! the catalog, since another task may have created the same name meanwhile. With a log the
//! step appends the create record before it changes anything (log first, as every commit),
//! and the call returns once that record is durable. Without a log the table is on disk after
//! the next flush, like everything else.

use super::handle::DbHandle;
use crate::catalog::TableId;
use crate::error::{ReadError, StorageError, WaitFor, WriteError};
use crate::tree::{probe_all, BTree, Probe};
use crate::wal::Op;
use std::rc::Rc;

/// Rounds of waiting (for log room or free frames) a creation makes before it gives up: each
/// round ends with what the last one lacked, so two or three always suffice.
const CREATE_ROUNDS_MAX: u64 = 1 << 10;

impl DbHandle {
    /// Creates the table `name` (1..=64 bytes of UTF-8) and returns its id; a name that
    /// exists already returns its table's id (creating is idempotent). With a log, the
    /// creation is a record of its own and durable when this returns.
    pub async fn create_table(&self, name: &str) -> Result<TableId, WriteError> {
        self.check_failed()?;
        let bm = self.tree.buffer();
        let record_bytes = self.durable.as_ref().map(|d| d.wal.create_record_len(name));
        for _ in 0..CREATE_ROUNDS_MAX {
            self.check_failed()?;
            if let Some(table) = self.tables.check_create(name)? {
                return self.existing_table(table).await;
            }
            let pages = self.tables.pages_to_create();
            bm.check_room(pages)?;
            if let (Some(d), Some(len)) = (&self.durable, record_bytes) {
                if !d.wal.has_room(len) {
                    self.wait_for_log_room(d, len).await?;
                    continue;
                }
            }
            if bm.free_frames() < pages {
                bm.ensure_free(pages).await?;
                continue;
            }
            // From here to the end of `create_now` nothing awaits: the creation is atomic.
            return self.create_now(name).await;
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::FreeFrames {
                frames: self.tables.pages_to_create(),
            },
            rounds: CREATE_ROUNDS_MAX,
        }
        .into())
    }

    /// A table another call created: with a log, returned once its record is durable (the
    /// call that created it may still be waiting for that).
    async fn existing_table(&self, table: TableId) -> Result<TableId, WriteError> {
        if let Some(d) = &self.durable {
            d.wal.wait_durable(d.wal.end()).await?;
        }
        Ok(table)
    }

    /// Creates `name` with the next id (the caller checked the name, the log's room and the
    /// free frames, with no await since): the log record first, then the pages.
    async fn create_now(&self, name: &str) -> Result<TableId, WriteError> {
        let table = self.tables.next_id();
        let Some(d) = &self.durable else {
            self.tables.create_now(table, name)?;
            return Ok(table);
        };
        let (start, end) = d.wal.append_create_table(table, name)?;
        self.tree.buffer().set_lsn_hint(end);
        if let Err(e) = self.tables.create_now(table, name) {
            return Err(Self::fail(d, e));
        }
        d.wal.applied(start);
        d.wal.wait_durable(end).await?;
        Ok(table)
    }

    /// The id of the table named `name`, if the database holds one (the default table has
    /// no name: [`TableId::DEFAULT`]).
    pub fn table_id(&self, name: &str) -> Option<TableId> {
        self.tables.id_of(name)
    }

    /// The named tables and their ids, ids ascending; the default table is not listed.
    pub fn tables(&self) -> Vec<(String, TableId)> {
        self.tables.list()
    }

    /// The value of `key` in `table`, if present.
    pub(crate) async fn get_in(
        &self,
        table: TableId,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, ReadError> {
        if let Some(first) = self.first_failure() {
            return Err(ReadError::Failed { first });
        }
        if table == TableId::DEFAULT {
            return Ok(self.tree.get(key).await?);
        }
        Ok(self.tree_of(table)?.get(key).await?)
    }

    /// Copies the value of `key` in `table` into `out` (cleared first); returns whether it was
    /// present. One buffer for many reads: no allocation per read.
    pub(crate) async fn get_into_in(
        &self,
        table: TableId,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool, ReadError> {
        if let Some(first) = self.first_failure() {
            return Err(ReadError::Failed { first });
        }
        if table == TableId::DEFAULT {
            return Ok(self.tree.get_into(key, out).await?);
        }
        Ok(self.tree_of(table)?.get_into(key, out).await?)
    }

    /// `get_into_in` without waiting: `None` where a page on the way is
    /// not in the pool (nothing was read).
    pub(crate) fn get_resident_into_in(
        &self,
        table: TableId,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<bool>, ReadError> {
        if let Some(first) = self.first_failure() {
            return Err(ReadError::Failed { first });
        }
        if table == TableId::DEFAULT {
            return Ok(self.tree.get_resident_into(key, out)?);
        }
        Ok(self.tree_of(table)?.get_resident_into(key, out)?)
    }

    /// For each of `keys` (table, key), whether every page on the way to it is in the pool,
    /// probed a level at a time for all of them (`tree/probe.rs`); the leaves found are the
    /// keys' hints. Nothing is read.
    pub(crate) fn probe_resident_all(
        &self,
        keys: &[(TableId, &[u8])],
    ) -> Result<Vec<bool>, ReadError> {
        if let Some(first) = self.first_failure() {
            return Err(ReadError::Failed { first });
        }
        if let [(table, key)] = keys {
            // One key: nothing to overlap.
            return Ok(vec![self.tree_of(*table)?.probe_resident(key)?]);
        }
        let trees = (keys.iter())
            .map(|(table, _)| self.tree_of(*table))
            .collect::<Result<Vec<_>, _>>()?;
        let mut probes: Vec<Probe<'_>> = (trees.iter().zip(keys))
            .map(|(tree, (_, key))| Probe::new(tree, key))
            .collect();
        probe_all(&mut probes)?;
        Ok(probes.iter().map(Probe::resident).collect())
    }

    /// Inserts or replaces in `table`; returns whether the key existed. With a log, a commit
    /// of its own.
    pub(crate) async fn insert_in(
        &self,
        table: TableId,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool, WriteError> {
        if self.durable.is_none() {
            return self.tree_for_write(table)?.insert(key, value).await;
        }
        let (key, value) = (key.to_vec(), value.to_vec());
        self.write_one(Op::Put { table, key, value }).await
    }

    /// Removes from `table`; returns whether the key existed. With a log, a commit of its
    /// own.
    pub(crate) async fn remove_in(&self, table: TableId, key: &[u8]) -> Result<bool, WriteError> {
        if self.durable.is_none() {
            return self.tree_for_write(table)?.remove(key).await;
        }
        let key = key.to_vec();
        self.write_one(Op::Delete { table, key }).await
    }

    /// The tree of `table` (for scans), or why there is none.
    pub(crate) fn tree_of(&self, table: TableId) -> Result<Rc<BTree>, ReadError> {
        self.tables
            .tree(table)
            .ok_or(ReadError::NoSuchTable { table })
    }

    /// The tree of `table` for a write, or why there is none.
    pub(super) fn tree_for_write(&self, table: TableId) -> Result<Rc<BTree>, WriteError> {
        self.tables
            .tree(table)
            .ok_or(WriteError::NoSuchTable { table })
    }
}
