//! `ringdb serve` killed with SIGKILL under load: clients log every SET, MSET and HSET the
//! server acknowledged; after the restart (recovery), every acknowledged write is there (large
//! values, stored in chunks, whole; hashes with every field) and every MSET (its keys on both
//! shards) is all there or all absent.
//!
//! `RINGDB_SERVE_KILLS` (default 3) kills per run, each at a random time after the clients
//! start; `RINGDB_CRASH_SEED` replays a run.

mod common;

use common::serve;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Clients writing at once.
const CLIENTS: usize = 6;

fn encode(words: &[String]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        out.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
    }
    out
}

/// Sends one command and reads one reply line (`+OK`, `$n` and its data, ...).
fn call(stream: &mut TcpStream, words: &[String]) -> std::io::Result<String> {
    stream.write_all(&encode(words))?;
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    // Bounded by the read timeout: a reply line, then a bulk's data line if any.
    while !reply.ends_with(b"\r\n") {
        if stream.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        reply.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&reply).trim_end().to_string();
    if let Some(length) = line.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
        let mut data = vec![0u8; length + 2];
        stream.read_exact(&mut data)?;
        return Ok(String::from_utf8_lossy(&data[..length]).into_owned());
    }
    Ok(line)
}

/// One client: SETs and MSETs until the connection breaks; returns what was acknowledged.
/// What a client was told.
#[derive(Default)]
struct Acked {
    sets: Vec<String>,
    /// Keys whose SET of a value past one record (`large_value(key)`) was acknowledged.
    large: Vec<String>,
    /// Keys whose HSET of three fields was acknowledged.
    hashes: Vec<String>,
    msets: Vec<[String; 3]>,
    /// The MSET whose reply never came (the server was killed while it ran).
    in_flight: Option<[String; 3]>,
}

fn client(address: SocketAddr, id: usize, round: usize, stop: Arc<AtomicBool>) -> Acked {
    let mut acked = Acked::default();
    let Ok(mut stream) = TcpStream::connect(address) else {
        return acked;
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // Bounded by the kill: the connection breaks, or `stop` is set.
    for n in 0..1_000_000u64 {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let key = format!("r{round}:c{id}:{n}");
        // Even clients send only MSETs, odd ones two SETs for each MSET.
        let result = if id.is_multiple_of(2) || n.is_multiple_of(3) {
            let keys = [format!("{key}:a"), format!("{key}:b"), format!("{key}:c")];
            let mut words = vec!["MSET".to_string()];
            for k in &keys {
                words.push(k.clone());
                words.push(format!("v{n}"));
            }
            let result = call(&mut stream, &words);
            match &result {
                Ok(reply) if reply == "+OK" => acked.msets.push(keys),
                Ok(_) => {}
                Err(_) => acked.in_flight = Some(keys),
            }
            result.map(drop)
        } else {
            single_key_write(&mut stream, key, n, &mut acked)
        };
        if result.is_err() {
            break;
        }
    }
    acked
}

/// A value of about 3 KB (stored in chunks) that says which key it belongs to.
fn large_value(key: &str) -> String {
    key.repeat(3_000 / key.len() + 1)
}

/// A SET of a small value, a SET of a large one or an HSET of three fields, by `n`.
fn single_key_write(
    stream: &mut TcpStream,
    key: String,
    n: u64,
    acked: &mut Acked,
) -> std::io::Result<()> {
    let value = format!("v{n}");
    // `n % 3 == 0` went to MSET: cycle over the kinds by the next digit.
    let (words, expected, list) = match (n / 3) % 3 {
        1 => (
            vec!["SET".into(), key.clone(), large_value(&key)],
            "+OK",
            &mut acked.large,
        ),
        2 => {
            let mut words = vec!["HSET".to_string(), key.clone()];
            for field in ["f1", "f2", "f3"] {
                words.extend([field.to_string(), value.clone()]);
            }
            (words, ":3", &mut acked.hashes)
        }
        _ => (
            vec!["SET".into(), key.clone(), value],
            "+OK",
            &mut acked.sets,
        ),
    };
    let reply = call(stream, &words)?;
    if reply == expected {
        list.push(key);
    }
    Ok(())
}

fn get(stream: &mut TcpStream, key: &str) -> String {
    call(stream, &["GET".to_string(), key.to_string()]).expect("GET after restart")
}

#[test]
fn acknowledged_writes_survive_sigkill_and_msets_are_all_or_nothing() {
    let seed: u64 = std::env::var("RINGDB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(1, |d| d.as_nanos() as u64) ^ u64::from(std::process::id())
        });
    let kills: usize = std::env::var("RINGDB_SERVE_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    eprintln!("serve crash: seed {seed}, {kills} kills");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("serve-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (acked, in_flight) = kill_under_load(&dir, seed, kills);
    check_after_restart(&dir, seed, &acked, &in_flight);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kills` times: the server started, the clients writing, the server killed at a random
/// moment. What the clients were told, and the MSETs the kills cut.
fn kill_under_load(dir: &std::path::Path, seed: u64, kills: usize) -> (Acked, Vec<[String; 3]>) {
    let mut state = seed | 1;
    let mut acked = Acked::default();
    let mut in_flight = Vec::new();
    for round in 0..kills {
        let (mut child, address) = serve(dir);
        let stop = Arc::new(AtomicBool::new(false));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|id| {
                let stop = stop.clone();
                std::thread::spawn(move || client(address, id, round, stop))
            })
            .collect();
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        std::thread::sleep(Duration::from_millis(300 + state % 1200));
        child.0.kill().expect("SIGKILL");
        child.0.wait().expect("reaped");
        stop.store(true, Ordering::Relaxed);
        for handle in clients {
            let told = handle.join().expect("client");
            acked.sets.extend(told.sets);
            acked.large.extend(told.large);
            acked.hashes.extend(told.hashes);
            acked.msets.extend(told.msets);
            in_flight.extend(told.in_flight);
        }
        eprintln!(
            "serve crash: kill {round}: {} SETs ({} large), {} HSETs and {} MSETs acknowledged so far, {} MSETs cut by kills",
            acked.sets.len() + acked.large.len(),
            acked.large.len(),
            acked.hashes.len(),
            acked.msets.len(),
            in_flight.len()
        );
    }
    (acked, in_flight)
}

/// After a restart: every acknowledged write is there, every cut MSET all or nothing.
fn check_after_restart(dir: &std::path::Path, seed: u64, acked: &Acked, in_flight: &[[String; 3]]) {
    let (child, address) = serve(dir);
    let mut stream = TcpStream::connect(address).expect("connect after restart");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert!(
        !acked.sets.is_empty() && !acked.msets.is_empty(),
        "the clients got acknowledgements"
    );
    let keys = acked.sets.iter().chain(acked.msets.iter().flatten());
    for key in keys {
        assert_ne!(
            get(&mut stream, key),
            "$-1",
            "acknowledged write of {key} lost (seed {seed})"
        );
    }
    check_large_and_hashes(&mut stream, seed, acked);
    // The MSETs a kill cut: all or nothing.
    let mut whole = 0;
    for keys in in_flight {
        let present: Vec<bool> = keys
            .iter()
            .map(|key| get(&mut stream, key) != "$-1")
            .collect();
        assert!(
            present.iter().all(|p| *p) || present.iter().all(|p| !p),
            "MSET {keys:?} partly visible: {present:?} (seed {seed})"
        );
        whole += usize::from(present[0]);
    }
    eprintln!(
        "serve crash: of {} MSETs cut by kills, {whole} are whole and the others absent",
        in_flight.len()
    );
    drop(child);
}

/// Every acknowledged large value is whole, every acknowledged hash has its three fields.
fn check_large_and_hashes(stream: &mut TcpStream, seed: u64, acked: &Acked) {
    for key in &acked.large {
        let value = get(stream, key);
        assert!(
            value == large_value(key),
            "large value of {key} lost or torn (seed {seed})"
        );
    }
    for key in &acked.hashes {
        let fields = call(stream, &["HLEN".to_string(), key.clone()]).expect("HLEN");
        assert_eq!(fields, ":3", "hash {key} lost fields (seed {seed})");
    }
    eprintln!(
        "serve crash: {} large values whole, {} hashes with all their fields",
        acked.large.len(),
        acked.hashes.len()
    );
}
