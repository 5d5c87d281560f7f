//! MULTI/EXEC, WATCH and MSETNX across shards under concurrent clients: transactions are
//! isolated (no reader sees half of a transfer), optimistic increments under WATCH lose no
//! update, MSETNX has one winner, and a connection that closes in the middle of its
//! transactions leaves no key locked.

use ringdb::{Db, Durability, Options};
use ringdb_server::client::{Client, Value};
use ringdb_server::{Server, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

const SHARDS: usize = 4;

fn start(name: &str) -> (Server, SocketAddr, Db) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("transactions-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = Options {
        fresh: true,
        direct: false,
        durability: Durability::Fdatasync,
        ..Options::default()
    };
    let db = Db::builder(&dir)
        .options(options)
        .shards(SHARDS)
        .open()
        .expect("open");
    let config = ServerConfig {
        listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..ServerConfig::default()
    };
    let server = Server::start(db.clone(), config).expect("server starts");
    let address = server.local_address().expect("bound");
    (server, address, db)
}

fn connect(address: SocketAddr) -> Client {
    Client::connect(&address.to_string(), Duration::from_secs(30)).expect("connect")
}

/// INFO says no key is watched: EXEC, UNWATCH and closed connections unregistered theirs.
fn assert_nothing_watched(client: &mut Client) {
    let info = client
        .command(&["INFO", "clients"])
        .unwrap()
        .text()
        .unwrap();
    assert!(info.contains("total_watched_keys:0"), "{info}");
}

fn words(command: &[&str]) -> Vec<Vec<u8>> {
    command.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn integer(value: &Value) -> i64 {
    match value {
        Value::Integer(n) => *n,
        Value::Bulk(bytes) => String::from_utf8_lossy(bytes).parse().expect("a number"),
        other => panic!("not a number: {other:?}"),
    }
}

/// `count` keys (a multiple of the shard count) spread evenly over every shard.
fn keys_on_every_shard(db: &Db, prefix: &str, count: usize) -> Vec<String> {
    let mut keys = Vec::with_capacity(count);
    let mut per_shard = [0usize; SHARDS];
    // Bounded: a key lands on each shard about once in SHARDS tries.
    for candidate in (0..count * 64).map(|i| format!("{prefix}{i}")) {
        let shard = db.shard_of(candidate.as_bytes());
        if per_shard[shard] < count / SHARDS {
            per_shard[shard] += 1;
            keys.push(candidate);
        }
    }
    assert_eq!(keys.len(), count, "the keys span every shard evenly");
    keys
}

#[test]
fn transfers_in_exec_across_shards_are_never_seen_half_done() {
    let (server, address, db) = start("isolated");
    let accounts = keys_on_every_shard(&db, "account-", 8);
    let mut setup = connect(address);
    for account in &accounts {
        setup.command(&["SET", account, "1000"]).unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let accounts = accounts.clone();
            std::thread::spawn(move || {
                let mut client = connect(address);
                for round in 0..150 {
                    let from = &accounts[(writer + round) % accounts.len()];
                    let to = &accounts[(writer * 3 + round * 5 + 1) % accounts.len()];
                    let replies = client
                        .pipeline(&[
                            words(&["MULTI"]),
                            words(&["DECRBY", from, "7"]),
                            words(&["INCRBY", to, "7"]),
                            words(&["EXEC"]),
                        ])
                        .unwrap();
                    assert!(matches!(&replies[3], Value::Array(items) if items.len() == 2));
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (accounts, stop) = (accounts.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut client = connect(address);
                let mut reads = 0;
                let mget: Vec<&str> = std::iter::once("MGET")
                    .chain(accounts.iter().map(String::as_str))
                    .collect();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads < 10 {
                    let replies = client
                        .pipeline(&[words(&["MULTI"]), words(&mget), words(&["EXEC"])])
                        .unwrap();
                    let Value::Array(items) = &replies[2] else {
                        panic!("EXEC: {:?}", replies[2]);
                    };
                    let Value::Array(balances) = &items[0] else {
                        panic!("MGET: {:?}", items[0]);
                    };
                    let sum: i64 = balances.iter().map(integer).sum();
                    assert_eq!(sum, 8000, "a transaction saw half of a transfer");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(reads >= 20);
    let total: i64 = accounts
        .iter()
        .map(|a| integer(&setup.command(&["GET", a]).unwrap()))
        .sum();
    assert_eq!(total, 8000);
    server.shutdown();
    server.wait().expect("stops");
}

/// One optimistic increment of `keys` (WATCH, GET, MULTI, SET, EXEC), retried until EXEC
/// runs; returns the retries.
fn increment_watched(client: &mut Client, keys: &[&str]) -> usize {
    for retry in 0..10_000 {
        let mut watch = vec!["WATCH"];
        watch.extend_from_slice(keys);
        assert_eq!(client.command(&watch).unwrap(), Value::Simple("OK".into()));
        let mut commands = vec![words(&["MULTI"])];
        for key in keys {
            let current = match client.command(&["GET", key]).unwrap() {
                Value::Null => 0,
                value => integer(&value),
            };
            commands.push(words(&["SET", key, &(current + 1).to_string()]));
        }
        commands.push(words(&["EXEC"]));
        let replies = client.pipeline(&commands).unwrap();
        match replies.last().unwrap() {
            Value::Null => continue,
            Value::Array(items) => {
                assert_eq!(items.len(), keys.len());
                return retry;
            }
            other => panic!("EXEC: {other:?}"),
        }
    }
    panic!("an increment never got through");
}

#[test]
fn watched_increments_from_many_clients_lose_no_update() {
    let (server, address, db) = start("watch");
    let pair = keys_on_every_shard(&db, "counter-", 16);
    let (first, second) = (
        pair[0].clone(),
        pair.iter()
            .find(|k| db.shard_of(k.as_bytes()) != db.shard_of(pair[0].as_bytes()))
            .unwrap()
            .clone(),
    );
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let (first, second) = (first.clone(), second.clone());
            std::thread::spawn(move || {
                let mut client = connect(address);
                (0..40)
                    .map(|_| increment_watched(&mut client, &[&first, &second]))
                    .sum::<usize>()
            })
        })
        .collect();
    let retries: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    let mut client = connect(address);
    assert_eq!(integer(&client.command(&["GET", &first]).unwrap()), 240);
    assert_eq!(integer(&client.command(&["GET", &second]).unwrap()), 240);
    assert!(retries > 0, "six clients on two keys conflict at times");
    // Watched keys are unregistered by EXEC, UNWATCH and a closed connection.
    assert_nothing_watched(&mut client);
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn racing_msetnx_across_shards_has_one_winner_and_never_mixes_values() {
    let (server, address, db) = start("msetnx");
    for round in 0..20 {
        let keys = keys_on_every_shard(&db, &format!("nx-{round}-"), 12);
        let racers: Vec<_> = (0..4)
            .map(|racer| {
                let keys = keys.clone();
                std::thread::spawn(move || {
                    let mut command = vec!["MSETNX".to_string()];
                    for key in &keys {
                        command.push(key.clone());
                        command.push(format!("racer-{racer}"));
                    }
                    integer(&connect(address).command(&command).unwrap())
                })
            })
            .collect();
        let won: i64 = racers.into_iter().map(|r| r.join().unwrap()).sum();
        assert_eq!(won, 1, "round {round}: exactly one MSETNX wins");
        let mut mget = vec!["MGET".to_string()];
        mget.extend(keys.iter().cloned());
        let Value::Array(values) = connect(address).command(&mget).unwrap() else {
            panic!("MGET");
        };
        let first = &values[0];
        assert!(
            values.iter().all(|v| v == first),
            "round {round}: {values:?}"
        );
    }
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn connections_closed_in_the_middle_of_transactions_leave_no_key_locked() {
    let (server, address, db) = start("abandoned");
    let keys = keys_on_every_shard(&db, "held-", 400);
    for _ in 0..40 {
        let mut client = connect(address);
        let mut wire = Vec::new();
        for command in [
            vec!["MULTI"],
            vec!["SET", &keys[0], "1"],
            vec!["SET", &keys[1], "1"],
        ] {
            wire.push(words(&command));
        }
        let mut mset = vec!["MSET".to_string()];
        for key in &keys {
            mset.push(key.clone());
            mset.push("x".into());
        }
        let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
        wire.push(words(&mset));
        wire.push(words(&["EXEC"]));
        wire.push(words(&mset));
        // Sent whole, then the connection is dropped without reading a reply.
        let mut raw = std::net::TcpStream::connect(address).unwrap();
        let bytes: Vec<u8> = wire
            .iter()
            .flat_map(|command| {
                let mut out = format!("*{}\r\n", command.len()).into_bytes();
                for word in command {
                    out.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
                    out.extend_from_slice(word);
                    out.extend_from_slice(b"\r\n");
                }
                out
            })
            .collect();
        std::io::Write::write_all(&mut raw, &bytes).unwrap();
        drop(raw);
        client.command(&["PING"]).unwrap();
    }
    // Every key can still be written, and quickly.
    let mut client = connect(address);
    client.set_timeout(Duration::from_secs(10)).unwrap();
    for key in &keys {
        assert_eq!(
            client.command(&["SET", key, "done"]).unwrap(),
            Value::Simple("OK".into())
        );
    }
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn watch_refusals_are_redis_errors_and_leave_nothing_registered() {
    let (server, address, _db) = start("refusals");
    let mut client = connect(address);
    // WATCH inside MULTI is refused, and the transaction still runs.
    let replies = client
        .pipeline(&[
            words(&["MULTI"]),
            words(&["WATCH", "a"]),
            words(&["SET", "a", "1"]),
            words(&["EXEC"]),
        ])
        .unwrap();
    assert_eq!(
        replies[1],
        Value::Error("ERR WATCH inside MULTI is not allowed".into())
    );
    assert_eq!(replies[3], Value::Array(vec![Value::Simple("OK".into())]));
    // Past the bound on watched keys: refused whole, nothing registered.
    let mut watch = vec!["WATCH".to_string()];
    watch.extend((0..16 * 1024 + 1).map(|i| format!("key-{i}")));
    let refused = client.command(&watch).unwrap();
    assert!(
        matches!(&refused, Value::Error(text) if text.contains("at most")),
        "{refused:?}"
    );
    assert_nothing_watched(&mut client);
    // UNWATCH and EXEC without MULTI answer as Redis does; a watch survives neither.
    assert_eq!(
        client.command(&["WATCH", "a"]).unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        client.command(&["UNWATCH"]).unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        client.command(&["EXEC"]).unwrap(),
        Value::Error("ERR EXEC without MULTI".into())
    );
    assert_nothing_watched(&mut client);
    server.shutdown();
    server.wait().expect("stops");
}
