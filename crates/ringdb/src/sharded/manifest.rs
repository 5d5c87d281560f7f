//! The shard manifest: how many shards a database has and how keys are placed on them,
//! recorded once, when the database is created.
//!
//! A key's shard is a function of its hash and the shard count, so reopening with another
//! count (or a build with another hash) would look for keys on the wrong shard: both are
//! written to `shards.ringdb` in the database directory at creation and checked on every open.
//! The file is a few lines of text ending in a CRC32C of the lines before it, written to a
//! temporary name, synced and renamed into place (a crash leaves the old file or the new one).
//!
//! Shard `i` lives in the subdirectory `shard-NNN` (three digits, `i` zero-padded). A directory
//! holding a database of the single-shard layout (the data file directly in it, no manifest) is
//! opened as one shard in place.

use crate::db::DATA_FILE;
use crate::error::{OpenError, ShardSetupError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The manifest's file name in the database directory.
pub const MANIFEST_FILE: &str = "shards.ringdb";
/// The hash that places keys: CRC32C of the key, scaled to the shard count by multiply-shift.
pub const SHARD_HASH: &str = "crc32c-multiply-shift";
/// The most shards a database may have.
pub const SHARDS_MAX: usize = 1024;
/// The manifest's first line.
const HEADER: &str = "ringdb shard manifest v1";

/// What the manifest records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Shards in the database.
    pub shards: usize,
    /// The hash that places keys ([`SHARD_HASH`] for every database this build creates).
    pub hash: String,
}

/// The shard that owns `key` among `shards`.
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    debug_assert!((1..=SHARDS_MAX).contains(&shards));
    let hash = u64::from(crc32c::crc32c(key));
    ((hash * shards as u64) >> 32) as usize
}

/// The directory of shard `index` in `dir`.
pub fn shard_dir(dir: &Path, index: usize) -> PathBuf {
    dir.join(format!("shard-{index:03}"))
}

/// What a new database's layout created, to undo when its shards then fail to open (so that
/// a refused open leaves nothing behind).
#[derive(Debug, Default)]
pub struct Created {
    /// The database directory itself.
    pub directory: Option<PathBuf>,
    /// The manifest and the shard directories, in an existing directory.
    pub paths: Vec<PathBuf>,
}

impl Created {
    /// Removes what was created (best effort: it is all new and empty of user data).
    pub fn undo(self) {
        if let Some(directory) = self.directory {
            let _ = std::fs::remove_dir_all(directory);
            return;
        }
        for path in self.paths {
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
}

/// Where the shards of the database in `dir` live: its shard directories (or `dir` itself for
/// a database of the single-shard layout), after checking the manifest against `requested`
/// (`None`: whatever the database has, or `default_count` for a new one). Creates the
/// manifest of a new database, and says what it created.
pub fn resolve(
    dir: &Path,
    requested: Option<usize>,
    default_count: usize,
) -> Result<(Vec<PathBuf>, Created), OpenError> {
    let manifest_path = dir.join(MANIFEST_FILE);
    if let Some(manifest) = read(&manifest_path)? {
        check(dir, &manifest, requested)?;
        let paths = (0..manifest.shards).map(|i| shard_dir(dir, i)).collect();
        return Ok((paths, Created::default()));
    }
    if dir.join(DATA_FILE).exists() {
        // The single-shard layout: one database in the directory itself.
        check(dir, &single(), requested)?;
        return Ok((vec![dir.to_path_buf()], Created::default()));
    }
    let shards = requested.unwrap_or(default_count);
    check_count(shards)?;
    let new_directory = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|source| file_error(dir, source))?;
    let manifest = Manifest {
        shards,
        hash: SHARD_HASH.to_string(),
    };
    write(&manifest_path, &manifest)?;
    let paths: Vec<PathBuf> = (0..shards).map(|i| shard_dir(dir, i)).collect();
    let created = Created {
        directory: new_directory.then(|| dir.to_path_buf()),
        paths: paths.iter().cloned().chain([manifest_path]).collect(),
    };
    Ok((paths, created))
}

/// The manifest a single-shard layout stands for.
fn single() -> Manifest {
    Manifest {
        shards: 1,
        hash: SHARD_HASH.to_string(),
    }
}

/// Refuses a shard count out of range.
pub fn check_count(shards: usize) -> Result<(), ShardSetupError> {
    if !(1..=SHARDS_MAX).contains(&shards) {
        return Err(ShardSetupError::CountOutOfRange {
            requested: shards,
            maximum: SHARDS_MAX,
        });
    }
    Ok(())
}

/// Refuses a manifest whose count or hash differs from what this open needs.
fn check(dir: &Path, manifest: &Manifest, requested: Option<usize>) -> Result<(), OpenError> {
    if manifest.hash != SHARD_HASH {
        return Err(ShardSetupError::Hash {
            path: dir.to_path_buf(),
            on_disk: manifest.hash.clone(),
            expected: SHARD_HASH,
        }
        .into());
    }
    match requested {
        Some(requested) if requested != manifest.shards => Err(ShardSetupError::Count {
            path: dir.to_path_buf(),
            on_disk: manifest.shards,
            requested,
        }
        .into()),
        _ => Ok(()),
    }
}

fn file_error(path: &Path, source: std::io::Error) -> OpenError {
    OpenError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// The manifest's text: its lines, then the CRC32C of those lines.
fn encode(manifest: &Manifest) -> String {
    let body = format!(
        "{HEADER}\nshards {}\nhash {}\n",
        manifest.shards, manifest.hash
    );
    let crc = crc32c::crc32c(body.as_bytes());
    format!("{body}crc32c {crc:08x}\n")
}

/// Parses a manifest's text; the reason it is not one otherwise.
fn decode(text: &str) -> Result<Manifest, String> {
    let (body, crc_line) = text
        .trim_end_matches('\n')
        .rsplit_once('\n')
        .ok_or("too short")?;
    let body = format!("{body}\n");
    let crc = crc_line
        .strip_prefix("crc32c ")
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("no checksum line")?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return Err("checksum mismatch".into());
    }
    let mut lines = body.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!("the first line is not {HEADER:?}"));
    }
    let shards = lines
        .next()
        .and_then(|l| l.strip_prefix("shards "))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=SHARDS_MAX).contains(n))
        .ok_or("no valid shard count")?;
    let hash = lines
        .next()
        .and_then(|l| l.strip_prefix("hash "))
        .ok_or("no hash line")?;
    Ok(Manifest {
        shards,
        hash: hash.to_string(),
    })
}

/// The manifest at `path`, if there is one.
fn read(path: &Path) -> Result<Option<Manifest>, OpenError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(file_error(path, source)),
    };
    decode(&text).map(Some).map_err(|reason| {
        ShardSetupError::Manifest {
            path: path.to_path_buf(),
            reason,
        }
        .into()
    })
}

/// Writes the manifest: a temporary file, synced, renamed over `path`, the directory synced.
fn write(path: &Path, manifest: &Manifest) -> Result<(), OpenError> {
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temporary).map_err(|e| file_error(&temporary, e))?;
    file.write_all(encode(manifest).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| file_error(&temporary, e))?;
    std::fs::rename(&temporary, path).map_err(|e| file_error(path, e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| file_error(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_and_a_flipped_byte_is_refused() {
        let m = Manifest {
            shards: 7,
            hash: SHARD_HASH.into(),
        };
        let text = encode(&m);
        assert_eq!(decode(&text), Ok(m));
        let flipped = text.replace("shards 7", "shards 8");
        assert_eq!(decode(&flipped), Err("checksum mismatch".into()));
        assert!(decode("").is_err());
    }

    #[test]
    fn keys_spread_over_every_shard() {
        for shards in [1, 2, 3, 8, 64] {
            let mut counts = vec![0usize; shards];
            for i in 0..10_000u64 {
                counts[shard_of(&i.to_be_bytes(), shards)] += 1;
            }
            let expected = 10_000 / shards;
            assert!(
                counts.iter().all(|&c| c > expected / 2),
                "{shards} shards: {counts:?}"
            );
        }
    }
}
