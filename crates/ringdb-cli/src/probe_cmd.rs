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
    let _ = args.json;
    Err("probe: not built yet".into())
}
