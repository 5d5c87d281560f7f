//! `ringdb serve --cluster` and `ringdb cluster`: three nodes on loopback take a topology from
//! the controller and redirect what they do not serve as Redis Cluster does; the controller
//! refuses a topology with a slot served twice or by nobody, and moves the keys of slots that
//! change nodes; a node refuses an older epoch and keeps its topology across a kill;
//! redis-py's `RedisCluster` works against the cluster and against a standalone server (which
//! answers as one node owning every slot).

mod common;

use ringdb_server::client::{Client, Value};
use ringdb_server::cluster::slot::key_slot;
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

fn client(address: &str) -> Client {
    Client::connect(address, TIMEOUT).expect("the node answers")
}

fn command(address: &str, arguments: &[&str]) -> Value {
    client(address).command(arguments).expect("a reply")
}

/// The slot ranges of three nodes, and the file naming them.
fn topology_file(dir: &Path, ports: &[u16], ranges: [&str; 3], name: &str) -> String {
    let text: String = ports
        .iter()
        .zip(ranges)
        .map(|(port, range)| format!("127.0.0.1:{port} {range}\n"))
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, format!("# three nodes\n{text}")).expect("write the topology");
    path.to_str().expect("a UTF-8 path").to_string()
}

/// Which node serves `slot` under `ranges` (first-last, one range each).
fn owner(slot: u16, ranges: [&str; 3]) -> usize {
    ranges
        .iter()
        .position(|range| {
            let (first, last) = range.split_once('-').expect("first-last");
            (first.parse().unwrap()..=last.parse().unwrap()).contains(&slot)
        })
        .expect("every slot is served")
}

const RANGES: [&str; 3] = ["0-5460", "5461-10922", "10923-16383"];

#[test]
fn three_nodes_take_a_pushed_topology_and_redirect_as_redis_cluster_does() {
    let dir = common::tmp("cluster-three");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ports: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let mut nodes: Vec<_> = (0..3)
        .map(|i| common::start_cluster_node(&dir.join(format!("node{i}")), ports[i]))
        .collect();
    let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    // Before a topology: nothing is served.
    let refused = command(&addresses[0], &["SET", "foo", "bar"]);
    assert_eq!(
        refused,
        Value::Error("CLUSTERDOWN Hash slot not served".into())
    );
    refuses_bad_topologies(&dir, &ports);
    let file = topology_file(&dir, &ports, RANGES, "good");
    let pushed = common::ringdb(&["cluster", "push", &file]);
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let checked = common::ringdb(&["cluster", "check", &file]);
    assert!(String::from_utf8_lossy(&checked.stdout).contains("ok: 3 node(s) at epoch 1"));
    malformed_cluster_requests_get_errors(&addresses[0]);
    shows_and_plans_without_changing(&dir, &ports, &addresses);
    redirects_and_serves(&addresses);
    cross_slot_requests_are_refused(&addresses);
    epochs_only_go_forward(&dir, &ports, &addresses);
    // A node killed and started again keeps its id and topology.
    let id = command(&addresses[2], &["CLUSTER", "MYID"]);
    drop(nodes.pop());
    nodes.push(common::start_cluster_node(&dir.join("node2"), ports[2]));
    assert_eq!(command(&addresses[2], &["CLUSTER", "MYID"]), id);
    assert_eq!(
        command(&addresses[2], &["CLUSTERX", "VERSION"]),
        Value::Integer(2)
    );
    let checked = common::ringdb(&["cluster", "check", &dir.join("swapped").to_string_lossy()]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}

fn refuses_bad_topologies(dir: &Path, ports: &[u16]) {
    let gap = topology_file(dir, ports, ["0-5460", "5461-10922", "10924-16383"], "gap");
    common::assert_refused(
        &common::ringdb(&["cluster", "push", &gap]),
        "slot 10923 is assigned to no node",
    );
    let overlap = topology_file(
        dir,
        ports,
        ["0-5461", "5461-10922", "10923-16383"],
        "overlap",
    );
    common::assert_refused(
        &common::ringdb(&["cluster", "push", &overlap]),
        "slot 5461 is assigned to two nodes",
    );
}

/// `ringdb cluster show` prints the topology as a file `push` takes; `push --dry-run` prints
/// the moves and changes nothing.
fn shows_and_plans_without_changing(dir: &Path, ports: &[u16], addresses: &[String]) {
    let shown = common::ringdb(&["cluster", "show", &addresses[1]]);
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    for (address, range) in addresses.iter().zip(RANGES) {
        assert!(text.contains(&format!("{address} {range}\n")), "{text}");
    }
    let file = topology_file(dir, ports, ["0-99", "100-10922", "10923-16383"], "planned");
    let planned = common::ringdb(&["cluster", "push", "--dry-run", &file]);
    let printed = String::from_utf8_lossy(&planned.stdout);
    let expected = format!(
        "would move slots 100-5460 from {} to {}",
        addresses[0], addresses[1]
    );
    assert!(printed.contains(&expected), "{printed}");
    assert_eq!(
        command(&addresses[0], &["CLUSTERX", "VERSION"]),
        Value::Integer(1)
    );
}

/// Bad CLUSTER and CLUSTERX requests get error replies, and the node goes on serving.
fn malformed_cluster_requests_get_errors(node: &str) {
    let cases: &[(&[&str], &str)] = &[
        (&["CLUSTER", "COUNTKEYSINSLOT", "16384"], "ERR Invalid slot"),
        (
            &["CLUSTER", "GETKEYSINSLOT", "1", "-5"],
            "ERR Invalid number of keys",
        ),
        (
            &["CLUSTER", "KEYSLOT"],
            "ERR wrong number of arguments for 'cluster|keyslot'",
        ),
        (&["CLUSTER", "NOPE"], "ERR unknown subcommand 'NOPE'"),
        (
            &["CLUSTERX", "SETNODES", "garbage", "9"],
            "ERR 'garbage': a node is",
        ),
        (
            &["CLUSTERX", "SETNODES", "", "x"],
            "ERR the epoch is a positive integer",
        ),
        (
            &["CLUSTERX", "MIGRATE", "127.0.0.1:1", "20000"],
            "ERR '20000': slots are 0 to 16383",
        ),
        (
            &["CLUSTERX", "MIGRATE", "127.0.0.1:1", "16000"],
            "ERR slot 16000 is not served by this node",
        ),
        (
            &["CLUSTERX", "MIGRATE", "127.0.0.1:1", "0-10"],
            "ERR slot migration to 127.0.0.1:1 failed",
        ),
        (
            &["CLUSTERX", "PURGE", "0-10"],
            "ERR slot 0 is served by this node",
        ),
    ];
    for (request, expected) in cases {
        match command(node, request) {
            Value::Error(text) => assert!(text.starts_with(expected), "{request:?}: {text}"),
            other => panic!("{request:?}: {other:?}"),
        }
    }
    assert_eq!(
        command(node, &["SET", "{k0}x", "1"]),
        command(node, &["SET", "{k0}x", "1"])
    );
    assert_eq!(command(node, &["PING"]), Value::Simple("PONG".into()));
}

/// Every key set through node 0, following -MOVED, lands on its slot's owner.
fn redirects_and_serves(addresses: &[String]) {
    let mut first = client(&addresses[0]);
    let mut moved = 0;
    for i in 0..300 {
        let key = format!("key:{i}");
        let slot = key_slot(key.as_bytes());
        let owner = owner(slot, RANGES);
        match first.command(&["SET", &key, &i.to_string()]).unwrap() {
            Value::Simple(ok) if ok == "OK" => assert_eq!(owner, 0, "{key} set on node 0"),
            Value::Error(text) => {
                assert_eq!(text, format!("MOVED {slot} {}", addresses[owner]));
                moved += 1;
                let reply = command(&addresses[owner], &["SET", &key, &i.to_string()]);
                assert_eq!(reply, Value::Simple("OK".into()));
            }
            other => panic!("SET {key}: {other:?}"),
        }
        let read = command(&addresses[owner], &["GET", &key]);
        assert_eq!(read, Value::Bulk(i.to_string().into_bytes()));
    }
    assert!((150..250).contains(&moved), "{moved} of 300 keys moved");
    let slot = key_slot(b"key:7");
    let counted = command(
        &addresses[owner(slot, RANGES)],
        &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
    );
    assert_eq!(counted, Value::Integer(1));
}

/// Keys of two slots in one request (or one transaction) are refused; a hash tag joins them.
fn cross_slot_requests_are_refused(addresses: &[String]) {
    let here: Vec<String> = (0..10_000)
        .map(|i| format!("k{i}"))
        .filter(|key| owner(key_slot(key.as_bytes()), RANGES) == 0)
        .take(2)
        .collect();
    assert_ne!(key_slot(here[0].as_bytes()), key_slot(here[1].as_bytes()));
    let cross = Value::Error("CROSSSLOT Keys in request don't hash to the same slot".into());
    let node = &addresses[0];
    assert_eq!(
        command(node, &["MSET", &here[0], "1", &here[1], "2"]),
        cross
    );
    assert_eq!(command(node, &["DEL", &here[0], &here[1]]), cross);
    let tagged = command(node, &["MSET", "{k1}a", "1", "{k1}b", "2"]);
    let tag_owner = owner(key_slot(b"k1"), RANGES);
    match tag_owner {
        0 => assert_eq!(tagged, Value::Simple("OK".into())),
        _ => assert!(matches!(tagged, Value::Error(ref t) if t.starts_with("MOVED"))),
    }
    let mut transaction = client(node);
    transaction.command(&["MULTI"]).unwrap();
    transaction.command(&["SET", &here[0], "a"]).unwrap();
    transaction.command(&["SET", &here[1], "b"]).unwrap();
    assert_eq!(transaction.command(&["EXEC"]).unwrap(), cross);
    assert_eq!(command(node, &["GET", &here[0]]), Value::Null);
}

/// A node refuses an older epoch, and the controller refuses to move slots unless forced.
fn epochs_only_go_forward(dir: &Path, ports: &[u16], addresses: &[String]) {
    let older = command(&addresses[1], &["CLUSTERX", "SETNODES", "", "1"]);
    assert!(
        matches!(older, Value::Error(ref t) if t.contains("another topology")),
        "{older:?}"
    );
    // Two nodes swap their slots: every key moves, and keeps its value.
    let swapped = ["5461-10922", "0-5460", "10923-16383"];
    let file = topology_file(dir, ports, swapped, "swapped");
    let pushed = common::ringdb(&["cluster", "push", &file]);
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    for i in 0..300 {
        let key = format!("key:{i}");
        let owner = owner(key_slot(key.as_bytes()), swapped);
        let read = command(&addresses[owner], &["GET", &key]);
        assert_eq!(read, Value::Bulk(i.to_string().into_bytes()), "{key}");
    }
    let held: Vec<Value> = addresses.iter().map(|a| command(a, &["DBSIZE"])).collect();
    let total: i64 = held
        .iter()
        .map(|v| if let Value::Integer(n) = v { *n } else { 0 })
        .sum();
    // The tagged MSET above was run on node 0: it wrote two keys only if node 0 served them.
    let tagged = if owner(key_slot(b"k1"), RANGES) == 0 {
        2
    } else {
        0
    };
    assert_eq!(total, 300 + tagged, "each key on one node only: {held:?}");
    let stale = command(&addresses[0], &["CLUSTERX", "SETNODES", "", "1"]);
    assert!(
        matches!(stale, Value::Error(ref t) if t.contains("older")),
        "{stale:?}"
    );
    let slot = key_slot(b"key:7");
    let expected = format!("MOVED {slot} {}", addresses[owner(slot, swapped)]);
    let wrong = (0..3).find(|&n| n != owner(slot, swapped)).unwrap();
    assert_eq!(
        command(&addresses[wrong], &["GET", "key:7"]),
        Value::Error(expected)
    );
}

fn redis_py_missing() -> Option<String> {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .output();
    match probe {
        Err(error) => Some(format!("python3 cannot run: {error}")),
        Ok(output) if !output.status.success() => Some("python3 has no redis package".into()),
        Ok(_) => None,
    }
}

/// Whether redis-py is missing here (and may be: `RINGDB_REQUIRE_REDIS_PY` says it must not),
/// said with the reason.
fn redis_py_skipped() -> bool {
    let Some(reason) = redis_py_missing() else {
        return false;
    };
    let required = std::env::var_os("RINGDB_REQUIRE_REDIS_PY").is_some();
    assert!(!required, "redis-py is required here: {reason}");
    eprintln!("SKIP: {reason}");
    true
}

#[test]
fn redis_py_cluster_client_works_against_a_cluster_and_a_standalone_server() {
    if redis_py_skipped() {
        return;
    }
    let dir = common::tmp("cluster-redis-py");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ports: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let nodes: Vec<_> = (0..3)
        .map(|i| common::start_cluster_node(&dir.join(format!("node{i}")), ports[i]))
        .collect();
    let file = topology_file(&dir, &ports, RANGES, "topology");
    assert!(common::ringdb(&["cluster", "push", &file]).status.success());
    let (standalone, address) = common::serve(&dir.join("standalone"));
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/redis_py/test_cluster.py"
    );
    let output = std::process::Command::new("python3")
        .arg(script)
        .args(ports.iter().map(u16::to_string))
        .arg(address.port().to_string())
        .arg(common::ringdb_bin())
        .arg(topology_file(
            &dir,
            &ports,
            ["0-1999", "2000-10922", "10923-16383"],
            "moved",
        ))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprint!("{stdout}");
    assert!(
        output.status.success() && stdout.contains("cluster: every check passed"),
        "redis-py cluster checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    drop((nodes, standalone));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Six ports free now, below the kernel's ephemeral range (a killed node's port must not be
/// taken by a client's outgoing connection before the node comes back on it).
fn fixed_ports() -> Vec<u16> {
    let mut ports = Vec::new();
    let mut candidate = 21_000 + (std::process::id() % 5_000) as u16;
    // Each pass tries one port; 10,000 candidates hold six free ones on any test machine.
    for _ in 0..10_000 {
        candidate = 21_000 + (candidate - 21_000 + 7) % 11_000;
        if std::net::TcpListener::bind(("127.0.0.1", candidate)).is_ok() {
            ports.push(candidate);
        }
        if ports.len() == 6 {
            return ports;
        }
    }
    panic!("no six free ports below the ephemeral range");
}

/// The must-show of replication in a cluster: three primaries with a replica each, redis-py
/// writers with an acknowledgement log while a slot range moves, a primary is killed -9 and
/// its replica promoted, and the old primary rejoins as a replica. Sync mode loses no
/// acknowledged write; async mode reports what it lost.
#[test]
fn redis_py_writes_survive_a_slot_move_and_a_failover_in_both_replication_modes() {
    if redis_py_skipped() {
        return;
    }
    for mode in ["sync", "async"] {
        let dir = common::tmp(&format!("cluster-failover-{mode}"));
        let _ = std::fs::remove_dir_all(&dir);
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/redis_py/test_failover.py"
        );
        let output = std::process::Command::new("python3")
            .arg(script)
            .arg(common::ringdb_bin())
            .arg(&dir)
            .arg(mode)
            .args(fixed_ports().iter().map(u16::to_string))
            .output()
            .expect("python3 runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        eprint!("{stdout}");
        assert!(
            output.status.success() && stdout.contains("failover: every check passed"),
            "the {mode} failover failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
