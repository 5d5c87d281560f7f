//! String commands as key functions (see `mod.rs`): GET, SET and its options, GETSET, GETDEL,
//! GETEX, APPEND, STRLEN, GETRANGE, SETRANGE, INCR and friends, and the per-key parts of MGET
//! and MSET. `arguments[0]` is the command's name, `arguments[1]` the key.

use super::{errors, parse_float, parse_integer, Effect, Reply, Write};
use crate::value::{encode, Kind, Stored};

/// The largest string SETRANGE and APPEND may make (Redis: 512 MiB).
pub const MAX_STRING_BYTES: usize = 512 * 1024 * 1024;

/// The string in `current`, or the WRONGTYPE error.
pub(super) fn string_of<'a>(current: Option<Stored<'a>>) -> Result<Option<Stored<'a>>, Effect> {
    match current {
        Some(stored) if stored.kind != Kind::String => {
            Err(Effect::reply(Reply::error(errors::WRONG_TYPE)))
        }
        other => Ok(other),
    }
}

pub(super) fn put(deadline_ms: Option<u64>, payload: &[u8]) -> Write {
    Write::Put(encode(Kind::String, deadline_ms, payload))
}

fn bulk_or_null(current: Option<Stored<'_>>) -> Reply {
    current.map_or(Reply::Null, |stored| Reply::Bulk(stored.payload.to_vec()))
}

/// `GET key`, and the part of `MGET` for one key (`MGET` answers null for other types).
pub fn get(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let lenient = arguments[0].eq_ignore_ascii_case(b"mget");
    match string_of(current) {
        Ok(current) => Effect::reply(bulk_or_null(current)),
        Err(_) if lenient => Effect::reply(Reply::Null),
        Err(error) => error,
    }
}

/// An expiry option's deadline: `unit_ms` per unit, relative to `now_ms` unless absolute.
fn deadline(
    value: &[u8],
    unit_ms: u64,
    absolute: bool,
    now_ms: u64,
    command: &str,
) -> Result<u64, Reply> {
    let invalid = || Reply::error(format!("ERR invalid expire time in '{command}' command"));
    let amount = parse_integer(value).ok_or(Reply::error(errors::NOT_INTEGER))?;
    if amount <= 0 {
        return Err(invalid());
    }
    let span = (amount as u64).checked_mul(unit_ms).ok_or_else(invalid)?;
    let at = if absolute {
        Some(span)
    } else {
        now_ms.checked_add(span)
    };
    at.filter(|&at| at < i64::MAX as u64).ok_or_else(invalid)
}

/// What SET's options say.
#[derive(Default)]
struct SetOptions {
    only_absent: bool,
    only_present: bool,
    return_old: bool,
    keep_ttl: bool,
    deadline_ms: Option<u64>,
}

fn set_options(arguments: &[Vec<u8>], now_ms: u64) -> Result<SetOptions, Reply> {
    let mut options = SetOptions::default();
    let mut expiries = 0;
    let mut at = 3;
    while at < arguments.len() {
        let word = arguments[at].to_ascii_uppercase();
        let takes_value = matches!(word.as_slice(), b"EX" | b"PX" | b"EXAT" | b"PXAT");
        if takes_value {
            let value = arguments.get(at + 1).ok_or(Reply::error(errors::SYNTAX))?;
            let (unit, absolute) = match word.as_slice() {
                b"EX" => (1000, false),
                b"PX" => (1, false),
                b"EXAT" => (1000, true),
                _ => (1, true),
            };
            options.deadline_ms = Some(deadline(value, unit, absolute, now_ms, "set")?);
            expiries += 1;
            at += 2;
            continue;
        }
        match word.as_slice() {
            b"NX" => options.only_absent = true,
            b"XX" => options.only_present = true,
            b"GET" => options.return_old = true,
            b"KEEPTTL" => {
                options.keep_ttl = true;
                expiries += 1;
            }
            _ => return Err(Reply::error(errors::SYNTAX)),
        }
        at += 1;
    }
    if expiries > 1 || (options.only_absent && options.only_present) {
        return Err(Reply::error(errors::SYNTAX));
    }
    Ok(options)
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
pub fn set(arguments: &[Vec<u8>], current: Option<Stored<'_>>, now_ms: u64) -> Effect {
    let options = match set_options(arguments, now_ms) {
        Ok(options) => options,
        Err(reply) => return Effect::reply(reply),
    };
    if options.return_old {
        if let Err(error) = string_of(current) {
            return error;
        }
    }
    let blocked =
        (options.only_absent && current.is_some()) || (options.only_present && current.is_none());
    let reply = match (options.return_old, blocked) {
        (true, _) => bulk_or_null(current),
        (false, true) => Reply::Null,
        (false, false) => Reply::Ok,
    };
    if blocked {
        return Effect::reply(reply);
    }
    let deadline_ms = if options.keep_ttl {
        current.and_then(|stored| stored.deadline_ms)
    } else {
        options.deadline_ms
    };
    Effect {
        reply,
        write: put(deadline_ms, &arguments[2]),
    }
}

/// `SETNX key value`.
pub fn setnx(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    if current.is_some() {
        return Effect::reply(Reply::Integer(0));
    }
    Effect {
        reply: Reply::Integer(1),
        write: put(None, &arguments[2]),
    }
}

/// `SETEX key seconds value` and `PSETEX key milliseconds value`.
pub fn setex(arguments: &[Vec<u8>], _current: Option<Stored<'_>>, now_ms: u64) -> Effect {
    let milliseconds = arguments[0].eq_ignore_ascii_case(b"psetex");
    let name = if milliseconds { "psetex" } else { "setex" };
    let unit = if milliseconds { 1 } else { 1000 };
    match deadline(&arguments[2], unit, false, now_ms, name) {
        Ok(at) => Effect {
            reply: Reply::Ok,
            write: put(Some(at), &arguments[3]),
        },
        Err(reply) => Effect::reply(reply),
    }
}

/// The part of `MSET` for one key: `[name, key, value]`.
pub fn mset_part(arguments: &[Vec<u8>], _current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    Effect {
        reply: Reply::Ok,
        write: put(None, &arguments[2]),
    }
}

/// The part of `MSETNX` for one key: `[name, key, value]`, written only where the key is
/// absent; 1 then, else 0 (the transaction then writes nothing).
pub fn msetnx_part(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    match current {
        Some(_) => Effect::reply(Reply::Integer(0)),
        None => Effect {
            reply: Reply::Integer(1),
            write: put(None, &arguments[2]),
        },
    }
}

/// `GETSET key value`.
pub fn getset(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    match string_of(current) {
        Ok(current) => Effect {
            reply: bulk_or_null(current),
            write: put(None, &arguments[2]),
        },
        Err(error) => error,
    }
}

/// `GETDEL key`.
pub fn getdel(_arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    match string_of(current) {
        Ok(None) => Effect::reply(Reply::Null),
        Ok(Some(stored)) => Effect {
            reply: Reply::Bulk(stored.payload.to_vec()),
            write: Write::Delete,
        },
        Err(error) => error,
    }
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`.
pub fn getex(arguments: &[Vec<u8>], current: Option<Stored<'_>>, now_ms: u64) -> Effect {
    let current = match string_of(current) {
        Ok(current) => current,
        Err(error) => return error,
    };
    let new_deadline = match arguments.len() {
        2 => None,
        3 if arguments[2].eq_ignore_ascii_case(b"PERSIST") => Some(None),
        4 => {
            let (unit, absolute) = match arguments[2].to_ascii_uppercase().as_slice() {
                b"EX" => (1000, false),
                b"PX" => (1, false),
                b"EXAT" => (1000, true),
                b"PXAT" => (1, true),
                _ => return Effect::reply(Reply::error(errors::SYNTAX)),
            };
            match deadline(&arguments[3], unit, absolute, now_ms, "getex") {
                Ok(at) => Some(Some(at)),
                Err(reply) => return Effect::reply(reply),
            }
        }
        _ => return Effect::reply(Reply::error(errors::SYNTAX)),
    };
    let Some(stored) = current else {
        return Effect::reply(Reply::Null);
    };
    let reply = Reply::Bulk(stored.payload.to_vec());
    match new_deadline {
        Some(deadline_ms) if deadline_ms != stored.deadline_ms => Effect {
            reply,
            write: put(deadline_ms, stored.payload),
        },
        _ => Effect::reply(reply),
    }
}

/// `APPEND key value`: the new length.
pub fn append(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let current = match string_of(current) {
        Ok(current) => current,
        Err(error) => return error,
    };
    let old = current.map_or(&[][..], |stored| stored.payload);
    if old.len() + arguments[2].len() > MAX_STRING_BYTES {
        return Effect::reply(Reply::error(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    let mut payload = Vec::with_capacity(old.len() + arguments[2].len());
    payload.extend_from_slice(old);
    payload.extend_from_slice(&arguments[2]);
    Effect {
        reply: Reply::Integer(payload.len() as i64),
        write: put(current.and_then(|stored| stored.deadline_ms), &payload),
    }
}

/// `STRLEN key`.
pub fn strlen(_arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    match string_of(current) {
        Ok(current) => Effect::reply(Reply::Integer(
            current.map_or(0, |stored| stored.payload.len() as i64),
        )),
        Err(error) => error,
    }
}

/// `GETRANGE key start end` (negative offsets count from the end, as in Redis).
pub fn getrange(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let (Some(start), Some(end)) = (parse_integer(&arguments[2]), parse_integer(&arguments[3]))
    else {
        return Effect::reply(Reply::error(errors::NOT_INTEGER));
    };
    let current = match string_of(current) {
        Ok(current) => current,
        Err(error) => return error,
    };
    let payload = current.map_or(&[][..], |stored| stored.payload);
    let length = payload.len() as i64;
    if length == 0 || (start < 0 && end < 0 && start > end) {
        return Effect::reply(Reply::Bulk(Vec::new()));
    }
    let start = if start < 0 {
        (length + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { (length + end).max(0) } else { end }.min(length - 1);
    if start > end {
        return Effect::reply(Reply::Bulk(Vec::new()));
    }
    Effect::reply(Reply::Bulk(payload[start as usize..=end as usize].to_vec()))
}

/// `SETRANGE key offset value`: the new length.
pub fn setrange(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let Some(offset) = parse_integer(&arguments[2]).filter(|&offset| offset >= 0) else {
        return Effect::reply(Reply::error("ERR offset is out of range"));
    };
    let current = match string_of(current) {
        Ok(current) => current,
        Err(error) => return error,
    };
    let value = &arguments[3];
    let old = current.map_or(&[][..], |stored| stored.payload);
    if value.is_empty() {
        return Effect::reply(Reply::Integer(old.len() as i64));
    }
    let offset = offset as usize;
    if offset.saturating_add(value.len()) > MAX_STRING_BYTES {
        return Effect::reply(Reply::error(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    let mut payload = old.to_vec();
    payload.resize(payload.len().max(offset + value.len()), 0);
    payload[offset..offset + value.len()].copy_from_slice(value);
    Effect {
        reply: Reply::Integer(payload.len() as i64),
        write: put(current.and_then(|stored| stored.deadline_ms), &payload),
    }
}

/// `INCR`, `DECR`, `INCRBY`, `DECRBY`: the new value; the key keeps its expiry.
pub fn incr(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let name = arguments[0].to_ascii_uppercase();
    let step = match name.as_slice() {
        b"INCR" => Some(1),
        b"DECR" => Some(-1),
        b"INCRBY" => parse_integer(&arguments[2]),
        _ => parse_integer(&arguments[2]).and_then(i64::checked_neg),
    };
    let Some(step) = step else {
        return Effect::reply(Reply::error(errors::NOT_INTEGER));
    };
    let current = match string_of(current) {
        Ok(current) => current,
        Err(error) => return error,
    };
    let old = match current {
        None => 0,
        Some(stored) => match parse_integer(stored.payload) {
            Some(old) => old,
            None => return Effect::reply(Reply::error(errors::NOT_INTEGER)),
        },
    };
    let Some(new) = old.checked_add(step) else {
        return Effect::reply(Reply::error(errors::OVERFLOW));
    };
    Effect {
        reply: Reply::Integer(new),
        write: put(
            current.and_then(|stored| stored.deadline_ms),
            new.to_string().as_bytes(),
        ),
    }
}

/// `INCRBYFLOAT key increment`: the new value as a bulk string.
pub fn incrbyfloat(arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let Some(step) = parse_float(&arguments[2]) else {
        return Effect::reply(Reply::error(errors::NOT_FLOAT));
    };
    let current = match string_of(current) {
        Ok(current) => current,
        Err(error) => return error,
    };
    let old = match current {
        None => 0.0,
        Some(stored) => match parse_float(stored.payload) {
            Some(old) => old,
            None => return Effect::reply(Reply::error(errors::NOT_FLOAT)),
        },
    };
    let new = old + step;
    if !new.is_finite() {
        return Effect::reply(Reply::error("ERR increment would produce NaN or Infinity"));
    }
    let text = crate::resp::format_double(new);
    Effect {
        reply: Reply::Bulk(text.clone().into_bytes()),
        write: put(
            current.and_then(|stored| stored.deadline_ms),
            text.as_bytes(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn set_honours_its_conditions_and_expiry_options() {
        let old = encode(Kind::String, Some(5_000), b"old");
        let old = Stored::decode(&old).ok();
        let effect = set(&args(&["SET", "k", "v", "NX"]), old, 1_000);
        assert_eq!(effect, Effect::reply(Reply::Null));
        let effect = set(
            &args(&["SET", "k", "v", "XX", "GET", "KEEPTTL"]),
            old,
            1_000,
        );
        assert_eq!(effect.reply, Reply::Bulk(b"old".to_vec()));
        assert_eq!(effect.write, put(Some(5_000), b"v"));
        let effect = set(&args(&["SET", "k", "v", "EX", "10"]), None, 1_000);
        assert_eq!(effect.write, put(Some(11_000), b"v"));
        let effect = set(&args(&["SET", "k", "v", "EX", "0"]), None, 1_000);
        assert_eq!(
            effect.reply,
            Reply::error("ERR invalid expire time in 'set' command")
        );
        let effect = set(&args(&["SET", "k", "v", "NX", "XX"]), None, 1_000);
        assert_eq!(effect.reply, Reply::error(errors::SYNTAX));
        let effect = set(&args(&["SET", "k", "v", "EX", "1", "PX", "1"]), None, 1_000);
        assert_eq!(effect.reply, Reply::error(errors::SYNTAX));
    }

    #[test]
    fn incr_keeps_the_expiry_and_refuses_overflow_and_non_integers() {
        let stored = encode(Kind::String, Some(9), b"41");
        let effect = incr(&args(&["INCR", "k"]), Stored::decode(&stored).ok(), 0);
        assert_eq!(effect.reply, Reply::Integer(42));
        assert_eq!(effect.write, put(Some(9), b"42"));
        let max = encode(Kind::String, None, i64::MAX.to_string().as_bytes());
        let effect = incr(&args(&["INCRBY", "k", "1"]), Stored::decode(&max).ok(), 0);
        assert_eq!(effect.reply, Reply::error(errors::OVERFLOW));
        let text = encode(Kind::String, None, b"abc");
        let effect = incr(&args(&["DECR", "k"]), Stored::decode(&text).ok(), 0);
        assert_eq!(effect.reply, Reply::error(errors::NOT_INTEGER));
        let effect = incrbyfloat(&args(&["INCRBYFLOAT", "k", "0.5"]), None, 0);
        assert_eq!(effect.reply, Reply::Bulk(b"0.5".to_vec()));
    }

    #[test]
    fn getrange_and_setrange_follow_redis_offsets() {
        let stored = encode(Kind::String, None, b"This is a string");
        let current = Stored::decode(&stored).ok();
        let range = |start: &str, end: &str| {
            getrange(&args(&["GETRANGE", "k", start, end]), current, 0).reply
        };
        assert_eq!(range("0", "3"), Reply::Bulk(b"This".to_vec()));
        assert_eq!(range("-3", "-1"), Reply::Bulk(b"ing".to_vec()));
        assert_eq!(range("0", "-1"), Reply::Bulk(b"This is a string".to_vec()));
        assert_eq!(range("10", "100"), Reply::Bulk(b"string".to_vec()));
        assert_eq!(range("5", "3"), Reply::Bulk(Vec::new()));
        let effect = setrange(&args(&["SETRANGE", "k", "3", "xy"]), None, 0);
        assert_eq!(effect.reply, Reply::Integer(5));
        assert_eq!(effect.write, put(None, b"\0\0\0xy"));
    }
}
