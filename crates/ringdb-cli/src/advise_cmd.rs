//! `ringdb advise`: which io_uring configuration pays off on this machine, device and
//! workload, predicted by the cost model from costs measured here, and (`--verify`) checked
//! on the engine.

use clap::Args;
use ringdb_bench::advise::{self, AdviseOpts, Machine, Preset, Workload};
use ringdb_bench::units::{parse_duration, parse_size};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

const DEFAULT_TARGET: &str = "ringdb-data/advise.ringdb";

#[derive(Args)]
pub struct AdviseArgs {
    /// Data file or block device the advice is for (a block device's contents are destroyed).
    #[arg(long, default_value = DEFAULT_TARGET)]
    target: PathBuf,
    /// The workload: update-only, ycsb-a, ycsb-b or ycsb-c (uniform keys); or describe it with
    /// --cycles-per-op, --reads-per-op and --writes-per-op.
    #[arg(long, default_value = "ycsb-b")]
    workload: String,
    /// CPU cycles per operation with every page in memory (a custom workload).
    #[arg(long, requires_all = ["reads_per_op", "writes_per_op"])]
    cycles_per_op: Option<f64>,
    /// Page reads per operation (a custom workload).
    #[arg(long, requires = "cycles_per_op")]
    reads_per_op: Option<f64>,
    /// Page writes per operation (a custom workload).
    #[arg(long, requires = "cycles_per_op")]
    writes_per_op: Option<f64>,
    /// Threads (cores) the engine may use (default: the CPUs this process may run on).
    #[arg(long)]
    threads: Option<usize>,
    /// Operations the application keeps in flight per thread.
    #[arg(long, default_value_t = 128)]
    concurrency: usize,
    /// A mean latency per operation not to exceed (e.g. 500us, 2ms); default: throughput.
    #[arg(long)]
    max_latency: Option<String>,
    /// Buffer pool size (bytes, e.g. 16M).
    #[arg(long, default_value = "16M")]
    pool: String,
    /// Data set size over pool size (a preset's data set).
    #[arg(long, default_value_t = 3.5)]
    data_ratio: f64,
    /// Value size in bytes (keys are 8 bytes).
    #[arg(long, default_value_t = 128)]
    value_size: usize,
    /// Time for the calibration and the in-memory timing (verification comes on top).
    #[arg(long, default_value = "60s")]
    budget: String,
    /// Run the recommendation, the runners-up and posix on the engine, measured beside predicted.
    #[arg(long)]
    verify: bool,
    /// Runners-up to verify besides the recommendation.
    #[arg(long, default_value_t = 2)]
    runners_up: usize,
    /// Measured time per verified candidate.
    #[arg(long, default_value = "3s")]
    verify_runtime: String,
    /// Pin the engine's thread (and io-wq workers) to this CPU; SQPOLL gets another.
    #[arg(long)]
    cpu: Option<u32>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON report here.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Write the recommendation as a configuration file (TOML) that `ringdb ycsb/io/ladder
    /// --config` and `Db::open` options take.
    #[arg(long)]
    write_config: Option<PathBuf>,
    /// Also write the advice as an HTML page with SVG charts: DIR/index.html.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

pub fn run(a: AdviseArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.target == Path::new(DEFAULT_TARGET) {
        std::fs::create_dir_all("ringdb-data")?;
    }
    let opts = options(&a)?;
    let progress = |s: &str| eprintln!("advise: {s}");
    let advice = advise::advise(&opts, &progress)?;
    let json = serde_json::to_string_pretty(&advice)?;
    if a.json {
        println!("{json}");
    } else {
        print!("{}", advise::table(&advice));
    }
    if let Some(p) = &a.output {
        std::fs::write(p, json + "\n").map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    if let Some(p) = &a.write_config {
        let config = advise::config_of(&advice, &opts)
            .ok_or("no configuration to write: no candidate can run on this target")?;
        std::fs::write(p, advise::config_text(&advice, &config))
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
        eprintln!("advise: configuration written to {}", p.display());
    }
    if let Some(dir) = &a.report {
        let subtitle = ringdb_bench::report::machine_line(&advice.target);
        let page = ringdb_bench::report::advice_page(&advice, &subtitle).write(dir)?;
        eprintln!("advise: report written to {}", page.display());
    }
    Ok(())
}

/// The advisor's options from the flags.
fn options(a: &AdviseArgs) -> Result<AdviseOpts, Box<dyn std::error::Error>> {
    let mut opts = AdviseOpts::new(&a.target);
    opts.workload = match (a.cycles_per_op, a.reads_per_op, a.writes_per_op) {
        (Some(c), Some(r), Some(w)) => Workload::custom(c, r, w)?,
        _ => Workload::Preset {
            preset: Preset::parse(&a.workload)?,
        },
    };
    let page_size = opts.page_size;
    opts.pool_pages = parse_size(&a.pool)? as usize / page_size;
    opts.data_ratio = a.data_ratio;
    opts.value_size = a.value_size;
    let threads = a.threads.unwrap_or(opts.machine.threads);
    opts.machine = Machine {
        threads,
        concurrency: a.concurrency.saturating_mul(threads),
    };
    opts.max_latency_us = match &a.max_latency {
        Some(l) => Some(parse_duration(l)?.as_secs_f64() * 1e6),
        None => None,
    };
    opts.budget = parse_duration(&a.budget)?;
    opts.verify = a.verify;
    opts.runners_up = a.runners_up;
    opts.verify_runtime = parse_duration(&a.verify_runtime)?;
    opts.cpu = a.cpu;
    opts.progress = std::io::stderr().is_terminal();
    Ok(opts)
}
