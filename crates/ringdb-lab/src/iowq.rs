//! Counts the kernel threads io_uring runs on the process's behalf: io-wq workers (`iou-wrk-*`,
//! the slow fallback path of paper Sec. 2.2) and SQPOLL pollers (`iou-sqp-*`).
//!
//! Benchmarks sample them to tell the inline submission path from the io-wq fallback; the
//! runtime itself never looks.

use std::collections::HashSet;
use std::fs;

/// Thread ids of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = fs::read_to_string(e.path().join("comm")).ok()?;
        comm.starts_with(prefix).then_some(tid)
    })
    .collect()
}

/// io-wq worker threads alive now.
pub fn iowq_workers_now() -> usize {
    threads_named("iou-wrk").len()
}

/// SQPOLL threads alive now.
pub fn sqpoll_threads_now() -> usize {
    threads_named("iou-sqp").len()
}

/// Remembers every distinct io-wq worker seen across samples (workers come and go).
#[derive(Default, Debug)]
pub struct IowqTracker {
    seen: HashSet<u32>,
}

impl IowqTracker {
    /// Adds the io-wq workers alive now to those seen.
    pub fn sample(&mut self) {
        self.seen.extend(threads_named("iou-wrk"));
    }

    /// Distinct io-wq workers seen over all samples.
    pub fn seen(&self) -> usize {
        self.seen.len()
    }
}
