//! Whether O_DIRECT reads of a target complete inline or are punted to io-wq workers: a few
//! reads through a plain ring of the runtime, with the io-wq workers counted around them.

use crate::iowq::iowq_workers_now;
use ringdb_io::{open_engine, EngineKind, FileId, FixedBufferPool, IoConfig, IoRequest};
use ringdb_io::{Target, TargetOptions};
use serde::Serialize;
use std::path::Path;

/// Reads issued by [`check_read_path`].
const READS: usize = 8;
/// Bytes per read.
const BLOCK_BYTES: usize = 4096;
/// Waits allowed per read before the check gives up (one wait normally completes a read).
const WAITS_PER_READ: usize = 64;

/// The outcome of reading a target through io_uring: inline (the device or filesystem takes
/// `IOCB_NOWAIT`) or punted to io-wq workers (paper Sec. 2.2: a worker hand-off per I/O).
#[derive(Clone, Debug, Serialize)]
pub struct ReadPathCheck {
    /// Reads issued.
    pub reads: u32,
    /// io-wq workers that appeared while the reads ran.
    pub iowq_workers: u32,
    /// Whether any worker appeared, i.e. the reads did not complete inline.
    pub punted_to_iowq: bool,
}

/// Reads a few 4 KiB blocks of `path` with O_DIRECT through a plain ring and watches for io-wq
/// workers. `Ok(None)` when the path cannot be read that way (too short, O_DIRECT refused).
pub fn check_read_path(path: &Path) -> ringdb_io::Result<Option<ReadPathCheck>> {
    let options = TargetOptions {
        direct: true,
        write: false,
        create: false,
    };
    let target = match Target::open(path, options) {
        Ok(t) if t.size >= (READS * BLOCK_BYTES) as u64 => t,
        _ => return Ok(None),
    };
    let before = iowq_workers_now();
    let pool = FixedBufferPool::new(READS, BLOCK_BYTES)?;
    let config = IoConfig {
        queue_depth: READS as u32,
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut engine = open_engine(&config, &[target.fd()], None)?;
    for i in 0..READS {
        let offset = (i * BLOCK_BYTES) as u64;
        let req = IoRequest::read(FileId(0), offset, pool.ptr(i), BLOCK_BYTES as u32, i as u64);
        // SAFETY: `pool` outlives `engine` (declared first, dropped last, and the engine
        // drains before it is dropped); each read has its own buffer.
        unsafe { engine.push(&req)? };
    }
    // Each wait returns at least one completion, so READS waits suffice; the bound only keeps
    // a kernel that never completes from hanging the probe (no verdict then).
    let mut done = Vec::new();
    for _wait in 0..READS * WAITS_PER_READ {
        if done.len() >= READS {
            break;
        }
        engine.submit(1)?;
        engine.reap(&mut done);
    }
    assert!(done.len() <= READS, "more completions than reads");
    if done.len() < READS {
        // Dropping the engine drains the reads still in flight before `pool` is freed.
        return Ok(None);
    }
    // Workers linger for seconds after their work, so they are still there to be counted.
    let workers = iowq_workers_now().saturating_sub(before) as u32;
    drop(engine);
    Ok(Some(ReadPathCheck {
        reads: READS as u32,
        iowq_workers: workers,
        punted_to_iowq: workers > 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_on_ext4_complete_inline_and_short_files_are_skipped() {
        let dir = std::env::temp_dir();
        let p = dir.join(format!("ringdb-read-path-{}.dat", std::process::id()));
        std::fs::write(&p, vec![7u8; 64 * 1024]).unwrap();
        let long = check_read_path(&p);
        std::fs::write(&p, vec![7u8; 512]).unwrap();
        let short = check_read_path(&p);
        let _ = std::fs::remove_file(&p);
        // Short file: nothing to read, no verdict.
        assert!(short.unwrap().is_none());
        // ext4 (this machine's /tmp) takes IOCB_NOWAIT: O_DIRECT reads complete inline. A
        // filesystem without O_DIRECT yields None; anything else must be a verdict.
        if let Some(c) = long.unwrap() {
            assert_eq!(c.reads, 8);
            assert_eq!(c.punted_to_iowq, c.iowq_workers > 0);
        }
    }
}
