//! A load of Redis transactions against any server that speaks RESP (ringdb serve, redis-server):
//! `CONNECTIONS` threads, each with one connection, move 1 between two of `ACCOUNTS` accounts
//! for `SECONDS` seconds, one transaction at a time, then the accounts' sum is checked (it
//! must not have changed). Modes:
//!
//! - `exec`: `MULTI; DECRBY from 1; INCRBY to 1; EXEC` in one write (redis-py's
//!   `pipeline(transaction=True)`);
//! - `watch`: `WATCH from to; MGET from to`, then `MULTI; SET from f-1; SET to t+1; EXEC`,
//!   retried while EXEC answers null (redis-py's `transaction()` helper), aborts counted.
//!
//! Prints a progress line per second on stderr and one JSON object on stdout.
//!
//! Usage: `cargo run --release -p ringdb-server --example txn_load -- PORT MODE [SECONDS]
//! [CONNECTIONS] [ACCOUNTS]` (defaults 5 s, 16 connections, 64 accounts).

use ringdb_server::client::{Client, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The balance every account starts with.
const BALANCE: i64 = 1_000_000;

fn words(command: &[&str]) -> Vec<Vec<u8>> {
    command.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn number(value: &Value) -> i64 {
    match value {
        Value::Integer(n) => *n,
        Value::Bulk(bytes) => String::from_utf8_lossy(bytes).parse().unwrap_or(i64::MIN),
        _ => i64::MIN,
    }
}

/// The two accounts of a transfer, from a counter (a cheap spread over every pair).
fn pair(seed: u64, accounts: usize) -> (String, String) {
    let mixed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let from = (mixed >> 32) as usize % accounts;
    let to = (from + 1 + (mixed as u32 as usize) % (accounts - 1)) % accounts;
    (format!("account:{from}"), format!("account:{to}"))
}

/// A transfer of 1 between two accounts: the aborts it met, or what went wrong.
type Transfer = fn(&mut Client, &str, &str) -> Result<u64, String>;

/// One blind transfer in MULTI/EXEC.
fn exec_transfer(client: &mut Client, from: &str, to: &str) -> Result<u64, String> {
    let replies = client
        .pipeline(&[
            words(&["MULTI"]),
            words(&["DECRBY", from, "1"]),
            words(&["INCRBY", to, "1"]),
            words(&["EXEC"]),
        ])
        .map_err(|e| e.to_string())?;
    match &replies[3] {
        Value::Array(items) if items.len() == 2 => Ok(0),
        other => Err(format!("EXEC answered {other:?}")),
    }
}

/// One transfer under WATCH, retried until EXEC runs (bounded); returns the aborts.
fn watch_transfer(client: &mut Client, from: &str, to: &str) -> Result<u64, String> {
    for aborts in 0..100_000u64 {
        let replies = client
            .pipeline(&[words(&["WATCH", from, to]), words(&["MGET", from, to])])
            .map_err(|e| e.to_string())?;
        let Value::Array(values) = &replies[1] else {
            return Err(format!("MGET answered {:?}", replies[1]));
        };
        let (f, t) = (number(&values[0]), number(&values[1]));
        let replies = client
            .pipeline(&[
                words(&["MULTI"]),
                words(&["SET", from, &(f - 1).to_string()]),
                words(&["SET", to, &(t + 1).to_string()]),
                words(&["EXEC"]),
            ])
            .map_err(|e| e.to_string())?;
        match &replies[3] {
            Value::Null => continue,
            Value::Array(items) if items.len() == 2 => return Ok(aborts),
            other => return Err(format!("EXEC answered {other:?}")),
        }
    }
    Err("a transfer never got through".into())
}

/// The threads' transfers for `seconds`, with a progress line per second: transactions
/// done and aborts met.
fn run(
    connect: impl Fn() -> Client,
    transfer: Transfer,
    (seconds, connections, accounts): (u64, u64, usize),
) -> (u64, u64) {
    let (done, aborts, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let workers: Vec<_> = (0..connections)
        .map(|worker| {
            let (done, aborts, stop) = (done.clone(), aborts.clone(), stop.clone());
            let mut client = connect();
            std::thread::spawn(move || {
                let mut seed = worker * 1_000_003;
                while !stop.load(Ordering::Relaxed) {
                    seed += 1;
                    let (from, to) = pair(seed, accounts);
                    let aborted = transfer(&mut client, &from, &to).expect("transfer");
                    aborts.fetch_add(aborted, Ordering::Relaxed);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut last = 0;
    for second in 1..=seconds {
        std::thread::sleep(Duration::from_secs(1));
        let now = done.load(Ordering::Relaxed);
        eprintln!("txn_load: {second}/{seconds} s, {} tx/s", now - last);
        last = now;
    }
    stop.store(true, Ordering::Relaxed);
    workers.into_iter().for_each(|w| w.join().expect("worker"));
    (done.load(Ordering::Relaxed), aborts.load(Ordering::Relaxed))
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: txn_load PORT exec|watch [SECONDS] [CONNECTIONS] [ACCOUNTS]";
    let (Some(port), Some(mode)) = (arguments.first(), arguments.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let parse = |index: usize, default: u64| -> u64 {
        arguments
            .get(index)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let (seconds, connections, accounts) = (parse(2, 5), parse(3, 16), parse(4, 64) as usize);
    let transfer: Transfer = match mode.as_str() {
        "exec" => exec_transfer,
        "watch" => watch_transfer,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    assert!(accounts >= 2, "{usage}");
    let address = format!("127.0.0.1:{port}");
    let connect = || Client::connect(&address, Duration::from_secs(30)).expect("connect");
    let mut setup = connect();
    for account in 0..accounts {
        setup
            .command(&["SET", &format!("account:{account}"), &BALANCE.to_string()])
            .expect("SET");
    }
    let started = Instant::now();
    let (done, aborts) = run(connect, transfer, (seconds, connections, accounts));
    let elapsed = started.elapsed().as_secs_f64();
    let mut sum = 0;
    for account in 0..accounts {
        sum += number(
            &setup
                .command(&["GET", &format!("account:{account}")])
                .expect("GET"),
        );
    }
    let expected = BALANCE * accounts as i64;
    println!(
        "{{\"mode\":\"{mode}\",\"connections\":{connections},\"accounts\":{accounts},\"seconds\":{elapsed:.2},\"transactions\":{done},\"tx_per_s\":{:.0},\"aborts\":{aborts},\"sum_ok\":{}}}",
        done as f64 / elapsed,
        sum == expected
    );
    if sum != expected {
        eprintln!("txn_load: the accounts sum to {sum}, not {expected}");
        std::process::exit(1);
    }
}
