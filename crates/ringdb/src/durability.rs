//! [`Durability`]: how a commit is made durable, a leaf every layer may name (the options
//! choose it, the log carries it out, the errors explain what a target refuses), so it lives
//! below the log (`wal/`) that implements the modes.

/// How a commit is made durable (the paper's Fig. 9 methods).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// No log at all: pages are written back whenever they are evicted and on close; a crash
    /// loses what was not flushed (the benchmark engine of the ladder).
    Off,
    /// The log is written (through the ring) but never synced: survives a process crash, not a
    /// power cut.
    None,
    /// `fdatasync` of the log through the ring (`IORING_OP_FSYNC` with `DATASYNC`).
    Fdatasync,
    /// `fdatasync` of the log on a helper thread (keeps it off io-wq).
    Thread,
    /// The log file is opened `O_DSYNC`: every log write is durable when it completes.
    Odsync,
    /// NVMe flush through passthrough: needs the log on an NVMe namespace.
    NvmeFlush,
}

impl Durability {
    /// Every mode, weakest first.
    pub const ALL: [Durability; 6] = [
        Durability::Off,
        Durability::None,
        Durability::Fdatasync,
        Durability::Thread,
        Durability::Odsync,
        Durability::NvmeFlush,
    ];

    /// The name its parser ([`FromStr`](std::str::FromStr)) reads.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Off => "off",
            Durability::None => "none",
            Durability::Fdatasync => "fdatasync",
            Durability::Thread => "thread",
            Durability::Odsync => "odsync",
            Durability::NvmeFlush => "nvme-flush",
        }
    }

    /// Whether the engine keeps a log (and checkpoints) in this mode.
    pub fn logged(self) -> bool {
        self != Durability::Off
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Durability::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown durability mode {s:?}; one of: {}",
                    Durability::ALL.map(|d| d.name()).join(", ")
                )
            })
    }
}
