//! [`ShardStorage`]: where a sharded database keeps its bytes when not in its directory's
//! files. The engine's power-cut tests put every shard and the cross-shard batch log on one
//! simulated disk (`ringdb_io::SimDisk`), so that one cut hits them all at the same instant,
//! between any two steps of a commit across shards.
//!
//! The directory still holds the manifest (written once, when the database is created); only
//! the files a crash can leave half written move.

use crate::db::Storage;
use ringdb_io::BlockingFile;
use std::sync::Arc;

/// The files of a sharded database, when they are not its directory's. Not part of the API
/// (the `__internal` feature opens it, for the engine's tests).
#[cfg_attr(feature = "__internal", visibility::make(pub))]
pub(crate) trait ShardStorage: Send + Sync + std::fmt::Debug {
    /// Shard `index`'s files (data, log, double-write) and the engine over them; called on
    /// the shard's thread, each time the shard opens.
    fn shard(&self, index: usize) -> Storage;
    /// The cross-shard batch log; called each time the database opens.
    fn batch_log(&self) -> Arc<dyn BlockingFile>;
}
