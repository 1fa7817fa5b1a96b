//! Tests of workload files: parsing at each scale, the expansion of
//! parameter lists and `--index` filters, configuration keys, and errors
//! that name the file, the line and the key.
use std::path::Path;

use geoflash::engine::{ReadMode, StoreSpec};
use geoflash::Result;

use super::*;

const GOOD: &str = r#"
name = "t"
description = "a test"
repetitions = 2

[[dataset]]
name = "u"
generator = "uniform"
geometry = "box"
count = { smoke = 100, small = 1000 }
order = ["random", "hilbert"]
params = { max_size = 0.01 }

[[index]]
name = "plain"
store = "plain"
page_size = ["1KiB", 2048]
buffer = "64KiB"
device = "mem:"

[[index]]
name = "efind"
store = "efind"
device = "flashsim:preset=seed-tc58"
efind = { flush_policy = ["mh", "mhao"], temporal_control = "off" }

[[step]]
kind = "build"

[[step]]
kind = "range_queries"
selectivity = ["0.01%", "1%"]
count = { smoke = 5, small = 50, full = 500 }

[[step]]
kind = "knn"
k = [1, 10]
"#;

fn parse(text: &str) -> Result<Workload> {
    Workload::parse(text, Path::new("w.toml"), Scale::Smoke)
}

#[test]
fn cross_product_and_scales() {
    let w = parse(GOOD).unwrap();
    assert_eq!(w.datasets.len(), 2);
    assert_eq!(w.indexes.len(), 4);
    let names: Vec<&str> = w.indexes.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "plain[page_size=1KiB]",
            "plain[page_size=2048]",
            "efind[efind.flush_policy=mh]",
            "efind[efind.flush_policy=mhao]"
        ]
    );
    assert_eq!(w.indexes[0].options.page_size, 1024);
    // temporal_control = "off"
    assert!(
        matches!(&w.indexes[3].options.store, StoreSpec::Efind(e) if e.efind.temporal_control.is_none()),
        "{:?}",
        w.indexes[3].options.store
    );
    assert_eq!(w.configurations(&[]).len(), 2 * 4 * 2);
    assert_eq!(w.configurations(&["efind".into()]).len(), 2 * 2 * 2);
    // filters by varied parameters, with a base name or `*`
    assert_eq!(w.configurations(&["*[page_size=1KiB]".into()]).len(), 2 * 2);
    assert_eq!(
        w.configurations(&["efind[efind.flush_policy=mh]".into()])
            .len(),
        2 * 2
    );
    assert_eq!(
        w.configurations(&["plain[efind.flush_policy=mh]".into()])
            .len(),
        0
    );
    assert_eq!(w.configurations(&["*[page_size=4KiB]".into()]).len(), 0);
    match &w.steps[1] {
        Step::RangeQueries {
            windows:
                WindowSource::Generated {
                    count,
                    selectivities,
                    ..
                },
            ..
        } => {
            assert_eq!(*count, 5);
            assert_eq!(selectivities, &[1e-4, 1e-2]);
        }
        other => panic!("{other:?}"),
    }
    let DatasetSource::Generator(p) = &w.datasets[0].source else {
        panic!()
    };
    assert_eq!(p.count, 100);
    let small = Workload::parse(GOOD, Path::new("w.toml"), Scale::Small).unwrap();
    let DatasetSource::Generator(p) = &small.datasets[0].source else {
        panic!()
    };
    assert_eq!(p.count, 1000);
    // no full count for the dataset
    let e = Workload::parse(GOOD, Path::new("w.toml"), Scale::Full)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 10") && e.contains("dataset[0].count") && e.contains("full"),
        "{e}"
    );
    // every configuration's key is distinct
    let keys: std::collections::HashSet<String> = w
        .configurations(&[])
        .iter()
        .map(|c| c.key("t", Scale::Smoke).unwrap())
        .collect();
    assert_eq!(keys.len(), 16);
}

/// `reads` defaults to `single`, which stays out of the configuration key;
/// `batched` is recorded in it.
#[test]
fn reads_default_to_single_and_stay_out_of_the_key() {
    let w = parse(GOOD).unwrap();
    let c = &w.configurations(&[])[0];
    assert_eq!(c.index.reads, ReadMode::Single);
    assert!(!c.key("t", Scale::Smoke).unwrap().contains("reads"));
    let w = parse(&GOOD.replace(
        "device = \"mem:\"",
        "device = \"mem:\"\nreads = \"batched\"",
    ))
    .unwrap();
    let c = &w.configurations(&[])[0];
    assert_eq!(c.index.reads, ReadMode::Batched);
    assert!(c
        .key("t", Scale::Smoke)
        .unwrap()
        .contains("\"reads\":\"batched\""));
}

/// `tests/data/workloads/refused-edits.toml`: edits of [`GOOD`] and what
/// their errors must say.
#[derive(serde::Deserialize)]
struct RefusedEdits {
    case: Vec<RefusedEdit>,
}

/// One edit: `from` replaced by `to`, refused with an error holding `error`.
#[derive(serde::Deserialize)]
struct RefusedEdit {
    from: String,
    to: String,
    error: Vec<String>,
}

/// Each bad input gives an error naming the line and the key.
#[test]
fn errors_name_line_and_key() {
    let cases: RefusedEdits = toml::from_str(include_str!(
        "../../tests/data/workloads/refused-edits.toml"
    ))
    .unwrap();
    assert_eq!(cases.case.len(), 32);
    for RefusedEdit { from, to, error } in &cases.case {
        assert!(GOOD.contains(from.as_str()), "{from}");
        let text = GOOD.replacen(from.as_str(), to, 1);
        let e = parse(&text).unwrap_err().to_string();
        for want in error {
            assert!(e.contains(want), "{to}: {e} (wanted {want})");
        }
        assert!(e.contains("w.toml"), "{e}");
    }
    // toml syntax errors carry the line too
    let e = parse("name = \"x\"\n[[dataset]\n").unwrap_err().to_string();
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn missing_files_and_steps() {
    let text = GOOD.replace(
        "generator = \"uniform\"\ngeometry = \"box\"\ncount = { smoke = 100, small = 1000 }",
        "file = \"nowhere.csv\"",
    );
    let text = text.replace("params = { max_size = 0.01 }\n", "");
    let e = parse(&text).unwrap_err().to_string();
    assert!(
        e.contains("nowhere.csv") && e.contains("does not exist") && e.contains("line 8"),
        "{e}"
    );
    let e = parse("name = \"x\"\n").unwrap_err().to_string();
    assert!(e.contains("no [[dataset]]"), "{e}");
    let cut = GOOD.split("[[step]]").next().unwrap();
    let e = parse(cut).unwrap_err().to_string();
    assert!(e.contains("no [[step]]"), "{e}");
}

/// Issue 44, item 11: a step of more operations than the runner may hold
/// (a mixed step of 10^14 operations passed `--check`, then aborted
/// allocating 100 TB) is refused by the parser, so by `--check`, naming
/// line and key; the limit itself is accepted.
#[test]
fn steps_beyond_the_operations_limit_are_refused_at_parse() {
    let huge = 100_000_000_000_000u64;
    for (step, line) in [
        (format!("kind = \"mixed\"\noperations = {huge}"), "line 41"),
        (
            format!("kind = \"mixed\"\noperations = {{ smoke = {huge} }}"),
            "line 41",
        ),
        (
            format!("kind = \"range_queries\"\nselectivity = \"1%\"\ncount = {huge}"),
            "line 42",
        ),
        (format!("kind = \"knn\"\ncount = {huge}"), "line 41"),
        (
            format!("kind = \"crash_and_recover\"\noperations = {huge}"),
            "line 41",
        ),
    ] {
        let text = format!("{GOOD}\n[[step]]\n{step}\n");
        let e = parse(&text).unwrap_err();
        let m = e.to_string();
        assert!(e.is_user_error(), "{m}");
        assert!(m.contains(line) && m.contains("step[3]"), "{step}: {m}");
        assert!(m.contains("100000000 operations one step may run"), "{m}");
    }
    let at = format!("{GOOD}\n[[step]]\nkind = \"mixed\"\noperations = {MAX_STEP_OPERATIONS}\n");
    parse(&at).unwrap();
    assert!(crate::workload::step_operations(MAX_STEP_OPERATIONS + 1, "operations").is_err());
}

/// A move step: its defaults, its keys, and what it refuses (no commits,
/// keys of other kinds, a step outside (0, 1], moves beyond the limit).
#[test]
fn move_steps_parse_with_defaults_and_refuse_bad_keys() {
    let w = parse(&format!("{GOOD}\n[[step]]\nkind = \"move\"\ncommits = 3\n")).unwrap();
    assert_eq!(
        w.steps.last(),
        Some(&Step::Move {
            objects: None,
            moves_per_commit: 1000,
            commits: 3,
            step: 0.0005,
            queries_between: 10,
            window: 0.0001,
            seed: 1,
        })
    );
    let w = parse(&format!(
        "{GOOD}\n[[step]]\nkind = \"move\"\nobjects = 50\nmoves_per_commit = {{ smoke = 7 }}\n\
         commits = 2\nstep = 0.01\nqueries_between = 0\nwindow = \"0.1%\"\nseed = 9\n"
    ))
    .unwrap();
    assert_eq!(
        w.steps.last(),
        Some(&Step::Move {
            objects: Some(50),
            moves_per_commit: 7,
            commits: 2,
            step: 0.01,
            queries_between: 0,
            window: 0.001,
            seed: 9,
        })
    );
    for (body, words) in [
        ("", &["step[3].commits", "needs a number of commits"][..]),
        (
            "commits = 2\nfraction = 0.5",
            &["step[3].fraction", "does not apply to move"],
        ),
        (
            "commits = 2\nstep = 1.5",
            &["step[3].step", "must be in (0, 1]"],
        ),
        (
            "commits = 2\nobjects = 0",
            &["step[3].objects", "at least 1"],
        ),
        ("commits = 0", &["step[3].commits", "at least 1"]),
        (
            "commits = 1000000\nmoves_per_commit = 1000",
            &["step[3].commits", "operations one step may run"],
        ),
    ] {
        let e = parse(&format!("{GOOD}\n[[step]]\nkind = \"move\"\n{body}\n")).unwrap_err();
        let m = e.to_string();
        for w in words {
            assert!(m.contains(w), "{body}: {m}");
        }
    }
}

/// The shipped seed workloads keep their memory budgets whatever the
/// machine: the library's default follows the machine's memory
/// (`geoflash::engine::defaults::buffer`), so every configuration with a
/// store takes the budget its `[[index]]` entry names, or the workbench's
/// default (the papers' 512 KiB), never the library's.
#[test]
fn shipped_workloads_pin_their_memory_budgets() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
    let papers = geoflash::engine::parse_size(
        WORKBENCH_DEFAULTS
            .iter()
            .find(|(k, _)| *k == "buffer")
            .map(|(_, v)| *v)
            .expect("the workbench pins a buffer"),
    )
    .unwrap();
    let mut files = 0;
    let mut configs = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        files += 1;
        let w = Workload::load(&path, Scale::Smoke)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for ix in &w.indexes {
            if ix.options.store.buffer_bytes() == 0 {
                // No budget (the memory store, or a plain store written through).
                continue;
            }
            let pinned = match ix.spec.get("buffer") {
                Some(text) => geoflash::engine::parse_size(text).unwrap(),
                None => papers,
            };
            assert_eq!(
                ix.options.store.buffer_bytes() as u64,
                pinned,
                "{}: index {}",
                path.display(),
                ix.name
            );
            configs += 1;
        }
    }
    assert!(
        files >= 10 && configs >= 30,
        "{files} files, {configs} configurations"
    );
}

/// The shipped seed workloads' R*-trees reinsert the paper's 30 % (the
/// workbench's default), not the front ends' product default
/// (`geoflash::engine::defaults::REINSERT_PERCENT`), unless their
/// `[[index]]` entry names a percentage.
#[test]
fn shipped_workloads_pin_the_papers_reinsertion() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
    let mut trees = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let w = Workload::load(&path, Scale::Smoke)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for ix in &w.indexes {
            let geoflash::engine::StructureSpec::Tree(t) = ix.options.structure else {
                continue;
            };
            let pinned: u8 = ix
                .spec
                .get("reinsert_percent")
                .map_or(30, |v| v.parse().unwrap());
            assert_eq!(
                t.reinsert_percent,
                pinned,
                "{}: index {}",
                path.display(),
                ix.name
            );
            trees += 1;
        }
    }
    assert_ne!(geoflash::engine::defaults::REINSERT_PERCENT, 30);
    assert!(trees >= 30, "{trees} tree configurations");
}
