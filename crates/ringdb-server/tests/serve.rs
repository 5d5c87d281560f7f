//! The server end to end over real sockets: RESP in, replies out, in order, through pipelines,
//! transactions, bad input and a restart.

use ringdb::{Db, Durability, Options};
use ringdb_server::{NetworkSettings, Placement, Server, ServerConfig, TransportKind};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

fn temp_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn open(dir: &PathBuf, fresh: bool) -> Db {
    let options = Options {
        fresh,
        direct: false,
        durability: Durability::Fdatasync,
        ..Options::default()
    };
    Db::builder(dir)
        .options(options)
        .shards(2)
        .open()
        .expect("open")
}

fn start(db: Db, password: Option<&str>) -> (Server, SocketAddr) {
    let config = ServerConfig {
        password: password.map(str::to_string),
        max_clients: 64,
        ..local_config()
    };
    start_with(db, config)
}

fn local_config() -> ServerConfig {
    ServerConfig {
        listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..ServerConfig::default()
    }
}

fn start_with(db: Db, config: ServerConfig) -> (Server, SocketAddr) {
    let server = Server::start(db, config).expect("server starts");
    let address = server.local_address().expect("bound");
    (server, address)
}

fn encode(words: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        out.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
    }
    out
}

struct Client {
    stream: TcpStream,
}

impl Client {
    fn connect(address: SocketAddr) -> Client {
        let stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client { stream }
    }

    /// Sends `commands` in one write, then reads until `expected` arrived whole.
    fn exchange(&mut self, commands: &[&[&str]], expected: &str) {
        let wire: Vec<u8> = commands.iter().flat_map(|c| encode(c)).collect();
        self.stream.write_all(&wire).unwrap();
        let mut got = Vec::new();
        let mut buffer = [0u8; 4096];
        while got.len() < expected.len() {
            let n = self.stream.read(&mut buffer).expect("reply");
            assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buffer[..n]);
        }
        assert_eq!(String::from_utf8_lossy(&got), expected);
    }
}

#[test]
fn strings_keys_and_expiry_answer_as_redis_does() {
    let dir = temp_dir("strings");
    let (server, address) = start(open(&dir, true), None);
    let mut client = Client::connect(address);
    client.exchange(&[&["PING"]], "+PONG\r\n");
    client.exchange(
        &[
            &["SET", "a", "1"],
            &["INCRBY", "a", "41"],
            &["GET", "a"],
            &["GET", "missing"],
        ],
        "+OK\r\n:42\r\n$2\r\n42\r\n$-1\r\n",
    );
    client.exchange(
        &[
            &["SET", "a", "x", "NX"],
            &["SET", "b", "v", "XX"],
            &["APPEND", "a", "!"],
            &["STRLEN", "a"],
        ],
        "$-1\r\n$-1\r\n:3\r\n:3\r\n",
    );
    client.exchange(
        &[
            &["INCR", "a"],
            &["SET", "t", "v", "PX", "60000"],
            &["TTL", "t"],
            &["PERSIST", "t"],
            &["TTL", "t"],
        ],
        "-ERR value is not an integer or out of range\r\n+OK\r\n:60\r\n:1\r\n:-1\r\n",
    );
    client.exchange(&[&["SET", "gone", "v", "PX", "1"]], "+OK\r\n");
    std::thread::sleep(Duration::from_millis(20));
    client.exchange(
        &[&["GET", "gone"], &["EXISTS", "gone", "a", "t"]],
        "$-1\r\n:2\r\n",
    );
    client.exchange(
        &[
            &["MSET", "k1", "v1", "k2", "v2", "k3", "v3"],
            &["MGET", "k1", "k2", "nope", "k3"],
            &["DEL", "k1", "k2", "nope"],
        ],
        "+OK\r\n*4\r\n$2\r\nv1\r\n$2\r\nv2\r\n$-1\r\n$2\r\nv3\r\n:2\r\n",
    );
    client.exchange(
        &[&["GET"]],
        "-ERR wrong number of arguments for 'get' command\r\n",
    );
    client.exchange(&[&["DBSIZE"]], ":3\r\n");
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn a_long_pipeline_of_writes_and_reads_keeps_request_order_across_shards() {
    let dir = temp_dir("pipeline");
    let (server, address) = start(open(&dir, true), None);
    pipeline_across_shards(address);
    server.shutdown();
    server.wait().expect("stops");
}

/// 600 commands in one write, on keys of both shards: the replies come in request order.
fn pipeline_across_shards(address: SocketAddr) {
    let mut client = Client::connect(address);
    let keys: Vec<String> = (0..200).map(|i| format!("key:{i}")).collect();
    let mut commands: Vec<Vec<&str>> = Vec::new();
    let mut expected = String::new();
    for key in &keys {
        commands.push(vec!["INCR", key]);
        commands.push(vec!["INCR", key]);
        commands.push(vec!["GET", key]);
        expected.push_str(":1\r\n:2\r\n$1\r\n2\r\n");
    }
    let refs: Vec<&[&str]> = commands.iter().map(Vec::as_slice).collect();
    client.exchange(&refs, &expected);
}

#[test]
fn concurrent_increments_from_many_clients_are_never_lost() {
    let dir = temp_dir("incr");
    let (server, address) = start(open(&dir, true), None);
    increments_from_eight_clients(address, "counter");
    server.shutdown();
    server.wait().expect("stops");
}

/// 8 clients INCR `key` 50 times each, one at a time: it ends at 400.
fn increments_from_eight_clients(address: SocketAddr, key: &'static str) {
    let clients: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let mut client = Client::connect(address);
                for _ in 0..50 {
                    let wire = encode(&["INCR", key]);
                    client.stream.write_all(&wire).unwrap();
                    let mut buffer = [0u8; 64];
                    let n = client.stream.read(&mut buffer).unwrap();
                    assert!(buffer[..n].starts_with(b":"));
                }
            })
        })
        .collect();
    clients.into_iter().for_each(|c| c.join().unwrap());
    let mut client = Client::connect(address);
    client.exchange(&[&["GET", key]], "$3\r\n400\r\n");
}

#[test]
fn transactions_auth_and_resp3_follow_redis() {
    let dir = temp_dir("session");
    let (server, address) = start(open(&dir, true), Some("secret"));
    let mut client = Client::connect(address);
    client.exchange(&[&["GET", "a"]], "-NOAUTH Authentication required.\r\n");
    client.exchange(
        &[&["AUTH", "wrong"]],
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    client.exchange(&[&["AUTH", "secret"]], "+OK\r\n");
    client.exchange(
        &[&["MULTI"], &["SET", "x", "1"], &["INCR", "x"], &["EXEC"]],
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:2\r\n",
    );
    client.exchange(
        &[&["MULTI"], &["GET"], &["EXEC"]],
        "+OK\r\n-ERR wrong number of arguments for 'get' command\r\n-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    client.exchange(&[&["EXEC"]], "-ERR EXEC without MULTI\r\n");
    client.stream.write_all(&encode(&["HELLO", "3"])).unwrap();
    let mut buffer = [0u8; 512];
    let n = client.stream.read(&mut buffer).unwrap();
    assert!(
        buffer[..n].starts_with(b"%7\r\n"),
        "{:?}",
        String::from_utf8_lossy(&buffer[..n])
    );
    client.exchange(&[&["GET", "nope"]], "_\r\n");
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn a_malformed_request_closes_only_its_connection() {
    let dir = temp_dir("malformed");
    let (server, address) = start(open(&dir, true), None);
    let mut good = Client::connect(address);
    let mut bad = Client::connect(address);
    bad.stream.write_all(b"*1\r\n$-5\r\n").unwrap();
    let mut got = Vec::new();
    bad.stream.read_to_end(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    let mut huge = Client::connect(address);
    huge.stream.write_all(b"*1\r\n$99999999999\r\n").unwrap();
    let mut got = Vec::new();
    huge.stream.read_to_end(&mut got).unwrap();
    assert!(got.starts_with(b"-ERR Protocol error"));
    good.exchange(
        &[&["SET", "still", "here"], &["GET", "still"]],
        "+OK\r\n$4\r\nhere\r\n",
    );
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn acknowledged_writes_survive_a_restart() {
    let dir = temp_dir("restart");
    let (server, address) = start(open(&dir, true), None);
    let mut client = Client::connect(address);
    client.exchange(
        &[
            &["SET", "kept", "yes"],
            &["MSET", "m1", "a", "m2", "b", "m3", "c"],
            &["SET", "ttl", "v", "EX", "1000"],
        ],
        "+OK\r\n+OK\r\n+OK\r\n",
    );
    drop(client);
    server.shutdown();
    server.wait().expect("stops");
    let (server, address) = start(open(&dir, false), None);
    let mut client = Client::connect(address);
    client.exchange(
        &[
            &["GET", "kept"],
            &["MGET", "m1", "m2", "m3"],
            &["TTL", "ttl"],
        ],
        "$3\r\nyes\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n:1000\r\n",
    );
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn a_client_past_the_limit_is_refused_and_one_that_never_reads_is_disconnected() {
    let dir = temp_dir("limits");
    let config = ServerConfig {
        max_clients: 2,
        max_reply_bytes: 256 * 1024,
        reply_stall_timeout: Duration::from_millis(300),
        ..local_config()
    };
    let (server, address) = start_with(open(&dir, true), config);
    let mut first = Client::connect(address);
    first.exchange(&[&["PING"]], "+PONG\r\n");
    let mut second = Client::connect(address);
    second.exchange(&[&["PING"]], "+PONG\r\n");
    let mut third = Client::connect(address);
    let mut got = Vec::new();
    third.stream.read_to_end(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR max number of clients reached\r\n"
    );
    drop(third);
    a_client_that_never_reads_is_disconnected(second);
    first.exchange(&[&["GET", "missing"]], "$-1\r\n");
    server.shutdown();
    server.wait().expect("stops");
}

/// `second` asks for 40 MB of replies and reads none of them: with a 256 KiB reply limit, or
/// a larger one and a 300 ms stall timeout, the server closes it well before sending them all.
fn a_client_that_never_reads_is_disconnected(mut second: Client) {
    let big = "x".repeat(900);
    second.exchange(&[&["SET", "big", &big]], "+OK\r\n");
    let gets: Vec<u8> = (0..45_000).flat_map(|_| encode(&["GET", "big"])).collect();
    let _ = second.stream.write_all(&gets);
    std::thread::sleep(Duration::from_millis(1500));
    let mut drained = 0usize;
    let mut buffer = vec![0u8; 1 << 16];
    // The kernel's buffers hold a few MB; then the connection ends well before 40 MB.
    let closed = loop {
        match second.stream.read(&mut buffer) {
            Ok(0) => break true,
            Err(e) => {
                break !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
            Ok(n) => drained += n,
        }
    };
    assert!(closed, "the server kept a client that reads nothing");
    assert!(
        drained < 400 * 100_000,
        "the server sent every reply ({drained} bytes)"
    );
}

#[test]
fn the_sweep_removes_expired_keys_that_nobody_reads() {
    let dir = temp_dir("sweep");
    let db = open(&dir, true);
    let config = ServerConfig {
        sweep_chunk_keys: 16,
        sweep_interval: Duration::from_millis(20),
        ..local_config()
    };
    let (server, address) = start_with(db.clone(), config);
    let mut client = Client::connect(address);
    for i in 0..40 {
        let key = format!("short:{i}");
        client.exchange(&[&["SET", &key, "v", "PX", "50"]], "+OK\r\n");
        let key = format!("long:{i}");
        client.exchange(&[&["SET", &key, "v", "EX", "1000"]], "+OK\r\n");
    }
    client.exchange(&[&["SET", "forever", "v"]], "+OK\r\n");
    // Every key is in the tree now; the short ones expire and the sweep (chunks of 16 every
    // 20 ms, 81 keys) removes them within a few passes.
    let mut left = usize::MAX;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        left = db
            .range::<&[u8], _>(..)
            .filter(|pair| {
                pair.as_ref()
                    .is_ok_and(|(key, _)| key.starts_with(b"short:"))
            })
            .count();
        if left == 0 {
            break;
        }
    }
    assert_eq!(left, 0, "expired keys still in the tree");
    let kept = db.range::<&[u8], _>(..).count();
    assert_eq!(kept, 41, "the sweep removed only expired keys");
    client
        .stream
        .write_all(&encode(&["INFO", "stats"]))
        .unwrap();
    let mut buffer = [0u8; 2048];
    let n = client.stream.read(&mut buffer).unwrap();
    assert!(String::from_utf8_lossy(&buffer[..n]).contains("expired_keys:40"));
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn a_unix_socket_serves_as_tcp_does() {
    let dir = temp_dir("unix");
    // Under /tmp: a Unix socket's path must fit 108 bytes, whatever the checkout's path.
    let socket = std::env::temp_dir().join(format!("ringdb-serve-{}.sock", std::process::id()));
    let config = ServerConfig {
        listen: None,
        unix_socket: Some(socket.clone()),
        ..ServerConfig::default()
    };
    let server = Server::start(open(&dir, true), config).expect("server starts");
    assert_eq!(server.local_address(), None);
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
        .write_all(&[encode(&["SET", "u", "1"]), encode(&["INCR", "u"])].concat())
        .unwrap();
    let mut got = Vec::new();
    let mut buffer = [0u8; 64];
    while got.len() < b"+OK\r\n:2\r\n".len() {
        let n = stream.read(&mut buffer).expect("reply");
        assert!(n > 0, "closed");
        got.extend_from_slice(&buffer[..n]);
    }
    assert_eq!(got, b"+OK\r\n:2\r\n");
    // CLIENT LIST names a Unix socket's client by the socket's path, as Redis does.
    stream.write_all(&encode(&["CLIENT", "LIST"])).unwrap();
    let expected = format!("addr={0}:0 laddr={0}:0 ", socket.display());
    let mut listed = String::new();
    while !listed.ends_with("\n\r\n") {
        let n = stream.read(&mut buffer).expect("reply");
        assert!(n > 0, "closed");
        listed.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    assert!(listed.contains(&expected), "{listed}");
    server.shutdown();
    server.wait().expect("stops");
    let _ = std::fs::remove_file(&socket);
}

/// One reply, as far as the large-value tests need.
#[derive(Debug, PartialEq)]
enum Resp {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
}

impl Client {
    /// Sends one command of byte strings and reads its reply (no arrays).
    fn call(&mut self, words: &[&[u8]]) -> Resp {
        let mut wire = format!("*{}\r\n", words.len()).into_bytes();
        for word in words {
            wire.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
            wire.extend_from_slice(word);
            wire.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&wire).unwrap();
        let line = self.read_line();
        let text = String::from_utf8_lossy(&line[1..]).to_string();
        match line[0] {
            b'+' => Resp::Simple(text),
            b'-' => Resp::Error(text),
            b':' => Resp::Integer(text.parse().expect("integer")),
            b'$' if text == "-1" => Resp::Bulk(None),
            b'$' => {
                let length: usize = text.parse().expect("length");
                let mut body = vec![0u8; length + 2];
                self.stream.read_exact(&mut body).expect("bulk");
                body.truncate(length);
                Resp::Bulk(Some(body))
            }
            other => panic!("unexpected reply type {}", other as char),
        }
    }

    /// A line without its CRLF, read a byte at a time (replies here are short).
    fn read_line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            self.stream.read_exact(&mut byte).expect("reply line");
            line.push(byte[0]);
        }
        line.truncate(line.len() - 2);
        line
    }
}

/// `length` bytes that say where they are (a torn or shifted value does not look whole).
fn pattern(seed: u8, length: usize) -> Vec<u8> {
    (0..length)
        .map(|i| seed.wrapping_add((i % 251) as u8))
        .collect()
}

fn chunks_left(db: &Db) -> usize {
    db.table("ringdb-server.chunks")
        .expect("the chunk table")
        .range::<&[u8], _>(..)
        .count()
}

#[test]
fn values_larger_than_a_record_work_and_leave_no_chunk_behind() {
    let dir = temp_dir("large");
    let config = ServerConfig {
        sweep_interval: Duration::from_millis(20),
        ..local_config()
    };
    let (server, address) = start_with(open(&dir, true), config.clone());
    let mut client = Client::connect(address);
    let big = pattern(1, 100_000);
    assert_eq!(
        client.call(&[b"SET", b"big", &big]),
        Resp::Simple("OK".into())
    );
    assert_eq!(
        client.call(&[b"GET", b"big"]),
        Resp::Bulk(Some(big.clone()))
    );
    assert_eq!(
        client.call(&[b"APPEND", b"big", b"tail"]),
        Resp::Integer(100_004)
    );
    assert_eq!(client.call(&[b"STRLEN", b"big"]), Resp::Integer(100_004));
    let range = client.call(&[b"GETRANGE", b"big", b"99998", b"-1"]);
    assert_eq!(range, Resp::Bulk(Some([&big[99_998..], b"tail"].concat())));
    // MSET across both shards, a key on each, replacing a large value with a small one.
    let medium = pattern(2, 5_000);
    let mset: Vec<&[u8]> = vec![b"MSET", b"m:a", &medium, b"m:b", &big, b"m:c", b"x"];
    assert_eq!(client.call(&mset), Resp::Simple("OK".into()));
    assert_eq!(
        client.call(&[b"MSET", b"m:b", b"small"]),
        Resp::Simple("OK".into())
    );
    assert_eq!(
        client.call(&[b"GET", b"m:a"]),
        Resp::Bulk(Some(medium.clone()))
    );
    assert_eq!(
        client.call(&[b"SET", b"gone", &big, b"PX", b"100"]),
        Resp::Simple("OK".into())
    );
    assert_eq!(
        client.call(&[b"TYPE", b"big"]),
        Resp::Simple("string".into())
    );
    drop(client);
    server.shutdown();
    server.wait().expect("stops");
    whole_after_a_restart_and_gone_after_deletes(&dir, config, &big, &medium);
}

/// The large values of the test above survive a restart, whole; then every large value goes
/// away, and its chunks with it.
fn whole_after_a_restart_and_gone_after_deletes(
    dir: &PathBuf,
    config: ServerConfig,
    big: &[u8],
    medium: &[u8],
) {
    let db = open(dir, false);
    let (server, address) = start_with(db.clone(), config);
    let mut client = Client::connect(address);
    let appended = [big, b"tail"].concat();
    assert_eq!(client.call(&[b"GET", b"big"]), Resp::Bulk(Some(appended)));
    assert_eq!(
        client.call(&[b"GET", b"m:a"]),
        Resp::Bulk(Some(medium.to_vec()))
    );
    assert_eq!(
        client.call(&[b"GET", b"m:b"]),
        Resp::Bulk(Some(b"small".to_vec()))
    );
    assert!(chunks_left(&db) > 0);
    assert_eq!(client.call(&[b"DEL", b"big", b"m:a"]), Resp::Integer(2));
    // The expired one is swept (or already was): its chunks go with it.
    wait_for(&db, chunks_left, 0, "chunks of deleted and expired values");
    assert_eq!(client.call(&[b"GET", b"gone"]), Resp::Bulk(None));
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn readers_of_a_large_value_never_see_a_torn_one() {
    const LENGTHS: [usize; 3] = [1_500, 7_000, 30_000];
    let lengths = &LENGTHS;
    let write = move |round: usize| {
        let value = pattern(round as u8, lengths[round % lengths.len()]);
        vec![vec![b"SET".to_vec(), b"hot".to_vec(), value]]
    };
    race("large-race", &[b"GET", b"hot"], write, lengths);
}

#[test]
fn readers_of_a_hash_field_in_place_see_whole_values_or_none() {
    const LENGTHS: [usize; 3] = [100, 500, 900];
    let lengths = &LENGTHS;
    let write = move |round: usize| {
        let value = pattern(round as u8, lengths[round % lengths.len()]);
        let set = vec![b"HSET".to_vec(), b"hot".to_vec(), b"f".to_vec(), value];
        // Every fifth round the hash is removed first, so it is created again, anew.
        match round % 5 {
            0 => vec![vec![b"DEL".to_vec(), b"hot".to_vec()], set],
            _ => vec![set],
        }
    };
    race("hash-race", &[b"HGET", b"hot", b"f"], write, lengths);
}

/// Two readers send `read` while a writer sends `write(round)` for 600 rounds: every value
/// read is absent or a whole `pattern` of one of `lengths`.
fn race(
    name: &str,
    read: &'static [&'static [u8]],
    write: impl Fn(usize) -> Vec<Vec<Vec<u8>>>,
    lengths: &'static [usize],
) {
    let dir = temp_dir(name);
    let (server, address) = start_with(open(&dir, true), local_config());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(address);
                let mut whole = 0usize;
                // Until the writer is done (it stops after a bounded number of writes).
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match client.call(read) {
                        Resp::Bulk(None) => {}
                        Resp::Bulk(Some(value)) => {
                            assert!(lengths.contains(&value.len()), "length {}", value.len());
                            assert_eq!(value, pattern(value[0], value.len()), "a torn value");
                            whole += 1;
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
                whole
            })
        })
        .collect();
    let mut writer = Client::connect(address);
    for round in 0..600usize {
        for command in write(round) {
            let words: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
            assert!(!matches!(writer.call(&words), Resp::Error(_)));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        let whole = reader.join().expect("reader");
        assert!(whole > 0, "the reader read whole values");
        eprintln!("{name} reader: {whole} whole values");
    }
    server.shutdown();
    server.wait().expect("stops");
}

/// The field records of every hash, each checked to be where the engine's routing finds it.
fn field_records(db: &Db) -> usize {
    let table = db.table("ringdb-server.fields").expect("the field table");
    let records: Vec<Vec<u8>> = table
        .range::<&[u8], _>(..)
        .map(|pair| pair.expect("scan").0)
        .collect();
    for record in &records {
        assert!(
            table.get(record).expect("get").is_some(),
            "a field off its shard"
        );
    }
    records.len()
}

#[test]
fn hashes_keep_their_fields_together_and_leave_none_behind() {
    let dir = temp_dir("hashes");
    let config = ServerConfig {
        sweep_interval: Duration::from_millis(20),
        ..local_config()
    };
    let (server, address) = start_with(open(&dir, true), config.clone());
    let mut client = Client::connect(address);
    // Ten hashes of 30 fields each, their keys on both shards.
    for hash in 0..10 {
        let key = format!("hash:{hash}");
        let mut request: Vec<Vec<u8>> = vec![b"HSET".to_vec(), key.into_bytes()];
        for field in 0..30 {
            request.push(format!("f{field}").into_bytes());
            request.push(format!("v{hash}.{field}").into_bytes());
        }
        let words: Vec<&[u8]> = request.iter().map(Vec::as_slice).collect();
        assert_eq!(client.call(&words), Resp::Integer(30));
    }
    assert_eq!(
        client.call(&[b"HSET", b"hash:0", b"f0", b"changed"]),
        Resp::Integer(0)
    );
    assert_eq!(
        client.call(&[b"PEXPIRE", b"hash:9", b"100"]),
        Resp::Integer(1)
    );
    drop(client);
    server.shutdown();
    server.wait().expect("stops");
    let db = open(&dir, false);
    let (server, address) = start_with(db.clone(), config);
    let mut client = Client::connect(address);
    assert_eq!(
        client.call(&[b"HGET", b"hash:0", b"f0"]),
        Resp::Bulk(Some(b"changed".to_vec()))
    );
    assert_eq!(
        client.call(&[b"HGET", b"hash:3", b"f29"]),
        Resp::Bulk(Some(b"v3.29".to_vec()))
    );
    assert_eq!(client.call(&[b"HLEN", b"hash:3"]), Resp::Integer(30));
    assert_eq!(
        client.call(&[b"GET", b"hash:3"]),
        Resp::Error(WRONG_TYPE.into())
    );
    // Each way a hash goes away takes its fields with it: DEL, SET over it, HDEL of its last
    // fields, expiry and the sweep, MSET over several shards, FLUSHDB.
    assert_eq!(client.call(&[b"DEL", b"hash:1"]), Resp::Integer(1));
    assert_eq!(
        client.call(&[b"SET", b"hash:2", b"now a string"]),
        Resp::Simple("OK".into())
    );
    let fields: Vec<Vec<u8>> = (0..30).map(|f| format!("f{f}").into_bytes()).collect();
    let mut hdel: Vec<&[u8]> = vec![b"HDEL", b"hash:4"];
    hdel.extend(fields.iter().map(Vec::as_slice));
    assert_eq!(client.call(&hdel), Resp::Integer(30));
    assert_eq!(client.call(&[b"EXISTS", b"hash:4"]), Resp::Integer(0));
    let mset: Vec<&[u8]> = vec![b"MSET", b"hash:5", b"x", b"hash:6", b"y", b"hash:7", b"z"];
    assert_eq!(client.call(&mset), Resp::Simple("OK".into()));
    // hash:0, hash:3 and hash:8 are left.
    let what = "field records after DEL, SET, HDEL, MSET and the sweep";
    wait_for(&db, field_records, 3 * 30, what);
    assert_eq!(client.call(&[b"FLUSHDB"]), Resp::Simple("OK".into()));
    assert_eq!(field_records(&db), 0, "FLUSHDB leaves fields");
    server.shutdown();
    server.wait().expect("stops");
}

const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Waits (bounded: 5 s) until `count` gives `expected`, else fails naming `what`.
fn wait_for(db: &Db, count: fn(&Db) -> usize, expected: usize, what: &str) {
    let mut left = usize::MAX;
    for _ in 0..100 {
        left = count(db);
        if left == expected {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(left, expected, "{what}");
}

/// A key named `prefix` and a number whose shard is (or is not, `same` false) `key`'s.
fn key_beside(db: &Db, key: &[u8], prefix: &str, same: bool) -> Vec<u8> {
    (0..1000)
        .map(|n| format!("{prefix}{n}").into_bytes())
        .find(|candidate| (db.shard_of(candidate) == db.shard_of(key)) == same)
        .expect("a key on the shard asked for")
}

#[test]
fn renames_move_strings_large_values_and_hashes_within_and_across_shards() {
    let dir = temp_dir("rename");
    let db = open(&dir, true);
    let (server, address) = start_with(db.clone(), local_config());
    let mut client = Client::connect(address);
    let big = pattern(3, 20_000);
    for same in [true, false] {
        let tag = if same { "same" } else { "across" };
        let (string, large, hash) = (format!("{tag}:s"), format!("{tag}:l"), format!("{tag}:h"));
        assert_eq!(
            client.call(&[b"SET", string.as_bytes(), b"v", b"EX", b"1000"]),
            Resp::Simple("OK".into())
        );
        assert_eq!(
            client.call(&[b"SET", large.as_bytes(), &big]),
            Resp::Simple("OK".into())
        );
        let hset: Vec<&[u8]> = vec![b"HSET", hash.as_bytes(), b"f1", b"a", b"f2", b"b"];
        assert_eq!(client.call(&hset), Resp::Integer(2));
        for (key, kind) in [(&string, "s"), (&large, "l"), (&hash, "h")] {
            let target = key_beside(&db, key.as_bytes(), &format!("{tag}:{kind}:to"), same);
            // The target holds a hash whose fields must go.
            let old: Vec<&[u8]> = vec![b"HSET", &target, b"old", b"x"];
            assert_eq!(client.call(&old), Resp::Integer(1));
            assert_eq!(
                client.call(&[b"RENAMENX", key.as_bytes(), &target]),
                Resp::Integer(0)
            );
            assert_eq!(
                client.call(&[b"RENAME", key.as_bytes(), &target]),
                Resp::Simple("OK".into())
            );
            assert_eq!(client.call(&[b"EXISTS", key.as_bytes()]), Resp::Integer(0));
            let moved = match kind {
                "s" => {
                    client.call(&[b"GET", &target]) == Resp::Bulk(Some(b"v".to_vec()))
                        && client.call(&[b"TTL", &target]) == Resp::Integer(1000)
                }
                "l" => client.call(&[b"GET", &target]) == Resp::Bulk(Some(big.clone())),
                _ => {
                    client.call(&[b"HGET", &target, b"f2"]) == Resp::Bulk(Some(b"b".to_vec()))
                        && client.call(&[b"HLEN", &target]) == Resp::Integer(2)
                }
            };
            assert!(moved, "{tag} rename of the {kind} value");
        }
    }
    assert_eq!(
        client.call(&[b"RENAME", b"absent", b"x"]),
        Resp::Error("ERR no such key".into())
    );
    // Only the two renamed hashes' fields and the two large values' chunks are left.
    assert_eq!(field_records(&db), 4);
    // 4 KiB pages: records of 990 bytes, chunks of 976 (a 14-byte key).
    assert_eq!(chunks_left(&db), 2 * big.len().div_ceil(976));
    server.shutdown();
    server.wait().expect("stops");
}

/// The ways a worker may talk to the kernel and the threads it may run on, each with what
/// INFO says of it.
fn networks() -> [(NetworkSettings, &'static str); 4] {
    let uring = NetworkSettings {
        transport: TransportKind::Uring,
        placement: Placement::Shards,
        ..NetworkSettings::default()
    };
    let threads = NetworkSettings {
        placement: Placement::Threads,
        ..uring
    };
    let single = NetworkSettings {
        multishot_receive: false,
        ring_mode: ringdb_io::SetupMode::Default,
        placement: Placement::Auto,
        ..uring
    };
    let epoll = NetworkSettings {
        transport: TransportKind::Epoll,
        placement: Placement::Auto,
        ..uring
    };
    [
        (
            uring,
            "multiplexing_api:io_uring\r\nringdb_receive:multishot\r\nringdb_network_placement:shards\r\n",
        ),
        (
            threads,
            "multiplexing_api:io_uring\r\nringdb_receive:multishot\r\nringdb_network_placement:threads\r\n",
        ),
        (
            single,
            "multiplexing_api:io_uring\r\nringdb_receive:single\r\nringdb_network_placement:shards\r\n",
        ),
        (
            epoll,
            "multiplexing_api:epoll\r\nringdb_receive:single\r\nringdb_network_placement:threads\r\n",
        ),
    ]
}

#[test]
fn workers_on_the_shards_stop_with_clients_still_connected_and_the_database_closes() {
    let dir = temp_dir("placement-stop");
    let config = ServerConfig {
        network: NetworkSettings {
            placement: Placement::Shards,
            ..NetworkSettings::default()
        },
        ..local_config()
    };
    let (server, address) = start_with(open(&dir, true), config);
    let mut idle = Client::connect(address);
    idle.exchange(&[&["SET", "kept", "1"]], "+OK\r\n");
    // One client stops half way through a request, another never sends anything.
    let mut partial = TcpStream::connect(address).expect("connect");
    partial.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nx").unwrap();
    let _silent = TcpStream::connect(address).expect("connect");
    let (done, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        server.shutdown();
        let _ = done.send(server.wait());
    });
    let waited = stopped
        .recv_timeout(Duration::from_secs(20))
        .expect("the server stops within 20 s with clients connected");
    waited.expect("stops cleanly");
    // The shards closed (their files are free again) and kept the write.
    let reopened = open(&dir, false);
    assert!(reopened.get(b"kept").expect("read").is_some());
    drop(idle);
}

#[test]
fn workers_on_the_shards_are_refused_where_they_cannot_run_there() {
    let cases = [
        (TransportKind::Epoll, 0, "the network uses epoll"),
        (TransportKind::Uring, 1, "1 workers for 2 shards"),
    ];
    for (index, (transport, workers, why)) in cases.into_iter().enumerate() {
        let dir = temp_dir(&format!("placement-refused-{index}"));
        let config = ServerConfig {
            workers,
            network: NetworkSettings {
                transport,
                placement: Placement::Shards,
                ..NetworkSettings::default()
            },
            ..local_config()
        };
        let error = match Server::start(open(&dir, true), config) {
            Ok(_) => panic!("workers on the shards with {transport:?}, {workers} workers started"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains("cannot run on the shards' threads") && error.contains(why),
            "{error}"
        );
    }
}

/// The `INFO server` text.
fn info_server(address: SocketAddr) -> String {
    let mut client = Client::connect(address);
    client
        .stream
        .write_all(&encode(&["INFO", "server"]))
        .unwrap();
    let mut got = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = client.stream.read(&mut buffer).expect("INFO reply");
        assert!(n > 0, "closed during INFO");
        got.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        let Some((header, body)) = text.split_once("\r\n") else {
            continue;
        };
        let length: usize = header[1..].parse().expect("a bulk length");
        if body.len() >= length + 2 {
            return body[..length].to_string();
        }
    }
}

/// A 6 MB value goes in and comes back whole: many receives, and more than the socket's
/// buffers take at once, so the send waits for room at least once.
fn a_large_value_round_trip(address: SocketAddr) {
    let value: String = (0..6_000_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let mut client = Client::connect(address);
    client.exchange(&[&["SET", "large", &value]], "+OK\r\n");
    let expected = format!("${}\r\n{value}\r\n", value.len());
    client.exchange(&[&["GET", "large"]], &expected);
}

#[test]
fn every_network_path_serves_pipelines_large_values_many_clients_and_slow_readers() {
    for (index, (network, says)) in networks().into_iter().enumerate() {
        let dir = temp_dir(&format!("network-{index}"));
        let config = ServerConfig {
            max_reply_bytes: 64 << 20,
            reply_stall_timeout: Duration::from_millis(300),
            network,
            ..local_config()
        };
        let (server, address) = start_with(open(&dir, true), config);
        let info = info_server(address);
        assert!(info.contains(says), "{network:?}: INFO says\n{info}");
        pipeline_across_shards(address);
        a_large_value_round_trip(address);
        increments_from_eight_clients(address, "counter");
        a_client_that_never_reads_is_disconnected(Client::connect(address));
        Client::connect(address).exchange(&[&["GET", "counter"]], "$3\r\n400\r\n");
        server.shutdown();
        server.wait().expect("stops");
    }
}

#[test]
fn a_hash_field_too_large_for_a_record_is_refused_and_changes_nothing() {
    let dir = temp_dir("hash-field-size");
    let (server, address) = start(open(&dir, true), None);
    let mut client = Client::connect(address);
    client.exchange(&[&["HSET", "h", "f", "small"]], ":1\r\n");
    let large = "x".repeat(2000);
    let refusal = "-ERR a hash field and its value may hold at most 980 bytes together\r\n";
    client.exchange(&[&["HSET", "h", "f", "v2", "g", &large]], refusal);
    client.exchange(
        &[&["HLEN", "h"], &["HGET", "h", "f"], &["HEXISTS", "h", "g"]],
        ":1\r\n$5\r\nsmall\r\n:0\r\n",
    );
    server.shutdown();
    server.wait().expect("stops");
}

#[test]
fn a_value_past_a_quarter_of_the_log_is_refused_and_the_key_keeps_its_value() {
    let dir = temp_dir("batch-size");
    let options = Options {
        fresh: true,
        direct: false,
        durability: Durability::Fdatasync,
        wal_bytes: 8 << 20,
        ..Options::default()
    };
    let db = Db::builder(&dir)
        .options(options)
        .shards(2)
        .open()
        .expect("open");
    let (server, address) = start(db, None);
    let mut client = Client::connect(address);
    let fits = "a".repeat(1 << 20);
    client.exchange(&[&["SET", "k", &fits]], "+OK\r\n");
    let past = "b".repeat(3 << 20);
    let wire = encode(&["SET", "k", &past]);
    client.stream.write_all(&wire).unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    // Bounded by the read timeout: one error line.
    while !reply.ends_with(b"\r\n") {
        assert_eq!(client.stream.read(&mut byte).expect("a reply"), 1, "closed");
        reply.push(byte[0]);
    }
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("-ERR write failed: a batch of ")
            && reply.contains("is larger than a quarter of the log (2097152 bytes)"),
        "{reply}"
    );
    client.exchange(&[&["STRLEN", "k"]], &format!(":{}\r\n", 1 << 20));
    server.shutdown();
    server.wait().expect("stops");
}
