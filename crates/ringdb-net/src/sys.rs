//! Thin, checked wrappers over the socket and memory system calls the transports use.

use crate::error::{NetError, Result};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

/// One connected socket handed to a transport.
#[derive(Debug)]
pub struct Conn {
    /// The socket; the transport that takes the connection closes it.
    pub fd: OwnedFd,
    /// The peer, for error messages.
    pub peer: String,
    /// Datagram socket (UDP): each receive is one message and a zero-length read is not EOF.
    pub datagram: bool,
}

impl Conn {
    /// A connected TCP stream, with `TCP_NODELAY` set (small messages leave at once).
    pub fn tcp(s: TcpStream) -> Result<Conn> {
        let peer = s
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        s.set_nodelay(true)
            .map_err(|e| NetError::io("setsockopt TCP_NODELAY", e))?;
        Ok(Conn {
            fd: s.into(),
            peer,
            datagram: false,
        })
    }

    /// A UDP socket, which must be connected to its peer.
    pub fn udp(s: UdpSocket) -> Result<Conn> {
        let peer = s
            .peer_addr()
            .map(|a| a.to_string())
            .map_err(|e| NetError::io("UDP socket must be connected", e))?;
        Ok(Conn {
            fd: s.into(),
            peer,
            datagram: true,
        })
    }

    /// The socket's file descriptor.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, val: i32) -> io::Result<()> {
    // SAFETY: val lives on the stack for the duration of the call; the length matches its type.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &val as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut val: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: val and len are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut val as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    if r == 0 {
        Ok(val)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Shrinks (or grows) the kernel socket buffers; used by tests to force short writes and
/// partial reads.
pub fn set_socket_buffers(fd: RawFd, sndbuf: Option<usize>, rcvbuf: Option<usize>) -> Result<()> {
    if let Some(n) = sndbuf {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, n as i32)
            .map_err(|e| NetError::io("setsockopt SO_SNDBUF", e))?;
    }
    if let Some(n) = rcvbuf {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, n as i32)
            .map_err(|e| NetError::io("setsockopt SO_RCVBUF", e))?;
    }
    Ok(())
}

/// The NAPI id of the device queue that delivered the socket's last packet (0: none, e.g. loopback).
pub fn incoming_napi_id(fd: RawFd) -> io::Result<u32> {
    const SO_INCOMING_NAPI_ID: i32 = 56;
    getsockopt_int(fd, libc::SOL_SOCKET, SO_INCOMING_NAPI_ID).map(|v| v as u32)
}

/// Turns `O_NONBLOCK` on or off.
pub fn set_nonblocking(fd: RawFd, on: bool) -> Result<()> {
    // SAFETY: F_GETFL/F_SETFL on an fd we own; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(NetError::io("fcntl F_GETFL", io::Error::last_os_error()));
    }
    let new = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, new) } < 0 {
        return Err(NetError::io("fcntl F_SETFL", io::Error::last_os_error()));
    }
    Ok(())
}

/// Connects with a deadline; a refused or unreachable peer is an error at once.
pub fn connect_tcp(addr: SocketAddr, timeout: Duration) -> Result<TcpStream> {
    TcpStream::connect_timeout(&addr, timeout).map_err(|source| NetError::Connect { addr, source })
}

/// Accepts one connection, giving up after `timeout`.
pub fn accept_tcp(l: &TcpListener, timeout: Duration) -> Result<TcpStream> {
    l.set_nonblocking(true)
        .map_err(|e| NetError::io("listener O_NONBLOCK", e))?;
    let start = Instant::now();
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .map_err(|e| NetError::io("accepted socket", e))?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if start.elapsed() >= timeout {
                    return Err(NetError::Timeout {
                        what: format!(
                            "a connection on {}",
                            l.local_addr().map(|a| a.to_string()).unwrap_or_default()
                        ),
                        after: timeout,
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(NetError::io("accept", e)),
        }
    }
}

/// Page-aligned anonymous memory, allocated once. Transports carve send slots, receive buffers
/// and provided-buffer rings out of it, and register it with the kernel.
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: Region is plain memory owned by one value; moving it to another thread moves ownership.
unsafe impl Send for Region {}

impl Region {
    /// At least `len` bytes (whole pages), zeroed and populated.
    pub fn new(len: usize) -> Result<Region> {
        Region::try_new(len).map_err(|source| {
            NetError::io(format!("mmap {} bytes", Region::page_rounded(len)), source)
        })
    }

    /// `len` rounded up to whole pages (at least one).
    fn page_rounded(len: usize) -> usize {
        let page = 4096;
        len.max(1).div_ceil(page) * page
    }

    /// [`Region::new`], failing with the error `mmap` returned.
    pub fn try_new(len: usize) -> io::Result<Region> {
        let len = Region::page_rounded(len);
        // SAFETY: anonymous private mapping, no file; the result is checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Region {
            ptr: NonNull::new(p as *mut u8).expect("mmap returned a non-null pointer"),
            len,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len, "region slice out of bounds");
        // SAFETY: bounds checked above; the mapping lives as long as self. The caller holds no
        // completion-pending kernel write on this range (the transports guarantee it).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) }
    }

    pub fn slice_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off + len <= self.len, "region slice out of bounds");
        // SAFETY: bounds checked above; &mut self gives exclusive access on the Rust side.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) }
    }

    /// A region of no memory (what is left after [`Self::leak`]).
    pub fn empty() -> Region {
        Region {
            ptr: NonNull::dangling(),
            len: 0,
        }
    }

    /// Gives the memory up without unmapping it: used when the kernel might still write into it
    /// (a request whose completion never arrived), where freeing would be unsound.
    pub fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: ptr/len come from a successful mmap and are unmapped exactly once.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

/// Fixed-size send slots carved out of one region, with a free list.
pub struct SlotPool {
    pub region: Region,
    pub slot_size: usize,
    pub count: usize,
    free: Vec<u32>,
}

impl SlotPool {
    pub fn new(slot_size: usize, count: usize) -> Result<SlotPool> {
        let region = Region::new(slot_size * count)?;
        Ok(SlotPool {
            region,
            slot_size,
            count,
            free: (0..count as u32).rev().collect(),
        })
    }

    pub fn alloc(&mut self) -> Option<u32> {
        self.free.pop()
    }

    pub fn free(&mut self, slot: u32) {
        assert!(
            (slot as usize) < self.count,
            "slot {slot} is not one of {}",
            self.count
        );
        debug_assert!(!self.free.contains(&slot), "double free of slot {slot}");
        self.free.push(slot);
    }

    pub fn offset(&self, slot: u32) -> usize {
        slot as usize * self.slot_size
    }

    pub fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        let (off, len) = (self.offset(slot), self.slot_size);
        self.region.slice_mut(off, len)
    }

    pub fn ptr(&self, slot: u32, off: usize) -> *mut u8 {
        assert!(
            (slot as usize) < self.count && off <= self.slot_size,
            "slot {slot} offset {off} lies outside the pool"
        );
        // SAFETY: slot < count and off <= slot_size keep the pointer inside the region.
        unsafe { self.region.as_ptr().add(self.offset(slot) + off) }
    }
}

/// Process CPU time (user + system, all threads) in seconds.
pub fn process_cpu_secs() -> f64 {
    ringdb_lab::counters::CpuTime::now().total().as_secs_f64()
}

/// This thread's CPU time in seconds.
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is valid for writes; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// A short description of this machine for reports: kernel, CPUs, model.
pub fn machine_description() -> String {
    ringdb_lab::host::Host::current().describe()
}

/// `SO_LINGER` with a zero timeout: closing the socket sends RST instead of FIN (how a peer that
/// crashed looks to the other side; used by tests).
pub fn set_linger_zero(fd: RawFd) -> Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: l lives on the stack for the call; the length matches its type.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(NetError::io(
            "setsockopt SO_LINGER",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}
