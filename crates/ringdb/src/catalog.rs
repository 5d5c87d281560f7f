//! Named tables: each its own B+tree over the database's one buffer pool, found through the
//! catalog page.
//!
//! Table 0, [`TableId::DEFAULT`], is the tree a database always had: its root stays in the
//! meta page, so a database that never creates a table needs no catalog page and reads
//! exactly as before. The first `create_table` allocates the catalog page, whose id the meta
//! page records (`meta.rs`, `OFF_CATALOG`). A table id is never reused: the page keeps the
//! next id to hand out.
//!
//! # The catalog page (page type [`PageType::Catalog`], after the common page header)
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
//! [`WriteError::TooManyTables`].
//!
//! # Keeping the page current
//! Roots move whenever a root splits or collapses, inside the tree, so the page is not
//! rewritten on every change: it is written from memory (the [`Catalog`]) where the meta page
//! is. Without a log, by every flush (the page is loaded and rewritten in the pool, then
//! flushed with the others). With a log, in a checkpoint's synchronous cut: rewritten in the
//! pool when resident (so it goes through the double-write file with the other dirty pages),
//! else written beside the meta page as an extra image (double-write file first, then in
//! place). A checkpoint never waits to load it: a load needs a frame, a frame may need a
//! checkpoint, and that checkpoint would be this one.

use crate::buffer::{PageGuard, PageId};
use crate::error::{CatalogFault, Corruption, StorageError, WaitFor, WriteError};
use crate::meta::{META_PID, NO_CATALOG};
use crate::node::NodeMut;
use crate::page::{self, PageType, HEADER_SIZE};
use crate::tree::{BTree, TreeRoot};
use ringdb_io::AlignedBuf;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The longest table name in bytes (UTF-8).
pub const MAX_NAME_BYTES: usize = 64;
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
/// Loads of the catalog page a flush makes before it gives up: the page stays resident from
/// its load until the flush's next synchronous attempt, so the second attempt finds it.
const LOAD_ROUNDS_MAX: u64 = 1 << 10;

/// A table of a database: an id the catalog hands out, never reused. Table 0 is the default
/// table (the one [`Db::get`](crate::Db::get), [`Db::insert`](crate::Db::insert), ... use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct TableId(u32);

impl TableId {
    /// The default table: every database has it; its name is not listed.
    pub const DEFAULT: TableId = TableId(0);

    /// The table of id `raw` (as [`get`](Self::get) returns it): whether a database holds
    /// it is checked where it is used.
    pub const fn from_raw(raw: u32) -> TableId {
        TableId(raw)
    }

    /// The id as a number (0: the default table).
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl std::fmt::Display for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => f.write_str("the default table"),
            n => write!(f, "table {n}"),
        }
    }
}

/// Refuses a name the catalog cannot store: empty, or longer than [`MAX_NAME_BYTES`].
pub fn check_name(name: &str) -> Result<(), WriteError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(WriteError::TableName {
            length_bytes: name.len(),
            max_bytes: MAX_NAME_BYTES,
        });
    }
    Ok(())
}

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

/// One named table in memory.
struct Table {
    name: String,
    tree: Rc<BTree>,
}

/// What the catalog holds; changed only synchronously.
struct State {
    /// The catalog page ([`NO_CATALOG`] until the first table is created).
    page: PageId,
    next_id: u32,
    tables: BTreeMap<TableId, Table>,
    /// The record last made durable by a checkpoint (or read at open): a cut that finds the
    /// page evicted writes it only when the record changed since.
    stored: Option<CatalogRecord>,
}

/// Every table of one database (one shard): the default tree and the named ones, all over
/// one buffer pool. Not `Send`, like the pool.
pub struct Catalog {
    default: Rc<BTree>,
    state: RefCell<State>,
}

impl Catalog {
    /// A database with only its default table, `default`.
    pub fn new(default: Rc<BTree>) -> Catalog {
        Catalog {
            default,
            state: RefCell::new(State {
                page: NO_CATALOG,
                next_id: 1,
                tables: BTreeMap::new(),
                stored: None,
            }),
        }
    }

    /// The tables of a database whose meta page names catalog page `page` (or
    /// [`NO_CATALOG`]): the page is loaded through the pool (verified) and each table's tree
    /// opened at its root.
    pub async fn open(default: Rc<BTree>, page: PageId) -> Result<Catalog, StorageError> {
        let catalog = Catalog::new(default);
        if page == NO_CATALOG {
            return Ok(catalog);
        }
        let bm = catalog.default.buffer().clone();
        let guard = bm
            .load(page)
            .await?
            .ok_or_else(|| StorageError::corrupt(page, Corruption::NotCatalog))?;
        let record = guard.read(|p| CatalogRecord::read_from(p, page, bm.next_pid()))?;
        drop(guard);
        {
            let mut st = catalog.state.borrow_mut();
            st.page = page;
            st.next_id = record.next_id;
            for e in &record.entries {
                let tree = Rc::new(BTree::open(bm.clone(), e.root));
                let name = e.name.clone();
                st.tables.insert(e.table, Table { name, tree });
            }
            st.stored = Some(record);
        }
        Ok(catalog)
    }

    /// The default table's tree.
    pub fn default_tree(&self) -> &Rc<BTree> {
        &self.default
    }

    /// The tree of `table`, if the database holds it.
    pub fn tree(&self, table: TableId) -> Option<Rc<BTree>> {
        if table == TableId::DEFAULT {
            return Some(self.default.clone());
        }
        let st = self.state.borrow();
        st.tables.get(&table).map(|t| t.tree.clone())
    }

    /// The id of the table named `name` (the default table has no name).
    pub fn id_of(&self, name: &str) -> Option<TableId> {
        let st = self.state.borrow();
        st.tables
            .iter()
            .find(|(_, t)| t.name == name)
            .map(|(&id, _)| id)
    }

    /// The named tables (the default one excluded), ids ascending.
    pub fn list(&self) -> Vec<(String, TableId)> {
        let st = self.state.borrow();
        st.tables
            .iter()
            .map(|(&id, t)| (t.name.clone(), id))
            .collect()
    }

    /// Named tables (the default one excluded).
    pub fn len(&self) -> usize {
        self.state.borrow().tables.len()
    }

    /// Whether only the default table exists.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The catalog page ([`NO_CATALOG`]: none yet).
    pub fn page(&self) -> PageId {
        self.state.borrow().page
    }

    /// The id the next created table gets.
    pub fn next_id(&self) -> TableId {
        TableId(self.state.borrow().next_id)
    }

    /// Every table's tree, the default one first, then ids ascending.
    pub fn trees(&self) -> Vec<(TableId, Rc<BTree>)> {
        let st = self.state.borrow();
        let named = st.tables.iter().map(|(&id, t)| (id, t.tree.clone()));
        std::iter::once((TableId::DEFAULT, self.default.clone()))
            .chain(named)
            .collect()
    }

    /// The catalog page's record as memory has it now.
    pub fn record(&self) -> CatalogRecord {
        let st = self.state.borrow();
        CatalogRecord {
            next_id: st.next_id,
            entries: st
                .tables
                .iter()
                .map(|(&table, t)| Entry {
                    table,
                    name: t.name.clone(),
                    root: t.tree.root(),
                })
                .collect(),
        }
    }

    /// What creating `name` needs: `Ok(Some(id))` when it exists already, `Ok(None)` when
    /// it can be created; a bad name or a full catalog is refused.
    pub fn check_create(&self, name: &str) -> Result<Option<TableId>, WriteError> {
        check_name(name)?;
        if let Some(id) = self.id_of(name) {
            return Ok(Some(id));
        }
        let page_size = self.default.buffer().page_size();
        let max_tables = capacity(page_size);
        if self.len() >= max_tables {
            return Err(WriteError::TooManyTables {
                max_tables,
                page_size,
            });
        }
        Ok(None)
    }

    /// Pages (and free frames) creating a table takes: its root leaf, and the catalog page
    /// for the first one.
    pub fn pages_to_create(&self) -> usize {
        1 + usize::from(self.page() == NO_CATALOG)
    }

    /// Creates table `table` named `name` now (synchronously): its root leaf, and the
    /// catalog page for the first table. The caller checked the name ([`check_create`]) and
    /// made [`pages_to_create`] frames free; `table` is at least [`next_id`].
    ///
    /// [`check_create`]: Self::check_create
    /// [`pages_to_create`]: Self::pages_to_create
    /// [`next_id`]: Self::next_id
    pub fn create_now(&self, table: TableId, name: &str) -> Result<(), WriteError> {
        let bm = self.default.buffer();
        assert!(
            table.0 >= self.state.borrow().next_id,
            "{table} created again"
        );
        assert!(self.id_of(name).is_none(), "table {name:?} created twice");
        bm.check_room(self.pages_to_create())?;
        if self.page() == NO_CATALOG {
            let g = bm.alloc_page(None)?;
            g.write(|p| page::init(p, PageType::Catalog));
            self.state.borrow_mut().page = g.pid();
        }
        let g = bm.alloc_page(None)?;
        g.write(NodeMut::init_leaf);
        let root = TreeRoot {
            root: g.pid(),
            height: 1,
        };
        drop(g);
        let tree = Rc::new(BTree::open(bm.clone(), root));
        let mut st = self.state.borrow_mut();
        st.next_id = table.0 + 1;
        let name = name.to_string();
        st.tables.insert(table, Table { name, tree });
        drop(st);
        // The page is resident (just allocated or written): keep it a valid catalog page at
        // once, so that an eviction writes one.
        if let Some(g) = bm.try_fix(self.page()) {
            self.store_into(&g, true);
        }
        Ok(())
    }

    /// Writes the record into the pinned catalog page when its bytes differ, or always with
    /// `force`.
    fn store_into(&self, g: &PageGuard, force: bool) {
        let record = self.record();
        let page_size = self.default.buffer().page_size();
        let fresh = record.page(g.pid(), page_size);
        let body = &fresh.as_slice()[HEADER_SIZE..];
        let same =
            g.read(|p| page::page_type(p) == Some(PageType::Catalog) && &p[HEADER_SIZE..] == body);
        if force || !same {
            g.write(|p| {
                page::init(p, PageType::Catalog);
                record.write_to(p);
            });
        }
    }

    /// A database without a log, before its flush: loads the catalog page if needed and
    /// writes every table's root into it (the flush writes it back with the other pages).
    pub async fn store(&self) -> Result<(), StorageError> {
        let bm = self.default.buffer();
        for _ in 0..LOAD_ROUNDS_MAX {
            let pid = self.page();
            if pid == NO_CATALOG {
                return Ok(());
            }
            if let Some(g) = bm.try_fix(pid) {
                self.store_into(&g, false);
                return Ok(());
            }
            drop(bm.load(pid).await?);
        }
        Err(StorageError::Stalled {
            waiting_for: WaitFor::PageLoad { page: self.page() },
            rounds: LOAD_ROUNDS_MAX,
        })
    }

    /// A checkpoint's cut (synchronous): brings the catalog page up to date. When it is
    /// resident it is rewritten in the pool (the cut's snapshot of dirty pages takes it);
    /// else, when the record changed since the last checkpoint, its image is returned for
    /// the checkpoint to write beside the meta page. Also returns the record, for
    /// [`stored`](Self::stored) once the checkpoint is durable.
    pub fn cut(&self) -> (Option<(PageId, AlignedBuf)>, CatalogRecord) {
        let record = self.record();
        let pid = self.page();
        if pid == NO_CATALOG {
            return (None, record);
        }
        let bm = self.default.buffer();
        let unchanged = self.state.borrow().stored.as_ref() == Some(&record);
        if let Some(g) = bm.try_fix(pid) {
            // Forced when the record changed: a copy loaded during the last checkpoint's
            // writes may equal today's record while the disk holds another.
            self.store_into(&g, !unchanged);
            return (None, record);
        }
        if unchanged {
            return (None, record);
        }
        let image = record.page(pid, bm.page_size());
        (Some((pid, image)), record)
    }

    /// The checkpoint that cut `record` is durable.
    pub fn stored(&self, record: CatalogRecord) {
        self.state.borrow_mut().stored = Some(record);
    }
}
