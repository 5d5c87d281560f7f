//! [`Range`]: a streaming iterator over a key range, merged across shards in key order, from
//! either end.
//!
//! Each shard holds its keys in its own tree, so the iterator keeps, per shard and per end, a
//! buffer of the next keys that shard has in the range, fetched in chunks (32 pairs first,
//! doubling to 1024: a short scan costs little, a long one few round trips). The chunks of all
//! shards whose buffers ran dry are asked for at once, so the shards scan in parallel, and each
//! shard's scan reads the leaves it is about to visit in one batch (see `tree/scan.rs`). The
//! next pair is the smallest head among the shards' front buffers (the largest among the back
//! buffers for [`DoubleEndedIterator::next_back`]); the two ends stop where they meet.
//!
//! A forward chunk is first read on the caller's thread, leaf by leaf, in place (`here.rs`):
//! only a shard whose leaves are not resident, or kept changing, is asked for it.
//!
//! It is not a snapshot: a chunk shows the shard as it is when the chunk is read, so a key
//! written during the scan may or may not appear (never twice, never out of order). The
//! iterator holds a [`Db`] handle, so the database stays open while it lives.

use super::Db;
use crate::catalog::TableId;
use crate::error::ReadError;
use crate::tree::Direction;
use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

/// Pairs in the first chunk a shard is asked for.
const CHUNK_FIRST: usize = 32;
/// The largest chunk.
const CHUNK_MAX: usize = 1024;
/// Leaves a refill reads in place for one shard before it hands what is left to the shard
/// (many empty leaves in a row, after deletes).
const LEAVES_PER_REFILL_MAX: usize = 64;

/// A key and its value.
type Pair = (Vec<u8>, Vec<u8>);

/// One end of one shard's part of the scan.
struct Side {
    buffered: VecDeque<Pair>,
    /// Where the next chunk starts (the far end's bound on this side's walk).
    resume: Bound<Vec<u8>>,
    exhausted: bool,
    chunk: usize,
}

impl Side {
    fn new(resume: Bound<Vec<u8>>) -> Side {
        Side {
            buffered: VecDeque::new(),
            resume,
            exhausted: false,
            chunk: CHUNK_FIRST,
        }
    }

    fn needs_chunk(&self) -> bool {
        self.buffered.is_empty() && !self.exhausted
    }

    /// Takes a chunk in: what follows starts after its last key.
    fn take_chunk(&mut self, chunk: Vec<Pair>) {
        if chunk.len() < self.chunk {
            self.exhausted = true;
        }
        if let Some((last, _)) = chunk.last() {
            self.resume = Bound::Excluded(last.clone());
        }
        self.buffered.extend(chunk);
        self.chunk = (self.chunk * 2).min(CHUNK_MAX);
    }

    /// Takes in pairs read in place: what follows starts at `next` (`None`: nothing follows).
    fn take_here(&mut self, pairs: Vec<Pair>, next: Option<Bound<Vec<u8>>>) {
        match next {
            Some(next) => self.resume = next,
            None => self.exhausted = true,
        }
        debug_assert!(
            self.exhausted || !pairs.is_empty(),
            "a refill left a side empty"
        );
        self.buffered.extend(pairs);
        self.chunk = (self.chunk * 2).min(CHUNK_MAX);
    }
}

/// The keys and values of a range, in key order, merged across shards (see the module doc).
/// Each item is a pair or the error that ended the scan.
pub struct Range {
    db: Db,
    table: TableId,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    fronts: Vec<Side>,
    backs: Vec<Side>,
    /// The last key returned from the front, and from the back: the ends stop where they meet.
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    finished: bool,
}

fn owned(bound: Bound<&[u8]>) -> Bound<Vec<u8>> {
    bound.map(<[u8]>::to_vec)
}

/// The smallest key greater than every key with `prefix` (`None`: there is none): the
/// excluded end of a scan over that prefix.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

impl Db {
    /// The pairs with keys in `range`, in key order (`.rev()` for descending), streamed.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Range {
        let start = owned(range.start_bound().map(AsRef::as_ref));
        let end = owned(range.end_bound().map(AsRef::as_ref));
        Range::new(self.clone(), start, end)
    }

    /// The pairs whose keys start with `prefix`, in key order, streamed.
    pub fn prefix(&self, prefix: &[u8]) -> Range {
        let end = prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Range::new(self.clone(), Bound::Included(prefix.to_vec()), end)
    }
}

impl Range {
    fn new(db: Db, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Range {
        let shards = db.shard_count();
        Range {
            table: TableId::DEFAULT,
            fronts: (0..shards).map(|_| Side::new(start.clone())).collect(),
            backs: (0..shards).map(|_| Side::new(end.clone())).collect(),
            db,
            start,
            end,
            front_last: None,
            back_last: None,
            finished: false,
        }
    }

    /// The same range in `table`.
    pub(super) fn in_table(mut self, table: TableId) -> Range {
        self.table = table;
        self
    }

    /// Asks every shard whose buffer at this end ran dry for its next chunk, all at once.
    fn refill(&mut self, direction: Direction) -> Result<(), ReadError> {
        self.db.check_blocking_allowed()?;
        let sides = match direction {
            Direction::Forward => &mut self.fronts,
            Direction::Reverse => &mut self.backs,
        };
        let mut replies = Vec::new();
        for (shard, side) in sides.iter_mut().enumerate() {
            if !side.needs_chunk() {
                continue;
            }
            if direction == Direction::Forward
                && refill_here(&self.db, shard, self.table, side, &self.end)?
            {
                continue;
            }
            let (start, end) = match direction {
                Direction::Forward => (side.resume.clone(), self.end.clone()),
                Direction::Reverse => (self.start.clone(), side.resume.clone()),
            };
            let (limit, table) = (side.chunk, self.table);
            let reply = self.db.submit(shard, move |h| async move {
                h.scan_in(table, bound_ref(&start), bound_ref(&end), direction, limit)
                    .await
            })?;
            replies.push((shard, reply));
        }
        for (shard, reply) in replies {
            let chunk = self.db.wait(shard, reply)??;
            sides[shard].take_chunk(chunk);
        }
        Ok(())
    }

    /// The next pair from `direction`'s end, or the error that ends the scan.
    fn step(&mut self, direction: Direction) -> Option<Result<Pair, ReadError>> {
        if self.finished {
            return None;
        }
        if let Err(e) = self.refill(direction) {
            self.finished = true;
            return Some(Err(e));
        }
        let (sides, other_last) = match direction {
            Direction::Forward => (&mut self.fronts, &self.back_last),
            Direction::Reverse => (&mut self.backs, &self.front_last),
        };
        let heads = sides.iter().enumerate();
        let heads = heads.filter_map(|(shard, side)| Some((shard, &side.buffered.front()?.0)));
        let best = match direction {
            Direction::Forward => heads.min_by(|a, b| a.1.cmp(b.1)),
            Direction::Reverse => heads.max_by(|a, b| a.1.cmp(b.1)),
        };
        let Some((shard, key)) = best else {
            self.finished = true;
            return None;
        };
        let met = other_last.as_ref().is_some_and(|other| match direction {
            Direction::Forward => key >= other,
            Direction::Reverse => key <= other,
        });
        if met {
            self.finished = true;
            return None;
        }
        let pair = sides[shard].buffered.pop_front().expect("a head");
        match direction {
            Direction::Forward => self.front_last = Some(pair.0.clone()),
            Direction::Reverse => self.back_last = Some(pair.0.clone()),
        }
        Some(Ok(pair))
    }
}

/// Refills `side` (shard `shard`'s front) by reading its leaves in place, up to its chunk;
/// `false` when nothing could be read there (the shard must serve the chunk). A side it
/// refills holds at least one pair, or is exhausted.
fn refill_here(
    db: &Db,
    shard: usize,
    table: TableId,
    side: &mut Side,
    end: &Bound<Vec<u8>>,
) -> Result<bool, ReadError> {
    let mut pairs = Vec::new();
    let mut resume = side.resume.clone();
    for _ in 0..LEAVES_PER_REFILL_MAX {
        let bounds = (bound_ref(&resume), bound_ref(end));
        let limit = side.chunk - pairs.len();
        match db.scan_here(shard, table, bounds, Direction::Forward, limit, &mut pairs)? {
            None => break,
            Some(None) => {
                side.take_here(pairs, None);
                return Ok(true);
            }
            Some(Some(next)) => {
                resume = next;
                if pairs.len() >= side.chunk {
                    break;
                }
            }
        }
    }
    if pairs.is_empty() {
        return Ok(false);
    }
    side.take_here(pairs, Some(resume));
    Ok(true)
}

fn bound_ref(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    bound.as_ref().map(Vec::as_slice)
}

impl Iterator for Range {
    type Item = Result<Pair, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(Direction::Forward)
    }
}

impl DoubleEndedIterator for Range {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(Direction::Reverse)
    }
}

impl std::iter::FusedIterator for Range {}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn a_prefix_ends_at_its_successor() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }
}
