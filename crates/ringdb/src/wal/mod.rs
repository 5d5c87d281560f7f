//! The write-ahead log: a circular file of checksummed batch records, group commit, and the
//! durability modes of the paper's Fig. 9.
//!
//! # Records
//! The format of a record, its encoding and decoding: `record.rs`.
//!
//! # Group commit
//! A commit appends its record to the in-memory tail and waits until the log is durable past
//! it. The first waiter that finds no write in progress becomes the writer: it takes the
//! whole tail (its own record and every record appended meanwhile), writes it with one write
//! (two when the tail wraps), makes it durable with one durability point, and wakes everyone.
//! Under light load a commit writes at once (no added latency); under load the tail grows
//! while a write is in flight, so one write and one sync serve many commits.
//!
//! # Space
//! The log's live part runs from the redo LSN of the last complete checkpoint to the end; a
//! record that would overwrite it must wait for a checkpoint ([`Wal::has_room`]).
//!
//! # Files
//! `record.rs` (the record format), `sync_thread.rs` (mode `thread`'s syncing thread), this
//! file (the writer: appends, group commit, space, durability).

mod record;
mod sync_thread;

pub use record::*;
use sync_thread::SyncThread;

use crate::catalog::TableId;
pub use crate::durability::Durability;
use crate::error::{LogFailure, OpenError, StorageError, WaitFor};
use crate::memory::{Meter, PartBytes};
use ringdb_io::FileId;
use ringdb_io::Io;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Groups a commit waits through (each one written, or one it waited for) before it gives up
/// with `StorageError::Stalled`: every group makes the log durable further, so reaching this
/// means none did.
const DURABLE_WAIT_ROUNDS_MAX: u64 = 1 << 24;

/// What the log counts.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct WalStats {
    /// Records (commits) appended.
    pub records: u64,
    /// Log writes (groups) and durability points.
    pub writes: u64,
    /// Durability points (fdatasync, flush) taken.
    pub syncs: u64,
    /// Bytes appended.
    pub bytes: u64,
    /// Commits that had to wait for a checkpoint to free log space.
    pub space_waits: u64,
    /// Page images logged before eviction wrote pages in place (see `buffer/steal.rs`).
    pub page_images: u64,
    /// Appends that waited for a log write because the log buffer was at its bound.
    pub buffer_waits: u64,
}

impl WalStats {
    /// Commits per durability point (group commit's effect).
    pub fn commits_per_sync(&self) -> f64 {
        if self.syncs == 0 {
            0.0
        } else {
            self.records as f64 / self.syncs as f64
        }
    }
}

struct State {
    /// The next record's LSN.
    end: u64,
    /// Bytes `[written, end)`, not yet handed to a write.
    tail: Vec<u8>,
    written: u64,
    durable: u64,
    /// Redo LSN of the last complete checkpoint: the log below it may be overwritten.
    reusable: u64,
    writing: bool,
    /// A write or sync failed: nothing after `durable` can be trusted; commits fail from now
    /// on and the database must be reopened (recovery decides what survived).
    failed: Option<Arc<LogFailure>>,
    durable_waiters: Vec<Waker>,
    /// Start LSNs of batches appended but not yet applied to the tree (a multiset).
    in_flight: BTreeMap<u64, u32>,
    stats: WalStats,
    /// Per commit-and-wait: one sync per commit instead of group commit (for the comparison).
    no_group: bool,
    /// Bytes (capacity) of the group being written now, besides the tail.
    writing_bytes: usize,
    /// During recovery's replay: the record being replayed (later ones are not in the tree
    /// yet, so with none in flight the oldest is this one, not the log's end).
    replay_floor: Option<u64>,
}

impl State {
    /// The log's positions keep their order: the live log starts at `reusable`, is durable
    /// up to `durable`, handed to writes up to `written`, and the tail holds the rest up to
    /// `end`. Checked wherever one of them moves.
    fn assert_lsn_order(&self) {
        assert!(
            self.reusable <= self.durable && self.durable <= self.written,
            "log positions out of order: reusable {} durable {} written {}",
            self.reusable,
            self.durable,
            self.written
        );
        assert_eq!(
            self.written + self.tail.len() as u64,
            self.end,
            "the tail does not reach the log's end"
        );
    }

    /// Bytes the log's buffers hold: the tail's capacity and the group being written.
    fn buffer_bytes(&self) -> u64 {
        (self.tail.capacity() + self.writing_bytes) as u64
    }

    /// Bytes of the log's bookkeeping: the batches in flight (an estimate of the ordered
    /// map's entries) and the waiters' list.
    fn bookkeeping_bytes(&self) -> u64 {
        let in_flight = self.in_flight.len() * IN_FLIGHT_ENTRY_BYTES;
        let waiters = self.durable_waiters.capacity() * std::mem::size_of::<Waker>();
        (in_flight + waiters) as u64
    }
}

/// The log buffer's bound unless `Options::log_buffer_bytes` says otherwise.
pub const DEFAULT_BUFFER_LIMIT_BYTES: usize = 4 << 20;
/// Log writes an append waits through for room in the buffer before it gives up with
/// `StorageError::Stalled` (each one empties the buffer into a write).
const BUFFER_WAIT_ROUNDS_MAX: u64 = 1 << 20;

/// What a record appended is: a batch (in flight until applied) or a page image.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Appended {
    Batch,
    PageImage,
}

/// Bytes one entry of the in-flight map takes, its share of a B-tree node included (an
/// estimate: a node holds up to 11 entries of 12 bytes plus its header).
const IN_FLIGHT_ENTRY_BYTES: usize = 24;

struct Inner {
    io: Io,
    file: FileId,
    mode: Durability,
    capacity: u64,
    /// Every record starts and ends on a multiple of this (1 for a file; the device's block
    /// size for a log on a raw device, whose writes must be whole blocks).
    align: usize,
    st: RefCell<State>,
    syncer: Option<SyncThread>,
    /// A log file in a mode whose write only copies into the page cache (`none`, `fdatasync`,
    /// `thread`): the file, written with `pwrite` on the shard's thread. Through the ring a
    /// buffered write to ext4 is handed to an io-wq worker (the kernel has no non-blocking
    /// buffered write there): a wake-up of another thread per log write that cost more than
    /// the copy. The sync still goes through the ring (or the helper thread).
    inline: Option<std::fs::File>,
    /// Set while the group writer is between taking the tail and finishing it.
    group_seq: Cell<u64>,
    /// What the tail and the group being written hold.
    buffer_meter: Meter,
    /// What the in-flight map and the waiters' list hold.
    bookkeeping_meter: Meter,
    /// Bytes the tail and the group being written may hold before an append waits for a log
    /// write (back-pressure; a record is always accepted into an empty tail).
    buffer_limit: Cell<usize>,
    /// The oldest batch in flight (the log's end when none is), published for the buffer
    /// pool: a page becoming dirty records it (see `buffer/steal.rs`).
    oldest_unapplied: Rc<Cell<u64>>,
}

/// The log of one database (one thread). Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct Wal {
    inner: Rc<Inner>,
}

impl Wal {
    /// A log over `file` (a file of the runtime's table; `sync_file`, a handle on the same
    /// file, is what the helper thread of mode `thread` syncs: that mode needs one) of
    /// `capacity` bytes, whose next record goes at `end`; everything before `end` is durable
    /// (recovery synced it), and the live part starts at `reusable`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        io: Io,
        file: FileId,
        sync_file: Option<std::fs::File>,
        mode: Durability,
        capacity: u64,
        end: u64,
        reusable: u64,
        align: usize,
    ) -> Result<Wal, OpenError> {
        assert!(mode.logged(), "a log in mode off");
        assert!(capacity.is_multiple_of(8) && capacity >= 64 * 1024);
        assert!(reusable <= end && end - reusable <= capacity);
        assert!(align.is_power_of_two() && align >= 8 && capacity.is_multiple_of(align as u64));
        assert!(
            end.is_multiple_of(align as u64),
            "log end {end} not aligned to {align}"
        );
        let (syncer, inline) = match mode {
            // `Db::open_on` refuses mode `thread` without a log file, before recovery.
            Durability::Thread => {
                let file = sync_file.expect("durability thread needs the log as an open file");
                let inline = file.try_clone().ok();
                (Some(SyncThread::start(file)?), inline)
            }
            // The sync (or none) goes through the ring or the helper; the write itself only
            // copies into the page cache. Not `odsync`: there the write is the sync.
            Durability::None | Durability::Fdatasync => (None, sync_file),
            _ => (None, None),
        };
        Ok(Wal {
            inner: Rc::new(Inner {
                io,
                file,
                mode,
                capacity,
                align,
                st: RefCell::new(State {
                    end,
                    tail: Vec::new(),
                    written: end,
                    durable: end,
                    reusable,
                    writing: false,
                    failed: None,
                    durable_waiters: Vec::new(),
                    in_flight: BTreeMap::new(),
                    stats: WalStats::default(),
                    no_group: false,
                    writing_bytes: 0,
                    replay_floor: None,
                }),
                syncer,
                inline,
                group_seq: Cell::new(0),
                buffer_meter: Meter::default(),
                bookkeeping_meter: Meter::default(),
                // Recovery replays batches from `reusable` on: never below it.
                oldest_unapplied: Rc::new(Cell::new(reusable)),
                buffer_limit: Cell::new(DEFAULT_BUFFER_LIMIT_BYTES),
            }),
        })
    }

    pub fn mode(&self) -> Durability {
        self.inner.mode
    }

    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    pub fn end(&self) -> u64 {
        self.inner.st.borrow().end
    }

    pub fn durable(&self) -> u64 {
        self.inner.st.borrow().durable
    }

    pub fn stats(&self) -> WalStats {
        self.inner.st.borrow().stats
    }

    /// What the log's buffers hold (the tail and the group being written), and its
    /// bookkeeping (the batches in flight, the waiters).
    pub fn memory(&self) -> (PartBytes, PartBytes) {
        (
            self.inner.buffer_meter.read(),
            self.inner.bookkeeping_meter.read(),
        )
    }

    /// Measures the log's buffers and bookkeeping again (after they changed), and publishes
    /// the oldest batch in flight.
    fn measure(&self, st: &State) {
        self.inner.buffer_meter.set(st.buffer_bytes());
        self.inner.bookkeeping_meter.set(st.bookkeeping_bytes());
        let none_in_flight = st.replay_floor.unwrap_or(st.end);
        let oldest = st
            .in_flight
            .keys()
            .next()
            .copied()
            .unwrap_or(none_in_flight);
        assert!(
            oldest >= self.inner.oldest_unapplied.get(),
            "the oldest batch in flight goes back"
        );
        self.inner.oldest_unapplied.set(oldest);
    }

    /// The cell that always holds the oldest batch in flight (the log's end when none is).
    pub fn oldest_unapplied(&self) -> Rc<Cell<u64>> {
        self.inner.oldest_unapplied.clone()
    }

    /// Bounds the log buffer (the tail and the group being written) to `bytes`.
    pub fn set_buffer_limit(&self, bytes: usize) {
        self.inner.buffer_limit.set(bytes.max(1));
    }

    /// Waits until a record of `len` bytes fits in the log buffer's bound, writing the tail
    /// out meanwhile (back-pressure: the buffer never grows past its bound but to take one
    /// record into an empty tail).
    pub async fn wait_buffer_room(&self, len: usize) -> Result<(), StorageError> {
        for _ in 0..BUFFER_WAIT_ROUNDS_MAX {
            let end = {
                let mut st = self.inner.st.borrow_mut();
                Self::check_failed(&st)?;
                // What the tail's allocation becomes with the record in it (a `Vec` grows to at
                // least twice its capacity), beside the group being written.
                let (cap, need) = (st.tail.capacity(), st.tail.len() + len);
                let grown = if need <= cap { cap } else { need.max(2 * cap) };
                if st.tail.is_empty() || grown + st.writing_bytes <= self.inner.buffer_limit.get() {
                    return Ok(());
                }
                st.stats.buffer_waits += 1;
                st.end
            };
            self.wait_durable(end).await?;
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::LogBuffer { record_bytes: len },
            rounds: BUFFER_WAIT_ROUNDS_MAX,
        })
    }

    /// Bytes a page image record of `page_bytes` takes in this log.
    pub fn page_image_len(&self, page_bytes: usize) -> usize {
        page_image_record_len(page_bytes).next_multiple_of(self.inner.align)
    }

    /// Appends the image of page `page` (sealed); returns its end LSN. Call
    /// [`has_room`](Self::has_room) first.
    pub fn append_page_image(&self, page: u64, image: &[u8]) -> Result<u64, StorageError> {
        let len = self.page_image_len(image.len());
        let (_, end) = self.append_with(len, Appended::PageImage, |out, lsn| {
            encode_page_image_len(out, lsn, page, image, len)
        })?;
        Ok(end)
    }

    /// One durability point per commit instead of one per group (for measuring group commit).
    pub fn set_group_commit(&self, on: bool) {
        self.inner.st.borrow_mut().no_group = !on;
    }

    /// Bytes of live log (from the last checkpoint's redo LSN to the end).
    pub fn live_bytes(&self) -> u64 {
        let st = self.inner.st.borrow();
        st.end - st.reusable
    }

    /// The largest record accepted (a quarter of the log, so checkpoints can always make room).
    pub fn max_record(&self) -> usize {
        (self.inner.capacity / 4) as usize
    }

    fn check_failed(st: &State) -> Result<(), StorageError> {
        match &st.failed {
            Some(first) => Err(StorageError::LogFailed {
                source: first.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Bytes `len` would take at the current end, padding to the end of the lap included.
    fn space_for(&self, st: &State, len: usize) -> u64 {
        let cap = self.inner.capacity;
        let left = cap - st.end % cap;
        if (len as u64) <= left {
            len as u64
        } else {
            left + len as u64
        }
    }

    /// Bytes the record of `ops` takes in this log (block-padded on a raw device).
    pub fn record_len(&self, ops: &[Op]) -> usize {
        record_len(ops).next_multiple_of(self.inner.align)
    }

    /// Whether a record of `len` bytes fits without overwriting the live log.
    pub fn has_room(&self, len: usize) -> bool {
        let st = self.inner.st.borrow();
        st.end - st.reusable + self.space_for(&st, len) <= self.inner.capacity
    }

    /// Appends the record of `ops` to the tail and marks it in flight (not yet applied);
    /// returns its start and end LSNs. Call [`has_room`](Self::has_room) first.
    pub fn append(&self, ops: &[Op]) -> Result<(u64, u64), StorageError> {
        let len = self.record_len(ops);
        self.append_with(len, Appended::Batch, |out, lsn| {
            encode_record_len(out, lsn, ops, len)
        })
    }

    /// Bytes the record creating a table named `name` takes in this log.
    pub fn create_record_len(&self, name: &str) -> usize {
        create_record_len(name).next_multiple_of(self.inner.align)
    }

    /// Appends the record creating table `table` named `name`, in flight like a batch's;
    /// returns its start and end LSNs. Call [`has_room`](Self::has_room) first.
    pub fn append_create_table(
        &self,
        table: TableId,
        name: &str,
    ) -> Result<(u64, u64), StorageError> {
        let len = self.create_record_len(name);
        self.append_with(len, Appended::Batch, |out, lsn| {
            encode_create_len(out, lsn, table, name, len)
        })
    }

    /// Appends a record of `len` bytes that `encode` writes at the LSN it is given; a batch
    /// is in flight until [`applied`](Self::applied).
    fn append_with(
        &self,
        len: usize,
        what: Appended,
        encode: impl FnOnce(&mut Vec<u8>, u64),
    ) -> Result<(u64, u64), StorageError> {
        assert!(len <= self.max_record(), "record of {len} bytes");
        let cap = self.inner.capacity;
        let mut st = self.inner.st.borrow_mut();
        Self::check_failed(&st)?;
        assert!(
            st.end - st.reusable + self.space_for(&st, len) <= cap,
            "append without room"
        );
        let left = (cap - st.end % cap) as usize;
        if len > left {
            // The record would straddle the wrap: pad the rest of the lap. A gap too small
            // for a pad header is skipped by the reader on its own.
            let at = st.end;
            if left >= RECORD_HEADER {
                encode_pad(&mut st.tail, at, left);
            } else {
                let n = st.tail.len();
                st.tail.resize(n + left, 0);
            }
            st.end += left as u64;
        }
        let start = st.end;
        encode(&mut st.tail, start);
        st.end += len as u64;
        assert!(st.end > start, "appended LSNs must increase");
        assert_eq!(
            st.written + st.tail.len() as u64,
            st.end,
            "a record's encoding is not its length"
        );
        match what {
            Appended::Batch => {
                *st.in_flight.entry(start).or_insert(0) += 1;
                st.stats.records += 1;
            }
            Appended::PageImage => st.stats.page_images += 1,
        }
        st.assert_lsn_order();
        self.measure(&st);
        Ok((start, st.end))
    }

    /// Recovery: the batch at `start` (already in the log) is being replayed.
    pub fn mark_in_flight(&self, start: u64) {
        let mut st = self.inner.st.borrow_mut();
        *st.in_flight.entry(start).or_insert(0) += 1;
        st.replay_floor = Some(start);
        self.measure(&st);
    }

    /// Recovery replayed every record: from now on, with no batch in flight, the oldest is the
    /// log's end.
    pub fn end_replay(&self) {
        self.inner.st.borrow_mut().replay_floor = None;
    }

    /// The batch that started at `start` is now in the tree.
    pub fn applied(&self, start: u64) {
        let mut st = self.inner.st.borrow_mut();
        let n = st
            .in_flight
            .get_mut(&start)
            .expect("applied a batch that is not in flight");
        *n -= 1;
        if *n == 0 {
            st.in_flight.remove(&start);
        }
        self.measure(&st);
    }

    /// A checkpoint's cut: (redo LSN, end). Every record before the redo LSN is wholly in the
    /// tree; records from it on may be partly in it and are replayed whole (idempotently).
    pub fn cut(&self) -> (u64, u64) {
        let st = self.inner.st.borrow();
        let redo = st.in_flight.keys().next().copied().unwrap_or(st.end);
        (redo.min(st.end), st.end)
    }

    /// A checkpoint with this redo LSN is complete: the log before it may be reused.
    pub fn checkpointed(&self, redo: u64) {
        let mut st = self.inner.st.borrow_mut();
        assert!(redo <= st.end);
        assert!(
            redo >= st.reusable,
            "a checkpoint's redo LSN {redo} goes back before {}",
            st.reusable
        );
        st.reusable = redo;
        st.assert_lsn_order();
    }

    /// Waits until the log is durable up to `lsn` (writing it if no one else is), or fails
    /// if the log failed.
    pub async fn wait_durable(&self, lsn: u64) -> Result<(), StorageError> {
        for _ in 0..DURABLE_WAIT_ROUNDS_MAX {
            let write = {
                let st = self.inner.st.borrow();
                Self::check_failed(&st)?;
                if st.durable >= lsn {
                    return Ok(());
                }
                !st.writing
            };
            if write {
                self.write_group(lsn).await?;
            } else {
                let seq = self.inner.group_seq.get();
                DurableWait {
                    wal: self.clone(),
                    seq,
                }
                .await;
            }
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::DurableLog { lsn },
            rounds: DURABLE_WAIT_ROUNDS_MAX,
        })
    }

    /// Writes the tail (up to `upto` only when group commit is off) and makes it durable.
    async fn write_group(&self, upto: u64) -> Result<(), StorageError> {
        let inner = &self.inner;
        let (from, bytes) = {
            let mut st = inner.st.borrow_mut();
            assert!(!st.writing);
            st.writing = true;
            let from = st.written;
            let take = if st.no_group {
                (upto - from) as usize
            } else {
                st.tail.len()
            };
            let rest = st.tail.split_off(take);
            let bytes = std::mem::replace(&mut st.tail, rest);
            st.written = from + bytes.len() as u64;
            st.writing_bytes = bytes.capacity();
            self.measure(&st);
            (from, bytes)
        };
        let to = from + bytes.len() as u64;
        // The first failure stays: every later commit reports it.
        let res = self.write_and_sync(from, bytes).await.map_err(|e| {
            let mut st = inner.st.borrow_mut();
            let first = st.failed.get_or_insert_with(|| Arc::new(e));
            StorageError::LogFailed {
                source: first.clone(),
            }
        });
        let mut st = inner.st.borrow_mut();
        st.writing = false;
        st.writing_bytes = 0;
        if res.is_ok() {
            assert!(
                to >= st.durable && to <= st.written,
                "durable LSN moves from {} to {to}, written {}",
                st.durable,
                st.written
            );
            st.durable = to;
            st.stats.writes += 1;
            st.stats.bytes += to - from;
            if inner.mode != Durability::None {
                st.stats.syncs += 1;
            }
        }
        st.assert_lsn_order();
        inner.group_seq.set(inner.group_seq.get() + 1);
        let waiters = std::mem::take(&mut st.durable_waiters);
        self.measure(&st);
        drop(st);
        for w in waiters {
            w.wake();
        }
        res
    }

    async fn write_and_sync(&self, from: u64, mut bytes: Vec<u8>) -> Result<(), LogFailure> {
        let inner = &self.inner;
        let cap = inner.capacity;
        let mut at = from;
        while !bytes.is_empty() {
            let off = at % cap;
            let n = bytes.len().min((cap - off) as usize);
            let rest = bytes.split_off(n);
            let r = match &inner.inline {
                Some(file) => write_inline(file, off, &bytes),
                None => crate::chunked::write_all(&inner.io, inner.file, off, bytes).await,
            };
            match r {
                Ok(w) if w == n => {}
                Ok(w) => {
                    return Err(LogFailure::ShortWrite {
                        lsn: at,
                        written_bytes: w,
                        expected_bytes: n,
                    })
                }
                Err(source) => return Err(LogFailure::Write { lsn: at, source }),
            }
            at += n as u64;
            bytes = rest;
        }
        match inner.mode {
            // On a passthrough engine a sync of the log is an NVMe Flush through the ring.
            Durability::Fdatasync | Durability::NvmeFlush => inner
                .io
                .fsync(inner.file, true)
                .await
                .map_err(|source| LogFailure::Sync { source }),
            Durability::Thread => {
                let syncer = inner.syncer.as_ref();
                syncer
                    .expect("thread mode has a sync thread")
                    .sync(&inner.io)
                    .await
            }
            Durability::None | Durability::Odsync => Ok(()),
            Durability::Off => unreachable!("a log in mode off"),
        }
    }
}

/// Writes `bytes` at `offset` of `file` with `pwrite` on this thread (mode `none`, see
/// `Inner::inline`); returns the bytes written, short only where the file took fewer.
fn write_inline(file: &std::fs::File, offset: u64, bytes: &[u8]) -> ringdb_io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut done = 0;
    // Bounded: each round writes at least one byte or ends.
    while done < bytes.len() {
        match file.write_at(&bytes[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(source) => {
                return Err(ringdb_io::IoError::Op {
                    op: "log write",
                    offset: offset + done as u64,
                    source,
                })
            }
        }
    }
    Ok(done)
}

/// Parks until the group writer finishes the group that was running when it registered.
struct DurableWait {
    wal: Wal,
    seq: u64,
}

impl Future for DurableWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.wal.inner.group_seq.get() != self.seq {
            return Poll::Ready(());
        }
        // (Registered again after a spurious wake-up: the writer takes the whole list.)
        self.wal
            .inner
            .st
            .borrow_mut()
            .durable_waiters
            .push(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str) -> Op {
        Op::Put {
            table: TableId::DEFAULT,
            key: k.as_bytes().to_vec(),
            value: v.as_bytes().to_vec(),
        }
    }

    #[test]
    fn records_round_trip_and_reject_damage() {
        let ops = vec![
            put("a", "1"),
            Op::Delete {
                table: TableId::DEFAULT,
                key: b"b".to_vec(),
            },
            put("c", ""),
        ];
        let mut buf = Vec::new();
        encode_record(&mut buf, 4096, &ops);
        assert_eq!(buf.len(), record_len(&ops));
        assert_eq!(buf.len() % 8, 0);
        let (len, d) = decode_record(&buf, 4096).expect("intact");
        assert_eq!(len, buf.len());
        assert_eq!(d, Decoded::Batch(ops));
        assert!(decode_record(&buf, 4096 + 8).is_none(), "wrong position");
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            assert!(decode_record(&bad, 4096).is_none(), "flip at {i} accepted");
        }
        assert!(decode_record(&buf[..buf.len() - 8], 4096).is_none(), "torn");
    }

    #[test]
    fn table_records_round_trip_and_reject_damage() {
        let in_table = |t: u32, k: &str| Op::Put {
            table: TableId::from_raw(t),
            key: k.as_bytes().to_vec(),
            value: b"v".to_vec(),
        };
        let ops = vec![in_table(0, "a"), in_table(7, "b"), in_table(u32::MAX, "c")];
        let mut buf = Vec::new();
        encode_record(&mut buf, 64, &ops);
        assert_eq!(buf[16], KIND_TABLE_BATCH, "a batch naming tables says so");
        assert_eq!(
            decode_record(&buf, 64),
            Some((buf.len(), Decoded::Batch(ops)))
        );
        let mut create = Vec::new();
        encode_create_record(&mut create, 128, TableId::from_raw(3), "users");
        assert_eq!(create.len(), create_record_len("users"));
        let want = Decoded::CreateTable {
            table: TableId::from_raw(3),
            name: "users".into(),
        };
        assert_eq!(decode_record(&create, 128), Some((create.len(), want)));
        for record in [buf, create] {
            for i in 0..record.len() {
                let mut bad = record.clone();
                bad[i] ^= 0x04;
                let lsn = u64::from_le_bytes(record[8..16].try_into().unwrap());
                assert!(decode_record(&bad, lsn).is_none(), "flip at {i} accepted");
            }
        }
    }

    #[test]
    fn a_create_record_for_the_default_table_or_a_bad_name_is_not_a_record() {
        for (table, name) in [(0, "t"), (1, ""), (1, &"n".repeat(65)[..])] {
            let mut buf = Vec::new();
            let len = (CREATE_HEADER + name.len()).next_multiple_of(8);
            encode_create_len(&mut buf, 8, TableId::from_raw(table), name, len);
            assert!(decode_record(&buf, 8).is_none(), "{table} {name:?}");
        }
    }

    #[test]
    fn pads_decode() {
        let mut buf = Vec::new();
        encode_pad(&mut buf, 64, 40);
        assert_eq!(decode_record(&buf, 64), Some((40, Decoded::Pad)));
    }

    #[test]
    fn durability_names_parse() {
        for d in Durability::ALL {
            assert_eq!(d.name().parse::<Durability>(), Ok(d));
        }
        assert!("fsync".parse::<Durability>().is_err());
    }
}
