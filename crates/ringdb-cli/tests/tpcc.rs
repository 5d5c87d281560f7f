//! `ringdb tpcc` end to end on the small population: a run with 128 tasks passes the
//! consistency checks and runs every transaction type; `--check` on an existing database; bad
//! input is refused with typed errors (W=0, another W, a pool too small for the hot set, a full
//! disk during the load); a run SIGKILLed with the log on recovers and passes the checks; and
//! the same run without isolation breaks the checks, so they can fail; warehouses over two
//! shards pass them, also after a kill with the log on.

mod common;

use common::{assert_refused, ringdb, ringdb_bin, tmp};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A fresh directory for one test's database.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `ringdb tpcc --path dir --small` with `extra` arguments.
fn tpcc(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["tpcc", "--path", dir.to_str().unwrap(), "--small"];
    args.extend_from_slice(extra);
    ringdb(&args)
}

/// Loads the small population (one transaction, so the load is all the run does).
fn load_small(dir: &Path, extra: &[&str]) {
    let mut args = vec![
        "--load",
        "--max-transactions",
        "1",
        "--tasks",
        "1",
        "--pool",
        "2M",
    ];
    args.extend_from_slice(extra);
    let out = tpcc(dir, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_run_with_128_tasks_passes_the_checks_and_runs_every_type() {
    let dir = fresh_dir("tpcc-run");
    let json = tmp("tpcc-run.json");
    let out = tpcc(
        &dir,
        &[
            "--load",
            "--tasks",
            "128",
            "--pool",
            "2M",
            "--duration",
            "4s",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("checks: passed"), "{text}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("the JSON report");
    assert_eq!(v["checks"]["passed"], true);
    assert_eq!(v["run"]["tasks"], 128);
    assert!(v["run"]["tx_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["run"]["tpmc"].as_f64().unwrap() > 0.0);
    let types = v["run"]["per_type"].as_array().unwrap();
    assert_eq!(types.len(), 5);
    for t in types {
        let finished = t["committed"].as_u64().unwrap() + t["rolled_back"].as_u64().unwrap();
        assert!(finished > 0, "{} never ran: {text}", t["kind"]);
        assert!(t["lat_us"]["p99"].as_f64().unwrap() > 0.0, "{}", t["kind"]);
        // Every conflict is counted under one cause (a table and a lock).
        let causes = t["conflict_causes"].as_array().unwrap();
        let by_cause: u64 = causes
            .iter()
            .map(|c| c["conflicts"].as_u64().unwrap())
            .sum();
        assert_eq!(by_cause, t["conflicts"].as_u64().unwrap(), "{}", t["kind"]);
        assert!(causes
            .iter()
            .all(|c| c["table"].as_str().unwrap().starts_with("tpcc.")));
    }
    // --check on the database the run left.
    let out = tpcc(&dir, &["--check"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("condition 4") && text.contains("checks: passed"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&json);
}

#[test]
fn zero_warehouses_another_count_and_a_missing_database_are_refused() {
    let dir = fresh_dir("tpcc-bad");
    assert_refused(&tpcc(&dir, &["--warehouses", "0"]), "warehouse");
    assert!(!dir.join("data.ringdb").exists(), "nothing loaded");
    assert_refused(&tpcc(&dir, &["--check"]), "no database");
    load_small(&dir, &[]);
    let out = tpcc(&dir, &["--warehouses", "2", "--max-transactions", "1"]);
    assert_refused(&out, "--warehouses 1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 warehouses") && err.contains("2"), "{err}");
    // The standard population is not what the database holds either.
    let out = ringdb(&[
        "tpcc",
        "--path",
        dir.to_str().unwrap(),
        "--warehouses",
        "1",
        "--check",
    ]);
    assert_refused(&out, "--small");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pool_too_small_for_the_hot_set_is_refused_before_loading() {
    let dir = fresh_dir("tpcc-pool");
    // The standard population: 100,000 items alone take ~3,500 pages (14 MiB).
    let out = ringdb(&["tpcc", "--path", dir.to_str().unwrap(), "--pool", "4M"]);
    assert_refused(&out, "hot set");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1024 pages") && err.contains("hint: raise --pool"),
        "{err}"
    );
    assert!(!dir.join("data.ringdb").exists(), "refused before loading");
    // The small population's hot set grows with the tasks (each holds its rows' pages).
    let out = tpcc(&dir, &["--pool", "256k", "--tasks", "128"]);
    assert_refused(&out, "hot set");
}

/// Runs a small TPC-C on a freshly loaded database in `name` with `isolation`, a pool of 1 MiB
/// (so transactions fault and interleave) and 128 tasks.
fn run_with_isolation(name: &str, isolation: &str) -> Output {
    let dir = fresh_dir(name);
    load_small(&dir, &[]);
    let out = tpcc(
        &dir,
        &[
            "--isolation",
            isolation,
            "--pool",
            "1M",
            "--tasks",
            "128",
            "--duration",
            "3s",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn without_isolation_the_checks_fail_and_with_it_they_pass() {
    let off = run_with_isolation("tpcc-iso-off", "off");
    let text = stdout(&off);
    assert_eq!(
        off.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&off.stderr)
    );
    assert!(
        text.contains("FAILED") && text.contains("checks: FAILED"),
        "{text}"
    );
    let on = run_with_isolation("tpcc-iso-on", "serializable");
    let text = stdout(&on);
    assert!(
        on.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&on.stderr)
    );
    assert!(
        text.contains("checks: passed") && !text.contains("FAILED"),
        "{text}"
    );
}

#[test]
fn a_run_killed_with_the_log_on_recovers_and_passes_the_checks() {
    let dir = fresh_dir("tpcc-kill");
    // Loaded with the log on: a database made without one is refused with durability on.
    load_small(&dir, &["--durability", "fdatasync"]);
    let child = Command::new(ringdb_bin())
        .args([
            "tpcc",
            "--path",
            dir.to_str().unwrap(),
            "--small",
            "--pool",
            "1M",
        ])
        .args(["--durability", "fdatasync", "--duration", "60s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ringdb tpcc");
    let wal = dir.join("wal.ringdb");
    // Opening the database recovers it from the log (the default with a log is fdatasync).
    kill_and_check(
        child,
        &wal,
        Duration::from_millis(1500),
        &dir,
        &["--pool", "1M"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (bounded) until `watched` holds bytes, lets the run go on for `then`, SIGKILLs
/// `child`, and asserts that `--check` on `dir` (with `check_args`) then passes: the reopen
/// recovers what the logs hold.
fn kill_and_check(
    mut child: std::process::Child,
    watched: &Path,
    then: Duration,
    dir: &Path,
    check_args: &[&str],
) {
    for _ in 0..200 {
        if std::fs::metadata(watched).is_ok_and(|m| m.len() > 0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        std::fs::metadata(watched).is_ok_and(|m| m.len() > 0),
        "{} was written to",
        watched.display()
    );
    std::thread::sleep(then);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before the kill"
    );
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let out = tpcc(dir, &[&["--check"][..], check_args].concat());
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("checks: passed"), "{text}");
}

#[test]
fn a_full_disk_during_the_load_is_a_typed_error() {
    if effective_uid() != 0 {
        println!("skipped: mounting a size-limited tmpfs needs root");
        return;
    }
    let mount = fresh_dir("tpcc-full");
    std::fs::create_dir_all(&mount).unwrap();
    let mounted = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=1m",
            "tpcc-full",
            mount.to_str().unwrap(),
        ])
        .status();
    if !mounted.is_ok_and(|s| s.success()) {
        println!("skipped: mount -t tmpfs failed here");
        return;
    }
    let out = tpcc(
        &mount.join("db"),
        &["--load", "--max-transactions", "1", "--pool", "2M"],
    );
    let _ = Command::new("umount").arg(&mount).status();
    let _ = std::fs::remove_dir_all(&mount);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("ringdb: error:"), "{err}");
}

/// The effective user id, from `/proc/self/status` (`Uid: real effective saved fs`).
fn effective_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|id| id.parse().ok())
        .unwrap_or(u32::MAX)
}

#[test]
fn warehouses_over_two_shards_pass_the_checks_also_after_a_kill_with_the_log_on() {
    let dir = fresh_dir("tpcc-shards");
    let args = ["--shards", "2", "--warehouses", "2", "--tasks", "32"];
    let out = tpcc(&dir, &[&args[..], &["--duration", "2s"]].concat());
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("shards 2:") && text.contains("checks: passed"),
        "{text}"
    );
    assert!(
        dir.join(ringdb::MANIFEST_FILE).exists(),
        "a sharded database"
    );
    // Reopened without --shards: the manifest keeps the count.
    let out = tpcc(&dir, &["--check"]);
    assert!(out.status.success(), "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(&dir);

    // With the log on, killed mid-run: the reopen recovers every shard's log and applies
    // the cross-shard commits a shard lacks from the batch log; the checks (the payments
    // condition across shards among them) pass.
    let dir = fresh_dir("tpcc-shards-kill");
    let durable = ["--durability", "fdatasync"];
    let out = tpcc(
        &dir,
        &[&args[..], &durable[..], &["--duration", "1s"]].concat(),
    );
    assert!(out.status.success(), "{}", stdout(&out));
    let child = Command::new(ringdb_bin())
        .args(["tpcc", "--path", dir.to_str().unwrap(), "--small"])
        .args(["--tasks", "32", "--duration", "60s"])
        .args(durable)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ringdb tpcc");
    // Killed once a commit across shards has reached the batch log, a second later.
    let batch_log = dir.join(ringdb::BATCH_LOG_FILE);
    kill_and_check(child, &batch_log, Duration::from_millis(1000), &dir, &[]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without `--tasks` a run has the spec's 10 terminals per warehouse; `--terminals-per-warehouse`
/// sets another count; both at once are refused.
#[test]
fn tasks_default_to_ten_terminals_per_warehouse() {
    let dir = fresh_dir("tpcc-terminals");
    let json = tmp("tpcc-terminals.json");
    load_small(&dir, &["--warehouses", "2"]);
    let tasks_of = |extra: &[&str]| {
        let mut args = vec!["--max-transactions", "50", "--json", json.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = tpcc(&dir, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("the JSON report");
        assert_eq!(v["checks"]["passed"], true);
        v["run"]["tasks"].as_u64().unwrap()
    };
    assert_eq!(tasks_of(&[]), 20, "10 terminals x 2 warehouses");
    assert_eq!(tasks_of(&["--terminals-per-warehouse", "3"]), 6);
    assert_eq!(tasks_of(&["--tasks", "7"]), 7);
    let both = tpcc(&dir, &["--tasks", "7", "--terminals-per-warehouse", "3"]);
    assert!(!both.status.success(), "both counts at once are refused");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&json);
}
