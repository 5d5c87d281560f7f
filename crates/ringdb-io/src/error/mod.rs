//! Typed errors of the I/O layer. Every variant carries its cause as data and its message names
//! the cause and what to change, because these reach users verbatim as one-line errors. No
//! message speaks a front end's vocabulary (command-line flags): the CLI adds those as hints.

use std::io;
use std::path::PathBuf;

mod fallback;
mod switch;

pub use fallback::{Fallback, FallbackReason};
pub use switch::{Setting, SetupRefusal, Switch};

use crate::config::EngineKind;

/// Result alias for the I/O layer.
pub type Result<T, E = IoError> = std::result::Result<T, E>;

/// Everything the I/O layer can refuse or fail with. Each variant carries its cause as data
/// (which path, switch, setting or limit), and its message names the cause and what to change
/// in the library's words: front ends add hints in their own vocabulary (the `ringdb` CLI turns
/// a [`Switch`] or [`Setting`] into its flag).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// A path that does not exist, where none may be created.
    #[error("{path}: no such file or device; create it, or pass a path that exists")]
    NotFound {
        /// The path.
        path: PathBuf,
    },

    /// The process may not open the path.
    #[error("{path}: permission denied; run as a user that may open it ({source})")]
    PermissionDenied {
        /// The path.
        path: PathBuf,
        /// The error `open` returned.
        source: io::Error,
    },

    /// A directory where a file or a device was expected.
    #[error("{path} is a directory; name a file or a block device")]
    IsDirectory {
        /// The path.
        path: PathBuf,
    },

    /// The filesystem refuses `O_DIRECT`.
    #[error("{path}: O_DIRECT is not supported here (ramfs, tmpfs before Linux 6.6 and some other filesystems refuse it); open it without O_DIRECT, or use a file on a block-backed filesystem")]
    DirectUnsupported {
        /// The path.
        path: PathBuf,
    },

    /// An offset or length that is not a multiple of the block size direct I/O needs.
    #[error("{what} = {value} is not a multiple of the logical block size {block} that O_DIRECT requires; use a multiple of {block}")]
    Misaligned {
        /// What is misaligned (an offset, a length, a block size).
        what: &'static str,
        /// Its value in bytes.
        value: u64,
        /// The block size in bytes.
        block: u32,
    },

    /// io_uring is switched off by the `kernel.io_uring_disabled` sysctl.
    #[error("io_uring is disabled (kernel.io_uring_disabled = {value}); as root, `sysctl -w kernel.io_uring_disabled=0`, or use an engine without io_uring (posix, libaio)")]
    UringDisabled {
        /// The sysctl's value (1: only a group may use it; 2: nobody).
        value: u32,
    },

    /// The kernel would not build a ring with these setup flags.
    #[error("the kernel refused io_uring setup with {features}: {source}; {}", refusal.advice())]
    SetupRefused {
        /// The setup flags asked for, e.g. `DEFER_TASKRUN|SINGLE_ISSUER+SQPOLL`.
        features: String,
        /// What the error code says about why.
        refusal: SetupRefusal,
        /// The error `io_uring_setup` returned.
        source: io::Error,
    },

    /// Registering buffers would exceed `RLIMIT_MEMLOCK`.
    #[error("registering {bytes} bytes of fixed buffers exceeds the locked-memory limit (RLIMIT_MEMLOCK = {limit}); raise the limit (ulimit -l, LimitMEMLOCK=) or do without registered buffers")]
    Memlock {
        /// Bytes that were to be registered.
        bytes: u64,
        /// The soft limit, in words (`1024 KiB`, `unlimited`).
        limit: String,
    },

    /// A switch this kernel, device or build cannot do.
    #[error("{switch} is not supported here: {reason}")]
    Unsupported {
        /// The switch.
        switch: Switch,
        /// Why, with what was found.
        reason: String,
    },

    /// An io_uring switch asked of an engine that is not io_uring.
    #[error("{switch} is an io_uring switch; the {engine} engine has no such thing (use uring or uring-sync)")]
    SwitchNeedsUring {
        /// The switch.
        switch: Switch,
        /// The engine it was asked of.
        engine: EngineKind,
    },

    /// Two switches that exclude each other.
    #[error("{first} and {second} exclude each other ({reason}); pick one")]
    Conflict {
        /// One switch.
        first: Switch,
        /// The other.
        second: Switch,
        /// Why they cannot go together.
        reason: &'static str,
    },

    /// A numeric setting outside what it may be.
    #[error("{setting} must be in {min}..={max}, got {value}")]
    OutOfRange {
        /// The setting.
        setting: Setting,
        /// The value given.
        value: u64,
        /// The least it may be.
        min: u64,
        /// The most it may be.
        max: u64,
    },

    /// A name or list that does not parse.
    #[error("unknown {what} {value:?}; expected {expected}")]
    Unparsable {
        /// What was being parsed (an engine name, a setup mode, a CPU list, ...).
        what: &'static str,
        /// The text given.
        value: String,
        /// What would have parsed.
        expected: &'static str,
    },

    /// The calling thread could not be pinned to a CPU.
    #[error("cannot pin to CPU {cpu} ({source}); this machine has {online} online CPUs (0..{})", online.saturating_sub(1))]
    CannotPin {
        /// The CPU asked for.
        cpu: u32,
        /// CPUs online.
        online: usize,
        /// The error `sched_setaffinity` returned.
        source: io::Error,
    },

    /// An engine's queue is full: completions must be reaped before more requests are pushed.
    #[error("{engine} engine full: {in_flight} requests in flight (depth {depth}); reap completions first")]
    QueueFull {
        /// The engine.
        engine: EngineKind,
        /// Requests in flight.
        in_flight: usize,
        /// The engine's depth.
        depth: usize,
    },

    /// A request names a file the engine was not opened with.
    #[error("file index {index} out of {files}")]
    NoSuchFile {
        /// The index the request named.
        index: u32,
        /// Files the engine has.
        files: usize,
    },

    /// A request reaches past the end of the region or namespace it addresses.
    #[error(
        "{op} of {len} bytes at offset {offset} reaches past the end of {target} ({limit} bytes)"
    )]
    PastEnd {
        /// The operation.
        op: &'static str,
        /// Its length in bytes.
        len: u64,
        /// Its offset in bytes.
        offset: u64,
        /// What it addresses (`region 2`, `namespace 1`).
        target: String,
        /// That target's size in bytes.
        limit: u64,
    },

    /// A char device that is not an NVMe namespace's generic device, where passthrough needs one.
    #[error("{path}: {what}; NVMe passthrough needs an NVMe generic char device (/dev/ngXnY)")]
    NotNvmeNamespace {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        what: String,
    },

    /// The regions given to a region engine cannot be used as they are.
    #[error("region engine: {reason}")]
    BadRegions {
        /// What is wrong, with the regions' offsets and lengths.
        reason: String,
    },

    /// A request reuses the user data of a request still in flight, where completions are
    /// matched by user data.
    #[error("user data {user_data} is already in flight")]
    DuplicateUserData {
        /// The user data.
        user_data: u64,
    },

    /// A request carries user data in the range the engines reserve for their own
    /// completions (the doorbell's poll and messages).
    #[error("user data {user_data} is reserved (requests must stay below {reserved_from})")]
    ReservedUserData {
        /// The user data.
        user_data: u64,
        /// The lowest reserved value.
        reserved_from: u64,
    },

    /// Registered buffers were asked for without memory to register.
    #[error("registered (fixed) buffers need a buffer pool to register")]
    NoBufferPool,

    /// A handle outlived the runtime it belongs to.
    #[error("the runtime was dropped; no more I/O on its handles")]
    RuntimeGone,

    /// A ring's submission queue stayed full: the kernel is not consuming submissions.
    #[error("the ring's submission queue ({entries} entries) stayed full through {waits} waits for room: the kernel is not consuming submissions")]
    SubmissionQueueFull {
        /// Submission-queue entries.
        entries: u32,
        /// Waits for room made.
        waits: u32,
    },

    /// A request failed in the kernel or the device.
    #[error("{op} failed at offset {offset}: {source}")]
    Op {
        /// The operation.
        op: &'static str,
        /// Its offset in bytes.
        offset: u64,
        /// The errno it completed with.
        source: io::Error,
    },

    /// A system call failed.
    #[error("{context}: {source}")]
    Os {
        /// What was being attempted.
        context: String,
        /// The error.
        source: io::Error,
    },

    /// The executor can make no progress: no task is ready and no I/O is in flight, while
    /// `pending` (its main future, or its tasks) still waits.
    #[error("executor stalled: {pending}, but no task is ready and no I/O is in flight ({parked_tasks} tasks parked, {waiting_for_room} requests waiting for ring room); a future waits for something only this thread could provide")]
    Stalled {
        /// What still waits (the main future, tasks).
        pending: &'static str,
        /// Tasks parked.
        parked_tasks: usize,
        /// Requests waiting for room in the ring.
        waiting_for_room: usize,
    },

    /// The executor waited for a completion `waits` times in a row and got none, with
    /// `in_flight` requests outstanding.
    #[error("{in_flight} requests are in flight, but {waits} waits in a row returned no completion; the engine or the device does not complete them")]
    NoCompletion {
        /// Requests in flight.
        in_flight: usize,
        /// Waits in a row that returned nothing.
        waits: u32,
    },
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
