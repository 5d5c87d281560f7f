//! The embeddable database: one data file (or block device), one thread, one ring.
//!
//! [`Db`] owns the thread's [`Runtime`]; its blocking methods (`get`, `insert`, ...) run one
//! operation to completion. For many concurrent operations (the paper's fibers), spawn tasks
//! that use a [`DbHandle`] on [`Db::runtime`] and run it: each task parks on its own page
//! faults while the others run.
//!
//! Where to look:
//! - [`Db`] (this file): the public API and closing;
//! - `handle.rs`: [`DbHandle`], what tasks use, and the commit path;
//! - `options.rs`: [`Options`] and [`DbStats`];
//! - `batch.rs`: [`WriteBatch`];
//! - `tables.rs`: named tables on a [`DbHandle`]: creating one, reads and writes in one;
//!   `table_view.rs`: [`LocalTable`] and [`LocalDbTable`], the API's way into one;
//! - `open.rs`: [`Db::open`]: what the path is (directory, file, block device, NVMe char
//!   device), which options it allows, and opening its files;
//! - `runtime.rs`: [`Db::open_on`] and the wiring shared by every way of opening: the
//!   runtime, the buffer pool and the tree of a database without a log;
//! - `recovery.rs`: opening a database with a log: finishing a checkpoint, replaying the log;
//! - `layout.rs`: the three files ([`FileSet`]) and their regions on a raw device
//!   ([`DeviceLayout`]).

mod batch;
mod handle;
mod layout;
mod open;
mod options;
mod recovery;
mod runtime;
mod scan_in;
mod table_view;
mod tables;
mod tap;
mod write_ahead;

pub use batch::WriteBatch;
pub use handle::DbHandle;
pub use layout::DATA_FILE;
#[cfg(feature = "__internal")]
pub use layout::{DeviceLayout, FileSet, DW_FILE, WAL_FILE};
pub use options::{DbStats, Options, Steal};
pub use runtime::Storage;
pub use table_view::{LocalDbTable, LocalTable};
pub use tap::{Change, CommitTap};

use crate::catalog::TableId;
use crate::error::{ReadError, StorageError, WriteError};
use ringdb_io::Runtime;
use ringdb_io::Target;
use std::future::Future;
use std::ops::Bound;
use std::path::{Path, PathBuf};

/// Key/value pairs in key order, as a range scan returns them.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// An open database. Not `Send`: it lives on the thread that opened it, like its ring.
pub struct Db {
    handle: DbHandle,
    // Dropped after the handle (the tree's frames go back to the runtime's pool), and before
    // the files, whose fds the engine uses until it has drained.
    rt: Runtime,
    /// The log and double-write files of a directory, kept open for the runtime's fds.
    log_files: Vec<std::fs::File>,
    /// The data file or device, kept open for the runtime's fd.
    target: Option<Target>,
    path: PathBuf,
    closed: bool,
    /// The ring polls for completions (IOPOLL, through the block layer), where fsync cannot
    /// run: a flush makes the data durable with `fdatasync` on the target, off the ring.
    sync_off_ring: bool,
}

impl Db {
    /// A database over `rt` whose tree (and log) `handle` holds; the open paths add the files
    /// it must keep open.
    fn assemble(handle: DbHandle, rt: Runtime, path: &Path) -> Db {
        Db {
            handle,
            rt,
            log_files: Vec::new(),
            target: None,
            path: path.to_path_buf(),
            closed: false,
            sync_off_ring: false,
        }
    }

    /// The data file or device.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle for tasks spawned on [`runtime`](Self::runtime).
    pub fn handle(&self) -> DbHandle {
        self.handle.clone()
    }

    /// The runtime, to spawn tasks that use [`handle`](Self::handle) and run them.
    pub fn runtime(&mut self) -> &mut Runtime {
        &mut self.rt
    }

    /// Runs one operation to completion on the runtime; the runtime's own failure (an
    /// executor that stalls, say) is the operation's, below the API.
    fn block_on<T, E: From<StorageError>>(
        &mut self,
        operation: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.rt
            .block_on(operation)
            .map_err(|e| E::from(StorageError::Io(e)))?
    }

    /// The value of `key`, if present.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let h = self.handle.clone();
        self.block_on(async move { h.get(key).await })
    }

    /// Inserts or replaces; returns whether the key existed (see [`DbHandle::insert`]).
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        let h = self.handle.clone();
        self.block_on(async move { h.insert(key, value).await })
    }

    /// Removes; returns whether the key existed (see [`DbHandle::remove`]).
    pub fn remove(&mut self, key: &[u8]) -> Result<bool, WriteError> {
        let h = self.handle.clone();
        self.block_on(async move { h.remove(key).await })
    }

    /// Creates the table `name` (see [`DbHandle::create_table`]); a name that exists returns
    /// its id.
    pub fn create_table(&mut self, name: &str) -> Result<TableId, WriteError> {
        let h = self.handle.clone();
        self.block_on(async move { h.create_table(name).await })
    }

    /// The id of the table named `name`, if there is one.
    pub fn table_id(&self, name: &str) -> Option<TableId> {
        self.handle.table_id(name)
    }

    /// The named tables and their ids (the default table is not listed).
    pub fn tables(&self) -> Vec<(String, TableId)> {
        self.handle.tables()
    }

    /// Up to `limit` pairs in `[start, end)` order by key.
    pub fn range(
        &mut self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Pairs, ReadError> {
        let h = self.handle.clone();
        self.block_on(async move { h.range(start, end, limit).await })
    }

    /// Writes everything to the target and makes it durable.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        let h = self.handle.clone();
        let on_ring = !self.sync_off_ring;
        self.block_on(async move { h.flush(on_ring).await })?;
        self.sync_target_off_ring()
    }

    /// `fdatasync` on the data target, for an IOPOLL ring (see `sync_off_ring`).
    fn sync_target_off_ring(&self) -> Result<(), WriteError> {
        match (&self.target, self.sync_off_ring) {
            (Some(t), true) => t.file().sync_data().map_err(|source| WriteError::Sync {
                path: self.path.clone(),
                source,
            }),
            _ => Ok(()),
        }
    }

    /// Walks every table's tree and checks every page (checksum, page id, layout) and every
    /// invariant (key order, separators, levels, the free list, no leaked page). Never panics
    /// on corrupt data: each violation is a problem in the report.
    pub fn verify(&mut self) -> Result<crate::VerifyReport, ReadError> {
        let handle = self.handle.clone();
        self.block_on(async move { Ok(handle.verify().await) })
    }

    /// Everything the database counts.
    pub fn stats(&self) -> DbStats {
        self.handle.stats(self.rt.stats(), self.rt.effective_io())
    }

    /// A copy of the data file's handle when a flush must sync it off the ring (an IOPOLL
    /// ring without a log, see `sync_off_ring`): the shards of a sharded database flush from
    /// a task and sync through it.
    pub(crate) fn off_ring_sync_file(&self) -> Option<std::fs::File> {
        match (&self.target, self.sync_off_ring) {
            (Some(t), true) => t.file().try_clone().ok(),
            _ => None,
        }
    }

    /// Commits `batch` atomically (see [`DbHandle::write`]).
    pub fn write(&mut self, batch: &WriteBatch) -> Result<(), WriteError> {
        let h = self.handle.clone();
        self.block_on(async move { h.write(batch).await })
    }

    /// Flushes and closes; errors surface here (dropping a `Db` flushes too, but can only
    /// log a failure).
    pub fn close(mut self) -> Result<(), WriteError> {
        self.closed = true;
        self.flush()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let h = self.handle.clone();
        let on_ring = !self.sync_off_ring;
        match self
            .rt
            .block_on(async move { h.flush(on_ring).await })
            .map(|r| r.and_then(|()| self.sync_target_off_ring()))
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("flushing {} on drop failed: {e}", self.path.display()),
            Err(e) => tracing::warn!("flushing {} on drop failed: {e}", self.path.display()),
        }
    }
}
