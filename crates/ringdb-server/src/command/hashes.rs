//! Hash commands as pure functions of the hash's fields: HSET, HMSET, HSETNX, HGET, HMGET, HDEL,
//! HEXISTS, HLEN, HSTRLEN, HINCRBY, HINCRBYFLOAT, HGETALL, HKEYS, HVALS, HSCAN, HRANDFIELD.
//!
//! A hash is stored as one record per field (`hashes.rs` at the crate's root says where); a
//! command names the fields it needs ([`Needs`]), the shard reads those (or all of them) into a
//! [`HashView`], and the function answers and says which fields to put and delete. The header
//! (field count, expiry) is kept by the caller from those writes.

use super::{errors, parse_float, parse_integer, Reply};
use std::collections::BTreeMap;

/// Which fields a hash command reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// None: the header's count is enough (HLEN).
    Nothing,
    /// The arguments from index `first`, every `step`-th (HSET's fields, HGET's field).
    Named {
        /// The index of the first field among the arguments.
        first: usize,
        /// The distance between fields (2 when values sit between them).
        step: usize,
    },
    /// Every field (HGETALL, HKEYS, HVALS).
    All,
    /// A page of fields from HSCAN's cursor ([`scan_page`]).
    Page,
}

impl Needs {
    /// The fields named in `arguments` (empty for the other needs).
    pub fn named<'a>(&self, arguments: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
        match *self {
            Needs::Named { first, step } => arguments
                .iter()
                .skip(first)
                .step_by(step)
                .map(Vec::as_slice)
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// A hash as a command sees it: the header's field count and the fields it asked for (those
/// present), by field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HashView {
    /// Fields in the hash.
    pub count: u64,
    /// The fields read, with their values.
    pub fields: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Read a page at a time (HSCAN): the cursor of the next page, 0 after the last.
    /// `None`: every field was read.
    pub next_cursor: Option<u64>,
}

/// What a hash command answers and writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HashEffect {
    /// The reply.
    pub reply: Reply,
    /// Fields to set.
    pub puts: Vec<(Vec<u8>, Vec<u8>)>,
    /// Fields to remove (present ones only).
    pub deletes: Vec<Vec<u8>>,
}

impl HashEffect {
    fn reply(reply: Reply) -> HashEffect {
        HashEffect {
            reply,
            ..HashEffect::default()
        }
    }
}

/// A hash command's function: its arguments and the hash (`None`: absent or expired).
pub type HashFn = fn(&[Vec<u8>], Option<&HashView>) -> HashEffect;

/// Hash commands: name, arity, function, the fields it reads. All run on the hash's shard,
/// under its key's lock (reads too: a hash is several records).
pub const HASH_COMMANDS: &[(&str, i32, HashFn, Needs)] = &[
    ("HSET", -4, hset, Needs::Named { first: 2, step: 2 }),
    ("HMSET", -4, hset, Needs::Named { first: 2, step: 2 }),
    ("HSETNX", 4, hsetnx, Needs::Named { first: 2, step: 2 }),
    ("HGET", 3, hget, Needs::Named { first: 2, step: 1 }),
    ("HMGET", -3, hmget, Needs::Named { first: 2, step: 1 }),
    ("HDEL", -3, hdel, Needs::Named { first: 2, step: 1 }),
    ("HEXISTS", 3, hexists, Needs::Named { first: 2, step: 1 }),
    ("HSTRLEN", 3, hstrlen, Needs::Named { first: 2, step: 1 }),
    ("HLEN", 2, hlen, Needs::Nothing),
    ("HINCRBY", 4, hincrby, Needs::Named { first: 2, step: 2 }),
    (
        "HINCRBYFLOAT",
        4,
        hincrbyfloat,
        Needs::Named { first: 2, step: 2 },
    ),
    ("HGETALL", 2, hgetall, Needs::All),
    ("HKEYS", 2, hkeys, Needs::All),
    ("HVALS", 2, hvals, Needs::All),
    ("HSCAN", -3, hscan, Needs::Page),
    ("HRANDFIELD", -2, hrandfield, Needs::All),
];

/// The most fields one HRANDFIELD with a negative count answers (it repeats fields: without a
/// bound a request of a few bytes could ask for a reply of any size; a positive count is
/// bounded by the hash).
const RANDOM_FIELDS_MAX: u64 = 1 << 20;

/// `HRANDFIELD key [count [WITHVALUES]]`: one random field (null when the hash is absent);
/// with a count, that many distinct fields (at most the hash's), or with a negative count
/// that many drawn with repetition; WITHVALUES pairs each with its value.
pub fn hrandfield(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let fields: Vec<(&Vec<u8>, &Vec<u8>)> = all(hash).collect();
    let Some(count) = arguments.get(2) else {
        return HashEffect::reply(match fields.is_empty() {
            true => Reply::Null,
            false => Reply::Bulk(fields[random_below(fields.len() as u64) as usize].0.clone()),
        });
    };
    let values = match arguments.get(3).map(|word| word.to_ascii_uppercase()) {
        None => false,
        Some(word) if word == b"WITHVALUES" && arguments.len() == 4 => true,
        Some(_) => return HashEffect::reply(Reply::error(errors::SYNTAX)),
    };
    let Some(count) = parse_integer(count) else {
        return HashEffect::reply(Reply::error(errors::NOT_INTEGER));
    };
    if count < 0 && count.unsigned_abs() > RANDOM_FIELDS_MAX {
        return HashEffect::reply(Reply::error("ERR value is out of range"));
    }
    let chosen = choose_fields(fields.len(), count);
    let pick = |at: usize| {
        (
            Reply::Bulk(fields[at].0.clone()),
            Reply::Bulk(fields[at].1.clone()),
        )
    };
    HashEffect::reply(match values {
        true => Reply::Pairs(chosen.into_iter().map(pick).collect()),
        false => Reply::Array(chosen.into_iter().map(|at| pick(at).0).collect()),
    })
}

/// Indexes into `len` fields for HRANDFIELD's `count`: distinct ones (a random subset in
/// random order) when positive, drawn with repetition when negative.
fn choose_fields(len: usize, count: i64) -> Vec<usize> {
    if len == 0 {
        return Vec::new();
    }
    if count < 0 {
        return (0..count.unsigned_abs())
            .map(|_| random_below(len as u64) as usize)
            .collect();
    }
    let wanted = (count as u64).min(len as u64) as usize;
    let mut order: Vec<usize> = (0..len).collect();
    // A partial Fisher-Yates shuffle: the first `wanted` places get a uniform random subset.
    for place in 0..wanted {
        let other = place + random_below((len - place) as u64) as usize;
        order.swap(place, other);
    }
    order.truncate(wanted);
    debug_assert!(order.len() == wanted && wanted <= len);
    order
}

/// A random number below `bound` (not 0): each call hashes with a freshly keyed hasher.
pub(crate) fn random_below(bound: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    debug_assert!(bound > 0, "a random number below 0");
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(bound);
    hasher.finish() % bound
}

/// Whether the argument count suits the command beyond its arity (HSET's fields come in pairs).
pub fn pairs_complete(name: &str, count: usize) -> bool {
    !matches!(name, "HSET" | "HMSET") || count.is_multiple_of(2)
}

fn field<'a>(hash: Option<&'a HashView>, name: &[u8]) -> Option<&'a Vec<u8>> {
    hash.and_then(|hash| hash.fields.get(name))
}

/// `HSET key field value [field value ...]` (and HMSET): the number of new fields.
pub fn hset(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let mut puts: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for pair in arguments[2..].chunks_exact(2) {
        puts.insert(pair[0].clone(), pair[1].clone());
    }
    let new = puts.keys().filter(|f| field(hash, f).is_none()).count();
    let reply = if arguments[0].eq_ignore_ascii_case(b"hmset") {
        Reply::Ok
    } else {
        Reply::Integer(new as i64)
    };
    HashEffect {
        reply,
        puts: puts.into_iter().collect(),
        deletes: Vec::new(),
    }
}

/// `HSETNX key field value`: 1 if the field was new and is set.
pub fn hsetnx(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    if field(hash, &arguments[2]).is_some() {
        return HashEffect::reply(Reply::Integer(0));
    }
    HashEffect {
        reply: Reply::Integer(1),
        puts: vec![(arguments[2].clone(), arguments[3].clone())],
        deletes: Vec::new(),
    }
}

/// `HGET key field`.
pub fn hget(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    HashEffect::reply(field(hash, &arguments[2]).map_or(Reply::Null, |v| Reply::Bulk(v.clone())))
}

/// `HMGET key field [field ...]`.
pub fn hmget(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let values = arguments[2..]
        .iter()
        .map(|name| field(hash, name).map_or(Reply::Null, |v| Reply::Bulk(v.clone())))
        .collect();
    HashEffect::reply(Reply::Array(values))
}

/// `HDEL key field [field ...]`: the number removed.
pub fn hdel(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let mut deletes: Vec<Vec<u8>> = arguments[2..]
        .iter()
        .filter(|name| field(hash, name).is_some())
        .cloned()
        .collect();
    deletes.sort_unstable();
    deletes.dedup();
    HashEffect {
        reply: Reply::Integer(deletes.len() as i64),
        puts: Vec::new(),
        deletes,
    }
}

/// `HEXISTS key field`.
pub fn hexists(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    HashEffect::reply(Reply::Integer(i64::from(
        field(hash, &arguments[2]).is_some(),
    )))
}

/// `HSTRLEN key field`.
pub fn hstrlen(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let length = field(hash, &arguments[2]).map_or(0, Vec::len);
    HashEffect::reply(Reply::Integer(length as i64))
}

/// `HLEN key`.
pub fn hlen(_arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    HashEffect::reply(Reply::Integer(hash.map_or(0, |hash| hash.count as i64)))
}

/// `HINCRBY key field increment`.
pub fn hincrby(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let Some(step) = parse_integer(&arguments[3]) else {
        return HashEffect::reply(Reply::error(errors::NOT_INTEGER));
    };
    let old = match field(hash, &arguments[2]) {
        None => 0,
        Some(value) => match parse_integer(value) {
            Some(old) => old,
            None => return HashEffect::reply(Reply::error("ERR hash value is not an integer")),
        },
    };
    let Some(new) = old.checked_add(step) else {
        return HashEffect::reply(Reply::error(errors::OVERFLOW));
    };
    HashEffect {
        reply: Reply::Integer(new),
        puts: vec![(arguments[2].clone(), new.to_string().into_bytes())],
        deletes: Vec::new(),
    }
}

/// `HINCRBYFLOAT key field increment`.
pub fn hincrbyfloat(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let Some(step) = parse_float(&arguments[3]) else {
        return HashEffect::reply(Reply::error(errors::NOT_FLOAT));
    };
    let old = match field(hash, &arguments[2]) {
        None => 0.0,
        Some(value) => match parse_float(value) {
            Some(old) => old,
            None => return HashEffect::reply(Reply::error("ERR hash value is not a float")),
        },
    };
    let new = old + step;
    if !new.is_finite() {
        return HashEffect::reply(Reply::error("ERR increment would produce NaN or Infinity"));
    }
    let text = crate::resp::format_double(new).into_bytes();
    HashEffect {
        reply: Reply::Bulk(text.clone()),
        puts: vec![(arguments[2].clone(), text)],
        deletes: Vec::new(),
    }
}

fn all(hash: Option<&HashView>) -> impl Iterator<Item = (&Vec<u8>, &Vec<u8>)> {
    hash.into_iter().flat_map(|hash| hash.fields.iter())
}

/// `HGETALL key`: a map (RESP3) or a flat array of fields and values (RESP2).
pub fn hgetall(_arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let pairs = all(hash)
        .map(|(name, value)| (Reply::Bulk(name.clone()), Reply::Bulk(value.clone())))
        .collect();
    HashEffect::reply(Reply::Map(pairs))
}

/// `HKEYS key`.
pub fn hkeys(_arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    HashEffect::reply(Reply::Array(
        all(hash)
            .map(|(name, _)| Reply::Bulk(name.clone()))
            .collect(),
    ))
}

/// `HVALS key`.
pub fn hvals(_arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    HashEffect::reply(Reply::Array(
        all(hash)
            .map(|(_, value)| Reply::Bulk(value.clone()))
            .collect(),
    ))
}

/// Fields HSCAN returns per call without COUNT, as Redis.
const SCAN_COUNT_DEFAULT: usize = 10;

/// The largest COUNT HSCAN honours (a bound on one reply and one read).
const SCAN_COUNT_MAX: usize = 1 << 16;

/// HSCAN's cursor and COUNT, for the shard's read of one page; `None` when the request is
/// malformed ([`hscan`] then answers its error).
pub fn scan_page(arguments: &[Vec<u8>]) -> Option<(u64, usize)> {
    let cursor = std::str::from_utf8(arguments.get(2)?)
        .ok()?
        .parse::<u64>()
        .ok()?;
    let mut count = SCAN_COUNT_DEFAULT;
    for (at, word) in arguments.iter().enumerate().skip(3) {
        if word.eq_ignore_ascii_case(b"COUNT") {
            let value = parse_integer(arguments.get(at + 1)?)?;
            count = usize::try_from(value).ok()?.clamp(1, SCAN_COUNT_MAX);
        }
    }
    Some((cursor, count))
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]`: a page of about COUNT fields
/// from the cursor and the next page's cursor (0 after the last); MATCH filters the page. A
/// hash with writes pending in the same group is read whole (cursor 0).
pub fn hscan(arguments: &[Vec<u8>], hash: Option<&HashView>) -> HashEffect {
    let cursor = std::str::from_utf8(&arguments[2]).ok();
    if cursor.and_then(|c| c.parse::<u64>().ok()).is_none() {
        return HashEffect::reply(Reply::error("ERR invalid cursor"));
    }
    let (mut pattern, mut values) = (None, true);
    let mut at = 3;
    // Bounded by the arguments: each step consumes one or two.
    while at < arguments.len() {
        match arguments[at].to_ascii_uppercase().as_slice() {
            b"MATCH" if at + 1 < arguments.len() => pattern = Some(&arguments[at + 1]),
            b"COUNT" if at + 1 < arguments.len() => {
                if parse_integer(&arguments[at + 1]).is_none_or(|count| count < 1) {
                    return HashEffect::reply(Reply::error(errors::SYNTAX));
                }
            }
            b"NOVALUES" => {
                values = false;
                at += 1;
                continue;
            }
            _ => return HashEffect::reply(Reply::error(errors::SYNTAX)),
        }
        at += 2;
    }
    let mut items = Vec::new();
    for (name, value) in all(hash) {
        if pattern.is_none_or(|p| crate::glob::matches(p, name)) {
            items.push(Reply::Bulk(name.clone()));
            if values {
                items.push(Reply::Bulk(value.clone()));
            }
        }
    }
    let next = hash.and_then(|h| h.next_cursor).unwrap_or(0);
    HashEffect::reply(Reply::Array(vec![
        Reply::Bulk(next.to_string().into_bytes()),
        Reply::Array(items),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn view(pairs: &[(&str, &str)]) -> HashView {
        HashView {
            next_cursor: None,
            count: pairs.len() as u64,
            fields: pairs
                .iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn hrandfield_draws_distinct_fields_or_repeats_them_and_refuses_bad_counts() {
        let hash = view(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let field = hrandfield(&args(&["HRANDFIELD", "h"]), Some(&hash)).reply;
        assert!(matches!(field, Reply::Bulk(ref f) if hash.fields.contains_key(f)));
        assert_eq!(
            hrandfield(&args(&["HRANDFIELD", "h"]), None).reply,
            Reply::Null
        );
        let Reply::Array(distinct) =
            hrandfield(&args(&["HRANDFIELD", "h", "10"]), Some(&hash)).reply
        else {
            panic!("an array");
        };
        let mut names: Vec<Reply> = distinct.clone();
        names.sort_by_key(|r| format!("{r:?}"));
        names.dedup();
        assert_eq!((distinct.len(), names.len()), (3, 3));
        let Reply::Array(repeated) =
            hrandfield(&args(&["HRANDFIELD", "h", "-7"]), Some(&hash)).reply
        else {
            panic!("an array");
        };
        assert_eq!(repeated.len(), 7);
        let Reply::Pairs(pairs) =
            hrandfield(&args(&["HRANDFIELD", "h", "2", "WITHVALUES"]), Some(&hash)).reply
        else {
            panic!("pairs");
        };
        for (field, value) in &pairs {
            let (Reply::Bulk(field), Reply::Bulk(value)) = (field, value) else {
                panic!("bulk strings");
            };
            assert_eq!(hash.fields.get(field), Some(value));
        }
        assert_eq!(pairs.len(), 2);
        assert_eq!(
            hrandfield(&args(&["HRANDFIELD", "h", "-3"]), None).reply,
            Reply::Array(Vec::new())
        );
        let Reply::Array(every) =
            hrandfield(&args(&["HRANDFIELD", "h", "99999999999"]), Some(&hash)).reply
        else {
            panic!("an array");
        };
        assert_eq!(every.len(), 3);
        let refusals = [
            (vec!["HRANDFIELD", "h", "x"], errors::NOT_INTEGER),
            (vec!["HRANDFIELD", "h", "1", "WITHSCORES"], errors::SYNTAX),
            (
                vec!["HRANDFIELD", "h", "-99999999999"],
                "ERR value is out of range",
            ),
        ];
        for (request, error) in refusals {
            let reply = hrandfield(&args(&request), Some(&hash)).reply;
            assert_eq!(reply, Reply::error(error), "{request:?}");
        }
    }

    #[test]
    fn hset_counts_new_fields_and_the_last_value_of_a_repeated_one_wins() {
        let hash = view(&[("a", "1")]);
        let effect = hset(
            &args(&["HSET", "h", "a", "2", "b", "3", "b", "4"]),
            Some(&hash),
        );
        assert_eq!(effect.reply, Reply::Integer(1));
        assert_eq!(
            effect.puts,
            vec![
                (b"a".to_vec(), b"2".to_vec()),
                (b"b".to_vec(), b"4".to_vec())
            ]
        );
        let effect = hset(&args(&["HMSET", "h", "c", "1"]), None);
        assert_eq!(effect.reply, Reply::Ok);
        let request = args(&["HSET", "h", "a", "1", "b", "2"]);
        let named = Needs::Named { first: 2, step: 2 }.named(&request);
        assert_eq!(named, vec![&b"a"[..], &b"b"[..]]);
    }

    #[test]
    fn increments_follow_redis_errors() {
        let hash = view(&[("n", "41"), ("s", "x"), ("f", "1.5")]);
        assert_eq!(
            hincrby(&args(&["HINCRBY", "h", "n", "1"]), Some(&hash)).reply,
            Reply::Integer(42)
        );
        assert_eq!(
            hincrby(&args(&["HINCRBY", "h", "s", "1"]), Some(&hash)).reply,
            Reply::error("ERR hash value is not an integer")
        );
        assert_eq!(
            hincrby(&args(&["HINCRBY", "h", "n", "x"]), Some(&hash)).reply,
            Reply::error(errors::NOT_INTEGER)
        );
        let max = view(&[("n", &i64::MAX.to_string())]);
        assert_eq!(
            hincrby(&args(&["HINCRBY", "h", "n", "1"]), Some(&max)).reply,
            Reply::error(errors::OVERFLOW)
        );
        let effect = hincrbyfloat(&args(&["HINCRBYFLOAT", "h", "f", "0.25"]), Some(&hash));
        assert_eq!(effect.reply, Reply::Bulk(b"1.75".to_vec()));
        assert_eq!(
            hincrbyfloat(&args(&["HINCRBYFLOAT", "h", "s", "1"]), Some(&hash)).reply,
            Reply::error("ERR hash value is not a float")
        );
    }

    #[test]
    fn hdel_removes_present_fields_once_and_hscan_filters() {
        let hash = view(&[("a", "1"), ("b", "2"), ("ab", "3")]);
        let effect = hdel(&args(&["HDEL", "h", "a", "a", "zz"]), Some(&hash));
        assert_eq!(effect.reply, Reply::Integer(1));
        assert_eq!(effect.deletes, vec![b"a".to_vec()]);
        let scanned = hscan(
            &args(&["HSCAN", "h", "0", "MATCH", "a*", "NOVALUES"]),
            Some(&hash),
        );
        assert_eq!(
            scanned.reply,
            Reply::Array(vec![
                Reply::Bulk(b"0".to_vec()),
                Reply::Array(vec![
                    Reply::Bulk(b"a".to_vec()),
                    Reply::Bulk(b"ab".to_vec())
                ])
            ])
        );
        assert_eq!(
            hscan(&args(&["HSCAN", "h", "x"]), Some(&hash)).reply,
            Reply::error("ERR invalid cursor")
        );
        assert_eq!(hlen(&args(&["HLEN", "h"]), None).reply, Reply::Integer(0));
        assert_eq!(
            hgetall(&args(&["HGETALL", "h"]), None).reply,
            Reply::Map(Vec::new())
        );
    }
}
