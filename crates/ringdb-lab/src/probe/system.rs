//! Kernel and process facts the probe reports: the kernel release, CPUs, `CAP_IPC_LOCK` and
//! `RLIMIT_MEMLOCK` (which registered buffers count against). The io_uring limits themselves
//! come from the runtime ([`ringdb_io::limits`]), which refuses rings with them.

use super::format::human_bytes;
use ringdb_io::sysfs::read_trimmed;
use serde::{Serialize, Serializer};
use std::fmt;
use std::fs;
use std::io;
use std::path::Path;

/// Bit of `CAP_IPC_LOCK` in the capability masks of `/proc/self/status`.
const CAP_IPC_LOCK: u32 = 14;

/// An `RLIMIT_MEMLOCK` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemlockLimit {
    /// A limit of this many bytes.
    Bytes(u64),
    /// No limit (`RLIM_INFINITY`).
    Unlimited,
}

impl MemlockLimit {
    fn from_option(v: Option<u64>) -> Self {
        v.map_or(MemlockLimit::Unlimited, MemlockLimit::Bytes)
    }
}

impl fmt::Display for MemlockLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemlockLimit::Unlimited => f.write_str("unlimited"),
            MemlockLimit::Bytes(b) => f.write_str(&human_bytes(*b)),
        }
    }
}

/// Serialized as a number of bytes, or the string `"unlimited"`.
impl Serialize for MemlockLimit {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            MemlockLimit::Bytes(b) => s.serialize_u64(*b),
            MemlockLimit::Unlimited => s.serialize_str("unlimited"),
        }
    }
}

/// `uname -r`, or `"unknown"` with the reason added to `errors`.
pub(super) fn kernel_release_or_unknown(errors: &mut Vec<String>) -> String {
    kernel_release().unwrap_or_else(|e| {
        errors.push(format!("uname: {e}"));
        "unknown".to_string()
    })
}

/// `RLIMIT_MEMLOCK` (soft, hard), or `(None, None)` with the reason added to `errors`.
pub(super) fn memlock_limits(
    errors: &mut Vec<String>,
) -> (Option<MemlockLimit>, Option<MemlockLimit>) {
    match ringdb_io::limits::read_memlock() {
        Ok((s, h)) => (
            Some(MemlockLimit::from_option(s)),
            Some(MemlockLimit::from_option(h)),
        ),
        Err(e) => {
            errors.push(format!("getrlimit(RLIMIT_MEMLOCK): {e}"));
            (None, None)
        }
    }
}

/// Whether `CAP_IPC_LOCK` is effective; `None` (and a line in `errors`) if unreadable.
pub(super) fn cap_ipc_lock(errors: &mut Vec<String>) -> Option<bool> {
    let cap = has_effective_cap(CAP_IPC_LOCK);
    if cap.is_none() {
        errors.push("could not read CapEff from /proc/self/status".into());
    }
    cap
}

/// `/proc/sys/kernel/io_uring_group`, `None` where the kernel has no such knob.
pub(super) fn io_uring_group() -> Option<i64> {
    read_trimmed(Path::new("/proc/sys/kernel/io_uring_group")).and_then(|s| s.parse().ok())
}

/// CPUs this process may run on (its affinity mask).
pub(super) fn allowed_cpus() -> Option<u32> {
    std::thread::available_parallelism()
        .ok()
        .and_then(|n| u32::try_from(n.get()).ok())
}

fn kernel_release() -> io::Result<String> {
    // SAFETY: `utsname` is a plain C struct of byte arrays, for which all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes one `struct utsname` through the pointer, which points at `u`.
    let r = unsafe { libc::uname(&mut u) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// CPUs online in the machine.
pub(super) fn online_cpus() -> Option<u32> {
    // SAFETY: sysconf takes no pointers and only reads system configuration.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|n| *n > 0)
}

/// Whether capability `bit` is in the effective set (`CapEff` of `/proc/self/status`).
fn has_effective_cap(bit: u32) -> Option<bool> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    let mask = u64::from_str_radix(hex, 16).ok()?;
    Some(bit < 64 && mask & (1u64 << bit) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringdb_io::limits::{io_uring_disabled, memlock_limit};

    #[test]
    fn limits_and_memlock_values() {
        assert_eq!(
            io_uring_disabled(),
            read_trimmed(Path::new("/proc/sys/kernel/io_uring_disabled"))
                .and_then(|s| s.parse().ok())
        );
        let (soft, hard) = memlock_limit();
        if let (Some(s), Some(h)) = (soft, hard) {
            assert!(s <= h);
        }
        assert_eq!(
            serde_json::to_string(&MemlockLimit::Unlimited).unwrap(),
            "\"unlimited\""
        );
        assert_eq!(serde_json::to_string(&MemlockLimit::Bytes(5)).unwrap(), "5");
        assert_eq!(MemlockLimit::Bytes(8 << 20).to_string(), "8 MiB");
    }
}
