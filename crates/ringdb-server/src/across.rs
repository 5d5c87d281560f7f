//! Transactions over keys of any shards, isolated and atomic: EXEC, and MSET and MSETNX whose
//! keys span shards.
//!
//! A group of commands on one shard is isolated by its keys' locks there (`apply.rs`). A
//! transaction over several shards takes the same locks on each of them, in ascending shard
//! order and, on a shard, in key order (`locks.rs`): every taker of several locks takes them
//! in one global order, so no two wait for each other in a cycle. On each shard, in one hop,
//! the part locks its keys (read or written, and the keys the connection WATCHes), runs its
//! operations against the tree and its own earlier writes, and builds its batch without
//! committing it; its locks stay held between hops under the transaction's number. Once every
//! part is ready the transaction decides (a watched key written or expired, an MSETNX key
//! present: nothing is committed); else the parts' batches commit as one batch across shards
//! (`Db::write_async`: the cross-shard batch log, all or nothing across a crash), the watchers
//! of its keys are flagged, and every part's locks are released.
//!
//! A transaction on one shard does all of this in one hop. A transaction whose future is
//! dropped half way (its connection closed) releases its locks from a thread of its own; a
//! release that arrives before its part has locked leaves a mark, and the part lets its locks
//! go as soon as it takes them.

use crate::apply::{commit_group, fail_writes, run_ops};
use crate::command::{Combine, KeyOp, Reply};
use crate::group::Group;
use crate::locks::{lock_all, KeyGuard};
use crate::store::Store;
use futures_util::future::join_all;
use ringdb::{Db, WriteBatch};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

thread_local! {
    /// On a shard's thread: the locks of transactions between their hops, by number.
    static HELD: RefCell<HashMap<u64, KeyGuard>> = RefCell::new(HashMap::new());
    /// Transactions released before their part here had locked (dropped half way).
    static RELEASED_EARLY: RefCell<HashSet<u64>> = RefCell::new(HashSet::new());
}

/// The last transaction's number.
static LAST_ID: AtomicU64 = AtomicU64::new(0);

/// A command of the transaction: its key operations and how their replies combine.
pub type Command = (Vec<KeyOp>, Combine);

/// Whether the transaction commits, decided with every key locked, from the replies of all
/// its operations in order.
pub type Proceed = Arc<dyn Fn(&[Reply]) -> bool + Send + Sync>;

/// How a transaction ended.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Committed (or failed to): each command's reply.
    Done(Vec<Reply>),
    /// `proceed` said no: nothing was written.
    Aborted,
}

/// One shard's part: the positions of its operations in the transaction, the operations,
/// and the keys it locks.
struct Part {
    shard: usize,
    positions: Vec<usize>,
    ops: Vec<KeyOp>,
    keys: Vec<Vec<u8>>,
}

/// What a part left ready on its shard: replies, which operations wrote, its batch (or the
/// error that replaces the writes' replies), and the keys it wrote.
type Prepared = (
    Vec<Reply>,
    Vec<bool>,
    Result<WriteBatch, Reply>,
    Vec<Vec<u8>>,
);

/// Runs `commands` as one transaction, also locking `watched` (see the module
/// documentation).
pub async fn run(
    db: &Db,
    store: &Store,
    commands: Vec<Command>,
    watched: Vec<Vec<u8>>,
    proceed: Proceed,
) -> Outcome {
    let combines: Vec<(usize, Combine)> = commands.iter().map(|(o, c)| (o.len(), *c)).collect();
    let parts = split(db, commands, watched);
    let count = parts.iter().map(|p| p.positions.len()).sum();
    let replies = match parts.len() {
        0 => Some(Vec::new()),
        1 => one_shard(db, store, parts.into_iter().next().expect("one"), proceed).await,
        _ => across(db, store, parts, count, proceed).await,
    };
    let Some(mut replies) = replies else {
        return Outcome::Aborted;
    };
    debug_assert_eq!(replies.len(), count);
    let mut combined = Vec::with_capacity(combines.len());
    // Each command takes its operations' replies, in order.
    for (taken, combine) in combines {
        let rest = replies.split_off(taken.min(replies.len()));
        combined.push(combine.reply(std::mem::replace(&mut replies, rest)));
    }
    Outcome::Done(combined)
}

/// The parts by shard, ascending (the lock order).
fn split(db: &Db, commands: Vec<Command>, watched: Vec<Vec<u8>>) -> Vec<Part> {
    let mut parts: Vec<Part> = (0..db.shard_count())
        .map(|shard| Part {
            shard,
            positions: Vec::new(),
            ops: Vec::new(),
            keys: Vec::new(),
        })
        .collect();
    let ops = commands.into_iter().flat_map(|(ops, _)| ops);
    for (position, op) in ops.enumerate() {
        let part = &mut parts[db.shard_of(&op.key)];
        part.keys.extend(op.locked_keys().cloned());
        part.positions.push(position);
        part.ops.push(op);
    }
    for key in watched {
        parts[db.shard_of(&key)].keys.push(key);
    }
    parts.retain(|part| !part.keys.is_empty());
    parts
}

/// The whole transaction in one hop to its one shard.
async fn one_shard(db: &Db, store: &Store, part: Part, proceed: Proceed) -> Option<Vec<Reply>> {
    let store = store.clone();
    let count = part.ops.len();
    let ran = db
        .call_on_async(part.shard, move |handle| async move {
            let _guard = lock_all(part.keys.iter().map(Vec::as_slice)).await;
            let mut group = Group::default();
            let (mut replies, wrote) = run_ops(&store, &handle, &mut group, &part.ops).await;
            if !proceed(&replies) {
                return None;
            }
            commit_group(&store, &handle, &group, (&mut replies, &wrote)).await;
            Some(replies)
        })
        .await;
    ran.unwrap_or_else(|error| Some(vec![shard_down(error); count]))
}

fn shard_down(error: impl std::fmt::Display) -> Reply {
    Reply::error(format!("ERR shard unavailable: {error}"))
}

/// Parts on several shards: each locked and prepared in shard order, then one decision, one
/// commit across shards and the release.
async fn across(
    db: &Db,
    store: &Store,
    parts: Vec<Part>,
    count: usize,
    proceed: Proceed,
) -> Option<Vec<Reply>> {
    let mut held = Held {
        db: db.clone(),
        id: LAST_ID.fetch_add(1, Ordering::Relaxed) + 1,
        shards: Vec::with_capacity(parts.len()),
        released: false,
    };
    let mut replies = vec![Reply::Null; count];
    let mut wrote = vec![false; count];
    let mut batch = WriteBatch::new();
    let mut written = Vec::new();
    let mut writing = Vec::new();
    let mut failed = None;
    for part in parts {
        let (shard, positions) = (part.shard, part.positions.clone());
        // Listed before the hop: a release must reach a part whose hop is under way.
        held.shards.push(part.shard);
        let (part_replies, part_wrote, part_batch, keys) =
            match prepare(db, store, held.id, part).await {
                Ok(prepared) => prepared,
                Err(down) => {
                    held.release().await;
                    return Some(vec![down; count]);
                }
            };
        for ((position, reply), wrote_one) in
            positions.into_iter().zip(part_replies).zip(part_wrote)
        {
            replies[position] = reply;
            wrote[position] = wrote_one;
        }
        match part_batch {
            Ok(part_batch) if part_batch.is_empty() => {}
            Ok(part_batch) => {
                writing.push(shard);
                batch.append(part_batch);
            }
            Err(reply) => failed = Some(reply),
        }
        written.extend(keys);
    }
    if !proceed(&replies) {
        held.release().await;
        return None;
    }
    let failed = match failed {
        Some(reply) => {
            held.release().await;
            Some(reply)
        }
        None => commit(db, store, &mut held, (batch, writing), written).await,
    };
    if let Some(failed) = failed {
        fail_writes(&mut replies, &wrote, &failed);
    }
    Some(replies)
}

/// Commits `batch` across shards. On each shard it writes, the engine's task that applied
/// that shard's part flags the watchers of the `written` keys and releases the part's locks
/// right after it, and does so even when this transaction's future is dropped: its keys stay
/// locked until its writes are applied. The parts that wrote nothing are released from here.
/// The error, if it failed.
async fn commit(
    db: &Db,
    store: &Store,
    held: &mut Held,
    (batch, writing): (WriteBatch, Vec<usize>),
    written: Vec<Vec<u8>>,
) -> Option<Reply> {
    let (id, watches) = (held.id, store.watches.clone());
    // From here on the engine releases the writing parts; `held` keeps the others.
    held.shards.retain(|shard| !writing.contains(shard));
    let after = move |_shard: usize| {
        watches.touch(written.iter().map(Vec::as_slice));
        release_here(id);
    };
    let failed = db.write_async_then(&batch, after).await.err();
    if failed.is_some() {
        // Released again where the engine did already: a mark that no part ever reads.
        release_all(db, id, &writing).await;
    }
    held.release().await;
    failed.map(|error| Reply::error(format!("ERR write failed: {error}")))
}

/// On the part's shard: locks its keys and keeps them under `id`, runs its operations and
/// builds its batch (not committed).
async fn prepare(db: &Db, store: &Store, id: u64, part: Part) -> Result<Prepared, Reply> {
    let store = store.clone();
    db.call_on_async(part.shard, move |handle| async move {
        let guard = lock_all(part.keys.iter().map(Vec::as_slice)).await;
        if RELEASED_EARLY.with(|early| early.borrow_mut().remove(&id)) {
            drop(guard);
            return Err(Reply::error("ERR the transaction was abandoned"));
        }
        HELD.with(|held| held.borrow_mut().insert(id, guard));
        let mut group = Group::default();
        let (replies, wrote) = run_ops(&store, &handle, &mut group, &part.ops).await;
        let batch = group.batch(&store, &handle).await;
        Ok((replies, wrote, batch, group.written().to_vec()))
    })
    .await
    .unwrap_or_else(|error| Err(shard_down(error)))
}

/// On a shard's thread: lets transaction `id`'s locks here go (or marks it released, when
/// its part has not locked yet).
fn release_here(id: u64) {
    let guard = HELD.with(|held| held.borrow_mut().remove(&id));
    match guard {
        Some(guard) => drop(guard),
        None => {
            RELEASED_EARLY.with(|early| early.borrow_mut().insert(id));
        }
    }
}

/// The shards where a transaction may hold locks; released when done, or on drop.
struct Held {
    db: Db,
    id: u64,
    shards: Vec<usize>,
    released: bool,
}

/// Releases transaction `id`'s locks on every shard of `shards`.
async fn release_all(db: &Db, id: u64, shards: &[usize]) {
    let releases = shards
        .iter()
        .map(|&shard| db.call_on_async(shard, move |_| async move { release_here(id) }));
    // A shard that is down holds nothing any more.
    join_all(releases).await;
}

impl Held {
    async fn release(&mut self) {
        release_all(&self.db, self.id, &self.shards).await;
        self.released = true;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.released || self.shards.is_empty() {
            return;
        }
        let (db, id, shards) = (self.db.clone(), self.id, std::mem::take(&mut self.shards));
        // Dropped half way (its connection closed): released from a thread that may block.
        let spawned = std::thread::Builder::new()
            .name("ringdb-serve-release".into())
            .spawn(move || {
                for shard in shards {
                    let _ = db.run_on(shard, move |_| async move { release_here(id) });
                }
            });
        if let Err(error) = spawned {
            tracing::error!(
                "transaction {id}: cannot start the thread that releases its locks: {error}"
            );
        }
    }
}
