//! `ringdb probe [PATH]`.

use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct ProbeArgs {
    /// A file or block device whose device to describe.
    path: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: ProbeArgs) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(p) = &args.path {
        if !p.exists() {
            return Err(Box::new(ringdb_io::IoError::NotFound { path: p.clone() }));
        }
    }
    let report = ringdb_lab::probe::probe(args.path.as_deref());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_table());
    }
    Ok(())
}
