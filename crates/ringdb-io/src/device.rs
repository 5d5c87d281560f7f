//! The block device under a path, as sysfs describes it, plus the two block-device ioctls the
//! I/O layer needs (`BLKGETSIZE64`, `BLKSSZGET`).
//!
//! The queue limits matter for io_uring (paper Sec. 3.6, "Large blocks can backfire"): requests
//! larger than `max_hw_sectors_kb` and batches larger than `nr_requests` fall back to io-wq
//! worker threads; `io_poll` decides whether `IORING_SETUP_IOPOLL` works on the device.
//!
//! Parsing never panics: sysfs attributes that are missing or odd become defaults or `None`.

use crate::error::{IoError, Result};
use serde::Serialize;
use std::fs;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Where `/sys/dev/block/MAJ:MIN` links live.
const SYS_DEV_BLOCK: &str = "/sys/dev/block";

/// What the kernel reports about the block device that holds a path.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Kernel name of the device holding the path (`vda`, `nvme0n1`, `nvme0n1p2`, `zram0`).
    pub name: String,
    /// For a partition, the whole disk it belongs to (whose `queue/` limits apply).
    pub disk: Option<String>,
    pub major: u32,
    pub minor: u32,
    pub is_partition: bool,
    /// The resolved sysfs directory of the device.
    pub sys_path: PathBuf,
    /// `/dev/<name>` if that node exists.
    pub dev_node: Option<PathBuf>,
    /// Smallest unit O_DIRECT offsets and lengths must be aligned to (512 if unknown).
    pub logical_block_size: u32,
    /// The device's internal block size (the logical size if unknown).
    pub physical_block_size: u32,
    /// Requests the block layer queues per hardware queue; larger O_DIRECT batches go to io-wq.
    pub nr_requests: Option<u32>,
    /// Largest request the hardware (DMA) accepts; larger blocks fall back to io-wq workers.
    pub max_hw_sectors_kb: Option<u32>,
    /// Largest request the block layer builds before splitting (soft limit <= hardware limit).
    pub max_sectors_kb: Option<u32>,
    pub max_segments: Option<u32>,
    /// `queue/io_poll`: whether polled completions (`IORING_SETUP_IOPOLL`) work on this device.
    pub io_poll: bool,
    /// `nvme.poll_queues` module parameter, for NVMe devices when readable.
    pub poll_queues_hint: Option<u32>,
    pub rotational: bool,
    pub size_bytes: u64,
    /// The NVMe generic char device (`/dev/ngXnY`) for an `nvmeXnY` block device, if present:
    /// the target of io_uring passthrough (`URING_CMD`).
    pub nvme_char_device: Option<PathBuf>,
    /// The active I/O scheduler (`none`, `mq-deadline`, ...).
    pub scheduler: Option<String>,
}

impl DeviceInfo {
    /// The block device holding `path`: a block device node describes itself (`st_rdev`),
    /// anything else the device of its filesystem (`st_dev`).
    ///
    /// `Ok(None)` when the path is on no block device (tmpfs, overlay, procfs: a device number
    /// with major 0, or one sysfs does not know). A missing path is [`IoError::NotFound`].
    pub fn for_path(path: &Path) -> Result<Option<DeviceInfo>> {
        let meta = fs::metadata(path).map_err(|e| stat_error(path, e))?;
        let dev = if meta.file_type().is_block_device() {
            meta.rdev()
        } else {
            meta.dev()
        };
        Ok(Self::for_dev(dev_major(dev), dev_minor(dev)))
    }

    /// The block device with number `major:minor`, or `None` if sysfs does not list it.
    pub fn for_dev(major: u32, minor: u32) -> Option<DeviceInfo> {
        if major == 0 {
            // Anonymous devices (tmpfs, overlay, proc, btrfs subvolumes): no block queue.
            return None;
        }
        let link = Path::new(SYS_DEV_BLOCK).join(format!("{major}:{minor}"));
        let sys_path = fs::canonicalize(&link).ok()?;
        Some(Self::from_sys_dir(&sys_path, major, minor))
    }

    /// Builds the description from a device's sysfs directory (tolerates any missing file).
    fn from_sys_dir(sys_path: &Path, major: u32, minor: u32) -> DeviceInfo {
        let name = file_name(sys_path).unwrap_or_else(|| format!("{major}:{minor}"));
        let is_partition = sys_path.join("partition").exists();
        let (disk_dir, disk) = if is_partition {
            match sys_path.parent() {
                Some(p) => (p.to_path_buf(), file_name(p)),
                None => (sys_path.to_path_buf(), None),
            }
        } else {
            (sys_path.to_path_buf(), None)
        };
        let queue = disk_dir.join("queue");
        let q_u32 = |attr: &str| read_u32(&queue.join(attr));

        let logical_block_size = q_u32("logical_block_size")
            .filter(|v| *v > 0)
            .unwrap_or(512);
        let physical_block_size = q_u32("physical_block_size")
            .filter(|v| *v > 0)
            .unwrap_or(logical_block_size);
        // `size` is in 512-byte sectors regardless of the logical block size.
        let size_bytes = read_u64(&sys_path.join("size"))
            .unwrap_or(0)
            .saturating_mul(512);
        let disk_name = disk.clone().unwrap_or_else(|| name.clone());
        let is_nvme = disk_name.starts_with("nvme");
        let poll_queues_hint = if is_nvme {
            read_u32(Path::new("/sys/module/nvme/parameters/poll_queues"))
        } else {
            None
        };
        let dev_node = Some(Path::new("/dev").join(&name)).filter(|p| {
            fs::metadata(p)
                .map(|m| m.file_type().is_block_device())
                .unwrap_or(false)
        });

        DeviceInfo {
            nvme_char_device: nvme_char_device_for(&disk_name),
            name,
            disk,
            major,
            minor,
            is_partition,
            sys_path: sys_path.to_path_buf(),
            dev_node,
            logical_block_size,
            physical_block_size,
            nr_requests: q_u32("nr_requests"),
            max_hw_sectors_kb: q_u32("max_hw_sectors_kb"),
            max_sectors_kb: q_u32("max_sectors_kb"),
            max_segments: q_u32("max_segments"),
            io_poll: read_bool(&queue.join("io_poll")).unwrap_or(false),
            poll_queues_hint,
            rotational: read_bool(&queue.join("rotational")).unwrap_or(false),
            size_bytes,
            scheduler: read_trimmed(&queue.join("scheduler"))
                .as_deref()
                .and_then(active_scheduler),
        }
    }

    /// The request-size limit beyond which the block layer splits (the smaller of the soft and
    /// the hardware limit), in KiB.
    pub fn split_limit_kb(&self) -> Option<u32> {
        match (self.max_sectors_kb, self.max_hw_sectors_kb) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// All NVMe generic char devices (`/dev/ng*`), sorted; empty if there are none.
pub fn nvme_char_devices() -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir("/dev") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = dir
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("ng"))
        .map(|e| e.path())
        .filter(|p| is_char_device(p))
        .collect();
    out.sort();
    out
}

/// Size in bytes of the block device open as `fd` (`ioctl(BLKGETSIZE64)`).
pub fn block_device_size(fd: RawFd) -> Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes exactly one u64 through the pointer, which points at `size`,
    // a live local; an invalid fd only makes the call fail with EBADF/ENOTTY.
    let r = unsafe { libc::ioctl(fd, BLKGETSIZE64 as _, &mut size as *mut u64) };
    if r < 0 {
        return Err(IoError::os(
            "ioctl(BLKGETSIZE64) on the block device",
            io::Error::last_os_error(),
        ));
    }
    Ok(size)
}

/// Logical block size of the block device open as `fd` (`ioctl(BLKSSZGET)`): the alignment
/// O_DIRECT requires.
pub fn logical_block_size_of_fd(fd: RawFd) -> Result<u32> {
    let mut bs: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes exactly one int through the pointer, which points at `bs`, a
    // live local; an invalid fd only makes the call fail with EBADF/ENOTTY.
    let r = unsafe { libc::ioctl(fd, libc::BLKSSZGET as _, &mut bs as *mut libc::c_int) };
    if r < 0 {
        return Err(IoError::os(
            "ioctl(BLKSSZGET) on the block device",
            io::Error::last_os_error(),
        ));
    }
    u32::try_from(bs)
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| IoError::InvalidArg(format!("BLKSSZGET returned block size {bs}")))
}

/// `_IOR(0x12, 114, size_t)`: the direction bits differ on powerpc, mips and sparc.
#[cfg(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
))]
const BLKGETSIZE64: u64 = (2 << 29) | ((std::mem::size_of::<usize>() as u64) << 16) | 0x1272;
#[cfg(not(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
)))]
const BLKGETSIZE64: u64 = (2 << 30) | ((std::mem::size_of::<usize>() as u64) << 16) | 0x1272;

fn stat_error(path: &Path, e: io::Error) -> IoError {
    match e.kind() {
        io::ErrorKind::NotFound => IoError::NotFound {
            path: path.to_path_buf(),
        },
        io::ErrorKind::PermissionDenied => IoError::PermissionDenied {
            path: path.to_path_buf(),
            source: e,
        },
        _ => IoError::os(format!("stat {}", path.display()), e),
    }
}

/// glibc's `gnu_dev_major` encoding of a 64-bit `dev_t`.
fn dev_major(dev: u64) -> u32 {
    (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32
}

/// glibc's `gnu_dev_minor` encoding of a 64-bit `dev_t`.
fn dev_minor(dev: u64) -> u32 {
    ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32
}

fn file_name(p: &Path) -> Option<String> {
    p.file_name().map(|n| n.to_string_lossy().into_owned())
}

fn is_char_device(p: &Path) -> bool {
    fs::metadata(p)
        .map(|m| m.file_type().is_char_device())
        .unwrap_or(false)
}

/// `/dev/ngXnY` for a block device named `nvmeXnY`, if that char device exists.
fn nvme_char_device_for(disk: &str) -> Option<PathBuf> {
    let rest = disk.strip_prefix("nvme")?;
    let (ctrl, ns) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(ctrl) || !digits(ns) {
        // Hidden multipath paths (nvme0c0n1) and odd names have no generic node of this form.
        return None;
    }
    Some(PathBuf::from(format!("/dev/ng{ctrl}n{ns}"))).filter(|p| is_char_device(p))
}

/// The active scheduler from `queue/scheduler` ("none [mq-deadline] kyber" -> "mq-deadline";
/// a single unbracketed word, as some drivers print, is taken as is).
fn active_scheduler(s: &str) -> Option<String> {
    if let Some(start) = s.find('[') {
        let tail = &s[start + 1..];
        let end = tail.find(']')?;
        let name = tail[..end].trim();
        return (!name.is_empty()).then(|| name.to_string());
    }
    let mut words = s.split_whitespace();
    match (words.next(), words.next()) {
        (Some(one), None) => Some(one.to_string()),
        _ => None,
    }
}

fn read_trimmed(p: &Path) -> Option<String> {
    let s = fs::read_to_string(p).ok()?;
    Some(s.trim().to_string())
}

fn read_u64(p: &Path) -> Option<u64> {
    read_trimmed(p)?.parse().ok()
}

fn read_u32(p: &Path) -> Option<u32> {
    read_trimmed(p)?.parse().ok()
}

fn read_bool(p: &Path) -> Option<bool> {
    match read_trimmed(p)?.as_str() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn root_is_on_a_block_device() {
        let d = DeviceInfo::for_path(Path::new("/"))
            .expect("stat /")
            .expect("/ is on a block device here");
        assert!(d.logical_block_size >= 512, "{d:?}");
        assert!(d.physical_block_size >= d.logical_block_size, "{d:?}");
        assert!(d.major > 0);
        assert!(!d.name.is_empty());
        assert!(d.size_bytes > 0, "{d:?}");
    }

    #[test]
    fn tmpfs_is_on_no_block_device() {
        assert!(DeviceInfo::for_path(Path::new("/dev/shm"))
            .expect("stat /dev/shm")
            .is_none());
        assert!(DeviceInfo::for_path(Path::new("/proc/self"))
            .expect("stat /proc/self")
            .is_none());
    }

    #[test]
    fn missing_path_is_not_found() {
        let err = DeviceInfo::for_path(Path::new("/nonexistent/ringdb/xyz")).unwrap_err();
        assert!(matches!(err, IoError::NotFound { .. }), "{err}");
    }

    #[test]
    fn block_device_node_describes_itself() {
        let Some(root) = DeviceInfo::for_path(Path::new("/")).unwrap() else {
            return;
        };
        let Some(node) = root.dev_node.clone() else {
            return;
        };
        let d = DeviceInfo::for_path(&node).unwrap().expect("block node");
        assert_eq!((d.major, d.minor), (root.major, root.minor));
        if let Ok(f) = fs::File::open(&node) {
            assert_eq!(block_device_size(f.as_raw_fd()).unwrap(), d.size_bytes);
            assert_eq!(
                logical_block_size_of_fd(f.as_raw_fd()).unwrap(),
                d.logical_block_size
            );
        }
    }

    #[test]
    fn ioctls_on_a_regular_file_fail_cleanly() {
        let f = fs::File::open("/proc/self/status").unwrap();
        assert!(block_device_size(f.as_raw_fd()).is_err());
        assert!(logical_block_size_of_fd(f.as_raw_fd()).is_err());
        assert!(block_device_size(-1).is_err());
    }

    #[test]
    fn odd_sysfs_content_does_not_panic() {
        let dir = std::env::temp_dir().join(format!("ringdb-device-test-{}", std::process::id()));
        let q = dir.join("fake0").join("queue");
        fs::create_dir_all(&q).unwrap();
        fs::write(q.join("logical_block_size"), "garbage\n").unwrap();
        fs::write(q.join("nr_requests"), "-5").unwrap();
        fs::write(q.join("io_poll"), "").unwrap();
        fs::write(q.join("scheduler"), "[unterminated").unwrap();
        fs::write(dir.join("fake0").join("size"), "99999999999999999999999").unwrap();
        let d = DeviceInfo::from_sys_dir(&dir.join("fake0"), 1, 2);
        assert_eq!(d.name, "fake0");
        assert_eq!(d.logical_block_size, 512);
        assert_eq!(d.physical_block_size, 512);
        assert_eq!(d.nr_requests, None);
        assert!(!d.io_poll);
        assert_eq!(d.scheduler, None);
        assert_eq!(d.size_bytes, 0);
        let empty = DeviceInfo::from_sys_dir(Path::new("/"), 9, 9);
        assert_eq!(empty.logical_block_size, 512);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn scheduler_parsing() {
        assert_eq!(
            active_scheduler("none [mq-deadline] kyber bfq").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(
            active_scheduler("[none] mq-deadline").as_deref(),
            Some("none")
        );
        assert_eq!(active_scheduler("none").as_deref(), Some("none"));
        assert_eq!(active_scheduler("a b"), None);
        assert_eq!(active_scheduler("[]"), None);
        assert_eq!(active_scheduler(""), None);
    }

    #[test]
    fn dev_number_decoding() {
        // 254:0 as glibc encodes it, and a large minor.
        assert_eq!((dev_major(0xfe00), dev_minor(0xfe00)), (254, 0));
        let dev: u64 = (259 << 8) | 0x12 | (0x345 << 12 << 8);
        assert_eq!(dev_major(dev), 259);
        assert_eq!(dev_minor(dev), 0x12 | (0x345 << 8));
    }

    #[test]
    fn nvme_char_device_names() {
        assert_eq!(nvme_char_device_for("vda"), None);
        assert_eq!(nvme_char_device_for("nvme0c0n1"), None);
        assert_eq!(nvme_char_device_for("nvmen"), None);
        for p in nvme_char_devices() {
            assert!(p.to_string_lossy().starts_with("/dev/ng"));
        }
    }
}
