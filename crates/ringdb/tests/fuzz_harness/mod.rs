//! The fuzz harness of the decoder fuzz tests (`ringdb/tests/fuzz_decoders.rs`,
//! `ringdb-net/tests/fuzz_frame.rs`, which includes this file by path): runs a proptest
//! strategy for a number of cases or seconds taken from the environment, prints executions and
//! outcomes per target, and mutates valid inputs (bit flips, bytes, fields set to extremes,
//! truncations).
//!
//! `RINGDB_FUZZ_CASES` sets the cases per target (default [`DEFAULT_CASES`], a few seconds for
//! a whole file in release); `RINGDB_FUZZ_SECONDS` repeats each target for that long;
//! `RINGDB_FUZZ_SEED` replays a run (a failure prints its seed).

#![allow(dead_code)] // each test file uses a part

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use std::fmt::Debug;
use std::time::Instant;

/// Cases per target when `RINGDB_FUZZ_CASES` is not set.
const DEFAULT_CASES: u32 = 1000;

thread_local! {
    /// How often each outcome (Ok, or the error's variant) came out of the decoder under test
    /// in this thread's current target: shows how deep the inputs reach.
    static OUTCOMES: std::cell::RefCell<std::collections::BTreeMap<String, u64>> =
        Default::default();
}

/// Counts the outcome of one decoder call by its variant's name (`Ok`, `Err(Checksum)`, ...).
pub fn note(outcome: &impl Debug) {
    let text = format!("{outcome:?}");
    match text.find(['{', ' ']) {
        Some(end) => note_label(&format!("{}..", text[..end].trim_end_matches('('))),
        None => note_label(&text),
    }
}

/// Counts an outcome by name.
pub fn note_label(name: &str) {
    OUTCOMES.with(|o| *o.borrow_mut().entry(name.to_string()).or_insert(0) += 1);
}

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    let text = std::env::var(name).ok()?;
    match text.parse() {
        Ok(v) => Some(v),
        Err(_) => panic!("{name}={text:?} is not a number"),
    }
}

/// A seed nobody chose: the process's random hash keys.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id())
}

/// Runs `test` over inputs of `strategy`: `RINGDB_FUZZ_CASES` cases, again and again with the
/// next seed while `RINGDB_FUZZ_SECONDS` last; prints the executions. Panics with the seed and
/// the smallest failing input proptest found.
pub fn fuzz<S>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: Debug,
{
    let cases = env_number("RINGDB_FUZZ_CASES").unwrap_or(DEFAULT_CASES);
    let seconds: f64 = env_number("RINGDB_FUZZ_SECONDS").unwrap_or(0.0);
    let seed = env_number("RINGDB_FUZZ_SEED").unwrap_or_else(random_seed);
    let started = Instant::now();
    let mut executed = 0u64;
    for round in 0..u64::MAX {
        let config = Config {
            cases,
            failure_persistence: None,
            rng_seed: RngSeed::Fixed(seed.wrapping_add(round)),
            max_shrink_iters: 10_000,
            ..Config::default()
        };
        if let Err(e) = TestRunner::new(config).run(&strategy, &test) {
            panic!("fuzz target {name} failed (RINGDB_FUZZ_SEED={seed}, round {round}): {e}");
        }
        executed += u64::from(cases);
        if started.elapsed().as_secs_f64() >= seconds {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let outcomes = OUTCOMES.with(|o| std::mem::take(&mut *o.borrow_mut()));
    eprintln!(
        "fuzz {name}: {executed} executions in {secs:.2} s ({:.0}/s), seed {seed}; outcomes {outcomes:?}",
        executed as f64 / secs.max(1e-9)
    );
}

/// `len` bytes of a splitmix64 stream: large random inputs without a value tree per byte.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A value for a length or count field: the edges a decoder has to survive, or any.
pub fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![
            0u64,
            1,
            7,
            8,
            23,
            24,
            47,
            48,
            49,
            1023,
            1024,
            4095,
            4096,
            4097,
            65535,
            65536,
            u64::from(u16::MAX),
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            1 << 61,
            (1 << 61) + 1,
            u64::MAX / 8,
            u64::MAX - 1,
            u64::MAX,
        ]),
        any::<u64>(),
    ]
}

/// One change to a valid input.
#[derive(Clone, Debug)]
pub enum Mutation {
    FlipBit {
        at: Index,
        bit: u8,
    },
    SetByte {
        at: Index,
        value: u8,
    },
    /// Field `field` of the format's field table set to `value` (little-endian, cut to width).
    SetField {
        field: Index,
        value: u64,
    },
    Truncate {
        keep: Index,
    },
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(at, value)| Mutation::SetByte { at, value }),
        4 => (any::<Index>(), extreme()).prop_map(|(field, value)| Mutation::SetField { field, value }),
        1 => any::<Index>().prop_map(|keep| Mutation::Truncate { keep }),
    ]
}

pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..6)
}

/// A field of a format: byte offset and width (1, 2, 4 or 8 bytes).
pub type Field = (usize, usize);

/// Applies `mutations` to `bytes`; `fields` is the format's field table.
pub fn mutate(bytes: &mut Vec<u8>, mutations: &[Mutation], fields: &[Field]) {
    for m in mutations {
        let len = bytes.len();
        match m {
            Mutation::FlipBit { at, bit } if len > 0 => bytes[at.index(len)] ^= 1 << bit,
            Mutation::SetByte { at, value } if len > 0 => bytes[at.index(len)] = *value,
            Mutation::SetField { field, value } if !fields.is_empty() => {
                let (offset, width) = fields[field.index(fields.len())];
                if offset + width <= len {
                    bytes[offset..offset + width].copy_from_slice(&value.to_le_bytes()[..width]);
                }
            }
            Mutation::Truncate { keep } => bytes.truncate(keep.index(len + 1)),
            _ => {}
        }
    }
}
