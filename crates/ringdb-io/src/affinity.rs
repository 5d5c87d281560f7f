//! Thread-per-core placement: pin a ring's thread, and the io-wq workers it spawns, to one CPU.
//!
//! On a VM, a wake-up that crosses vCPUs can cost tens of microseconds (an IPI to a halted
//! vCPU); a ring whose io-wq workers share its core avoids that (docs/results/fio-compare.md).

use crate::error::{IoError, Result, Setting};

/// A `cpu_set_t` holding just `cpu`.
pub fn cpu_set(cpu: u32) -> Result<libc::cpu_set_t> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(IoError::OutOfRange {
            setting: Setting::Cpu,
            value: cpu as u64,
            min: 0,
            max: libc::CPU_SETSIZE as u64 - 1,
        });
    }
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu < CPU_SETSIZE was checked above, so the bit lies inside `set`.
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    Ok(set)
}

/// The CPU the calling thread runs on now (`None` where the kernel cannot say).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: u32) -> Result<()> {
    let set = cpu_set(cpu)?;
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    let ret = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if ret != 0 {
        let e = std::io::Error::last_os_error();
        return Err(IoError::CannotPin {
            cpu,
            online: online_cpus(),
            source: e,
        });
    }
    Ok(())
}

/// Makes the calling thread a batch thread (Linux `SCHED_BATCH`): its wake-ups no longer
/// preempt the thread that runs on the CPU it wakes on; it still gets its fair share of CPU
/// time (its nice value is kept). No privilege is needed.
pub fn set_current_thread_batch() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param (priority 0, the
    // only one SCHED_BATCH takes) that outlives the call.
    let ret = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if ret != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the calling thread runs under `SCHED_BATCH`.
pub fn current_thread_is_batch() -> bool {
    // SAFETY: pid 0 is the calling thread; the call reads nothing from user memory.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_BATCH }
}

/// The CPUs the calling thread may run on (its affinity mask), in increasing order; all
/// online CPUs when the mask cannot be read.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a writable cpu_set_t of the size passed.
    let ret =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if ret != 0 {
        return (0..online_cpus() as u32).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: every index is below CPU_SETSIZE, inside `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .map(|cpu| cpu as u32)
        .collect()
}

/// CPUs online now.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Parses a CPU list such as `0`, `0,2`, `0-3` or `0-1,4`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>> {
    let bad = || IoError::Unparsable {
        what: "CPU list",
        value: s.to_string(),
        expected: "a list such as 0, 0,2 or 0-3",
    };
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() {
        return Err(bad());
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("2-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn a_thread_made_batch_reports_batch_and_others_do_not() {
        let made = std::thread::spawn(|| {
            set_current_thread_batch().unwrap();
            current_thread_is_batch()
        });
        assert!(made.join().unwrap());
        assert!(!std::thread::spawn(current_thread_is_batch).join().unwrap());
    }

    #[test]
    fn a_thread_pinned_to_a_cpu_runs_there() {
        let on = std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            current_cpu()
        });
        assert_eq!(on.join().unwrap(), Some(0));
    }

    #[test]
    fn pinning_to_a_missing_cpu_is_an_error() {
        let e = std::thread::spawn(|| pin_current_thread(1000))
            .join()
            .unwrap();
        assert!(e.is_err());
        std::thread::spawn(|| pin_current_thread(0).unwrap())
            .join()
            .unwrap();
    }
}
