//! One timed round: `threads` threads of the program call one store at once, each drawing its
//! own YCSB operations, until the round's time is up. Reads are checked (every
//! [`CHECK_EVERY`]th value: against the loaded one in a read-only workload, by length where
//! updates change values); updates write a fresh value. The process's CPU time over the round
//! (`getrusage`, so the stores' own threads count too) gives operations per CPU second.

use crate::peers::Peer;
use ringdb_bench::ycsb::{key_bytes, value_for, Distribution, Op, OpGenerator, Workload};
use ringdb_lab::counters::CpuTime;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Every this many reads of a thread, the value read is checked.
const CHECK_EVERY: u64 = 64;
/// Operations between two looks at the clock's stop flag.
const OPS_PER_LOOK: u64 = 32;

/// What a round runs.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub workload: Workload,
    /// Each operation is a transaction on two keys (drawn as reads) instead.
    pub transaction: Option<TxnKind>,
    /// Every value is still the loaded one (no workload that writes ran before).
    pub as_loaded: bool,
    pub distribution: Distribution,
    pub records: u64,
    pub value_size: usize,
}

/// A transaction on two keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnKind {
    /// The two values exchanged (a serializable read-write transaction).
    Swap,
    /// Both values read (a read-only transaction).
    ReadPair,
}

/// One round of one store.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Measurement {
    pub ops: u64,
    pub wall_secs: f64,
    pub cpu_secs: f64,
    pub ops_per_s: f64,
    pub ops_per_cpu_s: f64,
    pub values_checked: u64,
}

/// Runs `mix` on `peer` from `threads` threads for `duration`.
pub fn round(
    peer: &dyn Peer,
    mix: Mix,
    threads: usize,
    duration: Duration,
    seed: u64,
) -> Result<Measurement, String> {
    let stop = AtomicBool::new(false);
    let cpu_before = CpuTime::now();
    let start = Instant::now();
    let per_thread: Vec<Result<(u64, u64), String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                let stop = &stop;
                scope.spawn(move || worker(peer, mix, seed.wrapping_add(t * 7919), stop))
            })
            .collect();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect()
    });
    let wall_secs = start.elapsed().as_secs_f64();
    let cpu_secs = CpuTime::now().since(cpu_before).total().as_secs_f64();
    let (mut ops, mut values_checked) = (0, 0);
    for result in per_thread {
        let (n, checked) = result?;
        ops += n;
        values_checked += checked;
    }
    let per = |x: f64| if x > 0.0 { ops as f64 / x } else { 0.0 };
    Ok(Measurement {
        ops,
        wall_secs,
        cpu_secs,
        ops_per_s: per(wall_secs),
        ops_per_cpu_s: per(cpu_secs),
        values_checked,
    })
}

/// One thread's part of a round: operations done and values checked.
fn worker(peer: &dyn Peer, mix: Mix, seed: u64, stop: &AtomicBool) -> Result<(u64, u64), String> {
    let mut ops = OpGenerator::new(mix.workload, mix.distribution, mix.records, seed);
    let (mut value, mut expected) = (Vec::new(), Vec::new());
    let (mut done, mut checked) = (0u64, 0u64);
    // Bounded by the round's time: the flag is set when it is up.
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..OPS_PER_LOOK {
            match ops.next_op() {
                Op::Read(key) if mix.transaction.is_some() => {
                    let kind = mix.transaction.expect("checked");
                    two_key_transaction(peer, &mut ops, key, kind)?
                }
                Op::Read(key) => {
                    if !peer.get(&key_bytes(key), &mut value)? {
                        return Err(format!("{}: key {key} is missing", peer.name()));
                    }
                    if done % CHECK_EVERY == 0 {
                        check(peer, mix, key, &value, &mut expected)?;
                        checked += 1;
                    }
                }
                Op::Update(key) => {
                    value_for(key, done + 1, mix.value_size, &mut expected);
                    peer.put(&key_bytes(key), &expected)?;
                }
                other => return Err(format!("operation {other:?} is not compared")),
            }
            done += 1;
        }
    }
    Ok((done, checked))
}

/// A `kind` transaction on `key` and another key, drawn from `ops` too.
fn two_key_transaction(
    peer: &dyn Peer,
    ops: &mut OpGenerator,
    key: u64,
    kind: TxnKind,
) -> Result<(), String> {
    let other = match ops.next_op() {
        Op::Read(other) | Op::Update(other) => other,
        op => return Err(format!("operation {op:?} is not compared")),
    };
    let (a, b) = (key_bytes(key), key_bytes(other));
    let done = match kind {
        TxnKind::Swap => peer.swap(&a, &b),
        TxnKind::ReadPair => peer.read_pair(&a, &b),
    };
    done.unwrap_or_else(|| Err(format!("{} has no transactions", peer.name())))
}

/// The value read for `key` is the loaded one (read-only mixes while nothing was written) or
/// one of the right size.
fn check(
    peer: &dyn Peer,
    mix: Mix,
    key: u64,
    value: &[u8],
    expected: &mut Vec<u8>,
) -> Result<(), String> {
    let good = if mix.workload == Workload::C && mix.as_loaded {
        value_for(key, 0, mix.value_size, expected);
        value == expected.as_slice()
    } else {
        value.len() == mix.value_size
    };
    if good {
        Ok(())
    } else {
        Err(format!("{}: key {key} holds a wrong value", peer.name()))
    }
}
