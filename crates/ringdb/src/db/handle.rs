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
use crate::checkpoint::Checkpointer;
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
}

/// A handle for tasks on the database's runtime. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct DbHandle {
    pub(super) tree: Rc<BTree>,
    pub(super) durable: Option<Rc<Durable>>,
}

/// Applies one operation to `tree`; returns whether its key existed.
pub(super) async fn apply(tree: &BTree, op: &Op) -> Result<bool, WriteError> {
    match op {
        Op::Put { key, value } => tree.insert(key, value).await,
        Op::Delete { key } => tree.remove(key).await,
    }
}

impl DbHandle {
    /// The value of `key`, if present.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        if let Some(first) = self.first_failure() {
            return Err(ReadError::Failed { first });
        }
        Ok(self.tree.get(key).await?)
    }

    /// Inserts or replaces; returns whether the key existed. With a log, a commit of its own.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        if self.durable.is_none() {
            return self.tree.insert(key, value).await;
        }
        let ops = vec![Op::Put {
            key: key.to_vec(),
            value: value.to_vec(),
        }];
        Ok(self.commit(ops).await?[0])
    }

    /// Removes; returns whether the key existed. With a log, a commit of its own.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, WriteError> {
        if self.durable.is_none() {
            return self.tree.remove(key).await;
        }
        Ok(self.commit(vec![Op::Delete { key: key.to_vec() }]).await?[0])
    }

    /// Commits `batch` atomically; with a log, returns once it is durable.
    pub async fn write(&self, batch: &WriteBatch) -> Result<(), WriteError> {
        if self.durable.is_none() {
            for op in batch.ops() {
                apply(&self.tree, op).await?;
            }
            return Ok(());
        }
        self.commit(batch.ops().to_vec()).await.map(|_| ())
    }

    /// The failure that made the database refuse work, if one did.
    fn first_failure(&self) -> Option<Arc<WriteError>> {
        self.durable.as_ref()?.failed.borrow().clone()
    }

    /// Refuses a write once a commit failed after its record was logged.
    fn check_failed(&self) -> Result<(), WriteError> {
        match self.first_failure() {
            Some(first) => Err(WriteError::Failed { first }),
            None => Ok(()),
        }
    }

    /// The commit path: lock the keys, append the record (log first: every change in the
    /// tree has its record before it in the log), apply it, then wait until it is durable.
    async fn commit(&self, ops: Vec<Op>) -> Result<Vec<bool>, WriteError> {
        let d = self.durable.as_ref().expect("commit needs a log");
        self.check_failed()?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let record_bytes = self.check_batch(d, &ops)?;
        let keys = d
            .locks
            .lock(ops.iter().map(|o| o.key().to_vec()).collect())
            .await;
        self.wait_for_log_room(d, record_bytes).await?;
        let (start, end) = d.wal.append(&ops)?;
        self.tree.buffer().set_lsn_hint(end);
        let existed = self.apply_logged(d, &ops).await?;
        d.wal.applied(start);
        drop(keys);
        self.checkpoint_if_due(d).await?;
        d.wal.wait_durable(end).await?;
        Ok(existed)
    }

    /// Refuses a batch the tree or the log cannot take; returns its record's size.
    fn check_batch(&self, d: &Durable, ops: &[Op]) -> Result<usize, WriteError> {
        for op in ops {
            let (k, v) = match op {
                Op::Put { key, value } => (key.as_slice(), value.as_slice()),
                Op::Delete { key } => (key.as_slice(), &[][..]),
            };
            self.tree.check_record(k, v)?;
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
    async fn wait_for_log_room(
        &self,
        d: &Durable,
        record_bytes: usize,
    ) -> Result<(), StorageError> {
        for _ in 0..LOG_ROOM_CHECKPOINTS_MAX {
            if d.wal.has_room(record_bytes) {
                return Ok(());
            }
            d.ckpt.run(&self.tree).await?;
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
            match apply(&self.tree, op).await {
                Ok(e) => existed.push(e),
                Err(e) => {
                    let failure = Arc::new(e);
                    d.failed.borrow_mut().get_or_insert_with(|| failure.clone());
                    return Err(WriteError::Failed { first: failure });
                }
            }
        }
        Ok(existed)
    }

    /// Takes a checkpoint when too much of the pool is dirty or the live log passes half of
    /// it (and none is running).
    async fn checkpoint_if_due(&self, d: &Durable) -> Result<(), StorageError> {
        let bm = self.tree.buffer();
        if !d.ckpt.running()
            && (bm.dirty_pages() > d.dirty_high || d.wal.live_bytes() > d.wal.capacity() / 2)
        {
            d.ckpt.run(&self.tree).await?;
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

    /// The largest key + value length accepted.
    pub fn max_record(&self) -> usize {
        self.tree.max_record()
    }

    /// Writes the meta page and every dirty page; with `sync`, makes them durable. With a
    /// log: a checkpoint.
    pub async fn flush(&self, sync: bool) -> Result<(), WriteError> {
        if let Some(d) = &self.durable {
            self.check_failed()?;
            return Ok(d.ckpt.run(&self.tree).await?);
        }
        let cut = self.write_meta_page().await?;
        let bm = self.tree.buffer();
        bm.flush_all(sync).await?;
        bm.free_list_written(cut);
        Ok(())
    }

    /// Writes the tree's root, the allocator and the free list into the meta page (in the
    /// pool: the flush writes it back with the other dirty pages), after writing the free
    /// list's chain pages in place (so a meta page that names them never reaches the disk
    /// before them). Without a log only. Returns the free list's cut number.
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

    /// [`super::Db::verify`], from a task of the database's runtime.
    pub async fn verify(&self) -> crate::VerifyReport {
        crate::verify::verify_btree(&self.tree).await
    }

    /// The tree, for this crate's tests and the benchmarks' calibration: not part of the API.
    #[doc(hidden)]
    pub fn tree(&self) -> &BTree {
        &self.tree
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
