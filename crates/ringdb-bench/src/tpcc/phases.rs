//! Where a transaction's cycles go, phase by phase, for `ringdb micro txn-cost`.
//!
//! The transactions' calls into the engine (`TpccTxn`'s reads, writes,
//! scans and prefetch, the commit in `execute.rs`) each hold a [`Timer`], which adds the
//! time-stamp ticks the call took to its [`Phase`] while a [`Meter`] is armed on the thread.
//! What no phase covers is the transaction's own code: decoding and encoding rows, computing
//! the order's total, the async state machines around the calls.
//!
//! The meter is per thread because the transactions of a database run on its thread: with one
//! transaction at a time (the micro runs them so) the ticks between a call's start and its end
//! are that call's, and in memory nothing waits for a device in between. A run of the mix
//! (many tasks interleaved) never arms it: a [`Timer`] is then one thread-local read.

use ringdb_lab::counters::rdtsc;
use std::cell::Cell;

/// A part of a transaction that the meter times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `begin`: the timestamp and the transaction's state.
    Begin,
    /// Faulting in the rows it will read before it locks (NewOrder, Payment).
    Prefetch,
    /// A read under a shared lock (or none, without isolation).
    Read,
    /// A read under an exclusive lock, before the row is written.
    ReadForUpdate,
    /// A write or delete: checked, locked, kept in the write set until the commit.
    Write,
    /// A scan under a range lock.
    Scan,
    /// The commit: the write set applied to the trees as one batch, the locks released.
    Commit,
}

/// The phases in the order reports list them.
pub const PHASES: [Phase; 7] = [
    Phase::Begin,
    Phase::Prefetch,
    Phase::Read,
    Phase::ReadForUpdate,
    Phase::Write,
    Phase::Scan,
    Phase::Commit,
];

impl Phase {
    /// Its position in [`PHASES`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Begin => "begin",
            Phase::Prefetch => "prefetch",
            Phase::Read => "read",
            Phase::ReadForUpdate => "read_for_update",
            Phase::Write => "write",
            Phase::Scan => "scan",
            Phase::Commit => "commit",
        }
    }
}

/// Ticks per phase of what ran while the meter was armed.
pub type PhaseTicks = [u64; PHASES.len()];

thread_local! {
    /// The armed meter's ticks so far; `None` while no meter is armed.
    static TICKS: Cell<Option<PhaseTicks>> = const { Cell::new(None) };
}

/// The armed meter of this thread: phases are timed until it is [`taken`](Meter::take) or
/// dropped. Only one at a time.
pub struct Meter {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Meter {
    /// Arms the meter on this thread, every phase at 0.
    pub fn arm() -> Meter {
        let before = TICKS.with(|t| t.replace(Some([0; PHASES.len()])));
        assert!(before.is_none(), "one meter armed at a time");
        Meter {
            _not_send: std::marker::PhantomData,
        }
    }

    /// The ticks per phase since it was armed (or last taken), and restarts them at 0.
    pub fn take(&self) -> PhaseTicks {
        let ticks = TICKS.with(|t| t.replace(Some([0; PHASES.len()])));
        ticks.expect("the meter is armed while it exists")
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        TICKS.with(|t| t.set(None));
    }
}

/// Adds `ticks` to `phase` when a meter is armed.
fn add(phase: Phase, ticks: u64) {
    TICKS.with(|t| {
        if let Some(mut all) = t.get() {
            all[phase.index()] += ticks;
            t.set(Some(all));
        }
    });
}

/// Whether a meter is armed on this thread.
fn armed() -> bool {
    TICKS.with(|t| t.get().is_some())
}

/// Times a phase from its start to its drop (an early return included) when a meter is
/// armed; otherwise it holds nothing and costs a thread-local read. A guard rather than a
/// wrapper future: wrapping would move every call's future into another one.
pub struct Timer {
    phase: Phase,
    start: Option<u64>,
}

impl Timer {
    /// Starts timing `phase`.
    pub fn start(phase: Phase) -> Timer {
        Timer {
            phase,
            start: armed().then(rdtsc),
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        if let Some(start) = self.start {
            add(self.phase, rdtsc().saturating_sub(start));
        }
    }
}

/// Runs `work` (synchronous), adding the ticks it took to `phase` when a meter is armed.
pub fn timed_now<T>(phase: Phase, work: impl FnOnce() -> T) -> T {
    let _timer = Timer::start(phase);
    work()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_armed_meter_counts_and_taking_restarts_it() {
        timed_now(Phase::Read, || std::hint::black_box(1));
        let meter = Meter::arm();
        assert_eq!(
            meter.take(),
            [0; PHASES.len()],
            "nothing before arming counts"
        );
        timed_now(Phase::Write, || {
            (0..1000u64).map(std::hint::black_box).sum::<u64>()
        });
        let ticks = meter.take();
        assert!(ticks[Phase::Write.index()] > 0);
        assert_eq!(ticks[Phase::Read.index()], 0);
        assert_eq!(meter.take()[Phase::Write.index()], 0, "taken ticks restart");
        drop(meter);
        assert!(!armed());
        let again = Meter::arm();
        assert_eq!(again.take(), [0; PHASES.len()]);
    }

    #[test]
    fn phases_are_listed_in_index_order() {
        for (i, phase) in PHASES.iter().enumerate() {
            assert_eq!(phase.index(), i, "{}", phase.name());
        }
    }
}
