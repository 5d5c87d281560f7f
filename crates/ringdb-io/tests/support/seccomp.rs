//! Test support: make io_uring unavailable (or limit locked memory) in a child process, the way
//! a container does, and run a test's body in such a child.
//!
//! A seccomp filter is for the rest of the process's life and a memlock limit for its children,
//! so each scenario runs in a child: the test binary re-executed, filtered to the one test, with
//! [`CHILD_ENV`] naming the scenario. Shared by `ringdb-io/tests/auto_engine.rs` and
//! `ringdb/tests/fallback.rs` (included by path).

#![allow(dead_code)]

use std::process::{Command, Output};

/// The environment variable that tells a re-executed test binary which scenario it runs.
pub const CHILD_ENV: &str = "RINGDB_FALLBACK_CHILD";

/// What a child prints when its body ran to the end.
pub const CHILD_DONE: &str = "FALLBACK-CHILD-DONE";

/// The io_uring system calls.
pub const IO_URING_SETUP: i64 = libc::SYS_io_uring_setup;
/// `io_uring_enter`.
pub const IO_URING_ENTER: i64 = libc::SYS_io_uring_enter;
/// `io_uring_register`.
pub const IO_URING_REGISTER: i64 = libc::SYS_io_uring_register;

/// The scenario this process runs as a child, if it is one.
pub fn child_scenario() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}

/// Runs `test` (this binary's test of that exact name) in a child process as `scenario`, with
/// `env` set, and returns what it printed; panics (naming its output) unless it finished.
pub fn run_child(test: &str, scenario: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, scenario)
        .envs(env.iter().copied())
        .output()
        .expect("re-execute the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(CHILD_DONE),
        "child {scenario} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    output
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH_NATIVE: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_NATIVE: u32 = 0xC000_00B7;

/// `BPF_LD | BPF_W | BPF_ABS`.
const BPF_LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const BPF_JMP_JEQ_K: u16 = 0x15;
/// `BPF_RET | BPF_K`.
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// Offsets in `struct seccomp_data`: the syscall number, then the audit architecture.
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_if_equal(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: BPF_JMP_JEQ_K,
        jt,
        jf,
        k,
    }
}

/// The filter: kill a process that calls in through another architecture (its syscall
/// numbers mean other calls), fail each of `syscalls` with `errno`, allow the rest.
fn program(syscalls: &[i64], errno: i32) -> Vec<libc::sock_filter> {
    let mut program = vec![
        statement(BPF_LD_W_ABS, SECCOMP_DATA_ARCH),
        jump_if_equal(AUDIT_ARCH_NATIVE, 1, 0),
        statement(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        statement(BPF_LD_W_ABS, SECCOMP_DATA_NR),
    ];
    for &syscall in syscalls {
        program.push(jump_if_equal(syscall as u32, 0, 1));
        program.push(statement(BPF_RET_K, SECCOMP_RET_ERRNO | errno as u32));
    }
    program.push(statement(BPF_RET_K, SECCOMP_RET_ALLOW));
    program
}

/// Makes each of `syscalls` fail with `errno` in every thread of this process, for the rest of
/// its life (as Docker's default seccomp profile does to io_uring with `EPERM`).
pub fn block_syscalls(syscalls: &[i64], errno: i32) {
    let mut filter = program(syscalls, errno);
    let fprog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(
        r,
        0,
        "PR_SET_NO_NEW_PRIVS: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `fprog` points at `filter`, both alive for the call; the kernel copies the program.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &fprog as *const libc::sock_fprog,
        )
    };
    assert_eq!(r, 0, "seccomp: {}", std::io::Error::last_os_error());
}

/// Limits locked memory to `bytes` and gives up `CAP_IPC_LOCK` (which exempts root from the
/// limit, and from io_uring's accounting of registered buffers).
pub fn limit_locked_memory(bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit reads one `struct rlimit` from the live local.
    let r = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) };
    assert_eq!(r, 0, "setrlimit: {}", std::io::Error::last_os_error());
    drop_capability(CAP_IPC_LOCK);
}

#[repr(C)]
struct CapabilityHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapabilityData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// `CAP_IPC_LOCK` from linux/capability.h.
const CAP_IPC_LOCK: u32 = 14;

/// Removes `capability` from this thread's effective and permitted sets (a no-op without it).
fn drop_capability(capability: u32) {
    let mut header = CapabilityHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapabilityData::default(); 2];
    // SAFETY: capget writes one header and two data structs, which the locals provide.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    assert_eq!(r, 0, "capget: {}", std::io::Error::last_os_error());
    let (word, bit) = ((capability / 32) as usize, capability % 32);
    data[word].effective &= !(1 << bit);
    data[word].permitted &= !(1 << bit);
    // SAFETY: capset reads the same header and two data structs.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    assert_eq!(r, 0, "capset: {}", std::io::Error::last_os_error());
}
