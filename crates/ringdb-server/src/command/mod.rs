//! The commands: what each one means, apart from where it runs.
//!
//! A command on keys is split into key operations ([`KeyOp`]): a pure function of one key's
//! current value (and the clock) giving a reply and what to write back. Pure, so the same
//! function runs on the worker (a read, in place, no hop) or on the key's shard (a write,
//! under the key's lock, its writes committed with the others of its shard in the batch). A
//! command over several keys (`MGET`, `DEL a b`) is several key operations whose replies are
//! combined ([`Combine`]). Commands on the connection (`PING`, `HELLO`, `CLIENT`) and on the
//! whole database (`DBSIZE`, `KEYS`, `FLUSHDB`) are the other kinds ([`Plan`]).

mod bits;
pub mod hashes;
mod keys;
mod session;
mod strings;
mod table;

pub use session::{run_session, After, Session};
pub use table::{mset_ops, plan, writes, Plan, WholeDb};

use crate::value::Stored;

/// A reply, owned (it crosses back from a shard), written out in the connection's protocol.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A status line.
    Simple(String),
    /// An error line, starting with its code.
    Error(String),
    /// An integer.
    Integer(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// The null.
    #[default]
    Null,
    /// The null array (RESP2 `*-1`).
    NullArray,
    /// An array.
    Array(Vec<Reply>),
    /// A map (RESP2: a flat array).
    Map(Vec<(Reply, Reply)>),
    /// Pairs (RESP3: an array of two-element arrays; RESP2: a flat array), as HRANDFIELD
    /// WITHVALUES answers.
    Pairs(Vec<(Reply, Reply)>),
    /// A set (RESP2: an array).
    Set(Vec<Reply>),
    /// Text for people (RESP3 verbatim string, RESP2 bulk).
    Verbatim(String),
}

impl Reply {
    /// An error reply.
    pub fn error(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    /// Writes the reply in the connection's protocol.
    pub fn write(&self, out: &mut crate::resp::Replies<'_>) {
        match self {
            Reply::Ok => out.ok(),
            Reply::Simple(text) => out.simple(text),
            Reply::Error(text) => out.error(text),
            Reply::Integer(value) => out.integer(*value),
            Reply::Bulk(bytes) => out.bulk(bytes),
            Reply::Null => out.null(),
            Reply::NullArray => out.null_array(),
            Reply::Verbatim(text) => out.verbatim(text),
            Reply::Array(items) | Reply::Set(items) => {
                if matches!(self, Reply::Set(_)) {
                    out.set(items.len());
                } else {
                    out.array(items.len());
                }
                items.iter().for_each(|item| item.write(out));
            }
            Reply::Map(pairs) => {
                out.map(pairs.len());
                for (key, value) in pairs {
                    key.write(out);
                    value.write(out);
                }
            }
            Reply::Pairs(pairs) => {
                let nested = out.resp3();
                out.array(if nested { pairs.len() } else { 2 * pairs.len() });
                for (key, value) in pairs {
                    if nested {
                        out.array(2);
                    }
                    key.write(out);
                    value.write(out);
                }
            }
        }
    }
}

/// Redis's error texts, word for word (clients and test suites match them).
pub mod errors {
    /// A value that must be an integer is not.
    pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
    /// A value that must be a float is not.
    pub const NOT_FLOAT: &str = "ERR value is not a valid float";
    /// Options that do not go together, or an unknown option.
    pub const SYNTAX: &str = "ERR syntax error";
    /// A command on a key of another type.
    pub const WRONG_TYPE: &str =
        "WRONGTYPE Operation against a key holding the wrong kind of value";
    /// INCR past the range.
    pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
    /// A command before AUTH on a server with a password.
    pub const NO_AUTH: &str = "NOAUTH Authentication required.";
    /// A wrong password.
    pub const WRONG_PASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
    /// A value the server did not write.
    pub const FOREIGN: &str = "ERR the stored value is not one this server wrote";
    /// A write sent to a replica.
    pub const READONLY: &str = "READONLY You can't write against a read only replica.";
    /// A read sent to a replica still taking its first copy.
    pub const LOADING: &str = "LOADING the replica is taking its first copy of its primary";
    /// A write in sync mode with no replica online.
    pub const NO_REPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

    /// The wrong number of arguments for `command`.
    pub fn arity(command: &str) -> String {
        format!(
            "ERR wrong number of arguments for '{}' command",
            command.to_ascii_lowercase()
        )
    }
}

/// What a key operation writes back.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Nothing.
    Keep,
    /// These bytes (already encoded with [`crate::value::encode`]).
    Put(Vec<u8>),
    /// Remove the key.
    Delete,
}

/// A key operation's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Effect {
    /// What the command answers (or its part of the answer).
    pub reply: Reply,
    /// What it writes.
    pub write: Write,
}

impl Effect {
    /// A reply and no write.
    pub fn reply(reply: Reply) -> Effect {
        Effect {
            reply,
            write: Write::Keep,
        }
    }
}

/// The pure function of a key operation: the arguments, the key's live value (`None`: absent
/// or expired) and the clock.
pub type KeyFn = fn(&[Vec<u8>], Option<Stored<'_>>, u64) -> Effect;

/// What an operation does with its key.
#[derive(Clone, Copy)]
pub enum Run {
    /// A function of the key's value.
    Value(KeyFn),
    /// A function of a hash's fields, and which fields it reads (always on the key's shard).
    Hash(hashes::HashFn, hashes::Needs),
    /// `RENAME key newkey` (`only_new`: RENAMENX) with both keys on the op's shard.
    Rename {
        /// RENAMENX: only when the new key does not exist.
        only_new: bool,
    },
}

/// One operation on one key.
#[derive(Clone)]
pub struct KeyOp {
    /// The key.
    pub key: Vec<u8>,
    /// What to do with it.
    pub run: Run,
    /// The command's arguments, as the function reads them.
    pub arguments: std::sync::Arc<Vec<Vec<u8>>>,
    /// Whether it may write (runs on the shard, under the key's lock).
    pub writes: bool,
    /// Whether its function reads the value's bytes (else a large value is not assembled for
    /// it: its kind and expiry are enough).
    pub payload: bool,
}

impl KeyOp {
    /// The keys the operation locks on its shard (a rename's new key too).
    pub fn locked_keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        let renamed = match self.run {
            Run::Rename { .. } => self.arguments.get(2),
            _ => None,
        };
        std::iter::once(&self.key).chain(renamed)
    }

    /// The reply of a read-only operation on one key's value, run on the worker (hash reads
    /// there go through `hashes::read_anywhere`).
    pub fn run_value(&self, current: Option<Stored<'_>>, now_ms: u64) -> Reply {
        match self.run {
            Run::Value(run) => run(&self.arguments, current, now_ms).reply,
            Run::Hash(..) | Run::Rename { .. } => {
                Reply::error("ERR a command of several records ran off its shard")
            }
        }
    }
}

/// How the replies of a command's key operations become the command's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// One operation: its reply.
    Single,
    /// An array of the replies (`MGET`).
    Array,
    /// The sum of the integer replies (`DEL`, `EXISTS`, `TOUCH`).
    Sum,
    /// `+OK` (`MSET` on one shard).
    Ok,
}

impl Combine {
    /// The command's reply from its operations' replies, in order.
    pub fn reply(self, mut replies: Vec<Reply>) -> Reply {
        if let Some(error) = replies.iter().find(|r| matches!(r, Reply::Error(_))) {
            return error.clone();
        }
        match self {
            Combine::Single => replies.pop().unwrap_or(Reply::Null),
            Combine::Array => Reply::Array(replies),
            Combine::Ok => Reply::Ok,
            Combine::Sum => Reply::Integer(
                replies
                    .iter()
                    .map(|r| match r {
                        Reply::Integer(n) => *n,
                        _ => 0,
                    })
                    .sum(),
            ),
        }
    }
}

/// A decimal integer argument as Redis reads one (no spaces, no '+', fits in i64).
pub fn parse_integer(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.starts_with('+') || text.len() > 20 {
        return None;
    }
    if text.len() > 1 && (text.starts_with('0') || text.starts_with("-0")) {
        return None;
    }
    text.parse().ok()
}

/// A float argument as Redis reads one (finite or not: `inf` is allowed, `nan` is not).
pub fn parse_float(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.trim() != text {
        return None;
    }
    let value: f64 = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => text.parse().ok()?,
    };
    (!value.is_nan()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_nest_in_resp3_and_lie_flat_in_resp2() {
        let pairs = Reply::Pairs(vec![(Reply::Bulk(b"f".to_vec()), Reply::Integer(1))]);
        let (mut two, mut three) = (Vec::new(), Vec::new());
        pairs.write(&mut crate::resp::Replies::new(&mut two, false));
        pairs.write(&mut crate::resp::Replies::new(&mut three, true));
        assert_eq!(two, b"*2\r\n$1\r\nf\r\n:1\r\n");
        assert_eq!(three, b"*1\r\n*2\r\n$1\r\nf\r\n:1\r\n");
    }

    #[test]
    fn integers_are_read_as_redis_reads_them() {
        assert_eq!(parse_integer(b"-12"), Some(-12));
        assert_eq!(parse_integer(b"0"), Some(0));
        assert_eq!(parse_integer(b"007"), None);
        assert_eq!(parse_integer(b"+1"), None);
        assert_eq!(parse_integer(b" 1"), None);
        assert_eq!(parse_integer(b"9223372036854775808"), None);
        assert_eq!(parse_float(b"1.5e3"), Some(1500.0));
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
    }

    #[test]
    fn an_error_among_the_parts_is_the_reply() {
        let replies = vec![Reply::Integer(1), Reply::error("ERR x"), Reply::Integer(1)];
        assert_eq!(Combine::Sum.reply(replies), Reply::error("ERR x"));
        let replies = vec![Reply::Integer(1), Reply::Integer(0), Reply::Integer(1)];
        assert_eq!(Combine::Sum.reply(replies), Reply::Integer(2));
    }
}
