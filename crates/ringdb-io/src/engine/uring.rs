//! `uring` and `uring-sync`: reads, writes, syncs and NOPs on files and block devices through
//! the ring core, with every switch of [`IoConfig`] (registered files and buffers, forced
//! async, IOPOLL, SQPOLL, setup modes).

use super::ring_engine::{RingCommands, RingEngine};
use super::{IoCompletion, IoRequest, OpKind};
use crate::config::IoConfig;
use crate::error::{IoError, Result, Switch};
use io_uring::{cqueue, opcode, squeue, types};
use std::os::fd::RawFd;

/// The `uring` / `uring-sync` engine.
pub type UringEngine = RingEngine<FileCommands>;

impl UringEngine {
    /// Opens the engine over `files`; with fixed buffers on, `buffers` are registered (the
    /// caller keeps them alive for the engine's lifetime).
    pub fn new(cfg: &IoConfig, files: &[RawFd], buffers: Option<&[libc::iovec]>) -> Result<Self> {
        let commands = FileCommands::new(cfg, files);
        RingEngine::open(cfg, files, buffers, commands)
    }
}

/// Requests on files as io_uring opcodes.
pub struct FileCommands {
    files: Vec<RawFd>,
    fixed_files: bool,
    fixed_buffers: bool,
    iopoll: bool,
    entry_flags: squeue::Flags,
}

impl FileCommands {
    fn new(cfg: &IoConfig, files: &[RawFd]) -> Self {
        let mut entry_flags = squeue::Flags::empty();
        if cfg.force_async {
            entry_flags |= squeue::Flags::ASYNC;
        }
        if cfg.register_files {
            entry_flags |= squeue::Flags::FIXED_FILE;
        }
        FileCommands {
            files: files.to_vec(),
            fixed_files: cfg.register_files,
            fixed_buffers: cfg.fixed_buffers,
            iopoll: cfg.iopoll,
            entry_flags,
        }
    }

    fn sync_entry(&self, request: &IoRequest, index: usize, fd: RawFd) -> Result<squeue::Entry> {
        if self.iopoll {
            return Err(IoError::Unsupported {
                switch: Switch::Iopoll,
                reason: "fsync/fdatasync cannot run on an IOPOLL ring; issue durability syncs on a second ring without IOPOLL".into(),
            });
        }
        let flags = if request.op == OpKind::Fdatasync {
            types::FsyncFlags::DATASYNC
        } else {
            types::FsyncFlags::empty()
        };
        Ok(if self.fixed_files {
            opcode::Fsync::new(types::Fixed(index as u32))
                .flags(flags)
                .build()
        } else {
            opcode::Fsync::new(types::Fd(fd)).flags(flags).build()
        })
    }

    fn data_entry(&self, request: &IoRequest, index: usize, fd: RawFd) -> squeue::Entry {
        // One builder call per target kind: the crate's opcodes are generic over Fd and Fixed.
        macro_rules! with_target {
            ($build:expr) => {
                if self.fixed_files {
                    $build(types::Fixed(index as u32))
                } else {
                    $build(types::Fd(fd))
                }
            };
        }
        let (buf, len, offset) = (request.buf, request.len, request.offset);
        let fixed_index = self.fixed_buffers.then_some(request.buf_index).flatten();
        match (request.op, fixed_index) {
            (OpKind::Read, Some(bi)) => with_target!(|t| opcode::ReadFixed::new(t, buf, len, bi)
                .offset(offset)
                .build()),
            (OpKind::Write, Some(bi)) => {
                with_target!(|t| opcode::WriteFixed::new(t, buf, len, bi)
                    .offset(offset)
                    .build())
            }
            (OpKind::Read, None) => {
                with_target!(|t| opcode::Read::new(t, buf, len).offset(offset).build())
            }
            (OpKind::Write, None) => {
                with_target!(|t| opcode::Write::new(t, buf, len).offset(offset).build())
            }
            (other, _) => unreachable!("{} is not a data request", other.name()),
        }
    }
}

impl RingCommands for FileCommands {
    type Submission = squeue::Entry;
    type Completion = cqueue::Entry;

    fn prepare(&mut self, request: &IoRequest) -> Result<(squeue::Entry, u64)> {
        let tag = request.user_data;
        // A NOP and a poll name no file of the table, so FIXED_FILE must not be set on them.
        let fileless = self.entry_flags - squeue::Flags::FIXED_FILE;
        if request.op == OpKind::Nop {
            return Ok((
                opcode::Nop::new().build().flags(fileless).user_data(tag),
                tag,
            ));
        }
        if request.op == OpKind::PollIn {
            let fd = RawFd::try_from(request.offset).map_err(|_| IoError::NoSuchFile {
                index: u32::MAX,
                files: self.files.len(),
            })?;
            let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32).build();
            return Ok((entry.flags(fileless).user_data(tag), tag));
        }
        let index = request.file.0 as usize;
        let fd = *self.files.get(index).ok_or({
            IoError::NoSuchFile {
                index: request.file.0,
                files: self.files.len(),
            }
        })?;
        let entry = match request.op {
            OpKind::Fsync | OpKind::Fdatasync => self.sync_entry(request, index, fd)?,
            _ => self.data_entry(request, index, fd),
        };
        Ok((entry.flags(self.entry_flags).user_data(tag), tag))
    }

    fn abandon(&mut self, _tag: u64) {}

    fn polls(&self) -> bool {
        // An IOPOLL ring completes only polled block I/O.
        !self.iopoll
    }

    fn complete(&mut self, tag: u64, result: i32) -> IoCompletion {
        IoCompletion {
            user_data: tag,
            result,
        }
    }
}
