//! The meta page (page 0): where the tree starts, how far the file is allocated, which pages
//! are free. Written by every flush; verified (checksum, page id) like every other page.
//!
//! Layout after the common page header (little-endian):
//! ```text
//! +0   magic        u64  "RINGDBM1"
//! +8   page_size    u32
//! +12  height       u32
//! +16  root         u64
//! +24  next_pid     u64
//! +32  free_count   u32  (free page ids stored below; any beyond the page are leaked)
//! +36  durability   u32  0: no log; else the log is on (checkpoints write this page)
//! +40  epoch        u64  checkpoints completed (the double-write area names its epoch)
//! +48  redo_lsn     u64  recovery replays the log from here
//! +56  wal_bytes    u64  the circular log's size
//! +64  free ids     u64 x free_count
//! ```

use crate::buffer::PageId;
use crate::error::{Corruption, OpenError, StorageError};
use crate::page;
use crate::tree::TreeRoot;

const MAGIC: u64 = u64::from_le_bytes(*b"RINGDBM2");
const FREE_IDS: usize = 64;

/// The meta page's id.
pub const META_PID: PageId = 0;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub page_size: u32,
    pub root: TreeRoot,
    pub next_pid: PageId,
    pub free_pages: Vec<PageId>,
    /// Whether the database keeps a write-ahead log.
    pub logged: bool,
    pub epoch: u64,
    pub redo_lsn: u64,
    pub wal_bytes: u64,
}

fn body(p: &[u8]) -> &[u8] {
    &p[page::HEADER_SIZE..]
}

fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn rd_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Meta {
    /// Free page ids one meta page can hold.
    pub fn free_capacity(page_size: usize) -> usize {
        (page_size - page::HEADER_SIZE - FREE_IDS) / 8
    }

    /// Writes the meta record into `p` (a page whose header the caller initialised).
    pub fn write_to(&self, p: &mut [u8]) {
        let cap = Self::free_capacity(p.len());
        let n = self.free_pages.len().min(cap);
        let b = &mut p[page::HEADER_SIZE..];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&self.page_size.to_le_bytes());
        b[12..16].copy_from_slice(&self.root.height.to_le_bytes());
        b[16..24].copy_from_slice(&self.root.root.to_le_bytes());
        b[24..32].copy_from_slice(&self.next_pid.to_le_bytes());
        b[32..36].copy_from_slice(&(n as u32).to_le_bytes());
        b[36..40].copy_from_slice(&u32::from(self.logged).to_le_bytes());
        b[40..48].copy_from_slice(&self.epoch.to_le_bytes());
        b[48..56].copy_from_slice(&self.redo_lsn.to_le_bytes());
        b[56..64].copy_from_slice(&self.wal_bytes.to_le_bytes());
        for (i, pid) in self.free_pages.iter().take(n).enumerate() {
            let at = FREE_IDS + 8 * i;
            b[at..at + 8].copy_from_slice(&pid.to_le_bytes());
        }
    }

    /// Parses a meta page read from disk (already checksum-verified), refusing one that does
    /// not describe a ringdb tree of this page size.
    pub fn read_from(p: &[u8]) -> Result<Meta, OpenError> {
        // Whatever its bytes say, a buffer that is no page has no meta record to read.
        if !page::valid_page_size(p.len()) {
            return Err(StorageError::from(page::PageError::BadSize {
                page: META_PID,
                len: p.len(),
            })
            .into());
        }
        let b = body(p);
        let bad = |reason: Corruption| OpenError::from(StorageError::corrupt(META_PID, reason));
        if rd_u64(b, 0) == u64::from_le_bytes(*b"RINGDBM1") {
            return Err(bad(Corruption::OlderFormat));
        }
        if rd_u64(b, 0) != MAGIC {
            return Err(bad(Corruption::NotMeta));
        }
        let page_size = rd_u32(b, 8);
        if page_size as usize != p.len() {
            return Err(OpenError::PageSizeMismatch {
                path: None,
                on_disk: page_size as usize,
                requested: p.len(),
            });
        }
        let height = rd_u32(b, 12);
        let root = rd_u64(b, 16);
        let next_pid = rd_u64(b, 24);
        let n = rd_u32(b, 32) as usize;
        if height == 0 || height > 64 || root == META_PID || root >= next_pid {
            return Err(bad(Corruption::BadRoot {
                root,
                height,
                next_page: next_pid,
            }));
        }
        if n > Self::free_capacity(p.len()) {
            return Err(bad(Corruption::FreeListTooLong { count: n }));
        }
        let free_pages = (0..n)
            .map(|i| rd_u64(b, FREE_IDS + 8 * i))
            .collect::<Vec<_>>();
        if let Some(&free_page) = free_pages
            .iter()
            .find(|&&f| f == META_PID || f >= next_pid || f == root)
        {
            return Err(bad(Corruption::FreePageOutOfRange { free_page }));
        }
        Ok(Meta {
            page_size,
            root: TreeRoot { root, height },
            next_pid,
            free_pages,
            logged: rd_u32(b, 36) != 0,
            epoch: rd_u64(b, 40),
            redo_lsn: rd_u64(b, 48),
            wal_bytes: rd_u64(b, 56),
        })
    }
}
