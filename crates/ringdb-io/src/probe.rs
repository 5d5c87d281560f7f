//! `probe`: what this kernel, process and device support for io_uring, each feature *tried*
//! rather than inferred from the kernel version, plus warnings that apply the paper's guidelines
//! to what was found.
//!
//! [`probe`] is infallible: every failure is recorded in the report (`errors`, a check with
//! `ok: false`, or a `None` field).

use crate::device::{self, DeviceInfo};
use io_uring::{cqueue, squeue, IoUring, Probe};
use serde::{Serialize, Serializer};
use std::fmt::{self, Write as _};
use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Bit of `CAP_IPC_LOCK` in the capability masks of `/proc/self/status`.
const CAP_IPC_LOCK: u32 = 14;
/// Entries of the small rings built to try a setup flag.
const TRY_ENTRIES: u32 = 8;
/// Width at which the opcode list wraps in [`ProbeReport::render_table`].
const WRAP: usize = 88;

/// An `RLIMIT_MEMLOCK` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemlockLimit {
    Bytes(u64),
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

/// One feature tried for real: a setup flag (a small ring built with it) or a registration.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct FeatureCheck {
    /// `SQPOLL`, `DEFER_TASKRUN`, `register_buffers`, ...
    pub name: &'static str,
    /// Flags it had to be combined with (`DEFER_TASKRUN` needs `SINGLE_ISSUER`).
    pub with: Option<&'static str>,
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
            error: r.err().map(|e| describe_errno(&e)),
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
    pub memlock_hard: Option<MemlockLimit>,
    /// `CAP_IPC_LOCK` in the effective set: registered buffers are then not charged to memlock.
    pub cap_ipc_lock: Option<bool>,
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
    let mut errors = Vec::new();

    let kernel_release = kernel_release().unwrap_or_else(|e| {
        errors.push(format!("uname: {e}"));
        "unknown".to_string()
    });
    let (memlock_soft, memlock_hard) = match read_memlock() {
        Ok((s, h)) => (
            Some(MemlockLimit::from_option(s)),
            Some(MemlockLimit::from_option(h)),
        ),
        Err(e) => {
            errors.push(format!("getrlimit(RLIMIT_MEMLOCK): {e}"));
            (None, None)
        }
    };
    let cap_ipc_lock = has_effective_cap(CAP_IPC_LOCK);
    if cap_ipc_lock.is_none() {
        errors.push("could not read CapEff from /proc/self/status".into());
    }

    let mut report = ProbeReport {
        kernel_release,
        io_uring_disabled: io_uring_disabled(),
        io_uring_group: read_trimmed("/proc/sys/kernel/io_uring_group")
            .and_then(|s| s.parse().ok()),
        memlock_soft,
        memlock_hard,
        cap_ipc_lock,
        online_cpus: online_cpus(),
        allowed_cpus: std::thread::available_parallelism()
            .ok()
            .and_then(|n| u32::try_from(n.get()).ok()),
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
        nvme_char_devices: device::nvme_char_devices(),
        nvme_namespaces: device::nvme_char_devices()
            .iter()
            .map(|p| NvmeNamespaceInfo::probe(p))
            .collect(),
        read_path: None,
        errors,
        warnings: Vec::new(),
    };

    probe_ring(&mut report);
    report.setup_flags = try_setup_flags();

    if let Some(p) = path {
        // An NVMe generic char device sits on no block device of its own: describe its
        // namespace's block device (the same queues) instead.
        let block = crate::target::nvme_block_device_of_char(p).map(|b| Path::new("/dev").join(b));
        let p = block.as_deref().filter(|b| b.exists()).unwrap_or(p);
        match DeviceInfo::for_path(p) {
            Ok(d) => report.device = d,
            Err(e) => report.device_error = Some(e.to_string()),
        }
        if report.uring_available {
            match check_read_path(p) {
                Ok(c) => report.read_path = c,
                Err(e) => report.errors.push(format!("read-path check: {e}")),
            }
        }
    }

    report.warnings = warnings(&report);
    report
}

/// An NVMe generic char device (`/dev/ngXnY`): the target of `uring-passthrough`.
#[derive(Clone, Debug, Serialize)]
pub struct NvmeNamespaceInfo {
    pub path: PathBuf,
    /// The namespace's block device (`/dev/nvmeXnY`), which shares its queues.
    pub block_device: Option<PathBuf>,
    /// Namespace id, LBA size and capacity from an Identify Namespace (needs the right to
    /// open the device; `error` says why not).
    pub nsid: Option<u32>,
    pub lba_size: Option<u32>,
    pub lba_count: Option<u64>,
    pub capacity_bytes: Option<u64>,
    /// `queue/io_poll` of the block device: whether IOPOLL works (passthrough included).
    pub io_poll: bool,
    /// `/sys/module/nvme/parameters/poll_queues`.
    pub poll_queues: Option<u32>,
    pub error: Option<String>,
}

impl NvmeNamespaceInfo {
    pub fn probe(path: &Path) -> NvmeNamespaceInfo {
        let block = crate::target::nvme_block_device_of_char(path);
        let io_poll = block.as_ref().is_some_and(|b| {
            read_trimmed(Path::new("/sys/block").join(b).join("queue/io_poll")).as_deref()
                == Some("1")
        });
        let mut info = NvmeNamespaceInfo {
            path: path.to_path_buf(),
            block_device: block
                .map(|b| Path::new("/dev").join(b))
                .filter(|b| b.exists()),
            nsid: None,
            lba_size: None,
            lba_count: None,
            capacity_bytes: None,
            io_poll,
            poll_queues: read_trimmed("/sys/module/nvme/parameters/poll_queues")
                .and_then(|s| s.parse().ok()),
            error: None,
        };
        let geometry = fs::File::open(path)
            .map_err(|e| format!("open {}: {e}", path.display()))
            .and_then(|f| crate::engine::nvme_geometry(f.as_raw_fd()).map_err(|e| e.to_string()));
        match geometry {
            Ok(g) => {
                info.nsid = Some(g.nsid);
                info.lba_size = Some(g.lba_size);
                info.lba_count = Some(g.lba_count);
                info.capacity_bytes = Some(g.capacity());
            }
            Err(e) => info.error = Some(e),
        }
        info
    }

    /// One line: geometry, block device, poll queues.
    pub fn summary(&self) -> String {
        let geo = match (
            self.nsid,
            self.lba_size,
            self.lba_count,
            self.capacity_bytes,
        ) {
            (Some(ns), Some(l), Some(n), Some(c)) => {
                format!("namespace {ns}: {n} LBAs of {l} B = {}", human_bytes(c))
            }
            _ => format!(
                "geometry unknown ({})",
                self.error.as_deref().unwrap_or("not read")
            ),
        };
        let block = self
            .block_device
            .as_ref()
            .map_or("-".to_string(), |b| b.display().to_string());
        let polls = match self.poll_queues {
            Some(q) => format!("nvme.poll_queues={q}"),
            None => "nvme.poll_queues unknown".into(),
        };
        format!(
            "{geo}; block device {block}; io_poll {} ({polls})",
            if self.io_poll { "yes" } else { "no" }
        )
    }
}

use crate::limits::read_memlock;
pub use crate::limits::{io_uring_disabled, memlock_limit};

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

fn online_cpus() -> Option<u32> {
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

fn read_trimmed(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Sets up a plain ring: availability, features, supported opcodes, registrations.
fn probe_ring(report: &mut ProbeReport) {
    let ring = match IoUring::new(TRY_ENTRIES) {
        Ok(r) => r,
        Err(e) => {
            report.setup_error = Some(describe_errno(&e));
            return;
        }
    };
    report.uring_available = true;
    report.features = ring_features(&ring);

    let mut pr = Probe::new();
    match ring.submitter().register_probe(&mut pr) {
        Ok(()) => {
            for op in 0..=u8::MAX {
                if pr.is_supported(op) {
                    report.opcodes.push(opcode_name(op));
                }
            }
            report.opcodes_missing = (0..=u8::MAX)
                .filter(|op| !pr.is_supported(*op))
                .filter_map(known_opcode_name)
                .map(str::to_string)
                .collect();
        }
        Err(e) => report
            .errors
            .push(format!("IORING_REGISTER_PROBE: {}", describe_errno(&e))),
    }

    report.registrations = try_registrations();
}

fn ring_features(ring: &IoUring) -> Vec<String> {
    let p = ring.params();
    let all = [
        ("SINGLE_MMAP", p.is_feature_single_mmap()),
        ("NODROP", p.is_feature_nodrop()),
        ("SUBMIT_STABLE", p.is_feature_submit_stable()),
        ("RW_CUR_POS", p.is_feature_rw_cur_pos()),
        ("CUR_PERSONALITY", p.is_feature_cur_personality()),
        ("FAST_POLL", p.is_feature_fast_poll()),
        ("POLL_32BITS", p.is_feature_poll_32bits()),
        ("SQPOLL_NONFIXED", p.is_feature_sqpoll_nonfixed()),
        ("EXT_ARG", p.is_feature_ext_arg()),
        ("NATIVE_WORKERS", p.is_feature_native_workers()),
        ("RSRC_TAGS", p.is_feature_resource_tagging()),
        ("CQE_SKIP", p.is_feature_skip_cqe_on_success()),
        ("LINKED_FILE", p.is_feature_linked_file()),
        ("RECVSEND_BUNDLE", p.is_feature_recvsend_bundle()),
        ("MIN_TIMEOUT", p.is_feature_min_timeout()),
        ("NO_IOWAIT", p.is_feature_no_iowait()),
    ];
    all.iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| n.to_string())
        .collect()
}

/// Each registration on its own fresh ring, so that one failure cannot hide another.
fn try_registrations() -> Vec<FeatureCheck> {
    let ring_fd = IoUring::new(TRY_ENTRIES).and_then(|ring| {
        let mut sub = ring.submitter();
        sub.register_ring_fd()
    });

    // Declared before the ring so that it outlives the registration (the ring drops first).
    let buf = vec![0u8; 4096];
    let buffers = IoUring::new(TRY_ENTRIES).and_then(|ring| {
        let iov = [libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        }];
        // SAFETY: the iovec describes `buf`, which stays allocated and unmoved until after
        // `ring` (and with it the registration) is dropped at the end of this closure; nothing
        // is submitted, so the kernel never writes into it.
        unsafe { ring.submitter().register_buffers(&iov) }
    });

    let files = fs::File::open("/dev/null").and_then(|f| {
        let ring = IoUring::new(TRY_ENTRIES)?;
        ring.submitter().register_files(&[f.as_raw_fd()])
    });

    vec![
        FeatureCheck::from_result("register_ring_fd", None, ring_fd),
        FeatureCheck::from_result("register_buffers (4 KiB)", None, buffers),
        FeatureCheck::from_result("register_files", None, files),
    ]
}

/// Builds a small ring with each setup flag (and only what it requires).
fn try_setup_flags() -> Vec<FeatureCheck> {
    type Plain = IoUring<squeue::Entry, cqueue::Entry>;
    let build = |f: &dyn Fn(&mut io_uring::Builder) -> &mut io_uring::Builder| {
        let mut b = Plain::builder();
        f(&mut b);
        b.build(TRY_ENTRIES).map(drop)
    };
    let check = FeatureCheck::from_result;
    vec![
        check("SQPOLL", None, build(&|b| b.setup_sqpoll(10))),
        check("IOPOLL", None, build(&|b| b.setup_iopoll())),
        check("COOP_TASKRUN", None, build(&|b| b.setup_coop_taskrun())),
        check(
            "TASKRUN_FLAG",
            Some("COOP_TASKRUN"),
            build(&|b| b.setup_coop_taskrun().setup_taskrun_flag()),
        ),
        check("SINGLE_ISSUER", None, build(&|b| b.setup_single_issuer())),
        check(
            "DEFER_TASKRUN",
            Some("SINGLE_ISSUER"),
            build(&|b| b.setup_single_issuer().setup_defer_taskrun()),
        ),
        check(
            "SQE128",
            None,
            IoUring::<squeue::Entry128, cqueue::Entry>::builder()
                .build(TRY_ENTRIES)
                .map(drop),
        ),
        check(
            "CQE32",
            None,
            IoUring::<squeue::Entry, cqueue::Entry32>::builder()
                .build(TRY_ENTRIES)
                .map(drop),
        ),
        check("NO_SQARRAY", None, build(&|b| b.setup_no_sqarray())),
        check("SUBMIT_ALL", None, build(&|b| b.setup_submit_all())),
    ]
}

/// io_uring opcode numbers (`IORING_OP_*`) this build knows by name.
const OPCODE_NAMES: &[&str] = &[
    "NOP",
    "READV",
    "WRITEV",
    "FSYNC",
    "READ_FIXED",
    "WRITE_FIXED",
    "POLL_ADD",
    "POLL_REMOVE",
    "SYNC_FILE_RANGE",
    "SENDMSG",
    "RECVMSG",
    "TIMEOUT",
    "TIMEOUT_REMOVE",
    "ACCEPT",
    "ASYNC_CANCEL",
    "LINK_TIMEOUT",
    "CONNECT",
    "FALLOCATE",
    "OPENAT",
    "CLOSE",
    "FILES_UPDATE",
    "STATX",
    "READ",
    "WRITE",
    "FADVISE",
    "MADVISE",
    "SEND",
    "RECV",
    "OPENAT2",
    "EPOLL_CTL",
    "SPLICE",
    "PROVIDE_BUFFERS",
    "REMOVE_BUFFERS",
    "TEE",
    "SHUTDOWN",
    "RENAMEAT",
    "UNLINKAT",
    "MKDIRAT",
    "SYMLINKAT",
    "LINKAT",
    "MSG_RING",
    "FSETXATTR",
    "SETXATTR",
    "FGETXATTR",
    "GETXATTR",
    "SOCKET",
    "URING_CMD",
    "SEND_ZC",
    "SENDMSG_ZC",
    "READ_MULTISHOT",
    "WAITID",
    "FUTEX_WAIT",
    "FUTEX_WAKE",
    "FUTEX_WAITV",
    "FIXED_FD_INSTALL",
    "FTRUNCATE",
    "BIND",
    "LISTEN",
    "RECV_ZC",
    "EPOLL_WAIT",
    "READV_FIXED",
    "WRITEV_FIXED",
    "PIPE",
];

fn known_opcode_name(op: u8) -> Option<&'static str> {
    OPCODE_NAMES.get(usize::from(op)).copied()
}

/// The `IORING_OP_*` name of `op` without the prefix, or `op<N>` for numbers unknown here.
pub fn opcode_name(op: u8) -> String {
    known_opcode_name(op).map_or_else(|| format!("op{op}"), str::to_string)
}

/// "EINVAL: Invalid argument (os error 22)".
fn describe_errno(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EPERM) => "EPERM",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::ENOMEM) => "ENOMEM",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::EFAULT) => "EFAULT",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::EEXIST) => "EEXIST",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENXIO) => "ENXIO",
        _ => return e.to_string(),
    };
    format!("{name}: {e}")
}

fn human_bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if b >= size && b.is_multiple_of(size) {
            return format!("{} {unit}", b / size);
        }
    }
    for (unit, size) in UNITS {
        if b >= size {
            return format!("{:.1} {unit}", b as f64 / size as f64);
        }
    }
    format!("{b} B")
}

fn flag<'a>(r: &'a ProbeReport, name: &str) -> Option<&'a FeatureCheck> {
    r.setup_flags
        .iter()
        .chain(&r.registrations)
        .find(|c| c.name == name)
}

fn refused(r: &ProbeReport, name: &str) -> Option<String> {
    flag(r, name)
        .filter(|c| !c.ok)
        .map(|c| c.error.clone().unwrap_or_else(|| "refused".into()))
}

/// The paper's (and seeds') guidelines applied to a report: one line each, naming what to do.
fn warnings(r: &ProbeReport) -> Vec<String> {
    let mut w = Vec::new();

    // io_uring itself.
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

    // Locked memory for registered buffers.
    if r.cap_ipc_lock != Some(true) {
        if let Some(MemlockLimit::Bytes(b)) = r.memlock_soft {
            w.push(format!(
                "RLIMIT_MEMLOCK is {} and no CAP_IPC_LOCK: registered buffers (--fixedbufs) above {} in total fail with ENOMEM; raise it (ulimit -l, LimitMEMLOCK=) or keep the fixed pool below it",
                human_bytes(b),
                human_bytes(b)
            ));
        }
    }
    if r.uring_available {
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

        // Task-work modes (paper Sec. 2.1, "Avoiding preemptions").
        if let Some(e) = refused(r, "DEFER_TASKRUN") {
            if flag(r, "COOP_TASKRUN").is_some_and(|c| c.ok) {
                w.push(format!(
                    "DEFER_TASKRUN is refused ({e}): use --setup coop (COOP_TASKRUN) instead"
                ));
            } else {
                w.push(format!(
                    "DEFER_TASKRUN and COOP_TASKRUN are refused ({e}): use --setup default"
                ));
            }
        }

        // Polling.
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

        // Passthrough.
        if !r.opcodes.is_empty() && !r.opcodes.iter().any(|o| o == "URING_CMD") {
            w.push("this kernel lacks URING_CMD: NVMe passthrough is unavailable; use the block-device path".into());
        }
    }

    // The device.
    if let Some(e) = &r.device_error {
        w.push(format!("cannot inspect the device: {e}"));
    }
    match (&r.path, &r.device) {
        (Some(p), None) if r.device_error.is_none() => w.push(format!(
            "{} is on no block device (tmpfs/overlay): no direct device I/O there (O_DIRECT is refused, or on tmpfs only copies memory), buffered I/O only; put data on a block-backed filesystem or a block device",
            p.display()
        )),
        (_, Some(d)) => device_warnings(r, d, &mut w),
        (None, None)
            if r.nvme_char_devices.is_empty() && r.opcodes.iter().any(|o| o == "URING_CMD") =>
        {
            w.push("no NVMe generic char devices (/dev/ng*): io_uring NVMe passthrough is unavailable here; use the block-device path".into());
        }
        _ => {}
    }
    w
}

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
    if d.nvme_char_device.is_none() && r.opcodes.iter().any(|o| o == "URING_CMD") {
        w.push(format!(
            "{disk} has no NVMe generic char device (/dev/ngXnY): io_uring NVMe passthrough (URING_CMD) is unavailable for it; use the block-device path"
        ));
    }
}

impl ProbeReport {
    /// A readable, aligned table: kernel, io_uring, setup flags, opcodes, device, warnings.
    pub fn render_table(&self) -> String {
        let mut t = Table::default();
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();

        t.section("kernel");
        t.row("release", &self.kernel_release);
        t.row(
            "online cpus",
            &format!(
                "{} (usable by this process: {})",
                opt(self.online_cpus.map(|n| n.to_string())),
                opt(self.allowed_cpus.map(|n| n.to_string()))
            ),
        );
        t.row(
            "memlock (soft/hard)",
            &format!(
                "{} / {}",
                opt(self.memlock_soft.map(|l| l.to_string())),
                opt(self.memlock_hard.map(|l| l.to_string()))
            ),
        );
        t.row("CAP_IPC_LOCK", &opt(self.cap_ipc_lock.map(yes_no)));

        t.section("io_uring");
        t.row(
            "io_uring_disabled",
            &self
                .io_uring_disabled
                .map_or_else(|| "absent (enabled)".into(), |v| v.to_string()),
        );
        t.row(
            "available",
            &match &self.setup_error {
                Some(e) => format!("no ({e})"),
                None => yes_no(self.uring_available),
            },
        );
        if !self.features.is_empty() {
            t.wrapped("features", &self.features);
        }
        for c in &self.registrations {
            t.check(c);
        }

        t.section("setup flags");
        for c in &self.setup_flags {
            match &self.device {
                // The ring builds anywhere; the device decides whether polled I/O works.
                Some(d) if c.name == "IOPOLL" && c.ok && !d.io_poll => t.row(
                    c.name,
                    &format!("ok (ring only: I/O on {} fails, io_poll=0)", d.name),
                ),
                _ => t.check(c),
            }
        }

        t.section("opcodes");
        t.wrapped(
            &format!("supported ({})", self.opcodes.len()),
            &self.opcodes,
        );
        if !self.opcodes_missing.is_empty() {
            t.wrapped("missing", &self.opcodes_missing);
        }

        t.section("device");
        if let Some(p) = &self.path {
            t.row("path", &p.display().to_string());
        }
        match (&self.device, &self.device_error) {
            (Some(d), _) => {
                let name = match &d.disk {
                    Some(disk) => format!("{} (partition of {disk})", d.name),
                    None => d.name.clone(),
                };
                t.row("name", &format!("{name}  {}:{}", d.major, d.minor));
                t.row("size", &human_bytes(d.size_bytes));
                t.row(
                    "block size (log/phys)",
                    &format!("{} / {}", d.logical_block_size, d.physical_block_size),
                );
                let n = |v: Option<u32>| opt(v.map(|v| v.to_string()));
                t.row("nr_requests", &n(d.nr_requests));
                t.row(
                    "max_sectors_kb (hw)",
                    &format!("{} ({})", n(d.max_sectors_kb), n(d.max_hw_sectors_kb)),
                );
                t.row("max_segments", &n(d.max_segments));
                t.row(
                    "io_poll",
                    &match d.poll_queues_hint {
                        Some(q) => format!("{} (nvme.poll_queues={q})", yes_no(d.io_poll)),
                        None => yes_no(d.io_poll),
                    },
                );
                t.row("rotational", &yes_no(d.rotational));
                t.row("scheduler", &opt(d.scheduler.clone()));
                t.row(
                    "nvme char device",
                    &opt(d.nvme_char_device.as_ref().map(|p| p.display().to_string())),
                );
            }
            (None, Some(e)) => t.row("error", e),
            (None, None) if self.path.is_some() => t.row("block device", "none (tmpfs/overlay?)"),
            (None, None) => t.row("block device", "- (no path given)"),
        }
        if self.nvme_namespaces.is_empty() {
            t.row("/dev/ng*", "none");
        }
        for ns in &self.nvme_namespaces {
            t.row(&ns.path.display().to_string(), &ns.summary());
        }
        if let Some(c) = &self.read_path {
            let v = if c.punted_to_iowq {
                format!(
                    "punted to io-wq ({} workers for {} reads)",
                    c.iowq_workers, c.reads
                )
            } else {
                format!("inline ({} reads, no io-wq worker)", c.reads)
            };
            t.row("io_uring O_DIRECT reads", &v);
        }

        if !self.errors.is_empty() {
            t.section("errors");
            for e in &self.errors {
                t.line(&format!("  - {e}"));
            }
        }
        t.section("warnings");
        if self.warnings.is_empty() {
            t.line("  (none)");
        }
        for w in &self.warnings {
            t.line(&format!("  - {w}"));
        }
        t.out
    }
}

/// A tiny aligned key/value writer.
#[derive(Default)]
struct Table {
    out: String,
}

impl Table {
    const KEY: usize = 30;

    fn section(&mut self, name: &str) {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        let _ = writeln!(self.out, "{name}");
    }

    fn line(&mut self, s: &str) {
        let _ = writeln!(self.out, "{s}");
    }

    fn row(&mut self, key: &str, value: &str) {
        let _ = writeln!(self.out, "  {key:<w$} {value}", w = Self::KEY);
    }

    fn check(&mut self, c: &FeatureCheck) {
        let key = match c.with {
            Some(w) => format!("{} (+{w})", c.name),
            None => c.name.to_string(),
        };
        let value = match (&c.ok, &c.error) {
            (true, _) => "ok".to_string(),
            (false, Some(e)) => format!("refused: {e}"),
            (false, None) => "refused".to_string(),
        };
        self.row(&key, &value);
    }

    /// `items` joined by spaces, wrapped under the value column.
    fn wrapped(&mut self, key: &str, items: &[String]) {
        let indent = 2 + Self::KEY + 1;
        let mut lines: Vec<String> = vec![String::new()];
        for item in items {
            match lines.last_mut() {
                Some(cur) if cur.is_empty() || indent + cur.len() + 1 + item.len() <= WRAP => {
                    if !cur.is_empty() {
                        cur.push(' ');
                    }
                    cur.push_str(item);
                }
                _ => lines.push(item.clone()),
            }
        }
        let mut first = true;
        for l in lines {
            if first {
                self.row(key, if l.is_empty() { "-" } else { &l });
                first = false;
            } else {
                let _ = writeln!(self.out, "{:indent$}{l}", "");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(r: &ProbeReport, name: &str) -> bool {
        flag(r, name).is_some_and(|c| c.ok)
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

    #[test]
    fn render_table_has_sections() {
        let r = probe(Some(Path::new("/")));
        let s = r.render_table();
        for section in [
            "kernel",
            "io_uring",
            "setup flags",
            "opcodes",
            "device",
            "warnings",
        ] {
            assert!(
                s.lines().any(|l| l == section),
                "section {section} missing:\n{s}"
            );
        }
        assert!(s.contains("DEFER_TASKRUN (+SINGLE_ISSUER)"));
        for l in s.lines().filter(|l| !l.starts_with("  - ")) {
            assert!(l.len() <= WRAP + 40, "long line: {l}");
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(
            io_uring_disabled(),
            read_trimmed("/proc/sys/kernel/io_uring_disabled").and_then(|s| s.parse().ok())
        );
        let (soft, hard) = memlock_limit();
        if let (Some(s), Some(h)) = (soft, hard) {
            assert!(s <= h);
        }
        assert_eq!(opcode_name(22), "READ");
        assert_eq!(opcode_name(46), "URING_CMD");
        assert_eq!(opcode_name(58), "RECV_ZC");
        assert_eq!(opcode_name(200), "op200");
        assert_eq!(human_bytes(8 << 20), "8 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(
            serde_json::to_string(&MemlockLimit::Unlimited).unwrap(),
            "\"unlimited\""
        );
        assert_eq!(serde_json::to_string(&MemlockLimit::Bytes(5)).unwrap(), "5");
    }

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

/// The outcome of reading a target through io_uring: inline (the device or filesystem takes
/// `IOCB_NOWAIT`) or punted to io-wq workers (paper Sec. 2.2: a worker hand-off per I/O).
#[derive(Clone, Debug, Serialize)]
pub struct ReadPathCheck {
    pub reads: u32,
    /// io-wq workers that appeared while the reads ran.
    pub iowq_workers: u32,
    pub punted_to_iowq: bool,
}

/// Reads a few 4 KiB blocks of `path` with O_DIRECT through a plain ring and watches for io-wq
/// workers. `Ok(None)` when the path cannot be read that way (too short, O_DIRECT refused).
fn check_read_path(path: &Path) -> crate::Result<Option<ReadPathCheck>> {
    use crate::target::{Target, TargetOptions};
    use crate::{open_engine, EngineKind, FileId, FixedBufferPool, IoConfig, IoRequest};
    const READS: usize = 8;
    const BS: usize = 4096;
    let target = match Target::open(
        path,
        TargetOptions {
            direct: true,
            write: false,
            create: false,
        },
    ) {
        Ok(t) if t.size >= (READS * BS) as u64 => t,
        _ => return Ok(None),
    };
    let before = crate::iowq::iowq_workers_now();
    let pool = FixedBufferPool::new(READS, BS)?;
    let cfg = IoConfig {
        queue_depth: READS as u32,
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut engine = open_engine(&cfg, &[target.fd()], None)?;
    for i in 0..READS {
        let req = IoRequest::read(FileId(0), (i * BS) as u64, pool.ptr(i), BS as u32, i as u64);
        // SAFETY: `pool` outlives `engine` (declared first, dropped last, and the engine
        // drains before it is dropped); each read has its own buffer.
        unsafe { engine.push(&req)? };
    }
    let mut done = Vec::new();
    while done.len() < READS {
        engine.submit(1)?;
        engine.reap(&mut done);
    }
    // Workers linger for seconds after their work, so they are still there to be counted.
    let workers = crate::iowq::iowq_workers_now().saturating_sub(before) as u32;
    drop(engine);
    Ok(Some(ReadPathCheck {
        reads: READS as u32,
        iowq_workers: workers,
        punted_to_iowq: workers > 0,
    }))
}

#[cfg(test)]
mod read_path_tests {
    use super::*;

    #[test]
    fn reads_on_ext4_complete_inline_and_short_files_are_skipped() {
        let dir = std::env::temp_dir();
        let p = dir.join(format!("ringdb-read-path-{}.dat", std::process::id()));
        std::fs::write(&p, vec![7u8; 64 * 1024]).unwrap();
        let long = check_read_path(&p);
        std::fs::write(&p, vec![7u8; 512]).unwrap();
        let short = check_read_path(&p);
        let _ = std::fs::remove_file(&p);
        // Short file: nothing to read, no verdict.
        assert!(short.unwrap().is_none());
        // ext4 (this machine's /tmp) takes IOCB_NOWAIT: O_DIRECT reads complete inline. A
        // filesystem without O_DIRECT yields None; anything else must be a verdict.
        if let Some(c) = long.unwrap() {
            assert_eq!(c.reads, 8);
            assert_eq!(c.punted_to_iowq, c.iowq_workers > 0);
        }
    }
}
