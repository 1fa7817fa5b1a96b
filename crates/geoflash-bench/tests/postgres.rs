//! The PostgreSQL results store and PostGIS datasets against a real server:
//! a throw-away cluster on loopback ([`TempCluster::shared`]), one database
//! per test. Skipped, with a message, only when the server binaries cannot
//! be found outside CI; under `CI=true` that fails (scripts/setup.sh
//! installs them for `make test`).
#![cfg(feature = "postgres")]

use std::path::Path;

use geoflash::engine::Geometry;
use geoflash::engine::{bounding_rect, to_wkb};
use geoflash::geom::Rect;
use geoflash::metrics::Stats;
use geoflash_bench::generate::InsertionOrder;
use geoflash_bench::pg_cluster::TempCluster;
use geoflash_bench::postgis::PostgisSource;
use geoflash_bench::report::{write_report, ReportOptions};
use geoflash_bench::results::sql::Value;
use geoflash_bench::results::{ConfigRow, ResultsLocation, ResultsStore, StepRow};
use geoflash_bench::runner::{run, RunOptions};
use geoflash_bench::workload::{Scale, Workload};

/// A new database of the shared cluster (`None`: no server binaries outside CI, skip).
fn database(name: &str, postgis: bool) -> Option<String> {
    let cluster = TempCluster::shared()?;
    Some(cluster.create_database(name, postgis).unwrap())
}

const W: &str = r#"
name = "pg-test"
[[dataset]]
name = "u"
generator = "uniform"
geometry = "box"
count = 500
order = ["random", "hilbert"]
[[index]]
name = "plain"
store = "plain"
page_size = 1024
buffer = "16KiB"
device = ["mem:", "flashsim:preset=seed-tc58"]
[[index]]
name = "efind"
store = "efind"
page_size = 1024
buffer = "16KiB"
device = "flashsim:preset=seed-tc58"
# group commit (the default) is timed: durability none keeps the counts deterministic
efind = { durability = "none" }
[[step]]
kind = "build"
fraction = 0.8
[[step]]
kind = "range_queries"
selectivity = ["0.1%", "1%"]
count = 10
[[step]]
kind = "knn"
k = [1, 5]
count = 5
[[step]]
kind = "mixed"
operations = 50
[[step]]
kind = "delete"
fraction = 0.2
"#;

/// The deterministic columns of every result row, in a fixed order.
const ROWS: &str = "SELECT dataset, insertion_order, index_name, device, step_index, step_kind, parameter, status,
        operations, pages_read, pages_written, nand_reads, nand_programs, nand_erases, sim_time_ns,
        query_candidates, query_results, index_bytes, node_writes_by_level, device_simulated, dataset_count
 FROM results_full ORDER BY dataset, insertion_order, index_name, step_index, parameter";

fn count(st: &mut ResultsStore, sql: &str) -> i64 {
    st.query(sql, &[]).unwrap()[0][0].as_i64().unwrap()
}

#[test]
fn bench_into_postgres_equals_sqlite_and_resumes() {
    let Some(url) = database("bench", false) else {
        return;
    };
    let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.sqlite");
    let mut lite = ResultsStore::open(&db).unwrap();
    let mut pg = ResultsStore::open_location(&ResultsLocation::parse(&url)).unwrap();
    let a = run(&w, &mut lite, &RunOptions::default()).unwrap();
    let b = run(&w, &mut pg, &RunOptions::default()).unwrap();
    assert!(b.failures.is_empty(), "{:?}", b.failures);
    assert_eq!((a.executed, a.rows), (b.executed, b.rows));
    assert_eq!((b.executed, b.rows), (6, 6 * 7));
    // the same rows, value for value (types mapped: BIGINT, DOUBLE PRECISION, TEXT)
    let rows_lite = lite.query(ROWS, &[]).unwrap();
    let rows_pg = pg.query(ROWS, &[]).unwrap();
    assert_eq!(rows_lite.len(), 42);
    assert_eq!(rows_lite, rows_pg);
    // the same tables and view with the same columns
    for t in ["runs", "configurations", "results", "results_full"] {
        assert_eq!(lite.columns(t).unwrap(), pg.columns(t).unwrap(), "{t}");
    }
    // resumable: a second run skips everything; --force on some replaces their rows
    let again = run(&w, &mut pg, &RunOptions::default()).unwrap();
    assert_eq!(
        (again.skipped_complete, again.executed, again.rows),
        (6, 0, 0)
    );
    let forced = run(
        &w,
        &mut pg,
        &RunOptions {
            force: true,
            only: vec!["plain[device=mem:]".into()],
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!((forced.executed, forced.rows), (2, 14));
    assert_eq!(count(&mut pg, "SELECT count(*) FROM results"), 42);
    assert_eq!(pg.query(ROWS, &[]).unwrap(), rows_lite);
    assert_eq!(
        count(
            &mut pg,
            "SELECT count(*) FROM runs WHERE finished_at IS NOT NULL"
        ),
        3
    );
    // reopening an existing PostgreSQL store keeps it
    drop(pg);
    let mut pg = ResultsStore::connect(&url).unwrap();
    assert_eq!(count(&mut pg, "SELECT count(*) FROM configurations"), 6);
    // the report from PostgreSQL equals the report from SQLite (deterministic metrics)
    let opts = ReportOptions {
        metrics: vec![
            "pages_written".into(),
            "pages_read".into(),
            "nand_erases".into(),
            "query_results".into(),
        ],
        baseline: Some("plain".into()),
        headline: None,
    };
    let out_lite = dir.path().join("lite");
    let out_pg = dir.path().join("pg");
    let sl = write_report(&ResultsLocation::Sqlite(db.clone()), &out_lite, &opts).unwrap();
    let sp = write_report(&ResultsLocation::parse(&url), &out_pg, &opts).unwrap();
    assert_eq!(sl.panels, sp.panels);
    for f in ["summary.csv", "summary.md"] {
        let a = std::fs::read_to_string(out_lite.join(f)).unwrap();
        let b = std::fs::read_to_string(out_pg.join(f)).unwrap();
        assert_eq!(a, b, "{f}");
    }
    let html = std::fs::read_to_string(&sp.html).unwrap();
    assert!(
        html.contains("postgresql://geoflash@127.0.0.1"),
        "the page names its store"
    );
    // a role that may only read reports from the store (opening it changes nothing)
    pg.batch(
        "CREATE ROLE reader LOGIN; GRANT SELECT ON runs, configurations, results, results_full TO reader",
    )
    .unwrap();
    let reader = url.replace("geoflash@", "reader@");
    let out_reader = dir.path().join("reader");
    write_report(&ResultsLocation::parse(&reader), &out_reader, &opts).unwrap();
    assert_eq!(
        std::fs::read_to_string(out_reader.join("summary.csv")).unwrap(),
        std::fs::read_to_string(out_pg.join("summary.csv")).unwrap()
    );
}

/// Configurations copied from SQLite stores into PostgreSQL (what the
/// workers of `geoflash.dask.run` do): the rows of a direct run, each
/// configuration written once even when several copies race.
#[test]
fn configurations_copied_into_postgres_are_written_once() {
    let Some(url) = database("copy", false) else {
        return;
    };
    let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
    let mut lite = ResultsStore::in_memory().unwrap();
    run(&w, &mut lite, &RunOptions::default()).unwrap();
    let keys: Vec<String> = w
        .configurations(&[])
        .iter()
        .map(|c| c.key(&w.name, w.scale).unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    // four threads copy every configuration, each from a store of its own
    let written: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (url, keys, w) = (&url, &keys, &w);
                let path = dir.path().join(format!("{t}.sqlite"));
                s.spawn(move || {
                    let mut own = ResultsStore::open(&path).unwrap();
                    run(w, &mut own, &RunOptions::default()).unwrap();
                    let mut pg = ResultsStore::connect(url).unwrap();
                    keys.iter()
                        .filter(|k| pg.copy_configuration(&mut own, k).unwrap().is_some())
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(written.iter().sum::<usize>(), keys.len(), "{written:?}");
    let mut pg = ResultsStore::connect(&url).unwrap();
    assert_eq!(pg.query(ROWS, &[]).unwrap(), lite.query(ROWS, &[]).unwrap());
    assert_eq!(
        count(
            &mut pg,
            "SELECT count(*) FROM configurations WHERE completed_at IS NOT NULL"
        ),
        6
    );
}

#[test]
fn every_stats_column_round_trips_in_postgres() {
    let Some(url) = database("columns", false) else {
        return;
    };
    let mut st = ResultsStore::connect(&url).unwrap();
    let run_id = st
        .begin_run("w", "w.toml", "name='w'", "smoke", "test")
        .unwrap();
    let c = st
        .begin_configuration(
            run_id,
            &ConfigRow {
                key: "k",
                workload: "w",
                scale: "smoke",
                dataset: "d",
                insertion_order: "random",
                dataset_count: u64::MAX,
                index_name: "plain",
                index_kind: "rstar",
                split: "quadratic",
                page_size: 4096,
                store: "plain",
                buffer_bytes: 1024,
                buffer_policy: "lru",
                device: "mem:",
                repetition: 3,
                config_json: "{\"a\": \"é\"}",
            },
        )
        .unwrap();
    let mut s = Stats::new("build");
    s.operations = 7;
    s.io.pages_written = u64::MAX;
    s.build_rewrite_factor = 1.25;
    s.device_simulated = true;
    s.node_writes_by_level = vec![3, 1];
    let row = StepRow {
        message: "it's \"quoted\"",
        ..StepRow::ok("build", &s)
    };
    st.record(run_id, c, &row).unwrap();
    assert!(!st.is_complete("k").unwrap());
    st.complete_configuration(c).unwrap();
    assert!(st.is_complete("k").unwrap());
    let rows = st
        .query(
            "SELECT operations, pages_written, build_rewrite_factor, node_writes_by_level, device_simulated,
                    dataset_count, repetition, message, label
             FROM results_full WHERE index_name = ?1",
            &["plain".into()],
        )
        .unwrap();
    assert_eq!(
        rows,
        vec![vec![
            Value::Int(7),
            Value::Int(i64::MAX),
            Value::Real(1.25),
            Value::Text("[3,1]".into()),
            Value::Int(1),
            Value::Int(i64::MAX),
            Value::Int(3),
            Value::Text("it's \"quoted\"".into()),
            Value::Text("build".into()),
        ]]
    );
    // every Stats column, and the schema version in the table's comment
    let cols = st.columns("results").unwrap();
    for name in Stats::COLUMNS {
        assert!(cols.iter().any(|c| c == name), "{name}");
    }
    let v = st
        .query(
            "SELECT obj_description(to_regclass('results'), 'pg_class')",
            &[],
        )
        .unwrap();
    assert_eq!(
        v,
        vec![vec![Value::Text(format!(
            "geoflash results schema {}",
            geoflash_bench::results::SCHEMA_VERSION
        ))]]
    );
    // a dropped Stats column comes back when the store is opened again
    st.batch("DROP VIEW results_full; ALTER TABLE results DROP COLUMN log_records")
        .unwrap();
    drop(st);
    let mut st = ResultsStore::connect(&url).unwrap();
    assert!(st
        .columns("results_full")
        .unwrap()
        .iter()
        .any(|c| c == "log_records"));
    // a newer schema is refused
    st.batch("COMMENT ON TABLE results IS 'geoflash results schema 99'")
        .unwrap();
    drop(st);
    let e = ResultsStore::connect(&url).unwrap_err().to_string();
    assert!(e.contains("schema version 99"), "{e}");
}

/// A failure while a step is recorded (a trigger refusing its second row)
/// leaves none of that step's rows and the configuration incomplete; the
/// next run re-runs it and ends with what a clean run records.
fn failure_mid_run(st: &mut ResultsStore, install: &str, remove: &str) {
    let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
    st.batch(install).unwrap();
    let e = run(&w, st, &RunOptions::default()).unwrap_err().to_string();
    assert!(e.contains("injected failure"), "{e}");
    // the first configuration recorded its build, then failed on the range step's 1% row
    assert_eq!(
        count(
            st,
            "SELECT count(*) FROM results WHERE step_kind = 'range_queries'"
        ),
        0
    );
    assert_eq!(
        count(st, "SELECT count(*) FROM results WHERE step_kind = 'build'"),
        1
    );
    assert_eq!(
        count(
            st,
            "SELECT count(*) FROM configurations WHERE completed_at IS NULL"
        ),
        1
    );
    st.batch(remove).unwrap();
    let s = run(&w, st, &RunOptions::default()).unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!(s.executed, 6);
    assert_eq!(count(st, "SELECT count(*) FROM results"), 42);
    assert_eq!(
        count(
            st,
            "SELECT count(*) FROM results WHERE step_kind = 'range_queries'"
        ),
        12
    );
    assert_eq!(
        count(
            st,
            "SELECT count(*) FROM configurations WHERE completed_at IS NULL"
        ),
        0
    );
}

#[test]
fn a_failure_mid_run_leaves_whole_steps_in_sqlite() {
    let mut st = ResultsStore::in_memory().unwrap();
    failure_mid_run(
        &mut st,
        "CREATE TRIGGER fail BEFORE INSERT ON results WHEN NEW.parameter LIKE 'selectivity=1%;%'
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        "DROP TRIGGER fail",
    );
}

#[test]
fn a_failure_mid_run_leaves_whole_steps_in_postgres() {
    let Some(url) = database("failure", false) else {
        return;
    };
    let mut st = ResultsStore::connect(&url).unwrap();
    failure_mid_run(
        &mut st,
        "CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.parameter LIKE 'selectivity=1%;%' THEN RAISE EXCEPTION 'injected failure'; END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER fail BEFORE INSERT ON results FOR EACH ROW EXECUTE FUNCTION fail();",
        "DROP TRIGGER fail ON results; DROP FUNCTION fail()",
    );
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    // Nothing listens on port 1 of the loopback interface.
    let url = "postgresql://bench:s3cret@127.0.0.1:1/results";
    let e = ResultsStore::open_location(&ResultsLocation::parse(url))
        .unwrap_err()
        .to_string();
    assert!(e.contains("postgresql://bench@127.0.0.1:1/results"), "{e}");
    assert!(e.contains("cannot connect"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let e = write_report(
        &ResultsLocation::parse(url),
        &dir.path().join("out"),
        &ReportOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cannot connect") && !e.contains("s3cret"), "{e}");
    assert!(!dir.path().join("out").exists());
    // a workload whose PostGIS dataset is unreachable records nothing
    let text = format!(
        "name = \"unreachable\"\n[[dataset]]\nname = \"b\"\npostgis = {{ url = \"{url}\", table = \"t\" }}\n\
         [[index]]\nname = \"p\"\ndevice = \"mem:\"\n[[step]]\nkind = \"build\"\n"
    );
    let w = Workload::parse(&text, Path::new("u.toml"), Scale::Smoke).unwrap();
    let mut st = ResultsStore::in_memory().unwrap();
    let e = run(&w, &mut st, &RunOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot connect") && !e.contains("s3cret"), "{e}");
    assert_eq!(count(&mut st, "SELECT count(*) FROM runs"), 0);
}

/// Geometries of every kind with ids, as a dataset to put into PostGIS.
fn geometries() -> Vec<(u64, Geometry)> {
    use geo_types::{coord, LineString, MultiPolygon, Point, Polygon};
    let recs = geoflash_bench::generate::generate(&geoflash_bench::generate::GenParams::new(
        "uniform".parse().unwrap(),
        geoflash_bench::generate::GeometryKind::Box,
        300,
        4,
    ))
    .unwrap();
    let mut out: Vec<(u64, Geometry)> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let g = Geometry::Polygon(
                geo_types::Rect::new(
                    coord! { x: r.min_x(), y: r.min_y() },
                    coord! { x: r.max_x(), y: r.max_y() },
                )
                .to_polygon(),
            );
            (1000 + 3 * i as u64, g)
        })
        .collect();
    out.push((7, Geometry::Point(Point::new(0.125, -3.5))));
    out.push((
        8,
        Geometry::LineString(LineString::from(vec![(1.0, 1.0), (2.5, -1.0), (0.1, 9.0)])),
    ));
    out.push((
        9,
        Geometry::MultiPolygon(MultiPolygon(vec![Polygon::new(
            LineString::from(vec![(5.0, 5.0), (6.0, 5.0), (6.0, 7.0), (5.0, 5.0)]),
            vec![],
        )])),
    ));
    out
}

fn load_table(url: &str, table: &str, objects: &[(u64, Geometry)]) {
    let mut c = geoflash_bench::pg::connect(url).unwrap();
    c.batch_execute(&format!(
        "CREATE TABLE {table} (osm_id integer PRIMARY KEY, name text, geom geometry)"
    ))
    .unwrap();
    for (id, g) in objects {
        c.execute(
            &format!("INSERT INTO {table} VALUES ($1, 'x', ST_GeomFromWKB($2))"),
            &[&(*id as i32), &to_wkb(g).unwrap()],
        )
        .unwrap();
    }
}

#[test]
fn postgis_table_imports_with_the_same_mbrs() {
    let Some(url) = database("postgis", true) else {
        return;
    };
    let objects = geometries();
    load_table(&url, "buildings", &objects);
    let src = PostgisSource {
        url: url.clone(),
        table: "buildings".into(),
        geometry_column: "geom".into(),
        id_column: Some("osm_id".into()),
    };
    let mut expected: Vec<(u64, Rect)> = objects
        .iter()
        .map(|(id, g)| (*id, bounding_rect(g).unwrap()))
        .collect();
    expected.sort_by_key(|x| x.0);
    // read directly: id order, the geometries themselves
    let read = geoflash_bench::postgis::read(&src).unwrap();
    let mut want = objects.clone();
    want.sort_by_key(|x| x.0);
    assert_eq!(read, want);
    // imported to CSV rectangles and to GeoJSON: bit-exact MBRs
    let dir = tempfile::tempdir().unwrap();
    for out in ["b.csv", "b.geojson", "b.fgb"] {
        let p = dir.path().join(out);
        let r = geoflash_bench::import::import_postgis(&src, &p, InsertionOrder::AsGenerated, 1)
            .unwrap();
        assert_eq!(
            (r.count, r.input_format.as_str()),
            (objects.len(), "postgis")
        );
        assert_eq!(
            geoflash_bench::import::read_rects(&p).unwrap(),
            expected,
            "{out}"
        );
    }
    // without an id column: positions in physical (insertion) order
    let by_position = geoflash_bench::postgis::read_rects(&PostgisSource {
        id_column: None,
        ..src.clone()
    })
    .unwrap();
    let positional: Vec<(u64, Rect)> = objects
        .iter()
        .enumerate()
        .map(|(i, (_, g))| (i as u64, bounding_rect(g).unwrap()))
        .collect();
    assert_eq!(by_position, positional);
    // as a workload dataset: the same answers as the same data from a file
    let csv = dir.path().join("b.csv");
    let text = |source: &str| {
        format!(
            "name = \"pg-dataset\"\n[[dataset]]\nname = \"b\"\n{source}\n\
             [[index]]\nname = \"p\"\nstore = \"plain\"\ndevice = \"mem:\"\n\
             [[step]]\nkind = \"build\"\n\
             [[step]]\nkind = \"range_queries\"\nselectivity = \"1%\"\ncount = 20\n"
        )
    };
    let results = |source: &str| {
        let w = Workload::parse(&text(source), &dir.path().join("w.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(&w, &mut st, &RunOptions::default()).unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        let rows = st
            .query(
                "SELECT dataset_count, step_kind, operations, query_results, pages_written FROM results_full ORDER BY step_index",
                &[],
            )
            .unwrap();
        let cfg = st
            .query("SELECT config_json FROM configurations", &[])
            .unwrap();
        (rows, cfg)
    };
    let (from_pg, cfg) = results(&format!(
        "postgis = {{ url = \"{}\", table = \"buildings\", geometry_column = \"geom\", id_column = \"osm_id\" }}",
        url.replace("geoflash@", "geoflash:not-needed@")
    ));
    let (from_file, _) = results(&format!("file = \"{}\"", csv.display()));
    assert_eq!(from_pg, from_file);
    assert_eq!(from_pg[0][0], Value::Int(objects.len() as i64));
    // the password is not recorded
    let cfg = cfg[0][0].as_str().unwrap().to_string();
    assert!(
        cfg.contains("\"postgis\"") && !cfg.contains("not-needed"),
        "{cfg}"
    );
}

#[test]
fn postgis_errors_name_the_table_and_row() {
    let Some(url) = database("postgis_errors", true) else {
        return;
    };
    let mut c = geoflash_bench::pg::connect(&url).unwrap();
    c.batch_execute(
        "CREATE TABLE t (id bigint, geom geometry);
         INSERT INTO t VALUES (1, 'POINT(1 2)'), (2, NULL);
         CREATE TABLE neg (id bigint, geom geometry);
         INSERT INTO neg VALUES (-5, 'POINT(1 2)');
         CREATE TABLE dup (id bigint, geom geometry);
         INSERT INTO dup VALUES (3, 'POINT(1 2)'), (3, 'POINT(2 2)');
         CREATE TABLE empty (id bigint, geom geometry);
         CREATE TABLE nogeom (id bigint, geom integer);
         INSERT INTO nogeom VALUES (1, 1);",
    )
    .unwrap();
    let err = |table: &str, geom: &str| {
        geoflash_bench::postgis::read(&PostgisSource {
            url: url.clone(),
            table: table.into(),
            geometry_column: geom.into(),
            id_column: Some("id".into()),
        })
        .unwrap_err()
        .to_string()
    };
    let e = err("t", "geom");
    assert!(
        e.contains("PostGIS table t") && e.contains("row 2 (id 2) has no geometry"),
        "{e}"
    );
    assert!(err("neg", "geom").contains("id -5 is negative"));
    assert!(err("dup", "geom").contains("duplicate id 3"));
    assert!(err("empty", "geom").contains("no rows"));
    let e = err("missing", "geom");
    assert!(e.contains("\"missing\" does not exist"), "{e}");
    let e = err("t", "nothere");
    assert!(e.contains("nothere"), "{e}");
    let e = err("nogeom", "geom");
    assert!(e.contains("st_asbinary"), "{e}");
}
