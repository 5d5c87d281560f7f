//! How a database is opened ([`Options`]) and what it counts ([`DbStats`]).
//!
//! The options are plain data with defaults that suit a benchmark on one NVMe drive; the checks
//! that depend on several of them (pool sizes, the log's size, the checkpoint threshold) live
//! here too, so that every way of opening a database refuses the same things with the same
//! messages.

use crate::buffer::{PoolConfig, PoolStats};
use crate::checkpoint::CheckpointStats;
use crate::error::OpenError;
use crate::memory::MemoryStats;
use crate::tree::TreeStats;
use crate::wal::{Durability, WalStats};
use ringdb_io::RuntimeStats;
use ringdb_io::{EffectiveIo, IoConfig};
use serde::Serialize;

/// The smallest log accepted, in bytes.
const MIN_WAL_BYTES: u64 = 256 * 1024;
/// A log's size is a multiple of this (its records' alignment in a file), in bytes.
const WAL_BYTES_MULTIPLE: u64 = 8;
/// The share of the pool that may be dirty before a checkpoint starts: these bounds.
const CHECKPOINT_DIRTY_RANGE: std::ops::RangeInclusive<f64> = 0.05..=0.9;

/// Whether eviction may write dirty pages back between checkpoints under a log (stealing,
/// `buffer/steal.rs`): the write-ahead rule first, and in the modes that survive a power cut
/// each page's image in the log first (torn-page protection).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Steal {
    /// In mode `none` only. Measured (issue 16, YCSB-A/B uniform, data 5x the pool:
    /// docs/results/issue16-durable.md): with `none`, stealing brings the log's cost on YCSB-A
    /// from about half of no log's throughput close to no log; in the modes that sync, each
    /// eviction round then waits for a log sync and writes every page twice (its image, then in
    /// place), which gained nothing on ext4 over zram and lost YCSB-B throughput on the virtio
    /// disk, so they keep no-steal.
    #[default]
    Auto,
    /// In every mode with a log.
    Always,
    /// Never: only checkpoints write pages (no-steal).
    Never,
}

impl Steal {
    /// Whether a database in `durability` steals under this policy.
    pub fn applies_to(self, durability: Durability) -> bool {
        match self {
            Steal::Auto => durability == Durability::None,
            Steal::Always => true,
            Steal::Never => false,
        }
    }

    /// The name its parser ([`FromStr`](std::str::FromStr)) reads: `auto`, `on` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            Steal::Auto => "auto",
            Steal::Always => "on",
            Steal::Never => "off",
        }
    }
}

impl std::str::FromStr for Steal {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Steal::Auto),
            "on" => Ok(Steal::Always),
            "off" => Ok(Steal::Never),
            _ => Err(format!("unknown steal policy {s:?}; one of: auto, on, off")),
        }
    }
}

/// How to open a database.
#[derive(Clone, Debug)]
pub struct Options {
    /// Bytes per page: a power of two from 4096 to 65536.
    pub page_size: usize,
    /// Buffer pool size in pages.
    pub pool_pages: usize,
    /// The I/O engine and its switches (fixed buffers register the pool's frames). The default
    /// engine is `auto`: io_uring where it works here, `libaio` (`O_DIRECT`) or `posix` where
    /// it is unavailable, each switch kept where allowed; [`DbStats::io`] says what runs. An
    /// explicit engine or switch that cannot run fails the open with a typed error.
    pub io: IoConfig,
    /// Victims per eviction round (`None`: the pool's default, 1/16 of it up to 64).
    pub evict_batch: Option<usize>,
    /// Start evicting below this many free frames (`None`: the default, 10% of the pool).
    pub free_target: Option<usize>,
    /// `O_DIRECT` (the buffer pool is the only cache).
    pub direct: bool,
    /// Start empty, discarding what the file or device holds.
    pub fresh: bool,
    /// How commits are made durable; `Off`: no log (pages written back on eviction and close).
    pub durability: Durability,
    /// The circular log's size in bytes (a new database; an existing one keeps its own).
    /// [`Options::WAL_BYTES_AUTO`] (the default): in a directory, the pool's size and at least
    /// 64 MiB, so one lap of the log spans a pool's worth of changes before checkpoints must
    /// free it; on a raw device 64 MiB (its regions are planned before the pool is known).
    pub wal_bytes: u64,
    /// The share of the pool a checkpoint copies at most (structural pages aside), and that
    /// structural pages (split, merged or new since the last checkpoint: only a checkpoint
    /// writes them) may fill before one starts. With a log, the memory a checkpoint stages
    /// is about this share of the pool.
    pub checkpoint_dirty: f64,
    /// With a log: whether eviction may write back pages whose records changed in place
    /// between checkpoints (see [`Steal`]).
    pub steal: Steal,
    /// With a log: the most bytes its buffer (records appended and not yet written, and the
    /// group being written) holds; a commit that finds it full waits for a log write
    /// (back-pressure). A record larger than this is still taken into an empty buffer.
    pub log_buffer_bytes: usize,
    /// Group commit (one durability point for all commits waiting); off: one per commit.
    pub group_commit: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 4096,
            pool_pages: 4096,
            io: IoConfig {
                queue_depth: 128,
                batching: ringdb_io::Batching::Adaptive,
                ..IoConfig::new(ringdb_io::EngineKind::Auto)
            },
            evict_batch: None,
            free_target: None,
            direct: true,
            fresh: false,
            durability: Durability::Fdatasync,
            wal_bytes: Options::WAL_BYTES_AUTO,
            checkpoint_dirty: 0.125,
            group_commit: true,
            steal: Steal::Auto,
            log_buffer_bytes: crate::wal::DEFAULT_BUFFER_LIMIT_BYTES,
        }
    }
}

impl Options {
    /// `wal_bytes` chosen from the pool (see [`Options::wal_bytes`]).
    pub const WAL_BYTES_AUTO: u64 = 0;
    /// The log's size when it adapts, at least.
    const WAL_BYTES_AUTO_MIN: u64 = 64 << 20;

    /// The log size a new database gets: `wal_bytes`, or when it is
    /// [`WAL_BYTES_AUTO`](Self::WAL_BYTES_AUTO) the pool's size (whole MiB) and at least
    /// 64 MiB, or 64 MiB `on_device`.
    pub fn log_bytes_for_new(&self, on_device: bool) -> u64 {
        if self.wal_bytes != Self::WAL_BYTES_AUTO {
            return self.wal_bytes;
        }
        if on_device {
            return Self::WAL_BYTES_AUTO_MIN;
        }
        let pool_bytes = (self.pool_pages as u64 * self.page_size as u64).next_multiple_of(1 << 20);
        pool_bytes.max(Self::WAL_BYTES_AUTO_MIN)
    }

    /// The buffer pool these options ask for over a target of `capacity_pages` (if bounded),
    /// validated. Under a log the pool steals only what [`PoolConfig::steal`] allows.
    pub(super) fn pool_config(&self, capacity_pages: Option<u64>) -> Result<PoolConfig, OpenError> {
        let mut cfg = PoolConfig::new(self.page_size, self.pool_pages);
        if let Some(b) = self.evict_batch {
            cfg.evict_batch = b;
        }
        if let Some(t) = self.free_target {
            cfg.free_target = t;
        }
        cfg.capacity_pages = capacity_pages;
        cfg.write_ahead = self.durability.logged();
        cfg.steal = !cfg.write_ahead || self.steal.applies_to(self.durability);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Refuses a checkpoint threshold or a log size out of range (a database with a log).
    pub(super) fn validate_log(&self) -> Result<(), OpenError> {
        if !CHECKPOINT_DIRTY_RANGE.contains(&self.checkpoint_dirty) {
            return Err(OpenError::CheckpointDirty {
                requested: self.checkpoint_dirty,
                allowed: CHECKPOINT_DIRTY_RANGE,
            });
        }
        let auto = self.wal_bytes == Self::WAL_BYTES_AUTO;
        if !auto
            && (self.wal_bytes < MIN_WAL_BYTES
                || !self.wal_bytes.is_multiple_of(WAL_BYTES_MULTIPLE))
        {
            return Err(OpenError::LogSize {
                requested: self.wal_bytes,
                minimum: MIN_WAL_BYTES,
                multiple_of: WAL_BYTES_MULTIPLE,
            });
        }
        Ok(())
    }

    /// Dirty pages that start a checkpoint in a pool of `frames`.
    pub(super) fn checkpoint_dirty_pages(&self, frames: usize) -> usize {
        ((frames as f64 * self.checkpoint_dirty) as usize).max(1)
    }
}

/// Everything the database counts.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct DbStats {
    /// The buffer manager's hits, misses, reads, writes and evictions.
    pub pool: PoolStats,
    /// The tree's restarts, splits and merges.
    pub tree: TreeStats,
    /// The runtime's submissions and completions.
    pub runtime: RuntimeStats,
    /// The engine and switches in effect, and what `auto` did without.
    pub io: EffectiveIo,
    /// The default tree's height (1: the root is a leaf).
    pub height: u32,
    /// Tables in the database, the default one included.
    pub tables: usize,
    /// Pages allocated in the data file (the meta page included).
    pub pages: u64,
    /// How commits are made durable.
    pub durability: Durability,
    /// The log's counters (`None` without a log).
    pub wal: Option<WalStats>,
    /// The checkpoints' counters (`None` without a log).
    pub checkpoints: Option<CheckpointStats>,
    /// The engine's memory by part (pool frames, log buffer, checkpoint staging, key locks).
    pub memory: MemoryStats,
}
