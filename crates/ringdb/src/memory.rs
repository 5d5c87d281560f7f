//! The engine's memory by part: what each structure holds now and the most it held.
//!
//! Why: with a log, the process used about four times its buffer pool (issue 16), and nothing
//! said where. Each structure that holds memory beyond a few words (the log's tail, a
//! checkpoint's copies, the key-lock table) keeps a [`Meter`] of the bytes it holds, counted
//! where it allocates and releases them, so [`MemoryStats`] is what the structures say of
//! themselves, not an estimate from outside. The buffer pool's frames are fixed at open.

use serde::Serialize;
use std::cell::Cell;

/// Bytes one part of the engine holds: now, and the most since the database was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PartBytes {
    /// Bytes held now.
    pub current_bytes: u64,
    /// The most bytes held at any moment so far.
    pub peak_bytes: u64,
}

impl PartBytes {
    /// A part of fixed size (allocated once at open).
    pub fn fixed(bytes: u64) -> PartBytes {
        PartBytes {
            current_bytes: bytes,
            peak_bytes: bytes,
        }
    }

    /// The two parts together (the peaks added: an upper bound of the sum's peak).
    pub fn plus(self, other: PartBytes) -> PartBytes {
        PartBytes {
            current_bytes: self.current_bytes + other.current_bytes,
            peak_bytes: self.peak_bytes + other.peak_bytes,
        }
    }
}

/// The engine's memory by part (one shard's), each from the structure that holds it.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct MemoryStats {
    /// The buffer pool's frames (`pool_pages` x page size; allocated at open).
    pub pool_frames: PartBytes,
    /// The log's tail: records appended and not yet handed to a write, plus the group being
    /// written (0 without a log).
    pub log_buffer: PartBytes,
    /// A checkpoint's copies: the dirty pages of its cut, the catalog, free-list and meta
    /// pages, and the double-write and in-place write buffers (0 without a log).
    pub checkpoint_staging: PartBytes,
    /// The per-key lock table of commits: the locked keys, their entries and waiters (0
    /// without a log).
    pub key_locks: PartBytes,
    /// Other tracked buffers: the log's table of batches in flight and its waiters.
    pub other: PartBytes,
}

impl MemoryStats {
    /// Every part together (peaks added: each part's peak may come at another moment).
    pub fn total(&self) -> PartBytes {
        self.pool_frames
            .plus(self.log_buffer)
            .plus(self.checkpoint_staging)
            .plus(self.key_locks)
            .plus(self.other)
    }

    /// The parts beyond the buffer pool together.
    pub fn beyond_pool(&self) -> PartBytes {
        self.log_buffer
            .plus(self.checkpoint_staging)
            .plus(self.key_locks)
            .plus(self.other)
    }
}

/// Counts the bytes one structure holds (single-threaded, like the structures).
#[derive(Debug, Default)]
pub struct Meter {
    current: Cell<u64>,
    peak: Cell<u64>,
}

impl Meter {
    /// What the meter counted.
    pub fn read(&self) -> PartBytes {
        PartBytes {
            current_bytes: self.current.get(),
            peak_bytes: self.peak.get(),
        }
    }

    /// Sets the bytes held now (for a structure that measures itself after each change).
    pub fn set(&self, bytes: u64) {
        self.current.set(bytes);
        self.peak.set(self.peak.get().max(bytes));
    }

    /// Counts `bytes` more held until the returned guard is dropped.
    pub fn hold(&self, bytes: u64) -> Held<'_> {
        self.set(self.current.get() + bytes);
        Held { meter: self, bytes }
    }
}

/// Bytes counted on a [`Meter`] while this lives.
#[derive(Debug)]
pub struct Held<'a> {
    meter: &'a Meter,
    bytes: u64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let now = self.meter.current.get();
        assert!(
            now >= self.bytes,
            "memory meter would go below zero: {now} - {}",
            self.bytes
        );
        self.meter.current.set(now - self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_counts_what_is_held_and_keeps_the_peak() {
        let m = Meter::default();
        let a = m.hold(100);
        {
            let _b = m.hold(50);
            assert_eq!(m.read().current_bytes, 150);
        }
        assert_eq!(
            m.read(),
            PartBytes {
                current_bytes: 100,
                peak_bytes: 150
            }
        );
        drop(a);
        assert_eq!(m.read().current_bytes, 0);
        m.set(20);
        assert_eq!(
            m.read(),
            PartBytes {
                current_bytes: 20,
                peak_bytes: 150
            }
        );
    }

    #[test]
    fn totals_add_the_parts() {
        let s = MemoryStats {
            pool_frames: PartBytes::fixed(1000),
            log_buffer: PartBytes {
                current_bytes: 1,
                peak_bytes: 10,
            },
            checkpoint_staging: PartBytes {
                current_bytes: 2,
                peak_bytes: 20,
            },
            key_locks: PartBytes {
                current_bytes: 3,
                peak_bytes: 30,
            },
            other: PartBytes {
                current_bytes: 4,
                peak_bytes: 40,
            },
        };
        assert_eq!(
            s.beyond_pool(),
            PartBytes {
                current_bytes: 10,
                peak_bytes: 100
            }
        );
        assert_eq!(
            s.total(),
            PartBytes {
                current_bytes: 1010,
                peak_bytes: 1100
            }
        );
    }
}
