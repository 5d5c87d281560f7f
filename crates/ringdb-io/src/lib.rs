//! ringdb-io: the ring-per-thread I/O runtime of ringdb.
//!
//! Three layers, each usable alone:
//! - **Engines** ([`Engine`], opened by [`open_engine`] from an [`IoConfig`]): `posix`, `libaio`,
//!   `uring-sync`, `uring` and `uring-passthrough` (NVMe commands on `/dev/ngXnY`) behind one
//!   trait: push requests, submit them, reap completions. Every io_uring switch of the paper
//!   (setup mode, SQPOLL, IOPOLL, registered ring fd, files and buffers, forced async, batching,
//!   queue depth, CPU pinning) is a field of [`IoConfig`], off by default, so each can be measured
//!   alone. `auto` resolves when opened ([`open_engine_resolved`]): io_uring with the switches
//!   this machine allows, or `libaio`/`posix` where io_uring is blocked, reported as an
//!   [`EffectiveIo`] with a typed [`Fallback`] for each thing done without.
//! - **The ring core** ([`Ring`], built from a [`RingSetup`]): the one io_uring driver every
//!   io_uring engine and `ringdb-net`'s transports sit on: setup with typed refusals, counted
//!   enters, submission by policy, waiting out a full submission queue, reaping, and messages
//!   between rings (`IORING_OP_MSG_RING`, [`Ring::post_message`]).
//! - **The executor** ([`Runtime`], with the [`Io`] handle its tasks use): single-threaded; tasks
//!   park on I/O, requests are batched adaptively, and a buffer the kernel may still write into
//!   is never freed or reused before its completion (buffers pass by value into an I/O and come
//!   back with its result). Other threads wake a runtime through its [`Doorbell`] (an eventfd
//!   its engine's wait watches, or an `IORING_OP_MSG_RING` from another runtime's ring).
//!
//! Around them: [`Target`] opens files and block devices for direct I/O with clear refusals;
//! [`AlignedBuf`] and [`FixedBufferPool`] are page-aligned and registrable memory; [`SimDisk`]
//! is a simulated disk with power cuts, torn writes and injected errors for crash tests;
//! [`affinity`], [`limits`] and [`sysfs`] hold the few machine queries the runtime needs.
//! Errors are one typed [`IoError`] whose variants carry the cause as data ([`Switch`],
//! [`Setting`], paths, limits).
//!
//! Only what runs belongs here. What reports on the machine (the probe, device descriptions,
//! io-wq sampling, latency histograms and tables) is the lab, in the `ringdb-lab` crate.
//!
//! # Example
//!
//! Write a block and read it back through the executor, on io_uring where this kernel allows
//! it and with blocking `pread`/`pwrite` otherwise:
//!
//! ```
//! use ringdb_io::{AlignedBuf, EngineKind, FileId, IoConfig, Runtime};
//! use std::os::fd::AsRawFd;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = std::env::temp_dir().join(format!("ringdb-io-doc-{}", std::process::id()));
//! let file = std::fs::OpenOptions::new()
//!     .read(true)
//!     .write(true)
//!     .create(true)
//!     .truncate(true)
//!     .open(&path)?;
//! let mut runtime = Runtime::from_config(&IoConfig::new(EngineKind::Uring), &[file.as_raw_fd()], None)
//!     .or_else(|_| Runtime::from_config(&IoConfig::new(EngineKind::Posix), &[file.as_raw_fd()], None))?;
//! let io = runtime.io();
//! let read_back = runtime.block_on(async move {
//!     let mut block = AlignedBuf::new(4096);
//!     block.as_mut_slice().fill(42);
//!     let (written, _block) = io.write(FileId(0), 0, block).await;
//!     assert_eq!(written?, 4096);
//!     let (read, block) = io.read(FileId(0), 0, AlignedBuf::new(4096)).await;
//!     assert_eq!(read?, 4096);
//!     Ok::<_, ringdb_io::IoError>(block)
//! })??;
//! assert!(read_back.as_slice().iter().all(|&byte| byte == 42));
//! drop(runtime);
//! std::fs::remove_file(&path)?;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod affinity;
mod blocking_file;
mod buf;
mod config;
mod engine;
mod error;
mod executor;
mod huge_slice;
pub mod limits;
mod mapped;
mod path_kind;
mod ring;
pub mod sysfs;
mod target;

pub use blocking_file::BlockingFile;
pub use buf::{AlignedBuf, FixedBufferPool, PoolMapping, BUF_ALIGN, MAX_FIXED_BUFFERS};
pub use config::{
    adaptive_batch, adaptive_low_water, Batching, EngineKind, IoConfig, SetupMode, SqPoll,
    ADAPTIVE_MAX_BATCH, ADAPTIVE_PLUG_MIN, MAX_QUEUE_DEPTH,
};
pub use engine::{
    nvme_geometry, open_engine, open_engine_resolved, DoorbellWakes, EffectiveIo, Engine,
    EngineStats, Fallbacks, FileCommands, FileId, IoCompletion, IoRequest, LibaioEngine,
    NvmeCommands, NvmeGeometry, OpKind, PassthroughEngine, PosixEngine, Region, RegionEngine,
    RingCommands, RingEngine, SimBlockingFile, SimDisk, SimFault, SimStats, SimTear, Switches,
    UringEngine, MAX_FALLBACKS, RESERVED_USER_DATA_MIN, SIM_MAX_FILE_LEN,
};
pub use error::{Fallback, FallbackReason, IoError, Result, Setting, SetupRefusal, Switch};
pub use executor::{
    yield_now, Doorbell, DoorbellRung, Io, IoBuf, JoinHandle, PoolBuf, Runtime, RuntimeStats,
    SubmitTogether, YieldNow,
};
pub use huge_slice::{HugeSlice, HUGE_SLICE_MIN_BYTES};
pub use path_kind::PathKind;
pub use ring::{Ring, RingAddress, RingMessage, RingSetup, RingStats};
pub use target::{check_iopoll, nvme_block_device_of_char, Target, TargetOptions};
