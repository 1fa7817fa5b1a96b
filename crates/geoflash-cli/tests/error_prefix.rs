//! A bad record of every input format is refused (exit code 2) with
//! "invalid input:" once in its message, which names the file and the
//! record. The readers wrapped an already formatted `Error::InvalidInput`
//! in another ("invalid input: f.csv: record 2: invalid input: rectangle
//! (2, 0, 1, 1) is inverted"): the bounding-rectangle check of every
//! geometry reader, the rectangles of a CSV file, and the windows, points
//! and moves files of `query`, `knn` and `update`.
use std::path::{Path, PathBuf};

mod common;
use common::{geoflash, ok, s};

/// Asserts that `args` exit with code 2 and a message that says "invalid
/// input:" once and holds every `needle`.
fn refused_once(args: &[&str], needles: &[&str]) {
    let out = geoflash(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.matches("invalid input:").count(),
        1,
        "{args:?}: the prefix is not there once: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in {err}");
    }
}

/// `build --input input` into a new index under `dir`, with `extra` flags.
fn build_refused(dir: &Path, input: &Path, extra: &[&str], needles: &[&str]) {
    let idx = dir.join("idx");
    let mut args = vec!["build", "--input", s(input), "--index", s(&idx)];
    args.extend_from_slice(extra);
    refused_once(&args, needles);
    assert!(!idx.exists(), "{args:?} left {}", idx.display());
}

/// A coordinate written once in the test files, replaced in their bytes
/// by a value out of range (its bytes repeat none, so a compressed page
/// keeps it as it is).
const MARK: f64 = 1.234_567_890_123_456_7;

/// A GeoJSON file of two points, the second at `(MARK, 2)`.
fn geojson(dir: &Path) -> PathBuf {
    let p = dir.join("src.geojson");
    std::fs::write(
        &p,
        format!(
            r#"{{"type":"FeatureCollection","features":[
              {{"type":"Feature","id":1,"geometry":{{"type":"Point","coordinates":[0.5,0.5]}}}},
              {{"type":"Feature","id":2,"geometry":{{"type":"Point","coordinates":[{MARK:?},2]}}}}]}}"#
        ),
    )
    .unwrap();
    p
}

/// `src` converted by `geoflash import` to `name`, [`MARK`] made 1e300.
fn converted_with_a_huge_coordinate(dir: &Path, src: &Path, name: &str) -> PathBuf {
    let good = dir.join(format!("good-{name}"));
    ok(geoflash(&["import", "--input", s(src), "--out", s(&good)]));
    let bytes = std::fs::read(&good).unwrap();
    let (mark, huge) = (MARK.to_le_bytes(), 1e300f64.to_le_bytes());
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(&mark) {
            out.extend_from_slice(&huge);
            i += 8;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    assert_ne!(out, bytes, "{name}: the coordinate is not in the file");
    let p = dir.join(name);
    std::fs::write(&p, out).unwrap();
    p
}

/// A point shapefile (with its .shx) of the points `xy`, records 1, 2, …
fn shapefile(dir: &Path, xy: &[(f64, f64)]) -> PathBuf {
    let header = |words: usize| {
        let mut h = Vec::new();
        h.extend(9994i32.to_be_bytes());
        h.extend([0u8; 20]);
        h.extend((words as i32).to_be_bytes());
        h.extend(1000i32.to_le_bytes());
        h.extend(1i32.to_le_bytes());
        for v in [0.0f64, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0] {
            h.extend(v.to_le_bytes());
        }
        h
    };
    let (mut shp, mut shx) = (Vec::new(), Vec::new());
    for (i, (x, y)) in xy.iter().enumerate() {
        shx.extend(((50 + 14 * i) as i32).to_be_bytes());
        shx.extend(10i32.to_be_bytes());
        shp.extend((i as i32 + 1).to_be_bytes());
        shp.extend(10i32.to_be_bytes());
        shp.extend(1i32.to_le_bytes());
        shp.extend(x.to_le_bytes());
        shp.extend(y.to_le_bytes());
    }
    let p = dir.join("pts.shp");
    std::fs::write(&p, [header((100 + shp.len()) / 2), shp].concat()).unwrap();
    std::fs::write(
        dir.join("pts.shx"),
        [header((100 + shx.len()) / 2), shx].concat(),
    )
    .unwrap();
    p
}

/// A GeoPackage of one layer `t` of the points `xy`, fids 1, 2, …
fn geopackage(dir: &Path, xy: &[(f64, f64)]) -> PathBuf {
    let p = dir.join("pts.gpkg");
    let conn = rusqlite::Connection::open(&p).unwrap();
    conn.execute_batch(
        "CREATE TABLE gpkg_contents (table_name TEXT, data_type TEXT);
         CREATE TABLE gpkg_geometry_columns (table_name TEXT, column_name TEXT);
         INSERT INTO gpkg_contents VALUES ('t', 'features');
         INSERT INTO gpkg_geometry_columns VALUES ('t', 'geom');
         CREATE TABLE t (fid INTEGER PRIMARY KEY, geom BLOB);",
    )
    .unwrap();
    for (i, (x, y)) in xy.iter().enumerate() {
        // a GeoPackage header without envelope, then the WKB point
        let mut blob = b"GP\x00\x01".to_vec();
        blob.extend(0i32.to_le_bytes());
        blob.push(1);
        blob.extend(1u32.to_le_bytes());
        blob.extend(x.to_le_bytes());
        blob.extend(y.to_le_bytes());
        conn.execute(
            "INSERT INTO t VALUES (?1, ?2)",
            rusqlite::params![i as i64 + 1, blob],
        )
        .unwrap();
    }
    p
}

#[test]
fn a_bad_record_of_every_format_says_invalid_input_once() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    // a CSV of boxes: streamed by insertion, read whole by a bulk load,
    // streamed by a bounded-memory bulk load, converted by import
    let inverted = write(
        "inverted.csv",
        "id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,2,0,1,1\n",
    );
    let huge = write(
        "huge.csv",
        "id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,0,0,1e300,1\n",
    );
    for (csv, want) in [(&inverted, "is inverted"), (&huge, "not finite")] {
        let needles = [s(csv), "record 2", want];
        for extra in [
            &[][..],
            &["--bulk", "str"],
            &["--bulk", "hilbert", "--memory", "1MiB"],
        ] {
            build_refused(dir, csv, extra, &needles);
        }
        let out = dir.join("out.geojson");
        refused_once(&["import", "--input", s(csv), "--out", s(&out)], &needles);
    }
    // a CSV of WKT: a coordinate out of range, an empty geometry
    let wkt = write(
        "wkt.csv",
        "id,wkt\n1,\"POINT (1 2)\"\n2,\"POINT (1e300 1)\"\n",
    );
    build_refused(dir, &wkt, &[], &[s(&wkt), "record 2 (id 2)", "not finite"]);
    let wkt = write(
        "wkt-empty.csv",
        "id,wkt\n1,\"POINT (1 2)\"\n2,\"LINESTRING EMPTY\"\n",
    );
    build_refused(dir, &wkt, &[], &[s(&wkt), "record 2 (id 2)", "is empty"]);
    // GeoJSON
    let gj = write(
        "empty.geojson",
        r#"{"type":"Feature","id":4,"geometry":{"type":"LineString","coordinates":[]}}"#,
    );
    build_refused(dir, &gj, &[], &[s(&gj), "feature 0 (id 4)", "is empty"]);
    let src = geojson(dir);
    let text = std::fs::read_to_string(&src).unwrap();
    let gj = write("huge.geojson", &text.replace(&format!("{MARK:?}"), "1e300"));
    build_refused(dir, &gj, &[], &[s(&gj), "feature 1 (id 2)", "not finite"]);
    // FlatGeobuf and GeoParquet, written by import
    let fgb = converted_with_a_huge_coordinate(dir, &src, "huge.fgb");
    build_refused(dir, &fgb, &[], &[s(&fgb), "feature 1 (id 2)", "not finite"]);
    if cfg!(feature = "geoparquet") {
        let pq = converted_with_a_huge_coordinate(dir, &src, "huge.parquet");
        build_refused(dir, &pq, &[], &[s(&pq), "row 1 (id 2)", "not finite"]);
    }
    // Shapefile, GeoPackage
    let shp = shapefile(dir, &[(0.5, 0.5), (1e300, 1.0)]);
    build_refused(dir, &shp, &[], &[s(&shp), "record 2 (id 2)", "not finite"]);
    let gpkg = geopackage(dir, &[(0.5, 0.5), (1e300, 1.0)]);
    build_refused(
        dir,
        &gpkg,
        &[],
        &[s(&gpkg), "feature 1 (id 2)", "not finite"],
    );
}

#[test]
fn a_bad_window_or_point_file_says_invalid_input_once() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path();
    let data = dir.join("d.csv");
    std::fs::write(&data, "id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,2,2,3,3\n").unwrap();
    let idx = dir.join("idx");
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--buffer",
        "1MiB",
    ]));
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    for (text, want) in [
        ("minx,miny,maxx,maxy\n0,0,1,1\n2,0,1,1\n", "is inverted"),
        ("minx,miny,maxx,maxy\n0,0,1,1\nnan,0,1,1\n", "not finite"),
        (
            "minx,miny,maxx,maxy\n0,0,1,1\na,0,1,1\n",
            "is not 4 comma-separated numbers",
        ),
    ] {
        let w = write("w.csv", text);
        refused_once(
            &["query", "--index", s(&idx), "--windows", s(&w)],
            &[s(&w), "window 2", want],
        );
    }
    // `update` reads its rows as the windows are read
    let moves = write(
        "moves.csv",
        "id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,3,0,1,1\n",
    );
    refused_once(
        &["update", "--index", s(&idx), "--input", s(&moves)],
        &[s(&moves), "record 2", "is inverted"],
    );
    // its rows are rectangles, not windows
    let moves = write(
        "moves.csv",
        "id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,a,0,1,1\n",
    );
    refused_once(
        &["update", "--index", s(&idx), "--input", s(&moves)],
        &[
            s(&moves),
            "record 2",
            "rectangle \"a,0,1,1\" is not 4 comma-separated numbers",
        ],
    );
    for (text, want) in [
        ("x,y\n0,0\nnan,1\n", "not finite"),
        ("x,y\n0,0\n1e300,1\n", "not finite"),
        ("x,y\n0,0\nz,1\n", "is not 2 comma-separated numbers"),
    ] {
        let p = write("p.csv", text);
        refused_once(
            &["knn", "--index", s(&idx), "--points", s(&p)],
            &[s(&p), "point 2", want],
        );
    }
}

/// A build by insertion streams its CSV file and finds a bad record as it
/// reaches it: its error names the file and the record once each (it
/// said "build: record 3 of F cannot be read after 2 operations: invalid
/// input: F: record 3: …", the reader's error already naming both), and
/// says how far the build got; nothing is published.
#[test]
fn a_bad_record_of_a_streamed_build_names_file_and_record_once() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path();
    let csv = dir.join("bad.csv");
    std::fs::write(
        &csv,
        "id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,0,0,1,1\n3,x,0,1,1\n4,0,0,1,1\n",
    )
    .unwrap();
    let idx = dir.join("idx");
    let out = geoflash(&["build", "--input", s(&csv), "--index", s(&idx)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let want = format!(
        "geoflash: error: build stopped after 2 operations: invalid input: {}: record 3: \"x\" is not a number",
        csv.display()
    );
    assert_eq!(err.trim_end().lines().last(), Some(want.as_str()), "{err}");
    assert_eq!(err.matches(s(&csv)).count(), 1, "{err}");
    assert_eq!(err.matches("record 3").count(), 1, "{err}");
    assert!(!idx.exists(), "a failed build left {}", idx.display());
}

/// A refined query on a GeometryCollection of two overlapping polygons,
/// on which the `geo` crate's DE-9IM computation panics ("topology
/// position conflict"), is refused naming the object and the window (exit
/// code 2), with no panic message; `intersects`, decided member by member,
/// answers.
#[test]
fn a_refined_query_geo_cannot_decide_is_refused_naming_the_object() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path();
    let gj = dir.join("gc.geojson");
    std::fs::write(
        &gj,
        r#"{"type":"FeatureCollection","features":[
          {"type":"Feature","id":7,"geometry":{"type":"GeometryCollection","geometries":[
            {"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]]]},
            {"type":"Polygon","coordinates":[[[2,2],[6,2],[6,6],[2,6],[2,2]]]}]}},
          {"type":"Feature","id":8,"geometry":{"type":"Point","coordinates":[1,1]}}]}"#,
    )
    .unwrap();
    let idx = dir.join("idx");
    ok(geoflash(&["build", "--input", s(&gj), "--index", s(&idx)]));
    let query = |window: &str, predicate: &str| {
        let args = [
            "query",
            "--index",
            s(&idx),
            "--window",
            window,
            "--predicate",
            predicate,
            "--refine",
        ];
        geoflash(&args)
    };
    for (window, predicate) in [("-1,-1,7,7", "contains"), ("2.5,2.5,3,3", "within")] {
        let out = query(window, predicate);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{predicate}: {err}");
        assert!(!err.contains("panicked"), "{predicate}: {err}");
        assert!(
            err.contains(&format!("refining object 7 against the window {window}: "))
                && err.contains(&format!(
                    "the exact predicate {predicate} is not evaluated on a GeometryCollection"
                )),
            "{predicate}: {err}"
        );
    }
    let out = ok(query("1,1,5,5", "intersects"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("window 0: 2"));
}
