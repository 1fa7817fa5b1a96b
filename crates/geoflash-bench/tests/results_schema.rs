//! `docs/results-schema.md` against real stores: every column of every
//! table and view is described, and every example query runs and returns
//! rows on a smoke run of `workloads/smoke.toml`, in SQLite and (when the
//! server binaries are found) in PostgreSQL.
use std::path::Path;

use geoflash_bench::results::sql::Dialect;
use geoflash_bench::results::ResultsStore;
use geoflash_bench::runner::{run, RunOptions};
use geoflash_bench::workload::{Scale, Workload};

fn doc() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results-schema.md");
    std::fs::read_to_string(p).unwrap()
}

/// The ```sql blocks of the document, each with the dialects it is for
/// (a first line `-- SQLite` or `-- PostgreSQL` names one; else both).
fn examples(doc: &str) -> Vec<(Vec<Dialect>, String)> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "```sql" {
            continue;
        }
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        let dialects = match body.first().map(|l| l.trim()) {
            Some("-- SQLite") => vec![Dialect::Sqlite],
            Some("-- PostgreSQL") => vec![Dialect::Postgres],
            _ => vec![Dialect::Sqlite, Dialect::Postgres],
        };
        out.push((dialects, body.join("\n")));
    }
    out
}

/// A smoke run: the plain store on memory and flashsim, eFIND on flashsim,
/// both datasets.
fn smoke_run(st: &mut ResultsStore) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/smoke.toml");
    let w = Workload::load(&path, Scale::Smoke).unwrap();
    let s = run(
        &w,
        st,
        &RunOptions {
            only: vec![
                "plain".into(),
                "efind[device=flashsim:preset=seed-tc58]".into(),
            ],
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!(s.executed, 6);
}

fn check(st: &mut ResultsStore) {
    let doc = doc();
    // every column of the tables and the view is named in the document
    for table in ["runs", "configurations", "results", "results_full"] {
        let cols = st.columns(table).unwrap();
        assert!(cols.len() > 5, "{table}");
        for c in cols {
            assert!(
                doc.contains(&format!("`{c}`")),
                "column {table}.{c} is not described in docs/results-schema.md"
            );
        }
    }
    let ex = examples(&doc);
    assert!(ex.len() >= 6, "{}", ex.len());
    let mut ran = 0;
    for (dialects, sql) in ex {
        if !dialects.contains(&st.dialect()) {
            continue;
        }
        let wrapped = format!(
            "SELECT count(*) FROM ({}) q",
            sql.trim().trim_end_matches(';')
        );
        let rows = st
            .query(&wrapped, &[])
            .unwrap_or_else(|e| panic!("{:?}: {e}\n{sql}", st.dialect()));
        let n = rows[0][0].as_i64().unwrap();
        assert!(n > 0, "{:?}: no rows from\n{sql}", st.dialect());
        ran += 1;
    }
    assert!(ran >= 6);
}

/// The document states the schema version the code writes, and that the
/// simulator's columns of a row measured on a device that is not simulated
/// hold NULL, as the store writes them (it said version 1, and 0).
#[test]
fn the_document_states_the_version_and_the_null_simulator_columns() {
    use geoflash_bench::results::{simulator_only, SCHEMA_VERSION};
    let doc = doc();
    let v = SCHEMA_VERSION;
    for want in [
        format!("**Schema version**: {v}."),
        format!("`geoflash results schema {v}`"),
    ] {
        assert!(
            doc.contains(&want),
            "docs/results-schema.md does not say {want}"
        );
    }
    let columns = geoflash::metrics::Stats::COLUMNS;
    let simulated: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| simulator_only(c))
        .collect();
    assert!(simulated.len() > 10, "{simulated:?}");
    for c in simulated {
        let row = doc
            .lines()
            .find(|l| l.starts_with("| ") && l.contains(&format!("`{c}`")))
            .unwrap_or_else(|| panic!("no row describes {c}"));
        assert!(
            row.contains("NULL") && !row.contains("0 on real devices"),
            "the row of {c} does not say it is NULL on devices that are not simulated: {row}"
        );
    }
}

#[test]
fn the_documented_schema_and_queries_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let mut st = ResultsStore::open(&dir.path().join("r.sqlite")).unwrap();
    smoke_run(&mut st);
    check(&mut st);
}

#[cfg(feature = "postgres")]
#[test]
fn the_documented_schema_and_queries_in_postgres() {
    let Some(cluster) = geoflash_bench::pg_cluster::TempCluster::shared() else {
        return;
    };
    let url = cluster.create_database("schema_doc", false).unwrap();
    let mut st = ResultsStore::connect(&url).unwrap();
    smoke_run(&mut st);
    check(&mut st);
}
