//! [`StorageError`]: what any operation can meet below the API (the I/O layer, pages that are
//! not what was written, the log or a checkpoint failing, a bounded wait running out), and the
//! data its variants carry.
//!
//! The log and the checkpointer remember their first failure and refuse work from then on, so
//! that failure is shared ([`Arc`]) between the call that met it and every later one: they all
//! report the same cause, the I/O layer's error included.

use crate::node::{NodeError, NodeFull};
use crate::page::PageError;
use ringdb_io::IoError;
use std::sync::Arc;

/// What any operation can meet below the API. Every read, write and open may fail with one
/// (wrapped in its own error type as `Storage`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The I/O layer failed (EIO, ENOSPC, the executor stalled, ...).
    #[error(transparent)]
    Io(#[from] IoError),
    /// A page read from disk is not what was written (checksum, page id, header).
    #[error(transparent)]
    Page(#[from] PageError),
    /// A page's contents contradict the tree, the allocator or the meta page.
    #[error("corrupted page {page}: {reason}")]
    #[non_exhaustive]
    Corrupt {
        /// The page.
        page: u64,
        /// What is wrong with it.
        reason: Corruption,
    },
    /// Writing a page back wrote less than the page: the target has no room left for it.
    #[error(
        "the data file is full: short write of page {page}: {written_bytes} of {page_bytes} bytes"
    )]
    #[non_exhaustive]
    ShortWrite {
        /// The page.
        page: u64,
        /// Bytes the write wrote.
        written_bytes: usize,
        /// Bytes of a page.
        page_bytes: usize,
    },
    /// The write-ahead log could not be written or made durable: commits fail from now on;
    /// reopen the database (recovery keeps every acknowledged commit).
    #[error("the write-ahead log failed ({source}); reopen the database to recover")]
    #[non_exhaustive]
    LogFailed {
        /// The log's first failure (every later call reports the same one).
        source: Arc<LogFailure>,
    },
    /// A checkpoint could not write the double-write file or the data file: reopen the
    /// database (recovery finishes the checkpoint from its double-write copy).
    #[error("a checkpoint failed ({source}); reopen the database to recover")]
    #[non_exhaustive]
    CheckpointFailed {
        /// What failed (after a failed write in place, every later checkpoint reports it).
        source: Arc<CheckpointFailure>,
    },
    /// A wait ran past its bound without what it waits for coming: a livelock or a lost
    /// wake-up (a bug), reported instead of hanging.
    #[error("gave up waiting for {waiting_for} after {rounds} rounds; reopen the database")]
    #[non_exhaustive]
    Stalled {
        /// What the wait was for.
        waiting_for: WaitFor,
        /// The rounds it waited (its bound).
        rounds: u64,
    },
    /// An eviction was cancelled while its writes were in flight: the pool cannot tell which
    /// pages reached the target, so it refuses work.
    #[error("buffer pool unusable: an eviction was cancelled while its writes were in flight")]
    PoolPoisoned,
}

impl StorageError {
    /// A corrupted page `page`, for `reason`.
    pub(crate) fn corrupt(page: u64, reason: impl Into<Corruption>) -> StorageError {
        StorageError::Corrupt {
            page,
            reason: reason.into(),
        }
    }

    /// The I/O layer's error behind this one, if an I/O failure caused it.
    pub fn io_cause(&self) -> Option<&IoError> {
        match self {
            StorageError::Io(e) => Some(e),
            StorageError::LogFailed { source } => source.io_cause(),
            StorageError::CheckpointFailed { source } => source.io_cause(),
            _ => None,
        }
    }
}

/// Why a page's contents cannot be right (see [`StorageError::Corrupt`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    /// The node format's invariants do not hold.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// A node that the tree found room in has none.
    #[error(transparent)]
    NodeFull(#[from] NodeFull),
    /// A root split would pass the highest level a node can record.
    #[error("tree too high")]
    TreeTooHigh,
    /// A leaf sits at another depth than the tree's height.
    #[error("leaf at depth {depth} in a tree of height {height}")]
    #[non_exhaustive]
    LeafDepth {
        /// The leaf's depth (1: the root).
        depth: usize,
        /// The tree's height.
        height: u32,
    },
    /// A child pointer leads past the pages allocated.
    #[error("a pointer leads past the end of the data ({pages} pages)")]
    #[non_exhaustive]
    PastEnd {
        /// Pages allocated.
        pages: u64,
    },
    /// The page's read returned less than a page.
    #[error("short read: {read_bytes} of {page_bytes} bytes (the data file is truncated)")]
    #[non_exhaustive]
    ShortRead {
        /// Bytes read.
        read_bytes: usize,
        /// Bytes of a page.
        page_bytes: usize,
    },
    /// The meta page's id is on the free list.
    #[error("the meta page is on the free list")]
    MetaOnFreeList,
    /// A page image in the log (intact as a record) is not a sealed page of this size and id.
    #[error("a page image in the log is not this page's sealed image")]
    BadPageImage,
    /// The meta page of an older on-disk format.
    #[error("an older ringdb format (without a log); recreate the database")]
    OlderFormat,
    /// Page 0 has no ringdb meta record.
    #[error("not a ringdb meta page (bad magic)")]
    NotMeta,
    /// The meta page's root, height and allocator contradict each other.
    #[error("root {root} / height {height} / next page {next_page} are inconsistent")]
    #[non_exhaustive]
    BadRoot {
        /// The root's page.
        root: u64,
        /// The tree's height.
        height: u32,
        /// The first page never allocated.
        next_page: u64,
    },
    /// The meta page lists more free pages than it can hold.
    #[error("{count} free pages listed, more than fit")]
    #[non_exhaustive]
    FreeListTooLong {
        /// Free pages listed.
        count: usize,
    },
    /// A free page id is the meta page, the root, or not allocated.
    #[error("free page {free_page} out of range")]
    #[non_exhaustive]
    FreePageOutOfRange {
        /// The free page's id.
        free_page: u64,
    },
    /// A page on the free-list chain is not a free-list page.
    #[error("a page on the free-list chain has page type {found}, not a free-list page")]
    #[non_exhaustive]
    NotFreeListPage {
        /// The page type byte found.
        found: u8,
    },
    /// The free-list chain comes back to a page it passed, or is longer than the file.
    #[error("the free-list chain loops or runs past {pages} pages (the data's size)")]
    #[non_exhaustive]
    FreeListCycle {
        /// Pages allocated: no chain can be longer.
        pages: u64,
    },
    /// A page id is listed free twice (in the meta page, on the chain, or as a chain page).
    #[error("page {free_page} is on the free list twice")]
    #[non_exhaustive]
    FreePageTwice {
        /// The page listed twice.
        free_page: u64,
    },
    /// The meta page of a database with a log cannot be read and has no copy.
    #[error(
        "the meta page is unreadable (torn or corrupted) and the double-write file holds no copy \
         of it"
    )]
    MetaLost,
    /// The meta page counts more pages than the target holds.
    #[error("the meta page counts {counted_pages} pages, the target holds {target_pages}")]
    #[non_exhaustive]
    BeyondTarget {
        /// Pages the meta page counts.
        counted_pages: u64,
        /// Pages the target holds.
        target_pages: u64,
    },
    /// The page the meta page names as the catalog holds no catalog record (bad magic).
    #[error("not a ringdb catalog page (bad magic)")]
    NotCatalog,
    /// The catalog page lists more tables than it can hold.
    #[error("{count} tables listed in the catalog, more than its {capacity} entries")]
    #[non_exhaustive]
    CatalogTooLong {
        /// Tables listed.
        count: usize,
        /// Entries one catalog page holds.
        capacity: usize,
    },
    /// An entry of the catalog page contradicts the others or the allocator.
    #[error("catalog entry {index} (table {table}): {fault}")]
    #[non_exhaustive]
    CatalogEntry {
        /// The entry's position in the page.
        index: usize,
        /// The table id it records.
        table: u32,
        /// What is wrong with it.
        fault: CatalogFault,
    },
    /// A log record names a table the catalog does not hold (at that point of the replay).
    #[error("the log record at LSN {lsn} names table {table}, which the catalog does not hold")]
    #[non_exhaustive]
    UnknownTable {
        /// The table id the record names.
        table: u32,
        /// The record's position in the log.
        lsn: u64,
    },
    /// A log record creates a table whose id or name another table holds (at that point of
    /// the replay).
    #[error(
        "the log record at LSN {lsn} creates table {table}, whose id or name the catalog gives \
         another table"
    )]
    #[non_exhaustive]
    CreateConflict {
        /// The table id the record creates.
        table: u32,
        /// The record's position in the log.
        lsn: u64,
    },
    /// A page the meta page counts (and does not list free) is past the data file's end.
    #[error(
        "the meta page counts {counted_pages} pages, the data file holds {file_pages} (truncated?)"
    )]
    #[non_exhaustive]
    Truncated {
        /// Pages the meta page counts.
        counted_pages: u64,
        /// Pages the data file holds.
        file_pages: u64,
    },
}

/// What is wrong with one entry of the catalog page (see [`Corruption::CatalogEntry`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogFault {
    /// Table id 0 is the default table, which the meta page describes, never the catalog.
    #[error("id 0 is the default table's")]
    DefaultId,
    /// Ids are listed in ascending order, each below the catalog's next id.
    #[error("id out of order or not below the next id {next_id}")]
    IdOutOfOrder {
        /// The next id the catalog would hand out.
        next_id: u32,
    },
    /// The name is empty, too long, not UTF-8, or another entry's.
    #[error("bad or duplicate name")]
    BadName,
    /// The root and height do not describe a tree of this database.
    #[error("root {root} / height {height} out of range ({next_page} pages)")]
    BadRoot {
        /// The root's page.
        root: u64,
        /// The tree's height.
        height: u32,
        /// The first page never allocated.
        next_page: u64,
    },
}

/// Why the write-ahead log failed (see [`StorageError::LogFailed`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogFailure {
    /// A log write failed.
    #[error("log write at LSN {lsn} failed: {source}")]
    #[non_exhaustive]
    Write {
        /// Where the write started.
        lsn: u64,
        /// The I/O layer's error.
        source: IoError,
    },
    /// A log write wrote less than it was given.
    #[error(
        "short log write at LSN {lsn}: {written_bytes} of {expected_bytes} bytes (disk full?)"
    )]
    #[non_exhaustive]
    ShortWrite {
        /// Where the write started.
        lsn: u64,
        /// Bytes written.
        written_bytes: usize,
        /// Bytes given.
        expected_bytes: usize,
    },
    /// Making the log durable through the ring failed.
    #[error("making the log durable failed: {source}")]
    #[non_exhaustive]
    Sync {
        /// The I/O layer's error.
        source: IoError,
    },
    /// `fdatasync` on the sync thread (durability `thread`) failed.
    #[error("making the log durable failed: {source}")]
    #[non_exhaustive]
    SyncThread {
        /// The system's error.
        source: std::io::Error,
    },
    /// The sync thread (durability `thread`) is gone.
    #[error("making the log durable failed: the log sync thread is gone")]
    SyncThreadGone,
}

impl LogFailure {
    /// The I/O layer's error behind this one, if any.
    pub fn io_cause(&self) -> Option<&IoError> {
        match self {
            LogFailure::Write { source, .. } | LogFailure::Sync { source } => Some(source),
            _ => None,
        }
    }
}

/// Why a checkpoint failed (see [`StorageError::CheckpointFailed`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointFailure {
    /// Writing part of the checkpoint failed.
    #[error("writing {part}: {source}")]
    #[non_exhaustive]
    Write {
        /// What was being written.
        part: CheckpointPart,
        /// The I/O layer's error.
        source: IoError,
    },
    /// A write of the checkpoint wrote less than it was given.
    #[error("short write of {part}: {written_bytes} of {expected_bytes} bytes (disk full?)")]
    #[non_exhaustive]
    ShortWrite {
        /// What was being written.
        part: CheckpointPart,
        /// Bytes written.
        written_bytes: usize,
        /// Bytes given.
        expected_bytes: usize,
    },
    /// Making a file of the checkpoint durable failed.
    #[error("syncing {part}: {source}")]
    #[non_exhaustive]
    Sync {
        /// The file being synced.
        part: CheckpointPart,
        /// The I/O layer's error.
        source: IoError,
    },
}

impl CheckpointFailure {
    /// The I/O layer's error behind this one, if any.
    pub fn io_cause(&self) -> Option<&IoError> {
        match self {
            CheckpointFailure::Write { source, .. } | CheckpointFailure::Sync { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}

/// What a checkpoint was writing or syncing when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckpointPart {
    /// The double-write file (all the checkpoint's pages, step 3).
    DoubleWriteFile,
    /// The data file (synced after the writes in place).
    DataFile,
    /// A page written in place (step 4).
    Page {
        /// The page.
        page: u64,
    },
    /// The meta page, written in place last.
    MetaPage,
    /// A page of the double-write file written in place again by recovery.
    RestoredPage {
        /// The page.
        page: u64,
    },
}

impl std::fmt::Display for CheckpointPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointPart::DoubleWriteFile => write!(f, "the double-write file"),
            CheckpointPart::DataFile => write!(f, "the data file"),
            CheckpointPart::Page { page } => write!(f, "page {page}"),
            CheckpointPart::MetaPage => write!(f, "the meta page"),
            CheckpointPart::RestoredPage { page } => {
                write!(f, "page {page} (from the double-write file)")
            }
        }
    }
}

/// What a bounded wait was waiting for (see [`StorageError::Stalled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitFor {
    /// A free frame in the buffer pool.
    FreeFrame,
    /// `frames` free frames at once (a split's reservation).
    FreeFrames {
        /// Frames needed.
        frames: usize,
    },
    /// Page `page` to come out of another task's read or write, or to be read.
    PageLoad {
        /// The page.
        page: u64,
    },
    /// Room in the log for a record of `record_bytes` (checkpoints free it).
    LogRoom {
        /// The record's size.
        record_bytes: usize,
    },
    /// Room in the log buffer for a record of `record_bytes` (log writes empty it).
    LogBuffer {
        /// The record's size.
        record_bytes: usize,
    },
    /// The log to be durable up to `lsn`.
    DurableLog {
        /// The LSN the commit waits for.
        lsn: u64,
    },
}

impl std::fmt::Display for WaitFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitFor::FreeFrame => write!(f, "a free frame"),
            WaitFor::FreeFrames { frames } => write!(f, "{frames} free frames"),
            WaitFor::PageLoad { page } => write!(f, "page {page} to load"),
            WaitFor::LogRoom { record_bytes } => {
                write!(f, "log room for a record of {record_bytes} bytes")
            }
            WaitFor::LogBuffer { record_bytes } => {
                write!(f, "log buffer room for a record of {record_bytes} bytes")
            }
            WaitFor::DurableLog { lsn } => write!(f, "the log to be durable up to LSN {lsn}"),
        }
    }
}
