//! Tests of the runner: whole workloads run into an in-memory results
//! store, checked against the rows they record (every step and kind, resumed
//! and picked runs, failures, crash and recovery, grid and hybrid kinds
//! answering as the R*-tree does).
use std::path::Path;

use geoflash::geom::Rect;

use super::{run, RunOptions, RunSummary};
use crate::results::ResultsStore;
use crate::workload::{Scale, Workload};

const W: &str = include_str!("../../tests/data/workloads/runner.toml");

/// Checks that workload `text` with `from` replaced by `to` is refused with
/// an error holding every one of `needles` (`from` must be in `text`, so
/// that the edit cannot silently miss).
fn assert_refused(text: &str, from: &str, to: &str, needles: &[&str]) {
    assert!(text.contains(from), "the fixture has no {from:?}");
    let e = Workload::parse(&text.replace(from, to), Path::new("w.toml"), Scale::Smoke)
        .unwrap_err()
        .to_string();
    assert!(needles.iter().all(|n| e.contains(n)), "{e}");
}

fn count(st: &mut ResultsStore, sql: &str) -> i64 {
    crate::results::sql::Value::as_i64(&st.query(sql, &[]).unwrap()[0][0]).unwrap()
}

/// Runs workload `text` (configurations of kinds `rstar` and `kind`)
/// without failures and checks that `kind` answers the range and kNN
/// queries as the R*-tree does on the same data.
fn answers_as_the_rstar_tree(text: &str, kind: &str, configurations: usize) {
    let w = Workload::parse(text, Path::new("w.toml"), Scale::Smoke).unwrap();
    let (mut st, s) = run_clean(&w, None);
    assert_eq!(s.configurations, configurations);
    let mut answers = |kind: &str| {
        count(
            &mut st,
            &format!(
                "SELECT sum(query_results) FROM results_full WHERE index_kind = '{kind}' \
                 AND step_kind IN ('range_queries', 'knn', 'point_queries')"
            ),
        )
    };
    let (rstar, other) = (answers("rstar"), answers(kind));
    assert!(rstar > 0);
    assert_eq!(other, rstar);
}

/// Runs `w` into a results store in memory (the devices' files in
/// `workdir` when given), asserting that no configuration failed.
fn run_clean(w: &Workload, workdir: Option<&Path>) -> (ResultsStore, RunSummary) {
    let mut st = ResultsStore::in_memory().unwrap();
    let opts = RunOptions {
        workdir: workdir.map(Path::to_path_buf),
        ..RunOptions::default()
    };
    let s = run(w, &mut st, &opts).unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    (st, s)
}

/// The FOR-tree (`kind = "fortree"`) runs every step and answers as the
/// R*-tree does on the same data and windows.
#[test]
fn the_fortree_kind_answers_as_the_rstar_tree() {
    let text = W.replace(
        "name = \"plain\"\n",
        "name = \"plain\"\nkind = [\"rstar\", \"fortree\"]\n",
    );
    answers_as_the_rstar_tree(&text, "fortree", 8);
}

/// The xBR+-tree (`kind = "xbr"`, points) runs every step on every
/// store and answers as the R*-tree on the same points.
#[test]
fn the_xbr_kind_answers_as_the_rstar_tree() {
    let text = W
        .replace("geometry = \"box\"", "geometry = \"point\"")
        .replace(
            "[[step]]\nkind = \"mixed\"",
            "[[step]]\nkind = \"point_queries\"\ngroup = [1, 10]\ncount = 20\n\n[[step]]\nkind = \"mixed\"",
        )
        .replace(
            "store = \"plain\"\n",
            "store = [\"plain\", \"efind\", \"fast\"]\nkind = [\"rstar\", \"xbr\"]\n",
        );
    answers_as_the_rstar_tree(&text, "xbr", 24);
}

/// `pick` runs the one configuration at its position, as a full run
/// would have recorded it; a position past the end is an error.
#[test]
fn pick_runs_one_configuration() {
    let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
    let configs = w.configurations(&[]);
    let mut st = ResultsStore::in_memory().unwrap();
    let pick = |i| RunOptions {
        pick: Some(i),
        ..RunOptions::default()
    };
    let s = run(&w, &mut st, &pick(2)).unwrap();
    assert_eq!((s.configurations, s.executed, s.rows), (1, 1, 8));
    let key = configs[2].key(&w.name, w.scale).unwrap();
    let keys = st
        .query("SELECT config_key FROM configurations", &[])
        .unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0][0].as_str(), Some(key.as_str()));
    let again = run(&w, &mut st, &pick(2)).unwrap();
    assert_eq!((again.skipped_complete, again.executed), (1, 0));
    let err = run(&w, &mut st, &pick(4)).unwrap_err().to_string();
    assert!(err.contains("4 configurations"), "{err}");
}

#[test]
fn runs_every_configuration_and_step_and_resumes() {
    let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
    let (mut st, s) = run_clean(&w, None);
    assert_eq!(s.configurations, 4);
    // per configuration: build, 2 selectivities, 2 k, mixed, delete, crash (skipped)
    assert_eq!(s.rows, 4 * 8);
    assert_eq!(count(&mut st, "SELECT count(*) FROM results"), 32);
    assert_eq!(
        count(
            &mut st,
            "SELECT count(*) FROM results WHERE status = 'skipped'"
        ),
        4
    );
    assert_eq!(s.unsupported.len(), 4);
    // builds insert 80% of 600 objects and write pages; the device counts them
    assert_eq!(
        count(
            &mut st,
            "SELECT min(operations) FROM results WHERE step_kind = 'build'"
        ),
        480
    );
    assert!(
        count(
            &mut st,
            "SELECT min(pages_written) FROM results WHERE step_kind = 'build'"
        ) > 0
    );
    assert!(
        count(
            &mut st,
            "SELECT min(index_bytes) FROM results WHERE step_kind = 'build'"
        ) > 0
    );
    // the flash simulator's rows carry NAND counters, the memory device's do not
    assert!(count(&mut st, "SELECT min(nand_programs) FROM results_full WHERE device LIKE 'flashsim%' AND step_kind = 'build'") > 0);
    assert_eq!(
        count(
            &mut st,
            "SELECT max(device_simulated) FROM results_full WHERE device = 'mem:'"
        ),
        0
    );
    // queries: the 1% windows return more than the 0.1% ones
    let mut q = |sel: &str| {
        count(
            &mut st,
            &format!(
                "SELECT sum(query_results) FROM results WHERE parameter LIKE 'selectivity={sel};%'"
            ),
        )
    };
    let (wide, narrow) = (q("1%"), q("0.1%"));
    assert!(wide > narrow, "{wide} vs {narrow}");
    // kNN returns k per point
    assert_eq!(
        count(
            &mut st,
            "SELECT sum(query_results) FROM results WHERE parameter = 'k=5'"
        ),
        4 * 10 * 5
    );
    // delete removes a quarter of the live objects
    let live_after_mixed = count(
        &mut st,
        "SELECT max(operations) FROM results WHERE step_kind = 'delete'",
    );
    assert!(
        live_after_mixed > 100 && live_after_mixed < 150,
        "{live_after_mixed}"
    );
    // configuration rows are complete, with a device description
    assert_eq!(
        count(
            &mut st,
            "SELECT count(*) FROM configurations WHERE completed_at IS NOT NULL"
        ),
        4
    );
    assert_eq!(
        count(
            &mut st,
            "SELECT count(*) FROM configurations WHERE device_description = ''"
        ),
        0
    );
    // a second run skips everything; --force re-runs and replaces
    let s2 = run(&w, &mut st, &RunOptions::default()).unwrap();
    assert_eq!((s2.skipped_complete, s2.executed, s2.rows), (4, 0, 0));
    let s3 = run(
        &w,
        &mut st,
        &RunOptions {
            force: true,
            only: vec!["plain[device=mem:]".into()],
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!((s3.executed, s3.rows), (2, 16));
    assert_eq!(count(&mut st, "SELECT count(*) FROM results"), 32);
    assert_eq!(
        count(
            &mut st,
            "SELECT count(*) FROM runs WHERE finished_at IS NOT NULL"
        ),
        3
    );
}

/// Editing a workload's steps makes its configurations incomplete: the
/// next run executes them again and replaces their rows (it used to find
/// them complete and keep the old rows, which a report then pooled with
/// the new ones as repetitions). Unchanged steps are still found complete.
#[test]
fn changed_steps_rerun_and_replace_the_configurations() {
    let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
    let (mut st, s) = run_clean(&w, None);
    assert_eq!(s.configurations, 4);
    let again = run(&w, &mut st, &RunOptions::default()).unwrap();
    assert_eq!((again.skipped_complete, again.executed), (4, 0));
    assert!(W.contains("k = [1, 5]"));
    let edited = W.replace("k = [1, 5]", "k = [1, 7]");
    let w2 = Workload::parse(&edited, Path::new("w.toml"), Scale::Smoke).unwrap();
    let s2 = run(&w2, &mut st, &RunOptions::default()).unwrap();
    assert_eq!((s2.skipped_complete, s2.executed), (0, 4));
    assert!(s2.failures.is_empty(), "{:?}", s2.failures);
    // the new rows only: one configuration row each, no k=5 row left
    let mut get = |sql: &str| count(&mut st, sql);
    assert_eq!(get("SELECT count(*) FROM configurations"), 4);
    assert_eq!(
        get("SELECT count(*) FROM configurations WHERE completed_at IS NOT NULL"),
        4
    );
    assert_eq!(
        get("SELECT count(*) FROM results WHERE parameter = 'k=5'"),
        0
    );
    assert_eq!(
        get("SELECT count(*) FROM results WHERE parameter = 'k=7'"),
        4
    );
    assert_eq!(get("SELECT count(*) FROM results"), 32);
    // and the edited workload is now the complete one
    let s3 = run(&w2, &mut st, &RunOptions::default()).unwrap();
    assert_eq!((s3.skipped_complete, s3.executed), (4, 0));
}

#[test]
fn same_configuration_same_counts() {
    // Deterministic: the same workload twice gives the same device counts.
    let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
    let mut a = ResultsStore::in_memory().unwrap();
    let mut b = ResultsStore::in_memory().unwrap();
    run(&w, &mut a, &RunOptions::default()).unwrap();
    run(&w, &mut b, &RunOptions::default()).unwrap();
    let sql = "SELECT group_concat(pages_written || '/' || pages_read || '/' || nand_erases || '/' || query_results, ',') FROM (SELECT * FROM results ORDER BY result_id)";
    let ga = a.query(sql, &[]).unwrap();
    let gb = b.query(sql, &[]).unwrap();
    assert_eq!(ga, gb);
}

#[test]
fn a_failing_configuration_is_recorded_and_the_run_goes_on() {
    // The mixed step needs more objects than the build leaves.
    let text = W.replace("fraction = 0.8", "fraction = 0.99");
    let w = Workload::parse(&text, Path::new("w.toml"), Scale::Smoke).unwrap();
    let mut st = ResultsStore::in_memory().unwrap();
    let s = run(&w, &mut st, &RunOptions::default()).unwrap();
    assert_eq!(s.failures.len(), 4);
    assert!(
        s.failures[0].contains("objects are all inserted") || s.failures[0].contains("left"),
        "{}",
        s.failures[0]
    );
    assert_eq!(
        count(
            &mut st,
            "SELECT count(*) FROM results WHERE status = 'error' AND step_kind = 'mixed'"
        ),
        4
    );
    assert_eq!(
        count(
            &mut st,
            "SELECT count(*) FROM configurations WHERE completed_at IS NULL"
        ),
        4
    );
}

#[test]
fn bulk_build_and_windows_file() {
    let dir = tempfile::tempdir().unwrap();
    crate::windows::write_windows(
        &dir.path().join("w.csv"),
        &[
            Rect::new(0.0, 0.0, 0.5, 0.5).unwrap(),
            Rect::new(0.0, 0.0, 1.0, 1.0).unwrap(),
        ],
    )
    .unwrap();
    let text = include_str!("../../tests/data/workloads/runner-bulk.toml");
    let path = dir.path().join("b.toml");
    std::fs::write(&path, text).unwrap();
    let w = Workload::load(&path, Scale::Small).unwrap();
    let (mut st, _) = run_clean(&w, None);
    assert_eq!(
        count(
            &mut st,
            "SELECT operations FROM results WHERE step_kind = 'range_queries'"
        ),
        4
    );
    // the whole unit square holds every point, twice
    let r = count(
        &mut st,
        "SELECT query_results FROM results WHERE step_kind = 'range_queries'",
    );
    assert!(r >= 600, "{r}");
    assert!(
        count(
            &mut st,
            "SELECT pages_written FROM results WHERE step_kind = 'build'"
        ) > 0
    );
}

#[test]
fn crash_and_recover_on_a_file_device() {
    let dir = tempfile::tempdir().unwrap();
    let text = include_str!("../../tests/data/workloads/runner-crash.toml");
    let wdir = tempfile::tempdir().unwrap();
    let wfile = wdir.path().join("all.csv");
    crate::windows::write_windows(&wfile, &[Rect::new(-1.0, -1.0, 2.0, 2.0).unwrap()]).unwrap();
    let text = text.replace("WINDOWS", wfile.to_str().unwrap());
    let w = Workload::parse(&text, Path::new("c.toml"), Scale::Smoke).unwrap();
    let (mut st, s) = run_clean(&w, Some(dir.path()));
    let mut get = |sql: &str| count(&mut st, sql);
    // sync durability: every acknowledged insert survives; the query sees them all
    assert_eq!(
        get("SELECT operations FROM results_full WHERE step_kind = 'crash_and_recover' AND index_name LIKE '%sync%'"),
        50
    );
    assert_eq!(
        get("SELECT query_results FROM results_full WHERE step_kind = 'range_queries' AND index_name LIKE '%sync%'"),
        450
    );
    // no durability: between none and all of them, and the query agrees with the recovered count
    let kept = get("SELECT operations FROM results_full WHERE step_kind = 'crash_and_recover' AND index_name LIKE '%none%'");
    assert!((0..=50).contains(&kept), "{kept}");
    assert_eq!(
        get("SELECT query_results FROM results_full WHERE step_kind = 'range_queries' AND index_name LIKE '%none%'"),
        400 + kept
    );
    // recovery read the device
    assert!(get("SELECT min(pages_read) FROM results WHERE step_kind = 'crash_and_recover' AND status = 'ok'") > 0);
    // the recovered index's size is recorded like every other step's (it was 0)
    assert!(get("SELECT min(index_bytes) FROM results WHERE step_kind = 'crash_and_recover' AND status = 'ok'") > 0);
    // the plain store says it cannot
    assert_eq!(
        get("SELECT count(*) FROM results WHERE status = 'skipped'"),
        1
    );
    assert!(
        s.unsupported[0].contains("store plain"),
        "{:?}",
        s.unsupported
    );
    // nothing left behind in the work directory
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `peak_buffer_bytes` is each step's own peak, not the peak since the
/// index was created or reopened: a query step after a build reports less
/// than the build (it used to repeat the build's peak), and a query step
/// after a crash and recovery reports the read buffer its reads filled (it
/// used to report 0, eFIND noting its peak only when its write buffer grew),
/// as does a recovery, whose reads fill it too.
#[test]
fn the_buffer_peak_is_each_step_s_own() {
    let text = r#"name = "peak"
[[dataset]]
name = "u"
generator = "uniform"
geometry = "box"
count = 2000
[[index]]
name = "e"
store = "efind"
page_size = 1024
buffer = "64KiB"
device = "file"
efind = { durability = "sync" }
[[step]]
kind = "build"
fraction = 0.9
[[step]]
kind = "range_queries"
selectivity = "1%"
count = 20
[[step]]
kind = "checkpoint"
[[step]]
kind = "crash_and_recover"
[[step]]
kind = "range_queries"
selectivity = "10%"
count = 20
[[step]]
kind = "crash_and_recover"
operations = 50
"#;
    let dir = tempfile::tempdir().unwrap();
    let w = Workload::parse(text, Path::new("peak.toml"), Scale::Smoke).unwrap();
    let (mut st, _) = run_clean(&w, Some(dir.path()));
    let rows = st
        .query(
            "SELECT step_index, peak_buffer_bytes, node_reads FROM results ORDER BY step_index",
            &[],
        )
        .unwrap();
    let row = |i: i64| -> (i64, i64) {
        let r = rows
            .iter()
            .find(|r| r[0].as_i64() == Some(i))
            .unwrap_or_else(|| panic!("no row of step {i}: {rows:?}"));
        (r[1].as_i64().unwrap(), r[2].as_i64().unwrap())
    };
    let (build, _) = row(0);
    let (query, _) = row(1);
    assert!(build > 0, "{rows:?}");
    assert!(
        query < build,
        "the query step repeats the build's peak: {rows:?}"
    );
    let (after_crash, reads) = row(4);
    assert!(reads > 0, "{rows:?}");
    assert!(
        after_crash > 0 && after_crash <= 64 * 1024,
        "the query after the recovery read {reads} pages: {rows:?}"
    );
    let (replayed, _) = row(5);
    assert!(replayed > 0, "{rows:?}");
}

const GRID: &str = include_str!("../../tests/data/workloads/runner-grid.toml");

#[test]
fn grid_kinds_answer_like_the_rstar_tree() {
    let w = Workload::parse(GRID, Path::new("g.toml"), Scale::Smoke).unwrap();
    let (mut st, s) = run_clean(&w, None);
    assert_eq!(s.configurations, 7);
    // Every query step returns the same number of results on every index.
    let mut distinct = |sql: &str| count(&mut st, sql);
    for (kind, param) in [
        ("range_queries", "selectivity=0.1%;predicate=intersects"),
        ("range_queries", "selectivity=1%;predicate=intersects"),
        ("range_queries", "selectivity=100%;predicate=intersects"),
        ("knn", "k=10"),
        ("point_queries", "group=1"),
        ("point_queries", "group=10"),
        ("mixed", "insert_ratio=0.5;query=point"),
        ("mixed", "insert_ratio=0.5"),
    ] {
        assert_eq!(
            distinct(&format!(
                "SELECT count(DISTINCT query_results) FROM results \
                 WHERE step_kind = '{kind}' AND parameter = '{param}'"
            )),
            1,
            "{kind} {param}"
        );
    }
    // Point lookups find every point; the whole extent holds every live point.
    assert_eq!(
        count(
            &mut st,
            "SELECT min(query_results) FROM results WHERE step_kind = 'point_queries'"
        ),
        40
    );
    let all = count(
        &mut st,
        "SELECT max(query_results) FROM results WHERE parameter LIKE 'selectivity=100%%'",
    );
    assert!(all > 1500 && all < 3000, "{all}");
    // Batched range queries issue fewer read batches than plain ones.
    let mut batches = |q: &str| {
        count(
            &mut st,
            &format!(
                "SELECT sum(read_batches) FROM results_full WHERE index_name = 'grids[kind=gffm,grid.queries={q}]' \
                 AND step_kind = 'range_queries'"
            ),
        )
    };
    assert!(
        batches("batched") < batches("plain"),
        "{} vs {}",
        batches("batched"),
        batches("plain")
    );
    // The plain grid writes page by page, GFFM in batches.
    let mut per_batch = |k: &str| {
        count(
            &mut st,
            &format!(
                "SELECT max(pages_written / max(write_batches, 1)) FROM results_full \
                 WHERE index_name = 'grids[kind={k},grid.queries=plain]' AND step_kind = 'build'"
            ),
        )
    };
    assert!(
        per_batch("gffm") > per_batch("grid"),
        "{} vs {}",
        per_batch("gffm"),
        per_batch("grid")
    );
}

#[test]
fn grid_kinds_refuse_box_datasets_and_bulk_loads() {
    assert_refused(
        GRID,
        "geometry = \"point\"",
        "geometry = \"box\"",
        &["indexes points", "geometry = \"point\""],
    );
    let bulk = GRID.replace("fraction = 0.6", "fraction = 0.6\nmethod = \"bulk\"");
    let w = Workload::parse(&bulk, Path::new("g.toml"), Scale::Smoke).unwrap();
    let mut st = ResultsStore::in_memory().unwrap();
    let s = run(
        &w,
        &mut st,
        &RunOptions {
            only: vec!["grids[kind=gffm,grid.queries=plain]".into()],
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert!(
        s.failures[0].contains("bulk loading is not available"),
        "{:?}",
        s.failures
    );
    assert_refused(
        GRID,
        "queries = [\"plain\", \"batched\"]",
        "queries = \"sideways\"",
        &["plain or batched", "line 14"],
    );
    assert_refused(
        GRID,
        "kind = [\"grid\", \"gffm\", \"lbgrid\"]",
        "kind = \"quadtree\"",
        &["unknown index kind", "lbgrid"],
    );
}

#[test]
fn hybrid_kinds_use_the_fast_tier_and_answer_alike() {
    let text = include_str!("../../tests/data/workloads/runner-hybrid.toml");
    let w = Workload::parse(text, Path::new("h.toml"), Scale::Smoke).unwrap();
    let (mut st, _) = run_clean(&w, None);
    assert_eq!(
        count(
            &mut st,
            "SELECT count(DISTINCT query_results) FROM results WHERE step_kind = 'range_queries'"
        ),
        1
    );
    // Hybrid rows carry per-tier notes; the fast tier was used.
    let notes: Vec<String> = st
        .query(
            "SELECT message FROM results_full WHERE device LIKE 'hybrid%' AND step_kind = 'build'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row[0].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(notes.len(), 3);
    for n in &notes {
        assert!(
            n.contains("pages on fast tier")
                && !n.contains("fast: 0 pages read in 0 batches, 0 written"),
            "{n}"
        );
    }
    assert_refused(text,
        "device = \"hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700)&fast_pages=200\"",
        "device = \"flashsim:preset=p3700\"", &["hgrid", "one tier"]);
    // Every store hints its node writes: the sHR-tree on eFIND and FAST too.
    for store in ["efind", "fast"] {
        let text = text.replace(
            "kind = \"shrtree\"\nstore = \"plain\"",
            &format!("kind = \"shrtree\"\nstore = \"{store}\""),
        );
        assert!(text.contains(&format!("store = \"{store}\"")));
        Workload::parse(&text, Path::new("h.toml"), Scale::Smoke).unwrap();
    }
}

/// The shipped moving-objects workload at smoke scale: every configuration
/// (eFIND, FAST, plain; file and seed-tc58) moves and answers its windows
/// as the oracle does; the moves' row counts the moves and the log syncs
/// of the logged stores, the queries' row the windows and their median
/// latency.
#[test]
fn moving_objects_workload_runs_at_smoke_scale() {
    let dir = tempfile::tempdir().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/moving-objects.toml");
    let w = Workload::load(&path, Scale::Smoke).unwrap();
    let (mut st, s) = run_clean(&w, Some(dir.path()));
    assert_eq!(s.executed, 6);
    let mut get = |sql: &str| count(&mut st, sql);
    // per configuration: the build, the moves, the queries
    assert_eq!(get("SELECT count(*) FROM results WHERE status = 'ok'"), 18);
    let moves = "step_kind = 'move' AND parameter LIKE '%phase=moves'";
    let queries = "step_kind = 'move' AND parameter LIKE '%phase=queries'";
    assert_eq!(
        get(&format!(
            "SELECT count(*) FROM results_full WHERE {moves} AND operations = 500 \
             AND wall_time_ns > 0 AND bytes_written > 0 AND latency_median_ns IS NULL"
        )),
        6
    );
    assert_eq!(
        get(&format!(
            "SELECT count(*) FROM results_full WHERE {queries} AND operations = 50 \
             AND latency_median_ns > 0 AND query_results > 0"
        )),
        6
    );
    // a commit of a logged store syncs its log; the plain store has none
    assert_eq!(
        get(&format!(
            "SELECT count(*) FROM results_full WHERE {moves} AND store <> 'plain' AND log_syncs >= 5"
        )),
        4
    );
    assert_eq!(
        get(&format!(
            "SELECT count(*) FROM results_full WHERE {moves} AND store = 'plain' AND log_syncs = 0"
        )),
        2
    );
    // the simulator counts NAND programs
    assert_eq!(
        get(&format!(
            "SELECT count(*) FROM results_full WHERE {moves} AND device_simulated = 1 \
             AND nand_programs > 0"
        )),
        3
    );
}

/// `--force` replaces a complete configuration's rows in the transaction
/// that records its re-run complete: a re-run that fails (its build cannot
/// make its directory) or whose rows the store refuses leaves the old rows
/// and the configuration complete. (The rows used to be deleted when the
/// re-run started, so a failed or interrupted re-run lost them.)
#[test]
fn a_forced_rerun_replaces_the_rows_only_once_it_succeeded() {
    let text = r#"name = "force"
[[dataset]]
name = "u"
generator = "uniform"
geometry = "box"
count = 300
[[index]]
name = "p"
store = "plain"
page_size = 1024
buffer = "16KiB"
device = "file"
[[step]]
kind = "build"
[[step]]
kind = "range_queries"
selectivity = "1%"
count = 5
"#;
    let dir = tempfile::tempdir().unwrap();
    let w = Workload::parse(text, Path::new("force.toml"), Scale::Smoke).unwrap();
    let (mut st, _) = run_clean(&w, Some(dir.path()));
    let rows = |st: &mut ResultsStore| {
        st.query(
            "SELECT run_id, step_kind, status, query_results FROM results ORDER BY result_id",
            &[],
        )
        .unwrap()
    };
    let complete = |st: &mut ResultsStore| {
        count(
            st,
            "SELECT count(*) FROM configurations WHERE completed_at IS NOT NULL",
        )
    };
    let before = rows(&mut st);
    assert_eq!(before.len(), 2, "{before:?}");
    let force = |workdir: &Path| RunOptions {
        force: true,
        workdir: Some(workdir.to_path_buf()),
        ..RunOptions::default()
    };
    // A work directory that is a file: the re-run's build fails.
    let not_a_dir = dir.path().join("not-a-directory");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let s = run(&w, &mut st, &force(&not_a_dir)).unwrap();
    assert_eq!((s.executed, s.rows), (1, 0));
    assert!(
        s.failures.len() == 1 && s.failures[0].contains("earlier complete results are kept"),
        "{:?}",
        s.failures
    );
    assert_eq!(rows(&mut st), before);
    assert_eq!(complete(&mut st), 1);
    // The store refuses the re-run's rows: the run fails, nothing changed.
    st.batch(
        "CREATE TRIGGER fail BEFORE INSERT ON results BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
    )
    .unwrap();
    let e = run(&w, &mut st, &force(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("injected failure"), "{e}");
    assert_eq!(rows(&mut st), before);
    assert_eq!(complete(&mut st), 1);
    st.batch("DROP TRIGGER fail").unwrap();
    // A re-run that succeeds replaces them.
    let s = run(&w, &mut st, &force(dir.path())).unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!((s.executed, s.rows), (1, 2));
    let after = rows(&mut st);
    assert_eq!(after.len(), 2);
    // Written by the last run (the fourth).
    assert!(after.iter().all(|r| r[0].as_i64() == Some(4)), "{after:?}");
    assert_eq!(
        after[1][3], before[1][3],
        "the same windows on the same data"
    );
    assert_eq!(complete(&mut st), 1);
    assert_eq!(count(&mut st, "SELECT count(*) FROM configurations"), 1);
}

/// Windows and kNN points placed `on-data` are centred on objects in the
/// index when the step runs, not on objects earlier steps deleted or that
/// are not inserted yet (they were drawn from the whole dataset): every
/// tiny window on a sparse dataset hits the object it is centred on.
#[test]
fn on_data_windows_and_points_are_centred_on_live_objects() {
    let text = r#"name = "on-data"
[[dataset]]
name = "u"
generator = "uniform"
geometry = "box"
count = 2000
params = { max_size = 0.0001 }
[[index]]
name = "p"
store = "plain"
page_size = 1024
buffer = "16KiB"
device = "mem:"
[[step]]
kind = "build"
fraction = 0.5
[[step]]
kind = "delete"
fraction = 0.8
[[step]]
kind = "range_queries"
selectivity = "0.0001%"
count = 100
placement = "on-data"
"#;
    let w = Workload::parse(text, Path::new("on-data.toml"), Scale::Smoke).unwrap();
    let (mut st, _) = run_clean(&w, None);
    let ops = count(
        &mut st,
        "SELECT operations FROM results WHERE step_kind = 'range_queries'",
    );
    let hits = count(
        &mut st,
        "SELECT query_results FROM results WHERE step_kind = 'range_queries'",
    );
    assert!(ops >= 100 && hits >= ops, "{hits} results of {ops} windows");

    // kNN points: the centres of live objects only.
    let data: Vec<(u64, Rect)> = (0..100u64)
        .map(|i| {
            let x = i as f64;
            (i, Rect::new(x, 0.0, x + 0.5, 0.5).unwrap())
        })
        .collect();
    let live: Vec<(u64, Rect)> = data.iter().skip(10).step_by(7).take(5).copied().collect();
    let exec = super::exec::Exec {
        data: &data,
        extent: Rect::new(0.0, 0.0, 100.0, 0.5).unwrap(),
        next: 50,
        live: live.clone(),
        bar: indicatif::ProgressBar::hidden(),
        store: "plain".into(),
    };
    let points = exec
        .knn_points(200, crate::windows::Placement::OnData, 7)
        .unwrap();
    assert_eq!(points.len(), 200);
    for p in points {
        assert!(
            live.iter().any(|(_, r)| r.center() == p),
            "{p:?} is no live object's centre"
        );
    }
}
