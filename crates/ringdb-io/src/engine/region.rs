//! `region`: several logical files laid out as fixed regions of one device.
//!
//! A database with a log on a raw device (an NVMe namespace through passthrough, or a block
//! device) keeps its data, log and double-write area in regions of that one device. A
//! [`RegionEngine`] wraps the device's engine: file `i` of a request is region `i`, its
//! offset is moved by the region's base and checked against the region's end, and a sync of
//! any region is a sync of the device (on the passthrough engine, one NVMe Flush).
//!
//! Raw devices take only whole logical blocks from aligned memory. Requests that are already
//! aligned pass through untouched (registered buffers included); others are bounced through an
//! aligned buffer this engine owns until the completion is reaped: a read covers the aligned
//! range around the request and copies out the part asked for, a write at an aligned offset is
//! padded with zeros to the next block (the bytes after a log's end are dead anyway). A write at
//! an unaligned offset is refused: it would need a read-modify-write, which the callers (the
//! log writes whole blocks) never ask for.

use super::{Engine, EngineStats, FileId, IoCompletion, IoRequest, OpKind};
use crate::buf::{AlignedBuf, BUF_ALIGN};
use crate::config::EngineKind;
use crate::error::{IoError, Result};
use std::collections::HashMap;

/// One logical file: `len` bytes of the device from `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub base: u64,
    pub len: u64,
}

/// A read or write that went through an aligned buffer.
struct Bounce {
    buf: AlignedBuf,
    /// For reads: where the caller's bytes go and how many it asked for.
    user: *mut u8,
    len: usize,
    /// Bytes of `buf` before the caller's first byte.
    skip: usize,
    read: bool,
}

/// An engine over regions of one device (file 0 of `inner`).
pub struct RegionEngine {
    inner: Box<dyn Engine>,
    regions: Vec<Region>,
    /// The device's block size: offsets and lengths are multiples of it.
    block: u64,
    bounces: HashMap<u64, Bounce>,
    /// Requests that needed a bounce buffer.
    bounced: u64,
}

impl RegionEngine {
    /// `regions` must be block-aligned and must not overlap; `block` is a power of two of at
    /// most [`BUF_ALIGN`] bytes.
    pub fn new(inner: Box<dyn Engine>, regions: Vec<Region>, block: u64) -> Result<RegionEngine> {
        if !block.is_power_of_two() || block > BUF_ALIGN as u64 {
            return Err(IoError::InvalidArg(format!(
                "region engine: block size {block} is not a power of two up to {BUF_ALIGN}"
            )));
        }
        let mut sorted = regions.clone();
        sorted.sort_by_key(|r| r.base);
        for (i, r) in sorted.iter().enumerate() {
            if !r.base.is_multiple_of(block) || !r.len.is_multiple_of(block) || r.len == 0 {
                return Err(IoError::InvalidArg(format!(
                    "region engine: region {r:?} is empty or not aligned to {block} bytes"
                )));
            }
            if let Some(next) = sorted.get(i + 1) {
                if r.base + r.len > next.base {
                    return Err(IoError::InvalidArg(format!(
                        "region engine: regions {r:?} and {next:?} overlap"
                    )));
                }
            }
        }
        Ok(RegionEngine {
            inner,
            regions,
            block,
            bounces: HashMap::new(),
            bounced: 0,
        })
    }

    /// Requests that went through a bounce buffer so far.
    pub fn bounced(&self) -> u64 {
        self.bounced
    }
}

impl Engine for RegionEngine {
    fn kind(&self) -> EngineKind {
        self.inner.kind()
    }

    fn depth(&self) -> usize {
        self.inner.depth()
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    fn pending(&self) -> usize {
        self.inner.pending()
    }

    unsafe fn push(&mut self, req: &IoRequest) -> Result<()> {
        let mut dev = *req;
        dev.file = FileId(0);
        if matches!(req.op, OpKind::Read | OpKind::Write) {
            let idx = req.file.0 as usize;
            let r = *self
                .regions
                .get(idx)
                .ok_or_else(|| IoError::InvalidArg(format!("region engine: no region {idx}")))?;
            let end = req.offset.saturating_add(req.len as u64);
            if end > r.len {
                return Err(IoError::InvalidArg(format!(
                    "{} of {} bytes at {} is past the end of region {idx} ({} bytes)",
                    req.op.name(),
                    req.len,
                    req.offset,
                    r.len
                )));
            }
            let b = self.block;
            let aligned = req.offset.is_multiple_of(b)
                && (req.len as u64).is_multiple_of(b)
                && (req.buf as usize).is_multiple_of(b as usize);
            dev.offset = r.base + req.offset;
            if !aligned {
                if req.op == OpKind::Write && !req.offset.is_multiple_of(b) {
                    return Err(IoError::InvalidArg(format!(
                        "region engine: a write at offset {} of region {idx} is not aligned to \
                         the device's {b}-byte blocks",
                        req.offset
                    )));
                }
                if self.bounces.contains_key(&req.user_data) {
                    return Err(IoError::InvalidArg(format!(
                        "region engine: user_data {} is already in flight",
                        req.user_data
                    )));
                }
                let start = req.offset / b * b;
                let stop = end.next_multiple_of(b).min(r.len);
                let span = (stop - start) as usize;
                let skip = (req.offset - start) as usize;
                let mut buf = AlignedBuf::new(span);
                if req.op == OpKind::Write {
                    // SAFETY: the caller guarantees `req.buf` is valid for `req.len` bytes
                    // (the push contract); `buf` holds `skip + len <= span` bytes.
                    let src = unsafe { std::slice::from_raw_parts(req.buf, req.len as usize) };
                    buf.as_mut_slice()[skip..skip + req.len as usize].copy_from_slice(src);
                }
                dev.offset = r.base + start;
                dev.buf = buf.as_mut_ptr();
                dev.len = span as u32;
                dev.buf_index = None;
                // SAFETY: `buf` lives in `self.bounces` until the completion for this
                // user_data is reaped (or the inner engine is drained on drop).
                unsafe { self.inner.push(&dev)? };
                self.bounced += 1;
                self.bounces.insert(
                    req.user_data,
                    Bounce {
                        buf,
                        user: req.buf,
                        len: req.len as usize,
                        skip,
                        read: req.op == OpKind::Read,
                    },
                );
                return Ok(());
            }
        }
        // SAFETY: the same buffer under the same contract the caller gave us.
        unsafe { self.inner.push(&dev) }
    }

    fn submit(&mut self, wait_for: usize) -> Result<()> {
        self.inner.submit(wait_for)
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        let from = out.len();
        let n = self.inner.reap(out);
        for c in &mut out[from..] {
            let Some(b) = self.bounces.remove(&c.user_data) else {
                continue;
            };
            if c.result < 0 {
                continue;
            }
            // Bytes of the caller's range the device moved.
            let got = (c.result as usize).saturating_sub(b.skip).min(b.len);
            if b.read {
                // SAFETY: the caller's buffer is valid for `len` bytes until this completion
                // is returned (push contract), and `got <= len`.
                unsafe {
                    std::ptr::copy_nonoverlapping(b.buf.as_ptr().add(b.skip), b.user, got);
                }
            }
            c.result = got as i32;
        }
        n
    }

    fn stats(&self) -> EngineStats {
        self.inner.stats()
    }

    fn drain(&mut self) -> Result<()> {
        self.inner.drain()?;
        self.bounces.clear();
        Ok(())
    }
}

impl Drop for RegionEngine {
    fn drop(&mut self) {
        // The bounce buffers must outlive every request that uses them.
        if self.inner.drain().is_err() {
            // The kernel may still write into them: leak rather than free.
            for (_, b) in self.bounces.drain() {
                std::mem::forget(b.buf);
            }
        }
    }
}
