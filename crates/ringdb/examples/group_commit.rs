//! Many writers on one thread: 64 tasks each commit their own keys through a [`DbHandle`], with
//! every commit made durable (`fdatasync`) before it returns. Commits that arrive while a log
//! write is under way share the next one (group commit), so the number of durability points is
//! far below the number of commits. Then the database is closed, reopened (recovery) and
//! checked.
//!
//! ```sh
//! cargo run --release -p ringdb --example group_commit -- [DIR]
//! ```
//! The database goes to `DIR` (default `ringdb-data/example-group-commit`), created fresh.

use ringdb::{DbHandle, Durability, LocalDb, Options};
use std::path::PathBuf;
use std::time::Instant;

const TASKS: u64 = 64;
const KEYS_PER_TASK: u64 = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).map_or_else(
        || PathBuf::from("ringdb-data/example-group-commit"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let options = Options {
        fresh: true,
        durability: Durability::Fdatasync,
        ..Options::default()
    };
    let mut db = LocalDb::open(&dir, options.clone())?;
    let started = Instant::now();
    let writers: Vec<_> = (0..TASKS)
        .map(|task| {
            let handle = db.handle();
            db.runtime().spawn(write_keys(handle, task))
        })
        .collect();
    db.runtime().block_on(async move {
        for writer in writers {
            writer.await?;
        }
        Ok::<(), ringdb::WriteError>(())
    })??;
    let seconds = started.elapsed().as_secs_f64();
    let log = db.stats().wal.unwrap_or_default();
    println!(
        "{} durable commits from {TASKS} tasks in {seconds:.2} s ({:.0} commits/s): {} log writes, {} fdatasyncs, {:.1} commits per durability point",
        log.records,
        log.records as f64 / seconds,
        log.writes,
        log.syncs,
        log.commits_per_sync()
    );
    db.close()?;

    let mut db = LocalDb::open(
        &dir,
        Options {
            fresh: false,
            ..options
        },
    )?;
    let report = db.verify()?;
    assert!(report.is_ok(), "{report:?}");
    let sample = db.get(b"task-7-key-199")?;
    println!(
        "reopened: {} keys, tree height {}, every page verified; task-7-key-199 = {:?}",
        report.keys,
        report.height,
        sample.map(|v| String::from_utf8_lossy(&v).into_owned())
    );
    db.close()?;
    Ok(())
}

/// One writer: commits its keys one at a time, each durable when `insert` returns.
async fn write_keys(db: DbHandle, task: u64) -> Result<(), ringdb::WriteError> {
    for key in 0..KEYS_PER_TASK {
        let name = format!("task-{task}-key-{key}");
        let value = format!("value {key} of task {task}");
        db.insert(name.as_bytes(), value.as_bytes()).await?;
    }
    Ok(())
}
