//! Values larger than one B+tree record (about 990 bytes of key and value with 4 KiB pages):
//! stored as a header under the key and the payload in chunks, in a table of their own, all
//! written in the same batch, so a large value is as atomic and as durable as a small one.
//!
//! - **Where the chunks live.** A chunk's key is `generation (8) | index (4) | salt (2)`, big
//!   endian. The salt is the smallest one whose hash places the chunk on the shard of the
//!   value's key, so the engine's own routing keeps a value and its chunks on one shard: a
//!   write is one shard's batch (one log record), and a read from any thread finds the chunks
//!   with ordinary gets, in place where their pages are in the pool.
//! - **No torn reads.** Every write of a large value draws a fresh generation (64 random
//!   bits), so a chunk's key names bytes that never change: a reader that took the header and
//!   then found every chunk of its generation has exactly the value that header was written
//!   with. A chunk that is gone means the value was replaced meanwhile: the read starts over
//!   (a bounded number of times).
//! - **No chunk outlives its header** when the value is replaced, deleted or swept on its
//!   shard: the write that removes a header deletes its chunks in the same batch. The one
//!   write that does not run on the key's shard under its lock (FLUSHDB) reads the header
//!   first; a concurrent write between that read and its own can leave chunks nobody names
//!   (space, never a wrong value).
//!
//! Commands never see any of it: they get the value assembled in its inline form
//! ([`Chunks::load`]) and their writes are split again ([`Chunks::put`]).

use crate::command::{errors, Reply};
use crate::value::{encode, ChunkedHeader, Physical, Stored, CHUNKED_HEADER_BYTES, HEADER_BYTES};
use ringdb::{Db, DbHandle, ReadError, Table, TableId, WriteBatch, WriteError};
use std::hash::{BuildHasher, Hasher};

/// The table that holds the chunks (created at the server's start).
pub const TABLE: &str = "ringdb-server.chunks";

/// Bytes of a chunk's key.
pub const CHUNK_KEY_BYTES: usize = 14;

/// The reply of a read whose value kept changing under it (the worker then reads it again on
/// the key's shard, under the key's lock, where it cannot change).
pub const KEPT_CHANGING: &str = "ERR the value kept changing while it was read, try again";

/// Times a read starts over when the value changed under it.
const READ_ATTEMPTS: usize = 8;

/// Salts tried for a placed key (with S shards the first fits with probability 1/S).
const SALTS: u32 = 1 << 16;

/// Bytes of the salt at the end of a placed key.
pub const SALT_BYTES: usize = 2;

/// `base` with the smallest salt appended whose hash places the key on shard `owner` of `db`:
/// records the engine routes by their own key, kept on the shard of another key.
pub fn placed(db: &Db, owner: usize, base: &[u8]) -> Result<Vec<u8>, Reply> {
    let mut key = Vec::with_capacity(base.len() + SALT_BYTES);
    key.extend_from_slice(base);
    key.extend_from_slice(&[0; SALT_BYTES]);
    let at = base.len();
    // Bounded by SALTS; with S shards each salt fits with probability 1/S.
    for salt in 0..SALTS {
        key[at..].copy_from_slice(&(salt as u16).to_be_bytes());
        if db.shard_of(&key) == owner {
            return Ok(key);
        }
    }
    Err(Reply::error(
        "ERR no salt places the record on its key's shard",
    ))
}

/// The chunk store of one server's database.
#[derive(Clone)]
pub struct Chunks {
    db: Db,
    table: Table,
    /// The largest key + value the engine takes in one record.
    max_record: usize,
}

/// A key's value as a command reads it, and the chunked header the engine holds for it (the
/// chunks a write of the key must delete).
#[derive(Debug, Default)]
pub struct Loaded {
    /// The value in its inline form (`None`: absent, or a chunked value that has expired).
    pub value: Option<Vec<u8>>,
    /// The header under the key, when the value is stored in chunks.
    pub chunked: Option<ChunkedHeader>,
}

/// Where reads go: the engine seen from a network worker, or from the key's own shard.
pub trait Source {
    /// The bytes under `key` in the default table.
    async fn value(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError>;
    /// The bytes under `key` in the chunk table.
    async fn chunk(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError>;
}

/// Reads from a worker (or any thread): in place where pages are resident, else handed over.
pub struct Anywhere<'a>(pub &'a Chunks);

impl Source for Anywhere<'_> {
    async fn value(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.0.db.get_async(key).await
    }
    async fn chunk(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.0.table.get_async(key).await
    }
}

/// Reads on the key's shard, through its handle.
pub struct OnShard<'a> {
    /// The shard's handle.
    pub handle: &'a DbHandle,
    /// The chunk table's id.
    pub table: TableId,
}

impl Source for OnShard<'_> {
    async fn value(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.handle.get(key).await
    }
    async fn chunk(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.handle.in_table(self.table).get(key).await
    }
}

fn read_failed(error: ReadError) -> Reply {
    Reply::error(format!("ERR read failed: {error}"))
}

impl Chunks {
    /// The chunk store of `db` (its table created if it is new).
    pub fn open(db: &Db) -> Result<Chunks, WriteError> {
        let table = db.table(TABLE)?;
        let max_record = db.run_on(0, |shard| {
            let record = shard.local().max_record();
            async move { record }
        })?;
        assert!(
            max_record > CHUNK_KEY_BYTES + CHUNKED_HEADER_BYTES,
            "records of {max_record} bytes hold a chunk"
        );
        Ok(Chunks {
            db: db.clone(),
            table,
            max_record,
        })
    }

    /// The largest key + value the engine takes in one record.
    pub fn max_record(&self) -> usize {
        self.max_record
    }

    /// The chunk table's id (for reads on a shard).
    pub fn table_id(&self) -> TableId {
        self.table.id()
    }

    /// The chunk table (replication copies it whole).
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Payload bytes per chunk.
    fn chunk_bytes(&self) -> usize {
        self.max_record - CHUNK_KEY_BYTES
    }

    /// The key of chunk `index` of `generation`, placed on shard `owner`.
    fn chunk_key(&self, owner: usize, generation: u64, index: u64) -> Result<Vec<u8>, Reply> {
        let index = u32::try_from(index).map_err(|_| Reply::error("ERR value too large"))?;
        let mut base = [0u8; CHUNK_KEY_BYTES - SALT_BYTES];
        base[..8].copy_from_slice(&generation.to_be_bytes());
        base[8..].copy_from_slice(&index.to_be_bytes());
        placed(&self.db, owner, &base)
    }

    /// Adds `key`'s value (`logical`, in its inline form) to `batch`: as it is when it fits
    /// one record, else a header under the key and its chunks.
    pub fn put(&self, batch: &mut WriteBatch, key: &[u8], logical: &[u8]) -> Result<(), Reply> {
        if key.len() + logical.len() <= self.max_record {
            batch.put(key, logical);
            return Ok(());
        }
        let stored = Stored::decode(logical).map_err(|_| Reply::error(errors::FOREIGN))?;
        let header = ChunkedHeader {
            kind: stored.kind,
            deadline_ms: stored.deadline_ms,
            generation: fresh_generation(),
            length: stored.payload.len() as u64,
            chunk_bytes: self.chunk_bytes() as u32,
        };
        let owner = self.db.shard_of(key);
        for (index, piece) in stored.payload.chunks(self.chunk_bytes()).enumerate() {
            let chunk_key = self.chunk_key(owner, header.generation, index as u64)?;
            batch.put_in(self.table.id(), &chunk_key, piece);
        }
        debug_assert!(header.chunk_count() > 1);
        batch.put(key, &header.encode());
        Ok(())
    }

    /// Adds the deletion of the chunks `header` names (of `key`'s value) to `batch`.
    pub fn delete(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        header: &ChunkedHeader,
    ) -> Result<(), Reply> {
        let owner = self.db.shard_of(key);
        for index in 0..header.chunk_count() {
            batch.delete_in(
                self.table.id(),
                &self.chunk_key(owner, header.generation, index)?,
            );
        }
        Ok(())
    }

    /// The chunked header in `bytes` (what the engine holds), if they are one.
    pub fn header_of(bytes: &[u8]) -> Option<ChunkedHeader> {
        match Physical::decode(bytes) {
            Ok(Physical::Chunked(header)) => Some(header),
            _ => None,
        }
    }

    /// `key`'s value through `source`, assembled; starts over when it changes meanwhile, and
    /// answers [`KEPT_CHANGING`] when it kept changing.
    pub async fn load(
        &self,
        source: &impl Source,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Loaded, Reply> {
        self.load_for(source, key, now_ms, true).await
    }

    /// [`Chunks::load`] for a command that reads the value's bytes (`payload`) or only its
    /// kind and expiry: a large value is then not assembled, its payload left empty.
    pub async fn load_for(
        &self,
        source: &impl Source,
        key: &[u8],
        now_ms: u64,
        payload: bool,
    ) -> Result<Loaded, Reply> {
        for _ in 0..READ_ATTEMPTS {
            let Some(bytes) = source.value(key).await.map_err(read_failed)? else {
                return Ok(Loaded::default());
            };
            let Some(header) = Chunks::header_of(&bytes) else {
                return Ok(Loaded {
                    value: Some(bytes),
                    chunked: None,
                });
            };
            if header.expired_at(now_ms) {
                return Ok(Loaded {
                    value: None,
                    chunked: Some(header),
                });
            }
            if !payload {
                return Ok(Loaded {
                    value: Some(encode(header.kind, header.deadline_ms, &[])),
                    chunked: Some(header),
                });
            }
            if let Some(value) = self.assemble(source, key, &header).await? {
                return Ok(Loaded {
                    value: Some(value),
                    chunked: Some(header),
                });
            }
        }
        Err(Reply::error(KEPT_CHANGING))
    }

    /// The value `header` names in its inline form (the payload assembled after the header),
    /// or `None` when a chunk is gone (the value was replaced).
    async fn assemble(
        &self,
        source: &impl Source,
        key: &[u8],
        header: &ChunkedHeader,
    ) -> Result<Option<Vec<u8>>, Reply> {
        let owner = self.db.shard_of(key);
        // The length is a header's claim: reserve no more than the chunks prove.
        let mut value = Vec::with_capacity(HEADER_BYTES + header.length.min(1 << 20) as usize);
        value.extend_from_slice(&encode(header.kind, header.deadline_ms, &[]));
        for index in 0..header.chunk_count() {
            let chunk_key = self.chunk_key(owner, header.generation, index)?;
            match source.chunk(&chunk_key).await.map_err(read_failed)? {
                Some(piece) if piece.len() <= header.chunk_bytes as usize => {
                    value.extend_from_slice(&piece)
                }
                Some(_) => return Err(Reply::error(errors::FOREIGN)),
                None => return Ok(None),
            }
        }
        if (value.len() - HEADER_BYTES) as u64 != header.length {
            return Err(Reply::error(errors::FOREIGN));
        }
        Ok(Some(value))
    }
}

/// 64 bits no other write draws (a fresh `RandomState` is seeded per process and advanced
/// per call; the clock is mixed in too).
pub fn fresh_generation() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    hasher.write_u128(nanos);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_differ() {
        let mut seen: Vec<u64> = (0..10_000).map(|_| fresh_generation()).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 10_000);
    }
}
