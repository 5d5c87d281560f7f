//! Bit commands on strings as key functions (see `mod.rs`): GETBIT, SETBIT, BITCOUNT and
//! BITPOS, with Redis 7.0's semantics and error texts. Bit 0 is the most significant bit of the
//! first byte. A missing key reads as an empty string (BITPOS: as endless zero bits).

use super::strings::{put, string_of, MAX_STRING_BYTES};
use super::{errors, parse_integer, Effect, Reply};
use crate::value::Stored;

/// The largest bit offset GETBIT and SETBIT take (a 512 MiB string).
const BIT_OFFSET_MAX: i64 = (MAX_STRING_BYTES as i64) * 8 - 1;

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const BAD_BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";

/// Bit `index` of `payload` (0 past its end).
fn bit_at(payload: &[u8], index: u64) -> u8 {
    payload
        .get((index / 8) as usize)
        .map_or(0, |byte| (byte >> (7 - index % 8)) & 1)
}

/// `GETBIT key offset`.
pub fn getbit(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let Some(offset) = parse_integer(&arguments[2]).filter(|o| (0..=BIT_OFFSET_MAX).contains(o))
    else {
        return Effect::reply(Reply::error(BAD_OFFSET));
    };
    match string_of(current) {
        Ok(current) => {
            let payload = current.map_or(&[][..], |stored| stored.payload);
            Effect::reply(Reply::Integer(i64::from(bit_at(payload, offset as u64))))
        }
        Err(error) => error,
    }
}

/// `SETBIT key offset value`: the bit's old value; the string grows with zero bytes.
pub fn setbit(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let Some(offset) = parse_integer(&arguments[2]).filter(|o| (0..=BIT_OFFSET_MAX).contains(o))
    else {
        return Effect::reply(Reply::error(BAD_OFFSET));
    };
    let Some(value) = parse_integer(&arguments[3]).filter(|v| *v == 0 || *v == 1) else {
        return Effect::reply(Reply::error(BAD_BIT));
    };
    let current = match string_of(current) {
        Ok(current) => current,
        Err(error) => return error,
    };
    let offset = offset as u64;
    let old = current.map_or(&[][..], |stored| stored.payload);
    let mut payload = old.to_vec();
    let byte = (offset / 8) as usize;
    if payload.len() <= byte {
        payload.resize(byte + 1, 0);
    }
    let mask = 1u8 << (7 - offset % 8);
    let previous = payload[byte] & mask != 0;
    if value == 1 {
        payload[byte] |= mask;
    } else {
        payload[byte] &= !mask;
    }
    Effect {
        reply: Reply::Integer(i64::from(previous)),
        write: put(current.and_then(|stored| stored.deadline_ms), &payload),
    }
}

/// A range of bits, both ends included, inside a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BitRange {
    first: u64,
    last: u64,
}

/// The bits `start..=end` name in a string of `length` bytes, in bytes or (`in_bits`) in
/// bits, negative indexes counting from the end, as Redis clamps them; `None` when empty.
fn bit_range(start: i64, end: i64, in_bits: bool, length: usize) -> Option<BitRange> {
    let total = if in_bits {
        length as i64 * 8
    } else {
        length as i64
    };
    let clamp = |index: i64| {
        if index < 0 {
            (total + index).max(0)
        } else {
            index
        }
    };
    let (start, end) = (clamp(start), clamp(end).min(total - 1));
    if start > end {
        return None;
    }
    let (first, last) = if in_bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    };
    Some(BitRange {
        first: first as u64,
        last: last as u64,
    })
}

/// Whether a unit argument says bits (`BIT`) or bytes (`BYTE`); `None` for anything else.
fn unit(argument: &[u8]) -> Option<bool> {
    if argument.eq_ignore_ascii_case(b"bit") {
        Some(true)
    } else if argument.eq_ignore_ascii_case(b"byte") {
        Some(false)
    } else {
        None
    }
}

/// The set bits of `payload` in `range`: whole bytes by their count, the edges bit by bit.
fn count_ones(payload: &[u8], range: BitRange) -> u64 {
    let mut count = 0u64;
    let mut index = range.first;
    // Each step moves at least one bit towards `range.last`.
    while index <= range.last {
        if index.is_multiple_of(8) && index + 7 <= range.last {
            count += u64::from(payload[(index / 8) as usize].count_ones());
            index += 8;
        } else {
            count += u64::from(bit_at(payload, index));
            index += 1;
        }
    }
    count
}

/// `BITCOUNT key [start end [BYTE|BIT]]`.
pub fn bitcount(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    // Redis 7.0 looks the key up before it reads the range: a missing key counts 0.
    let payload = match string_of(current) {
        Ok(None) => return Effect::reply(Reply::Integer(0)),
        Ok(Some(stored)) => stored.payload,
        Err(error) => return error,
    };
    let range = match arguments.len() {
        2 => bit_range(0, -1, false, payload.len()),
        4 | 5 => {
            let (Some(start), Some(end)) =
                (parse_integer(&arguments[2]), parse_integer(&arguments[3]))
            else {
                return Effect::reply(Reply::error(errors::NOT_INTEGER));
            };
            let Some(in_bits) = arguments.get(4).map_or(Some(false), |u| unit(u)) else {
                return Effect::reply(Reply::error(errors::SYNTAX));
            };
            bit_range(start, end, in_bits, payload.len())
        }
        _ => return Effect::reply(Reply::error(errors::SYNTAX)),
    };
    let count = range.map_or(0, |range| count_ones(payload, range));
    Effect::reply(Reply::Integer(count as i64))
}

/// The first bit equal to `bit` in `range`, skipping whole bytes that hold none.
fn first_bit(payload: &[u8], range: BitRange, bit: u8) -> Option<u64> {
    let skip = if bit == 1 { 0x00 } else { 0xFF };
    let mut index = range.first;
    // Each step moves at least one bit towards `range.last`.
    while index <= range.last {
        if index.is_multiple_of(8)
            && index + 7 <= range.last
            && payload[(index / 8) as usize] == skip
        {
            index += 8;
        } else if bit_at(payload, index) == bit {
            return Some(index);
        } else {
            index += 1;
        }
    }
    None
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`: the first bit set (or clear) in the range, -1
/// if none. Looking for a clear bit without an end, the string reads as padded with zeros.
pub fn bitpos(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let Some(bit) = parse_integer(&arguments[2]) else {
        return Effect::reply(Reply::error(errors::NOT_INTEGER));
    };
    if bit != 0 && bit != 1 {
        return Effect::reply(Reply::error(BAD_BITPOS_BIT));
    }
    let payload = match string_of(current) {
        Ok(None) => return Effect::reply(Reply::Integer(if bit == 1 { -1 } else { 0 })),
        Ok(Some(stored)) => stored.payload,
        Err(error) => return error,
    };
    if arguments.len() > 6 {
        return Effect::reply(Reply::error(errors::SYNTAX));
    }
    let numbers: Vec<Option<i64>> = arguments[3..arguments.len().min(5)]
        .iter()
        .map(|argument| parse_integer(argument))
        .collect();
    if numbers.iter().any(Option::is_none) {
        return Effect::reply(Reply::error(errors::NOT_INTEGER));
    }
    let Some(in_bits) = arguments.get(5).map_or(Some(false), |u| unit(u)) else {
        return Effect::reply(Reply::error(errors::SYNTAX));
    };
    let start = numbers.first().copied().flatten().unwrap_or(0);
    let end_given = numbers.len() == 2;
    let end = numbers.get(1).copied().flatten().unwrap_or(-1);
    let Some(range) = bit_range(start, end, in_bits, payload.len()) else {
        return Effect::reply(Reply::Integer(-1));
    };
    let found = match first_bit(payload, range, bit as u8) {
        Some(index) => index as i64,
        None if bit == 0 && !end_given => range.last as i64 + 1,
        None => -1,
    };
    Effect::reply(Reply::Integer(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{encode, Kind};

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    /// Runs `command` against a string holding `payload`.
    fn on(payload: &[u8], words: &[&str]) -> Reply {
        let stored = encode(Kind::String, None, payload);
        let current = Stored::decode(&stored).ok();
        let function = match words[0] {
            "GETBIT" => getbit,
            "SETBIT" => setbit,
            "BITCOUNT" => bitcount,
            _ => bitpos,
        };
        function(&args(words), current, 0).reply
    }

    #[test]
    fn setbit_grows_the_string_and_returns_the_old_bit() {
        let effect = setbit(&args(&["SETBIT", "k", "7", "1"]), None, 0);
        assert_eq!(effect.reply, Reply::Integer(0));
        assert_eq!(effect.write, put(None, &[0x01]));
        let effect = setbit(&args(&["SETBIT", "k", "100", "1"]), None, 0);
        assert_eq!(
            effect.write,
            put(None, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08])
        );
        assert_eq!(on(&[0x80], &["SETBIT", "k", "0", "0"]), Reply::Integer(1));
        assert_eq!(on(&[0x80], &["GETBIT", "k", "0"]), Reply::Integer(1));
        assert_eq!(on(&[0x80], &["GETBIT", "k", "1"]), Reply::Integer(0));
        assert_eq!(on(&[0x80], &["GETBIT", "k", "4000"]), Reply::Integer(0));
        for (words, error) in [
            (&["SETBIT", "k", "-1", "1"][..], BAD_OFFSET),
            (&["SETBIT", "k", "4294967296", "1"], BAD_OFFSET),
            (&["SETBIT", "k", "1", "2"], BAD_BIT),
            (&["GETBIT", "k", "x"], BAD_OFFSET),
        ] {
            assert_eq!(on(b"", words), Reply::error(error), "{words:?}");
        }
    }

    #[test]
    fn bitcount_matches_redis_examples() {
        // From Redis's documentation: "foobar".
        let foobar = b"foobar";
        assert_eq!(on(foobar, &["BITCOUNT", "k"]), Reply::Integer(26));
        assert_eq!(on(foobar, &["BITCOUNT", "k", "0", "0"]), Reply::Integer(4));
        assert_eq!(on(foobar, &["BITCOUNT", "k", "1", "1"]), Reply::Integer(6));
        assert_eq!(
            on(foobar, &["BITCOUNT", "k", "1", "1", "BYTE"]),
            Reply::Integer(6)
        );
        assert_eq!(
            on(foobar, &["BITCOUNT", "k", "5", "30", "BIT"]),
            Reply::Integer(17)
        );
        assert_eq!(
            on(foobar, &["BITCOUNT", "k", "-2", "-1"]),
            Reply::Integer(7)
        );
        assert_eq!(on(foobar, &["BITCOUNT", "k", "3", "1"]), Reply::Integer(0));
        assert_eq!(
            on(foobar, &["BITCOUNT", "k", "0"]),
            Reply::error(errors::SYNTAX)
        );
        assert_eq!(
            on(foobar, &["BITCOUNT", "k", "0", "1", "WORD"]),
            Reply::error(errors::SYNTAX)
        );
        assert_eq!(
            bitcount(&args(&["BITCOUNT", "k", "x", "y"]), None, 0).reply,
            Reply::Integer(0)
        );
    }

    #[test]
    fn bitpos_matches_redis_examples() {
        let bytes = [0xFF, 0xF0, 0x00];
        assert_eq!(on(&bytes, &["BITPOS", "k", "0"]), Reply::Integer(12));
        assert_eq!(
            on(&[0x00, 0xFF, 0xF0], &["BITPOS", "k", "1", "0"]),
            Reply::Integer(8)
        );
        assert_eq!(
            on(&[0x00, 0xFF, 0xF0], &["BITPOS", "k", "1", "2"]),
            Reply::Integer(16)
        );
        assert_eq!(
            on(
                &[0x00, 0xFF, 0xF0],
                &["BITPOS", "k", "1", "2", "-1", "BYTE"]
            ),
            Reply::Integer(16)
        );
        assert_eq!(
            on(&[0x00, 0xFF, 0xF0], &["BITPOS", "k", "1", "7", "15", "BIT"]),
            Reply::Integer(8)
        );
        assert_eq!(on(&[0, 0, 0], &["BITPOS", "k", "1"]), Reply::Integer(-1));
        // All ones: a clear bit is the first past the end, unless the end was given.
        assert_eq!(on(&[0xFF; 3], &["BITPOS", "k", "0"]), Reply::Integer(24));
        assert_eq!(
            on(&[0xFF; 3], &["BITPOS", "k", "0", "0", "-1"]),
            Reply::Integer(-1)
        );
        assert_eq!(on(b"", &["BITPOS", "k", "0"]), Reply::Integer(-1));
        assert_eq!(
            bitpos(&args(&["BITPOS", "k", "0"]), None, 0).reply,
            Reply::Integer(0)
        );
        assert_eq!(
            bitpos(&args(&["BITPOS", "k", "1"]), None, 0).reply,
            Reply::Integer(-1)
        );
        assert_eq!(
            on(b"a", &["BITPOS", "k", "2"]),
            Reply::error(BAD_BITPOS_BIT)
        );
        assert_eq!(
            on(b"a", &["BITPOS", "k", "1", "0", "1", "WORD"]),
            Reply::error(errors::SYNTAX)
        );
    }
}
