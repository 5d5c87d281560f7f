//! [`DbHandle`]: the database as the tasks on its runtime see it, and the commit path.
//!
//! Without a log a write goes straight into the tree. With one, every write is a commit
//! (`commit`): lock the batch's keys, append its record to the log (log first: every change in
//! the tree has its record before it in the log), apply it to the tree, start a checkpoint
//! when one is due, then wait until the record is durable. A failure after the append leaves
//! memory and log disagreeing, so from then on the handle refuses work until the database is
//! reopened (recovery decides from the log).

use super::batch::WriteBatch;
use super::layout::FILE_IDS;
use crate::catalog::{Catalog, TableId};
use crate::checkpoint::{Checkpointer, Reason};
use crate::error::{ReadError, StorageError, WaitFor, WriteError};
use crate::keylock::KeyLocks;
use crate::meta::{Meta, META_PID};
use crate::tree::BTree;
use crate::wal::{Durability, Op, Wal};
use std::cell::RefCell;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

/// Checkpoints a commit runs (or waits for) to find room in the log before it gives up: each
/// frees the log up to the oldest batch still being applied, so a handful always suffice.
const LOG_ROOM_CHECKPOINTS_MAX: u64 = 1 << 16;
/// Loads of the meta page a flush makes before it gives up: the page is pinned from its load
/// until the flush writes it, so the second attempt always finds it.
const META_LOAD_ROUNDS_MAX: u64 = 1 << 10;

/// The log side of a database opened with a durability mode.
pub(super) struct Durable {
    pub(super) wal: Wal,
    pub(super) ckpt: Checkpointer,
    pub(super) locks: Rc<KeyLocks>,
    /// Dirty pages that start a checkpoint.
    pub(super) dirty_high: usize,
    /// A commit failed after its record was appended: memory and log may disagree, so the
    /// database refuses work until it is reopened (recovery decides from the log). Every
    /// refusal carries this first failure.
    pub(super) failed: RefCell<Option<Arc<WriteError>>>,
    /// The commit tap, if one is installed (see `tap.rs`).
    pub(super) tap: RefCell<Option<super::CommitTap>>,
}

/// A handle for tasks on the database's runtime. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct DbHandle {
    /// The default table's tree (also `tables`' default tree).
    pub(super) tree: Rc<BTree>,
    /// Every table, the default one included.
    pub(super) tables: Rc<Catalog>,
    pub(super) durable: Option<Rc<Durable>>,
    /// The transactions' lock table, clock and counters: one per database, shared by every
    /// clone of the handle.
    pub(crate) txn: Rc<crate::lock_manager::TxnShared>,
}

/// Applies one operation to its table; returns whether its key existed.
pub(super) async fn apply(tables: &Catalog, op: &Op) -> Result<bool, WriteError> {
    let table = op.table();
    let tree = tables
        .tree(table)
        .ok_or(WriteError::NoSuchTable { table })?;
    match op {
        Op::Put { key, value, .. } => tree.insert(key, value).await,
        Op::Delete { key, .. } => tree.remove(key).await,
    }
}

/// What a batch locks for one op: its key, prefixed by its table unless it is the default
/// one (two tables' keys may then share a lock: more waiting, never a wrong result).
fn lock_key(op: &Op) -> Vec<u8> {
    let table = op.table();
    if table == TableId::DEFAULT {
        return op.key().to_vec();
    }
    let mut k = Vec::with_capacity(5 + op.key().len());
    k.push(0xff);
    k.extend_from_slice(&table.get().to_be_bytes());
    k.extend_from_slice(op.key());
    k
}

impl DbHandle {
    /// A handle on `tables` (whose default tree is the database's first), with its log.
    pub(super) fn new(tables: Rc<Catalog>, durable: Option<Rc<Durable>>) -> DbHandle {
        DbHandle {
            tree: tables.default_tree().clone(),
            tables,
            durable,
            txn: Rc::default(),
        }
    }

    /// The value of `key` in the default table, if present.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.get_in(TableId::DEFAULT, key).await
    }

    /// Copies the value of `key` in the default table into `out` (cleared first); returns
    /// whether it was present. One buffer for many reads: no allocation per read.
    pub async fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, ReadError> {
        self.get_into_in(TableId::DEFAULT, key, out).await
    }

    /// Inserts or replaces in the default table; returns whether the key existed. With a
    /// log, a commit of its own.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        self.insert_in(TableId::DEFAULT, key, value).await
    }

    /// Removes from the default table; returns whether the key existed. With a log, a
    /// commit of its own.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, WriteError> {
        self.remove_in(TableId::DEFAULT, key).await
    }

    /// Runs one operation: straight into its tree without a log, else a commit of its own.
    pub(super) async fn write_one(&self, op: Op) -> Result<bool, WriteError> {
        if self.durable.is_none() {
            return apply(&self.tables, &op).await;
        }
        Ok(self.commit(&[op]).await?[0])
    }

    /// Commits `batch` atomically; with a log, returns once it is durable. A batch naming a
    /// table the database does not hold changes nothing.
    pub async fn write(&self, batch: &WriteBatch) -> Result<(), WriteError> {
        if self.durable.is_none() {
            for op in batch.ops() {
                self.tree_for_write(op.table())?;
            }
            for op in batch.ops() {
                apply(&self.tables, op).await?;
            }
            return Ok(());
        }
        self.commit(batch.ops()).await.map(|_| ())
    }

    /// The failure that made the database refuse work, if one did.
    pub(super) fn first_failure(&self) -> Option<Arc<WriteError>> {
        self.durable.as_ref()?.failed.borrow().clone()
    }

    /// Refuses a write once a commit failed after its record was logged.
    pub(super) fn check_failed(&self) -> Result<(), WriteError> {
        match self.first_failure() {
            Some(first) => Err(WriteError::Failed { first }),
            None => Ok(()),
        }
    }

    /// The commit path: lock the keys, append the record (log first: every change in the
    /// tree has its record before it in the log), apply it, then wait until it is durable.
    async fn commit(&self, ops: &[Op]) -> Result<Vec<bool>, WriteError> {
        self.commit_then(ops, || {}).await
    }

    /// Commits `batch` atomically and runs `applied` once its changes are in the tree, before
    /// the wait for durability (a transaction releases its locks there: early lock release).
    ///
    /// Safe with one log: whoever sees these changes and then writes appends its record after
    /// this one, so it cannot be durable (nor acknowledged) unless this one is too. A reader
    /// that writes nothing must wait for the log itself ([`DbHandle::wait_log_durable`]).
    /// Without a log `applied` runs after the batch is in the tree, as there is nothing to
    /// wait for.
    pub(crate) async fn write_then(
        &self,
        batch: &WriteBatch,
        applied: impl FnOnce(),
    ) -> Result<(), WriteError> {
        if self.durable.is_none() {
            let result = self.write(batch).await;
            applied();
            return result;
        }
        self.commit_then(batch.ops(), applied).await.map(|_| ())
    }

    /// Installs (or with `None` removes) the tap that sees every commit of this database
    /// from now on; returns whether it has a log (without one, nothing is committed through
    /// it and no tap runs).
    pub fn set_commit_tap(&self, tap: Option<super::CommitTap>) -> bool {
        match self.durable.as_ref() {
            Some(d) => {
                *d.tap.borrow_mut() = tap;
                true
            }
            None => false,
        }
    }

    /// Whether everything logged so far is durable now (always, without a log): then
    /// whatever a read has seen is, and [`wait_log_durable`](Self::wait_log_durable) would
    /// not wait.
    pub(crate) fn log_is_durable(&self) -> bool {
        match self.durable.as_ref() {
            None => true,
            Some(d) => self.first_failure().is_none() && d.wal.durable() >= d.wal.end(),
        }
    }

    /// Waits until everything logged so far is durable (nothing to wait for without a log):
    /// what a transaction that wrote nothing waits for after early lock release, so that it
    /// never reports what a crash could still take back.
    pub(crate) async fn wait_log_durable(&self) -> Result<(), WriteError> {
        let Some(d) = self.durable.as_ref() else {
            return Ok(());
        };
        self.check_failed()?;
        d.wal.wait_durable(d.wal.end()).await?;
        Ok(())
    }

    /// [`DbHandle::commit`], running `applied` between the apply and the wait for durability.
    async fn commit_then(
        &self,
        ops: &[Op],
        applied: impl FnOnce(),
    ) -> Result<Vec<bool>, WriteError> {
        let d = self.durable.as_ref().expect("commit needs a log");
        self.check_failed()?;
        if ops.is_empty() {
            applied();
            return Ok(Vec::new());
        }
        let record_bytes = self.check_batch(d, ops)?;
        let keys = d.locks.lock(ops.iter().map(lock_key).collect()).await;
        // The buffer's bound first: the log's room is checked last, with no await between it
        // and the append.
        d.wal.wait_buffer_room(record_bytes).await?;
        self.wait_for_log_room(d, record_bytes).await?;
        let (start, end) = d.wal.append(ops)?;
        self.tree.buffer().set_lsn_hint(end);
        let existed = self.apply_logged(d, ops).await?;
        d.wal.applied(start);
        // Under the keys' locks and after the apply: see `tap.rs` for why both matter.
        if let Some(tap) = d.tap.borrow().as_ref() {
            tap(&super::tap::changes(ops));
        }
        drop(keys);
        applied();
        self.checkpoint_if_due(d).await?;
        d.wal.wait_durable(end).await?;
        Ok(existed)
    }

    /// Refuses a batch the tree or the log cannot take; returns its record's size.
    fn check_batch(&self, d: &Durable, ops: &[Op]) -> Result<usize, WriteError> {
        for op in ops {
            self.tree_for_write(op.table())?
                .check_record(op.key(), op.value())?;
        }
        let len = d.wal.record_len(ops);
        if len > d.wal.max_record() {
            return Err(WriteError::BatchTooLarge {
                record_bytes: len,
                max_bytes: d.wal.max_record(),
            });
        }
        Ok(len)
    }

    /// Runs checkpoints (or waits for the one running) until the log has room for a record of
    /// `record_bytes`.
    pub(super) async fn wait_for_log_room(
        &self,
        d: &Durable,
        record_bytes: usize,
    ) -> Result<(), StorageError> {
        for _ in 0..LOG_ROOM_CHECKPOINTS_MAX {
            if d.wal.has_room(record_bytes) {
                return Ok(());
            }
            d.ckpt.run(&self.tables, Reason::LogFull).await?;
        }
        if d.wal.has_room(record_bytes) {
            return Ok(());
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::LogRoom { record_bytes },
            rounds: LOG_ROOM_CHECKPOINTS_MAX,
        })
    }

    /// Applies a batch whose record is in the log; a failure midway marks the database failed
    /// (the record is in the log, part of it is not in the tree) and is reported as that.
    async fn apply_logged(&self, d: &Durable, ops: &[Op]) -> Result<Vec<bool>, WriteError> {
        let mut existed = Vec::with_capacity(ops.len());
        for op in ops {
            match apply(&self.tables, op).await {
                Ok(e) => existed.push(e),
                Err(e) => return Err(Self::fail(d, e)),
            }
        }
        Ok(existed)
    }

    /// Marks the database failed by `e` (a change whose record is in the log did not reach
    /// memory); returns the refusal that reports it.
    pub(super) fn fail(d: &Durable, e: WriteError) -> WriteError {
        let failure = Arc::new(e);
        d.failed.borrow_mut().get_or_insert_with(|| failure.clone());
        WriteError::Failed { first: failure }
    }

    /// Takes a checkpoint when structural pages (which only a checkpoint writes; every dirty
    /// page without stealing) fill their share of the pool or the live log passes half of it. While one runs, a commit that
    /// finds structural pages past their share waits for it (back-pressure: the next cut's
    /// copies stay bounded).
    async fn checkpoint_if_due(&self, d: &Durable) -> Result<(), StorageError> {
        let bm = self.tree.buffer();
        let structural_full = bm.pages_for_checkpoint() > d.dirty_high;
        let log_half = d.wal.live_bytes() > d.wal.capacity() / 2;
        if structural_full {
            d.ckpt.run(&self.tables, Reason::Structure).await?;
        } else if log_half && !d.ckpt.running() {
            d.ckpt.run(&self.tables, Reason::LogHalf).await?;
        }
        Ok(())
    }

    /// Checkpoints until no dirty page is left (each cut copies a bounded share of the pool,
    /// so a full pool takes a few): after it, reopening replays nothing. Pages changed by
    /// commits meanwhile may stay dirty once the rounds' bound is reached.
    async fn checkpoint_everything(&self, d: &Durable) -> Result<(), StorageError> {
        let bm = self.tree.buffer();
        let rounds = 2 + bm.dirty_pages() / d.dirty_high.max(1);
        d.ckpt.run(&self.tables, Reason::Request).await?;
        for _ in 0..rounds {
            if bm.dirty_pages() == 0 {
                break;
            }
            d.ckpt.run(&self.tables, Reason::Request).await?;
        }
        Ok(())
    }

    /// Up to `limit` pairs in `[start, end)` order by key.
    pub async fn range(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
    ) -> Result<super::Pairs, ReadError> {
        Ok(self.tree.range(start, end, limit).await?)
    }

    /// Up to `limit` pairs with keys within (`start`, `end`), in key order
    /// ([`Direction::Forward`](crate::Direction::Forward)) or descending key order
    /// ([`Direction::Reverse`](crate::Direction::Reverse)). A caller resumes after the last key
    /// it got with `Bound::Excluded(last)` on the side it walks from (see the tree's `scan`).
    pub async fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: crate::Direction,
        limit: usize,
    ) -> Result<super::Pairs, ReadError> {
        let mut out = Vec::new();
        self.tree
            .scan(start, end, direction, limit, &mut out)
            .await?;
        Ok(out)
    }

    /// The largest key + value length accepted.
    pub fn max_record(&self) -> usize {
        self.tree.max_record()
    }

    /// Writes the meta page and every dirty page; with `sync`, makes them durable. With a
    /// log: a checkpoint.
    pub async fn flush(&self, sync: bool) -> Result<(), WriteError> {
        if let Some(d) = &self.durable {
            self.check_failed()?;
            return Ok(self.checkpoint_everything(d).await?);
        }
        let cut = self.write_meta_page().await?;
        self.tables.store().await?;
        let bm = self.tree.buffer();
        bm.flush_all(sync).await?;
        bm.free_list_written(cut);
        Ok(())
    }

    /// Writes the default tree's root, the catalog page's id, the allocator and the free list
    /// into the meta page (in the pool: the flush writes it back with the other dirty pages),
    /// after writing the free list's chain pages in place (so a meta page that names them
    /// never reaches the disk before them). Without a log only. Returns the free list's cut
    /// number.
    async fn write_meta_page(&self) -> Result<u64, StorageError> {
        let bm = self.tree.buffer();
        // Before `next_pid`: the cut may grow the data for the chain.
        let cut = bm.cut_free_list();
        let meta = Meta {
            page_size: bm.page_size() as u32,
            root: self.tree.root(),
            next_pid: bm.next_pid(),
            free_pages: cut.image.in_meta.clone(),
            free_list_head: cut.image.head,
            logged: false,
            epoch: 0,
            redo_lsn: 0,
            wal_bytes: 0,
            // With the cut: the catalog page is allocated (never free) at this point.
            catalog: self.tables.page(),
        };
        crate::freelist::write_chain(bm.io(), FILE_IDS.data, &cut.image).await?;
        for _ in 0..META_LOAD_ROUNDS_MAX {
            if let Some(g) = bm.try_fix(META_PID) {
                g.write(|p| meta.write_to(p));
                return Ok(cut.number);
            }
            drop(bm.load(META_PID).await?);
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::PageLoad { page: META_PID },
            rounds: META_LOAD_ROUNDS_MAX,
        })
    }

    /// [`super::Db::verify`], from a task of the database's runtime: every table's tree.
    pub async fn verify(&self) -> crate::VerifyReport {
        crate::verify::verify_catalog(&self.tables).await
    }

    /// Whether a checkpoint is running now (the simulated-disk tests cut the power between
    /// checkpoints, among eviction writes): not part of the API.
    #[cfg(any(test, feature = "__internal"))]
    #[cfg_attr(feature = "__internal", visibility::make(pub))]
    pub(crate) fn checkpoint_running(&self) -> bool {
        self.durable.as_ref().is_some_and(|d| d.ckpt.running())
    }

    /// The pool and the trees' roots as readers on other threads see them (`Send + Sync`;
    /// see `tree/optimistic.rs`).
    #[cfg_attr(feature = "__internal", visibility::make(pub))]
    pub(crate) fn read_view(&self) -> (crate::buffer::PoolView, Arc<crate::tree::PublishedRoots>) {
        (self.tree.buffer().view(), self.tables.published_roots())
    }

    /// How many changes the database's pages have had so far (see
    /// [`BufferManager::changes`](crate::buffer::BufferManager::changes)).
    pub(crate) fn page_changes(&self) -> u64 {
        self.tree.buffer().changes()
    }

    /// The tree, for this crate's tests and the benchmarks' calibration: not part of the API.
    #[doc(hidden)]
    pub fn tree(&self) -> &BTree {
        &self.tree
    }

    /// Everything the database counts, with its runtime's counters `runtime`.
    pub fn stats(
        &self,
        runtime: ringdb_io::RuntimeStats,
        io: ringdb_io::EffectiveIo,
    ) -> super::DbStats {
        let tree = &self.tree;
        super::DbStats {
            pool: tree.buffer().stats(),
            tree: tree.stats(),
            runtime,
            io,
            height: tree.root().height,
            tables: self.tables.len() + 1,
            pages: tree.buffer().next_pid(),
            durability: self.durability(),
            wal: self.durable.as_ref().map(|d| d.wal.stats()),
            checkpoints: self.durable.as_ref().map(|d| d.ckpt.stats()),
            memory: self.memory(),
        }
    }

    /// The engine's memory by part, each from the structure that holds it.
    pub fn memory(&self) -> crate::MemoryStats {
        let cfg = self.tree.buffer().config();
        let pool_frames = crate::PartBytes::fixed((cfg.frames * cfg.page_size) as u64);
        let Some(d) = &self.durable else {
            return crate::MemoryStats {
                pool_frames,
                ..Default::default()
            };
        };
        let (log_buffer, other) = d.wal.memory();
        crate::MemoryStats {
            pool_frames,
            log_buffer,
            checkpoint_staging: d.ckpt.memory(),
            key_locks: d.locks.memory(),
            other,
        }
    }

    /// The log's mode (`Off` without one).
    pub fn durability(&self) -> Durability {
        self.durable
            .as_ref()
            .map_or(Durability::Off, |d| d.wal.mode())
    }

    /// One durability point per commit instead of group commit (for the comparison).
    pub fn set_group_commit(&self, on: bool) {
        if let Some(d) = &self.durable {
            d.wal.set_group_commit(on);
        }
    }
}
