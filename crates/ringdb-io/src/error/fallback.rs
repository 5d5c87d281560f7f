//! What the `auto` engine did without, as data: which switch (or io_uring itself) this machine
//! refused, why, and what runs instead. An explicit engine or switch that cannot run is an
//! [`crate::IoError`]; under `auto` the same refusal becomes a [`Fallback`], logged once and
//! kept in [`crate::EffectiveIo`] so that a front end can say what is in effect.

use super::{SetupRefusal, Switch};
use crate::config::EngineKind;
use serde::Serialize;
use std::fmt;

/// Why `auto` did without something it was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FallbackReason {
    /// `kernel.io_uring_disabled` forbids io_uring to this process (2: to everyone; 1: to
    /// processes outside `kernel.io_uring_group`).
    UringDisabled {
        /// The sysctl's value.
        sysctl_value: u32,
    },
    /// `io_uring_setup` failed with `EPERM` or `EACCES` while the sysctl allows io_uring: a
    /// seccomp filter (as in Docker's default profile) or a security module blocks it.
    UringBlocked {
        /// The errno `io_uring_setup` returned.
        errno: i32,
    },
    /// `io_uring_setup` failed with `ENOSYS`: the kernel has no io_uring (or a filter says so).
    UringAbsent,
    /// The kernel would not build a ring with the switch on.
    SetupRefused {
        /// What the error code says about why.
        refusal: SetupRefusal,
        /// The errno `io_uring_setup` returned (0 when it carried none).
        errno: i32,
    },
    /// Registering the buffers would exceed `RLIMIT_MEMLOCK`.
    LockedMemory {
        /// Bytes that were to be registered.
        bytes: u64,
        /// The soft limit in bytes (`None`: unlimited).
        limit_bytes: Option<u64>,
    },
    /// Polled completions need poll queues under every file, and file `file` has none.
    NoPollQueues {
        /// The file's index in the engine's table.
        file: u32,
    },
    /// Polled completions need `O_DIRECT`, and file `file` was not opened with it.
    NotDirect {
        /// The file's index in the engine's table.
        file: u32,
    },
    /// The kernel refused the switch once the ring existed (a registration it does not know).
    SwitchUnsupported,
    /// Linux AIO could not be set up (no `io_setup`, or the system's AIO contexts used up).
    LibaioUnavailable,
}

impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FallbackReason::UringDisabled { sysctl_value } => {
                write!(f, "kernel.io_uring_disabled = {sysctl_value}")
            }
            FallbackReason::UringBlocked { errno } => write!(
                f,
                "io_uring_setup failed with {} (a seccomp filter or a security module blocks io_uring)",
                std::io::Error::from_raw_os_error(errno)
            ),
            FallbackReason::UringAbsent => f.write_str("io_uring_setup is not implemented (ENOSYS)"),
            FallbackReason::SetupRefused { refusal, errno } => write!(
                f,
                "the kernel refused the ring with it ({}; {})",
                std::io::Error::from_raw_os_error(errno),
                refusal.advice()
            ),
            FallbackReason::LockedMemory { bytes, limit_bytes } => match limit_bytes {
                Some(limit) => write!(f, "{bytes} bytes exceed RLIMIT_MEMLOCK = {limit} bytes"),
                None => write!(f, "registering {bytes} bytes ran out of locked memory"),
            },
            FallbackReason::NoPollQueues { file } => {
                write!(f, "file {file} is not on a device with poll queues")
            }
            FallbackReason::NotDirect { file } => {
                write!(f, "file {file} is not open with O_DIRECT")
            }
            FallbackReason::SwitchUnsupported => f.write_str("this kernel refused it"),
            FallbackReason::LibaioUnavailable => f.write_str("Linux AIO could not be set up"),
        }
    }
}

/// One thing `auto` did without, and what runs instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fallback {
    /// What was refused: [`Switch::IoUring`] (or [`Switch::Libaio`]) for an engine, else the
    /// io_uring switch that was dropped.
    pub refused: Switch,
    /// Why.
    pub reason: FallbackReason,
    /// The engine that runs instead of a refused engine; `None` when the engine stays and
    /// only the switch is off.
    pub instead: Option<EngineKind>,
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.instead {
            Some(engine) => write!(
                f,
                "{} is unavailable here ({}); the {engine} engine runs instead",
                self.refused, self.reason
            ),
            None => write!(
                f,
                "{} is refused here ({}); io_uring runs without it",
                self.refused, self.reason
            ),
        }
    }
}
