//! The catalog page's bytes: [`CatalogRecord`] written into a page and parsed back (a
//! decoder of bytes from disk, so it never panics: every inconsistency is a typed
//! [`Corruption`]).
//!
//! # Layout (page type [`PageType::Catalog`], after the common page header)
//! ```text
//! +0   magic     u64  "RINGDBC1"
//! +8   count     u32  tables listed (the default table is not: the meta page holds it)
//! +12  next_id   u32  the next table id handed out
//! +16  entries   count x 88 bytes, ids ascending:
//!        +0 id u32 | +4 height u32 | +8 root u64 | +16 name_len u8 | +17 name (64 bytes,
//!        zero-padded) | +81 7 bytes 0
//! ```
//! One page bounds the number of tables: [`capacity`] = (page size - 64) / 88, so 45 tables
//! besides the default one on 4 KiB pages (10 on 1 KiB, 744 on 64 KiB pages); one more is
//! [`WriteError::TooManyTables`](crate::WriteError::TooManyTables).

use super::{TableId, MAX_NAME_BYTES};
use crate::buffer::PageId;
use crate::error::{CatalogFault, Corruption, StorageError};
use crate::meta::META_PID;
use crate::page::{self, PageType, HEADER_SIZE};
use crate::tree::TreeRoot;
use ringdb_io::AlignedBuf;

const MAGIC: u64 = u64::from_le_bytes(*b"RINGDBC1");
// Body offsets (see the layout above).
const OFF_MAGIC: usize = 0;
const OFF_COUNT: usize = 8;
const OFF_NEXT_ID: usize = 12;
const OFF_ENTRIES: usize = 16;
/// Bytes of one entry.
const ENTRY_BYTES: usize = 88;
// Entry offsets.
const ENTRY_ID: usize = 0;
const ENTRY_HEIGHT: usize = 4;
const ENTRY_ROOT: usize = 8;
const ENTRY_NAME_LEN: usize = 16;
const ENTRY_NAME: usize = 17;
const _: () = assert!(ENTRY_NAME + MAX_NAME_BYTES <= ENTRY_BYTES);
/// The tallest tree a root entry may claim (as the meta page's check).
const HEIGHT_MAX: u32 = 64;
/// Tables one catalog page of `page_size` bytes holds (besides the default table).
pub fn capacity(page_size: usize) -> usize {
    (page_size - HEADER_SIZE - OFF_ENTRIES) / ENTRY_BYTES
}

/// One table as the catalog page records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its id (never 0).
    pub table: TableId,
    /// Its name (1..=64 bytes).
    pub name: String,
    /// Where its tree starts.
    pub root: TreeRoot,
}

/// The catalog page's record: the named tables and the next id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogRecord {
    /// The next table id handed out (above every listed one).
    pub next_id: u32,
    /// The tables, ids ascending.
    pub entries: Vec<Entry>,
}

fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn rd_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl CatalogRecord {
    /// Writes the record into the body of `p` (a page whose header says `Catalog`).
    pub fn write_to(&self, p: &mut [u8]) {
        assert!(
            self.entries.len() <= capacity(p.len()),
            "{} tables in a catalog page of {} entries",
            self.entries.len(),
            capacity(p.len())
        );
        let b = &mut p[HEADER_SIZE..];
        b.fill(0);
        b[OFF_MAGIC..OFF_MAGIC + 8].copy_from_slice(&MAGIC.to_le_bytes());
        b[OFF_COUNT..OFF_COUNT + 4].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        b[OFF_NEXT_ID..OFF_NEXT_ID + 4].copy_from_slice(&self.next_id.to_le_bytes());
        for (i, e) in self.entries.iter().enumerate() {
            assert!(e.table.0 != 0 && e.table.0 < self.next_id, "entry {i}");
            let at = OFF_ENTRIES + i * ENTRY_BYTES;
            let x = &mut b[at..at + ENTRY_BYTES];
            x[ENTRY_ID..ENTRY_ID + 4].copy_from_slice(&e.table.0.to_le_bytes());
            x[ENTRY_HEIGHT..ENTRY_HEIGHT + 4].copy_from_slice(&e.root.height.to_le_bytes());
            x[ENTRY_ROOT..ENTRY_ROOT + 8].copy_from_slice(&e.root.root.to_le_bytes());
            x[ENTRY_NAME_LEN] = e.name.len() as u8;
            x[ENTRY_NAME..ENTRY_NAME + e.name.len()].copy_from_slice(e.name.as_bytes());
        }
    }

    /// Parses the catalog page `p` (page `pid`, already checksum-verified) of a database of
    /// `next_pid` pages; never panics on damaged bytes.
    pub fn read_from(p: &[u8], pid: PageId, next_pid: PageId) -> Result<Self, StorageError> {
        let bad = |reason: Corruption| StorageError::corrupt(pid, reason);
        if !page::valid_page_size(p.len()) || page::page_type(p) != Some(PageType::Catalog) {
            return Err(bad(Corruption::NotCatalog));
        }
        let b = &p[HEADER_SIZE..];
        if rd_u64(b, OFF_MAGIC) != MAGIC {
            return Err(bad(Corruption::NotCatalog));
        }
        let count = rd_u32(b, OFF_COUNT) as usize;
        if count > capacity(p.len()) {
            return Err(bad(Corruption::CatalogTooLong {
                count,
                capacity: capacity(p.len()),
            }));
        }
        let next_id = rd_u32(b, OFF_NEXT_ID);
        let mut entries: Vec<Entry> = Vec::with_capacity(count);
        for index in 0..count {
            let at = OFF_ENTRIES + index * ENTRY_BYTES;
            let entry = read_entry(&b[at..at + ENTRY_BYTES], next_id, next_pid, pid).map_err(
                |(table, fault)| {
                    bad(Corruption::CatalogEntry {
                        index,
                        table,
                        fault,
                    })
                },
            )?;
            let previous = entries.last().map_or(0, |e: &Entry| e.table.0);
            let fault = if entry.table.0 <= previous {
                Some(CatalogFault::IdOutOfOrder { next_id })
            } else if entries.iter().any(|e| e.name == entry.name) {
                Some(CatalogFault::BadName)
            } else {
                None
            };
            if let Some(fault) = fault {
                let table = entry.table.0;
                return Err(bad(Corruption::CatalogEntry {
                    index,
                    table,
                    fault,
                }));
            }
            entries.push(entry);
        }
        Ok(CatalogRecord { next_id, entries })
    }

    /// The sealed catalog page `pid` holding this record.
    pub fn page(&self, pid: PageId, page_size: usize) -> AlignedBuf {
        let mut b = AlignedBuf::new(page_size);
        page::init(b.as_mut_slice(), PageType::Catalog);
        self.write_to(b.as_mut_slice());
        page::seal(b.as_mut_slice(), pid);
        b
    }
}

/// Parses one entry of the catalog page `catalog_pid` (every field checked on its own; order
/// and uniqueness are the caller's).
fn read_entry(
    x: &[u8],
    next_id: u32,
    next_pid: PageId,
    catalog_pid: PageId,
) -> Result<Entry, (u32, CatalogFault)> {
    let table = rd_u32(x, ENTRY_ID);
    if table == 0 {
        return Err((table, CatalogFault::DefaultId));
    }
    if table >= next_id {
        return Err((table, CatalogFault::IdOutOfOrder { next_id }));
    }
    let root = TreeRoot {
        root: rd_u64(x, ENTRY_ROOT),
        height: rd_u32(x, ENTRY_HEIGHT),
    };
    let (r, h) = (root.root, root.height);
    if h == 0 || h > HEIGHT_MAX || r == META_PID || r == catalog_pid || r >= next_pid {
        let fault = CatalogFault::BadRoot {
            root: r,
            height: h,
            next_page: next_pid,
        };
        return Err((table, fault));
    }
    let len = x[ENTRY_NAME_LEN] as usize;
    let name = (1..=MAX_NAME_BYTES)
        .contains(&len)
        .then(|| std::str::from_utf8(&x[ENTRY_NAME..ENTRY_NAME + len]).ok())
        .flatten()
        .ok_or((table, CatalogFault::BadName))?;
    Ok(Entry {
        table: TableId(table),
        name: name.to_string(),
        root,
    })
}
