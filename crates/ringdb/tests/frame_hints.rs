//! The page table's frame hints: a page read into a frame, or allocated in one, gets its hint
//! there, so pins (and reads on other threads) find it right and correct none. What lets a
//! pin fetch a frame's header before it has read the slot's cells (`buffer/frame_hint.rs`).
//! A pin still corrects a stale hint; no path leaves one today.

use ringdb::{LocalDb, Options};

const KEYS: u32 = 5000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn read_all(db: &mut LocalDb) {
    for i in 0..KEYS {
        assert!(db.get(&key(i)).unwrap().is_some(), "key {i}");
    }
}

fn open(dir: &std::path::Path, pool_pages: usize) -> LocalDb {
    let options = Options {
        pool_pages,
        direct: false,
        fresh: true,
        ..Options::default()
    };
    LocalDb::open(dir, options).unwrap()
}

#[test]
fn hints_are_set_where_a_page_lands_in_a_frame() {
    let dir = std::env::temp_dir().join(format!("ringdb-frame-hints-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Everything fits: after one pass, every page's hint names its frame.
    let mut db = open(&dir, 4096);
    for i in 0..KEYS {
        db.insert(&key(i), &[0x5a; 100]).unwrap();
    }
    read_all(&mut db);
    let settled = db.stats().pool;
    read_all(&mut db);
    let again = db.stats().pool;
    assert!(again.hits > settled.hits + KEYS as u64, "{again:?}");
    assert_eq!(
        again.frame_hints_corrected, settled.frame_hints_corrected,
        "pins of pages that stayed in their frames corrected hints"
    );
    db.close().unwrap();

    // A pool far smaller than the tree: pages come and go, and each read in sets its hint.
    let mut db = open(&dir, 32);
    for i in 0..KEYS {
        db.insert(&key(i), &[0x5a; 100]).unwrap();
    }
    let before = db.stats().pool;
    read_all(&mut db);
    let after = db.stats().pool;
    let reads = after.reads - before.reads;
    let corrected = after.frame_hints_corrected - before.frame_hints_corrected;
    assert!(reads > 0, "the reads must fault pages in");
    assert_eq!(
        corrected, 0,
        "pins corrected {corrected} hints of {reads} pages read in: {after:?}"
    );
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
