//! `uring-passthrough`: NVMe commands straight to the driver through io_uring's `URING_CMD`
//! (`NVME_URING_CMD_IO`) on the NVMe generic char device (`/dev/ngXnY`), bypassing the block
//! layer. Needs a ring with 128-byte SQEs and 32-byte CQEs (Linux 5.19+; registered buffers
//! and IOPOLL with passthrough need 6.1).
//!
//! Requests keep the byte-offset vocabulary of [`super::Engine`]: an offset and a length that
//! are multiples of the namespace's LBA size become a starting LBA and a block count.
//! `Fsync`/`Fdatasync` become an NVMe Flush, which (unlike `fsync` on an IOPOLL ring) is fully
//! asynchronous. The ring itself is driven by the ring core, as for every io_uring engine.

use super::nvme::{
    nvme_geometry, NvmeCmd, NvmeGeometry, MAX_BLOCKS_PER_CMD, NVME_CMD_FLUSH, NVME_CMD_READ,
    NVME_CMD_WRITE, NVME_URING_CMD_IO,
};
use super::ring_engine::{RingCommands, RingEngine};
use super::{IoCompletion, IoRequest, OpKind};
use crate::config::{EngineKind, IoConfig};
use crate::error::{IoError, Result};
use io_uring::{cqueue, opcode, squeue, types};
use std::os::fd::RawFd;

/// The `uring-passthrough` engine.
pub type PassthroughEngine = RingEngine<NvmeCommands>;

impl PassthroughEngine {
    /// Opens the engine over NVMe generic char devices; anything else is refused before a ring
    /// exists. With fixed buffers on, `buffers` are registered (the caller keeps them alive).
    pub fn new(cfg: &IoConfig, files: &[RawFd], buffers: Option<&[libc::iovec]>) -> Result<Self> {
        debug_assert_eq!(cfg.engine, EngineKind::UringPassthrough);
        let commands = NvmeCommands::new(cfg, files)?;
        RingEngine::open(cfg, files, buffers, commands)
    }

    /// The namespace geometry of file `idx` of this engine.
    pub fn geometry(&self, idx: usize) -> Option<NvmeGeometry> {
        self.commands().geometry.get(idx).copied()
    }
}

/// What the engine remembers about a request between push and completion.
#[derive(Clone, Copy)]
struct Slot {
    user_data: u64,
    /// Bytes a successful read or write moved (0 for flush and nop).
    bytes: u32,
    in_use: bool,
}

/// Requests as NVMe commands on namespaces. A command's completion carries an NVMe status,
/// not a byte count, so each request in flight has a slot (indexed by the entry's user data)
/// that remembers the caller's user data and the bytes a success moves.
pub struct NvmeCommands {
    files: Vec<RawFd>,
    geometry: Vec<NvmeGeometry>,
    fixed_files: bool,
    fixed_buffers: bool,
    entry_flags: squeue::Flags,
    slots: Vec<Slot>,
    /// Unused slot indexes.
    free: Vec<u32>,
}

impl NvmeCommands {
    fn new(cfg: &IoConfig, files: &[RawFd]) -> Result<Self> {
        // Refuse a wrong target before any ring exists.
        let geometry = files
            .iter()
            .map(|&fd| nvme_geometry(fd))
            .collect::<Result<Vec<_>>>()?;
        let depth = cfg.effective_depth() as usize;
        let mut entry_flags = squeue::Flags::empty();
        if cfg.force_async {
            entry_flags |= squeue::Flags::ASYNC;
        }
        if cfg.register_files {
            entry_flags |= squeue::Flags::FIXED_FILE;
        }
        let unused = Slot {
            user_data: 0,
            bytes: 0,
            in_use: false,
        };
        Ok(NvmeCommands {
            files: files.to_vec(),
            geometry,
            fixed_files: cfg.register_files,
            fixed_buffers: cfg.fixed_buffers,
            entry_flags,
            slots: vec![unused; depth],
            free: (0..depth as u32).rev().collect(),
        })
    }

    /// The NVMe command for a read or write: checks alignment and bounds against `geometry`.
    fn data_command(request: &IoRequest, geometry: NvmeGeometry) -> Result<NvmeCmd> {
        let lba = geometry.lba_size as u64;
        if !request.offset.is_multiple_of(lba) {
            return Err(IoError::Misaligned {
                what: "offset",
                value: request.offset,
                block: geometry.lba_size,
            });
        }
        if request.len == 0 || !(request.len as u64).is_multiple_of(lba) {
            return Err(IoError::Misaligned {
                what: "length",
                value: request.len as u64,
                block: geometry.lba_size,
            });
        }
        let start_block = request.offset / lba;
        let blocks = request.len as u64 / lba;
        if blocks > MAX_BLOCKS_PER_CMD || start_block + blocks > geometry.lba_count {
            return Err(IoError::PastEnd {
                op: request.op.name(),
                len: request.len as u64,
                offset: request.offset,
                target: format!(
                    "namespace {} (or the 65536 blocks one command moves)",
                    geometry.nsid
                ),
                limit: geometry.capacity(),
            });
        }
        Ok(NvmeCmd {
            opcode: if request.op == OpKind::Read {
                NVME_CMD_READ
            } else {
                NVME_CMD_WRITE
            },
            nsid: geometry.nsid,
            addr: request.buf as u64,
            data_len: request.len,
            cdw10: start_block as u32,
            cdw11: (start_block >> 32) as u32,
            cdw12: (blocks - 1) as u32,
            ..NvmeCmd::default()
        })
    }

    /// The entry for `request` (not a NOP), tagged with `slot`; also the bytes a success moves.
    fn command_entry(&self, request: &IoRequest, slot: u32) -> Result<(squeue::Entry128, u32)> {
        let index = request.file.0 as usize;
        let (fd, geometry) = match (self.files.get(index), self.geometry.get(index)) {
            (Some(fd), Some(geometry)) => (*fd, *geometry),
            _ => {
                return Err(IoError::NoSuchFile {
                    index: request.file.0,
                    files: self.files.len(),
                })
            }
        };
        let (command, bytes, buf_index) = match request.op {
            OpKind::Read | OpKind::Write => {
                let command = Self::data_command(request, geometry)?;
                let buf_index = self.fixed_buffers.then_some(request.buf_index).flatten();
                (command, request.len, buf_index)
            }
            OpKind::Fsync | OpKind::Fdatasync => {
                let flush = NvmeCmd {
                    opcode: NVME_CMD_FLUSH,
                    nsid: geometry.nsid,
                    ..NvmeCmd::default()
                };
                (flush, 0, None)
            }
            OpKind::Nop => unreachable!("NOPs are built by prepare"),
            OpKind::PollIn => unreachable!("the engine refuses polls before prepare"),
        };
        let build = |builder: opcode::UringCmd80| {
            builder
                .cmd(command.to_bytes())
                .buf_index(buf_index)
                .build()
                .flags(self.entry_flags)
                .user_data(slot as u64)
        };
        let entry = if self.fixed_files {
            build(opcode::UringCmd80::new(
                types::Fixed(index as u32),
                NVME_URING_CMD_IO,
            ))
        } else {
            build(opcode::UringCmd80::new(types::Fd(fd), NVME_URING_CMD_IO))
        };
        Ok((entry, bytes))
    }
}

impl RingCommands for NvmeCommands {
    type Submission = squeue::Entry128;
    type Completion = cqueue::Entry32;

    fn prepare(&mut self, request: &IoRequest) -> Result<(squeue::Entry128, u64)> {
        let Some(&slot) = self.free.last() else {
            return Err(IoError::QueueFull {
                engine: EngineKind::UringPassthrough,
                in_flight: self.slots.len(),
                depth: self.slots.len(),
            });
        };
        let (entry, bytes) = if request.op == OpKind::Nop {
            let flags = self.entry_flags - squeue::Flags::FIXED_FILE;
            let nop = opcode::Nop::new()
                .build()
                .flags(flags)
                .user_data(slot as u64);
            (nop.into(), 0)
        } else {
            self.command_entry(request, slot)?
        };
        self.free.pop();
        let state = &mut self.slots[slot as usize];
        assert!(!state.in_use, "slot {slot} handed out twice");
        *state = Slot {
            user_data: request.user_data,
            bytes,
            in_use: true,
        };
        Ok((entry, slot as u64))
    }

    fn abandon(&mut self, tag: u64) {
        let state = &mut self.slots[tag as usize];
        assert!(state.in_use, "abandoning slot {tag}, which is not in use");
        state.in_use = false;
        self.free.push(tag as u32);
    }

    fn complete(&mut self, tag: u64, result: i32) -> IoCompletion {
        let state = &mut self.slots[tag as usize];
        assert!(
            state.in_use,
            "completion for slot {tag}, which is not in use"
        );
        state.in_use = false;
        self.free.push(tag as u32);
        // Negative: an errno from the kernel; positive: an NVMe status code.
        let result = match result {
            0 => state.bytes as i32,
            r if r < 0 => r,
            _ => -libc::EIO,
        };
        IoCompletion {
            user_data: state.user_data,
            result,
        }
    }
}
