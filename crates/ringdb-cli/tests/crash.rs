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
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

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

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let iters: u64 = std::env::var("RINGDB_CRASH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let seed: u64 = std::env::var("RINGDB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("crash test: {iters} iterations, RINGDB_CRASH_SEED={seed}");
    let mut rng = seed;
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
    let run = |cmd: &str| {
        let mut args = vec![cmd, "--db", db.as_str()];
        args.extend(extra.iter().map(String::as_str));
        ringdb(&args)
    };
    // Per iteration: first key number and batch size (to check batches whole).
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for it in 0..iters {
        let start = it * 10_000_000;
        let batch = 1 + splitmix(&mut rng) % 6;
        let mode = modes[(splitmix(&mut rng) % modes.len() as u64) as usize].as_str();
        let kill_after = Duration::from_millis(100 + splitmix(&mut rng) % 900);
        runs.push((start, batch));
        let mut args = vec![
            "put-many".to_string(),
            "--db".into(),
            db.clone(),
            "--count".into(),
            "5000000".into(),
            "--start".into(),
            start.to_string(),
            "--batch".into(),
            batch.to_string(),
            "--tasks".into(),
            "32".into(),
            "--pool".into(),
            "512K".into(),
            "--durability".into(),
            mode.into(),
            "--ack-log".into(),
            ack.to_str().unwrap().into(),
        ];
        if it == 0 {
            args.push("--fresh".into());
        }
        args.extend(extra.iter().cloned());
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

        // The database recovers and verifies.
        let check = run("check");
        assert!(
            check.status.success(),
            "iteration {it} (mode {mode}, seed {seed}): check failed:\n{}\n{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        let dump = run("dump");
        assert!(
            dump.status.success(),
            "{}",
            String::from_utf8_lossy(&dump.stderr)
        );
        let text = String::from_utf8(dump.stdout).unwrap();
        let mut present: HashMap<u64, &str> = HashMap::new();
        for line in text.lines() {
            let (k, v) = line.split_once('\t').expect("key\\tvalue");
            let i: u64 = k.strip_prefix('k').unwrap().parse().unwrap();
            assert_eq!(v, value_of(i), "iteration {it}: k{i} has a wrong value");
            present.insert(i, v);
        }
        // Every acknowledged key (a process crash: `none` acknowledges after the write
        // reached the kernel, which survives SIGKILL).
        let acked = std::fs::read_to_string(&ack).unwrap_or_default();
        let mut n_acked = 0;
        for l in acked.lines() {
            let i: u64 = l.parse().unwrap();
            assert!(
                present.contains_key(&i),
                "iteration {it} (mode {mode}, seed {seed}): acknowledged k{i} is missing"
            );
            n_acked += 1;
        }
        // Batches whole: within each run, batch c covers start + c*b .. +b.
        for &(s, b) in &runs {
            let mut by_batch: HashMap<u64, u64> = HashMap::new();
            for &i in present.keys().filter(|&&i| i >= s && i < s + 10_000_000) {
                *by_batch.entry((i - s) / b).or_default() += 1;
            }
            for (c, n) in by_batch {
                assert_eq!(
                    n, b,
                    "iteration {it} (seed {seed}): batch {c} of the run from {s} is partly visible ({n} of {b} keys)"
                );
            }
        }
        eprintln!(
            "crash {it}: mode {mode}, batch {batch}, killed after {kill_after:?}: {} keys present, {n_acked} acknowledged, check OK",
            present.len()
        );
    }
    if device.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_file(&ack);
}
