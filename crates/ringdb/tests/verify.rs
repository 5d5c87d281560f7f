//! `verify::verify_tree`: a healthy tree passes with the right counts; flipped bits on disk,
//! broken fences, pages reached twice, leaks and a wrong height are reported, naming the page.

use ringdb::buffer::PageId;
use ringdb::node::{NodeMut, NodeRef};
use ringdb::tree::TreeRoot;
use ringdb::verify::{verify_tree, VerifyReport};
use ringdb::{LocalDb, Options};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const PAGE: u64 = 4096;
const COUNT: u32 = 5000;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-verify-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts(pool_pages: usize, fresh: bool) -> Options {
    Options {
        pool_pages,
        direct: false,
        fresh,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// A fresh database at `d` with `COUNT` keys, through a pool much smaller than the tree.
fn build(d: &Path) -> LocalDb {
    let mut db = LocalDb::open(d, opts(64, true)).unwrap();
    let v = vec![0x5au8; 100];
    for i in 0..COUNT {
        db.insert(&key(i), &v).unwrap();
    }
    db
}

fn verify(db: &mut LocalDb) -> VerifyReport {
    verify_root(db, None)
}

/// Verifies with the tree's own root, or `root` instead.
fn verify_root(db: &mut LocalDb, root: Option<TreeRoot>) -> VerifyReport {
    let h = db.handle();
    db.runtime()
        .block_on(async {
            let bm = h.tree().buffer();
            let root = root.unwrap_or_else(|| h.tree().root());
            verify_tree(bm, root, &bm.free_pages()).await
        })
        .unwrap()
}

/// The leftmost inner node just above the leaves: its page, children and separators, read
/// through the buffer manager.
fn bottom_inner(db: &mut LocalDb) -> (PageId, Vec<PageId>, Vec<Vec<u8>>) {
    let h = db.handle();
    db.runtime()
        .block_on(async {
            let t = h.tree();
            let mut pid = t.root().root;
            loop {
                let g = t.buffer().load(pid).await.unwrap().unwrap();
                let found = g.read(|p| {
                    let n = NodeRef::new(p).unwrap();
                    assert!(n.is_inner(), "the tree is a single leaf");
                    if n.level() > 1 {
                        return Err(n.child_at(0));
                    }
                    let kids = (0..=n.count()).map(|i| n.child_at(i)).collect();
                    let seps = (0..n.count()).map(|i| n.key(i).to_vec()).collect();
                    Ok((kids, seps))
                });
                drop(g);
                match found {
                    Ok((kids, seps)) => return (pid, kids, seps),
                    Err(child) => pid = child,
                }
            }
        })
        .unwrap()
}

/// Changes page `pid` in the pool (not on disk): the checksum is sealed on write-back, so
/// only the structural checks can see this.
fn modify(db: &mut LocalDb, pid: PageId, f: impl FnOnce(&mut [u8])) {
    let h = db.handle();
    db.runtime()
        .block_on(async {
            let g = h.tree().buffer().load(pid).await.unwrap().unwrap();
            g.write(f);
        })
        .unwrap()
}

fn flip_bit(file: &Path, pid: PageId, at: u64) {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut b = [0u8];
    f.seek(SeekFrom::Start(pid * PAGE + at)).unwrap();
    f.read_exact(&mut b).unwrap();
    b[0] ^= 0x10;
    f.seek(SeekFrom::Start(pid * PAGE + at)).unwrap();
    f.write_all(&b).unwrap();
}

/// Page ids on disk whose header says `page_type` (3: leaf, 4: inner).
fn pages_of_type(file: &Path, page_type: u8) -> Vec<PageId> {
    let data = std::fs::read(file).unwrap();
    data.chunks_exact(PAGE as usize)
        .enumerate()
        .skip(1)
        .filter(|(_, p)| p[5] == page_type)
        .map(|(i, _)| i as PageId)
        .collect()
}

/// Whether `msg` mentions `page {pid}` (not a longer number that starts with it).
fn mentions(msg: &str, pid: PageId) -> bool {
    let page = format!("page {pid}");
    msg.match_indices(&page).any(|(at, _)| {
        !msg[at + page.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

fn assert_names(r: &VerifyReport, pid: PageId, what: &str) {
    assert!(
        r.problems
            .iter()
            .any(|p| mentions(p, pid) && p.contains(what)),
        "no problem names page {pid} with {what:?}:\n{r}"
    );
}

#[test]
fn a_healthy_tree_passes_with_exact_counts() {
    let d = dir("ok");
    let mut db = build(&d);
    let r = verify(&mut db);
    assert!(r.is_ok(), "{r}");
    assert_eq!(r.keys, u64::from(COUNT));
    assert!(r.height >= 2 && r.leaves > 50 && r.inner >= 1, "{r}");
    let pages = db.stats().pages;
    assert_eq!(r.pages_checked, r.leaves + r.inner);
    assert_eq!(r.pages_checked + r.free_pages, pages - 1, "{r}");

    // Removes merge leaves: freed pages are accounted for, not leaks.
    for i in (0..COUNT).filter(|i| i % 4 != 0) {
        assert!(db.remove(&key(i)).unwrap());
    }
    let r = verify(&mut db);
    assert!(r.is_ok(), "{r}");
    assert_eq!(r.keys, u64::from(COUNT / 4));
    assert!(r.free_pages > 0, "no merges: {r}");
    assert_eq!(r.pages_checked + r.free_pages, db.stats().pages - 1, "{r}");

    // And again from disk, through a pool of the minimum size.
    db.close().unwrap();
    let mut db = LocalDb::open(&d, opts(16, false)).unwrap();
    let r = verify(&mut db);
    assert!(r.is_ok(), "{r}");
    assert_eq!(r.keys, u64::from(COUNT / 4));
    assert!(r.to_string().contains("ok"), "{r}");
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_flipped_bit_in_a_leaf_is_reported_naming_the_page() {
    let d = dir("leafbit");
    let mut db = build(&d);
    let before = verify(&mut db);
    assert!(before.is_ok() && before.free_pages == 0, "{before}");
    let file = db.path().to_path_buf();
    db.close().unwrap();
    let leaves = pages_of_type(&file, 3);
    assert_eq!(leaves.len() as u64, before.leaves);
    let victim = leaves[leaves.len() / 2];
    flip_bit(&file, victim, 2000);

    let mut db = LocalDb::open(&d, opts(16, false)).unwrap();
    let r = verify(&mut db);
    assert!(!r.is_ok(), "{r}");
    assert_names(&r, victim, "checksum");
    assert_eq!(r.problems.len(), 1, "{r}");
    assert!(r.unreachable.is_empty(), "{r}");
    // The rest of the tree was walked.
    assert_eq!(r.leaves, before.leaves - 1);
    assert!(
        r.keys < u64::from(COUNT) && r.keys > u64::from(COUNT) / 2,
        "{r}"
    );
    assert_eq!(r.pages_checked, before.pages_checked);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_flipped_bit_in_the_root_leaves_the_tree_unreachable() {
    let d = dir("rootbit");
    let db = build(&d);
    let root = db.handle().tree().root();
    let pages = db.stats().pages;
    let file = db.path().to_path_buf();
    db.close().unwrap();
    flip_bit(&file, root.root, 100);

    let mut db = LocalDb::open(&d, opts(16, false)).unwrap();
    let r = verify(&mut db);
    assert!(!r.is_ok());
    assert_names(&r, root.root, "checksum");
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("(leaked): pages 1, 2, 3") && p.contains("below the unreadable")),
        "{r}"
    );
    assert_eq!(r.keys, 0);
    assert_eq!(r.unreachable.len() as u64, pages - 2, "{r}");
    assert!(!r.unreachable.contains(&root.root));
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_key_outside_its_fences_is_reported() {
    let d = dir("fence");
    let mut db = build(&d);
    let (_, kids, seps) = bottom_inner(&mut db);
    // Child 0 holds keys below seps[0]: give it one that belongs to child 1.
    let mut stray = seps[0].clone();
    stray.push(b'x');
    modify(&mut db, kids[0], |p| {
        NodeMut::new(p).insert(&stray, b"v").unwrap();
    });
    let r = verify(&mut db);
    assert!(!r.is_ok());
    assert_names(&r, kids[0], "upper fence");
    // The leaf sequence is out of order there too.
    assert_names(&r, kids[1], "previous leaf");
    assert_eq!(r.keys, u64::from(COUNT) + 1);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_page_reached_twice_and_the_subtree_it_hides_are_reported() {
    let d = dir("twice");
    let mut db = build(&d);
    let (parent, kids, _) = bottom_inner(&mut db);
    modify(&mut db, parent, |p| NodeMut::new(p).set_child(1, kids[0]));
    let r = verify(&mut db);
    assert!(!r.is_ok());
    assert_names(&r, kids[0], "reached twice");
    assert_eq!(r.unreachable, vec![kids[1]], "{r}");
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_leaked_page_and_a_wrong_height_are_reported() {
    let d = dir("leak");
    let mut db = build(&d);
    let h = db.handle();
    let leaked = db
        .runtime()
        .block_on(async {
            let bm = h.tree().buffer();
            bm.ensure_free(1).await.unwrap();
            let g = bm.alloc_page(None).unwrap();
            g.write(NodeMut::init_leaf);
            g.pid()
        })
        .unwrap();
    let r = verify(&mut db);
    assert_eq!(r.unreachable, vec![leaked], "{r}");
    assert_names(&r, leaked, "leaked");
    assert_eq!(r.keys, u64::from(COUNT));

    let mut root = h.tree().root();
    root.height += 1;
    let r = verify_root(&mut db, Some(root));
    assert_names(&r, root.root, "expected level");
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}
