//! The io_uring transports on a ring whose submission queue is smaller than the work queued on
//! it: eight connections on a 2-entry ring arm eight receives and queue eight sends at once. The
//! ring core waits for room (submitting, or with SQPOLL waiting for the poller with
//! `IORING_ENTER_SQ_WAIT`) instead of failing or spinning.

use ringdb_net::{open_transport, Conn, Event, NetConfig};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 8;
const MESSAGE_BYTES: usize = 1000;

fn pairs() -> (Vec<Conn>, Vec<Conn>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut near = Vec::new();
    let mut far = Vec::new();
    for _ in 0..CONNECTIONS {
        near.push(Conn::tcp(TcpStream::connect(listener.local_addr().unwrap()).unwrap()).unwrap());
        far.push(Conn::tcp(listener.accept().unwrap().0).unwrap());
    }
    (near, far)
}

fn config(spec: &str) -> NetConfig {
    let mut config: NetConfig = spec.parse().unwrap();
    config.ring_entries = 2;
    config.send_bufs = CONNECTIONS;
    config.send_buf_size = MESSAGE_BYTES;
    config.recv_buf_size = 4096;
    config.io_timeout = Duration::from_secs(10);
    config
}

/// Receives until every connection delivered `MESSAGE_BYTES` bytes.
fn receive_all(spec: &str, far: Vec<Conn>) -> Vec<usize> {
    let mut transport = open_transport(&config(spec), far).unwrap();
    let mut received = vec![0usize; CONNECTIONS];
    let started = Instant::now();
    while received.iter().any(|&bytes| bytes < MESSAGE_BYTES) {
        transport
            .poll(Some(Duration::from_millis(50)), &mut |event| {
                if let Event::Recv { conn, data } = event {
                    received[conn] += data.len();
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{spec}: receiving: {e}"));
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{spec}: receiver stuck"
        );
    }
    received
}

#[test]
fn eight_connections_on_a_two_entry_ring_move_every_byte() {
    for spec in [
        "uring",
        "uring-sqpoll",
        "uring+multishot",
        "uring-sqpoll+zc-send",
    ] {
        let (near, far) = pairs();
        let receiver_spec = spec.to_string();
        let receiver = std::thread::spawn(move || receive_all(&receiver_spec, far));
        let mut sender = open_transport(&config(spec), near).unwrap();
        for conn in 0..CONNECTIONS {
            let slot = sender.alloc().expect("one send buffer per connection");
            sender.slot_mut(slot)[..MESSAGE_BYTES].fill(conn as u8);
            sender.send(conn, slot, MESSAGE_BYTES).unwrap();
        }
        let started = Instant::now();
        while sender.pending_sends() > 0 {
            sender
                .poll(Some(Duration::from_millis(50)), &mut |_| Ok(()))
                .unwrap_or_else(|e| panic!("{spec}: sending: {e}"));
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{spec}: sender stuck"
            );
        }
        assert_eq!(
            sender.stats().bytes_sent,
            (CONNECTIONS * MESSAGE_BYTES) as u64
        );
        let received = receiver.join().unwrap();
        assert_eq!(received, vec![MESSAGE_BYTES; CONNECTIONS], "{spec}");
    }
}
