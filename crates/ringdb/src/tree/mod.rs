//! The B+tree over the buffer manager's pages (paper Sec. 3.3.2: cooperative tasks, no latches,
//! traversals restart after a task was parked).
//!
//! Every operation is a synchronous *attempt* that pins pages only while it runs (no `await`
//! inside) and either finishes or says what it needs: a page that is not resident, or free
//! frames for a split. The async wrapper drops every pin, waits for that (the task parks, other
//! tasks run and may change the tree), and restarts from the root. Since an attempt never
//! yields, it sees and leaves the tree consistent; since it changes nothing before it knows it
//! can finish, a restart never has to undo anything.
//!
//! Inner nodes: see `node.rs` (child `i` holds keys below separator `i`, the upper child holds
//! the rest). Leaves are not linked; a range scan walks the children of the leaves' parent and
//! goes on to the next parent through the nearest separator above (its *fence*), reading the
//! leaves it is about to visit in one batch.
//!
//! # Where to look
//! - this file: [`BTree`], the attempt loop (`run`), the descent and point lookups;
//! - `insert.rs`: inserts and splits (up to a new root);
//! - `remove.rs`: removes, merges and the root's collapse;
//! - `scan.rs`: range scans both ways in resumable chunks, with read-ahead of the leaves;
//!   `scan_walk.rs`: one step (descent to the leaves' parent, walk over its children);
//!   `scan_leaf.rs`: the scan inside one leaf;
//! - `invariants.rs`: what ties nodes together (levels, separators, fences), checked after
//!   every structural change in debug builds.

use crate::buffer::{BufferManager, PageGuard, PageId, Reservation};
use crate::error::{Corruption, StorageError, WriteError};
use crate::node::{self, NodeMut, NodeRef};
use resume::Resume;
use serde::Serialize;
use std::cell::{Cell, OnceCell};
use std::ops::Bound;
use std::sync::Arc;

/// What an attempt needs before it can run to the end.
enum Need {
    /// A page that is not resident (outside a descent).
    Page(PageId),
    /// A page a descent stopped before: the one at `depth` on the way to the key, while the
    /// tree's shape was `shape` (see `resume.rs`).
    Child {
        pid: PageId,
        depth: usize,
        shape: u64,
    },
    /// Free frames for a split.
    Frames(usize),
    /// Nothing to wait for: the attempt resumed below the root but needs the whole path.
    FromRoot,
}

type Attempt<T> = std::result::Result<T, Need>;

/// Pins `pid` or returns from the attempt asking for it.
macro_rules! fix {
    ($tree:expr, $pid:expr) => {
        match $tree.bm.try_fix($pid) {
            Some(g) => g,
            None => return Ok(Err(Need::Page($pid))),
        }
    };
}

// After the macro, so that they can use it.
mod hint;
mod insert;
mod invariants;
pub mod optimistic;
mod probe;
mod remove;
mod resume;
mod scan;
mod scan_leaf;
mod scan_walk;
mod trace;

pub use crate::meta::TreeRoot;
pub use optimistic::PublishedRoots;
#[cfg(any(test, feature = "__internal"))]
pub use optimistic::{Optimistic, OPTIMISTIC_TRIES};
pub(crate) use probe::{probe_all, Probe};
pub use scan::{Direction, READ_AHEAD_PAGES};
#[cfg(any(test, feature = "__internal"))]
pub use trace::timestamp;
#[cfg(any(test, feature = "__internal"))]
pub use trace::PointTrace;

/// What the tree counts.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TreeStats {
    /// Attempts abandoned to wait for a page or frames, then restarted.
    pub restarts: u64,
    /// Restarted attempts that began at the page their wait brought in, not at the root (the
    /// tree's shape had not changed meanwhile).
    pub resumes: u64,
    /// Nodes split (leaves and inner nodes).
    pub splits: u64,
    /// Nodes merged into a sibling.
    pub merges: u64,
    /// Leaves visited by range scans.
    pub scan_leaves: u64,
    /// Pairs those leaves gave.
    pub scan_pairs: u64,
    /// Batches of leaves a scan read ahead together (two or more pages each).
    pub read_ahead_batches: u64,
    /// Pages those batches read (pages already resident are not read again).
    pub read_ahead_pages: u64,
    /// Reads and inserts that began at the leaf a read (or a prefetch's probe) of their key
    /// had just found, or an insert at the leaf the last insert went to (`hint.rs`), instead
    /// of at the root.
    pub leaf_hints: u64,
}

/// A B+tree over one buffer manager's pages (see the module documentation).
pub struct BTree {
    bm: BufferManager,
    root: Cell<TreeRoot>,
    stats: Cell<TreeStats>,
    max_record: usize,
    /// Leaves a scan reads ahead in one batch (0: none).
    read_ahead: Cell<usize>,
    /// Changes of shape (splits, merges, root changes) so far: a descent resumes only
    /// under the shape it stopped in (see `resume.rs`).
    shape: Cell<u64>,
    /// Where the root is published for readers on other threads, once it is
    /// (`optimistic.rs`): the directory and this tree's place in it.
    published: OnceCell<(Arc<PublishedRoots>, usize)>,
    /// Where recent reads found their keys' leaves, for writes of the same keys (`hint.rs`).
    hints: hint::LeafHints,
    /// The leaf the last insert that fit went to, for the next insert near it (`hint.rs`).
    last_insert: Cell<hint::LeafHint>,
}

/// One step of a descent: the inner node's guard and the child index taken.
struct PathStep {
    guard: PageGuard,
    index: usize,
}

impl BTree {
    /// Creates an empty tree: one empty leaf as the root.
    pub async fn create(bm: BufferManager) -> Result<BTree, WriteError> {
        bm.ensure_free(1).await?;
        let g = bm.alloc_page(None)?;
        g.write(NodeMut::init_leaf);
        let root = TreeRoot {
            root: g.pid(),
            height: 1,
        };
        drop(g);
        Ok(Self::open(bm, root))
    }

    /// A tree whose root is known (from the meta page).
    pub fn open(bm: BufferManager, root: TreeRoot) -> BTree {
        let max_record = node::max_record_size(bm.page_size());
        BTree {
            bm,
            root: Cell::new(root),
            stats: Cell::new(TreeStats::default()),
            max_record,
            read_ahead: Cell::new(READ_AHEAD_PAGES),
            shape: Cell::new(0),
            published: OnceCell::new(),
            hints: std::array::from_fn(|_| Cell::new(hint::LeafHint::default())),
            last_insert: Cell::new(hint::LeafHint::default()),
        }
    }

    /// Publishes the root in `roots` at `index` from now on (at every change), for readers on
    /// other threads. Once per tree.
    pub fn publish_root(&self, roots: Arc<PublishedRoots>, index: usize) {
        roots.set(index, self.root.get().root);
        assert!(
            self.published.set((roots, index)).is_ok(),
            "a tree's root published twice"
        );
    }

    /// The root moved (a split of the old one, or its collapse): here and where published.
    fn set_root(&self, root: TreeRoot) {
        self.root.set(root);
        if let Some((roots, index)) = self.published.get() {
            roots.set(*index, root.root);
        }
    }

    /// Where the tree starts now.
    pub fn root(&self) -> TreeRoot {
        self.root.get()
    }

    /// The buffer manager holding the tree's pages.
    pub fn buffer(&self) -> &BufferManager {
        &self.bm
    }

    /// What the tree counted so far.
    pub fn stats(&self) -> TreeStats {
        self.stats.get()
    }

    /// The largest key + value this tree stores.
    pub fn max_record(&self) -> usize {
        self.max_record
    }

    fn bump(&self, f: impl FnOnce(&mut TreeStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// Runs `attempt` until it finishes, waiting for what it needs in between (a failed wait
    /// is an `E` too). After a wait for a page on the way down, the next attempt is offered
    /// that page to resume at, if the tree's shape has not changed (`resume.rs`); an attempt
    /// that cannot use it drops it before it pins anything.
    async fn run<T, E: From<StorageError>>(
        &self,
        attempt: impl FnMut(&Self, &mut Reservation, Option<Resume>) -> Result<Attempt<T>, E>,
    ) -> Result<T, E> {
        self.run_from(None, attempt).await
    }

    /// [`run`](Self::run), the first attempt starting at `hinted` when given (a leaf hint,
    /// `hint.rs`: taken under the present shape, nothing ran since).
    async fn run_from<T, E: From<StorageError>>(
        &self,
        mut hinted: Option<Resume>,
        mut attempt: impl FnMut(&Self, &mut Reservation, Option<Resume>) -> Result<Attempt<T>, E>,
    ) -> Result<T, E> {
        // The page the last wait brought in stays pinned until the next attempt starts (else
        // it could be evicted again before its task runs: a livelock under pressure), as a
        // page to resume at or only held; the frames reserved for a split stay this task's
        // until it is done.
        let mut loaded: Option<Resume> = None;
        let mut held: Option<PageGuard> = None;
        let mut res = self.bm.reservation();
        loop {
            // From here to the attempt's own pins nothing else runs: the pin can go now (and
            // must, unless resumed at, since the attempt may free that very page in a merge).
            drop(held.take());
            let resume = match hinted.take() {
                Some(leaf) => Some(leaf),
                None => self.still_valid(loaded.take()),
            };
            let r = attempt(self, &mut res, resume)?;
            let need = match r {
                Ok(v) => return Ok(v),
                Err(need) => need,
            };
            self.bump(|s| s.restarts += 1);
            match need {
                Need::Page(pid) => {
                    // Frames held while waiting for a page could be the ones the page (or
                    // another task's) needs: give them back first.
                    res = self.bm.reservation();
                    held = self.bm.load(pid).await?;
                }
                Need::Child { pid, depth, shape } => {
                    res = self.bm.reservation();
                    loaded = self.bm.load(pid).await?.map(|guard| Resume {
                        guard,
                        depth,
                        shape,
                    });
                }
                Need::Frames(n) => self.bm.reserve(&mut res, n).await?,
                Need::FromRoot => {}
            }
        }
    }

    /// The value of `key`, if present.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let mut value = Vec::new();
        let found = self.get_into(key, &mut value).await?;
        Ok(found.then_some(value))
    }

    /// Copies the value of `key` into `out` (cleared first) and says whether it was present:
    /// a caller that reads many values reuses one buffer instead of an allocation per read.
    pub async fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StorageError> {
        if let Some(found) = self.hinted_get(key, out) {
            return Ok(found);
        }
        self.run(|t, _, resume| t.get_attempt(key, out, resume))
            .await
    }

    /// Whether every page on the way to `key`'s leaf is in the pool (`false`: one is not,
    /// nothing was read). The leaf found is remembered as the key's hint (`hint.rs`), so a
    /// read or write of the key soon after starts there: a probe costs a read its descent,
    /// not a second one.
    pub fn probe_resident(&self, key: &[u8]) -> Result<bool, StorageError> {
        if self.hint_covers(key) {
            return Ok(true);
        }
        match self.descend_to_leaf(key, None)? {
            Ok(leaf) => {
                self.remember_leaf(key, leaf.pid());
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// [`get_into`](Self::get_into) if every page on the way is in the pool: `None` where one
    /// is not (nothing was read; the caller waits with `get_into`). No allocation, no task.
    pub fn get_resident_into(
        &self,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<bool>, StorageError> {
        Ok(self.get_attempt(key, out, None)?.ok())
    }

    /// Inserts or replaces; returns whether the key existed.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, WriteError> {
        self.check_record(key, value)?;
        let start = self.hinted_leaf(key).or_else(|| self.last_insert_leaf(key));
        self.run_from(start, |t, res, resume| {
            t.insert_attempt(key, value, res, resume)
        })
        .await
    }

    /// Removes; returns whether the key existed.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, WriteError> {
        Ok(self
            .run(|t, _, resume| t.remove_attempt(key, resume))
            .await?)
    }

    /// Up to `limit` pairs with keys within (`start`, `end`), in key order (a forward
    /// [`scan`](Self::scan)).
    pub async fn range(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StorageError> {
        let mut out = Vec::new();
        self.scan(start, end, Direction::Forward, limit, &mut out)
            .await?;
        Ok(out)
    }

    pub(crate) fn check_record(&self, key: &[u8], value: &[u8]) -> Result<(), WriteError> {
        if key.is_empty() {
            return Err(WriteError::EmptyKey);
        }
        if key.len() + value.len() > self.max_record {
            return Err(WriteError::TooLarge {
                key: key.len(),
                value: value.len(),
                max: self.max_record,
                page_size: self.bm.page_size(),
            });
        }
        Ok(())
    }

    fn corrupt(pid: PageId, reason: impl Into<Corruption>) -> StorageError {
        StorageError::corrupt(pid, reason)
    }

    /// Reads the node in `g`: `Ok(None)` for a leaf, else the child index and page for `key`.
    fn route(g: &PageGuard, key: &[u8]) -> Result<Option<(usize, PageId)>, StorageError> {
        g.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(g.pid(), e))?;
            if n.is_leaf() {
                Ok(None)
            } else {
                let i = n.child_index(key);
                Ok(Some((i, n.child_at(i))))
            }
        })
    }

    /// Descends from the root to the leaf for `key`, keeping the inner nodes pinned.
    fn descend(&self, key: &[u8]) -> Result<Attempt<(Vec<PathStep>, PageGuard)>, StorageError> {
        Ok(self
            .descend_from(key, None)?
            .map(|descent| (descent.path, descent.leaf)))
    }

    fn get_attempt(
        &self,
        key: &[u8],
        out: &mut Vec<u8>,
        resume: Option<Resume>,
    ) -> Result<Attempt<bool>, StorageError> {
        let leaf = match self.descend_to_leaf(key, resume)? {
            Ok(leaf) => leaf,
            Err(n) => return Ok(Err(n)),
        };
        self.remember_leaf(key, leaf.pid());
        leaf.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(leaf.pid(), e))?;
            out.clear();
            let found = n
                .search(key)
                .ok()
                .map(|i| out.extend_from_slice(n.value(i)));
            Ok(Ok(found.is_some()))
        })
    }
}

/// A fresh pool of `frames` 4 KiB frames over a file in a directory of its own under the
/// system's temporary one, for this module's unit tests (below the database layer: trees over
/// a buffer manager, driven by the runtime). Remove the directory when done; keep the file.
#[cfg(test)]
pub(crate) struct TestPool {
    pub(crate) dir: std::path::PathBuf,
    pub(crate) _file: std::fs::File,
    pub(crate) runtime: ringdb_io::Runtime,
    pub(crate) bm: BufferManager,
}

#[cfg(test)]
impl TestPool {
    pub(crate) fn new(name: &str, frames: usize) -> TestPool {
        use std::os::fd::AsRawFd;
        let dir = std::env::temp_dir().join(format!("ringdb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join("data"))
            .expect("file");
        let cfg = crate::buffer::PoolConfig::new(4096, frames);
        let pool = ringdb_io::FixedBufferPool::new(frames, 4096).expect("frames");
        let io = ringdb_io::IoConfig::default();
        let runtime =
            ringdb_io::Runtime::from_config(&io, &[file.as_raw_fd()], Some(pool)).expect("runtime");
        let bm = BufferManager::new(runtime.io(), ringdb_io::FileId(0), cfg, 0).expect("pool");
        TestPool {
            dir,
            _file: file,
            runtime,
            bm,
        }
    }
}
