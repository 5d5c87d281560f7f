//! Where the database's thread should run, given where the device's completions interrupt.
//!
//! Why: a device with one completion vector (virtio-blk's single queue, a disk whose queues
//! outnumber its vectors) interrupts one CPU for every completion, whichever CPU submitted
//! the request. A thread on another CPU then pays for each completion crossing over: a page
//! read, and a YCSB operation with it, costs more cycles there than on the CPU the disk
//! interrupts (measured: docs/results/issue15-cpu-per-op.md, fourteenth session). A device
//! with a queue per CPU (NVMe) completes on the submitting CPU's own vector, and where the
//! thread runs does not matter to it. The advice measures which case it is: two short raw
//! read runs pinned to two CPUs, the device's interrupts counted during each, and the cycles
//! per read of each.

use crate::error::Result;
use crate::ladder::calibrate::io_cycles;
use crate::ladder::LadderOpts;
use crate::rawio::RwMode;
use crate::ycsb_model::thousands;
use ringdb_io::{EngineKind, IoConfig, SetupMode};
use ringdb_lab::interrupts::{InterruptCounts, InterruptWatch};
use serde::Serialize;
use std::path::Path;

/// A CPU is recommended only where its reads are at least this much cheaper.
const MIN_GAIN: f64 = 1.05;

/// One pinned raw read run: where the device's interrupts went, and what a read cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PinnedRun {
    /// The CPU the run was pinned to.
    pub cpu: u32,
    /// Cycles per page read (the whole process).
    pub cycles_per_read: f64,
    /// The device's interrupts during the run, per CPU.
    pub interrupts: InterruptCounts,
}

/// What the two runs showed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// One CPU takes the completions: run the thread there (it was cheaper by `gain`).
    RunOn {
        /// The CPU.
        cpu: u32,
        /// Cycles per read elsewhere over cycles per read there.
        gain: f64,
    },
    /// One CPU takes them, but reads cost no less there.
    NoGain {
        /// The CPU.
        cpu: u32,
    },
    /// The interrupts followed the submitting CPU (a queue per CPU).
    FollowsSubmitter,
    /// Too few interrupts, or spread over CPUs with neither run's CPU taking them.
    Unclear,
}

/// The measurement and its verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Placement {
    /// The first run, then the second.
    pub runs: Vec<PinnedRun>,
    /// What they show.
    pub verdict: Verdict,
}

impl Placement {
    /// The reason line for the advice.
    pub fn reason(&self) -> String {
        let device = &self.runs[0].interrupts.device;
        let costs: Vec<String> = self
            .runs
            .iter()
            .map(|r| {
                format!(
                    "{} cycles per read on CPU {}",
                    thousands(r.cycles_per_read),
                    r.cpu
                )
            })
            .collect();
        let costs = costs.join(" against ");
        match &self.verdict {
            Verdict::RunOn { cpu, gain } => format!(
                "the completions of {device} interrupt CPU {cpu}; {costs} ({gain:.2}x): run the database's thread (one shard's, with several) on CPU {cpu} (`cpu = {cpu}` under [io])"
            ),
            Verdict::NoGain { cpu } => format!(
                "the completions of {device} interrupt CPU {cpu}, but reads cost no less there ({costs}): the thread may run anywhere"
            ),
            Verdict::FollowsSubmitter => format!(
                "the completions of {device} interrupt the CPU that submitted them (a queue per CPU; {costs}): the thread may run anywhere"
            ),
            Verdict::Unclear => format!(
                "where the completions of {device} interrupt could not be told ({costs})"
            ),
        }
    }
}

/// Measures where the completions of `opts.target`'s device interrupt and what a read costs
/// on two CPUs; `None` where there are no interrupts to count (no PCI disk with MSI vectors)
/// or fewer than two CPUs to compare.
pub fn measure(opts: &LadderOpts, size: u64, data: &Path) -> Result<Option<Placement>> {
    let cpus = ringdb_io::affinity::allowed_cpus();
    let (Some(&first), true) = (cpus.first(), cpus.len() >= 2) else {
        return Ok(None);
    };
    let Some(run_a) = pinned_run(opts, size, data, first)? else {
        return Ok(None);
    };
    let second = match run_a.interrupts.single_cpu() {
        Some(irq) if irq != first && cpus.contains(&irq) => irq,
        _ => cpus.iter().copied().find(|&c| c != first).unwrap_or(first),
    };
    let Some(run_b) = pinned_run(opts, size, data, second)? else {
        return Ok(None);
    };
    let verdict = verdict(&run_a, &run_b);
    Ok(Some(Placement {
        runs: vec![run_a, run_b],
        verdict,
    }))
}

/// One raw random-read run pinned to `cpu`, the device's interrupts counted meanwhile.
fn pinned_run(opts: &LadderOpts, size: u64, data: &Path, cpu: u32) -> Result<Option<PinnedRun>> {
    let Some(watch) = InterruptWatch::start(data) else {
        return Ok(None);
    };
    let pinned = LadderOpts {
        cpu: Some(cpu),
        ..opts.clone()
    };
    let io = IoConfig {
        queue_depth: opts.tasks.clamp(8, 256) as u32,
        setup: SetupMode::Defer,
        cpu: Some(cpu),
        ..IoConfig::new(EngineKind::Uring)
    };
    // The engine's reads land all over its pool: the buffers spread over as much memory.
    let pool_bytes = (opts.pool_pages * opts.page_size) as u64;
    let cycles_per_read = io_cycles(&pinned, size, data, RwMode::RandRead, io, Some(pool_bytes))?;
    Ok(watch.stop().map(|interrupts| PinnedRun {
        cpu,
        cycles_per_read,
        interrupts,
    }))
}

/// What runs `a` and `b` (pinned to different CPUs) show.
pub fn verdict(a: &PinnedRun, b: &PinnedRun) -> Verdict {
    match (a.interrupts.single_cpu(), b.interrupts.single_cpu()) {
        // Each run's interrupts went to its own CPU: they follow the submitter.
        (Some(x), Some(y)) if x == a.cpu && y == b.cpu && a.cpu != b.cpu => {
            Verdict::FollowsSubmitter
        }
        // Both went to one CPU, whichever CPU submitted: compare the runs there and elsewhere.
        (Some(x), Some(y)) if x == y => {
            let (there, elsewhere) = if a.cpu == x { (a, b) } else { (b, a) };
            if there.cpu != x {
                return Verdict::Unclear;
            }
            let gain = elsewhere.cycles_per_read / there.cycles_per_read.max(1.0);
            if gain >= MIN_GAIN {
                Verdict::RunOn { cpu: x, gain }
            } else {
                Verdict::NoGain { cpu: x }
            }
        }
        _ => Verdict::Unclear,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cpu: u32, cycles_per_read: f64, per_cpu: Vec<u64>) -> PinnedRun {
        PinnedRun {
            cpu,
            cycles_per_read,
            interrupts: InterruptCounts {
                device: "vda".into(),
                total: per_cpu.iter().sum(),
                per_cpu,
            },
        }
    }

    #[test]
    fn one_interrupt_cpu_that_is_cheaper_is_recommended() {
        let v = verdict(&run(0, 5500.0, vec![0, 900]), &run(1, 3000.0, vec![0, 950]));
        let Verdict::RunOn { cpu: 1, gain } = v else {
            panic!("{v:?}")
        };
        assert!((gain - 5500.0 / 3000.0).abs() < 1e-9);
        // The same with the runs the other way round.
        let v = verdict(&run(1, 3000.0, vec![0, 950]), &run(0, 5500.0, vec![0, 900]));
        assert!(matches!(v, Verdict::RunOn { cpu: 1, .. }), "{v:?}");
    }

    #[test]
    fn no_gain_is_no_recommendation() {
        let v = verdict(&run(0, 3000.0, vec![0, 900]), &run(1, 2990.0, vec![0, 950]));
        assert_eq!(v, Verdict::NoGain { cpu: 1 });
    }

    #[test]
    fn interrupts_that_follow_the_submitter_need_no_placement() {
        let v = verdict(&run(0, 3000.0, vec![900, 0]), &run(1, 3100.0, vec![0, 950]));
        assert_eq!(v, Verdict::FollowsSubmitter);
    }

    #[test]
    fn spread_or_too_few_interrupts_are_unclear() {
        let spread = verdict(
            &run(0, 3000.0, vec![500, 500]),
            &run(1, 3000.0, vec![450, 550]),
        );
        assert_eq!(spread, Verdict::Unclear);
        let few = verdict(&run(0, 5000.0, vec![0, 5]), &run(1, 3000.0, vec![0, 6]));
        assert_eq!(few, Verdict::Unclear);
        // One CPU takes them, but neither run was on it.
        let neither = verdict(
            &run(0, 5000.0, vec![0, 0, 900]),
            &run(1, 5000.0, vec![0, 0, 900]),
        );
        assert_eq!(neither, Verdict::Unclear);
    }

    #[test]
    fn the_reason_names_the_cpu_and_both_costs() {
        let p = Placement {
            runs: vec![run(0, 5500.0, vec![0, 900]), run(1, 3000.0, vec![0, 950])],
            verdict: Verdict::RunOn { cpu: 1, gain: 1.83 },
        };
        let text = p.reason();
        assert!(text.contains("interrupt CPU 1"), "{text}");
        assert!(
            text.contains("5,500 cycles per read on CPU 0 against 3,000 cycles per read on CPU 1"),
            "{text}"
        );
        assert!(text.contains("cpu = 1"), "{text}");
    }
}
