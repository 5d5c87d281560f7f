//! The meta page (page 0): where the default table's tree starts, where the catalog of the
//! other tables is, how far the file is allocated, which pages are free. Written by every
//! flush; verified (checksum, page id) like every other page.
//!
//! Layout after the common page header (little-endian), format `RINGDBM3`:
//! ```text
//! +0   magic        u64  "RINGDBM3"
//! +8   page_size    u32
//! +12  height       u32  the default table's tree (table 0)
//! +16  root         u64
//! +24  next_pid     u64
//! +32  free_count   u32  (free page ids stored below; any beyond the page are leaked)
//! +36  durability   u32  0: no log; else the log is on (checkpoints write this page)
//! +40  epoch        u64  checkpoints completed (the double-write area names its epoch)
//! +48  redo_lsn     u64  recovery replays the log from here
//! +56  wal_bytes    u64  the circular log's size
//! +64  -            u64  reserved for the free list's head page (0 here)
//! +72  catalog      u64  the catalog page's id (named tables, `catalog.rs`); 0: none yet
//! +80  -            16 bytes, 0
//! +96  free ids     u64 x free_count
//! ```
//!
//! A meta page of the previous format, `RINGDBM2` (the same fields up to +64, the free ids
//! from +64, no catalog), is read as a database of one default table; the next flush or
//! checkpoint writes it as `RINGDBM3`. `RINGDBM1` (no log) is refused as
//! [`Corruption::OlderFormat`].

use crate::buffer::PageId;
use crate::error::{Corruption, OpenError, StorageError};
use crate::page;
use crate::tree::TreeRoot;

const MAGIC: u64 = u64::from_le_bytes(*b"RINGDBM3");
/// The previous format: read as one default table, free ids at [`M2_FREE_IDS`].
const MAGIC_M2: u64 = u64::from_le_bytes(*b"RINGDBM2");
/// The format before the log: refused.
const MAGIC_M1: u64 = u64::from_le_bytes(*b"RINGDBM1");

// Field offsets in the body (see the layout above).
const OFF_MAGIC: usize = 0;
const OFF_PAGE_SIZE: usize = 8;
const OFF_HEIGHT: usize = 12;
const OFF_ROOT: usize = 16;
const OFF_NEXT_PID: usize = 24;
const OFF_FREE_COUNT: usize = 32;
const OFF_DURABILITY: usize = 36;
const OFF_EPOCH: usize = 40;
const OFF_REDO_LSN: usize = 48;
const OFF_WAL_BYTES: usize = 56;
/// Reserved for the free list's head page (another change fills it).
pub const OFF_FREE_LIST_HEAD: usize = 64;
/// The catalog page's id.
pub const OFF_CATALOG: usize = 72;
/// Where the free page ids start (`RINGDBM3`).
const FREE_IDS: usize = 96;
/// Where the free page ids start in a `RINGDBM2` page.
const M2_FREE_IDS: usize = 64;

const _: () = assert!(OFF_FREE_LIST_HEAD + 8 <= OFF_CATALOG && OFF_CATALOG + 8 <= FREE_IDS);

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
    /// The catalog page (named tables); [`NO_CATALOG`] while the database has none.
    pub catalog: PageId,
}

/// The meta page's `catalog` while no table was created: the default table needs none.
pub const NO_CATALOG: PageId = 0;

fn body(p: &[u8]) -> &[u8] {
    &p[page::HEADER_SIZE..]
}

fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn rd_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn wr_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn wr_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
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
        b[..FREE_IDS].fill(0);
        wr_u64(b, OFF_MAGIC, MAGIC);
        wr_u32(b, OFF_PAGE_SIZE, self.page_size);
        wr_u32(b, OFF_HEIGHT, self.root.height);
        wr_u64(b, OFF_ROOT, self.root.root);
        wr_u64(b, OFF_NEXT_PID, self.next_pid);
        wr_u32(b, OFF_FREE_COUNT, n as u32);
        wr_u32(b, OFF_DURABILITY, u32::from(self.logged));
        wr_u64(b, OFF_EPOCH, self.epoch);
        wr_u64(b, OFF_REDO_LSN, self.redo_lsn);
        wr_u64(b, OFF_WAL_BYTES, self.wal_bytes);
        wr_u64(b, OFF_CATALOG, self.catalog);
        for (i, pid) in self.free_pages.iter().take(n).enumerate() {
            let at = FREE_IDS + 8 * i;
            b[at..at + 8].copy_from_slice(&pid.to_le_bytes());
        }
    }

    /// Parses a meta page read from disk (already checksum-verified), refusing one that does
    /// not describe a ringdb tree of this page size. A `RINGDBM2` page reads as a database of
    /// one default table (no catalog).
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
        let (free_ids, catalog) = match rd_u64(b, OFF_MAGIC) {
            MAGIC => (FREE_IDS, rd_u64(b, OFF_CATALOG)),
            MAGIC_M2 => (M2_FREE_IDS, NO_CATALOG),
            MAGIC_M1 => return Err(bad(Corruption::OlderFormat)),
            _ => return Err(bad(Corruption::NotMeta)),
        };
        let page_size = rd_u32(b, OFF_PAGE_SIZE);
        if page_size as usize != p.len() {
            return Err(OpenError::PageSizeMismatch {
                path: None,
                on_disk: page_size as usize,
                requested: p.len(),
            });
        }
        let root = TreeRoot {
            root: rd_u64(b, OFF_ROOT),
            height: rd_u32(b, OFF_HEIGHT),
        };
        let next_pid = rd_u64(b, OFF_NEXT_PID);
        check_root(root, next_pid)?;
        let free_pages = read_free_pages(b, free_ids, next_pid)?;
        check_catalog(catalog, root, next_pid, &free_pages)?;
        if let Some(&free_page) = free_pages.iter().find(|&&f| f == root.root) {
            return Err(bad(Corruption::FreePageOutOfRange { free_page }));
        }
        Ok(Meta {
            page_size,
            root,
            next_pid,
            free_pages,
            logged: rd_u32(b, OFF_DURABILITY) != 0,
            epoch: rd_u64(b, OFF_EPOCH),
            redo_lsn: rd_u64(b, OFF_REDO_LSN),
            wal_bytes: rd_u64(b, OFF_WAL_BYTES),
            catalog,
        })
    }
}

/// The meta page is corrupt for `reason`.
fn bad(reason: Corruption) -> OpenError {
    OpenError::from(StorageError::corrupt(META_PID, reason))
}

/// The default table's root lies among the pages allocated, at a height a tree can have.
fn check_root(root: TreeRoot, next_pid: PageId) -> Result<(), OpenError> {
    let height = root.height;
    if height == 0 || height > 64 || root.root == META_PID || root.root >= next_pid {
        return Err(bad(Corruption::BadRoot {
            root: root.root,
            height,
            next_page: next_pid,
        }));
    }
    Ok(())
}

/// The free page ids stored from `at` on (each allocated, none the meta page).
fn read_free_pages(b: &[u8], at: usize, next_pid: PageId) -> Result<Vec<PageId>, OpenError> {
    let n = rd_u32(b, OFF_FREE_COUNT) as usize;
    let capacity = (b.len() - at) / 8;
    if n > capacity {
        return Err(bad(Corruption::FreeListTooLong { count: n }));
    }
    let free_pages = (0..n).map(|i| rd_u64(b, at + 8 * i)).collect::<Vec<_>>();
    if let Some(&free_page) = free_pages.iter().find(|&&f| f == META_PID || f >= next_pid) {
        return Err(bad(Corruption::FreePageOutOfRange { free_page }));
    }
    Ok(free_pages)
}

/// The catalog page, when there is one, is allocated, not the default table's root and not
/// free.
fn check_catalog(
    catalog: PageId,
    root: TreeRoot,
    next_pid: PageId,
    free_pages: &[PageId],
) -> Result<(), OpenError> {
    if catalog == NO_CATALOG {
        return Ok(());
    }
    if catalog >= next_pid {
        return Err(bad(Corruption::PastEnd { pages: next_pid }));
    }
    if catalog == root.root {
        return Err(bad(Corruption::BadRoot {
            root: root.root,
            height: root.height,
            next_page: next_pid,
        }));
    }
    if free_pages.contains(&catalog) {
        return Err(bad(Corruption::FreePageOutOfRange { free_page: catalog }));
    }
    Ok(())
}
