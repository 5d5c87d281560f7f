//! Kernel limits the runtime checks when it refuses a setup: whether io_uring is disabled
//! by sysctl, and the locked-memory limit that registered buffers count against. The lab's
//! probe reports the same values; the runtime needs them to say *why* a ring was refused.

use std::io;

/// `/proc/sys/kernel/io_uring_disabled`, or `None` where the kernel has no such knob.
pub fn io_uring_disabled() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `RLIMIT_MEMLOCK` as (soft, hard) in bytes; `None` means unlimited (also returned, for both,
/// in the practically impossible case that `getrlimit` fails).
pub fn memlock_limit() -> (Option<u64>, Option<u64>) {
    read_memlock().unwrap_or((None, None))
}

/// `RLIMIT_MEMLOCK` as (soft, hard) in bytes, or the error `getrlimit` returned.
pub fn read_memlock() -> io::Result<(Option<u64>, Option<u64>)> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes one `struct rlimit` through the pointer, which points at
    // the live local `rl`.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // rlim_t is u64 on the usual targets but not on every one, hence the cast.
    #[allow(clippy::unnecessary_cast)]
    let lim = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v as u64);
    Ok((lim(rl.rlim_cur), lim(rl.rlim_max)))
}
