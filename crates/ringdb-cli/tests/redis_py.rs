//! redis-py, the real client, against `ringdb serve`: every implemented command in RESP2 and
//! RESP3, pipelines with and without MULTI/EXEC, pub/sub refused (`tests/redis_py/test_serve.py`).
//!
//! Needs python3 with the `redis` package (`pip install redis`; `.ci/run` installs it and sets
//! `RINGDB_REQUIRE_REDIS_PY=1`, which makes a missing client a failure). Elsewhere, without it,
//! the test prints SKIP and why.

mod common;

use std::process::Command;

fn redis_py_missing() -> Option<String> {
    let probe = Command::new("python3")
        .args(["-c", "import redis"])
        .output();
    match probe {
        Err(error) => Some(format!("python3 cannot run: {error}")),
        Ok(output) if !output.status.success() => Some(format!(
            "python3 has no redis package (pip install redis): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Ok(_) => None,
    }
}

#[test]
fn redis_py_drives_every_implemented_command_in_both_protocols() {
    if let Some(reason) = redis_py_missing() {
        assert!(
            std::env::var_os("RINGDB_REQUIRE_REDIS_PY").is_none(),
            "redis-py is required here: {reason}"
        );
        eprintln!("SKIP: {reason}");
        return;
    }
    let dir = common::tmp("redis-py");
    let _ = std::fs::remove_dir_all(&dir);
    let (server, address) = common::serve(&dir);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/redis_py/test_serve.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(address.port().to_string())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprint!("{stdout}");
    assert!(
        output.status.success(),
        "redis-py checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("RESP2: every check passed")
            && stdout.contains("RESP3: every check passed")
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
