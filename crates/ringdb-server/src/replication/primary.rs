//! The replication commands: `REPLICAOF`, `ROLE` and `WAIT` for people, and the three a
//! replica sends its primary (`REPLSYNC`, `REPLSCAN`, `REPLFETCH`).

use super::replica::SCAN_PAIRS;
use super::Replication;
use crate::command::Reply;
use crate::shared::ServerShared;
use ringdb::Db;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most bytes one fetch may ask for.
const FETCH_BYTES_LIMIT: usize = 64 << 20;
/// The longest a fetch may wait on the primary for a batch.
const FETCH_WAIT_LIMIT: Duration = Duration::from_secs(5);
/// The longest `WAIT` waits (a timeout of 0 asks for this).
const WAIT_LIMIT: Duration = Duration::from_secs(3600);

fn number<T: std::str::FromStr>(word: &[u8]) -> Option<T> {
    std::str::from_utf8(word).ok()?.parse().ok()
}

fn text(word: &[u8]) -> String {
    String::from_utf8_lossy(word).into_owned()
}

/// Runs a replication command (`arguments[0]` names it; arity checked by the caller).
pub async fn run_command(db: &Db, shared: &Arc<ServerShared>, arguments: Vec<Vec<u8>>) -> Reply {
    let replication = &shared.replication;
    let name = text(&arguments[0]).to_ascii_uppercase();
    match name.as_str() {
        "REPLICAOF" | "SLAVEOF" => replica_of(shared, &arguments),
        "ROLE" => role(replication),
        "WAIT" => wait(replication, &arguments).await,
        "REPLSYNC" => replsync(db, replication, &arguments),
        "REPLFETCH" => replfetch(replication, &arguments).await,
        "REPLSCAN" => replscan(db, replication, &arguments).await,
        _ => Reply::error(format!("ERR unknown replication command '{name}'")),
    }
}

/// `REPLICAOF host port` or `REPLICAOF NO ONE`.
fn replica_of(shared: &Arc<ServerShared>, arguments: &[Vec<u8>]) -> Reply {
    if arguments.len() != 3 {
        return Reply::error(crate::command::errors::arity("replicaof"));
    }
    if shared.cluster.enabled() {
        return Reply::error(
            "ERR REPLICAOF not allowed in cluster mode: the topology names replicas (ringdb cluster push)",
        );
    }
    let replication = &shared.replication;
    if arguments[1].eq_ignore_ascii_case(b"NO") && arguments[2].eq_ignore_ascii_case(b"ONE") {
        replication.become_primary();
        return Reply::Ok;
    }
    let Some(port) = number::<u16>(&arguments[2]).filter(|port| *port > 0) else {
        return Reply::error("ERR Invalid master port");
    };
    let primary = format!("{}:{port}", text(&arguments[1]));
    match replication.become_replica(shared, primary) {
        Ok(()) => Reply::Ok,
        Err(text) => Reply::error(format!("ERR {text}")),
    }
}

/// `ROLE`: Redis's shapes for a primary and a replica.
fn role(replication: &Replication) -> Reply {
    if let Some(follower) = replication.follower() {
        let (host, port) = follower
            .primary
            .rsplit_once(':')
            .unwrap_or((&follower.primary, "0"));
        let (state, applied) = follower.state();
        return Reply::Array(vec![
            Reply::Bulk(b"slave".to_vec()),
            Reply::Bulk(host.as_bytes().to_vec()),
            Reply::Integer(number(port.as_bytes()).unwrap_or(0)),
            Reply::Bulk(state.as_bytes().to_vec()),
            Reply::Integer(applied as i64),
        ]);
    }
    let replicas = replication
        .online_replicas()
        .into_iter()
        .map(|(name, seen)| {
            let (ip, port) = name.rsplit_once(':').unwrap_or((&name, "0"));
            Reply::Array(vec![
                Reply::Bulk(ip.as_bytes().to_vec()),
                Reply::Bulk(port.as_bytes().to_vec()),
                Reply::Bulk(seen.acked.to_string().into_bytes()),
            ])
        })
        .collect();
    Reply::Array(vec![
        Reply::Bulk(b"master".to_vec()),
        Reply::Integer(replication.backlog.end() as i64),
        Reply::Array(replicas),
    ])
}

/// `WAIT numreplicas timeout`: waits until that many replicas have everything written so
/// far (durably: they acknowledge after their own log has it) or the timeout (ms; 0: no
/// limit) passes; the reply is how many have.
async fn wait(replication: &Replication, arguments: &[Vec<u8>]) -> Reply {
    let (Some(needed), Some(timeout_ms)) =
        (number::<i64>(&arguments[1]), number::<i64>(&arguments[2]))
    else {
        return Reply::error("ERR value is not an integer or out of range");
    };
    if needed < 0 || timeout_ms < 0 {
        return Reply::error("ERR timeout is negative");
    }
    if replication.is_replica() {
        return Reply::error("ERR WAIT cannot be used with replica instances.");
    }
    let timeout = match timeout_ms {
        0 => WAIT_LIMIT,
        ms => Duration::from_millis(ms as u64).min(WAIT_LIMIT),
    };
    let offset = replication.backlog.end();
    let have = replication
        .wait_acknowledged(offset, needed as usize, timeout)
        .await;
    Reply::Integer(have as i64)
}

/// `REPLSYNC name shards stream offset`: `CONTINUE` when the backlog still holds `offset` of
/// `stream`, else `FULL` with the offset a full copy continues from.
fn replsync(db: &Db, replication: &Replication, arguments: &[Vec<u8>]) -> Reply {
    if arguments.len() != 5 {
        return Reply::error(crate::command::errors::arity("replsync"));
    }
    if let Some(refusal) = replication.refuses_replicas() {
        return Reply::error(format!("ERR {refusal}"));
    }
    let Some(shards) = number::<usize>(&arguments[2]) else {
        return Reply::error("ERR value is not an integer or out of range");
    };
    if shards != db.shard_count() {
        let mine = db.shard_count();
        return Reply::error(format!(
            "ERR a replica needs the primary's shard count: the primary has {mine}, the replica {shards}"
        ));
    }
    let stream = replication.replication_id();
    let name = text(&arguments[1]);
    let offset = number::<u64>(&arguments[4]).unwrap_or(u64::MAX);
    let held = replication.backlog.active()
        && arguments[3] == stream.as_bytes()
        && replication.backlog.read_from(offset, 0).is_some();
    let (how, offset) = match held {
        true => ("CONTINUE", offset),
        false => ("FULL", replication.backlog.activate()),
    };
    replication.acknowledge(&name, offset);
    Reply::Array(vec![
        Reply::Simple(how.into()),
        Reply::Bulk(stream.into_bytes()),
        Reply::Integer(offset as i64),
    ])
}

/// `REPLFETCH name stream offset max-bytes wait-ms`: the primary's stream end and the batches
/// from `offset` on (waiting up to `wait-ms` for one), or `-RESYNC` when the backlog no
/// longer holds `offset` of `stream`.
async fn replfetch(replication: &Replication, arguments: &[Vec<u8>]) -> Reply {
    if arguments.len() != 6 {
        return Reply::error(crate::command::errors::arity("replfetch"));
    }
    let (Some(offset), Some(max), Some(wait_ms)) = (
        number::<u64>(&arguments[3]),
        number::<usize>(&arguments[4]),
        number::<u64>(&arguments[5]),
    ) else {
        return Reply::error("ERR value is not an integer or out of range");
    };
    if arguments[2] != replication.replication_id().as_bytes() || !replication.backlog.active() {
        return Reply::error("RESYNC this primary's stream is not the one the replica follows");
    }
    // An offset past the stream's end acknowledges nothing (it is not one the stream had).
    if offset > replication.backlog.end() {
        return Reply::error("RESYNC the offset is past this primary's stream");
    }
    replication.acknowledge(&text(&arguments[1]), offset);
    let deadline = Instant::now() + Duration::from_millis(wait_ms).min(FETCH_WAIT_LIMIT);
    FetchWait {
        replication,
        offset,
        deadline,
    }
    .await;
    match replication
        .backlog
        .read_from(offset, max.min(FETCH_BYTES_LIMIT))
    {
        Some(bytes) => Reply::Array(vec![
            Reply::Integer(replication.backlog.end() as i64),
            Reply::Bulk(bytes),
        ]),
        None => Reply::error("RESYNC the replica fell behind this primary's backlog"),
    }
}

/// A fetch's wait for a batch past its offset.
struct FetchWait<'a> {
    replication: &'a Replication,
    offset: u64,
    deadline: Instant,
}

impl std::future::Future for FetchWait<'_> {
    type Output = ();
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if Instant::now() >= self.deadline
            || !self.replication.backlog.park(self.offset, cx.waker())
        {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }
}

/// `REPLSCAN tag first|after cursor count`: up to `count` records of a table, in key order
/// from the start or after `cursor`, as a flat array of keys and values.
async fn replscan(db: &Db, replication: &Arc<Replication>, arguments: &[Vec<u8>]) -> Reply {
    if arguments.len() != 5 {
        return Reply::error(crate::command::errors::arity("replscan"));
    }
    let (Some(tag), Some(count)) = (number::<u8>(&arguments[1]), number::<usize>(&arguments[4]))
    else {
        return Reply::error("ERR value is not an integer or out of range");
    };
    let start = match arguments[2].to_ascii_lowercase().as_slice() {
        b"first" => Bound::Unbounded,
        b"after" => Bound::Excluded(arguments[3].clone()),
        _ => return Reply::error(crate::command::errors::SYNTAX),
    };
    let (db, replication) = (db.clone(), replication.clone());
    crate::whole::on_helper(move || {
        let Some(range) = replication.range(&db, tag, (start, Bound::Unbounded)) else {
            return Reply::error("ERR no such table");
        };
        let mut items = Vec::new();
        for pair in range.take(count.min(SCAN_PAIRS * 16)) {
            match pair {
                Ok((key, value)) => items.extend([Reply::Bulk(key), Reply::Bulk(value)]),
                Err(error) => return Reply::error(format!("ERR scan failed: {error}")),
            }
        }
        Reply::Array(items)
    })
    .await
}
