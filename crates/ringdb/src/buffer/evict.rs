//! Free frames and eviction: clock-sweep rounds that collect up to `evict_batch` victims,
//! drop the clean ones and write the dirty ones back together (one submission per round).
//!
//! One round sweeps at a time; tasks that find no free frame meanwhile wait for it. A round
//! ends once its writes are submitted, so the next may sweep while they are out, up to
//! [`WRITE_ROUNDS_OUT_MAX`] rounds' worth (out of memory with 5% updates, holding the round
//! open for its writes left the CPU idle; measured: docs/results/issue15-cpu-per-op.md). Under
//! a log,
//! a dirty page is written here only when `steal.rs` allows it (its structure is in the last
//! complete checkpoint, and the log is durable past it first); when only other dirty pages
//! are left, the round runs a checkpoint instead (the checkpoint hook).

use super::frame::{Inner, WAIT_ROUNDS_MAX};
use super::wait::{wait, WaitOn};
use super::{BufferManager, PageId};
use crate::error::{StorageError, WaitFor};
use futures_util::future::join_all;
use ringdb_io::PoolBuf;
use std::rc::Rc;

/// Eviction rounds whose writes may be out at once (in pages: this many `evict_batch`es). A
/// bound on the frames held by writes; more rounds wait for some to come back.
const WRITE_ROUNDS_OUT_MAX: usize = 4;

/// Counts a wait for a free frame (a wait of [`super::PoolStats::frame_waits`]'s kind).
fn count_frame_wait(stats: &mut super::PoolStats) {
    stats.waits += 1;
    stats.frame_waits += 1;
}

/// A page on its way to the target: its slot, its id, and its sealed frame.
pub(super) type Outgoing = (usize, PageId, PoolBuf);

impl BufferManager {
    /// A free frame, evicting a round when the pool runs low.
    pub(super) async fn take_frame(&self) -> Result<PoolBuf, StorageError> {
        let inner = &self.inner;
        for _ in 0..WAIT_ROUNDS_MAX {
            inner.check_poisoned()?;
            if self.free_frames() < inner.cfg.free_target && self.may_start_round() {
                self.evict_round().await?;
                // The evictor serves itself first: otherwise the others can take every frame
                // it frees, round after round, and it never gets one (seen: a 2 s stall).
                if let Some(b) = inner.state.borrow_mut().free_bufs.pop() {
                    return Ok(b);
                }
                continue;
            }
            if let Some(b) = self.pop_free_frame() {
                return Ok(b);
            }
            // A frame orphaned by a cancelled read comes back through the runtime's pool.
            if let Some(b) = inner.io.lease_buf() {
                return Ok(b);
            }
            inner.bump(count_frame_wait);
            wait(inner, WaitOn::Frames).await;
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::FreeFrame,
            rounds: WAIT_ROUNDS_MAX,
        })
    }

    /// A free frame, if any; when more are left and tasks wait for one, the next is woken
    /// (waiters are woken one per freed frame, see `Inner::wake_frame_waiters`).
    fn pop_free_frame(&self) -> Option<PoolBuf> {
        let inner = &self.inner;
        let (frame, more) = {
            let mut st = inner.state.borrow_mut();
            let frame = st.free_bufs.pop();
            (frame, !st.free_bufs.is_empty())
        };
        if frame.is_some() && more {
            inner.wake_frame_waiters(1);
        }
        frame
    }

    /// Waits until at least `n` frames are free (evicting as needed), so that a caller can
    /// then `alloc_page` up to `n` times without waiting. Holds no pins while it waits.
    pub async fn ensure_free(&self, n: usize) -> Result<(), StorageError> {
        assert!(
            n <= self.inner.cfg.frames / 2,
            "ensure_free({n}) asks too much"
        );
        let inner = &self.inner;
        for _ in 0..WAIT_ROUNDS_MAX {
            inner.check_poisoned()?;
            if self.free_frames() >= n {
                if self.free_frames() > n {
                    // More than this task needs: pass the wake-up on.
                    inner.wake_frame_waiters(1);
                }
                return Ok(());
            }
            // A frame orphaned by a cancelled read comes back through the runtime's pool.
            if let Some(b) = inner.io.lease_buf() {
                inner.free_frame(&mut inner.state.borrow_mut(), b);
                continue;
            }
            if self.may_start_round() {
                self.evict_round().await?;
            } else {
                inner.bump(count_frame_wait);
                wait(inner, WaitOn::Frames).await;
            }
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::FreeFrames { frames: n },
            rounds: WAIT_ROUNDS_MAX,
        })
    }

    /// Whether a task may start an eviction round now: none is sweeping, and fewer than
    /// [`WRITE_ROUNDS_OUT_MAX`] rounds' worth of writes are still out.
    fn may_start_round(&self) -> bool {
        let inner = &self.inner;
        !inner.evicting.get()
            && inner.writes_out.get() < WRITE_ROUNDS_OUT_MAX * inner.cfg.evict_batch
    }

    /// One round of clock-sweep: up to `evict_batch` victims, dirty ones written together.
    /// The round ends (the next may start) once its writes are submitted, not when they
    /// complete: a round held open for its writes capped eviction at one batch per write
    /// latency, and a write-heavy run out of memory idled a fifth of its time waiting for it.
    async fn evict_round(&self) -> Result<(), StorageError> {
        let inner = &self.inner;
        assert!(!inner.evicting.get(), "one eviction round at a time");
        inner.evicting.set(true);
        let flag = EvictingFlag {
            inner: inner.clone(),
        };
        inner.bump(|s| s.evict_rounds += 1);
        let (dirty, freed) = self.sweep();
        if freed > 0 {
            inner.wake_frame_waiters(freed as usize);
        }
        if dirty.is_empty() {
            inner.bump(|s| s.evicted += freed);
            return self.after_clean_round(freed, flag).await;
        }
        let (written, first_err) = match self.write_ahead_of(&dirty).await {
            Ok(true) => {
                let out = WritesOut::new(inner, dirty.len());
                drop(flag);
                let result = self.write_back_victims(dirty).await;
                drop(out);
                result
            }
            // No room in the log for the pages' images: they stay dirty, and a checkpoint
            // (which frees the log) makes room.
            Ok(false) => {
                self.keep_victims(dirty);
                inner.bump(|s| s.evicted += freed);
                let hook = inner.checkpoint.borrow().clone();
                drop(flag);
                return match hook {
                    Some(hook) => hook().await,
                    None => Ok(()),
                };
            }
            Err(e) => {
                self.keep_victims(dirty);
                (0, Some(e))
            }
        };
        inner.bump(|s| s.evicted += freed + written);
        inner.debug_check();
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The clock's sweep: up to `evict_batch` victims among unpinned resident pages not
    /// referenced since the hand last passed. Clean victims are freed at once (their count is
    /// returned); dirty ones (a pool that steals) come back sealed, in state `Writing`.
    fn sweep(&self) -> (Vec<Outgoing>, u64) {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        let n = st.slots.len();
        let (mut dirty, mut freed, mut victims) = (Vec::new(), 0u64, 0);
        for _ in 0..2 * n {
            if victims == inner.cfg.evict_batch {
                break;
            }
            let slot = st.hand;
            st.hand = (st.hand + 1) % n;
            let cells = &inner.cells[slot];
            if cells.pins.get() != 0 {
                continue;
            }
            let Some(s) = st.slots[slot].as_mut() else {
                continue;
            };
            if !s.is_resident() || (s.dirty && !inner.may_steal(s)) {
                continue;
            }
            if cells.referenced() {
                cells.set_referenced(false);
                continue;
            }
            victims += 1;
            if s.dirty {
                let pid = s.pid;
                dirty.push((slot, pid, s.start_write(cells)));
            } else {
                let buf = inner.release_slot(&mut st, slot).expect("resident frame");
                inner.free_frame(&mut st, buf);
                freed += 1;
            }
        }
        (dirty, freed)
    }

    /// A round that wrote nothing: run a checkpoint when it freed nothing and dirty pages that
    /// may not be written back are left, or when it freed less than a batch and such pages
    /// fill most of the pool (see [`mostly_unstealable`](Self::mostly_unstealable)); else,
    /// when it freed nothing, wait for the next change in the free frames (pages in I/O or
    /// pinned). `flag` ends the round.
    async fn after_clean_round(&self, freed: u64, flag: EvictingFlag) -> Result<(), StorageError> {
        let inner = &self.inner;
        let hook = inner.checkpoint.borrow().clone();
        let unstealable = inner.unstealable_dirty();
        if (freed == 0 && unstealable > 0) || self.mostly_unstealable(freed, unstealable) {
            if let Some(hook) = hook {
                // Every evictable page is dirty and may not be written back: only a
                // checkpoint can make them clean.
                drop(flag);
                return hook().await;
            }
        }
        if freed == 0 {
            // Nothing evictable now (pages in I/O or pinned): wait, round open, for the next
            // unpin or freed frame.
            inner.bump(|s| s.waits += 1);
            wait(inner, WaitOn::Evictable).await;
        }
        drop(flag);
        Ok(())
    }

    /// Whether a round that freed `freed` clean pages left a pool whose pages are mostly dirty
    /// and may not be written back (`unstealable`, more than three quarters of the frames):
    /// then only a checkpoint makes room. Freeing a few clean pages is no way out: one large
    /// batch (a multi-megabyte value) that needs more pages than are clean would trade the
    /// last clean frames among its own pages forever, each round freeing one, and never run
    /// the checkpoint that a round freeing none runs.
    fn mostly_unstealable(&self, freed: u64, unstealable: usize) -> bool {
        let frames = self.inner.cfg.frames;
        debug_assert!(
            unstealable <= frames,
            "{unstealable} dirty pages in {frames} frames"
        );
        freed < self.inner.cfg.evict_batch as u64 && unstealable * 4 > frames * 3
    }

    /// Writes the dirty victims and frees those written; a page whose write failed stays
    /// resident and dirty (nothing is lost; the caller sees the error: EIO, ENOSPC). Returns
    /// the pages freed and the first error.
    async fn write_back_victims(&self, dirty: Vec<Outgoing>) -> (u64, Option<StorageError>) {
        let inner = &self.inner;
        let (mut freed, mut first_err) = (0u64, None);
        for (slot, pid, r, buf) in self.write_pages(dirty).await {
            let mut st = inner.state.borrow_mut();
            let cells = &inner.cells[slot];
            assert_eq!(cells.pins.get(), 0, "page {pid} pinned in its write");
            st.slot_mut(slot).finish_write(buf, cells);
            match check_write(r, inner.cfg.page_size, pid) {
                Ok(()) => {
                    let b = inner.release_slot(&mut st, slot).expect("frame is back");
                    inner.free_frame(&mut st, b);
                    freed += 1;
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
            drop(st);
            inner.wake_io(pid);
        }
        (freed, first_err)
    }

    /// Writes sealed pages (slots in state `Writing`, frames taken out) in one submission
    /// (paper Sec. 3.3.1) and hands the frames back with the results. Dropped midway, it
    /// poisons the pool (see `Inner::poisoned`).
    pub(super) async fn write_pages(
        &self,
        batch: Vec<Outgoing>,
    ) -> Vec<(usize, PageId, ringdb_io::Result<usize>, PoolBuf)> {
        let inner = &self.inner;
        let mut cancel = CancelWrites {
            inner: inner.clone(),
            armed: true,
        };
        let writes = join_all(batch.into_iter().map(|(slot, pid, buf)| async move {
            let (r, buf) = inner.io.write(inner.file, inner.offset(pid), buf).await;
            (slot, pid, r, buf)
        }));
        let results = inner.io.submit_together(writes).await;
        cancel.armed = false;
        inner.bump(|s| s.writes += results.len() as u64);
        results
    }
}

/// A whole page written, or why not.
pub(super) fn check_write(
    r: ringdb_io::Result<usize>,
    page_size: usize,
    pid: PageId,
) -> Result<(), StorageError> {
    match r {
        Ok(n) if n == page_size => Ok(()),
        Ok(n) => Err(StorageError::ShortWrite {
            page: pid,
            written_bytes: n,
            page_bytes: page_size,
        }),
        Err(e) => Err(e.into()),
    }
}

/// Ends an eviction round: the next one may start, and waiters look again.
struct EvictingFlag {
    inner: Rc<Inner>,
}

impl Drop for EvictingFlag {
    fn drop(&mut self) {
        self.inner.evicting.set(false);
        self.inner.wake_frames();
    }
}

/// Counts a round's writes as out (see `Inner::writes_out`) until they are back; then the
/// tasks waiting for frames look again (a round may start, frames were freed).
struct WritesOut {
    inner: Rc<Inner>,
    pages: usize,
}

impl WritesOut {
    fn new(inner: &Rc<Inner>, pages: usize) -> WritesOut {
        inner.writes_out.set(inner.writes_out.get() + pages);
        WritesOut {
            inner: inner.clone(),
            pages,
        }
    }
}

impl Drop for WritesOut {
    fn drop(&mut self) {
        let out = self.inner.writes_out.get();
        assert!(out >= self.pages, "more writes back than went out");
        self.inner.writes_out.set(out - self.pages);
        self.inner.wake_frames();
    }
}

/// Marks the pool poisoned when writes are dropped mid-flight (see `Inner::poisoned`).
struct CancelWrites {
    inner: Rc<Inner>,
    armed: bool,
}

impl Drop for CancelWrites {
    fn drop(&mut self) {
        if self.armed {
            self.inner.poisoned.set(true);
            let pids: Vec<PageId> = self.inner.io_waiters.borrow().keys().copied().collect();
            for pid in pids {
                self.inner.wake_io(pid);
            }
            self.inner.wake_frames();
        }
    }
}
