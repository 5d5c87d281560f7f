//! ringdb-io: the ring-per-thread I/O runtime of ringdb.
//!
//! - [`engine`]: `posix`, `libaio`, `uring-sync` and `uring` behind one [`Engine`] trait, with
//!   every io_uring switch of the paper in one [`IoConfig`].
//! - [`executor`]: a single-threaded executor whose tasks park on I/O, with adaptive batching.
//! - [`buf`]: page-aligned buffers and the registered [`FixedBufferPool`].
//! - [`target`]: opening files and block devices for (direct) I/O with clear refusals.
//! - [`sysfs`]: the few block-device queries opening targets and refusing switches need;
//!   [`limits`]: the kernel limits behind a refused ring.
//!
//! Only what runs belongs here. What reports on the machine (the probe, device descriptions,
//! io-wq sampling, latency histograms and tables) is the lab, in the `ringdb-lab` crate.

pub mod affinity;
pub mod buf;
pub mod config;
pub mod engine;
pub mod error;
pub mod executor;
pub mod limits;
pub mod ring;
pub mod sysfs;
pub mod target;

pub use buf::{AlignedBuf, FixedBufferPool};
pub use config::{Batching, EngineKind, IoConfig, SetupMode, SqPoll};
pub use engine::{open_engine, Engine, EngineStats, FileId, IoCompletion, IoRequest, OpKind};
pub use engine::{SimDisk, SimFault, SimStats, SimTear};
pub use error::{IoError, Result, Setting, SetupRefusal, Switch};
pub use ring::{Ring, RingAddress, RingMessage, RingSetup, RingStats};
