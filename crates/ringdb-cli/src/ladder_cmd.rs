//! `ringdb ladder`: the paper's Fig. 5, step by step, beside the cost model.

use crate::config_flags::given_on_command_line;
use clap::{ArgMatches, Args};
use ringdb_bench::ladder::{self, LadderOpts};
use ringdb_bench::units::{parse_duration, parse_size};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

const DEFAULT_TARGET: &str = "ringdb-data/ladder.ringdb";

#[derive(Args)]
pub struct LadderArgs {
    /// Data file or block device (a block device's contents are destroyed).
    #[arg(long, default_value = DEFAULT_TARGET)]
    target: PathBuf,
    /// Buffer pool size (bytes, e.g. 16M).
    #[arg(long, default_value = "16M")]
    pool: String,
    /// Page size.
    #[arg(long, default_value = "4k")]
    page_size: String,
    /// Records to load (default: a data set --data-ratio times the pool).
    #[arg(long)]
    records: Option<u64>,
    /// Data set size over pool size, when --records is not given (3.5: ~70% faults).
    #[arg(long, default_value_t = 3.5)]
    data_ratio: f64,
    /// Value size in bytes (keys are 8 bytes).
    #[arg(long, default_value_t = 128)]
    value_size: usize,
    /// Concurrent tasks in the asynchronous steps.
    #[arg(long, default_value_t = 128)]
    tasks: usize,
    /// Measured time per step.
    #[arg(long, default_value = "8s")]
    runtime: String,
    /// Warm-up per step.
    #[arg(long, default_value = "2s")]
    warmup: String,
    /// Short phases (a smoke run).
    #[arg(long)]
    quick: bool,
    /// Only these steps (comma-separated, e.g. posix,+async).
    #[arg(long, value_delimiter = ',')]
    steps: Option<Vec<String>>,
    /// Pin the engine's thread (and io-wq workers) to this CPU; SQPOLL gets another.
    #[arg(long)]
    cpu: Option<u32>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON report here.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Also draw the ladder as an SVG chart into this file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Also write an HTML report (charts and tables) as DIR/index.html.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Settings from a configuration file (TOML, as `ringdb advise --write-config` writes it):
    /// its [io] runs as one more step, "config", beside the ladder's, priced by the model for
    /// the switches it turns on; [db] pool and page_size and [workload] tasks, value_size and
    /// records apply unless the flag is given on the command line.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

pub fn run(mut a: LadderArgs, typed: &ArgMatches) -> Result<(), Box<dyn std::error::Error>> {
    if a.target == Path::new(DEFAULT_TARGET) {
        std::fs::create_dir_all("ringdb-data")?;
    }
    let config_io = take_config(&mut a, typed)?;
    let page_size = parse_size(&a.page_size)? as usize;
    let pool = parse_size(&a.pool)? as usize;
    let mut opts = LadderOpts::new(&a.target);
    opts.page_size = page_size;
    opts.pool_pages = pool / page_size.max(1);
    opts.records = a.records;
    opts.data_ratio = a.data_ratio;
    opts.value_size = a.value_size;
    opts.tasks = a.tasks;
    opts.runtime = parse_duration(&a.runtime)?;
    opts.warmup = parse_duration(&a.warmup)?;
    if a.quick {
        opts = opts.quick();
    }
    opts.steps = a.steps;
    opts.cpu = a.cpu;
    opts.config_io = config_io;
    let tty = std::io::stderr().is_terminal();
    opts.progress = tty;
    // Steps are announced even without a terminal: the whole run takes minutes.
    let progress = |s: &str| eprintln!("ladder: {s}");
    let report = ladder::run(&opts, &progress)?;
    let json = serde_json::to_string_pretty(&report)?;
    if a.json {
        println!("{json}");
    } else {
        print!("{}", ladder::table(&report));
    }
    if let Some(p) = &a.output {
        std::fs::write(p, json + "\n").map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    write_pictures(&a.plot, &a.report, &report)?;
    Ok(())
}

/// With `--config`: the file's sizes and workload into `a` where the flag was not typed, and
/// its `[io]` (the step `config`).
fn take_config(
    a: &mut LadderArgs,
    typed: &ArgMatches,
) -> Result<Option<ringdb_io::IoConfig>, Box<dyn std::error::Error>> {
    let Some(path) = &a.config else {
        return Ok(None);
    };
    let file = crate::config_flags::load(path)?;
    let given = |id: &str| given_on_command_line(typed, id);
    if let (false, Some(pool)) = (given("pool"), file.db.pool_bytes) {
        a.pool = pool.to_string();
    }
    if let (false, Some(page)) = (given("page_size"), file.db.page_size_bytes) {
        a.page_size = page.to_string();
    }
    if let (false, Some(tasks)) = (given("tasks"), file.workload.tasks) {
        a.tasks = tasks;
    }
    if let (false, Some(value_size)) = (given("value_size"), file.workload.value_size) {
        a.value_size = value_size;
    }
    if !given("records") && file.workload.records.is_some() {
        a.records = file.workload.records;
    }
    Ok(file.io)
}

/// `--plot`: the ladder as an SVG chart; `--report`: the HTML page. Each path written is
/// named on stderr.
fn write_pictures(
    plot: &Option<PathBuf>,
    report_dir: &Option<PathBuf>,
    report: &ladder::LadderReport,
) -> Result<(), ringdb_bench::BenchError> {
    if let Some(path) = plot {
        ringdb_bench::report::write_file(path, &ringdb_bench::report::ladder_svg(report))?;
        eprintln!("ladder: chart written to {}", path.display());
    }
    if let Some(dir) = report_dir {
        let subtitle = ringdb_bench::report::machine_line(&report.target);
        let page = ringdb_bench::report::ladder_page(report, &subtitle).write(dir)?;
        eprintln!("ladder: report written to {}", page.display());
    }
    Ok(())
}
