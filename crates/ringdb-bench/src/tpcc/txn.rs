//! [`TpccTxn`]: the transaction the five TPC-C transactions run in. On one database it is a
//! `ringdb::Transaction`. On a [`Db`](ringdb::Db) of several shards it is a
//! `ringdb::DbTransaction`, the engine's transaction across shards, with this benchmark's
//! placement (`placement.rs`): every key goes to its warehouse's shard
//! ([`DbTransaction::on_shard`]), and ITEM, which every shard holds a copy of, is read on the
//! shard the transaction runs on. Parts on other shards, their one timestamp, the wait-die
//! across shards and the atomic commit (through the cross-shard batch log when more than one
//! shard writes) are the engine's; nothing of them is here.

use super::error::TpccError;
use super::phases::{Phase, Timer};
use super::placement::Placement;
use super::tables::TpccTables;
use ringdb::{DbTransaction, Direction, TableId, Transaction};
use std::cell::Cell;
use std::ops::Bound;

/// Key-value pairs a scan returns, in its order.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// What the transactions of one shard share when the warehouses span several shards.
pub struct PlacedContext {
    /// The database.
    pub db: ringdb::Db,
    /// Where each warehouse lives.
    pub placement: Placement,
    /// The shard these transactions run on (their home warehouses').
    pub home_shard: usize,
    /// The tables (ITEM is read on the home shard).
    pub tables: TpccTables,
    /// Transactions committed with an operation on another shard.
    pub spanning_commits: Cell<u64>,
    /// Operations sent to another shard.
    pub remote_operations: Cell<u64>,
}

/// A TPC-C transaction: on one database, or on the shards of a `Db` (see the module doc).
pub enum TpccTxn<'t> {
    /// On one database.
    Local(Transaction),
    /// On the shards of a `Db`, placed by warehouse.
    Placed(Placed<'t>),
}

/// A transaction on the shards of a `Db`, its keys placed by warehouse.
pub struct Placed<'t> {
    txn: &'t mut DbTransaction,
    context: &'t PlacedContext,
    /// An operation went to another shard than the home.
    reached_elsewhere: bool,
}

impl<'t> TpccTxn<'t> {
    /// `txn` with its keys placed as `context` says.
    pub fn placed(txn: &'t mut DbTransaction, context: &'t PlacedContext) -> TpccTxn<'t> {
        TpccTxn::Placed(Placed {
            txn,
            context,
            reached_elsewhere: false,
        })
    }

    /// Whether an operation went to another shard than the home one.
    pub fn reached_elsewhere(&self) -> bool {
        matches!(self, TpccTxn::Placed(p) if p.reached_elsewhere)
    }

    /// Whether warehouse `w` lives on another shard than this transaction's home.
    pub fn is_elsewhere(&self, w: u32) -> bool {
        match self {
            TpccTxn::Local(_) => false,
            TpccTxn::Placed(p) => {
                let context = p.context;
                context.placement.shard_of_warehouse(w) != context.home_shard
            }
        }
    }

    /// The value of `key` in `table`, under a shared lock.
    pub async fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, TpccError> {
        let _timer = Timer::start(Phase::Read);
        Ok(match self {
            TpccTxn::Local(txn) => txn.get(table, key).await?,
            TpccTxn::Placed(p) => p.at(table, key).get_async(key).await?,
        })
    }

    /// The value of `key` in `table`, under an exclusive lock (it will be written).
    pub async fn get_for_update(
        &mut self,
        table: TableId,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, TpccError> {
        let _timer = Timer::start(Phase::ReadForUpdate);
        Ok(match self {
            TpccTxn::Local(txn) => txn.get_for_update(table, key).await?,
            TpccTxn::Placed(p) => p.at(table, key).get_for_update_async(key).await?,
        })
    }

    /// Writes `value` under `key` in `table` at commit.
    pub async fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), TpccError> {
        let _timer = Timer::start(Phase::Write);
        match self {
            TpccTxn::Local(txn) => txn.put(table, key, value).await?,
            TpccTxn::Placed(p) => p.at(table, key).insert_async(key, value).await?,
        }
        Ok(())
    }

    /// Deletes `key` from `table` at commit.
    pub async fn delete(&mut self, table: TableId, key: &[u8]) -> Result<(), TpccError> {
        let _timer = Timer::start(Phase::Write);
        match self {
            TpccTxn::Local(txn) => txn.delete(table, key).await?,
            TpccTxn::Placed(p) => p.at(table, key).remove_async(key).await?,
        }
        Ok(())
    }

    /// The pairs of `table` between `start` and `end`, at most `limit`, under a range lock;
    /// both bounds must lie on one shard (TPC-C scans one district).
    pub async fn scan(
        &mut self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
    ) -> Result<Rows, TpccError> {
        let _timer = Timer::start(Phase::Scan);
        let p = match self {
            TpccTxn::Local(txn) => {
                return Ok(txn.scan(table, start, end, direction, limit).await?)
            }
            TpccTxn::Placed(p) => p,
        };
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[][..],
        };
        let mut on = p.at(table, first);
        Ok(match direction {
            Direction::Forward => on.range_async::<&[u8], _>((start, end), limit).await?,
            Direction::Reverse => on.range_rev_async::<&[u8], _>((start, end), limit).await?,
        })
    }

    /// Faults in the pages of the home shard's `keys` together (no locks); other shards'
    /// keys are read when their part reads them.
    pub async fn prefetch(&self, keys: &[(TableId, &[u8])]) -> Result<(), TpccError> {
        let _timer = Timer::start(Phase::Prefetch);
        let p = match self {
            TpccTxn::Local(txn) => return Ok(txn.prefetch(keys).await?),
            TpccTxn::Placed(p) => p,
        };
        let context = p.context;
        let home: Vec<(TableId, &[u8])> = keys
            .iter()
            .filter(|(table, key)| p.shard_of(*table, key) == context.home_shard)
            .copied()
            .collect();
        Ok(p.txn.prefetch_on_async(context.home_shard, &home).await?)
    }
}

impl Placed<'_> {
    /// The shard `key` of `table` lives on: its warehouse's, or the home for the tables
    /// every shard holds.
    fn shard_of(&self, table: TableId, key: &[u8]) -> usize {
        let context = self.context;
        (context.placement)
            .shard_of_key(&context.tables, table, key)
            .unwrap_or(context.home_shard)
    }

    /// The transaction's operations on `table` for `key`'s shard, counted when remote.
    fn at(&mut self, table: TableId, key: &[u8]) -> ringdb::InTable<'_> {
        let shard = self.shard_of(table, key);
        let context = self.context;
        if shard != context.home_shard {
            self.reached_elsewhere = true;
            let counted = context.remote_operations.get() + 1;
            context.remote_operations.set(counted);
        }
        self.txn.on_shard(table, shard)
    }
}
