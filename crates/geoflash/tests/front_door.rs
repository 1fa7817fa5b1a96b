//! The front ends (the command line, the workbench, the Python package)
//! reach the library only through its API: `engine`, `geom`, `metrics`,
//! `defaults`, the names `lib.rs` re-exports, and (in test support) `testenv`. This test reads their
//! sources and fails on any path into the layers beneath
//! (`geoflash::store::…`, `geoflash::storage::…`, …), naming file and line.
use std::path::{Path, PathBuf};

/// What a front end may name right after `geoflash::`.
const API: &[&str] = &[
    "engine",
    "geom",
    "metrics",
    "defaults",
    "Error",
    "ErrorKind",
    "Result",
    "Index",
    "IndexOptions",
    "IndexSpec",
    "KeyStyle",
    "SpecError",
    "SpatialIndex",
    "BatchDurability",
    // Test support (the `test-support` feature): the test suites' case
    // counts and prerequisites, used by the other crates' tests and
    // geoflash-bench's `pg_cluster`.
    "testenv",
];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The first path segment of each item of a `use geoflash::{…}` group
/// starting at `text` (just after the `{`).
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut item = String::new();
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        if depth == 0 {
            item.push(c);
        }
    }
    heads.push(item);
    heads
        .iter()
        .map(|h| {
            h.trim()
                .split("::")
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .filter(|h| !h.is_empty())
        .collect()
}

/// The names after `geoflash::` in `text` that are not the API, with their line.
fn violations(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let pat = "geoflash::";
    let mut at = 0;
    while let Some(i) = text[at..].find(pat) {
        let start = at + i;
        at = start + pat.len();
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let line = text[..start].matches('\n').count() + 1;
        let rest = &text[at..];
        let heads = match rest.strip_prefix('{') {
            Some(group) => group_heads(group),
            None => vec![rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()],
        };
        for h in heads {
            if !API.contains(&h.as_str()) {
                found.push((line, h));
            }
        }
    }
    found
}

#[test]
fn the_front_ends_import_only_the_api() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in [
        "geoflash-cli/src",
        "geoflash-cli/tests",
        "geoflash-bench/src",
        "geoflash-bench/tests",
        "geoflash-py/src",
    ] {
        rust_files(&crates.join(dir), &mut files);
    }
    assert!(files.len() > 50, "the front ends' sources were not found");
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable source");
        for (line, name) in violations(&text) {
            bad.push(format!("{}:{line}: geoflash::{name}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "front ends reach beneath the API (use geoflash::engine, geom, metrics):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_sees_paths_and_groups() {
    assert!(violations("use geoflash::engine::{Index, Predicate};").is_empty());
    assert!(violations("use geoflash::{Error, Index, engine::device::PageDevice};").is_empty());
    assert!(violations("let x = my_geoflash::store::X;").is_empty());
    assert_eq!(
        violations("a\nuse geoflash::store::log::Durability;"),
        vec![(2, "store".to_string())]
    );
    assert_eq!(
        violations("use geoflash::{reserve, Error, storage::{PageDevice, PageId}};"),
        vec![(1, "reserve".to_string()), (1, "storage".to_string())]
    );
}
