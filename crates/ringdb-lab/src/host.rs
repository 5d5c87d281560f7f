//! The machine a result was measured on, written into every report.
//!
//! Cycle counts and the ratio between a synchronous and an asynchronous engine depend on the host
//! far more than on a day's noise: the TPC-C ladder's `+async` step over `posix` changed
//! severalfold from one VM to the next, because a virtio doorbell (a VM exit per synchronous read)
//! cost much more there (measured: docs/results/issue13-tpcc.md, ninth session). A report that
//! names its host can be compared with another; one that does not cannot.

use serde::Serialize;

/// This machine as a report names it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Host {
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// The first `model name` of `/proc/cpuinfo` ("?" where there is none).
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// The time stamp counter's rate, GHz: the unit of every cycle count in the reports.
    pub tsc_ghz: f64,
    /// The cpuidle driver (`haltpoll` in many VMs, `intel_idle`, `acpi_idle`, or "none").
    pub cpuidle: String,
}

impl Host {
    /// Reads this machine's description (a few small files; the TSC rate is measured once
    /// per process).
    pub fn current() -> Host {
        Host {
            kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "?".into()),
            cpu_model: cpu_model().unwrap_or_else(|| "?".into()),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            tsc_ghz: crate::counters::tsc_hz() / 1e9,
            cpuidle: read_trimmed("/sys/devices/system/cpu/cpuidle/current_driver")
                .unwrap_or_else(|| "none".into()),
        }
    }

    /// One line: `Linux 6.18, 2 vCPUs (Intel(R) Xeon(R) Processor), TSC 2.60 GHz, cpuidle haltpoll`.
    pub fn describe(&self) -> String {
        format!(
            "Linux {}, {} vCPUs ({}), TSC {:.2} GHz, cpuidle {}",
            self.kernel, self.cpus, self.cpu_model, self.tsc_ghz, self.cpuidle
        )
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn cpu_model() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    cpuinfo
        .lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split(':').nth(1))
        .map(|model| model.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_names_its_kernel_cpus_and_tsc() {
        let host = Host::current();
        assert!(host.cpus >= 1);
        assert!(host.tsc_ghz > 0.1, "{host:?}");
        assert_eq!(
            host.kernel,
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap()
                .trim()
        );
        let line = host.describe();
        assert!(
            line.starts_with(&format!("Linux {}", host.kernel)),
            "{line}"
        );
        assert!(line.contains("GHz"), "{line}");
        let json = serde_json::to_value(&host).unwrap();
        for field in ["kernel", "cpu_model", "cpus", "tsc_ghz", "cpuidle"] {
            assert!(!json[field].is_null(), "{field} in {json}");
        }
    }
}
