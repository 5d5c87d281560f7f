//! [`EffectiveIo`]: what an engine opened from an [`IoConfig`] actually runs: the engine, the
//! switches in effect, and what `auto` did without ([`Fallback`]s). It is `Copy` (a bounded
//! list, no heap) so that statistics that carry it stay `Copy`.

use crate::config::{EngineKind, IoConfig, SetupMode};
use crate::error::Fallback;
use serde::{Serialize, Serializer};

/// Fallbacks one resolution can record at most: io_uring and libaio, and each io_uring switch.
pub const MAX_FALLBACKS: usize = 10;

/// The io_uring switches in effect on an opened engine (all off for an engine without io_uring).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Switches {
    /// How completions' task work runs.
    pub setup: SetupMode,
    /// A kernel thread polls the submission queue.
    pub sqpoll: bool,
    /// Completions are polled from the device.
    pub iopoll: bool,
    /// The ring is entered by a registered index.
    pub register_ring_fd: bool,
    /// Files are named by registered index.
    pub register_files: bool,
    /// Buffers are registered (`READ_FIXED`/`WRITE_FIXED`).
    pub fixed_buffers: bool,
    /// `IOSQE_ASYNC` on every request.
    pub force_async: bool,
}

impl Switches {
    /// The switches `config` turns on, where its engine is an io_uring one.
    pub fn of(config: &IoConfig) -> Switches {
        if !config.engine.is_uring() {
            return Switches::default();
        }
        Switches {
            setup: config.setup,
            sqpoll: config.sqpoll.is_some(),
            iopoll: config.iopoll,
            register_ring_fd: config.register_ring_fd,
            register_files: config.register_files,
            fixed_buffers: config.fixed_buffers,
            force_async: config.force_async,
        }
    }
}

/// What `auto` did without, in the order it happened (at most [`MAX_FALLBACKS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fallbacks {
    entries: [Option<Fallback>; MAX_FALLBACKS],
    len: usize,
}

impl Fallbacks {
    /// Records one more fallback.
    pub(crate) fn push(&mut self, fallback: Fallback) {
        assert!(
            self.len < MAX_FALLBACKS,
            "more than {MAX_FALLBACKS} fallbacks in one resolution"
        );
        debug_assert!(self.entries[self.len].is_none());
        self.entries[self.len] = Some(fallback);
        self.len += 1;
    }

    /// The fallbacks, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Fallback> + '_ {
        self.entries[..self.len].iter().map(|entry| {
            entry
                .as_ref()
                .expect("entries below len are filled (push fills them in order)")
        })
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether everything asked for runs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Serialize for Fallbacks {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// What an opened engine runs: the engine asked for, the one in effect, its switches, and what
/// was done without.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EffectiveIo {
    /// The engine the configuration named (`auto`, or an explicit one).
    pub requested: EngineKind,
    /// The engine that runs.
    pub engine: EngineKind,
    /// The switches in effect; `None` for an engine opened outside the runtime (its switches
    /// are not known here).
    pub switches: Option<Switches>,
    /// Requests the engine keeps in flight at most.
    pub depth: u32,
    /// What `auto` did without (empty for an explicit engine: it runs as asked or fails).
    pub fallbacks: Fallbacks,
}

impl EffectiveIo {
    /// An engine opened exactly as `config` says, nothing dropped.
    pub fn exact(config: &IoConfig) -> EffectiveIo {
        EffectiveIo::resolved(config.engine, config, Fallbacks::default())
    }

    /// `requested` resolved to the engine and switches of `running`, after `fallbacks`.
    pub(crate) fn resolved(
        requested: EngineKind,
        running: &IoConfig,
        fallbacks: Fallbacks,
    ) -> EffectiveIo {
        debug_assert!(
            running.engine != EngineKind::Auto,
            "auto resolves to an engine"
        );
        EffectiveIo {
            requested,
            engine: running.engine,
            switches: Some(Switches::of(running)),
            depth: running.effective_depth(),
            fallbacks,
        }
    }

    /// An engine of kind `engine` with `depth`, opened elsewhere and handed to a runtime.
    pub fn opened_elsewhere(engine: EngineKind, depth: usize) -> EffectiveIo {
        EffectiveIo {
            requested: engine,
            engine,
            switches: None,
            depth: u32::try_from(depth).unwrap_or(u32::MAX),
            fallbacks: Fallbacks::default(),
        }
    }

    /// A short label such as `uring+fixedbufs`, or `libaio (auto: io_uring unavailable)`.
    pub fn label(&self) -> String {
        let mut label = self.engine.name().to_string();
        if let Some(switches) = self.switches {
            let flags = [
                (switches.setup == SetupMode::Coop, "+coop"),
                (switches.setup == SetupMode::Defer, "+defer"),
                (switches.sqpoll, "+sqpoll"),
                (switches.register_ring_fd, "+regring"),
                (switches.register_files, "+regfiles"),
                (switches.fixed_buffers, "+fixedbufs"),
                (switches.iopoll, "+iopoll"),
                (switches.force_async, "+async"),
            ];
            for (on, flag) in flags {
                if on {
                    label.push_str(flag);
                }
            }
        }
        if self.requested != self.engine {
            label.push_str(&format!(" (from {})", self.requested));
        }
        label
    }
}
