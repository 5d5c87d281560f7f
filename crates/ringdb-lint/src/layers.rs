//! The engine's layers: `layers.txt` lists the top-level modules of `crates/ringdb/src`
//! lowest first, and a module may use only the modules listed before it (and itself). Being
//! one total order, it also rules out cycles among them.
//!
//! [`module_edges`] reads every file of the engine with `syn` and records which top-level
//! module each one reaches: `crate::x::...` paths in `use` trees, types and expressions, paths
//! that climb out of their module with `super::`, and the crate root's re-exports
//! (`crate::TableId` is `catalog`'s, as `lib.rs` says). Unit-test modules (`#[cfg(test)]`)
//! and doc links are not dependencies. [`layering_violations`] is the ratchet: a downward-
//! pointing edge fails unless `layering-allow.txt` lists it (the edges still to untangle,
//! a list that only shrinks), and a listed edge that no longer occurs must leave the list.

use crate::LintError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// An edge: `from` (a top-level module) uses `to`, first seen in `file`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The module that uses.
    pub from: String,
    /// The module used.
    pub to: String,
    /// A file of `from` that does (relative to the engine's `src`).
    pub file: String,
}

/// The engine's source folder.
pub fn engine_sources(root: &Path) -> PathBuf {
    root.join("crates/ringdb/src")
}

/// The declared order, lowest first, from `layers.txt`'s text (one module per line; `#`
/// starts a comment).
pub fn parse_layers(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

/// The allowed downward edges, from `layering-allow.txt`'s text (`from -> to` per line).
pub fn parse_layer_allowances(text: &str) -> Result<BTreeSet<(String, String)>, String> {
    let mut allowed = BTreeSet::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some((from, to)) = line.split_once("->") else {
            return Err(format!("line {}: expected `from -> to`", number + 1));
        };
        allowed.insert((from.trim().to_string(), to.trim().to_string()));
    }
    Ok(allowed)
}

/// Every top-level module of the engine: `src/x.rs` and `src/x/mod.rs`, `lib.rs` left out.
pub fn top_level_modules(src: &Path) -> Result<Vec<String>, LintError> {
    let read = |source| LintError::Read {
        path: src.to_path_buf(),
        source,
    };
    let mut modules = Vec::new();
    for entry in std::fs::read_dir(src).map_err(read)? {
        let path = entry.map_err(read)?.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let folder = path.is_dir() && path.join("mod.rs").is_file();
        let file = path.extension().is_some_and(|e| e == "rs") && stem != "lib";
        if folder || file {
            modules.push(stem.to_string());
        }
    }
    modules.sort();
    Ok(modules)
}

/// Every edge between two different top-level modules, once per (from, to), sorted.
pub fn module_edges(src: &Path) -> Result<Vec<Edge>, LintError> {
    let modules: BTreeSet<String> = top_level_modules(src)?.into_iter().collect();
    let exports = root_exports(&parse_file(&src.join("lib.rs"))?, &modules);
    let mut edges: BTreeMap<(String, String), String> = BTreeMap::new();
    for path in crate::rust_sources_under(src)? {
        let relative = path.strip_prefix(src).unwrap_or(&path);
        let module_path = module_path_of(relative);
        let Some(top) = module_path.first().cloned() else {
            continue; // lib.rs
        };
        let mut collector = Collector {
            module_path,
            modules: &modules,
            exports: &exports,
            found: BTreeSet::new(),
        };
        collector.visit_file(&parse_file(&path)?);
        for to in collector.found.into_iter().filter(|to| *to != top) {
            let file = relative.to_string_lossy().replace('\\', "/");
            edges.entry((top.clone(), to)).or_insert(file);
        }
    }
    Ok(edges
        .into_iter()
        .map(|((from, to), file)| Edge { from, to, file })
        .collect())
}

/// What is wrong with `edges` against the declared `layers` and the `allowed` downward edges:
/// a module without a layer, a downward edge not allowed, an allowed edge that is gone.
pub fn layering_violations(
    modules: &[String],
    layers: &[String],
    edges: &[Edge],
    allowed: &BTreeSet<(String, String)>,
) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut problems: Vec<String> = modules
        .iter()
        .filter(|m| !rank.contains_key(m.as_str()))
        .map(|m| format!("module `{m}` has no place in layers.txt"))
        .collect();
    let mut seen = BTreeSet::new();
    for edge in edges {
        let (Some(&from), Some(&to)) = (rank.get(edge.from.as_str()), rank.get(edge.to.as_str()))
        else {
            continue;
        };
        if to <= from {
            continue;
        }
        let key = (edge.from.clone(), edge.to.clone());
        if !allowed.contains(&key) {
            problems.push(format!(
                "`{}` uses `{}`, a higher layer ({}): move what it needs down, or the caller up",
                edge.from, edge.to, edge.file
            ));
        }
        seen.insert(key);
    }
    for (from, to) in allowed.difference(&seen) {
        problems.push(format!(
            "`{from} -> {to}` is allowed but no longer occurs: remove it from layering-allow.txt"
        ));
    }
    problems
}

fn parse_file(path: &Path) -> Result<syn::File, LintError> {
    let text = std::fs::read_to_string(path).map_err(|source| LintError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    syn::parse_file(&text).map_err(|e| LintError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// `db/tables.rs` -> `[db, tables]`; `db/mod.rs` -> `[db]`; `wal.rs` -> `[wal]`.
fn module_path_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The crate root's re-exports of its own modules: exported name -> module.
fn root_exports(lib: &syn::File, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut exports = BTreeMap::new();
    for item in &lib.items {
        if let syn::Item::Use(item) = item {
            let mut leaves = Vec::new();
            use_leaves(&item.tree, &mut Vec::new(), &mut leaves);
            for (path, name) in leaves {
                if let Some(first) = path.first().filter(|f| modules.contains(*f)) {
                    exports.insert(name, first.clone());
                }
            }
        }
    }
    exports
}

/// The leaves of a `use` tree: (path to the leaf, the name it is known by here).
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push((with(prefix, &n.ident), n.ident.to_string())),
        syn::UseTree::Rename(r) => out.push((with(prefix, &r.ident), r.rename.to_string())),
        syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into())),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_leaves(t, prefix, out)),
    }
}

fn with(prefix: &[String], ident: &syn::Ident) -> Vec<String> {
    let mut path = prefix.to_vec();
    path.push(ident.to_string());
    path
}

/// Collects the top-level modules one file reaches.
struct Collector<'a> {
    /// The file's module path from the crate root (`[db, tables]`).
    module_path: Vec<String>,
    modules: &'a BTreeSet<String>,
    exports: &'a BTreeMap<String, String>,
    found: BTreeSet<String>,
}

impl Collector<'_> {
    /// Notes the top-level module `segments` (a path as written) reaches, if it leaves this
    /// file's module for another top-level one.
    fn note(&mut self, segments: &[String]) {
        let absolute: Vec<String> = match segments.first().map(String::as_str) {
            Some("crate") => segments[1..].to_vec(),
            Some("super") => {
                let climbs = segments.iter().take_while(|s| *s == "super").count();
                let Some(kept) = self.module_path.len().checked_sub(climbs) else {
                    return;
                };
                let mut path = self.module_path[..kept].to_vec();
                path.extend_from_slice(&segments[climbs..]);
                path
            }
            _ => return,
        };
        let Some(first) = absolute.first() else {
            return;
        };
        if self.modules.contains(first) {
            self.found.insert(first.clone());
        } else if let Some(module) = self.exports.get(first) {
            self.found.insert(module.clone());
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "test")
    })
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, node: &'ast syn::ItemMod) {
        if is_cfg_test(&node.attrs) || node.content.is_none() {
            return;
        }
        self.module_path.push(node.ident.to_string());
        syn::visit::visit_item_mod(self, node);
        self.module_path.pop();
    }

    fn visit_item_use(&mut self, node: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&node.tree, &mut Vec::new(), &mut leaves);
        for (path, _) in leaves {
            self.note(&path);
        }
    }

    fn visit_path(&mut self, node: &'ast syn::Path) {
        let segments: Vec<String> = node.segments.iter().map(|s| s.ident.to_string()).collect();
        self.note(&segments);
        syn::visit::visit_path(self, node);
    }
}
