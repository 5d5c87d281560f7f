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
//!
//! A value too large for one B+tree record is stored in chunks (`chunks.rs`); the key then
//! holds a chunked header instead, with the same first 9 bytes' meaning:
//!
//! ```text
//! ['L'][deadline: u64 LE][kind: 1 byte][generation: u64 LE][length: u64 LE][chunk bytes: u32 LE]
//! ```
//!
//! Commands never see that form: a key's value is assembled before a command runs, and split
//! again when it is written ([`Physical`] is what the engine holds, the inline form what
//! commands read).

use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes of the header before the payload.
pub const HEADER_BYTES: usize = 9;

/// The kinds of value the server stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string (`SET`, `INCR`, `APPEND`, ...).
    String,
    /// A hash: the payload is a [`HashHeader`], the fields are records of their own.
    Hash,
}

impl Kind {
    fn tag(self) -> u8 {
        match self {
            Kind::String => b's',
            Kind::Hash => b'h',
        }
    }

    fn from_tag(tag: u8) -> Result<Kind, ForeignValue> {
        match tag {
            b's' => Ok(Kind::String),
            b'h' => Ok(Kind::Hash),
            _ => Err(ForeignValue),
        }
    }

    /// The name `TYPE` answers.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
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
        let kind = Kind::from_tag(bytes[0])?;
        Ok(Stored {
            kind,
            deadline_ms: deadline_at(bytes),
            payload: &bytes[HEADER_BYTES..],
        })
    }

    /// Whether the value has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.deadline_ms.is_some_and(|deadline| deadline <= now_ms)
    }
}

/// The payload of a hash's value: which generation its fields carry and how many there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashHeader {
    /// Names the hash's field records (drawn at random when the hash is created).
    pub generation: u64,
    /// Fields in the hash (never 0: an empty hash is removed).
    pub count: u64,
}

impl HashHeader {
    /// The header's bytes (a value's payload).
    pub fn encode(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.generation.to_le_bytes());
        out[8..].copy_from_slice(&self.count.to_le_bytes());
        out
    }

    /// The header in a hash's payload.
    pub fn decode(payload: &[u8]) -> Result<HashHeader, ForeignValue> {
        let bytes: &[u8; 16] = payload.try_into().map_err(|_| ForeignValue)?;
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        Ok(HashHeader {
            generation: word(0),
            count: word(8),
        })
    }

    /// The hash header in `bytes` (a value in its inline form), if they hold one.
    pub fn of_value(bytes: &[u8]) -> Option<HashHeader> {
        let stored = Stored::decode(bytes).ok()?;
        (stored.kind == Kind::Hash)
            .then(|| HashHeader::decode(stored.payload).ok())
            .flatten()
    }
}

/// The deadline in bytes 1..9 of a header (at least [`HEADER_BYTES`] long).
fn deadline_at(bytes: &[u8]) -> Option<u64> {
    let deadline = u64::from_le_bytes(bytes[1..HEADER_BYTES].try_into().expect("8 bytes"));
    (deadline != 0).then_some(deadline)
}

/// The tag of a chunked header.
const CHUNKED_TAG: u8 = b'L';

/// Bytes of a chunked header.
pub const CHUNKED_HEADER_BYTES: usize = HEADER_BYTES + 1 + 8 + 8 + 4;

/// Where the chunks of a large value are and how to put them together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkedHeader {
    /// What the value is.
    pub kind: Kind,
    /// When it expires (Unix milliseconds), if ever.
    pub deadline_ms: Option<u64>,
    /// Names this value's chunks (drawn at random per write: never reused).
    pub generation: u64,
    /// The payload's length.
    pub length: u64,
    /// Bytes per chunk (the last one may hold fewer).
    pub chunk_bytes: u32,
}

impl ChunkedHeader {
    /// How many chunks hold the payload.
    pub fn chunk_count(&self) -> u64 {
        self.length.div_ceil(u64::from(self.chunk_bytes))
    }

    /// The engine's bytes for the header.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHUNKED_HEADER_BYTES);
        out.push(CHUNKED_TAG);
        out.extend_from_slice(&self.deadline_ms.unwrap_or(0).to_le_bytes());
        out.push(self.kind.tag());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.length.to_le_bytes());
        out.extend_from_slice(&self.chunk_bytes.to_le_bytes());
        debug_assert_eq!(out.len(), CHUNKED_HEADER_BYTES);
        out
    }

    fn decode(bytes: &[u8]) -> Result<ChunkedHeader, ForeignValue> {
        if bytes.len() != CHUNKED_HEADER_BYTES || bytes[0] != CHUNKED_TAG {
            return Err(ForeignValue);
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let chunk_bytes = u32::from_le_bytes(bytes[26..30].try_into().expect("4 bytes"));
        let header = ChunkedHeader {
            kind: Kind::from_tag(bytes[HEADER_BYTES])?,
            deadline_ms: deadline_at(bytes),
            generation: word(10),
            length: word(18),
            chunk_bytes,
        };
        // A header whose chunks could not be named (index past u32) is not one we wrote.
        if chunk_bytes == 0 || header.chunk_count() > u64::from(u32::MAX) {
            return Err(ForeignValue);
        }
        Ok(header)
    }

    /// Whether the value has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.deadline_ms.is_some_and(|deadline| deadline <= now_ms)
    }
}

/// A value as the engine holds it: whole, or a header naming its chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Physical<'a> {
    /// The value itself.
    Inline(Stored<'a>),
    /// A large value's header.
    Chunked(ChunkedHeader),
}

impl<'a> Physical<'a> {
    /// Decodes `bytes` as the engine holds them.
    pub fn decode(bytes: &'a [u8]) -> Result<Physical<'a>, ForeignValue> {
        match bytes.first() {
            Some(&CHUNKED_TAG) => ChunkedHeader::decode(bytes).map(Physical::Chunked),
            _ => Stored::decode(bytes).map(Physical::Inline),
        }
    }

    /// The value's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Physical::Inline(stored) => stored.kind,
            Physical::Chunked(header) => header.kind,
        }
    }

    /// Whether the value has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: u64) -> bool {
        match self {
            Physical::Inline(stored) => stored.expired_at(now_ms),
            Physical::Chunked(header) => header.expired_at(now_ms),
        }
    }

    /// When the value expires (Unix milliseconds), if it does.
    pub fn deadline_ms(&self) -> Option<u64> {
        match self {
            Physical::Inline(stored) => stored.deadline_ms,
            Physical::Chunked(header) => header.deadline_ms,
        }
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

    #[test]
    fn a_chunked_header_decodes_to_what_was_encoded() {
        let header = ChunkedHeader {
            kind: Kind::String,
            deadline_ms: Some(99),
            generation: 0x0102_0304_0506_0708,
            length: 10_000,
            chunk_bytes: 976,
        };
        let bytes = header.encode();
        assert_eq!(Physical::decode(&bytes), Ok(Physical::Chunked(header)));
        assert_eq!(header.chunk_count(), 11);
        assert!(Physical::decode(&bytes).expect("ours").expired_at(99));
        // A header with no chunk size, a short one, and one with too many chunks are refused.
        let mut zero = bytes.clone();
        zero[26..30].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(Physical::decode(&zero), Err(ForeignValue));
        assert_eq!(Physical::decode(&bytes[..29]), Err(ForeignValue));
        let mut huge = bytes.clone();
        huge[18..26].copy_from_slice(&u64::MAX.to_le_bytes());
        huge[26..30].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(Physical::decode(&huge), Err(ForeignValue));
        let inline = encode(Kind::String, None, b"v");
        assert!(matches!(Physical::decode(&inline), Ok(Physical::Inline(_))));
    }
}
