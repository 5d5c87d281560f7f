//! ringdb-io: the ring-per-thread I/O runtime of ringdb.
//!
//! - [`engine`]: `posix`, `libaio`, `uring-sync` and `uring` behind one [`Engine`] trait, with
//!   every io_uring switch of the paper in one [`IoConfig`].
//! - [`executor`]: a single-threaded executor whose tasks park on I/O, with adaptive batching.
//! - [`buf`]: page-aligned buffers and the registered [`FixedBufferPool`].
//! - [`target`]: opening files and block devices for (direct) I/O with clear refusals.
//! - [`probe`] and [`device`]: what this kernel and device support.
//! - [`counters`]: rdtsc, latency histograms, CPU time; [`iowq`]: io-wq workers seen.

pub mod affinity;
pub mod buf;
pub mod config;
pub mod counters;
pub mod device;
pub mod engine;
pub mod error;
pub mod executor;
pub mod iowq;
pub mod limits;
pub mod probe;
pub mod ring;
pub mod target;

pub use buf::{AlignedBuf, FixedBufferPool};
pub use config::{Batching, EngineKind, IoConfig, SetupMode, SqPoll};
pub use engine::{open_engine, Engine, EngineStats, FileId, IoCompletion, IoRequest, OpKind};
pub use engine::{SimDisk, SimFault, SimStats, SimTear};
pub use error::{IoError, Result};
pub use ring::{Ring, RingAddress, RingMessage, RingSetup, RingStats};
