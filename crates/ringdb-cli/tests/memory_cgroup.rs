//! Bounded memory, checked by the kernel: `ringdb ycsb` runs inside a fresh memory cgroup with
//! a hard limit and swap off, and must finish without being OOM-killed and with its anonymous
//! memory (sampled from the cgroup) under the limit; the cgroup's high-water mark, which also
//! counts reclaimable page cache of the files written, is printed beside it.
//!
//! Why a cgroup and not the engine's own counters: the engine can only count what it knows it
//! allocated (the `memory` section of the report). The cgroup charges everything the process
//! costs the machine: heap, stacks, the kernel's io_uring memory, fragmentation, and the page
//! cache of the files it writes. A limit there is the promise a user deploying the engine in a
//! container relies on.
//!
//! Both cgroup versions are supported: v1 (`memory.limit_in_bytes`, `memory.memsw.*`,
//! `memory.max_usage_in_bytes`, `oom_kill` in `memory.oom_control`) and v2 (`memory.max`,
//! `memory.swap.max`, `memory.peak`, `oom_kill` in `memory.events`). The child joins the
//! cgroup before it execs `ringdb` (a `sh` that writes its own pid to `cgroup.procs` and then
//! execs), so nothing it allocates escapes the charge. Where no memory cgroup can be made here
//! (not root, a read-only cgroup file system, no memory controller) each case prints
//! `SKIPPED: <reason>` and returns.
//!
//! The database lives under cargo's target temp dir (`RINGDB_TEST_TMP` overrides it), which
//! must be a real file system: on tmpfs the data files themselves would be charged as memory
//! that cannot be reclaimed.

mod common;

use common::{ringdb_bin, tmp};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The cgroup's hard memory limit in MiB (swap off). The promise under test: a 64 MiB pool
/// plus the engine's bounded extras (log buffer, checkpoint staging, io_uring, the binary)
/// fits in 96 MiB whatever the data size. `RINGDB_MEMORY_LIMIT_MIB` overrides it (to see
/// where the mark lies when 96 MiB is not enough).
const LIMIT_MIB: u64 = 96;
/// The buffer pool of both cases: two thirds of the limit.
const POOL: &str = "64M";
/// Records of the case with a log that is never synced (`--durability none`): about 120 MB of
/// tree (8-byte keys, 128-byte values), about twice the pool, so the run evicts and reads
/// pages all the time, and the log and checkpoints run as in durable mode.
const RECORDS_DURABILITY_NONE: u64 = 500_000;
/// Records of the case with a synced log (`--durability fdatasync`): fewer, because every
/// load batch waits for its sync; still more than the pool holds.
const RECORDS_DURABILITY_FDATASYNC: u64 = 300_000;
/// Length of each timed run.
const RUNTIME: &str = "5s";
/// How long one case may take before the child is killed and the case fails (a process
/// thrashing at its limit must fail the test, not hang it).
const CASE_TIME_LIMIT: Duration = Duration::from_secs(90);
/// How often the wait for the child looks at it.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Bytes in a MiB.
const MIB: u64 = 1 << 20;

/// One case at a time: both share the machine's two cores, and the high-water marks are
/// clearer without a neighbour's load (each case has a cgroup of its own either way).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Which cgroup interface holds the memory controller here.
#[derive(Clone, Copy, Debug, PartialEq)]
enum CgroupVersion {
    /// A `cgroup` mount with the `memory` controller (v1, or v1 in a hybrid setup).
    V1,
    /// A `cgroup2` mount whose `cgroup.controllers` lists `memory`.
    V2,
}

/// The files through which a cgroup version sets and reports memory.
struct MemoryFiles {
    limit: &'static str,
    /// Memory plus swap (v1) or swap alone (v2); absent without swap accounting.
    swap_limit: &'static str,
    high_water: &'static str,
    /// The file with an `oom_kill N` line.
    oom_events: &'static str,
}

impl CgroupVersion {
    fn files(self) -> MemoryFiles {
        match self {
            CgroupVersion::V1 => MemoryFiles {
                limit: "memory.limit_in_bytes",
                swap_limit: "memory.memsw.limit_in_bytes",
                high_water: "memory.max_usage_in_bytes",
                oom_events: "memory.oom_control",
            },
            CgroupVersion::V2 => MemoryFiles {
                limit: "memory.max",
                swap_limit: "memory.swap.max",
                high_water: "memory.peak",
                oom_events: "memory.events",
            },
        }
    }
}

/// A memory cgroup of this test's own, removed when dropped (also when the case fails).
struct MemoryCgroup {
    dir: PathBuf,
    version: CgroupVersion,
    /// The limit as the kernel holds it (rounded to pages).
    limit_bytes: u64,
}

/// One line of `/proc/self/mounts`: where a file system is mounted, its type and options.
struct Mount {
    point: PathBuf,
    kind: String,
    options: String,
}

fn mounts() -> Vec<Mount> {
    let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() >= 4).then(|| Mount {
                point: PathBuf::from(fields[1].replace("\\040", " ")),
                kind: fields[2].to_string(),
                options: fields[3].to_string(),
            })
        })
        .collect()
}

/// The mount that holds the memory controller, and its version.
fn memory_hierarchy() -> Result<(PathBuf, CgroupVersion), String> {
    let all = mounts();
    let v1 = all
        .iter()
        .find(|m| m.kind == "cgroup" && m.options.split(',').any(|option| option == "memory"));
    if let Some(mount) = v1 {
        return Ok((mount.point.clone(), CgroupVersion::V1));
    }
    let v2 = all.iter().find(|m| {
        m.kind == "cgroup2"
            && std::fs::read_to_string(m.point.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|name| name == "memory"))
    });
    match v2 {
        Some(mount) => Ok((mount.point.clone(), CgroupVersion::V2)),
        None => Err("no cgroup mount with the memory controller".to_string()),
    }
}

/// This process's own cgroup path in the hierarchy of `version` (from `/proc/self/cgroup`).
fn own_cgroup_path(version: CgroupVersion) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = match version {
            CgroupVersion::V1 => controllers.split(',').any(|c| c == "memory"),
            CgroupVersion::V2 => controllers.is_empty(),
        };
        matches.then(|| path.trim_start_matches('/').to_string())
    })
}

/// Where a new cgroup may go: under this process's own cgroup first (a container's limits
/// then still apply), else at the hierarchy's root.
fn parent_candidates(root: &Path, version: CgroupVersion) -> Vec<PathBuf> {
    let mut parents = Vec::new();
    if let Some(own) = own_cgroup_path(version).filter(|p| !p.is_empty()) {
        parents.push(root.join(own));
    }
    parents.push(root.to_path_buf());
    parents
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {text:?} to {}: {e}", path.display()))
}

fn read_number(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.trim()
        .parse()
        .map_err(|e| format!("{}: {text:?}: {e}", path.display()))
}

/// The `key N` line of a flat keyed file (`memory.events`, `memory.oom_control`).
fn keyed_number(path: &Path, key: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix(key)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .ok_or_else(|| format!("{} has no {key:?} line: {text:?}", path.display()))
}

/// Whether the machine has any swap device on (`/proc/swaps` lists more than its header).
fn swap_devices_on() -> bool {
    std::fs::read_to_string("/proc/swaps").is_ok_and(|text| text.lines().count() > 1)
}

impl MemoryCgroup {
    /// Makes a cgroup named `name` with a hard limit of `limit_bytes` and no swap, or says why
    /// none can be made here.
    fn create(name: &str, limit_bytes: u64) -> Result<MemoryCgroup, String> {
        let (root, version) = memory_hierarchy()?;
        let mut refusals = Vec::new();
        for parent in parent_candidates(&root, version) {
            match MemoryCgroup::create_under(&parent, name, version, limit_bytes) {
                Ok(cgroup) => return Ok(cgroup),
                Err(why) => refusals.push(why),
            }
        }
        Err(refusals.join("; "))
    }

    fn create_under(
        parent: &Path,
        name: &str,
        version: CgroupVersion,
        limit_bytes: u64,
    ) -> Result<MemoryCgroup, String> {
        if version == CgroupVersion::V2 {
            enable_memory_for_children(parent)?;
        }
        let dir = parent.join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        // From here on the guard removes the directory, whatever fails next.
        let mut cgroup = MemoryCgroup {
            dir,
            version,
            limit_bytes,
        };
        let high_water = cgroup.file(version.files().high_water);
        if !high_water.exists() {
            return Err(format!(
                "{} is missing (a kernel without a high-water mark, before 5.19 on v2)",
                high_water.display()
            ));
        }
        cgroup.set_limits(limit_bytes)?;
        cgroup.limit_bytes = read_number(&cgroup.file(version.files().limit))?;
        assert!(
            cgroup.limit_bytes <= limit_bytes && cgroup.limit_bytes + MIB > limit_bytes,
            "the kernel holds a limit of {} bytes for {limit_bytes} asked",
            cgroup.limit_bytes
        );
        Ok(cgroup)
    }

    /// Writes the memory limit and turns swap off for the cgroup (v1: memory plus swap equal
    /// to the memory limit; v2: a swap limit of 0). Without swap accounting, swap is off only
    /// if the machine has none.
    fn set_limits(&self, limit_bytes: u64) -> Result<(), String> {
        let files = self.version.files();
        write_file(&self.file(files.limit), &limit_bytes.to_string())?;
        let swap_limit = self.file(files.swap_limit);
        let swap_value = match self.version {
            CgroupVersion::V1 => limit_bytes,
            CgroupVersion::V2 => 0,
        };
        if swap_limit.exists() {
            write_file(&swap_limit, &swap_value.to_string())
        } else if swap_devices_on() {
            Err(format!(
                "swap is on and {} is missing (no swap accounting), so swap cannot be turned off for the cgroup",
                swap_limit.display()
            ))
        } else {
            Ok(())
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The most memory the cgroup was ever charged, in bytes.
    fn high_water_bytes(&self) -> Result<u64, String> {
        read_number(&self.file(self.version.files().high_water))
    }

    /// How many processes of the cgroup the kernel's OOM killer killed.
    fn oom_kills(&self) -> Result<u64, String> {
        keyed_number(&self.file(self.version.files().oom_events), "oom_kill")
    }

    /// What the cgroup is still charged for once the process has gone: page cache, and how
    /// much of it is dirty or under writeback, in MiB.
    fn leftover_charge_line(&self) -> String {
        let keys: &[&str] = match self.version {
            CgroupVersion::V1 => &["total_cache", "total_dirty", "total_writeback"],
            CgroupVersion::V2 => &["file", "file_dirty", "file_writeback"],
        };
        let stat = self.file("memory.stat");
        keys.iter()
            .map(|key| match keyed_number(&stat, key) {
                Ok(bytes) => format!("{key} {:.1}", bytes as f64 / MIB as f64),
                Err(_) => format!("{key} ?"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Lets children of `parent` (v2) have the memory controller; fine if it is on already.
fn enable_memory_for_children(parent: &Path) -> Result<(), String> {
    let control = parent.join("cgroup.subtree_control");
    let enabled = std::fs::read_to_string(&control)
        .is_ok_and(|c| c.split_whitespace().any(|name| name == "memory"));
    if enabled {
        return Ok(());
    }
    write_file(&control, "+memory")
}

/// Attempts of `rmdir` on a cgroup whose last process has only just exited.
const REMOVE_ATTEMPTS: u32 = 50;

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The kernel lets a cgroup go once its last task is gone, which can lag the child's
        // reaping by a moment: retry a bounded number of times.
        for _ in 0..REMOVE_ATTEMPTS {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        eprintln!("could not remove the cgroup {}", self.dir.display());
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The file system type of the mount that holds `path` (the longest mount point it starts
/// with).
fn file_system_type(path: &Path) -> Option<String> {
    let all = mounts();
    all.iter()
        .filter(|m| path.starts_with(&m.point))
        .max_by_key(|m| m.point.as_os_str().len())
        .map(|m| m.kind.clone())
}

/// What a case ran and how it ended.
struct CaseRun {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    seconds: f64,
    peaks: SampledPeaks,
}

/// The `ringdb ycsb` arguments of a case (`model`: calibrate the cost model before the run).
fn ycsb_arguments(db: &Path, records: u64, durability: &str, model: bool) -> Vec<String> {
    let db = db.to_str().expect("a UTF-8 temp path").to_string();
    let records = records.to_string();
    [
        "ycsb",
        "--db",
        &db,
        "--load",
        "--workload",
        "a",
        "--distribution",
        "uniform",
        "--records",
        &records,
        "--pool",
        POOL,
        "--durability",
        durability,
        "--runtime",
        RUNTIME,
        "--json",
    ]
    .map(str::to_string)
    .into_iter()
    .chain((!model).then(|| "--no-model".to_string()))
    .collect()
}

/// Starts `ringdb` with `arguments` inside `cgroup`: a `sh` joins the cgroup (its pid into
/// `cgroup.procs`) and then execs `ringdb`, so everything `ringdb` allocates is charged there.
fn spawn_in_cgroup(cgroup: &MemoryCgroup, arguments: &[String], output_dir: &Path) -> Child {
    let procs = cgroup.file("cgroup.procs");
    let script = r#"procs=$1; shift; echo $$ > "$procs" && exec "$@""#;
    let stdout = std::fs::File::create(output_dir.join("stdout")).expect("stdout file");
    let stderr = std::fs::File::create(output_dir.join("stderr")).expect("stderr file");
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(&procs)
        .arg(ringdb_bin())
        .args(arguments)
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .spawn()
        .expect("spawn sh")
}

/// The largest charges seen by kind while the child ran, sampled every `POLL_INTERVAL`: a
/// mark at the limit is anonymous memory (the engine's) or page cache (files it wrote).
#[derive(Default)]
struct SampledPeaks {
    anon_bytes: u64,
    file_bytes: u64,
}

impl SampledPeaks {
    fn sample(&mut self, cgroup: &MemoryCgroup) {
        let (anon_key, file_key) = match cgroup.version {
            CgroupVersion::V1 => ("total_rss", "total_cache"),
            CgroupVersion::V2 => ("anon", "file"),
        };
        let stat = cgroup.file("memory.stat");
        let anon = keyed_number(&stat, anon_key).unwrap_or(0);
        let file = keyed_number(&stat, file_key).unwrap_or(0);
        self.anon_bytes = self.anon_bytes.max(anon);
        self.file_bytes = self.file_bytes.max(file);
    }

    fn line(&self) -> String {
        format!(
            "anonymous {:.1} MiB, page cache {:.1} MiB (peaks sampled every {POLL_INTERVAL:?})",
            self.anon_bytes as f64 / MIB as f64,
            self.file_bytes as f64 / MIB as f64
        )
    }
}

/// Waits for `child` at most `CASE_TIME_LIMIT`, sampling the cgroup's charges into `peaks`;
/// kills the child past that (status `None`).
fn wait_bounded(
    child: &mut Child,
    cgroup: &MemoryCgroup,
    peaks: &mut SampledPeaks,
) -> Option<ExitStatus> {
    let start = Instant::now();
    let polls = CASE_TIME_LIMIT.as_millis() / POLL_INTERVAL.as_millis();
    for _ in 0..polls {
        peaks.sample(cgroup);
        if let Some(status) = child.try_wait().expect("wait for ringdb") {
            return Some(status);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    eprintln!(
        "ringdb still running after {:.0} s: killing it",
        start.elapsed().as_secs_f64()
    );
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Runs `ringdb` with `arguments` in `cgroup`, its output kept in `output_dir`.
fn run_case(cgroup: &MemoryCgroup, arguments: &[String], output_dir: &Path) -> CaseRun {
    let start = Instant::now();
    let mut child = spawn_in_cgroup(cgroup, arguments, output_dir);
    let mut peaks = SampledPeaks::default();
    let status = wait_bounded(&mut child, cgroup, &mut peaks);
    let read = |name: &str| std::fs::read_to_string(output_dir.join(name)).unwrap_or_default();
    CaseRun {
        status,
        stdout: read("stdout"),
        stderr: read("stderr"),
        seconds: start.elapsed().as_secs_f64(),
        peaks,
    }
}

/// The engine's own view of its memory (the report's `memory` section), in MiB per part.
fn engine_memory_line(report: &serde_json::Value) -> String {
    let Some(parts) = report["memory"].as_object() else {
        return "no memory section".to_string();
    };
    parts
        .iter()
        .map(|(part, bytes)| {
            let peak = bytes["peak_bytes"].as_f64().unwrap_or(0.0);
            format!("{part} {:.1}", peak / MIB as f64)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Asserts the run's outcome in the order that explains a failure best: killed by the OOM
/// killer, killed by the time limit, a failed exit, a report without operations, and last
/// the high-water mark against the limit.
fn assert_within_limit(case: &str, cgroup: &MemoryCgroup, run: &CaseRun) {
    let high_water = cgroup.high_water_bytes().expect("read the high-water mark");
    let oom_kills = cgroup.oom_kills().expect("read the OOM-kill count");
    let limit_mib = cgroup.limit_bytes as f64 / MIB as f64;
    let high_water_mib = high_water as f64 / MIB as f64;
    let summary = format!(
        "{case}: high-water mark {high_water_mib:.1} MiB, limit {limit_mib:.1} MiB, OOM kills {oom_kills}, {:.1} s",
        run.seconds
    );
    eprintln!("{summary}");
    eprintln!("{case}: charged while running: {}", run.peaks.line());
    eprintln!(
        "{case}: charged after the exit (MiB): {}",
        cgroup.leftover_charge_line()
    );
    let stderr_tail: String = run
        .stderr
        .lines()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        oom_kills, 0,
        "{summary}: ringdb was OOM-killed\n{stderr_tail}"
    );
    let status = run.status.unwrap_or_else(|| {
        panic!("{summary}: ringdb did not finish within {CASE_TIME_LIMIT:?}\n{stderr_tail}")
    });
    assert!(
        status.success(),
        "{summary}: ringdb exited with {status}\n{stderr_tail}"
    );
    let report: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{summary}: the report is not JSON ({e}): {}", run.stdout));
    let ops = report["run"]["ops"].as_u64().unwrap_or(0);
    eprintln!(
        "{case}: {ops} operations; the engine's peaks (MiB): {}",
        engine_memory_line(&report)
    );
    assert!(
        ops > 0,
        "{summary}: the run made no operations: {}",
        run.stdout
    );
    // The promise is about the process's own memory (anonymous: heap, pool, stacks), which
    // the kernel cannot reclaim. The page cache of the log and the double-write file is
    // charged to the cgroup too, but it is reclaimable: the kernel drops clean cache to hold
    // the limit, so a high-water mark at the limit (printed above) is not a failure, a kill is.
    assert!(
        run.peaks.anon_bytes < cgroup.limit_bytes,
        "{summary}: the process's anonymous memory reached the limit; {}",
        run.peaks.line()
    );
}

/// Runs one case: `records` records, `durability`, in a fresh cgroup of `LIMIT_MIB`;
/// returns the report (`None` when no cgroup can be made here).
fn check_case(
    case: &str,
    records: u64,
    durability: &str,
    model: bool,
) -> Option<serde_json::Value> {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let name = format!("ringdb-memory-{}-{case}", std::process::id());
    let limit_mib = std::env::var("RINGDB_MEMORY_LIMIT_MIB")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .unwrap_or(LIMIT_MIB);
    let cgroup = match MemoryCgroup::create(&name, limit_mib * MIB) {
        Ok(cgroup) => cgroup,
        Err(why) => {
            eprintln!("SKIPPED: no memory cgroup can be made here: {why}");
            return None;
        }
    };
    let dir = TempDir(tmp(&format!("memory-cgroup-{case}")));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).expect("create the temp dir");
    let kind = file_system_type(&dir.0).unwrap_or_default();
    assert!(
        kind != "tmpfs" && kind != "ramfs",
        "{} is on {kind}: its files would be charged as memory; set RINGDB_TEST_TMP to a directory on a real file system",
        dir.0.display()
    );
    let db = dir.0.join("db");
    eprintln!(
        "{case}: {records} records, pool {POOL}, durability {durability}, in {} ({:?})",
        cgroup.dir.display(),
        cgroup.version
    );
    let arguments = ycsb_arguments(&db, records, durability, model);
    let run = run_case(&cgroup, &arguments, &dir.0);
    assert_within_limit(case, &cgroup, &run);
    serde_json::from_str(&run.stdout).ok()
}

#[test]
fn ycsb_with_unsynced_log_stays_under_the_memory_limit() {
    check_case("durability-none", RECORDS_DURABILITY_NONE, "none", false);
}

#[test]
fn ycsb_with_fdatasync_log_stays_under_the_memory_limit() {
    check_case(
        "durability-fdatasync",
        RECORDS_DURABILITY_FDATASYNC,
        "fdatasync",
        false,
    );
}

/// The cost model's calibration (on by default) runs inside the limit too: its raw runs'
/// buffers, the pool's size where memory allows, shrink to what the cgroup leaves beside the
/// pool, and the prediction is computed.
#[test]
fn ycsb_calibrating_its_model_stays_under_the_memory_limit() {
    let Some(report) = check_case("model", RECORDS_DURABILITY_NONE, "off", true) else {
        return;
    };
    let model = &report["model"];
    let buffers = model["costs"]["raw_buffer_bytes"].as_u64();
    let predicted = model["predicted_cycles_per_op"].as_f64();
    eprintln!(
        "model: raw runs' buffers {:.1} MiB; predicted {predicted:?} cycles/op, measured {} ({}x)",
        buffers.unwrap_or(0) as f64 / MIB as f64,
        model["measured_cycles_per_op"],
        model["measured_over_predicted"]
    );
    assert!(
        buffers.is_some_and(|b| b < 64 * MIB),
        "the calibration ran with buffers that do not fit beside the pool: {model}"
    );
    assert!(predicted.is_some(), "the model was computed: {model}");
}
