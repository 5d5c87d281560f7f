//! The paper's (and seeds') guidelines applied to a report: one line each, naming what to do.
//! Each step looks at one part of the report (io_uring itself, locked memory, registrations,
//! task-work modes, polling, passthrough, the device) and adds the lines that apply.

use super::format::human_bytes;
use super::{MemlockLimit, ProbeReport};
use crate::device::DeviceInfo;

/// Every warning that applies to `r`, in the order the report shows them.
pub(super) fn warnings(r: &ProbeReport) -> Vec<String> {
    let mut w = Vec::new();
    io_uring_warnings(r, &mut w);
    memlock_warnings(r, &mut w);
    if r.uring_available {
        registration_warnings(r, &mut w);
        taskrun_warnings(r, &mut w);
        polling_warnings(r, &mut w);
        passthrough_warnings(r, &mut w);
    }
    path_warnings(r, &mut w);
    w
}

/// Why the check `name` was refused, if it was tried and refused.
fn refused(r: &ProbeReport, name: &str) -> Option<String> {
    r.check(name)
        .filter(|c| !c.ok)
        .map(|c| c.error.clone().unwrap_or_else(|| "refused".into()))
}

/// Whether the kernel supports `URING_CMD` (NVMe passthrough).
fn has_uring_cmd(r: &ProbeReport) -> bool {
    r.opcodes.iter().any(|o| o == "URING_CMD")
}

/// io_uring disabled by sysctl, limited to a group, or failing to set up.
fn io_uring_warnings(r: &ProbeReport, w: &mut Vec<String>) {
    match r.io_uring_disabled {
        Some(2) => w.push(
            "io_uring is disabled (kernel.io_uring_disabled=2): run `sysctl -w kernel.io_uring_disabled=0` as root, or use --engine posix or libaio".into(),
        ),
        Some(1) if !r.uring_available => w.push(format!(
            "io_uring is limited to group {} (kernel.io_uring_disabled=1): add this user to that group or run `sysctl -w kernel.io_uring_disabled=0` as root",
            r.io_uring_group.map_or_else(|| "io_uring_group".into(), |g| g.to_string())
        )),
        _ => {}
    }
    if !r.uring_available && !matches!(r.io_uring_disabled, Some(1 | 2)) {
        w.push(format!(
            "io_uring_setup failed ({}): use --engine posix or libaio",
            r.setup_error.as_deref().unwrap_or("unknown error")
        ));
    }
}

/// Locked memory for registered buffers.
fn memlock_warnings(r: &ProbeReport, w: &mut Vec<String>) {
    if r.cap_ipc_lock != Some(true) {
        if let Some(MemlockLimit::Bytes(b)) = r.memlock_soft {
            w.push(format!(
                "RLIMIT_MEMLOCK is {} and no CAP_IPC_LOCK: registered buffers (--fixedbufs) above {} in total fail with ENOMEM; raise it (ulimit -l, LimitMEMLOCK=) or keep the fixed pool below it",
                human_bytes(b),
                human_bytes(b)
            ));
        }
    }
}

/// Registrations the kernel refused, each with the switch to drop.
fn registration_warnings(r: &ProbeReport, w: &mut Vec<String>) {
    if let Some(e) = refused(r, "register_buffers (4 KiB)") {
        w.push(format!(
            "registering even a 4 KiB fixed buffer failed ({e}): run without --fixedbufs"
        ));
    }
    if let Some(e) = refused(r, "register_ring_fd") {
        w.push(format!(
            "registering the ring fd is refused ({e}): run without --register-ring-fd"
        ));
    }
    if let Some(e) = refused(r, "register_files") {
        w.push(format!(
            "registering files is refused ({e}): run without --register-files"
        ));
    }
}

/// Task-work modes (paper Sec. 2.1, "Avoiding preemptions").
fn taskrun_warnings(r: &ProbeReport, w: &mut Vec<String>) {
    if let Some(e) = refused(r, "DEFER_TASKRUN") {
        if r.check("COOP_TASKRUN").is_some_and(|c| c.ok) {
            w.push(format!(
                "DEFER_TASKRUN is refused ({e}): use --setup coop (COOP_TASKRUN) instead"
            ));
        } else {
            w.push(format!(
                "DEFER_TASKRUN and COOP_TASKRUN are refused ({e}): use --setup default"
            ));
        }
    }
}

/// SQPOLL (a spare core per ring) and IOPOLL.
fn polling_warnings(r: &ProbeReport, w: &mut Vec<String>) {
    let cpus = match (r.online_cpus, r.allowed_cpus) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    match (refused(r, "SQPOLL"), cpus) {
        (Some(e), _) => w.push(format!(
            "SQPOLL is refused ({e}): run without --sqpoll"
        )),
        (None, Some(1)) => w.push(
            "only 1 CPU: do not use --sqpoll (the poller and the application share the core and throughput collapses, seeds/002 Sec. 3.1)".into(),
        ),
        (None, Some(n)) => w.push(format!(
            "SQPOLL needs a spare core per ring: with {n} CPUs use --sqpoll on at most {} ring(s) (app thread + poller each need a core, else it collapses; seeds/002 Sec. 3.3)",
            n / 2
        )),
        (None, None) => {}
    }
    if let Some(e) = refused(r, "IOPOLL") {
        w.push(format!(
            "IOPOLL ring setup is refused ({e}): run without --iopoll"
        ));
    }
}

/// NVMe passthrough needs `URING_CMD`.
fn passthrough_warnings(r: &ProbeReport, w: &mut Vec<String>) {
    if !r.opcodes.is_empty() && !has_uring_cmd(r) {
        w.push("this kernel lacks URING_CMD: NVMe passthrough is unavailable; use the block-device path".into());
    }
}

/// The path asked about: no device to inspect, no block device, or the device's own warnings.
fn path_warnings(r: &ProbeReport, w: &mut Vec<String>) {
    if let Some(e) = &r.device_error {
        w.push(format!("cannot inspect the device: {e}"));
    }
    match (&r.path, &r.device) {
        (Some(p), None) if r.device_error.is_none() => w.push(format!(
            "{} is on no block device (tmpfs/overlay): no direct device I/O there (O_DIRECT is refused, or on tmpfs only copies memory), buffered I/O only; put data on a block-backed filesystem or a block device",
            p.display()
        )),
        (_, Some(d)) => device_warnings(r, d, w),
        (None, None) if r.nvme_char_devices.is_empty() && has_uring_cmd(r) => {
            w.push("no NVMe generic char devices (/dev/ng*): io_uring NVMe passthrough is unavailable here; use the block-device path".into());
        }
        _ => {}
    }
}

/// The guidelines the block device under the path breaks or sets limits for.
fn device_warnings(r: &ProbeReport, d: &DeviceInfo, w: &mut Vec<String>) {
    let disk = d.disk.as_deref().unwrap_or(&d.name);
    if let Some(c) = r.read_path.as_ref().filter(|c| c.punted_to_iowq) {
        w.push(format!(
            "O_DIRECT reads on {disk} are punted to io-wq workers ({} appeared for {} reads: no NOWAIT support), so every I/O pays a worker hand-off (paper Sec. 2.2); pin each ring with its workers to one core (ringdb io --cpus-allowed), or gains come from worker parallelism, not from the inline path",
            c.iowq_workers, c.reads
        ));
    }
    if !d.io_poll {
        let why = match d.poll_queues_hint {
            Some(0) => "nvme.poll_queues=0",
            _ => "it needs an NVMe device with nvme.poll_queues>0",
        };
        w.push(format!(
            "IOPOLL is refused on {disk}: its I/Os fail with EOPNOTSUPP (queue/io_poll=0; {why}); boot with nvme.poll_queues=N, or run without --iopoll"
        ));
    }
    if let Some(limit) = d.split_limit_kb() {
        let kb = |v: Option<u32>| v.map_or_else(|| "?".into(), |v| v.to_string());
        w.push(format!(
            "keep --bs <= {limit} KiB on {disk}: larger blocks are split (max_sectors_kb={}, max_hw_sectors_kb={}) and fall back to io-wq workers (paper Sec. 3.6, \"Large blocks can backfire\")",
            kb(d.max_sectors_kb),
            kb(d.max_hw_sectors_kb)
        ));
    }
    if let Some(n) = d.nr_requests {
        w.push(format!(
            "keep O_DIRECT batches (--iodepth) <= nr_requests={n} on {disk}: larger batches push submissions onto io-wq workers (paper Sec. 3.6)"
        ));
    }
    if d.rotational {
        w.push(format!(
            "{disk} reports rotational=1 (a disk, or a virtual disk that says so): random I/O is seek-bound and the paper's NVMe results do not transfer; prefer sequential access and modest --iodepth"
        ));
    } else if let Some(s) = d.scheduler.as_deref().filter(|s| *s != "none") {
        w.push(format!(
            "{disk} uses the {s} I/O scheduler: for NVMe/SSD `echo none > /sys/block/{disk}/queue/scheduler` saves CPU per I/O"
        ));
    }
    if d.nvme_char_device.is_none() && has_uring_cmd(r) {
        w.push(format!(
            "{disk} has no NVMe generic char device (/dev/ngXnY): io_uring NVMe passthrough (URING_CMD) is unavailable for it; use the block-device path"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::probe;

    #[test]
    fn warnings_follow_the_guidelines() {
        let mut r = probe(None);
        r.io_uring_disabled = Some(2);
        r.uring_available = false;
        r.setup_error = Some("EPERM: Operation not permitted".into());
        r.cap_ipc_lock = Some(false);
        r.memlock_soft = Some(MemlockLimit::Bytes(8 << 20));
        let w = warnings(&r);
        assert!(w.iter().any(|l| l.contains("io_uring_disabled=0")), "{w:?}");
        assert!(
            w.iter()
                .any(|l| l.contains("8 MiB") && l.contains("CAP_IPC_LOCK")),
            "{w:?}"
        );
        assert!(
            !w.iter().any(|l| l.contains("io_uring_setup failed")),
            "{w:?}"
        );

        let mut r = probe(None);
        r.online_cpus = Some(2);
        r.allowed_cpus = Some(2);
        if let Some(c) = r.setup_flags.iter_mut().find(|c| c.name == "DEFER_TASKRUN") {
            c.ok = false;
            c.error = Some("EINVAL".into());
        }
        let w = warnings(&r);
        assert!(w.iter().any(|l| l.contains("--setup coop")), "{w:?}");
        assert!(w.iter().any(|l| l.contains("at most 1 ring")), "{w:?}");
        for l in &w {
            assert!(!l.contains('\n'));
        }
    }
}
