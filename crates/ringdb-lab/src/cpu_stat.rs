//! Each CPU's time by kind (`/proc/stat`), and the interrupt handling the kernel charged to a
//! thread over a run.
//!
//! Why a benchmark needs it: unless the kernel is built with `CONFIG_IRQ_TIME_ACCOUNTING`, the
//! time a CPU spends handling an interrupt, and the softirq work that follows it (a block
//! device's completions, the io_uring completions they post), is charged to whatever task the
//! interrupt found running. A thread that shares its CPU with a device's completion interrupts
//! pays for them in its CPU time, and pays more the busier it is: out-of-memory YCSB pinned to
//! the CPU that takes a virtio disk's interrupts spent several times the share of its time in
//! softirq context that raw reads at the same depth on that CPU spent there, because those
//! sleep when the interrupts come (measured: docs/results/issue15-cpu-per-op.md, fifteenth
//! session). So the CPU time per operation of a run depends on something no
//! cost of the engine's explains, and a report can say how much.
//!
//! `/proc/stat` counts, per CPU, the time spent in hard and soft interrupt context (sampled at
//! each timer tick where the kernel has no precise interrupt accounting). The share charged to
//! one thread is estimated from its share of each CPU's busy time
//! ([`interrupt_secs_charged`]).

use std::fs;
use std::io::Read;
use std::sync::OnceLock;

/// Where the kernel lists each CPU's time by kind.
const PROC_STAT: &str = "/proc/stat";
/// The running kernel's configuration, where it is built in (gzip).
const PROC_CONFIG_GZ: &str = "/proc/config.gz";
/// The kernel option that keeps interrupt time out of the interrupted task's.
const IRQ_TIME_OPTION: &str = "CONFIG_IRQ_TIME_ACCOUNTING";
/// Most bytes of a kernel configuration read (they are ~250 KiB).
const MAX_CONFIG_BYTES: u64 = 8 << 20;

/// One CPU's time by kind, in clock ticks (`USER_HZ`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// User mode (`nice` included).
    pub user: u64,
    /// Kernel mode, outside interrupt context.
    pub system: u64,
    /// Idle (I/O wait included).
    pub idle: u64,
    /// Hard interrupt context.
    pub irq: u64,
    /// Soft interrupt context.
    pub softirq: u64,
}

impl CpuTicks {
    /// Ticks the CPU ran something (user, system, interrupts).
    pub fn busy(&self) -> u64 {
        self.user + self.system + self.irq + self.softirq
    }

    /// Ticks in hard or soft interrupt context.
    pub fn interrupts(&self) -> u64 {
        self.irq + self.softirq
    }

    fn saturating_sub(&self, earlier: &CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
        }
    }
}

/// Every CPU's time by kind, at one moment or over an interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// Index = CPU number; a CPU `/proc/stat` does not list (offline) counts zero.
    pub per_cpu: Vec<CpuTicks>,
}

impl CpuStat {
    /// Every CPU's time so far; `None` where `/proc/stat` cannot be read.
    pub fn now() -> Option<CpuStat> {
        fs::read_to_string(PROC_STAT).ok().map(|text| parse(&text))
    }

    /// The time between `earlier` and `self`, per CPU.
    pub fn since(&self, earlier: &CpuStat) -> CpuStat {
        let none = CpuTicks::default();
        let per_cpu = self
            .per_cpu
            .iter()
            .enumerate()
            .map(|(cpu, now)| now.saturating_sub(earlier.per_cpu.get(cpu).unwrap_or(&none)))
            .collect();
        CpuStat { per_cpu }
    }
}

/// The per-CPU lines (`cpuN user nice system idle iowait irq softirq ...`) of `/proc/stat`'s
/// text; malformed lines are skipped.
pub fn parse(text: &str) -> CpuStat {
    let mut per_cpu = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(cpu) = fields
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let values: Vec<u64> = fields.take(7).map_while(|f| f.parse().ok()).collect();
        let [user, nice, system, idle, iowait, irq, softirq] = values[..] else {
            continue;
        };
        if per_cpu.len() <= cpu {
            per_cpu.resize(cpu + 1, CpuTicks::default());
        }
        per_cpu[cpu] = CpuTicks {
            user: user + nice,
            system,
            idle: idle + iowait,
            irq,
            softirq,
        };
    }
    CpuStat { per_cpu }
}

/// Seconds of interrupt handling the kernel charged to a thread (or process) that used
/// `thread_secs` of CPU time over the interval `delta` covers, spread over the CPUs as
/// `ops_per_cpu` (operations finished on each, sampled) says. On each CPU the thread is
/// charged the interrupt time in proportion to its share of that CPU's busy time; interrupt
/// time on a CPU it never ran on is not its. `None` when nothing was sampled.
pub fn interrupt_secs_charged(
    delta: &CpuStat,
    ticks_per_sec: f64,
    thread_secs: f64,
    ops_per_cpu: &[u64],
) -> Option<f64> {
    let sampled: u64 = ops_per_cpu.iter().sum();
    if sampled == 0 || ticks_per_sec <= 0.0 {
        return None;
    }
    let mut charged = 0.0;
    for (cpu, &ops) in ops_per_cpu.iter().enumerate().filter(|(_, n)| **n > 0) {
        let Some(ticks) = delta.per_cpu.get(cpu) else {
            continue;
        };
        let busy_secs = ticks.busy() as f64 / ticks_per_sec;
        if busy_secs <= 0.0 {
            continue;
        }
        let thread_here = thread_secs * ops as f64 / sampled as f64;
        let share = (thread_here / busy_secs).min(1.0);
        charged += share * ticks.interrupts() as f64 / ticks_per_sec;
    }
    Some(charged)
}

/// Clock ticks per second of `/proc/stat` (`sysconf(_SC_CLK_TCK)`, 100 where unknown).
pub fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// Whether this kernel charges interrupt time to the task it interrupts: `Some(true)` when its
/// configuration (`/proc/config.gz`, else `/boot/config-<release>`) lacks
/// `CONFIG_IRQ_TIME_ACCOUNTING` (or the boot line turned it off with `tsc=noirqtime`),
/// `Some(false)` when it has it, `None` when no configuration can be read. Read once per
/// process (the running kernel does not change; its configuration is ~250 KiB of gzip).
pub fn interrupts_charged_to_tasks() -> Option<bool> {
    static CHARGED: OnceLock<Option<bool>> = OnceLock::new();
    *CHARGED.get_or_init(|| {
        let config = kernel_config()?;
        let noirqtime = fs::read_to_string("/proc/cmdline").is_ok_and(|c| c.contains("noirqtime"));
        Some(!irq_time_accounted(&config) || noirqtime)
    })
}

/// Whether a kernel configuration's text builds in precise interrupt time accounting.
pub fn irq_time_accounted(config: &str) -> bool {
    config
        .lines()
        .any(|line| line.trim() == format!("{IRQ_TIME_OPTION}=y"))
}

/// The running kernel's configuration text, where it can be read.
fn kernel_config() -> Option<String> {
    if let Ok(file) = fs::File::open(PROC_CONFIG_GZ) {
        let mut text = String::new();
        let mut decoder = flate2::read::GzDecoder::new(file).take(MAX_CONFIG_BYTES);
        if decoder.read_to_string(&mut text).is_ok() {
            return Some(text);
        }
    }
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 0 50 800 10 0 40 5 0 0\n\
                        cpu0 60 0 30 400 5 0 0 2 0 0\n\
                        cpu1 40 0 20 400 5 0 40 3 0 0\n\
                        cpu3 1 2 3 4 5 6 7 8 0 0\n\
                        cpu4 1 2\n\
                        intr 12345 1 2\n";

    #[test]
    fn per_cpu_lines_are_read_and_an_offline_cpu_counts_zero() {
        let stat = parse(STAT);
        assert_eq!(stat.per_cpu.len(), 4, "cpu4's short line is skipped");
        assert_eq!(stat.per_cpu[1].softirq, 40);
        assert_eq!(stat.per_cpu[1].busy(), 100);
        assert_eq!(stat.per_cpu[2], CpuTicks::default());
        assert_eq!(
            stat.per_cpu[3],
            CpuTicks {
                user: 3,
                system: 3,
                idle: 9,
                irq: 6,
                softirq: 7
            }
        );
    }

    #[test]
    fn a_thread_is_charged_interrupt_time_only_where_it_ran_by_its_share_of_the_busy_time() {
        let before = parse("cpu0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0\n");
        // CPU 0: 400 busy ticks, none in interrupts. CPU 1: 300 busy ticks, 60 of them in
        // softirq, 100 idle.
        let after = parse("cpu0 300 0 100 0 0 0 0\ncpu1 100 0 140 100 0 0 60\n");
        let delta = after.since(&before);
        // The thread ran 3 s, all on CPU 1 (more than the CPU's busy time: capped at all).
        let all = interrupt_secs_charged(&delta, 100.0, 3.0, &[0, 10]).unwrap();
        assert!((all - 0.6).abs() < 1e-9, "{all}");
        // 1.5 s on CPU 1 of its 3 busy seconds: half of the 0.6 s.
        let half = interrupt_secs_charged(&delta, 100.0, 3.0, &[5, 5]).unwrap();
        assert!((half - 0.3).abs() < 1e-9, "{half}");
        // Only on CPU 0: the other CPU's interrupts are not its.
        assert_eq!(
            interrupt_secs_charged(&delta, 100.0, 3.0, &[8, 0]),
            Some(0.0)
        );
        assert_eq!(interrupt_secs_charged(&delta, 100.0, 3.0, &[]), None);
    }

    #[test]
    fn the_kernel_option_is_read_from_its_configuration() {
        assert!(irq_time_accounted("# x\nCONFIG_IRQ_TIME_ACCOUNTING=y\n"));
        assert!(!irq_time_accounted(
            "# CONFIG_IRQ_TIME_ACCOUNTING is not set\n"
        ));
        assert!(!irq_time_accounted("CONFIG_HAVE_IRQ_TIME_ACCOUNTING=y\n"));
    }

    #[test]
    fn this_machines_counters_and_configuration_read_back() {
        let Some(stat) = CpuStat::now() else {
            eprintln!("SKIP: /proc/stat cannot be read here");
            return;
        };
        assert!(!stat.per_cpu.is_empty());
        assert!(stat.per_cpu.iter().any(|c| c.busy() + c.idle > 0));
        // Some(_) where the kernel's configuration is readable (this VM: /proc/config.gz).
        eprintln!(
            "interrupts charged to tasks: {:?}",
            interrupts_charged_to_tasks()
        );
    }
}
