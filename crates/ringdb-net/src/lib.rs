//! ringdb-net: network I/O for ringdb (paper Sec. 4).
//!
//! - **Transports** ([`Transport`], opened by [`open_transport`] over connected sockets
//!   ([`Conn`]) from a [`NetConfig`]): one interface over `epoll`, `uring`, `uring+zc-send`,
//!   `uring+multishot` and (probed, refused without a header-split NIC, see
//!   [`zero_copy_receive_refusal`]) `uring+zc-recv`. Every io_uring network switch (setup
//!   mode, poll-first, registered files and buffers, NAPI) is a field of [`NetConfig`], off by
//!   default and parsed from one spec string such as `uring-sqpoll+regfds+regbufs`, so each can
//!   be measured alone. A transport owns its send buffers and receive memory and never reuses
//!   memory the kernel may still read or write.
//! - **Benchmarks**, each a module: [`shuffle`], the distributed shuffle and join (Figs. 10-13)
//!   with nodes as threads or processes; [`pingpong`], round-trip latency with small messages
//!   (Fig. 15); [`sweep`], CPU cycles per byte against message size (Fig. 16).
//! - **The wire format** of the shuffle, [`frame`]: a checksummed header and a stream decoder
//!   that refuses anything malformed, whatever the read sizes.
//!
//! Errors are one typed [`NetError`] whose variants carry the cause as data ([`NetSetting`],
//! [`NetSwitch`], [`FrameFault`], [`ChildProcess`], ...); io_uring failures arrive as
//! [`NetError::Ring`] with the I/O layer's own typed error.
//!
//! `unsafe` lives only in the socket and memory wrappers and the transports (the I/O layer),
//! each block with its reason.
//!
//! # Example
//!
//! One message from one end of a loopback TCP connection to the other, through the `uring`
//! transport where this kernel allows io_uring and through `epoll` otherwise:
//!
//! ```
//! use ringdb_net::{open_transport, Conn, Event, NetConfig, Transport};
//! use std::net::{TcpListener, TcpStream};
//! use std::time::Duration;
//!
//! /// A transport over `socket`: io_uring if it can be set up here, else epoll.
//! fn open(socket: &TcpStream) -> Result<Box<dyn Transport>, Box<dyn std::error::Error>> {
//!     let uring: NetConfig = "uring".parse()?;
//!     match open_transport(&uring, vec![Conn::tcp(socket.try_clone()?)?]) {
//!         Ok(transport) => Ok(transport),
//!         Err(_) => Ok(open_transport(&"epoll".parse()?, vec![Conn::tcp(socket.try_clone()?)?])?),
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let client = TcpStream::connect(listener.local_addr()?)?;
//! let (server, _) = listener.accept()?;
//! let mut sender = open(&client)?;
//! let mut receiver = open(&server)?;
//!
//! // Fill a send slot and hand it over: the transport owns it until the kernel is done.
//! let message = b"hello over the ring";
//! let slot = sender.alloc().expect("a fresh transport has free send slots");
//! sender.slot_mut(slot)[..message.len()].copy_from_slice(message);
//! sender.send(0, slot, message.len())?;
//!
//! // Poll both ends (the sender submits its send when polled) until the bytes arrived.
//! let mut received = Vec::new();
//! for _attempt in 0..100 {
//!     sender.poll(Some(Duration::ZERO), &mut |_| Ok(()))?;
//!     receiver.poll(Some(Duration::from_millis(100)), &mut |event| {
//!         if let Event::Recv { data, .. } = event {
//!             received.extend_from_slice(data);
//!         }
//!         Ok(())
//!     })?;
//!     if received.len() == message.len() {
//!         break;
//!     }
//! }
//! assert_eq!(received, message);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod config;
mod error;
pub mod frame;
pub mod pingpong;
mod report;
pub mod shuffle;
pub mod sweep;
mod sys;
mod transport;

pub use config::{NetConfig, TransportKind, DEFAULT_SQPOLL_IDLE_MS};
pub use error::{
    ChildProblem, ChildProcess, CloseStage, FrameFault, NetError, NetSetting, NetSwitch,
    NodeFailure, Result, SpecPart, ZcRecvRefusal,
};
pub use report::progress;
pub use shuffle::cluster::Children;
pub use sys::{machine_description, set_linger_zero, set_socket_buffers, Conn};
pub use transport::{
    open_transport, zero_copy_receive_refusal, Event, Handler, Transport, TransportStats,
};
