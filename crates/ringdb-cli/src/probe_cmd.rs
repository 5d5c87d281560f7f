//! `ringdb probe [PATH]`: the lab's probe, and what the `auto` engine picks here and why.
//!
//! The `auto` choice is not predicted from the probe's figures: it is the real resolution
//! (`open_engine_resolved`) run over a file on the probed device, with the database's default
//! configuration and with the paper's switches (DEFER_TASKRUN and the pool's buffers
//! registered), so a seccomp filter, the sysctl or a memlock limit shows exactly as a database
//! open would meet it.

use clap::Args;
use ringdb_io::{
    open_engine_resolved, EffectiveIo, EngineKind, FixedBufferPool, IoConfig, IoError, SetupMode,
    Target, TargetOptions,
};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct ProbeArgs {
    /// A file or block device whose device to describe.
    path: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Pages of the pool the switches' resolution registers: the database's default pool.
const PROBE_POOL_PAGES: usize = 4096;
/// Bytes per page of that pool.
const PROBE_PAGE_BYTES: usize = 4096;

pub fn run(args: ProbeArgs) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(p) = &args.path {
        if !p.exists() {
            return Err(Box::new(IoError::NotFound { path: p.clone() }));
        }
    }
    let report = ringdb_lab::probe::probe(args.path.as_deref());
    let auto = AutoReport::resolve(args.path.as_deref())?;
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        if let Some(object) = value.as_object_mut() {
            object.insert("auto".into(), serde_json::to_value(&auto)?);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", report.render_table());
        print!("{}", auto.render());
    }
    Ok(())
}

/// What `auto` resolves to over one file, for two configurations.
#[derive(Serialize)]
struct AutoReport {
    /// The file the engines were opened over.
    file: PathBuf,
    /// Whether it was open with `O_DIRECT` (where `auto` falls back to libaio, not posix).
    direct: bool,
    /// `auto` as a database opens it by default.
    default: Choice,
    /// `auto` with DEFER_TASKRUN and the default pool's buffers registered.
    with_switches: Choice,
}

/// One resolution: what runs, or the error an open would fail with.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
enum Choice {
    /// Boxed: an `EffectiveIo` is large next to an error's text.
    Runs(Box<EffectiveIo>),
    Fails(String),
}

impl AutoReport {
    fn resolve(path: Option<&Path>) -> Result<AutoReport, Box<dyn std::error::Error>> {
        let probe_file = ProbeFile::open(path)?;
        let fds = [probe_file.target.fd()];
        let default = IoConfig::new(EngineKind::Auto);
        let with_switches = IoConfig {
            setup: SetupMode::Defer,
            fixed_buffers: true,
            ..IoConfig::new(EngineKind::Auto)
        };
        let pool = FixedBufferPool::new(PROBE_POOL_PAGES, PROBE_PAGE_BYTES)?;
        let iovecs = pool.iovecs();
        let choose = |config: &IoConfig, buffers: Option<&[libc::iovec]>| match open_engine_resolved(
            config, &fds, buffers,
        ) {
            Ok((_engine, effective)) => Choice::Runs(Box::new(effective)),
            Err(error) => Choice::Fails(error.to_string()),
        };
        let report = AutoReport {
            file: probe_file.path.clone(),
            direct: probe_file.target.direct,
            default: choose(&default, None),
            with_switches: choose(&with_switches, Some(&iovecs)),
        };
        // The engines are gone (dropped in `choose`) before the pool they registered.
        drop(pool);
        Ok(report)
    }

    fn render(&self) -> String {
        let mut out = format!(
            "\nauto engine (over {}, {}):\n",
            self.file.display(),
            if self.direct { "O_DIRECT" } else { "buffered" }
        );
        for (name, choice) in [
            ("default", &self.default),
            ("+defer+fixedbufs", &self.with_switches),
        ] {
            match choice {
                Choice::Runs(effective) => {
                    out += &format!("  {name:<17} picks {}\n", effective.label());
                    for fallback in effective.fallbacks.iter() {
                        out += &format!("  {:<17}   because {fallback}\n", "");
                    }
                    if effective.fallbacks.is_empty() {
                        out += &format!("  {:<17}   because everything asked for runs here\n", "");
                    }
                }
                Choice::Fails(error) => out += &format!("  {name:<17} fails: {error}\n"),
            }
        }
        out
    }
}

/// The file the resolution opens its engines over: the probed file or device (read-only), or a
/// scratch file in the probed directory (or the temporary directory), removed afterwards.
struct ProbeFile {
    target: Target,
    path: PathBuf,
    scratch: bool,
}

impl ProbeFile {
    fn open(path: Option<&Path>) -> Result<ProbeFile, IoError> {
        let scratch_dir = match path {
            Some(p) if !p.is_dir() => return Self::open_existing(p),
            Some(dir) => dir.to_path_buf(),
            None => std::env::temp_dir(),
        };
        let path = scratch_dir.join(format!(".ringdb-probe-{}", std::process::id()));
        let open = |direct| {
            Target::open(
                &path,
                TargetOptions {
                    direct,
                    write: true,
                    create: true,
                },
            )
        };
        let target = match open(true) {
            Err(IoError::DirectUnsupported { .. }) => open(false)?,
            other => other?,
        };
        Ok(ProbeFile {
            target,
            path,
            scratch: true,
        })
    }

    fn open_existing(path: &Path) -> Result<ProbeFile, IoError> {
        let options = |direct| TargetOptions {
            direct,
            write: false,
            create: false,
        };
        let target = match Target::open(path, options(true)) {
            Err(IoError::DirectUnsupported { .. }) => Target::open(path, options(false))?,
            other => other?,
        };
        Ok(ProbeFile {
            target,
            path: path.to_path_buf(),
            scratch: false,
        })
    }
}

impl Drop for ProbeFile {
    fn drop(&mut self) {
        if self.scratch {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
