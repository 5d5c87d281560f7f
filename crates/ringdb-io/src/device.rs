//! PLACEHOLDER: being written (temporary ioctls so that target.rs builds).
use std::os::fd::RawFd;
pub fn block_device_size(fd: RawFd) -> crate::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 into `size`.
    let r = unsafe { libc::ioctl(fd, 0x8008_1272, &mut size as *mut u64) };
    if r < 0 { return Err(crate::IoError::os("BLKGETSIZE64", std::io::Error::last_os_error())); }
    Ok(size)
}
pub fn logical_block_size_of_fd(fd: RawFd) -> crate::Result<u32> {
    let mut bs: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int into `bs`.
    let r = unsafe { libc::ioctl(fd, 0x1268, &mut bs as *mut libc::c_int) };
    if r < 0 { return Err(crate::IoError::os("BLKSSZGET", std::io::Error::last_os_error())); }
    Ok(bs as u32)
}
