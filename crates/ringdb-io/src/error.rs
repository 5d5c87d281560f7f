//! Typed errors of the I/O layer. Every variant's message names the cause and what to change,
//! because these reach users verbatim as one-line CLI errors.

use std::io;
use std::path::PathBuf;

/// Result alias for the I/O layer.
pub type Result<T, E = IoError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("{path}: no such file or device; create it, or pass a path that exists")]
    NotFound { path: PathBuf },

    #[error("{path}: permission denied; run as a user that may open it ({source})")]
    PermissionDenied { path: PathBuf, source: io::Error },

    #[error("{path}: O_DIRECT is not supported here (ramfs, tmpfs before Linux 6.6 and some other filesystems refuse it); use --direct 0 or a file on a block-backed filesystem")]
    DirectUnsupported { path: PathBuf },

    #[error("{what} = {value} is not a multiple of the logical block size {block} that O_DIRECT requires; use a multiple of {block}")]
    Misaligned {
        what: &'static str,
        value: u64,
        block: u32,
    },

    #[error("io_uring is disabled (kernel.io_uring_disabled = {value}); run `sysctl -w kernel.io_uring_disabled=0` as root, or use --engine posix or --engine libaio")]
    UringDisabled { value: u32 },

    #[error("the kernel refused io_uring setup with {feature}: {source}; {hint}")]
    SetupRefused {
        feature: String,
        hint: &'static str,
        source: io::Error,
    },

    #[error("registering {bytes} bytes of fixed buffers exceeds the locked-memory limit (RLIMIT_MEMLOCK = {limit}); raise it (ulimit -l, LimitMEMLOCK=) or run without --fixedbufs")]
    Memlock { bytes: u64, limit: String },

    #[error("{switch} is not supported here: {reason}")]
    Unsupported {
        switch: &'static str,
        reason: String,
    },

    #[error("the ring's submission queue ({entries} entries) stayed full through {waits} waits for room: the kernel is not consuming submissions")]
    SubmissionQueueFull { entries: u32, waits: u32 },

    #[error("invalid argument: {0}")]
    InvalidArg(String),

    #[error("{op} failed at offset {offset}: {source}")]
    Op {
        op: &'static str,
        offset: u64,
        source: io::Error,
    },

    #[error("{context}: {source}")]
    Os { context: String, source: io::Error },

    /// The executor can make no progress: no task is ready and no I/O is in flight, while
    /// `pending` (its main future, or its tasks) still waits.
    #[error("executor stalled: {pending}, but no task is ready and no I/O is in flight ({parked_tasks} tasks parked, {waiting_for_room} requests waiting for ring room); a future waits for something only this thread could provide")]
    Stalled {
        pending: &'static str,
        parked_tasks: usize,
        waiting_for_room: usize,
    },

    /// The executor waited for a completion `waits` times in a row and got none, with
    /// `in_flight` requests outstanding.
    #[error("{in_flight} requests are in flight, but {waits} waits in a row returned no completion; the engine or the device does not complete them")]
    NoCompletion { in_flight: usize, waits: u32 },
}

impl IoError {
    /// An OS error with a short description of what was being attempted.
    pub fn os(context: impl Into<String>, source: io::Error) -> Self {
        IoError::Os {
            context: context.into(),
            source,
        }
    }

    /// An error for a failed completion: `res` is the negative errno from the kernel.
    pub fn from_completion(op: &'static str, offset: u64, res: i32) -> Self {
        debug_assert!(res < 0);
        IoError::Op {
            op,
            offset,
            source: io::Error::from_raw_os_error(-res),
        }
    }
}
