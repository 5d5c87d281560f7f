//! `DbHandle::scan_in` (the API's [`LocalTable::scan`](super::LocalTable::scan)): a chunk of a
//! range scan in any table, in either direction: what the sharded database's streaming
//! iterators ask each shard for.

use super::DbHandle;
use crate::catalog::TableId;
use crate::error::ReadError;
use crate::tree::Direction;
use std::ops::Bound;

impl DbHandle {
    /// Up to `limit` pairs of `table` with keys within (`start`, `end`), ascending (`Forward`)
    /// or descending (`Reverse`). To resume, pass the last key returned as an excluded bound
    /// on the side the scan walks from.
    pub(crate) async fn scan_in(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ReadError> {
        if let Some(first) = self.first_failure() {
            return Err(ReadError::Failed { first });
        }
        let tree = self.tree_of(table)?;
        let mut out = Vec::with_capacity(limit.min(1024));
        tree.scan(start, end, direction, limit, &mut out).await?;
        Ok(out)
    }
}
