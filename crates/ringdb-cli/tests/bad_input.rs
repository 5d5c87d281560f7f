//! Bad input gives a one-line error naming the cause and the fix (plus, where the CLI has one,
//! a hint line in flag words), exit code 2, and no panic.

mod common;

use common::assert_refused;
use std::path::PathBuf;
use std::process::{Command, Output};

fn ringdb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ringdb"))
}

fn tmp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}.dat", std::process::id()))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn io(args: &[&str]) -> Output {
    ringdb().arg("io").args(args).output().expect("run ringdb")
}

#[test]
fn missing_directory_is_not_found() {
    let out = io(&[
        "--filename",
        "/nonexistent-ringdb-dir/x.dat",
        "--runtime",
        "1s",
    ]);
    assert_refused(&out, "no such file or device");
}

#[test]
fn missing_device_is_not_created() {
    let out = io(&[
        "--filename",
        "/dev/ringdb-no-such-device",
        "--runtime",
        "1s",
    ]);
    assert_refused(&out, "no such file or device");
    assert!(!std::path::Path::new("/dev/ringdb-no-such-device").exists());
}

#[test]
fn misaligned_block_size_under_o_direct() {
    let f = tmp("misaligned");
    let out = io(&[
        "--filename",
        f.to_str().unwrap(),
        "--size",
        "1M",
        "--bs",
        "1000",
        "--runtime",
        "1s",
    ]);
    let _ = std::fs::remove_file(&f);
    assert_refused(&out, "not a multiple of the logical block size");
}

#[test]
fn unknown_engine_and_misplaced_switch() {
    assert_refused(&io(&["--engine", "spdk"]), "unknown engine");
    assert_refused(
        &io(&["--engine", "posix", "--fixedbufs"]),
        "--fixedbufs is an io_uring switch",
    );
    assert_refused(&io(&["--batch", "fixed(0)"]), "fixed batch size");
    let sideways = io(&["--rw", "sideways"]);
    assert_refused(&sideways, "unknown read/write mode \"sideways\"");
    assert_refused(
        &sideways,
        "one of: read, write, randread, randwrite, randrw",
    );
    assert_refused(&sideways, "--rw takes one of the names listed");
    assert_refused(&io(&["--bs", "4q"]), "bad size");
}

#[test]
fn iopoll_without_poll_queues_is_refused_up_front() {
    let f = tmp("iopoll");
    let out = io(&[
        "--filename",
        f.to_str().unwrap(),
        "--size",
        "1M",
        "--iopoll",
        "--runtime",
        "1s",
    ]);
    let _ = std::fs::remove_file(&f);
    assert_refused(&out, "poll queues");
}

#[test]
fn o_direct_refused_by_the_filesystem() {
    // ramfs has no direct I/O at all (tmpfs accepts O_DIRECT since Linux 6.6).
    if !is_root() {
        eprintln!("SKIP o_direct_refused_by_the_filesystem: needs root to mount ramfs");
        return;
    }
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("ramfs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "ramfs", "ramfs"])
        .arg(&dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !mounted {
        eprintln!("SKIP o_direct_refused_by_the_filesystem: mount -t ramfs failed");
        return;
    }
    let out = io(&[
        "--filename",
        dir.join("x.dat").to_str().unwrap(),
        "--size",
        "1M",
        "--runtime",
        "1s",
    ]);
    let _ = Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir(&dir);
    assert_refused(&out, "O_DIRECT is not supported here");
}

#[test]
fn memlock_too_small_for_fixed_buffers() {
    // Root holds CAP_IPC_LOCK, which exempts registered buffers from RLIMIT_MEMLOCK: drop it
    // from the bounding set and lower the limit, as an unprivileged service would run.
    if !is_root() || Command::new("setpriv").arg("--help").output().is_err() {
        eprintln!("SKIP memlock_too_small_for_fixed_buffers: needs root and setpriv");
        return;
    }
    let f = tmp("memlock");
    let out = Command::new("setpriv")
        .args([
            "--bounding-set",
            "-ipc_lock",
            "--inh-caps",
            "-ipc_lock",
            "--",
        ])
        .args(["prlimit", "--memlock=65536:65536", "--"])
        .arg(env!("CARGO_BIN_EXE_ringdb"))
        .args([
            "io",
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "4M",
            "--bs",
            "64k",
        ])
        .args(["--iodepth", "16", "--fixedbufs", "--runtime", "1s"])
        .output()
        .expect("run setpriv");
    let _ = std::fs::remove_file(&f);
    assert_refused(&out, "locked-memory limit");
}

#[test]
fn nvme_flush_and_iopoll_with_a_log_need_an_nvme_namespace() {
    let d = tmp("nvme-flush-dir");
    std::fs::create_dir_all(&d).unwrap();
    let f = tmp("nvme-flush-file");
    std::fs::write(&f, b"").unwrap();
    let put = |db: &PathBuf, extra: &[&str]| {
        ringdb()
            .args([
                "put-many", "--count", "10", "--fresh", "--direct", "0", "--db",
            ])
            .arg(db)
            .args(extra)
            .output()
            .expect("run ringdb")
    };
    // nvme-flush on a directory or a file: the log is not on an NVMe namespace.
    assert_refused(&put(&d, &["--durability", "nvme-flush"]), "/dev/ngXnY");
    assert_refused(&put(&f, &["--durability", "nvme-flush"]), "/dev/ngXnY");
    // A log synced with fdatasync cannot live on an IOPOLL ring.
    assert_refused(
        &put(&d, &["--durability", "fdatasync", "--iopoll"]),
        "IOPOLL ring",
    );
    // Refused before anything is created.
    let missing = tmp("nvme-flush-missing").with_extension("");
    assert_refused(
        &put(&missing, &["--durability", "nvme-flush"]),
        "/dev/ngXnY",
    );
    assert!(!missing.exists());
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_file(&f);
}

#[test]
fn unknown_steal_policy_is_refused_before_anything_is_created() {
    let d = tmp("steal-policy").with_extension("");
    let out = ringdb()
        .args([
            "ycsb",
            "--durability",
            "none",
            "--steal",
            "sometimes",
            "--no-model",
            "--db",
        ])
        .arg(&d)
        .output()
        .expect("run ringdb");
    assert_refused(
        &out,
        "unknown steal policy \"sometimes\"; one of: auto, on, off",
    );
    assert!(!d.exists(), "a database was created for a refused policy");
}
