//! `ringdb ycsb`'s cost model (issue 15 item 2): the run's cycles per operation beside what the
//! ladder's model predicts for the same run, so the CPU nobody has accounted for stays visible.
//!
//! The prediction is the ladder's engine formula for an asynchronous engine (see
//! [`crate::ladder`]), computed by the ladder's own `model::predict`:
//! `c_tx + r * (c_restart + c_checksum_read + c_read) + w * (c_checksum + c_write)`, with `r` and
//! `w` the run's measured page reads and writes per operation. In the ladder and the paper a
//! fault restarts the traversal from the root, so `c_restart = c_tx`; ringdb's tree resumes at
//! the page the wait read when its shape did not change meanwhile, skipping the descent, so the
//! restart term here is `c_tx - s * c_descent` with `s` the run's share of resumed restarts
//! (printed beside it). The costs are measured after the load and before the run, on the same
//! database and target ([`calibrate()`]):
//! - `c_tx`: cycles per operation of the run's own mix with every page resident. When the data
//!   fits the pool that is a short run over all of it; when it does not, the keys are drawn
//!   from a contiguous range whose pages fill about half the pool (warmed first, then checked
//!   to read ~0 pages per operation), so the tree, the records and the cache footprint are the
//!   run's ([`TxSource`] says which);
//! - `c_read` and `c_write`: cycles per page read and write of the run's engine and switches
//!   (engine, batching, registered buffers, queue depth), from raw I/O runs: reads over the
//!   database's own data, writes over a scratch file beside it (never over the data), their
//!   buffers spread over as much memory as the pool (the run's reads land in its frames, and
//!   reads spread over more memory can cost more cycles: docs/results/issue15-cpu-per-op.md);
//! - `c_checksum_read`: the verification of a page just read. The device, or in a VM the
//!   host, has just written that page, and what reading it costs depends on where that left
//!   it: it can move severalfold from one second to the next with the host's load, and that
//!   was most of what a run's cycles per operation moved by (measured:
//!   docs/results/issue15-cpu-per-op.md, thirteenth session). So
//!   the run times its own verifications (`BufferManager::time_verification`, two TSC reads
//!   per page read) and the prediction uses that figure; the calibration's (the CRC32C of
//!   each page of the `c_read` run as its completion is reaped, taken out of `c_read`) stands
//!   in where the run has none;
//! - `c_checksum`: one CRC32C seal of a page not in the CPU's caches (an eviction victim's);
//! - `c_descent`: a descent from the root to a resident leaf over keys of the `c_tx` range,
//!   timed by the tree's measurement hook (`BTree::trace_get`).
//!
//! One term is counted in the run rather than calibrated: the interrupt handling the kernel
//! charged to the thread (`PhaseReport::interrupt_cycles_per_op`, from `/proc/stat`; only
//! where the kernel charges interrupts to the task they interrupt). A thread on the CPU that
//! takes the device's completion interrupts pays for the completions' handling in its own CPU
//! time, in proportion to how busy it is when they come. The calibration's raw reads cannot
//! stand in for it: they sleep when the interrupts come. Pinned to that CPU, YCSB spent
//! several times the share of its time in softirq context that the raw reads did, and the
//! prediction without the term fell well short of the measurement; on the other CPU the term
//! is ~0 (measured: docs/results/issue15-cpu-per-op.md, fifteenth session).
//!
//! The calibration runs the mix on the database, so its updates change values and its inserts
//! add keys (far above the loaded ones, at [`CALIBRATION_INSERT_BASE`]) before the run.

mod calibrate;
pub mod placement;

pub(crate) use calibrate::descent_cycles_over;
pub use calibrate::{calibrate, data_file, scratch_file, ModelSpec, CALIBRATION_INSERT_BASE};

use crate::error::{BenchError, Result};
use crate::ladder::model::{predict as ladder_predict, read_checksum_cycles, Model};
use crate::ladder::Calibration;
use crate::ycsb::PhaseReport;
use serde::Serialize;
use std::path::PathBuf;

/// Where `c_tx` was measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TxSource {
    /// The data fits the pool: a run of the mix over all of it.
    InMemory,
    /// The data does not fit: the mix over a contiguous key range that fills about half the
    /// pool.
    HotRange {
        /// The range's first key.
        first_key: u64,
        /// Keys in the range.
        keys: u64,
        /// Pages the range spans (estimated from the data's pages per record).
        pages: u64,
        /// The pool, in pages.
        pool_pages: usize,
    },
}

impl TxSource {
    /// A few words for the table.
    pub fn describe(&self) -> String {
        match self {
            TxSource::InMemory => "in memory, all data".into(),
            TxSource::HotRange { keys, pages, .. } => {
                format!("in memory, hot range of {keys} keys / {pages} pages")
            }
        }
    }
}

/// The costs the prediction uses, measured on the run's database and target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelCosts {
    /// The TSC's rate, GHz: every cycle count here is in TSC cycles.
    pub tsc_ghz: f64,
    /// Cycles per operation of the run's mix with every page resident.
    pub c_tx: f64,
    /// Where `c_tx` was measured.
    pub c_tx_source: TxSource,
    /// Page reads per operation of the `c_tx` run (~0: the check that it was in memory).
    pub c_tx_reads_per_op: f64,
    /// A fault's restarted traversal from the root: one more in-memory operation, as in the
    /// ladder and the paper.
    pub c_restart: f64,
    /// Cycles of a descent from the root to a resident leaf: what a restart that resumes at
    /// the page its wait read skips of `c_restart`.
    pub c_descent: f64,
    /// Cycles to seal (checksum) a page not in the CPU's caches, as a write-back does.
    pub c_checksum: f64,
    /// Cycles to verify a page just read from the target (the `c_read` run's CRC32C per page).
    pub c_checksum_read: f64,
    /// Cycles per page read of the run's engine and switches.
    pub c_read: f64,
    /// Cycles per page write of the run's engine and switches; `None` where it could not be
    /// measured without overwriting the data (a block device).
    pub c_write: Option<f64>,
    /// Where the writes were measured (a scratch file beside the data).
    pub write_target: Option<PathBuf>,
    /// The CPU the device's completions interrupted during the raw reads, where one took
    /// nearly all of them.
    pub interrupt_cpu: Option<u32>,
    /// The raw runs' costs on each CPU they were pinned to: the database thread's first (the
    /// `c_read`, `c_checksum_read` and `c_write` above), then, for an unpinned run where one
    /// CPU takes the device's interrupts, a CPU of the other kind ([`placement`]).
    pub io_by_cpu: Vec<placement::CpuIoCosts>,
    /// The memory the raw runs' buffers spread over: the pool's, or less where the memory
    /// left to the process (a cgroup's limit) could not hold that beside the pool.
    pub raw_buffer_bytes: u64,
    /// Seconds the calibration took.
    pub secs: f64,
}

/// The model beside the run: its terms, the prediction, the measurement and their ratio.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelPrediction {
    /// The costs used. Where the run timed its verifications, `c_checksum_read` is the run's
    /// own figure (see `checksum_read_timed_in_run`), not the calibration's.
    pub costs: ModelCosts,
    /// Whether `c_checksum_read` was timed in the run (the pool timed each page read's
    /// verification) rather than in the calibration's raw reads.
    pub checksum_read_timed_in_run: bool,
    /// For an unpinned run whose I/O costs were measured on both kinds of CPU: the share of
    /// its operations that finished on the CPU the device interrupts (the costs above are
    /// the two CPUs' weighed by it).
    pub on_interrupt_cpu: Option<f64>,
    /// Page reads per operation the run made (`r`).
    pub reads_per_op: f64,
    /// Page writes per operation the run made (`w`).
    pub writes_per_op: f64,
    /// Share of the run's restarts that resumed at the page their wait read (the tree kept its
    /// shape meanwhile) instead of at the root.
    pub resumed_share: f64,
    /// A restart as the run paid it: `c_restart - resumed_share * c_descent`.
    pub restart_cycles: f64,
    /// Cycles per page read, all in: `restart_cycles + c_checksum_read + c_read`.
    pub cycles_per_read: f64,
    /// Cycles per page write, all in: `c_checksum + c_write` (0 when the run wrote nothing).
    pub cycles_per_write: f64,
    /// `r * cycles_per_read`.
    pub read_term_cycles: f64,
    /// `w * cycles_per_write`.
    pub write_term_cycles: f64,
    /// The interrupt handling the kernel charged to the thread, per operation, counted in the
    /// run; `None` where it could not be (see the module docs).
    pub interrupt_term_cycles: Option<f64>,
    /// `c_tx + read_term_cycles + write_term_cycles + interrupt_term_cycles`.
    pub predicted_cycles_per_op: f64,
    /// What the run measured (the whole process's CPU time per operation).
    pub measured_cycles_per_op: f64,
    /// `measured / predicted`: 1.0 when the model accounts for every cycle.
    pub measured_over_predicted: f64,
}

/// A restart's cycles when `resumed_share` of the restarts resume below the root.
pub fn restart_cycles(costs: &ModelCosts, resumed_share: f64) -> f64 {
    resumed_restart_cycles(costs.c_restart, costs.c_descent, resumed_share)
}

/// `c_restart` less the descent (`c_descent`) for the `resumed_share` of restarts that
/// resume below the root (both models price a restart so).
pub fn resumed_restart_cycles(c_restart: f64, c_descent: f64, resumed_share: f64) -> f64 {
    debug_assert!((0.0..=1.0).contains(&resumed_share));
    (c_restart - resumed_share * c_descent).max(0.0)
}

/// The prediction for a run that made `reads_per_op` page reads and `writes_per_op` page writes
/// per operation, `resumed_share` of its restarts resumed below the root, by the ladder's
/// asynchronous-engine formula. `write_path` names the target in the error when the run wrote
/// and the write cost is unknown.
pub fn predict(
    costs: &ModelCosts,
    reads_per_op: f64,
    writes_per_op: f64,
    resumed_share: f64,
    write_path: &std::path::Path,
) -> Result<(f64, f64, f64)> {
    let c_write = match costs.c_write {
        Some(c) => c,
        None if writes_per_op > 0.0 => {
            return Err(BenchError::NoScratchForWrites {
                path: write_path.to_path_buf(),
                writes_per_op,
            })
        }
        None => 0.0,
    };
    let c_restart = restart_cycles(costs, resumed_share);
    let ladder = Calibration {
        tsc_ghz: costs.tsc_ghz,
        c_tx: costs.c_tx,
        c_restart,
        c_checksum: costs.c_checksum,
        c_checksum_read: costs.c_checksum_read,
        c_read_batch: costs.c_read,
        c_write_batch: c_write,
        ..Calibration::default()
    };
    let engine = Model::Async {
        c_read: |c| c.c_read_batch,
        c_write: |c| c.c_write_batch,
    };
    let (_, predicted, _) = ladder_predict(engine, &ladder, reads_per_op, writes_per_op);
    let per_read = c_restart + read_checksum_cycles(&ladder) + costs.c_read;
    let per_write = costs.c_checksum + c_write;
    Ok((predicted, per_read, per_write))
}

/// The model beside `run`'s measurement.
pub fn compare(
    costs: &ModelCosts,
    run: &PhaseReport,
    write_path: &std::path::Path,
) -> Result<ModelPrediction> {
    let (r, w) = (run.reads_per_op, run.writes_per_op);
    // What verifying a page just read costs moves with the host's state from one second to
    // the next (see docs/results/issue15-cpu-per-op.md): the run's own figure
    // where it timed it, the calibration's snapshot otherwise.
    let mut costs = costs.clone();
    // An unpinned thread's I/O cost where it ran (`placement`).
    let blend = placement::blend(&costs, &run.ops_per_cpu);
    if let Some(b) = &blend {
        costs.c_read = b.c_read;
        costs.c_checksum_read = b.c_checksum_read;
        costs.c_write = b.c_write.or(costs.c_write);
    }
    let timed_in_run = match run.verification_cycles_per_read {
        Some(cycles) if r > 0.0 => {
            costs.c_checksum_read = cycles;
            true
        }
        _ => false,
    };
    let costs = &costs;
    let resumed_share = if run.restarts_per_op > 0.0 {
        (run.resumes_per_op / run.restarts_per_op).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (predicted, per_read, per_write) = predict(costs, r, w, resumed_share, write_path)?;
    let interrupts = run.interrupt_cycles_per_op;
    let predicted = predicted + interrupts.unwrap_or(0.0);
    Ok(ModelPrediction {
        costs: costs.clone(),
        checksum_read_timed_in_run: timed_in_run,
        on_interrupt_cpu: blend.map(|b| b.on_interrupt_cpu),
        reads_per_op: r,
        writes_per_op: w,
        resumed_share,
        restart_cycles: restart_cycles(costs, resumed_share),
        cycles_per_read: per_read,
        cycles_per_write: if w > 0.0 { per_write } else { 0.0 },
        read_term_cycles: r * per_read,
        write_term_cycles: w * per_write,
        interrupt_term_cycles: interrupts,
        predicted_cycles_per_op: predicted,
        measured_cycles_per_op: run.cycles_per_op,
        measured_over_predicted: run.cycles_per_op / predicted.max(1e-9),
    })
}

impl ModelPrediction {
    /// The table's line: `model: 9,870 cycles/op predicted (c_tx 4,100 + 0.85 reads x 6,800 +
    /// 0.00 writes x 5,000 + interrupts 120), measured 15,400: 1.56x`.
    pub fn line(&self) -> String {
        let interrupts = self
            .interrupt_term_cycles
            .map_or(String::new(), |i| format!(" + interrupts {}", thousands(i)));
        format!(
            "model: {} cycles/op predicted (c_tx {} + {:.2} reads x {} + {:.2} writes x {}{interrupts}), measured {}: {:.2}x",
            thousands(self.predicted_cycles_per_op),
            thousands(self.costs.c_tx),
            self.reads_per_op,
            thousands(self.cycles_per_read),
            self.writes_per_op,
            thousands(self.cycles_per_write),
            thousands(self.measured_cycles_per_op),
            self.measured_over_predicted
        )
    }

    /// The second line: where the costs came from.
    pub fn costs_line(&self) -> String {
        let c = &self.costs;
        format!(
            "       c_tx {} ({}, {:.3} reads/op), per read: c_restart {} (c_tx - {:.0}% resumed x c_descent {}) + c_checksum_read {}{} + c_read {}; per write: c_checksum {} + c_write {}",
            thousands(c.c_tx),
            c.c_tx_source.describe(),
            c.c_tx_reads_per_op,
            thousands(self.restart_cycles),
            100.0 * self.resumed_share,
            thousands(c.c_descent),
            thousands(c.c_checksum_read),
            if self.checksum_read_timed_in_run {
                " (timed in the run)"
            } else {
                ""
            },
            thousands(c.c_read),
            thousands(c.c_checksum),
            c.c_write.map_or("not measured".into(), thousands)
        ) + &self.blend_note()
            + self.interrupt_note()
    }

    /// What the interrupt term is, where the run counted it.
    fn interrupt_note(&self) -> &'static str {
        match self.interrupt_term_cycles {
            Some(_) => "; interrupts: hard and soft interrupt time on the CPUs the thread ran on, its share (counted in the run)",
            None => "",
        }
    }

    /// Where an unpinned run's I/O costs were weighed from, or nothing.
    fn blend_note(&self) -> String {
        let (Some(share), Some(cpu)) = (self.on_interrupt_cpu, self.costs.interrupt_cpu) else {
            return String::new();
        };
        let on = |irq: bool| {
            let of_kind = |c: &&placement::CpuIoCosts| (c.cpu == Some(cpu)) == irq;
            self.costs
                .io_by_cpu
                .iter()
                .find(of_kind)
                .map_or("?".into(), |c| thousands(c.c_read))
        };
        format!(
            "; I/O costs weighed by where the unpinned thread ran: {:.0}% of operations on CPU {cpu}, which the device interrupts (c_read {}), {:.0}% elsewhere (c_read {})",
            100.0 * share,
            on(true),
            100.0 * (1.0 - share),
            on(false)
        )
    }
}

/// `x` rounded, with a comma every three digits.
pub fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if x < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests;
