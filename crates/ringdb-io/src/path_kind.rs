//! What a path names, found by asking the file system (`stat`, and for a missing path its
//! parent directory and the file system that holds it), never by its spelling.
//!
//! Why: paths were once classified by their names ("anything under `/dev` is a device"), which
//! refused a database on `/dev/shm` (tmpfs, a file system like any other) with "no such file or
//! device". What protects a user from turning a mistyped device name into a regular file is the
//! kind of directory the new file would go into: device nodes live in `devtmpfs`, where only the
//! kernel makes entries, so a missing path there is a missing device, wherever it is mounted.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// The file system type name of the kernel's device-node file system.
const DEVICE_FILE_SYSTEM: &str = "devtmpfs";
/// The most lines of `/proc/self/mountinfo` read (a system has a few hundred mounts at most).
const MOUNT_LINES_MAX: usize = 100_000;

/// What a path is, as far as opening it for I/O goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathKind {
    /// An existing regular file.
    RegularFile,
    /// An existing directory.
    Directory,
    /// An existing block device.
    BlockDevice,
    /// An existing char device.
    CharDevice,
    /// Something else that exists (a socket, a FIFO).
    Other,
    /// Missing, in an existing directory where a regular file may be created.
    Creatable,
    /// Missing, in a directory of device nodes (`devtmpfs`), where only the kernel makes
    /// entries: a device that is not there (or a mistyped name), never a file to create.
    MissingDevice,
    /// Missing, and so is its parent directory (or the parent is not a directory), outside
    /// the device nodes.
    MissingParent,
}

impl PathKind {
    /// Classifies `path` by `stat` (following symbolic links); a missing path by its parent.
    pub fn of(path: &Path) -> PathKind {
        match std::fs::metadata(path) {
            Ok(meta) => Self::existing(&meta),
            Err(_) => Self::missing(path),
        }
    }

    /// Whether the path exists.
    pub fn exists(self) -> bool {
        !matches!(
            self,
            PathKind::Creatable | PathKind::MissingDevice | PathKind::MissingParent
        )
    }

    fn existing(meta: &std::fs::Metadata) -> PathKind {
        let file_type = meta.file_type();
        if file_type.is_file() {
            PathKind::RegularFile
        } else if file_type.is_dir() {
            PathKind::Directory
        } else if file_type.is_block_device() {
            PathKind::BlockDevice
        } else if file_type.is_char_device() {
            PathKind::CharDevice
        } else {
            PathKind::Other
        }
    }

    /// A missing path, by its nearest existing ancestor: among device nodes, a missing
    /// device (however deep: no directory is made there either); else creatable when its
    /// parent is that ancestor and a directory.
    fn missing(path: &Path) -> PathKind {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        // Ancestors are finite: the walk ends at the root at the latest.
        let nearest = parent
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .find_map(|a| std::fs::metadata(a).ok().map(|m| (a, m)));
        let Some((ancestor, meta)) = nearest else {
            return PathKind::MissingParent;
        };
        if file_system_type(meta.dev()).as_deref() == Some(DEVICE_FILE_SYSTEM) {
            return PathKind::MissingDevice;
        }
        if ancestor == parent && meta.is_dir() {
            PathKind::Creatable
        } else {
            PathKind::MissingParent
        }
    }
}

/// The type name (`ext4`, `tmpfs`, `devtmpfs`) of the mounted file system whose device number
/// is `device` (`st_dev`), from `/proc/self/mountinfo`; `None` when that cannot be read.
fn file_system_type(device: u64) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let wanted = format!("{}:{}", libc::major(device), libc::minor(device));
    text.lines()
        .take(MOUNT_LINES_MAX)
        .find_map(|line| mount_type_if(line, &wanted))
}

/// The file system type of one mountinfo line when its `major:minor` (third field) is `wanted`.
/// The type is the first field after the ` - ` separator (optional fields come before it).
fn mount_type_if(line: &str, wanted: &str) -> Option<String> {
    let (mount, fs) = line.split_once(" - ")?;
    if mount.split(' ').nth(2)? != wanted {
        return None;
    }
    fs.split(' ').next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_the_type_of_their_device_only() {
        let line = "24 27 0:6 / /dev rw,relatime shared:2 - devtmpfs devtmpfs rw,size=1k";
        assert_eq!(mount_type_if(line, "0:6").as_deref(), Some("devtmpfs"));
        assert_eq!(mount_type_if(line, "0:60"), None);
        assert_eq!(mount_type_if("garbage", "0:6"), None);
    }

    #[test]
    fn existing_paths_are_classified_by_stat() {
        let dir = std::env::temp_dir();
        assert_eq!(PathKind::of(&dir), PathKind::Directory);
        assert_eq!(
            PathKind::of(Path::new("/proc/self/mountinfo")),
            PathKind::RegularFile
        );
        assert_eq!(PathKind::of(Path::new("/dev/null")), PathKind::CharDevice);
        assert!(PathKind::of(&dir).exists());
    }

    #[test]
    fn a_missing_path_is_classified_by_its_parent() {
        let dir = std::env::temp_dir().join(format!("path-kind-{}", std::process::id()));
        assert_eq!(PathKind::of(&dir.join("file")), PathKind::MissingParent);
        assert_eq!(PathKind::of(&dir), PathKind::Creatable);
        assert!(!PathKind::of(&dir).exists());
    }

    #[test]
    fn a_missing_name_among_device_nodes_is_a_missing_device() {
        let dev = Path::new("/dev");
        let Ok(meta) = std::fs::metadata(dev) else {
            eprintln!("skipped: no /dev here");
            return;
        };
        if file_system_type(meta.dev()).as_deref() != Some(DEVICE_FILE_SYSTEM) {
            eprintln!("skipped: /dev is not devtmpfs here");
            return;
        }
        let typo = dev.join(format!("nvme-typo-{}", std::process::id()));
        assert_eq!(PathKind::of(&typo), PathKind::MissingDevice);
        assert_eq!(PathKind::of(&typo.join("deeper")), PathKind::MissingDevice);
    }
}
