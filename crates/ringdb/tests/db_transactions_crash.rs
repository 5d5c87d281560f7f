//! Transactions across shards survive SIGKILL all or nothing. A child process (this test
//! binary, run again with `RINGDB_TXN_CRASH_DIR` set) transfers money between accounts spread
//! over two durable shards from three threads, each transfer one `Db::transaction` that also
//! writes a record of itself, and prints every acknowledged commit; the parent kills it at a
//! random moment, reopens the database and checks: every acknowledged transfer is present,
//! the balances are exactly what the present records say (no transfer half applied), and the
//! sum never changed. `RINGDB_TXN_CRASH_KILLS` sets the number of kills (default 12).

mod bank;

use bank::{check, next_transfer, transfer};
use ringdb::{Db, Durability, Options};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
                    let (from, to, moved) = next_transfer(&mut state);
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
    bank::open_accounts(&db);
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
        let present = check(&db, &acked, &format!("kill {round}"));
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
