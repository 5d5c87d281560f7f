//! `ringdb pingpong` and `ringdb shuffle`: the network experiments of paper Sec. 4 over the
//! transports of ringdb-net. Client/server and nodes run as separate processes: the command
//! re-executes its own binary with a hidden role (`--serve`, `--node-id`).

//!
//! - `pingpong`: `ringdb pingpong`, round-trip latency between two processes;
//! - `shuffle`: `ringdb shuffle`, the distributed shuffle and join over N node processes;
//! - `sweep`: `ringdb shuffle --sweep`, cycles per byte against message size.
//!
//! This file holds what they share: argument parsing, the transport configurations, and the
//! path of this binary for the child roles.

mod pingpong;
mod shuffle;
mod sweep;

pub use pingpong::{run_pingpong, PingArgs};
pub use shuffle::{run_shuffle, ShuffleArgs};

use ringdb_net::{NetConfig, NetError};
use std::path::PathBuf;
use std::time::Duration;

type CmdResult = Result<(), Box<dyn std::error::Error>>;

/// Parses `8`, `64K`, `1MiB`, `4k`, `2m`, `1G` as bytes.
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = [
        ("gib", 1usize << 30),
        ("mib", 1 << 20),
        ("kib", 1 << 10),
        ("gb", 1 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1 << 30),
        ("m", 1 << 20),
        ("k", 1 << 10),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((lower.clone(), 1));
    let n: usize = num
        .parse()
        .map_err(|_| format!("{t:?} is not a size (e.g. 8, 64K, 1MiB)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{t:?} is too large"))
}

fn secs(s: &str) -> Result<Duration, String> {
    let t = s.trim().trim_end_matches('s');
    t.parse::<f64>()
        .ok()
        .filter(|v| *v > 0.0 && *v < 86400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?} is not a duration in seconds (e.g. 10 or 2.5s)"))
}

/// This binary, for re-executing it in a child role. `/proc/self/exe` still works when the
/// file was replaced by a rebuild in the meantime.
fn exe() -> Result<PathBuf, NetError> {
    let p = PathBuf::from("/proc/self/exe");
    if p.exists() {
        return Ok(p);
    }
    std::env::current_exe().map_err(|e| NetError::io("finding the ringdb binary", e))
}

/// The transport configuration `mode` names, giving up on a step after `timeout`.
fn mode_cfg(mode: &str, timeout: Duration) -> Result<NetConfig, NetError> {
    let mut c: NetConfig = mode.parse()?;
    c.io_timeout = timeout;
    Ok(c)
}

/// The non-empty entries of a comma-separated list, trimmed.
fn comma_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2m"), Ok(2 << 20));
        assert!(parse_size("lots").is_err());
        assert_eq!(secs("2.5s"), Ok(Duration::from_millis(2500)));
        assert!(secs("0").is_err());
    }
}
