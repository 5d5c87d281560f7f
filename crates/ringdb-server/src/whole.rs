//! Commands over the whole database (DBSIZE, KEYS, SCAN, RANDOMKEY: `sample.rs`, FLUSHDB, SAVE, INFO) and
//! the writes whose keys span shards (MSET and MSETNX: transactions of `across.rs`; RENAME).
//! The walks use the `Db`'s blocking calls (iterators merged across shards), so they run on a
//! helper thread while the worker goes on serving its other connections.

use crate::across::{Outcome, Proceed};
use crate::chunks::Chunks;
use crate::command::{Combine, Reply, Session, WholeDb};
use crate::glob;
use crate::shared::ServerShared;
use crate::store::Store;
use crate::value::{now_ms, HashHeader, Kind, Physical};
use ringdb::{Db, WriteBatch};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Keys a FLUSHDB deletes per batch.
const FLUSH_BATCH_KEYS: usize = 1024;

/// Records (keys, chunks, fields) past which a FLUSHDB batch takes no further key.
const FLUSH_BATCH_RECORDS: usize = 16 * 1024;

/// SCAN cursors a connection keeps (a cursor past this many is reported as expired).
const SCAN_CURSORS_MAX: usize = 64;

/// The result of a helper thread's work.
pub(crate) struct Pending<T> {
    slot: Arc<Mutex<(Option<T>, Option<Waker>)>>,
}

impl<T> Future for Pending<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        match slot.0.take() {
            Some(value) => Poll::Ready(value),
            None => {
                slot.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Runs `work` on a thread of its own; the future completes with its result.
pub(crate) fn on_helper<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Pending<T> {
    let slot = Arc::new(Mutex::new((None, None::<Waker>)));
    let filled = slot.clone();
    std::thread::spawn(move || {
        let value = work();
        let waker = {
            let mut slot = filled.lock().unwrap_or_else(|p| p.into_inner());
            slot.0 = Some(value);
            slot.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    });
    Pending { slot }
}

fn failed(what: &str, error: impl std::fmt::Display) -> Reply {
    Reply::error(format!("ERR {what} failed: {error}"))
}

/// The live keys in key order from `start`, at most `limit`, with their kinds.
pub(crate) fn live_keys(
    db: &Db,
    start: Option<Vec<u8>>,
    limit: usize,
) -> Result<Vec<(Vec<u8>, Kind)>, Reply> {
    let now = now_ms();
    let mut keys = Vec::new();
    let range = match start {
        Some(start) => {
            db.range::<Vec<u8>, _>((std::ops::Bound::Excluded(start), std::ops::Bound::Unbounded))
        }
        None => db.range::<Vec<u8>, _>(..),
    };
    for pair in range {
        let (key, value) = pair.map_err(|e| failed("scan", e))?;
        if let Ok(physical) = Physical::decode(&value) {
            if !physical.expired_at(now) {
                keys.push((key, physical.kind()));
            }
        }
        if keys.len() >= limit {
            break;
        }
    }
    Ok(keys)
}

/// Runs a command over the whole database.
pub async fn run_whole(
    db: &Db,
    shared: &Arc<ServerShared>,
    session: &mut Session,
    command: WholeDb,
) -> Reply {
    let db = db.clone();
    match command {
        WholeDb::DbSize => {
            on_helper(move || match crate::sample::count_live_keys(&db) {
                Ok(count) => Reply::Integer(count as i64),
                Err(reply) => reply,
            })
            .await
        }
        WholeDb::Keys(pattern) => {
            on_helper(move || match live_keys(&db, None, usize::MAX) {
                Ok(keys) => Reply::Array(
                    keys.into_iter()
                        .filter(|(key, _)| glob::matches(&pattern, key))
                        .map(|(key, _)| Reply::Bulk(key))
                        .collect(),
                ),
                Err(reply) => reply,
            })
            .await
        }
        WholeDb::Scan(arguments) => scan(db, session, arguments).await,
        WholeDb::RandomKey => {
            on_helper(move || match crate::sample::random_key(&db) {
                Ok(key) => key.map_or(Reply::Null, Reply::Bulk),
                Err(reply) => reply,
            })
            .await
        }
        WholeDb::Flush => {
            let store = shared.store.clone();
            on_helper(move || flush_all(&db, &store)).await
        }
        WholeDb::Save => save(db, shared).await,
        WholeDb::MsetAcross(pairs) => mset(&db, &shared.store, pairs, false).await,
        WholeDb::MsetNx(pairs) => mset(&db, &shared.store, pairs, true).await,
        WholeDb::Info(sections) => {
            // The engine's figures come from every shard: a call that may block, and a worker
            // may be a shard's own thread.
            let shared = shared.clone();
            on_helper(move || crate::info::info(&db, &shared, &sections)).await
        }
        command @ (WholeDb::SlotKeys { .. } | WholeDb::Migrate { .. } | WholeDb::Purge(_)) => {
            cluster_walk(db, shared, command).await
        }
        WholeDb::RenameAcross { from, to, only_new } => {
            rename_across(&db, shared, (from, to), only_new).await
        }
        WholeDb::Replication(arguments) => {
            crate::replication::run_command(&db, shared, arguments).await
        }
    }
}

/// SAVE/BGSAVE: everything logged made durable and checkpointed, on a helper thread.
async fn save(db: Db, shared: &ServerShared) -> Reply {
    let reply = on_helper(move || {
        db.flush()
            .map_or_else(|e| failed("save", e), |()| Reply::Ok)
    })
    .await;
    if reply == Reply::Ok {
        shared.saved_now();
    }
    reply
}

/// The cluster's commands that walk the keys, on a helper thread.
async fn cluster_walk(db: Db, shared: &Arc<ServerShared>, command: WholeDb) -> Reply {
    let shared = shared.clone();
    if !shared.cluster.enabled() && !matches!(command, WholeDb::SlotKeys { .. }) {
        return Reply::error("ERR This instance has cluster support disabled");
    }
    on_helper(move || match command {
        WholeDb::SlotKeys { slot, limit } => slot_keys(&db, slot, limit),
        WholeDb::Migrate { target, ranges } => {
            crate::cluster::migrate(&db, &shared, &target, ranges)
        }
        WholeDb::Purge(ranges) => crate::cluster::purge(&db, &shared, ranges),
        _ => unreachable!("only the cluster's walks come here"),
    })
    .await
}

/// `CLUSTER COUNTKEYSINSLOT` (`limit`: `None`) or `GETKEYSINSLOT`: a walk over every live
/// key (keys are ordered by their bytes, not by slot), a chunk at a time.
fn slot_keys(db: &Db, slot: u16, limit: Option<usize>) -> Reply {
    const CHUNK_KEYS: usize = 4096;
    let wanted = limit.unwrap_or(usize::MAX);
    let (mut found, mut count, mut start) = (Vec::new(), 0i64, None);
    while found.len() < wanted {
        let keys = match live_keys(db, start.take(), CHUNK_KEYS) {
            Ok(keys) => keys,
            Err(reply) => return reply,
        };
        let full = keys.len() == CHUNK_KEYS;
        start = keys.last().map(|(key, _)| key.clone());
        for (key, _) in keys {
            if crate::cluster::slot::key_slot(&key) == slot && found.len() < wanted {
                count += 1;
                if limit.is_some() {
                    found.push(Reply::Bulk(key));
                }
            }
        }
        if !full {
            break;
        }
    }
    match limit {
        Some(_) => Reply::Array(found),
        None => Reply::Integer(count),
    }
}

/// RENAME/RENAMENX of keys on different shards, its batch written on a helper thread.
async fn rename_across(
    db: &Db,
    shared: &ServerShared,
    keys: (Vec<u8>, Vec<u8>),
    only_new: bool,
) -> Reply {
    let watches = shared.store.watches.clone();
    let touched = [keys.0.clone(), keys.1.clone()];
    let write = async |batch: WriteBatch| {
        let db = db.clone();
        on_helper(move || {
            db.write(&batch).map_err(|e| failed("write", e))?;
            watches.touch(touched.iter().map(Vec::as_slice));
            Ok(())
        })
        .await
    };
    crate::rename::rename_across(db, &shared.store, keys, only_new, write).await
}

/// Deletes every key (and the chunks of large values, the fields of hashes), a batch at a
/// time.
fn flush_all(db: &Db, store: &Store) -> Reply {
    // Each pass deletes up to a batch; the loop ends when a pass finds nothing, and each pass
    // removes what it found, so it is bounded by the keys present at the start plus those
    // written meanwhile.
    loop {
        let mut batch = WriteBatch::new();
        for pair in db.range::<&[u8], _>(..).take(FLUSH_BATCH_KEYS) {
            match pair {
                Ok((key, value)) => {
                    if let Err(reply) = delete_parts(store, &key, &value, &mut batch) {
                        return reply;
                    }
                    batch.delete(&key);
                }
                Err(error) => return failed("flush", error),
            }
            // Hashes bring their fields: a batch stays well under what one log record holds.
            if batch.len() >= FLUSH_BATCH_RECORDS {
                break;
            }
        }
        if batch.is_empty() {
            return Reply::Ok;
        }
        if let Err(error) = db.write(&batch) {
            return failed("flush", error);
        }
        store.watches.touch_all();
    }
}

/// Adds the deletion of what the value `bytes` under `key` keeps elsewhere (a large value's
/// chunks, a hash's fields) to `batch`.
fn delete_parts(
    store: &Store,
    key: &[u8],
    bytes: &[u8],
    batch: &mut WriteBatch,
) -> Result<(), Reply> {
    if let Some(header) = Chunks::header_of(bytes) {
        store.chunks.delete(batch, key, &header)?;
    }
    if let Some(hash) = HashHeader::of_value(bytes) {
        store.fields.delete_all_blocking(hash.generation, batch)?;
    }
    Ok(())
}

/// MSET over several shards, or MSETNX (`only_new`: 1 and all set if no key exists, else 0
/// and nothing set): one transaction, isolated and atomic across shards (`across.rs`).
async fn mset(db: &Db, store: &Store, pairs: Vec<(Vec<u8>, Vec<u8>)>, only_new: bool) -> Reply {
    let ops = crate::command::mset_ops(pairs, only_new);
    let combine = match only_new {
        true => Combine::Sum,
        false => Combine::Ok,
    };
    // MSETNX commits only when every key was absent (every part answered 1).
    let proceed: Proceed = Arc::new(move |replies: &[Reply]| {
        !only_new || replies.iter().all(|reply| *reply == Reply::Integer(1))
    });
    match crate::across::run(db, store, vec![(ops, combine)], Vec::new(), proceed).await {
        Outcome::Done(mut replies) => match replies.pop() {
            Some(Reply::Integer(_)) => Reply::Integer(1),
            Some(reply) => reply,
            None => Reply::Ok,
        },
        Outcome::Aborted => Reply::Integer(0),
    }
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]: a cursor names the last key returned
/// (kept by the connection), so keys present throughout a full scan are all returned once
/// even while others are added and removed.
async fn scan(db: Db, session: &mut Session, arguments: Vec<Vec<u8>>) -> Reply {
    let Some(cursor) = crate::command::parse_integer(&arguments[1]).filter(|c| *c >= 0) else {
        return Reply::error("ERR invalid cursor");
    };
    let mut pattern = None;
    let mut count = 10usize;
    let mut kind = None;
    let mut at = 2;
    while at + 1 < arguments.len() {
        let value = arguments[at + 1].clone();
        match arguments[at].to_ascii_uppercase().as_slice() {
            b"MATCH" => pattern = Some(value),
            b"COUNT" => match crate::command::parse_integer(&value) {
                Some(n) if n >= 1 => count = n as usize,
                _ => return Reply::error(crate::command::errors::SYNTAX),
            },
            b"TYPE" => kind = Some(value),
            _ => return Reply::error(crate::command::errors::SYNTAX),
        }
        at += 2;
    }
    if at != arguments.len() {
        return Reply::error(crate::command::errors::SYNTAX);
    }
    let start = match cursor {
        0 => None,
        id => match session.scan_cursors.iter().find(|(c, _)| *c == id as u64) {
            Some((_, key)) => Some(key.clone()),
            None => {
                return Reply::Array(vec![Reply::Bulk(b"0".to_vec()), Reply::Array(Vec::new())])
            }
        },
    };
    let found = on_helper(move || live_keys(&db, start, count)).await;
    let keys = match found {
        Ok(keys) => keys,
        Err(reply) => return reply,
    };
    let next = match keys.last() {
        Some((last, _)) if keys.len() == count => {
            let id = session.next_scan_cursor();
            session.scan_cursors.push((id, last.clone()));
            if session.scan_cursors.len() > SCAN_CURSORS_MAX {
                session.scan_cursors.remove(0);
            }
            id
        }
        _ => 0,
    };
    let items = keys
        .into_iter()
        .filter(|(key, _)| pattern.as_ref().is_none_or(|p| glob::matches(p, key)))
        .filter(|(_, k)| {
            kind.as_ref()
                .is_none_or(|t| t.eq_ignore_ascii_case(k.name().as_bytes()))
        })
        .map(|(key, _)| Reply::Bulk(key))
        .collect();
    Reply::Array(vec![
        Reply::Bulk(next.to_string().into_bytes()),
        Reply::Array(items),
    ])
}
