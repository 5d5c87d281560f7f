//! The completion interrupts of the device under a path, counted per CPU.
//!
//! Why a benchmark reports them: a request's completion interrupts whichever CPU its queue's
//! vector is routed to, and unless the kernel is built with `IRQ_TIME_ACCOUNTING` the time
//! spent handling it is charged to whatever task that CPU was running. So the CPU time per
//! operation a run measures depends on whether its thread shares a CPU with the device's
//! interrupts. Where every completion of a disk interrupts one CPU (each interrupt handling
//! the completions of many reads), the same YCSB run costs more cycles per operation pinned to
//! another CPU (each completion then crosses CPUs) than to that one (where it is charged the
//! handlers it is interrupted by) (measured: docs/results/issue15-cpu-per-op.md, fourteenth
//! session). A report that says which CPUs took the run's interrupts can be read; one
//! that does not cannot.
//!
//! The device's interrupts are its PCI function's MSI/MSI-X vectors (`msi_irqs/` in sysfs,
//! found by walking up from the disk's `device` link), counted from `/proc/interrupts`.
//! Devices without them (zram, loop, device-mapper, tmpfs) have none to report: `None`.

use ringdb_io::sysfs::BlockDevice;
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};

/// Where the kernel lists interrupt counts per CPU.
const PROC_INTERRUPTS: &str = "/proc/interrupts";
/// Share of the interrupts one CPU must take to be the device's interrupt CPU
/// ([`InterruptCounts::single_cpu`]).
pub const SINGLE_CPU_SHARE: f64 = 0.9;
/// Fewest interrupts counted for their shares to mean anything.
pub const MIN_INTERRUPTS: u64 = 20;
/// Levels above a disk's `device` link searched for the PCI function's `msi_irqs/` (virtio:
/// `virtio1` -> its PCI function; NVMe: `nvme0` -> its PCI function).
const MAX_LEVELS_UP: usize = 4;

/// The interrupt vectors of the device holding a path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceInterrupts {
    /// The disk's kernel name (`vda`, `nvme0n1`).
    pub device: String,
    /// Its interrupt numbers (the PCI function's MSI/MSI-X vectors), ascending.
    pub irqs: Vec<u32>,
}

/// Interrupts of a device over an interval, per CPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InterruptCounts {
    /// The disk's kernel name.
    pub device: String,
    /// Interrupts each CPU took (index = CPU number).
    pub per_cpu: Vec<u64>,
    /// Their sum.
    pub total: u64,
}

impl DeviceInterrupts {
    /// The interrupt vectors of the disk holding `path` (a file on it, or its node); `None`
    /// where there is no block device or it has no MSI vectors.
    pub fn for_path(path: &Path) -> Option<DeviceInterrupts> {
        let device = BlockDevice::for_path(path).ok()??;
        let disk_dir = if device.is_partition() {
            device.sys_path.parent()?.to_path_buf()
        } else {
            device.sys_path.clone()
        };
        let irqs = msi_irqs_above(&fs::canonicalize(disk_dir.join("device")).ok()?)?;
        let device = disk_dir.file_name()?.to_string_lossy().into_owned();
        Some(DeviceInterrupts { device, irqs })
    }

    /// Interrupts of the device taken so far by each CPU (`/proc/interrupts`); `None` where it
    /// cannot be read.
    pub fn counts(&self) -> Option<Vec<u64>> {
        let text = fs::read_to_string(PROC_INTERRUPTS).ok()?;
        Some(per_cpu_counts(&text, &self.irqs))
    }

    /// The counts between `before` (from [`DeviceInterrupts::counts`]) and now.
    pub fn since(&self, before: &[u64]) -> Option<InterruptCounts> {
        let now = self.counts()?;
        let per_cpu: Vec<u64> = now
            .iter()
            .enumerate()
            .map(|(cpu, n)| n.saturating_sub(before.get(cpu).copied().unwrap_or(0)))
            .collect();
        Some(InterruptCounts {
            device: self.device.clone(),
            total: per_cpu.iter().sum(),
            per_cpu,
        })
    }
}

/// A device's interrupt counts taken at a start, to count what a run added.
#[derive(Clone, Debug)]
pub struct InterruptWatch {
    device: DeviceInterrupts,
    before: Vec<u64>,
}

impl InterruptWatch {
    /// Starts counting the interrupts of the disk holding `path`; `None` where it has none to
    /// count (see [`DeviceInterrupts::for_path`]).
    pub fn start(path: &Path) -> Option<InterruptWatch> {
        let device = DeviceInterrupts::for_path(path)?;
        let before = device.counts()?;
        Some(InterruptWatch { device, before })
    }

    /// The interrupts since [`InterruptWatch::start`], per CPU.
    pub fn stop(&self) -> Option<InterruptCounts> {
        self.device.since(&self.before)
    }
}

impl InterruptCounts {
    /// The CPU that took nearly all of them ([`SINGLE_CPU_SHARE`] of at least
    /// [`MIN_INTERRUPTS`]): a device with one vector, or whose vectors all go to one CPU.
    pub fn single_cpu(&self) -> Option<u32> {
        let (cpu, most) = self.per_cpu.iter().enumerate().max_by_key(|(_, n)| **n)?;
        let one =
            self.total >= MIN_INTERRUPTS && *most as f64 >= SINGLE_CPU_SHARE * self.total as f64;
        one.then_some(cpu as u32)
    }

    /// `vda: 0.82 per op, CPU 1 100%` style: the share of each CPU that took any.
    pub fn describe(&self, ops: u64) -> String {
        let shares: Vec<String> = self
            .per_cpu
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(cpu, n)| format!("CPU {cpu} {:.0}%", 100.0 * *n as f64 / self.total as f64))
            .collect();
        format!(
            "{}: {:.2} per op, {}",
            self.device,
            self.total as f64 / ops.max(1) as f64,
            if shares.is_empty() {
                "none".into()
            } else {
                shares.join(", ")
            }
        )
    }
}

/// The numbers listed in the first `msi_irqs/` directory at `dir` or up to
/// [`MAX_LEVELS_UP`] levels above it.
fn msi_irqs_above(dir: &Path) -> Option<Vec<u32>> {
    let mut at: Option<PathBuf> = Some(dir.to_path_buf());
    for _ in 0..=MAX_LEVELS_UP {
        let here = at?;
        if let Ok(entries) = fs::read_dir(here.join("msi_irqs")) {
            let mut irqs: Vec<u32> = entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            irqs.sort_unstable();
            return (!irqs.is_empty()).then_some(irqs);
        }
        at = here.parent().map(Path::to_path_buf);
    }
    None
}

/// Per-CPU sums of the interrupts `irqs` in `/proc/interrupts`' `text`: its header names the
/// online CPUs, each line `N: count count ... chip name`; the result is indexed by CPU number. Lines that do not parse are skipped.
pub fn per_cpu_counts(text: &str, irqs: &[u32]) -> Vec<u64> {
    let mut lines = text.lines();
    // The columns are the online CPUs, named: `CPU0 CPU1 CPU3` (a CPU offline has none).
    let columns: Vec<usize> = lines.next().map_or(Vec::new(), |header| {
        header
            .split_whitespace()
            .filter_map(|name| name.strip_prefix("CPU")?.parse().ok())
            .collect()
    });
    let mut sums = vec![0u64; columns.iter().max().map_or(0, |last| last + 1)];
    for line in lines {
        let mut fields = line.split_whitespace();
        let Some(irq) = fields
            .next()
            .and_then(|f| f.strip_suffix(':')?.parse::<u32>().ok())
        else {
            continue;
        };
        if !irqs.contains(&irq) {
            continue;
        }
        for (&cpu, field) in columns.iter().zip(fields) {
            match field.parse::<u64>() {
                Ok(n) => sums[cpu] += n,
                Err(_) => break,
            }
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "           CPU0       CPU1
  0:         42          0   IO-APIC   2-edge      timer
 35:          0          1  PCI-MSIX-0000:00:02.0   0-edge      virtio1-config
 36:         10   61463521  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
NMI:          0          0   Non-maskable interrupts
ERR:          0
";

    #[test]
    fn the_devices_lines_are_summed_per_cpu() {
        assert_eq!(per_cpu_counts(SAMPLE, &[35, 36]), vec![10, 61_463_522]);
        assert_eq!(per_cpu_counts(SAMPLE, &[0]), vec![42, 0]);
        assert_eq!(per_cpu_counts(SAMPLE, &[99]), vec![0, 0]);
        assert_eq!(per_cpu_counts("", &[35]), Vec::<u64>::new());
        // CPU 1 offline: its column is missing, and CPU 2's count goes to CPU 2.
        let gap = "  CPU0 CPU2\n 36:  5  7  PCI-MSIX  1-edge  virtio1-req.0\n";
        assert_eq!(per_cpu_counts(gap, &[36]), vec![5, 0, 7]);
    }

    #[test]
    fn the_share_of_each_cpu_is_described() {
        let c = InterruptCounts {
            device: "vda".into(),
            per_cpu: vec![0, 300, 100],
            total: 400,
        };
        assert_eq!(c.describe(500), "vda: 0.80 per op, CPU 1 75%, CPU 2 25%");
    }

    #[test]
    fn one_cpu_is_the_interrupt_cpu_where_it_takes_nearly_all_of_enough() {
        let counts = |per_cpu: Vec<u64>| InterruptCounts {
            device: "vda".into(),
            total: per_cpu.iter().sum(),
            per_cpu,
        };
        assert_eq!(counts(vec![0, 950]).single_cpu(), Some(1));
        assert_eq!(counts(vec![95, 905]).single_cpu(), Some(1));
        assert_eq!(counts(vec![400, 600]).single_cpu(), None);
        assert_eq!(counts(vec![0, 10]).single_cpu(), None);
        assert_eq!(counts(vec![]).single_cpu(), None);
    }

    #[test]
    fn a_path_on_no_block_device_has_no_interrupts() {
        assert_eq!(DeviceInterrupts::for_path(Path::new("/proc/self")), None);
        assert_eq!(DeviceInterrupts::for_path(Path::new("/no/such/path")), None);
    }

    #[test]
    fn the_root_disk_counts_its_interrupts_where_it_has_msi_vectors() {
        // Where the root file system is on a PCI disk (virtio, NVMe), its vectors are found
        // and reading them back twice never goes backwards; elsewhere (a container's overlay,
        // a disk without MSI) there is nothing to count, and the test says so.
        let Some(dev) = DeviceInterrupts::for_path(Path::new("/")) else {
            eprintln!("the root file system has no PCI disk with MSI vectors here: skipped");
            return;
        };
        assert!(!dev.irqs.is_empty());
        let before = dev.counts().expect("/proc/interrupts");
        let since = dev.since(&before).expect("/proc/interrupts");
        assert_eq!(since.per_cpu.len(), before.len());
        assert_eq!(since.total, since.per_cpu.iter().sum::<u64>());
    }
}
