//! [`ConfigError`]: why a configuration file (see [`ConfigFile`](super::ConfigFile)) could not
//! become settings.
//!
//! A config file is written by one tool (`ringdb advise`) and read by others, often much later;
//! a misspelt key that were silently ignored would run something other than what was advised.
//! So every refusal names the file, the key and, where the parser knows it, the line.

use ringdb_io::IoError;
use std::fmt;
use std::path::PathBuf;

/// Why a configuration file could not be read, parsed or accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the configuration file {}: {source}", path.display())]
    #[non_exhaustive]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The text is not TOML, or a value has the wrong type for its key.
    #[error("{}: {message}", Place { path, line: *line })]
    #[non_exhaustive]
    Parse {
        /// The file (`None`: text parsed without one).
        path: Option<PathBuf>,
        /// The line (1-based), when the parser gives one.
        line: Option<usize>,
        /// The parser's message.
        message: String,
    },
    /// A key this schema does not have (a misspelling, or a setting of another version).
    #[error("{}: unknown key `{key}` in {section}; known keys: {expected}", Place { path, line: *line })]
    #[non_exhaustive]
    UnknownKey {
        /// The file (`None`: text parsed without one).
        path: Option<PathBuf>,
        /// The line (1-based), when the parser gives one.
        line: Option<usize>,
        /// The section the key is in (`the top level`, `[io]`, `[db]`, `[workload]`).
        section: String,
        /// The key as written.
        key: String,
        /// The keys the section accepts.
        expected: String,
    },
    /// A value of the right type that means nothing (a size with an unknown suffix, zero
    /// shards, an unknown durability mode).
    #[error("{}: {key} = {value:?} is refused: {reason}", Place { path, line: *line })]
    #[non_exhaustive]
    Invalid {
        /// The file (`None`: text parsed without one).
        path: Option<PathBuf>,
        /// The line (1-based), when known.
        line: Option<usize>,
        /// The key, with its section (`db.pool`).
        key: &'static str,
        /// The value as written.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// The `[io]` section parsed but describes a configuration the I/O layer refuses
    /// ([`ringdb_io::IoConfig::validate`]: a depth out of range, a switch its engine lacks).
    #[error("{}: the [io] section is refused: {source}", Place { path, line: None })]
    #[non_exhaustive]
    IoSettings {
        /// The file (`None`: text parsed without one).
        path: Option<PathBuf>,
        /// The I/O layer's refusal.
        source: IoError,
    },
}

impl ConfigError {
    /// The file the error is about, when there is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            ConfigError::Read { path, .. } => Some(path),
            ConfigError::Parse { path, .. }
            | ConfigError::UnknownKey { path, .. }
            | ConfigError::Invalid { path, .. }
            | ConfigError::IoSettings { path, .. } => path.as_deref(),
        }
    }

    /// The same error, about the file at `file` (text parsed first, then named).
    pub(crate) fn in_file(mut self, file: &std::path::Path) -> ConfigError {
        match &mut self {
            ConfigError::Read { .. } => {}
            ConfigError::Parse { path, .. }
            | ConfigError::UnknownKey { path, .. }
            | ConfigError::Invalid { path, .. }
            | ConfigError::IoSettings { path, .. } => *path = Some(file.to_path_buf()),
        }
        self
    }
}

/// Where in which file, for a message: `FILE, line N`, `FILE`, or `the configuration`.
struct Place<'a> {
    path: &'a Option<PathBuf>,
    line: Option<usize>,
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path {
            Some(path) => write!(f, "{}", path.display())?,
            None => f.write_str("the configuration")?,
        }
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        Ok(())
    }
}
