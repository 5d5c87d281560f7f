//! Helpers shared by the CLI's integration tests. Each test file compiles this module on its
//! own and uses some of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// A path under cargo's per-target temp dir, unique to this test process.
/// `RINGDB_TEST_TMP` overrides the directory (e.g. inside the NVMe VM, where the build's
/// paths do not exist).
pub fn tmp(name: &str) -> PathBuf {
    let base = std::env::var_os("RINGDB_TEST_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    base.join(format!("{}-{name}", std::process::id()))
}

/// The `ringdb` binary: `RINGDB_BIN`, or the one cargo built for this test.
pub fn ringdb_bin() -> PathBuf {
    std::env::var_os("RINGDB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ringdb")))
}

/// Runs the `ringdb` binary with `args`.
pub fn ringdb(args: &[&str]) -> Output {
    Command::new(ringdb_bin())
        .args(args)
        .output()
        .expect("run ringdb")
}

/// Asserts a refusal: exit code 2, no panic, one `ringdb: error:` line, optionally followed by
/// one `ringdb: hint:` line (the CLI's words for the library's typed error), and `needle` in
/// one of the two.
#[track_caller]
pub fn assert_refused(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines.len() == 1 || (lines.len() == 2 && lines[1].starts_with("ringdb: hint:")),
        "expected an error line and at most a hint line, got: {err}"
    );
    assert!(lines[0].starts_with("ringdb: error:"), "{err}");
    assert!(
        lines.iter().any(|l| l.contains(needle)),
        "expected {needle:?} in: {err}"
    );
}

/// The server process, killed when the test ends however it ends.
pub struct Server(pub std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the server on a free port; returns it and its address once it listens.
pub fn serve(dir: &std::path::Path) -> (Server, std::net::SocketAddr) {
    serve_with(dir, &["--port", "0"])
}

/// [`serve`] with more flags (`--port` among them).
pub fn serve_with(dir: &std::path::Path, extra: &[&str]) -> (Server, std::net::SocketAddr) {
    let mut child = Command::new(ringdb_bin())
        .args(["serve"])
        .args(extra)
        .args([
            "--shards",
            "2",
            "--direct",
            "0",
            "--durability",
            "fdatasync",
            "--pool",
            "64M",
        ])
        .arg("--db")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ringdb serve starts");
    let stderr = child.stderr.take().expect("piped");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let line = lines.next().expect("a line").expect("readable");
    let address = line
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    std::thread::spawn(move || lines.for_each(drop));
    (Server(child), address)
}

/// A TCP port free now on loopback (for a server that must come back on the same port).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}

/// A `ringdb serve --cluster` node on `port`, its data in `dir`.
pub fn start_cluster_node(dir: &std::path::Path, port: u16) -> (Server, std::net::SocketAddr) {
    let port = port.to_string();
    serve_with(dir, &["--port", &port, "--cluster"])
}
