//! Zero-copy receive (zcrx, `IORING_OP_RECV_ZC`, Linux 6.15+) is gated by a real probe: the
//! kernel must know the opcode, and the interface the connection runs over must accept an
//! interface queue (`IORING_REGISTER_ZCRX_IFQ`), which needs a NIC with header split and the
//! queue-management API. Loopback and veth have neither, so there the probe fails and the
//! transport is refused with [`NetError::ZcRecvUnsupported`] naming the interface and the reason.
//!
//! This build has no zcrx data path (refill ring, area tokens): where registration would succeed
//! the transport is refused too, with a message that says so.

use crate::error::{NetError, NetSwitch, ZcRecvRefusal};
use crate::sys::Region;
use io_uring::{cqueue, opcode, squeue, IoUring};
use std::ffi::CStr;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};

// include/uapi/linux/io_uring.h (6.15+), laid out as the kernel reads them.
#[repr(C)]
#[derive(Default)]
struct ZcrxOffsets {
    head: u32,
    tail: u32,
    rqes: u32,
    resv2: u32,
    resv: [u64; 2],
}

#[repr(C)]
#[derive(Default)]
struct ZcrxIfqReg {
    if_idx: u32,
    if_rxq: u32,
    rq_entries: u32,
    flags: u32,
    area_ptr: u64,
    region_ptr: u64,
    offsets: ZcrxOffsets,
    zcrx_id: u32,
    resv2: u32,
    resv: [u64; 3],
}

#[repr(C)]
#[derive(Default)]
struct ZcrxAreaReg {
    addr: u64,
    len: u64,
    rq_area_token: u64,
    flags: u32,
    dmabuf_fd: u32,
    resv2: [u64; 2],
}

#[repr(C)]
#[derive(Default)]
struct RegionDesc {
    user_addr: u64,
    size: u64,
    flags: u32,
    id: u32,
    mmap_offset: u64,
    resv: [u64; 4],
}

const IORING_REGISTER_ZCRX_IFQ: u32 = 32;
const IORING_MEM_REGION_TYPE_USER: u32 = 1;

/// The interface a socket's local address belongs to (name, index).
fn interface_of(fd: RawFd) -> io::Result<(String, u32)> {
    let mut ss: libc::sockaddr_storage =
        // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
        unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: ss/len are valid for writes of the given size.
    if unsafe { libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let ip: IpAddr = match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in.
            let sin = unsafe { &*(&ss as *const _ as *const libc::sockaddr_in) };
            IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes())
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6.
            let sin6 = unsafe { &*(&ss as *const _ as *const libc::sockaddr_in6) };
            IpAddr::from(sin6.sin6_addr.s6_addr)
        }
        _ => return Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT)),
    };
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut ifap) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = None;
    let mut p = ifap;
    while !p.is_null() {
        // SAFETY: p walks the list getifaddrs returned; each node is valid until freeifaddrs.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr is non-null and points at a sockaddr of the family it names.
            let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            let a = match fam {
                libc::AF_INET => {
                    // SAFETY: family AF_INET.
                    let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                    Some(IpAddr::from(
                        u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                    ))
                }
                libc::AF_INET6 => {
                    // SAFETY: family AF_INET6.
                    let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                    Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                }
                _ => None,
            };
            if a == Some(ip) {
                // SAFETY: ifa_name is a NUL-terminated string owned by the list.
                let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
                // SAFETY: same string, passed to the libc lookup.
                let idx = unsafe { libc::if_nametoindex(ifa.ifa_name) };
                found = Some((name.to_string_lossy().into_owned(), idx));
                break;
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: ifap came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(ifap) };
    found.ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))
}

/// Probes zcrx on interface `ifindex`, receive queue 0. Ok(()) means the kernel accepted the
/// registration (then released it with the ring).
fn probe_ifq(ifindex: u32) -> Result<(), ZcRecvRefusal> {
    let ring = IoUring::<squeue::Entry, cqueue::Entry>::new(8)
        .map_err(|source| ZcRecvRefusal::RingSetup { source })?;
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|source| ZcRecvRefusal::Probe { source })?;
    if !probe.is_supported(opcode::RecvZc::CODE) {
        return Err(ZcRecvRefusal::KernelTooOld);
    }
    drop(ring);
    // zcrx needs DEFER_TASKRUN and 32-byte CQEs.
    let ring = IoUring::<squeue::Entry, cqueue::Entry32>::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(8)
        .map_err(|source| ZcRecvRefusal::ZcrxRingSetup { source })?;
    let map = |len_bytes: usize| {
        Region::try_new(len_bytes).map_err(|source| ZcRecvRefusal::Memory { len_bytes, source })
    };
    let area = map(64 * 4096)?;
    let rq = map(2 * 4096)?;
    let area_reg = ZcrxAreaReg {
        addr: area.as_ptr() as u64,
        len: area.len() as u64,
        ..Default::default()
    };
    let region = RegionDesc {
        user_addr: rq.as_ptr() as u64,
        size: rq.len() as u64,
        flags: IORING_MEM_REGION_TYPE_USER,
        ..Default::default()
    };
    let mut reg = ZcrxIfqReg {
        if_idx: ifindex,
        if_rxq: 0,
        rq_entries: 64,
        area_ptr: &area_reg as *const ZcrxAreaReg as u64,
        region_ptr: &region as *const RegionDesc as u64,
        ..Default::default()
    };
    // SAFETY: reg, area_reg and region live on this stack frame during the call; the area and
    // refill-ring memory outlive the ring (dropped after it below), which is where the kernel
    // would keep using them if the registration succeeded.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring.as_raw_fd(),
            IORING_REGISTER_ZCRX_IFQ,
            &mut reg as *mut ZcrxIfqReg,
            1u32,
        )
    };
    let res = if r < 0 {
        Err(ZcRecvRefusal::Registration {
            source: io::Error::last_os_error(),
        })
    } else {
        Ok(())
    };
    drop(ring);
    drop(area);
    drop(rq);
    res
}

/// The typed refusal of `uring+zc-recv` over the connection `fd` (or loopback when none):
/// [`NetError::ZcRecvUnsupported`] naming the interface and why the probe failed, or
/// [`NetError::Unsupported`] where the interface would take a zcrx queue but this build has no
/// zero-copy receive data path.
pub fn zero_copy_receive_refusal(fd: Option<RawFd>) -> NetError {
    let (ifname, idx) = match fd.map(interface_of) {
        Some(Ok(x)) => x,
        Some(Err(source)) => {
            return NetError::ZcRecvUnsupported {
                ifname: "?".into(),
                refusal: ZcRecvRefusal::InterfaceUnknown { source },
            }
        }
        None => ("lo".to_string(), 1),
    };
    match probe_ifq(idx) {
        Err(refusal) => NetError::ZcRecvUnsupported { ifname, refusal },
        Ok(()) => NetError::Unsupported {
            switch: NetSwitch::ZeroCopyReceive,
            reason: format!(
                "interface {ifname} accepts a zcrx queue, but this build has no zero-copy receive data path; use uring or uring+multishot"
            ),
        },
    }
}
