//! Key commands as key functions (see `mod.rs`): the per-key parts of DEL, UNLINK, EXISTS and
//! TOUCH, TYPE, the EXPIRE family, TTL, PTTL, EXPIRETIME, PEXPIRETIME and PERSIST.

use super::{errors, parse_integer, Effect, Reply, Write};
use crate::value::{encode, Stored};

/// The part of `DEL`/`UNLINK` for one key: 1 if it existed.
pub fn delete(_arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    match current {
        Some(_) => Effect {
            reply: Reply::Integer(1),
            write: Write::Delete,
        },
        None => Effect::reply(Reply::Integer(0)),
    }
}

/// The part of `EXISTS`/`TOUCH` for one key: 1 if it exists.
pub fn exists(_arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    Effect::reply(Reply::Integer(i64::from(current.is_some())))
}

/// `TYPE key`.
pub fn kind(_arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    let name = current.map_or("none", |stored| stored.kind.name());
    Effect::reply(Reply::Simple(name.to_string()))
}

/// The conditions EXPIRE may carry.
#[derive(Clone, Copy, Default)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn conditions(words: &[Vec<u8>]) -> Result<Conditions, Reply> {
    let mut conditions = Conditions::default();
    for word in words {
        match word.to_ascii_uppercase().as_slice() {
            b"NX" => conditions.nx = true,
            b"XX" => conditions.xx = true,
            b"GT" => conditions.gt = true,
            b"LT" => conditions.lt = true,
            other => {
                return Err(Reply::error(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(other)
                )))
            }
        }
    }
    if conditions.nx && (conditions.xx || conditions.gt || conditions.lt) {
        return Err(Reply::error(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if conditions.gt && conditions.lt {
        return Err(Reply::error(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(conditions)
}

/// Whether a deadline change from `old` (None: no expiry, i.e. infinite) to `new` passes.
fn allowed(conditions: Conditions, old: Option<u64>, new: u64) -> bool {
    if conditions.nx && old.is_some() || conditions.xx && old.is_none() {
        return false;
    }
    match old {
        None => !conditions.gt,
        Some(old) => (!conditions.gt || new > old) && (!conditions.lt || new < old),
    }
}

/// `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT key time [NX|XX|GT|LT]`: 1 if set. A deadline
/// in the past deletes the key, as in Redis.
pub fn expire(arguments: &[Vec<u8>], current: Option<Stored<'_>>, now_ms: u64) -> Effect {
    let name = String::from_utf8_lossy(&arguments[0]).to_ascii_lowercase();
    let (unit_ms, absolute) = match name.as_str() {
        "expire" => (1000i64, false),
        "pexpire" => (1, false),
        "expireat" => (1000, true),
        _ => (1, true),
    };
    let Some(amount) = parse_integer(&arguments[2]) else {
        return Effect::reply(Reply::error(errors::NOT_INTEGER));
    };
    let conditions = match conditions(&arguments[3..]) {
        Ok(conditions) => conditions,
        Err(reply) => return Effect::reply(reply),
    };
    let invalid = || {
        Effect::reply(Reply::error(format!(
            "ERR invalid expire time in '{name}' command"
        )))
    };
    let Some(span) = amount.checked_mul(unit_ms) else {
        return invalid();
    };
    let at = if absolute {
        Some(span)
    } else {
        (now_ms as i64).checked_add(span)
    };
    let Some(at) = at else {
        return invalid();
    };
    let Some(stored) = current else {
        return Effect::reply(Reply::Integer(0));
    };
    let new = at.max(0) as u64;
    if !allowed(conditions, stored.deadline_ms, new) {
        return Effect::reply(Reply::Integer(0));
    }
    let write = if at <= now_ms as i64 {
        Write::Delete
    } else {
        Write::Put(encode(stored.kind, Some(new), stored.payload))
    };
    Effect {
        reply: Reply::Integer(1),
        write,
    }
}

/// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`: -2 absent, -1 no expiry.
pub fn ttl(arguments: &[Vec<u8>], current: Option<Stored<'_>>, now_ms: u64) -> Effect {
    let name = arguments[0].to_ascii_uppercase();
    let reply = match current {
        None => -2,
        Some(Stored {
            deadline_ms: None, ..
        }) => -1,
        Some(Stored {
            deadline_ms: Some(at),
            ..
        }) => {
            let left = at.saturating_sub(now_ms) as i64;
            match name.as_slice() {
                b"TTL" => (left + 500) / 1000,
                b"PTTL" => left,
                b"EXPIRETIME" => (at / 1000) as i64,
                _ => at as i64,
            }
        }
    };
    Effect::reply(Reply::Integer(reply))
}

/// `PERSIST key`: 1 if an expiry was removed.
pub fn persist(_arguments: &[Vec<u8>], current: Option<Stored<'_>>, _now_ms: u64) -> Effect {
    match current {
        Some(stored) if stored.deadline_ms.is_some() => Effect {
            reply: Reply::Integer(1),
            write: Write::Put(encode(stored.kind, None, stored.payload)),
        },
        _ => Effect::reply(Reply::Integer(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Kind;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn expire_conditions_and_past_deadlines_follow_redis() {
        let bytes = encode(Kind::String, None, b"v");
        let current = Stored::decode(&bytes).ok();
        let effect = expire(&args(&["EXPIRE", "k", "10", "GT"]), current, 1_000);
        assert_eq!(effect.reply, Reply::Integer(0), "GT against no expiry");
        let effect = expire(&args(&["EXPIRE", "k", "10", "LT"]), current, 1_000);
        assert_eq!(
            effect.write,
            Write::Put(encode(Kind::String, Some(11_000), b"v"))
        );
        let effect = expire(&args(&["PEXPIRE", "k", "-1"]), current, 1_000);
        assert_eq!(effect.write, Write::Delete);
        let effect = expire(&args(&["EXPIRE", "k", "1", "NX", "XX"]), current, 1_000);
        assert!(matches!(effect.reply, Reply::Error(_)));
        let effect = expire(&args(&["EXPIRE", "missing", "1"]), None, 1_000);
        assert_eq!(effect.reply, Reply::Integer(0));
    }

    #[test]
    fn ttl_rounds_like_redis() {
        let bytes = encode(Kind::String, Some(10_400), b"v");
        let current = Stored::decode(&bytes).ok();
        assert_eq!(
            ttl(&args(&["TTL", "k"]), current, 1_000).reply,
            Reply::Integer(9)
        );
        assert_eq!(
            ttl(&args(&["PTTL", "k"]), current, 1_000).reply,
            Reply::Integer(9_400)
        );
        assert_eq!(
            ttl(&args(&["TTL", "k"]), None, 1_000).reply,
            Reply::Integer(-2)
        );
    }
}
