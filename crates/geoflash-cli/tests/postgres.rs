//! `geoflash bench|report --results postgresql://…` and `geoflash import
//! --postgis` against a throw-away PostgreSQL server on loopback (see
//! `geoflash_bench::pg_cluster`); skipped, with a message, only when the
//! server binaries cannot be found outside CI (under `CI=true` that fails).
#![cfg(feature = "postgres")]

mod common;
use common::*;

use std::path::Path;

use geoflash_bench::pg_cluster::TempCluster;

fn database(name: &str, postgis: bool) -> Option<String> {
    Some(
        TempCluster::shared()?
            .create_database(name, postgis)
            .unwrap(),
    )
}

#[test]
fn bench_and_report_with_a_postgres_results_store() {
    let Some(url) = database("cli_bench", false) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let smoke = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/smoke.toml");
    let smoke = smoke.to_str().unwrap();
    let args = [
        "bench",
        smoke,
        "--scale",
        "smoke",
        "--index",
        "plain",
        "--results",
        &url,
        "--json",
    ];
    let first = last_json(&ok(geoflash_in(&args, dir.path())));
    assert_eq!(first["executed"], 4);
    assert!(first["rows"].as_u64().unwrap() > 4);
    // resumable: everything is complete
    let second = last_json(&ok(geoflash_in(&args, dir.path())));
    assert_eq!(
        (
            second["executed"].as_u64(),
            second["skipped_complete"].as_u64()
        ),
        (Some(0), Some(4))
    );
    let out = dir.path().join("report");
    let r = last_json(&ok(geoflash_in(
        &[
            "report",
            "--results",
            &url,
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
        dir.path(),
    )));
    assert!(r["panels"].as_u64().unwrap() > 0);
    assert!(out.join("index.html").is_file());
    // nothing but the report was written locally
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1);
}

#[test]
fn an_unreachable_server_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let smoke = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/smoke.toml");
    let url = "postgresql://bench:s3cret@127.0.0.1:1/results";
    for args in [
        vec![
            "bench",
            smoke.to_str().unwrap(),
            "--scale",
            "smoke",
            "--results",
            url,
        ],
        vec!["report", "--results", url, "--out", "report"],
        vec!["import", "--postgis", url, "--table", "t", "--out", "t.csv"],
    ] {
        let out = geoflash_in(&args, dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("postgresql://bench@127.0.0.1:1/results")
                && stderr.contains("cannot connect"),
            "{stderr}"
        );
        assert!(!stderr.contains("s3cret"), "{stderr}");
        // nothing written
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{args:?}"
        );
    }
    // a malformed URL is bad input
    let out = geoflash_in(
        &[
            "report",
            "--results",
            "postgresql://u:pw@h:notaport/db",
            "--out",
            "r",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn import_from_postgis() {
    let Some(url) = database("cli_postgis", true) else {
        return;
    };
    let mut c = geoflash_bench::pg::connect(&url).unwrap();
    c.batch_execute(
        "CREATE SCHEMA osm;
         CREATE TABLE osm.buildings (osm_id integer, the_geom geometry);
         INSERT INTO osm.buildings VALUES
           (30, 'POLYGON((0 0, 4 0, 4 3, 0 0))'),
           (10, 'POINT(-1.5 2.25)'),
           (20, 'LINESTRING(1 1, 2 5)');",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.csv");
    let r = last_json(&ok(geoflash_in(
        &[
            "import",
            "--postgis",
            &url,
            "--table",
            "osm.buildings",
            "--geometry-column",
            "the_geom",
            "--id-column",
            "osm_id",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
        dir.path(),
    )));
    assert_eq!(
        (r["count"].as_u64(), r["input_format"].as_str()),
        (Some(3), Some("postgis"))
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "id,minx,miny,maxx,maxy\n10,-1.5,2.25,-1.5,2.25\n20,1,1,2,5\n30,0,0,4,3\n"
    );
    // a missing table is bad input naming it
    let o = geoflash_in(
        &[
            "import",
            "--postgis",
            &url,
            "--table",
            "nothere",
            "--out",
            "x.csv",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothere"));
    // --table is required with --postgis, and --input conflicts with it
    let o = geoflash_in(&["import", "--postgis", &url, "--out", "x.csv"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    let o = geoflash_in(
        &[
            "import",
            "--input",
            "a.csv",
            "--postgis",
            &url,
            "--table",
            "t",
            "--out",
            "x.csv",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2));
}
