//! `ringdb probe` names what the `auto` engine picks here and why: io_uring where it works, and
//! under a seccomp filter that fails `io_uring_setup` (run from a child of this test binary, so
//! the filter is inherited by `ringdb`), libaio with the reason.

#[path = "../../ringdb-io/tests/support/seccomp.rs"]
mod seccomp;

use seccomp::{child_scenario, run_child, CHILD_DONE};
use std::process::Command;

/// `ringdb probe DIR` (table, then JSON): stdout of each.
fn probe() -> (String, serde_json::Value) {
    let dir = env!("CARGO_TARGET_TMPDIR");
    let run = |json: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ringdb"));
        command.args(["probe", dir]);
        if json {
            command.arg("--json");
        }
        let output = command.output().expect("run ringdb probe");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let table = run(false);
    let json = serde_json::from_str(&run(true)).expect("probe --json is JSON");
    (table, json)
}

#[test]
fn probe_names_the_auto_choice() {
    if child_scenario().is_some() {
        return;
    }
    let (table, json) = probe();
    assert!(table.contains("auto engine (over "), "{table}");
    let default = &json["auto"]["default"]["runs"];
    assert_eq!(default["requested"], "auto", "{json:#}");
    let engine = default["engine"].as_str().expect("an engine");
    assert!(
        table.contains(&format!("default           picks {engine}")),
        "{table}"
    );
    if engine == "uring" {
        assert!(table.contains("everything asked for runs here"), "{table}");
    }
}

#[test]
fn probe_under_seccomp_names_the_fallback_and_why() {
    match child_scenario().as_deref() {
        Some("probe-eperm") => {
            seccomp::block_syscalls(&[seccomp::IO_URING_SETUP], libc::EPERM);
            let (table, json) = probe();
            let default = &json["auto"]["default"]["runs"];
            assert_eq!(default["engine"], "libaio", "{json:#}");
            assert_eq!(default["fallbacks"][0]["refused"], "IoUring", "{json:#}");
            assert_eq!(default["fallbacks"][0]["reason"]["kind"], "uring-blocked");
            assert!(table.contains("picks libaio (from auto)"), "{table}");
            assert!(
                table.contains("because io_uring is unavailable here (io_uring_setup failed with"),
                "{table}"
            );
            println!("{CHILD_DONE}");
        }
        Some(_) => {}
        None => {
            run_child(
                "probe_under_seccomp_names_the_fallback_and_why",
                "probe-eperm",
                &[],
            );
        }
    }
}
