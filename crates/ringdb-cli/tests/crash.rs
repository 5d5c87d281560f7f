//! The crash test: a child process runs `ringdb put-many` with an ack log and is killed with
//! SIGKILL at a random moment; after each kill, `ringdb check` recovers the database and
//! passes, every acknowledged key is present with its value, and no write batch is partly
//! visible.
//!
//! Recovery must be idempotent, and a recovered database must open with every switch that
//! changes how its files are read (issue 38: a database recovered once could not be opened
//! again with `O_DIRECT`). So after each kill, in a directory: the recovering `check` and the
//! `put-many` before it each run with an I/O setting drawn from [`IO_SETTINGS`] (every engine
//! this machine runs, `O_DIRECT` on and off, registered buffers), the `dump` that reads the
//! keys follows, then a `check` with every other setting, each finding the same keys, and a
//! last `dump` that must print exactly what the first one did. Stealing (`--steal`) is drawn
//! per iteration too.
//!
//! Two tests, one database of two shards (batches span both: the cross-shard commit keeps
//! them whole) and one of one shard; `RINGDB_CRASH_SHARDS=1|2` runs only that one.
//! Iterations per test: `RINGDB_CRASH_ITERS` (default 16, so CI kills 32 times;
//! `scripts/crash-soak` runs many more); every `RINGDB_CRASH_PER_DB` iterations (default 8)
//! the test starts over on a fresh database, so that an iteration's checks stay short. `RINGDB_CRASH_SEED` fixes the seed: the batch sizes,
//! modes and kill times come from it as they always did (so a seed from an earlier report
//! replays them), the I/O settings and stealing from a second stream of it.
//!
//! `RINGDB_CRASH_DB` puts the database on a raw device instead of a directory (e.g.
//! `/dev/ng0n1` in the NVMe VM; one database, the device's own I/O, no settings drawn) and
//! `RINGDB_CRASH_MODES` (comma-separated) picks the durability modes drawn from.
//! `RINGDB_CRASH_ARGS` (whitespace-separated) is added to every `put-many`, `check` and
//! `dump` (e.g. `--iopoll`).

mod common;

use common::{ringdb, ringdb_bin, tmp};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The key the test formats its database with: outside every iteration's range (iteration
/// `i` writes keys from `i * 10_000_000`), so it belongs to no batch.
const OUTSIDE_KEY: u64 = 1 << 60;

/// The I/O settings a database in a directory is written, recovered and read back with:
/// every engine this machine runs, `O_DIRECT` on and off, registered buffers.
const IO_SETTINGS: [&[&str]; 8] = [
    &["--engine", "auto"],
    &["--engine", "uring"],
    &["--engine", "uring", "--fixedbufs"],
    &["--engine", "uring", "--direct", "0"],
    &["--engine", "uring-sync", "--fixedbufs"],
    &["--engine", "libaio"],
    &["--engine", "posix"],
    &["--engine", "posix", "--direct", "0"],
];

/// Stealing policies drawn per iteration (`--steal`).
const STEAL: [&str; 3] = ["auto", "on", "off"];

/// Mixed into the seed for the second stream (I/O settings, stealing), so that the first
/// draws the same batch sizes, modes and kill times for a seed as before it existed.
const SECOND_STREAM: u64 = 0x0005_EED0_F105_E771_u64;

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

struct CrashSetup {
    /// A raw device to run on instead of a directory of the test's own.
    device: Option<String>,
    dir: PathBuf,
    /// The ack log `put-many` appends acknowledged key numbers to.
    ack: PathBuf,
    /// The `--db` argument: the device, or the directory.
    db: String,
    /// Shards of the database in a directory (a device holds one).
    shards: Option<usize>,
    /// Durability modes drawn from.
    modes: Vec<String>,
    /// Arguments added to every `put-many`, `check` and `dump`.
    extra: Vec<String>,
}

/// What one iteration runs with, drawn from the seed.
struct Draw {
    start: u64,
    batch: u64,
    mode: String,
    kill_after: Duration,
    /// `--steal` of the `put-many` that is killed.
    steal: &'static str,
    /// Indexes into [`IO_SETTINGS`] of the killed `put-many` and of the recovering `check`
    /// (in a directory; a device uses its own).
    write_io: usize,
    recover_io: usize,
    /// The first iteration on a fresh database: `put-many` starts with `--fresh`.
    first: bool,
}

impl CrashSetup {
    fn from_env(name: &str, shards: usize) -> CrashSetup {
        let device = std::env::var("RINGDB_CRASH_DB").ok();
        let dir = tmp(name);
        if device.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let ack = tmp(&format!("{name}-acks"));
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
            shards: device.is_none().then_some(shards),
            device,
            dir,
            ack,
            db,
            modes,
            extra,
        }
    }

    /// The next iteration's settings: batch size, mode and kill time from `rng` (the stream
    /// seeds of earlier reports replay), the rest from `second`.
    fn draw(&self, it: u64, first: bool, rng: &mut u64, second: &mut u64) -> Draw {
        let batch = 1 + splitmix(rng) % 6;
        let modes = &self.modes;
        let mode = modes[(splitmix(rng) % modes.len() as u64) as usize].clone();
        let kill_after = Duration::from_millis(100 + splitmix(rng) % 900);
        let steal = STEAL[(splitmix(second) % STEAL.len() as u64) as usize];
        let setting = |x: &mut u64| (splitmix(x) % IO_SETTINGS.len() as u64) as usize;
        Draw {
            start: it * 10_000_000,
            batch,
            mode,
            kill_after,
            steal,
            write_io: setting(second),
            recover_io: setting(second),
            first,
        }
    }

    /// The I/O arguments of setting `index`: none on a device (it has its own I/O).
    fn io(&self, index: usize) -> &'static [&'static str] {
        if self.device.is_some() {
            &[]
        } else {
            IO_SETTINGS[index]
        }
    }

    /// The arguments every command on this database takes: `--db`, `--shards` in a directory.
    fn db_args(&self) -> Vec<String> {
        let mut args = vec!["--db".to_string(), self.db.clone()];
        if let Some(shards) = self.shards {
            args.extend(["--shards".to_string(), shards.to_string()]);
        }
        args
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
        let mut args = vec!["put-many".to_string()];
        args.extend(self.db_args());
        let outside = OUTSIDE_KEY.to_string();
        let rest = ["--fresh", "--count", "1", "--start", &outside];
        args.extend(rest.map(str::to_string));
        args.extend(["--durability".to_string(), mode.to_string()]);
        args.extend(self.extra.iter().cloned());
        let out = ringdb(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "formatting the database failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `ringdb <cmd>` on the database with I/O setting `io` and the extra arguments.
    fn ringdb(&self, cmd: &str, io: usize) -> Output {
        let mut args = vec![cmd.to_string()];
        args.extend(self.db_args());
        args.extend(self.io(io).iter().map(|a| a.to_string()));
        args.extend(self.extra.iter().cloned());
        ringdb(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Starts `put-many` as `draw` says (on a fresh database in iteration 0), and kills it
    /// with SIGKILL after `draw.kill_after`.
    fn kill_put_many(&self, it: u64, draw: &Draw) {
        let mut args = vec!["put-many".to_string()];
        args.extend(self.db_args());
        let (start, batch) = (draw.start.to_string(), draw.batch.to_string());
        let ack = self.ack.to_str().unwrap();
        let rest = [
            "--count",
            "5000000",
            "--start",
            &start,
            "--batch",
            &batch,
            "--tasks",
            "32",
            "--pool",
            "512K",
            "--ack-log",
            ack,
        ];
        args.extend(rest.map(str::to_string));
        args.extend(["--durability", &draw.mode, "--steal", draw.steal].map(str::to_string));
        if draw.first {
            args.push("--fresh".into());
        }
        args.extend(self.io(draw.write_io).iter().map(|a| a.to_string()));
        args.extend(self.extra.iter().cloned());
        let mut child = Command::new(ringdb_bin())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn put-many");
        std::thread::sleep(draw.kill_after);
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.code().is_none(),
            "iteration {it}: put-many ended before the kill: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Recovers the database with a `check` in the drawn I/O setting and returns the key
    /// numbers a `dump` then prints, each checked to hold its own value.
    fn recovered_keys(&self, it: u64, draw: &Draw, seed: u64) -> Vec<u64> {
        let check = self.ringdb("check", draw.recover_io);
        assert!(
            check.status.success(),
            "iteration {it} (mode {}, recovery with {:?}, seed {seed}): check failed:\n{}\n{}",
            draw.mode,
            self.io(draw.recover_io),
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        self.dump(it, 0, seed)
    }

    /// The key numbers `dump` prints with I/O setting `io`, in order, each checked to hold
    /// its own value.
    fn dump(&self, it: u64, io: usize, seed: u64) -> Vec<u64> {
        let dump = self.ringdb("dump", io);
        assert!(
            dump.status.success(),
            "iteration {it} (seed {seed}): dump with {:?} after recovery failed: {}",
            self.io(io),
            String::from_utf8_lossy(&dump.stderr)
        );
        let text = String::from_utf8(dump.stdout).unwrap();
        let mut keys = Vec::new();
        for line in text.lines() {
            let (k, v) = line.split_once('\t').expect("key\\tvalue");
            let i: u64 = k.strip_prefix('k').unwrap().parse().unwrap();
            assert_eq!(v, value_of(i), "iteration {it}: k{i} has a wrong value");
            keys.push(i);
        }
        keys
    }

    /// Opens the recovered database again with every other I/O setting (`check`: the tree,
    /// the checksums, the key count the dump found), then dumps it once more: the same keys.
    /// A device is opened twice more with its own I/O.
    fn reopen_with_every_setting(&self, it: u64, draw: &Draw, keys: &[u64], seed: u64) {
        let others: Vec<usize> = if self.device.is_some() {
            vec![0]
        } else {
            (0..IO_SETTINGS.len())
                .filter(|&s| s != draw.recover_io)
                .collect()
        };
        for &setting in &others {
            let check = self.ringdb("check", setting);
            let stdout = String::from_utf8_lossy(&check.stdout);
            assert!(
                check.status.success(),
                "iteration {it} (seed {seed}): the recovered database failed to open again with {:?}:\n{stdout}\n{}",
                self.io(setting),
                String::from_utf8_lossy(&check.stderr)
            );
            assert_eq!(
                counted_keys(&stdout),
                keys.len() as u64,
                "iteration {it} (seed {seed}): check with {:?} counts other keys than the dump:\n{stdout}",
                self.io(setting)
            );
        }
        let last = others[others.len() - 1];
        let again = self.dump(it, last, seed);
        assert!(
            again == keys,
            "iteration {it} (seed {seed}): a second dump with {:?} differs from the first ({} keys, then {})",
            self.io(last),
            keys.len(),
            again.len()
        );
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

    /// A fresh database (formatted in the first mode) and an empty ack log.
    fn start_over(&self) {
        let _ = std::fs::remove_file(&self.ack);
        self.format(&self.modes[0]);
    }

    fn clean_up(&self) {
        if self.device.is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        let _ = std::fs::remove_file(&self.ack);
    }
}

/// The keys `check` counted over every shard ("check shard N: K keys, ..." lines, or "check:
/// K keys, ..." for one).
fn counted_keys(stdout: &str) -> u64 {
    stdout
        .lines()
        .filter(|l| l.starts_with("check"))
        .filter_map(|l| {
            l.split_once(": ")?
                .1
                .split_once(" keys")?
                .0
                .parse::<u64>()
                .ok()
        })
        .sum()
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

/// Kills `put-many` on a database of `shards` shards `RINGDB_CRASH_ITERS` times, checking
/// after each kill; skipped when `RINGDB_CRASH_SHARDS` names another count, or on a device
/// for the one-shard test (a device holds one database, run once).
fn crash_iterations(name: &str, shards: usize) {
    let device = std::env::var("RINGDB_CRASH_DB").is_ok();
    let only = env_number("RINGDB_CRASH_SHARDS");
    if only.is_some_and(|n| n != shards as u64) || (device && shards != 2) {
        eprintln!("crash test with {shards} shard(s): skipped (RINGDB_CRASH_SHARDS or a device)");
        return;
    }
    let iters = env_number("RINGDB_CRASH_ITERS").unwrap_or(16);
    let per_database = env_number("RINGDB_CRASH_PER_DB").unwrap_or(8).max(1);
    let seed = env_number("RINGDB_CRASH_SEED").unwrap_or_else(clock_seed);
    eprintln!("crash test, {shards} shard(s): {iters} iterations, RINGDB_CRASH_SEED={seed}");
    let (mut rng, mut second) = (seed, seed ^ SECOND_STREAM);
    let setup = CrashSetup::from_env(name, shards);
    // Per iteration: first key number and batch size (to check batches whole).
    let mut runs: Vec<(u64, u64)> = Vec::new();
    assert!(
        (iters + 1) * 10_000_000 <= OUTSIDE_KEY,
        "{iters} iterations reach the outside key"
    );
    for it in 0..iters {
        if it % per_database == 0 {
            setup.start_over();
            runs.clear();
        }
        let draw = setup.draw(it, it % per_database == 0, &mut rng, &mut second);
        runs.push((draw.start, draw.batch));
        setup.kill_put_many(it, &draw);
        let keys = setup.recovered_keys(it, &draw, seed);
        setup.reopen_with_every_setting(it, &draw, &keys, seed);
        let present: HashSet<u64> = keys.into_iter().collect();
        let n_acked = setup.assert_acknowledged_present(&present, it, &draw.mode, seed);
        assert_batches_whole(&present, &runs, it, seed);
        eprintln!(
            "crash {it} ({shards} shard(s)): mode {}, steal {}, batch {}, written with {:?}, recovered with {:?}, killed after {:?}: {} keys present, {n_acked} acknowledged, reopened OK",
            draw.mode,
            draw.steal,
            draw.batch,
            setup.io(draw.write_io),
            setup.io(draw.recover_io),
            draw.kill_after,
            present.len()
        );
    }
    setup.clean_up();
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    crash_iterations("crash-db", 2);
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged_on_one_shard() {
    crash_iterations("crash-db-one-shard", 1);
}
