//! Runs fio with the options equivalent to an [`IoSpec`] on the same target, so that
//! `ringdb io --compare-fio` sets both tools side by side in one invocation.

use crate::error::{BenchSetting, FioError, Result};
use crate::rawio::{IoReport, IoSpec, RwMode};
use crate::units::fio_size;
use ringdb_io::{EngineKind, IoConfig, SetupMode};
use ringdb_lab::counters::{tsc_hz, CpuTime, LatencySummary};
use serde_json::Value;
use std::process::Command;

/// fio's version string, or None when fio is not installed.
pub fn fio_version() -> Option<String> {
    let out = Command::new("fio").arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// fio's command line for `spec`. Switches fio cannot express (setup mode, registered ring fd,
/// batching policy) are left to fio's defaults; the label says what fio ran.
pub fn fio_args(spec: &IoSpec) -> (Vec<String>, String) {
    let (engine, depth) = fio_engine(&spec.io);
    let mut label = engine.to_string();
    let mut a = common_args(spec, engine, depth);
    if spec.rw == RwMode::RandRw {
        a.push(format!("--rwmixread={}", spec.rwmixread));
    }
    if let Some(rt) = spec.runtime {
        a.push(format!("--runtime={}ms", rt.as_millis().max(1)));
        a.push("--time_based".into());
    }
    if !spec.cpus.is_empty() {
        let cpus = crate::rawio::cpu_list(&spec.cpus);
        a.push(format!("--cpus_allowed={cpus}"));
        a.push("--cpus_allowed_policy=split".into());
        label.push_str(&format!("@cpus{cpus}"));
    }
    if let Some(n) = spec.ios {
        a.push(format!("--number_ios={n}"));
    }
    if spec.io.engine.accepts_uring_switches() {
        push_uring_switches(&spec.io, &mut a, &mut label);
    }
    (a, label)
}

/// fio's engine for ours, and the iodepth it runs at (1 for the synchronous ones).
fn fio_engine(io: &IoConfig) -> (&'static str, u32) {
    match io.engine {
        EngineKind::Posix => ("psync", 1),
        EngineKind::Libaio => ("libaio", io.queue_depth),
        EngineKind::UringSync => ("io_uring", 1),
        // fio has no fallback: `auto` is compared with what it prefers.
        EngineKind::Uring | EngineKind::Auto => ("io_uring", io.queue_depth),
        EngineKind::UringPassthrough => ("io_uring_cmd", io.queue_depth),
    }
}

/// The arguments every comparison passes: the job, the target, the access pattern, and the
/// JSON report with the percentiles ringdb reports.
fn common_args(spec: &IoSpec, engine: &str, depth: u32) -> Vec<String> {
    vec![
        "--name=ringdb-compare".into(),
        format!("--filename={}", spec.path.display()),
        format!("--rw={}", spec.rw.name()),
        format!("--bs={}", spec.bs),
        format!("--iodepth={depth}"),
        format!("--numjobs={}", spec.numjobs),
        format!("--size={}", fio_size(spec.size)),
        format!("--direct={}", u8::from(spec.direct)),
        format!("--ioengine={engine}"),
        "--group_reporting".into(),
        "--output-format=json".into(),
        "--lat_percentiles=1".into(),
        "--percentile_list=50:95:99:99.9".into(),
        // ringdb draws offsets uniformly with replacement; so does fio without its random map.
        "--norandommap".into(),
        "--randrepeat=0".into(),
    ]
}

/// fio's names for the io_uring switches `io` turns on, added to its arguments and label.
fn push_uring_switches(io: &IoConfig, a: &mut Vec<String>, label: &mut String) {
    let mut switch = |on: bool, arg: &str, suffix: &str| {
        if on {
            a.push(arg.to_string());
            label.push_str(suffix);
        }
    };
    switch(io.fixed_buffers, "--fixedbufs", "+fixedbufs");
    switch(io.register_files, "--registerfiles", "+regfiles");
    switch(io.sqpoll.is_some(), "--sqthread_poll=1", "+sqpoll");
    if let Some(cpu) = io.sqpoll.and_then(|sq| sq.cpu) {
        switch(true, &format!("--sqthread_poll_cpu={cpu}"), "");
    }
    switch(io.iopoll, "--hipri", "+iopoll");
    switch(io.force_async, "--force_async=1", "+async");
    // fio 3.33 sets up its rings with DEFER_TASKRUN | SINGLE_ISSUER (falling back to
    // COOP_TASKRUN), whatever ringdb's --setup says.
    if io.setup != SetupMode::Defer {
        label.push_str("(defer)");
    }
}

/// Runs fio for `spec` and reads its JSON into an [`IoReport`].
pub fn run_fio(spec: &IoSpec) -> Result<IoReport> {
    // Refused before anything else: with fio installed or not, the two would not compare.
    if spec.buffer_span.is_some() {
        return Err(FioError::NoEqual {
            setting: BenchSetting::BufferSpan,
        }
        .into());
    }
    if fio_version().is_none() {
        return Err(FioError::NotInstalled.into());
    }
    let (args, label) = fio_args(spec);
    // fio reports the CPU of its job thread only; the whole process tree (io-wq workers and
    // SQPOLL threads included, as ringdb counts itself) comes from our children's rusage.
    let children0 = CpuTime::children_now();
    let out = Command::new("fio")
        .args(&args)
        .output()
        .map_err(|source| FioError::Start { source })?;
    let tree_cpu = CpuTime::children_now().since(children0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let message = err
            .lines()
            .chain(stdout.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string();
        return Err(FioError::Exited {
            status: out.status,
            message,
        }
        .into());
    }
    let mut report = parse_fio_json(&stdout, spec, label)?;
    if report.runtime_s > 0.0 && report.ios > 0 {
        let wall = report.runtime_s;
        report.cpu_pct = 100.0 * tree_cpu.total().as_secs_f64() / wall;
        report.cpu_user_pct = 100.0 * tree_cpu.user.as_secs_f64() / wall;
        report.cpu_sys_pct = 100.0 * tree_cpu.sys.as_secs_f64() / wall;
        report.cycles_per_io = tree_cpu.total().as_secs_f64() * tsc_hz() / report.ios as f64;
    }
    Ok(report)
}

/// Parses fio's `--output-format=json` output (one group-reported job).
pub fn parse_fio_json(text: &str, spec: &IoSpec, label: String) -> Result<IoReport> {
    let job = first_job(text)?;
    let dirs = [&job["read"], &job["write"]];
    let sum = |key: &str| dirs.iter().map(|d| number(&d[key])).sum::<f64>();
    let ios = sum("total_ios");
    let runtime_ms = dirs
        .iter()
        .map(|d| number(&d["runtime"]))
        .fold(0.0, f64::max);
    let usr = number(&job["usr_cpu"]);
    let sys = number(&job["sys_cpu"]);
    let job_runtime_s = number(&job["job_runtime"]).max(runtime_ms) / 1000.0;
    let cpu_s = (usr + sys) / 100.0 * job_runtime_s;
    let cycles = if ios > 0.0 {
        cpu_s * tsc_hz() / ios
    } else {
        0.0
    };
    Ok(IoReport {
        tool: "fio".into(),
        label,
        rw: spec.rw.name().into(),
        bs: spec.bs,
        iodepth: spec.io.effective_depth(),
        numjobs: spec.numjobs,
        buffer_span_bytes: None,
        target: spec.path.display().to_string(),
        direct: spec.direct,
        ios: ios as u64,
        bytes: sum("io_bytes") as u64,
        runtime_s: runtime_ms / 1000.0,
        iops: sum("iops"),
        mib_s: sum("bw") / 1024.0,
        lat_us: latency(&dirs, ios),
        // Until run_fio replaces them with the whole tree's figures, the job thread's.
        cpu_pct: usr + sys,
        cpu_user_pct: usr,
        cpu_sys_pct: sys,
        cpu_submitter_pct: usr + sys,
        cycles_per_io: cycles,
        cycles_per_io_submitter: cycles,
        enters_per_io: None,
        cqes_per_reap: None,
        iowq_workers: None,
        verified_blocks: None,
        checksum_cycles_per_read: None,
        device_interrupts: None,
    })
}

/// The first job of fio's JSON report (fio may print notes before the JSON object).
fn first_job(text: &str) -> Result<Value> {
    let start = text.find('{').ok_or(FioError::NoJson)?;
    let v: Value =
        serde_json::from_str(&text[start..]).map_err(|source| FioError::Json { source })?;
    v["jobs"]
        .get(0)
        .cloned()
        .ok_or_else(|| FioError::NoJob.into())
}

/// A JSON number, 0 when absent.
fn number(x: &Value) -> f64 {
    x.as_f64().unwrap_or(0.0)
}

/// Latency from submission to completion (`lat_ns`), in microseconds: the mean over both
/// directions (`dirs`, read and write, `ios` in all), the percentiles and the maximum of the
/// direction with most I/Os.
fn latency(dirs: &[&Value; 2], ios: f64) -> LatencySummary {
    let main = dirs
        .iter()
        .max_by(|a, b| number(&a["total_ios"]).total_cmp(&number(&b["total_ios"])))
        .expect("two directions");
    let lat = &main["lat_ns"];
    let pct = |k: &str| number(&lat["percentile"][k]) / 1000.0;
    let mean_ns: f64 = if ios > 0.0 {
        dirs.iter()
            .map(|d| number(&d["lat_ns"]["mean"]) * number(&d["total_ios"]))
            .sum::<f64>()
            / ios
    } else {
        0.0
    };
    LatencySummary {
        avg: mean_ns / 1000.0,
        p50: pct("50.000000"),
        p95: pct("95.000000"),
        p99: pct("99.000000"),
        p999: pct("99.900000"),
        max: number(&lat["max"]) / 1000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringdb_io::IoConfig;

    #[test]
    fn a_buffer_span_has_no_fio_equal_and_is_refused() {
        let spec = IoSpec {
            buffer_span: Some(32 << 20),
            ..IoSpec::new("/tmp/x", IoConfig::new(EngineKind::Uring))
        };
        let error = run_fio(&spec).expect_err("refused");
        assert!(
            matches!(
                error,
                crate::error::BenchError::Fio(FioError::NoEqual {
                    setting: BenchSetting::BufferSpan
                })
            ),
            "{error}"
        );
        assert!(error.to_string().contains("buffer span"), "{error}");
    }

    #[test]
    fn args_map_switches() {
        let mut io = IoConfig::new(EngineKind::Uring);
        io.queue_depth = 32;
        io.fixed_buffers = true;
        io.register_files = true;
        let spec = IoSpec::new("/tmp/x", io);
        let (a, label) = fio_args(&spec);
        assert!(a.contains(&"--ioengine=io_uring".to_string()));
        assert!(a.contains(&"--iodepth=32".to_string()));
        assert!(a.contains(&"--fixedbufs".to_string()));
        assert!(a.contains(&"--registerfiles".to_string()));
        assert_eq!(label, "io_uring+fixedbufs+regfiles(defer)");
    }

    #[test]
    fn parses_fio_json() {
        let text = r#"note: both iodepth >= 1 and synchronous I/O engine are selected
{"fio version":"fio-3.33","jobs":[{"jobname":"x","job_runtime":1000,"usr_cpu":10.0,"sys_cpu":30.0,
 "read":{"io_bytes":4096000,"bw":4000,"iops":1000.0,"runtime":1000,"total_ios":1000,
   "lat_ns":{"min":1,"max":90000,"mean":20000.0,"percentile":{"50.000000":19000,"95.000000":25000,"99.000000":30000,"99.900000":50000}}},
 "write":{"io_bytes":0,"bw":0,"iops":0.0,"runtime":0,"total_ios":0,"lat_ns":{"min":0,"max":0,"mean":0.0}}}]}"#;
        let spec = IoSpec::new("/tmp/x", IoConfig::new(EngineKind::Uring));
        let r = parse_fio_json(text, &spec, "io_uring".into()).unwrap();
        assert_eq!(r.ios, 1000);
        assert!((r.iops - 1000.0).abs() < 1e-9);
        assert!((r.lat_us.p50 - 19.0).abs() < 1e-9);
        assert!((r.lat_us.avg - 20.0).abs() < 1e-9);
        assert!((r.cpu_pct - 40.0).abs() < 1e-9);
        assert!(r.cycles_per_io > 0.0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let spec = IoSpec::new("/tmp/x", IoConfig::new(EngineKind::Uring));
        assert!(parse_fio_json("fio: no such file", &spec, String::new()).is_err());
        assert!(parse_fio_json("{\"jobs\":[]}", &spec, String::new()).is_err());
    }
}
