//! An unpinned run's I/O costs, where the device's completions interrupt one CPU.
//!
//! Why: a device with one completion vector (virtio-blk) interrupts one CPU whichever CPU
//! submitted, and a page read costs a thread on another CPU more than it costs on that one
//! (each completion crosses CPUs). The scheduler moves an unpinned thread between CPUs as it
//! likes, so raw runs pinned to the CPU the thread started on priced the run as if it had
//! stayed there: unpinned YCSB-B measured further from the prediction than the same run
//! pinned (measured: docs/results/issue15-cpu-per-op.md, fourteenth session).
//!
//! So, unpinned, the raw reads and writes are measured on the CPU the thread is on and, where
//! one CPU takes the device's interrupts, on one of the other kind, and the prediction weighs
//! the two by where the run's operations finished ([`crate::ycsb::PhaseReport::ops_per_cpu`]).
//! Pinned (`IoConfig::cpu`), the thread cannot move and one CPU's costs are the run's.

use super::ModelCosts;
use crate::error::Result;
use ringdb_lab::interrupts::{InterruptCounts, InterruptWatch};
use serde::Serialize;

/// The raw I/O costs measured with the runs pinned to one CPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuIoCosts {
    /// The CPU the raw runs were pinned to (`None`: unpinned, where the CPU was unknown).
    pub cpu: Option<u32>,
    /// Cycles per page read.
    pub c_read: f64,
    /// Cycles to verify a page just read.
    pub c_checksum_read: f64,
    /// Cycles per page write (`None` where writes could not be measured).
    pub c_write: Option<f64>,
}

/// The per-CPU costs weighed by where the run's operations finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Blend {
    /// Weighed cycles per page read.
    pub c_read: f64,
    /// Weighed cycles to verify a page just read.
    pub c_checksum_read: f64,
    /// Weighed cycles per page write, where every CPU's was measured.
    pub c_write: Option<f64>,
    /// Share of the run's sampled operations that finished on the interrupt CPU.
    pub on_interrupt_cpu: f64,
}

/// Measures `on(cpu)` on `first`, and, unless `pinned`, where one CPU took the device's
/// interrupts during that measurement (counted on `data`'s device), on one CPU of the other
/// kind among `allowed`. Returns the costs, first's first, and the interrupt CPU.
pub fn measure_on_both_kinds(
    data: &std::path::Path,
    first: Option<u32>,
    pinned: bool,
    allowed: &[u32],
    mut on: impl FnMut(Option<u32>) -> Result<CpuIoCosts>,
) -> Result<(Vec<CpuIoCosts>, Option<u32>)> {
    let watch = InterruptWatch::start(data);
    let mut by_cpu = vec![on(first)?];
    let irq_cpu = watch
        .and_then(|w| w.stop())
        .as_ref()
        .and_then(InterruptCounts::single_cpu);
    let other = match (irq_cpu, first) {
        _ if pinned => None,
        (Some(irq), Some(first)) if irq == first => allowed.iter().copied().find(|&c| c != irq),
        (Some(irq), Some(_)) => allowed.contains(&irq).then_some(irq),
        _ => None,
    };
    if let Some(cpu) = other {
        by_cpu.push(on(Some(cpu))?);
    }
    Ok((by_cpu, irq_cpu))
}

/// `costs`' per-CPU I/O costs weighed by `ops_per_cpu`; `None` where there is only one CPU's,
/// no operation was sampled, or a CPU the run used has no costs of its kind.
pub fn blend(costs: &ModelCosts, ops_per_cpu: &[u64]) -> Option<Blend> {
    if costs.io_by_cpu.len() < 2 {
        return None;
    }
    let is_irq = |cpu: Option<u32>| cpu.is_some() && cpu == costs.interrupt_cpu;
    let total: u64 = ops_per_cpu.iter().sum();
    if total == 0 {
        return None;
    }
    let mut blend = Blend {
        c_read: 0.0,
        c_checksum_read: 0.0,
        c_write: Some(0.0),
        on_interrupt_cpu: 0.0,
    };
    for (cpu, &ops) in ops_per_cpu.iter().enumerate().filter(|(_, n)| **n > 0) {
        let cpu = Some(cpu as u32);
        let same_kind = |c: &&CpuIoCosts| is_irq(c.cpu) == is_irq(cpu);
        let entry = costs
            .io_by_cpu
            .iter()
            .find(|c| c.cpu == cpu)
            .or_else(|| costs.io_by_cpu.iter().find(same_kind))?;
        let weight = ops as f64 / total as f64;
        blend.c_read += weight * entry.c_read;
        blend.c_checksum_read += weight * entry.c_checksum_read;
        blend.c_write = blend
            .c_write
            .zip(entry.c_write)
            .map(|(b, w)| b + weight * w);
        if is_irq(cpu) {
            blend.on_interrupt_cpu += weight;
        }
    }
    Some(blend)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(cpu: u32, c_read: f64, c_write: Option<f64>) -> CpuIoCosts {
        CpuIoCosts {
            cpu: Some(cpu),
            c_read,
            c_checksum_read: c_read / 10.0,
            c_write,
        }
    }

    fn costs(interrupt_cpu: Option<u32>, io_by_cpu: Vec<CpuIoCosts>) -> ModelCosts {
        let mut costs = super::super::tests::costs(Some(3000.0));
        costs.interrupt_cpu = interrupt_cpu;
        costs.io_by_cpu = io_by_cpu;
        costs
    }

    #[test]
    fn costs_are_weighed_by_where_the_operations_finished() {
        let c = costs(
            Some(1),
            vec![at(0, 6000.0, Some(5000.0)), at(1, 3000.0, Some(3000.0))],
        );
        let b = blend(&c, &[250, 750]).expect("two CPUs' costs");
        assert_eq!(b.c_read, 0.25 * 6000.0 + 0.75 * 3000.0);
        assert_eq!(b.c_checksum_read, 0.25 * 600.0 + 0.75 * 300.0);
        assert_eq!(b.c_write, Some(0.25 * 5000.0 + 0.75 * 3000.0));
        assert_eq!(b.on_interrupt_cpu, 0.75);
        // A CPU the raw runs never ran on takes the costs of its kind (not the interrupt CPU).
        let b = blend(&c, &[0, 500, 0, 500]).expect("two CPUs' costs");
        assert_eq!(b.c_read, 0.5 * 3000.0 + 0.5 * 6000.0);
        // A write cost missing on one CPU leaves the weighed one unknown.
        let c = costs(
            Some(1),
            vec![at(0, 6000.0, None), at(1, 3000.0, Some(3000.0))],
        );
        assert_eq!(blend(&c, &[1, 1]).unwrap().c_write, None);
    }

    #[test]
    fn one_cpus_costs_or_no_samples_are_not_weighed() {
        let one = costs(Some(1), vec![at(1, 3000.0, None)]);
        assert_eq!(blend(&one, &[10, 10]), None);
        let two = costs(Some(1), vec![at(0, 6000.0, None), at(1, 3000.0, None)]);
        assert_eq!(blend(&two, &[]), None);
        assert_eq!(blend(&two, &[0, 0]), None);
    }

    #[test]
    fn pinned_or_without_interrupts_to_count_only_the_first_cpu_is_measured() {
        let mut cpus = Vec::new();
        let mut on = |cpu: Option<u32>| {
            cpus.push(cpu);
            Ok(CpuIoCosts {
                cpu,
                c_read: 1.0,
                c_checksum_read: 0.0,
                c_write: None,
            })
        };
        // /proc is on no block device: no interrupts, no second CPU.
        let (by_cpu, irq) = measure_on_both_kinds(
            std::path::Path::new("/proc"),
            Some(0),
            false,
            &[0, 1],
            &mut on,
        )
        .unwrap();
        assert_eq!((by_cpu.len(), irq), (1, None));
        assert_eq!(cpus, vec![Some(0)]);
    }
}
