//! The replica's side: a thread that follows the primary over one connection. It takes a
//! full copy when it has no stream position the primary still holds, then fetches and applies
//! the stream; a dropped connection is retried from the offset it had applied.

use super::backlog::{decode_batches, StreamChange};
use super::Replication;
use crate::client::{Client, Value};
use crate::net::RingReader;
use ringdb::{Db, WriteBatch};
use std::io::Read;
use std::ops::Bound;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a replica waits for its primary's replies.
const LINK_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of stream a replica asks for per fetch.
pub const FETCH_BYTES_MAX: usize = 4 << 20;
/// How long a fetch waits on the primary for a batch when none is there.
const FETCH_WAIT_MS: u64 = 100;
/// Pairs a copy asks for per scan.
pub const SCAN_PAIRS: usize = 1024;
/// Bytes of changes merged into one of the replica's own batches (a larger primary batch is
/// applied alone, as it was committed).
const APPLY_BATCH_BYTES: usize = 1 << 20;
/// Pause between attempts to reach the primary.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Where a replica is.
#[derive(Clone, Debug, Default)]
struct Progress {
    /// The stream it follows and the offset it has applied up to.
    position: Option<(String, u64)>,
    /// The primary's stream end at the last fetch.
    primary_end: u64,
    /// Whether the connection is up and synced.
    link_up: bool,
    /// Full copies taken.
    full_syncs: u64,
    /// Primary batches applied (by this process).
    applied_batches: u64,
    /// After a copy: the offset to reach before reads are served.
    loading_until: Option<u64>,
    /// Why the link last went down.
    last_error: Option<String>,
    /// How its replies are received: `multishot` (into provided buffers) or `plain`.
    receive: &'static str,
    /// When the primary last answered.
    last_reply: Option<Instant>,
}

/// A replica's follower thread's state.
pub struct Follower {
    /// The primary, `host:port`.
    pub primary: String,
    stop: AtomicBool,
    /// Held around each of the follower's writes: once [`Follower::stop_and_wait`] returns,
    /// the follower writes nothing more (a promoted node's clients may write from then on).
    gate: Mutex<()>,
    loading: AtomicBool,
    progress: Mutex<Progress>,
    /// The server's watched keys: every applied batch flags every watcher (its keys are not
    /// listed one by one).
    watches: Option<Arc<crate::watch::Watches>>,
}

impl Follower {
    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the first copy is still being taken (reads are refused).
    pub fn loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    /// Asks the thread to stop (it does at its next reply).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Stops the thread and waits until a write of its in progress is done: it writes
    /// nothing after this returns (its network waits may still be under way).
    pub fn stop_and_wait(&self) {
        self.stop();
        drop(self.gate.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Writes `batch` unless the follower was stopped.
    fn write(&self, db: &Db, batch: &WriteBatch, what: &str) -> Result<(), String> {
        let _gate = self.gate.lock().unwrap_or_else(|p| p.into_inner());
        if self.stopping() {
            return Err("stopped".into());
        }
        db.write(batch).map_err(|e| format!("{what}: {e}"))?;
        if let Some(watches) = &self.watches {
            watches.touch_all();
        }
        Ok(())
    }

    /// The link's state as `ROLE` names it, and the offset applied.
    pub fn state(&self) -> (&'static str, u64) {
        let progress = self.progress();
        let applied = progress.position.as_ref().map_or(0, |(_, offset)| *offset);
        let state = match (progress.link_up, self.loading()) {
            (false, _) => "connect",
            (true, true) => "sync",
            (true, false) => "connected",
        };
        (state, applied)
    }

    /// INFO's lines for a replica.
    pub fn info(&self, lines: &mut Vec<String>) {
        let progress = self.progress();
        let (host, port) = self
            .primary
            .rsplit_once(':')
            .unwrap_or((&self.primary, "0"));
        let applied = progress.position.as_ref().map_or(0, |(_, offset)| *offset);
        lines.push("role:slave".into());
        lines.push(format!("master_host:{host}"));
        lines.push(format!("master_port:{port}"));
        let status = if progress.link_up { "up" } else { "down" };
        lines.push(format!("master_link_status:{status}"));
        let since = progress
            .last_reply
            .map_or(-1, |at| at.elapsed().as_secs() as i64);
        lines.push(format!("master_last_io_seconds_ago:{since}"));
        lines.push(format!(
            "master_sync_in_progress:{}",
            u8::from(self.loading())
        ));
        lines.push(format!("slave_repl_offset:{applied}"));
        if let Some((stream, _)) = &progress.position {
            lines.push(format!("master_replid:{stream}"));
        }
        lines.push(format!("master_repl_offset:{}", progress.primary_end));
        let lag = progress.primary_end.saturating_sub(applied);
        lines.push(format!("ringdb_replication_lag_bytes:{lag}"));
        lines.push(format!("ringdb_full_syncs:{}", progress.full_syncs));
        lines.push(format!("ringdb_replica_receive:{}", progress.receive));
        lines.push(format!(
            "ringdb_applied_batches:{}",
            progress.applied_batches
        ));
        lines.push("slave_read_only:1".into());
        if let Some(error) = &progress.last_error {
            lines.push(format!(
                "ringdb_last_link_error:{}",
                error.replace(['\r', '\n'], " ")
            ));
        }
    }
}

/// Starts following `primary`; the thread runs until [`Follower::stop`].
pub fn start(
    db: Db,
    replication: Arc<Replication>,
    primary: String,
    (name, password): (String, Option<String>),
) -> std::io::Result<Arc<Follower>> {
    let follower = Arc::new(Follower {
        primary,
        stop: AtomicBool::new(false),
        gate: Mutex::new(()),
        loading: AtomicBool::new(true),
        progress: Mutex::new(Progress::default()),
        watches: replication.store.get().map(|store| store.watches.clone()),
    });
    let me = follower.clone();
    std::thread::Builder::new()
        .name("ringdb-serve-replica".into())
        .spawn(move || {
            // One attempt per pass; it ends when the follower is stopped.
            while !me.stopping() {
                let result = follow(&db, &replication, &me, (&name, password.as_deref()));
                let mut progress = me.progress();
                progress.link_up = false;
                if let Err(error) = result {
                    tracing::warn!("replica of {}: {error}", me.primary);
                    progress.last_error = Some(error);
                }
                drop(progress);
                std::thread::sleep(RETRY_PAUSE);
            }
        })?;
    Ok(follower)
}

/// One connection's life: its replies received by a multishot receive into provided buffers
/// (a plain read where io_uring cannot do that), then [`follow_link`].
fn follow(
    db: &Db,
    replication: &Replication,
    follower: &Follower,
    credentials: (&str, Option<&str>),
) -> Result<(), String> {
    let client = Client::connect(&follower.primary, LINK_TIMEOUT).map_err(|e| e.to_string())?;
    match RingReader::open(client.socket().as_raw_fd(), LINK_TIMEOUT) {
        Ok(reader) => {
            follower.progress().receive = "multishot";
            let mut client = client.reading_from(reader);
            follow_link(db, replication, follower, &mut client, credentials)
        }
        Err(error) => {
            if follower.progress().receive != "plain" {
                tracing::warn!("replica link: {error}: its replies are read plainly");
            }
            follower.progress().receive = "plain";
            let mut client = client;
            follow_link(db, replication, follower, &mut client, credentials)
        }
    }
}

/// Syncs, then fetches and applies until stopped or the link fails.
fn follow_link<R: Read>(
    db: &Db,
    replication: &Replication,
    follower: &Follower,
    client: &mut Client<R>,
    (name, password): (&str, Option<&str>),
) -> Result<(), String> {
    if let Some(password) = password {
        expect_ok(client.command(&["AUTH", password]))?;
    }
    let (stream, mut applied) = sync(db, replication, follower, client, name)?;
    // Each pass applies one fetch; it ends when the follower is stopped or the link fails.
    while !follower.stopping() {
        let offset = applied.to_string();
        let max = FETCH_BYTES_MAX.to_string();
        let wait = FETCH_WAIT_MS.to_string();
        let request = ["REPLFETCH", name, &stream, &offset, &max, &wait];
        let (end, bytes) = match client.command(&request).map_err(|e| e.to_string())? {
            // Taken apart by value: the stream's bytes (up to 4 MiB) are not copied again.
            Value::Array(mut parts) if parts.len() == 2 => match (parts.pop(), parts.pop()) {
                (Some(Value::Bulk(bytes)), Some(Value::Integer(end))) => (end as u64, bytes),
                _ => return Err("a malformed fetch reply".into()),
            },
            Value::Array(_) => return Err("a malformed fetch reply".into()),
            Value::Error(text) if text.starts_with("RESYNC") => {
                follower.progress().position = None;
                return Err(text);
            }
            other => return Err(format!("fetch refused: {other:?}")),
        };
        let (bytes_applied, batches) = apply(db, (replication, follower), &bytes)?;
        applied += bytes_applied;
        let mut progress = follower.progress();
        progress.applied_batches += batches;
        progress.position = Some((stream.clone(), applied));
        progress.primary_end = end;
        progress.link_up = true;
        progress.last_reply = Some(Instant::now());
        let target = *progress.loading_until.get_or_insert(end);
        if applied >= target {
            follower.loading.store(false, Ordering::Release);
        }
    }
    Ok(())
}

fn expect_ok(reply: Result<Value, crate::client::ClientError>) -> Result<(), String> {
    match reply.map_err(|e| e.to_string())? {
        Value::Error(text) => Err(text),
        _ => Ok(()),
    }
}

/// `REPLSYNC`: continues the stream held, or takes a full copy. Returns the stream followed
/// and the offset applied.
fn sync<R: Read>(
    db: &Db,
    replication: &Replication,
    follower: &Follower,
    client: &mut Client<R>,
    name: &str,
) -> Result<(String, u64), String> {
    let held = follower.progress().position.clone();
    let shards = db.shard_count().to_string();
    let (stream, offset) = held.clone().unwrap_or(("?".into(), 0));
    let offset_text = offset.to_string();
    let request = ["REPLSYNC", name, &shards, &stream, &offset_text];
    let reply = client.command(&request).map_err(|e| e.to_string())?;
    let (how, stream, offset) = match reply {
        Value::Array(parts) => match parts.as_slice() {
            [how, Value::Bulk(id), Value::Integer(offset)] => (
                how.text().unwrap_or_default(),
                String::from_utf8_lossy(id).into_owned(),
                *offset as u64,
            ),
            _ => return Err("a malformed sync reply".into()),
        },
        Value::Error(text) => return Err(text),
        other => return Err(format!("sync refused: {other:?}")),
    };
    if how == "CONTINUE" && held.is_some() {
        return Ok((stream, offset));
    }
    follower.loading.store(true, Ordering::Release);
    copy(db, (replication, follower), client)?;
    let mut progress = follower.progress();
    progress.full_syncs += 1;
    progress.loading_until = None;
    progress.position = Some((stream.clone(), offset));
    Ok((stream, offset))
}

/// A full copy: every table emptied here, then scanned on the primary and written here.
fn copy<R: Read>(
    db: &Db,
    (replication, follower): (&Replication, &Follower),
    client: &mut Client<R>,
) -> Result<(), String> {
    for tag in 0..super::TABLE_TAGS as u8 {
        let table = replication.table_of(tag).ok_or("tables not open")?;
        clear_table(db, (replication, follower), tag)?;
        let mut after: Option<Vec<u8>> = None;
        // Each pass copies a page of pairs; the scan ends when a page comes back short, so it
        // is bounded by the primary's keys (plus those written meanwhile).
        loop {
            let cursor = after.clone().unwrap_or_default();
            let start = if after.is_some() { "after" } else { "first" };
            let count = SCAN_PAIRS.to_string();
            let tag_text = tag.to_string();
            let request: [&[u8]; 5] = [
                b"REPLSCAN",
                tag_text.as_bytes(),
                start.as_bytes(),
                &cursor,
                count.as_bytes(),
            ];
            let pairs = match client.command(&request).map_err(|e| e.to_string())? {
                Value::Array(items) if items.len().is_multiple_of(2) => items,
                Value::Error(text) => return Err(text),
                _ => return Err("a malformed scan reply".into()),
            };
            let mut batch = WriteBatch::new();
            for pair in pairs.chunks_exact(2) {
                let (Value::Bulk(key), Value::Bulk(value)) = (&pair[0], &pair[1]) else {
                    return Err("a malformed scan pair".into());
                };
                batch.put_in(table, key, value);
                after = Some(key.clone());
            }
            if !batch.is_empty() {
                follower.write(db, &batch, "copy")?;
            }
            if pairs.len() / 2 < SCAN_PAIRS {
                break;
            }
        }
    }
    Ok(())
}

/// Deletes every record of the table of stream tag `tag` here, a batch at a time.
fn clear_table(
    db: &Db,
    (replication, follower): (&Replication, &Follower),
    tag: u8,
) -> Result<(), String> {
    let table = replication.table_of(tag).ok_or("tables not open")?;
    // Each pass deletes up to a page; it ends when a pass finds nothing (nothing else writes
    // on a replica).
    loop {
        let mut batch = WriteBatch::new();
        let all = (Bound::Unbounded, Bound::Unbounded);
        let range = replication.range(db, tag, all).ok_or("tables not open")?;
        for pair in range.take(SCAN_PAIRS) {
            let (key, _) = pair.map_err(|e| format!("clear: {e}"))?;
            batch.delete_in(table, &key);
        }
        if batch.is_empty() {
            return Ok(());
        }
        follower.write(db, &batch, "clear")?;
    }
}

/// Applies a fetch's batches, merged into few batches of this replica's own (each primary
/// batch whole, in order); returns the stream bytes and the batches applied.
fn apply(
    db: &Db,
    (replication, follower): (&Replication, &Follower),
    bytes: &[u8],
) -> Result<(u64, u64), String> {
    let batches = decode_batches(bytes).map_err(|e| format!("a malformed stream: {}", e.0))?;
    let mut merged = WriteBatch::new();
    let mut merged_bytes = 0usize;
    let mut applied = 0u64;
    let count = batches.len() as u64;
    for (changes, framed) in batches {
        let size: usize = changes.iter().map(change_bytes).sum();
        if !merged.is_empty() && merged_bytes + size > APPLY_BATCH_BYTES {
            follower.write(db, &merged, "apply")?;
            merged = WriteBatch::new();
            merged_bytes = 0;
        }
        for change in &changes {
            let table = replication.table_of(change.tag).ok_or("tables not open")?;
            match &change.value {
                Some(value) => merged.put_in(table, &change.key, value),
                None => merged.delete_in(table, &change.key),
            };
        }
        merged_bytes += size;
        applied += framed as u64;
    }
    if !merged.is_empty() {
        follower.write(db, &merged, "apply")?;
    }
    Ok((applied, count))
}

fn change_bytes(change: &StreamChange) -> usize {
    change.key.len() + change.value.as_ref().map_or(0, Vec::len) + 16
}
