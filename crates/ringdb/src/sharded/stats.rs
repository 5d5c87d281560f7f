//! [`ShardedStats`]: every shard's counters, and their sums where a sum means something.

use super::Db;
use crate::db::DbStats;
use crate::error::ReadError;
use serde::Serialize;

/// Every shard's counters ([`DbStats`] each, in shard order).
#[derive(Clone, Debug, Serialize)]
pub struct ShardedStats {
    /// One entry per shard.
    pub shards: Vec<DbStats>,
}

impl ShardedStats {
    /// Page reads from storage, all shards.
    pub fn page_reads(&self) -> u64 {
        self.shards.iter().map(|s| s.pool.reads).sum()
    }

    /// Page writes to storage, all shards.
    pub fn page_writes(&self) -> u64 {
        self.shards.iter().map(|s| s.pool.writes).sum()
    }

    /// Pages allocated, all shards (meta pages included).
    pub fn pages(&self) -> u64 {
        self.shards.iter().map(|s| s.pages).sum()
    }
}

impl Db {
    /// Every shard's counters.
    pub fn stats(&self) -> Result<ShardedStats, ReadError> {
        self.check_blocking_allowed()?;
        let replies = (0..self.shard_count())
            .map(|shard| {
                self.submit_local(shard, |local, reply| {
                    reply.send(local.handle.stats(local.io.stats(), local.effective_io))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let shards = self.wait_all(replies)?;
        Ok(ShardedStats { shards })
    }

    /// Walks every shard's tree and checks every page and invariant (see
    /// [`LocalDb::verify`](crate::LocalDb::verify)); one report per shard.
    pub fn verify(&self) -> Result<Vec<crate::VerifyReport>, ReadError> {
        self.check_blocking_allowed()?;
        let replies = (0..self.shard_count())
            .map(|shard| self.submit(shard, |handle| async move { handle.verify().await }))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.wait_all(replies)?)
    }
}
