//! RENAME and RENAMENX of keys on different shards (keys of one shard rename there, in
//! `apply.rs`, under both keys' locks).
//!
//! The value is read where it is (in place, as any read), a hash's fields are read on the old
//! key's shard, and one batch, atomic across shards and across a crash, deletes the old key and
//! what it kept elsewhere, removes what the new key held, and writes the value under the new
//! key: a large value's chunks and a hash's fields are written again on the new key's shard (a
//! hash under a fresh generation). Like MSET over several shards, it is atomic but not isolated:
//! a client writing either key meanwhile may see its write replaced.

use crate::apply::NO_SUCH_KEY;
use crate::chunks::{fresh_generation, Anywhere, Loaded};
use crate::command::Reply;
use crate::group::live;
use crate::hashes::field_of;
use crate::store::Store;
use crate::value::{encode, now_ms, HashHeader, Kind, Stored};
use ringdb::{Db, WriteBatch};

/// Renames `from` to `to` (`only_new`: RENAMENX), keys of different shards.
pub async fn rename_across(
    db: &Db,
    store: &Store,
    (from, to): (Vec<u8>, Vec<u8>),
    only_new: bool,
    write: impl AsyncFnOnce(WriteBatch) -> Result<(), Reply>,
) -> Reply {
    let now = now_ms();
    let chunks = &store.chunks;
    let (source, target) = match (
        chunks.load(&Anywhere(chunks), &from, now).await,
        chunks.load(&Anywhere(chunks), &to, now).await,
    ) {
        (Ok(source), Ok(target)) => (source, target),
        (Err(reply), _) | (_, Err(reply)) => return reply,
    };
    let value = match live(source.value.as_deref(), now) {
        Ok(Some(stored)) => stored,
        Ok(None) => return Reply::error(NO_SUCH_KEY),
        Err(reply) => return reply,
    };
    match live(target.value.as_deref(), now) {
        Ok(Some(_)) if only_new => return Reply::Integer(0),
        Ok(_) => {}
        Err(reply) => return reply,
    }
    let mut batch = WriteBatch::new();
    let moved = match moved_value(db, store, (&from, &to), value, &mut batch).await {
        Ok(moved) => moved,
        Err(reply) => return reply,
    };
    let cleared = forget(db, store, &from, &source, &mut batch).await;
    let cleared = cleared.and(forget(db, store, &to, &target, &mut batch).await);
    if let Err(reply) = cleared.and_then(|()| chunks.put(&mut batch, &to, &moved)) {
        return reply;
    }
    batch.delete(&from);
    match write(batch).await {
        Ok(()) if only_new => Reply::Integer(1),
        Ok(()) => Reply::Ok,
        Err(reply) => reply,
    }
}

/// The value to write under `to`: a string as it is; a hash's header under a fresh
/// generation, its fields added to `batch` on the new key's shard.
async fn moved_value(
    db: &Db,
    store: &Store,
    (from, to): (&[u8], &[u8]),
    value: Stored<'_>,
    batch: &mut WriteBatch,
) -> Result<Vec<u8>, Reply> {
    let whole = encode(value.kind, value.deadline_ms, value.payload);
    let Some(header) = HashHeader::of_value(&whole) else {
        return Ok(whole);
    };
    let fields = hash_fields(db, store, from, header.generation).await?;
    let generation = fresh_generation();
    let table = store.fields.table_id();
    for (record, field_value) in &fields {
        let field = field_of(record);
        batch.put_in(
            table,
            &store.fields.field_key(to, generation, field)?,
            field_value,
        );
    }
    let header = HashHeader {
        generation,
        count: fields.len() as u64,
    };
    Ok(encode(Kind::Hash, value.deadline_ms, &header.encode()))
}

/// Adds the deletion of what `key`'s value (`loaded`) keeps elsewhere to `batch`.
async fn forget(
    db: &Db,
    store: &Store,
    key: &[u8],
    loaded: &Loaded,
    batch: &mut WriteBatch,
) -> Result<(), Reply> {
    if let Some(header) = &loaded.chunked {
        store.chunks.delete(batch, key, header)?;
    }
    if let Some(hash) = loaded.value.as_deref().and_then(HashHeader::of_value) {
        for (record, _) in hash_fields(db, store, key, hash.generation).await? {
            batch.delete_in(store.fields.table_id(), &record);
        }
    }
    Ok(())
}

/// The field records of the hash `generation` under `key`, read on its shard.
async fn hash_fields(
    db: &Db,
    store: &Store,
    key: &[u8],
    generation: u64,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Reply> {
    let fields = store.fields.clone();
    db.call_on_async(db.shard_of(key), move |handle| async move {
        fields.scan(&handle, generation).await
    })
    .await
    .unwrap_or_else(|error| Err(Reply::error(format!("ERR shard unavailable: {error}"))))
}
