//! Guard rails for the ringdb workspace, run as ordinary tests so that CI needs no extra tool.
//!
//! [`function_lengths`] measures every function (free functions, methods, trait default
//! bodies, nested functions and closures are part of the function that holds them) in the
//! workspace's Rust sources, from its first attribute-free line to its closing brace. The
//! ratchet in `tests/function_length.rs` compares that with `function-length-allow.txt`: no
//! function may be longer than [`MAX_FUNCTION_LINES`] unless it is listed there, and a listed
//! function may only get shorter (the list is rewritten with `cargo run -p ringdb-lint`).

//!
//! [`layers`] holds the engine's layering: the order of `crates/ringdb/src`'s top-level
//! modules in `layers.txt` and its ratchet, `layering-allow.txt` (`tests/layering.rs`).

#![deny(missing_docs)]

pub mod layers;

use std::fmt;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The longest a function may be, in lines, unless the allow-list names it.
pub const MAX_FUNCTION_LINES: usize = 70;

/// One function and its length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionLength {
    /// The file, relative to the workspace root, with `/` separators.
    pub file: String,
    /// `Type::method`, `Trait for Type::method`, or `function`, prefixed by inline modules.
    pub name: String,
    /// First line of the signature (1-based).
    pub line: usize,
    /// Lines from the signature to the closing brace, both included.
    pub lines: usize,
}

impl FunctionLength {
    /// The key the allow-list uses: `file::name`.
    pub fn key(&self) -> String {
        format!("{}::{}", self.file, self.name)
    }
}

impl fmt::Display for FunctionLength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}:{}", self.lines, self.key(), self.line)
    }
}

/// Why the sources could not be measured.
#[derive(Debug)]
#[non_exhaustive]
pub enum LintError {
    /// A directory or file could not be read.
    Read {
        /// What was being read.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is not valid Rust.
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
}

impl fmt::Display for LintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LintError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            LintError::Parse { path, message } => write!(f, "{}: {message}", path.display()),
        }
    }
}

impl std::error::Error for LintError {}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/ringdb-lint sits two levels below the workspace root")
        .to_path_buf()
}

/// Every `.rs` file under `root/crates`, sorted, skipping `target` folders.
pub fn rust_sources(root: &Path) -> Result<Vec<PathBuf>, LintError> {
    rust_sources_under(&root.join("crates"))
}

/// Every `.rs` file under `dir`, sorted, skipping `target` folders.
pub fn rust_sources_under(dir: &Path) -> Result<Vec<PathBuf>, LintError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    // Bound: each directory is visited once; the tree is finite and has no links followed.
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| LintError::Read {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| LintError::Read {
                path: dir.clone(),
                source,
            })?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|source| LintError::Read {
                path: path.clone(),
                source,
            })?;
            if kind.is_dir() && entry.file_name() != "target" {
                stack.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The length of every function in the workspace's Rust sources, longest first.
pub fn function_lengths(root: &Path) -> Result<Vec<FunctionLength>, LintError> {
    let mut all = Vec::new();
    for path in rust_sources(root)? {
        let text = std::fs::read_to_string(&path).map_err(|source| LintError::Read {
            path: path.clone(),
            source,
        })?;
        let file = syn::parse_file(&text).map_err(|e| LintError::Parse {
            path: path.clone(),
            message: format!("line {}: {e}", e.span().start().line),
        })?;
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let mut visitor = Collector {
            file: relative.to_string_lossy().replace('\\', "/"),
            scope: Vec::new(),
            out: &mut all,
        };
        visitor.visit_file(&file);
    }
    all.sort_by(|a, b| b.lines.cmp(&a.lines).then_with(|| a.key().cmp(&b.key())));
    Ok(all)
}

struct Collector<'a> {
    file: String,
    scope: Vec<String>,
    out: &'a mut Vec<FunctionLength>,
}

impl Collector<'_> {
    fn record(&mut self, name: &syn::Ident, signature: &syn::Signature, body_end: usize) {
        let line = signature.fn_token.span.start().line;
        let mut path = self.scope.clone();
        path.push(name.to_string());
        self.out.push(FunctionLength {
            file: self.file.clone(),
            name: path.join("::"),
            line,
            lines: body_end + 1 - line,
        });
    }
}

fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => "_".to_string(),
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, node: &'ast syn::ItemMod) {
        self.scope.push(node.ident.to_string());
        syn::visit::visit_item_mod(self, node);
        self.scope.pop();
    }

    fn visit_item_impl(&mut self, node: &'ast syn::ItemImpl) {
        let name = match &node.trait_ {
            Some((_, path, _)) => format!(
                "{} for {}",
                path.segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .unwrap_or_default(),
                type_name(&node.self_ty)
            ),
            None => type_name(&node.self_ty),
        };
        self.scope.push(name);
        syn::visit::visit_item_impl(self, node);
        self.scope.pop();
    }

    fn visit_item_trait(&mut self, node: &'ast syn::ItemTrait) {
        self.scope.push(node.ident.to_string());
        syn::visit::visit_item_trait(self, node);
        self.scope.pop();
    }

    fn visit_item_fn(&mut self, node: &'ast syn::ItemFn) {
        self.record(
            &node.sig.ident,
            &node.sig,
            node.block.brace_token.span.close().end().line,
        );
        // Nested functions count inside the one that holds them, not again on their own.
    }

    fn visit_impl_item_fn(&mut self, node: &'ast syn::ImplItemFn) {
        self.record(
            &node.sig.ident,
            &node.sig,
            node.block.brace_token.span.close().end().line,
        );
    }

    fn visit_trait_item_fn(&mut self, node: &'ast syn::TraitItemFn) {
        if let Some(block) = &node.default {
            self.record(
                &node.sig.ident,
                &node.sig,
                block.brace_token.span.close().end().line,
            );
        }
    }
}

/// One line of the allow-list: a function allowed to be longer than the limit, and its
/// length when it was listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowance {
    /// `file::name`, as [`FunctionLength::key`].
    pub key: String,
    /// The most lines it may have.
    pub lines: usize,
}

/// Parses the allow-list: one `LINES KEY` per line; `#` starts a comment.
pub fn parse_allow_list(text: &str) -> Result<Vec<Allowance>, String> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (lines, key) = line
            .split_once(' ')
            .ok_or_else(|| format!("line {}: expected `LINES file::function`", number + 1))?;
        let lines = lines
            .parse()
            .map_err(|_| format!("line {}: {lines:?} is not a line count", number + 1))?;
        out.push(Allowance {
            key: key.trim().to_string(),
            lines,
        });
    }
    Ok(out)
}

/// What the ratchet found wrong: each a line for the test's failure message.
pub fn ratchet_violations(lengths: &[FunctionLength], allowed: &[Allowance]) -> Vec<String> {
    let mut problems = Vec::new();
    for function in lengths.iter().filter(|f| f.lines > MAX_FUNCTION_LINES) {
        match allowed.iter().find(|a| a.key == function.key()) {
            None => problems.push(format!(
                "{} (line {}) is {} lines (limit {MAX_FUNCTION_LINES}): split it into named steps",
                function.key(),
                function.line,
                function.lines
            )),
            Some(a) if function.lines > a.lines => problems.push(format!(
                "{} (line {}) grew to {} lines (allowed {} while it is being shortened)",
                function.key(),
                function.line,
                function.lines,
                a.lines
            )),
            Some(_) => {}
        }
    }
    for a in allowed {
        let now = lengths.iter().find(|f| f.key() == a.key);
        match now {
            None => problems.push(format!(
                "{} is listed but no longer exists or is within the limit: remove its line \
                 (cargo run -p ringdb-lint -- --write)",
                a.key
            )),
            Some(f) if f.lines <= MAX_FUNCTION_LINES => problems.push(format!(
                "{} is now {} lines, within the limit: remove its line \
                 (cargo run -p ringdb-lint -- --write)",
                a.key, f.lines
            )),
            Some(f) if f.lines < a.lines => problems.push(format!(
                "{} shrank to {} lines: lower its allowance (cargo run -p ringdb-lint -- --write)",
                a.key, f.lines
            )),
            Some(_) => {}
        }
    }
    problems
}

/// Renders the allow-list from what the sources hold now, keeping only functions the old
/// list already allowed: the list can shrink, never grow. Returns the text and the
/// functions over the limit that the old list did not allow (those must be split).
pub fn render_allow_list(
    lengths: &[FunctionLength],
    allowed: &[Allowance],
) -> (String, Vec<FunctionLength>) {
    let mut out = String::from(
        "# Functions longer than 70 lines, each with the most lines it may have.\n\
         # This list only shrinks: split a function and its line goes; never add one.\n\
         # After shortening functions: cargo run -p ringdb-lint -- --write\n",
    );
    let mut over: Vec<&FunctionLength> = lengths
        .iter()
        .filter(|f| f.lines > MAX_FUNCTION_LINES)
        .collect();
    over.sort_by_key(|f| f.key());
    let mut refused = Vec::new();
    for f in over {
        match allowed.iter().find(|a| a.key == f.key()) {
            Some(a) => out.push_str(&format!("{} {}\n", f.lines.min(a.lines), f.key())),
            None => refused.push(f.clone()),
        }
    }
    (out, refused)
}

/// Where the allow-list lives.
pub fn allow_list_path(root: &Path) -> PathBuf {
    root.join("crates/ringdb-lint/function-length-allow.txt")
}
