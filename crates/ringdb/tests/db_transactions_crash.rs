//! Transactions across shards survive SIGKILL all or nothing. A child process (this test
//! binary, run again with `RINGDB_TXN_CRASH_DIR` set) transfers money between accounts spread
//! over two durable shards from three threads, each transfer one `Db::transaction` that also
//! writes a record of itself, and prints every acknowledged commit; the parent kills it at a
//! random moment, reopens the database and checks: every acknowledged transfer is present,
//! the balances are exactly what the present records say (no transfer half applied), and the
//! sum never changed. `RINGDB_TXN_CRASH_KILLS` sets the number of kills (default 12).

use ringdb::{Db, Durability, Options, TxnError};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ACCOUNTS: u64 = 16;
const START_BALANCE: i64 = 10_000;
const SHARDS: usize = 2;
const CHILD_DIR: &str = "RINGDB_TXN_CRASH_DIR";
const CHILD_ROUND: &str = "RINGDB_TXN_CRASH_ROUND";

fn options() -> Options {
    let mut o = Options {
        pool_pages: 256,
        direct: false,
        durability: Durability::Fdatasync,
        wal_bytes: 4 << 20,
        ..Options::default()
    };
    if ringdb_io::limits::io_uring_disabled().unwrap_or(0) != 0 {
        o.io.engine = ringdb_io::EngineKind::Posix;
    }
    o
}

fn open(d: &Path) -> Db {
    Db::builder(d)
        .options(options())
        .shards(SHARDS)
        .open()
        .unwrap()
}

fn account(i: u64) -> Vec<u8> {
    format!("account{i:04}").into_bytes()
}

fn amount(value: &[u8]) -> i64 {
    i64::from_be_bytes(value[..8].try_into().expect("8 bytes"))
}

/// A transfer's record: from, to, amount.
fn record_value(from: u64, to: u64, moved: i64) -> Vec<u8> {
    [moved.to_be_bytes(), from.to_be_bytes(), to.to_be_bytes()].concat()
}

fn transfer(db: &Db, from: u64, to: u64, moved: i64, record: &[u8]) -> Result<(), TxnError> {
    db.transaction(|txn| {
        let a = txn
            .get_for_update(&account(from))?
            .map_or(0, |v| amount(&v));
        let b = txn.get_for_update(&account(to))?.map_or(0, |v| amount(&v));
        txn.insert(&account(from), &(a - moved).to_be_bytes())?;
        txn.insert(&account(to), &(b + moved).to_be_bytes())?;
        txn.insert(record, &record_value(from, to, moved))
    })
}

/// The child's side: transfers until killed, printing each acknowledged one.
#[test]
fn child_transfers_until_killed() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return; // Only the parent's child runs it.
    };
    let round: u64 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let db = open(Path::new(&dir));
    let threads: Vec<_> = (0..3u64)
        .map(|thread| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut state = (round * 7 + thread + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for n in 0..u64::MAX {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let from = state % ACCOUNTS;
                    let to = (from + 1 + (state >> 20) % (ACCOUNTS - 1)) % ACCOUNTS;
                    let moved = (state >> 40) as i64 % 100 + 1;
                    let record = format!("transfer/{round}/{thread}/{n:08}");
                    transfer(&db, from, to, moved, record.as_bytes()).unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {record}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Every acknowledged transfer present; the balances what the present records say.
fn check(db: &Db, acked: &HashSet<String>) -> usize {
    let mut expected = vec![START_BALANCE; ACCOUNTS as usize];
    let mut present = 0;
    for pair in db.prefix(b"transfer/") {
        let (key, value) = pair.unwrap();
        let moved = amount(&value);
        let from = u64::from_be_bytes(value[8..16].try_into().unwrap());
        let to = u64::from_be_bytes(value[16..24].try_into().unwrap());
        expected[from as usize] -= moved;
        expected[to as usize] += moved;
        present += 1;
        let _ = key;
    }
    for record in acked {
        assert!(
            db.get(record.as_bytes()).unwrap().is_some(),
            "acknowledged transfer {record} lost"
        );
    }
    for (i, balance) in expected.iter().enumerate() {
        let stored = db.get(&account(i as u64)).unwrap().map(|v| amount(&v));
        assert_eq!(
            stored,
            Some(*balance),
            "account {i}: a transfer half applied"
        );
    }
    let sum: i64 = expected.iter().sum();
    assert_eq!(sum, START_BALANCE * ACCOUNTS as i64);
    present
}

/// Runs the child on `dir` for `run` and kills it; the transfers it acknowledged.
fn run_and_kill(dir: &Path, round: u64, run: Duration) -> HashSet<String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_transfers_until_killed", "--nocapture"])
        .env(CHILD_DIR, dir)
        .env(CHILD_ROUND, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| l.strip_prefix("ack ").map(str::to_string))
            .collect::<HashSet<String>>()
    });
    let started = Instant::now();
    while started.elapsed() < run {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child ended by itself: {status}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap()
}

#[test]
fn cross_shard_transactions_survive_sigkill_all_or_nothing() {
    let kills: u64 = std::env::var("RINGDB_TXN_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let dir: PathBuf =
        std::env::temp_dir().join(format!("ringdb-txn-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = open(&dir);
    for i in 0..ACCOUNTS {
        db.insert(&account(i), &START_BALANCE.to_be_bytes())
            .unwrap();
    }
    db.close().unwrap();
    let mut acked = HashSet::new();
    let mut state = u64::from(std::process::id()) | 1;
    for round in 0..kills {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let run = Duration::from_millis(150 + state % 400);
        acked.extend(run_and_kill(&dir, round, run));
        let db = open(&dir);
        let present = check(&db, &acked);
        assert!(present >= acked.len());
        eprintln!(
            "kill {round}: after {run:?}, {} acknowledged in all, {present} present",
            acked.len()
        );
        db.close().unwrap();
    }
    assert!(!acked.is_empty(), "the children committed transfers");
    let _ = std::fs::remove_dir_all(&dir);
}
