//! The shuffle's join equals the single-process reference for every transport and several
//! node/worker/tuple-size settings; malformed frames, dead and silent peers end in typed
//! errors within a bounded time.

use ringdb_net::frame::{checksum, Header, FLAG_EOS, HEADER_LEN};
use ringdb_net::shuffle::{reference_join, run_local, run_node, ShuffleSpec};
use ringdb_net::{Conn, FrameFault, NetConfig, NetError};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn spec(nodes: usize, workers: usize, tuple_size: usize, rows: usize, chunk: usize) -> ShuffleSpec {
    ShuffleSpec {
        nodes,
        workers,
        tuple_size,
        rows_per_node: rows,
        seed: 42 + nodes as u64 * 7 + tuple_size as u64,
        chunk,
        morsel: 1000,
    }
}

fn cfg(s: &str) -> NetConfig {
    let mut c: NetConfig = s.parse().unwrap();
    c.io_timeout = Duration::from_secs(20);
    c
}

const TRANSPORTS: &[&str] = &[
    "epoll",
    "uring",
    "uring+zc-send",
    "uring+multishot",
    "uring+regfds+regbufs",
];

#[test]
fn join_matches_reference_2_nodes_1_worker_64b() {
    let sp = spec(2, 1, 64, 40_000, 64 << 10);
    let want = reference_join(&sp);
    assert!(want.count > 0);
    for t in TRANSPORTS {
        let r = run_local(&sp, &cfg(t)).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(r.join, want, "{t}");
        // Everything that left a node arrived somewhere.
        let sent: u64 = r.nodes.iter().map(|n| n.bytes_sent).sum();
        let recv: u64 = r.nodes.iter().map(|n| n.bytes_recv).sum();
        assert_eq!(sent, recv, "{t}");
        let local: u64 = r.nodes.iter().map(|n| n.local_tuples).sum();
        assert!(local > 0 && local < sp.total_rows(), "{t}");
    }
}

#[test]
fn join_matches_reference_3_nodes_2_workers_1024b() {
    let sp = spec(3, 2, 1024, 3_000, 1 << 20);
    let want = reference_join(&sp);
    for t in TRANSPORTS {
        let r = run_local(&sp, &cfg(t)).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(r.join, want, "{t}");
    }
}

#[test]
fn join_matches_reference_3_nodes_2_workers_64b_small_chunks() {
    let sp = spec(3, 2, 64, 20_000, 4096);
    let want = reference_join(&sp);
    for t in ["epoll", "uring+zc-send", "uring+multishot", "uring-sqpoll"] {
        let r = run_local(&sp, &cfg(t)).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(r.join, want, "{t}");
    }
}

#[test]
fn zc_send_shuffle_counts_kernel_copies_on_loopback() {
    let sp = spec(2, 1, 1024, 4_000, 256 << 10);
    let r = run_local(&sp, &cfg("uring+zc-send")).unwrap();
    let ratio = r
        .zc_copied_per_byte()
        .expect("zc-send reports its notifications");
    // Loopback delivers to a local socket: the kernel copies the pages after all.
    assert!(ratio > 0.5, "copied per byte {ratio}");
    assert!(run_local(&sp, &cfg("uring"))
        .unwrap()
        .zc_copied_per_byte()
        .is_none());
}

/// Node 0 of a two-node shuffle, talking to a fake node 1 driven by `fake`.
fn against_fake_peer(
    transport: &str,
    timeout: Duration,
    fake: impl FnOnce(TcpStream) + Send + 'static,
) -> NetError {
    let sp = spec(2, 1, 64, 20_000, 16 << 10);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    // Drain whatever node 0 sends, so its sends never block on us.
    let mut drain = b.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while matches!(drain.read(&mut buf), Ok(n) if n > 0) {}
    });
    let f = std::thread::spawn(move || fake(b));
    let mut c = cfg(transport);
    c.io_timeout = timeout;
    let t0 = Instant::now();
    let r = run_node(&sp, 0, &c, vec![vec![Conn::tcp(a).unwrap()]]);
    assert!(t0.elapsed() < timeout * 3, "took {:?}", t0.elapsed());
    let _ = f.join();
    match r {
        Ok(_) => panic!("{transport}: the shuffle must fail"),
        Err(e) => e,
    }
}

fn frame(sender: u16, payload: &[u8], sum: u64, flags: u16) -> Vec<u8> {
    let mut v = vec![0u8; HEADER_LEN];
    Header {
        sender,
        flags,
        len: payload.len() as u32,
        tuple_size: 64,
        checksum: sum,
    }
    .encode(&mut v);
    v.extend_from_slice(payload);
    v
}

#[test]
fn malformed_frames_are_typed_errors() {
    for t in ["epoll", "uring", "uring+multishot"] {
        // Wrong checksum.
        let e = against_fake_peer(t, Duration::from_secs(5), |mut b| {
            let p = vec![3u8; 640];
            let _ = b.write_all(&frame(1, &p, checksum(&p) ^ 1, 0));
            std::thread::sleep(Duration::from_millis(500));
        });
        assert!(
            matches!(
                &e,
                NetError::MalformedFrame {
                    fault: FrameFault::ChecksumMismatch { .. },
                    ..
                }
            ),
            "{t}: {e}"
        );
        // Garbage instead of a header.
        let e = against_fake_peer(t, Duration::from_secs(5), |mut b| {
            let _ = b.write_all(&[0xEE; 100]);
            std::thread::sleep(Duration::from_millis(500));
        });
        assert!(
            matches!(
                &e,
                NetError::MalformedFrame {
                    fault: FrameFault::BadMagic { .. },
                    ..
                }
            ),
            "{t}: {e}"
        );
        // Payload that is not whole tuples.
        let e = against_fake_peer(t, Duration::from_secs(5), |mut b| {
            let p = vec![3u8; 100];
            let _ = b.write_all(&frame(1, &p, checksum(&p), 0));
            std::thread::sleep(Duration::from_millis(500));
        });
        assert!(
            matches!(
                &e,
                NetError::MalformedFrame {
                    fault: FrameFault::PartialTuple { .. },
                    ..
                }
            ),
            "{t}: {e}"
        );
        // Data after the end of the stream.
        let e = against_fake_peer(t, Duration::from_secs(5), |mut b| {
            let mut v = frame(1, &[], 0, FLAG_EOS);
            v.extend_from_slice(&[1, 2, 3]);
            let _ = b.write_all(&v);
            std::thread::sleep(Duration::from_millis(500));
        });
        assert!(matches!(&e, NetError::MalformedFrame { .. }), "{t}: {e}");
    }
}

#[test]
fn a_peer_dying_mid_shuffle_is_an_error() {
    for t in ["epoll", "uring", "uring+zc-send", "uring+multishot"] {
        // Half a frame, then gone (FIN).
        let e = against_fake_peer(t, Duration::from_secs(5), |mut b| {
            let p = vec![3u8; 6400];
            let f = frame(1, &p, checksum(&p), 0);
            let _ = b.write_all(&f[..3000]);
            let _ = b.shutdown(std::net::Shutdown::Both);
        });
        assert!(
            matches!(e, NetError::PeerClosed { .. } | NetError::Peer { .. }),
            "{t}: {e}"
        );
        // Crash: RST.
        let e = against_fake_peer(t, Duration::from_secs(5), |b| {
            use std::os::fd::AsRawFd;
            ringdb_net::set_linger_zero(b.as_raw_fd()).unwrap();
            let _ = b.shutdown(std::net::Shutdown::Read);
            drop(b);
        });
        assert!(
            matches!(e, NetError::PeerClosed { .. } | NetError::Peer { .. }),
            "{t}: {e}"
        );
    }
}

#[test]
fn a_silent_peer_times_out() {
    for t in ["epoll", "uring"] {
        let e = against_fake_peer(t, Duration::from_secs(1), |b| {
            std::thread::sleep(Duration::from_secs(4));
            drop(b);
        });
        assert!(matches!(e, NetError::Timeout { .. }), "{t}: {e}");
    }
}
