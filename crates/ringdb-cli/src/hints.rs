//! The CLI's words for the libraries' typed errors. The libraries say what went wrong and what
//! to change in their own vocabulary (a [`Switch`], a [`Setting`], an engine name); this is the
//! one place that knows which command-line flag each of those is, and prints it as a hint line
//! under the error.

use ringdb_bench::error::BenchError;
use ringdb_io::{IoError, Setting, SetupRefusal, Switch};
use std::error::Error;

/// A hint in flag words for `error`, when one helps: the engine's own hint first (it knows
/// what the database was doing), then the I/O layer's for the I/O error behind it.
pub fn hint(error: &(dyn Error + 'static)) -> Option<String> {
    crate::hints_db::db_hint(error)
        .or_else(|| io_cause(error).and_then(io_hint))
        .or_else(|| crate::hints_tpcc::tpcc_hint(error))
        .or_else(|| crate::hints_bench::bench_hint(error))
        .or_else(|| crate::hints_net::net_hint(error))
}

/// The I/O layer's error behind `error`, however it is wrapped (the wrappers are transparent,
/// so the cause is not reachable through `source()`).
fn io_cause<'a>(error: &'a (dyn Error + 'static)) -> Option<&'a IoError> {
    if let Some(io) = error.downcast_ref::<IoError>() {
        return Some(io);
    }
    match error.downcast_ref::<BenchError>() {
        Some(BenchError::Io(io)) => return Some(io),
        Some(BenchError::Db(db)) => return db.io_cause(),
        _ => {}
    }
    if let Some(db) = error.downcast_ref::<ringdb::DbError>() {
        return db.io_cause();
    }
    if let Some(open) = error.downcast_ref::<ringdb::OpenError>() {
        return open.io_cause();
    }
    if let Some(write) = error.downcast_ref::<ringdb::WriteError>() {
        return write.io_cause();
    }
    if let Some(read) = error.downcast_ref::<ringdb::ReadError>() {
        return read.io_cause();
    }
    if let Some(ringdb_net::NetError::Ring(io)) = error.downcast_ref::<ringdb_net::NetError>() {
        return Some(io);
    }
    None
}

/// The flag of `ringdb io` (and the commands that share its switches) that sets `switch`.
pub fn switch_flag(switch: Switch) -> &'static str {
    match switch {
        Switch::IoUring => "--engine uring",
        Switch::Libaio => "--engine libaio",
        Switch::Passthrough => "--engine uring-passthrough",
        Switch::SetupMode => "--setup",
        Switch::Sqpoll => "--sqpoll",
        Switch::SqpollCpu => "--sqpoll-cpu",
        Switch::Iopoll => "--iopoll",
        Switch::RegisteredRingFd => "--register-ring-fd",
        Switch::RegisteredFiles => "--register-files",
        Switch::FixedBuffers => "--fixedbufs",
        Switch::ForceAsync => "--force-async",
        Switch::DirectIo => "--direct",
        Switch::CpuAffinity => "--cpus-allowed",
        _ => "the switch",
    }
}

/// The flag that sets `setting`.
pub fn setting_flag(setting: Setting) -> &'static str {
    match setting {
        Setting::QueueDepth => "--iodepth",
        Setting::CompletionQueueSize => "--cq-size",
        Setting::BatchSize => "--batch fixed(N)",
        Setting::Cpu => "--cpus-allowed",
        Setting::BufferCount => "--iodepth",
        Setting::BufferSize => "--bs",
        Setting::BlockSize => "--bs",
        _ => "the setting",
    }
}

fn io_hint(error: &IoError) -> Option<String> {
    let text = match error {
        IoError::UringDisabled { .. } => {
            "run `sysctl -w kernel.io_uring_disabled=0` as root, or use --engine posix or --engine libaio".to_string()
        }
        IoError::DirectUnsupported { .. } => {
            "use --direct 0, or a file on a block-backed filesystem".to_string()
        }
        IoError::Memlock { .. } => {
            "raise `ulimit -l` (LimitMEMLOCK= for a service), or drop --fixedbufs".to_string()
        }
        IoError::SetupRefused { refusal, .. } => setup_hint(*refusal),
        IoError::Unsupported { switch, .. } => match switch {
            Switch::IoUring => "use --engine posix or --engine libaio".to_string(),
            Switch::Libaio => "use --engine posix or --engine uring".to_string(),
            other => format!("drop {}", switch_flag(*other)),
        },
        IoError::SwitchNeedsUring { switch, .. } => format!(
            "{} is an io_uring switch: use it with --engine uring or uring-sync",
            switch_flag(*switch)
        ),
        IoError::Conflict { first, second, .. } => format!(
            "drop {} or {}",
            switch_flag(*first),
            switch_flag(*second)
        ),
        IoError::OutOfRange { setting, min, max, .. } => {
            format!("{} takes {min}..={max}", setting_flag(*setting))
        }
        IoError::NotNvmeNamespace { .. } => {
            "--engine uring-passthrough needs an NVMe generic char device: --filename /dev/ngXnY"
                .to_string()
        }
        IoError::Misaligned { block, .. } => {
            format!("use --bs and --size in multiples of {block}, or --direct 0")
        }
        _ => return None,
    };
    Some(text)
}

fn setup_hint(refusal: SetupRefusal) -> String {
    match refusal {
        SetupRefusal::SqpollCpu => "check --sqpoll-cpu (an online CPU), or drop --sqpoll".into(),
        SetupRefusal::LargeEntriesUnsupported => {
            "use --engine uring on the namespace's block device (/dev/nvmeXnY); `ringdb probe` shows which setup flags work".into()
        }
        SetupRefusal::LockedMemory => "raise `ulimit -l`, or lower --iodepth".into(),
        _ => "run `ringdb probe` to see which io_uring features work here".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringdb_io::EngineKind;

    #[test]
    fn io_errors_get_flag_hints_through_any_wrapper() {
        let disabled = IoError::UringDisabled { value: 2 };
        assert!(hint(&disabled).unwrap().contains("--engine posix"));
        let wrapped = BenchError::Io(IoError::SwitchNeedsUring {
            switch: Switch::FixedBuffers,
            engine: EngineKind::Posix,
        });
        let boxed: Box<dyn Error> = Box::new(wrapped);
        let text = hint(boxed.as_ref()).unwrap();
        assert!(text.contains("--fixedbufs"), "{text}");
        let range = IoError::OutOfRange {
            setting: Setting::QueueDepth,
            value: 0,
            min: 1,
            max: 32768,
        };
        assert_eq!(hint(&range).unwrap(), "--iodepth takes 1..=32768");
        let refused = IoError::SetupRefused {
            features: "SQPOLL".into(),
            refusal: SetupRefusal::SqpollCpu,
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        };
        assert!(hint(&refused).unwrap().contains("--sqpoll-cpu"));
        let other = IoError::RuntimeGone;
        assert!(hint(&other).is_none());
    }

    #[test]
    fn every_switch_and_setting_has_a_flag() {
        for switch in [
            Switch::IoUring,
            Switch::Libaio,
            Switch::Passthrough,
            Switch::SetupMode,
            Switch::Sqpoll,
            Switch::SqpollCpu,
            Switch::Iopoll,
            Switch::RegisteredRingFd,
            Switch::RegisteredFiles,
            Switch::FixedBuffers,
            Switch::ForceAsync,
            Switch::DirectIo,
            Switch::CpuAffinity,
        ] {
            assert!(switch_flag(switch).starts_with("--"), "{switch:?}");
        }
        for setting in [
            Setting::QueueDepth,
            Setting::CompletionQueueSize,
            Setting::BatchSize,
            Setting::Cpu,
            Setting::BufferCount,
            Setting::BufferSize,
            Setting::BlockSize,
        ] {
            assert!(setting_flag(setting).starts_with("--"), "{setting:?}");
        }
    }
}
