//! `ConfigFile`: parsing, the round trip through `to_toml`, refusals that name the key and the
//! line, and a database opened with a file's settings.

use proptest::prelude::*;
use ringdb::{Durability, LocalDb, Options, Steal, SHARDS_MAX};
use ringdb_bench::config::{ConfigError, ConfigFile, DbSettings, WorkloadSettings};
use ringdb_io::{Batching, EngineKind, IoConfig, IoError, SetupMode, SqPoll};
use std::path::PathBuf;

const FULL: &str = r#"
# written by a test
[io]
engine = "uring"
setup = "coop"
batching = "fixed:16"
queue_depth = 64
fixed_buffers = true
register_files = true
register_ring_fd = true
iopoll = false
sqpoll = { idle_ms = 50, cpu = 1 }
cpu = 0
[db]
pool = "64M"
page_size = "8k"
shards = 2
durability = "fdatasync"
steal = "off"
evict_batch = 64
[workload]
tasks = 128
value_size = 100
"#;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ringdb-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn every_key_of_the_schema_parses() {
    let config = ConfigFile::parse(FULL).unwrap();
    let io = config.io.clone().unwrap();
    assert_eq!(io.engine, EngineKind::Uring);
    assert_eq!(io.setup, SetupMode::Coop);
    assert_eq!(io.batching, Batching::Fixed(16));
    assert_eq!(io.queue_depth, 64);
    assert!(io.fixed_buffers && io.register_files && io.register_ring_fd && !io.iopoll);
    assert_eq!(
        io.sqpoll,
        Some(SqPoll {
            idle_ms: 50,
            cpu: Some(1)
        })
    );
    assert_eq!(io.cpu, Some(0));
    assert_eq!(
        config.db,
        DbSettings {
            pool_bytes: Some(64 << 20),
            page_size_bytes: Some(8192),
            shards: Some(2),
            durability: Some(Durability::Fdatasync),
            steal: Some(Steal::Never),
            evict_batch: Some(64),
            group_commit: None,
            direct: None,
        }
    );
    assert_eq!(config.workload.tasks, Some(128));
    assert_eq!(config.workload.value_size, Some(100));
}

#[test]
fn missing_io_keys_are_io_configs_defaults_and_an_empty_file_is_empty() {
    let config = ConfigFile::parse("[io]\nengine = \"posix\"\n").unwrap();
    assert_eq!(config.io, Some(IoConfig::new(EngineKind::Posix)));
    assert_eq!(config.db, DbSettings::default());
    assert_eq!(
        ConfigFile::parse("# nothing\n").unwrap(),
        ConfigFile::default()
    );
    assert_eq!(ConfigFile::default().to_toml(), "");
}

#[test]
fn the_full_file_round_trips() {
    let config = ConfigFile::parse(FULL).unwrap();
    let text = config.to_toml();
    assert!(text.contains("pool = \"64M\""), "{text}");
    assert!(text.contains("batching = \"fixed(16)\""), "{text}");
    assert_eq!(ConfigFile::parse(&text).unwrap(), config, "{text}");
}

#[test]
fn an_unknown_key_is_named_with_its_section_and_line() {
    let text = "[io]\nengine = \"uring\"\nqueue_depht = 32\n";
    match ConfigFile::parse(text).unwrap_err() {
        ConfigError::UnknownKey {
            key, line, section, ..
        } => {
            assert_eq!(key, "queue_depht");
            assert_eq!(line, Some(3));
            assert_eq!(section, "[io]");
        }
        other => panic!("{other:?}"),
    }
    let e = ConfigFile::parse("[db]\npool = \"1M\"\n\n[db2]\n").unwrap_err();
    assert!(matches!(&e, ConfigError::UnknownKey { key, line: Some(4), .. } if key == "db2"));
    assert!(!e.to_string().contains("--"), "{e}");
}

#[test]
fn the_file_is_named_in_every_error() {
    let dir = scratch("named");
    let path = dir.join("bad.toml");
    std::fs::write(&path, "[db]\nshards = 2\nturbo = true\n").unwrap();
    let e = ConfigFile::from_path(&path).unwrap_err();
    assert_eq!(e.path(), Some(path.as_path()));
    let message = e.to_string();
    assert!(message.contains("bad.toml, line 3"), "{message}");
    assert!(message.contains("`turbo`"), "{message}");
    let missing = ConfigFile::from_path(&dir.join("absent.toml")).unwrap_err();
    assert!(matches!(missing, ConfigError::Read { .. }), "{missing:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_values_are_refused_with_the_key() {
    let cases: [(&str, &str, usize); 6] = [
        ("[db]\npool = \"12Q\"\n", "db.pool", 2),
        ("[db]\n\npage_size = \"0\"\n", "db.page_size", 3),
        ("[db]\nshards = 0\n", "db.shards", 2),
        ("[db]\ndurability = \"sometimes\"\n", "db.durability", 2),
        ("[db]\nsteal = \"maybe\"\n", "db.steal", 2),
        ("[workload]\ntasks = 0\n", "workload.tasks", 2),
    ];
    for (text, expected_key, expected_line) in cases {
        match ConfigFile::parse(text).unwrap_err() {
            ConfigError::Invalid { key, line, .. } => {
                assert_eq!(key, expected_key, "{text}");
                assert_eq!(line, Some(expected_line), "{text}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    let too_many = format!("[db]\nshards = {}\n", SHARDS_MAX + 1);
    assert!(matches!(
        ConfigFile::parse(&too_many),
        Err(ConfigError::Invalid { .. })
    ));
}

#[test]
fn io_settings_are_validated_on_load() {
    let zero = ConfigFile::parse("[io]\nqueue_depth = 0\n").unwrap_err();
    assert!(
        matches!(
            zero,
            ConfigError::IoSettings {
                source: IoError::OutOfRange { .. },
                ..
            }
        ),
        "{zero:?}"
    );
    let posix = ConfigFile::parse("[io]\nengine = \"posix\"\nfixed_buffers = true\n");
    assert!(matches!(posix, Err(ConfigError::IoSettings { .. })));
    let engine = ConfigFile::parse("[io]\nengine = \"turbo\"\n").unwrap_err();
    assert!(
        matches!(engine, ConfigError::Parse { line: Some(2), .. }),
        "{engine:?}"
    );
    let negative = ConfigFile::parse("[io]\nqueue_depth = -4\n").unwrap_err();
    assert!(matches!(negative, ConfigError::Parse { line: Some(2), .. }));
    let batching = ConfigFile::parse("[io]\nbatching = \"fixed(0)\"\n").unwrap_err();
    assert!(
        matches!(batching, ConfigError::Parse { .. }),
        "{batching:?}"
    );
}

#[test]
fn apply_sets_what_is_present_and_keeps_the_rest() {
    let config = ConfigFile::parse("[db]\npage_size = \"8k\"\ndurability = \"none\"\n").unwrap();
    let mut options = Options {
        pool_pages: 1000,
        ..Options::default()
    };
    let io_before = options.io.clone();
    config.apply_to(&mut options);
    assert_eq!(options.page_size, 8192);
    assert_eq!(options.pool_pages, 500, "the pool keeps its bytes");
    assert_eq!(options.durability, Durability::None);
    assert_eq!(options.io, io_before);
    assert_eq!(options.steal, Steal::Auto);
}

#[test]
fn a_database_opens_with_the_files_settings() {
    let dir = scratch("open");
    let path = dir.join("advice.toml");
    std::fs::write(
        &path,
        "[io]\nengine = \"posix\"\n[db]\npool = \"2M\"\ndurability = \"none\"\ndirect = false\n",
    )
    .unwrap();
    let mut options = ConfigFile::options_from_path(&path).unwrap();
    assert_eq!(options.pool_pages, 512);
    options.fresh = true;
    let mut db = LocalDb::open(&dir.join("db"), options).unwrap();
    assert_eq!(db.stats().io.engine, EngineKind::Posix);
    db.insert(b"advice", b"taken").unwrap();
    assert_eq!(db.get(b"advice").unwrap().as_deref(), Some(&b"taken"[..]));
    db.close().unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_sharded_database_takes_the_shard_count() {
    let dir = scratch("sharded");
    let config = ConfigFile::parse("[db]\nshards = 3\npool = \"3M\"\ndirect = false\n").unwrap();
    let builder = ringdb::Db::builder(dir.join("db")).fresh(true);
    let db = config.configure(builder).open().unwrap();
    assert_eq!(db.shard_count(), 3);
    db.insert(b"k", b"v").unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

fn any_batching() -> impl Strategy<Value = Batching> {
    prop_oneof![
        Just(Batching::Each),
        Just(Batching::Adaptive),
        (1u32..=4096).prop_map(Batching::Fixed),
    ]
}

fn any_io() -> impl Strategy<Value = Option<IoConfig>> {
    let engines = prop_oneof![Just(EngineKind::Uring), Just(EngineKind::Auto)];
    let setups = prop_oneof![Just(SetupMode::Default), Just(SetupMode::Coop)];
    let sqpoll = proptest::option::of((0u32..1000, proptest::option::of(0u32..8)));
    proptest::option::of(
        (
            engines,
            setups,
            any_batching(),
            1u32..=4096,
            sqpoll,
            any::<[bool; 4]>(),
        )
            .prop_map(
                |(engine, setup, batching, queue_depth, sqpoll, flags)| IoConfig {
                    engine,
                    setup,
                    batching,
                    queue_depth,
                    sqpoll: sqpoll.map(|(idle_ms, cpu)| SqPoll { idle_ms, cpu }),
                    fixed_buffers: flags[0],
                    register_files: flags[1],
                    register_ring_fd: flags[2],
                    iopoll: flags[3],
                    ..IoConfig::default()
                },
            ),
    )
}

fn any_db() -> impl Strategy<Value = DbSettings> {
    let durability = proptest::option::of(proptest::sample::select(Durability::ALL.to_vec()));
    let steal = proptest::option::of(prop_oneof![
        Just(Steal::Auto),
        Just(Steal::Always),
        Just(Steal::Never)
    ]);
    let sizes = (
        proptest::option::of(1u64..1 << 42),
        proptest::option::of(1u64..1 << 20),
    );
    let counts = (
        proptest::option::of(1usize..=SHARDS_MAX),
        proptest::option::of(1usize..10_000),
    );
    let flags = (
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
    );
    (sizes, counts, durability, steal, flags).prop_map(
        |((pool, page), (shards, evict), durability, steal, (group, direct))| DbSettings {
            pool_bytes: pool,
            page_size_bytes: page,
            shards,
            durability,
            steal,
            evict_batch: evict,
            group_commit: group,
            direct,
        },
    )
}

fn any_workload() -> impl Strategy<Value = WorkloadSettings> {
    (
        proptest::option::of(1usize..5000),
        proptest::option::of(0usize..1 << 20),
        proptest::option::of(1u64..1 << 40),
        proptest::option::of(proptest::sample::select(vec!["a", "b", "update-only"])),
    )
        .prop_map(|(tasks, value_size, records, ycsb)| WorkloadSettings {
            tasks,
            value_size,
            records,
            ycsb: ycsb.map(str::to_string),
            distribution: None,
        })
}

proptest! {
    #[test]
    fn parse_of_to_toml_is_the_same_file(
        io in any_io(),
        db in any_db(),
        workload in any_workload(),
    ) {
        let config = ConfigFile { io, db, workload };
        let text = config.to_toml();
        prop_assert_eq!(ConfigFile::parse(&text).unwrap(), config, "{}", text);
    }
}
