//! Resolving the `auto` engine when it is opened: io_uring with the switches asked for where
//! this machine allows them, without a switch it refuses, and without io_uring where io_uring
//! is unavailable (disabled by `kernel.io_uring_disabled`, blocked by seccomp as in Docker, or
//! absent), where `libaio` runs when a file is `O_DIRECT` (Linux AIO is asynchronous only
//! there; on the buffered ones, such as a database's log, `io_submit` does the I/O before it
//! returns, as `posix` would) and `posix` when none is.
//!
//! Why here and not in the caller: only the attempt tells. `io_uring_setup` under a seccomp
//! filter fails the same way for every caller, a memlock limit shows only when the buffers are
//! registered, and a switch the kernel refuses is known only from the refusal. So the
//! resolution tries, classifies the typed refusal ([`Verdict`]), and tries again with less, a
//! bounded number of times (each retry drops one switch that was on). Each fallback is one
//! `tracing::warn!` and one [`Fallback`] in the [`EffectiveIo`] the caller keeps.

use super::effective::{EffectiveIo, Fallbacks};
use super::{open_exactly, Engine};
use crate::config::{EngineKind, IoConfig, SetupMode};
use crate::error::{Fallback, FallbackReason, IoError, Result, Switch};
use std::os::fd::RawFd;

/// Switches a retry may drop: SQPOLL, IOPOLL, the setup mode, registered ring fd, files and
/// buffers, forced async. Every retry drops one that is on, so this bounds the attempts.
const DROPPABLE_SWITCHES: usize = 7;

/// What a refused attempt means.
#[derive(Debug)]
enum Verdict {
    /// io_uring cannot run here at all: use an engine without it.
    Unavailable(FallbackReason),
    /// Only this switch is refused: try again without it.
    DropSwitch(Switch, FallbackReason),
    /// Not about where we run (a bad file, a full system): the caller gets the error.
    Fatal,
}

/// Opens `auto` as this machine allows (see the module docs).
pub(super) fn open_auto(
    config: &IoConfig,
    files: &[RawFd],
    buffers: Option<&[libc::iovec]>,
) -> Result<(Box<dyn Engine>, EffectiveIo)> {
    debug_assert_eq!(config.engine, EngineKind::Auto);
    let mut attempt = IoConfig {
        engine: EngineKind::Uring,
        ..config.clone()
    };
    let mut fallbacks = Fallbacks::default();
    if attempt.iopoll {
        if let Some(reason) = iopoll_refusal(files) {
            attempt.iopoll = false;
            fallbacks.push(switch_off(Switch::Iopoll, reason));
        }
    }
    let (engine, effective) = open_uring_or_fallback(&attempt, files, buffers, fallbacks)?;
    for fallback in effective.fallbacks.iter() {
        tracing::warn!(
            refused = ?fallback.refused,
            reason = ?fallback.reason,
            instead = ?fallback.instead,
            "auto engine: {fallback}"
        );
    }
    Ok((engine, effective))
}

/// Tries io_uring with `attempt`'s switches, dropping each one the machine refuses; where
/// io_uring is unavailable, opens the engine without it.
fn open_uring_or_fallback(
    attempt: &IoConfig,
    files: &[RawFd],
    buffers: Option<&[libc::iovec]>,
    mut fallbacks: Fallbacks,
) -> Result<(Box<dyn Engine>, EffectiveIo)> {
    let mut attempt = attempt.clone();
    for _ in 0..=DROPPABLE_SWITCHES {
        let error = match open_exactly(&attempt, files, buffers) {
            Ok(engine) => {
                let effective = EffectiveIo::resolved(EngineKind::Auto, &attempt, fallbacks);
                return Ok((engine, effective));
            }
            Err(error) => error,
        };
        match classify(&attempt, &error) {
            Verdict::Unavailable(reason) => return open_without_uring(&attempt, files, reason),
            Verdict::DropSwitch(switch, reason) => {
                turn_off(&mut attempt, switch);
                fallbacks.push(switch_off(switch, reason));
            }
            Verdict::Fatal => return Err(error),
        }
    }
    unreachable!("every retry turns one of {DROPPABLE_SWITCHES} switches off")
}

/// What the refusal of `attempt` with `error` means for `auto`.
fn classify(attempt: &IoConfig, error: &IoError) -> Verdict {
    match error {
        IoError::UringDisabled { value } => Verdict::Unavailable(FallbackReason::UringDisabled {
            sysctl_value: *value,
        }),
        IoError::Unsupported {
            switch: Switch::IoUring,
            ..
        } => Verdict::Unavailable(FallbackReason::UringAbsent),
        IoError::SetupRefused {
            refusal, source, ..
        } => {
            let errno = source.raw_os_error().unwrap_or(0);
            match setup_switch_on(attempt) {
                Some(switch) => Verdict::DropSwitch(
                    switch,
                    FallbackReason::SetupRefused {
                        refusal: *refusal,
                        errno,
                    },
                ),
                None if matches!(errno, libc::EPERM | libc::EACCES) => {
                    Verdict::Unavailable(FallbackReason::UringBlocked { errno })
                }
                None if errno == libc::ENOSYS => Verdict::Unavailable(FallbackReason::UringAbsent),
                None => Verdict::Fatal,
            }
        }
        IoError::Memlock { bytes, .. } if attempt.fixed_buffers => Verdict::DropSwitch(
            Switch::FixedBuffers,
            FallbackReason::LockedMemory {
                bytes: *bytes,
                limit_bytes: crate::limits::memlock_limit().0,
            },
        ),
        IoError::Unsupported { switch, .. } if is_on(attempt, *switch) => {
            Verdict::DropSwitch(*switch, FallbackReason::SwitchUnsupported)
        }
        _ => Verdict::Fatal,
    }
}

/// The setup switch to drop first when the kernel refuses a ring: the least common first.
fn setup_switch_on(attempt: &IoConfig) -> Option<Switch> {
    [Switch::Sqpoll, Switch::Iopoll, Switch::SetupMode]
        .into_iter()
        .find(|switch| is_on(attempt, *switch))
}

/// Whether `switch` is on in `config` and may be dropped.
fn is_on(config: &IoConfig, switch: Switch) -> bool {
    match switch {
        Switch::Sqpoll => config.sqpoll.is_some(),
        Switch::Iopoll => config.iopoll,
        Switch::SetupMode => config.setup != SetupMode::Default,
        Switch::RegisteredRingFd => config.register_ring_fd,
        Switch::RegisteredFiles => config.register_files,
        Switch::FixedBuffers => config.fixed_buffers,
        Switch::ForceAsync => config.force_async,
        _ => false,
    }
}

/// Turns `switch` off in `config`; it was on.
fn turn_off(config: &mut IoConfig, switch: Switch) {
    assert!(is_on(config, switch), "{switch} is dropped only while on");
    match switch {
        Switch::Sqpoll => config.sqpoll = None,
        Switch::Iopoll => config.iopoll = false,
        Switch::SetupMode => config.setup = SetupMode::Default,
        Switch::RegisteredRingFd => config.register_ring_fd = false,
        Switch::RegisteredFiles => config.register_files = false,
        Switch::FixedBuffers => config.fixed_buffers = false,
        Switch::ForceAsync => config.force_async = false,
        _ => unreachable!("is_on is false for {switch}"),
    }
    debug_assert!(!is_on(config, switch));
}

fn switch_off(switch: Switch, reason: FallbackReason) -> Fallback {
    Fallback {
        refused: switch,
        reason,
        instead: None,
    }
}

/// io_uring is unavailable: `libaio` when a file is `O_DIRECT` (and Linux AIO can be set up),
/// else `posix`. The switches dropped on the way no longer matter: one fallback says it.
fn open_without_uring(
    attempt: &IoConfig,
    files: &[RawFd],
    reason: FallbackReason,
) -> Result<(Box<dyn Engine>, EffectiveIo)> {
    let plain = |engine| IoConfig {
        queue_depth: attempt.queue_depth,
        batching: attempt.batching,
        cpu: attempt.cpu,
        ..IoConfig::new(engine)
    };
    let mut fallbacks = Fallbacks::default();
    if files.iter().any(|fd| is_direct(*fd)) {
        let libaio = plain(EngineKind::Libaio);
        match open_exactly(&libaio, files, None) {
            Ok(engine) => {
                fallbacks.push(engine_off(Switch::IoUring, reason, EngineKind::Libaio));
                let effective = EffectiveIo::resolved(EngineKind::Auto, &libaio, fallbacks);
                return Ok((engine, effective));
            }
            Err(IoError::Unsupported {
                switch: Switch::Libaio,
                ..
            }) => {
                fallbacks.push(engine_off(Switch::IoUring, reason, EngineKind::Libaio));
                let libaio_reason = FallbackReason::LibaioUnavailable;
                fallbacks.push(engine_off(Switch::Libaio, libaio_reason, EngineKind::Posix));
            }
            Err(error) => return Err(error),
        }
    } else {
        fallbacks.push(engine_off(Switch::IoUring, reason, EngineKind::Posix));
    }
    let posix = plain(EngineKind::Posix);
    let engine = open_exactly(&posix, files, None)?;
    Ok((
        engine,
        EffectiveIo::resolved(EngineKind::Auto, &posix, fallbacks),
    ))
}

fn engine_off(refused: Switch, reason: FallbackReason, instead: EngineKind) -> Fallback {
    Fallback {
        refused,
        reason,
        instead: Some(instead),
    }
}

/// Whether `fd` was opened with `O_DIRECT`.
fn is_direct(fd: RawFd) -> bool {
    // SAFETY: F_GETFL reads the descriptor's status flags and touches no memory.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}

/// Why polled completions cannot run over `files`, if they cannot: a file without `O_DIRECT`,
/// or one on a device without poll queues.
fn iopoll_refusal(files: &[RawFd]) -> Option<FallbackReason> {
    files.iter().enumerate().find_map(|(index, fd)| {
        let file = index as u32;
        if !is_direct(*fd) {
            return Some(FallbackReason::NotDirect { file });
        }
        let path = std::path::PathBuf::from(format!("/proc/self/fd/{fd}"));
        crate::target::check_iopoll(&path)
            .err()
            .map(|_| FallbackReason::NoPollQueues { file })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(errno: i32) -> IoError {
        IoError::SetupRefused {
            features: "8 entries".into(),
            refusal: crate::error::SetupRefusal::Other,
            source: std::io::Error::from_raw_os_error(errno),
        }
    }

    #[test]
    fn a_blocked_plain_ring_means_io_uring_is_unavailable() {
        let plain = IoConfig::new(EngineKind::Uring);
        for errno in [libc::EPERM, libc::EACCES] {
            assert!(matches!(
                classify(&plain, &refused(errno)),
                Verdict::Unavailable(FallbackReason::UringBlocked { errno: e }) if e == errno
            ));
        }
        let disabled = IoError::UringDisabled { value: 2 };
        assert!(matches!(
            classify(&plain, &disabled),
            Verdict::Unavailable(FallbackReason::UringDisabled { sysctl_value: 2 })
        ));
        assert!(matches!(
            classify(&plain, &refused(libc::EINVAL)),
            Verdict::Fatal
        ));
    }

    #[test]
    fn a_refused_ring_with_setup_switches_drops_them_one_at_a_time() {
        let mut attempt = IoConfig::new(EngineKind::Uring);
        attempt.setup = SetupMode::Coop;
        attempt.sqpoll = Some(crate::config::SqPoll {
            idle_ms: 5,
            cpu: None,
        });
        let mut dropped = Vec::new();
        while let Verdict::DropSwitch(switch, _) = classify(&attempt, &refused(libc::EPERM)) {
            turn_off(&mut attempt, switch);
            dropped.push(switch);
        }
        assert_eq!(dropped, [Switch::Sqpoll, Switch::SetupMode]);
        assert!(matches!(
            classify(&attempt, &refused(libc::EPERM)),
            Verdict::Unavailable(_)
        ));
    }

    #[test]
    fn memlock_drops_fixed_buffers_only_when_they_were_asked_for() {
        let memlock = IoError::Memlock {
            bytes: 1 << 20,
            limit: "64 KiB".into(),
        };
        let mut attempt = IoConfig::new(EngineKind::Uring);
        assert!(matches!(classify(&attempt, &memlock), Verdict::Fatal));
        attempt.fixed_buffers = true;
        assert!(matches!(
            classify(&attempt, &memlock),
            Verdict::DropSwitch(Switch::FixedBuffers, FallbackReason::LockedMemory { bytes, .. }) if bytes == 1 << 20
        ));
    }
}
