//! The tables a server keeps besides the keys: the chunks of large values and the fields of
//! hashes. Opened once at start; a clone travels with every group of commands to its shard.

use crate::chunks::Chunks;
use crate::hashes::HashFields;
use crate::watch::Watches;
use ringdb::{Db, WriteError};
use std::sync::Arc;

/// The chunk and field tables of one server's database.
#[derive(Clone)]
pub struct Store {
    /// Large values' chunks.
    pub chunks: Chunks,
    /// Hashes' fields.
    pub fields: HashFields,
    /// The keys connections WATCH, flagged by every write.
    pub watches: Arc<Watches>,
}

impl Store {
    /// Opens (creating where new) the tables of `db`.
    pub fn open(db: &Db) -> Result<Store, WriteError> {
        let chunks = Chunks::open(db)?;
        let fields = HashFields::open(db, chunks.max_record())?;
        Ok(Store {
            chunks,
            fields,
            watches: Arc::default(),
        })
    }
}
