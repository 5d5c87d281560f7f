//! What runs on a key's shard: a group of key operations under their keys' locks, each against
//! the value the earlier ones left, their writes committed as one batch before any reply.

use crate::chunks::{Chunks, OnShard};
use crate::command::{errors, Effect, KeyOp, Reply, Write};
use crate::locks::lock_all;
use crate::value::{now_ms, ChunkedHeader, Physical, Stored};
use ringdb::{DbHandle, WriteBatch};
use std::collections::HashMap;

/// The live value in `bytes` at `now`, or the error reply for bytes the server did not write.
pub fn live(bytes: Option<&[u8]>, now: u64) -> Result<Option<Stored<'_>>, Reply> {
    match bytes.map(Stored::decode) {
        None => Ok(None),
        Some(Err(_)) => Err(Reply::error(errors::FOREIGN)),
        Some(Ok(stored)) => Ok((!stored.expired_at(now)).then_some(stored)),
    }
}

/// On the shard: runs `ops` against the tree and the group's own earlier writes.
pub async fn apply_group(chunks: Chunks, handle: DbHandle, ops: Vec<KeyOp>) -> Vec<Reply> {
    let keys = ops
        .iter()
        .filter(|op| op.writes)
        .map(|op| op.key.clone())
        .collect();
    let _guard = lock_all(keys).await;
    let now = now_ms();
    let source = OnShard {
        handle: &handle,
        table: chunks.table_id(),
    };
    let mut group = Group::default();
    let mut replies = Vec::with_capacity(ops.len());
    let mut wrote = Vec::with_capacity(ops.len());
    for op in &ops {
        let current = match group.overlay.get(&op.key) {
            Some(pending) => Ok(pending.clone()),
            None => chunks.load(&source, &op.key, now).await.map(|loaded| {
                group.chunked.insert(op.key.clone(), loaded.chunked);
                loaded.value
            }),
        };
        let effect = match current {
            Ok(current) => match live(current.as_deref(), now) {
                Ok(value) => (op.run)(&op.arguments, value, now),
                Err(reply) => Effect::reply(reply),
            },
            Err(reply) => Effect::reply(reply),
        };
        wrote.push(effect.write != Write::Keep);
        group.record(&op.key, effect.write);
        replies.push(effect.reply);
    }
    let failed = match group.batch(&chunks) {
        Ok(batch) if batch.is_empty() => None,
        Ok(batch) => handle
            .write(&batch)
            .await
            .err()
            .map(|error| Reply::error(format!("ERR write failed: {error}"))),
        Err(reply) => Some(reply),
    };
    if let Some(failed) = failed {
        for (reply, wrote) in replies.iter_mut().zip(&wrote) {
            if *wrote {
                *reply = failed.clone();
            }
        }
    }
    replies
}

/// A group's writes so far: what later operations on the same keys see, and what the tree
/// held for each key (the chunks a write of it deletes).
#[derive(Default)]
struct Group {
    overlay: HashMap<Vec<u8>, Option<Vec<u8>>>,
    chunked: HashMap<Vec<u8>, Option<ChunkedHeader>>,
    /// Keys written, in the order of their first write.
    written: Vec<Vec<u8>>,
}

impl Group {
    fn record(&mut self, key: &[u8], write: Write) {
        let value = match write {
            Write::Keep => return,
            Write::Put(bytes) => Some(bytes),
            Write::Delete => None,
        };
        if self.overlay.insert(key.to_vec(), value).is_none() {
            self.written.push(key.to_vec());
        }
    }

    /// The batch of the group's writes: each written key's last value (split into chunks
    /// where it is large), and the deletion of the chunks of the values they replace.
    fn batch(&self, chunks: &Chunks) -> Result<WriteBatch, Reply> {
        let mut batch = WriteBatch::new();
        for key in &self.written {
            debug_assert!(
                self.chunked.contains_key(key),
                "a key is read before it is written"
            );
            if let Some(Some(header)) = self.chunked.get(key) {
                chunks.delete(&mut batch, key, header)?;
            }
            match &self.overlay[key] {
                Some(bytes) => chunks.put(&mut batch, key, bytes)?,
                None => {
                    batch.delete(key);
                }
            }
        }
        Ok(batch)
    }
}

/// On the shard: removes those of `keys` whose value has expired, each checked again under its
/// lock (a client may have written it since the sweep saw it), with its chunks; how many were
/// removed.
pub async fn sweep(
    chunks: Chunks,
    handle: DbHandle,
    keys: Vec<Vec<u8>>,
) -> Result<usize, ringdb::WriteError> {
    let _guard = lock_all(keys.clone()).await;
    let now = now_ms();
    let mut batch = WriteBatch::new();
    let mut removed = 0;
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
            if chunks.delete(&mut batch, key, &header).is_err() {
                continue;
            }
        }
        batch.delete(key);
        removed += 1;
    }
    if removed > 0 {
        handle.write(&batch).await?;
    }
    Ok(removed)
}
