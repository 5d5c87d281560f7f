//! Hints in the command line's words for the engine's errors.
//!
//! The engine's messages name what to change in its own words (a page size, durability
//! `off`, `fresh`), never a flag: a library does not know which front end calls it. Its errors
//! carry the cause as data, so this module turns them into the flags of `ringdb`'s commands,
//! for `main` to print under the error. The I/O layer's errors have hints of their own
//! (`hints`), found through `io_cause`.

use ringdb::{DbError, Durability};
use ringdb::{
    LayoutError, OpenError, PageError, ReadError, ShardSetupError, StorageError, TargetKind,
    WriteError,
};
use ringdb_bench::config::ConfigError;
use ringdb_bench::error::BenchError;
use std::error::Error;

/// The most errors of a `source` chain looked at (chains are a few links long).
const CHAIN_MAX: usize = 16;

/// What to do after the database failed underneath a command.
const REOPEN_HINT: &str = "run the command again: opening the database recovers it (every \
                           acknowledged commit is kept); `ringdb check` verifies it";

/// A hint in the command line's words for `error`, or for the first error of its `source`
/// chain that is one of the engine's, when a flag or a command can fix it.
pub fn db_hint(error: &(dyn Error + 'static)) -> Option<String> {
    std::iter::successors(Some(error), |&e| e.source())
        .take(CHAIN_MAX)
        .find_map(hint_for)
}

/// The hint for `error` itself, if it is one of the engine's errors (or a benchmark's error
/// that wraps one).
fn hint_for(error: &(dyn Error + 'static)) -> Option<String> {
    if let Some(BenchError::Db(e)) = error.downcast_ref::<BenchError>() {
        return db_error_hint(e);
    }
    if let Some(e) = error.downcast_ref::<DbError>() {
        return db_error_hint(e);
    }
    if let Some(e) = error.downcast_ref::<ConfigError>() {
        return config_hint(e);
    }
    if let Some(e) = error.downcast_ref::<OpenError>() {
        return open_hint(e);
    }
    if let Some(e) = error.downcast_ref::<WriteError>() {
        return write_hint(e);
    }
    if let Some(e) = error.downcast_ref::<ReadError>() {
        return read_hint(e);
    }
    error.downcast_ref::<StorageError>().and_then(storage_hint)
}

fn db_error_hint(e: &DbError) -> Option<String> {
    match e {
        DbError::Open(e) => open_hint(e),
        DbError::Write(e) => write_hint(e),
        DbError::Read(e) => read_hint(e),
        DbError::Storage(e) => storage_hint(e),
        _ => None,
    }
}

/// What to do about a configuration file given with `--config`.
fn config_hint(e: &ConfigError) -> Option<String> {
    let hint = match e {
        ConfigError::Read { .. } => "check the path given to --config",
        ConfigError::UnknownKey { .. } => {
            "fix the key's spelling in the file given to --config, or remove it (the keys are \
             listed in `ringdb ycsb --help` under --config)"
        }
        ConfigError::Invalid { .. } | ConfigError::IoSettings { .. } => {
            "fix the value in the file given to --config, or override it with its flag"
        }
        _ => "fix the file given to --config (TOML: [io], [db], [workload])",
    };
    Some(hint.to_string())
}

fn open_hint(e: &OpenError) -> Option<String> {
    let hint = match e {
        OpenError::Shard { source, .. } => return open_hint(source),
        OpenError::Shards(ShardSetupError::Count { on_disk, .. }) => {
            format!("open it with --shards {on_disk}, or without --shards")
        }
        OpenError::Shards(ShardSetupError::NeedsDirectory { .. }) => {
            "give --db a directory, or --shards 1".to_string()
        }
        OpenError::PageSizeMismatch { on_disk, .. } => {
            format!("open it with --page-size {on_disk}")
        }
        OpenError::PageSize { supported, .. } => format!(
            "use a --page-size that is a power of two from {} to {}",
            supported.start(),
            supported.end()
        ),
        OpenError::Pool {
            minimum, page_size, ..
        } => format!(
            "give --pool at least {} KiB ({minimum} pages of {page_size} bytes) per shard",
            minimum * page_size / 1024
        ),
        OpenError::Alignment { alignment, .. } => {
            format!("use a --page-size that is a multiple of {alignment}, or --direct 0")
        }
        OpenError::Durability { mode, target, .. } => durability_hint(*mode, *target),
        OpenError::NvmeFlushEngine { .. } => {
            "use --engine uring-passthrough, or --durability fdatasync".into()
        }
        OpenError::DurabilityOnIopoll { .. } => "drop --iopoll, or use --durability off".into(),
        OpenError::NotADatabase { .. } => "format it with --fresh (put-many) or --load (ycsb); \
                                           either erases what the device holds"
            .into(),
        OpenError::HasLog { .. } => "use --durability fdatasync (or another mode than off)".into(),
        OpenError::NoLog { .. } => "use --durability off".into(),
        OpenError::Layout {
            reason: LayoutError::DoubleWriteTooSmall { .. },
            ..
        } => "use a smaller --pool".into(),
        OpenError::Write(e) => return write_hint(e),
        OpenError::Storage(e) => return storage_hint(e),
        _ => return None,
    };
    Some(hint)
}

/// Which `--durability` values work on `target` (the one asked for does not).
fn durability_hint(mode: Durability, target: TargetKind) -> String {
    let works: Vec<&str> = Durability::ALL
        .into_iter()
        .filter(|d| target.supports(*d))
        .map(Durability::name)
        .collect();
    let mut hint = format!(
        "--durability {mode} does not work on {target}; use --durability {}",
        works.join(" | ")
    );
    if target == TargetKind::File {
        hint.push_str(", or pass a directory as --db for a database with a log");
    }
    hint
}

fn write_hint(e: &WriteError) -> Option<String> {
    match e {
        WriteError::BatchTooLarge { .. } => Some("use a smaller --batch".into()),
        WriteError::Failed { .. } => Some(REOPEN_HINT.into()),
        WriteError::Storage(e) => storage_hint(e),
        _ => None,
    }
}

fn read_hint(e: &ReadError) -> Option<String> {
    match e {
        ReadError::Failed { .. } => Some(REOPEN_HINT.into()),
        ReadError::Storage(e) => storage_hint(e),
        _ => None,
    }
}

fn storage_hint(e: &StorageError) -> Option<String> {
    match e {
        StorageError::LogFailed { .. }
        | StorageError::CheckpointFailed { .. }
        | StorageError::Stalled { .. }
        | StorageError::PoolPoisoned => Some(REOPEN_HINT.into()),
        StorageError::Page(PageError::BadMagic {
            found, expected, ..
        }) => Some(format!(
            "if this database was written by another ringdb build (page format {found:#04x}; \
             this one reads {expected:#04x} and 0xb2: format 0xb2 added key heads to node \
             slots, 0xb3 their head skip), load \
             the data again (`--load`, or another --db); otherwise `ringdb check` lists every \
             damaged page"
        )),
        StorageError::Page(_) | StorageError::Corrupt { .. } => {
            Some("`ringdb check` lists every damaged page".into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringdb::{LocalDb, Options};
    use std::path::PathBuf;

    #[test]
    fn a_page_of_another_format_version_gets_the_reload_hint() {
        let old = StorageError::Page(PageError::BadMagic {
            page: 0,
            found: 0xb1,
            expected: 0xb3,
        });
        let hint = storage_hint(&old).unwrap();
        assert!(
            hint.contains("--load") && hint.contains("ringdb check"),
            "{hint}"
        );
        let damaged = StorageError::Page(PageError::Checksum {
            page: 3,
            stored: 1,
            computed: 2,
        });
        assert!(!storage_hint(&damaged).unwrap().contains("--load"));
    }

    fn temp(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("ringdb-hints-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        let _ = std::fs::remove_file(&p);
        p
    }

    fn opts(durability: Durability) -> Options {
        Options {
            pool_pages: 64,
            direct: false,
            fresh: true,
            durability,
            ..Options::default()
        }
    }

    /// The hint of `e` as itself, wrapped in `DbError`, boxed, and in a benchmark's error.
    fn hints_of(e: OpenError) -> Vec<Option<String>> {
        let direct = db_hint(&e);
        let umbrella = DbError::from(e);
        let wrapped = db_hint(&umbrella);
        let boxed: Box<dyn Error> = Box::new(umbrella);
        let from_box = db_hint(boxed.as_ref());
        let bench = match boxed.downcast::<DbError>() {
            Ok(e) => db_hint(&BenchError::Db(*e)),
            Err(_) => None,
        };
        vec![direct, wrapped, from_box, bench]
    }

    #[test]
    fn another_page_size_names_the_flag_and_the_size() {
        let d = temp("page-size");
        let mut db = LocalDb::open(&d, opts(Durability::Off)).unwrap();
        db.insert(b"k", b"v").unwrap();
        db.close().unwrap();
        let reopen = Options {
            page_size: 8192,
            fresh: false,
            ..opts(Durability::Off)
        };
        let e = LocalDb::open(&d, reopen).err().expect("refused");
        assert!(!e.to_string().contains("--"), "no flag in the library: {e}");
        for hint in hints_of(e) {
            assert_eq!(hint.as_deref(), Some("open it with --page-size 4096"));
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_log_on_a_plain_file_lists_the_modes_that_work() {
        let f = temp("file.db");
        let e = LocalDb::open(&f, opts(Durability::Fdatasync))
            .err()
            .expect("refused");
        assert!(
            matches!(
                e,
                OpenError::Durability {
                    target: TargetKind::File,
                    ..
                }
            ),
            "{e:?}"
        );
        let hint = db_hint(&e).expect("a hint");
        assert!(hint.contains("use --durability off,"), "{hint}");
        assert!(hint.contains("--db"), "{hint}");
        let _ = std::fs::remove_file(&f);
    }

    #[test]
    fn durability_hints_list_what_each_target_supports() {
        let block = durability_hint(Durability::Thread, TargetKind::BlockDevice);
        assert!(
            block.ends_with("use --durability off | none | fdatasync"),
            "{block}"
        );
        let dir = durability_hint(Durability::NvmeFlush, TargetKind::Directory);
        assert!(
            dir.contains("odsync") && !dir.contains("| nvme-flush"),
            "{dir}"
        );
    }

    #[test]
    fn iopoll_with_a_log_names_the_switch() {
        let d = temp("iopoll");
        let mut o = opts(Durability::Fdatasync);
        o.io.iopoll = true;
        let e = LocalDb::open(&d, o).err().expect("refused");
        assert!(!e.to_string().contains("--"), "no flag in the library: {e}");
        for hint in hints_of(e) {
            assert_eq!(
                hint.as_deref(),
                Some("drop --iopoll, or use --durability off")
            );
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_small_pool_names_the_smallest_one() {
        let d = temp("pool");
        let o = Options {
            pool_pages: 8,
            ..opts(Durability::Off)
        };
        let e = LocalDb::open(&d, o).err().expect("refused");
        let hint = db_hint(&e).expect("a hint");
        assert!(hint.contains("--pool at least 64 KiB"), "{hint}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn other_errors_have_no_hint() {
        assert_eq!(db_hint(&std::io::Error::other("not the engine's")), None);
        let e = BenchError::Verify {
            mismatches: 1,
            checked: 1,
            first_offset: 0,
        };
        assert_eq!(db_hint(&e), None);
    }
}
