//! Files written by other tools (`tests/data/geopandas`, written by
//! GeoPandas 1.2 through pyarrow and pyogrio/GDAL with its `make.py`):
//! GeoParquet with every compression codec GeoPandas offers, GeoParquet
//! with the GeoArrow encodings, and a GeoPackage of two layers. Each reads
//! back as the geometries of `expected.csv`, bit for bit, with the ids of
//! its `id` column; damaged GeoPackages are errors naming the feature.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use geoflash::engine::{from_wkb, Geometry};
use geoflash_bench::import::{self, ReadOptions};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/geopandas")
        .join(name)
}

/// `expected.csv`: id → geometry (from its hexadecimal WKB).
fn expected() -> BTreeMap<u64, Geometry> {
    let mut rdr = csv::Reader::from_path(data("expected.csv")).unwrap();
    rdr.records()
        .map(|r| {
            let r = r.unwrap();
            let hex = &r[1];
            let wkb: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (
                r[0].parse().unwrap(),
                from_wkb(&wkb, "expected.csv").unwrap(),
            )
        })
        .collect()
}

/// Checks that `got` holds the expected geometries of `ids`, in that order.
fn assert_objects(got: &[(u64, Geometry)], ids: &[u64], what: &str) {
    let want = expected();
    let got_ids: Vec<u64> = got.iter().map(|o| o.0).collect();
    assert_eq!(got_ids, ids, "{what}: ids");
    for (id, g) in got {
        assert_eq!(g, &want[id], "{what}: object {id}");
    }
}

#[cfg(feature = "geoparquet")]
#[test]
fn geoparquet_with_every_codec() {
    let all: Vec<u64> = expected().keys().copied().collect();
    for codec in ["snappy", "zstd", "gzip", "brotli", "lz4", "none"] {
        let got = import::read_objects(&data(&format!("wkb-{codec}.parquet")))
            .unwrap_or_else(|e| panic!("{codec}: {e}"));
        assert_objects(&got, &all, codec);
    }
}

#[cfg(feature = "geoparquet")]
#[test]
fn geoparquet_with_geoarrow_encodings() {
    let cases: [(&str, &[u64]); 6] = [
        ("point", &[1, 2, 3]),
        ("linestring", &[10, 11]),
        ("polygon", &[20, 21]),
        ("multipoint", &[30]),
        ("multilinestring", &[40]),
        ("multipolygon", &[50]),
    ];
    for (kind, ids) in cases {
        let got = import::read_objects(&data(&format!("geoarrow-{kind}.parquet")))
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_objects(&got, ids, kind);
    }
}

fn read_layer(path: &Path, layer: Option<&str>) -> geoflash::Result<Vec<(u64, Geometry)>> {
    let opts = ReadOptions {
        layer: layer.map(str::to_string),
        ..ReadOptions::default()
    };
    Ok(import::read_dataset(path, &opts)?.objects)
}

#[test]
fn geopackage_layers() {
    let p = data("layers.gpkg");
    let cases: [(&str, &[u64]); 4] = [
        ("buildings", &[20, 21]),
        ("roads", &[10, 11]),
        ("places", &[1, 2, 3]),
        ("other", &[30, 40, 50]),
    ];
    for (layer, ids) in cases {
        let got = read_layer(&p, Some(layer)).unwrap_or_else(|e| panic!("{layer}: {e}"));
        assert_objects(&got, ids, layer);
    }
    let e = read_layer(&p, None).unwrap_err().to_string();
    assert!(
        e.contains("layers.gpkg")
            && e.contains("4 feature layers (buildings, other, places, roads)")
            && e.contains("--layer NAME"),
        "{e}"
    );
    let e = read_layer(&p, Some("parks")).unwrap_err().to_string();
    assert!(
        e.contains("no layer \"parks\"; its feature layers: buildings, other, places, roads"),
        "{e}"
    );
}

/// A copy of `layers.gpkg` in `dir` with all layers but `buildings` dropped and
/// `sql` run on it (GDAL's R-tree triggers call functions that only GDAL
/// defines, so they are dropped first).
fn altered_gpkg(dir: &Path, sql: &str) -> PathBuf {
    let p = dir.join("altered.gpkg");
    std::fs::copy(data("layers.gpkg"), &p).unwrap();
    let conn = rusqlite::Connection::open(&p).unwrap();
    let triggers: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for t in triggers {
        conn.execute_batch(&format!("DROP TRIGGER \"{t}\""))
            .unwrap();
    }
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF;
         DELETE FROM gpkg_geometry_columns WHERE table_name <> 'buildings';
         DELETE FROM gpkg_contents WHERE table_name <> 'buildings';",
    )
    .unwrap();
    conn.execute_batch(sql).unwrap();
    p
}

/// A WKB GeometryCollection or MultiPoint with an empty member (an empty
/// point: NaN coordinates) reads as its other members instead of being
/// refused whole; one of empty members only is an empty geometry, refused
/// as the header's empty flag is.
#[test]
fn geopackage_collections_with_empty_members() {
    use geoflash::engine::bounding_rect;
    use geoflash::geom::Rect;
    let dir = tempfile::tempdir().unwrap();
    // header: GP, version 0, flags 1 (little-endian, no envelope), SRS id 0
    let head = "4750000100000000";
    let empty = "0101000000000000000000F87F000000000000F87F";
    let point = "0101000000000000000000F03F0000000000000040"; // POINT (1 2)
    for (kind, count, members) in [
        ("07", "02", format!("{empty}{point}")),
        ("07", "02", format!("{point}{empty}")),
        ("04", "03", format!("{empty}{point}{empty}")),
    ] {
        let blob = format!("{head}01{kind}000000{count}000000{members}");
        let sql = format!("UPDATE buildings SET geom = X'{blob}' WHERE id = 21");
        let got = read_layer(&altered_gpkg(dir.path(), &sql), None).unwrap();
        assert_eq!(got[1].0, 21);
        assert_eq!(
            bounding_rect(&got[1].1).unwrap(),
            Rect::new(1.0, 2.0, 1.0, 2.0).unwrap(),
            "{blob}"
        );
    }
    for blob in [
        format!("{head}010700000001000000{empty}"),
        format!("{head}010400000002000000{empty}{empty}"),
    ] {
        let sql = format!("UPDATE buildings SET geom = X'{blob}' WHERE id = 21");
        let e = read_layer(&altered_gpkg(dir.path(), &sql), None).unwrap_err();
        let m = e.to_string();
        assert!(
            e.is_user_error() && m.contains("feature 1 (id 21)") && m.contains("geometry is empty"),
            "{blob}: {m}"
        );
    }
}

#[test]
fn damaged_geopackages_are_errors_naming_the_feature() {
    let dir = tempfile::tempdir().unwrap();
    // one layer left: read without naming it
    let p = altered_gpkg(dir.path(), "");
    assert_objects(&read_layer(&p, None).unwrap(), &[20, 21], "one layer");
    // an empty polygon: the header's empty flag (0x10), little-endian, no envelope
    let cases = [
        (
            "UPDATE buildings SET geom = X'4750001100000000010300000000000000' WHERE id = 21",
            "layer \"buildings\", feature 1 (id 21): the geometry is empty",
        ),
        (
            "UPDATE buildings SET geom = NULL WHERE id = 21",
            "feature 1 (id 21) has no geometry",
        ),
        (
            "UPDATE buildings SET geom = X'47500001' WHERE id = 20",
            "feature 0 (id 20): 4 bytes, too short",
        ),
        (
            "UPDATE buildings SET geom = X'4750002100000000' WHERE id = 20",
            "feature 0 (id 20): an extended GeoPackage geometry",
        ),
        (
            "UPDATE buildings SET geom = X'4750000100000000FFFF' WHERE id = 20",
            "feature 0 (id 20): bad WKB",
        ),
        (
            "UPDATE buildings SET id = -3 WHERE id = 20",
            "feature 0: id -3 is negative",
        ),
        (
            "UPDATE buildings SET id = 21 WHERE id = 20",
            "duplicate id 21",
        ),
        ("DROP TABLE gpkg_contents", "not a GeoPackage"),
    ];
    for (sql, want) in cases {
        let p = altered_gpkg(dir.path(), sql);
        let e = read_layer(&p, None).unwrap_err();
        let m = e.to_string();
        assert!(e.is_user_error() && m.contains("altered.gpkg"), "{m}");
        assert!(m.contains(want), "{sql}: wanted {want:?}: {m}");
    }
    // ids from the primary key (fid, from 1) when there is no id column
    let p = altered_gpkg(dir.path(), "ALTER TABLE buildings DROP COLUMN id");
    let got = read_layer(&p, None).unwrap();
    assert_eq!(got.iter().map(|o| o.0).collect::<Vec<_>>(), [1, 2]);
    // not SQLite at all
    let p = dir.path().join("junk.gpkg");
    std::fs::write(
        &p,
        b"this is not a database, but it is long enough to look like one?",
    )
    .unwrap();
    let m = read_layer(&p, None).unwrap_err().to_string();
    assert!(m.contains("junk.gpkg") && m.contains("GeoPackage"), "{m}");
}
