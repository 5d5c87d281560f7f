//! `ringdb serve` where io_uring is blocked, as a container's seccomp profile blocks it: under a
//! filter that fails `io_uring_setup` (set in a child of this test binary, so `ringdb` inherits
//! it), the `auto` engine and the epoll network serve, each with a warning, and INFO says
//! `multiplexing_api:epoll`; `--net io_uring` refuses to start and says why.

#[path = "../../ringdb-io/tests/support/seccomp.rs"]
mod seccomp;

use seccomp::{child_scenario, run_child, CHILD_DONE};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

fn serve(dir: &std::path::Path, net: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ringdb"));
    command
        .args(["serve", "--port", "0", "--direct", "0", "--pool", "64M"])
        .args(["--durability", "fdatasync", "--net", net, "--db"])
        .arg(dir);
    command
}

/// Sends `request` and reads until the reply holds `until`.
fn ask(stream: &mut TcpStream, request: &str, until: &str) -> String {
    stream.write_all(request.as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut buffer = [0u8; 4096];
    // Bounded by the read timeout and the reply's length.
    while !String::from_utf8_lossy(&got).contains(until) {
        let n = stream.read(&mut buffer).expect("a reply");
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn blocked_io_uring() {
    seccomp::block_syscalls(&[seccomp::IO_URING_SETUP], libc::EPERM);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-fallback");
    let _ = std::fs::remove_dir_all(&dir);
    let refused = serve(&dir, "io_uring").output().expect("runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "started without io_uring: {stderr}"
    );
    assert!(stderr.contains("network ring"), "{stderr}");
    let mut child = serve(&dir, "auto")
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let mut said = Vec::new();
    // Bounded: the server prints a few lines, then "listening on", or exits.
    let address: std::net::SocketAddr = loop {
        let line = lines.next().expect("a line before exit").expect("readable");
        said.push(line.clone());
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split(' ').next().unwrap().parse().expect("an address");
        }
    };
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    ask(&mut stream, "SET fallback works\r\n", "+OK\r\n");
    ask(&mut stream, "GET fallback\r\n", "works\r\n");
    let info = ask(&mut stream, "INFO server\r\n", "uptime_in_days");
    assert!(info.contains("multiplexing_api:epoll\r\n"), "{info}");
    let _ = stream.write_all(b"SHUTDOWN\r\n");
    said.extend(lines.map_while(Result::ok));
    assert!(child.wait().expect("exits").success(), "{said:#?}");
    let said = said.join("\n");
    assert!(
        said.contains("warning: io_uring is unavailable here"),
        "{said}"
    );
    assert!(said.contains("the network falls back to epoll"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_where_io_uring_is_blocked_falls_back_to_epoll_and_says_so() {
    match child_scenario().as_deref() {
        Some("serve-eperm") => {
            blocked_io_uring();
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            run_child(
                "serve_where_io_uring_is_blocked_falls_back_to_epoll_and_says_so",
                "serve-eperm",
                &[],
            );
        }
    }
}
