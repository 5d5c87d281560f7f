//! Measurement primitives: the time-stamp counter, latency histograms and process CPU time.
//!
//! They belong to the lab: benchmarks and reports measure with them, the runtime never does
//! (no engine or executor path reads a clock or records a latency).

use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Reads the CPU's time-stamp counter (`rdtsc`); nanoseconds of a monotonic clock elsewhere.
#[inline]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64; it only reads the counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Ticks of [`rdtsc`] per second, calibrated once against the monotonic clock (~20 ms).
pub fn tsc_hz() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let t0 = Instant::now();
        let c0 = rdtsc();
        while t0.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let c1 = rdtsc();
        let dt = t0.elapsed().as_secs_f64();
        (c1.wrapping_sub(c0)) as f64 / dt
    })
}

/// Converts a TSC tick count to nanoseconds.
#[inline]
pub fn ticks_to_ns(ticks: u64) -> u64 {
    (ticks as f64 * 1e9 / tsc_hz()) as u64
}

/// Latency summary in microseconds, fio's percentiles.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest latency recorded.
    pub max: f64,
}

/// HDR histogram of latencies in nanoseconds (1 ns .. 100 s, 3 significant digits).
#[derive(Clone)]
pub struct LatencyHist {
    h: Histogram<u64>,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    /// An empty histogram.
    pub fn new() -> Self {
        LatencyHist {
            h: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds"),
        }
    }

    /// Records one latency in nanoseconds (0 counts as 1 ns; beyond 100 s saturates).
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    /// Adds every latency recorded in `other` (per-thread histograms into one).
    pub fn merge(&mut self, other: &LatencyHist) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.h.add(&other.h);
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// fio's percentiles in microseconds (all zero when nothing was recorded).
    pub fn summary(&self) -> LatencySummary {
        if self.h.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencySummary {
            avg: self.h.mean() / 1000.0,
            p50: us(self.h.value_at_quantile(0.50)),
            p95: us(self.h.value_at_quantile(0.95)),
            p99: us(self.h.value_at_quantile(0.99)),
            p999: us(self.h.value_at_quantile(0.999)),
            max: us(self.h.max()),
        }
    }
}

/// User and system CPU time of the whole process (all threads, including io_uring's SQPOLL
/// and io-wq threads, which belong to the process).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTime {
    /// Time spent in user mode.
    pub user: Duration,
    /// Time spent in the kernel.
    pub sys: Duration,
}

impl CpuTime {
    /// CPU time of the whole process so far.
    pub fn now() -> CpuTime {
        Self::rusage(libc::RUSAGE_SELF)
    }

    /// CPU time of the calling thread only.
    pub fn thread_now() -> CpuTime {
        Self::rusage(libc::RUSAGE_THREAD)
    }

    /// CPU time of every child process waited for so far (and their waited-for children).
    pub fn children_now() -> CpuTime {
        Self::rusage(libc::RUSAGE_CHILDREN)
    }

    fn rusage(who: libc::c_int) -> CpuTime {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: ru points to writable memory of the right size; getrusage fills it.
        let ret = unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
        if ret != 0 {
            return CpuTime::default();
        }
        // SAFETY: getrusage succeeded, so the struct is initialised (and was zeroed anyway).
        let ru = unsafe { ru.assume_init() };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        CpuTime {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
        }
    }

    /// The CPU time spent between `earlier` and `self` (saturating at zero).
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
        }
    }

    /// User plus system time.
    pub fn total(self) -> Duration {
        self.user + self.sys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_percentiles_are_ordered() {
        let mut h = LatencyHist::new();
        for i in 1..=10_000u64 {
            h.record_ns(i * 100);
        }
        let s = h.summary();
        assert!(s.p50 <= s.p95 && s.p95 <= s.p99 && s.p99 <= s.p999 && s.p999 <= s.max);
        assert!((s.p50 - 500.0).abs() < 5.0, "{s:?}");
    }

    #[test]
    fn tsc_is_calibrated_and_monotonic() {
        let hz = tsc_hz();
        assert!(hz > 1e6, "tsc_hz = {hz}");
        let a = rdtsc();
        let b = rdtsc();
        assert!(b >= a);
    }
}
