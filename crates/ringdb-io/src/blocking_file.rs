//! [`BlockingFile`]: a file written with plain blocking calls (`pwrite`, `fdatasync`) from
//! the calling thread, off every ring.
//!
//! Most of the engine's files go through an [`Engine`](crate::Engine). A few small files are
//! written with plain system calls because no ring is at hand where they are written (the
//! cross-shard batch log is appended by whichever thread commits). This trait names the
//! handful of calls they need, so that the same code runs on a real file and on a simulated
//! disk's file ([`SimDisk::blocking_file`](crate::SimDisk::blocking_file)) whose power can be
//! cut.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The calls a file written off the rings needs. `Send + Sync`: several threads append and
/// sync it (each call is positioned, so no cursor is shared).
pub trait BlockingFile: Send + Sync + std::fmt::Debug {
    /// The whole file, as reads see it now.
    fn read_all(&self) -> io::Result<Vec<u8>>;
    /// Writes all of `bytes` at `offset` (not durable until a sync that starts after it).
    fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Sets the length (`ftruncate`), not durable until a sync.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes data and metadata durable (`fsync`).
    fn sync_all(&self) -> io::Result<()>;
}

impl BlockingFile for File {
    fn read_all(&self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large"))?;
        let mut bytes = vec![0u8; len];
        self.read_exact_at(&mut bytes, 0)?;
        Ok(bytes)
    }

    fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, bytes, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn sync_all(&self) -> io::Result<()> {
        File::sync_all(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_file_reads_back_what_was_written_and_truncates() {
        let path = std::env::temp_dir().join(format!("ringdb-blocking-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let file: &dyn BlockingFile = &file;
        file.write_all_at(b"hello", 0).unwrap();
        file.write_all_at(b"world", 5).unwrap();
        file.sync_data().unwrap();
        assert_eq!(file.read_all().unwrap(), b"helloworld");
        file.set_len(0).unwrap();
        file.sync_all().unwrap();
        assert!(file.read_all().unwrap().is_empty());
        let _ = std::fs::remove_file(&path);
    }
}
