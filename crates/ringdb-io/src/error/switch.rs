//! The things a refusal is about, as data: which switch, which setting, why the kernel said no.
//! Front ends name them in their own vocabulary (the `ringdb` CLI maps each to its flag); the
//! messages here use the library's words.

use serde::Serialize;
use std::fmt;

/// A switch or feature of the I/O layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum Switch {
    /// io_uring itself.
    IoUring,
    /// Linux AIO (`io_setup`/`io_submit`).
    Libaio,
    /// NVMe passthrough: NVMe commands on a namespace's generic char device.
    Passthrough,
    /// How completions' task work runs (`SetupMode`).
    SetupMode,
    /// A kernel thread polling the submission queue (`IORING_SETUP_SQPOLL`).
    Sqpoll,
    /// The CPU the SQ polling thread is pinned to (`IORING_SETUP_SQ_AFF`).
    SqpollCpu,
    /// Completions polled from the device (`IORING_SETUP_IOPOLL`).
    Iopoll,
    /// Entering the ring by a registered index (`IORING_REGISTER_RING_FDS`).
    RegisteredRingFd,
    /// Files named by registered index (`IORING_REGISTER_FILES`).
    RegisteredFiles,
    /// Registered (fixed) buffers (`IORING_REGISTER_BUFFERS`).
    FixedBuffers,
    /// `IOSQE_ASYNC` on every request.
    ForceAsync,
    /// Direct I/O (`O_DIRECT`).
    DirectIo,
    /// Pinning a ring's thread and its io-wq workers to a CPU.
    CpuAffinity,
}

impl Switch {
    /// The switch in words.
    pub fn describe(self) -> &'static str {
        match self {
            Switch::IoUring => "io_uring",
            Switch::Libaio => "libaio",
            Switch::Passthrough => "NVMe passthrough",
            Switch::SetupMode => "the ring's setup mode",
            Switch::Sqpoll => "SQPOLL (a kernel thread polling the submission queue)",
            Switch::SqpollCpu => "the SQ polling thread's CPU",
            Switch::Iopoll => "IOPOLL (completions polled from the device)",
            Switch::RegisteredRingFd => "a registered ring fd",
            Switch::RegisteredFiles => "registered files",
            Switch::FixedBuffers => "registered (fixed) buffers",
            Switch::ForceAsync => "forced async (IOSQE_ASYNC)",
            Switch::DirectIo => "O_DIRECT",
            Switch::CpuAffinity => "CPU pinning",
        }
    }
}

impl fmt::Display for Switch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A numeric setting of the I/O layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum Setting {
    /// Requests one ring (or AIO context) keeps in flight.
    QueueDepth,
    /// Completion-queue entries.
    CompletionQueueSize,
    /// Requests a fixed batching policy gathers before it submits.
    BatchSize,
    /// A CPU number.
    Cpu,
    /// Buffers in a buffer pool.
    BufferCount,
    /// Bytes in one buffer.
    BufferSize,
    /// Bytes in one block of a region engine.
    BlockSize,
}

impl Setting {
    /// The setting in words.
    pub fn describe(self) -> &'static str {
        match self {
            Setting::QueueDepth => "queue depth",
            Setting::CompletionQueueSize => "completion queue size",
            Setting::BatchSize => "fixed batch size",
            Setting::Cpu => "CPU",
            Setting::BufferCount => "buffer count",
            Setting::BufferSize => "buffer size",
            Setting::BlockSize => "block size",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Why the kernel refused to build a ring, as far as the error code tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum SetupRefusal {
    /// `EINVAL`: this kernel does not know a setup flag that was asked for.
    FlagUnsupported,
    /// `EINVAL` with SQPOLL: most often an SQ polling CPU that is not online.
    SqpollCpu,
    /// `EINVAL` for a ring with 128-byte SQEs and 32-byte CQEs (Linux 5.19+).
    LargeEntriesUnsupported,
    /// `ENOMEM`: the ring does not fit the locked-memory limit.
    LockedMemory,
    /// Anything else.
    Other,
}

impl SetupRefusal {
    /// What to do about it, in the library's words.
    pub fn advice(self) -> &'static str {
        match self {
            SetupRefusal::FlagUnsupported => "this kernel does not support that setup flag",
            SetupRefusal::SqpollCpu => {
                "the SQ polling thread's CPU must be an online CPU (or leave it unpinned)"
            }
            SetupRefusal::LargeEntriesUnsupported => {
                "NVMe passthrough needs SQE128/CQE32 rings (Linux 5.19+); use the uring engine on the namespace's block device instead"
            }
            SetupRefusal::LockedMemory => {
                "the ring does not fit the locked-memory limit; raise RLIMIT_MEMLOCK or use a smaller queue depth"
            }
            SetupRefusal::Other => "the probe shows which io_uring features work here",
        }
    }
}
