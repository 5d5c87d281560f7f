//! Point operations and batches on a [`Db`], blocking and async.
//!
//! Each goes to the shard its key's hash names. A multi-get sends one request per shard
//! involved (all shards work at once) and runs that shard's gets concurrently as one task. A
//! batch whose keys all live on one shard is that shard's single log record, as in a
//! single-thread database; one that spans shards goes through the cross-shard commit
//! (`cross.rs`).

use super::cross::AfterPart;
use super::packed::Packed;
use super::{gather, Db};
use crate::db::{DbHandle, WriteBatch};
use crate::error::{ReadError, WriteError};
use crate::wal::Op;
use crate::TableId;
use futures_util::future::join_all;
use std::sync::Arc;

impl Db {
    /// The value of `key`, if present. Read on the caller's thread, in place, when its pages
    /// are in the pool (`here.rs`); otherwise the shard reads it (in place too, or in a task
    /// when a page must be read from the target).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let mut value = Vec::new();
        let found = self.get_into_in(TableId::DEFAULT, key, &mut value)?;
        Ok(found.then_some(value))
    }

    /// [`Db::get`] into `out` (cleared first): whether `key` was present. A caller that reads
    /// many values reuses one buffer instead of an allocation per read.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, ReadError> {
        self.get_into_in(TableId::DEFAULT, key, out)
    }

    /// [`Db::get_into`] in `table`.
    pub(super) fn get_into_in(
        &self,
        table: TableId,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool, ReadError> {
        self.check_blocking_allowed()?;
        let shard = self.shard_of(key);
        if let Some(found) = self.get_here(shard, table, key, out)? {
            return Ok(found);
        }
        let key = key.to_vec();
        let reply = self.submit_local(shard, move |local, reply| {
            let mut value = Vec::new();
            match local.handle.get_resident_into_in(table, &key, &mut value) {
                Ok(Some(found)) => reply.send(Ok(found.then_some(value))),
                Err(e) => reply.send(Err(e)),
                Ok(None) => {
                    let h = local.handle.clone();
                    drop(
                        local
                            .io
                            .spawn(async move { reply.send(h.get_in(table, &key).await) }),
                    );
                }
            }
        })?;
        let value = self.wait(shard, reply)??;
        out.clear();
        if let Some(value) = &value {
            out.extend_from_slice(value);
        }
        Ok(value.is_some())
    }

    /// Inserts or replaces; returns whether the key existed. With a log, durable on return (per
    /// the durability mode).
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        let (key, value) = (key.to_vec(), value.to_vec());
        self.call(self.shard_of(&key), move |h| async move {
            h.insert(&key, &value).await
        })?
    }

    /// Removes; returns whether the key existed.
    pub fn remove(&self, key: &[u8]) -> Result<bool, WriteError> {
        let key = key.to_vec();
        self.call(
            self.shard_of(&key),
            move |h| async move { h.remove(&key).await },
        )?
    }

    /// The values of `keys`, in their order. Keys whose pages are in the pool are read on the
    /// caller's thread (`here.rs`); the others go to their shards, one request per shard
    /// involved, all shards at once, and one wake-up of the caller when the last part arrives.
    /// Not a snapshot: each value is one applied while the call ran, so a key asked twice may
    /// get two versions (the ones read in place are read first).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>, ReadError> {
        self.check_blocking_allowed()?;
        let mut values = vec![None; keys.len()];
        let mut handed = Vec::new();
        for (position, key) in keys.iter().enumerate() {
            let key = key.as_ref();
            let mut value = Vec::new();
            match self.get_here(self.shard_of(key), TableId::DEFAULT, key, &mut value)? {
                Some(found) => values[position] = found.then_some(value),
                None => handed.push(position),
            }
        }
        if handed.is_empty() {
            return Ok(values);
        }
        let rest: Vec<&[u8]> = handed.iter().map(|&p| keys[p].as_ref()).collect();
        for (position, value) in handed.into_iter().zip(self.multi_get_handed(&rest)?) {
            values[position] = value;
        }
        Ok(values)
    }

    /// The values of `keys` read by their shards (see [`Db::multi_get`]).
    fn multi_get_handed(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, ReadError> {
        let groups: Vec<_> = (self.group_keys(keys).into_iter().enumerate())
            .filter(|(_, (_, shard_keys))| !shard_keys.is_empty())
            .collect();
        let (senders, receiver) = gather::gather(groups.len());
        let mut positions = Vec::with_capacity(groups.len());
        for ((shard, (shard_positions, shard_keys)), sender) in groups.into_iter().zip(senders) {
            self.submit_to(
                shard,
                move |h| get_all(h, shard_keys),
                move |got| sender.send(got),
            )?;
            positions.push((shard, shard_positions));
        }
        let mut values = vec![None; keys.len()];
        let inboxes = &self.shared.inboxes;
        let parts = receiver.wait_unless(self.shared.spin, || {
            positions.iter().any(|(shard, _)| inboxes[*shard].is_down())
        });
        for ((shard, shard_positions), part) in positions.into_iter().zip(parts) {
            let got = part.ok_or_else(|| self.shared.inboxes[shard].reply_lost())??;
            scatter(&mut values, shard_positions, &got);
        }
        Ok(values)
    }

    /// Commits `batch` atomically: all or nothing, also across a crash (with a log), also
    /// when its keys live on several shards.
    pub fn write(&self, batch: &WriteBatch) -> Result<(), WriteError> {
        self.check_blocking_allowed()?;
        let mut parts = self.split_batch(batch);
        match parts.len() {
            0 => Ok(()),
            1 => {
                let (shard, part) = parts.pop().expect("one part");
                self.call(shard, move |h| async move { h.write(&part).await })?
            }
            _ => self.write_across(parts),
        }
    }

    /// [`Db::write`] from a task (a shard's, or any runtime's): the same atomicity, without
    /// blocking the caller's thread. Over several shards the batch log's sync runs on its
    /// sync thread and the parts commit concurrently, each awaited.
    pub async fn write_async(&self, batch: &WriteBatch) -> Result<(), WriteError> {
        self.write_async_then(batch, |_| {}).await
    }

    /// [`Db::write_async`], then `after(shard)` on the thread of each shard the batch writes,
    /// in the task that applies that shard's part, as soon as the part is in the shard's tree
    /// (before the wait for its durability: whoever sees it and writes is logged after it), or
    /// has failed, or was never applied because the commit point failed. Once the batch is handed over this
    /// happens even when the caller's future is dropped (a part is never left half done). A
    /// program that keeps state of its own per shard for the batch (its locks there, say)
    /// releases it in `after`, without another hand-over.
    pub async fn write_async_then(
        &self,
        batch: &WriteBatch,
        after: impl Fn(usize) + Send + Sync + 'static,
    ) -> Result<(), WriteError> {
        let after: AfterPart = Arc::new(after);
        let mut parts = self.split_batch(batch);
        match parts.len() {
            0 => Ok(()),
            1 => {
                let (shard, part) = parts.pop().expect("one part");
                let applied = move |h: DbHandle| async move {
                    let ran = std::cell::Cell::new(false);
                    let on_applied = || {
                        ran.set(true);
                        after(shard);
                    };
                    let written = h.write_then(&part, on_applied).await;
                    if !ran.get() {
                        after(shard);
                    }
                    written
                };
                self.call_async(shard, applied).await?
            }
            _ => self.write_across_async(parts, after).await,
        }
    }

    /// [`Db::get`] from a task (on a shard: in place for its own keys; another shard's keys
    /// are read in place too when their pages are resident, else handed over).
    pub async fn get_async(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.get_async_in(TableId::DEFAULT, key).await
    }

    /// [`Db::get_async`] in `table`.
    pub(super) async fn get_async_in(
        &self,
        table: TableId,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, ReadError> {
        let shard = self.shard_of(key);
        if super::context::local_handle(self.shared.id, shard).is_none() {
            let mut value = Vec::new();
            if let Some(found) = self.get_here(shard, table, key, &mut value)? {
                return Ok(found.then_some(value));
            }
        }
        let key = key.to_vec();
        self.call_async(
            shard,
            move |h| async move { h.in_table(table).get(&key).await },
        )
        .await?
    }

    /// [`Db::insert`] from a task.
    pub async fn insert_async(&self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        let (key, value) = (key.to_vec(), value.to_vec());
        let shard = self.shard_of(&key);
        self.call_async(shard, move |h| async move { h.insert(&key, &value).await })
            .await?
    }

    /// [`Db::remove`] from a task.
    pub async fn remove_async(&self, key: &[u8]) -> Result<bool, WriteError> {
        let key = key.to_vec();
        let shard = self.shard_of(&key);
        self.call_async(shard, move |h| async move { h.remove(&key).await })
            .await?
    }

    /// [`Db::multi_get`] from a task.
    pub async fn multi_get_async<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> Result<Vec<Option<Vec<u8>>>, ReadError> {
        let mut positions = Vec::new();
        let mut parts = Vec::new();
        for (shard, (shard_positions, shard_keys)) in self.group_keys(keys).into_iter().enumerate()
        {
            if !shard_keys.is_empty() {
                positions.push(shard_positions);
                parts.push(self.call_async(shard, move |h| get_all(h, shard_keys)));
            }
        }
        // Every shard at once: the other shards' requests go out before this one's own part
        // runs in place.
        let mut values = vec![None; keys.len()];
        for (shard_positions, got) in positions.into_iter().zip(join_all(parts).await) {
            scatter(&mut values, shard_positions, &got??);
        }
        Ok(values)
    }

    /// The keys per shard, each with its position in `keys`.
    fn group_keys<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<(Vec<usize>, Packed)> {
        let shards: Vec<usize> = keys.iter().map(|key| self.shard_of(key.as_ref())).collect();
        let mut sizes = vec![(0, 0); self.shard_count()];
        for (key, &shard) in keys.iter().zip(&shards) {
            sizes[shard].0 += 1;
            sizes[shard].1 += key.as_ref().len();
        }
        let mut groups: Vec<_> = (sizes.into_iter())
            .map(|(count, bytes)| {
                (
                    Vec::with_capacity(count),
                    Packed::with_capacity(count, bytes),
                )
            })
            .collect();
        for (position, (key, shard)) in keys.iter().zip(shards).enumerate() {
            let group = &mut groups[shard];
            group.0.push(position);
            group.1.push(Some(key.as_ref()));
        }
        groups
    }

    /// `batch`'s operations per shard, in their order (shards without any left out).
    pub(super) fn split_batch(&self, batch: &WriteBatch) -> Vec<(usize, WriteBatch)> {
        let mut parts: Vec<Vec<Op>> = vec![Vec::new(); self.shard_count()];
        for op in batch.ops() {
            parts[self.shard_of(op.key())].push(op.clone());
        }
        parts
            .into_iter()
            .enumerate()
            .filter(|(_, ops)| !ops.is_empty())
            .map(|(shard, ops)| (shard, WriteBatch::from_ops(ops)))
            .collect()
    }
}

/// Gets every key of `keys` on one shard: in place for those whose pages are all in the pool
/// (no allocation, no task), the others concurrently (their gets interleaved at page faults);
/// the values packed in the keys' order.
async fn get_all(h: DbHandle, keys: Packed) -> Result<Packed, ReadError> {
    let mut values = Packed::with_capacity(keys.len(), 0);
    let mut scratch = Vec::new();
    let mut missing = Vec::new();
    for (index, key) in keys.present().enumerate() {
        match h.get_resident_into_in(TableId::DEFAULT, key, &mut scratch)? {
            Some(found) => {
                if values.is_empty() {
                    // Room for every value, guessed from the first one's size.
                    values = Packed::with_capacity(keys.len(), keys.len() * scratch.len());
                }
                values.push(found.then_some(&scratch[..]));
            }
            None => {
                values.push(None);
                missing.push(index);
            }
        }
    }
    let gets = missing
        .iter()
        .map(|&index| h.get(keys.get(index).unwrap_or_default()));
    for (index, value) in missing.iter().zip(join_all(gets).await) {
        values.set(*index, value?.as_deref());
    }
    Ok(values)
}

/// Puts one shard's values at their positions in the caller's answer, each copied out on the
/// caller's thread.
fn scatter(values: &mut [Option<Vec<u8>>], positions: Vec<usize>, got: &Packed) {
    debug_assert_eq!(positions.len(), got.len(), "one value per key asked");
    for (position, value) in positions.into_iter().zip(got.iter()) {
        values[position] = value.map(<[u8]>::to_vec);
    }
}
