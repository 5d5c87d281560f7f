//! Ping-pong over TCP and UDP for every transport: every echo comes back byte-exact (the
//! client checks), and bad peers give typed errors quickly.

use ringdb_net::pingpong::{run_client, serve, Proto, ServerSocket};
use ringdb_net::{NetConfig, NetError};
use std::time::{Duration, Instant};

fn cfg(s: &str) -> NetConfig {
    let mut c: NetConfig = s.parse().unwrap();
    c.io_timeout = Duration::from_secs(10);
    c
}

#[test]
fn echoes_are_exact_for_every_mode_tcp_and_udp() {
    for proto in [Proto::Tcp, Proto::Udp] {
        for mode in [
            "epoll",
            "uring",
            "uring-sqpoll",
            "uring+regfds+regbufs",
            "uring+multishot",
            "uring+zc-send",
            "uring+pollfirst",
        ] {
            for size in [8usize, 3000] {
                let sock = ServerSocket::bind(proto, "127.0.0.1:0").unwrap();
                let addr = sock.local_addr().unwrap();
                let scfg = cfg(mode);
                let server = std::thread::spawn(move || serve(&scfg, sock, size));
                let r = run_client(&cfg(mode), proto, addr, size, 300, 20)
                    .unwrap_or_else(|e| panic!("{proto} {mode} {size}: {e}"));
                assert_eq!(r.iters, 300);
                assert!(r.rtt_p50_us > 0.0 && r.rtt_p50_us <= r.rtt_p99_us);
                assert!(r.rtt_p99_us <= r.rtt_p999_us);
                let echoed = server.join().unwrap().unwrap();
                assert_eq!(echoed, 320, "{proto} {mode} {size}");
            }
        }
    }
}

#[test]
fn refused_connections_are_typed_errors() {
    // Bind then drop: the port is closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = run_client(&cfg("uring"), Proto::Tcp, port, 8, 10, 0).unwrap_err();
    assert!(matches!(e, NetError::Connect { .. }), "{e}");
    let uport = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let t0 = Instant::now();
    let e = run_client(&cfg("epoll"), Proto::Udp, uport, 8, 10, 0).unwrap_err();
    assert!(
        matches!(e, NetError::Connect { .. } | NetError::Timeout { .. }),
        "{e}"
    );
    assert!(t0.elapsed() < Duration::from_secs(15));
}

#[test]
fn unreachable_peer_fails_within_the_timeout() {
    let mut c = cfg("uring");
    c.io_timeout = Duration::from_millis(500);
    let t0 = Instant::now();
    // TEST-NET-1 (RFC 5737): never routed to a live host.
    let e = run_client(&c, Proto::Tcp, "192.0.2.1:9".parse().unwrap(), 8, 10, 0).unwrap_err();
    assert!(matches!(e, NetError::Connect { .. }), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn server_without_client_times_out() {
    let sock = ServerSocket::bind(Proto::Tcp, "127.0.0.1:0").unwrap();
    let mut c = cfg("uring");
    c.io_timeout = Duration::from_millis(300);
    let e = serve(&c, sock, 8).unwrap_err();
    assert!(matches!(e, NetError::Timeout { .. }), "{e}");
}
