//! `posix`: blocking `pread`/`pwrite`/`fsync`, one request at a time. `push` performs the
//! request; its completion is ready for the next `reap`.

use super::{Engine, EngineStats, IoCompletion, IoRequest, OpKind};
use crate::config::EngineKind;
use crate::error::{IoError, Result};
use std::collections::VecDeque;
use std::os::fd::RawFd;

/// The `posix` engine: blocking `pread`/`pwrite`/`fsync`, one request at a time (the baseline).
pub struct PosixEngine {
    files: Vec<RawFd>,
    ready: VecDeque<IoCompletion>,
    stats: EngineStats,
}

impl PosixEngine {
    /// An engine over `files` (the caller keeps them open).
    pub fn new(files: &[RawFd]) -> Self {
        PosixEngine {
            files: files.to_vec(),
            ready: VecDeque::with_capacity(1),
            stats: EngineStats::default(),
        }
    }

    fn fd(&self, req: &IoRequest) -> Result<RawFd> {
        self.files.get(req.file.0 as usize).copied().ok_or({
            IoError::NoSuchFile {
                index: req.file.0,
                files: self.files.len(),
            }
        })
    }
}

fn errno_result(ret: isize) -> i32 {
    if ret < 0 {
        -std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else {
        ret as i32
    }
}

impl Engine for PosixEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Posix
    }

    fn depth(&self) -> usize {
        1
    }

    fn in_flight(&self) -> usize {
        self.ready.len()
    }

    fn pending(&self) -> usize {
        0
    }

    unsafe fn push(&mut self, req: &IoRequest) -> Result<()> {
        if !self.ready.is_empty() {
            return Err(IoError::QueueFull {
                engine: EngineKind::Posix,
                in_flight: 1,
                depth: 1,
            });
        }
        let result = match req.op {
            OpKind::PollIn => return Err(super::poll_refused(self.kind())),
            OpKind::Nop => 0,
            OpKind::Read | OpKind::Write => {
                let fd = self.fd(req)?;
                let ret = if req.op == OpKind::Read {
                    // SAFETY: the caller guarantees buf is valid for len bytes (push contract).
                    unsafe { libc::pread(fd, req.buf.cast(), req.len as usize, req.offset as i64) }
                } else {
                    // SAFETY: as above; the buffer is only read.
                    unsafe { libc::pwrite(fd, req.buf.cast(), req.len as usize, req.offset as i64) }
                };
                self.stats.enters += 1;
                errno_result(ret)
            }
            OpKind::Fsync | OpKind::Fdatasync => {
                let fd = self.fd(req)?;
                // SAFETY: plain syscalls on a descriptor the engine was given.
                let ret = unsafe {
                    if req.op == OpKind::Fsync {
                        libc::fsync(fd)
                    } else {
                        libc::fdatasync(fd)
                    }
                };
                self.stats.enters += 1;
                errno_result(ret as isize)
            }
        };
        self.stats.submitted += 1;
        self.ready.push_back(IoCompletion {
            user_data: req.user_data,
            result,
        });
        Ok(())
    }

    fn submit(&mut self, _wait_for: usize) -> Result<()> {
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        super::deliver_ready(&mut self.ready, out, &mut self.stats)
    }

    fn stats(&self) -> EngineStats {
        self.stats
    }
}
