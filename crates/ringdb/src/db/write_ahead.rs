//! The log's side of stealing (see `buffer/steal.rs`): the hook eviction runs before it writes
//! pages in place between checkpoints, and recovery's use of the page images it logged.

use super::layout::FILE_IDS;
use crate::buffer::{PageId, WriteAhead};
use crate::error::StorageError;
use crate::page;
use crate::wal::{Decoded, Durability, Wal};
use ringdb_io::{AlignedBuf, Io};
use std::future::Future;
use std::pin::Pin;

/// Makes the log durable past pages before eviction writes them, logging their images first
/// in the modes that survive a power cut.
pub(super) struct LogWriteAhead {
    wal: Wal,
    /// Log each page's image (every mode but `none`: a process crash cannot tear a write
    /// the kernel accepted, a power cut can).
    images: bool,
}

impl LogWriteAhead {
    /// The hook for `wal` in its mode.
    pub(super) fn new(wal: Wal) -> Self {
        let images = wal.mode() != Durability::None;
        LogWriteAhead { wal, images }
    }

    /// Logs the images of `pages`; returns the last one's end, or `None` when the log has no
    /// room left (images already logged stay: each is a version of its page recovery may
    /// write, never a wrong one). Waits for room in the log buffer as a commit does.
    async fn log_images(&self, pages: &[(PageId, &[u8])]) -> Result<Option<u64>, StorageError> {
        let mut end = 0;
        for &(pid, image) in pages {
            let len = self.wal.page_image_len(image.len());
            self.wal.wait_buffer_room(len).await?;
            if !self.wal.has_room(len) {
                return Ok(None);
            }
            end = self.wal.append_page_image(pid, image)?;
        }
        Ok(Some(end))
    }
}

impl WriteAhead for LogWriteAhead {
    fn before_write<'a>(
        &'a self,
        pages: &'a [(PageId, &'a [u8])],
        lsn: u64,
    ) -> Pin<Box<dyn Future<Output = Result<bool, StorageError>> + 'a>> {
        Box::pin(async move {
            let mut upto = lsn;
            if self.images {
                match self.log_images(pages).await? {
                    Some(end) => upto = upto.max(end),
                    None => return Ok(false),
                }
            }
            self.wal.wait_durable(upto).await?;
            Ok(true)
        })
    }
}

/// Recovery: writes each page image of `records` (in log order) in place where the page there
/// is torn, missing or older (a lower page LSN); returns how many it wrote. The pages are made
/// durable by recovery's checkpoint; until then the images stay in the log.
pub(super) async fn apply_page_images(
    io: &Io,
    page_size: usize,
    records: &[(u64, Decoded)],
) -> Result<u64, StorageError> {
    let mut written = 0;
    for (_, record) in records {
        let Decoded::PageImage { page: pid, image } = record else {
            continue;
        };
        if image.len() != page_size || page::verify(image, *pid).is_err() {
            // Intact as a record (its CRC held) but not a page of this database.
            return Err(StorageError::corrupt(
                *pid,
                crate::error::Corruption::BadPageImage,
            ));
        }
        let offset = pid * page_size as u64;
        let on_disk = crate::chunked::read(io, FILE_IDS.data, offset, page_size).await?;
        let keep = on_disk.len() == page_size
            && page::verify(&on_disk, *pid).is_ok()
            && page::lsn(&on_disk) >= page::lsn(image);
        if keep {
            continue;
        }
        let mut buf = AlignedBuf::new(page_size);
        buf.as_mut_slice().copy_from_slice(image);
        let (r, _) = io.write(FILE_IDS.data, offset, buf).await;
        if r? != page_size {
            return Err(StorageError::ShortWrite {
                page: *pid,
                written_bytes: 0,
                page_bytes: page_size,
            });
        }
        written += 1;
    }
    Ok(written)
}
