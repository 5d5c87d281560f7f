//! Reads a file with many tasks at once on one thread: each task parks on its read, the
//! executor batches their requests into few `io_uring_enter` calls, and the counters show it.
//!
//! ```sh
//! cargo run --release -p ringdb-io --example concurrent_reads -- [FILE] [TASKS]
//! ```
//! Without a file it makes a 16 MiB one in the temporary folder. On a kernel without io_uring
//! (or where it is disabled) it says so and uses the posix engine.

use ringdb_io::{AlignedBuf, EngineKind, FileId, IoConfig, Runtime};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Instant;

const BLOCK_BYTES: usize = 4096;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (path, scratch) = match args.next() {
        Some(path) => (PathBuf::from(path), false),
        None => (scratch_file(16 << 20)?, true),
    };
    let tasks: u64 = args.next().map_or(Ok(32), |t| t.parse())?;
    let file = std::fs::File::open(&path)?;
    let blocks = file.metadata()?.len() / BLOCK_BYTES as u64;
    if blocks == 0 {
        return Err(format!("{} holds less than one block", path.display()).into());
    }
    let config = IoConfig {
        queue_depth: tasks.max(1) as u32,
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut runtime = match Runtime::from_config(&config, &[file.as_raw_fd()], None) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("io_uring is not available here ({e}); using the posix engine");
            Runtime::from_config(&IoConfig::new(EngineKind::Posix), &[file.as_raw_fd()], None)?
        }
    };
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let io = runtime.io();
            runtime.spawn(async move {
                let mut buffer = AlignedBuf::new(BLOCK_BYTES);
                let mut bytes = 0u64;
                // Each task reads every `tasks`-th block: together they cover the file.
                for block in (task..blocks).step_by(tasks as usize) {
                    let offset = block * BLOCK_BYTES as u64;
                    let (read, returned) = io.read(FileId(0), offset, buffer).await;
                    buffer = returned;
                    bytes += read? as u64;
                }
                Ok::<u64, ringdb_io::IoError>(bytes)
            })
        })
        .collect();
    let total = runtime.block_on(async move {
        let mut total = 0u64;
        for handle in handles {
            total += handle.await?;
        }
        Ok::<u64, ringdb_io::IoError>(total)
    })??;
    let seconds = started.elapsed().as_secs_f64();
    let stats = runtime.stats();
    println!(
        "read {} MiB with {tasks} tasks in {:.3} s ({:.0} MiB/s); {:?}",
        total >> 20,
        seconds,
        (total >> 20) as f64 / seconds,
        stats
    );
    if scratch {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}

/// A file of `bytes` bytes in the temporary folder.
fn scratch_file(bytes: usize) -> std::io::Result<PathBuf> {
    let path = std::env::temp_dir().join(format!("ringdb-example-{}", std::process::id()));
    std::fs::write(&path, vec![1u8; bytes])?;
    Ok(path)
}
