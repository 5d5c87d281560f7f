//! The cross-shard batch log, `batches.ringdb`: the commit point of a batch whose keys live on
//! several shards.
//!
//! Every shard has its own log, and a batch is atomic within one. A batch across shards is
//! first appended here whole (every shard's part) and made durable: from then on it is
//! committed. Then each part is committed on its shard as that shard's own batch, together with
//! a marker (the batch's id, in the shard's system table) in the same record. After a crash,
//! recovery reads this log and applies every part whose marker its shard lacks, so each batch
//! is all or nothing: absent if its record here is not intact, present on every shard
//! otherwise. Once no batch is in flight the log is emptied (every part is in its shard's log
//! by then) and the markers it covered are deleted.
//!
//! A record: CRC32C (of what follows) u32, length u32 (of the whole record), id u64, parts u32,
//! then per part: shard u32, operations u32, then per operation: kind u8 (1 put, 2 delete),
//! table u32, key length u32, value length u32, key, value. The log is written with plain
//! `pwrite` and `fdatasync` from the committing threads (it is off every shard's ring, a
//! [`BlockingFile`]: the directory's file, or a simulated disk's in the power-cut tests), with
//! group commit: a committer whose record an earlier `fdatasync` already covered does not sync
//! again, and concurrent committers share one sync.

use crate::catalog::TableId;
use crate::wal::Op;
use ringdb_io::BlockingFile;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The log's file name in the database directory.
pub const BATCH_LOG_FILE: &str = "batches.ringdb";
/// A record's fixed header: CRC, length, id, part count.
const RECORD_HEADER: usize = 20;
/// The largest record accepted when reading (a longer length field is the end of the log).
const RECORD_BYTES_MAX: usize = 1 << 30;

/// A batch read back from the log: its id and every shard's part.
#[derive(Debug, PartialEq, Eq)]
pub struct LoggedBatch {
    /// The batch's id.
    pub id: u64,
    /// Each shard's operations.
    pub parts: Vec<(usize, Vec<Op>)>,
}

/// The open log.
pub struct BatchLog {
    file: Arc<dyn BlockingFile>,
    path: PathBuf,
    end_bytes: u64,
    /// Whether appends are made durable (`fdatasync`) before the parts go to the shards.
    sync: bool,
}

impl BatchLog {
    /// Opens (or creates) the log in `dir` and reads every intact record (the first torn or
    /// foreign one ends it: a crash's tail).
    pub fn open(dir: &Path, sync: bool) -> std::io::Result<(BatchLog, Vec<LoggedBatch>)> {
        let path = dir.join(BATCH_LOG_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        BatchLog::open_on(Arc::new(file), path, sync)
    }

    /// [`BatchLog::open`] on `file` (named `path` in errors).
    pub fn open_on(
        file: Arc<dyn BlockingFile>,
        path: PathBuf,
        sync: bool,
    ) -> std::io::Result<(BatchLog, Vec<LoggedBatch>)> {
        let bytes = file.read_all()?;
        let (batches, end_bytes) = decode_all(&bytes);
        let log = BatchLog {
            file,
            path,
            end_bytes: end_bytes as u64,
            sync,
        };
        Ok((log, batches))
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's length in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.end_bytes
    }

    /// Appends batch `id` and makes it durable (unless the log is not synced).
    #[cfg(test)]
    pub fn append(&mut self, id: u64, parts: &[(usize, &[Op])]) -> std::io::Result<()> {
        self.write(id, parts)?;
        if self.sync {
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Writes batch `id` at the end of the log without syncing; returns the log's new end:
    /// the record is durable once a sync that started after this call has finished (see
    /// [`BatchLog::sync_handle`]).
    pub fn write(&mut self, id: u64, parts: &[(usize, &[Op])]) -> std::io::Result<u64> {
        let record = encode(id, parts);
        self.file.write_all_at(&record, self.end_bytes)?;
        self.end_bytes += record.len() as u64;
        Ok(self.end_bytes)
    }

    /// The file, to sync outside the coordinator's lock; `None` when the log is not synced.
    pub fn sync_handle(&self) -> Option<Arc<dyn BlockingFile>> {
        self.sync.then(|| self.file.clone())
    }

    /// Empties the log (every batch in it is in its shards' logs).
    pub fn reset(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        if self.sync {
            self.file.sync_all()?;
        }
        self.end_bytes = 0;
        Ok(())
    }
}

fn put_u32(out: &mut Vec<u8>, value: usize) {
    out.extend_from_slice(&(value as u32).to_le_bytes());
}

/// The record of batch `id`.
fn encode(id: u64, parts: &[(usize, &[Op])]) -> Vec<u8> {
    let mut out = vec![0; 8];
    out.extend_from_slice(&id.to_le_bytes());
    put_u32(&mut out, parts.len());
    for (shard, ops) in parts {
        put_u32(&mut out, *shard);
        put_u32(&mut out, ops.len());
        for op in ops.iter() {
            let (kind, value): (u8, &[u8]) = match op {
                Op::Put { value, .. } => (1, value),
                Op::Delete { .. } => (2, &[]),
            };
            out.push(kind);
            out.extend_from_slice(&op.table().get().to_le_bytes());
            put_u32(&mut out, op.key().len());
            put_u32(&mut out, value.len());
            out.extend_from_slice(op.key());
            out.extend_from_slice(value);
        }
    }
    let len = out.len() as u32;
    out[4..8].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c(&out[4..]);
    out[0..4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Every intact record from the start of `bytes`, and where they end.
fn decode_all(bytes: &[u8]) -> (Vec<LoggedBatch>, usize) {
    let mut batches = Vec::new();
    let mut at = 0;
    // Each round consumes one record of at least RECORD_HEADER bytes.
    while let Some((batch, len)) = decode(&bytes[at..]) {
        batches.push(batch);
        at += len;
    }
    (batches, at)
}

/// A little-endian reader over one record that fails (returns `None`) past its end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(slice)
    }

    fn u32(&mut self) -> Option<usize> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize)
    }
}

/// One record from the start of `bytes`, and its length; `None` when there is no intact one.
fn decode(bytes: &[u8]) -> Option<(LoggedBatch, usize)> {
    let len = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?) as usize;
    if !(RECORD_HEADER..=RECORD_BYTES_MAX).contains(&len) || len > bytes.len() {
        return None;
    }
    let crc = u32::from_le_bytes(bytes[0..4].try_into().ok()?);
    if crc32c::crc32c(&bytes[4..len]) != crc {
        return None;
    }
    let mut reader = Reader {
        bytes: &bytes[..len],
        at: 8,
    };
    let id = u64::from_le_bytes(reader.take(8)?.try_into().ok()?);
    let part_count = reader.u32()?;
    let mut parts = Vec::with_capacity(part_count.min(1024));
    for _ in 0..part_count {
        let shard = reader.u32()?;
        let op_count = reader.u32()?;
        let ops = (0..op_count)
            .map(|_| decode_op(&mut reader))
            .collect::<Option<Vec<_>>>()?;
        parts.push((shard, ops));
    }
    Some((LoggedBatch { id, parts }, len))
}

/// One operation.
fn decode_op(reader: &mut Reader<'_>) -> Option<Op> {
    let kind = reader.take(1)?[0];
    let table = TableId::from_raw(reader.u32()? as u32);
    let key_len = reader.u32()?;
    let value_len = reader.u32()?;
    let key = reader.take(key_len)?.to_vec();
    let value = reader.take(value_len)?.to_vec();
    match kind {
        1 => Some(Op::Put { table, key, value }),
        2 if value.is_empty() => Some(Op::Delete { table, key }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &[u8]) -> Op {
        Op::Put {
            table: TableId::DEFAULT,
            key: key.to_vec(),
            value: b"v".to_vec(),
        }
    }

    #[test]
    fn records_read_back_and_a_torn_tail_ends_the_log() {
        let a = [put(b"a")];
        let b = [put(b"b"), put(b"c")];
        let mut bytes = encode(7, &[(0, &a[..]), (1, &b[..])]);
        let first_len = bytes.len();
        bytes.extend(encode(8, &[(1, &a[..])]));
        let (batches, end) = decode_all(&bytes);
        assert_eq!(batches.len(), 2);
        assert_eq!(end, bytes.len());
        assert_eq!(batches[0].parts[1].1, b.to_vec());
        let torn = &bytes[..bytes.len() - 3];
        let (batches, end) = decode_all(torn);
        assert_eq!((batches.len(), end), (1, first_len));
        let mut flipped = bytes.clone();
        flipped[first_len + 20] ^= 1;
        assert_eq!(decode_all(&flipped).0.len(), 1);
    }
}
