//! The engine's layering (`layers.txt`): no module uses one declared above it, except the
//! edges `layering-allow.txt` lists, and that list only shrinks.

use ringdb_lint::layers::{
    engine_sources, layering_violations, module_edges, parse_layer_allowances, parse_layers,
    top_level_modules, Edge,
};
use ringdb_lint::workspace_root;
use std::collections::BTreeSet;

fn read(name: &str) -> String {
    let path = workspace_root().join("crates/ringdb-lint").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn no_module_uses_a_higher_layer_beyond_the_allow_list() {
    let src = engine_sources(&workspace_root());
    let modules = top_level_modules(&src).expect("the engine's folder reads");
    let edges = module_edges(&src).expect("the engine's sources parse");
    assert!(edges.len() > 30, "found only {} edges", edges.len());
    let layers = parse_layers(&read("layers.txt"));
    let allowed = parse_layer_allowances(&read("layering-allow.txt")).expect("it parses");
    let problems = layering_violations(&modules, &layers, &edges, &allowed);
    assert!(
        problems.is_empty(),
        "layering:\n  {}",
        problems.join("\n  ")
    );
}

fn edge(from: &str, to: &str) -> Edge {
    Edge {
        from: from.into(),
        to: to.into(),
        file: format!("{from}.rs"),
    }
}

#[test]
fn the_ratchet_catches_upward_unplaced_and_stale_entries() {
    let layers = parse_layers("low\nmid # a comment\n\nhigh\n");
    assert_eq!(layers, ["low", "mid", "high"]);
    let modules: Vec<String> = ["low", "mid", "high", "new"].map(String::from).to_vec();
    let edges = [edge("high", "low"), edge("low", "mid"), edge("mid", "high")];
    let allowed = parse_layer_allowances("mid -> high\nlow -> high\n").unwrap();
    let problems = layering_violations(&modules, &layers, &edges, &allowed);
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("module `new` has no place"), "{problems:?}");
    assert!(has("`low` uses `mid`"), "{problems:?}");
    assert!(
        has("`low -> high` is allowed but no longer occurs"),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 3, "{problems:?}");
    let none = BTreeSet::new();
    assert!(layering_violations(&[], &layers, &[edge("high", "mid")], &none).is_empty());
    assert!(parse_layer_allowances("no arrow\n").is_err());
}

#[test]
fn edges_come_from_crate_paths_super_paths_and_root_re_exports() {
    let src = engine_sources(&workspace_root());
    let edges = module_edges(&src).unwrap();
    let has = |from: &str, to: &str| edges.iter().any(|e| e.from == from && e.to == to);
    // `sharded` reaches `db` by `crate::db::...`, and `txn` through the root's re-exports.
    assert!(has("sharded", "db"), "{edges:?}");
    assert!(has("sharded", "txn"), "{edges:?}");
    // No module is its own edge.
    assert!(edges.iter().all(|e| e.from != e.to));
}
