//! `--config FILE` on `ringdb ycsb` and `ringdb io`: the file's settings run, a flag typed on
//! the command line overrides the file, and a bad file is a one-line refusal naming the key.

mod common;

use common::{assert_refused, ringdb, tmp};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A fresh directory holding `config.toml` with `text`.
fn config_dir(name: &str, text: &str) -> (PathBuf, PathBuf) {
    let dir = tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

/// A short `ringdb ycsb` on a database in `dir`, with `extra` arguments.
fn ycsb(dir: &Path, file: &Path, extra: &[&str]) -> Output {
    let db = dir.join("db");
    let mut args = vec![
        "ycsb",
        "--db",
        db.to_str().unwrap(),
        "--config",
        file.to_str().unwrap(),
        "--records",
        "300",
        "--runtime",
        "200ms",
        "--no-model",
    ];
    args.extend_from_slice(extra);
    ringdb(&args)
}

fn succeeded(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    (stdout, stderr)
}

const POSIX_2M: &str = "# a test's advice\n[io]\nengine = \"posix\"\n[db]\npool = \"2M\"\n\
                        [workload]\ntasks = 4\n";

#[test]
fn ycsb_runs_with_the_files_engine_and_pool() {
    let (dir, file) = config_dir("ycsb-file", POSIX_2M);
    let (stdout, stderr) = succeeded(&ycsb(&dir, &file, &[]));
    assert!(stderr.contains("ringdb: config: applying"), "{stderr}");
    assert!(stderr.contains("config.toml"), "{stderr}");
    assert!(stderr.contains(", 4 tasks,"), "{stderr}");
    assert!(stdout.contains("engine posix,"), "{stdout}");
    assert!(stdout.contains("pool frames 2.0 MiB"), "{stdout}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_flag_typed_on_the_command_line_overrides_the_file() {
    let (dir, file) = config_dir("ycsb-override", POSIX_2M);
    let out = ycsb(
        &dir,
        &file,
        &["--engine", "uring", "--pool", "4M", "--tasks", "6"],
    );
    let (stdout, stderr) = succeeded(&out);
    assert!(stdout.contains("engine uring"), "{stdout}");
    assert!(stdout.contains("pool frames 4.0 MiB"), "{stdout}");
    assert!(stderr.contains(", 6 tasks,"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_unknown_key_is_refused_with_its_name() {
    let (dir, file) = config_dir("ycsb-unknown", "[db]\npool = \"2M\"\nturbo = true\n");
    let out = ycsb(&dir, &file, &[]);
    assert_refused(&out, "unknown key `turbo`");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("ringdb: hint:"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_value_is_refused_with_its_key() {
    let (dir, file) = config_dir("ycsb-value", "[db]\npool = \"12Q\"\n");
    assert_refused(&ycsb(&dir, &file, &[]), "db.pool");
    let (dir2, depth) = config_dir("io-depth", "[io]\nqueue_depth = 0\n");
    let target = dir2.join("io.dat");
    let out = ringdb(&[
        "io",
        "--filename",
        target.to_str().unwrap(),
        "--config",
        depth.to_str().unwrap(),
        "--size",
        "1M",
        "--runtime",
        "100ms",
    ]);
    assert_refused(&out, "queue depth");
    let missing = dir.join("absent.toml");
    assert_refused(&ycsb(&dir, &missing, &[]), "absent.toml");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&dir2).ok();
}

#[test]
fn io_runs_the_files_engine_unless_a_flag_says_otherwise() {
    let (dir, file) = config_dir("io-file", "[io]\nengine = \"libaio\"\nqueue_depth = 8\n");
    let target = dir.join("io.dat");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "io",
            "--filename",
            target.to_str().unwrap(),
            "--config",
            file.to_str().unwrap(),
            "--size",
            "4M",
            "--ios",
            "2000",
            "--json",
        ];
        args.extend_from_slice(extra);
        let (stdout, _) = succeeded(&ringdb(&args));
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()
    };
    let from_file = run(&[]);
    assert_eq!(from_file["label"], "libaio", "{from_file}");
    assert_eq!(from_file["iodepth"], 8, "{from_file}");
    let overridden = run(&["--engine", "posix", "--iodepth", "1"]);
    assert_eq!(overridden["label"], "posix", "{overridden}");
    std::fs::remove_dir_all(&dir).ok();
}
