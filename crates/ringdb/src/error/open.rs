//! [`OpenError`]: why [`Db::open`](crate::Db::open) or [`Db::open_on`](crate::Db::open_on)
//! refused or failed, with what the target is ([`TargetKind`]) and why a raw device cannot
//! hold a database with a log ([`LayoutError`]).
//!
//! Most refusals are about the options and the target together (a durability mode the target
//! cannot serve, a database created with another page size): each variant carries the option,
//! the value and what would be accepted, so that a front end can phrase its own hint.

use super::{ShardError, ShardSetupError, StorageError, WriteError};
use crate::durability::Durability;
use crate::page::PageError;
use ringdb_io::{EngineKind, IoError};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Setting up the I/O failed: opening the target, the ring, the registered buffers.
    #[error(transparent)]
    Io(IoError),
    /// Creating or opening one of the database's files (the directory, the log, the
    /// double-write file) failed.
    #[error("{}: {source}", path.display())]
    #[non_exhaustive]
    File {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// `page_size` is not a supported page size.
    #[error(
        "page size {requested} must be a power of two from {} to {}",
        supported.start(),
        supported.end()
    )]
    #[non_exhaustive]
    PageSize {
        /// The page size asked for, in bytes.
        requested: usize,
        /// The page sizes supported (powers of two in this range).
        supported: RangeInclusive<usize>,
    },
    /// `pool_pages` is below the smallest pool that can work.
    #[error("a buffer pool of {frames} frames is too small: at least {minimum}")]
    #[non_exhaustive]
    Pool {
        /// Frames asked for.
        frames: usize,
        /// The fewest frames a pool may have.
        minimum: usize,
        /// Bytes per frame (the page size).
        page_size: usize,
    },
    /// `evict_batch` is out of range.
    #[error("eviction batch {requested} must be between 1 and half the pool ({maximum})")]
    #[non_exhaustive]
    EvictBatch {
        /// Victims per round asked for.
        requested: usize,
        /// The most allowed (half the pool).
        maximum: usize,
    },
    /// `free_target` is out of range.
    #[error("free target {requested} must be between 1 and half the pool ({maximum})")]
    #[non_exhaustive]
    FreeTarget {
        /// Free frames asked for.
        requested: usize,
        /// The most allowed (half the pool).
        maximum: usize,
    },
    /// `checkpoint_dirty` is out of range.
    #[error(
        "checkpoint_dirty {requested} must be between {} and {} of the pool",
        allowed.start(),
        allowed.end()
    )]
    #[non_exhaustive]
    CheckpointDirty {
        /// The share asked for.
        requested: f64,
        /// The shares allowed.
        allowed: RangeInclusive<f64>,
    },
    /// `wal_bytes` is too small or not a multiple of the record alignment.
    #[error(
        "a log of {requested} bytes is too small: at least {} KiB, a multiple of {multiple_of}",
        minimum / 1024
    )]
    #[non_exhaustive]
    LogSize {
        /// The log size asked for, in bytes.
        requested: u64,
        /// The smallest log accepted, in bytes.
        minimum: u64,
        /// What the size must be a multiple of, in bytes.
        multiple_of: u64,
    },
    /// The runtime's buffer pool has fewer buffers than the buffer pool's frames.
    #[error("the runtime's buffer pool has fewer than the {frames} frames asked for")]
    #[non_exhaustive]
    RuntimeBuffers {
        /// Frames asked for.
        frames: usize,
    },
    /// The runtime's buffers are not one page each.
    #[error("the runtime's buffers hold {buffer_bytes} bytes, pages are {page_size}")]
    #[non_exhaustive]
    RuntimeBufferSize {
        /// Bytes per runtime buffer.
        buffer_bytes: usize,
        /// Bytes per page.
        page_size: usize,
    },
    /// The page size is not a multiple of the target's direct I/O alignment.
    #[error(
        "page size {page_size} is not a multiple of {}'s direct I/O alignment {alignment}",
        path.display()
    )]
    #[non_exhaustive]
    Alignment {
        /// The data file or device.
        path: PathBuf,
        /// Bytes per page.
        page_size: usize,
        /// The target's direct I/O alignment in bytes.
        alignment: u32,
    },
    /// The database was created with another page size.
    #[error(
        "{} was created with {on_disk}-byte pages; open it with a page size of {on_disk}",
        path.as_deref().map_or("the database".into(), |p| p.display().to_string())
    )]
    #[non_exhaustive]
    PageSizeMismatch {
        /// The data file or device, where known.
        path: Option<PathBuf>,
        /// The page size the database was created with.
        on_disk: usize,
        /// The page size asked for.
        requested: usize,
    },
    /// A durability mode the target cannot serve (see [`TargetKind::supports`]).
    #[error("{}", durability_refusal(path, *mode, *target))]
    #[non_exhaustive]
    Durability {
        /// The path (or the name given to `Db::open_on`).
        path: PathBuf,
        /// The durability mode asked for.
        mode: Durability,
        /// What the path is.
        target: TargetKind,
    },
    /// Durability `nvme-flush` on an NVMe generic char device reached by another engine than
    /// NVMe passthrough.
    #[error(
        "durability nvme-flush makes the log durable with NVMe Flush commands through \
         passthrough: it needs engine uring-passthrough; {} is reached with engine {engine}: use \
         fdatasync",
        path.display()
    )]
    #[non_exhaustive]
    NvmeFlushEngine {
        /// The NVMe generic char device.
        path: PathBuf,
        /// The engine asked for.
        engine: EngineKind,
    },
    /// A durability mode that syncs with fsync/fdatasync on an IOPOLL ring, where they cannot
    /// run.
    #[error(
        "durability {mode} syncs the log and checkpoints with fsync/fdatasync, which cannot run \
         on an IOPOLL ring; turn IOPOLL off, or use durability off (on an NVMe namespace \
         through passthrough, syncs are NVMe Flush commands and IOPOLL works)"
    )]
    #[non_exhaustive]
    DurabilityOnIopoll {
        /// The durability mode asked for.
        mode: Durability,
    },
    /// A block device without a ringdb database on it, opened without `fresh`.
    #[error(
        "{} does not hold a ringdb database ({source}); open it with `fresh` to format it",
        path.display()
    )]
    #[non_exhaustive]
    NotADatabase {
        /// The device.
        path: PathBuf,
        /// Why its page 0 is not a meta page.
        source: PageError,
    },
    /// A database with a log opened with durability `off`.
    #[error(
        "{} has a write-ahead log; open it with a durability mode (not off), or its last \
         commits would be ignored",
        path.display()
    )]
    #[non_exhaustive]
    HasLog {
        /// The data file or device.
        path: PathBuf,
    },
    /// A database without a log opened with a durability mode.
    #[error(
        "{} was created without a write-ahead log; open it with durability off",
        path.display()
    )]
    #[non_exhaustive]
    NoLog {
        /// The data file or device.
        path: PathBuf,
    },
    /// A raw device formatted with another log size (its regions depend on it).
    #[error(
        "{} was formatted with a log of {on_disk_bytes} bytes; open it with that log size (the \
         regions of the device depend on it)",
        path.display()
    )]
    #[non_exhaustive]
    LogSizeMismatch {
        /// The device.
        path: PathBuf,
        /// The log size the device was formatted with.
        on_disk_bytes: u64,
        /// The log size asked for.
        requested_bytes: u64,
    },
    /// A raw device cannot hold a database with a log with these options.
    #[error("{}: {reason}", path.display())]
    #[non_exhaustive]
    Layout {
        /// The device.
        path: PathBuf,
        /// Why not.
        reason: LayoutError,
    },
    /// The log's sync thread (durability `thread`) could not be started.
    #[error("starting the log sync thread: {source}")]
    #[non_exhaustive]
    SyncThread {
        /// The system's error.
        source: std::io::Error,
    },
    /// A write that opening makes failed: formatting a new tree, or replaying a logged batch
    /// (the target is full, ...). A failure below the API is [`OpenError::Storage`] instead.
    #[error(transparent)]
    Write(WriteError),
    /// The shards could not be set up (the manifest, a shard's thread).
    #[error(transparent)]
    Shards(#[from] ShardSetupError),
    /// A shard stopped while the database was being opened (recovering cross-shard
    /// batches, reconciling tables).
    #[error(transparent)]
    ShardRequest(#[from] ShardError),
    /// One shard's database could not be opened.
    #[error("shard {shard}: {source}")]
    #[non_exhaustive]
    Shard {
        /// The shard's index.
        shard: usize,
        /// Why its database could not be opened.
        #[source]
        source: Box<OpenError>,
    },
    /// Below the API: I/O, a damaged page, the log or a checkpoint (recovery).
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl OpenError {
    /// The I/O layer's error behind this one, if an I/O failure caused it.
    pub fn io_cause(&self) -> Option<&IoError> {
        match self {
            OpenError::Io(e) => Some(e),
            OpenError::Storage(e) => e.io_cause(),
            OpenError::Write(e) => e.io_cause(),
            OpenError::Shard { source, .. } => source.io_cause(),
            _ => None,
        }
    }
}

/// A write's failure while opening: a failure below the API stays one
/// ([`OpenError::Storage`]), anything else is [`OpenError::Write`].
impl From<WriteError> for OpenError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Storage(s) => OpenError::Storage(s),
            e => OpenError::Write(e),
        }
    }
}

/// The message of [`OpenError::Durability`]: why the mode needs another target, and what to
/// use instead.
fn durability_refusal(path: &Path, mode: Durability, target: TargetKind) -> String {
    let shown = path.display();
    if mode == Durability::NvmeFlush {
        return format!(
            "durability nvme-flush makes the log durable with NVMe Flush commands through \
             passthrough: it needs the database on an NVMe generic char device (/dev/ngXnY) \
             with engine uring-passthrough; {shown} is {target}, not one: use fdatasync"
        );
    }
    match target {
        TargetKind::File => format!(
            "{shown}: a database with a log (durability {mode}) is a directory (data, log and \
             double-write files) or a raw device (its regions); pass a directory, or use \
             durability off"
        ),
        TargetKind::Engine => format!(
            "durability {mode} needs the log as an open file, and the storage given for \
             {shown} has none (`Storage::wal_file`); use fdatasync"
        ),
        _ => format!(
            "durability {mode} needs the log as a file; on a raw device ({shown}) use fdatasync{}",
            if target.supports(Durability::NvmeFlush) {
                " or nvme-flush"
            } else {
                ""
            }
        ),
    }
}

/// What a database is opened on; it decides which durability modes can work there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetKind {
    /// A directory (or a path without an extension that does not exist yet): the data, log
    /// and double-write files in it.
    Directory,
    /// A plain file: the data file itself, without a log.
    File,
    /// A block device: the whole device is the database (with a log, in three regions).
    BlockDevice,
    /// An NVMe generic char device (`/dev/ngXnY`), reached only through passthrough.
    NvmeCharDevice,
    /// A storage engine given to `Db::open_on` (a simulated disk in tests).
    Engine,
}

impl TargetKind {
    /// Whether a database on this kind of target can be opened with durability `mode` (an
    /// engine given to `Db::open_on` needs a log file, `Storage::wal_file`, for mode
    /// `thread`; IOPOLL rings and engines have conditions of their own).
    pub fn supports(self, mode: Durability) -> bool {
        use Durability as D;
        match self {
            TargetKind::Directory | TargetKind::Engine => mode != D::NvmeFlush,
            TargetKind::File => mode == D::Off,
            TargetKind::BlockDevice => matches!(mode, D::Off | D::None | D::Fdatasync),
            TargetKind::NvmeCharDevice => {
                matches!(mode, D::Off | D::None | D::Fdatasync | D::NvmeFlush)
            }
        }
    }

    /// Whether this is a raw device.
    pub fn is_device(self) -> bool {
        matches!(self, TargetKind::BlockDevice | TargetKind::NvmeCharDevice)
    }
}

impl std::fmt::Display for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TargetKind::Directory => "a directory",
            TargetKind::File => "a plain file",
            TargetKind::BlockDevice => "a block device",
            TargetKind::NvmeCharDevice => "an NVMe generic char device",
            TargetKind::Engine => "a storage engine",
        })
    }
}

/// Why a raw device cannot hold a database with a log (see
/// `DeviceLayout::plan` in `db/layout.rs`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The page size is not a multiple of the device's blocks.
    #[error("page size {page_size} is not a multiple of the device's {block_bytes}-byte blocks")]
    #[non_exhaustive]
    BlockAlignment {
        /// Bytes per page.
        page_size: u64,
        /// Bytes per device block.
        block_bytes: u64,
    },
    /// The log size is not a whole number of pages.
    #[error(
        "on a raw device the log size must be a multiple of the page size {page_size} (got \
         {wal_bytes})"
    )]
    #[non_exhaustive]
    LogAlignment {
        /// The log size asked for, in bytes.
        wal_bytes: u64,
        /// Bytes per page.
        page_size: u64,
    },
    /// A checkpoint of the whole pool would not fit the double-write area.
    #[error(
        "a checkpoint of this pool ({pool_pages} pages) needs {needed_bytes} bytes of \
         double-write area, more than the {area_bytes} bytes the log size gives; use a larger \
         log or a smaller pool"
    )]
    #[non_exhaustive]
    DoubleWriteTooSmall {
        /// The pool's frames.
        pool_pages: u64,
        /// Bytes its checkpoint needs.
        needed_bytes: u64,
        /// Bytes of double-write area (the log size).
        area_bytes: u64,
    },
    /// The device is too small for the log, the double-write area and the fewest data pages.
    #[error(
        "{capacity_bytes} bytes hold no database with a log of {log_bytes} bytes (log and \
         double-write area {} bytes, data at least {min_data_bytes})",
        2 * log_bytes
    )]
    #[non_exhaustive]
    DeviceTooSmall {
        /// The device's size in bytes.
        capacity_bytes: u64,
        /// The log size in bytes.
        log_bytes: u64,
        /// The smallest data region in bytes.
        min_data_bytes: u64,
    },
}
