//! Where a hash's fields live and how a hash command runs on the hash's shard.
//!
//! - **One record per field**, in the table `ringdb-server.fields`, keyed
//!   `generation (8, big endian) | field | salt (2)`. The key holds the hash's header (a value of
//!   kind hash: the generation and the field count). The salt places every field on the hash
//!   key's shard (`chunks::placed`), so a hash command is one shard's work and its writes one
//!   batch there; the fields of one hash are adjacent in key order, so all of them are one
//!   range scan.
//! - **A generation per hash**, drawn when it is created: a hash that is deleted, overwritten
//!   or expires and is created again gets a new one, so fields of the old hash are never read
//!   as the new one's. The batch that removes or replaces a header deletes its fields too (a
//!   hash is bounded by what one log record can delete: a quarter of the log).
//! - **Commands** are pure functions of the fields they name (`command/hashes.rs`); this module
//!   reads those fields (through the group's own pending writes), runs the function, and keeps
//!   the header's count from what it put and deleted. An empty hash is removed, as in Redis.

use crate::chunks::{fresh_generation, placed, SALT_BYTES};
use crate::command::hashes::{HashFn, HashView, Needs};
use crate::command::{errors, KeyOp, Reply, Write};
use crate::group::{live, Group};
use crate::store::Store;
use crate::value::{encode, HashHeader, Kind, Stored};
use ringdb::{Db, DbHandle, Direction, Table, TableId, WriteBatch, WriteError};
use std::ops::Bound;

/// The table that holds the fields.
pub const TABLE: &str = "ringdb-server.fields";

/// Fields read per scan of a hash.
const SCAN_FIELDS: usize = 1024;

/// Scans of one hash's fields at most (a hash past `SCAN_FIELDS` times this is not read whole).
const SCANS_MAX: usize = 1 << 20;

/// The field table of one server's database.
#[derive(Clone)]
pub struct HashFields {
    db: Db,
    table: Table,
    /// The largest key + value the engine takes in one record.
    max_record: usize,
}

impl HashFields {
    /// The field table of `db` (created if it is new); `max_record` is the engine's record
    /// bound.
    pub fn open(db: &Db, max_record: usize) -> Result<HashFields, WriteError> {
        Ok(HashFields {
            db: db.clone(),
            table: db.table(TABLE)?,
            max_record,
        })
    }

    /// The table's id.
    pub fn table_id(&self) -> TableId {
        self.table.id()
    }

    /// The field table (replication copies it whole).
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The record key of `field` of the hash `generation` under `key`.
    pub fn field_key(&self, key: &[u8], generation: u64, field: &[u8]) -> Result<Vec<u8>, Reply> {
        let mut base = Vec::with_capacity(8 + field.len());
        base.extend_from_slice(&generation.to_be_bytes());
        base.extend_from_slice(field);
        placed(&self.db, self.db.shard_of(key), &base)
    }

    /// Refuses a field and value too large for one record.
    fn check_sizes(&self, puts: &[(Vec<u8>, Vec<u8>)]) -> Result<(), Reply> {
        let overhead = 8 + SALT_BYTES;
        match puts
            .iter()
            .find(|(field, value)| overhead + field.len() + value.len() > self.max_record)
        {
            Some(_) => Err(Reply::error(format!(
                "ERR a hash field and its value may hold at most {} bytes together",
                self.max_record - overhead
            ))),
            None => Ok(()),
        }
    }

    /// Every field record of the hash `generation`, on the shard (key, value).
    pub async fn scan(
        &self,
        handle: &DbHandle,
        generation: u64,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Reply> {
        let (records, next) = self.page(handle, generation, 0, usize::MAX).await?;
        debug_assert_eq!(next, 0, "a page without a count ends at the last record");
        Ok(records)
    }

    /// A page of the hash `generation`'s field records for HSCAN: from `cursor` (0: the first
    /// record) about `count` records (`usize::MAX`: all of them), and the cursor of the next
    /// page (0 after the last).
    ///
    /// A cursor is the first 8 bytes after the generation of the next record not returned
    /// (zero-padded, big endian); a page starts at those bytes with trailing zeros removed,
    /// which sort at or before that record, so no record is skipped. A page takes every
    /// record that shares its last record's 8 bytes, so the next cursor sorts past every
    /// record returned and iteration always advances (records are returned once, in key
    /// order; a field written meanwhile may or may not be seen, as Redis allows).
    async fn page(
        &self,
        handle: &DbHandle,
        generation: u64,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, u64), Reply> {
        let mut start = generation.to_be_bytes().to_vec();
        let bytes = cursor.to_be_bytes();
        let kept = bytes
            .iter()
            .rposition(|&b| b != 0)
            .map_or(0, |last| last + 1);
        start.extend_from_slice(&bytes[..kept]);
        let end = generation.checked_add(1).map(u64::to_be_bytes);
        let end_bound = end
            .as_ref()
            .map_or(Bound::Unbounded, |end| Bound::Excluded(&end[..]));
        let table = handle.in_table(self.table.id());
        let mut taken: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for _ in 0..SCANS_MAX {
            let from = match taken.last() {
                Some((last, _)) => Bound::Excluded(last.as_slice()),
                None => Bound::Included(start.as_slice()),
            };
            // One more than the page needs (it tells whether records follow), in reads of at
            // most `SCAN_FIELDS`.
            let wanted = count.saturating_sub(taken.len()).clamp(1, SCAN_FIELDS) + 1;
            let page = table
                .scan(from, end_bound, Direction::Forward, wanted)
                .await
                .map_err(|error| Reply::error(format!("ERR read failed: {error}")))?;
            let exhausted = page.len() < wanted;
            for (record, value) in page {
                let same_cursor = taken
                    .last()
                    .is_some_and(|(last, _)| record_cursor(last) == record_cursor(&record));
                if taken.len() >= count && !same_cursor {
                    return Ok((taken, record_cursor(&record)));
                }
                taken.push((record, value));
            }
            if exhausted {
                return Ok((taken, 0));
            }
        }
        Err(Reply::error("ERR hash too large to read whole"))
    }

    /// Adds the deletion of every field of the hash `generation` to `batch`, from any thread
    /// that may block (FLUSHDB, MSET over several shards).
    pub fn delete_all_blocking(
        &self,
        generation: u64,
        batch: &mut WriteBatch,
    ) -> Result<(), Reply> {
        for pair in self.table.prefix(&generation.to_be_bytes()) {
            let (key, _) =
                pair.map_err(|error| Reply::error(format!("ERR read failed: {error}")))?;
            batch.delete_in(self.table.id(), &key);
        }
        Ok(())
    }

    /// The fields `needs` names of the hash `header` under `key`: the group's pending writes
    /// first, then the tree.
    async fn view(
        &self,
        handle: &DbHandle,
        group: &Group,
        (key, header): (&[u8], HashHeader),
        needs: Needs,
        arguments: &[Vec<u8>],
    ) -> Result<HashView, Reply> {
        let mut view = HashView {
            count: header.count,
            ..HashView::default()
        };
        let generation = header.generation;
        let page = crate::command::hashes::scan_page(arguments);
        let pending = group.pending_fields(generation).next().is_some();
        if let (Needs::Page, Some((cursor, count)), false) = (needs, page, pending) {
            let (records, next) = self.page(handle, generation, cursor, count).await?;
            for (record, value) in records {
                view.fields.insert(field_of(&record).to_vec(), value);
            }
            view.next_cursor = Some(next);
            return Ok(view);
        }
        if matches!(needs, Needs::All | Needs::Page) {
            for (record, value) in self.scan(handle, generation).await? {
                view.fields.insert(field_of(&record).to_vec(), value);
            }
            for (field, value) in group.pending_fields(generation) {
                match value {
                    Some(value) => view.fields.insert(field.to_vec(), value.to_vec()),
                    None => view.fields.remove(field),
                };
            }
            return Ok(view);
        }
        let table = handle.in_table(self.table.id());
        for field in needs.named(arguments) {
            let value = match group.pending_field(generation, field) {
                Some(pending) => pending.map(<[u8]>::to_vec),
                None => table
                    .get(&self.field_key(key, generation, field)?)
                    .await
                    .map_err(|error| Reply::error(format!("ERR read failed: {error}")))?,
            };
            if let Some(value) = value {
                view.fields.insert(field.to_vec(), value);
            }
        }
        Ok(view)
    }
}

/// Whether hash command `name` reads at most one field and writes nothing: such a command
/// runs where the request arrived, reading in place, as GET does.
pub fn reads_in_place(name: &str) -> bool {
    matches!(name, "HGET" | "HEXISTS" | "HSTRLEN" | "HLEN")
}

/// A command of [`reads_in_place`] on any thread, given the key's live value: the header, then
/// the one field it names. The answer is the field as it was at some moment after the header
/// was read (absent if the hash was removed since), as a read on the shard would give.
pub async fn read_anywhere(
    store: &Store,
    op: &KeyOp,
    (run, needs): (HashFn, Needs),
    current: Option<Stored<'_>>,
) -> Reply {
    let header = match current {
        None => None,
        Some(stored) if stored.kind != Kind::Hash => return Reply::error(errors::WRONG_TYPE),
        Some(stored) => match HashHeader::decode(stored.payload) {
            Ok(header) => Some(header),
            Err(_) => return Reply::error(errors::FOREIGN),
        },
    };
    let Some(header) = header else {
        return run(&op.arguments, None).reply;
    };
    let mut view = HashView {
        count: header.count,
        ..HashView::default()
    };
    for field in needs.named(&op.arguments) {
        let record = match store.fields.field_key(&op.key, header.generation, field) {
            Ok(record) => record,
            Err(reply) => return reply,
        };
        match store.fields.table.get_async(&record).await {
            Ok(Some(value)) => {
                view.fields.insert(field.to_vec(), value);
            }
            Ok(None) => {}
            Err(error) => return Reply::error(format!("ERR read failed: {error}")),
        }
    }
    run(&op.arguments, Some(&view)).reply
}

/// HSCAN's cursor for a field record: the 8 bytes after its generation, zero-padded, big
/// endian (see [`HashFields::page`]).
fn record_cursor(record: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let after = record.get(8..).unwrap_or_default();
    let length = after.len().min(8);
    bytes[..length].copy_from_slice(&after[..length]);
    u64::from_be_bytes(bytes)
}

/// The field in a field record's key.
pub fn field_of(record: &[u8]) -> &[u8] {
    record
        .get(8..record.len().saturating_sub(SALT_BYTES))
        .unwrap_or_default()
}

/// The hash under `op.key` as the group sees it: header and expiry, or the error reply.
async fn hash_of(
    store: &Store,
    handle: &DbHandle,
    group: &mut Group,
    key: &[u8],
    now: u64,
) -> Result<Option<(HashHeader, Option<u64>)>, Reply> {
    let current = group.current(store, handle, key, now).await?;
    match live(current.as_deref(), now)? {
        None => Ok(None),
        Some(stored) if stored.kind != Kind::Hash => Err(Reply::error(errors::WRONG_TYPE)),
        Some(stored) => match HashHeader::decode(stored.payload) {
            Ok(header) => Ok(Some((header, stored.deadline_ms))),
            Err(_) => Err(Reply::error(errors::FOREIGN)),
        },
    }
}

/// Runs a hash command on its shard, inside `group`: the reply and whether it wrote.
pub async fn run_hash(
    store: &Store,
    handle: &DbHandle,
    group: &mut Group,
    op: &KeyOp,
    (run, needs): (HashFn, Needs),
    now: u64,
) -> (Reply, bool) {
    let fields = &store.fields;
    let hash = match hash_of(store, handle, group, &op.key, now).await {
        Ok(hash) => hash,
        Err(reply) => return (reply, false),
    };
    let view = match hash {
        Some((header, _)) => {
            let read = fields.view(handle, group, (&op.key, header), needs, &op.arguments);
            match read.await {
                Ok(view) => Some(view),
                Err(reply) => return (reply, false),
            }
        }
        None => None,
    };
    let effect = run(&op.arguments, view.as_ref());
    if effect.puts.is_empty() && effect.deletes.is_empty() {
        return (effect.reply, false);
    }
    if let Err(reply) = fields.check_sizes(&effect.puts) {
        return (reply, false);
    }
    let (generation, count, deadline) = match hash {
        Some((header, deadline)) => (header.generation, header.count, deadline),
        None => {
            let generation = fresh_generation();
            group.created_hash(&op.key, generation);
            (generation, 0, None)
        }
    };
    let present = |field: &[u8]| view.as_ref().is_some_and(|v| v.fields.contains_key(field));
    let added = effect.puts.iter().filter(|(f, _)| !present(f)).count() as u64;
    let removed = effect.deletes.iter().filter(|f| present(f)).count() as u64;
    let count = (count + added).saturating_sub(removed);
    for (field, value) in effect.puts {
        group.write_field(&op.key, generation, field, Some(value));
    }
    for field in effect.deletes {
        group.write_field(&op.key, generation, field, None);
    }
    let write = match count {
        0 => Write::Delete,
        count => Write::Put(encode(
            Kind::Hash,
            deadline,
            &HashHeader { generation, count }.encode(),
        )),
    };
    group.record(&op.key, write);
    (effect.reply, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_comes_back_out_of_its_record_key() {
        let mut record = 7u64.to_be_bytes().to_vec();
        record.extend_from_slice(b"field");
        record.extend_from_slice(&[0, 3]);
        assert_eq!(field_of(&record), b"field");
        assert_eq!(field_of(b"short"), b"");
    }
}
