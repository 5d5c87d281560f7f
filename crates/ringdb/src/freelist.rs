//! The free-page list on disk: the ids the meta page cannot hold live in a chain of
//! free-list pages, so that the whole list survives a reopen (before, the ids beyond the meta
//! page were dropped at every meta write: those pages were neither in the tree nor free, and
//! the file only grew).
//!
//! # A free-list page
//! The common page header (type [`PageType::FreeList`], sealed and verified like every page:
//! checksum and page id), then, little-endian:
//! ```text
//! +0   next      u64  the next page of the chain (0: the last one)
//! +8   count     u32  ids stored below
//! +12  reserved  u32  0
//! +16  ids       u64 x count
//! ```
//!
//! # Which pages hold the chain, and when they may be reused
//! The chain lives in pages that are themselves free (SQLite's trunk pages): recording the
//! list needs no allocation, and the file does not grow for it. The free list on disk is the
//! ids in the meta page, the ids on the chain, and the chain's own pages.
//!
//! A chain page must never be handed out and overwritten while the last meta page written may
//! still point at it. The buffer manager (`buffer/free_list.rs`) therefore keeps the chain's
//! pages *held*: free, counted by `verify`, listed in the next meta write, but not allocatable.
//! Each meta write picks its new chain pages among the allocatable free pages (never among the
//! held ones, which the previous meta still names) and, once it has completed, makes the
//! previous chain's pages allocatable again. A write that fails leaves both held until a
//! later one completes. After a reopen, the chain just read is held until the next meta write.
//!
//! With a log, the chain pages are part of the checkpoint: they go to the double-write file
//! with the dirty pages and the meta page, and in place only once that copy is durable, so a
//! torn chain page is repaired by recovery like any other page of the checkpoint. The chain
//! holds no log-derived state (page LSN 0), so the write-ahead rule holds trivially; the pages
//! it occupies were free at the cut, so no committed state is overwritten before the new meta
//! page is in the double-write copy. Without a log, a flush writes the chain pages directly
//! (they are not in the pool), before the meta page is changed in the pool, so a meta page
//! never reaches the disk naming a chain that was not written.
//!
//! # Reading it back
//! [`read`] follows the chain from the meta page's head with direct reads, bounded: a chain
//! longer than the data's page count, a loop, an id out of range, an id listed twice or a page
//! that is not a sealed free-list page is a typed corruption error, never a panic. An id "out
//! of range" includes the pages the meta page names as in use: the default table's root and
//! the named tables' catalog page ([`Meta::may_be_free`]), which are never free.

use crate::error::{Corruption, StorageError};
use crate::ids::PageId;
use crate::meta::Meta;
use crate::page::{self, PageType};
use ringdb_io::{AlignedBuf, FileId, Io};
use std::collections::HashSet;

// Field offsets in the body (after the page header).
const OFF_NEXT: usize = 0;
const OFF_COUNT: usize = 8;
const OFF_RESERVED: usize = 12;
const OFF_IDS: usize = 16;

/// Ids one free-list page of `page_size` bytes holds.
pub fn ids_per_page(page_size: usize) -> usize {
    (page_size - page::HEADER_SIZE - OFF_IDS) / 8
}

/// A free-list page, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainPage {
    /// The next page of the chain (0: none).
    pub next: PageId,
    /// The free ids it lists.
    pub ids: Vec<PageId>,
}

/// Fills `p` with the sealed free-list page `pid` listing `ids`, followed by `next`.
pub fn encode(p: &mut [u8], pid: PageId, next: PageId, ids: &[PageId]) {
    assert!(
        ids.len() <= ids_per_page(p.len()),
        "{} ids for a free-list page that holds {}",
        ids.len(),
        ids_per_page(p.len())
    );
    page::init(p, PageType::FreeList);
    let b = &mut p[page::HEADER_SIZE..];
    b[OFF_NEXT..OFF_NEXT + 8].copy_from_slice(&next.to_le_bytes());
    b[OFF_COUNT..OFF_COUNT + 4].copy_from_slice(&(ids.len() as u32).to_le_bytes());
    for (i, id) in ids.iter().enumerate() {
        let at = OFF_IDS + 8 * i;
        b[at..at + 8].copy_from_slice(&id.to_le_bytes());
    }
    page::seal(p, pid);
}

/// Decodes free-list page `pid` read from disk: verifies it (checksum, page id, header) and
/// its type and count. The ids themselves are checked by [`read`], which knows the file.
pub fn decode(p: &[u8], pid: PageId) -> Result<ChainPage, StorageError> {
    page::verify(p, pid)?;
    let found = p[page::OFF_TYPE];
    if found != PageType::FreeList as u8 {
        return Err(StorageError::corrupt(
            pid,
            Corruption::NotFreeListPage { found },
        ));
    }
    let b = &p[page::HEADER_SIZE..];
    let rd_u64 = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let count = u32::from_le_bytes(b[OFF_COUNT..OFF_COUNT + 4].try_into().expect("4 bytes"));
    let reserved = &b[OFF_RESERVED..OFF_RESERVED + 4];
    let count = count as usize;
    if count > ids_per_page(p.len()) || reserved != [0; 4] {
        return Err(StorageError::corrupt(
            pid,
            Corruption::FreeListTooLong { count },
        ));
    }
    Ok(ChainPage {
        next: rd_u64(OFF_NEXT),
        ids: (0..count).map(|i| rd_u64(OFF_IDS + 8 * i)).collect(),
    })
}

/// The whole free list of a database, as read back on open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FreeList {
    /// Free ids, reusable at once: the meta page's and the chain's.
    pub free: Vec<PageId>,
    /// The chain's own pages: free, but held until the next meta write (the meta page on disk
    /// still names them).
    pub chain: Vec<PageId>,
}

/// Reads the whole free list `meta` describes: its own ids and the chain's, following the
/// chain with reads of `file` (the data file). Bounded by the data's page count.
pub async fn read(io: &Io, file: FileId, meta: &Meta) -> Result<FreeList, StorageError> {
    let page_size = meta.page_size as usize;
    let mut list = FreeList {
        free: meta.free_pages.clone(),
        chain: Vec::new(),
    };
    let mut passed = HashSet::new();
    let mut pid = meta.free_list_head;
    while pid != 0 {
        if list.chain.len() as u64 >= meta.next_pid || !passed.insert(pid) {
            let pages = meta.next_pid;
            return Err(StorageError::corrupt(
                pid,
                Corruption::FreeListCycle { pages },
            ));
        }
        if !meta.may_be_free(pid) {
            let reason = Corruption::FreePageOutOfRange { free_page: pid };
            return Err(StorageError::corrupt(pid, reason));
        }
        let bytes = crate::chunked::read(io, file, pid * page_size as u64, page_size).await?;
        if bytes.len() < page_size {
            let reason = Corruption::ShortRead {
                read_bytes: bytes.len(),
                page_bytes: page_size,
            };
            return Err(StorageError::corrupt(pid, reason));
        }
        let page = decode(&bytes, pid)?;
        check_ids(&page.ids, pid, meta)?;
        list.free.extend(page.ids);
        list.chain.push(pid);
        pid = page.next;
    }
    check_no_twice(&list)?;
    Ok(list)
}

/// Every id on chain page `pid` may be free.
fn check_ids(ids: &[PageId], pid: PageId, meta: &Meta) -> Result<(), StorageError> {
    match ids.iter().find(|&&f| !meta.may_be_free(f)) {
        Some(&free_page) => Err(StorageError::corrupt(
            pid,
            Corruption::FreePageOutOfRange { free_page },
        )),
        None => Ok(()),
    }
}

/// No page is listed twice (as an id, or as an id and a chain page).
fn check_no_twice(list: &FreeList) -> Result<(), StorageError> {
    let mut seen = HashSet::with_capacity(list.free.len() + list.chain.len());
    for &pid in list.free.iter().chain(&list.chain) {
        if !seen.insert(pid) {
            let reason = Corruption::FreePageTwice { free_page: pid };
            return Err(StorageError::corrupt(crate::meta::META_PID, reason));
        }
    }
    Ok(())
}

/// What one meta write records of the free list: the ids for the meta page, the chain's head,
/// and the chain's pages, sealed.
pub struct FreeListImage {
    /// The ids the meta page holds.
    pub in_meta: Vec<PageId>,
    /// The chain's first page (0: none).
    pub head: PageId,
    /// The chain's pages, in chain order: (page id, sealed image).
    pub pages: Vec<(PageId, AlignedBuf)>,
}

/// Lays `ids` out over the meta page (its first [`Meta::free_capacity`]) and the chain pages
/// `chain` (the rest, [`ids_per_page`] each; pages beyond what the ids fill list none).
pub fn build(ids: &[PageId], chain: &[PageId], page_size: usize) -> FreeListImage {
    let in_meta_count = ids.len().min(Meta::free_capacity(page_size));
    let (in_meta, rest) = ids.split_at(in_meta_count);
    let per_page = ids_per_page(page_size);
    assert!(
        rest.len() <= chain.len() * per_page,
        "{} ids left for {} chain pages of {per_page}",
        rest.len(),
        chain.len()
    );
    let mut chunks = rest.chunks(per_page);
    let pages = chain
        .iter()
        .enumerate()
        .map(|(i, &pid)| {
            let next = chain.get(i + 1).copied().unwrap_or(0);
            let mut image = AlignedBuf::new(page_size);
            encode(
                image.as_mut_slice(),
                pid,
                next,
                chunks.next().unwrap_or(&[]),
            );
            (pid, image)
        })
        .collect();
    FreeListImage {
        in_meta: in_meta.to_vec(),
        head: chain.first().copied().unwrap_or(0),
        pages,
    }
}

/// Writes the chain's pages of `image` in place in `file` (a flush without a log).
pub async fn write_chain(io: &Io, file: FileId, image: &FreeListImage) -> Result<(), StorageError> {
    for (pid, bytes) in &image.pages {
        let len = bytes.len();
        let mut buf = AlignedBuf::new(len);
        buf.as_mut_slice().copy_from_slice(bytes.as_slice());
        let (r, _) = io.write(file, pid * len as u64, buf).await;
        let written_bytes = r?;
        if written_bytes != len {
            return Err(StorageError::ShortWrite {
                page: *pid,
                written_bytes,
                page_bytes: len,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_round_trips_and_its_capacity_is_enforced() {
        let mut p = vec![0u8; 4096];
        let ids: Vec<PageId> = (10..10 + ids_per_page(4096) as u64).collect();
        encode(&mut p, 7, 9, &ids);
        assert_eq!(decode(&p, 7).unwrap(), ChainPage { next: 9, ids });
        assert!(decode(&p, 8).is_err(), "another page id");
        p[page::HEADER_SIZE + OFF_COUNT] = 0xff;
        p[page::HEADER_SIZE + OFF_COUNT + 1] = 0xff;
        let sum = page::compute_checksum(&p);
        p[..4].copy_from_slice(&sum.to_le_bytes());
        assert!(matches!(
            decode(&p, 7),
            Err(StorageError::Corrupt {
                reason: Corruption::FreeListTooLong { .. },
                ..
            })
        ));
    }

    #[test]
    fn build_spreads_the_ids_over_the_meta_page_and_the_chain() {
        let cap = Meta::free_capacity(4096);
        let per = ids_per_page(4096);
        let ids: Vec<PageId> = (100..100 + (cap + per + 3) as u64).collect();
        let image = build(&ids, &[5, 6, 8], 4096);
        assert_eq!(image.in_meta, ids[..cap]);
        assert_eq!(image.head, 5);
        let pages: Vec<ChainPage> = image
            .pages
            .iter()
            .map(|(pid, b)| decode(b.as_slice(), *pid).unwrap())
            .collect();
        assert_eq!(pages[0].next, 6);
        assert_eq!(pages[1].next, 8);
        assert_eq!(pages[2].next, 0);
        assert_eq!(pages[0].ids, ids[cap..cap + per]);
        assert_eq!(pages[1].ids, ids[cap + per..]);
        assert!(pages[2].ids.is_empty());
    }
}
