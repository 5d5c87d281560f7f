//! What runs on a key's shard: a group of key operations under their keys' locks, each against
//! the value the earlier ones left, their writes committed as one batch before any reply.

use crate::command::{Effect, KeyFn, KeyOp, Reply, Run, Write};
use crate::group::{live, Group};
use crate::locks::lock_all;
use crate::store::Store;
use crate::value::{now_ms, Kind, Physical};
use ringdb::{DbHandle, WriteBatch};

/// On the shard: runs `ops` against the tree and the group's own earlier writes.
pub async fn apply_group(store: Store, handle: DbHandle, ops: Vec<KeyOp>) -> Vec<Reply> {
    let keys = ops
        .iter()
        .filter(|op| op.writes)
        .flat_map(KeyOp::locked_keys)
        .map(Vec::as_slice);
    let _guard = lock_all(keys).await;
    let mut group = Group::default();
    let (mut replies, wrote) = run_ops(&store, &handle, &mut group, &ops).await;
    commit_group(&store, &handle, &group, (&mut replies, &wrote)).await;
    replies
}

/// Runs `ops` in order inside `group` (their keys locked by the caller): their replies, and
/// for each whether it wrote.
pub async fn run_ops(
    store: &Store,
    handle: &DbHandle,
    group: &mut Group,
    ops: &[KeyOp],
) -> (Vec<Reply>, Vec<bool>) {
    let now = now_ms();
    let mut replies = Vec::with_capacity(ops.len());
    let mut wrote = Vec::with_capacity(ops.len());
    for op in ops {
        let (reply, writes) = match op.run {
            Run::Value(run) => run_value(store, handle, group, (op, run), now).await,
            Run::Hash(run, needs) => {
                let hash = (run, needs);
                crate::hashes::run_hash(store, handle, group, op, hash, now).await
            }
            Run::Rename { only_new } => rename(store, handle, group, (op, only_new), now).await,
        };
        replies.push(reply);
        wrote.push(writes);
    }
    debug_assert_eq!(replies.len(), ops.len());
    (replies, wrote)
}

/// Commits `group`'s batch and flags the watchers of the keys it wrote (its keys still
/// locked); a failure replaces the replies of the operations that wrote.
pub async fn commit_group(
    store: &Store,
    handle: &DbHandle,
    group: &Group,
    (replies, wrote): (&mut [Reply], &[bool]),
) {
    let failed = match group.batch(store, handle).await {
        Ok(batch) if batch.is_empty() => None,
        Ok(batch) => match handle.write(&batch).await {
            Ok(()) => {
                store
                    .watches
                    .touch(group.written().iter().map(Vec::as_slice));
                None
            }
            Err(error) => Some(Reply::error(format!("ERR write failed: {error}"))),
        },
        Err(reply) => Some(reply),
    };
    if let Some(failed) = failed {
        fail_writes(replies, wrote, &failed);
    }
}

/// Replaces the replies of the operations that wrote with `failed`.
pub fn fail_writes(replies: &mut [Reply], wrote: &[bool], failed: &Reply) {
    debug_assert_eq!(replies.len(), wrote.len());
    for (reply, wrote) in replies.iter_mut().zip(wrote) {
        if *wrote {
            *reply = failed.clone();
        }
    }
}

/// Runs a command on one key's value inside `group`: the reply and whether it wrote.
async fn run_value(
    store: &Store,
    handle: &DbHandle,
    group: &mut Group,
    (op, run): (&KeyOp, KeyFn),
    now: u64,
) -> (Reply, bool) {
    let current = group.current_for(store, handle, (&op.key, op.payload), now);
    let effect = match current.await {
        Ok(current) => match live(current.as_deref(), now) {
            Ok(value) => run(&op.arguments, value, now),
            Err(reply) => Effect::reply(reply),
        },
        Err(reply) => Effect::reply(reply),
    };
    let writes = effect.write != Write::Keep;
    group.record(&op.key, effect.write);
    (effect.reply, writes)
}

/// RENAME/RENAMENX of two keys of this shard inside `group`: the value (its TTL with it)
/// moves to the new key; a hash keeps its fields (they are placed by shard, not by key).
async fn rename(
    store: &Store,
    handle: &DbHandle,
    group: &mut Group,
    (op, only_new): (&KeyOp, bool),
    now: u64,
) -> (Reply, bool) {
    let to = &op.arguments[2];
    let from = match group.current(store, handle, &op.key, now).await {
        Ok(value) => value,
        Err(reply) => return (reply, false),
    };
    let value = match live(from.as_deref(), now) {
        Ok(Some(_)) => from.expect("a live value"),
        Ok(None) => return (Reply::error(NO_SUCH_KEY), false),
        Err(reply) => return (reply, false),
    };
    let done = if only_new {
        Reply::Integer(1)
    } else {
        Reply::Ok
    };
    if *to == op.key {
        return (if only_new { Reply::Integer(0) } else { done }, false);
    }
    let target = match group.current(store, handle, to, now).await {
        Ok(value) => value,
        Err(reply) => return (reply, false),
    };
    match live(target.as_deref(), now) {
        Ok(Some(_)) if only_new => return (Reply::Integer(0), false),
        Ok(_) => {}
        Err(reply) => return (reply, false),
    }
    group.record(to, Write::Put(value));
    group.record(&op.key, Write::Delete);
    (done, true)
}

/// RENAME's error for a key that does not exist.
pub const NO_SUCH_KEY: &str = "ERR no such key";

/// On the shard: removes those of `keys` whose value has expired, each checked again under its
/// lock (a client may have written it since the sweep saw it), with its chunks; how many were
/// removed.
pub async fn sweep(
    store: Store,
    handle: DbHandle,
    keys: Vec<Vec<u8>>,
) -> Result<usize, ringdb::WriteError> {
    let _guard = lock_all(keys.iter().map(Vec::as_slice)).await;
    let now = now_ms();
    let mut batch = WriteBatch::new();
    let mut removed = 0;
    let mut expired = Vec::new();
    for key in &keys {
        let Ok(Some(value)) = handle.get(key).await else {
            continue;
        };
        let Ok(physical) = Physical::decode(&value) else {
            continue;
        };
        if !physical.expired_at(now) {
            continue;
        }
        if let Physical::Chunked(header) = physical {
            if store.chunks.delete(&mut batch, key, &header).is_err() {
                continue;
            }
        }
        if let Physical::Inline(stored) = physical {
            if stored.kind == Kind::Hash
                && delete_fields(&store, &handle, stored, &mut batch)
                    .await
                    .is_err()
            {
                continue;
            }
        }
        batch.delete(key);
        expired.push(key.clone());
        removed += 1;
    }
    if removed > 0 {
        handle.write(&batch).await?;
        store.watches.touch(expired.iter().map(Vec::as_slice));
    }
    Ok(removed)
}

/// Adds the deletion of every field of the hash `stored` holds to `batch`.
async fn delete_fields(
    store: &Store,
    handle: &DbHandle,
    stored: crate::value::Stored<'_>,
    batch: &mut WriteBatch,
) -> Result<(), Reply> {
    let header = crate::value::HashHeader::decode(stored.payload)
        .map_err(|_| Reply::error(crate::command::errors::FOREIGN))?;
    for (record, _) in store.fields.scan(handle, header.generation).await? {
        batch.delete_in(store.fields.table_id(), &record);
    }
    Ok(())
}
