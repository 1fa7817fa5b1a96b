//! Dataset formats from the command line: `generate --out` FlatGeobuf and
//! GeoParquet, `import` between formats, `build --input` of a geometry
//! format, and bad inputs (exit code 2 with a clear message).
mod common;
use common::*;

use std::path::Path;
use std::process::Output;

fn bad_input(out: Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(want), "wanted {want:?} in: {err}");
}

fn sorted_rects(p: &Path) -> Vec<(u64, [u64; 4])> {
    let mut v: Vec<(u64, [u64; 4])> = geoflash_bench::import::read_rects(p)
        .unwrap()
        .into_iter()
        .map(|(id, r)| {
            (
                id,
                [r.min_x(), r.min_y(), r.max_x(), r.max_y()].map(f64::to_bits),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn generate_import_and_build_through_flatgeobuf_and_geoparquet() {
    let dir = tempfile::tempdir().unwrap();
    let gen = |out: &Path| {
        geoflash(&[
            "generate",
            "--distribution",
            "gaussian",
            "--geometry",
            "box",
            "--count",
            "300",
            "--seed",
            "4",
            "--out",
            s(out),
        ])
    };
    let csv = dir.path().join("d.csv");
    let fgb = dir.path().join("d.fgb");
    // GeoParquet when built in, else a second FlatGeobuf
    let pq = dir.path().join(if cfg!(feature = "geoparquet") {
        "d.parquet"
    } else {
        "d2.fgb"
    });
    for p in [&csv, &fgb, &pq] {
        ok(gen(p));
    }
    let want = sorted_rects(&csv);
    assert_eq!(want.len(), 300);
    assert_eq!(sorted_rects(&fgb), want);
    assert_eq!(sorted_rects(&pq), want);
    bad_input(gen(&dir.path().join("d.shp")), "input format only");

    // import between the formats, in Hilbert order
    let out = dir.path().join(if cfg!(feature = "geoparquet") {
        "h.parquet"
    } else {
        "h.geojson"
    });
    let o = ok(geoflash(&[
        "import",
        "--input",
        s(&fgb),
        "--out",
        s(&out),
        "--order",
        "hilbert",
        "--json",
    ]));
    let j = last_json(&o);
    assert_eq!(j["count"], 300);
    assert_eq!(j["input_format"], "flatgeobuf");
    let format = if cfg!(feature = "geoparquet") {
        "geoparquet"
    } else {
        "geojson"
    };
    assert_eq!(j["out_format"], format);
    assert_eq!(sorted_rects(&out), want);
    let back = dir.path().join("back.fgb");
    let o = ok(geoflash(&["import", "--input", s(&out), "--out", s(&back)]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote 300 objects"));
    assert_eq!(sorted_rects(&back), want);

    // build reads the geometry formats (geometries in the object heap)
    for input in [&fgb, &pq] {
        let idx = dir.path().join(format!(
            "idx-{}",
            input.file_name().unwrap().to_str().unwrap()
        ));
        ok(geoflash(&[
            "build",
            "--input",
            s(input),
            "--index",
            s(&idx),
            "--device",
            "file?direct=false",
        ]));
    }
}

#[test]
fn bad_dataset_files_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.csv");
    let missing = dir.path().join("missing.fgb");
    bad_input(
        geoflash(&["import", "--input", s(&missing), "--out", s(&out)]),
        "missing.fgb: no such file",
    );
    let odd = dir.path().join("data.xyz");
    std::fs::write(&odd, "x").unwrap();
    bad_input(
        geoflash(&["import", "--input", s(&odd), "--out", s(&out)]),
        "unknown dataset format",
    );
    let fgb = dir.path().join("bad.fgb");
    std::fs::write(&fgb, b"fgb\x03fgb\x00\x10\x00").unwrap();
    bad_input(
        geoflash(&["import", "--input", s(&fgb), "--out", s(&out)]),
        "truncated FlatGeobuf",
    );
    let pq = dir.path().join("bad.parquet");
    std::fs::write(&pq, b"PAR1 not really").unwrap();
    bad_input(
        geoflash(&["import", "--input", s(&pq), "--out", s(&out)]),
        if cfg!(feature = "geoparquet") {
            "not a valid Parquet file"
        } else {
            "cargo feature `geoparquet`"
        },
    );
    if cfg!(feature = "geoparquet") {
        // Found by the fuzzer (`import_geoparquet`): a dictionary-encoded data
        // page without its dictionary page makes the `parquet` crate (60.1)
        // panic. The reader turns that into the file's error, and the user
        // sees no panic message before it.
        let dict = dir.path().join("dict.parquet");
        std::fs::write(
            &dict,
            include_bytes!("../../geoflash-bench/tests/data/fuzz/dictionary-page-missing.parquet"),
        )
        .unwrap();
        let got = geoflash(&["import", "--input", s(&dict), "--out", s(&out)]);
        let err = String::from_utf8_lossy(&got.stderr).into_owned();
        assert!(!err.contains("panicked"), "{err}");
        bad_input(got, "corrupt Parquet data: the parquet decoder failed");
        // Also found by fuzzing: a dictionary page claiming 1,461,714,943
        // values in 485 bytes (the decoder sized its dictionary by the claim
        // and the process aborted asking for 47 GB), and a page header whose
        // corrupt list the page reader skipped one read system call per byte
        // (57 s for a 1 KiB file; the file is now read from memory, and the
        // page headers are walked before the crate reads them).
        for (name, data, want) in [
            (
                "claims.parquet",
                &include_bytes!(
                    "../../geoflash-bench/tests/data/fuzz/dictionary-claims-two-billion.parquet"
                )[..],
                "a dictionary page claims 1461714943 values in 485 bytes",
            ),
            (
                "skip.parquet",
                &include_bytes!(
                    "../../geoflash-bench/tests/data/fuzz/page-header-long-skip.parquet"
                )[..],
                "row group 0, column 1: the header of page 0 declares a list of 161480703 elements",
            ),
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, data).unwrap();
            bad_input(
                geoflash(&["import", "--input", s(&p), "--out", s(&out)]),
                want,
            );
        }
    }
    let pbf = dir.path().join("x.osm.pbf");
    std::fs::write(&pbf, b"").unwrap();
    bad_input(
        geoflash(&[
            "import",
            "--input",
            s(&pbf),
            "--out",
            s(&out),
            "--osm-filter",
            "=yes",
        ]),
        "key=value",
    );
}

/// `import` of a real OSM extract: `--json` counts the skipped elements per
/// reason, `--skipped FILE` lists the same ones, `--osm-filter` may be
/// repeated, and the ids carry the OSM type (2 × way id, 2 × relation id + 1).
#[cfg(feature = "osm-pbf")]
#[test]
fn import_osm_reports_skipped_elements_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let pbf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../geoflash-bench/tests/data/pyrosm-test.osm.pbf");
    let out = dir.path().join("b.csv");
    let list = dir.path().join("skipped.csv");
    let run = ok(geoflash(&[
        "import",
        "--input",
        s(&pbf),
        "--out",
        s(&out),
        "--skipped",
        s(&list),
        "--json",
    ]));
    let text = String::from_utf8(run.stdout).unwrap();
    let j: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let lines: Vec<String> = std::fs::read_to_string(&list)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines[0], "osm_type,osm_id,reason");
    let rows = &lines[1..];
    assert_eq!(j["skipped"].as_u64().unwrap() as usize, rows.len());
    let by_reason = j["skipped_by_reason"].as_object().unwrap();
    assert_eq!(by_reason["missing-nodes"], 48);
    for (reason, n) in by_reason {
        let listed = rows
            .iter()
            .filter(|r| r.ends_with(&format!(",{reason}")))
            .count();
        assert_eq!(Some(listed as u64), n.as_u64(), "{reason}");
    }
    // the written ids: ways even, and none of them skipped
    let written = geoflash_bench::import::read_rects(&out).unwrap();
    assert_eq!(written.len() as u64, j["count"].as_u64().unwrap());
    for (id, _) in &written {
        let (kind, osm_id) = if id % 2 == 0 {
            ("way", id / 2)
        } else {
            ("relation", id / 2)
        };
        assert!(!rows
            .iter()
            .any(|r| r.starts_with(&format!("{kind},{osm_id},"))));
    }
    // the human summary names the reasons
    let human = ok(geoflash(&["import", "--input", s(&pbf), "--out", s(&out)]));
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(human.contains("48 missing-nodes"), "{human}");
    // two filters read what either selects: more than buildings alone
    let both = ok(import_buildings_and_highways(&pbf, &out, "--json"));
    let both: serde_json::Value = serde_json::from_str(
        String::from_utf8(both.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert!(both["count"].as_u64() > j["count"].as_u64(), "{both}");
    // osmium's reading is the default; pyrosm's builds the ways cut at the
    // extract's edge from the nodes left: 22 of the 48 here (the other 26
    // keep a ring of fewer than four points; pyrosm 0.25.0 gives 2,208, 15
    // of them rings of no area)
    assert_eq!(j["count"], 2171);
    let pyrosm = ok(geoflash(&[
        "import",
        "--input",
        s(&pbf),
        "--out",
        s(&out),
        "--osm-like",
        "pyrosm",
        "--json",
    ]));
    let pyrosm: serde_json::Value = serde_json::from_str(
        String::from_utf8(pyrosm.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(pyrosm["count"], 2171 + 22, "{pyrosm}");
    assert_eq!(
        pyrosm["skipped_by_reason"],
        serde_json::json!({"degenerate": 26}),
        "{pyrosm}"
    );
    bad_input(
        geoflash(&[
            "import",
            "--input",
            s(&pbf),
            "--out",
            s(&out),
            "--osm-like",
            "gdal",
        ]),
        "osmium",
    );
}

/// `geoflash import` of `pbf` into `out` with two filters (buildings and
/// highways) and one more argument.
#[cfg(feature = "osm-pbf")]
fn import_buildings_and_highways(pbf: &Path, out: &Path, extra: &str) -> Output {
    geoflash(&[
        "import",
        "--input",
        s(pbf),
        "--out",
        s(out),
        "--osm-filter",
        "building=*",
        "--osm-filter",
        "highway=*",
        extra,
    ])
}

/// `import` of a real OSM extract carries `osm_type`, `osm_id` and one
/// column per `--osm-filter` key into the output; a filter key that would
/// clash with the output's own columns is refused (exit code 2).
#[cfg(feature = "osm-pbf")]
#[test]
fn import_osm_writes_type_id_and_tags() {
    let dir = tempfile::tempdir().unwrap();
    let pbf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../geoflash-bench/tests/data/pyrosm-test.osm.pbf");
    let out = dir.path().join("b.geojson");
    ok(import_buildings_and_highways(&pbf, &out, "--order=random"));
    let fc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let features = fc["features"].as_array().unwrap();
    let (mut ways, mut relations, mut roads) = (0, 0, 0);
    for f in features {
        let id = f["id"].as_u64().unwrap();
        let p = &f["properties"];
        let want_type = if id % 2 == 0 { "way" } else { "relation" };
        assert_eq!(p["osm_type"], want_type, "{f}");
        assert_eq!(p["osm_id"].as_u64(), Some(id / 2), "{f}");
        // each object has the tag of a filter that selected it
        let tagged = |k: &str| p[k].as_str().is_some_and(|v| v != "no");
        assert!(tagged("building") || tagged("highway"), "{p}");
        assert!(p.get("building").is_some() && p.get("highway").is_some());
        ways += usize::from(want_type == "way");
        relations += usize::from(want_type == "relation");
        roads += usize::from(tagged("highway"));
    }
    // this extract's buildings are ways (relations are checked on the tiny file of geoflash-bench's tests)
    assert!(ways > 300 && roads > 0, "{ways} {relations} {roads}");
    bad_input(
        geoflash(&[
            "import",
            "--input",
            s(&pbf),
            "--out",
            s(&out),
            "--osm-filter",
            "geometry=*",
        ]),
        "cannot become output columns",
    );
}

/// A GeoPackage of several layers written by GeoPandas (the workbench's
/// fixture, `crates/geoflash-bench/tests/data/geopandas`): `build` and
/// `import` read the layer `--layer` names, refuse the file without it
/// (listing the layers), and `build --help` names every input format.
#[test]
fn geopackage_layers_from_the_command_line() {
    let gpkg = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../geoflash-bench/tests/data/geopandas/layers.gpkg");
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let build = |layer: &[&str]| {
        let mut args = vec!["build", "--input", s(&gpkg), "--index", s(&idx)];
        args.extend(layer);
        geoflash(&args)
    };
    bad_input(
        build(&[]),
        "4 feature layers (buildings, other, places, roads): choose one with --layer NAME",
    );
    ok(build(&["--layer", "places"]));
    assert_eq!(window_ids(&idx, "-200,-100,200,100"), vec![1, 2, 3]);
    let out = dir.path().join("b.csv");
    ok(geoflash(&[
        "import",
        "--input",
        s(&gpkg),
        "--layer",
        "buildings",
        "--out",
        s(&out),
    ]));
    let ids: Vec<u64> = sorted_rects(&out).into_iter().map(|r| r.0).collect();
    assert_eq!(ids, [20, 21]);
    bad_input(
        geoflash(&[
            "import",
            "--input",
            s(&gpkg),
            "--layer",
            "parks",
            "--out",
            s(&out),
        ]),
        "no layer \"parks\"",
    );
    let help = ok(geoflash(&["build", "--help"]));
    let help = String::from_utf8_lossy(&help.stdout);
    for format in [
        "GeoJSON",
        "FlatGeobuf",
        "GeoParquet",
        "Shapefile",
        "GeoPackage",
        ".osm.pbf",
    ] {
        assert!(help.contains(format), "{format} missing from: {help}");
    }
}

/// `build --bulk str|hilbert` reports the writing of its tree whatever the
/// input's format: a GeoJSON or FlatGeobuf input said `build: bulk
/// loading N objects` and then nothing, where a CSV input prints `build:
/// nodes written: …` lines, the last `build: nodes written: K done in …`
/// with the tree's K nodes. The same records make trees of the same
/// number of nodes, so the last lines count the same.
#[test]
fn a_bulk_load_reports_the_nodes_it_writes_whatever_the_format() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let csv = dir.path().join("d.csv");
    write_rects(&csv, 5_000);
    let mut inputs = vec![csv.clone()];
    for ext in ["geojson", "fgb"] {
        let p = dir.path().join(format!("d.{ext}"));
        ok(geoflash(&["import", "--input", s(&csv), "--out", s(&p)]));
        inputs.push(p);
    }
    for bulk in ["str", "hilbert"] {
        let mut counts = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let idx = dir.path().join(format!("idx-{bulk}-{i}"));
            let out = ok(geoflash(&[
                "build",
                "--input",
                s(input),
                "--index",
                s(&idx),
                "--bulk",
                bulk,
                "--page-size",
                "512",
            ]));
            let err = String::from_utf8_lossy(&out.stderr);
            // `build: nodes written: 1,234 done in 0.0 s (…/s)`
            let done: Vec<u64> = err
                .lines()
                .filter_map(|l| l.strip_prefix("build: nodes written: "))
                .filter_map(|l| l.split_once(" done in "))
                .map(|(n, _)| n.replace(',', "").parse().unwrap())
                .collect();
            assert_eq!(done.len(), 1, "--bulk {bulk} of {}: {err}", s(input));
            counts.push(done[0]);
        }
        assert!(counts[0] > 64, "--bulk {bulk}: {counts:?}");
        assert!(
            counts.iter().all(|&c| c == counts[0]),
            "--bulk {bulk}: nodes written from CSV, GeoJSON, FlatGeobuf: {counts:?}"
        );
    }
}
