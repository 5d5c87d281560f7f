//! `kernel.io_uring_disabled = 2` turns every io_uring engine into a clear refusal while the
//! other engines keep working. Root only; the sysctl is restored even if the test fails. This
//! file is its own test binary, and cargo runs test binaries one at a time, so no other test
//! sees io_uring disabled.

use std::process::Command;

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.0);
    }
}

#[test]
fn disabled_io_uring_is_refused_clearly_and_restored() {
    let Ok(original) = std::fs::read_to_string(SYSCTL) else {
        eprintln!("SKIP: {SYSCTL} does not exist on this kernel");
        return;
    };
    if std::fs::write(SYSCTL, original.trim()).is_err() {
        eprintln!("SKIP: cannot write {SYSCTL} (needs root)");
        return;
    }
    let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("disabled-{}.dat", std::process::id()));
    let run = |engine: &str| {
        Command::new(env!("CARGO_BIN_EXE_ringdb"))
            .args(["io", "--engine", engine, "--filename"])
            .arg(&file)
            .args(["--size", "1M", "--ios", "16", "--iodepth", "1"])
            .output()
            .expect("run ringdb")
    };
    let uring_out;
    let posix_out;
    {
        let _restore = Restore(original.trim().to_string());
        std::fs::write(SYSCTL, "2").expect("disable io_uring");
        uring_out = run("uring");
        posix_out = run("posix");
    }
    let _ = std::fs::remove_file(&file);
    assert_eq!(
        std::fs::read_to_string(SYSCTL).unwrap().trim(),
        original.trim(),
        "sysctl restored"
    );

    let err = String::from_utf8_lossy(&uring_out.stderr);
    assert_eq!(uring_out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("io_uring is disabled (kernel.io_uring_disabled = 2)"),
        "{err}"
    );
    assert!(
        err.contains("--engine posix"),
        "the error names the way out: {err}"
    );
    assert!(
        posix_out.status.success(),
        "posix still works: {}",
        String::from_utf8_lossy(&posix_out.stderr)
    );
}
