//! Batches across shards: all or nothing, also across a crash (see `batch_log.rs` for the
//! protocol).
//!
//! The coordinator serialises cross-shard commits: under its lock a batch gets its id and its
//! record goes into the batch log (durable per the durability mode, the sync shared by
//! concurrent committers on the batch log's sync thread); then each part goes to its shard as
//! one batch with the marker of the batch's id, and the caller waits until every part is
//! applied, not until each is durable in its shard's log: the batch log's record already
//! makes the batch durable (a part a crash takes lacks its marker, and the reopen applies it
//! from the batch log). The batch stays in flight, which keeps the batch log from being
//! emptied, until every part is durable in its shard's log too. The commit runs as a task of
//! its own on a shard, so a caller that stops waiting never leaves a batch half applied. The
//! shards apply parts concurrently with everything else they do, so the batch becomes visible
//! shard by shard (it is atomic, not isolated: a reader on two shards can see one part before
//! the other). Single-shard batches never come here.
//!
//! Without a log (durability `off`) nothing survives a crash anyway: the parts are simply
//! applied.

use super::batch_log::{BatchLog, LoggedBatch};
use super::reply::{self, ReplyReceiver, ReplySender};
use super::syncer::Syncer;
use super::Db;
use crate::catalog::TableId;
use crate::db::{DbHandle, WriteBatch};
use crate::error::{OpenError, WriteError};
use crate::wal::Op;
use futures_util::future::join_all;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What [`Db::write_async_then`] runs on each part's shard once the part is done.
pub(super) type AfterPart = Arc<dyn Fn(usize) + Send + Sync>;

pub(crate) use crate::catalog::SYSTEM_TABLE;

/// The batch log is emptied once it holds this many bytes and no batch is in flight.
const BATCH_LOG_RESET_BYTES: u64 = 16 << 20;

/// A batch's record, as [`Db::write_batch_record`] left it.
pub(super) enum Record {
    /// No log (durability `off`): the batch only has its id.
    Unlogged(u64),
    /// Written to the log; durable once synced up to its end.
    Written(Written),
}

/// A record written to the batch log, not yet synced.
pub(super) struct Written {
    pub(super) id: u64,
    /// The log's end after the record.
    pub(super) end: u64,
    /// The file to sync (`None`: the log is not synced).
    pub(super) file: Option<Arc<dyn ringdb_io::BlockingFile>>,
    pub(super) path: std::path::PathBuf,
}

/// The cross-shard commit's state.
pub(super) struct Coordinator {
    state: Mutex<CoordinatorState>,
    /// How far the log is written and durable: shared with the sync thread.
    pub(super) sync: Arc<SyncState>,
    /// The thread that syncs for tasks on the shards (`syncer.rs`).
    pub(super) syncer: Syncer,
    /// It has a log (the shards have one): a commit across shards is atomic across a crash
    /// only through it.
    pub(super) logged: bool,
}

/// How far the batch log is written and durable.
pub(super) struct SyncState {
    /// The log's end the last finished sync covered; held while a sync runs, so that
    /// committers who arrive meanwhile wait and then find their record covered (group
    /// commit).
    durable_end: Mutex<u64>,
    /// The log's end after the last write (read by a sync without the state's lock).
    written_end: std::sync::atomic::AtomicU64,
}

pub(super) struct CoordinatorState {
    /// `None` without a log.
    log: Option<BatchLog>,
    next_id: u64,
    /// Batches whose parts are not all committed yet: the log is kept while any is.
    pub(super) in_flight: usize,
    /// The highest id the log holds (markers up to it are deleted when it is emptied).
    last_logged: u64,
    /// A write or sync of the log failed: whether that batch is in it is unknown until a
    /// reopen recovers the log, so cross-shard batches are refused until then.
    pub(super) failed: bool,
}

impl Coordinator {
    /// A coordinator without a log (durability `off`, or one shard).
    pub(super) fn unlogged() -> Coordinator {
        Coordinator::new(None, 1)
    }

    fn new(log: Option<BatchLog>, next_id: u64) -> Coordinator {
        let logged = log.is_some();
        Coordinator {
            logged,
            state: Mutex::new(CoordinatorState {
                log,
                next_id,
                in_flight: 0,
                last_logged: 0,
                failed: false,
            }),
            sync: Arc::new(SyncState::new()),
            syncer: Syncer::default(),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, CoordinatorState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl SyncState {
    /// Nothing written, nothing synced.
    pub(super) fn new() -> SyncState {
        SyncState {
            durable_end: Mutex::new(0),
            written_end: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Makes the log durable up to `end` (a committer's record), sharing the sync with
    /// every committer whose record is in by then.
    pub(super) fn sync_to(
        &self,
        file: &dyn ringdb_io::BlockingFile,
        end: u64,
    ) -> std::io::Result<()> {
        let mut durable = self.durable_end.lock().unwrap_or_else(|p| p.into_inner());
        if *durable >= end {
            return Ok(());
        }
        // Every record written before this point is covered by the sync.
        let covered = self.written_end.load(std::sync::atomic::Ordering::Acquire);
        file.sync_data()?;
        *durable = covered;
        Ok(())
    }
}

/// The part of batch `id` for one shard: its operations and the marker.
async fn commit_part(
    h: DbHandle,
    marker: Option<u64>,
    mut part: WriteBatch,
) -> Result<(), WriteError> {
    if let Some(id) = marker {
        let system = h.create_table(SYSTEM_TABLE).await?;
        part.put_in(system, &id.to_be_bytes(), b"");
    }
    h.write(&part).await
}

/// The parts of a batch across shards not yet durable in their shards' logs: the last one
/// ends the batch's time in flight.
struct PartsPending {
    db: Db,
    remaining: AtomicUsize,
    failed: AtomicBool,
    commit: Mutex<Option<crate::txn::AcrossCommit>>,
}

impl PartsPending {
    /// One part is durable (`durable`) or failed.
    fn part_done(&self, durable: bool) {
        if !durable {
            self.failed.store(true, Ordering::Release);
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let commit = self.commit.lock().unwrap_or_else(|p| p.into_inner()).take();
            let all_durable = !self.failed.load(Ordering::Acquire);
            if let Some(commit) = commit {
                self.db.across_done(commit, all_durable);
            }
        }
    }
}

/// A reply that reports a part the shard never took.
fn refused(error: crate::error::ShardError) -> ReplyReceiver<Result<(), WriteError>> {
    let (sent, reply) = reply::channel();
    sent.send(Err(WriteError::from(error)));
    reply
}

/// On the part's shard: applies the part (with the batch's marker), runs `after` and
/// replies as soon as it is in the tree (or failed before), then waits for its durability
/// and tells `pending`.
fn apply_part(
    shard: usize,
    (marker, mut part): (Option<u64>, WriteBatch),
    after: AfterPart,
    pending: Arc<PartsPending>,
    sent: ReplySender<Result<(), WriteError>>,
) -> impl FnOnce(DbHandle) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> + Send {
    move |h: DbHandle| {
        Box::pin(async move {
            let reply = std::rc::Rc::new(std::cell::Cell::new(Some(sent)));
            let (early, after_applied) = (reply.clone(), after.clone());
            let on_applied = move || {
                after_applied(shard);
                if let Some(sent) = early.take() {
                    sent.send(Ok(()));
                }
            };
            let written = match marker {
                Some(id) => match h.create_table(SYSTEM_TABLE).await {
                    Ok(system) => {
                        part.put_in(system, &id.to_be_bytes(), b"");
                        h.write_then(&part, on_applied).await
                    }
                    Err(error) => Err(error),
                },
                None => h.write_then(&part, on_applied).await,
            };
            let durable = written.is_ok();
            if let Some(sent) = reply.take() {
                // Never applied: `after` still runs, and the caller gets the error.
                after(shard);
                sent.send(written);
            }
            pending.part_done(durable);
        })
    }
}

/// Whether the part of batch `id` is on this shard already.
async fn has_marker(h: DbHandle, id: u64) -> Result<bool, WriteError> {
    let system = h.create_table(SYSTEM_TABLE).await?;
    Ok(h.get_in(system, &id.to_be_bytes()).await?.is_some())
}

/// Deletes the markers of batches up to `last` (their log records are gone).
async fn delete_markers(h: DbHandle, last: u64) -> Result<(), WriteError> {
    let system = h.create_table(SYSTEM_TABLE).await?;
    let end = last.checked_add(1).map(u64::to_be_bytes);
    let end = end.as_ref().map_or(std::ops::Bound::Unbounded, |e| {
        std::ops::Bound::Excluded(&e[..])
    });
    // Each round deletes up to 1024 markers; there are at most as many as batches logged.
    loop {
        let markers = h
            .scan_in(
                system,
                std::ops::Bound::Unbounded,
                end,
                crate::tree::Direction::Forward,
                1024,
            )
            .await?;
        if markers.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        for (key, _) in &markers {
            batch.delete_in(system, key);
        }
        h.write(&batch).await?;
    }
}

impl Db {
    /// Commits a batch whose parts live on several shards (see the module doc), blocking the
    /// calling thread: the commit runs as [`write_across_async`](Self::write_across_async)'s
    /// does, as a task on the first part's shard.
    pub(super) fn write_across(&self, parts: Vec<(usize, WriteBatch)>) -> Result<(), WriteError> {
        assert!(parts.len() > 1, "a batch across shards has several parts");
        let shard = parts[0].0;
        let db = self.clone();
        let after: AfterPart = Arc::new(|_| {});
        let commit = move |_| async move { db.commit_across(parts, after).await };
        let reply = self.submit(shard, commit)?;
        self.wait(shard, reply)?
    }

    /// [`write_across`](Self::write_across) from a task. The commit runs as a task of its own
    /// on the first part's shard: once past the commit point it applies every part even when
    /// the caller's future is dropped (a logged batch left unapplied would be applied again at
    /// the next open, over later writes of its keys). `after` runs on each part's shard once
    /// its part is done.
    pub(super) async fn write_across_async(
        &self,
        parts: Vec<(usize, WriteBatch)>,
        after: AfterPart,
    ) -> Result<(), WriteError> {
        assert!(parts.len() > 1, "a batch across shards has several parts");
        let shard = parts[0].0;
        let db = self.clone();
        let commit = move |_| async move { db.commit_across(parts, after).await };
        let reply = self.submit(shard, commit)?;
        let inbox = &self.shared.inboxes[shard];
        inbox.watch(reply.loseable());
        reply.await.ok_or_else(|| inbox.reply_lost())?
    }

    /// On a shard, as a task of its own: the commit point through the batch log's sync
    /// thread, then every part at once, each followed by `after` on its shard as soon as it is
    /// in the shard's tree. Returns once every part is applied, without waiting for the
    /// shards' logs: the batch log's durable record is what makes the batch durable (a part
    /// lost in a crash lacks its marker, and the reopen applies it from there). The batch stays
    /// in flight, and so in the batch log, until every part is durable in its shard's log too.
    async fn commit_across(
        &self,
        parts: Vec<(usize, WriteBatch)>,
        after: AfterPart,
    ) -> Result<(), WriteError> {
        let commit = match self.log_across_async(&parts).await {
            Ok(commit) => commit,
            Err(error) => {
                let shards = parts.iter().map(|(shard, _)| *shard);
                join_all(shards.map(|shard| {
                    let after = after.clone();
                    self.call_async(shard, move |_| async move { after(shard) })
                }))
                .await;
                return Err(error);
            }
        };
        let marker = commit.marker();
        let pending = Arc::new(PartsPending {
            db: self.clone(),
            remaining: AtomicUsize::new(parts.len()),
            failed: AtomicBool::new(false),
            commit: Mutex::new(Some(commit)),
        });
        let mut applied = Vec::with_capacity(parts.len());
        for (shard, part) in parts {
            let (sent, reply) = reply::channel();
            let task = apply_part(shard, (marker, part), after.clone(), pending.clone(), sent);
            match self.submit_to(shard, task, |()| ()) {
                Ok(()) => applied.push((shard, reply)),
                Err(error) => {
                    pending.part_done(false);
                    applied.push((shard, refused(error)));
                }
            }
        }
        let mut outcome = Ok(());
        for (shard, reply) in applied {
            let inbox = &self.shared.inboxes[shard];
            inbox.watch(reply.loseable());
            let part = reply
                .await
                .ok_or_else(|| WriteError::from(inbox.reply_lost()));
            outcome = outcome.and(part.and_then(|part| part));
        }
        outcome
    }

    /// The commit point: gives the batch its id, writes it to the log and makes it durable
    /// (sharing the sync with concurrent committers). Returns the id and the marker the parts
    /// carry (`None` without a log).
    #[cfg(any(test, feature = "__internal"))]
    pub(super) fn log_batch(
        &self,
        coordinator: &Coordinator,
        parts: &[(usize, WriteBatch)],
    ) -> Result<(u64, Option<u64>), WriteError> {
        let written = match self.write_batch_record(coordinator, parts)? {
            Record::Unlogged(id) => return Ok((id, None)),
            Record::Written(written) => written,
        };
        if let Some(file) = &written.file {
            if let Err(source) = coordinator.sync.sync_to(&**file, written.end) {
                coordinator.lock().failed = true;
                return Err(WriteError::BatchLog {
                    path: written.path,
                    source,
                });
            }
        }
        Ok((written.id, Some(written.id)))
    }

    /// Gives the batch its id and writes its record to the log, not yet synced.
    pub(super) fn write_batch_record(
        &self,
        coordinator: &Coordinator,
        parts: &[(usize, WriteBatch)],
    ) -> Result<Record, WriteError> {
        let mut state = coordinator.lock();
        if state.failed {
            return Err(WriteError::BatchLogFailed);
        }
        self.reset_log_if_due(&mut state)?;
        let id = state.next_id;
        state.next_id += 1;
        let Some(log) = &mut state.log else {
            state.in_flight += 1;
            return Ok(Record::Unlogged(id));
        };
        let logged: Vec<(usize, &[Op])> = parts.iter().map(|(s, b)| (*s, b.ops())).collect();
        let path = log.path().to_path_buf();
        let written = log.write(id, &logged);
        let file = log.sync_handle();
        let end = match written {
            Ok(end) => end,
            Err(source) => {
                state.failed = true;
                return Err(WriteError::BatchLog { path, source });
            }
        };
        state.last_logged = id;
        state.in_flight += 1;
        coordinator
            .sync
            .written_end
            .store(end, std::sync::atomic::Ordering::Release);
        Ok(Record::Written(Written {
            id,
            end,
            file,
            path,
        }))
    }

    /// Empties the batch log when it is large and no batch is in flight, and has the markers
    /// it covered deleted in the background.
    fn reset_log_if_due(&self, state: &mut CoordinatorState) -> Result<(), WriteError> {
        let Some(log) = &mut state.log else {
            return Ok(());
        };
        if state.in_flight > 0 || log.len_bytes() < BATCH_LOG_RESET_BYTES {
            return Ok(());
        }
        if let Err(source) = log.reset() {
            state.failed = true;
            let path = log.path().to_path_buf();
            return Err(WriteError::BatchLog { path, source });
        }
        // No committer is between its write and its sync (none is in flight).
        let coordinator = self.shared.coordinator();
        *coordinator
            .sync
            .durable_end
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = 0;
        coordinator
            .sync
            .written_end
            .store(0, std::sync::atomic::Ordering::Release);
        let last = state.last_logged;
        for shard in 0..self.shard_count() {
            // The reply is not awaited: a marker left behind only costs a few bytes until the
            // next reset or reopen deletes it.
            drop(self.submit(shard, move |h| delete_markers(h, last)));
        }
        Ok(())
    }

    /// On open: applies the parts of logged batches that their shards lack, makes them
    /// durable, empties the log and deletes the markers. Returns the coordinator.
    pub(super) fn recover_batches(
        &self,
        dir: &Path,
        sync: bool,
        storage: Option<&dyn super::storage::ShardStorage>,
    ) -> Result<Coordinator, OpenError> {
        let path = dir.join(super::batch_log::BATCH_LOG_FILE);
        let file_error = |source| OpenError::File {
            path: path.clone(),
            source,
        };
        let opened = match storage {
            Some(storage) => BatchLog::open_on(storage.batch_log(), path.clone(), sync),
            None => BatchLog::open(dir, sync),
        };
        let (mut log, batches) = opened.map_err(file_error)?;
        let last = batches.last().map_or(0, |b| b.id);
        for batch in &batches {
            self.apply_missing_parts(batch)?;
        }
        if !batches.is_empty() {
            self.flush()?;
            log.reset().map_err(file_error)?;
        }
        // Every marker is stale now: the log is empty.
        self.delete_markers_everywhere(u64::MAX)?;
        Ok(Coordinator::new(Some(log), last + 1))
    }

    /// Applies each part of `batch` whose shard has no marker for it.
    fn apply_missing_parts(&self, batch: &LoggedBatch) -> Result<(), WriteError> {
        for (shard, ops) in &batch.parts {
            if *shard >= self.shard_count() {
                return Err(WriteError::BatchLogShard {
                    batch: batch.id,
                    shard: *shard,
                    shards: self.shard_count(),
                });
            }
            let id = batch.id;
            if self.call(*shard, move |h| has_marker(h, id))?? {
                continue;
            }
            let part = WriteBatch::from_ops(ops.clone());
            self.call(*shard, move |h| commit_part(h, Some(id), part))??;
        }
        Ok(())
    }

    /// Deletes the markers up to `last` on every shard and waits.
    fn delete_markers_everywhere(&self, last: u64) -> Result<(), WriteError> {
        for shard in 0..self.shard_count() {
            self.call(shard, move |h| delete_markers(h, last))??;
        }
        Ok(())
    }
}

/// Ids are never reused within one log's life; a table id in a part is the same on every
/// shard (tables are created on all shards in one order, see `tables.rs`).
const _: () = assert!(TableId::DEFAULT.get() == 0);

#[cfg(test)]
mod tests {
    use super::super::batch_log::BATCH_LOG_FILE;
    use super::*;
    use crate::Durability;

    fn open(dir: &Path) -> Db {
        let options = crate::Options {
            direct: false,
            pool_pages: 128,
            durability: Durability::Fdatasync,
            wal_bytes: 1 << 20,
            ..crate::Options::default()
        };
        Db::builder(dir).options(options).shards(2).open().unwrap()
    }

    /// Two keys on different shards.
    fn keys_on_both(db: &Db) -> (Vec<u8>, Vec<u8>) {
        let a = b"a".to_vec();
        let b = (0..1000u32)
            .map(|i| format!("b{i}").into_bytes())
            .find(|k| db.shard_of(k) != db.shard_of(&a))
            .unwrap();
        (a, b)
    }

    fn put(key: &[u8], value: &[u8]) -> Op {
        Op::Put {
            table: TableId::DEFAULT,
            key: key.to_vec(),
            value: value.to_vec(),
        }
    }

    /// A crash right after the commit point: the batch is in the batch log and on no shard.
    /// Reopening applies it on both; a torn record after it is applied nowhere.
    #[test]
    fn a_logged_batch_is_applied_on_reopen_and_a_torn_one_nowhere() {
        let dir = std::env::temp_dir().join(format!("ringdb-cross-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = open(&dir);
        let (a, b) = keys_on_both(&db);
        let (shard_a, shard_b) = (db.shard_of(&a), db.shard_of(&b));
        db.close().unwrap();
        let (mut log, logged) = BatchLog::open(&dir, true).unwrap();
        assert!(logged.is_empty());
        let (part_a, part_b) = ([put(&a, b"1")], [put(&b, b"1")]);
        log.append(1, &[(shard_a, &part_a[..]), (shard_b, &part_b[..])])
            .unwrap();
        let (part_a, part_b) = ([put(&a, b"2")], [put(&b, b"2")]);
        log.append(2, &[(shard_a, &part_a[..]), (shard_b, &part_b[..])])
            .unwrap();
        drop(log);
        // Tear the second record: its last bytes never reached the disk.
        let path = dir.join(BATCH_LOG_FILE);
        let len = std::fs::metadata(&path).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(len - 5).unwrap();
        let db = open(&dir);
        assert_eq!(db.get(&a).unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(db.get(&b).unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "emptied after recovery"
        );
        db.close().unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A batch whose parts all landed stays in the log until it is emptied; a later write to
    /// one of its keys (acknowledged) must survive the replay of the log on reopen.
    #[test]
    fn replaying_the_log_never_overwrites_a_later_write() {
        let dir = std::env::temp_dir().join(format!("ringdb-cross-later-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = open(&dir);
        let (a, b) = keys_on_both(&db);
        let mut batch = WriteBatch::new();
        batch.put(&a, b"batch").put(&b, b"batch");
        db.write(&batch).unwrap();
        db.insert(&a, b"later").unwrap();
        assert!(std::fs::metadata(dir.join(BATCH_LOG_FILE)).unwrap().len() > 0);
        drop(db);
        let db = open(&dir);
        assert_eq!(db.get(&a).unwrap().as_deref(), Some(&b"later"[..]));
        assert_eq!(db.get(&b).unwrap().as_deref(), Some(&b"batch"[..]));
        db.close().unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }
}
