//! Named tables: each its own B+tree over the database's one buffer pool, found through the
//! catalog page.
//!
//! Table 0, [`TableId::DEFAULT`], is the tree a database always had: its root stays in the
//! meta page, so a database that never creates a table needs no catalog page and reads
//! exactly as before. The first `create_table` allocates the catalog page, whose id the meta
//! page records (`meta.rs`, `OFF_CATALOG`). A table id is never reused: the page keeps the
//! next id to hand out.
//!
//! # The catalog page
//! Its format is in `record.rs`; one page bounds the number of tables ([`capacity`]: 45
//! besides the default one on 4 KiB pages, [`WriteError::TooManyTables`] beyond).
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
use crate::error::{Corruption, StorageError, WaitFor, WriteError};
pub use crate::ids::TableId;
use crate::meta::NO_CATALOG;
use crate::node::NodeMut;
use crate::page::{self, PageType, HEADER_SIZE};
use crate::tree::{BTree, PublishedRoots, TreeRoot};
use ringdb_io::AlignedBuf;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

mod record;

pub use record::{capacity, CatalogRecord, Entry};

/// The longest table name in bytes (UTF-8).
pub const MAX_NAME_BYTES: usize = 64;
/// Table names the engine keeps for itself start with this.
pub const SYSTEM_PREFIX: &str = "ringdb.system.";
/// The name of each shard's system table (a table the engine keeps for itself), where the markers of applied parts live.
pub const SYSTEM_TABLE: &str = "ringdb.system.batches";
/// Loads of the catalog page a flush makes before it gives up: the page stays resident from
/// its load until the flush's next synchronous attempt, so the second attempt finds it.
const LOAD_ROUNDS_MAX: u64 = 1 << 10;

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
    /// Every tree's root by table id, for readers on other threads (`tree/optimistic.rs`).
    roots: Arc<PublishedRoots>,
}

impl Catalog {
    /// A database with only its default table, `default`.
    pub fn new(default: Rc<BTree>) -> Catalog {
        // Ids are never reused and a catalog page holds `capacity` tables besides the
        // default: every id fits.
        let roots = PublishedRoots::new(capacity(default.buffer().page_size()) + 1);
        default.publish_root(roots.clone(), TableId::DEFAULT.0 as usize);
        Catalog {
            default,
            roots,
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
                tree.publish_root(catalog.roots.clone(), e.table.0 as usize);
                let name = e.name.clone();
                st.tables.insert(e.table, Table { name, tree });
            }
            st.stored = Some(record);
        }
        Ok(catalog)
    }

    /// Every tree's root by table id, as readers on other threads find them.
    pub fn published_roots(&self) -> Arc<PublishedRoots> {
        self.roots.clone()
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

    #[cfg(any(test, feature = "__internal"))]
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
        tree.publish_root(self.roots.clone(), table.0 as usize);
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
