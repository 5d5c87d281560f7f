//! [`DbBuilder`]: how many shards, and the [`Options`] every shard opens with.
//!
//! The defaults work without any setting: one shard per CPU this process may use (each pinned
//! to its CPU), the `auto` engine (io_uring where it works), a log made durable by `fdatasync`
//! with group commit, DEFER_TASKRUN rings. The buffer pool asked for is the whole database's:
//! each shard gets an equal slice of it.

use super::manifest;
use super::shard::ShardStart;
use super::storage::ShardStorage;
use super::Db;
use crate::db::Options;
use crate::error::{OpenError, ShardSetupError};
use crate::wal::Durability;
use ringdb_io::{EngineKind, SetupMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The default spin of a blocking call before it parks, when some CPU has no shard: about one
/// round trip to a busy shard, so a reply that is almost there costs no sleep and wake-up. When
/// every CPU runs a shard, a spinning caller takes a shard's CPU, so the default is no spin
/// (measured with 8 client threads on 2 shards and 2 CPUs, where reads per second fell with every
/// step of spin: docs/results/issue12-thread-per-core.md).
const SPIN_SPARE_CPU: Duration = Duration::from_micros(20);

/// Settings for opening a [`Db`]; [`DbBuilder::open`] opens it.
#[derive(Clone, Debug)]
pub struct DbBuilder {
    path: PathBuf,
    options: Options,
    shards: Option<usize>,
    pin: bool,
    /// `None`: [`SPIN_SPARE_CPU`] when some CPU has no shard, else none.
    spin: Option<Duration>,
    /// `None`: the directory's files.
    storage: Option<Arc<dyn ShardStorage>>,
}

impl DbBuilder {
    /// The defaults for a database at `path`.
    pub(super) fn new(path: &Path) -> DbBuilder {
        let mut options = Options::default();
        options.io.setup = SetupMode::Defer;
        DbBuilder {
            path: path.to_path_buf(),
            options,
            shards: None,
            pin: true,
            spin: None,
            storage: None,
        }
    }

    /// The number of shards of a new database (default: the CPUs this process may use). An
    /// existing database keeps its own; asking for another count is refused.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Every other setting, for all shards ([`Options::pool_pages`] is the whole database's
    /// pool, divided among the shards).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// The buffer pool in bytes, for the whole database.
    pub fn pool_bytes(mut self, bytes: u64) -> Self {
        self.options.pool_pages = (bytes / self.options.page_size as u64) as usize;
        self
    }

    /// How commits are made durable.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.options.durability = durability;
        self
    }

    /// The I/O engine.
    pub fn engine(mut self, engine: EngineKind) -> Self {
        self.options.io.engine = engine;
        self
    }

    /// Starts empty, discarding what the database holds.
    pub fn fresh(mut self, fresh: bool) -> Self {
        self.options.fresh = fresh;
        self
    }

    /// Whether each shard's thread is pinned to a CPU (default: yes).
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// How long a blocking call spins for its reply before it parks (default: 20 us when some
    /// CPU runs no shard, else none; zero: park at once, the least CPU).
    pub fn spin(mut self, spin: Duration) -> Self {
        self.spin = Some(spin);
        self
    }

    /// Keeps the shards' files and the batch log in `storage` instead of the directory (which
    /// still holds the manifest): a simulated disk in the engine's power-cut tests.
    #[cfg(feature = "__internal")]
    pub fn storage(mut self, storage: Arc<dyn ShardStorage>) -> Self {
        self.storage = Some(storage);
        self
    }

    /// The settings every shard opens with.
    pub fn options_ref(&self) -> &Options {
        &self.options
    }

    /// Opens the database: checks the manifest (or writes it), then starts every shard.
    pub fn open(self) -> Result<Db, OpenError> {
        let cpus = ringdb_io::affinity::allowed_cpus();
        let default_count = cpus.len().clamp(1, manifest::SHARDS_MAX);
        if let Some(shards) = self.shards {
            manifest::check_count(shards)?;
        }
        let (paths, created) = if self.is_directory() {
            manifest::resolve(&self.path, self.shards, default_count)?
        } else {
            (self.single_target()?, manifest::Created::default())
        };
        let db_id = super::next_db_id();
        let shard_count = paths.len();
        let starts = paths
            .into_iter()
            .enumerate()
            .map(|(index, path)| ShardStart {
                index,
                db_id,
                path,
                options: self.shard_options(index, shard_count, &cpus),
                storage: self.storage.clone(),
            })
            .collect();
        let spare_cpu = shard_count < cpus.len();
        let spin = self.spin.unwrap_or(if spare_cpu {
            SPIN_SPARE_CPU
        } else {
            Duration::ZERO
        });
        let opened = Db::start(&self.path, starts, spin).and_then(|db| {
            let storage = self.storage.as_deref();
            db.start_coordinator(&self.path, self.options.durability, storage)?;
            Ok(db)
        });
        if opened.is_err() {
            // A new database whose shards could not open: leave nothing behind.
            created.undo();
        }
        opened
    }

    /// Whether the path is (or will be) a directory: one that exists, or a new path without
    /// an extension.
    fn is_directory(&self) -> bool {
        self.path.is_dir() || (!self.path.exists() && self.path.extension().is_none())
    }

    /// A file or device holds one shard.
    fn single_target(&self) -> Result<Vec<PathBuf>, OpenError> {
        match self.shards {
            Some(requested) if requested != 1 => Err(ShardSetupError::NeedsDirectory {
                path: self.path.clone(),
                requested,
            }
            .into()),
            _ => Ok(vec![self.path.clone()]),
        }
    }

    /// Shard `index`'s options: its slice of the pool, its CPU.
    fn shard_options(&self, index: usize, shard_count: usize, cpus: &[u32]) -> Options {
        let mut options = self.options.clone();
        options.pool_pages = (self.options.pool_pages / shard_count).max(1);
        if self.pin && shard_count <= cpus.len() && options.io.cpu.is_none() {
            options.io.cpu = Some(cpus[index]);
        }
        options
    }
}
