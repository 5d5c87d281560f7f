//! Running a connection's batch of requests (everything one read from its socket held), with
//! replies in request order.
//!
//! Consecutive commands on keys form a segment. A segment's key operations are grouped by the
//! shard that owns their key: a group of reads runs on the worker, reading the shard's pages in
//! place (no hop, issue 33's optimistic reads); a group with a write goes to its shard in one
//! hop, where its keys are locked (`locks.rs`), each operation runs against the value the
//! previous ones left, and all the group's writes commit as one batch: one log record and one
//! wait for durability, however long the pipeline. Groups of different shards run at once.
//! Other commands (the connection's, the whole database's) end the segment and run in order.

use crate::across::{Outcome, Proceed};
use crate::chunks::{Anywhere, KEPT_CHANGING};
use crate::cluster::WriteTicket;
use crate::command::{
    errors, mset_ops, plan, run_session, After, Combine, KeyOp, Plan, Reply, Run, Session, WholeDb,
};
use crate::replication::ReplicationMode;
use crate::shared::ServerShared;
use crate::store::Store;
use crate::value::now_ms;
use crate::watch::{Watching, WATCHED_KEYS_MAX};
use crate::whole::run_whole;
use futures_util::future::join_all;
use ringdb::Db;
use std::sync::Arc;

/// What a batch leaves behind.
pub struct BatchOutcome {
    /// The session after the batch.
    pub session: Session,
    /// The replies, encoded.
    pub replies: Vec<u8>,
    /// QUIT: close once the replies are sent.
    pub close: bool,
    /// Requests not run because the replies passed the budget: the next batch starts with them.
    pub leftover: Vec<Vec<Vec<u8>>>,
}

/// Requests run between checks of the reply budget.
const BUDGET_CHECK_REQUESTS: usize = 64;

/// Commands allowed before AUTH.
fn allowed_unauthenticated(name: &[u8]) -> bool {
    [&b"AUTH"[..], b"HELLO", b"QUIT", b"RESET"]
        .iter()
        .any(|allowed| name.eq_ignore_ascii_case(allowed))
}

/// Commands that run at once inside MULTI instead of being queued.
fn runs_inside_multi(name: &[u8]) -> bool {
    [
        &b"EXEC"[..],
        b"DISCARD",
        b"MULTI",
        b"WATCH",
        b"QUIT",
        b"RESET",
    ]
    .iter()
    .any(|word| name.eq_ignore_ascii_case(word))
}

/// The commands on keys waiting to run together.
#[derive(Default)]
struct Segment {
    commands: Vec<(Vec<KeyOp>, Combine)>,
    /// The writes' tickets (cluster mode), dropped once the segment's writes are applied.
    tickets: Vec<WriteTicket>,
}

/// Runs `requests` for `session`, stopping once the replies pass `reply_budget` bytes (the
/// requests not run come back in [`BatchOutcome::leftover`]).
pub async fn run_batch(
    db: Db,
    shared: Arc<ServerShared>,
    mut session: Session,
    requests: Vec<Vec<Vec<u8>>>,
    reply_budget: usize,
) -> BatchOutcome {
    let mut replies = Vec::new();
    let mut segment = Segment::default();
    let mut close = false;
    let mut requests = requests.into_iter();
    let mut run = 0usize;
    while let Some(request) = requests.next() {
        run += 1;
        if run.is_multiple_of(BUDGET_CHECK_REQUESTS) {
            flush(&db, &shared, &mut segment, &session, &mut replies).await;
            if replies.len() > reply_budget {
                let mut leftover = vec![request];
                leftover.extend(requests);
                return BatchOutcome {
                    session,
                    replies,
                    close,
                    leftover,
                };
            }
        }
        shared
            .commands
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (planned, ticket) = match admit(&db, &shared, &mut session, request) {
            Ok(admitted) => admitted,
            Err(reply) => {
                flush(&db, &shared, &mut segment, &session, &mut replies).await;
                write_reply(&reply, &session, &mut replies);
                continue;
            }
        };
        match planned {
            Plan::Keys { ops, combine } => {
                segment.commands.push((ops, combine));
                segment.tickets.extend(ticket);
            }
            other => {
                flush(&db, &shared, &mut segment, &session, &mut replies).await;
                let (reply, stop) = run_other(&db, &shared, &mut session, other).await;
                drop(ticket);
                write_reply(&reply, &session, &mut replies);
                if stop {
                    close = true;
                    break;
                }
            }
        }
    }
    flush(&db, &shared, &mut segment, &session, &mut replies).await;
    BatchOutcome {
        session,
        replies,
        close,
        leftover: Vec::new(),
    }
}

/// What a request becomes before it runs: its plan and its writes' ticket, or a reply at once
/// (refused before AUTH, queued inside MULTI, redirected in cluster mode).
fn admit(
    db: &Db,
    shared: &ServerShared,
    session: &mut Session,
    request: Vec<Vec<u8>>,
) -> Result<(Plan, Option<WriteTicket>), Reply> {
    if !session.authenticated && !allowed_unauthenticated(&request[0]) {
        return Err(Reply::error(errors::NO_AUTH));
    }
    if session.queued.is_some() && !runs_inside_multi(&request[0]) {
        return Err(queue(db, shared, session, request));
    }
    let planned = plan(request, |key| db.shard_of(key));
    // Redirects first: a replica in cluster mode sends writes to its primary with -MOVED.
    let ticket = placed(shared, session, std::slice::from_ref(&planned))?;
    if let Some(refusal) = replication_refusal(shared, &planned) {
        return Err(refusal);
    }
    Ok((planned, ticket))
}

/// Whether a key operation may write (`COMMAND`'s write flag: some reads run under the key's
/// lock as writes do).
fn op_writes(op: &KeyOp) -> bool {
    op.writes
        && crate::command::writes(&String::from_utf8_lossy(&op.arguments[0]).to_ascii_uppercase())
}

/// Whether a planned command may write.
fn plan_writes(plan: &Plan) -> bool {
    match plan {
        Plan::Keys { ops, .. } => ops.iter().any(op_writes),
        Plan::Whole(whole) => matches!(
            whole,
            WholeDb::Flush
                | WholeDb::MsetAcross(_)
                | WholeDb::MsetNx(_)
                | WholeDb::RenameAcross { .. }
                | WholeDb::Purge(_)
        ),
        _ => false,
    }
}

/// Whether a planned command's writes wait for a replica in sync mode: every write but a
/// controller's purge of slots the node no longer serves (no client reads those keys).
fn waits_for_replica(plan: &Plan) -> bool {
    plan_writes(plan) && !matches!(plan, Plan::Whole(WholeDb::Purge(_)))
}

/// What a replica refuses (writes; reads while it takes its first copy), and what a primary
/// in sync mode refuses when no replica is online to acknowledge a write.
fn replication_refusal(shared: &ServerShared, planned: &Plan) -> Option<Reply> {
    let replication = &shared.replication;
    let sync = replication.mode == ReplicationMode::Sync;
    if !sync && !replication.is_replica() {
        return None;
    }
    let writes = plan_writes(planned);
    if replication.is_replica() {
        if writes {
            return Some(Reply::error(errors::READONLY));
        }
        if replication.loading() && matches!(planned, Plan::Keys { .. }) {
            return Some(Reply::error(errors::LOADING));
        }
        return None;
    }
    if waits_for_replica(planned) && !replication.any_replica_online() {
        return Some(Reply::error(errors::NO_REPLICAS));
    }
    None
}

/// Whether this node answers writes only once a replica has them (a sync-mode primary): only
/// then are a batch's writes told apart from its reads.
fn sync_primary(shared: &ServerShared) -> bool {
    let replication = &shared.replication;
    replication.mode == ReplicationMode::Sync && !replication.is_replica()
}

/// In sync mode, after writes: waits until a replica has everything this node has logged so
/// far. The error that replaces the writes' replies when none acknowledges in time (they are
/// durable here; whether a replica has them is unknown).
async fn replicated(shared: &ServerShared) -> Option<Reply> {
    if !sync_primary(shared) {
        return None;
    }
    let replication = &shared.replication;
    let offset = replication.backlog.end();
    let timeout = replication.sync_timeout;
    let have = replication.wait_acknowledged(offset, 1, timeout).await;
    (have == 0).then(|| {
        Reply::error(format!(
            "NOREPLICAS the write is durable on this node, but no replica acknowledged it within {} ms",
            timeout.as_millis()
        ))
    })
}

fn write_reply(reply: &Reply, session: &Session, out: &mut Vec<u8>) {
    reply.write(&mut crate::resp::Replies::new(out, session.resp3));
}

/// The keys of a planned command (`writes`: only those it may write).
fn plan_keys(plan: &Plan, writes: bool) -> Vec<&[u8]> {
    match plan {
        Plan::Keys { ops, .. } => ops
            .iter()
            .filter(|op| op.writes || !writes)
            .flat_map(|op| op.locked_keys())
            .map(Vec::as_slice)
            .collect(),
        Plan::Whole(WholeDb::MsetAcross(pairs) | WholeDb::MsetNx(pairs)) => {
            pairs.iter().map(|(key, _)| key.as_slice()).collect()
        }
        Plan::Whole(WholeDb::RenameAcross { from, to, .. }) => vec![from, to],
        _ => Vec::new(),
    }
}

/// In cluster mode: the redirect (or `-CROSSSLOT`, `-TRYAGAIN`) for commands whose keys are not
/// all in one slot this node serves, else the ticket their writes hold until applied
/// (`cluster/moving.rs`). Out of cluster mode they always run here, with no ticket.
fn placed(
    shared: &ServerShared,
    session: &Session,
    plans: &[Plan],
) -> Result<Option<WriteTicket>, Reply> {
    let cluster = &shared.cluster;
    if !cluster.enabled() {
        return Ok(None);
    }
    if cluster.moving.active()
        && plans
            .iter()
            .any(|p| matches!(p, Plan::Whole(WholeDb::Flush)))
    {
        return Err(Reply::error(
            "ERR a slot migration is under way: FLUSHDB waits for it",
        ));
    }
    // The ticket first, the slot check after: a topology that moves a slot away is in place
    // before the slot's fence is lifted, so a write past the fence sees it.
    let written: Vec<&[u8]> = plans
        .iter()
        .flat_map(|plan| plan_keys(plan, true))
        .collect();
    let ticket = match written.is_empty() {
        true => None,
        false => Some(cluster.moving.begin_write(&written)?),
    };
    if !session.bypass_slots {
        let keys = plans.iter().flat_map(|plan| plan_keys(plan, false));
        let reads_only = session.readonly && !plans.iter().any(plan_writes);
        if let Some(redirect) = cluster.redirect(keys, reads_only) {
            return Err(redirect);
        }
    }
    Ok(ticket)
}

/// Inside MULTI: a request is checked and queued.
fn queue(db: &Db, shared: &ServerShared, session: &mut Session, request: Vec<Vec<u8>>) -> Reply {
    let planned = plan(request.clone(), |key| db.shard_of(key));
    let checked = match shared.cluster.enabled() && !session.bypass_slots {
        true => shared.cluster.redirect(plan_keys(&planned, false), false),
        false => None,
    };
    if let Some(refusal) = checked.or_else(|| replication_refusal(shared, &planned)) {
        session.queue_failed = true;
        return refusal;
    }
    match planned {
        Plan::Reply(reply @ Reply::Error(_)) => {
            session.queue_failed = true;
            reply
        }
        _ => {
            session.queued.get_or_insert_with(Vec::new).push(request);
            Reply::Simple("QUEUED".into())
        }
    }
}

/// A command that is not on keys: the session's, the whole database's, or a known reply.
/// Returns the reply and whether the connection closes after it.
async fn run_other(
    db: &Db,
    shared: &Arc<ServerShared>,
    session: &mut Session,
    plan: Plan,
) -> (Reply, bool) {
    let writes = sync_primary(shared) && waits_for_replica(&plan);
    match plan {
        Plan::Reply(reply) => (reply, false),
        Plan::Whole(command) => {
            let reply = run_whole(db, shared, session, command).await;
            match writes && !matches!(reply, Reply::Error(_)) {
                true => (replicated(shared).await.unwrap_or(reply), false),
                false => (reply, false),
            }
        }
        Plan::Keys { .. } => unreachable!("commands on keys run in segments"),
        Plan::Session(request) if request[0].eq_ignore_ascii_case(b"WATCH") => {
            (watch(db, shared, session, &request[1..]).await, false)
        }
        Plan::Session(request) => {
            let (reply, after) = run_session(session, &request, shared);
            match after {
                After::Continue => (reply, false),
                After::Close => (reply, true),
                After::Shutdown => {
                    shared.request_shutdown();
                    (reply, true)
                }
                After::Exec(queued) => (exec(db, shared, session, queued).await, false),
            }
        }
    }
}

/// `WATCH key [key ...]`: the keys are registered first, then their expiry deadlines read
/// (a write in between flags the watch; see `watch.rs`).
async fn watch(db: &Db, shared: &ServerShared, session: &mut Session, keys: &[Vec<u8>]) -> Reply {
    if session.queued.is_some() {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    if shared.cluster.enabled() && !session.bypass_slots {
        let named = keys.iter().map(Vec::as_slice);
        if let Some(redirect) = shared.cluster.redirect(named, session.readonly) {
            return redirect;
        }
    }
    let watching = session
        .watching
        .get_or_insert_with(|| Watching::new(&shared.store.watches));
    if watching.len() + keys.len() > WATCHED_KEYS_MAX {
        return Reply::error(format!(
            "ERR a connection watches at most {WATCHED_KEYS_MAX} keys"
        ));
    }
    let added = watching.add(keys);
    let mut segment = Segment::default();
    for key in &added {
        let request = vec![b"PEXPIRETIME".to_vec(), key.clone()];
        if let Plan::Keys { ops, combine } = plan(request, |key| db.shard_of(key)) {
            segment.commands.push((ops, combine));
        }
    }
    let deadlines = run_segment(db, &shared.store, segment).await;
    let watching = session.watching.as_mut().expect("registered above");
    for (key, deadline) in added.iter().zip(deadlines) {
        if let Reply::Integer(at) = deadline {
            watching.set_deadline(key, u64::try_from(at).ok());
        }
    }
    Reply::Ok
}

/// EXEC: the queued requests, their replies as one array; null when a watched key was
/// written or expired since WATCH. Commands on keys (MSET too, on any shards) run as one
/// transaction, isolated and atomic across shards (`across.rs`); a transaction with other
/// commands (the connection's, the whole database's, MSETNX) runs them in order between its
/// commands on keys, isolated per shard only.
async fn exec(
    db: &Db,
    shared: &Arc<ServerShared>,
    session: &mut Session,
    queued: Vec<Vec<Vec<u8>>>,
) -> Reply {
    let watching = session.watching.take();
    if watching.as_ref().is_some_and(|w| w.broken(now_ms())) {
        return Reply::NullArray;
    }
    let planned: Vec<Plan> = queued
        .into_iter()
        .map(|request| plan(request, |key| db.shard_of(key)))
        .collect();
    let writes = sync_primary(shared) && planned.iter().any(waits_for_replica);
    // In cluster mode a transaction's keys are all in one slot this node owns; its writes
    // hold one ticket until EXEC's end.
    let _ticket = match placed(shared, session, &planned) {
        Ok(ticket) => ticket,
        Err(redirect) => return redirect,
    };
    let reply = match planned.iter().all(on_keys_only) {
        true => exec_isolated(db, &shared.store, planned, watching).await,
        false => exec_in_order(db, shared, session, planned).await,
    };
    match writes && reply != Reply::NullArray {
        true => replicated(shared).await.unwrap_or(reply),
        false => reply,
    }
}

/// Whether a queued command runs inside an isolated transaction: a command on keys, or MSET
/// over several shards (MSETNX answers 0 inside a transaction that goes on, so it runs in
/// order).
fn on_keys_only(plan: &Plan) -> bool {
    matches!(
        plan,
        Plan::Keys { .. } | Plan::Whole(WholeDb::MsetAcross(_))
    )
}

/// EXEC of commands on keys only: one transaction, which also locks the watched keys and
/// checks the watch with every key locked.
async fn exec_isolated(
    db: &Db,
    store: &Store,
    planned: Vec<Plan>,
    watching: Option<Watching>,
) -> Reply {
    let commands = planned
        .into_iter()
        .map(|plan| match plan {
            Plan::Keys { ops, combine } => (ops, combine),
            Plan::Whole(WholeDb::MsetAcross(pairs)) => (mset_ops(pairs, false), Combine::Ok),
            _ => unreachable!("checked by on_keys_only"),
        })
        .collect();
    let watched = watching.iter().flat_map(Watching::keys).cloned().collect();
    let proceed: Proceed = match watching {
        Some(watching) => Arc::new(move |_: &[Reply]| !watching.broken(now_ms())),
        None => Arc::new(|_: &[Reply]| true),
    };
    match crate::across::run(db, store, commands, watched, proceed).await {
        Outcome::Done(replies) => Reply::Array(replies),
        Outcome::Aborted => Reply::NullArray,
    }
}

/// EXEC of a transaction with commands not on keys: everything in order.
async fn exec_in_order(
    db: &Db,
    shared: &Arc<ServerShared>,
    session: &mut Session,
    planned: Vec<Plan>,
) -> Reply {
    let mut segment = Segment::default();
    let mut items = Vec::with_capacity(planned.len());
    for planned in planned {
        match planned {
            Plan::Keys { ops, combine } => segment.commands.push((ops, combine)),
            other => {
                items.extend(run_segment(db, &shared.store, std::mem::take(&mut segment)).await);
                let (reply, _) = Box::pin(run_other(db, shared, session, other)).await;
                items.push(reply);
            }
        }
    }
    items.extend(run_segment(db, &shared.store, segment).await);
    Reply::Array(items)
}

/// Runs the segment and appends its replies.
async fn flush(
    db: &Db,
    shared: &ServerShared,
    segment: &mut Segment,
    session: &Session,
    out: &mut Vec<u8>,
) {
    if segment.commands.is_empty() {
        return;
    }
    // Which commands write matters only to a sync-mode primary: not worked out elsewhere.
    let writes: Vec<bool> = match sync_primary(shared) {
        true => segment
            .commands
            .iter()
            .map(|(ops, _)| ops.iter().any(op_writes))
            .collect(),
        false => Vec::new(),
    };
    let mut replies = run_segment(db, &shared.store, std::mem::take(segment)).await;
    if writes.contains(&true) {
        if let Some(refusal) = replicated(shared).await {
            for (reply, _) in replies.iter_mut().zip(&writes).filter(|(_, w)| **w) {
                *reply = refusal.clone();
            }
        }
    }
    for reply in replies {
        write_reply(&reply, session, out);
    }
}

/// A shard's part of a segment: the (command, operation) positions and the operations.
type ShardGroup = (Vec<(usize, usize)>, Vec<KeyOp>);

/// The replies of a segment's commands, in order.
async fn run_segment(db: &Db, store: &Store, segment: Segment) -> Vec<Reply> {
    let shards = db.shard_count();
    // Per shard: the (command, operation) positions and the operations.
    let mut groups: Vec<ShardGroup> = vec![(Vec::new(), Vec::new()); shards];
    let Segment { commands, tickets } = segment;
    let mut results: Vec<Vec<Option<Reply>>> = Vec::with_capacity(commands.len());
    let mut combines = Vec::with_capacity(commands.len());
    // The operations move to their groups (a key and its arguments are not copied).
    for (command, (ops, combine)) in commands.into_iter().enumerate() {
        results.push(vec![None; ops.len()]);
        for (index, op) in ops.into_iter().enumerate() {
            let group = &mut groups[db.shard_of(&op.key)];
            group.0.push((command, index));
            group.1.push(op);
        }
        combines.push(combine);
    }
    let runs = groups
        .into_iter()
        .enumerate()
        .filter(|(_, (positions, _))| !positions.is_empty())
        .map(|(shard, (positions, ops))| async move {
            let replies = if ops.iter().any(|op| op.writes) {
                crate::hop::run_on_shard(db, store, shard, ops).await
            } else {
                read_here(db, store, shard, ops).await
            };
            (positions, replies)
        });
    for (positions, replies) in join_all(runs).await {
        debug_assert_eq!(positions.len(), replies.len());
        for ((command, index), reply) in positions.into_iter().zip(replies) {
            results[command][index] = Some(reply);
        }
    }
    // The writes are applied: their tickets (cluster mode) may go.
    drop(tickets);
    combines
        .into_iter()
        .zip(results)
        .map(|(combine, replies)| {
            combine.reply(
                replies
                    .into_iter()
                    .map(|r| r.unwrap_or(Reply::Null))
                    .collect(),
            )
        })
        .collect()
}

/// Reads on the worker's thread: each key read in place where its page is in the pool. A
/// large value that kept changing under the read is read again on its shard, under its lock.
async fn read_here(db: &Db, store: &Store, shard: usize, ops: Vec<KeyOp>) -> Vec<Reply> {
    let mut replies = Vec::with_capacity(ops.len());
    let mut again = Vec::new();
    for (index, op) in ops.iter().enumerate() {
        debug_assert!(!op.writes);
        let now = now_ms();
        let chunks = &store.chunks;
        let anywhere = Anywhere(chunks);
        let reply = match chunks.load_for(&anywhere, &op.key, now, op.payload).await {
            Ok(loaded) => match (crate::group::live(loaded.value.as_deref(), now), op.run) {
                (Ok(current), Run::Hash(run, needs)) => {
                    crate::hashes::read_anywhere(store, op, (run, needs), current).await
                }
                (Ok(current), _) => op.run_value(current, now),
                (Err(reply), _) => reply,
            },
            Err(Reply::Error(text)) if text == KEPT_CHANGING => {
                // Marked as writing so the shard locks the key; the function writes nothing.
                again.push((
                    index,
                    KeyOp {
                        writes: true,
                        ..op.clone()
                    },
                ));
                Reply::Null
            }
            Err(reply) => reply,
        };
        replies.push(reply);
    }
    if !again.is_empty() {
        let (positions, ops): (Vec<usize>, Vec<KeyOp>) = again.into_iter().unzip();
        let locked = crate::hop::run_on_shard(db, store, shard, ops).await;
        for (index, reply) in positions.into_iter().zip(locked) {
            replies[index] = reply;
        }
    }
    replies
}
