//! The storage target the storage microbenchmarks share: how many of its bytes to use, making
//! a missing or short file ready, and describing what it sits on for the notes.
//!
//! Every benchmark reads and writes whole 4 KiB blocks with `O_DIRECT`, so the sizes here are
//! rounded down to [`BS`]; a note that compares a figure with the paper must say what the
//! target was (a file on a virtio disk, zram, tmpfs), which is what the two descriptions do.

use super::MicroOpts;
use crate::error::{BenchError, BenchSetting, Result};
use crate::rawio::fill_file;
use ringdb_io::IoError;
use ringdb_io::{PathKind, Target, TargetOptions};
use ringdb_lab::device::DeviceInfo;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// Every storage request of these microbenchmarks moves one 4 KiB block.
pub(super) const BS: u64 = 4096;

/// Whether `path` is a block device (false when it cannot be read).
fn is_block_device(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false)
}

/// Bytes of `path` to use: `size`, but no more than a block device holds, in whole 4 KiB blocks.
pub(super) fn usable_size(path: &Path, size: u64) -> Result<u64> {
    let size = if is_block_device(path) {
        let t = Target::open(
            path,
            TargetOptions {
                direct: false,
                write: false,
                create: false,
            },
        )?;
        size.min(t.size)
    } else {
        size
    };
    Ok(size - size % BS)
}

/// Checks the target and makes it usable: a missing or short regular file is created and
/// filled (as every storage microbenchmark does); returns the bytes to use, a multiple of 4 KiB.
pub(super) fn prepare_target(opts: &MicroOpts, who: &'static str) -> Result<u64> {
    let path = opts.target.as_path();
    let size = usable_size(path, opts.size)?;
    if size < BS {
        return Err(BenchError::TooSmall {
            setting: BenchSetting::Size,
            value: opts.size,
            min: BS,
            needed_by: who,
        });
    }
    create_or_fill(path, size, opts.progress)?;
    let t = open_direct_read(path)?;
    t.check_aligned("block size", BS)?;
    let size = size.min(t.size - t.size % BS);
    if size < BS {
        return Err(BenchError::TargetTooSmall {
            path: path.to_path_buf(),
            size_bytes: t.size,
            needed_bytes: BS,
            needed_by: who,
        });
    }
    Ok(size)
}

/// Opens the existing target `path` for `O_DIRECT` reads.
pub(super) fn open_direct_read(path: &Path) -> Result<Target> {
    Ok(Target::open(
        path,
        TargetOptions {
            direct: true,
            write: false,
            create: false,
        },
    )?)
}

/// Creates `path` when it is missing (its directory must exist, and no name among device
/// nodes is created: [`PathKind::MissingDevice`]) or fills a regular file shorter than
/// `size`; refuses anything that is neither a regular file nor a block device.
fn create_or_fill(path: &Path, size: u64, progress: bool) -> Result<()> {
    match PathKind::of(path) {
        PathKind::Creatable => fill_file(path, size, progress)?,
        PathKind::MissingDevice | PathKind::MissingParent => {
            return Err(IoError::NotFound {
                path: path.to_path_buf(),
            }
            .into())
        }
        PathKind::Directory => {
            return Err(IoError::IsDirectory {
                path: path.to_path_buf(),
            }
            .into())
        }
        PathKind::RegularFile => {
            let len = std::fs::metadata(path).map_or(0, |m| m.len());
            if len < size {
                fill_file(path, size, progress)?;
            }
        }
        PathKind::BlockDevice => {}
        _ => {
            return Err(BenchError::UnsupportedTarget {
                path: path.to_path_buf(),
            })
        }
    }
    Ok(())
}

/// What the target sits on, in a few words: "file on vda, scheduler mq-deadline, virtio-blk",
/// "block device zram0, zram: bio-based, in-memory", "file on no block device".
pub(super) fn describe_device(path: &Path) -> String {
    let what = if is_block_device(path) {
        "block device"
    } else {
        "file on"
    };
    match DeviceInfo::for_path(path) {
        Ok(Some(d)) => {
            let mut s = format!("{what} {}", d.name);
            if let Some(sched) = &d.scheduler {
                s.push_str(&format!(", scheduler {sched}"));
            }
            if d.name.starts_with("zram") {
                s.push_str(", zram: bio-based, in-memory");
            } else if d.name.starts_with("vd") {
                s.push_str(", virtio-blk");
            }
            s
        }
        Ok(None) => "file on no block device (tmpfs or similar)".into(),
        Err(_) => "device unknown".into(),
    }
}

/// One sentence on the target, for the notes of the multi-threaded benchmarks: "target X is a
/// file on vda (whole disk, io_poll no)".
pub(super) fn describe_target(path: &Path) -> String {
    let kind = match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => "block device",
        Ok(_) => "file",
        Err(_) => "path",
    };
    match DeviceInfo::for_path(path) {
        Ok(Some(d)) => format!(
            "target {} is a {kind} on {} ({}{}, io_poll {})",
            path.display(),
            d.name,
            d.disk.as_deref().unwrap_or("whole disk"),
            if d.rotational { ", rotational" } else { "" },
            if d.io_poll { "yes" } else { "no" },
        ),
        Ok(None) => format!(
            "target {} is a {kind} on no block device (tmpfs or similar: no DMA, no device queue)",
            path.display()
        ),
        Err(e) => format!("target {}: {e}", path.display()),
    }
}
