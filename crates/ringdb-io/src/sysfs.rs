//! The few block-device queries the runtime needs to open targets and refuse switches: the
//! size and logical block size of an open block device (`BLKGETSIZE64`, `BLKSSZGET`), which
//! block device holds a path, and whether its queue polls (`queue/io_poll`, which decides
//! whether `IORING_SETUP_IOPOLL` works, see [`crate::target::check_iopoll`]).
//!
//! Everything else sysfs says about a device (queue limits, scheduler, rotational) only
//! matters for reports and lives in the lab (`ringdb-lab`), which builds on these queries.
//!
//! Parsing never panics: sysfs attributes that are missing or odd read as `None`.

use crate::error::{IoError, Result};
use std::fs;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Where `/sys/dev/block/MAJ:MIN` links live.
const SYS_DEV_BLOCK: &str = "/sys/dev/block";
/// Where `/sys/block/<disk>` directories live.
const SYS_BLOCK: &str = "/sys/block";

/// The block device that holds a path, located in sysfs: its number and its directory there.
/// What else the runtime needs (its name, its queue) is read from that directory on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDevice {
    /// Major device number.
    pub major: u32,
    /// Minor device number.
    pub minor: u32,
    /// The resolved sysfs directory of the device.
    pub sys_path: PathBuf,
}

impl BlockDevice {
    /// The block device holding `path`: a block device node describes itself (`st_rdev`),
    /// anything else the device of its filesystem (`st_dev`).
    ///
    /// `Ok(None)` when the path is on no block device (tmpfs, overlay, procfs: a device number
    /// with major 0, or one sysfs does not know). A missing path is [`IoError::NotFound`].
    pub fn for_path(path: &Path) -> Result<Option<BlockDevice>> {
        let meta = fs::metadata(path).map_err(|e| stat_error(path, e))?;
        let dev = if meta.file_type().is_block_device() {
            meta.rdev()
        } else {
            meta.dev()
        };
        Ok(Self::for_dev(dev_major(dev), dev_minor(dev)))
    }

    /// The block device with number `major:minor`, or `None` if sysfs does not list it.
    pub fn for_dev(major: u32, minor: u32) -> Option<BlockDevice> {
        if major == 0 {
            // Anonymous devices (tmpfs, overlay, proc, btrfs subvolumes): no block queue.
            return None;
        }
        let link = Path::new(SYS_DEV_BLOCK).join(format!("{major}:{minor}"));
        let sys_path = fs::canonicalize(&link).ok()?;
        Some(BlockDevice {
            major,
            minor,
            sys_path,
        })
    }

    /// Kernel name of the device (`vda`, `nvme0n1`, `nvme0n1p2`, `zram0`), `MAJ:MIN` if the
    /// directory has none.
    pub fn name(&self) -> String {
        file_name(&self.sys_path).unwrap_or_else(|| format!("{}:{}", self.major, self.minor))
    }

    /// Whether the device is a partition of a disk.
    pub fn is_partition(&self) -> bool {
        self.sys_path.join("partition").exists()
    }

    /// For a partition, the name of the whole disk it belongs to (whose `queue/` limits apply).
    pub fn disk(&self) -> Option<String> {
        self.disk_of_partition().and_then(file_name)
    }

    /// The `queue/` directory whose limits apply to the device (its disk's, for a partition).
    pub fn queue_dir(&self) -> PathBuf {
        self.disk_of_partition()
            .unwrap_or(&self.sys_path)
            .join("queue")
    }

    /// `queue/io_poll`: whether polled completions (`IORING_SETUP_IOPOLL`) work on the device.
    pub fn io_poll(&self) -> bool {
        read_bool(&self.queue_dir().join("io_poll")).unwrap_or(false)
    }

    /// The sysfs directory of the disk a partition belongs to; `None` for a whole disk.
    fn disk_of_partition(&self) -> Option<&Path> {
        self.sys_path.parent().filter(|_| self.is_partition())
    }
}

/// `queue/io_poll` of the disk named `disk` (`/sys/block/<disk>`), false when unreadable.
pub fn disk_io_poll(disk: &str) -> bool {
    read_bool(&Path::new(SYS_BLOCK).join(disk).join("queue/io_poll")).unwrap_or(false)
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
    u32::try_from(bs).ok().filter(|v| *v > 0).ok_or_else(|| {
        IoError::os(
            "ioctl(BLKSSZGET) on the block device",
            io::Error::other(format!("it reported a block size of {bs}")),
        )
    })
}

/// `_IOC_READ` in an ioctl number: the direction bits differ on powerpc, mips and sparc.
const IOC_READ: u64 = if cfg!(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
)) {
    2 << 29
} else {
    2 << 30
};
/// `_IOR(0x12, 114, size_t)`.
const BLKGETSIZE64: u64 = IOC_READ | ((std::mem::size_of::<usize>() as u64) << 16) | 0x1272;

/// A sysfs attribute's content without surrounding white space, `None` if unreadable.
pub fn read_trimmed(path: &Path) -> Option<String> {
    let s = fs::read_to_string(path).ok()?;
    Some(s.trim().to_string())
}

/// A sysfs attribute holding a number (`u32`, `u64`, ...), `None` if unreadable or not one.
pub fn read_number<T: FromStr>(path: &Path) -> Option<T> {
    read_trimmed(path)?.parse().ok()
}

/// A sysfs flag (`0` or `1`), `None` if unreadable or anything else.
pub fn read_bool(path: &Path) -> Option<bool> {
    match read_trimmed(path)?.as_str() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn root_is_on_a_block_device() {
        let d = BlockDevice::for_path(Path::new("/"))
            .expect("stat /")
            .expect("/ is on a block device here");
        assert!(d.major > 0);
        assert!(!d.name().is_empty());
        assert_eq!(d.is_partition(), d.disk().is_some(), "{d:?}");
        assert!(d.queue_dir().ends_with("queue"), "{d:?}");
    }

    #[test]
    fn tmpfs_is_on_no_block_device() {
        assert!(BlockDevice::for_path(Path::new("/dev/shm"))
            .expect("stat /dev/shm")
            .is_none());
        assert!(BlockDevice::for_path(Path::new("/proc/self"))
            .expect("stat /proc/self")
            .is_none());
    }

    #[test]
    fn missing_path_is_not_found() {
        let err = BlockDevice::for_path(Path::new("/nonexistent/ringdb/xyz")).unwrap_err();
        assert!(matches!(err, IoError::NotFound { .. }), "{err}");
    }

    #[test]
    fn a_block_device_node_is_its_own_device_and_answers_the_ioctls() {
        let Some(root) = BlockDevice::for_path(Path::new("/")).unwrap() else {
            return;
        };
        let node = Path::new("/dev").join(root.name());
        let Ok(Some(d)) = BlockDevice::for_path(&node) else {
            return;
        };
        assert_eq!((d.major, d.minor), (root.major, root.minor));
        assert_eq!(d.io_poll(), root.io_poll());
        if let Ok(f) = fs::File::open(&node) {
            assert!(block_device_size(f.as_raw_fd()).unwrap() > 0);
            assert!(logical_block_size_of_fd(f.as_raw_fd()).unwrap() >= 512);
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
    fn odd_sysfs_content_reads_as_none() {
        let dir = std::env::temp_dir().join(format!("ringdb-sysfs-test-{}", std::process::id()));
        let q = dir.join("fake0").join("queue");
        fs::create_dir_all(&q).unwrap();
        fs::write(q.join("nr_requests"), "-5").unwrap();
        fs::write(q.join("io_poll"), "").unwrap();
        fs::write(dir.join("fake0").join("size"), "99999999999999999999999").unwrap();
        let d = BlockDevice {
            major: 1,
            minor: 2,
            sys_path: dir.join("fake0"),
        };
        assert_eq!(d.name(), "fake0");
        assert!(!d.is_partition() && d.disk().is_none());
        assert!(!d.io_poll());
        assert_eq!(read_number::<u32>(&q.join("nr_requests")), None);
        assert_eq!(read_number::<u64>(&dir.join("fake0").join("size")), None);
        assert_eq!(read_number::<u64>(&dir.join("fake0").join("queue")), None);
        assert_eq!(read_bool(&q.join("missing")), None);
        assert!(!disk_io_poll("no-such-disk"));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn dev_number_decoding() {
        // 254:0 as glibc encodes it, and a large minor.
        assert_eq!((dev_major(0xfe00), dev_minor(0xfe00)), (254, 0));
        let dev: u64 = (259 << 8) | 0x12 | (0x345 << 12 << 8);
        assert_eq!(dev_major(dev), 259);
        assert_eq!(dev_minor(dev), 0x12 | (0x345 << 8));
    }
}
