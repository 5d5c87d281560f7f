//! NVMe generic char devices (`/dev/ngXnY`), the targets of `uring-passthrough`, as the report
//! describes them: the namespace's geometry (an Identify Namespace through the runtime's
//! passthrough code), its block device and whether it polls.

use super::format::human_bytes;
use crate::device::nvme_poll_queues;
use ringdb_io::sysfs::disk_io_poll;
use serde::Serialize;
use std::fs;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// An NVMe generic char device (`/dev/ngXnY`): the target of `uring-passthrough`.
#[derive(Clone, Debug, Serialize)]
pub struct NvmeNamespaceInfo {
    /// The char device (`/dev/ngXnY`).
    pub path: PathBuf,
    /// The namespace's block device (`/dev/nvmeXnY`), which shares its queues.
    pub block_device: Option<PathBuf>,
    /// Namespace id, from an Identify Namespace (needs the right to open the device; `error`
    /// says why not).
    pub nsid: Option<u32>,
    /// Bytes per logical block, from the same Identify Namespace.
    pub lba_size: Option<u32>,
    /// Logical blocks in the namespace.
    pub lba_count: Option<u64>,
    /// `lba_size * lba_count`.
    pub capacity_bytes: Option<u64>,
    /// `queue/io_poll` of the block device: whether IOPOLL works (passthrough included).
    pub io_poll: bool,
    /// `/sys/module/nvme/parameters/poll_queues`.
    pub poll_queues: Option<u32>,
    /// Why the geometry could not be read.
    pub error: Option<String>,
}

impl NvmeNamespaceInfo {
    /// Describes the char device at `path`; never fails (what cannot be read stays `None`).
    pub fn probe(path: &Path) -> NvmeNamespaceInfo {
        let block = ringdb_io::nvme_block_device_of_char(path);
        let mut info = NvmeNamespaceInfo {
            path: path.to_path_buf(),
            io_poll: block.as_deref().is_some_and(disk_io_poll),
            block_device: block
                .map(|b| Path::new("/dev").join(b))
                .filter(|b| b.exists()),
            nsid: None,
            lba_size: None,
            lba_count: None,
            capacity_bytes: None,
            poll_queues: nvme_poll_queues(),
            error: None,
        };
        let geometry = fs::File::open(path)
            .map_err(|e| format!("open {}: {e}", path.display()))
            .and_then(|f| ringdb_io::nvme_geometry(f.as_raw_fd()).map_err(|e| e.to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_describes_a_char_device_that_is_not_nvme_without_failing() {
        let info = NvmeNamespaceInfo::probe(Path::new("/dev/null"));
        assert!(info.lba_size.is_none() && info.capacity_bytes.is_none());
        assert!(!info.io_poll && info.block_device.is_none());
        let e = info.error.as_deref().expect("why the geometry is unknown");
        assert!(e.contains("not an NVMe namespace"), "{e}");
        assert!(info.summary().contains("geometry unknown"));
    }
}
