//! Full verification of a database's trees (`ringdb check`): every reachable page's checksum
//! and page id, every node's format, each tree's shape and key order, the catalog page, and
//! the page accounting over all of them.
//!
//! [`verify_tables`] walks each table's tree in turn (the default one first), all against one
//! set of pages reached, so that a page two trees share is reported as reached twice and a
//! page no tree reaches as a leak. [`verify_tree`] is the same for one tree. Each walk goes
//! depth-first from the root with an explicit stack of pages
//! still to visit, each with the level it must have and the fence keys its parent gives it.
//! Pages are loaded through the buffer manager, which verifies each one's checksum and page id
//! as it reads it; a page that fails is reported and the walk goes on with the rest. A pin is
//! held only while a page's bytes are examined (synchronously): what the walk needs later
//! (child ids, separators, the last key of the previous leaf) is copied out first.
//!
//! Checks, each failure a line in [`VerifyReport::problems`] that names the page:
//! - every reachable page loads (checksum, page id) and passes [`node::check`];
//! - levels decrease by one per step, so that leaves (level 0) all lie at depth `root.height`;
//! - keys strictly increase within each node (`node::check`) and across the leaf sequence;
//! - every key (and separator) of a child lies within its fences: child `i` of an inner node
//!   holds `sep[i-1] <= k < sep[i]` (see `node.rs`: a key equal to a separator goes right),
//!   within the parent's own fences;
//! - no page is reached twice, none is the meta page, on the free list, or past the end;
//! - the catalog page (when there is one) loads, is a catalog page and its record decodes;
//! - the free list holds no duplicates, no meta page and nothing past the end;
//! - every page id in `1..next_pid` is reachable or free: the others are leaks, listed in
//!   [`VerifyReport::unreachable`]. The free pages include those that hold the free-list
//!   chain on disk (`freelist.rs`): free, but not reusable until the next meta write.
//!
//! The walk reads the tree as it is between its loads: run it when nothing else changes the
//! tree (after recovery, before serving), as `ringdb check` does.

use crate::buffer::{BufferManager, PageId};
use crate::catalog::{Catalog, CatalogRecord};
use crate::meta::{META_PID, NO_CATALOG};
use crate::node::{self, NodeRef};
use crate::tree::TreeRoot;
use serde::Serialize;
use std::fmt;
use std::rc::Rc;

/// Leaked page ids quoted in the summary problem (all of them are in `unreachable`).
const LEAKS_QUOTED: usize = 16;
/// Bytes of a key quoted in a message.
const KEY_QUOTED: usize = 48;

/// What a full verification found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    /// Keys in the leaves that were read.
    pub keys: u64,
    /// Leaf pages read.
    pub leaves: u64,
    /// Inner pages read.
    pub inner: u64,
    /// The height the default tree's root claims (1: the root is a leaf).
    pub height: u32,
    /// Trees walked: the tables, the default one included.
    pub tables: u64,
    /// Tree pages read and checked: each reachable page once, whether it passed or not.
    pub pages_checked: u64,
    /// Entries on the free list.
    pub free_pages: u64,
    /// Of `free_pages`, those holding the free-list chain (see `freelist.rs`).
    pub free_list_pages: u64,
    /// Page ids in `1..next_pid` neither reachable from the root nor free (leaks), ascending.
    /// Pages below a page that could not be read are among them.
    pub unreachable: Vec<u64>,
    /// Every violation found, each naming its page. Leaks are summarised here too.
    pub problems: Vec<String>,
}

impl VerifyReport {
    /// Whether the tree passed: no problems and no leaked pages.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.unreachable.is_empty()
    }

    fn problem(&mut self, msg: String) {
        self.problems.push(msg);
    }
}

impl fmt::Display for VerifyReport {
    /// A summary line, then one line per problem.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} keys, height {}, {} leaves, {} inner nodes, {} pages checked, {} free, {} unreachable: {}",
            self.keys,
            self.height,
            self.leaves,
            self.inner,
            self.pages_checked,
            self.free_pages,
            self.unreachable.len(),
            if self.is_ok() {
                "ok".to_string()
            } else {
                format!("{} problems", self.problems.len())
            }
        )?;
        for p in &self.problems {
            write!(f, "\n{p}")?;
        }
        Ok(())
    }
}

/// A page still to visit.
struct Pending {
    pid: PageId,
    /// The inner node that points at it (`None`: the root).
    parent: Option<PageId>,
    /// The level it must have.
    level: u32,
    /// Its keys must be >= this (inclusive)...
    lower: Option<Rc<[u8]>>,
    /// ... and < this (exclusive).
    upper: Option<Rc<[u8]>>,
}

impl Pending {
    fn from(&self) -> String {
        match self.parent {
            Some(p) => format!("a child of page {p}"),
            None => "the root".to_string(),
        }
    }
}

/// What an inner node leads to, copied out of its page.
struct Children {
    level: u16,
    seps: Vec<Rc<[u8]>>,
    pids: Vec<PageId>,
}

/// One bit per page id below `next_pid`.
struct PageSet {
    bits: Vec<u64>,
}

impl PageSet {
    fn new(pages: PageId) -> Self {
        let words = usize::try_from(pages.div_ceil(64)).unwrap_or(usize::MAX);
        PageSet {
            bits: vec![0; words],
        }
    }

    /// Adds `pid` (< the size given to `new`); whether it was absent.
    fn insert(&mut self, pid: PageId) -> bool {
        let (w, b) = ((pid / 64) as usize, pid % 64);
        let was = self.bits[w] & (1 << b) != 0;
        self.bits[w] |= 1 << b;
        !was
    }

    fn contains(&self, pid: PageId) -> bool {
        let (w, b) = ((pid / 64) as usize, pid % 64);
        self.bits.get(w).is_some_and(|x| x & (1 << b) != 0)
    }
}

/// A key for a message: printable ASCII as is, other bytes escaped, long keys cut.
fn show(key: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in key.iter().take(KEY_QUOTED) {
        s.extend(std::ascii::escape_default(b).map(char::from));
    }
    s.push('"');
    if key.len() > KEY_QUOTED {
        s.push_str(&format!("... ({} bytes)", key.len()));
    }
    s
}

#[cfg(any(test, feature = "__internal"))]
/// Verifies `tree` as it stands: [`verify_tree`] over its root and its buffer manager's free
/// list.
pub async fn verify_btree(tree: &crate::tree::BTree) -> VerifyReport {
    let bm = tree.buffer();
    let mut report = verify_tree(bm, tree.root(), &bm.free_pages()).await;
    report.free_list_pages = bm.free_list_pages() as u64;
    report
}

/// Verifies every table of `tables` as they stand: [`verify_tables`] over their roots, the
/// catalog page and the buffer manager's free list.
pub async fn verify_catalog(tables: &Catalog) -> VerifyReport {
    let bm = tables.default_tree().buffer();
    let roots: Vec<TreeRoot> = tables.trees().iter().map(|(_, t)| t.root()).collect();
    let mut report = verify_tables(bm, &roots, tables.page(), &bm.free_pages()).await;
    report.free_list_pages = bm.free_list_pages() as u64;
    report
}

#[cfg(any(test, feature = "__internal"))]
/// Walks the whole tree from `root` through `bm` and checks everything listed in the module
/// documentation. Never panics on corrupt input: every violation is a problem in the report.
pub async fn verify_tree(
    bm: &BufferManager,
    root: TreeRoot,
    free_pages: &[PageId],
) -> VerifyReport {
    verify_tables(bm, &[root], NO_CATALOG, free_pages).await
}

/// Walks every tree from `roots` (the default table's first) through `bm`, and the catalog
/// page `catalog` ([`NO_CATALOG`]: none), and checks everything listed in the module
/// documentation. Never panics on corrupt input: every violation is a problem in the report.
pub async fn verify_tables(
    bm: &BufferManager,
    roots: &[TreeRoot],
    catalog: PageId,
    free_pages: &[PageId],
) -> VerifyReport {
    let next = bm.next_pid();
    let mut r = VerifyReport {
        height: roots.first().map_or(0, |root| root.height),
        tables: roots.len() as u64,
        free_pages: free_pages.len() as u64,
        ..VerifyReport::default()
    };
    let free = check_free_list(free_pages, next, &mut r);
    let mut walk = Walk {
        bm,
        height: 0,
        next,
        free,
        reached: PageSet::new(next),
        unreadable: 0,
        prev: None,
        report: r,
    };
    if catalog != NO_CATALOG {
        walk.visit_catalog(catalog).await;
    }
    for &root in roots {
        walk.tree(root).await;
    }
    walk.report_leaks();
    walk.report
}

/// Checks the free list (no meta page, nothing past the end, no duplicates); returns its
/// pages.
fn check_free_list(free_pages: &[PageId], next: PageId, r: &mut VerifyReport) -> PageSet {
    let mut free = PageSet::new(next);
    for &pid in free_pages {
        if pid == META_PID {
            r.problem("the free list holds page 0, the meta page".into());
        } else if pid >= next {
            r.problem(format!(
                "the free list holds page {pid}, past the end of the data ({next} pages)"
            ));
        } else if !free.insert(pid) {
            r.problem(format!("page {pid} is on the free list twice"));
        }
    }
    free
}

/// Queues the children of an inner node, each with its level and the fences the node's
/// separators (and its own fences) give it; reversed, so that the leftmost child is visited
/// first: leaves in key order.
fn push_children(stack: &mut Vec<Pending>, p: &Pending, c: Children) {
    let last = c.pids.len() - 1;
    for (i, &child) in c.pids.iter().enumerate().rev() {
        stack.push(Pending {
            pid: child,
            parent: Some(p.pid),
            level: u32::from(c.level) - 1,
            lower: if i == 0 {
                p.lower.clone()
            } else {
                Some(c.seps[i - 1].clone())
            },
            upper: if i == last {
                p.upper.clone()
            } else {
                Some(c.seps[i].clone())
            },
        });
    }
}

/// The walk's state: what it has seen so far, and the report it fills.
struct Walk<'a> {
    bm: &'a BufferManager,
    /// The height the root claims.
    height: u32,
    /// The first page id never allocated.
    next: PageId,
    free: PageSet,
    reached: PageSet,
    /// Pages that failed to load (what lies below them is among the leaks).
    unreadable: u64,
    /// The last key of the last leaf read, and its page.
    prev: Option<(PageId, Vec<u8>)>,
    report: VerifyReport,
}

impl Walk<'_> {
    /// Walks one tree from `root`, depth-first, leaves in key order.
    async fn tree(&mut self, root: TreeRoot) {
        if root.height == 0 {
            self.report.problem(format!(
                "page {}: the tree's height is 0 (a tree has at least its root leaf)",
                root.root
            ));
        }
        self.height = root.height;
        self.prev = None;
        let mut stack = vec![Pending {
            pid: root.root,
            parent: None,
            level: root.height.saturating_sub(1),
            lower: None,
            upper: None,
        }];
        while let Some(p) = stack.pop() {
            if let Some(children) = self.visit(&p).await {
                push_children(&mut stack, &p, children);
            }
        }
    }

    /// Visits the catalog page: it may be reached (as a tree page may), loads, and holds a
    /// catalog record.
    async fn visit_catalog(&mut self, pid: PageId) {
        let (next, r) = (self.next, &mut self.report);
        if pid >= next || self.free.contains(pid) || !self.reached.insert(pid) {
            r.problem(format!(
                "page {pid}, the catalog page, is past the end ({next} pages), free, or reached twice"
            ));
            return;
        }
        r.pages_checked += 1;
        match self.bm.load(pid).await {
            Ok(Some(g)) => {
                if let Err(e) = g.read(|p| CatalogRecord::read_from(p, pid, next)) {
                    r.problem(format!("page {pid} (the catalog page): {e}"));
                }
            }
            Ok(None) => r.problem(format!(
                "page {pid} (the catalog page) was freed by the buffer manager"
            )),
            Err(e) => {
                self.unreadable += 1;
                r.problem(format!("page {pid} (the catalog page) is unreadable: {e}"));
            }
        }
    }

    /// Visits one page: checks that it may be reached, loads and examines it; returns its
    /// children for an inner node.
    async fn visit(&mut self, p: &Pending) -> Option<Children> {
        if !self.admit(p) {
            return None;
        }
        let pid = p.pid;
        self.report.pages_checked += 1;
        // The pin lives only for the synchronous `read` below; none is held across an await.
        let guard = match self.bm.load(pid).await {
            Ok(Some(g)) => g,
            Ok(None) => {
                self.report.problem(format!(
                    "page {pid} ({}) was freed by the buffer manager",
                    p.from()
                ));
                return None;
            }
            Err(e) => {
                self.unreadable += 1;
                self.report
                    .problem(format!("page {pid} ({}) is unreadable: {e}", p.from()));
                return None;
            }
        };
        let (height, prev, report) = (self.height, &mut self.prev, &mut self.report);
        guard.read(|bytes| examine(bytes, p, height, prev, report))
    }

    /// Whether `p` may be visited: not the meta page, not past the end, not free, not
    /// reached before (each a problem when it is).
    fn admit(&mut self, p: &Pending) -> bool {
        let (pid, next, r) = (p.pid, self.next, &mut self.report);
        if pid == META_PID {
            r.problem(format!(
                "page 0, the meta page, is reached as {} (a tree node)",
                p.from()
            ));
            return false;
        }
        if pid >= next {
            r.problem(format!(
                "page {pid} ({}) lies past the end of the data ({next} pages)",
                p.from()
            ));
            return false;
        }
        if self.free.contains(pid) {
            r.problem(format!("page {pid} ({}) is on the free list", p.from()));
            return false;
        }
        if !self.reached.insert(pid) {
            r.problem(format!(
                "page {pid} is reached twice (again as {})",
                p.from()
            ));
            return false;
        }
        true
    }

    /// Lists the page ids in `1..next` neither reached nor free, and summarises them in one
    /// problem.
    fn report_leaks(&mut self) {
        let r = &mut self.report;
        r.unreachable = (1..self.next)
            .filter(|&pid| !self.reached.contains(pid) && !self.free.contains(pid))
            .collect();
        if r.unreachable.is_empty() {
            return;
        }
        let quoted: Vec<String> = r
            .unreachable
            .iter()
            .take(LEAKS_QUOTED)
            .map(|p| p.to_string())
            .collect();
        let more = if r.unreachable.len() > LEAKS_QUOTED {
            ", ..."
        } else {
            ""
        };
        let below = if self.unreadable > 0 {
            " (including what lies below the unreadable pages above)"
        } else {
            ""
        };
        let msg = match r.unreachable.as_slice() {
            [one] => {
                format!("page {one} is neither reachable from the root nor free (leaked){below}")
            }
            all => format!(
                "{} pages are neither reachable from the root nor free (leaked): pages {}{more}{below}",
                all.len(),
                quoted.join(", ")
            ),
        };
        r.problem(msg);
    }
}

/// Checks one node (its bytes, pinned) against what its parent says of it; returns the
/// children to visit for an inner node.
fn examine(
    bytes: &[u8],
    p: &Pending,
    height: u32,
    prev: &mut Option<(PageId, Vec<u8>)>,
    r: &mut VerifyReport,
) -> Option<Children> {
    let pid = p.pid;
    if let Err(e) = node::check(bytes) {
        r.problem(format!("page {pid} ({}): {e}", p.from()));
        return None;
    }
    // `check` validated every slot: the accessors below cannot panic.
    let n = NodeRef::new(bytes).ok()?;
    let level = n.level();
    if u32::from(level) != p.level {
        r.problem(format!(
            "page {pid} ({}) is a {} at level {level}, expected level {} (leaves lie at depth {height})",
            p.from(),
            if n.is_leaf() { "leaf" } else { "inner node" },
            p.level
        ));
    }
    check_fences(&n, p, r);
    let count = n.count();
    if n.is_leaf() {
        r.leaves += 1;
        r.keys += count as u64;
        check_leaf_order(&n, pid, prev, r);
        None
    } else {
        r.inner += 1;
        Some(Children {
            level,
            seps: (0..count).map(|i| Rc::from(n.key(i))).collect(),
            pids: (0..=count).map(|i| n.child_at(i)).collect(),
        })
    }
}

/// Every key of the (checked) node `n` lies within the fences its parent gives it: keys are
/// sorted, so the first and the last bound them all.
fn check_fences(n: &NodeRef, p: &Pending, r: &mut VerifyReport) {
    let count = n.count();
    if count == 0 {
        return;
    }
    let (pid, first, last) = (p.pid, n.key(0), n.key(count - 1));
    if let Some(lo) = &p.lower {
        if first < &lo[..] {
            r.problem(format!(
                "page {pid} ({}): key {} lies below the lower fence {} the parent gives it",
                p.from(),
                show(first),
                show(lo)
            ));
        }
    }
    if let Some(hi) = &p.upper {
        if last >= &hi[..] {
            r.problem(format!(
                "page {pid} ({}): key {} is not below the upper fence {} the parent gives it",
                p.from(),
                show(last),
                show(hi)
            ));
        }
    }
}

/// The (checked) leaf `n` starts above the last key of the previous leaf; its last key
/// becomes the one the next leaf must start above.
fn check_leaf_order(
    n: &NodeRef,
    pid: PageId,
    prev: &mut Option<(PageId, Vec<u8>)>,
    r: &mut VerifyReport,
) {
    let count = n.count();
    if count == 0 {
        return;
    }
    let (first, last) = (n.key(0), n.key(count - 1));
    if let Some((ppid, pkey)) = prev.as_ref() {
        if first <= &pkey[..] {
            r.problem(format!(
                "page {pid}: first key {} is not above the last key {} of the previous leaf, page {ppid}",
                show(first),
                show(pkey)
            ));
        }
    }
    match prev {
        Some((ppid, pkey)) => {
            *ppid = pid;
            pkey.clear();
            pkey.extend_from_slice(last);
        }
        None => *prev = Some((pid, last.to_vec())),
    }
}
