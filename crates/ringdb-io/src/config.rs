//! `IoConfig`: one engine plus every io_uring switch of the paper, each usable alone.

use crate::error::{IoError, Result, Setting, Switch};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Upper bound on the queue depth of one ring (io_uring caps SQ entries at 32768).
pub const MAX_QUEUE_DEPTH: u32 = 32768;

/// Which kernel interface carries the I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// Blocking `pread`/`pwrite`, one I/O at a time per thread (the baseline).
    Posix,
    /// Linux AIO through raw `io_setup`/`io_submit`/`io_getevents` syscalls.
    Libaio,
    /// io_uring used synchronously: submit one request and wait for it (the paper's first bar).
    UringSync,
    /// io_uring, asynchronous with batched submission.
    Uring,
    /// io_uring NVMe passthrough: NVMe read/write/flush commands as `URING_CMD` on the NVMe
    /// generic char device (`/dev/ngXnY`), on an SQE128/CQE32 ring.
    UringPassthrough,
    /// `uring` where io_uring works here, resolved when the engine is opened: where io_uring is
    /// unavailable (disabled by sysctl, blocked by seccomp, absent) `libaio` for `O_DIRECT`
    /// files, else `posix`; a switch this machine refuses is dropped instead of failing. What
    /// runs is an [`crate::EffectiveIo`].
    Auto,
}

impl EngineKind {
    /// The engines that run on any file or block device (`uring-passthrough` needs an NVMe
    /// generic char device and is not among them).
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Posix,
        EngineKind::Libaio,
        EngineKind::UringSync,
        EngineKind::Uring,
    ];

    /// The engine's name, as [`FromStr`] parses it.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Posix => "posix",
            EngineKind::Libaio => "libaio",
            EngineKind::UringSync => "uring-sync",
            EngineKind::Uring => "uring",
            EngineKind::UringPassthrough => "uring-passthrough",
            EngineKind::Auto => "auto",
        }
    }

    /// Whether the engine is an io_uring one (takes io_uring switches). `auto` is not: it may
    /// resolve to an engine without io_uring.
    pub fn is_uring(self) -> bool {
        matches!(
            self,
            EngineKind::UringSync | EngineKind::Uring | EngineKind::UringPassthrough
        )
    }

    /// Whether io_uring switches may be asked of the engine: the io_uring engines, and `auto`
    /// (which keeps each switch where this machine allows it, and drops it where not).
    pub fn accepts_uring_switches(self) -> bool {
        self.is_uring() || self == EngineKind::Auto
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EngineKind {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "posix" | "psync" => Ok(EngineKind::Posix),
            "libaio" => Ok(EngineKind::Libaio),
            "uring-sync" => Ok(EngineKind::UringSync),
            "uring" | "io_uring" => Ok(EngineKind::Uring),
            "uring-passthrough" | "io_uring_cmd" => Ok(EngineKind::UringPassthrough),
            "auto" => Ok(EngineKind::Auto),
            _ => Err(IoError::Unparsable {
                what: "engine",
                value: s.to_string(),
                expected: "posix, libaio, uring-sync, uring, uring-passthrough or auto",
            }),
        }
    }
}

/// How completions' task work is run (paper Sec. 2.1, "Avoiding preemptions").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SetupMode {
    /// Task work runs on any kernel entry, possibly by IPI.
    #[default]
    Default,
    /// `IORING_SETUP_COOP_TASKRUN`: no IPIs; task work waits for the next kernel entry.
    Coop,
    /// `IORING_SETUP_DEFER_TASKRUN | SINGLE_ISSUER`: task work only in `io_uring_enter`.
    Defer,
}

impl SetupMode {
    /// The mode's name, as [`FromStr`] parses it.
    pub fn name(self) -> &'static str {
        match self {
            SetupMode::Default => "default",
            SetupMode::Coop => "coop",
            SetupMode::Defer => "defer",
        }
    }
}

impl FromStr for SetupMode {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "default" => Ok(SetupMode::Default),
            "coop" => Ok(SetupMode::Coop),
            "defer" => Ok(SetupMode::Defer),
            _ => Err(IoError::Unparsable {
                what: "setup mode",
                value: s.to_string(),
                expected: "default, coop or defer",
            }),
        }
    }
}

/// A kernel thread polls the submission queue (`IORING_SETUP_SQPOLL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqPoll {
    /// Milliseconds the poller spins without work before it sleeps.
    pub idle_ms: u32,
    /// CPU to pin the poller to (`IORING_SETUP_SQ_AFF`).
    pub cpu: Option<u32>,
}

/// When queued submissions are handed to the kernel. Its serde form is its text (`"each"`,
/// `"adaptive"`, `"fixed(16)"`; `"fixed:16"` is read too), so a config file reads as the
/// command line does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Batching {
    /// One `io_uring_enter` per request.
    Each,
    /// Paper Sec. 3.3.3: flush early while few I/Os are outstanding (keep the device busy),
    /// defer while many are (amortise the syscall).
    #[default]
    Adaptive,
    /// Flush once `n` requests are queued (or when nothing else can run).
    Fixed(u32),
}

impl fmt::Display for Batching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Batching::Each => f.write_str("each"),
            Batching::Adaptive => f.write_str("adaptive"),
            Batching::Fixed(n) => write!(f, "fixed({n})"),
        }
    }
}

impl FromStr for Batching {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || IoError::Unparsable {
            what: "batching policy",
            value: s.to_string(),
            expected: "each, adaptive or fixed(N) (also fixed:N)",
        };
        match s {
            "each" => Ok(Batching::Each),
            "adaptive" => Ok(Batching::Adaptive),
            _ => {
                let n = s
                    .strip_prefix("fixed(")
                    .and_then(|r| r.strip_suffix(')'))
                    .or_else(|| s.strip_prefix("fixed:"))
                    .or_else(|| s.strip_prefix("fixed="))
                    .ok_or_else(bad)?;
                let n: u32 = n.parse().map_err(|_| bad())?;
                if n == 0 || n > MAX_QUEUE_DEPTH {
                    return Err(IoError::OutOfRange {
                        setting: Setting::BatchSize,
                        value: n as u64,
                        min: 1,
                        max: MAX_QUEUE_DEPTH as u64,
                    });
                }
                Ok(Batching::Fixed(n))
            }
        }
    }
}

impl From<Batching> for String {
    fn from(batching: Batching) -> String {
        batching.to_string()
    }
}

impl TryFrom<String> for Batching {
    type Error = IoError;
    fn try_from(text: String) -> Result<Batching> {
        text.parse()
    }
}

impl Batching {
    /// Whether the `pending` requests queued so far should go to the kernel now rather than
    /// with the next wait. `in_flight` counts pending ones too; `depth` is the ring's limit.
    ///
    /// Adaptive (paper Sec. 3.3.3): while fewer than a quarter of `depth` requests are at the
    /// device, each new request is flushed at once so the device does not idle; above that,
    /// requests accumulate and go out together (with the loop's next enter, or when
    /// [`adaptive_batch`]`(depth)` are queued).
    #[inline]
    pub fn flush_now(self, pending: usize, in_flight: usize, depth: usize) -> bool {
        debug_assert!(pending <= in_flight);
        if pending == 0 {
            return false;
        }
        match self {
            Batching::Each => true,
            Batching::Fixed(n) => pending >= n as usize,
            Batching::Adaptive => {
                let at_device = in_flight - pending;
                at_device < adaptive_low_water(depth) || pending >= adaptive_batch(depth)
            }
        }
    }

    /// Whether the `pending` requests still queued at the end of an executor pass go to the
    /// kernel now (`pass_pushed`: the pass queued something new). A pass that queued nothing
    /// always flushes, so a task spinning on `yield_now` cannot hold back requests it waits for.
    ///
    /// Adaptive: while at least the low-water mark is at the device, fewer than
    /// [`adaptive_batch`]`(depth)` requests wait for the loop's next enter (the reap that runs
    /// completions' task work, or the wait) or a later pass instead of taking an enter of their
    /// own. Every enter that hands requests over may ring the device's doorbell, which in a VM is
    /// an exit to the host: out of memory with 128 tasks on a virtio disk, flushing three or more
    /// at the end of every pass rang it far more often per page read than raw reads at the same
    /// depth do; holding them cut both the enters and the cycles per operation (measured:
    /// docs/results/issue15-cpu-per-op.md, fifteenth session). Held requests wait at most until the
    /// loop runs out of ready tasks, while a quarter of the depth keeps the device busy.
    pub fn flush_at_end_of_pass(
        self,
        pending: usize,
        in_flight: usize,
        depth: usize,
        pass_pushed: bool,
    ) -> bool {
        debug_assert!(pending <= in_flight);
        pending > 0
            && match self {
                Batching::Each => true,
                Batching::Fixed(n) => pending >= n as usize || in_flight >= depth || !pass_pushed,
                Batching::Adaptive => {
                    let at_device = in_flight - pending;
                    pending >= adaptive_batch(depth)
                        || at_device < adaptive_low_water(depth)
                        || !pass_pushed
                }
            }
    }
}

/// The fewest requests the kernel submits under a block plug (`io_submit_state_start`: more
/// than two): the smallest batch the adaptive policy lets accumulate ([`adaptive_batch`]).
pub const ADAPTIVE_PLUG_MIN: usize = 3;

/// Largest batch the adaptive policy lets accumulate before it flushes, at any depth.
pub const ADAPTIVE_MAX_BATCH: usize = 16;

/// Requests the adaptive policy lets accumulate while the device is busy before it flushes:
/// an eighth of `depth`, at least [`ADAPTIVE_PLUG_MIN`], at most [`ADAPTIVE_MAX_BATCH`] (16
/// at the default depth of 128, 8 at 64).
#[inline]
pub fn adaptive_batch(depth: usize) -> usize {
    (depth / 8).clamp(ADAPTIVE_PLUG_MIN, ADAPTIVE_MAX_BATCH)
}

/// Requests at the device below which the adaptive policy flushes at once.
#[inline]
pub fn adaptive_low_water(depth: usize) -> usize {
    (depth / 4).max(1)
}

/// One engine and its switches. Every io_uring feature is off by default so that each can be
/// turned on alone and measured against the same baseline. Deserialized, a missing field is
/// the default's and an unknown one is refused (a config file's misspelt switch must not be
/// silently off).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IoConfig {
    /// Which kernel interface carries the I/O.
    pub engine: EngineKind,
    /// How completions' task work runs (io_uring only).
    pub setup: SetupMode,
    /// A kernel thread polling the submission queue (io_uring only).
    pub sqpoll: Option<SqPoll>,
    /// `IORING_REGISTER_RING_FDS`: enter the ring by index instead of by fd.
    pub register_ring_fd: bool,
    /// `IORING_REGISTER_FILES`: requests name files by index (`IOSQE_FIXED_FILE`).
    pub register_files: bool,
    /// `IORING_REGISTER_BUFFERS`: `READ_FIXED`/`WRITE_FIXED` into pre-pinned buffers.
    pub fixed_buffers: bool,
    /// `IORING_SETUP_IOPOLL`: completions are polled from the device (needs poll queues, O_DIRECT).
    pub iopoll: bool,
    /// `IOSQE_ASYNC` on every request: force the io-wq worker path (for measuring it).
    pub force_async: bool,
    /// When queued requests are handed to the kernel.
    pub batching: Batching,
    /// Maximum requests in flight on this ring (SQ entries).
    pub queue_depth: u32,
    /// CQ entries; default is twice the SQ.
    pub cq_size: Option<u32>,
    /// Pin the ring's thread, and its io-wq workers (`IORING_REGISTER_IOWQ_AFF`), to this CPU.
    pub cpu: Option<u32>,
}

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            engine: EngineKind::Uring,
            setup: SetupMode::Default,
            sqpoll: None,
            register_ring_fd: false,
            register_files: false,
            fixed_buffers: false,
            iopoll: false,
            force_async: false,
            batching: Batching::Adaptive,
            queue_depth: 128,
            cq_size: None,
            cpu: None,
        }
    }
}

impl IoConfig {
    /// `engine` with every switch off.
    pub fn new(engine: EngineKind) -> Self {
        IoConfig {
            engine,
            ..IoConfig::default()
        }
    }

    /// Rejects combinations that cannot mean anything, before any resource is created.
    pub fn validate(&self) -> Result<()> {
        if self.queue_depth == 0 || self.queue_depth > MAX_QUEUE_DEPTH {
            return Err(IoError::OutOfRange {
                setting: Setting::QueueDepth,
                value: self.queue_depth as u64,
                min: 1,
                max: MAX_QUEUE_DEPTH as u64,
            });
        }
        if let Some(cq) = self.cq_size {
            if cq < self.queue_depth || cq > 4 * MAX_QUEUE_DEPTH {
                return Err(IoError::OutOfRange {
                    setting: Setting::CompletionQueueSize,
                    value: cq as u64,
                    min: self.queue_depth as u64,
                    max: 4 * MAX_QUEUE_DEPTH as u64,
                });
            }
        }
        if !self.engine.accepts_uring_switches() {
            let uring_only = [
                (Switch::SetupMode, self.setup != SetupMode::Default),
                (Switch::Sqpoll, self.sqpoll.is_some()),
                (Switch::RegisteredRingFd, self.register_ring_fd),
                (Switch::RegisteredFiles, self.register_files),
                (Switch::FixedBuffers, self.fixed_buffers),
                (Switch::Iopoll, self.iopoll),
                (Switch::ForceAsync, self.force_async),
            ];
            if let Some((switch, _)) = uring_only.iter().find(|(_, on)| *on) {
                return Err(IoError::SwitchNeedsUring {
                    switch: *switch,
                    engine: self.engine,
                });
            }
        }
        if self.sqpoll.is_some() && self.setup == SetupMode::Defer {
            return Err(IoError::Conflict {
                first: Switch::Sqpoll,
                second: Switch::SetupMode,
                reason: "DEFER_TASKRUN needs the submitting task to run completions, which the SQ polling thread is not",
            });
        }
        Ok(())
    }

    /// Requests this engine keeps in flight at most.
    pub fn effective_depth(&self) -> u32 {
        match self.engine {
            EngineKind::Posix | EngineKind::UringSync => 1,
            EngineKind::Libaio
            | EngineKind::Uring
            | EngineKind::UringPassthrough
            | EngineKind::Auto => self.queue_depth,
        }
    }

    /// A short label such as `uring+defer+fixedbufs+regfiles`.
    pub fn label(&self) -> String {
        let mut s = self.engine.name().to_string();
        if self.setup != SetupMode::Default {
            s.push('+');
            s.push_str(self.setup.name());
        }
        if self.sqpoll.is_some() {
            s.push_str("+sqpoll");
        }
        if self.register_ring_fd {
            s.push_str("+regring");
        }
        if self.register_files {
            s.push_str("+regfiles");
        }
        if self.fixed_buffers {
            s.push_str("+fixedbufs");
        }
        if self.iopoll {
            s.push_str("+iopoll");
        }
        if self.force_async {
            s.push_str("+async");
        }
        if matches!(
            self.engine,
            EngineKind::Uring | EngineKind::UringPassthrough | EngineKind::Auto
        ) && self.batching != Batching::Adaptive
        {
            s.push_str(&format!("+batch={}", self.batching));
        }
        if let Some(cpu) = self.cpu {
            s.push_str(&format!("@cpu{cpu}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_batching() {
        assert_eq!("each".parse::<Batching>().unwrap(), Batching::Each);
        assert_eq!("fixed(8)".parse::<Batching>().unwrap(), Batching::Fixed(8));
        assert_eq!("fixed:16".parse::<Batching>().unwrap(), Batching::Fixed(16));
        assert!("fixed(0)".parse::<Batching>().is_err());
        assert!("sometimes".parse::<Batching>().is_err());
    }

    #[test]
    fn uring_switch_on_posix_is_refused() {
        let mut c = IoConfig::new(EngineKind::Posix);
        c.fixed_buffers = true;
        let e = c.validate().unwrap_err();
        assert!(
            matches!(
                e,
                IoError::SwitchNeedsUring {
                    switch: Switch::FixedBuffers,
                    engine: EngineKind::Posix
                }
            ),
            "{e}"
        );
        assert!(!e.to_string().contains("--"), "{e}");
    }

    #[test]
    fn adaptive_flushes_early_only_while_the_device_is_starved() {
        let a = Batching::Adaptive;
        // 32 deep, nothing at the device: flush the first refill at once.
        assert!(a.flush_now(1, 1, 32));
        // 20 at the device, 3 queued: keep accumulating; the fourth (32 / 8) goes.
        assert!(!a.flush_now(3, 23, 32));
        assert!(a.flush_now(4, 24, 32));
        // 128 deep: batches of 16; 64 deep: of 8; shallow rings never below 3.
        assert!(!a.flush_now(15, 100, 128));
        assert!(a.flush_now(16, 100, 128));
        assert!(!a.flush_now(7, 50, 64));
        assert!(a.flush_now(8, 50, 64));
        assert_eq!((adaptive_batch(4), adaptive_batch(1024)), (3, 16));
        // Nothing queued: nothing to flush.
        assert!(!a.flush_now(0, 24, 32));
        assert!(Batching::Each.flush_now(1, 30, 32));
        assert!(!Batching::Fixed(8).flush_now(7, 30, 32));
        assert!(Batching::Fixed(8).flush_now(8, 30, 32));
    }

    #[test]
    fn adaptive_holds_a_partial_batch_at_the_end_of_a_pass_only_while_the_device_is_busy() {
        let a = Batching::Adaptive;
        // 20 at the device (32 deep): up to three queued wait for more, a batch of four goes.
        assert!(!a.flush_at_end_of_pass(1, 21, 32, true));
        assert!(!a.flush_at_end_of_pass(3, 23, 32, true));
        assert!(a.flush_at_end_of_pass(4, 24, 32, true));
        // 100 at the device (128 deep): fifteen wait, sixteen go.
        assert!(!a.flush_at_end_of_pass(15, 115, 128, true));
        assert!(a.flush_at_end_of_pass(16, 116, 128, true));
        // The device short of requests (4 < 32 / 4): flush even one.
        assert!(a.flush_at_end_of_pass(1, 5, 32, true));
        // A pass that queued nothing new flushes what is left.
        assert!(a.flush_at_end_of_pass(1, 21, 32, false));
        assert!(!a.flush_at_end_of_pass(0, 20, 32, false));
        // The other policies as before.
        assert!(Batching::Each.flush_at_end_of_pass(1, 21, 32, true));
        assert!(!Batching::Fixed(8).flush_at_end_of_pass(7, 27, 32, true));
        assert!(Batching::Fixed(8).flush_at_end_of_pass(7, 32, 32, true));
        assert!(Batching::Fixed(8).flush_at_end_of_pass(7, 27, 32, false));
    }

    #[test]
    fn passthrough_is_an_io_uring_engine() {
        let e: EngineKind = "uring-passthrough".parse().unwrap();
        assert_eq!(e, EngineKind::UringPassthrough);
        assert_eq!(e.name().parse::<EngineKind>().unwrap(), e);
        assert!(e.is_uring());
        let mut c = IoConfig::new(e);
        c.fixed_buffers = true;
        c.iopoll = true;
        c.queue_depth = 32;
        c.validate().unwrap();
        assert_eq!(c.effective_depth(), 32);
        assert_eq!(c.label(), "uring-passthrough+fixedbufs+iopoll");
    }

    #[test]
    fn auto_parses_and_takes_uring_switches() {
        let e: EngineKind = "auto".parse().unwrap();
        assert_eq!(e, EngineKind::Auto);
        assert_eq!(e.to_string(), "auto");
        assert!(!e.is_uring());
        assert!(e.accepts_uring_switches());
        let mut c = IoConfig::new(e);
        c.fixed_buffers = true;
        c.sqpoll = Some(SqPoll {
            idle_ms: 10,
            cpu: None,
        });
        c.validate().unwrap();
        assert_eq!(c.label(), "auto+sqpoll+fixedbufs");
        c.setup = SetupMode::Defer;
        assert!(matches!(c.validate(), Err(IoError::Conflict { .. })));
    }

    #[test]
    fn zero_depth_is_refused() {
        let mut c = IoConfig::new(EngineKind::Uring);
        c.queue_depth = 0;
        assert!(c.validate().is_err());
    }
}
