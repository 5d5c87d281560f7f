//! Kernel limits the runtime checks when it refuses a setup: whether io_uring is disabled
//! by sysctl, and the locked-memory limit that registered buffers count against. The lab's
//! probe reports the same values; the runtime needs them to say *why* a ring was refused.
//! And the memory this process may still take ([`memory_headroom`]): what its memory cgroups
//! leave and what the machine has available, for work that sizes its buffers to fit.

use std::io;
use std::path::{Path, PathBuf};

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

/// The memory this process may still allocate: the least of what the machine has available
/// (`MemAvailable`) and what each memory cgroup it belongs to (its own and every ancestor,
/// cgroup v1 or v2) leaves under its limit, counting a cgroup's inactive page cache as free
/// (the kernel reclaims it before it kills). `None` when none of these can be read.
pub fn memory_headroom() -> Option<MemoryHeadroom> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let available = meminfo.as_deref().and_then(mem_available_bytes);
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|own| tightest_cgroup(&own, Path::new(CGROUP_ROOT)));
    let bytes = match (available, &cgroup) {
        (Some(a), Some(c)) => a.min(c.left_bytes),
        (Some(a), None) => a,
        (None, Some(c)) => c.left_bytes,
        (None, None) => return None,
    };
    Some(MemoryHeadroom {
        bytes,
        available_bytes: available,
        cgroup,
    })
}

/// What [`memory_headroom`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryHeadroom {
    /// Bytes this process may still allocate (the least of the figures below).
    pub bytes: u64,
    /// The machine's `MemAvailable`, if read.
    pub available_bytes: Option<u64>,
    /// The memory cgroup that leaves the least, if any has a limit.
    pub cgroup: Option<CgroupMemory>,
}

/// A memory cgroup's limit and what it leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMemory {
    /// Its directory.
    pub path: PathBuf,
    /// Its hard limit in bytes.
    pub limit_bytes: u64,
    /// What it leaves: the limit less the charge, the inactive page cache not counted.
    pub left_bytes: u64,
}

/// Where the cgroup file systems are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// Levels of cgroups walked up from a process's own at most.
const CGROUP_DEPTH_MAX: usize = 64;
/// A limit at or above this is no limit (v1 writes "unlimited" as about 2^63).
const NO_LIMIT_BYTES: u64 = 1 << 60;

/// `MemAvailable` of `/proc/meminfo`'s text, in bytes.
fn mem_available_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The cgroup that leaves the least, among the memory cgroups `proc_self_cgroup` (the text
/// of `/proc/self/cgroup`) names under `root` and their ancestors.
fn tightest_cgroup(proc_self_cgroup: &str, root: &Path) -> Option<CgroupMemory> {
    let mut tightest: Option<CgroupMemory> = None;
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let (mount, files) = if controllers.is_empty() {
            (root.join("unified"), V2_FILES)
        } else if controllers.split(',').any(|c| c == "memory") {
            (root.join("memory"), V1_FILES)
        } else {
            continue;
        };
        // A pure v2 system mounts the hierarchy at the root itself.
        let mount = if mount.exists() {
            mount
        } else {
            root.to_path_buf()
        };
        let mut dir = mount.join(path.trim_start_matches('/'));
        for _ in 0..CGROUP_DEPTH_MAX {
            if let Some(found) = cgroup_memory(&dir, files) {
                if tightest
                    .as_ref()
                    .is_none_or(|t| found.left_bytes < t.left_bytes)
                {
                    tightest = Some(found);
                }
            }
            if dir == mount || !dir.pop() {
                break;
            }
        }
    }
    tightest
}

/// The files of one cgroup version: limit, charge, and the stat key of inactive page cache.
type CgroupFiles = (&'static str, &'static str, &'static str);
const V1_FILES: CgroupFiles = (
    "memory.limit_in_bytes",
    "memory.usage_in_bytes",
    "total_inactive_file",
);
const V2_FILES: CgroupFiles = ("memory.max", "memory.current", "inactive_file");

/// The limit of the cgroup at `dir` and what it leaves; `None` without a limit there.
fn cgroup_memory(dir: &Path, (limit, usage, inactive): CgroupFiles) -> Option<CgroupMemory> {
    let number = |name: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let limit_bytes = number(limit).filter(|&l| l < NO_LIMIT_BYTES)?;
    let charged = number(usage)?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let reclaimable = stat
        .lines()
        .find_map(|l| {
            l.strip_prefix(inactive)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0u64);
    Some(CgroupMemory {
        path: dir.to_path_buf(),
        limit_bytes,
        left_bytes: limit_bytes.saturating_sub(charged.saturating_sub(reclaimable)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemAvailable:    1000 kB\n";
        assert_eq!(mem_available_bytes(text), Some(1_024_000));
        assert_eq!(mem_available_bytes("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn the_tightest_limit_among_a_cgroup_and_its_ancestors_wins() {
        let root = std::env::temp_dir().join(format!("ringdb-cgroups-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |dir: &Path, limit: &str, usage: u64, inactive: u64| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("memory.limit_in_bytes"), limit).unwrap();
            std::fs::write(dir.join("memory.usage_in_bytes"), usage.to_string()).unwrap();
            let stat = format!("total_rss 5\ntotal_inactive_file {inactive}\n");
            std::fs::write(dir.join("memory.stat"), stat).unwrap();
        };
        let memory = root.join("memory");
        write(&memory, "9223372036854771712", 1 << 30, 0); // the root: unlimited
        write(&memory.join("outer"), "1000000", 900_000, 0); // leaves 100,000
        write(&memory.join("outer/inner"), "800000", 500_000, 250_000); // leaves 550,000
        let found = tightest_cgroup("4:memory:/outer/inner\n1:cpu:/\n", &root).unwrap();
        assert_eq!((found.limit_bytes, found.left_bytes), (1_000_000, 100_000));
        assert_eq!(found.path, memory.join("outer"));
        assert_eq!(
            tightest_cgroup("1:cpu:/\n", &root),
            None,
            "no memory controller"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
