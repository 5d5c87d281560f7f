//! Named tables: each its own tree in one database. Creating (idempotent), reads and writes
//! per table, batches across tables, close and reopen, and with a log a crash (the `LocalDb`
//! abandoned without a flush, as in `durability.rs`) after which recovery replays table
//! creations and ops; a property test against one `BTreeMap` per table; the catalog page's
//! decoder under arbitrary and mutated bytes; typed errors for an unknown table, a bad name,
//! a full catalog and a log naming a table the catalog does not hold.

mod fuzz_harness;

use fuzz_harness::{fuzz, mutate, mutations, Field};
use proptest::prelude::*;
use ringdb::catalog::{capacity, CatalogRecord, Entry};
use ringdb::tree::TreeRoot;
use ringdb::{
    Corruption, Durability, LocalDb, OpenError, Options, ReadError, StorageError, TableId,
    WriteBatch, WriteError, DATA_FILE, WAL_FILE,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringdb-tables-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts(pool: usize, durability: Durability) -> Options {
    Options {
        pool_pages: pool,
        direct: false,
        fresh: true,
        durability,
        wal_bytes: 1 << 20,
        ..Options::default()
    }
}

fn reopen_opts(pool: usize, durability: Durability) -> Options {
    Options {
        fresh: false,
        ..opts(pool, durability)
    }
}

/// Abandons a database as a crash would: nothing is flushed or checkpointed on the way out.
fn crash(db: LocalDb) {
    std::mem::forget(db);
}

#[test]
fn tables_keep_their_own_keys_across_close_and_reopen() {
    for mode in [Durability::Off, Durability::Fdatasync] {
        let d = dir(&format!("basic-{mode}"));
        let mut db = LocalDb::open(&d, opts(64, mode)).unwrap();
        let users = db.create_table("users").unwrap();
        let orders = db.create_table("orders").unwrap();
        assert_ne!(users, orders);
        assert_ne!(users, TableId::DEFAULT);
        assert_eq!(
            db.create_table("users").unwrap(),
            users,
            "{mode}: idempotent"
        );
        assert_eq!(db.table_id("orders"), Some(orders));
        assert_eq!(db.table_id("nope"), None);
        let listed = vec![("users".to_string(), users), ("orders".to_string(), orders)];
        assert_eq!(db.tables(), listed);
        db.insert(b"k", b"default").unwrap();
        assert!(!db.in_table(users).insert(b"k", b"user").unwrap());
        assert!(!db.in_table(orders).insert(b"k", b"order").unwrap());
        assert!(db.in_table(orders).insert(b"k", b"order2").unwrap());
        assert!(db.in_table(users).remove(b"k").unwrap());
        assert!(!db.in_table(users).remove(b"k").unwrap());
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
        assert_eq!(db.in_table(users).get(b"k").unwrap(), None);
        assert_eq!(
            db.in_table(orders).get(b"k").unwrap().as_deref(),
            Some(&b"order2"[..])
        );
        assert_eq!(db.stats().tables, 3);
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{mode}: {report}");
        assert_eq!(report.tables, 3);
        db.close().unwrap();

        let mut db = LocalDb::open(&d, reopen_opts(64, mode)).unwrap();
        assert_eq!(db.tables(), listed, "{mode}: the catalog survives");
        assert_eq!(
            db.in_table(orders).get(b"k").unwrap().as_deref(),
            Some(&b"order2"[..])
        );
        assert_eq!(db.in_table(users).get(b"k").unwrap(), None);
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
        let third = db.create_table("third").unwrap();
        assert!(third.get() > orders.get(), "ids are never reused");
        assert!(db.verify().unwrap().is_ok());
        db.close().unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn unknown_tables_and_bad_names_are_typed_errors() {
    for mode in [Durability::Off, Durability::Fdatasync] {
        let d = dir(&format!("errors-{mode}"));
        let mut db = LocalDb::open(&d, opts(64, mode)).unwrap();
        let t = db.create_table("t").unwrap();
        let ghost = TableId::from_raw(t.get() + 7);
        assert!(matches!(
            db.in_table(ghost).get(b"k"),
            Err(ReadError::NoSuchTable { table, .. }) if table == ghost
        ));
        assert!(matches!(
            db.in_table(ghost).insert(b"k", b"v"),
            Err(WriteError::NoSuchTable { table, .. }) if table == ghost
        ));
        assert!(matches!(
            db.in_table(ghost).remove(b"k"),
            Err(WriteError::NoSuchTable { .. })
        ));
        // A batch naming an unknown table changes nothing, not even its other ops.
        let mut batch = WriteBatch::new();
        batch.put_in(t, b"a", b"1").put_in(ghost, b"b", b"2");
        assert!(matches!(
            db.write(&batch),
            Err(WriteError::NoSuchTable { .. })
        ));
        assert_eq!(
            db.in_table(t).get(b"a").unwrap(),
            None,
            "{mode}: half a batch"
        );
        let long = "n".repeat(ringdb::MAX_NAME_BYTES + 1);
        for name in ["", long.as_str()] {
            assert!(matches!(
                db.create_table(name),
                Err(WriteError::TableName { length_bytes, .. }) if length_bytes == name.len()
            ));
        }
        let longest = "é".repeat(ringdb::MAX_NAME_BYTES / 2);
        let id = db.create_table(&longest).unwrap();
        assert_eq!(db.table_id(&longest), Some(id));
        db.close().unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn the_catalog_holds_what_one_page_holds_and_refuses_more() {
    let d = dir("full");
    let options = opts(64, Durability::Fdatasync);
    assert_eq!(options.page_size, 4096);
    let mut db = LocalDb::open(&d, options.clone()).unwrap();
    let max = capacity(4096);
    assert_eq!(max, 45);
    for i in 0..max {
        let t = db.create_table(&format!("table-{i}")).unwrap();
        db.in_table(t)
            .insert(b"key", format!("{i}").as_bytes())
            .unwrap();
    }
    assert!(matches!(
        db.create_table("one-more"),
        Err(WriteError::TooManyTables { max_tables, page_size: 4096, .. }) if max_tables == max
    ));
    assert_eq!(
        db.create_table("table-3").unwrap().get(),
        4,
        "existing names still resolve"
    );
    crash(db);
    let mut db = LocalDb::open(
        &d,
        Options {
            fresh: false,
            ..options
        },
    )
    .unwrap();
    assert_eq!(db.tables().len(), max);
    for (name, t) in db.tables() {
        let i = name.strip_prefix("table-").unwrap();
        assert_eq!(
            db.in_table(t).get(b"key").unwrap(),
            Some(i.as_bytes().to_vec())
        );
    }
    assert!(db.verify().unwrap().is_ok());
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// The value of key `i` in table `t` (0: the default table) of the crash test below.
fn crash_value(t: u32, i: u32) -> String {
    format!("{t}-{i}-{}", "v".repeat((i % 40) as usize))
}

/// Writes 3,000 keys into `a` and `b` (every third into the default table too), then removes
/// every fourth key of `a`.
fn fill_for_the_crash(db: &mut LocalDb, a: TableId, b: TableId) {
    for i in 0..3000u32 {
        let key = format!("k{i:05}");
        let (in_a, in_b) = (crash_value(1, i), crash_value(2, i));
        db.in_table(a)
            .insert(key.as_bytes(), in_a.as_bytes())
            .unwrap();
        db.in_table(b)
            .insert(key.as_bytes(), in_b.as_bytes())
            .unwrap();
        if i % 3 == 0 {
            let in_default = crash_value(0, i);
            db.insert(key.as_bytes(), in_default.as_bytes()).unwrap();
        }
    }
    for i in (0..3000u32).step_by(4) {
        let key = format!("k{i:05}");
        assert!(db.in_table(a).remove(key.as_bytes()).unwrap());
    }
}

/// What [`fill_for_the_crash`] left, every key checked.
fn check_after_the_crash(db: &mut LocalDb, a: TableId, b: TableId) {
    for i in 0..3000u32 {
        let key = format!("k{i:05}");
        let want_a = (i % 4 != 0).then(|| crash_value(1, i).into_bytes());
        assert_eq!(
            db.in_table(a).get(key.as_bytes()).unwrap(),
            want_a,
            "a/{key}"
        );
        let want_b = Some(crash_value(2, i).into_bytes());
        assert_eq!(
            db.in_table(b).get(key.as_bytes()).unwrap(),
            want_b,
            "b/{key}"
        );
        let want_default = (i % 3 == 0).then(|| crash_value(0, i).into_bytes());
        assert_eq!(db.get(key.as_bytes()).unwrap(), want_default, "{key}");
    }
}

/// Many keys per table (so roots split several times and the small pool evicts and
/// checkpoints), a crash, recovery; then a table created after the last checkpoint, so that
/// only the log knows it, and another crash.
#[test]
fn recovery_replays_table_creation_and_ops_after_a_crash() {
    let d = dir("crash");
    let mode = Durability::Fdatasync;
    let mut db = LocalDb::open(&d, opts(48, mode)).unwrap();
    let a = db.create_table("a").unwrap();
    let b = db.create_table("b").unwrap();
    fill_for_the_crash(&mut db, a, b);
    assert!(db.stats().checkpoints.unwrap().checkpoints > 1);
    assert!(db.stats().height > 0);
    crash(db);

    let mut db = LocalDb::open(&d, reopen_opts(48, mode)).unwrap();
    assert_eq!(db.table_id("a"), Some(a));
    assert_eq!(db.table_id("b"), Some(b));
    check_after_the_crash(&mut db, a, b);
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report}");
    // Only the log will know this table and its batch.
    let c = db.create_table("c").unwrap();
    let mut batch = WriteBatch::new();
    batch
        .put_in(c, b"x", b"1")
        .put_in(a, b"x", b"2")
        .put(b"x", b"3");
    db.write(&batch).unwrap();
    crash(db);

    let mut db = LocalDb::open(&d, reopen_opts(48, mode)).unwrap();
    assert_eq!(db.table_id("c"), Some(c));
    let got_c = db.in_table(c).get(b"x").unwrap();
    assert_eq!(got_c.as_deref(), Some(&b"1"[..]));
    let got_a = db.in_table(a).get(b"x").unwrap();
    assert_eq!(got_a.as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(b"x").unwrap().as_deref(), Some(&b"3"[..]));
    assert!(db.verify().unwrap().is_ok());
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

/// A log record naming a table that no record created: recovery refuses the database with a
/// typed corruption error. The record is written where the log ends, as a commit would have.
#[test]
fn a_log_naming_an_unknown_table_is_corruption() {
    let d = dir("unknown-in-log");
    let mode = Durability::Fdatasync;
    let mut db = LocalDb::open(&d, opts(64, mode)).unwrap();
    let t = db.create_table("t").unwrap();
    db.in_table(t).insert(b"a", b"1").unwrap();
    crash(db);
    let log_path = d.join(WAL_FILE);
    let mut log = std::fs::read(&log_path).unwrap();
    let mut end = 0usize;
    while let Some((len, _)) = ringdb::wal::decode_record(&log[end..], end as u64) {
        end += len;
    }
    assert!(end > 0, "the commits are in the log");
    let ghost = TableId::from_raw(t.get() + 1);
    let op = ringdb::wal::Op::Put {
        table: ghost,
        key: b"b".to_vec(),
        value: b"2".to_vec(),
    };
    let mut record = Vec::new();
    ringdb::wal::encode_record(&mut record, end as u64, &[op]);
    if log.len() < end + record.len() {
        log.resize(end + record.len(), 0);
    }
    log[end..end + record.len()].copy_from_slice(&record);
    std::fs::write(&log_path, &log).unwrap();
    match LocalDb::open(&d, reopen_opts(64, mode)) {
        Err(OpenError::Storage(StorageError::Corrupt {
            reason: Corruption::UnknownTable { table, lsn, .. },
            ..
        })) => {
            assert_eq!(table, ghost.get());
            assert_eq!(lsn, end as u64);
        }
        other => panic!(
            "expected an unknown table in the log, got {:?}",
            other.err()
        ),
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A database written before tables existed (meta page `RINGDBM2`: free ids at +64, no
/// catalog) opens as one default table, and its next flush writes the current format.
#[test]
fn a_database_of_the_previous_format_opens_as_its_default_table() {
    let d = dir("m2");
    let page_size = Options::default().page_size;
    let mut db = LocalDb::open(&d, opts(64, Durability::Off)).unwrap();
    for i in 0..500u32 {
        db.insert(format!("k{i:04}").as_bytes(), b"old").unwrap();
    }
    for i in 0..500u32 {
        if i % 2 == 0 {
            db.remove(format!("k{i:04}").as_bytes()).unwrap();
        }
    }
    db.close().unwrap();
    // Rewrite page 0 as the previous format wrote it.
    let data = d.join(DATA_FILE);
    let mut file = std::fs::read(&data).unwrap();
    let body = ringdb::page::HEADER_SIZE;
    let meta = &mut file[..page_size];
    assert_eq!(&meta[body..body + 8], b"RINGDBM3");
    meta[body..body + 8].copy_from_slice(b"RINGDBM2");
    let free_ids = meta[body + 96..page_size].to_vec();
    meta[body + 64..body + 64 + free_ids.len()].copy_from_slice(&free_ids);
    ringdb::page::seal(meta, 0);
    std::fs::write(&data, &file).unwrap();

    let mut db = LocalDb::open(&d, reopen_opts(64, Durability::Off)).unwrap();
    assert!(db.tables().is_empty());
    for i in 0..500u32 {
        let want = (i % 2 == 1).then(|| b"old".to_vec());
        assert_eq!(db.get(format!("k{i:04}").as_bytes()).unwrap(), want);
    }
    assert!(db.verify().unwrap().is_ok());
    let t = db.create_table("new").unwrap();
    db.in_table(t).insert(b"k", b"v").unwrap();
    db.close().unwrap();
    let file = std::fs::read(&data).unwrap();
    assert_eq!(&file[body..body + 8], b"RINGDBM3");
    let mut db = LocalDb::open(&d, reopen_opts(64, Durability::Off)).unwrap();
    assert_eq!(
        db.in_table(t).get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    assert!(db.verify().unwrap().is_ok());
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

// ---------------------------------------------------------------------------------------------
// The property: any interleaving of creates, puts, deletes and batches across tables, with
// closes and (with a log) crashes in between, leaves each table equal to its `BTreeMap`.

#[derive(Clone, Debug)]
enum Step {
    Create(u8),
    Put(u8, u16, u16),
    Delete(u8, u16),
    Batch(Vec<(u8, u16, Option<u16>)>),
    Reopen { crash: bool },
}

const TABLES: u8 = 4;
const KEYS: u16 = 400;

fn step() -> impl Strategy<Value = Step> {
    let table = 0..=TABLES;
    prop_oneof![
        1 => (1..=TABLES).prop_map(Step::Create),
        12 => (table.clone(), 0..KEYS, any::<u16>()).prop_map(|(t, k, v)| Step::Put(t, k, v)),
        4 => (table.clone(), 0..KEYS).prop_map(|(t, k)| Step::Delete(t, k)),
        2 => prop::collection::vec((table, 0..KEYS, prop::option::of(any::<u16>())), 1..12)
            .prop_map(Step::Batch),
        1 => any::<bool>().prop_map(|crash| Step::Reopen { crash }),
    ]
}

fn key(k: u16) -> Vec<u8> {
    format!("key-{k:05}").into_bytes()
}

/// Values of varied length (up to ~300 bytes), so that leaves split often.
fn value(v: u16) -> Vec<u8> {
    let mut out = format!("{v}:").into_bytes();
    out.resize(2 + (v as usize % 300), b'a' + (v % 26) as u8);
    out
}

/// The model: table number (0: default) -> its pairs; a table exists once created.
struct Model {
    tables: BTreeMap<u8, BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Model {
    /// The database's id for table number `t` (created ones only).
    fn id(&self, db: &LocalDb, t: u8) -> Option<TableId> {
        if t == 0 {
            return Some(TableId::DEFAULT);
        }
        self.tables
            .contains_key(&t)
            .then(|| db.table_id(&format!("t{t}")).unwrap())
    }
}

fn run_steps(mode: Durability, steps: &[Step], name: &str) -> Result<(), TestCaseError> {
    let d = dir(name);
    let mut db = LocalDb::open(&d, opts(32, mode)).unwrap();
    let mut model = Model {
        tables: BTreeMap::from([(0, BTreeMap::new())]),
    };
    for s in steps {
        db = apply_step(db, &mut model, s, &d, mode)?;
    }
    check_model(&mut db, &model)?;
    crash_or_close(db, mode, true);
    let mut db = LocalDb::open(&d, reopen_opts(32, mode)).unwrap();
    check_model(&mut db, &model)?;
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}

/// A crash where there is a log to recover from; a close otherwise.
fn crash_or_close(db: LocalDb, mode: Durability, crash_it: bool) {
    if crash_it && mode.logged() {
        crash(db);
    } else {
        db.close().unwrap();
    }
}

fn apply_step(
    mut db: LocalDb,
    model: &mut Model,
    s: &Step,
    d: &std::path::Path,
    mode: Durability,
) -> Result<LocalDb, TestCaseError> {
    match s {
        Step::Create(t) => {
            let id = db.create_table(&format!("t{t}")).unwrap();
            prop_assert_eq!(model.id(&db, *t).unwrap_or(id), id);
            model.tables.entry(*t).or_default();
        }
        Step::Put(t, k, v) => match model.id(&db, *t) {
            Some(id) => {
                let existed = db.in_table(id).insert(&key(*k), &value(*v)).unwrap();
                let map = model.tables.get_mut(t).unwrap();
                prop_assert_eq!(existed, map.insert(key(*k), value(*v)).is_some());
            }
            None => {
                let ghost = TableId::from_raw(1000 + u32::from(*t));
                let refused = db.in_table(ghost).insert(&key(*k), &value(*v));
                let typed = matches!(refused, Err(WriteError::NoSuchTable { .. }));
                prop_assert!(typed, "an unknown table: {:?}", refused);
            }
        },
        Step::Delete(t, k) => {
            if let Some(id) = model.id(&db, *t) {
                let existed = db.in_table(id).remove(&key(*k)).unwrap();
                let map = model.tables.get_mut(t).unwrap();
                prop_assert_eq!(existed, map.remove(&key(*k)).is_some());
            }
        }
        Step::Batch(ops) => apply_batch(&mut db, model, ops)?,
        Step::Reopen { crash } => {
            crash_or_close(db, mode, *crash);
            db = LocalDb::open(d, reopen_opts(32, mode)).unwrap();
            check_model(&mut db, model)?;
        }
    }
    Ok(db)
}

/// One batch over the tables that exist (ops on others are left out).
fn apply_batch(
    db: &mut LocalDb,
    model: &mut Model,
    ops: &[(u8, u16, Option<u16>)],
) -> Result<(), TestCaseError> {
    let mut batch = WriteBatch::new();
    for &(t, k, v) in ops {
        let Some(id) = model.id(db, t) else { continue };
        let map = model.tables.get_mut(&t).unwrap();
        match v {
            Some(v) => {
                batch.put_in(id, &key(k), &value(v));
                map.insert(key(k), value(v));
            }
            None => {
                batch.delete_in(id, &key(k));
                map.remove(&key(k));
            }
        }
    }
    db.write(&batch).unwrap();
    Ok(())
}

fn check_model(db: &mut LocalDb, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(db.tables().len() + 1, model.tables.len());
    for (&t, map) in &model.tables {
        let id = model.id(db, t).unwrap();
        for k in 0..KEYS {
            let got = db.in_table(id).get(&key(k)).unwrap();
            prop_assert_eq!(got.as_ref(), map.get(&key(k)), "table {} key {}", t, k);
        }
    }
    let report = db.verify().unwrap();
    prop_assert!(report.is_ok(), "{}", report);
    prop_assert_eq!(report.tables as usize, model.tables.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn tables_match_a_map_each_without_a_log(steps in prop::collection::vec(step(), 1..300)) {
        run_steps(Durability::Off, &steps, "prop-off")?;
    }

    #[test]
    fn tables_match_a_map_each_across_crashes(steps in prop::collection::vec(step(), 1..300)) {
        run_steps(Durability::None, &steps, "prop-log")?;
    }
}

// ---------------------------------------------------------------------------------------------
// The catalog page's decoder: arbitrary bytes, and valid pages with mutated fields.

fn catalog_plan() -> impl Strategy<Value = (usize, CatalogRecord)> {
    (
        prop::sample::select(vec![1024usize, 4096]),
        prop::collection::vec(("[a-z]{1,64}", 1u32..=64, 1u64..1000), 0..10),
    )
        .prop_map(|(page_size, tables)| {
            let mut entries: Vec<Entry> = Vec::new();
            for (i, (name, height, root)) in tables.into_iter().enumerate() {
                if entries.iter().any(|e| e.name == name) {
                    continue;
                }
                entries.push(Entry {
                    table: TableId::from_raw(2 * i as u32 + 1),
                    name,
                    root: TreeRoot {
                        root: root + 2,
                        height,
                    },
                });
            }
            let next_id = entries.last().map_or(1, |e| e.table.get() + 1);
            (page_size, CatalogRecord { next_id, entries })
        })
}

/// The catalog record's fields: count, next id, and the first entries' fields.
fn catalog_fields() -> Vec<Field> {
    let at = ringdb::page::HEADER_SIZE;
    let mut fields = vec![(at, 8), (at + 8, 4), (at + 12, 4)];
    for i in 0..4 {
        let e = at + 16 + 88 * i;
        fields.extend([(e, 4), (e + 4, 4), (e + 8, 8), (e + 16, 1), (e + 17, 8)]);
    }
    fields
}

/// What `read_from` promises of a record it accepts.
fn read_catalog(bytes: &[u8]) -> Result<(), TestCaseError> {
    const PAGES: u64 = 1 << 20;
    if let Ok(record) = CatalogRecord::read_from(bytes, 1, PAGES) {
        prop_assert!(record.entries.len() <= capacity(bytes.len()));
        let mut previous = 0;
        for e in &record.entries {
            prop_assert!(e.table.get() > previous && e.table.get() < record.next_id);
            previous = e.table.get();
            prop_assert!(!e.name.is_empty() && e.name.len() <= ringdb::MAX_NAME_BYTES);
            prop_assert!(e.root.root > 1 && e.root.root < PAGES && e.root.height >= 1);
        }
    }
    Ok(())
}

#[test]
fn catalog_arbitrary_bytes() {
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 1024..=1024),
        prop::collection::vec(any::<u8>(), 4096..=4096).prop_map(|mut b| {
            b[5] = 5;
            b[48..56].copy_from_slice(b"RINGDBC1");
            b
        }),
    ];
    fuzz("catalog/bytes", bytes, |bytes| read_catalog(&bytes));
}

#[test]
fn catalog_mutated_pages() {
    let fields = catalog_fields();
    fuzz(
        "catalog/mutated",
        (catalog_plan(), mutations()),
        |((size, record), muts)| {
            let image = record.page(1, size);
            let mut bytes = image.as_slice().to_vec();
            prop_assert_eq!(ringdb::page::verify(&bytes, 1), Ok(()));
            prop_assert_eq!(
                CatalogRecord::read_from(&bytes, 1, 1 << 20).ok(),
                Some(record)
            );
            mutate(&mut bytes, &muts, &fields);
            read_catalog(&bytes)
        },
    );
}
