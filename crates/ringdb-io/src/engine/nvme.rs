//! NVMe commands as the kernel's passthrough interfaces take them: the 72-byte command layout
//! shared by `NVME_IOCTL_ADMIN_CMD` and `NVME_URING_CMD_IO`, and the namespace geometry read with
//! an admin Identify Namespace. Used by the `uring-passthrough` engine and by target checks.

use crate::error::{IoError, Result};
use std::io;
use std::os::fd::RawFd;
use std::path::PathBuf;

/// `_IO('N', 0x40)`: the namespace id behind an NVMe namespace node.
const NVME_IOCTL_ID: libc::c_ulong = 0x4E40;
/// `_IOWR('N', 0x41, struct nvme_passthru_cmd)` (72 bytes).
const NVME_IOCTL_ADMIN_CMD: libc::c_ulong = 0xC048_4E41;
/// `_IOWR('N', 0x80, struct nvme_uring_cmd)` (72 bytes): the `cmd_op` of an NVMe I/O command.
pub(crate) const NVME_URING_CMD_IO: u32 = 0xC048_4E80;

pub(crate) const NVME_CMD_FLUSH: u8 = 0x00;
pub(crate) const NVME_CMD_WRITE: u8 = 0x01;
pub(crate) const NVME_CMD_READ: u8 = 0x02;
const NVME_ADMIN_IDENTIFY: u8 = 0x06;
/// Identify CNS 0: the namespace data structure (4096 bytes).
const NVME_ID_CNS_NS: u32 = 0x00;
/// A Read or Write moves at most 65536 logical blocks (NLB is a 16-bit, 0-based count).
pub(crate) const MAX_BLOCKS_PER_CMD: u64 = 1 << 16;

/// `struct nvme_uring_cmd` and `struct nvme_passthru_cmd` from linux/nvme_ioctl.h; they share
/// this layout (the admin ioctl's last word is `result`, the uring command's is reserved).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct NvmeCmd {
    pub(crate) opcode: u8,
    pub(crate) flags: u8,
    pub(crate) rsvd1: u16,
    pub(crate) nsid: u32,
    pub(crate) cdw2: u32,
    pub(crate) cdw3: u32,
    pub(crate) metadata: u64,
    pub(crate) addr: u64,
    pub(crate) metadata_len: u32,
    pub(crate) data_len: u32,
    pub(crate) cdw10: u32,
    pub(crate) cdw11: u32,
    pub(crate) cdw12: u32,
    pub(crate) cdw13: u32,
    pub(crate) cdw14: u32,
    pub(crate) cdw15: u32,
    pub(crate) timeout_ms: u32,
    pub(crate) result: u32,
}

const _: () = assert!(std::mem::size_of::<NvmeCmd>() == 72);

impl NvmeCmd {
    pub(crate) fn to_bytes(self) -> [u8; 80] {
        let mut out = [0u8; 80];
        // SAFETY: NvmeCmd is repr(C), 72 bytes of plain integers without padding, so every
        // byte is initialised; it fits in the 80-byte command area.
        let bytes: [u8; 72] = unsafe { std::mem::transmute(self) };
        out[..72].copy_from_slice(&bytes);
        out
    }
}

/// An NVMe namespace as its generic char device reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvmeGeometry {
    /// The namespace id.
    pub nsid: u32,
    /// Logical block (LBA) size in bytes of the namespace's current format.
    pub lba_size: u32,
    /// Namespace size in logical blocks (`NSZE`).
    pub lba_count: u64,
}

impl NvmeGeometry {
    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.lba_count.saturating_mul(self.lba_size as u64)
    }
}

fn fd_path(fd: RawFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_else(|_| format!("fd {fd}").into())
}

fn not_nvme_char(path: &std::path::Path, what: String) -> IoError {
    IoError::NotNvmeNamespace {
        path: path.to_path_buf(),
        what,
    }
}

/// Reads the geometry of the NVMe namespace open as `fd` (`NVME_IOCTL_ID`, then an admin
/// Identify Namespace). Refuses, with a typed one-line error, anything that is not an NVMe
/// generic char device (including the namespace's block device).
pub fn nvme_geometry(fd: RawFd) -> Result<NvmeGeometry> {
    let path = fd_path(fd);
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: st is writable memory for one `struct stat`; a bad fd only fails with EBADF.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Err(IoError::os(
            format!("fstat {}", path.display()),
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fstat succeeded and filled the struct (zeroed before in any case).
    let mode = unsafe { st.assume_init() }.st_mode & libc::S_IFMT;
    if mode == libc::S_IFBLK {
        return Err(not_nvme_char(
            &path,
            "a block device, not a char device".into(),
        ));
    }
    if mode != libc::S_IFCHR {
        return Err(not_nvme_char(&path, "not a device".into()));
    }
    // SAFETY: NVME_IOCTL_ID takes no argument; other drivers answer ENOTTY or EINVAL.
    let nsid = unsafe { libc::ioctl(fd, NVME_IOCTL_ID as _) };
    if nsid <= 0 {
        return Err(not_nvme_char(
            &path,
            format!("not an NVMe namespace ({})", io::Error::last_os_error()),
        ));
    }
    let nsid = nsid as u32;
    let mut id = crate::buf::AlignedBuf::new(4096);
    let mut cmd = NvmeCmd {
        opcode: NVME_ADMIN_IDENTIFY,
        nsid,
        addr: id.as_mut_ptr() as u64,
        data_len: 4096,
        cdw10: NVME_ID_CNS_NS,
        ..NvmeCmd::default()
    };
    // SAFETY: cmd is a valid nvme_passthru_cmd; the ioctl is synchronous and writes at most
    // data_len (4096) bytes into `id`, which is 4096 bytes long and outlives the call.
    let ret = unsafe { libc::ioctl(fd, NVME_IOCTL_ADMIN_CMD as _, &mut cmd as *mut NvmeCmd) };
    if ret != 0 {
        let why = if ret < 0 {
            io::Error::last_os_error().to_string()
        } else {
            format!("NVMe status {ret:#x}")
        };
        return Err(IoError::os(
            format!("identify namespace {nsid} on {}", path.display()),
            io::Error::other(why),
        ));
    }
    parse_identify_ns(nsid, id.as_slice()).ok_or_else(|| IoError::NotNvmeNamespace {
        path: path.clone(),
        what: format!("identify namespace {nsid} reports no usable LBA format"),
    })
}

/// NSZE (bytes 0..8), FLBAS (byte 26) and the LBA format table (from byte 128) of an Identify
/// Namespace structure.
fn parse_identify_ns(nsid: u32, id: &[u8]) -> Option<NvmeGeometry> {
    let nsze = u64::from_le_bytes(id.get(0..8)?.try_into().ok()?);
    let flbas = *id.get(26)?;
    // Bits 3:0 pick the format; bits 6:5 extend the index beyond 16 formats.
    let index = (flbas & 0x0f) as usize | (((flbas >> 5) & 0x03) as usize) << 4;
    let lbads = *id.get(128 + 4 * index + 2)?;
    if !(9..=16).contains(&lbads) || nsze == 0 {
        return None;
    }
    Some(NvmeGeometry {
        nsid,
        lba_size: 1 << lbads,
        lba_count: nsze,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identify_namespace_parsing() {
        let mut id = vec![0u8; 4096];
        id[0..8].copy_from_slice(&(1u64 << 20).to_le_bytes());
        // Format 1 is current: 4 KiB blocks; format 0 is 512 bytes.
        id[26] = 1;
        id[128 + 2] = 9;
        id[128 + 4 + 2] = 12;
        let g = parse_identify_ns(1, &id).unwrap();
        assert_eq!(g.lba_size, 4096);
        assert_eq!(g.lba_count, 1 << 20);
        assert_eq!(g.capacity(), 4u64 << 30);
        id[26] = 0;
        assert_eq!(parse_identify_ns(1, &id).unwrap().lba_size, 512);
        id[128 + 2] = 0;
        assert!(parse_identify_ns(1, &id).is_none());
        assert!(parse_identify_ns(1, &id[..100]).is_none());
    }

    #[test]
    fn commands_have_the_kernel_layout() {
        let c = NvmeCmd {
            opcode: NVME_CMD_READ,
            nsid: 7,
            addr: 0x1122,
            data_len: 4096,
            cdw10: 5,
            cdw12: 0,
            ..NvmeCmd::default()
        };
        let b = c.to_bytes();
        assert_eq!(b[0], NVME_CMD_READ);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), 0x1122);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), 4096);
        assert_eq!(u32::from_le_bytes(b[40..44].try_into().unwrap()), 5);
    }
}
