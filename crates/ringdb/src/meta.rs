//! The meta page (page 0): where the default table's tree starts, where the catalog of the
//! other tables is, how far the file is allocated, which pages are free. Written by every
//! flush (and every checkpoint with a log); verified (checksum, page id) like every other page.
//!
//! Layout after the common page header (little-endian), format `RINGDBM3`:
//! ```text
//! +0   magic          u64  "RINGDBM3"
//! +8   page_size      u32
//! +12  height         u32  the default table's tree (table 0)
//! +16  root           u64
//! +24  next_pid       u64
//! +32  free_count     u32  free page ids stored in this page, from +96
//! +36  durability     u32  0: no log; else the log is on (checkpoints write this page)
//! +40  epoch          u64  checkpoints completed (the double-write area names its epoch)
//! +48  redo_lsn       u64  recovery replays the log from here
//! +56  wal_bytes      u64  the circular log's size
//! +64  free_list_head u64  first page of the free-list chain (0: none), see `freelist.rs`
//! +72  catalog        u64  the catalog page's id (named tables, `catalog.rs`); 0: none yet
//! +80  -              16 bytes, 0
//! +96  free ids       u64 x free_count
//! ```
//! The free pages that do not fit here are listed in the chain of free-list pages that starts
//! at `free_list_head`: the list survives a reopen in full. The catalog page is in use: it is
//! never free, never a chain page.
//!
//! A meta page of the previous format, `RINGDBM2` (the same fields up to +64, the free ids
//! from +64, no chain, no catalog), is read as a database of one default table whose free list
//! is the ids in the page; the next flush or checkpoint writes it as `RINGDBM3`. `RINGDBM1`
//! (no log) is refused as [`Corruption::OlderFormat`].

use crate::error::{Corruption, OpenError, StorageError};
use crate::ids::PageId;
use crate::page;

/// Where a tree starts: kept in the meta page (the default tree's) and the catalog (each
/// table's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeRoot {
    /// The root node's page.
    pub root: PageId,
    /// 1 when the root is a leaf.
    pub height: u32,
}

/// The magic of this format.
const MAGIC: u64 = u64::from_le_bytes(*b"RINGDBM3");
/// The previous format: the same fields up to +64, free ids from +64, no free-list chain and
/// no catalog (one default table).
const MAGIC_V2: u64 = u64::from_le_bytes(*b"RINGDBM2");
/// The format before the log: refused.
const MAGIC_V1: u64 = u64::from_le_bytes(*b"RINGDBM1");

// Field offsets in the body (after the page header); see the layout above.
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
/// The free-list chain's first page.
pub const OFF_FREE_LIST_HEAD: usize = 64;
/// The catalog page's id.
pub const OFF_CATALOG: usize = 72;
/// Where the free ids start (`RINGDBM3`).
const OFF_FREE_IDS: usize = 96;
/// Where the free ids start in a `RINGDBM2` meta page.
const OFF_FREE_IDS_V2: usize = 64;

const _: () = assert!(OFF_FREE_LIST_HEAD + 8 <= OFF_CATALOG && OFF_CATALOG + 8 <= OFF_FREE_IDS);

/// The meta page's id.
pub const META_PID: PageId = 0;

/// The meta record, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Bytes per page.
    pub page_size: u32,
    /// The default table's tree: its root and height.
    pub root: TreeRoot,
    /// The first page id never allocated.
    pub next_pid: PageId,
    /// The free page ids stored in the meta page itself (at most
    /// [`free_capacity`](Self::free_capacity)); the others are on the chain.
    pub free_pages: Vec<PageId>,
    /// The first page of the free-list chain (0: no chain).
    pub free_list_head: PageId,
    /// Whether the database keeps a write-ahead log.
    pub logged: bool,
    /// Checkpoints completed.
    pub epoch: u64,
    /// Recovery replays the log from this LSN.
    pub redo_lsn: u64,
    /// The circular log's size in bytes.
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

/// Free ids a meta page whose ids start at `first_id` holds.
fn capacity_from(page_size: usize, first_id: usize) -> usize {
    (page_size - page::HEADER_SIZE - first_id) / 8
}

impl Meta {
    /// Free page ids one meta page can hold (the rest go on the free-list chain).
    pub fn free_capacity(page_size: usize) -> usize {
        capacity_from(page_size, OFF_FREE_IDS)
    }

    /// Writes the meta record into `p` (a page whose header the caller initialised). The
    /// ids beyond [`free_capacity`](Self::free_capacity) belong on the chain, never here.
    pub fn write_to(&self, p: &mut [u8]) {
        let n = self.free_pages.len();
        assert!(
            n <= Self::free_capacity(p.len()),
            "{n} free ids given to a meta page that holds {}",
            Self::free_capacity(p.len())
        );
        let b = &mut p[page::HEADER_SIZE..];
        b[..OFF_FREE_IDS].fill(0);
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
        wr_u64(b, OFF_FREE_LIST_HEAD, self.free_list_head);
        wr_u64(b, OFF_CATALOG, self.catalog);
        for (i, pid) in self.free_pages.iter().enumerate() {
            wr_u64(b, OFF_FREE_IDS + 8 * i, *pid);
        }
    }

    /// Parses a meta page read from disk (already checksum-verified), refusing one that does
    /// not describe a ringdb tree of this page size. A `RINGDBM2` page reads as a database of
    /// one default table (no catalog) without a free-list chain.
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
        // The free ids' offset, the chain's head and the catalog page, by format.
        let (first_id, free_list_head, catalog) = match rd_u64(b, OFF_MAGIC) {
            MAGIC => (
                OFF_FREE_IDS,
                rd_u64(b, OFF_FREE_LIST_HEAD),
                rd_u64(b, OFF_CATALOG),
            ),
            MAGIC_V2 => (OFF_FREE_IDS_V2, 0, NO_CATALOG),
            MAGIC_V1 => return Err(bad(Corruption::OlderFormat)),
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
        check_root(root, next_pid).map_err(bad)?;
        check_catalog(catalog, root, next_pid).map_err(bad)?;
        let in_use = InUse {
            root: root.root,
            catalog,
            next_pid,
        };
        let free_pages = read_free_ids(b, first_id, in_use, free_list_head).map_err(bad)?;
        Ok(Meta {
            page_size,
            root,
            next_pid,
            free_pages,
            free_list_head,
            logged: rd_u32(b, OFF_DURABILITY) != 0,
            epoch: rd_u64(b, OFF_EPOCH),
            redo_lsn: rd_u64(b, OFF_REDO_LSN),
            wal_bytes: rd_u64(b, OFF_WAL_BYTES),
            catalog,
        })
    }

    /// Whether `pid` may be a free page (or a free-list page) of this database: allocated,
    /// and neither the meta page, the default table's root nor the catalog page.
    pub fn may_be_free(&self, pid: PageId) -> bool {
        let in_use = InUse {
            root: self.root.root,
            catalog: self.catalog,
            next_pid: self.next_pid,
        };
        in_use.may_be_free(pid)
    }
}

/// What the meta page itself says is in use (besides the meta page): no free id may name it.
#[derive(Clone, Copy)]
struct InUse {
    root: PageId,
    catalog: PageId,
    next_pid: PageId,
}

impl InUse {
    /// Whether `pid` may be free: allocated, not the meta page, the root or the catalog page.
    fn may_be_free(self, pid: PageId) -> bool {
        pid != META_PID && pid < self.next_pid && pid != self.root && pid != self.catalog
    }
}

/// The meta page is corrupt for `reason`.
fn bad(reason: Corruption) -> OpenError {
    OpenError::from(StorageError::corrupt(META_PID, reason))
}

/// The default table's root lies among the pages allocated, at a height a tree can have.
fn check_root(root: TreeRoot, next_pid: PageId) -> Result<(), Corruption> {
    let TreeRoot { root: pid, height } = root;
    if height == 0 || height > 64 || pid == META_PID || pid >= next_pid {
        return Err(Corruption::BadRoot {
            root: pid,
            height,
            next_page: next_pid,
        });
    }
    Ok(())
}

/// The catalog page, when there is one, is allocated and not the default table's root (that
/// it is not free is checked with the free ids).
fn check_catalog(catalog: PageId, root: TreeRoot, next_pid: PageId) -> Result<(), Corruption> {
    if catalog == NO_CATALOG {
        return Ok(());
    }
    if catalog >= next_pid {
        return Err(Corruption::PastEnd { pages: next_pid });
    }
    if catalog == root.root {
        return Err(Corruption::BadRoot {
            root: root.root,
            height: root.height,
            next_page: next_pid,
        });
    }
    Ok(())
}

/// The free ids stored in the meta body `b` from `first_id` on, and the chain's head, each
/// checked to be a page that may be free (`in_use` names none of them).
fn read_free_ids(
    b: &[u8],
    first_id: usize,
    in_use: InUse,
    head: PageId,
) -> Result<Vec<PageId>, Corruption> {
    let n = rd_u32(b, OFF_FREE_COUNT) as usize;
    if n > capacity_from(b.len() + page::HEADER_SIZE, first_id) {
        return Err(Corruption::FreeListTooLong { count: n });
    }
    if head != 0 && !in_use.may_be_free(head) {
        return Err(Corruption::FreePageOutOfRange { free_page: head });
    }
    let free_pages = (0..n)
        .map(|i| rd_u64(b, first_id + 8 * i))
        .collect::<Vec<_>>();
    match free_pages.iter().find(|&&f| !in_use.may_be_free(f)) {
        Some(&free_page) => Err(Corruption::FreePageOutOfRange { free_page }),
        None => Ok(free_pages),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(free_pages: Vec<PageId>, free_list_head: PageId) -> Meta {
        Meta {
            page_size: 4096,
            root: TreeRoot { root: 1, height: 2 },
            next_pid: 100,
            free_pages,
            free_list_head,
            logged: true,
            epoch: 3,
            redo_lsn: 64,
            wal_bytes: 1 << 20,
            catalog: NO_CATALOG,
        }
    }

    fn page_of(m: &Meta) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        page::init(&mut p, page::PageType::Meta);
        m.write_to(&mut p);
        p
    }

    #[test]
    fn a_meta_page_round_trips_with_its_chain_head() {
        let m = meta(vec![5, 6, 7], 9);
        assert_eq!(Meta::read_from(&page_of(&m)).unwrap(), m);
    }

    #[test]
    fn a_meta_page_round_trips_with_its_chain_head_and_catalog() {
        let m = Meta {
            catalog: 4,
            ..meta(vec![5, 6, 7], 9)
        };
        let p = page_of(&m);
        assert_eq!(Meta::read_from(&p).unwrap(), m);
        let b = &p[page::HEADER_SIZE..];
        assert_eq!(rd_u64(b, OFF_FREE_LIST_HEAD), 9);
        assert_eq!(rd_u64(b, OFF_CATALOG), 4);
        assert!(b[OFF_CATALOG + 8..OFF_FREE_IDS].iter().all(|&x| x == 0));
        assert_eq!(rd_u64(b, OFF_FREE_IDS), 5);
    }

    #[test]
    fn a_ringdbm2_meta_page_is_read_with_its_ids_at_64_and_no_chain() {
        let m = meta(vec![5, 6, 7], 0);
        let mut p = page_of(&m);
        let b = &mut p[page::HEADER_SIZE..];
        b[OFF_MAGIC..OFF_MAGIC + 8].copy_from_slice(b"RINGDBM2");
        b.copy_within(OFF_FREE_IDS..OFF_FREE_IDS + 24, OFF_FREE_IDS_V2);
        assert_eq!(Meta::read_from(&p).unwrap(), m);
    }

    #[test]
    fn a_chain_head_out_of_range_is_refused() {
        for head in [META_PID, 1, 100] {
            let p = page_of(&meta(vec![], head));
            match Meta::read_from(&p) {
                Err(OpenError::Storage(StorageError::Corrupt {
                    reason: Corruption::FreePageOutOfRange { free_page },
                    ..
                })) if head != META_PID => assert_eq!(free_page, head),
                Ok(m) if head == META_PID => assert_eq!(m.free_list_head, 0),
                other => panic!("head {head}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_catalog_page_is_never_free_nor_the_chain_head() {
        let free_catalog = Meta {
            catalog: 6,
            ..meta(vec![5, 6, 7], 0)
        };
        let chain_catalog = Meta {
            catalog: 9,
            ..meta(vec![5], 9)
        };
        for (m, page) in [(free_catalog, 6), (chain_catalog, 9)] {
            match Meta::read_from(&page_of(&m)) {
                Err(OpenError::Storage(StorageError::Corrupt {
                    reason: Corruption::FreePageOutOfRange { free_page },
                    ..
                })) => assert_eq!(free_page, page),
                other => panic!("catalog {page} listed free: {other:?}"),
            }
        }
        assert!(!Meta {
            catalog: 4,
            ..meta(vec![], 0)
        }
        .may_be_free(4));
    }
}
