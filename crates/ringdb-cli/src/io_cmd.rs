//! `ringdb io`: fio's vocabulary over every engine and switch, with `--compare-fio`.

use crate::config_flags::given_on_command_line;
use clap::{ArgMatches, Args};
use ringdb_bench::fio;
use ringdb_bench::rawio::{self, report_row, IoReport, IoSpec, TABLE_HEADER};
use ringdb_bench::units::{parse_duration, parse_size};
use ringdb_bench::BenchError;
use ringdb_io::{Batching, EngineKind, IoConfig, SetupMode, SqPoll};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Args)]
pub struct IoArgs {
    /// File or block device. A missing file is created and filled to --size.
    #[arg(long, default_value = "ringdb-data/io.dat")]
    filename: PathBuf,
    /// read | write | randread | randwrite | randrw
    #[arg(long, default_value = "randread")]
    rw: String,
    /// Percentage of reads for randrw.
    #[arg(long, default_value_t = 50)]
    rwmixread: u32,
    /// Block size (4k, 64k, 1M, ...).
    #[arg(long, default_value = "4k")]
    bs: String,
    /// Requests in flight per job.
    #[arg(long, default_value_t = 32)]
    iodepth: u32,
    /// Jobs: one thread and one ring each.
    #[arg(long, default_value_t = 1)]
    numjobs: u32,
    /// Memory each job's buffers span (e.g. 32M; default iodepth x bs, one buffer per
    /// request in flight, as fio). Set it to a database's buffer pool per thread to compare
    /// the two at the same memory footprint: some machines (VMs) serve the device slower
    /// when its DMA lands all over a large area.
    #[arg(long)]
    buffer_span: Option<String>,
    /// Bytes of the target to use (0 = a whole block device).
    #[arg(long, default_value = "1G")]
    size: String,
    /// Run time per job (10s, 500ms, 1m). Default 10s unless --ios is given.
    #[arg(long)]
    runtime: Option<String>,
    /// I/Os per job.
    #[arg(long)]
    ios: Option<u64>,
    /// O_DIRECT (1) or buffered (0).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    direct: u8,
    /// posix | libaio | uring-sync | uring | auto (io_uring where it works here, else libaio
    /// or posix, each refused switch dropped)
    #[arg(long, default_value = "uring")]
    engine: String,
    /// Ring setup mode: default | coop | defer (DEFER_TASKRUN + SINGLE_ISSUER, the paper's
    /// recommendation) | auto (defer, or default with --sqpoll).
    #[arg(long, default_value = "auto")]
    setup: String,
    /// A kernel thread polls the submission queue.
    #[arg(long)]
    sqpoll: bool,
    /// Idle time before the SQPOLL thread sleeps.
    #[arg(long, default_value_t = 1000)]
    sqpoll_idle_ms: u32,
    /// Pin the SQPOLL thread to this CPU.
    #[arg(long)]
    sqpoll_cpu: Option<u32>,
    /// Enter the ring through a registered ring fd.
    #[arg(long)]
    register_ring_fd: bool,
    /// Registered files (IOSQE_FIXED_FILE). fio: --registerfiles.
    #[arg(long, alias = "registerfiles")]
    register_files: bool,
    /// Registered buffers with READ_FIXED/WRITE_FIXED.
    #[arg(long)]
    fixedbufs: bool,
    /// Polled completions (IORING_SETUP_IOPOLL; needs device poll queues). fio: --hipri.
    #[arg(long, alias = "hipri")]
    iopoll: bool,
    /// IOSQE_ASYNC on every request (force io-wq).
    #[arg(long)]
    force_async: bool,
    /// Submission batching: each | adaptive | fixed(N)
    #[arg(long, default_value = "adaptive")]
    batch: String,
    /// Completion queue entries (default 2 x SQ).
    #[arg(long)]
    cq_size: Option<u32>,
    /// CPUs for the jobs (0, 0,1, 0-3): job i, its ring and its io-wq workers run on the i-th
    /// (fio's cpus_allowed with cpus_allowed_policy=split).
    #[arg(long, alias = "cpus_allowed")]
    cpus_allowed: Option<String>,
    /// Check every block read against the pattern written with --verify (seed = --seed).
    #[arg(long)]
    verify: bool,
    /// Seed for offsets and the verification pattern.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the result to this file (.json or .csv).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Run fio with the equivalent options on the same target and print both with ratios.
    #[arg(long)]
    compare_fio: bool,
    /// With --compare-fio: alternate ringdb and fio this many times; report the median run of
    /// each and the spread of the per-pair ratios (how noisy the machine is).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// The engine and switches from a configuration file's [io] section (TOML, as `ringdb
    /// advise` writes it; its other sections are not read here). A flag given on the command
    /// line overrides the file's value for that one setting; the file overrides the flags'
    /// defaults.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The I/O configuration: the file's `[io]` section with each flag typed on the command line
/// over it, or the flags alone.
fn config(a: &IoArgs, typed: &ArgMatches, file: Option<&IoConfig>) -> Result<IoConfig, BenchError> {
    let flags = flag_config(a)?;
    let Some(file) = file else {
        return Ok(flags);
    };
    let given = |id: &str| given_on_command_line(typed, id);
    let mut io = file.clone();
    let overrides: [(&str, &mut bool, bool); 5] = [
        (
            "register_ring_fd",
            &mut io.register_ring_fd,
            flags.register_ring_fd,
        ),
        (
            "register_files",
            &mut io.register_files,
            flags.register_files,
        ),
        ("fixedbufs", &mut io.fixed_buffers, flags.fixed_buffers),
        ("iopoll", &mut io.iopoll, flags.iopoll),
        ("force_async", &mut io.force_async, flags.force_async),
    ];
    for (id, setting, flag) in overrides {
        if given(id) {
            *setting = flag;
        }
    }
    if given("engine") {
        io.engine = flags.engine;
    }
    if given("setup") {
        io.setup = flags.setup;
    }
    if given("sqpoll") {
        io.sqpoll = flags.sqpoll;
    }
    if let Some(sqpoll) = &mut io.sqpoll {
        if given("sqpoll_idle_ms") {
            sqpoll.idle_ms = a.sqpoll_idle_ms;
        }
        if given("sqpoll_cpu") {
            sqpoll.cpu = a.sqpoll_cpu;
        }
    }
    if given("batch") {
        io.batching = flags.batching;
    }
    if given("iodepth") {
        io.queue_depth = flags.queue_depth;
    }
    if given("cq_size") {
        io.cq_size = flags.cq_size;
    }
    Ok(io)
}

/// The I/O configuration the flags alone describe.
fn flag_config(a: &IoArgs) -> Result<IoConfig, BenchError> {
    let engine: EngineKind = a.engine.parse()?;
    let setup: SetupMode = match a.setup.as_str() {
        "auto" if engine.accepts_uring_switches() && !a.sqpoll => SetupMode::Defer,
        "auto" => SetupMode::Default,
        s => s.parse()?,
    };
    let batching: Batching = a.batch.parse()?;
    Ok(IoConfig {
        engine,
        setup,
        sqpoll: a.sqpoll.then_some(SqPoll {
            idle_ms: a.sqpoll_idle_ms,
            cpu: a.sqpoll_cpu,
        }),
        register_ring_fd: a.register_ring_fd,
        register_files: a.register_files,
        fixed_buffers: a.fixedbufs,
        iopoll: a.iopoll,
        force_async: a.force_async,
        batching,
        queue_depth: a.iodepth,
        cq_size: a.cq_size,
        cpu: None,
    })
}

fn spec(a: &IoArgs, typed: &ArgMatches, file: Option<&IoConfig>) -> Result<IoSpec, BenchError> {
    let io = config(a, typed, file)?;
    let runtime = match (&a.runtime, a.ios) {
        (Some(r), _) => Some(parse_duration(r)?),
        (None, Some(_)) => None,
        (None, None) => Some(std::time::Duration::from_secs(10)),
    };
    Ok(IoSpec {
        path: a.filename.clone(),
        rw: a.rw.parse()?,
        rwmixread: a.rwmixread,
        bs: parse_size(&a.bs)?,
        size: parse_size(&a.size)?,
        numjobs: a.numjobs,
        runtime,
        ios: a.ios,
        direct: a.direct == 1,
        io,
        verify: a.verify.then_some(a.seed),
        seed: a.seed,
        progress: std::io::stderr().is_terminal(),
        cpus: match &a.cpus_allowed {
            Some(list) => ringdb_io::affinity::parse_cpu_list(list)?,
            None => Vec::new(),
        },
        buffer_span: a.buffer_span.as_deref().map(parse_size).transpose()?,
        checksum_reads: false,
    })
}

pub fn run(a: IoArgs, typed: &ArgMatches) -> Result<(), Box<dyn std::error::Error>> {
    let file = match &a.config {
        Some(path) => crate::config_flags::load(path)?.io,
        None => None,
    };
    let spec = spec(&a, typed, file.as_ref())?;
    // The embedded default lives in ./ringdb-data; make the folder on first use.
    if let Some(parent) = spec.path.parent() {
        if a.filename == std::path::Path::new("ringdb-data/io.dat") && !parent.exists() {
            std::fs::create_dir_all(parent)?;
        }
    }
    if a.repeat > 1 && !a.compare_fio {
        return Err("--repeat needs --compare-fio".into());
    }
    let runs = alternating_runs(&a, &spec)?;
    let ours = median_run(&runs.ours);
    let theirs = (!runs.fio.is_empty()).then(|| median_run(&runs.fio));
    let json = match &theirs {
        Some(f) => comparison_json(&runs, &ours, f, a.repeat),
        None => serde_json::to_value(&ours)?,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print_table(&runs, &ours, theirs.as_ref(), a.repeat);
    }
    if let Some(path) = &a.output {
        write_output(path, &json, &ours, theirs.as_ref())?;
    }
    Ok(())
}

/// Every run of each tool, in the order they ran (fio's empty without --compare-fio).
struct Runs {
    ours: Vec<IoReport>,
    fio: Vec<IoReport>,
}

impl Runs {
    /// `figure` of each of our runs over the same of the fio run beside it.
    fn ratio_per_pair(&self, figure: fn(&IoReport) -> f64) -> Vec<f64> {
        self.ours
            .iter()
            .zip(&self.fio)
            .map(|(o, t)| ratio(figure(o), figure(t)))
            .collect()
    }
}

/// Runs ringdb, and fio after it with --compare-fio, `--repeat` times.
fn alternating_runs(a: &IoArgs, spec: &IoSpec) -> Result<Runs, BenchError> {
    let mut runs = Runs {
        ours: Vec::new(),
        fio: Vec::new(),
    };
    for i in 0..a.repeat {
        runs.ours.push(rawio::run(spec)?);
        if a.compare_fio {
            runs.fio.push(fio::run_fio(spec)?);
        }
        if a.repeat > 1 {
            eprintln!(
                "run {}/{}: ringdb {:.0} IOPS, fio {:.0} IOPS",
                i + 1,
                a.repeat,
                runs.ours[i as usize].iops,
                runs.fio[i as usize].iops
            );
        }
    }
    Ok(runs)
}

/// Both tools' median runs side by side, with the ratios and every run's IOPS.
fn comparison_json(runs: &Runs, ours: &IoReport, f: &IoReport, repeat: u32) -> serde_json::Value {
    serde_json::json!({
        "ringdb": ours,
        "fio": f,
        "ratio_iops": ratio(ours.iops, f.iops),
        "ratio_cycles_per_io": ratio(ours.cycles_per_io, f.cycles_per_io),
        "ratio_p50": ratio(ours.lat_us.p50, f.lat_us.p50),
        "repeat": repeat,
        "ratio_iops_per_pair": runs.ratio_per_pair(|r| r.iops),
        "ratio_cycles_per_io_per_pair": runs.ratio_per_pair(|r| r.cycles_per_io),
        "ringdb_iops_runs": runs.ours.iter().map(|r| r.iops).collect::<Vec<_>>(),
        "fio_iops_runs": runs.fio.iter().map(|r| r.iops).collect::<Vec<_>>(),
        "fio_version": fio::fio_version(),
    })
}

/// The median runs as table rows; with fio, the spread of the alternating pairs and the
/// ratios.
fn print_table(runs: &Runs, ours: &IoReport, theirs: Option<&IoReport>, repeat: u32) {
    println!("{TABLE_HEADER}");
    println!("{}", report_row(ours));
    if let Some(f) = theirs {
        println!("{}", report_row(f));
        if repeat > 1 {
            let (lo, hi) = runs
                .ratio_per_pair(|r| r.iops)
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
            println!("median of {repeat} alternating runs each; per-pair IOPS ratio range {lo:.3}..{hi:.3}");
        }
        println!(
            "ratio ringdb/fio: IOPS {:.3}  cycles/IO {:.3}  p50 {:.3}  p99 {:.3}",
            ratio(ours.iops, f.iops),
            ratio(ours.cycles_per_io, f.cycles_per_io),
            ratio(ours.lat_us.p50, f.lat_us.p50),
            ratio(ours.lat_us.p99, f.lat_us.p99),
        );
    }
    if let Some(v) = ours.verified_blocks {
        println!("verified: {v} blocks read back bit-exact");
    }
}

/// The run with the median IOPS (a whole run, so its figures stay consistent with each other).
fn median_run(runs: &[IoReport]) -> IoReport {
    let mut sorted: Vec<&IoReport> = runs.iter().collect();
    sorted.sort_by(|x, y| x.iops.total_cmp(&y.iops));
    sorted[sorted.len() / 2].clone()
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

fn write_output(
    path: &std::path::Path,
    json: &serde_json::Value,
    ours: &IoReport,
    theirs: Option<&IoReport>,
) -> Result<(), Box<dyn std::error::Error>> {
    let is_csv = path.extension().is_some_and(|e| e == "csv");
    let text = if is_csv {
        let mut s = String::from("tool,label,rw,bs,iodepth,numjobs,iops,mib_s,lat_avg_us,lat_p50_us,lat_p95_us,lat_p99_us,lat_p999_us,lat_max_us,cpu_pct,cpu_user_pct,cpu_sys_pct,cycles_per_io,enters_per_io,iowq_workers\n");
        for r in std::iter::once(ours).chain(theirs) {
            s.push_str(&format!(
                "{},{},{},{},{},{},{:.1},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.1},{:.1},{:.1},{:.0},{},{}\n",
                r.tool, r.label, r.rw, r.bs, r.iodepth, r.numjobs, r.iops, r.mib_s,
                r.lat_us.avg, r.lat_us.p50, r.lat_us.p95, r.lat_us.p99, r.lat_us.p999, r.lat_us.max,
                r.cpu_pct, r.cpu_user_pct, r.cpu_sys_pct, r.cycles_per_io,
                r.enters_per_io.map_or(String::new(), |x| format!("{x:.4}")),
                r.iowq_workers.map_or(String::new(), |x| x.to_string()),
            ));
        }
        s
    } else {
        serde_json::to_string_pretty(json)? + "\n"
    };
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()).into())
}
