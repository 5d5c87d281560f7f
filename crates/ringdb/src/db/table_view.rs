//! [`LocalTable`] and [`LocalDbTable`]: one named table of a database, borrowed from a
//! [`DbHandle`] (for tasks) or a [`Db`] (blocking). Each read and write has one name, the
//! same as on the default table, instead of a `_in` twin per method taking a [`TableId`]
//! (`get_in`, `get_into_in`, `get_resident_into_in`, ...).
//!
//! Why borrowed views rather than owned handles: the tables' trees live on the database's
//! thread (a [`DbHandle`] is not `Send`), so a view is a pair (handle, id) that costs nothing
//! to make per operation; the sharded database's [`Table`](crate::Table) is the owned,
//! `Send` handle.

use super::handle::DbHandle;
use super::Db;
use crate::catalog::TableId;
use crate::error::{ReadError, WriteError};
use crate::tree::Direction;
use std::ops::Bound;

/// One table of a [`DbHandle`]'s database: [`DbHandle::in_table`].
#[derive(Clone, Copy)]
pub struct LocalTable<'h> {
    handle: &'h DbHandle,
    table: TableId,
}

impl DbHandle {
    /// The table `table` (an id from [`create_table`](Self::create_table) or
    /// [`table_id`](Self::table_id); [`TableId::DEFAULT`] is the default table). An id the
    /// database does not know fails each operation with a typed error.
    pub fn in_table(&self, table: TableId) -> LocalTable<'_> {
        LocalTable {
            handle: self,
            table,
        }
    }
}

impl LocalTable<'_> {
    /// The table's id.
    pub fn id(&self) -> TableId {
        self.table
    }

    /// The value of `key`, if present.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.handle.get_in(self.table, key).await
    }

    /// Copies the value of `key` into `out` (cleared first); returns whether it was present.
    /// One buffer for many reads: no allocation per read.
    pub async fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, ReadError> {
        self.handle.get_into_in(self.table, key, out).await
    }

    /// [`get_into`](Self::get_into) without waiting: `None` where a page on the way is not
    /// in the pool (nothing was read).
    pub fn get_resident_into(
        &self,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<bool>, ReadError> {
        self.handle.get_resident_into_in(self.table, key, out)
    }

    /// Inserts or replaces; returns whether the key existed. With a log, a commit of its own.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        self.handle.insert_in(self.table, key, value).await
    }

    /// Removes; returns whether the key existed. With a log, a commit of its own.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, WriteError> {
        self.handle.remove_in(self.table, key).await
    }

    /// Up to `limit` pairs within (`start`, `end`), walked in `direction`.
    pub async fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ReadError> {
        (self.handle)
            .scan_in(self.table, start, end, direction, limit)
            .await
    }
}

/// One table of a [`Db`], its operations blocking: [`Db::in_table`].
pub struct LocalDbTable<'d> {
    db: &'d mut Db,
    table: TableId,
}

impl Db {
    /// The table `table`, its operations blocking (see [`DbHandle::in_table`]).
    pub fn in_table(&mut self, table: TableId) -> LocalDbTable<'_> {
        LocalDbTable { db: self, table }
    }
}

impl LocalDbTable<'_> {
    /// The table's id.
    pub fn id(&self) -> TableId {
        self.table
    }

    /// The value of `key`, if present.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let (handle, table) = (self.db.handle(), self.table);
        self.db
            .block_on(async move { handle.get_in(table, key).await })
    }

    /// Inserts or replaces; returns whether the key existed.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        let (handle, table) = (self.db.handle(), self.table);
        self.db
            .block_on(async move { handle.insert_in(table, key, value).await })
    }

    /// Removes; returns whether the key existed.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool, WriteError> {
        let (handle, table) = (self.db.handle(), self.table);
        self.db
            .block_on(async move { handle.remove_in(table, key).await })
    }
}
