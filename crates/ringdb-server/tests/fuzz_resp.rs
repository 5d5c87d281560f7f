//! Fuzz tests of the RESP request parser: a client can send any bytes, so whatever arrives,
//! however the kernel splits it, the parser yields whole requests, a wish for more input, or a
//! protocol error; it never panics, never consumes bytes it was not given, and the requests it
//! yields never depend on where the stream was cut.
//!
//! Targets: arbitrary bytes; valid pipelines (arrays of bulk strings and inline lines) mutated
//! (bit flips, length fields set to extremes, truncations). `RINGDB_FUZZ_CASES`,
//! `RINGDB_FUZZ_SECONDS` and `RINGDB_FUZZ_SEED` set how long each runs (the harness is
//! `ringdb`'s, shared by path); `scripts/fuzz` runs them long.

#[path = "../../ringdb/tests/fuzz_harness/mod.rs"]
mod fuzz_harness;

use fuzz_harness::{fuzz, note_label};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use ringdb_server::resp::{parse, Limits, Parsed, ProtocolError};

/// The bulk limit of the parser under test.
const MAX_BULK: usize = 512;

/// What a stream parses into: its requests, and how it ended.
#[derive(Debug, PartialEq)]
enum End {
    Incomplete(usize),
    Error(ProtocolError),
    Done,
}

/// A request's arguments.
type Request = Vec<Vec<u8>>;

/// Takes requests off the front of `stream` as the server does.
fn parse_stream(stream: &[u8]) -> Result<(Vec<Request>, End), TestCaseError> {
    let limits = Limits {
        max_bulk_bytes: MAX_BULK,
    };
    let mut requests = Vec::new();
    let mut at = 0;
    // Each pass consumes at least one byte or ends.
    while at < stream.len() {
        match parse(&stream[at..], &limits) {
            Ok(Parsed::Request(arguments, used)) => {
                prop_assert!(used > 0 && at + used <= stream.len());
                prop_assert!(!arguments.is_empty());
                prop_assert!(arguments.iter().all(|a| a.len() <= MAX_BULK.max(64 * 1024)));
                note_label("Request");
                requests.push(arguments);
                at += used;
            }
            Ok(Parsed::Skip(used)) => {
                prop_assert!(used > 0 && at + used <= stream.len());
                at += used;
            }
            Ok(Parsed::Incomplete) => {
                note_label("Incomplete");
                return Ok((requests, End::Incomplete(at)));
            }
            Err(error) => {
                note_label("Err");
                return Ok((requests, End::Error(error)));
            }
        }
    }
    Ok((requests, End::Done))
}

/// Parses `stream` whole and as the server would receive it, in two pieces cut at `cut`
/// (what the first piece left unparsed waits for the second): the same requests, and the same
/// verdict (error or not), either way.
fn check_cut(stream: &[u8], cut: usize) -> Result<(), TestCaseError> {
    let (whole, whole_end) = parse_stream(stream)?;
    let cut = cut.min(stream.len());
    let (mut pieces, first_end) = parse_stream(&stream[..cut])?;
    let end = match first_end {
        End::Error(error) => End::Error(error),
        End::Incomplete(at) => {
            let (more, end) = parse_stream(&stream[at..])?;
            pieces.extend(more);
            end
        }
        End::Done => {
            let (more, end) = parse_stream(&stream[cut..])?;
            pieces.extend(more);
            end
        }
    };
    prop_assert_eq!(&pieces, &whole);
    prop_assert_eq!(
        matches!(end, End::Error(_)),
        matches!(whole_end, End::Error(_))
    );
    Ok(())
}

fn bulk_request(words: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        out.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
        out.extend_from_slice(word);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn pipeline() -> impl Strategy<Value = Vec<u8>> {
    let word = proptest::collection::vec(any::<u8>(), 0..24);
    let request = proptest::collection::vec(word, 1..5);
    proptest::collection::vec((request, any::<bool>()), 1..6).prop_map(|requests| {
        let mut out = Vec::new();
        for (words, inline) in requests {
            if inline
                && words
                    .iter()
                    .all(|w| !w.is_empty() && w.iter().all(u8::is_ascii_alphanumeric))
            {
                let line: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
                out.extend_from_slice(&line.join(&b' '));
                out.extend_from_slice(b"\r\n");
            } else {
                out.extend_from_slice(&bulk_request(&words));
            }
        }
        out
    })
}

#[test]
fn requests_from_arbitrary_bytes() {
    let strategy = (
        proptest::collection::vec(any::<u8>(), 0..512),
        any::<usize>(),
    );
    fuzz("resp/bytes", strategy, |(stream, cut)| {
        check_cut(&stream, cut % (stream.len() + 1))
    });
}

#[test]
fn valid_pipelines_parse_whole_and_mutated_ones_fail_cleanly() {
    let strategy = (
        pipeline(),
        any::<usize>(),
        any::<u8>(),
        any::<usize>(),
        prop_oneof![
            Just("0"),
            Just("-1"),
            Just("-2"),
            Just("99999999999"),
            Just("513"),
            Just("x")
        ],
    );
    fuzz(
        "resp/mutated",
        strategy,
        |(stream, cut, flip, at, digits)| {
            let (requests, end) = parse_stream(&stream)?;
            prop_assert_eq!(end, End::Done);
            prop_assert!(!requests.is_empty());
            check_cut(&stream, cut % (stream.len() + 1))?;
            let mut flipped = stream.clone();
            let position = at % flipped.len();
            flipped[position] ^= flip;
            check_cut(&flipped, cut % (flipped.len() + 1))?;
            // A length field replaced by an extreme.
            let text = String::from_utf8_lossy(&stream).into_owned();
            if let Some(dollar) = text.find('$') {
                let end = text[dollar..]
                    .find("\r\n")
                    .map_or(text.len(), |e| dollar + e);
                let mut changed = stream[..dollar + 1].to_vec();
                changed.extend_from_slice(digits.as_bytes());
                changed.extend_from_slice(&stream[end.min(stream.len())..]);
                check_cut(&changed, cut % (changed.len() + 1))?;
            }
            Ok(())
        },
    );
}
