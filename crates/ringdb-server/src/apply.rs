//! What runs on a key's shard: a group of key operations under their keys' locks, each against
//! the value the earlier ones left, their writes committed as one batch before any reply.

use crate::command::{errors, Effect, KeyOp, Reply, Write};
use crate::locks::lock_all;
use crate::value::{now_ms, Stored};
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
pub async fn apply_group(handle: DbHandle, ops: Vec<KeyOp>) -> Vec<Reply> {
    let keys = ops
        .iter()
        .filter(|op| op.writes)
        .map(|op| op.key.clone())
        .collect();
    let _guard = lock_all(keys).await;
    let now = now_ms();
    // The group's writes so far: what later operations on the same keys see.
    let mut overlay: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
    let mut batch = WriteBatch::new();
    let mut replies = Vec::with_capacity(ops.len());
    let mut wrote = Vec::with_capacity(ops.len());
    for op in &ops {
        let current = match overlay.get(&op.key) {
            Some(pending) => Ok(pending.clone()),
            None => handle.get(&op.key).await,
        };
        let current = match current {
            Ok(current) => current,
            Err(error) => {
                replies.push(Reply::error(format!("ERR read failed: {error}")));
                wrote.push(false);
                continue;
            }
        };
        let effect = match live(current.as_deref(), now) {
            Ok(value) => (op.run)(&op.arguments, value, now),
            Err(reply) => Effect::reply(reply),
        };
        wrote.push(effect.write != Write::Keep);
        match effect.write {
            Write::Keep => {}
            Write::Put(bytes) => {
                batch.put(&op.key, &bytes);
                overlay.insert(op.key.clone(), Some(bytes));
            }
            Write::Delete => {
                batch.delete(&op.key);
                overlay.insert(op.key.clone(), None);
            }
        }
        replies.push(effect.reply);
    }
    if !batch.is_empty() {
        if let Err(error) = handle.write(&batch).await {
            let failed = Reply::error(format!("ERR write failed: {error}"));
            for (reply, wrote) in replies.iter_mut().zip(&wrote) {
                if *wrote {
                    *reply = failed.clone();
                }
            }
        }
    }
    replies
}

/// On the shard: removes those of `keys` whose value has expired, each checked again under its
/// lock (a client may have written it since the sweep saw it); how many were removed.
pub async fn sweep(handle: DbHandle, keys: Vec<Vec<u8>>) -> Result<usize, ringdb::WriteError> {
    let _guard = lock_all(keys.clone()).await;
    let now = now_ms();
    let mut batch = WriteBatch::new();
    for key in &keys {
        let Ok(Some(value)) = handle.get(key).await else {
            continue;
        };
        if Stored::decode(&value).is_ok_and(|stored| stored.expired_at(now)) {
            batch.delete(key);
        }
    }
    let removed = batch.len();
    if removed > 0 {
        handle.write(&batch).await?;
    }
    Ok(removed)
}
