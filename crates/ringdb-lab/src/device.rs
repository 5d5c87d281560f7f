//! The block device under a path as a report describes it: the queue limits, scheduler and
//! NVMe nodes sysfs lists, on top of the runtime's own location of the device
//! ([`ringdb_io::sysfs::BlockDevice`]).
//!
//! The queue limits matter for io_uring (paper Sec. 3.6, "Large blocks can backfire"): requests
//! larger than `max_hw_sectors_kb` and batches larger than `nr_requests` fall back to io-wq
//! worker threads; `io_poll` decides whether `IORING_SETUP_IOPOLL` works on the device.
//!
//! Parsing never panics: sysfs attributes that are missing or odd become defaults or `None`.

use ringdb_io::sysfs::{read_bool, read_number, read_trimmed, BlockDevice};
use ringdb_io::Result;
use serde::Serialize;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// What the kernel reports about the block device that holds a path.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Kernel name of the device holding the path (`vda`, `nvme0n1`, `nvme0n1p2`, `zram0`).
    pub name: String,
    /// For a partition, the whole disk it belongs to (whose `queue/` limits apply).
    pub disk: Option<String>,
    /// Major device number.
    pub major: u32,
    /// Minor device number.
    pub minor: u32,
    /// Whether the device is a partition of a disk.
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
    /// Most scatter-gather segments one request may have.
    pub max_segments: Option<u32>,
    /// `queue/io_poll`: whether polled completions (`IORING_SETUP_IOPOLL`) work on this device.
    pub io_poll: bool,
    /// `nvme.poll_queues` module parameter, for NVMe devices when readable.
    pub poll_queues_hint: Option<u32>,
    /// `queue/rotational`: the device says it is a spinning disk.
    pub rotational: bool,
    /// Capacity in bytes (0 if unknown).
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
    /// with major 0, or one sysfs does not know). A missing path is
    /// [`ringdb_io::IoError::NotFound`].
    pub fn for_path(path: &Path) -> Result<Option<DeviceInfo>> {
        Ok(BlockDevice::for_path(path)?.map(|d| Self::describe(&d)))
    }

    /// The block device with number `major:minor`, or `None` if sysfs does not list it.
    pub fn for_dev(major: u32, minor: u32) -> Option<DeviceInfo> {
        BlockDevice::for_dev(major, minor).map(|d| Self::describe(&d))
    }

    /// Describes a located device from its sysfs directories (tolerates any missing file).
    pub fn describe(device: &BlockDevice) -> DeviceInfo {
        let queue = device.queue_dir();
        let q_u32 = |attr: &str| -> Option<u32> { read_number(&queue.join(attr)) };
        let logical_block_size = q_u32("logical_block_size")
            .filter(|v| *v > 0)
            .unwrap_or(512);
        let name = device.name();
        let disk = device.disk();
        let disk_name = disk.as_deref().unwrap_or(&name);
        DeviceInfo {
            nvme_char_device: nvme_char_device_for(disk_name),
            poll_queues_hint: nvme_poll_queues_hint(disk_name),
            dev_node: block_device_node(&name),
            name,
            disk,
            major: device.major,
            minor: device.minor,
            is_partition: device.is_partition(),
            sys_path: device.sys_path.clone(),
            logical_block_size,
            physical_block_size: q_u32("physical_block_size")
                .filter(|v| *v > 0)
                .unwrap_or(logical_block_size),
            nr_requests: q_u32("nr_requests"),
            max_hw_sectors_kb: q_u32("max_hw_sectors_kb"),
            max_sectors_kb: q_u32("max_sectors_kb"),
            max_segments: q_u32("max_segments"),
            io_poll: device.io_poll(),
            rotational: read_bool(&queue.join("rotational")).unwrap_or(false),
            // `size` is in 512-byte sectors regardless of the logical block size.
            size_bytes: read_number::<u64>(&device.sys_path.join("size"))
                .unwrap_or(0)
                .saturating_mul(512),
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

/// `nvme.poll_queues` (`/sys/module/nvme/parameters/poll_queues`), the poll queues the NVMe
/// driver was loaded with; `None` when unreadable.
pub fn nvme_poll_queues() -> Option<u32> {
    read_number(Path::new("/sys/module/nvme/parameters/poll_queues"))
}

/// [`nvme_poll_queues`] for an NVMe disk, `None` for any other.
fn nvme_poll_queues_hint(disk: &str) -> Option<u32> {
    disk.starts_with("nvme").then(nvme_poll_queues).flatten()
}

/// `/dev/<name>` if it exists and is a block device.
fn block_device_node(name: &str) -> Option<PathBuf> {
    Some(Path::new("/dev").join(name)).filter(|p| {
        fs::metadata(p)
            .map(|m| m.file_type().is_block_device())
            .unwrap_or(false)
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use ringdb_io::sysfs::{block_device_size, logical_block_size_of_fd};
    use ringdb_io::IoError;
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
    fn no_block_device_and_missing_paths_are_told_apart() {
        for p in ["/dev/shm", "/proc/self"] {
            assert_eq!(
                DeviceInfo::for_path(Path::new(p)).expect("stat"),
                None,
                "{p}"
            );
        }
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
    fn odd_sysfs_content_does_not_panic() {
        let dir = std::env::temp_dir().join(format!("ringdb-device-test-{}", std::process::id()));
        let q = dir.join("fake0").join("queue");
        fs::create_dir_all(&q).unwrap();
        fs::write(q.join("logical_block_size"), "garbage\n").unwrap();
        fs::write(q.join("nr_requests"), "-5").unwrap();
        fs::write(q.join("io_poll"), "").unwrap();
        fs::write(q.join("scheduler"), "[unterminated").unwrap();
        fs::write(dir.join("fake0").join("size"), "99999999999999999999999").unwrap();
        let fake = |sys_path: PathBuf, major, minor| BlockDevice {
            major,
            minor,
            sys_path,
        };
        let d = DeviceInfo::describe(&fake(dir.join("fake0"), 1, 2));
        assert_eq!(d.name, "fake0");
        assert_eq!(d.logical_block_size, 512);
        assert_eq!(d.physical_block_size, 512);
        assert_eq!(d.nr_requests, None);
        assert!(!d.io_poll);
        assert_eq!(d.scheduler, None);
        assert_eq!(d.size_bytes, 0);
        let empty = DeviceInfo::describe(&fake(PathBuf::from("/"), 9, 9));
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
    fn nvme_char_device_names() {
        assert_eq!(nvme_char_device_for("vda"), None);
        assert_eq!(nvme_char_device_for("nvme0c0n1"), None);
        assert_eq!(nvme_char_device_for("nvmen"), None);
        for p in nvme_char_devices() {
            assert!(p.to_string_lossy().starts_with("/dev/ng"));
        }
    }
}
