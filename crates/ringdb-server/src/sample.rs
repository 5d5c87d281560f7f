//! RANDOMKEY, and DBSIZE's count: walks that neither return the first key every time nor
//! hold every key in memory.
//!
//! A random key without a walk: the keys are ordered bytes, so a point drawn between the
//! first and the last key, and the first live key at or after it, is a key drawn from the
//! key space. The point interpolates the 8 bytes after the first and last keys' common
//! prefix, so keys that share a prefix and differ in what follows it ("key:000001" ...
//! "key:999999") are drawn about evenly; keys after large gaps in the byte order are drawn
//! more often, as Redis's own RANDOMKEY favours keys of sparse buckets.

use crate::command::hashes::random_below;
use crate::command::Reply;
use crate::value::{now_ms, Physical};
use ringdb::Db;
use std::ops::Bound;

/// Live keys after the drawn point among which RANDOMKEY chooses.
const WINDOW_KEYS: usize = 16;

/// Records looked at after the drawn point (expired keys are skipped).
const RECORDS_PER_DRAW_MAX: usize = 256;

fn failed(error: impl std::fmt::Display) -> Reply {
    Reply::error(format!("ERR scan failed: {error}"))
}

/// Whether a stored value is a live key's (not expired, and written by this server).
fn live(value: &[u8], now: u64) -> bool {
    Physical::decode(value).is_ok_and(|physical| !physical.expired_at(now))
}

/// What INFO's keyspace section says of the database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyspaceCounts {
    /// Live keys.
    pub keys: u64,
    /// Live keys with a deadline.
    pub expires: u64,
    /// Their average time left, in milliseconds (0 without any).
    pub average_ttl_ms: u64,
}

/// The number of live keys, counted as the walk goes (DBSIZE).
pub fn count_live_keys(db: &Db) -> Result<u64, Reply> {
    keyspace_counts(db).map(|counts| counts.keys)
}

/// The live keys, those with a deadline and their average time left, in one walk over the
/// keys (INFO keyspace, DBSIZE): nothing collected, one record at a time.
pub fn keyspace_counts(db: &Db) -> Result<KeyspaceCounts, Reply> {
    let now = now_ms();
    let mut counts = KeyspaceCounts::default();
    let mut ttl_sum_ms = 0u128;
    for pair in db.range::<Vec<u8>, _>(..) {
        let (_, value) = pair.map_err(failed)?;
        let Ok(physical) = Physical::decode(&value) else {
            continue;
        };
        if physical.expired_at(now) {
            continue;
        }
        counts.keys += 1;
        if let Some(deadline) = physical.deadline_ms() {
            counts.expires += 1;
            ttl_sum_ms += u128::from(deadline.saturating_sub(now));
        }
    }
    if counts.expires > 0 {
        counts.average_ttl_ms = (ttl_sum_ms / u128::from(counts.expires)) as u64;
    }
    debug_assert!(counts.expires <= counts.keys);
    Ok(counts)
}

/// A key drawn at random (RANDOMKEY), `None` when there is no live key: one of the next
/// [`WINDOW_KEYS`] live keys (the walk wrapping to the first key) from a point drawn between
/// the first and the last key, so a small database's keys are drawn about evenly too.
pub fn random_key(db: &Db) -> Result<Option<Vec<u8>>, Reply> {
    let first = db
        .range::<Vec<u8>, _>(..)
        .next()
        .transpose()
        .map_err(failed)?;
    let last = db
        .range::<Vec<u8>, _>(..)
        .next_back()
        .transpose()
        .map_err(failed)?;
    let (Some((first, _)), Some((last, _))) = (first, last) else {
        return Ok(None);
    };
    let now = now_ms();
    let start = point_between(&first, &last, random_below);
    let after = db.range::<Vec<u8>, _>((Bound::Included(start.clone()), Bound::Unbounded));
    let before = db.range::<Vec<u8>, _>((Bound::Unbounded, Bound::Excluded(start)));
    let mut window = Vec::new();
    for pair in after.chain(before).take(RECORDS_PER_DRAW_MAX) {
        let (key, value) = pair.map_err(failed)?;
        if live(&value, now) {
            window.push(key);
        }
        if window.len() == WINDOW_KEYS {
            break;
        }
    }
    if window.is_empty() {
        return first_live_key(db, now);
    }
    let chosen = random_below(window.len() as u64) as usize;
    Ok(Some(window.swap_remove(chosen)))
}

/// The first live key (every key near the drawn point had expired).
fn first_live_key(db: &Db, now: u64) -> Result<Option<Vec<u8>>, Reply> {
    for pair in db.range::<Vec<u8>, _>(..) {
        let (key, value) = pair.map_err(failed)?;
        if live(&value, now) {
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// A byte string between `first` and `last` (`first <= last`): their common prefix, then up
/// to 8 bytes each drawn between the two keys' bytes at that place (the first place between
/// theirs, which differ; the later ones between the lower and the higher of theirs, so keys
/// of one alphabet, digits or hex, are drawn place by place within it).
fn point_between(first: &[u8], last: &[u8], mut draw: impl FnMut(u64) -> u64) -> Vec<u8> {
    debug_assert!(first <= last, "the first key sorts after the last");
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let mut key = first[..common].to_vec();
    for place in common..common + 8 {
        let (low, high) = match (first.get(place), last.get(place)) {
            (None, None) => break,
            (Some(&a), Some(&b)) if place == common => (a, b),
            (a, b) => {
                let (a, b) = (a.copied().unwrap_or(0), b.copied().unwrap_or(0));
                (a.min(b), a.max(b))
            }
        };
        let width = u64::from(high - low) + 1;
        key.push(low + draw(width) as u8);
    }
    debug_assert!(key.len() <= common + 8);
    key
}

#[cfg(test)]
mod tests {
    use super::point_between;

    #[test]
    fn points_lie_between_the_first_and_last_keys_and_spread_over_them() {
        let (first, last) = (b"key:000000".as_slice(), b"key:999999".as_slice());
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut draw = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let mut counts = [[0usize; 10]; 6];
        for _ in 0..2000 {
            let point = point_between(first, last, &mut draw);
            assert!(
                point.as_slice() >= first && point.as_slice() <= last,
                "{point:?}"
            );
            for (place, count) in counts.iter_mut().enumerate() {
                let digit = point[4 + place].wrapping_sub(b'0');
                assert!(digit <= 9, "{point:?}");
                count[digit as usize] += 1;
            }
        }
        // Every digit at every place is drawn, about a tenth of the time.
        assert!(
            counts.iter().flatten().all(|&count| count > 120),
            "{counts:?}"
        );
        assert_eq!(point_between(b"same", b"same", |_| 0), b"same".to_vec());
        assert_eq!(point_between(b"a", b"ab", |_| 0), b"a\0".to_vec());
    }
}
