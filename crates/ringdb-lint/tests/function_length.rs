//! The function-length ratchet: no function in the workspace may be longer than 70 lines
//! unless `function-length-allow.txt` names it, and a named one may only get shorter.

use ringdb_lint::{
    allow_list_path, function_lengths, parse_allow_list, ratchet_violations, workspace_root,
    Allowance, FunctionLength,
};

#[test]
fn no_function_grows_past_the_limit_and_the_allow_list_only_shrinks() {
    let root = workspace_root();
    let lengths = function_lengths(&root).expect("the workspace's sources parse");
    assert!(
        lengths.len() > 100,
        "found only {} functions",
        lengths.len()
    );
    let text = std::fs::read_to_string(allow_list_path(&root)).expect("the allow-list exists");
    let allowed = parse_allow_list(&text).expect("the allow-list parses");
    let problems = ratchet_violations(&lengths, &allowed);
    assert!(
        problems.is_empty(),
        "function-length ratchet:\n  {}",
        problems.join("\n  ")
    );
}

fn function(name: &str, lines: usize) -> FunctionLength {
    FunctionLength {
        file: "crates/x/src/lib.rs".into(),
        name: name.into(),
        line: 1,
        lines,
    }
}

fn allow(name: &str, lines: usize) -> Allowance {
    Allowance {
        key: format!("crates/x/src/lib.rs::{name}"),
        lines,
    }
}

#[test]
fn the_ratchet_catches_new_grown_stale_and_loose_entries() {
    let lengths = [
        function("new_long", 71),
        function("grown", 90),
        function("short", 70),
        function("loose", 80),
    ];
    let allowed = [
        allow("grown", 89),
        allow("short", 75),
        allow("gone", 100),
        allow("loose", 85),
    ];
    let problems = ratchet_violations(&lengths, &allowed);
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("new_long"), "{problems:?}");
    assert!(has("grew to 90"), "{problems:?}");
    assert!(has("short is now 70"), "{problems:?}");
    assert!(has("gone is listed"), "{problems:?}");
    assert!(has("loose shrank to 80"), "{problems:?}");
    assert_eq!(problems.len(), 5, "{problems:?}");
    assert!(ratchet_violations(&[function("ok", 70)], &[]).is_empty());
}

#[test]
fn functions_are_measured_from_signature_to_closing_brace() {
    let root = workspace_root();
    let lengths = function_lengths(&root).unwrap();
    let me = lengths
        .iter()
        .find(|f| f.name == "functions_are_measured_from_signature_to_closing_brace")
        .expect("this test is measured");
    assert_eq!(me.file, "crates/ringdb-lint/tests/function_length.rs");
    assert_eq!(me.lines, 10, "{me}");
}
