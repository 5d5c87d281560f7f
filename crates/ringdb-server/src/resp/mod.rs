//! The Redis serialization protocol: requests in (`parse.rs`), replies out (`write.rs`).

mod parse;
mod write;

pub use parse::{parse, Limits, Parsed, ProtocolError, MAX_ARGUMENTS, MAX_INLINE_BYTES};
pub use write::{format_double, Replies};
