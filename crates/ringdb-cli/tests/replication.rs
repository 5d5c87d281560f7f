//! Replication by shipping the log (`ringdb serve --replicaof`, `REPLICAOF`, `WAIT`,
//! `--replication sync`): a replica copies its primary, then follows every committed batch;
//! it refuses writes; a replica killed -9 copies again when back; sync mode answers a write
//! only once a replica has it, and refuses writes while none is online; a promoted replica
//! takes writes and its old primary rejoins as its replica; malformed replication requests get
//! errors, and a node without a log refuses to replicate.

mod common;

use ringdb_server::client::{Client, Value};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(10);

fn client(address: &str) -> Client {
    Client::connect(address, TIMEOUT).expect("the node answers")
}

fn command(address: &str, arguments: &[&str]) -> Value {
    client(address).command(arguments).expect("a reply")
}

fn bulk(text: &str) -> Value {
    Value::Bulk(text.as_bytes().to_vec())
}

/// A field of `INFO replication`.
fn info_field(address: &str, field: &str) -> Option<String> {
    let text = command(address, &["INFO", "replication"]).text()?;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(str::to_string)
}

/// Waits (bounded) until `check` holds.
fn wait_until(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the replica at `replica` is synced and has applied all of its primary's stream.
fn wait_caught_up(replica: &str) {
    wait_until("the replica to catch up", || {
        let applied = info_field(replica, "slave_repl_offset");
        info_field(replica, "master_link_status").as_deref() == Some("up")
            && info_field(replica, "master_sync_in_progress").as_deref() == Some("0")
            && applied.is_some()
            && applied == info_field(replica, "master_repl_offset")
    });
}

/// Every key with its type and value as the node at `address` serves them.
fn contents(address: &str) -> Vec<(Vec<u8>, Value)> {
    let mut node = client(address);
    let Value::Array(keys) = node.command(&["KEYS", "*"]).expect("KEYS") else {
        panic!("KEYS: not an array");
    };
    let mut all: Vec<(Vec<u8>, Value)> = keys
        .into_iter()
        .map(|key| {
            let Value::Bulk(key) = key else {
                panic!("a key")
            };
            let kind = node.command(&[&b"TYPE"[..], &key]).expect("TYPE");
            let value = match kind.text().as_deref() {
                Some("hash") => node.command(&[&b"HGETALL"[..], &key]).expect("HGETALL"),
                _ => node.command(&[&b"GET"[..], &key]).expect("GET"),
            };
            (key, value)
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// Writes of every kind the stream carries: strings, a large value (chunks), hashes
/// (fields), expiries, deletions, MSET across shards.
fn write_mix(primary: &str, round: usize) {
    let mut node = client(primary);
    for i in 0..200 {
        let key = format!("k{round}:{i}");
        node.command(&["SET", &key, &format!("v{i}")]).unwrap();
    }
    let large = "x".repeat(300_000 + round);
    node.command(&["SET", &format!("large{round}"), &large])
        .unwrap();
    node.command(&["HSET", &format!("h{round}"), "a", "1", "b", "2", "c", "3"])
        .unwrap();
    node.command(&["HDEL", &format!("h{round}"), "b"]).unwrap();
    node.command(&["DEL", &format!("k{round}:7")]).unwrap();
    node.command(&["SET", &format!("gone{round}"), "x", "PX", "1"])
        .unwrap();
    node.command(&["MSET", "m:a", &round.to_string(), "m:b", "2", "m:c", "3"])
        .unwrap();
}

#[test]
fn a_replica_copies_its_primary_follows_its_log_and_refuses_writes() {
    let dir = common::tmp("replication-follow");
    let _ = std::fs::remove_dir_all(&dir);
    let (_primary, primary_address) = common::serve(&dir.join("primary"));
    let primary = primary_address.to_string();
    write_mix(&primary, 0);
    let replica_port = common::free_port().to_string();
    let replica_flags = ["--port", &replica_port, "--replicaof", &primary];
    let (replica_server, replica_address) =
        common::serve_with(&dir.join("replica"), &replica_flags);
    let replica = replica_address.to_string();
    wait_caught_up(&replica);
    assert_eq!(
        contents(&replica),
        contents(&primary),
        "after the full copy"
    );
    // The replica's link receives by multishot receive into provided buffers where io_uring
    // runs, else by plain reads.
    let uring = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map_or(true, |text| text.trim() == "0");
    let receive = info_field(&replica, "ringdb_replica_receive");
    assert_eq!(
        receive.as_deref(),
        Some(if uring { "multishot" } else { "plain" })
    );
    // The stream: more writes of every kind, then WAIT for the replica's acknowledgement.
    write_mix(&primary, 1);
    assert_eq!(command(&primary, &["WAIT", "1", "5000"]), Value::Integer(1));
    assert_eq!(contents(&replica), contents(&primary), "after the stream");
    assert_eq!(
        command(&replica, &["SET", "k", "v"]),
        Value::Error("READONLY You can't write against a read only replica.".into())
    );
    assert_eq!(
        command(&replica, &["WAIT", "1", "10"]),
        Value::Error("ERR WAIT cannot be used with replica instances.".into())
    );
    let role = command(&replica, &["ROLE"]);
    assert!(matches!(&role, Value::Array(parts) if parts[0] == bulk("slave")));
    // A replica killed -9 takes a full copy again when back, and misses nothing.
    drop(replica_server);
    write_mix(&primary, 2);
    let (_replica, _) = common::serve_with(&dir.join("replica"), &replica_flags);
    wait_caught_up(&replica);
    assert_eq!(contents(&replica), contents(&primary), "after the restart");
    assert_eq!(
        info_field(&replica, "ringdb_full_syncs").as_deref(),
        Some("1")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sync_mode_answers_writes_once_a_replica_has_them() {
    let dir = common::tmp("replication-sync");
    let _ = std::fs::remove_dir_all(&dir);
    let sync_flags = [
        "--port",
        "0",
        "--replication",
        "sync",
        "--repl-sync-timeout-ms",
        "500",
    ];
    let (_primary, primary_address) = common::serve_with(&dir.join("primary"), &sync_flags);
    let primary = primary_address.to_string();
    assert_eq!(
        command(&primary, &["SET", "a", "1"]),
        Value::Error("NOREPLICAS Not enough good replicas to write.".into()),
        "no replica online: refused before anything is written"
    );
    assert_eq!(command(&primary, &["GET", "a"]), Value::Null);
    let replica_flags = ["--port", "0", "--replicaof", &primary];
    let (replica_server, replica_address) =
        common::serve_with(&dir.join("replica"), &replica_flags);
    let replica = replica_address.to_string();
    wait_caught_up(&replica);
    wait_until("the primary to see its replica", || {
        command(&primary, &["SET", "probe", "1"]) == Value::Simple("OK".into())
    });
    // Each acknowledged write is on the replica when its reply arrives.
    let mut writer = client(&primary);
    let mut reader = client(&replica);
    for i in 0..100 {
        let value = format!("v{i}");
        assert_eq!(
            writer.command(&["SET", "a", &value]).unwrap(),
            Value::Simple("OK".into())
        );
        assert_eq!(reader.command(&["GET", "a"]).unwrap(), bulk(&value));
    }
    let reply = writer.command(&["HSET", "h", "f", "v"]).unwrap();
    assert_eq!(reply, Value::Integer(1));
    assert_eq!(reader.command(&["HGET", "h", "f"]).unwrap(), bulk("v"));
    // The replica gone: a write is durable here but not acknowledged as replicated.
    drop(replica_server);
    let reply = writer.command(&["SET", "a", "lost?"]).unwrap();
    assert!(
        matches!(&reply, Value::Error(text) if text.starts_with("NOREPLICAS")),
        "{reply:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_promoted_replica_takes_writes_and_its_old_primary_rejoins_as_its_replica() {
    let dir = common::tmp("replication-promote");
    let _ = std::fs::remove_dir_all(&dir);
    let old_port = common::free_port().to_string();
    let (old_server, old_address) = common::serve_with(&dir.join("a"), &["--port", &old_port]);
    let old = old_address.to_string();
    write_mix(&old, 0);
    let (_new_server, new_address) = common::serve_with(&dir.join("b"), &["--port", "0"]);
    let new = new_address.to_string();
    let (host, port) = old.rsplit_once(':').unwrap();
    assert_eq!(
        command(&new, &["REPLICAOF", host, port]),
        Value::Simple("OK".into())
    );
    wait_caught_up(&new);
    // The old primary dies; the replica is promoted and takes writes.
    drop(old_server);
    assert_eq!(
        command(&new, &["REPLICAOF", "NO", "ONE"]),
        Value::Simple("OK".into())
    );
    write_mix(&new, 1);
    // Back, the old primary has only its own data until it follows the new one.
    let (_old_server, _) = common::serve_with(&dir.join("a"), &["--port", &old_port]);
    assert_eq!(command(&old, &["GET", "k1:0"]), Value::Null);
    let (host, port) = new.rsplit_once(':').unwrap();
    assert_eq!(
        command(&old, &["REPLICAOF", host, port]),
        Value::Simple("OK".into())
    );
    wait_caught_up(&old);
    assert_eq!(contents(&old), contents(&new));
    assert_eq!(command(&old, &["GET", "k1:0"]), bulk("v0"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn malformed_replication_requests_get_errors_and_no_log_means_no_replication() {
    let dir = common::tmp("replication-bad");
    let _ = std::fs::remove_dir_all(&dir);
    let (_server, address) = common::serve(&dir.join("node"));
    let node = address.to_string();
    let (host, port) = node.rsplit_once(':').unwrap();
    let error = |arguments: &[&str]| match command(&node, arguments) {
        Value::Error(text) => text,
        other => panic!("{arguments:?}: {other:?}"),
    };
    assert!(error(&["REPLICAOF", "127.0.0.1", "0"]).contains("port"));
    assert!(error(&["REPLICAOF", "127.0.0.1", "x"]).contains("port"));
    assert!(error(&["REPLICAOF", host, port]).contains("itself"));
    assert!(error(&["REPLSYNC", "me:1", "9", "?", "0"]).contains("shard count"));
    assert!(error(&["REPLFETCH", "me:1", "nope", "0", "10", "0"]).starts_with("RESYNC"));
    assert!(error(&["REPLFETCH", "me:1", "x", "-1", "10", "0"]).contains("integer"));
    assert!(error(&["REPLSCAN", "9", "first", "", "10"]).contains("table"));
    assert!(error(&["REPLSCAN", "0", "sideways", "", "10"]).contains("syntax"));
    assert!(error(&["WAIT", "1"]).contains("wrong number"));
    assert!(error(&["WAIT", "-1", "0"]).contains("negative"));
    // A full sync's stream, then a fetch far past its end: the replica must copy again.
    let Value::Array(synced) = command(&node, &["REPLSYNC", "me:1", "2", "?", "0"]) else {
        panic!("REPLSYNC");
    };
    let stream = synced[1].text().unwrap();
    assert_eq!(synced[0], Value::Simple("FULL".into()));
    // A replica that comes back with a position the backlog holds continues from it.
    let again = command(&node, &["REPLSYNC", "me:1", "2", &stream, "0"]);
    assert!(matches!(&again, Value::Array(parts) if parts[0] == Value::Simple("CONTINUE".into())));
    let far = ["REPLFETCH", "me:1", &stream, "999999999", "10", "0"];
    assert!(error(&far).starts_with("RESYNC"));
    // The fetch past the end acknowledged nothing: the only replica seen is the one that
    // synced at offset 0, the stream's end.
    assert_eq!(command(&node, &["WAIT", "0", "10"]), Value::Integer(1));
    // Without a log there is nothing to ship: refused at start, with the reason.
    let out = common::ringdb(&[
        "serve",
        "--db",
        dir.join("unlogged").to_str().unwrap(),
        "--port",
        "0",
        "--durability",
        "off",
        "--direct",
        "0",
        "--replicaof",
        &node,
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("replication needs a log"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
