//! From a request to a [`Plan`]: the command's name looked up, its arity checked (Redis's
//! rule: a positive arity is exact, a negative one a minimum, both counting the name), and its
//! keys and functions laid out.

use super::{bits, errors, hashes, keys, strings, Combine, KeyFn, KeyOp, Reply, Run};
use std::sync::Arc;

/// What a request turns into.
pub enum Plan {
    /// A command on the connection or the server (its request), run by
    /// [`super::run_session`].
    Session(Vec<Vec<u8>>),
    /// Operations on keys, each run where its key lives; `combine` makes the reply.
    Keys {
        /// The operations, in order.
        ops: Vec<KeyOp>,
        /// How their replies become the command's.
        combine: Combine,
    },
    /// A command over the whole database.
    Whole(WholeDb),
    /// The reply, already known (an arity error, an unknown command).
    Reply(Reply),
}

/// Commands over the whole database.
pub enum WholeDb {
    /// `DBSIZE`.
    DbSize,
    /// `KEYS pattern`.
    Keys(Vec<u8>),
    /// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]`.
    Scan(Vec<Vec<u8>>),
    /// `RANDOMKEY`.
    RandomKey,
    /// `FLUSHDB`/`FLUSHALL`.
    Flush,
    /// `SAVE`/`BGSAVE`: everything logged made durable and checkpointed.
    Save,
    /// `MSET` over several shards: one batch, atomic across shards and across a crash.
    MsetAcross(Vec<(Vec<u8>, Vec<u8>)>),
    /// `MSETNX`: all keys absent, then all set, atomically.
    MsetNx(Vec<(Vec<u8>, Vec<u8>)>),
    /// `INFO [section ...]`.
    Info(Vec<Vec<u8>>),
    /// `CLUSTERX MIGRATE host:port ranges...`: the slots' keys copied to that node.
    Migrate {
        /// The target node.
        target: String,
        /// The slot ranges.
        ranges: Vec<(u16, u16)>,
    },
    /// `CLUSTERX PURGE [ranges...]`: the keys of slots this node does not serve, deleted.
    Purge(Option<Vec<(u16, u16)>>),
    /// `CLUSTER COUNTKEYSINSLOT slot` (`limit`: `None`) or `GETKEYSINSLOT slot count`.
    SlotKeys {
        /// The slot.
        slot: u16,
        /// GETKEYSINSLOT's count: the keys are the reply; COUNTKEYSINSLOT: their number.
        limit: Option<usize>,
    },
    /// `REPLICAOF`, `ROLE`, `WAIT` and what replicas send (`replication/`).
    Replication(Vec<Vec<u8>>),
    /// `RENAME`/`RENAMENX` with the keys on different shards: one batch, atomic across
    /// shards and across a crash.
    RenameAcross {
        /// The key renamed.
        from: Vec<u8>,
        /// Its new name.
        to: Vec<u8>,
        /// RENAMENX.
        only_new: bool,
    },
}

/// A command on one key: name, arity, function, whether it writes.
const KEY_COMMANDS: &[(&str, i32, KeyFn, bool)] = &[
    ("GET", 2, strings::get, false),
    ("SET", -3, strings::set, true),
    ("SETNX", 3, strings::setnx, true),
    ("SETEX", 4, strings::setex, true),
    ("PSETEX", 4, strings::setex, true),
    ("GETSET", 3, strings::getset, true),
    ("GETDEL", 2, strings::getdel, true),
    ("GETEX", -2, strings::getex, true),
    ("APPEND", 3, strings::append, true),
    ("STRLEN", 2, strings::strlen, false),
    ("GETRANGE", 4, strings::getrange, false),
    ("SUBSTR", 4, strings::getrange, false),
    ("SETRANGE", 4, strings::setrange, true),
    ("GETBIT", 3, bits::getbit, false),
    ("SETBIT", 4, bits::setbit, true),
    ("BITCOUNT", -2, bits::bitcount, false),
    ("BITPOS", -3, bits::bitpos, false),
    ("INCR", 2, strings::incr, true),
    ("DECR", 2, strings::incr, true),
    ("INCRBY", 3, strings::incr, true),
    ("DECRBY", 3, strings::incr, true),
    ("INCRBYFLOAT", 3, strings::incrbyfloat, true),
    ("TYPE", 2, keys::kind, false),
    ("EXPIRE", -3, keys::expire, true),
    ("PEXPIRE", -3, keys::expire, true),
    ("EXPIREAT", -3, keys::expire, true),
    ("PEXPIREAT", -3, keys::expire, true),
    ("TTL", 2, keys::ttl, false),
    ("PTTL", 2, keys::ttl, false),
    ("EXPIRETIME", 2, keys::ttl, false),
    ("PEXPIRETIME", 2, keys::ttl, false),
    ("PERSIST", 2, keys::persist, true),
];

/// Commands on several keys, one operation per key: name, function, writes, combine.
const MULTI_KEY_COMMANDS: &[(&str, KeyFn, bool, Combine)] = &[
    ("MGET", strings::get, false, Combine::Array),
    ("DEL", keys::delete, true, Combine::Sum),
    ("UNLINK", keys::delete, true, Combine::Sum),
    ("EXISTS", keys::exists, false, Combine::Sum),
    ("TOUCH", keys::exists, false, Combine::Sum),
];

/// Commands of the connection and the server, with their arity.
pub const SESSION_COMMANDS: &[(&str, i32)] = &[
    ("PING", -1),
    ("ECHO", 2),
    ("HELLO", -1),
    ("AUTH", -2),
    ("SELECT", 2),
    ("QUIT", -1),
    ("RESET", 1),
    ("CLIENT", -2),
    ("COMMAND", -1),
    ("CONFIG", -2),
    ("TIME", 1),
    ("LASTSAVE", 1),
    ("SHUTDOWN", -1),
    ("FUNCTION", -2),
    ("SCRIPT", -2),
    ("MULTI", 1),
    ("EXEC", 1),
    ("DISCARD", 1),
    ("WATCH", -2),
    ("UNWATCH", 1),
    ("SUBSCRIBE", -2),
    ("PSUBSCRIBE", -2),
    ("SSUBSCRIBE", -2),
    ("PUBLISH", 3),
    ("CLUSTER", -2),
    ("CLUSTERX", -2),
    ("ASKING", 1),
    ("READONLY", 1),
    ("READWRITE", 1),
];

/// Every command the server knows with its arity (for `COMMAND COUNT`, `COMMAND INFO`).
pub fn known_commands() -> Vec<(&'static str, i32)> {
    let mut all: Vec<(&'static str, i32)> = KEY_COMMANDS
        .iter()
        .map(|(name, arity, _, _)| (*name, *arity))
        .collect();
    all.extend(MULTI_KEY_COMMANDS.iter().map(|(name, ..)| (*name, -2)));
    all.extend(
        hashes::HASH_COMMANDS
            .iter()
            .map(|(name, arity, ..)| (*name, *arity)),
    );
    all.extend(SESSION_COMMANDS.iter().copied());
    all.extend([
        ("MSET", -3),
        ("MSETNX", -3),
        ("DBSIZE", 1),
        ("KEYS", 2),
        ("SCAN", -2),
        ("RANDOMKEY", 1),
        ("FLUSHDB", -1),
        ("FLUSHALL", -1),
        ("SAVE", 1),
        ("BGSAVE", -1),
        ("INFO", -1),
        ("RENAME", 3),
        ("RENAMENX", 3),
        ("ROLE", 1),
        ("REPLICAOF", 3),
        ("SLAVEOF", 3),
        ("WAIT", 3),
        ("REPLSYNC", 5),
        ("REPLSCAN", 5),
        ("REPLFETCH", 6),
    ]);
    all
}

/// Whether command `name` (one key) reads its value's bytes: not those that replace the value
/// (SET without GET, SETEX, PSETEX) nor those that read only its kind or expiry.
fn reads_payload(name: &str, arguments: &[Vec<u8>]) -> bool {
    match name {
        "SET" => arguments[3..]
            .iter()
            .any(|word| word.eq_ignore_ascii_case(b"GET")),
        "SETEX" | "PSETEX" | "TYPE" | "TTL" | "PTTL" | "EXPIRETIME" | "PEXPIRETIME" => false,
        _ => true,
    }
}

fn arity_ok(arity: i32, count: usize) -> bool {
    if arity >= 0 {
        count == arity as usize
    } else {
        count >= arity.unsigned_abs() as usize
    }
}

/// The error for a command nobody implements here, as Redis words it.
fn unknown(arguments: &[Vec<u8>]) -> Reply {
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&arguments[0])
    );
    for argument in arguments.iter().skip(1).take(16) {
        text.push_str(&format!("'{}' ", String::from_utf8_lossy(argument)));
    }
    Reply::Error(text)
}

/// The plan for `arguments` (not empty: the parser never yields an empty request).
pub fn plan(arguments: Vec<Vec<u8>>, shard_of: impl Fn(&[u8]) -> usize) -> Plan {
    assert!(!arguments.is_empty(), "a request has a name");
    let name = String::from_utf8_lossy(&arguments[0]).to_ascii_uppercase();
    let name = name.as_str();
    if let Some((_, arity, run, writes)) = KEY_COMMANDS.iter().find(|(n, ..)| *n == name) {
        if !arity_ok(*arity, arguments.len()) {
            return Plan::Reply(Reply::error(errors::arity(name)));
        }
        let key = arguments[1].clone();
        let op = KeyOp {
            key,
            run: Run::Value(*run),
            payload: reads_payload(name, &arguments),
            arguments: Arc::new(arguments),
            writes: *writes,
        };
        return Plan::Keys {
            ops: vec![op],
            combine: Combine::Single,
        };
    }
    if let Some((_, arity, run, needs)) = hashes::HASH_COMMANDS.iter().find(|(n, ..)| *n == name) {
        if !arity_ok(*arity, arguments.len()) || !hashes::pairs_complete(name, arguments.len()) {
            return Plan::Reply(Reply::error(errors::arity(name)));
        }
        // A hash is several records: its commands run on its shard, under its key's lock,
        // except reads of one field (or of the count), which read in place where they arrive.
        let op = KeyOp {
            key: arguments[1].clone(),
            run: Run::Hash(*run, *needs),
            arguments: Arc::new(arguments),
            writes: !crate::hashes::reads_in_place(name),
            payload: true,
        };
        return Plan::Keys {
            ops: vec![op],
            combine: Combine::Single,
        };
    }
    if let Some((_, run, writes, combine)) = MULTI_KEY_COMMANDS.iter().find(|(n, ..)| *n == name) {
        if arguments.len() < 2 {
            return Plan::Reply(Reply::error(errors::arity(name)));
        }
        let shared = Arc::new(vec![arguments[0].clone()]);
        let ops = arguments[1..]
            .iter()
            .map(|key| KeyOp {
                key: key.clone(),
                run: Run::Value(*run),
                arguments: shared.clone(),
                writes: *writes,
                payload: name == "MGET",
            })
            .collect();
        return Plan::Keys {
            ops,
            combine: *combine,
        };
    }
    if let Some((_, arity)) = SESSION_COMMANDS.iter().find(|(n, _)| *n == name) {
        return match (arity_ok(*arity, arguments.len()), name) {
            (false, _) => Plan::Reply(Reply::error(errors::arity(name))),
            (true, "CLUSTER") => plan_cluster(arguments),
            (true, "CLUSTERX") => plan_clusterx(arguments),
            (true, _) => Plan::Session(arguments),
        };
    }
    plan_whole(name, arguments, shard_of)
}

/// The key operations of `MSET` (`only_new`: of `MSETNX`, each answering 1 where its key was
/// absent and writing only then; a key named twice keeps its last value, as in Redis).
pub fn mset_ops(pairs: Vec<(Vec<u8>, Vec<u8>)>, only_new: bool) -> Vec<KeyOp> {
    let (name, run): (&[u8], KeyFn) = match only_new {
        true => (b"MSETNX", strings::msetnx_part),
        false => (b"MSET", strings::mset_part),
    };
    let mut ops: Vec<KeyOp> = Vec::with_capacity(pairs.len());
    for (key, value) in pairs {
        if only_new {
            ops.retain(|op| op.key != key);
        }
        ops.push(KeyOp {
            arguments: Arc::new(vec![name.to_vec(), key.clone(), value]),
            key,
            run: Run::Value(run),
            writes: true,
            payload: false,
        });
    }
    ops
}

/// Commands over the whole database, and MSET/MSETNX.
fn plan_whole(name: &str, arguments: Vec<Vec<u8>>, shard_of: impl Fn(&[u8]) -> usize) -> Plan {
    let count = arguments.len();
    let arity_error = || Plan::Reply(Reply::error(errors::arity(name)));
    match name {
        "MSET" | "MSETNX" => {
            if count < 3 || count.is_multiple_of(2) {
                return arity_error();
            }
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = arguments[1..]
                .chunks_exact(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect();
            if name == "MSETNX" {
                return Plan::Whole(WholeDb::MsetNx(pairs));
            }
            let first = shard_of(&pairs[0].0);
            if pairs.iter().any(|(key, _)| shard_of(key) != first) {
                return Plan::Whole(WholeDb::MsetAcross(pairs));
            }
            Plan::Keys {
                ops: mset_ops(pairs, false),
                combine: Combine::Ok,
            }
        }
        "DBSIZE" | "RANDOMKEY" | "SAVE" if count != 1 => arity_error(),
        "DBSIZE" => Plan::Whole(WholeDb::DbSize),
        "RANDOMKEY" => Plan::Whole(WholeDb::RandomKey),
        "SAVE" | "BGSAVE" => Plan::Whole(WholeDb::Save),
        "KEYS" if count != 2 => arity_error(),
        "KEYS" => Plan::Whole(WholeDb::Keys(arguments[1].clone())),
        "SCAN" if count < 2 => arity_error(),
        "SCAN" => Plan::Whole(WholeDb::Scan(arguments)),
        "FLUSHDB" | "FLUSHALL" => match arguments.get(1).map(|a| a.to_ascii_uppercase()) {
            None => Plan::Whole(WholeDb::Flush),
            Some(mode) if count == 2 && (mode == b"SYNC" || mode == b"ASYNC") => {
                Plan::Whole(WholeDb::Flush)
            }
            Some(_) => Plan::Reply(Reply::error(errors::SYNTAX)),
        },
        "INFO" => Plan::Whole(WholeDb::Info(arguments[1..].to_vec())),
        "ROLE" if count != 1 => arity_error(),
        "REPLICAOF" | "SLAVEOF" | "WAIT" if count != 3 => arity_error(),
        "REPLSYNC" | "REPLSCAN" if count != 5 => arity_error(),
        "REPLFETCH" if count != 6 => arity_error(),
        "ROLE" | "REPLICAOF" | "SLAVEOF" | "WAIT" | "REPLSYNC" | "REPLSCAN" | "REPLFETCH" => {
            Plan::Whole(WholeDb::Replication(arguments))
        }
        "RENAME" | "RENAMENX" if count != 3 => arity_error(),
        "RENAME" | "RENAMENX" => plan_rename(name == "RENAMENX", arguments, shard_of),
        _ => Plan::Reply(unknown(&arguments)),
    }
}

/// `CLUSTER COUNTKEYSINSLOT` and `GETKEYSINSLOT` walk the keys; the other subcommands answer
/// from the topology, with the session's commands.
fn plan_cluster(arguments: Vec<Vec<u8>>) -> Plan {
    let sub = String::from_utf8_lossy(&arguments[1]).to_ascii_uppercase();
    let (count_only, wanted) = match sub.as_str() {
        "COUNTKEYSINSLOT" => (true, 3),
        "GETKEYSINSLOT" => (false, 4),
        _ => return Plan::Session(arguments),
    };
    if arguments.len() != wanted {
        return Plan::Reply(Reply::error(errors::arity(&format!(
            "cluster|{}",
            sub.to_ascii_lowercase()
        ))));
    }
    let slot = match super::parse_integer(&arguments[2]) {
        Some(slot) if (0..i64::from(crate::cluster::slot::SLOT_COUNT)).contains(&slot) => slot,
        _ => return Plan::Reply(Reply::error("ERR Invalid slot")),
    };
    let limit = match count_only {
        true => None,
        false => match super::parse_integer(&arguments[3]) {
            Some(count) if count >= 0 => Some(count as usize),
            _ => return Plan::Reply(Reply::error("ERR Invalid number of keys")),
        },
    };
    Plan::Whole(WholeDb::SlotKeys {
        slot: slot as u16,
        limit,
    })
}

/// `CLUSTERX MIGRATE` and `PURGE` walk the keys; the other subcommands are the session's.
fn plan_clusterx(arguments: Vec<Vec<u8>>) -> Plan {
    let sub = String::from_utf8_lossy(&arguments[1]).to_ascii_uppercase();
    let first_range = match sub.as_str() {
        "MIGRATE" if arguments.len() >= 4 => 3,
        "PURGE" => 2,
        "MIGRATE" => return Plan::Reply(Reply::error(errors::arity("clusterx|migrate"))),
        _ => return Plan::Session(arguments),
    };
    let ranges: Result<Vec<(u16, u16)>, String> = arguments[first_range..]
        .iter()
        .map(|word| crate::cluster::topology::parse_range(&String::from_utf8_lossy(word)))
        .collect();
    let ranges = match ranges {
        Ok(ranges) => ranges,
        Err(text) => return Plan::Reply(Reply::Error(format!("ERR {text}"))),
    };
    match sub.as_str() {
        "MIGRATE" => Plan::Whole(WholeDb::Migrate {
            target: String::from_utf8_lossy(&arguments[2]).into_owned(),
            ranges,
        }),
        _ => Plan::Whole(WholeDb::Purge((!ranges.is_empty()).then_some(ranges))),
    }
}

/// Where a command's keys sit among its arguments, as `COMMAND` reports it (first, last,
/// step; a negative last counts from the end): cluster clients route by it.
pub fn key_positions(name: &str) -> (i64, i64, i64) {
    let one_key = KEY_COMMANDS.iter().any(|(n, ..)| *n == name)
        || hashes::HASH_COMMANDS.iter().any(|(n, ..)| *n == name);
    match name {
        _ if one_key => (1, 1, 1),
        "MGET" | "DEL" | "UNLINK" | "EXISTS" | "TOUCH" => (1, -1, 1),
        "MSET" | "MSETNX" => (1, -1, 2),
        "RENAME" | "RENAMENX" => (1, 2, 1),
        _ => (0, 0, 0),
    }
}

/// Whether command `name` may write (`COMMAND`'s `write` flag; else `readonly` when it has
/// keys).
pub fn writes(name: &str) -> bool {
    let single = KEY_COMMANDS.iter().find(|(n, ..)| *n == name).map(|c| c.3);
    let multi = MULTI_KEY_COMMANDS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|c| c.2);
    single.or(multi).unwrap_or(matches!(
        name,
        "MSET"
            | "MSETNX"
            | "RENAME"
            | "RENAMENX"
            | "FLUSHDB"
            | "FLUSHALL"
            | "HSET"
            | "HMSET"
            | "HSETNX"
            | "HDEL"
            | "HINCRBY"
            | "HINCRBYFLOAT"
    ))
}

/// RENAME/RENAMENX: on the keys' shard when they share one, else across shards.
fn plan_rename(only_new: bool, arguments: Vec<Vec<u8>>, shard_of: impl Fn(&[u8]) -> usize) -> Plan {
    let (from, to) = (arguments[1].clone(), arguments[2].clone());
    if shard_of(&from) != shard_of(&to) {
        return Plan::Whole(WholeDb::RenameAcross { from, to, only_new });
    }
    let op = KeyOp {
        key: from,
        run: Run::Rename { only_new },
        arguments: Arc::new(arguments),
        writes: true,
        payload: true,
    };
    Plan::Keys {
        ops: vec![op],
        combine: Combine::Single,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload_of(words: &[&str]) -> bool {
        let arguments: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        match plan(arguments, |_| 0) {
            Plan::Keys { ops, .. } => ops.iter().all(|op| op.payload),
            _ => panic!("a command on keys"),
        }
    }

    #[test]
    fn only_commands_that_read_a_value_assemble_a_large_one() {
        assert!(!payload_of(&["SET", "k", "v"]));
        assert!(!payload_of(&["SET", "k", "v", "EX", "10", "KEEPTTL"]));
        assert!(payload_of(&["SET", "k", "v", "get"]));
        assert!(!payload_of(&["DEL", "a", "b"]));
        assert!(!payload_of(&["TTL", "k"]));
        assert!(payload_of(&["APPEND", "k", "v"]));
        assert!(payload_of(&["MGET", "a", "b"]));
        assert!(payload_of(&["EXPIRE", "k", "10"]));
    }
}
