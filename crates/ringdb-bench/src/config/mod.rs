//! [`ConfigFile`]: settings as a TOML file, so that advice (`ringdb advise`) becomes settings in
//! one step: the benchmarks read it (`--config FILE`) and programs apply it to [`Options`] and
//! the sharded [`DbBuilder`].
//!
//! Why a file of its own rather than serialized [`Options`]: the file is read by people and by
//! other tools, so sizes are written as the command line writes them (`64M`), modes by their
//! names, and every key is optional (what the file does not say stays as the program set it).
//! It is strict where that matters: an unknown key or a value that means nothing is refused
//! with a [`ConfigError`] naming the file, the key and the line, because a misspelt switch that
//! were silently off would measure something other than what was advised.

mod error;

pub use error::ConfigError;
use ringdb::{DbBuilder, Durability, IoConfig, Options, Steal, SHARDS_MAX};
use serde::{Deserialize, Serialize};
use std::path::Path;
use toml::Spanned;

/// A configuration file: the I/O engine and its switches (`[io]`), the database's options
/// (`[db]`) and what a benchmark runs with (`[workload]`). Every section and key is optional.
///
/// ```toml
/// # what wrote it and why (comments are free text)
/// [io]                      # a ringdb_io::IoConfig; a missing key is IoConfig's default
/// engine = "uring"          # posix | libaio | uring-sync | uring | uring-passthrough | auto
/// setup = "defer"           # default | coop | defer
/// batching = "fixed(16)"    # each | adaptive | fixed(N) (also fixed:N)
/// queue_depth = 128
/// fixed_buffers = true
/// sqpoll = { idle_ms = 50, cpu = 1 }   # absent: no SQPOLL
/// [db]
/// pool = "64M"              # bytes: 4k, 16M, 1G or an integer
/// page_size = "4k"
/// shards = 2
/// durability = "fdatasync"  # off | none | fdatasync | thread | odsync | nvme-flush
/// steal = "auto"            # auto | on | off
/// [workload]
/// tasks = 128
/// ```
///
/// # Example
///
/// ```
/// use ringdb::{LocalDb, Options};
/// use ringdb_bench::config::ConfigFile;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = std::env::temp_dir().join(format!("ringdb-config-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let file = dir.join("advice.toml");
/// std::fs::write(
///     &file,
///     "# written by hand\n[io]\nengine = \"auto\"\nqueue_depth = 64\n\
///      [db]\npool = \"4M\"\ndurability = \"none\"\n",
/// )
/// .unwrap();
/// let config = ConfigFile::from_path(&file)?;
/// let mut options = Options {
///     fresh: true,
///     direct: false, // runs on any filesystem (tmpfs too)
///     ..Options::default()
/// };
/// config.apply_to(&mut options);
/// assert_eq!(options.pool_pages, 1024);
/// assert_eq!(options.io.queue_depth, 64);
/// let mut db = LocalDb::open(&dir.join("db"), options)?;
/// db.insert(b"key", b"value")?;
/// assert_eq!(db.get(b"key")?.as_deref(), Some(&b"value"[..]));
/// db.close()?;
/// assert_eq!(ConfigFile::parse(&config.to_toml())?, config);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigFile {
    /// The `[io]` section: replaces [`Options::io`] whole when present.
    pub io: Option<IoConfig>,
    /// The `[db]` section.
    pub db: DbSettings,
    /// The `[workload]` section (read by benchmarks; [`ConfigFile::apply_to`] ignores it).
    pub workload: WorkloadSettings,
}

/// The `[db]` section: each field present sets that option, an absent one leaves it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DbSettings {
    /// `pool`: the buffer pool in bytes (for a sharded database, the whole database's).
    pub pool_bytes: Option<u64>,
    /// `page_size`: bytes per page.
    pub page_size_bytes: Option<u64>,
    /// `shards`: the number of shards of a new sharded database.
    pub shards: Option<usize>,
    /// `durability`: how commits are made durable.
    pub durability: Option<Durability>,
    /// `steal`: whether eviction may write pages back between checkpoints.
    pub steal: Option<Steal>,
    /// `evict_batch`: victims per eviction round.
    pub evict_batch: Option<usize>,
    /// `group_commit`: one durability point for all waiting commits.
    pub group_commit: Option<bool>,
    /// `direct`: `O_DIRECT` (the pool is the only cache).
    pub direct: Option<bool>,
}

/// The `[workload]` section: what a benchmark runs with. The engine does not read it; a
/// benchmark takes each present field as its default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadSettings {
    /// Concurrent tasks (the concurrency the application offers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<usize>,
    /// Bytes per value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_size: Option<usize>,
    /// Records loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<u64>,
    /// The YCSB workload (`a` to `f`, `update-only`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ycsb: Option<String>,
    /// The key distribution (`uniform`, `zipfian`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
}

impl WorkloadSettings {
    fn is_empty(&self) -> bool {
        *self == WorkloadSettings::default()
    }
}

impl ConfigFile {
    /// Reads and checks the file at `path` (see [`ConfigFile::parse`]); every error names it.
    pub fn from_path(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        ConfigFile::parse(&text).map_err(|e| e.in_file(path))
    }

    /// Parses and checks TOML text: unknown keys, values that mean nothing and an `[io]`
    /// section that [`IoConfig::validate`] refuses are errors.
    pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| parse_error(text, &e))?;
        if let Some(io) = &raw.io {
            io.validate()
                .map_err(|source| ConfigError::IoSettings { path: None, source })?;
        }
        let db = raw.db.check(text)?;
        let workload = check_workload(text, raw.workload)?;
        Ok(ConfigFile {
            io: raw.io,
            db,
            workload: workload.into_settings(),
        })
    }

    /// The file as TOML text, which [`ConfigFile::parse`] reads back equal. A writer may put
    /// `#` comment lines before it (what wrote it and why).
    pub fn to_toml(&self) -> String {
        let out = OutFile {
            io: self.io.as_ref(),
            db: OutDb::from(&self.db),
            workload: &self.workload,
        };
        toml::to_string(&out).expect("a config file's fields are all TOML values")
    }

    /// Sets `options` from the file: the whole I/O configuration when `[io]` is present, and
    /// each `[db]` option present. A new page size without a pool size keeps the pool's bytes.
    pub fn apply_to(&self, options: &mut Options) {
        if let Some(io) = &self.io {
            options.io = io.clone();
        }
        let db = &self.db;
        let pool_bytes = db
            .pool_bytes
            .unwrap_or(options.pool_pages as u64 * options.page_size as u64);
        if let Some(page_size) = db.page_size_bytes {
            options.page_size = page_size as usize;
        }
        options.pool_pages = (pool_bytes / options.page_size.max(1) as u64) as usize;
        if let Some(durability) = db.durability {
            options.durability = durability;
        }
        if let Some(steal) = db.steal {
            options.steal = steal;
        }
        if db.evict_batch.is_some() {
            options.evict_batch = db.evict_batch;
        }
        if let Some(group_commit) = db.group_commit {
            options.group_commit = group_commit;
        }
        if let Some(direct) = db.direct {
            options.direct = direct;
        }
    }

    /// The default [`Options`] with the configuration file at `path` applied
    /// ([`ConfigFile::apply_to`]).
    pub fn options_from_path(path: &Path) -> Result<Options, ConfigError> {
        let mut options = Options::default();
        ConfigFile::from_path(path)?.apply_to(&mut options);
        Ok(options)
    }

    /// `builder` with the file applied: its options (see [`ConfigFile::apply_to`]) and the
    /// number of shards when the file gives one.
    pub fn configure(&self, builder: DbBuilder) -> DbBuilder {
        let mut options = builder.options_ref().clone();
        self.apply_to(&mut options);
        let builder = builder.options(options);
        match self.db.shards {
            Some(shards) => builder.shards(shards),
            None => builder,
        }
    }
}

/// The file as the parser reads it: sizes and names still text, with their places.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct RawFile {
    io: Option<IoConfig>,
    db: RawDb,
    workload: RawWorkload,
}

/// A size as written: bytes, or text with a suffix.
#[derive(Deserialize, Clone, Debug)]
#[serde(untagged)]
enum SizeText {
    Bytes(u64),
    Text(String),
}

/// `[db]` as written.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct RawDb {
    pool: Option<Spanned<SizeText>>,
    page_size: Option<Spanned<SizeText>>,
    shards: Option<Spanned<usize>>,
    durability: Option<Spanned<String>>,
    steal: Option<Spanned<String>>,
    evict_batch: Option<Spanned<usize>>,
    group_commit: Option<bool>,
    direct: Option<bool>,
}

/// `[workload]` as written.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct RawWorkload {
    tasks: Option<Spanned<usize>>,
    value_size: Option<usize>,
    records: Option<Spanned<u64>>,
    ycsb: Option<String>,
    distribution: Option<String>,
}

impl RawWorkload {
    fn into_settings(self) -> WorkloadSettings {
        WorkloadSettings {
            tasks: self.tasks.map(Spanned::into_inner),
            value_size: self.value_size,
            records: self.records.map(Spanned::into_inner),
            ycsb: self.ycsb,
            distribution: self.distribution,
        }
    }
}

/// A refusal of `key`'s value at `span` in `text`.
fn invalid<T: std::fmt::Debug>(
    text: &str,
    key: &'static str,
    value: &Spanned<T>,
    reason: impl Into<String>,
) -> ConfigError {
    let shown = match text.get(value.span()) {
        Some(written) => written.trim_matches('"').to_string(),
        None => format!("{:?}", value.get_ref()),
    };
    ConfigError::Invalid {
        path: None,
        line: Some(line_of(text, value.span().start)),
        key,
        value: shown,
        reason: reason.into(),
    }
}

/// Refuses a count of zero (or above `max`) at `key`.
fn check_count(
    text: &str,
    key: &'static str,
    value: &Option<Spanned<usize>>,
    max: usize,
) -> Result<Option<usize>, ConfigError> {
    let Some(spanned) = value else {
        return Ok(None);
    };
    let count = *spanned.get_ref();
    if count == 0 || count > max {
        return Err(invalid(text, key, spanned, format!("must be in 1..={max}")));
    }
    Ok(Some(count))
}

fn check_workload(text: &str, raw: RawWorkload) -> Result<RawWorkload, ConfigError> {
    check_count(text, "workload.tasks", &raw.tasks, usize::MAX)?;
    if let Some(records) = &raw.records {
        if *records.get_ref() == 0 {
            return Err(invalid(
                text,
                "workload.records",
                records,
                "must be at least 1",
            ));
        }
    }
    Ok(raw)
}

impl RawDb {
    /// The section checked and typed.
    fn check(&self, text: &str) -> Result<DbSettings, ConfigError> {
        Ok(DbSettings {
            pool_bytes: check_size(text, "db.pool", &self.pool)?,
            page_size_bytes: check_size(text, "db.page_size", &self.page_size)?,
            shards: check_count(text, "db.shards", &self.shards, SHARDS_MAX)?,
            durability: check_name(text, "db.durability", &self.durability)?,
            steal: check_name(text, "db.steal", &self.steal)?,
            evict_batch: check_count(text, "db.evict_batch", &self.evict_batch, usize::MAX)?,
            group_commit: self.group_commit,
            direct: self.direct,
        })
    }
}

/// A name key's value, parsed by its type's parser (whose message says what it accepts).
fn check_name<T: std::str::FromStr<Err = String>>(
    text: &str,
    key: &'static str,
    value: &Option<Spanned<String>>,
) -> Result<Option<T>, ConfigError> {
    let Some(spanned) = value else {
        return Ok(None);
    };
    let parsed = spanned.get_ref().parse::<T>();
    parsed
        .map(Some)
        .map_err(|reason| invalid(text, key, spanned, reason))
}

/// A size key's bytes: an integer, or a number with a binary suffix (`4k`, `16M`, `1G`, with
/// or without `i`/`b`, any case), as the command line reads sizes. Zero is refused.
fn check_size(
    text: &str,
    key: &'static str,
    value: &Option<Spanned<SizeText>>,
) -> Result<Option<u64>, ConfigError> {
    let Some(spanned) = value else {
        return Ok(None);
    };
    let bytes = match spanned.get_ref() {
        SizeText::Bytes(bytes) => Some(*bytes),
        SizeText::Text(written) => size_bytes(written),
    };
    match bytes {
        Some(0) => Err(invalid(text, key, spanned, "a size must not be zero")),
        Some(bytes) => Ok(Some(bytes)),
        None => Err(invalid(
            text,
            key,
            spanned,
            "not a size: a number with an optional suffix k, M, G or T (4k, 16M, 1G)",
        )),
    }
}

/// `written`'s bytes, or `None` when it is not a size.
fn size_bytes(written: &str) -> Option<u64> {
    let lower = written.trim().to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, suffix) = lower.split_at(digits_end);
    let multiplier: u64 = match suffix.trim_end_matches('b').trim_end_matches('i') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    let bytes = value * multiplier as f64;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then(|| bytes.round() as u64)
}

/// `bytes` as the shortest exact size text (`64M`, `4k`, `1000`).
fn size_text(bytes: u64) -> String {
    const SUFFIXES: [(u32, &str); 4] = [(40, "T"), (30, "G"), (20, "M"), (10, "k")];
    for (shift, suffix) in SUFFIXES {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or(text).matches('\n').count() + 1
}

/// The section header (`[db]`) in force at byte `offset` of `text`, or the top level.
fn section_at(text: &str, offset: usize) -> String {
    let before = text.get(..offset).unwrap_or(text);
    before
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| line.starts_with('['))
        .and_then(|line| line.split(']').next())
        .map(|header| format!("{header}]"))
        .unwrap_or_else(|| "the top level".to_string())
}

/// The parser's error as a [`ConfigError`]: an unknown key by name, anything else with its
/// line.
fn parse_error(text: &str, error: &toml::de::Error) -> ConfigError {
    let line = error.span().map(|span| line_of(text, span.start));
    let message = error.message().trim().to_string();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (key, after) = rest.split_once('`').unwrap_or((rest, ""));
        let expected = after
            .trim_start_matches(", expected ")
            .trim_start_matches("one of ")
            .to_string();
        return ConfigError::UnknownKey {
            path: None,
            line,
            section: section_at(text, error.span().map_or(0, |span| span.start)),
            key: key.to_string(),
            expected,
        };
    }
    ConfigError::Parse {
        path: None,
        line,
        message,
    }
}

/// The file as written: sizes and names as text, absent keys left out.
#[derive(Serialize)]
struct OutFile<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    io: Option<&'a IoConfig>,
    #[serde(skip_serializing_if = "OutDb::is_empty")]
    db: OutDb,
    #[serde(skip_serializing_if = "WorkloadSettings::is_empty")]
    workload: &'a WorkloadSettings,
}

/// `[db]` as written.
#[derive(Serialize, Default, PartialEq)]
struct OutDb {
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_size: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shards: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    durability: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    steal: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    evict_batch: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group_commit: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    direct: Option<bool>,
}

impl OutDb {
    fn is_empty(&self) -> bool {
        *self == OutDb::default()
    }
}

impl From<&DbSettings> for OutDb {
    fn from(db: &DbSettings) -> OutDb {
        OutDb {
            pool: db.pool_bytes.map(size_text),
            page_size: db.page_size_bytes.map(size_text),
            shards: db.shards,
            durability: db.durability.map(Durability::name),
            steal: db.steal.map(Steal::name),
            evict_batch: db.evict_batch,
            group_commit: db.group_commit,
            direct: db.direct,
        }
    }
}
