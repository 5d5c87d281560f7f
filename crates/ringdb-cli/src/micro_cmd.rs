//! `ringdb micro <name>`: one of the paper's microbenchmarks.

use clap::Args;
use ringdb_bench::micro::{self, MicroOpts};
use ringdb_bench::units::{parse_duration, parse_size};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Args)]
pub struct MicroArgs {
    /// nop-batch | sqpoll-wakeup | iowq | batch-latency | block-size | scale-out | fixed-buffers |
    /// durable | handoff | scan | point-cost | txn-cost
    name: String,
    /// File or block device for the storage benchmarks (a missing file is created and filled).
    #[arg(long, default_value = "ringdb-data/micro.dat")]
    target: PathBuf,
    /// Bytes of the target to use.
    #[arg(long, default_value = "1G")]
    size: String,
    /// Time per measured point (durable: the most per method; it stops at --ios or this).
    #[arg(long, default_value = "2s")]
    runtime: String,
    /// Fewer and shorter points.
    #[arg(long)]
    quick: bool,
    /// Most threads for scale-out (default: online CPUs).
    #[arg(long)]
    max_threads: Option<u32>,
    /// durable only: bytes per write, a multiple of the target's logical block size [default: 4K].
    #[arg(long)]
    bs: Option<String>,
    /// durable only: durable writes per method [default: 10000, 200 with --quick].
    #[arg(long)]
    ios: Option<u64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the plot here (SVG).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Also write the JSON result here.
    #[arg(long)]
    output: Option<PathBuf>,
}

pub fn run(a: MicroArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.target == std::path::Path::new("ringdb-data/micro.dat") {
        std::fs::create_dir_all("ringdb-data")?;
    }
    if (a.bs.is_some() || a.ios.is_some()) && !micro::TAKES_BS_IOS.contains(&a.name.as_str()) {
        return Err(format!(
            "--bs and --ios apply to {} only, not to {}",
            micro::TAKES_BS_IOS.join(", "),
            a.name
        )
        .into());
    }
    let opts = MicroOpts {
        target: a.target.clone(),
        size: parse_size(&a.size)?,
        runtime: parse_duration(&a.runtime)?,
        quick: a.quick,
        max_threads: a.max_threads,
        progress: std::io::stderr().is_terminal(),
        bs: a.bs.as_deref().map(parse_size).transpose()?,
        ios: a.ios,
    };
    let r = micro::run(&a.name, &opts)?;
    let json = serde_json::to_string_pretty(&r)?;
    if a.json {
        println!("{json}");
    } else {
        print!("{}", r.render_table());
    }
    if let Some(p) = &a.output {
        std::fs::write(p, json + "\n").map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    if let Some(p) = &a.plot {
        r.write_svg(p)?;
    }
    Ok(())
}
