//! The workbench from the command line: `bench`, `report`, `import`, the
//! shipped workload files, and bad input (exit code 2, errors naming the
//! line and key, nothing written to the results store).
mod common;
use common::*;

use std::path::{Path, PathBuf};

fn workloads_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads")
}

fn shipped() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(workloads_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn smoke_workload_runs_resumes_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.sqlite");
    let smoke = workloads_dir().join("smoke.toml");
    let args = [
        "bench",
        s(&smoke),
        "--results",
        s(&db),
        "--scale",
        "smoke",
        "--workdir",
        s(dir.path()),
        "--json",
    ];
    let out = ok(geoflash(&args));
    let summary = last_json(&out);
    let configurations = summary["configurations"].as_u64().unwrap();
    // Standard error is a pipe here: one line per configuration, not bars.
    let err = String::from_utf8_lossy(&out.stderr);
    let lines = err
        .lines()
        .filter(|l| l.contains(": configuration "))
        .count();
    assert_eq!(lines as u64, configurations, "{err}");
    assert!(configurations >= 4, "{summary}");
    assert_eq!(summary["executed"], configurations);
    assert!(summary["failures"].as_array().unwrap().is_empty());
    let rows = summary["rows"].as_u64().unwrap();
    assert!(rows >= configurations * 6, "{summary}");
    // The second run finds everything complete.
    let again = last_json(&ok(geoflash(&args)));
    assert_eq!(again["skipped_complete"], configurations);
    assert_eq!(again["rows"], 0);
    // The report: an HTML page linking SVG plots and the tables.
    let report_dir = dir.path().join("report");
    let out = ok(geoflash(&[
        "report",
        "--results",
        s(&db),
        "--out",
        s(&report_dir),
        "--baseline",
        "plain",
        "--json",
    ]));
    let r = last_json(&out);
    assert!(r["panels"].as_u64().unwrap() >= 6, "{r}");
    let html = std::fs::read_to_string(report_dir.join("index.html")).unwrap();
    let plots = r["plots"].as_array().unwrap();
    assert!(!plots.is_empty());
    for p in plots {
        let p = PathBuf::from(p.as_str().unwrap());
        assert!(html.contains(p.file_name().unwrap().to_str().unwrap()));
        assert!(std::fs::read_to_string(&p).unwrap().contains("<svg"));
    }
    assert!(
        html.contains("crash_and_recover"),
        "the crash step has a panel"
    );
    let csv = std::fs::read_to_string(report_dir.join("summary.csv")).unwrap();
    assert!(csv.lines().count() > 10);
    // Bad metric: exit 2.
    let out = geoflash(&[
        "report",
        "--results",
        s(&db),
        "--out",
        s(&report_dir),
        "--metric",
        "colour",
    ]);
    assert_eq!(out.status.code(), Some(2));
    // The store as a positional argument: the same report.
    let positional = dir.path().join("report-positional");
    let p = last_json(&ok(geoflash(&[
        "report",
        s(&db),
        "--out",
        s(&positional),
        "--baseline",
        "plain",
        "--json",
    ])));
    assert_eq!(
        (p["panels"].clone(), p["plots"].as_array().map(Vec::len)),
        (r["panels"].clone(), Some(plots.len()))
    );
    // Both forms at once, or neither: usage errors (exit 2).
    for args in [
        vec![
            "report",
            s(&db),
            "--results",
            s(&db),
            "--out",
            s(&positional),
        ],
        vec!["report", "--out", s(&positional)],
    ] {
        let out = geoflash(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn every_shipped_workload_checks_at_every_scale() {
    let dir = tempfile::tempdir().unwrap();
    let files = shipped();
    for name in [
        "smoke",
        "efind-vs-plain",
        "efind-vs-fast",
        "efind-ablation",
        "hdd-vs-ssd",
        "simulator-vs-ssd",
        "fast-policies",
    ] {
        assert!(
            files
                .iter()
                .any(|f| f.file_stem().unwrap().to_str() == Some(name)),
            "workloads/{name}.toml is missing"
        );
    }
    for f in &files {
        for scale in ["smoke", "small", "full"] {
            let out = ok(geoflash(&[
                "bench",
                s(f),
                "--results",
                s(&dir.path().join("unused.sqlite")),
                "--scale",
                scale,
                "--check",
                "--json",
            ]));
            let j = last_json(&out);
            assert!(
                j["configurations"].as_u64().unwrap() >= 1,
                "{}: {j}",
                f.display()
            );
        }
    }
    // --check writes no results store
    assert!(!dir.path().join("unused.sqlite").exists());
}

/// Every shipped workload runs at smoke scale; the largest sweeps run a
/// subset: one or two index configurations each.
#[test]
fn shipped_workloads_run_at_smoke_scale() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.sqlite");
    for (name, only) in [
        (
            "efind-vs-plain",
            vec!["plain[page_size=4KiB]", "efind[page_size=4KiB]"],
        ),
        (
            "efind-vs-fast",
            vec![
                "efind[page_size=2KiB,device=flashsim:preset=seed-tc58,efind.durability=none]",
                "fast[page_size=2KiB,device=file,fast.durability=group:64,10]",
            ],
        ),
        (
            "fast-policies",
            vec!["fast[fast.policy=fast-star]", "fast[fast.policy=flush-all]"],
        ),
        (
            "efind-ablation",
            vec!["policy[efind.flush_policy=mhao]", "temporal"],
        ),
        (
            "hdd-vs-ssd",
            vec!["rstar[page_size=4KiB,reinsert=30,device=hddsim:preset=7200rpm]"],
        ),
        (
            "thesis-grid",
            vec![
                "gffm[device=flashsim:preset=nvme,grid.queries=batched]",
                "lbgrid[device=file,grid.queries=plain]",
                "rstar[device=flashsim:preset=nvme]",
            ],
        ),
        (
            "thesis-hybrid",
            vec![
                "hgrid[grid.special=true]",
                "gffm[device=flashsim:preset=xpoint]",
                "shrtree",
            ],
        ),
        (
            "simulator-vs-ssd",
            vec![
                "rstar[page_size=2KiB,device=flashsim:preset=seed-tc58]",
                "fast-rstar[page_size=2KiB,device=flashsim:preset=seed-tc58]",
            ],
        ),
    ] {
        let w = workloads_dir().join(format!("{name}.toml"));
        let mut args = vec![
            "bench".to_string(),
            s(&w).to_string(),
            "--results".into(),
            s(&db).to_string(),
            "--scale".into(),
            "smoke".into(),
            "--workdir".into(),
            s(dir.path()).to_string(),
            "--json".into(),
        ];
        for o in &only {
            args.push("--index".into());
            args.push(o.to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(geoflash(&args));
        let j = last_json(&out);
        // one configuration per index and insertion order
        let executed = j["executed"].as_u64().unwrap();
        assert!(executed >= only.len() as u64, "{name}: {j}");
        assert!(j["failures"].as_array().unwrap().is_empty(), "{name}: {j}");
        assert!(j["rows"].as_u64().unwrap() >= 2 * executed, "{name}: {j}");
    }
}

/// A crash and recovery on the FAST store's log, as on eFIND's.
#[test]
fn fast_crash_and_recover_runs_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.sqlite");
    let smoke = std::fs::read_to_string(workloads_dir().join("smoke.toml")).unwrap();
    let text = smoke
        .replacen("store = \"efind\"", "store = \"fast\"", 1)
        .replacen(
            "efind = { durability = \"sync\" }",
            "fast = { durability = \"sync\", policy = \"fast\" }",
            1,
        );
    assert!(text.contains("fast = {"), "smoke.toml changed shape");
    let w = dir.path().join("fast-smoke.toml");
    std::fs::write(&w, text).unwrap();
    let out = ok(geoflash(&[
        "bench",
        s(&w),
        "--results",
        s(&db),
        "--scale",
        "smoke",
        "--workdir",
        s(dir.path()),
        "--index",
        "efind[device=file]",
        "--json",
    ]));
    let j = last_json(&out);
    assert!(j["failures"].as_array().unwrap().is_empty(), "{j}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (status, recovered): (String, i64) = conn
        .query_row(
            "SELECT status, operations FROM results WHERE step_kind = 'crash_and_recover'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "ok");
    assert!(recovered > 0);
}

#[test]
fn bad_workloads_exit_2_with_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.sqlite");
    let smoke = std::fs::read_to_string(workloads_dir().join("smoke.toml")).unwrap();
    let cases = [
        (
            smoke.replacen("buffer_policy = \"lru\"", "buffer_policy = \"mru\"", 1),
            vec!["index[0].buffer_policy", "line "],
        ),
        (
            smoke.replacen("kind = \"knn\"", "kind = \"knn\"\nwindows = \"w.csv\"", 1),
            vec!["windows", "does not apply to knn"],
        ),
        (
            smoke.replacen("name = \"smoke\"", "name = \"smoke\"\nbogus = 1", 1),
            vec!["unknown field", "bogus", "line "],
        ),
        (
            smoke.replacen("generator = \"uniform\"", "file = \"missing.csv\"", 1),
            vec!["missing.csv", "does not exist"],
        ),
        ("name = \"x\"\n[[dataset]\n".to_string(), vec!["line 2"]),
    ];
    for (text, wants) in cases {
        let p = dir.path().join("w.toml");
        std::fs::write(&p, &text).unwrap();
        let out = geoflash(&["bench", s(&p), "--results", s(&db), "--scale", "smoke"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        for want in wants {
            assert!(err.contains(want), "{err} (wanted {want})");
        }
    }
    // a bad workload writes nothing to the results store
    assert!(!db.exists());
    let out = geoflash(&["bench", "nowhere.toml", "--results", s(&db)]);
    assert_ne!(out.status.code(), Some(0));
    let out = geoflash(&[
        "bench",
        s(&workloads_dir().join("smoke.toml")),
        "--results",
        s(&db),
        "--scale",
        "huge",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// An `--index` that names no configuration is bad input: exit 2 with the
/// workload's index names, under `--check` too (it listed 0 configurations
/// and exited 0), and before the results store is created (the run used to
/// create an empty file first).
#[test]
fn an_index_naming_nothing_exits_2_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.sqlite");
    let smoke = workloads_dir().join("smoke.toml");
    for check in [true, false] {
        let mut args = vec![
            "bench",
            s(&smoke),
            "--results",
            s(&db),
            "--scale",
            "smoke",
            "--index",
            "typo",
        ];
        if check {
            args.push("--check");
        }
        let out = geoflash(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--check {check}: {err}");
        for want in ["typo", "plain", "efind", "efind[device=file]"] {
            assert!(err.contains(want), "--check {check}: {err} (wanted {want})");
        }
        assert!(
            !db.exists(),
            "--check {check}: the results store was created"
        );
    }
    // a name that matches still checks
    let out = ok(geoflash(&[
        "bench",
        s(&smoke),
        "--results",
        s(&db),
        "--scale",
        "smoke",
        "--index",
        "efind",
        "--check",
        "--json",
    ]));
    assert_eq!(last_json(&out)["configurations"], 4);
    assert!(!db.exists());
}

#[test]
fn import_converts_and_build_reads_wkt_csv() {
    let dir = tempfile::tempdir().unwrap();
    let wkt = dir.path().join("in.csv");
    let mut text = String::from("id,wkt\n");
    for i in 0..50u32 {
        let x = f64::from(i % 10);
        let y = f64::from(i / 10);
        text.push_str(&format!(
            "{i},\"POLYGON(({x} {y},{} {y},{} {},{x} {},{x} {y}))\"\n",
            x + 0.5,
            x + 0.5,
            y + 0.5,
            y + 0.5
        ));
    }
    std::fs::write(&wkt, text).unwrap();
    let gj = dir.path().join("out.geojson");
    let out = ok(geoflash(&[
        "import",
        "--input",
        s(&wkt),
        "--out",
        s(&gj),
        "--order",
        "hilbert",
        "--json",
    ]));
    assert_eq!(last_json(&out)["count"], 50);
    let csv = dir.path().join("out.csv");
    ok(geoflash(&["import", "--input", s(&gj), "--out", s(&csv)]));
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 51);
    // build reads the WKT CSV directly
    let idx = dir.path().join("idx");
    ok(geoflash(&[
        "build",
        "--input",
        s(&wkt),
        "--index",
        s(&idx),
        "--device",
        "file?direct=false",
    ]));
    // a corrupt input: exit 2 naming the record
    std::fs::write(&wkt, "id,wkt\n1,\"POLYGON((0 0,\"\n").unwrap();
    let out = geoflash(&["import", "--input", s(&wkt), "--out", s(&csv)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("record 1"));
}

/// A GeoPackage at `path` with a feature layer of points per `(name,
/// points)`, written with SQLite as GDAL lays one out (the tables the
/// reader reads: `gpkg_contents`, `gpkg_geometry_columns`, one table per
/// layer with an integer primary key `fid` and GeoPackage binary
/// geometries: `GP`, version 0, little-endian header without envelope, SRS
/// id 0, then WKB).
fn write_gpkg(path: &Path, layers: &[(&str, &[(f64, f64)])]) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE gpkg_contents (table_name TEXT PRIMARY KEY, data_type TEXT NOT NULL);
         CREATE TABLE gpkg_geometry_columns (table_name TEXT NOT NULL, column_name TEXT NOT NULL,
             geometry_type_name TEXT NOT NULL, srs_id INTEGER NOT NULL, z TINYINT, m TINYINT);",
    )
    .unwrap();
    for (name, points) in layers {
        conn.execute_batch(&format!(
            "CREATE TABLE {name} (fid INTEGER PRIMARY KEY, geom BLOB);
             INSERT INTO gpkg_contents VALUES ('{name}', 'features');
             INSERT INTO gpkg_geometry_columns VALUES ('{name}', 'geom', 'POINT', 0, 0, 0);"
        ))
        .unwrap();
        for (i, (x, y)) in points.iter().enumerate() {
            let mut blob = b"GP\x00\x01".to_vec();
            blob.extend(0i32.to_le_bytes());
            blob.extend([1u8, 1, 0, 0, 0]);
            blob.extend(x.to_le_bytes());
            blob.extend(y.to_le_bytes());
            conn.execute(
                &format!("INSERT INTO {name} (fid, geom) VALUES (?1, ?2)"),
                rusqlite::params![i as i64 + 1, blob],
            )
            .unwrap();
        }
    }
}

/// Issue 46: a workload's `file =` dataset names a GeoPackage layer with
/// `layer =` (as `--layer` on the command line), checked when the workload
/// is read; the run reads that layer.
#[test]
fn a_workload_dataset_reads_the_named_geopackage_layer() {
    let dir = tempfile::tempdir().unwrap();
    let gpkg = dir.path().join("two.gpkg");
    let small: &[(f64, f64)] = &[(0.0, 0.0), (1.0, 1.0)];
    let big: &[(f64, f64)] = &[
        (10.0, 10.0),
        (11.0, 12.0),
        (13.0, 11.0),
        (14.0, 14.0),
        (15.0, 10.0),
    ];
    write_gpkg(&gpkg, &[("small", small), ("big", big)]);
    std::fs::write(
        dir.path().join("pts.csv"),
        "id,minx,miny,maxx,maxy\n1,0,0,0,0\n",
    )
    .unwrap();
    let workload = |dataset: &str| {
        format!(
            "name = \"gpkg\"\n\n[[dataset]]\nname = \"d\"\n{dataset}\n\n\
             [[index]]\nname = \"plain\"\nstore = \"plain\"\ndevice = \"mem:\"\n\n\
             [[step]]\nkind = \"build\"\n"
        )
    };
    let run = |dataset: &str| {
        let w = dir.path().join("w.toml");
        std::fs::write(&w, workload(dataset)).unwrap();
        let db = dir.path().join(format!("r{}.sqlite", dataset.len()));
        let out = geoflash(&["bench", s(&w), "--results", s(&db), "--json"]);
        (out, db)
    };

    let (out, db) = run("file = \"two.gpkg\"\nlayer = \"big\"");
    let j = last_json(&ok(out));
    assert!(j["failures"].as_array().unwrap().is_empty(), "{j}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ops: i64 = conn
        .query_row(
            "SELECT operations FROM results WHERE step_kind = 'build'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ops, big.len() as i64, "the build read layer big");

    for (dataset, wanted) in [
        (
            "file = \"two.gpkg\"",
            "2 feature layers (big, small): choose one with --layer NAME",
        ),
        (
            "file = \"two.gpkg\"\nlayer = \"parks\"",
            "no layer \"parks\"; its feature layers: big, small",
        ),
        (
            "file = \"pts.csv\"\nlayer = \"big\"",
            "applies to GeoPackage files (.gpkg) only",
        ),
        (
            "generator = \"uniform\"\ncount = 10\nlayer = \"big\"",
            "applies to a dataset file",
        ),
    ] {
        let (out, _) = run(dataset);
        assert_eq!(out.status.code(), Some(2), "{dataset}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(wanted) && err.contains("w.toml"),
            "{dataset}: {err}"
        );
    }
}
