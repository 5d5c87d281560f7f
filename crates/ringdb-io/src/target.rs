//! Opening the file, block device or NVMe generic char device (`/dev/ngXnY`, for
//! `uring-passthrough`) that I/O goes to, with the checks O_DIRECT needs and a clear refusal
//! for each way it can go wrong.

use crate::error::{IoError, Result, Switch};
use crate::path_kind::PathKind;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How to open a target.
#[derive(Clone, Copy, Debug)]
pub struct TargetOptions {
    /// `O_DIRECT`: bypass the page cache.
    pub direct: bool,
    /// Open for writing too (needed for writes and for filling a file).
    pub write: bool,
    /// Create a regular file when missing.
    pub create: bool,
}

/// An open file, block device or NVMe generic char device.
#[derive(Debug)]
pub struct Target {
    file: File,
    path: PathBuf,
    /// A device of fixed capacity that is never created, extended or truncated: a block
    /// device, or an NVMe generic char device (then `nvme` is set too).
    pub is_block_device: bool,
    /// The namespace behind an NVMe generic char device (`/dev/ngXnY`).
    pub nvme: Option<crate::engine::NvmeGeometry>,
    /// Whether it was opened with `O_DIRECT`.
    pub direct: bool,
    /// Current size in bytes (file length, or the device's capacity).
    pub size: u64,
    /// Offsets, lengths and buffer addresses must be multiples of this under O_DIRECT.
    pub align: u32,
}

impl Target {
    /// Opens `path` as `opts` say, refusing what I/O on it would fail at mid-run: a missing
    /// path that may not be created, a directory, O_DIRECT where it is not supported, a char
    /// device that is not an NVMe namespace.
    pub fn open(path: &Path, opts: TargetOptions) -> Result<Target> {
        let kind = TargetKind::of(path, opts)?;
        let file = kind
            .open_options(opts)
            .open(path)
            .map_err(|e| open_error(path, opts, e))?;
        if kind.is_char_device {
            return Self::nvme_namespace(file, path, opts);
        }
        let (size, align) = if kind.is_block_device {
            let fd = file.as_raw_fd();
            (
                crate::sysfs::block_device_size(fd)?,
                crate::sysfs::logical_block_size_of_fd(fd)?,
            )
        } else {
            let len = file
                .metadata()
                .map_err(|e| IoError::os(format!("stat {}", path.display()), e))?
                .len();
            (len, dio_offset_align(file.as_raw_fd()).unwrap_or(512))
        };
        Ok(Target {
            file,
            path: path.to_path_buf(),
            is_block_device: kind.is_block_device,
            nvme: None,
            direct: opts.direct,
            size,
            align: if opts.direct { align.max(1) } else { 1 },
        })
    }

    /// An NVMe generic char device: only a namespace's carries block I/O (passthrough).
    fn nvme_namespace(file: File, path: &Path, opts: TargetOptions) -> Result<Target> {
        let geometry = crate::engine::nvme_geometry(file.as_raw_fd())?;
        Ok(Target {
            file,
            path: path.to_path_buf(),
            is_block_device: true,
            nvme: Some(geometry),
            direct: opts.direct,
            size: geometry.capacity(),
            // NVMe commands address whole logical blocks, direct or not.
            align: geometry.lba_size,
        })
    }

    /// The open file's descriptor.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Refuses a block size or offset that O_DIRECT would reject with EINVAL mid-run.
    pub fn check_aligned(&self, what: &'static str, value: u64) -> Result<()> {
        if !value.is_multiple_of(self.align as u64) {
            return Err(IoError::Misaligned {
                what,
                value,
                block: self.align,
            });
        }
        Ok(())
    }

    /// Re-reads the size (after a fill).
    pub fn refresh_size(&mut self) -> Result<()> {
        if !self.is_block_device {
            self.size = self
                .file
                .metadata()
                .map_err(|e| IoError::os(format!("stat {}", self.path.display()), e))?
                .len();
        }
        Ok(())
    }
}

/// What a path names, as far as opening it goes.
struct TargetKind {
    is_block_device: bool,
    is_char_device: bool,
}

impl TargetKind {
    /// What `path` is, by `stat` ([`PathKind`]); refuses a missing path that may not be
    /// created (creation was not asked for, its directory is missing, or it is a name among
    /// device nodes, where a mistyped device must not become a file), and a directory.
    fn of(path: &Path, opts: TargetOptions) -> Result<TargetKind> {
        let kind = PathKind::of(path);
        let creatable = opts.create && kind == PathKind::Creatable;
        if !kind.exists() && !creatable {
            return Err(IoError::NotFound {
                path: path.to_path_buf(),
            });
        }
        if kind == PathKind::Directory {
            return Err(IoError::IsDirectory {
                path: path.to_path_buf(),
            });
        }
        Ok(TargetKind {
            is_block_device: kind == PathKind::BlockDevice,
            is_char_device: kind == PathKind::CharDevice,
        })
    }

    /// How to open it: devices are never created, and a char device has no page cache to
    /// bypass (open refuses O_DIRECT on it).
    fn open_options(&self, opts: TargetOptions) -> OpenOptions {
        let mut options = OpenOptions::new();
        options.read(true).write(opts.write);
        if opts.create && !self.is_block_device && !self.is_char_device {
            options.create(true);
        }
        if opts.direct && !self.is_char_device {
            options.custom_flags(libc::O_DIRECT);
        }
        options
    }
}

/// Refuses IOPOLL up front for a target whose device has no poll queues: the kernel would
/// otherwise fail every request with EOPNOTSUPP mid-run.
pub fn check_iopoll(path: &Path) -> Result<()> {
    if let Some(block) = nvme_block_device_of_char(path) {
        // An NVMe generic char device polls on the queues of its namespace's block device.
        if crate::sysfs::disk_io_poll(&block) {
            return Ok(());
        }
        return Err(IoError::Unsupported {
            switch: Switch::Iopoll,
            reason: format!(
                "{} is namespace {block}, which has no poll queues (queue/io_poll = 0); boot with nvme.poll_queues=N",
                path.display()
            ),
        });
    }
    match crate::sysfs::BlockDevice::for_path(path)? {
        Some(d) if d.io_poll() => Ok(()),
        Some(d) => Err(IoError::Unsupported {
            switch: Switch::Iopoll,
            reason: format!(
                "{} is on {}, which has no poll queues (queue/io_poll = 0); use an NVMe device whose driver has poll queues (nvme.poll_queues=N)",
                path.display(),
                d.name()
            ),
        }),
        None => Err(IoError::Unsupported {
            switch: Switch::Iopoll,
            reason: format!(
                "{} is not on a block device, so it has no poll queues",
                path.display()
            ),
        }),
    }
}

/// `nvmeXnY` for a path that is the NVMe generic char device `ngXnY` (after symlinks): the
/// block device of the same namespace.
pub fn nvme_block_device_of_char(path: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    if !std::fs::metadata(&real).ok()?.file_type().is_char_device() {
        return None;
    }
    nvme_block_name(real.file_name()?.to_str()?)
}

/// `ngXnY` -> `nvmeXnY`; anything else -> `None`.
fn nvme_block_name(char_name: &str) -> Option<String> {
    let rest = char_name.strip_prefix("ng")?;
    let (ctrl, ns) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(ctrl) && digits(ns)).then(|| format!("nvme{ctrl}n{ns}"))
}

fn open_error(path: &Path, opts: TargetOptions, e: io::Error) -> IoError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => IoError::NotFound {
            path: path.to_path_buf(),
        },
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => IoError::PermissionDenied {
            path: path.to_path_buf(),
            source: e,
        },
        Some(libc::EINVAL) if opts.direct => IoError::DirectUnsupported {
            path: path.to_path_buf(),
        },
        _ => IoError::os(format!("open {}", path.display()), e),
    }
}

/// The file offset alignment O_DIRECT needs, from statx(STATX_DIOALIGN) (Linux 6.1+).
fn dio_offset_align(fd: RawFd) -> Option<u32> {
    const STATX_DIOALIGN: u32 = 0x2000;
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: fd is open, the empty path with AT_EMPTY_PATH names it, and stx is writable.
    let ret = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            STATX_DIOALIGN,
            stx.as_mut_ptr(),
        )
    };
    if ret != 0 {
        return None;
    }
    // SAFETY: statx succeeded and filled the struct (zeroed before in any case).
    let stx = unsafe { stx.assume_init() };
    (stx.stx_mask & STATX_DIOALIGN != 0 && stx.stx_dio_offset_align > 0)
        .then_some(stx.stx_dio_offset_align)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_char_names_map_to_their_block_device() {
        assert_eq!(nvme_block_name("ng0n1").as_deref(), Some("nvme0n1"));
        assert_eq!(nvme_block_name("ng12n3").as_deref(), Some("nvme12n3"));
        assert_eq!(nvme_block_name("ngn1"), None);
        assert_eq!(nvme_block_name("null"), None);
        assert_eq!(nvme_block_name("nvme0n1"), None);
        assert_eq!(nvme_block_name("ng0c1n1"), None);
    }
}
