//! The meta page (page 0): where the tree starts, how far the file is allocated, which pages
//! are free. Written by every flush (and every checkpoint with a log); verified (checksum, page
//! id) like every other page.
//!
//! Layout after the common page header (little-endian):
//! ```text
//! +0   magic          u64  "RINGDBM3" ("RINGDBM2" is still read: free ids at +64, no chain)
//! +8   page_size      u32
//! +12  height         u32
//! +16  root           u64
//! +24  next_pid       u64
//! +32  free_count     u32  free page ids stored in this page, from +96
//! +36  durability     u32  0: no log; else the log is on (checkpoints write this page)
//! +40  epoch          u64  checkpoints completed (the double-write area names its epoch)
//! +48  redo_lsn       u64  recovery replays the log from here
//! +56  wal_bytes      u64  the circular log's size
//! +64  free_list_head u64  first page of the free-list chain (0: none), see `freelist.rs`
//! +72  (named tables' catalog page, then reserved up to +96)
//! +96  free ids       u64 x free_count
//! ```
//! The free pages that do not fit here are listed in the chain of free-list pages that starts
//! at `free_list_head`: the list survives a reopen in full.

use crate::buffer::PageId;
use crate::error::{Corruption, OpenError, StorageError};
use crate::page;
use crate::tree::TreeRoot;

/// The magic of this format.
const MAGIC: u64 = u64::from_le_bytes(*b"RINGDBM3");
/// The previous format: the same fields up to +64, free ids from +64, no free-list chain.
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
const OFF_FREE_LIST_HEAD: usize = 64;
/// Where the free ids start; +72..+96 belong to the named tables' catalog and a reserve.
const OFF_FREE_IDS: usize = 96;
/// Where the free ids start in a `RINGDBM2` meta page.
const OFF_FREE_IDS_V2: usize = 64;

/// The meta page's id.
pub const META_PID: PageId = 0;

/// The meta record, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Bytes per page.
    pub page_size: u32,
    /// The tree's root and height.
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
        let mut put_u64 = |at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        put_u64(OFF_MAGIC, MAGIC);
        put_u64(OFF_ROOT, self.root.root);
        put_u64(OFF_NEXT_PID, self.next_pid);
        put_u64(OFF_EPOCH, self.epoch);
        put_u64(OFF_REDO_LSN, self.redo_lsn);
        put_u64(OFF_WAL_BYTES, self.wal_bytes);
        put_u64(OFF_FREE_LIST_HEAD, self.free_list_head);
        for (i, pid) in self.free_pages.iter().enumerate() {
            put_u64(OFF_FREE_IDS + 8 * i, *pid);
        }
        let mut put_u32 = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put_u32(OFF_PAGE_SIZE, self.page_size);
        put_u32(OFF_HEIGHT, self.root.height);
        put_u32(OFF_FREE_COUNT, n as u32);
        put_u32(OFF_DURABILITY, u32::from(self.logged));
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
        let first_id = match rd_u64(b, OFF_MAGIC) {
            MAGIC => OFF_FREE_IDS,
            MAGIC_V2 => OFF_FREE_IDS_V2,
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
        let free_list_head = if first_id == OFF_FREE_IDS {
            rd_u64(b, OFF_FREE_LIST_HEAD)
        } else {
            0
        };
        let free_pages = read_free_ids(b, first_id, root, next_pid, free_list_head).map_err(bad)?;
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
        })
    }

    /// Whether `pid` may be a free page (or a free-list page) of this database: allocated,
    /// and neither the meta page nor the root.
    pub fn may_be_free(&self, pid: PageId) -> bool {
        may_be_free(pid, self.root, self.next_pid)
    }
}

fn may_be_free(pid: PageId, root: TreeRoot, next_pid: PageId) -> bool {
    pid != META_PID && pid < next_pid && pid != root.root
}

/// The root and height must name an allocated page and a height a node can record.
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

/// The free ids stored in the meta body `b` from `first_id` on, and the chain's head, each
/// checked to be a page that may be free.
fn read_free_ids(
    b: &[u8],
    first_id: usize,
    root: TreeRoot,
    next_pid: PageId,
    head: PageId,
) -> Result<Vec<PageId>, Corruption> {
    let n = rd_u32(b, OFF_FREE_COUNT) as usize;
    if n > capacity_from(b.len() + page::HEADER_SIZE, first_id) {
        return Err(Corruption::FreeListTooLong { count: n });
    }
    if head != 0 && !may_be_free(head, root, next_pid) {
        return Err(Corruption::FreePageOutOfRange { free_page: head });
    }
    let free_pages = (0..n)
        .map(|i| rd_u64(b, first_id + 8 * i))
        .collect::<Vec<_>>();
    match free_pages
        .iter()
        .find(|&&f| !may_be_free(f, root, next_pid))
    {
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
}
