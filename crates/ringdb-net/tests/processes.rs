//! The multi-process shuffle (one child process per node, the way `ringdb shuffle` runs): the
//! join equals the reference, and a node that dies mid-shuffle gives a typed error naming a
//! node within a bounded time, with every child reaped.
//!
//! The children are this test binary itself, re-executed with a filter that selects one of the
//! `node_entry_*` functions; they read their role from `RDB_NET_NODE_SPEC`.

use ringdb_net::shuffle::{
    connect_mesh, reference_join, run_processes, serve_node, NodeCommand, ShuffleReport,
    ShuffleSpec,
};
use ringdb_net::{ChildProcess, NetConfig, NetError};
use std::io::{BufRead, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

const ENV: &str = "RDB_NET_NODE_SPEC";

/// Child side: `parent-pid|spec-json|transport|node-that-dies`.
fn entry(node: usize) {
    let Ok(v) = std::env::var(ENV) else {
        return; // not a child: nothing to do
    };
    let mut parts = v.splitn(4, '|');
    // Only a child of the test that set the variable plays a node (not the test process itself).
    if parts.next().and_then(|p| p.parse().ok()) != Some(std::os::unix::process::parent_id()) {
        return;
    }
    let spec: ShuffleSpec = serde_json::from_str(parts.next().unwrap()).unwrap();
    let mut cfg: NetConfig = parts.next().unwrap().parse().unwrap();
    cfg.io_timeout = Duration::from_secs(5);
    let dies: Option<usize> = parts.next().unwrap().parse().ok();
    if dies == Some(node) {
        // Join the mesh, then crash before sending a single frame.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        println!("LISTEN {}", l.local_addr().unwrap().port());
        std::io::stdout().flush().unwrap();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).unwrap();
        let addrs: Vec<SocketAddr> = line
            .split_whitespace()
            .skip(1)
            .map(|a| a.parse().unwrap())
            .collect();
        let _conns = connect_mesh(&spec, node, &l, &addrs, cfg.io_timeout).unwrap();
        std::process::exit(3);
    }
    if let Err(e) = serve_node(&spec, node, &cfg, "127.0.0.1") {
        eprintln!("ringdb: error: {e}");
        std::process::exit(2);
    }
}

#[test]
fn node_entry_0() {
    entry(0)
}
#[test]
fn node_entry_1() {
    entry(1)
}
#[test]
fn node_entry_2() {
    entry(2)
}

fn command() -> NodeCommand {
    NodeCommand {
        program: std::env::current_exe().unwrap(),
        args: Box::new(|i| {
            vec![
                format!("node_entry_{i}"),
                "--exact".into(),
                "--nocapture".into(),
                "--test-threads=1".into(),
            ]
        }),
        netns: None,
    }
}

/// One multi-process shuffle of this test binary's node entries, all on loopback.
fn run_on_loopback(spec: &ShuffleSpec, cfg: &NetConfig) -> Result<ShuffleReport, NetError> {
    let ip = |_: usize| "127.0.0.1".to_string();
    run_processes(spec, cfg, &command(), &ip, Duration::from_secs(60), &|_| {})
}

#[test]
fn processes_shuffle_and_clean_up() {
    if std::env::var(ENV).is_ok_and(|v| !v.starts_with(&format!("{}|", std::process::id()))) {
        return; // inside a child
    }
    let me = std::process::id();
    let spec = ShuffleSpec {
        nodes: 3,
        workers: 2,
        tuple_size: 128,
        rows_per_node: 20_000,
        seed: 9,
        chunk: 128 << 10,
        morsel: 1000,
    };
    let cfg: NetConfig = "uring+zc-send".parse().unwrap();
    let json = serde_json::to_string(&spec).unwrap();

    // A full run: the join the nodes report is the reference.
    std::env::set_var(ENV, format!("{me}|{json}|uring+zc-send|none"));
    let r = run_on_loopback(&spec, &cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.join, reference_join(&spec));
    assert_eq!(r.nodes.len(), 3);

    // Node 1 dies mid-shuffle: a typed error about a node, quickly; no child left running.
    for t in ["epoll", "uring"] {
        std::env::set_var(ENV, format!("{me}|{json}|{t}|1"));
        let cfg: NetConfig = t.parse().unwrap();
        let t0 = Instant::now();
        let e = run_on_loopback(&spec, &cfg).expect_err("a dead node must fail the shuffle");
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{t}: {:?}",
            t0.elapsed()
        );
        match &e {
            NetError::Child {
                process: ChildProcess::Node { .. } | ChildProcess::Nodes,
                ..
            } => {}
            other => panic!("{t}: wrong error {other}"),
        }
    }
    std::env::remove_var(ENV);
    // Every child was reaped by the guard: none of our children is left.
    let left = children_of(me);
    assert!(left.is_empty(), "children left: {left:?}");
}

/// The `/proc/PID/stat` lines of the processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<String> {
    let parent = parent.to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|d| d.ok())
        .filter_map(|d| std::fs::read_to_string(d.path().join("stat")).ok())
        .filter(|s| {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().nth(1))
                == Some(&parent)
        })
        .collect()
}
