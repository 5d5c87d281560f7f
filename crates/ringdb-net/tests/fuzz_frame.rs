//! Fuzz tests of the shuffle's frame decoding ([`FrameDecoder`] over [`Header::decode`]): a
//! peer can send any bytes, so whatever arrives, however it is split into reads, the decoder
//! hands its sink whole, well-formed frames of at most the length limit or stops with a
//! `MalformedFrame` error; it never panics, loops or buffers more than one header.
//!
//! Targets: arbitrary bytes; a valid stream of frames mutated (bit flips, header fields set to
//! extremes, truncations, bytes after the end-of-stream frame); and the same through a sink that
//! checks what the shuffle's receive path checks (sender, tuple size, payload checksum). Every
//! input is fed whole and in random pieces, and both must give the same frames and the same
//! error: the result of a stream never depends on how the kernel split it.
//!
//! `RINGDB_FUZZ_CASES`, `RINGDB_FUZZ_SECONDS` and `RINGDB_FUZZ_SEED` set how long each target
//! runs (the harness is `ringdb`'s, shared by path); `scripts/fuzz` runs them long.

#[path = "../../ringdb/tests/fuzz_harness/mod.rs"]
mod fuzz_harness;

use fuzz_harness::{fuzz, mutate, mutations, note_label, Field};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use ringdb_net::frame::{checksum, FrameDecoder, FrameSink, Header, FLAG_EOS, HEADER_LEN, MAGIC};
use ringdb_net::{FrameFault, NetError, Result};

/// The payload limit of the decoders under test (the shuffle uses its chunk size + 64).
const MAX_LEN: u32 = 4096;

/// One frame as the sink saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Frame {
    header: Header,
    payload: Vec<u8>,
    ended: bool,
}

/// Records every frame; optionally checks them the way the shuffle's receiver does.
#[derive(Default)]
struct Recorder {
    frames: Vec<Frame>,
    /// Some((sender, tuple size)): refuse frames of another sender or tuple size, payloads of
    /// partial tuples and payloads whose checksum is wrong.
    shuffle: Option<(u16, u32)>,
}

impl Recorder {
    fn bad(fault: FrameFault) -> NetError {
        NetError::MalformedFrame {
            peer: "sink".into(),
            fault,
        }
    }
}

impl FrameSink for Recorder {
    fn begin(&mut self, h: &Header) -> Result<()> {
        assert!(h.len <= MAX_LEN, "a frame over the limit reached the sink");
        assert!(
            self.frames.last().is_none_or(|f| f.ended),
            "begin mid-frame"
        );
        if let Some((sender, tuple_size)) = self.shuffle {
            if h.sender != sender {
                return Err(Self::bad(FrameFault::WrongSender {
                    sender: h.sender,
                    expected: sender.into(),
                }));
            }
            if !h.is_eos() && (h.tuple_size != tuple_size || !h.len.is_multiple_of(tuple_size)) {
                return Err(Self::bad(FrameFault::WrongTupleSize {
                    tuple_size: h.tuple_size,
                    expected: tuple_size as usize,
                }));
            }
        }
        self.frames.push(Frame {
            header: *h,
            payload: Vec::new(),
            ended: false,
        });
        Ok(())
    }

    fn payload(&mut self, data: &[u8]) -> Result<()> {
        let frame = self.frames.last_mut().expect("payload before any header");
        assert!(!frame.ended, "payload after the frame's end");
        frame.payload.extend_from_slice(data);
        assert!(
            frame.payload.len() <= frame.header.len as usize,
            "payload overran"
        );
        Ok(())
    }

    fn end(&mut self, h: &Header) -> Result<()> {
        let frame = self.frames.last_mut().expect("end before any header");
        assert_eq!(&frame.header, h, "end of another frame");
        assert_eq!(
            frame.payload.len(),
            h.len as usize,
            "end before the whole payload"
        );
        frame.ended = true;
        if self.shuffle.is_some() && !h.is_eos() && checksum(&frame.payload) != h.checksum {
            return Err(Self::bad(FrameFault::ChecksumMismatch {
                computed: checksum(&frame.payload),
                header: h.checksum,
            }));
        }
        Ok(())
    }
}

/// What feeding a stream gave: the frames, the error (its reason without the words that hold
/// numbers: "N bytes after the end-of-stream frame" names the size of the read) and the
/// decoder's state.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    frames: Vec<Frame>,
    error: Option<String>,
    finished: bool,
    mid_frame: bool,
}

/// Feeds `stream` to a fresh decoder in pieces cut at `cuts` (until the first error).
fn feed(stream: &[u8], cuts: &[Index], shuffle: Option<(u16, u32)>) -> Outcome {
    let mut decoder = FrameDecoder::new("peer", MAX_LEN);
    let mut sink = Recorder {
        shuffle,
        ..Recorder::default()
    };
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
    points.extend([0, stream.len()]);
    points.sort_unstable();
    let mut error = None;
    for piece in points.windows(2) {
        if let Err(e) = decoder.feed(&stream[piece[0]..piece[1]], &mut sink) {
            assert!(matches!(e, NetError::MalformedFrame { .. }), "{e:?}");
            error = Some(reason_words(&e.to_string()));
            break;
        }
    }
    Outcome {
        frames: sink.frames,
        error,
        finished: decoder.finished(),
        mid_frame: decoder.mid_frame(),
    }
}

/// Feeds `stream` whole and in pieces; both must agree, and what was accepted must be valid.
fn feed_both_ways(
    stream: &[u8],
    cuts: &[Index],
    shuffle: Option<(u16, u32)>,
) -> Result<Outcome, TestCaseError> {
    let whole = feed(stream, &[], shuffle);
    let pieces = feed(stream, cuts, shuffle);
    prop_assert_eq!(&whole, &pieces, "the split changed the result");
    for frame in whole.frames.iter().filter(|f| f.ended) {
        prop_assert!(
            frame.header.flags & !FLAG_EOS == 0,
            "unknown flags accepted"
        );
        prop_assert!(!frame.header.is_eos() || frame.header.len == 0);
    }
    if whole.finished && whole.error.is_none() {
        // Nothing after the end-of-stream frame was accepted.
        prop_assert!(whole.frames.last().is_some_and(|f| f.header.is_eos()));
        let framed: usize = whole
            .frames
            .iter()
            .map(|f| HEADER_LEN + f.payload.len())
            .sum();
        prop_assert_eq!(
            framed,
            stream.len(),
            "bytes after the end of stream accepted"
        );
    }
    note_label(
        match &whole.error {
            // The reason's first words: "bad magic", "unknown flags", ...
            Some(reason) => reason.split(' ').take(2).collect::<Vec<_>>().join(" "),
            None if whole.finished => "Ok, finished".into(),
            None => "Ok".into(),
        }
        .as_str(),
    );
    Ok(whole)
}

/// The reason of a decoder error, without the peer and without the words holding numbers.
fn reason_words(message: &str) -> String {
    message
        .split(": ")
        .nth(1)
        .unwrap_or(message)
        .split(' ')
        .filter(|w| !w.contains(|c: char| c.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn cuts() -> impl Strategy<Value = Vec<Index>> {
    prop::collection::vec(any::<Index>(), 0..12)
}

/// Arbitrary bytes, sometimes led by a plausible header so the payload path runs too.
fn arbitrary_stream() -> impl Strategy<Value = Vec<u8>> {
    (prop::collection::vec(any::<u8>(), 0..512), any::<bool>()).prop_map(|(mut bytes, lead)| {
        if lead && bytes.len() >= HEADER_LEN {
            bytes[..4].copy_from_slice(&MAGIC.to_le_bytes());
        }
        bytes
    })
}

#[test]
fn frames_from_arbitrary_bytes() {
    fuzz(
        "frame/bytes",
        (arbitrary_stream(), cuts()),
        |(stream, cuts)| feed_both_ways(&stream, &cuts, None).map(|_| ()),
    );
}

/// A valid stream from `sender`: frames of whole `tuple_size`-byte tuples, then end of stream.
fn valid_stream(sender: u16, tuple_size: u32, payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
    let mut stream = Vec::new();
    let mut starts = Vec::new();
    let eos = Vec::new();
    for (i, payload) in payloads.iter().chain([&eos]).enumerate() {
        let mut header = [0u8; HEADER_LEN];
        Header {
            sender,
            flags: if i == payloads.len() { FLAG_EOS } else { 0 },
            len: payload.len() as u32,
            tuple_size,
            checksum: checksum(payload),
        }
        .encode(&mut header);
        starts.push(stream.len());
        stream.extend_from_slice(&header);
        stream.extend_from_slice(payload);
    }
    (stream, starts)
}

/// Payloads of whole tuples: the tuple size and 0..8 payloads of up to `MAX_LEN` bytes.
fn payloads() -> impl Strategy<Value = (u32, Vec<Vec<u8>>)> {
    (prop::sample::select(vec![8u32, 64, 512]), 0usize..8).prop_flat_map(|(tuple_size, n)| {
        let tuples = 0..=(MAX_LEN / tuple_size) as usize;
        let payload = tuples.prop_map(move |k| vec![0x5a; k * tuple_size as usize]);
        (Just(tuple_size), prop::collection::vec(payload, n))
    })
}

/// Header fields of every frame: magic, sender, flags, length, tuple size, checksum.
fn header_fields(starts: &[usize]) -> Vec<Field> {
    let layout: [Field; 6] = [(0, 4), (4, 2), (6, 2), (8, 4), (12, 4), (16, 8)];
    starts
        .iter()
        .flat_map(|&s| layout.iter().map(move |&(at, width)| (s + at, width)))
        .collect()
}

#[test]
fn frames_from_mutated_streams() {
    let strategy = (
        any::<u16>(),
        payloads(),
        mutations(),
        prop::collection::vec(any::<u8>(), 0..4),
        cuts(),
    );
    fuzz(
        "frame/mutated",
        strategy,
        |(sender, (tuple_size, payloads), muts, tail, cuts)| {
            let (mut stream, starts) = valid_stream(sender, tuple_size, &payloads);
            let outcome = feed(&stream, &cuts, Some((sender, tuple_size)));
            prop_assert_eq!(outcome.error, None);
            prop_assert!(outcome.finished && !outcome.mid_frame);
            prop_assert_eq!(outcome.frames.len(), payloads.len() + 1);
            mutate(&mut stream, &muts, &header_fields(&starts));
            stream.extend_from_slice(&tail);
            feed_both_ways(&stream, &cuts, None)?;
            feed_both_ways(&stream, &cuts, Some((sender, tuple_size))).map(|_| ())
        },
    );
}

#[test]
fn frames_with_extreme_lengths() {
    let lengths = prop::sample::select(vec![0u32, 1, MAX_LEN - 1, MAX_LEN, MAX_LEN + 1, u32::MAX]);
    let strategy = (lengths, 0u16..4, any::<Index>(), cuts());
    fuzz("frame/lengths", strategy, |(len, flags, cut, cuts)| {
        let mut stream = vec![0u8; HEADER_LEN];
        Header {
            sender: 1,
            flags,
            len,
            tuple_size: 8,
            checksum: 0,
        }
        .encode(&mut stream);
        let available = (len as usize).min(MAX_LEN as usize + 8);
        stream.resize(HEADER_LEN + cut.index(available + 1), 0);
        let outcome = feed_both_ways(&stream, &cuts, None)?;
        let refused = len > MAX_LEN || flags & !FLAG_EOS != 0 || (flags == FLAG_EOS && len > 0);
        prop_assert_eq!(outcome.error.is_some(), refused, "{:?}", outcome.error);
        if !refused {
            let whole = stream.len() - HEADER_LEN == len as usize;
            prop_assert_eq!(outcome.mid_frame, !whole);
        }
        Ok(())
    });
}
