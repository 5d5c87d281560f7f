//! The double-write file: a checkpoint's page images and its new meta page, written with one
//! write and made durable before any of them is written in place, so a crash that tears a
//! page in place leaves an intact copy to restore it from (the torn-page protection of
//! checkpoints, `checkpoint.rs`, and what recovery applies first, `db/recovery.rs`).
//!
//! The format: header pages (a CRC32C over everything after its own field, the magic
//! `RINGDBDW`, the checkpoint's epoch, the image count, the page size, the header's page
//! count, then one page id per image), then the images in that order. A file whose CRC fails
//! is torn (the crash came during its own write) and is ignored: the data file was not
//! touched yet.

use crate::chunked;
use crate::error::{CheckpointFailure, CheckpointPart, StorageError};
use crate::ids::PageId;
use crate::page;
use ringdb_io::{AlignedBuf, FileId, Io};
use std::sync::Arc;

/// The magic number at byte 8 of the header.
const DW_MAGIC: u64 = u64::from_le_bytes(*b"RINGDBDW");
/// Fixed bytes of the double-write header before the page id list.
const DW_FIXED: usize = 40;

/// A checkpoint's failure as the storage error its caller sees.
pub(crate) fn failed(e: CheckpointFailure) -> StorageError {
    StorageError::CheckpointFailed {
        source: Arc::new(e),
    }
}

/// The whole of `part` (`want` bytes) written, or why not.
pub(crate) fn check_len(
    r: ringdb_io::Result<usize>,
    want: usize,
    part: CheckpointPart,
) -> Result<(), CheckpointFailure> {
    match r {
        Ok(n) if n == want => Ok(()),
        Ok(n) => Err(CheckpointFailure::ShortWrite {
            part,
            written_bytes: n,
            expected_bytes: want,
        }),
        Err(source) => Err(CheckpointFailure::Write { part, source }),
    }
}

/// Makes the data file durable (the end of a checkpoint, and of its recovery).
pub(crate) async fn sync_data_file(io: &Io, data: FileId) -> Result<(), CheckpointFailure> {
    io.fsync(data, true)
        .await
        .map_err(|source| CheckpointFailure::Sync {
            part: CheckpointPart::DataFile,
            source,
        })
}

/// Pages the double-write header of `n` images takes.
fn header_pages(n: usize, page_size: usize) -> usize {
    (DW_FIXED + 8 * n).div_ceil(page_size)
}

/// The double-write file's header pages: magic, epoch, count, page size, header pages, page
/// ids, and a CRC32C over everything after the CRC field: the rest of the header and then
/// every image, in order (the images follow the header in the file).
pub(crate) fn encode_dw_header(
    epoch: u64,
    page_size: usize,
    images: &[(PageId, &[u8])],
) -> Vec<u8> {
    let n = images.len();
    let h = header_pages(n, page_size);
    let mut out = vec![0u8; h * page_size];
    out[8..16].copy_from_slice(&DW_MAGIC.to_le_bytes());
    out[16..24].copy_from_slice(&epoch.to_le_bytes());
    out[24..32].copy_from_slice(&(n as u64).to_le_bytes());
    out[32..36].copy_from_slice(&(page_size as u32).to_le_bytes());
    out[36..40].copy_from_slice(&(h as u32).to_le_bytes());
    for (i, (pid, img)) in images.iter().enumerate() {
        assert_eq!(img.len(), page_size, "image of page {pid} is not one page");
        out[DW_FIXED + 8 * i..DW_FIXED + 8 * i + 8].copy_from_slice(&pid.to_le_bytes());
    }
    let crc = images
        .iter()
        .fold(crc32c::crc32c(&out[4..]), |crc, (_, img)| {
            crc32c::crc32c_append(crc, img)
        });
    out[0..4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The double-write file's bytes (`header` then the images) in pieces of at most
/// [`chunked::MAX_IO`] bytes, each assembled when asked for: at most one piece exists at a
/// time beside the images.
pub(crate) struct DoubleWritePieces<'a> {
    header: &'a [u8],
    images: &'a [(PageId, &'a [u8])],
    /// Header bytes already handed out.
    header_done: usize,
    /// Images already handed out.
    images_done: usize,
    page_size: usize,
}

impl<'a> DoubleWritePieces<'a> {
    pub(crate) fn new(
        header: &'a [u8],
        images: &'a [(PageId, &'a [u8])],
        page_size: usize,
    ) -> Self {
        assert!(
            chunked::MAX_IO.is_multiple_of(page_size) || page_size > chunked::MAX_IO,
            "double-write pieces must hold whole pages"
        );
        DoubleWritePieces {
            header,
            images,
            header_done: 0,
            images_done: 0,
            page_size,
        }
    }
}

impl Iterator for DoubleWritePieces<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        let room = chunked::MAX_IO.max(self.page_size);
        if self.header_done < self.header.len() {
            let end = (self.header_done + room).min(self.header.len());
            let piece = self.header[self.header_done..end].to_vec();
            self.header_done = end;
            return Some(piece);
        }
        if self.images_done == self.images.len() {
            return None;
        }
        let count = (room / self.page_size).min(self.images.len() - self.images_done);
        let mut piece = Vec::with_capacity(count * self.page_size);
        for (_, img) in &self.images[self.images_done..self.images_done + count] {
            piece.extend_from_slice(img);
        }
        self.images_done += count;
        Some(piece)
    }
}

/// The whole double-write file in one buffer (what the pieces add up to; for the tests).
#[cfg(test)]
fn encode_dw(epoch: u64, page_size: usize, images: &[(PageId, &[u8])]) -> Vec<u8> {
    let header = encode_dw_header(epoch, page_size, images);
    DoubleWritePieces::new(&header, images, page_size)
        .flatten()
        .collect()
}

/// An intact double-write file: its epoch and its (page id, image) pairs.
pub struct DoubleWrite {
    pub epoch: u64,
    pub pages: Vec<(PageId, Vec<u8>)>,
}

/// Reads the double-write file (`len` bytes long); `None` when it is empty, torn or not one.
pub async fn read_dw(
    io: &Io,
    file: FileId,
    len: u64,
    page_size: usize,
) -> Result<Option<DoubleWrite>, StorageError> {
    if len < page_size as u64 {
        return Ok(None);
    }
    let head = crate::chunked::read(io, file, 0, page_size).await?;
    if head.len() < page_size {
        return Ok(None);
    }
    let Some(total) = dw_len(&head, len, page_size) else {
        return Ok(None);
    };
    let all = crate::chunked::read(io, file, 0, total).await?;
    Ok(decode_dw(&all, page_size))
}

/// The bytes of the double-write file whose first page is `head`, when its header is one of
/// a file of `len` bytes with `page_size`-byte pages (the CRC is not checked here).
fn dw_len(head: &[u8], len: u64, page_size: usize) -> Option<usize> {
    if !page::valid_page_size(page_size) || head.len() < page_size {
        return None;
    }
    let rd64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8"));
    let rd32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
    if rd64(head, 8) != DW_MAGIC || rd32(head, 32) as usize != page_size {
        return None;
    }
    // Every image is a page of the file, so a count the file cannot hold is refused before
    // any arithmetic on it can overflow.
    let n = rd64(head, 24);
    if n == 0 || n > len / page_size as u64 {
        return None;
    }
    let n = n as usize;
    let h = rd32(head, 36) as usize;
    if h != header_pages(n, page_size) || ((h + n) * page_size) as u64 > len {
        return None;
    }
    Some((h + n) * page_size)
}

/// Decodes a whole double-write file read into `all` (the file's first bytes, at least as
/// many as its header names); `None` when it is not an intact double-write file of
/// `page_size`-byte pages. Public for the fuzz tests only: recovery calls [`read_dw`].
pub fn decode_dw(all: &[u8], page_size: usize) -> Option<DoubleWrite> {
    let total = dw_len(all, all.len() as u64, page_size)?;
    let rd64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8"));
    let rd32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
    if crc32c::crc32c(&all[4..total]) != rd32(all, 0) {
        return None;
    }
    let n = rd64(all, 24) as usize;
    let h = header_pages(n, page_size);
    let pages = (0..n)
        .map(|i| {
            let pid = rd64(all, DW_FIXED + 8 * i);
            let at = (h + i) * page_size;
            (pid, all[at..at + page_size].to_vec())
        })
        .collect();
    Some(DoubleWrite {
        epoch: rd64(all, 16),
        pages,
    })
}

/// Writes every page of `dw` in place and makes the data file durable (recovery of a
/// checkpoint that a crash interrupted, or of torn pages).
pub async fn apply_dw(
    io: &Io,
    data: FileId,
    page_size: usize,
    dw: &DoubleWrite,
) -> Result<(), StorageError> {
    for (pid, img) in &dw.pages {
        page::verify(img, *pid)?;
        let mut buf = AlignedBuf::new(page_size);
        buf.as_mut_slice().copy_from_slice(img);
        let (r, _) = io.write(data, pid * page_size as u64, buf).await;
        check_len(r, page_size, CheckpointPart::RestoredPage { page: *pid }).map_err(failed)?;
    }
    sync_data_file(io, data).await.map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dw_header_sizes() {
        assert_eq!(header_pages(1, 4096), 1);
        assert_eq!(header_pages(507, 4096), 1);
        assert_eq!(header_pages(508, 4096), 2);
    }

    #[test]
    fn dw_crc_covers_everything() {
        let img = vec![7u8; 4096];
        let dw = encode_dw(3, 4096, &[(5, &img)]);
        assert_eq!(dw.len(), 2 * 4096);
        let crc = u32::from_le_bytes(dw[0..4].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&dw[4..]));
        let mut bad = dw.clone();
        bad[4096 + 100] ^= 1;
        assert_ne!(crc, crc32c::crc32c(&bad[4..]));
    }
}
