//! The free-page list survives reopen in full: the ids beyond what the meta page holds live
//! on a chain of free-list pages (`freelist.rs`), so a delete / reopen / insert cycle reuses
//! the pages the deletes freed and the data file stays bounded, with and without a log, after
//! a clean close and after a crash; a corrupt chain is a typed error on open, never a panic.
//! Named tables share the one free list: their catalog page and roots come off it, never back
//! onto it while in use, and their deletes feed it.

mod fuzz_harness;

use fuzz_harness::{fuzz, mutate, mutations, noise, note, Field};
use proptest::prelude::*;
use ringdb::freelist::{self, ids_per_page};
use ringdb::meta::Meta;
use ringdb::page::{self, PageError};
use ringdb::WriteBatch;
use ringdb::{Corruption, Durability, LocalDb, OpenError, Options, StorageError, TableId};
use ringdb::{VerifyReport, DATA_FILE};
use std::path::{Path, PathBuf};

const PAGE_BYTES: usize = 4096;
/// Keys each fill inserts: with values of `VALUE_BYTES`, thousands of pages.
const KEYS: u64 = 24_000;
const VALUE_BYTES: usize = 300;
/// The deletes keep one key in this many.
const KEEP_ONE_IN: u64 = 100;
/// Keys per write batch (one commit each with a log).
const BATCH_KEYS: u64 = 200;

/// A fresh directory on the build's disk (cargo's per-target temp dir), which takes O_DIRECT
/// where the project's filesystem does.
fn dir(name: &str) -> PathBuf {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let d = base.join(format!("ringdb-free-list-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Whether the test directory's filesystem takes O_DIRECT (tmpfs does not): the databases
/// here are opened as users open them, with O_DIRECT, wherever it is available, so a read of
/// the data file from memory that is not aligned fails here as it would for them (issue 38).
fn direct() -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    static DIRECT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DIRECT.get_or_init(|| {
        let probe = dir("direct-probe");
        std::fs::create_dir_all(&probe).unwrap();
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .custom_flags(libc::O_DIRECT)
            .open(probe.join("probe"));
        let _ = std::fs::remove_dir_all(&probe);
        if let Err(e) = &opened {
            eprintln!(
                "free list tests: {} refuses O_DIRECT ({e}): buffered I/O",
                probe.display()
            );
        }
        opened.is_ok()
    })
}

fn opts(durability: Durability, fresh: bool) -> Options {
    Options {
        page_size: PAGE_BYTES,
        pool_pages: 512,
        direct: direct(),
        fresh,
        durability,
        wal_bytes: 8 << 20,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:09}").into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-round-{round}-").into_bytes();
    v.resize(VALUE_BYTES, b'a' + (i % 26) as u8);
    v
}

/// Inserts every key (values of `round`), in batches.
fn fill(db: &mut LocalDb, round: u64) {
    for first in (0..KEYS).step_by(BATCH_KEYS as usize) {
        let mut batch = WriteBatch::new();
        for i in first..first + BATCH_KEYS {
            batch.put(&key(i), &value(i, round));
        }
        db.write(&batch).unwrap();
    }
}

/// Deletes every key but one in `KEEP_ONE_IN`, in batches, from the last key down (a node
/// merges with its right sibling when that one is resident: the one just emptied).
fn delete_most(db: &mut LocalDb) {
    for first in (0..KEYS / BATCH_KEYS).rev().map(|b| b * BATCH_KEYS) {
        let mut batch = WriteBatch::new();
        for i in (first..first + BATCH_KEYS)
            .rev()
            .filter(|i| i % KEEP_ONE_IN != 0)
        {
            batch.delete(&key(i));
        }
        db.write(&batch).unwrap();
    }
}

/// Pages in the data file of the database in `d`.
fn data_pages(d: &Path) -> u64 {
    std::fs::metadata(d.join(DATA_FILE)).unwrap().len() / PAGE_BYTES as u64
}

/// Verifies the whole tree and its page accounting: no problem, no leaked page.
fn check(db: &mut LocalDb) -> VerifyReport {
    let r = db.verify().unwrap();
    assert!(r.is_ok(), "{r}");
    r
}

/// A few keys read back with the values of `round` (kept keys: whatever round wrote last).
fn check_values(db: &mut LocalDb, round: u64) {
    for i in (1..KEYS).step_by(997) {
        if i % KEEP_ONE_IN != 0 {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, round)), "key {i}");
        }
    }
}

/// Fills, then three times: deletes almost everything, closes, reopens (the free list is read
/// back, far longer than a meta page holds), inserts the same keys again. The data file must
/// stay within a small bound of its size after the first fill.
fn cycles_keep_the_file_bounded(name: &str, durability: Durability) {
    let d = dir(name);
    let mut db = LocalDb::open(&d, opts(durability, true)).unwrap();
    fill(&mut db, 0);
    db.close().unwrap();
    let filled = data_pages(&d);
    assert!(
        filled > 2_000,
        "the fill takes thousands of pages: {filled}"
    );
    // Split patterns differ between fills; the chain takes its pages from the free ones.
    let bound = filled + filled / 20 + 16;
    for round in 1..=3 {
        let mut db = LocalDb::open(&d, opts(durability, false)).unwrap();
        delete_most(&mut db);
        db.close().unwrap();
        let mut db = LocalDb::open(&d, opts(durability, false)).unwrap();
        let r = check(&mut db);
        let in_meta = Meta::free_capacity(PAGE_BYTES) as u64;
        assert!(
            r.free_pages > 2 * in_meta,
            "round {round}: the free list ({} pages) is far longer than the meta page's {in_meta}",
            r.free_pages
        );
        assert!(r.free_list_pages >= 1, "round {round}: no chain: {r:?}");
        fill(&mut db, round);
        check(&mut db);
        check_values(&mut db, round);
        db.close().unwrap();
        let pages = data_pages(&d);
        eprintln!("{name}: round {round}: {pages} pages (after the first fill {filled})");
        assert!(
            pages <= bound,
            "round {round}: the data file grew to {pages} pages (first fill: {filled}, bound {bound})"
        );
    }
    let mut db = LocalDb::open(&d, opts(durability, false)).unwrap();
    check(&mut db);
    check_values(&mut db, 3);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn delete_reopen_insert_keeps_the_file_bounded_without_a_log() {
    cycles_keep_the_file_bounded("off", Durability::Off);
}

#[test]
fn delete_reopen_insert_keeps_the_file_bounded_with_a_log() {
    cycles_keep_the_file_bounded("fdatasync", Durability::Fdatasync);
}

/// Abandons a database as a crash would: nothing is flushed or checkpointed on the way out.
fn crash(db: LocalDb) {
    std::mem::forget(db);
}

#[test]
fn after_a_crash_the_free_list_is_consistent_and_reused() {
    let d = dir("crash");
    let mut db = LocalDb::open(&d, opts(Durability::Fdatasync, true)).unwrap();
    fill(&mut db, 0);
    delete_most(&mut db);
    // A checkpoint writes the long list (and its chain); then the log runs on past it: the
    // next fill takes pages off the list, the deletes put others on, and the crash comes.
    db.flush().unwrap();
    fill(&mut db, 1);
    delete_most(&mut db);
    crash(db);
    let mut db = LocalDb::open(&d, opts(Durability::Fdatasync, false)).unwrap();
    let r = check(&mut db);
    assert!(
        r.free_pages > 2 * Meta::free_capacity(PAGE_BYTES) as u64,
        "{r:?}"
    );
    let before = data_pages(&d);
    fill(&mut db, 2);
    check(&mut db);
    check_values(&mut db, 2);
    crash(db);
    let mut db = LocalDb::open(&d, opts(Durability::Fdatasync, false)).unwrap();
    check(&mut db);
    check_values(&mut db, 2);
    db.close().unwrap();
    let after = data_pages(&d);
    assert!(
        after <= before + before / 20 + 16,
        "the refill after the crash grew the file from {before} to {after} pages"
    );
    let _ = std::fs::remove_dir_all(&d);
}

// ---------------------------------------------------------------------------------------------
// Named tables over the one free list.

/// Keys each named table holds when full: three tables hold as many as one `fill`.
const TABLE_KEYS: u64 = KEYS / 3;
/// Keys per table in one batch (a batch writes to every table at once).
const TABLE_BATCH_KEYS: u64 = 64;
const TABLE_NAMES: [&str; 3] = ["alpha", "beta", "gamma"];

/// The value of key `i` in `table` after `round`: each table's own.
fn table_value(table: TableId, i: u64, round: u64) -> Vec<u8> {
    value(i, round * 16 + u64::from(table.get()))
}

/// Inserts keys `0..TABLE_KEYS` (values of `round`) into every table of `tables`, in batches
/// that span them all.
fn fill_tables(db: &mut LocalDb, tables: &[TableId], round: u64) {
    for first in (0..TABLE_KEYS).step_by(TABLE_BATCH_KEYS as usize) {
        let mut batch = WriteBatch::new();
        for &t in tables {
            for i in first..first + TABLE_BATCH_KEYS {
                batch.put_in(t, &key(i), &table_value(t, i, round));
            }
        }
        db.write(&batch).unwrap();
    }
}

/// Deletes every key but one in `KEEP_ONE_IN` from every table of `tables`, last keys first.
fn delete_most_tables(db: &mut LocalDb, tables: &[TableId]) {
    let batches = (0..TABLE_KEYS / TABLE_BATCH_KEYS).rev();
    for first in batches.map(|b| b * TABLE_BATCH_KEYS) {
        let mut batch = WriteBatch::new();
        for &t in tables {
            for i in (first..first + TABLE_BATCH_KEYS)
                .rev()
                .filter(|i| i % KEEP_ONE_IN != 0)
            {
                batch.delete_in(t, &key(i));
            }
        }
        db.write(&batch).unwrap();
    }
}

/// Verifies every tree, the catalog page and the page accounting (no leak, no page counted
/// twice, the catalog page not free), that the catalog lists `tables` under their names, and
/// reads keys of each back: the kept ones (one in `KEEP_ONE_IN`) with the values of `round`,
/// the others likewise unless `deleted`, in which case they are gone.
fn check_tables(db: &mut LocalDb, tables: &[TableId], round: u64, deleted: bool) -> VerifyReport {
    let r = check(db);
    assert_eq!(r.tables, 1 + tables.len() as u64, "{r:?}");
    let listed: Vec<(String, TableId)> = TABLE_NAMES
        .iter()
        .map(|n| n.to_string())
        .zip(tables.iter().copied())
        .collect();
    assert_eq!(db.tables(), listed);
    let kept = (0..TABLE_KEYS).step_by(7 * KEEP_ONE_IN as usize);
    let sampled = (1..TABLE_KEYS)
        .step_by(331)
        .filter(|i| i % KEEP_ONE_IN != 0);
    for &t in tables {
        for i in kept.clone().chain(sampled.clone()) {
            let gone = deleted && i % KEEP_ONE_IN != 0;
            let expected = (!gone).then(|| table_value(t, i, round));
            assert_eq!(
                db.in_table(t).get(&key(i)).unwrap(),
                expected,
                "{t}, key {i}"
            );
        }
    }
    r
}

/// The meta page of the closed database in `d`.
fn meta_of(d: &Path) -> Meta {
    Meta::read_from(&read_page(d, 0)).unwrap()
}

/// A long free list on disk (the default table filled, then mostly deleted), then three
/// tables created (their catalog page and roots come off that list), filled, closed; then
/// most of their keys deleted, closed, reopened (the chain read back), filled again and
/// closed. Returns the tables and the bound on the data file's pages.
fn tables_share_the_free_list(d: &Path, durability: Durability) -> (Vec<TableId>, u64) {
    let mut db = LocalDb::open(d, opts(durability, true)).unwrap();
    fill_tables(&mut db, &[TableId::DEFAULT], 0);
    delete_most_tables(&mut db, &[TableId::DEFAULT]);
    db.close().unwrap();
    let churned = meta_of(d).next_pid;
    let mut db = LocalDb::open(d, opts(durability, false)).unwrap();
    let tables: Vec<TableId> = TABLE_NAMES
        .iter()
        .map(|n| db.create_table(n).unwrap())
        .collect();
    fill_tables(&mut db, &tables, 0);
    check_tables(&mut db, &tables, 0, false);
    db.close().unwrap();
    let catalog = meta_of(d).catalog;
    assert!(
        catalog != 0 && catalog < churned,
        "the catalog page {catalog} was not taken off the free list ({churned} pages before)"
    );
    let filled = data_pages(d);
    let bound = filled + filled / 20 + 16;
    let mut db = LocalDb::open(d, opts(durability, false)).unwrap();
    delete_most_tables(&mut db, &tables);
    db.close().unwrap();
    let mut db = LocalDb::open(d, opts(durability, false)).unwrap();
    let r = check_tables(&mut db, &tables, 0, true);
    let in_meta = Meta::free_capacity(PAGE_BYTES) as u64;
    assert!(r.free_pages > 2 * in_meta, "a short free list: {r:?}");
    assert!(r.free_list_pages >= 1, "no chain: {r:?}");
    fill_tables(&mut db, &tables, 1);
    check_tables(&mut db, &tables, 1, false);
    db.close().unwrap();
    assert_eq!(meta_of(d).catalog, catalog, "the catalog page moved");
    let pages = data_pages(d);
    assert!(
        pages <= bound,
        "the refill grew the data file to {pages} pages (filled: {filled}, bound {bound})"
    );
    (tables, bound)
}

#[test]
fn named_tables_share_the_free_list_without_a_log() {
    let d = dir("tables-off");
    let (tables, _) = tables_share_the_free_list(&d, Durability::Off);
    let mut db = LocalDb::open(&d, opts(Durability::Off, false)).unwrap();
    check_tables(&mut db, &tables, 1, false);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

/// With a log, after the cycles above: most keys deleted, a checkpoint (the long list and its
/// chain written through the double-write file), a refill, and a crash; recovery replays the
/// refill over the checkpointed free list, then another delete and refill and a second crash.
/// The file stays bounded and verification clean throughout.
#[test]
fn named_tables_share_the_free_list_across_a_crash() {
    let d = dir("tables-crash");
    let (tables, bound) = tables_share_the_free_list(&d, Durability::Fdatasync);
    let reopen = || LocalDb::open(&d, opts(Durability::Fdatasync, false)).unwrap();
    let mut db = reopen();
    delete_most_tables(&mut db, &tables);
    db.flush().unwrap();
    fill_tables(&mut db, &tables, 2);
    crash(db);
    let mut db = reopen();
    check_tables(&mut db, &tables, 2, false);
    delete_most_tables(&mut db, &tables);
    fill_tables(&mut db, &tables, 3);
    crash(db);
    let mut db = reopen();
    check_tables(&mut db, &tables, 3, false);
    db.close().unwrap();
    let pages = data_pages(&d);
    assert!(
        pages <= bound,
        "after the crashes the data file holds {pages} pages (bound {bound})"
    );
    let mut db = reopen();
    check_tables(&mut db, &tables, 3, false);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

/// A database without a log whose free list has a chain, closed; returns the chain's head.
fn closed_with_a_chain(d: &Path, durability: Durability) -> u64 {
    let mut db = LocalDb::open(d, opts(durability, true)).unwrap();
    fill(&mut db, 0);
    delete_most(&mut db);
    db.close().unwrap();
    let meta = std::fs::read(d.join(DATA_FILE)).unwrap();
    let meta = Meta::read_from(&meta[..PAGE_BYTES]).unwrap();
    assert_ne!(meta.free_list_head, 0, "no chain was written");
    meta.free_list_head
}

/// Reads page `pid` of the data file in `d`.
fn read_page(d: &Path, pid: u64) -> Vec<u8> {
    let all = std::fs::read(d.join(DATA_FILE)).unwrap();
    let at = pid as usize * PAGE_BYTES;
    all[at..at + PAGE_BYTES].to_vec()
}

/// Writes page `pid` of the data file in `d`.
fn write_page(d: &Path, pid: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(d.join(DATA_FILE))
        .unwrap();
    f.write_all_at(bytes, pid * PAGE_BYTES as u64).unwrap();
}

#[test]
fn a_corrupt_chain_page_is_a_typed_error_on_open() {
    let d = dir("corrupt");
    let head = closed_with_a_chain(&d, Durability::Off);
    let good = read_page(&d, head);
    let mut torn = good.clone();
    torn[PAGE_BYTES / 2] ^= 0x40;
    write_page(&d, head, &torn);
    match LocalDb::open(&d, opts(Durability::Off, false)) {
        Err(OpenError::Storage(StorageError::Page(PageError::Checksum { page, .. }))) => {
            assert_eq!(page, head);
        }
        other => panic!("a torn chain page opened as {:?}", other.map(|_| ())),
    }
    // A chain that comes back to its own head: sealed, so only the walk can tell.
    let chain_page = freelist::decode(&good, head).unwrap();
    let mut looped = vec![0u8; PAGE_BYTES];
    freelist::encode(&mut looped, head, head, &chain_page.ids);
    write_page(&d, head, &looped);
    match LocalDb::open(&d, opts(Durability::Off, false)) {
        Err(OpenError::Storage(StorageError::Corrupt {
            reason: Corruption::FreeListCycle { .. },
            ..
        })) => {}
        other => panic!("a looped chain opened as {:?}", other.map(|_| ())),
    }
    // A chain page listing the meta page as free.
    let mut ids = chain_page.ids.clone();
    ids[0] = 0;
    let mut bad = vec![0u8; PAGE_BYTES];
    freelist::encode(&mut bad, head, chain_page.next, &ids);
    write_page(&d, head, &bad);
    match LocalDb::open(&d, opts(Durability::Off, false)) {
        Err(OpenError::Storage(StorageError::Corrupt {
            reason: Corruption::FreePageOutOfRange { free_page: 0, .. },
            ..
        })) => {}
        other => panic!("a chain listing page 0 opened as {:?}", other.map(|_| ())),
    }
    write_page(&d, head, &good);
    let mut db = LocalDb::open(&d, opts(Durability::Off, false)).unwrap();
    check(&mut db);
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn with_a_log_a_torn_chain_page_is_repaired_from_the_double_write_copy() {
    let d = dir("torn-logged");
    let head = closed_with_a_chain(&d, Durability::Fdatasync);
    let mut torn = read_page(&d, head);
    torn[PAGE_BYTES - 8..].fill(0xee);
    write_page(&d, head, &torn);
    let mut db = LocalDb::open(&d, opts(Durability::Fdatasync, false)).unwrap();
    let r = check(&mut db);
    assert!(r.free_list_pages >= 1, "{r:?}");
    drop(db);
    let _ = std::fs::remove_dir_all(&d);
}

// ---------------------------------------------------------------------------------------------
// The free-list page decoder under arbitrary and mutated input.

/// The free-list page's fields: the common header's, then next, count, reserved, some ids.
fn chain_fields() -> Vec<Field> {
    let at = page::HEADER_SIZE;
    let mut fields = vec![(0, 4), (4, 1), (5, 1), (8, 8), (16, 8), (26, 1)];
    fields.extend([(at, 8), (at + 8, 4), (at + 12, 4)]);
    fields.extend((0..8).map(|i| (at + 16 + 8 * i, 8)));
    fields
}

/// What `decode` promises of a page it accepts.
fn decoded_is_sane(bytes: &[u8], pid: u64) -> Result<(), TestCaseError> {
    let result = freelist::decode(bytes, pid);
    note(&result.as_ref().map(|_| ()));
    if let Ok(p) = result {
        prop_assert!(p.ids.len() <= ids_per_page(bytes.len()));
        prop_assert_eq!(page::page_id(bytes), pid);
    }
    Ok(())
}

#[test]
fn free_list_page_arbitrary_bytes() {
    let strategy = (
        prop::sample::select(vec![0usize, 47, 1024, 4096, 4097]),
        any::<u64>(),
        any::<bool>(),
    );
    fuzz("free_list/bytes", strategy, |(len, seed, plausible)| {
        let mut bytes = noise(seed, len);
        if plausible && len > page::HEADER_SIZE {
            bytes[4] = page::FORMAT_MAGIC;
            bytes[5] = page::PageType::FreeList as u8;
            bytes[26] = len.trailing_zeros() as u8;
            let sum = page::compute_checksum(&bytes);
            bytes[..4].copy_from_slice(&sum.to_le_bytes());
        }
        decoded_is_sane(&bytes, 0)
    });
}

#[test]
fn free_list_page_mutated() {
    let fields = chain_fields();
    let strategy = (
        prop::sample::select(vec![1024usize, 4096, 65536]),
        1u64..1 << 40,
        prop::collection::vec(any::<u64>(), 0..64),
        mutations(),
        any::<bool>(),
    );
    fuzz(
        "free_list/mutated",
        strategy,
        |(size, pid, ids, muts, reseal)| {
            let mut bytes = vec![0u8; size];
            freelist::encode(&mut bytes, pid, pid + 1, &ids);
            let decoded = freelist::decode(&bytes, pid).unwrap();
            prop_assert_eq!(decoded.ids, ids);
            mutate(&mut bytes, &muts, &fields);
            if reseal && page::valid_page_size(bytes.len()) {
                let sum = page::compute_checksum(&bytes);
                bytes[..4].copy_from_slice(&sum.to_le_bytes());
            }
            decoded_is_sane(&bytes, pid)
        },
    );
}

/// Issue 38: a database whose free list has a chain (as recovery leaves one after a crash
/// abandons pages) is opened, recovered or not, again and again with O_DIRECT: the chain's
/// pages are read into aligned memory. Before the fix, the second open failed with `EINVAL`.
#[test]
fn a_database_with_a_chain_opens_again_and_again_with_o_direct() {
    if !direct() {
        eprintln!("skipped: the test directory refuses O_DIRECT, which this test is about");
        return;
    }
    let d = dir("reopen-direct");
    closed_with_a_chain(&d, Durability::Fdatasync);
    for _ in 0..2 {
        let mut db = LocalDb::open(&d, opts(Durability::Fdatasync, false)).unwrap();
        assert!(check(&mut db).free_list_pages >= 1);
        db.close().unwrap();
    }
    let mut db = LocalDb::open(&d, opts(Durability::Fdatasync, false)).unwrap();
    fill(&mut db, 1);
    delete_most(&mut db);
    crash(db);
    for _ in 0..2 {
        let mut db = LocalDb::open(&d, opts(Durability::Fdatasync, false)).unwrap();
        assert!(check(&mut db).free_list_pages >= 1);
        crash(db);
    }
    let _ = std::fs::remove_dir_all(&d);
}
