//! `--config FILE` for the benchmarks: a [`ConfigFile`] (what `ringdb advise` writes) becomes
//! the command's settings, and a flag given on the command line overrides the file's value.
//!
//! The rule needs to know which flags were typed and which are clap's defaults, so each
//! command receives its `ArgMatches` beside its parsed arguments and asks
//! [`given_on_command_line`] (clap's `value_source`), never comparing a value with its default
//! (`--tasks 128` typed on purpose must win over a file saying 64).

use clap::parser::ValueSource;
use clap::ArgMatches;
use ringdb_bench::config::{ConfigError, ConfigFile};
use std::path::Path;

/// Whether the argument `id` (the field's name) was typed on the command line.
pub fn given_on_command_line(matches: &ArgMatches, id: &str) -> bool {
    debug_assert!(matches.try_get_raw(id).is_ok(), "no argument {id:?}");
    matches.value_source(id) == Some(ValueSource::CommandLine)
}

/// Loads the file at `path` and says on stderr that it is applied.
pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
    let config = ConfigFile::from_path(path)?;
    eprintln!(
        "ringdb: config: applying {} (flags given on the command line override it)",
        path.display()
    );
    Ok(config)
}
