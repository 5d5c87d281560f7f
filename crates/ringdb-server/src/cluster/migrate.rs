//! Moving slot ranges to another node while clients run (`CLUSTERX MIGRATE`), and deleting
//! the keys of slots a node does not serve (`CLUSTERX PURGE`).
//!
//! The source keeps serving the moving slots until the controller pushes the topology that
//! gives them to the target. Meanwhile its migrator (on a helper thread):
//! 1. walks the keys (the engine's ordered scans, a chunk at a time) and copies each key of a
//!    moving slot to the target, whole: the value or every field, and the expiry, pipelined
//!    (the target commits a pipeline's writes per shard as one batch) and acknowledged once
//!    durable. A copy cut by a crash needs no atomicity: the topology switches only after
//!    every copy was acknowledged, and a move started over purges the target first;
//! 2. copies again the keys written since (`moving.rs` records them after each write is
//!    applied), pass after pass while there are many;
//! 3. fences the slots (writes get `-TRYAGAIN`, which cluster clients retry), waits for the
//!    writes in progress, and copies the last written keys. The slots stay fenced until the
//!    new topology arrives (reads are still served: nothing changes them).
//!
//! The source reads each key through its own server (a connection to itself), so a key is
//! read the way any client reads it, large values and hashes included. Both connections skip
//! the slot checks (`CLUSTERX BYPASS`): the target does not own the slots yet, so clients never
//! see what it holds of them. A migration cut by a crash of either side leaves the topology
//! as it was: the controller purges the target's copies of the slots and starts again; after
//! the switch, the source's old keys are purged the same way.

use super::in_ranges;
use super::moving::Moving;
use crate::client::{Client, Value};
use crate::command::Reply;
use crate::shared::ServerShared;
use ringdb::Db;
use std::sync::Arc;
use std::time::Duration;

/// Keys read from the source and written to the target per round trip.
const KEYS_PER_BATCH: usize = 256;
/// Keys walked per scan of the engine.
const KEYS_PER_WALK: usize = 4096;
/// Passes over the keys written during the copy before the fence.
const DIRTY_PASSES_MAX: usize = 16;
/// Fewer written keys than this and the next pass is the fenced one.
const DIRTY_FENCE_AT: usize = 256;
/// How long the migrator waits for writes in progress, at its start and at the fence.
const WRITES_WAIT: Duration = Duration::from_secs(10);
/// How long a node answering the migrator may take.
const REPLY_WAIT: Duration = Duration::from_secs(60);

/// A connection that skips slot checks, to `address`, authenticated with `password`.
fn bypass_client(address: &str, password: Option<&str>) -> Result<Client, String> {
    let mut client = Client::connect(address, REPLY_WAIT).map_err(|e| e.to_string())?;
    if let Some(password) = password {
        expect_ok(client.command(&["AUTH", password]), address)?;
    }
    expect_ok(client.command(&["CLUSTERX", "BYPASS"]), address)?;
    Ok(client)
}

fn expect_ok(
    reply: Result<Value, crate::client::ClientError>,
    address: &str,
) -> Result<(), String> {
    match reply.map_err(|e| e.to_string())? {
        Value::Simple(ok) if ok == "OK" => Ok(()),
        other => Err(format!("{address}: {other:?}")),
    }
}

/// This server's own address, for the connection to itself.
fn own_address(shared: &ServerShared) -> Result<String, String> {
    shared
        .tcp_address()
        .ok_or_else(|| "a cluster node listens on TCP".to_string())
}

/// `CLUSTERX MIGRATE <host:port> <ranges>`: copies the slots' keys to the node at `target`
/// and leaves them fenced here; the reply is the number of keys copied.
pub(crate) fn migrate(
    db: &Db,
    shared: &ServerShared,
    target: &str,
    ranges: Vec<(u16, u16)>,
) -> Reply {
    let cluster = &shared.cluster;
    let topology = cluster.topology();
    let owned = |slot| cluster.serves(&topology, slot);
    if let Some(slot) = ranges
        .iter()
        .flat_map(|&(f, l)| f..=l)
        .find(|&slot| !owned(slot))
    {
        return Reply::Error(format!("ERR slot {slot} is not served by this node"));
    }
    if let Err(text) = cluster.moving.start(ranges.clone(), WRITES_WAIT) {
        return Reply::Error(text);
    }
    match copy_all(db, shared, target, &ranges, &cluster.moving) {
        Ok(copied) => {
            cluster.moving.finished();
            Reply::Integer(copied as i64)
        }
        Err(text) => {
            cluster.moving.end();
            Reply::Error(format!("ERR slot migration to {target} failed: {text}"))
        }
    }
}

/// The migrator's passes (see the module's documentation); the keys copied.
fn copy_all(
    db: &Db,
    shared: &ServerShared,
    target: &str,
    ranges: &[(u16, u16)],
    moving: &Arc<Moving>,
) -> Result<usize, String> {
    let password = shared.password();
    let mut source = bypass_client(&own_address(shared)?, password.as_deref())?;
    let mut sink = bypass_client(target, password.as_deref())?;
    let mut copied = 0;
    let mut start = None;
    loop {
        let keys = crate::whole::live_keys(db, start.take(), KEYS_PER_WALK)
            .map_err(|reply| format!("{reply:?}"))?;
        let full = keys.len() == KEYS_PER_WALK;
        start = keys.last().map(|(key, _)| key.clone());
        let moving_keys: Vec<Vec<u8>> = keys
            .into_iter()
            .map(|(key, _)| key)
            .filter(|key| in_ranges(ranges, super::slot::key_slot(key)))
            .collect();
        copied += copy_keys(&mut source, &mut sink, &moving_keys, target)?;
        if !full {
            break;
        }
    }
    for _pass in 0..DIRTY_PASSES_MAX {
        let dirty = moving.take_dirty()?;
        copied += copy_keys(&mut source, &mut sink, &dirty, target)?;
        if dirty.len() < DIRTY_FENCE_AT {
            break;
        }
    }
    moving.fence(WRITES_WAIT)?;
    let last = moving.take_dirty()?;
    copied += copy_keys(&mut source, &mut sink, &last, target)?;
    Ok(copied)
}

/// What a key is at the source: its expiry (Unix ms, or none) and contents.
enum Found {
    Absent,
    Changed,
    Text(Vec<u8>, Option<i64>),
    Hash(Vec<Value>, Option<i64>),
}

/// Copies `keys` (batch by batch) from `source` to `sink`; the keys copied.
fn copy_keys(
    source: &mut Client,
    sink: &mut Client,
    keys: &[Vec<u8>],
    target: &str,
) -> Result<usize, String> {
    let mut copied = 0;
    for batch in keys.chunks(KEYS_PER_BATCH) {
        let found = read_keys(source, batch)?;
        let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
        for (key, found) in batch.iter().zip(found) {
            copied += usize::from(write_commands(key, found, &mut commands));
        }
        let replies = sink.pipeline(&commands).map_err(|e| e.to_string())?;
        if let Some(error) = replies.iter().find_map(first_error) {
            return Err(format!("{target}: {error}"));
        }
    }
    Ok(copied)
}

fn first_error(value: &Value) -> Option<String> {
    match value {
        Value::Error(text) => Some(text.clone()),
        Value::Array(items) => items.iter().find_map(first_error),
        _ => None,
    }
}

/// Each key's type, expiry and contents, read through the source's own server.
fn read_keys(source: &mut Client, keys: &[Vec<u8>]) -> Result<Vec<Found>, String> {
    let mut first: Vec<Vec<Vec<u8>>> = Vec::with_capacity(keys.len() * 2);
    for key in keys {
        first.push(vec![b"TYPE".to_vec(), key.clone()]);
        first.push(vec![b"PEXPIRETIME".to_vec(), key.clone()]);
    }
    let described = source.pipeline(&first).map_err(|e| e.to_string())?;
    let mut reads: Vec<Vec<Vec<u8>>> = Vec::with_capacity(keys.len());
    for (key, pair) in keys.iter().zip(described.chunks(2)) {
        let verb: &[u8] = match pair[0].text().as_deref() {
            Some("hash") => b"HGETALL",
            _ => b"GET",
        };
        reads.push(vec![verb.to_vec(), key.clone()]);
    }
    let contents = source.pipeline(&reads).map_err(|e| e.to_string())?;
    let found = described
        .chunks(2)
        .zip(contents)
        .map(|(pair, content)| {
            let expiry = match pair[1] {
                Value::Integer(at) if at > 0 => Some(at),
                _ => None,
            };
            match (pair[0].text().as_deref(), content) {
                (Some("none"), _) => Found::Absent,
                (Some("string"), Value::Bulk(bytes)) => Found::Text(bytes, expiry),
                (Some("hash"), Value::Array(fields)) => Found::Hash(fields, expiry),
                // Written between the reads: it is dirty, and copied again later.
                _ => Found::Changed,
            }
        })
        .collect();
    Ok(found)
}

/// The commands that make `key` at the target what it is at the source; false when the key
/// changed under the read (it is copied again in a later pass).
fn write_commands(key: &[u8], found: Found, commands: &mut Vec<Vec<Vec<u8>>>) -> bool {
    let word = |text: &str| text.as_bytes().to_vec();
    let (body, expiry) = match found {
        Found::Changed => return false,
        Found::Absent => {
            commands.push(vec![word("DEL"), key.to_vec()]);
            return true;
        }
        Found::Text(bytes, expiry) => (vec![word("SET"), key.to_vec(), bytes], expiry),
        Found::Hash(fields, expiry) => {
            let mut body = vec![word("HSET"), key.to_vec()];
            body.extend(fields.into_iter().filter_map(|field| match field {
                Value::Bulk(bytes) => Some(bytes),
                _ => None,
            }));
            (body, expiry)
        }
    };
    commands.push(vec![word("DEL"), key.to_vec()]);
    commands.push(body);
    if let Some(at) = expiry {
        commands.push(vec![word("PEXPIREAT"), key.to_vec(), word(&at.to_string())]);
    }
    true
}

/// `CLUSTERX PURGE [ranges]`: deletes the keys of `ranges` (default: every slot this node
/// does not serve); refused for a slot it serves. The reply is the number deleted.
pub(crate) fn purge(db: &Db, shared: &ServerShared, ranges: Option<Vec<(u16, u16)>>) -> Reply {
    let cluster = &shared.cluster;
    let topology = cluster.topology();
    let owned = |slot| cluster.serves(&topology, slot);
    let wanted = |slot| !owned(slot) && ranges.as_ref().is_none_or(|r| in_ranges(r, slot));
    if let Some(slot) = ranges
        .iter()
        .flatten()
        .flat_map(|&(f, l)| f..=l)
        .find(|&s| owned(s))
    {
        return Reply::Error(format!(
            "ERR slot {slot} is served by this node: not purged"
        ));
    }
    let run = || -> Result<i64, String> {
        let mut own = bypass_client(&own_address(shared)?, shared.password().as_deref())?;
        let (mut deleted, mut start) = (0i64, None);
        loop {
            let keys = crate::whole::live_keys(db, start.take(), KEYS_PER_WALK)
                .map_err(|reply| format!("{reply:?}"))?;
            let full = keys.len() == KEYS_PER_WALK;
            start = keys.last().map(|(key, _)| key.clone());
            let doomed: Vec<Vec<Vec<u8>>> = keys
                .into_iter()
                .filter(|(key, _)| wanted(super::slot::key_slot(key)))
                .map(|(key, _)| vec![b"DEL".to_vec(), key])
                .collect();
            for batch in doomed.chunks(KEYS_PER_BATCH) {
                for reply in own.pipeline(batch).map_err(|e| e.to_string())? {
                    deleted += match reply {
                        Value::Integer(n) => n,
                        other => return Err(format!("DEL: {other:?}")),
                    };
                }
            }
            if !full {
                return Ok(deleted);
            }
        }
    };
    run().map_or_else(
        |text| Reply::Error(format!("ERR purge failed: {text}")),
        Reply::Integer,
    )
}
