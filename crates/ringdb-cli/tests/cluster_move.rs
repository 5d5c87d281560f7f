//! Slot migration under load, with crashes: three durable `ringdb serve --cluster` nodes, a
//! writer updating keys through the cluster's redirects (following -MOVED, retrying
//! -TRYAGAIN and refused connections) and recording what was acknowledged, while `ringdb
//! cluster push` moves slot ranges three times, killing with SIGKILL the source during the
//! copy, then the target during the copy, then a source later on (wherever the push is by
//! then). After each kill the node is started again and the push repeated until it succeeds.
//! At the end every key holds its last acknowledged value on the node that serves its slot,
//! and no node keeps a key of a slot it does not serve.

mod common;

use ringdb_server::client::{Client, Value};
use ringdb_server::cluster::slot::key_slot;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEYS: usize = 60_000;

fn start_node(dir: &Path, port: u16) -> common::Server {
    common::start_cluster_node(dir, port).0
}

fn write_topology(path: &Path, ports: &[u16], ranges: [&str; 3]) {
    let text: String = ports
        .iter()
        .zip(ranges)
        .map(|(port, range)| format!("127.0.0.1:{port} {range}\n"))
        .collect();
    std::fs::write(path, text).expect("write the topology");
}

/// Sends one command for `key` wherever the cluster says, following redirects; `None` when
/// it could not be done in time (the key's node stayed down).
fn routed(clients: &mut HashMap<String, Client>, start: &str, command: &[String]) -> Option<Value> {
    let mut address = start.to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if !clients.contains_key(&address) {
            match Client::connect(&address, Duration::from_secs(5)) {
                Ok(client) => drop(clients.insert(address.clone(), client)),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            }
        }
        let reply = clients
            .get_mut(&address)
            .expect("connected")
            .command(command);
        match reply {
            Err(_) => {
                // The node went down with the request: whether it was applied is unknown.
                clients.remove(&address);
                return None;
            }
            Ok(Value::Error(text)) if text.starts_with("MOVED ") => {
                address = text.split(' ').nth(2).expect("an address").to_string();
            }
            Ok(Value::Error(text))
                if text.starts_with("TRYAGAIN") || text.starts_with("CLUSTERDOWN") =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(value) => return Some(value),
        }
    }
    None
}

/// What the writer knows: each key's acknowledged version, and the versions it sent without
/// an answer (any of them may be what the key holds).
#[derive(Default)]
struct Acked {
    versions: Vec<u64>,
    unknown: HashMap<usize, Vec<u64>>,
}

fn writer(start: String, acked: Arc<Mutex<Acked>>, stop: Arc<AtomicBool>) -> u64 {
    let mut clients = HashMap::new();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut writes = 0;
    while !stop.load(Ordering::Relaxed) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let key = (rng % KEYS as u64) as usize;
        let version = acked.lock().unwrap().versions[key] + 1;
        let command = vec![
            "SET".to_string(),
            format!("k{key}"),
            format!("v{key}-{version}"),
        ];
        match routed(&mut clients, &start, &command) {
            Some(Value::Simple(ok)) if ok == "OK" => {
                acked.lock().unwrap().versions[key] = version;
                writes += 1;
            }
            Some(other) => panic!("SET k{key}: {other:?}"),
            None => acked
                .lock()
                .unwrap()
                .unknown
                .entry(key)
                .or_default()
                .push(version),
        }
    }
    writes
}

/// Pushes `file`, killing node `victim` after `kill_after`, then restarts it and pushes again
/// until a push succeeds.
fn push_with_a_kill(
    nodes: &mut [common::Server],
    dirs: &[PathBuf],
    ports: &[u16],
    file: &Path,
    victim: usize,
    kill_after: Duration,
) {
    let file_text = file.to_str().unwrap().to_string();
    let pushing = std::thread::spawn(move || common::ringdb(&["cluster", "push", &file_text]));
    std::thread::sleep(kill_after);
    let _ = nodes[victim].0.kill();
    let _ = nodes[victim].0.wait();
    let first = pushing.join().unwrap();
    eprintln!(
        "push cut by a kill of node {victim} after {kill_after:?}: {}",
        String::from_utf8_lossy(&first.stderr).trim()
    );
    nodes[victim] = start_node(&dirs[victim], ports[victim]);
    for attempt in 0..5 {
        let again = common::ringdb(&["cluster", "push", file.to_str().unwrap()]);
        if again.status.success() {
            eprintln!(
                "push again: {}",
                String::from_utf8_lossy(&again.stderr).trim()
            );
            return;
        }
        eprintln!(
            "push attempt {attempt}: {}",
            String::from_utf8_lossy(&again.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("the push never succeeded after the restart");
}

/// The three moves of the test, each push cut by a kill.
fn three_moves_with_kills(
    nodes: &mut [common::Server],
    dirs: &[PathBuf],
    ports: &[u16],
    file: &Path,
) {
    // Node 0 gives 1000-5460 to node 1 and is killed during the move.
    write_topology(file, ports, ["0-999", "1000-10922", "10923-16383"]);
    push_with_a_kill(nodes, dirs, ports, file, 0, Duration::from_millis(150));
    // Node 2 gives 10923-14000 to node 0, which is killed during the move.
    write_topology(
        file,
        ports,
        ["0-999 10923-14000", "1000-10922", "14001-16383"],
    );
    push_with_a_kill(nodes, dirs, ports, file, 0, Duration::from_millis(100));
    // Node 1 gives 1000-3000 back to node 0 and is killed later: during the copy, the switch
    // or the purge, wherever the push is by then (the test prints where).
    write_topology(
        file,
        ports,
        ["0-3000 10923-14000", "3001-10922", "14001-16383"],
    );
    push_with_a_kill(nodes, dirs, ports, file, 1, Duration::from_millis(450));
}

#[test]
fn slots_move_under_load_and_crashes_of_either_side_lose_nothing() {
    let base = common::tmp("cluster-move");
    let _ = std::fs::remove_dir_all(&base);
    let ports: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let dirs: Vec<PathBuf> = (0..3).map(|i| base.join(format!("node{i}"))).collect();
    let mut nodes: Vec<common::Server> = (0..3).map(|i| start_node(&dirs[i], ports[i])).collect();
    let file = base.join("topology");
    write_topology(&file, &ports, ["0-5460", "5461-10922", "10923-16383"]);
    assert!(common::ringdb(&["cluster", "push", file.to_str().unwrap()])
        .status
        .success());
    let start = format!("127.0.0.1:{}", ports[0]);
    load(&ports, [(0, 5460), (5461, 10922), (10923, 16383)]);
    let acked = Arc::new(Mutex::new(Acked {
        versions: vec![0; KEYS],
        ..Acked::default()
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let writing = {
        let (start, acked, stop) = (start.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || writer(start, acked, stop))
    };
    std::thread::sleep(Duration::from_millis(300));
    three_moves_with_kills(&mut nodes, &dirs, &ports, &file);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let writes = writing.join().unwrap();
    let checked = common::ringdb(&["cluster", "check", file.to_str().unwrap()]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    verify(&start, &ports, &acked.lock().unwrap());
    eprintln!("{writes} acknowledged writes during three moves and three kills");
    drop(nodes);
    let _ = std::fs::remove_dir_all(&base);
}

/// Sets every key to version 0, pipelined to the node that serves it (node `i` serves
/// `initial[i]`).
fn load(ports: &[u16], initial: [(u16, u16); 3]) {
    let mut batches: Vec<Vec<Vec<String>>> = vec![Vec::new(); 3];
    for key in 0..KEYS {
        let slot = key_slot(format!("k{key}").as_bytes());
        let node = initial
            .iter()
            .position(|&(f, l)| (f..=l).contains(&slot))
            .unwrap();
        batches[node].push(vec!["SET".into(), format!("k{key}"), format!("v{key}-0")]);
    }
    for (port, commands) in ports.iter().zip(batches) {
        let mut client =
            Client::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(10)).unwrap();
        for chunk in commands.chunks(1000) {
            let replies = client.pipeline(chunk).unwrap();
            assert!(replies.iter().all(|r| *r == Value::Simple("OK".into())));
        }
    }
}

/// Every key holds its last acknowledged value (or one sent without an answer after it),
/// and the nodes together hold each key once.
fn verify(start: &str, ports: &[u16], acked: &Acked) {
    let mut clients = HashMap::new();
    for key in 0..KEYS {
        let command = vec!["GET".to_string(), format!("k{key}")];
        let value = routed(&mut clients, start, &command).expect("every node is up");
        let held = match value {
            Value::Bulk(bytes) => String::from_utf8(bytes).unwrap(),
            other => panic!(
                "k{key} (slot {}): {other:?}",
                key_slot(format!("k{key}").as_bytes())
            ),
        };
        let version: u64 = held.rsplit('-').next().unwrap().parse().unwrap();
        let allowed = version == acked.versions[key]
            || acked
                .unknown
                .get(&key)
                .is_some_and(|sent| sent.contains(&version) && version > acked.versions[key]);
        assert!(
            allowed,
            "k{key} holds version {version}, acknowledged {}",
            acked.versions[key]
        );
    }
    let total: i64 = ports
        .iter()
        .map(|port| {
            match Client::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(5))
                .unwrap()
                .command(&["DBSIZE"])
                .unwrap()
            {
                Value::Integer(count) => count,
                other => panic!("DBSIZE: {other:?}"),
            }
        })
        .sum();
    assert_eq!(total, KEYS as i64, "each key on one node only");
}
