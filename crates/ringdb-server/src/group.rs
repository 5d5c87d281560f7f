//! A group of commands on one shard, under their keys' locks: what each key holds after the
//! earlier commands of the group (the overlay), what the tree held for it before (the chunks
//! and hash fields a write must delete), and the one batch that commits all of it.

use crate::chunks::OnShard;
use crate::command::{errors, Reply, Write};
use crate::store::Store;
use crate::value::{ChunkedHeader, HashHeader, Stored};
use ringdb::{DbHandle, WriteBatch};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// The live value in `bytes` at `now`, or the error reply for bytes the server did not write.
pub fn live(bytes: Option<&[u8]>, now: u64) -> Result<Option<Stored<'_>>, Reply> {
    match bytes.map(Stored::decode) {
        None => Ok(None),
        Some(Err(_)) => Err(Reply::error(errors::FOREIGN)),
        Some(Ok(stored)) => Ok((!stored.expired_at(now)).then_some(stored)),
    }
}

/// A field write: the hash's key, and the value (`None`: delete).
type FieldWrite = (Vec<u8>, Option<Vec<u8>>);

/// A group's writes so far and what the tree held for each key it touched.
#[derive(Default)]
pub struct Group {
    /// Each written key's value now (`None`: deleted).
    overlay: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// The chunked header the tree held for a key (read at its first load).
    chunked: HashMap<Vec<u8>, Option<ChunkedHeader>>,
    /// The generation of the hash the tree held for a key (live or expired).
    old_hash: HashMap<Vec<u8>, u64>,
    /// Hashes the group created: key and generation.
    created: Vec<(Vec<u8>, u64)>,
    /// Keys written, in the order of their first write.
    written: Vec<Vec<u8>>,
    /// Field writes by (generation, field).
    fields: HashMap<(u64, Vec<u8>), FieldWrite>,
}

impl Group {
    /// The keys the group wrote, in the order of their first write.
    pub fn written(&self) -> &[Vec<u8>] {
        &self.written
    }

    /// `key`'s value (inline form) as the group sees it: its own write, else the tree's.
    pub async fn current(
        &mut self,
        store: &Store,
        handle: &DbHandle,
        key: &[u8],
        now: u64,
    ) -> Result<Option<Vec<u8>>, Reply> {
        self.current_for(store, handle, (key, true), now).await
    }

    /// [`Group::current`] for a command that reads the value's bytes (`payload`) or only
    /// its kind and expiry (a large value's payload is then left empty).
    pub async fn current_for(
        &mut self,
        store: &Store,
        handle: &DbHandle,
        (key, payload): (&[u8], bool),
        now: u64,
    ) -> Result<Option<Vec<u8>>, Reply> {
        if let Some(pending) = self.overlay.get(key) {
            return Ok(pending.clone());
        }
        let source = OnShard {
            handle,
            table: store.chunks.table_id(),
        };
        let loaded = store.chunks.load_for(&source, key, now, payload).await?;
        self.chunked.insert(key.to_vec(), loaded.chunked);
        if let Some(header) = loaded.value.as_deref().and_then(HashHeader::of_value) {
            self.old_hash.insert(key.to_vec(), header.generation);
        }
        Ok(loaded.value)
    }

    /// Records a command's write of `key`.
    pub fn record(&mut self, key: &[u8], write: Write) {
        let value = match write {
            Write::Keep => return,
            Write::Put(bytes) => Some(bytes),
            Write::Delete => None,
        };
        if self.overlay.insert(key.to_vec(), value).is_none() {
            self.written.push(key.to_vec());
        }
    }

    /// Records that the group created the hash `generation` under `key`.
    pub fn created_hash(&mut self, key: &[u8], generation: u64) {
        self.created.push((key.to_vec(), generation));
    }

    /// Records a write of `field` of the hash `generation` under `key`.
    pub fn write_field(
        &mut self,
        key: &[u8],
        generation: u64,
        field: Vec<u8>,
        value: Option<Vec<u8>>,
    ) {
        self.fields
            .insert((generation, field), (key.to_vec(), value));
    }

    /// The group's write of `field` of hash `generation`, if it wrote it.
    pub fn pending_field(&self, generation: u64, field: &[u8]) -> Option<Option<&[u8]>> {
        self.fields
            .get(&(generation, field.to_vec()))
            .map(|(_, value)| value.as_deref())
    }

    /// The group's writes of fields of hash `generation`.
    pub fn pending_fields(&self, generation: u64) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.fields
            .iter()
            .filter(move |((g, _), _)| *g == generation)
            .map(|((_, field), (_, value))| (field.as_slice(), value.as_deref()))
    }

    /// The batch of the group's writes: each written key's last value (split into chunks
    /// where it is large), the deletion of the chunks of the values they replace, the fields
    /// of live hashes, and the deletion of every field of the hashes that are gone.
    pub async fn batch(&self, store: &Store, handle: &DbHandle) -> Result<WriteBatch, Reply> {
        let mut batch = WriteBatch::new();
        let dead = self.dead_hashes();
        for key in &self.written {
            debug_assert!(
                self.chunked.contains_key(key),
                "a key is read before it is written"
            );
            if let Some(Some(header)) = self.chunked.get(key) {
                store.chunks.delete(&mut batch, key, header)?;
            }
            match &self.overlay[key] {
                Some(bytes) => store.chunks.put(&mut batch, key, bytes)?,
                None => {
                    batch.delete(key);
                }
            }
        }
        self.field_writes(store, &dead, &mut batch)?;
        for generation in self.old_hash.values().filter(|g| dead.contains(g)) {
            for (record, _) in store.fields.scan(handle, *generation).await? {
                batch.delete_in(store.fields.table_id(), &record);
            }
        }
        Ok(batch)
    }

    /// The hashes the group leaves without a key: those the tree held under the keys it wrote
    /// and those it created, less those a written key holds at the end (a rename moves a
    /// hash's header, not its fields).
    fn dead_hashes(&self) -> HashSet<u64> {
        let alive: HashSet<u64> = self
            .written
            .iter()
            .filter_map(|key| self.overlay[key].as_deref().and_then(HashHeader::of_value))
            .map(|header| header.generation)
            .collect();
        let before = self
            .written
            .iter()
            .filter_map(|key| self.old_hash.get(key).copied());
        let created = self.created.iter().map(|(_, generation)| *generation);
        before
            .chain(created)
            .filter(|generation| !alive.contains(generation))
            .collect()
    }

    /// The field writes of hashes that are not `dead`.
    fn field_writes(
        &self,
        store: &Store,
        dead: &HashSet<u64>,
        batch: &mut WriteBatch,
    ) -> Result<(), Reply> {
        let table = store.fields.table_id();
        for ((generation, field), (key, value)) in &self.fields {
            if dead.contains(generation) {
                continue;
            }
            let record = store.fields.field_key(key, *generation, field)?;
            match value {
                Some(value) => batch.put_in(table, &record, value),
                None => batch.delete_in(table, &record),
            };
        }
        Ok(())
    }
}
