//! The crash test: a child process runs `ringdb put-many` with an ack log and is killed with
//! SIGKILL at a random moment; after each kill, `ringdb check` passes, every acknowledged key
//! is present with its value, and no write batch is partly visible.
//!
//! Iterations: `RINGDB_CRASH_ITERS` (default 6 here; `scripts/crash-soak` runs many more).
//! `RINGDB_CRASH_DB` puts the database on a raw device instead of a directory (e.g.
//! `/dev/ng0n1` in the NVMe VM) and `RINGDB_CRASH_MODES` (comma-separated) picks the
//! durability modes drawn from. `RINGDB_CRASH_ARGS` (whitespace-separated) is added to every
//! `put-many`, `check` and `dump` (e.g. `--iopoll`).

mod common;

use common::{ringdb, ringdb_bin, tmp};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The key the test formats its database with: outside every iteration's range (iteration
/// `i` writes keys from `i * 10_000_000`), so it belongs to no batch.
const OUTSIDE_KEY: u64 = 1 << 60;

/// The same derivation as `ringdb put-many` (crates/ringdb-cli/src/kv_cmd.rs).
fn value_of(i: u64) -> String {
    let n = (i.wrapping_mul(2654435761) % 97) as usize;
    format!("v{i}-{}", &"abcdefghijklmnopqrstuvwxyz".repeat(4)[..n])
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A number from the environment variable `name`, if it is set and parses.
fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// The clock's nanoseconds: a fresh seed for every run unless one is given.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Where and how the crash test runs (see the module docs for the environment).
struct CrashSetup {
    /// A raw device to run on instead of a directory of the test's own.
    device: Option<String>,
    dir: PathBuf,
    /// The ack log `put-many` appends acknowledged key numbers to.
    ack: PathBuf,
    /// The `--db` argument: the device, or the directory.
    db: String,
    /// Durability modes drawn from.
    modes: Vec<String>,
    /// Arguments added to every `put-many`, `check` and `dump`.
    extra: Vec<String>,
}

impl CrashSetup {
    fn from_env() -> CrashSetup {
        let device = std::env::var("RINGDB_CRASH_DB").ok();
        let dir = tmp("crash-db");
        if device.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let ack = tmp("crash-acks");
        let _ = std::fs::remove_file(&ack);
        let db = device
            .clone()
            .unwrap_or_else(|| dir.to_str().unwrap().to_string());
        let modes: Vec<String> = std::env::var("RINGDB_CRASH_MODES")
            .map(|m| m.split(',').map(str::to_string).collect())
            .unwrap_or_else(|_| {
                ["fdatasync", "thread", "odsync", "none"]
                    .map(str::to_string)
                    .to_vec()
            });
        let extra: Vec<String> = std::env::var("RINGDB_CRASH_ARGS")
            .map(|a| a.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        if !extra.is_empty() {
            eprintln!("crash test: extra arguments {extra:?}");
        }
        CrashSetup {
            device,
            dir,
            ack,
            db,
            modes,
            extra,
        }
    }

    /// Formats a fresh database (not killed) holding one key outside every iteration's
    /// range, in durability `mode`.
    ///
    /// Iteration 0's `--fresh` may be killed before its format is durable, which rightly
    /// leaves the database that was there. On a raw device that is whatever the last user
    /// left, for example an earlier crash test's keys in the same ranges with other batch
    /// sizes, which would read as batches partly visible. Starting from a known database
    /// makes every key in the ranges this test's own.
    fn format(&self, mode: &str) {
        let mut args: Vec<String> = [
            "put-many",
            "--db",
            &self.db,
            "--fresh",
            "--count",
            "1",
            "--start",
            &OUTSIDE_KEY.to_string(),
            "--durability",
            mode,
        ]
        .map(str::to_string)
        .to_vec();
        args.extend(self.extra.iter().cloned());
        let out = ringdb(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "formatting the database failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `ringdb <cmd>` on the database with the extra arguments.
    fn ringdb(&self, cmd: &str) -> Output {
        let mut args = vec![cmd, "--db", self.db.as_str()];
        args.extend(self.extra.iter().map(String::as_str));
        ringdb(&args)
    }

    /// Starts `put-many` of keys from `start` in batches of `batch` with durability `mode`
    /// (on a fresh database in iteration 0), and kills it with SIGKILL after `kill_after`.
    fn kill_put_many(&self, it: u64, start: u64, batch: u64, mode: &str, kill_after: Duration) {
        let mut args: Vec<String> = [
            "put-many",
            "--db",
            &self.db,
            "--count",
            "5000000",
            "--start",
            &start.to_string(),
            "--batch",
            &batch.to_string(),
            "--tasks",
            "32",
            "--pool",
            "512K",
            "--durability",
            mode,
            "--ack-log",
            self.ack.to_str().unwrap(),
        ]
        .map(str::to_string)
        .to_vec();
        if it == 0 {
            args.push("--fresh".into());
        }
        if self.device.is_none() {
            // Two shards: batches of several keys span both, so the cross-shard commit is
            // what keeps them whole.
            args.extend(["--shards".to_string(), "2".to_string()]);
        }
        args.extend(self.extra.iter().cloned());
        let mut child = Command::new(ringdb_bin())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn put-many");
        std::thread::sleep(kill_after);
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.code().is_none(),
            "iteration {it}: put-many ended before the kill: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Checks that the database recovers and verifies, and returns the key numbers it holds,
    /// each checked to hold its own value.
    fn recovered_keys(&self, it: u64, mode: &str, seed: u64) -> HashSet<u64> {
        let check = self.ringdb("check");
        assert!(
            check.status.success(),
            "iteration {it} (mode {mode}, seed {seed}): check failed:\n{}\n{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        let dump = self.ringdb("dump");
        assert!(
            dump.status.success(),
            "{}",
            String::from_utf8_lossy(&dump.stderr)
        );
        let text = String::from_utf8(dump.stdout).unwrap();
        let mut present = HashSet::new();
        for line in text.lines() {
            let (k, v) = line.split_once('\t').expect("key\\tvalue");
            let i: u64 = k.strip_prefix('k').unwrap().parse().unwrap();
            assert_eq!(v, value_of(i), "iteration {it}: k{i} has a wrong value");
            present.insert(i);
        }
        present
    }

    /// Asserts that every acknowledged key is `present` (a process crash: `none`
    /// acknowledges after the write reached the kernel, which survives SIGKILL); returns how
    /// many were acknowledged.
    ///
    /// A SIGKILL can cut `put-many`'s append to the ack log short at a page boundary of the
    /// file (a fatal signal ends a regular-file write between pages), leaving a torn last line:
    /// that acknowledgement never completed, so it is dropped here and cut from the file, so
    /// that the next iteration's lines do not run into it.
    fn assert_acknowledged_present(
        &self,
        present: &HashSet<u64>,
        it: u64,
        mode: &str,
        seed: u64,
    ) -> usize {
        let text = std::fs::read_to_string(&self.ack).unwrap_or_default();
        let complete = text.rfind('\n').map_or(0, |end| end + 1);
        if complete < text.len() {
            eprintln!(
                "crash {it}: a torn last ack line {:?} dropped",
                &text[complete..]
            );
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&self.ack)
                .unwrap();
            file.set_len(complete as u64).unwrap();
        }
        let acked = &text[..complete];
        let mut n_acked = 0;
        for l in acked.lines() {
            let i: u64 = l.parse().unwrap();
            assert!(
                present.contains(&i),
                "iteration {it} (mode {mode}, seed {seed}): acknowledged k{i} is missing"
            );
            n_acked += 1;
        }
        n_acked
    }

    fn clean_up(&self) {
        if self.device.is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        let _ = std::fs::remove_file(&self.ack);
    }
}

/// Asserts that no write batch is partly visible: within each run `(start, batch)`, batch
/// `c` covers keys `start + c*batch ..` and is present whole or not at all.
fn assert_batches_whole(present: &HashSet<u64>, runs: &[(u64, u64)], it: u64, seed: u64) {
    for &(s, b) in runs {
        let mut by_batch: HashMap<u64, u64> = HashMap::new();
        for &i in present.iter().filter(|&&i| i >= s && i < s + 10_000_000) {
            *by_batch.entry((i - s) / b).or_default() += 1;
        }
        for (c, n) in by_batch {
            assert_eq!(
                n, b,
                "iteration {it} (seed {seed}): batch {c} of the run from {s} is partly visible ({n} of {b} keys)"
            );
        }
    }
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let iters = env_number("RINGDB_CRASH_ITERS").unwrap_or(6);
    let seed = env_number("RINGDB_CRASH_SEED").unwrap_or_else(clock_seed);
    eprintln!("crash test: {iters} iterations, RINGDB_CRASH_SEED={seed}");
    let mut rng = seed;
    let setup = CrashSetup::from_env();
    // Per iteration: first key number and batch size (to check batches whole).
    let mut runs: Vec<(u64, u64)> = Vec::new();
    assert!(
        (iters + 1) * 10_000_000 <= OUTSIDE_KEY,
        "{iters} iterations reach the outside key"
    );
    setup.format(&setup.modes[0]);
    for it in 0..iters {
        let start = it * 10_000_000;
        let batch = 1 + splitmix(&mut rng) % 6;
        let modes = &setup.modes;
        let mode = modes[(splitmix(&mut rng) % modes.len() as u64) as usize].as_str();
        let kill_after = Duration::from_millis(100 + splitmix(&mut rng) % 900);
        runs.push((start, batch));
        setup.kill_put_many(it, start, batch, mode, kill_after);
        let present = setup.recovered_keys(it, mode, seed);
        let n_acked = setup.assert_acknowledged_present(&present, it, mode, seed);
        assert_batches_whole(&present, &runs, it, seed);
        eprintln!(
            "crash {it}: mode {mode}, batch {batch}, killed after {kill_after:?}: {} keys present, {n_acked} acknowledged, check OK",
            present.len()
        );
    }
    setup.clean_up();
}
