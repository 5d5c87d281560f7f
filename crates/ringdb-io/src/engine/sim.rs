//! `sim`: a deterministic simulated disk for crash and fault tests.
//!
//! A [`SimDisk`] is a shared handle on the disks of one simulated machine: a table of files,
//! each held twice, as the *volatile* image (what reads see: every write that has completed)
//! and the *durable* image (what survives a power cut). Engines made with [`SimDisk::engine`]
//! run requests against it; every random choice (completion order, which un-synced writes
//! survive a cut, where a write tears, short lengths, random faults) comes from the seed, so a
//! failing run replays exactly.
//!
//! # Durability model
//! - A completed write (or [`SimDisk::set_len`]) is *un-synced* until an `fsync` or
//!   `fdatasync` of the same file completes that was submitted (handed over by
//!   [`Engine::submit`]) after the write had completed. A sync submitted while the write was
//!   still in flight does not cover it. Both syncs cover data and size changes (the size is
//!   metadata needed to read the data back, which `fdatasync` persists too). A failed sync
//!   covers nothing.
//! - [`SimDisk::power_cut`] keeps a seed-chosen subset of the un-synced changes (disks write
//!   back in any order), applied in completion order, and may tear one surviving write: only a
//!   prefix of it ending on an absolute 512-byte boundary of the file reaches the media. The
//!   volatile image becomes the durable one. Engines made before the cut are dead: everything
//!   they had in flight and everything pushed to them later completes with `-EIO`.
//!
//! # Engine model
//! [`Engine::push`] queues; [`Engine::submit`] hands the queued requests to the simulated
//! device and completes a seed-chosen subset of everything at the device, in a seed-chosen
//! order: at least `wait_for` completions are ready afterwards (or everything, if fewer are in
//! flight), and beyond that each further request completes with probability 1/2. So requests
//! complete out of submission order, even across submits, and `submit(0)` may leave requests
//! at the device. A write's bytes are copied from its buffer when it completes, a read's into
//! its buffer when it completes; nothing touches a buffer after that, so dropping an engine
//! with requests in flight simply loses them (like a killed process) and needs no drain.
//!
//! # What the kernel enforces
//! A file marked with [`SimDisk::set_direct`] behaves as one opened with `O_DIRECT`: a read or
//! write whose buffer address, offset or length is not a multiple of the file's alignment
//! completes with `-EINVAL` and moves nothing, as the kernel refuses it. A read past the end
//! returns what lies before the end (0 bytes at or past it), short writes come from
//! [`SimFault::ShortWrite`]. Tests that open a database on a simulated disk mark its data file
//! direct, as a directory opens it, so a buffer the engine forgot to align fails there too.
//!
//! # Several databases, files written off the rings, cuts at a chosen moment
//! [`SimDisk::engine_over`] makes an engine that sees a subset of the files (its `FileId(i)` is
//! the disk's file `files[i]`), so several databases (a sharded one's shards) live on one disk
//! and one power cut hits them all at the same instant. [`SimDisk::blocking_file`] gives a
//! file to code that writes with plain blocking calls ([`BlockingFile`]): its writes and syncs
//! follow the same durability model, completing at once. [`SimDisk::cut_after`] cuts the power
//! right after a chosen write or sync completes (the write itself un-synced, so it may be lost
//! or torn), to aim a cut at a protocol's step instead of a random moment.
//!
//! Files are capped at [`SIM_MAX_FILE_LEN`] bytes; a write past it fails with `-EFBIG`.
//! One `SimDisk` may be shared by several engines; the replay is exact as long as the order
//! of calls on it is (one thread, or a deterministic interleaving).

use super::{Engine, EngineStats, FileId, IoCompletion, IoRequest, OpKind};
use crate::blocking_file::BlockingFile;
use crate::config::EngineKind;
use crate::error::{IoError, Result};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Largest file a simulated disk holds (the images live in memory).
pub const SIM_MAX_FILE_LEN: u64 = 1 << 30;

/// The unit a write can tear at, and short reads and writes are multiples of.
const SECTOR: u64 = 512;

/// A fault [`SimDisk::inject`] arms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimFault {
    /// Reads, writes and syncs: the request does nothing and completes with `-EIO`.
    Eio,
    /// Writes: nothing is written; the request completes with `-ENOSPC`.
    Enospc,
    /// Reads: fewer bytes than asked (and than available), a multiple of 512, are read.
    ShortRead,
    /// Writes: only a prefix whose length is a multiple of 512 (shorter than asked) is
    /// written; the completion carries that length.
    ShortWrite,
}

impl SimFault {
    /// Whether this fault can hit a request of kind `op` (never a `Nop`).
    fn applies_to(self, op: OpKind) -> bool {
        match self {
            SimFault::Eio => op != OpKind::Nop,
            SimFault::Enospc | SimFault::ShortWrite => op == OpKind::Write,
            SimFault::ShortRead => op == OpKind::Read,
        }
    }
}

/// The write a power cut tore.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SimTear {
    /// The file it was written to.
    pub file: u32,
    /// Offset and length of the write as issued.
    pub offset: u64,
    /// Bytes the write carried.
    pub len: u64,
    /// Bytes of it that reached the media: `offset + kept` is a multiple of 512 and
    /// `0 < kept < len`.
    pub kept: u64,
}

/// What a [`SimDisk`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SimStats {
    /// Reads completed without a fault (short reads included).
    pub reads: u64,
    /// Writes that reached the volatile image (short writes included).
    pub writes: u64,
    /// `fsync`/`fdatasync` completed successfully.
    pub syncs: u64,
    /// Faults that fired (one-shot and random).
    pub faults_injected: u64,
    /// Reads and writes of an `O_DIRECT` file refused with `EINVAL` for their alignment.
    pub direct_refused: u64,
    /// Power cuts so far.
    pub power_cuts: u64,
    /// Power cuts [`SimDisk::cut_after`] made (counted in `power_cuts` too).
    pub cuts_triggered: u64,
    /// Un-synced writes the last power cut dropped entirely.
    pub cut_writes_dropped: u64,
    /// Un-synced writes that survived the last power cut (the torn one included).
    pub cut_writes_kept: u64,
    /// Writes the last power cut tore (0 or 1).
    pub cut_writes_torn: u64,
    /// The write the last power cut tore, if any.
    pub last_tear: Option<SimTear>,
}

/// splitmix64: small, fast, and good enough to drive a simulation.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    /// An independent stream for purpose `tag` under `seed`.
    fn stream(seed: u64, tag: u64) -> Rng {
        let mut r = Rng(seed ^ tag.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        r.next_u64();
        r
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

const TAG_FAULTS: u64 = 1;
const TAG_CUTS: u64 = 2;
const TAG_ENGINE: u64 = 0x1000;

/// A change that reached the volatile image and is not yet durable.
#[derive(Clone, Debug)]
struct Unsynced {
    /// Position in the disk-wide completion order.
    seq: u64,
    change: Change,
}

#[derive(Clone, Debug)]
enum Change {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Clone, Debug, Default)]
struct SimFile {
    volatile: Vec<u8>,
    durable: Vec<u8>,
    /// In completion order.
    unsynced: Vec<Unsynced>,
    /// `O_DIRECT`: the alignment of buffer, offset and length every read and write needs.
    direct_align: Option<u64>,
}

impl SimFile {
    /// Whether the kernel would refuse `req` on this file: `O_DIRECT` and one of its buffer
    /// address, offset and length off the file's alignment (`EINVAL`).
    fn refuses(&self, req: &IoRequest) -> bool {
        let Some(align) = self.direct_align else {
            return false;
        };
        debug_assert!(align.is_power_of_two());
        !(req.offset.is_multiple_of(align)
            && u64::from(req.len).is_multiple_of(align)
            && (req.buf as u64).is_multiple_of(align))
    }

    /// Makes every un-synced change with `seq <= upto` durable.
    fn make_durable(&mut self, upto: u64) {
        let n = self.unsynced.partition_point(|u| u.seq <= upto);
        for u in self.unsynced.drain(..n) {
            apply(&mut self.durable, &u.change, None);
        }
    }
}

/// Applies `change` to `image`; for a write, only its first `keep` bytes when given.
fn apply(image: &mut Vec<u8>, change: &Change, keep: Option<usize>) {
    match change {
        Change::Write { offset, data } => {
            let data = &data[..keep.unwrap_or(data.len())];
            write_into(image, *offset, data);
        }
        Change::SetLen(len) => image.resize(*len as usize, 0),
    }
}

/// Writes `data` at `offset`, extending `image` (zero-filling any gap) as needed.
fn write_into(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let off = offset as usize;
    let end = off + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[off..end].copy_from_slice(data);
}

#[derive(Clone, Copy, Debug)]
struct Armed {
    fault: SimFault,
    file: Option<u32>,
    op: Option<OpKind>,
    /// Matching requests still to let through before firing.
    skip: u64,
}

impl Armed {
    fn matches(&self, req: &IoRequest) -> bool {
        self.fault.applies_to(req.op)
            && self.op.is_none_or(|o| o == req.op)
            && self.file.is_none_or(|f| f == req.file.0)
    }
}

/// A power cut armed by [`SimDisk::cut_after`].
#[derive(Clone, Copy, Debug)]
struct CutAt {
    file: u32,
    op: OpKind,
    /// Matching changes still to let through before cutting.
    skip: u64,
}

impl CutAt {
    /// Whether a completed `op` on `file` counts (`Fsync` and `Fdatasync` are both syncs).
    fn matches(&self, file: u32, op: OpKind) -> bool {
        let sync = |o| matches!(o, OpKind::Fsync | OpKind::Fdatasync);
        file == self.file && (op == self.op || (sync(op) && sync(self.op)))
    }
}

#[derive(Clone, Copy, Debug)]
struct RandomFault {
    fault: SimFault,
    op: Option<OpKind>,
    p: f64,
}

#[derive(Debug)]
struct Disk {
    seed: u64,
    /// Bumped by every power cut; engines of an older epoch are dead.
    epoch: u64,
    engines_made: u64,
    /// Disk-wide count of changes that reached the volatile image.
    seq: u64,
    files: Vec<SimFile>,
    armed: Vec<Armed>,
    random: Vec<RandomFault>,
    cut_at: Option<CutAt>,
    fault_rng: Rng,
    cut_rng: Rng,
    stats: SimStats,
}

impl Disk {
    fn file(&mut self, file: u32) -> &mut SimFile {
        let n = self.files.len();
        self.files
            .get_mut(file as usize)
            .unwrap_or_else(|| panic!("sim disk: file {file} out of {n}"))
    }

    /// The fault (if any) that hits `req`, decided when it is pushed.
    fn pick_fault(&mut self, req: &IoRequest) -> Option<SimFault> {
        let mut hit = None;
        let mut i = 0;
        while i < self.armed.len() {
            let a = &mut self.armed[i];
            if a.matches(req) {
                if a.skip > 0 {
                    a.skip -= 1;
                } else if hit.is_none() {
                    hit = Some(a.fault);
                    self.armed.remove(i);
                    continue;
                }
            }
            i += 1;
        }
        if hit.is_none() {
            for r in &self.random {
                if r.fault.applies_to(req.op)
                    && r.op.is_none_or(|o| o == req.op)
                    && self.fault_rng.chance(r.p)
                {
                    hit = Some(r.fault);
                    break;
                }
            }
        }
        if hit.is_some() {
            self.stats.faults_injected += 1;
        }
        hit
    }

    /// Performs `slot` against the images; returns the completion's result.
    fn complete(&mut self, slot: &Slot, epoch: u64) -> i32 {
        if epoch != self.epoch {
            return -libc::EIO;
        }
        let req = &slot.req;
        let direct_io = matches!(req.op, OpKind::Read | OpKind::Write);
        if direct_io && self.files[req.file.0 as usize].refuses(req) {
            self.stats.direct_refused += 1;
            return -libc::EINVAL;
        }
        let result = match (req.op, slot.fault) {
            (OpKind::Nop, _) => 0,
            (OpKind::PollIn, _) => unreachable!("push refuses polls"),
            (_, Some(SimFault::Eio)) => -libc::EIO,
            (_, Some(SimFault::Enospc)) => -libc::ENOSPC,
            (OpKind::Read, fault) => self.complete_read(req, fault),
            (OpKind::Write, fault) => self.complete_write(req, fault),
            (OpKind::Fsync | OpKind::Fdatasync, _) => {
                self.sync(req.file.0, slot.covers_upto);
                0
            }
        };
        if result >= 0 {
            self.cut_if_armed(req.file.0, req.op);
        }
        result
    }

    /// A completed sync of `file` covering the changes up to `upto`.
    fn sync(&mut self, file: u32, upto: u64) {
        self.file(file).make_durable(upto);
        self.stats.syncs += 1;
    }

    /// After a completed `op` on `file`: cuts the power if [`SimDisk::cut_after`] armed it
    /// for this one.
    fn cut_if_armed(&mut self, file: u32, op: OpKind) {
        let Some(cut) = &mut self.cut_at else { return };
        if !cut.matches(file, op) {
            return;
        }
        if cut.skip > 0 {
            cut.skip -= 1;
            return;
        }
        self.cut_at = None;
        self.power_cut();
        self.stats.cuts_triggered += 1;
    }

    /// A read of `req` against the volatile image (short when `fault` says, or at the end).
    fn complete_read(&mut self, req: &IoRequest, fault: Option<SimFault>) -> i32 {
        let file = &self.files[req.file.0 as usize];
        let avail = (file.volatile.len() as u64).saturating_sub(req.offset);
        let mut n = avail.min(req.len as u64);
        if fault == Some(SimFault::ShortRead) && n > 0 {
            n = self.fault_rng.below((n - 1) / SECTOR + 1) * SECTOR;
        }
        if n > 0 {
            let src = &file.volatile[req.offset as usize..(req.offset + n) as usize];
            // SAFETY: the push contract keeps `req.buf` valid for `req.len >= n` bytes
            // and untouched by the caller until this completion is reaped; `src` lies
            // in the disk's own memory, so the two do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), req.buf, n as usize) };
        }
        self.stats.reads += 1;
        n as i32
    }

    /// A write of `req` into the volatile image, un-synced (short when `fault` says).
    fn complete_write(&mut self, req: &IoRequest, fault: Option<SimFault>) -> i32 {
        let mut n = req.len as u64;
        if fault == Some(SimFault::ShortWrite) {
            let whole = n.saturating_sub(1) / SECTOR;
            n = if whole == 0 {
                0
            } else {
                (1 + self.fault_rng.below(whole)) * SECTOR
            };
        }
        if req.offset.saturating_add(n) > SIM_MAX_FILE_LEN {
            return -libc::EFBIG;
        }
        let data = if n == 0 {
            Vec::new()
        } else {
            // SAFETY: the push contract keeps `req.buf` valid for `req.len >= n` bytes
            // until this completion is reaped; it is only read here.
            unsafe { std::slice::from_raw_parts(req.buf, n as usize) }.to_vec()
        };
        self.write(req.file.0, req.offset, data);
        n as i32
    }

    /// Sets `file`'s length in the volatile image, un-synced.
    fn set_len(&mut self, file: u32, len: u64) {
        self.seq += 1;
        let seq = self.seq;
        let f = self.file(file);
        f.volatile.resize(len as usize, 0);
        f.unsynced.push(Unsynced {
            seq,
            change: Change::SetLen(len),
        });
    }

    /// Writes `data` at `offset` of `file`'s volatile image, un-synced.
    fn write(&mut self, file: u32, offset: u64, data: Vec<u8>) {
        self.seq += 1;
        let seq = self.seq;
        let file = self.file(file);
        write_into(&mut file.volatile, offset, &data);
        if !data.is_empty() {
            file.unsynced.push(Unsynced {
                seq,
                change: Change::Write { offset, data },
            });
        }
        self.stats.writes += 1;
    }

    fn power_cut(&mut self) {
        let mut dropped = 0;
        let mut kept = 0;
        // Which un-synced changes survive, per file, in completion order.
        let mut survive: Vec<Vec<bool>> = Vec::with_capacity(self.files.len());
        // Surviving writes that cross a sector boundary: (file, index, first boundary, count).
        let mut tearable = Vec::new();
        for (fi, f) in self.files.iter().enumerate() {
            let mut s = Vec::with_capacity(f.unsynced.len());
            for (ui, u) in f.unsynced.iter().enumerate() {
                let keep = self.cut_rng.coin();
                s.push(keep);
                if let Change::Write { offset, data } = &u.change {
                    if !keep {
                        dropped += 1;
                        continue;
                    }
                    kept += 1;
                    let end = offset + data.len() as u64;
                    let first = (offset / SECTOR + 1) * SECTOR;
                    if first < end {
                        let count = (end - 1 - first) / SECTOR + 1;
                        tearable.push((fi, ui, first, count));
                    }
                }
            }
            survive.push(s);
        }
        let mut tear = None;
        if !tearable.is_empty() && self.cut_rng.coin() {
            let (fi, ui, first, count) =
                tearable[self.cut_rng.below(tearable.len() as u64) as usize];
            let boundary = first + self.cut_rng.below(count) * SECTOR;
            if let Change::Write { offset, data } = &self.files[fi].unsynced[ui].change {
                tear = Some((
                    fi,
                    ui,
                    SimTear {
                        file: fi as u32,
                        offset: *offset,
                        len: data.len() as u64,
                        kept: boundary - offset,
                    },
                ));
            }
        }
        for (fi, (f, s)) in self.files.iter_mut().zip(&survive).enumerate() {
            for (ui, (u, &keep)) in f.unsynced.iter().zip(s).enumerate() {
                if !keep {
                    continue;
                }
                let cut = match tear {
                    Some((tf, tu, t)) if tf == fi && tu == ui => Some(t.kept as usize),
                    _ => None,
                };
                apply(&mut f.durable, &u.change, cut);
            }
            f.unsynced.clear();
            f.volatile = f.durable.clone();
        }
        self.epoch += 1;
        self.stats.power_cuts += 1;
        self.stats.cut_writes_dropped = dropped;
        self.stats.cut_writes_kept = kept;
        self.stats.cut_writes_torn = tear.is_some() as u64;
        self.stats.last_tear = tear.map(|(_, _, t)| t);
    }
}

/// A shared handle on a simulated machine's disks. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct SimDisk {
    inner: Arc<Mutex<Disk>>,
}

impl std::fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.lock();
        f.debug_struct("SimDisk")
            .field("seed", &d.seed)
            .field("files", &d.files.len())
            .field("epoch", &d.epoch)
            .field("stats", &d.stats)
            .finish()
    }
}

impl SimDisk {
    /// `files` empty files; every random choice comes from `seed`.
    pub fn new(seed: u64, files: usize) -> SimDisk {
        SimDisk {
            inner: Arc::new(Mutex::new(Disk {
                seed,
                epoch: 0,
                engines_made: 0,
                seq: 0,
                files: vec![SimFile::default(); files],
                armed: Vec::new(),
                random: Vec::new(),
                cut_at: None,
                fault_rng: Rng::stream(seed, TAG_FAULTS),
                cut_rng: Rng::stream(seed, TAG_CUTS),
                stats: SimStats::default(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Disk> {
        // A panic while holding the lock (a failed assertion in a test) leaves the disk
        // consistent enough to inspect.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The seed that makes this disk's faults and tears repeatable.
    pub fn seed(&self) -> u64 {
        self.lock().seed
    }

    /// Number of files.
    pub fn files(&self) -> usize {
        self.lock().files.len()
    }

    /// A fresh engine over these files (`FileId(i)` = file `i`) holding up to `depth` requests.
    /// Its completion order comes from the seed and the number of engines made before it.
    pub fn engine(&self, depth: usize) -> Box<dyn Engine> {
        let files: Vec<u32> = (0..self.files() as u32).collect();
        self.engine_over(depth, &files)
    }

    /// A fresh engine over some of these files: its `FileId(i)` is file `files[i]` (so one
    /// disk holds several databases, and one cut hits them all). Like [`SimDisk::engine`]
    /// otherwise.
    pub fn engine_over(&self, depth: usize, files: &[u32]) -> Box<dyn Engine> {
        assert!(depth > 0, "sim engine: depth must be at least 1");
        let mut d = self.lock();
        let count = d.files.len();
        assert!(
            files.iter().all(|&f| (f as usize) < count),
            "sim engine: files {files:?} not all among the disk's {count}"
        );
        d.engines_made += 1;
        let rng = Rng::stream(d.seed, TAG_ENGINE + d.engines_made);
        Box::new(SimEngine {
            disk: self.clone(),
            epoch: d.epoch,
            files: files.to_vec(),
            depth,
            pending: VecDeque::new(),
            at_device: Vec::new(),
            ready: VecDeque::new(),
            stats: EngineStats::default(),
            rng,
        })
    }

    /// Makes `file` behave as one opened with `O_DIRECT` whose buffers, offsets and lengths
    /// must be multiples of `align_bytes` (a power of two: 512 for most disks, 4096 for a
    /// 4 KiB-sector one); others complete with `-EINVAL`.
    pub fn set_direct(&self, file: u32, align_bytes: u64) {
        assert!(
            align_bytes.is_power_of_two(),
            "sim disk: alignment {align_bytes} is not a power of two"
        );
        self.lock().file(file).direct_align = Some(align_bytes);
    }

    /// Current (volatile) length of `file`.
    pub fn len(&self, file: u32) -> u64 {
        self.lock().file(file).volatile.len() as u64
    }

    /// Sets `file`'s length like `ftruncate` (zero-filling when it grows); un-synced until the
    /// next completed sync of the file.
    pub fn set_len(&self, file: u32, len: u64) {
        assert!(
            len <= SIM_MAX_FILE_LEN,
            "sim disk: length {len} exceeds SIM_MAX_FILE_LEN"
        );
        self.lock().set_len(file, len);
    }

    /// Power cut: see the module documentation. Engines made before it fail every request
    /// from now on with `-EIO`.
    pub fn power_cut(&self) {
        self.lock().power_cut();
    }

    /// Cuts the power right after the `nth` next completed `op` on `file` (`nth = 0`: the
    /// next one; `Write`, or a sync: `Fsync` and `Fdatasync` count alike), through an engine
    /// or a [`SimBlockingFile`]. A write that triggers it is un-synced at the cut; a sync is
    /// durable. Replaces a cut armed before; [`SimStats::cuts_triggered`] counts the cuts made.
    pub fn cut_after(&self, file: u32, op: OpKind, nth: u64) {
        assert!(
            matches!(op, OpKind::Write | OpKind::Fsync | OpKind::Fdatasync),
            "sim disk: a cut follows a write or a sync, not {op:?}"
        );
        let mut d = self.lock();
        let _ = d.file(file);
        d.cut_at = Some(CutAt {
            file,
            op,
            skip: nth,
        });
    }

    /// `file` for code that writes it with plain blocking calls (see [`BlockingFile`]): each
    /// call completes at once under the durability model above. It is dead after a power cut
    /// (every call fails with `EIO`): take a new one to read what survived.
    pub fn blocking_file(&self, file: u32) -> SimBlockingFile {
        let epoch = {
            let mut d = self.lock();
            let _ = d.file(file);
            d.epoch
        };
        SimBlockingFile {
            disk: self.clone(),
            file,
            epoch,
        }
    }

    /// Makes the `nth` next request matching `file` and `op` (`None`: any) that `fault` can
    /// hit fail (`nth = 0`: the next one). Requests are counted as they are pushed. `Eio` hits
    /// reads, writes and syncs; `Enospc` and `ShortWrite` writes; `ShortRead` reads; none hits
    /// a `Nop`.
    pub fn inject(&self, fault: SimFault, file: Option<u32>, op: Option<OpKind>, nth: u64) {
        self.lock().armed.push(Armed {
            fault,
            file,
            op,
            skip: nth,
        });
    }

    /// Makes each request matching `op` (`None`: any) that `fault` can hit fail with
    /// probability `p`, until [`SimDisk::clear_faults`].
    pub fn inject_random(&self, fault: SimFault, op: Option<OpKind>, p: f64) {
        self.lock().random.push(RandomFault { fault, op, p });
    }

    /// Disarms every fault (requests already pushed keep theirs).
    pub fn clear_faults(&self) {
        let mut d = self.lock();
        d.armed.clear();
        d.random.clear();
    }

    /// Writes to `file` that completed but are not yet covered by a completed sync: what a
    /// power cut right now could drop or tear.
    pub fn unsynced_writes(&self, file: u32) -> usize {
        self.lock()
            .file(file)
            .unsynced
            .iter()
            .filter(|u| matches!(u.change, Change::Write { .. }))
            .count()
    }

    /// The bytes of `file` that would survive a power cut right now.
    pub fn durable_image(&self, file: u32) -> Vec<u8> {
        self.lock().file(file).durable.clone()
    }

    /// The bytes of `file` reads see now.
    pub fn volatile_image(&self, file: u32) -> Vec<u8> {
        self.lock().file(file).volatile.clone()
    }

    /// What the disk counted so far (writes, syncs, cuts, faults).
    pub fn stats(&self) -> SimStats {
        self.lock().stats
    }

    /// Flips bit `bit` (0..8) of byte `byte` of `file` in both images, where they hold it
    /// (media corruption). Panics if neither does.
    pub fn flip_bit(&self, file: u32, byte: u64, bit: u8) {
        assert!(bit < 8, "sim disk: bit {bit} is not in 0..8");
        let mut d = self.lock();
        let f = d.file(file);
        let b = byte as usize;
        assert!(
            b < f.volatile.len() || b < f.durable.len(),
            "sim disk: byte {byte} lies past the end of file {file}"
        );
        for image in [&mut f.volatile, &mut f.durable] {
            if let Some(x) = image.get_mut(b) {
                *x ^= 1 << bit;
            }
        }
    }
}

/// A file of a [`SimDisk`] for code that writes with plain blocking calls, made by
/// [`SimDisk::blocking_file`]. Cheap to clone; dead after a power cut. Faults armed with
/// [`SimDisk::inject`] do not hit it (they are matched against engine requests).
#[derive(Clone, Debug)]
pub struct SimBlockingFile {
    disk: SimDisk,
    file: u32,
    /// The disk's epoch when it was made: a cut since then kills it.
    epoch: u64,
}

impl SimBlockingFile {
    /// The disk, locked, when its power has not been cut since this file was made.
    fn alive(&self) -> std::io::Result<MutexGuard<'_, Disk>> {
        let d = self.disk.lock();
        if d.epoch != self.epoch {
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(d)
    }

    /// A sync: every change completed so far becomes durable.
    fn sync(&self, op: OpKind) -> std::io::Result<()> {
        let mut d = self.alive()?;
        let upto = d.seq;
        d.sync(self.file, upto);
        d.cut_if_armed(self.file, op);
        Ok(())
    }
}

impl BlockingFile for SimBlockingFile {
    fn read_all(&self) -> std::io::Result<Vec<u8>> {
        let mut d = self.alive()?;
        d.stats.reads += 1;
        Ok(d.file(self.file).volatile.clone())
    }

    fn write_all_at(&self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
        let mut d = self.alive()?;
        if offset.saturating_add(bytes.len() as u64) > SIM_MAX_FILE_LEN {
            return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
        }
        d.write(self.file, offset, bytes.to_vec());
        d.cut_if_armed(self.file, OpKind::Write);
        Ok(())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        self.sync(OpKind::Fdatasync)
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        let mut d = self.alive()?;
        if len > SIM_MAX_FILE_LEN {
            return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
        }
        d.set_len(self.file, len);
        Ok(())
    }

    fn sync_all(&self) -> std::io::Result<()> {
        self.sync(OpKind::Fsync)
    }
}

/// A request inside a [`SimEngine`].
#[derive(Clone, Copy, Debug)]
struct Slot {
    req: IoRequest,
    fault: Option<SimFault>,
    /// The disk's change count when the request reached the device: a sync covers the
    /// changes up to it.
    covers_upto: u64,
}

/// The engine [`SimDisk::engine`] and [`SimDisk::engine_over`] make.
struct SimEngine {
    disk: SimDisk,
    epoch: u64,
    /// The disk's file behind each of this engine's `FileId`s.
    files: Vec<u32>,
    depth: usize,
    /// Pushed, not yet submitted.
    pending: VecDeque<Slot>,
    /// Submitted, not yet completed.
    at_device: Vec<Slot>,
    ready: VecDeque<IoCompletion>,
    stats: EngineStats,
    rng: Rng,
}

impl Engine for SimEngine {
    /// There is no simulated kind in [`EngineKind`]; the sim behaves like an asynchronous,
    /// queueing engine, so it reports `Uring`.
    fn kind(&self) -> EngineKind {
        EngineKind::Uring
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.pending.len() + self.at_device.len() + self.ready.len()
    }

    fn pending(&self) -> usize {
        self.pending.len()
    }

    unsafe fn push(&mut self, req: &IoRequest) -> Result<()> {
        if self.in_flight() >= self.depth {
            return Err(IoError::QueueFull {
                engine: self.kind(),
                in_flight: self.in_flight(),
                depth: self.depth,
            });
        }
        if req.op == OpKind::PollIn {
            return Err(super::poll_refused(self.kind()));
        }
        let mut req = *req;
        if req.op != OpKind::Nop {
            let Some(&file) = self.files.get(req.file.0 as usize) else {
                return Err(IoError::NoSuchFile {
                    index: req.file.0,
                    files: self.files.len(),
                });
            };
            req.file = FileId(file);
        }
        let mut d = self.disk.lock();
        let fault = if d.epoch == self.epoch {
            d.pick_fault(&req)
        } else {
            None
        };
        self.pending.push_back(Slot {
            req,
            fault,
            covers_upto: 0,
        });
        Ok(())
    }

    fn submit(&mut self, wait_for: usize) -> Result<()> {
        let mut d = self.disk.lock();
        let n = self.pending.len();
        for mut s in self.pending.drain(..) {
            s.covers_upto = d.seq;
            self.at_device.push(s);
        }
        self.stats.submitted += n as u64;
        if n > 0 || wait_for > 0 {
            self.stats.enters += 1;
        }
        let target = wait_for.min(self.ready.len() + self.at_device.len());
        while !self.at_device.is_empty() {
            if self.ready.len() >= target && !self.rng.coin() {
                break;
            }
            let i = self.rng.below(self.at_device.len() as u64) as usize;
            let s = self.at_device.swap_remove(i);
            let result = d.complete(&s, self.epoch);
            self.ready.push_back(IoCompletion {
                user_data: s.req.user_data,
                result,
            });
        }
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        super::deliver_ready(&mut self.ready, out, &mut self.stats)
    }

    fn stats(&self) -> EngineStats {
        self.stats
    }
}
