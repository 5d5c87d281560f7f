//! Tools of the QD1 microbenchmarks (`iowq`, `sqpoll-wakeup`, `durable`): issue one request
//! and wait for it, and count the io-wq workers a measuring thread brought up.
//!
//! io-wq workers belong to the task that submitted (they are named `iou-wrk-<tid>`), so a
//! benchmark that wants to know whether a request was punted runs on a thread of its own and
//! has another thread look for that thread's workers while it runs: a worker can come and go
//! between two looks, so the look is repeated every [`SAMPLE_EVERY`].

use crate::error::{BenchError, Result};
use ringdb_io::{Engine, IoCompletion, IoError, IoRequest, OpKind};
use ringdb_lab::counters::{rdtsc, tsc_hz};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

/// Spinning this long without a completion falls back to a blocking wait.
const STALL: Duration = Duration::from_millis(50);
/// How often the sampling thread looks for io-wq workers.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// Issues `req` alone and waits for it. With `spin`, the request is only made visible (an
/// SQPOLL ring enters just to wake its poller) and the completion queue is polled; otherwise
/// one `io_uring_enter` submits and waits. Returns the TSC ticks from push to reap and whether
/// handing it over took a kernel entry.
pub(super) fn one_op(
    engine: &mut dyn Engine,
    req: &IoRequest,
    spin: bool,
    out: &mut Vec<IoCompletion>,
) -> Result<(u64, bool)> {
    out.clear();
    let t0 = rdtsc();
    // SAFETY: the caller's buffer (if any) outlives this call, and this call does not return
    // before the completion has been reaped (or the engine has failed and drains on drop).
    unsafe { engine.push(req)? };
    let entered = if spin {
        spin_for_completion(engine, t0, out)?
    } else {
        engine.submit(1)?;
        while engine.reap(out) == 0 {
            engine.submit(1)?;
        }
        true
    };
    let t1 = rdtsc();
    check_completion(req, out[0].result)?;
    Ok((t1.saturating_sub(t0), entered))
}

/// Makes the pushed request visible and polls the completion queue until it completes; after
/// [`STALL`] it waits in the kernel instead. Returns whether the hand-over took an enter.
fn spin_for_completion(
    engine: &mut dyn Engine,
    pushed_at: u64,
    out: &mut Vec<IoCompletion>,
) -> Result<bool> {
    let e0 = engine.stats().enters;
    engine.submit(0)?;
    let entered = engine.stats().enters > e0;
    let stall = (STALL.as_secs_f64() * tsc_hz()) as u64;
    while engine.reap(out) == 0 {
        if rdtsc().saturating_sub(pushed_at) > stall {
            engine.submit(1)?;
        }
        std::hint::spin_loop();
    }
    Ok(entered)
}

/// A failed or short completion of `req` as an error.
fn check_completion(req: &IoRequest, res: i32) -> Result<()> {
    let op = req.op.name();
    if res < 0 {
        return Err(IoError::from_completion(op, req.offset, res).into());
    }
    if req.op != OpKind::Nop && res as u32 != req.len {
        return Err(BenchError::ShortTransfer {
            op,
            offset: req.offset,
            transferred_bytes: res as u64,
            requested_bytes: req.len.into(),
        });
    }
    Ok(())
}

/// Thread ids of the io-wq workers that belong to the thread `owner` (named `iou-wrk-<owner>`).
pub(super) fn workers_of(owner: i32) -> HashSet<u32> {
    let name = format!("iou-wrk-{owner}");
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return HashSet::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        (comm.trim_end() == name).then_some(tid)
    })
    .collect()
}

/// The thread id of the calling thread.
pub(super) fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Runs `job` on a fresh thread named `ringdb-<name>` while this thread samples the io-wq
/// workers that thread owns (every [`SAMPLE_EVERY`]); returns its result and the workers seen.
pub(super) fn run_sampling_workers<T: Send>(
    name: &str,
    job: impl FnOnce() -> Result<T> + Send,
) -> (Result<T>, HashSet<u32>) {
    let tid = AtomicI32::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name(format!("ringdb-{name}"))
            .spawn_scoped(s, || {
                tid.store(gettid(), Ordering::Release);
                let r = job();
                done.store(true, Ordering::Release);
                r
            });
        let h = match h {
            Ok(h) => h,
            Err(e) => {
                return (
                    Err(BenchError::job_spawn(format!("ringdb-{name}"), e)),
                    HashSet::new(),
                )
            }
        };
        let mut seen = HashSet::new();
        while !done.load(Ordering::Acquire) {
            std::thread::sleep(SAMPLE_EVERY);
            let t = tid.load(Ordering::Acquire);
            if t != 0 {
                seen.extend(workers_of(t));
            }
        }
        let r = h.join().unwrap_or_else(|payload| {
            Err(BenchError::job_panicked(
                format!("ringdb-{name}"),
                payload.as_ref(),
            ))
        });
        (r, seen)
    })
}
