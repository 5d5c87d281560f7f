//! `cargo run -p ringdb-lint`: prints the functions over the limit and the totals;
//! `--write` rewrites the allow-list from what the sources hold now, keeping only functions it
//! already allowed (the list shrinks, never grows); `--init` writes it from scratch (only for
//! starting the ratchet).

use ringdb_lint::{
    allow_list_path, function_lengths, parse_allow_list, render_allow_list, workspace_root,
    Allowance, MAX_FUNCTION_LINES,
};
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = workspace_root();
    let lengths = match function_lengths(&root) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let over: Vec<_> = lengths
        .iter()
        .filter(|f| f.lines > MAX_FUNCTION_LINES)
        .collect();
    for f in &over {
        println!("{f}");
    }
    println!(
        "{} of {} functions are longer than {MAX_FUNCTION_LINES} lines ({:.1}%)",
        over.len(),
        lengths.len(),
        100.0 * over.len() as f64 / lengths.len().max(1) as f64
    );
    let init = std::env::args().any(|a| a == "--init");
    if !init && !std::env::args().any(|a| a == "--write") {
        return ExitCode::SUCCESS;
    }
    let path = allow_list_path(&root);
    let allowed: Vec<Allowance> = if init {
        over.iter()
            .map(|f| Allowance {
                key: f.key(),
                lines: f.lines,
            })
            .collect()
    } else {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        match parse_allow_list(&text) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    };
    let (text, refused) = render_allow_list(&lengths, &allowed);
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("error: {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", path.display());
    for f in &refused {
        eprintln!("not allowed (split it): {f}");
    }
    if refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
