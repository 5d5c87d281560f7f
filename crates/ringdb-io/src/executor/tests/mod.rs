//! The executor's tests, by concept: I/O through every engine and policy, batching, buffer
//! safety, stalls and wakers, and the invariants the executor asserts. The helpers here open
//! runtimes over temporary files and make recognisable data.

mod batching;
mod buffers;
mod invariants;
mod read_write;
mod stall;

use super::*;
use crate::buf::{AlignedBuf, FixedBufferPool};
use crate::config::{Batching, EngineKind, IoConfig, SetupMode};
use crate::engine::FileId;
use crate::error::IoError;
use std::cell::Cell;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;

const BS: usize = 4096;

struct TempFile {
    path: std::path::PathBuf,
    file: std::fs::File,
}

impl TempFile {
    /// A file in the temp dir, opened with O_DIRECT when the filesystem allows it.
    fn new(name: &str, len: u64) -> TempFile {
        let path = std::env::temp_dir().join(format!(
            "ringdb-exec-{}-{}.dat",
            name.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let open = |direct: bool| {
            let mut o = std::fs::OpenOptions::new();
            o.read(true).write(true).create(true);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            o.open(&path)
        };
        let file = open(true).or_else(|_| open(false)).expect("temp file");
        file.set_len(len).unwrap();
        TempFile { path, file }
    }

    fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn fill(buf: &mut [u8], block: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (block as usize * 31 + i * 7 + 1) as u8;
    }
}

fn pattern(block: u64) -> Vec<u8> {
    let mut v = vec![0u8; BS];
    fill(&mut v, block);
    v
}

/// `None` when this kernel or build cannot open the engine.
fn open(cfg: &IoConfig, files: &[RawFd], pool: Option<FixedBufferPool>) -> Option<Runtime> {
    match Runtime::from_config(cfg, files, pool) {
        Ok(rt) => Some(rt),
        Err(e @ IoError::Unsupported { .. }) => {
            eprintln!("SKIP {}: {e}", cfg.label());
            None
        }
        Err(e) => panic!("{}: {e}", cfg.label()),
    }
}

fn cfg(engine: EngineKind, batching: Batching, depth: u32) -> IoConfig {
    IoConfig {
        batching,
        queue_depth: depth,
        ..IoConfig::new(engine)
    }
}

const POLICIES: [Batching; 3] = [Batching::Each, Batching::Fixed(4), Batching::Adaptive];

fn configs() -> Vec<IoConfig> {
    let mut v = Vec::new();
    for engine in EngineKind::ALL {
        for batching in POLICIES {
            v.push(cfg(engine, batching, 16));
        }
    }
    for setup in [SetupMode::Coop, SetupMode::Defer] {
        v.push(IoConfig {
            setup,
            ..cfg(EngineKind::Uring, Batching::Adaptive, 16)
        });
    }
    v
}

/// Polls `fut` once with the current task's context; true if it is pending.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx).is_pending())).await
}

/// A buffer that records, when dropped, whether the read's data had arrived in it.
struct Probe {
    buf: AlignedBuf,
    want: Vec<u8>,
    record: Rc<Cell<Option<bool>>>,
}

// SAFETY: delegates to AlignedBuf, whose heap memory does not move and lives as long as
// the Probe.
unsafe impl IoBuf for Probe {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.buf.len()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.record.set(Some(self.buf.as_slice() == &self.want[..]));
    }
}

fn probe_file(name: &str) -> TempFile {
    let f = TempFile::new(name, 64 * BS as u64);
    let mut b = AlignedBuf::new(BS);
    b.as_mut_slice().copy_from_slice(&pattern(7));
    f.file.write_all_at(b.as_slice(), 0).unwrap();
    f.file.sync_all().unwrap();
    f
}

fn probe(record: &Rc<Cell<Option<bool>>>) -> Probe {
    Probe {
        buf: AlignedBuf::new(BS),
        want: pattern(7),
        record: record.clone(),
    }
}
