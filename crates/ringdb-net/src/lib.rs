//! ringdb-net: network I/O for ringdb (paper Sec. 4).
//!
//! - [`transport`]: one interface over `epoll`, `uring`, `uring+zc-send`, `uring+multishot` and
//!   (probed, refused without a header-split NIC) `uring+zc-recv`, with the io_uring switches of
//!   [`config::NetConfig`] (setup mode, poll-first, registered files and buffers, NAPI).
//! - [`shuffle`]: the distributed shuffle and join (Figs. 10-13), nodes as threads or processes.
//! - [`pingpong`]: round-trip latency with small messages (Fig. 15).
//! - [`sweep`]: CPU cycles per byte against message size (Fig. 16).
//!
//! `unsafe` lives only in [`sys`] and [`transport`] (the I/O layer), each block with its reason.

pub mod config;
pub mod error;
pub mod frame;
pub mod pingpong;
pub mod report;
pub mod shuffle;
pub mod sweep;
pub mod sys;
pub mod transport;

pub use config::{NetConfig, TransportKind};
pub use error::{NetError, Result};
