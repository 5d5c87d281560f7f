//! `region`: several logical files laid out as fixed regions of one device.
//!
//! A database with a log on a raw device (an NVMe namespace through passthrough, or a block
//! device) keeps its data, log and double-write area in regions of that one device. A
//! [`RegionEngine`] wraps the device's engine: file `i` of a request is region `i`, its
//! offset is moved by the region's base and checked against the region's end, and a sync of
//! any region is a sync of the device (on the passthrough engine, one NVMe Flush).
//!
//! The bounds are checked twice: a request's byte range against its region on the way in (a
//! refusal), and the device request made from it on the way out (an assertion: it lies inside
//! the region, which overlaps no other); a bounce's copy back is asserted to stay inside the
//! bounce buffer and the caller's range when its completion is reaped.
//!
//! Raw devices take only whole logical blocks from aligned memory. Requests that are already
//! aligned pass through untouched (registered buffers included); others are bounced through an
//! aligned buffer this engine owns until the completion is reaped: a read covers the aligned
//! range around the request and copies out the part asked for, a write at an aligned offset is
//! padded with zeros to the next block (the bytes after a log's end are dead anyway). A write at
//! an unaligned offset is refused: it would need a read-modify-write, which the callers (the
//! log writes whole blocks) never ask for.

use super::{DoorbellWakes, Engine, EngineStats, FileId, IoCompletion, IoRequest, OpKind};
use crate::buf::{AlignedBuf, BUF_ALIGN};
use crate::config::EngineKind;
use crate::error::{IoError, Result};
use crate::ring::RingAddress;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// One logical file: `len` bytes of the device from `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte of the region on the device.
    pub base: u64,
    /// Bytes in the region.
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
            return Err(IoError::BadRegions {
                reason: format!("block size {block} is not a power of two up to {BUF_ALIGN}"),
            });
        }
        let mut sorted = regions.clone();
        sorted.sort_by_key(|r| r.base);
        for (i, r) in sorted.iter().enumerate() {
            if !r.base.is_multiple_of(block) || !r.len.is_multiple_of(block) || r.len == 0 {
                return Err(IoError::BadRegions {
                    reason: format!("region {r:?} is empty or not aligned to {block} bytes"),
                });
            }
            if let Some(next) = sorted.get(i + 1) {
                if r.base + r.len > next.base {
                    return Err(IoError::BadRegions {
                        reason: format!("regions {r:?} and {next:?} overlap"),
                    });
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

    /// The bounds of a read's or write's region, once its byte range is checked to lie inside
    /// the region (on the way in).
    fn region_of(&self, req: &IoRequest) -> Result<Region> {
        let index = req.file.0 as usize;
        let region = *self.regions.get(index).ok_or(IoError::NoSuchFile {
            index: req.file.0,
            files: self.regions.len(),
        })?;
        let end = req.offset.saturating_add(req.len as u64);
        if end > region.len {
            return Err(IoError::PastEnd {
                op: req.op.name(),
                len: req.len as u64,
                offset: req.offset,
                target: format!("region {index}"),
                limit: region.len,
            });
        }
        Ok(region)
    }

    /// Whether the device takes the request as it is: offset, length and memory are all
    /// multiples of the block size.
    fn is_aligned(&self, req: &IoRequest) -> bool {
        let block = self.block;
        req.offset.is_multiple_of(block)
            && (req.len as u64).is_multiple_of(block)
            && (req.buf as usize).is_multiple_of(block as usize)
    }

    /// Pushes an unaligned read or write of region `index` through an aligned buffer that
    /// covers the blocks around it.
    ///
    /// # Safety
    /// The push contract: `req.buf` is valid for `req.len` bytes until the completion of
    /// `req.user_data` is reaped.
    unsafe fn push_bounced(&mut self, req: &IoRequest, region: Region) -> Result<()> {
        let block = self.block;
        if req.op == OpKind::Write && !req.offset.is_multiple_of(block) {
            return Err(IoError::Misaligned {
                what: "region write offset",
                value: req.offset,
                block: u32::try_from(block).unwrap_or(u32::MAX),
            });
        }
        if self.bounces.contains_key(&req.user_data) {
            return Err(IoError::DuplicateUserData {
                user_data: req.user_data,
            });
        }
        let len = req.len as usize;
        let start = req.offset / block * block;
        let stop = (req.offset + req.len as u64)
            .next_multiple_of(block)
            .min(region.len);
        let span = (stop - start) as usize;
        let skip = (req.offset - start) as usize;
        assert!(skip + len <= span, "the bounce covers the caller's bytes");
        let mut buf = AlignedBuf::new(span);
        if req.op == OpKind::Write {
            // SAFETY: the caller guarantees `req.buf` is valid for `req.len` bytes
            // (the push contract); `buf` holds `skip + len <= span` bytes.
            let src = unsafe { std::slice::from_raw_parts(req.buf, len) };
            buf.as_mut_slice()[skip..skip + len].copy_from_slice(src);
        }
        let device_request = IoRequest {
            file: FileId(0),
            offset: region.base + start,
            buf: buf.as_mut_ptr(),
            len: u32::try_from(span).expect("a bounce spans less than 4 GiB"),
            buf_index: None,
            ..*req
        };
        assert_inside(&region, &device_request);
        // SAFETY: `buf` lives in `self.bounces` until the completion for this user_data is
        // reaped (or the inner engine is drained on drop).
        unsafe { self.inner.push(&device_request)? };
        self.bounced += 1;
        let bounce = Bounce {
            buf,
            user: req.buf,
            len,
            skip,
            read: req.op == OpKind::Read,
        };
        self.bounces.insert(req.user_data, bounce);
        Ok(())
    }
}

/// The mapping, checked on the way out: a device request made for `region` lies inside it
/// (regions do not overlap, so it touches no other region).
fn assert_inside(region: &Region, device_request: &IoRequest) {
    let start = device_request.offset;
    let end = start.checked_add(device_request.len as u64);
    let region_end = region.base.checked_add(region.len);
    assert!(
        start >= region.base && end.zip(region_end).is_some_and(|(end, limit)| end <= limit),
        "region engine: {} bytes at device offset {start} leave region {region:?}",
        device_request.len
    );
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

    fn supports_poll(&self) -> bool {
        // A poll names no region: it goes to the device's engine as it is.
        self.inner.supports_poll()
    }

    unsafe fn push(&mut self, req: &IoRequest) -> Result<()> {
        if !matches!(req.op, OpKind::Read | OpKind::Write) {
            // A sync of any region is a sync of the device; a nop goes as it is.
            let device_request = IoRequest {
                file: FileId(0),
                ..*req
            };
            // SAFETY: the same request under the same contract the caller gave us.
            return unsafe { self.inner.push(&device_request) };
        }
        let region = self.region_of(req)?;
        if !self.is_aligned(req) {
            // SAFETY: the caller's push contract, passed on.
            return unsafe { self.push_bounced(req, region) };
        }
        let device_request = IoRequest {
            file: FileId(0),
            offset: region.base + req.offset,
            ..*req
        };
        assert_inside(&region, &device_request);
        // SAFETY: the same buffer under the same contract the caller gave us.
        unsafe { self.inner.push(&device_request) }
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
            // The mapping, checked again on the way back: the copy stays inside the bounce
            // buffer and inside the caller's `len` bytes.
            assert!(
                b.skip + got <= b.buf.len() && got <= b.len,
                "region engine: {got} bytes at {} of a {}-byte bounce buffer",
                b.skip,
                b.buf.len()
            );
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

    // The doorbell is the inner engine's: its waits are the ones to end.
    fn watch_doorbell(&mut self, eventfd: Option<Arc<OwnedFd>>) -> bool {
        self.inner.watch_doorbell(eventfd)
    }

    fn wait_for_doorbell(&mut self, eventfd: &Arc<OwnedFd>) -> Result<DoorbellWakes> {
        self.inner.wait_for_doorbell(eventfd)
    }

    fn take_doorbell_wakes(&mut self) -> DoorbellWakes {
        self.inner.take_doorbell_wakes()
    }

    fn doorbell_address(&self) -> Result<Option<RingAddress>> {
        self.inner.doorbell_address()
    }

    fn post_doorbell_message(&mut self, to: &RingAddress) -> Result<bool> {
        self.inner.post_doorbell_message(to)
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
