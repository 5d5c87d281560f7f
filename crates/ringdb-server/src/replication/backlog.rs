//! The primary's replication stream: every committed batch of the server's tables, encoded
//! once, kept in a bounded backlog that replicas read from the offset they have applied.
//!
//! Offsets count the stream's bytes since this primary's stream began (its replication id
//! names that beginning). A batch is framed `len (u32 LE) | count (u32 LE) | changes`, a
//! change `table tag (u8) | put 0 / delete 1 (u8) | key len (u32 LE) | key | [value len (u32
//! LE) | value]`. A replica that asks for an offset the backlog no longer holds (it fell
//! behind by more than the backlog's bytes) must take a full copy again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::Waker;

/// The server's tables as the stream names them: keys, large values' chunks, hash fields.
pub const TABLE_TAGS: usize = 3;

/// One change, decoded from the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamChange {
    /// Which of the server's tables (`TABLE_TAGS`).
    pub tag: u8,
    /// The key.
    pub key: Vec<u8>,
    /// The value put (`None`: deleted).
    pub value: Option<Vec<u8>>,
}

/// Fetch waiters parked at once, at most (each is a replica's long poll).
const FETCH_WAITERS_MAX: usize = 1024;

/// What the backlog holds, under its lock.
struct State {
    /// Framed batches with the offset each starts at, oldest first.
    batches: VecDeque<(u64, Vec<u8>)>,
    /// The offset the next batch will start at.
    end: u64,
    /// Bytes held in `batches`.
    held_bytes: usize,
    /// Batches appended since the stream began.
    appended: u64,
    /// Replicas' long polls waiting for a batch past their offset.
    waiters: Vec<Waker>,
}

/// A bounded backlog of encoded batches.
pub struct Backlog {
    /// Whether commits are recorded: from the first replica's sync on.
    active: AtomicBool,
    capacity_bytes: usize,
    state: Mutex<State>,
}

impl Backlog {
    /// An empty, inactive backlog that keeps up to `capacity_bytes` of batches.
    pub fn new(capacity_bytes: usize) -> Backlog {
        assert!(capacity_bytes > 0);
        Backlog {
            active: AtomicBool::new(false),
            capacity_bytes,
            state: Mutex::new(State {
                batches: VecDeque::new(),
                end: 0,
                held_bytes: 0,
                appended: 0,
                waiters: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether commits are recorded.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Starts recording (a replica's first sync); returns the offset the stream is at. The
    /// flag is set under the lock, so every commit that finds it set appends at or after the
    /// offset returned.
    pub fn activate(&self) -> u64 {
        let state = self.lock();
        self.active.store(true, Ordering::Release);
        state.end
    }

    /// The offset the next batch will start at.
    pub fn end(&self) -> u64 {
        self.lock().end
    }

    /// Batches appended since the stream began.
    pub fn appended(&self) -> u64 {
        self.lock().appended
    }

    /// The oldest offset still held.
    pub fn start(&self) -> u64 {
        let state = self.lock();
        state
            .batches
            .front()
            .map_or(state.end, |(offset, _)| *offset)
    }

    /// Appends one framed batch (from [`encode_batch`]) and wakes the long polls.
    pub fn append(&self, framed: Vec<u8>) {
        let waiters = {
            let mut state = self.lock();
            let offset = state.end;
            state.end += framed.len() as u64;
            state.held_bytes += framed.len();
            state.appended += 1;
            state.batches.push_back((offset, framed));
            // The newest batch always stays, however large.
            while state.held_bytes > self.capacity_bytes && state.batches.len() > 1 {
                let (_, old) = state.batches.pop_front().expect("more than one batch");
                state.held_bytes -= old.len();
            }
            std::mem::take(&mut state.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }

    /// The framed batches from `offset` on, up to about `max_bytes` (at least one batch when
    /// there is one). `None`: the backlog no longer holds `offset`, or no batch starts there.
    pub fn read_from(&self, offset: u64, max_bytes: usize) -> Option<Vec<u8>> {
        let state = self.lock();
        if offset == state.end {
            return Some(Vec::new());
        }
        let first = state.batches.front().map_or(state.end, |(o, _)| *o);
        if offset < first || offset > state.end {
            return None;
        }
        let index = state
            .batches
            .binary_search_by_key(&offset, |(o, _)| *o)
            .ok()?;
        let mut out = Vec::new();
        for (_, framed) in state.batches.range(index..) {
            if !out.is_empty() && out.len() + framed.len() > max_bytes {
                break;
            }
            out.extend_from_slice(framed);
        }
        Some(out)
    }

    /// Parks `waker` until the next append (or the next tick of the replication clock);
    /// returns false when a batch past `offset` is already there.
    pub fn park(&self, offset: u64, waker: &Waker) -> bool {
        let mut state = self.lock();
        if state.end > offset {
            return false;
        }
        match state.waiters.len() < FETCH_WAITERS_MAX {
            true => state.waiters.push(waker.clone()),
            // Too many parked: poll again at once rather than risk never being woken.
            false => waker.wake_by_ref(),
        }
        true
    }

    /// Wakes every long poll (the replication clock's tick: they check their deadlines).
    pub fn wake_all(&self) {
        let waiters = std::mem::take(&mut self.lock().waiters);
        waiters.into_iter().for_each(Waker::wake);
    }
}

/// Encodes one batch's changes, `(tag, key, value)`, framed.
pub fn encode_batch<'a>(
    changes: impl Iterator<Item = (u8, &'a [u8], Option<&'a [u8]>)>,
) -> Vec<u8> {
    let mut out = vec![0u8; 8];
    let mut count = 0u32;
    for (tag, key, value) in changes {
        debug_assert!((tag as usize) < TABLE_TAGS);
        out.push(tag);
        out.push(u8::from(value.is_none()));
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
        if let Some(value) = value {
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
        count += 1;
    }
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_le_bytes());
    out[4..8].copy_from_slice(&count.to_le_bytes());
    out
}

/// Why a stream's bytes did not decode.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// Takes `n` bytes from `bytes` at `*at`.
fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], Malformed> {
    let end = at.checked_add(n).ok_or(Malformed("length overflows"))?;
    let taken = bytes.get(*at..end).ok_or(Malformed("truncated"))?;
    *at = end;
    Ok(taken)
}

fn take_u32(bytes: &[u8], at: &mut usize) -> Result<u32, Malformed> {
    let raw = take(bytes, at, 4)?;
    Ok(u32::from_le_bytes(raw.try_into().expect("four bytes")))
}

/// Decodes framed batches (whole ones only: a fetch never splits one); each batch's changes
/// and its framed length.
pub fn decode_batches(bytes: &[u8]) -> Result<Vec<(Vec<StreamChange>, usize)>, Malformed> {
    let mut at = 0;
    let mut batches = Vec::new();
    // Each pass consumes at least the 8-byte frame header.
    while at < bytes.len() {
        let started = at;
        let len = take_u32(bytes, &mut at)? as usize;
        let body = take(bytes, &mut at, len)?;
        batches.push((decode_changes(body)?, at - started));
    }
    Ok(batches)
}

/// One batch's changes (`body`: the count and the changes).
fn decode_changes(body: &[u8]) -> Result<Vec<StreamChange>, Malformed> {
    let mut at = 0;
    let count = take_u32(body, &mut at)? as usize;
    // A change takes at least 6 bytes: the count cannot ask for more than the body holds.
    if count > body.len() / 6 {
        return Err(Malformed("change count past the batch"));
    }
    let mut changes = Vec::with_capacity(count);
    for _ in 0..count {
        let head = take(body, &mut at, 2)?;
        let (tag, delete) = (head[0], head[1]);
        if tag as usize >= TABLE_TAGS || delete > 1 {
            return Err(Malformed("unknown table or operation"));
        }
        let key_len = take_u32(body, &mut at)? as usize;
        let key = take(body, &mut at, key_len)?.to_vec();
        let value = match delete {
            1 => None,
            _ => {
                let len = take_u32(body, &mut at)? as usize;
                Some(take(body, &mut at, len)?.to_vec())
            }
        };
        changes.push(StreamChange { tag, key, value });
    }
    if at != body.len() {
        return Err(Malformed("bytes after the last change"));
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(keys: &[&[u8]]) -> Vec<u8> {
        encode_batch(keys.iter().map(|k| (0u8, *k, Some(&b"v"[..]))))
    }

    #[test]
    fn batches_round_trip_and_reads_start_at_batch_boundaries() {
        let backlog = Backlog::new(1 << 20);
        let start = backlog.activate();
        backlog.append(batch(&[b"a", b"b"]));
        let second = backlog.end();
        backlog.append(encode_batch([(2u8, &b"k"[..], None)].into_iter()));
        let all = backlog.read_from(start, usize::MAX).expect("held");
        let decoded = decode_batches(&all).expect("decodes");
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[0].0[1].key, b"b");
        assert_eq!(decoded[1].0[0].value, None);
        assert_eq!(decoded[0].1 as u64, second - start);
        assert!(backlog.read_from(second + 1, 10).is_none());
        assert_eq!(backlog.read_from(backlog.end(), 10), Some(Vec::new()));
    }

    #[test]
    fn an_offset_the_backlog_dropped_is_refused() {
        let backlog = Backlog::new(64);
        backlog.activate();
        for _ in 0..20 {
            backlog.append(batch(&[b"0123456789"]));
        }
        assert!(backlog.read_from(0, usize::MAX).is_none());
        let kept = backlog.start();
        assert!(kept > 0);
        assert!(backlog.read_from(kept, usize::MAX).is_some());
    }

    #[test]
    fn malformed_streams_are_refused_without_panicking() {
        let good = batch(&[b"key"]);
        for cut in 0..good.len() {
            assert!(decode_batches(&good[..cut]).is_err() || cut == 0);
        }
        let mut huge = good.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_batches(&huge).is_err());
        let mut tag = good;
        tag[8] = 9;
        assert!(decode_batches(&tag).is_err());
    }
}
