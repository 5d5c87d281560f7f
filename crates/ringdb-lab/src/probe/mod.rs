//! `probe`: what this kernel, process and device support for io_uring, each feature *tried*
//! rather than inferred from the kernel version, plus warnings that apply the paper's guidelines
//! to what was found.
//!
//! [`probe`] is infallible: every failure is recorded in the report (`errors`, a check with
//! `ok: false`, or a `None` field).
//!
//! One file per concept: [`system`] (kernel and process facts), `ring` (a plain ring and its
//! registrations), `setup` (setup flags), [`opcodes`], [`nvme`] (NVMe namespaces),
//! [`read_path`] (inline or io-wq reads), `warnings` (the guidelines applied), `render` and
//! `table` (the text form), `format` (bytes and errnos as people read them).

mod format;
pub mod nvme;
pub mod opcodes;
pub mod read_path;
mod render;
mod ring;
mod setup;
pub mod system;
mod table;
mod warnings;

pub use nvme::NvmeNamespaceInfo;
pub use opcodes::opcode_name;
pub use read_path::ReadPathCheck;
pub use system::MemlockLimit;

use crate::device::{self, DeviceInfo};
use serde::Serialize;
use std::io;
use std::path::{Path, PathBuf};

/// One feature tried for real: a setup flag (a small ring built with it) or a registration.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct FeatureCheck {
    /// `SQPOLL`, `DEFER_TASKRUN`, `register_buffers`, ...
    pub name: &'static str,
    /// Flags it had to be combined with (`DEFER_TASKRUN` needs `SINGLE_ISSUER`).
    pub with: Option<&'static str>,
    /// Whether the kernel accepted it.
    pub ok: bool,
    /// Why the kernel refused it.
    pub error: Option<String>,
}

impl FeatureCheck {
    fn from_result(name: &'static str, with: Option<&'static str>, r: io::Result<()>) -> Self {
        FeatureCheck {
            name,
            with,
            ok: r.is_ok(),
            error: r.err().map(|e| format::describe_errno(&e)),
        }
    }
}

/// What [`probe`] found.
#[derive(Serialize, Debug, Clone)]
pub struct ProbeReport {
    /// `uname -r`.
    pub kernel_release: String,
    /// `/proc/sys/kernel/io_uring_disabled` (0 enabled, 1 only `io_uring_group`, 2 disabled);
    /// `None` on kernels without the knob.
    pub io_uring_disabled: Option<u32>,
    /// `/proc/sys/kernel/io_uring_group`, the group allowed when `io_uring_disabled` is 1.
    pub io_uring_group: Option<i64>,
    /// `RLIMIT_MEMLOCK` soft and hard limits; `None` if `getrlimit` failed.
    pub memlock_soft: Option<MemlockLimit>,
    /// The hard limit of `RLIMIT_MEMLOCK`, the most the soft limit may be raised to.
    pub memlock_hard: Option<MemlockLimit>,
    /// `CAP_IPC_LOCK` in the effective set: registered buffers are then not charged to memlock.
    pub cap_ipc_lock: Option<bool>,
    /// CPUs online in the machine.
    pub online_cpus: Option<u32>,
    /// CPUs this process may run on (affinity mask).
    pub allowed_cpus: Option<u32>,
    /// Whether a plain ring could be set up.
    pub uring_available: bool,
    /// Why `io_uring_setup` failed (EPERM when disabled, ENOSYS without io_uring).
    pub setup_error: Option<String>,
    /// `IORING_FEAT_*` the kernel reported for a plain ring.
    pub features: Vec<String>,
    /// Every opcode the kernel reports supported (`IORING_REGISTER_PROBE`).
    pub opcodes: Vec<String>,
    /// Well-known opcodes the kernel does not support.
    pub opcodes_missing: Vec<String>,
    /// Setup flags, each tried alone (or with the flag it requires).
    pub setup_flags: Vec<FeatureCheck>,
    /// Registrations tried on a plain ring: ring fd, a 4 KiB fixed buffer, a file.
    pub registrations: Vec<FeatureCheck>,
    /// The path asked about, and the block device under it.
    pub path: Option<PathBuf>,
    /// The block device under `path`; `None` without a path, or when it is on none.
    pub device: Option<DeviceInfo>,
    /// Why the device could not be inspected.
    pub device_error: Option<String>,
    /// All `/dev/ng*` NVMe generic char devices.
    pub nvme_char_devices: Vec<PathBuf>,
    /// Each of them described: namespace geometry (read from the device) and poll queues.
    pub nvme_namespaces: Vec<NvmeNamespaceInfo>,
    /// Whether O_DIRECT reads of `path` through io_uring complete inline or are punted to io-wq.
    pub read_path: Option<ReadPathCheck>,
    /// Probe steps that failed (the rest of the report is still valid).
    pub errors: Vec<String>,
    /// The paper's guidelines applied to what was found, one line each, naming what to do.
    pub warnings: Vec<String>,
}

/// Probes the kernel, this process and (with `path`) the block device under `path`.
pub fn probe(path: Option<&Path>) -> ProbeReport {
    let mut report = ProbeReport::of_this_process(path);
    ring::probe_ring(&mut report);
    report.setup_flags = setup::try_setup_flags();
    if let Some(p) = path {
        report.describe_path(p);
    }
    report.warnings = warnings::warnings(&report);
    report
}

impl ProbeReport {
    /// The kernel, process and NVMe facts, with the ring, path and warning fields still empty.
    fn of_this_process(path: Option<&Path>) -> ProbeReport {
        let mut errors = Vec::new();
        let kernel_release = system::kernel_release_or_unknown(&mut errors);
        let (memlock_soft, memlock_hard) = system::memlock_limits(&mut errors);
        let cap_ipc_lock = system::cap_ipc_lock(&mut errors);
        let nvme_char_devices = device::nvme_char_devices();
        let nvme_namespaces = nvme_char_devices
            .iter()
            .map(|p| NvmeNamespaceInfo::probe(p))
            .collect();
        ProbeReport {
            kernel_release,
            io_uring_disabled: ringdb_io::limits::io_uring_disabled(),
            io_uring_group: system::io_uring_group(),
            memlock_soft,
            memlock_hard,
            cap_ipc_lock,
            online_cpus: system::online_cpus(),
            allowed_cpus: system::allowed_cpus(),
            uring_available: false,
            setup_error: None,
            features: Vec::new(),
            opcodes: Vec::new(),
            opcodes_missing: Vec::new(),
            setup_flags: Vec::new(),
            registrations: Vec::new(),
            path: path.map(Path::to_path_buf),
            device: None,
            device_error: None,
            nvme_char_devices,
            nvme_namespaces,
            read_path: None,
            errors,
            warnings: Vec::new(),
        }
    }

    /// The block device under `path` and, where a ring works, how O_DIRECT reads of it complete.
    fn describe_path(&mut self, path: &Path) {
        // An NVMe generic char device sits on no block device of its own: describe its
        // namespace's block device (the same queues) instead.
        let block = ringdb_io::nvme_block_device_of_char(path).map(|b| Path::new("/dev").join(b));
        let path = block.as_deref().filter(|b| b.exists()).unwrap_or(path);
        match DeviceInfo::for_path(path) {
            Ok(d) => self.device = d,
            Err(e) => self.device_error = Some(e.to_string()),
        }
        if self.uring_available {
            match read_path::check_read_path(path) {
                Ok(c) => self.read_path = c,
                Err(e) => self.errors.push(format!("read-path check: {e}")),
            }
        }
    }

    /// The setup flag or registration called `name`, if it was tried.
    pub fn check(&self, name: &str) -> Option<&FeatureCheck> {
        self.setup_flags
            .iter()
            .chain(&self.registrations)
            .find(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(r: &ProbeReport, name: &str) -> bool {
        r.check(name).is_some_and(|c| c.ok)
    }

    #[test]
    fn probe_without_path() {
        let r = probe(None);
        assert!(!r.kernel_release.is_empty() && r.kernel_release != "unknown");
        assert!(r.uring_available, "{:?}", r.setup_error);
        for op in ["READ", "WRITE", "NOP", "READ_FIXED", "WRITE_FIXED"] {
            assert!(r.opcodes.iter().any(|o| o == op), "{op} missing: {r:?}");
        }
        assert!(ok(&r, "DEFER_TASKRUN"), "{r:?}");
        assert!(ok(&r, "COOP_TASKRUN"), "{r:?}");
        assert!(ok(&r, "SINGLE_ISSUER"), "{r:?}");
        assert!(ok(&r, "register_buffers (4 KiB)"), "{r:?}");
        assert!(ok(&r, "register_ring_fd"), "{r:?}");
        assert!(ok(&r, "register_files"), "{r:?}");
        assert!(r.device.is_none() && r.path.is_none());
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.setup_flags.len(), 10);
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"kernel_release\""));
    }

    #[test]
    fn probe_root_and_tmpfs() {
        let r = probe(Some(Path::new("/")));
        let d = r.device.as_ref().expect("/ is on a block device");
        assert!(d.logical_block_size >= 512);
        assert!(r
            .warnings
            .iter()
            .any(|w| w.contains("nr_requests") || w.contains("io_poll")));

        let t = probe(Some(Path::new("/dev/shm")));
        assert!(t.device.is_none() && t.device_error.is_none());
        assert!(
            t.warnings.iter().any(|w| w.contains("no block device")),
            "{:?}",
            t.warnings
        );

        let m = probe(Some(Path::new("/nonexistent/ringdb")));
        assert!(m.device_error.as_deref().unwrap().contains("no such file"));
    }
}
