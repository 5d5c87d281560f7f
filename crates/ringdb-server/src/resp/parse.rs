//! Requests off the wire: RESP arrays of bulk strings (what every client sends) and inline
//! commands (what a person types into `telnet`), parsed incrementally from whatever bytes have
//! arrived. The parser never panics and never allocates more than the request's declared sizes,
//! each bounded by [`Limits`] before anything is reserved: a client that declares a 4 GiB bulk
//! gets a protocol error, not an allocation.

use std::fmt;

/// The most arguments one request may have (Redis: 1024 * 1024).
pub const MAX_ARGUMENTS: usize = 1024 * 1024;

/// The longest inline command line (Redis: 64 KiB).
pub const MAX_INLINE_BYTES: usize = 64 * 1024;

/// What a request may declare.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest bulk string (Redis's `proto-max-bulk-len`, 512 MiB by default).
    pub max_bulk_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_bytes: 512 * 1024 * 1024,
        }
    }
}

/// A malformed request: the connection gets `-ERR Protocol error: ...` and is closed, as
/// Redis does. The message is Redis's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub &'static str);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

/// What the bytes at the front of the input hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request: its arguments, and how many input bytes it took.
    Request(Vec<Vec<u8>>, usize),
    /// Nothing to run (an empty inline line, `*0`, `*-1`): skip this many bytes.
    Skip(usize),
    /// The request is not whole yet: read more.
    Incomplete,
}

/// Parses the first request in `input`.
pub fn parse(input: &[u8], limits: &Limits) -> Result<Parsed, ProtocolError> {
    match input.first() {
        None => Ok(Parsed::Incomplete),
        Some(b'*') => parse_multibulk(input, limits),
        Some(_) => parse_inline(input),
    }
}

/// The position of the `\r\n` ending the line that starts at `from`, looking no further than
/// `limit` bytes.
fn line_end(input: &[u8], from: usize, limit: usize) -> Option<usize> {
    let window = &input[from..input.len().min(from.saturating_add(limit))];
    window
        .windows(2)
        .position(|pair| pair == b"\r\n")
        .map(|at| from + at)
}

/// A decimal integer as RESP writes lengths: an optional '-', then 1 to 18 digits.
fn parse_length(digits: &[u8]) -> Option<i64> {
    let (negative, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits
        .iter()
        .fold(0i64, |acc, digit| acc * 10 + i64::from(digit - b'0'));
    Some(if negative { -value } else { value })
}

/// `*<count>\r\n` then `count` times `$<len>\r\n<bytes>\r\n`.
fn parse_multibulk(input: &[u8], limits: &Limits) -> Result<Parsed, ProtocolError> {
    debug_assert_eq!(input.first(), Some(&b'*'));
    // The count's line is at most 20 bytes; a longer one without "\r\n" is malformed.
    let Some(end) = line_end(input, 1, 24) else {
        return if input.len() > 24 {
            Err(ProtocolError("invalid multibulk length"))
        } else {
            Ok(Parsed::Incomplete)
        };
    };
    let count = parse_length(&input[1..end]).ok_or(ProtocolError("invalid multibulk length"))?;
    if count > MAX_ARGUMENTS as i64 {
        return Err(ProtocolError("invalid multibulk length"));
    }
    let mut at = end + 2;
    if count <= 0 {
        return Ok(Parsed::Skip(at));
    }
    let count = count as usize;
    // Reserve no more than what has arrived could hold: a declared count is not trusted.
    let mut arguments = Vec::with_capacity(count.min(input.len() / 4 + 1));
    for _ in 0..count {
        match parse_bulk(input, at, limits)? {
            Some((argument, next)) => {
                arguments.push(argument);
                at = next;
            }
            None => return Ok(Parsed::Incomplete),
        }
    }
    debug_assert_eq!(arguments.len(), count);
    Ok(Parsed::Request(arguments, at))
}

/// One `$<len>\r\n<bytes>\r\n` at `at`: the bytes and where the next element starts, or
/// `None` when it has not all arrived.
fn parse_bulk(
    input: &[u8],
    at: usize,
    limits: &Limits,
) -> Result<Option<(Vec<u8>, usize)>, ProtocolError> {
    let Some(&first) = input.get(at) else {
        return Ok(None);
    };
    if first != b'$' {
        return Err(ProtocolError("expected '$'"));
    }
    let Some(end) = line_end(input, at + 1, 24) else {
        return if input.len() > at + 24 {
            Err(ProtocolError("invalid bulk length"))
        } else {
            Ok(None)
        };
    };
    let length = parse_length(&input[at + 1..end]).ok_or(ProtocolError("invalid bulk length"))?;
    if length < 0 || length as u64 > limits.max_bulk_bytes as u64 {
        return Err(ProtocolError("invalid bulk length"));
    }
    let start = end + 2;
    let stop = start + length as usize;
    if input.len() < stop + 2 {
        return Ok(None);
    }
    if &input[stop..stop + 2] != b"\r\n" {
        return Err(ProtocolError("expected CRLF after bulk"));
    }
    Ok(Some((input[start..stop].to_vec(), stop + 2)))
}

/// An inline command: a line of arguments separated by spaces, with Redis's quoting
/// ("..." with escapes, '...').
fn parse_inline(input: &[u8]) -> Result<Parsed, ProtocolError> {
    let newline = input
        .iter()
        .take(MAX_INLINE_BYTES + 1)
        .position(|&byte| byte == b'\n');
    let Some(newline) = newline else {
        return if input.len() > MAX_INLINE_BYTES {
            Err(ProtocolError("too big inline request"))
        } else {
            Ok(Parsed::Incomplete)
        };
    };
    let line = input[..newline]
        .strip_suffix(b"\r")
        .unwrap_or(&input[..newline]);
    let arguments = split_inline(line).ok_or(ProtocolError("unbalanced quotes in request"))?;
    if arguments.is_empty() {
        return Ok(Parsed::Skip(newline + 1));
    }
    Ok(Parsed::Request(arguments, newline + 1))
}

/// Splits an inline line into arguments; `None` for unbalanced quotes.
fn split_inline(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut arguments = Vec::new();
    let mut at = 0;
    // Each pass consumes at least one byte or ends the loop.
    while at < line.len() {
        if line[at].is_ascii_whitespace() {
            at += 1;
            continue;
        }
        let (argument, next) = match line[at] {
            quote @ (b'"' | b'\'') => quoted(line, at + 1, quote)?,
            _ => {
                let end = line[at..]
                    .iter()
                    .position(u8::is_ascii_whitespace)
                    .map_or(line.len(), |offset| at + offset);
                (line[at..end].to_vec(), end)
            }
        };
        debug_assert!(next > at);
        arguments.push(argument);
        at = next;
    }
    Some(arguments)
}

/// A quoted argument starting after its opening `quote` at `from`: the bytes and the position
/// after the closing quote (which must be followed by a space or the end of the line).
fn quoted(line: &[u8], from: usize, quote: u8) -> Option<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut at = from;
    while at < line.len() {
        let byte = line[at];
        if byte == quote {
            let next = at + 1;
            if next < line.len() && !line[next].is_ascii_whitespace() {
                return None;
            }
            return Some((out, next));
        }
        if byte == b'\\' && quote == b'"' && at + 1 < line.len() {
            let (decoded, used) = unescape(&line[at + 1..]);
            out.push(decoded);
            at += 1 + used;
            continue;
        }
        if byte == b'\\' && quote == b'\'' && line.get(at + 1) == Some(&b'\'') {
            out.push(b'\'');
            at += 2;
            continue;
        }
        out.push(byte);
        at += 1;
    }
    None
}

/// The escape after a backslash inside "...": the byte it stands for and the bytes it used.
fn unescape(rest: &[u8]) -> (u8, usize) {
    let hex = |byte: u8| (byte as char).to_digit(16);
    match rest {
        [b'x', high, low, ..] if hex(*high).is_some() && hex(*low).is_some() => {
            let value = hex(*high).unwrap_or(0) * 16 + hex(*low).unwrap_or(0);
            (value as u8, 3)
        }
        [b'n', ..] => (b'\n', 1),
        [b'r', ..] => (b'\r', 1),
        [b't', ..] => (b'\t', 1),
        [b'b', ..] => (8, 1),
        [b'a', ..] => (7, 1),
        [other, ..] => (*other, 1),
        [] => (b'\\', 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn request(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    #[test]
    fn a_whole_request_parses_and_every_prefix_asks_for_more() {
        let wire = request(&[b"SET", b"key", b"va\r\nlue"]);
        let limits = Limits::default();
        for cut in 0..wire.len() {
            assert_eq!(
                parse(&wire[..cut], &limits),
                Ok(Parsed::Incomplete),
                "cut {cut}"
            );
        }
        let expected = vec![b"SET".to_vec(), b"key".to_vec(), b"va\r\nlue".to_vec()];
        assert_eq!(
            parse(&wire, &limits),
            Ok(Parsed::Request(expected, wire.len()))
        );
    }

    #[test]
    fn inline_commands_split_on_spaces_and_honour_quotes() {
        let limits = Limits::default();
        let parsed = parse(b"set \"a b\\x41\" 'it\\'s' x\r\nrest", &limits);
        let expected = vec![
            b"set".to_vec(),
            b"a bA".to_vec(),
            b"it's".to_vec(),
            b"x".to_vec(),
        ];
        assert_eq!(parsed, Ok(Parsed::Request(expected, 25)));
        assert_eq!(parse(b"\r\n", &limits), Ok(Parsed::Skip(2)));
        assert_eq!(
            parse(b"get \"open\n", &limits),
            Err(ProtocolError("unbalanced quotes in request"))
        );
    }

    #[test]
    fn declared_sizes_beyond_the_limits_are_refused_before_any_allocation() {
        let limits = Limits { max_bulk_bytes: 16 };
        assert_eq!(
            parse(b"*1\r\n$17\r\n", &limits),
            Err(ProtocolError("invalid bulk length"))
        );
        assert_eq!(
            parse(b"*2000000\r\n", &limits),
            Err(ProtocolError("invalid multibulk length"))
        );
        assert_eq!(
            parse(b"*1\r\n+OK\r\n", &limits),
            Err(ProtocolError("expected '$'"))
        );
        assert_eq!(
            parse(b"*1\r\n$2\r\nabcd", &limits),
            Err(ProtocolError("expected CRLF after bulk"))
        );
        assert_eq!(parse(b"*-1\r\n", &limits), Ok(Parsed::Skip(5)));
    }

    proptest! {
        #[test]
        fn any_bytes_give_a_request_an_error_or_a_wish_for_more(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let limits = Limits { max_bulk_bytes: 1024 };
            match parse(&bytes, &limits) {
                Ok(Parsed::Request(args, used)) => {
                    prop_assert!(used <= bytes.len());
                    prop_assert!(!args.is_empty());
                }
                Ok(Parsed::Skip(used)) => prop_assert!(used > 0 && used <= bytes.len()),
                Ok(Parsed::Incomplete) | Err(_) => {}
            }
        }

        #[test]
        fn encoded_requests_parse_back_whole(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..8)) {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let wire = request(&refs);
            prop_assert_eq!(parse(&wire, &Limits::default()), Ok(Parsed::Request(args, wire.len())));
        }
    }
}
