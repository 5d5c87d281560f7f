//! How a Redis value is stored in the engine: the key is the Redis key, unchanged (so it lives
//! on the shard its hash names), and the value is a 9-byte header and the payload:
//!
//! ```text
//! [kind: 1 byte][deadline: u64 little-endian, Unix milliseconds, 0 = never][payload]
//! ```
//!
//! The deadline travels with the value, in the same log record, so an expiry is as durable as
//! the write that set it, and a read that finds a deadline in the past treats the key as absent
//! without any other lookup.

use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes of the header before the payload.
pub const HEADER_BYTES: usize = 9;

/// The kinds of value the server stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string (`SET`, `INCR`, `APPEND`, ...).
    String,
}

impl Kind {
    fn tag(self) -> u8 {
        match self {
            Kind::String => b's',
        }
    }

    /// The name `TYPE` answers.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
        }
    }
}

/// A stored value, decoded: borrowed from the engine's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored<'a> {
    /// What it is.
    pub kind: Kind,
    /// When it expires (Unix milliseconds), if ever.
    pub deadline_ms: Option<u64>,
    /// Its bytes.
    pub payload: &'a [u8],
}

/// A value whose bytes are not one the server wrote (another program used the database, or
/// its bytes were damaged): the command gets an error reply, the server goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForeignValue;

impl<'a> Stored<'a> {
    /// Decodes `bytes` as the engine holds them.
    pub fn decode(bytes: &'a [u8]) -> Result<Stored<'a>, ForeignValue> {
        if bytes.len() < HEADER_BYTES {
            return Err(ForeignValue);
        }
        let kind = match bytes[0] {
            b's' => Kind::String,
            _ => return Err(ForeignValue),
        };
        let mut deadline = [0u8; 8];
        deadline.copy_from_slice(&bytes[1..HEADER_BYTES]);
        let deadline = u64::from_le_bytes(deadline);
        Ok(Stored {
            kind,
            deadline_ms: (deadline != 0).then_some(deadline),
            payload: &bytes[HEADER_BYTES..],
        })
    }

    /// Whether the value has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.deadline_ms.is_some_and(|deadline| deadline <= now_ms)
    }
}

/// The engine's bytes for a value.
pub fn encode(kind: Kind, deadline_ms: Option<u64>, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    out.push(kind.tag());
    out.extend_from_slice(&deadline_ms.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(payload);
    debug_assert_eq!(out.len(), HEADER_BYTES + payload.len());
    out
}

/// The wall clock in Unix milliseconds (what deadlines are measured in).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_decodes_to_what_was_encoded() {
        let bytes = encode(Kind::String, Some(1234), b"hello");
        let stored = Stored::decode(&bytes).expect("ours");
        assert_eq!(stored.payload, b"hello");
        assert_eq!(stored.deadline_ms, Some(1234));
        assert!(stored.expired_at(1234));
        assert!(!stored.expired_at(1233));
        assert_eq!(Stored::decode(b"x12345678"), Err(ForeignValue));
        assert_eq!(Stored::decode(b"s"), Err(ForeignValue));
    }
}
