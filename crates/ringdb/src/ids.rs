//! The engine's identifiers and its clock, a leaf every layer may use: [`PageId`],
//! [`TableId`], [`TxnTimestamp`] and [`timestamp`] (the cycle counter traces read).
//!
//! Why a module of their own: they are the words every layer speaks (a page's number, a
//! table's id, a transaction's age). Defined in the layer that hands them out (`buffer`,
//! `catalog`, `txn`), they made every lower module that names one depend on that layer, and
//! the layers formed a cycle (see `crates/ringdb-lint/layers.txt`).

/// A page's number in the data file: it lives at byte `pid * page_size`.
pub type PageId = u64;

/// A table of a database: an id the catalog hands out, never reused. Table 0 is the default
/// table (the one [`Db::get`](crate::Db::get), [`Db::insert`](crate::Db::insert), ... use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct TableId(pub(crate) u32);

impl TableId {
    /// The default table: every database has it; its name is not listed.
    pub const DEFAULT: TableId = TableId(0);

    /// The table of id `raw` (as [`get`](Self::get) returns it): whether a database holds
    /// it is checked where it is used.
    pub const fn from_raw(raw: u32) -> TableId {
        TableId(raw)
    }

    /// The id as a number (0: the default table).
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl std::fmt::Display for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => f.write_str("the default table"),
            n => write!(f, "table {n}"),
        }
    }
}

/// A transaction's age for wait-die: smaller is older. A retry passes its first timestamp
/// again (see [`DbHandle::begin_with`](crate::DbHandle::begin_with)) so it grows older.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxnTimestamp(pub(crate) u64);

impl TxnTimestamp {
    /// A timestamp drawn outside the database: for one transaction made of parts on several
    /// databases (the shards of a [`Db`](crate::Db)), whose parts must all carry the same age.
    /// Draw them from one counter that every part's database shares, counting up from 1, so
    /// that wait-die compares ages across the databases alike and no wait cycle can form
    /// through them; a database's own [`DbHandle::begin`](crate::DbHandle::begin) counts per
    /// database instead, so do not mix the two on one database.
    pub const fn from_counter(value: u64) -> TxnTimestamp {
        TxnTimestamp(value)
    }

    /// The timestamp as a number (they count up from 1 per database as transactions begin).
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for TxnTimestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "t{}", self.0)
    }
}

/// The time-stamp counter (`rdtsc`) on x86_64, the same counter the benchmarks read;
/// nanoseconds of a monotonic clock elsewhere.
pub fn timestamp() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64; it only reads the counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}
