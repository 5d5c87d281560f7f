//! Transport selection and every io_uring network switch, parsed from one spec string such as
//! `epoll`, `uring+zc-send`, `uring-sqpoll+regfds+regbufs` or `uring-defer+multishot+pollfirst`.

use crate::error::{NetError, NetSetting, NetSwitch, Result, SpecPart};
use ringdb_io::{SetupMode, SqPoll};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How bytes move between user space and the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TransportKind {
    /// Readiness (`epoll_wait`) plus non-blocking `send`/`recv`.
    Epoll,
    /// `IORING_OP_SEND` / `IORING_OP_RECV` (or WRITE_FIXED / READ_FIXED with `regbufs`).
    Uring,
    /// `IORING_OP_SEND_ZC` from registered buffers; a buffer is reused only after its notif CQE.
    UringZcSend,
    /// Multishot `IORING_OP_RECV` drawing from a provided-buffer ring (`IORING_REGISTER_PBUF_RING`).
    UringMultishot,
    /// Zero-copy receive (zcrx): needs a NIC with header split; probed and refused elsewhere.
    UringZcRecv,
}

impl TransportKind {
    /// Every transport, in the order the benchmarks report them.
    pub const ALL: [TransportKind; 5] = [
        TransportKind::Epoll,
        TransportKind::Uring,
        TransportKind::UringZcSend,
        TransportKind::UringMultishot,
        TransportKind::UringZcRecv,
    ];

    /// The transport's spec word (`epoll`, `uring+zc-send`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Epoll => "epoll",
            TransportKind::Uring => "uring",
            TransportKind::UringZcSend => "uring+zc-send",
            TransportKind::UringMultishot => "uring+multishot",
            TransportKind::UringZcRecv => "uring+zc-recv",
        }
    }

    /// Whether the transport runs on io_uring.
    pub fn is_uring(self) -> bool {
        self != TransportKind::Epoll
    }

    /// The spec switch that selects this transport on a uring base (`None` for the plain
    /// ones: `epoll`, `uring`).
    pub fn switch(self) -> Option<NetSwitch> {
        match self {
            TransportKind::Epoll | TransportKind::Uring => None,
            TransportKind::UringZcSend => Some(NetSwitch::ZeroCopySend),
            TransportKind::UringMultishot => Some(NetSwitch::Multishot),
            TransportKind::UringZcRecv => Some(NetSwitch::ZeroCopyReceive),
        }
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How long an idle SQ polling thread spins before it sleeps.
pub const DEFAULT_SQPOLL_IDLE_MS: u32 = 100;

/// Everything a transport needs to know. Each switch is off by default.
#[derive(Clone, Debug, Serialize)]
pub struct NetConfig {
    /// How bytes move between user space and the socket.
    pub transport: TransportKind,
    /// How the ring runs completion task work (the transports always add
    /// `IORING_SETUP_SINGLE_ISSUER`: one thread drives each ring). Paper Sec. 4.6: DeferTR.
    pub setup: SetupMode,
    /// A kernel thread polls the submission queue (paper Sec. 4.6: SQPoll).
    pub sqpoll: Option<SqPoll>,
    /// `IORING_RECVSEND_POLL_FIRST` on send/recv SQEs.
    pub poll_first: bool,
    /// Register the sockets (`IORING_REGISTER_FILES`) and address them by index.
    pub reg_files: bool,
    /// Register the send/receive memory (`IORING_REGISTER_BUFFERS`). Implied by zc-send.
    pub reg_bufs: bool,
    /// NAPI busy poll (`IORING_REGISTER_NAPI`); only where the device has NAPI contexts.
    pub napi: bool,
    /// Size of one send buffer (slot), in bytes.
    pub send_buf_size: usize,
    /// How many send buffers (slots) there are.
    pub send_bufs: usize,
    /// Per-connection receive buffer (single-shot), or the size of one provided buffer.
    pub recv_buf_size: usize,
    /// Provided buffers in the multishot ring (a power of two).
    pub recv_bufs: usize,
    /// Submission queue entries of each ring.
    pub ring_entries: u32,
    /// Longest wait without any progress before an operation gives up with a timeout error.
    pub io_timeout: Duration,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            transport: TransportKind::Uring,
            setup: SetupMode::Defer,
            sqpoll: None,
            poll_first: false,
            reg_files: false,
            reg_bufs: false,
            napi: false,
            send_buf_size: 64 * 1024,
            send_bufs: 16,
            recv_buf_size: 64 * 1024,
            recv_bufs: 64,
            ring_entries: 256,
            io_timeout: Duration::from_secs(10),
        }
    }
}

impl NetConfig {
    /// Parses a spec: a base (`epoll`, `uring` = `uring-defer`, `uring-coop`, `uring-default`,
    /// `uring-sqpoll`) followed by
    /// `+`-separated switches (`zc-send`, `multishot`, `zc-recv`, `regfds`, `regbufs`, `napi`,
    /// `pollfirst`). Sizes keep their current values.
    pub fn apply_spec(&mut self, spec: &str) -> Result<()> {
        let mut parts = spec.split('+').map(str::trim);
        let base = parts.next().unwrap_or("");
        match base {
            "epoll" => self.transport = TransportKind::Epoll,
            "uring" | "uring-defer" | "io_uring" => {
                self.transport = TransportKind::Uring;
                self.set_ring(SetupMode::Defer, false);
            }
            "uring-coop" => {
                self.transport = TransportKind::Uring;
                self.set_ring(SetupMode::Coop, false);
            }
            "uring-default" => {
                self.transport = TransportKind::Uring;
                self.set_ring(SetupMode::Default, false);
            }
            "uring-sqpoll" => {
                self.transport = TransportKind::Uring;
                self.set_ring(SetupMode::Default, true);
            }
            other => {
                return Err(NetError::UnknownTransportWord {
                    spec: spec.to_string(),
                    part: SpecPart::Base,
                    word: other.to_string(),
                })
            }
        }
        for sw in parts {
            match sw {
                "zc-send" | "zcsend" => self.set_kind(TransportKind::UringZcSend)?,
                "multishot" => self.set_kind(TransportKind::UringMultishot)?,
                "zc-recv" | "zcrx" => self.set_kind(TransportKind::UringZcRecv)?,
                "regfds" | "regfiles" => self.reg_files = true,
                "regbufs" => self.reg_bufs = true,
                "napi" => self.napi = true,
                "pollfirst" | "poll-first" => self.poll_first = true,
                "defer" => self.set_ring(SetupMode::Defer, false),
                "sqpoll" => self.set_ring(SetupMode::Default, true),
                other => {
                    return Err(NetError::UnknownTransportWord {
                        spec: spec.to_string(),
                        part: SpecPart::Switch,
                        word: other.to_string(),
                    })
                }
            }
        }
        self.validate()
    }

    /// An io_uring transport with this setup mode, with or without an SQ polling thread.
    fn set_ring(&mut self, setup: SetupMode, sqpoll: bool) {
        self.setup = setup;
        self.sqpoll = sqpoll.then_some(SqPoll {
            idle_ms: DEFAULT_SQPOLL_IDLE_MS,
            cpu: None,
        });
    }

    /// Selects the transport `kind` (one of the `+switch` transports) on a uring base.
    fn set_kind(&mut self, kind: TransportKind) -> Result<()> {
        let switch = kind.switch().expect("set_kind is given a switch transport");
        if self.transport == TransportKind::Epoll {
            return Err(NetError::NeedsUring { switch });
        }
        if let Some(first) = self.transport.switch() {
            return Err(NetError::Conflict {
                first,
                second: switch,
                reason: "each is a transport of its own",
            });
        }
        self.transport = kind;
        Ok(())
    }

    /// The canonical spec of this configuration (round-trips through [`Self::apply_spec`]).
    pub fn spec(&self) -> String {
        let mut s = match (self.transport, self.sqpoll, self.setup) {
            (TransportKind::Epoll, _, _) => "epoll".to_string(),
            (_, Some(_), _) => "uring-sqpoll".to_string(),
            (_, None, SetupMode::Defer) => "uring".to_string(),
            (_, None, SetupMode::Coop) => "uring-coop".to_string(),
            (_, None, SetupMode::Default) => "uring-default".to_string(),
        };
        match self.transport {
            TransportKind::UringZcSend => s.push_str("+zc-send"),
            TransportKind::UringMultishot => s.push_str("+multishot"),
            TransportKind::UringZcRecv => s.push_str("+zc-recv"),
            _ => {}
        }
        for (on, name) in [
            (self.reg_files, "+regfds"),
            (self.reg_bufs, "+regbufs"),
            (self.napi, "+napi"),
            (self.poll_first, "+pollfirst"),
        ] {
            if on {
                s.push_str(name);
            }
        }
        s
    }

    /// Refuses combinations that mean nothing, before any resource exists.
    pub fn validate(&self) -> Result<()> {
        self.validate_switches()?;
        NetError::check_range(
            NetSetting::SendBufferSize,
            self.send_buf_size,
            1,
            u32::MAX as usize / 2,
        )?;
        NetError::check_range(NetSetting::SendBuffers, self.send_bufs, 1, 4096)?;
        NetError::check_range(
            NetSetting::ReceiveBufferSize,
            self.recv_buf_size,
            64,
            1 << 30,
        )?;
        if !self.recv_bufs.is_power_of_two() || self.recv_bufs > MAX_RECV_BUFS {
            return Err(NetError::NotPowerOfTwo {
                setting: NetSetting::ReceiveBuffers,
                value: self.recv_bufs as u64,
                max: MAX_RECV_BUFS as u64,
            });
        }
        // Both factors are bounded above, so the product cannot overflow.
        let send_memory = self.send_buf_size * self.send_bufs;
        NetError::check_range(NetSetting::SendMemory, send_memory, 1, 1 << 30)
    }

    /// Refuses io_uring switches on epoll, and switches that exclude each other.
    fn validate_switches(&self) -> Result<()> {
        if self.transport == TransportKind::Epoll {
            let uring_only = [
                (self.reg_files, NetSwitch::RegisteredFiles),
                (self.reg_bufs, NetSwitch::RegisteredBuffers),
                (self.napi, NetSwitch::Napi),
                (self.poll_first, NetSwitch::PollFirst),
                (self.sqpoll.is_some(), NetSwitch::Sqpoll),
            ];
            if let Some(&(_, switch)) = uring_only.iter().find(|(on, _)| *on) {
                return Err(NetError::NeedsUring { switch });
            }
        }
        if self.transport == TransportKind::Uring && self.reg_bufs && self.poll_first {
            return Err(NetError::Conflict {
                first: NetSwitch::RegisteredBuffers,
                second: NetSwitch::PollFirst,
                reason: "uring+regbufs sends and receives with WRITE_FIXED/READ_FIXED, which have no poll-first flag",
            });
        }
        Ok(())
    }
}

/// The most provided buffers the multishot ring takes.
const MAX_RECV_BUFS: usize = 32768;

/// Parses a spec onto the default configuration ([`NetConfig::apply_spec`]).
impl FromStr for NetConfig {
    type Err = NetError;
    fn from_str(s: &str) -> Result<Self> {
        let mut c = NetConfig::default();
        c.apply_spec(s)?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip() {
        for s in [
            "epoll",
            "uring",
            "uring-sqpoll",
            "uring-coop",
            "uring-default+regfds",
            "uring+zc-send",
            "uring+multishot+regfds",
            "uring-sqpoll+regfds+regbufs",
            "uring+zc-recv",
            "uring+pollfirst",
        ] {
            let c: NetConfig = s.parse().unwrap();
            assert_eq!(c.spec(), s);
        }
    }

    #[test]
    fn nonsense_is_refused() {
        assert!("epoll+regfds".parse::<NetConfig>().is_err());
        assert!("epoll+sqpoll".parse::<NetConfig>().is_err());
        assert!("uring+zc-send+multishot".parse::<NetConfig>().is_err());
        assert!("tcp".parse::<NetConfig>().is_err());
        assert!("uring+regbufs+pollfirst".parse::<NetConfig>().is_err());
    }

    #[test]
    fn refusals_carry_the_switch_and_the_word() {
        let error = "epoll+regfds".parse::<NetConfig>().unwrap_err();
        assert!(matches!(
            error,
            NetError::NeedsUring {
                switch: NetSwitch::RegisteredFiles
            }
        ));
        let error = "uring+zc-send+multishot".parse::<NetConfig>().unwrap_err();
        assert!(matches!(
            error,
            NetError::Conflict {
                first: NetSwitch::ZeroCopySend,
                second: NetSwitch::Multishot,
                ..
            }
        ));
        match "uring+zerocopy".parse::<NetConfig>().unwrap_err() {
            NetError::UnknownTransportWord { part, word, .. } => {
                assert_eq!(part, SpecPart::Switch);
                assert_eq!(word, "zerocopy");
            }
            other => panic!("wrong error: {other}"),
        }
        let mut config = NetConfig {
            recv_bufs: 48,
            ..NetConfig::default()
        };
        assert!(matches!(
            config.validate(),
            Err(NetError::NotPowerOfTwo { value: 48, .. })
        ));
        config.recv_bufs = 64;
        config.send_bufs = 0;
        assert!(matches!(
            config.validate(),
            Err(NetError::OutOfRange {
                setting: NetSetting::SendBuffers,
                value: 0,
                min: 1,
                max: 4096
            })
        ));
    }
}
