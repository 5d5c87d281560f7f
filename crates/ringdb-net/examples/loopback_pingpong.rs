//! Round-trip latency over loopback TCP, epoll against io_uring: a server thread echoes every
//! message, the client measures the round trips and prints their percentiles per transport.
//!
//! ```sh
//! cargo run --release -p ringdb-net --example loopback_pingpong -- [ROUND_TRIPS] [MESSAGE_BYTES]
//! ```
//! Both ends run in this one process (the `ringdb pingpong` command puts them in two, which is
//! what the paper's figure measures); a transport this kernel refuses (io_uring disabled, say)
//! is reported and skipped.

use ringdb_net::pingpong::{self, PingResult, Proto, ServerSocket};
use ringdb_net::{NetConfig, NetError};
use std::time::Duration;

/// The transports compared, as specs.
const TRANSPORTS: [&str; 4] = ["epoll", "uring", "uring+regfds+regbufs", "uring-sqpoll"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let round_trips: u64 = args.next().map_or(Ok(20_000), |n| n.parse())?;
    let message_bytes: usize = args.next().map_or(Ok(8), |n| n.parse())?;
    let warmup = (round_trips / 10).max(100);
    println!(
        "TCP ping-pong over loopback, {message_bytes} B messages, {round_trips} round trips, {}",
        ringdb_net::machine_description()
    );
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9}",
        "transport", "p50 us", "p99 us", "p99.9 us", "sys/RTT"
    );
    for spec in TRANSPORTS {
        let mut config: NetConfig = spec.parse()?;
        config.io_timeout = Duration::from_secs(5);
        match ping(&config, message_bytes, round_trips, warmup) {
            Ok(result) => println!(
                "{spec:<22} {:>9.1} {:>9.1} {:>9.1} {:>9.2}",
                result.rtt_p50_us, result.rtt_p99_us, result.rtt_p999_us, result.syscalls_per_rtt
            ),
            Err(error @ (NetError::Ring(_) | NetError::Unsupported { .. })) => {
                println!("{spec:<22} skipped: {error}")
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// One ping-pong through `config` on both ends: the server in a thread, the client here.
fn ping(
    config: &NetConfig,
    message_bytes: usize,
    round_trips: u64,
    warmup: u64,
) -> Result<PingResult, NetError> {
    let socket = ServerSocket::bind(Proto::Tcp, "127.0.0.1:0")?;
    let addr = socket.local_addr()?;
    let server_config = config.clone();
    let server = std::thread::spawn(move || pingpong::serve(&server_config, socket, message_bytes));
    let client = pingpong::run_client(config, Proto::Tcp, addr, message_bytes, round_trips, warmup);
    // The client closed its connection: the server ends (with an error of its own when the
    // client could not open its transport, which the client's error already says).
    let served = server.join().expect("the ping-pong server thread panicked");
    let result = client?;
    served?;
    Ok(result)
}
