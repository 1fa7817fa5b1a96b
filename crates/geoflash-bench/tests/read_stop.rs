//! The dataset readers stop when their process is asked to
//! ([`geoflash::engine::request_stop`], the command line's Ctrl-C): an
//! [`ErrorKind::Interrupted`] error naming the file, whatever the format.
//! The request cannot be withdrawn, so this binary holds one test, and
//! every reader is shown to read its file first.
use std::io::Write;
use std::path::{Path, PathBuf};

use geoflash::engine::{ErrorKind, Geometry};
use geoflash::geom::Rect;
use geoflash_bench::formats;
use geoflash_bench::import::{self, ReadOptions};

/// `n` small squares with ids `0..n`.
fn squares(n: u64) -> Vec<(u64, Geometry)> {
    (0..n)
        .map(|i| {
            let (x, y) = ((i % 100) as f64, (i / 100) as f64);
            let r = Rect::new(x, y, x + 0.5, y + 0.5).unwrap();
            (i, formats::rect_geometry(&r))
        })
        .collect()
}

/// A file of the crate's test data.
fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Asserts that `got`, a read of `path`, stopped: [`ErrorKind::Interrupted`]
/// naming the file.
fn assert_stopped<T: std::fmt::Debug>(got: geoflash::Result<T>, path: &Path) {
    let e = got.expect_err(&format!("{}: read after the stop", path.display()));
    assert_eq!(e.kind(), ErrorKind::Interrupted, "{}: {e}", path.display());
    assert_eq!(
        e.to_string(),
        format!("interrupted: the reading of {} was stopped", path.display())
    );
}

/// The inputs, each with its read options and its number of objects: a
/// CSV of boxes and one of WKT, GeoJSON, FlatGeobuf, GeoParquet, a
/// GeoPackage's layer and OSM PBF.
fn inputs(dir: &Path) -> Vec<(PathBuf, ReadOptions, usize)> {
    let objects = squares(3_000);
    let n = objects.len();
    let rect = |g: &Geometry| geoflash::engine::bounding_rect(g).unwrap();
    let boxes = dir.join("b.csv");
    formats::write_dataset(&boxes, objects.iter().map(|(id, g)| (*id, rect(g)))).unwrap();
    let wkt = dir.join("w.csv");
    let mut text = String::from("id,wkt\n");
    for (id, g) in &objects {
        text.push_str(&format!(
            "{id},POINT ({} {})\n",
            rect(g).min_x(),
            rect(g).min_y()
        ));
    }
    std::fs::write(&wkt, text).unwrap();
    let mut inputs = vec![
        (boxes, ReadOptions::default(), n),
        (wkt, ReadOptions::default(), n),
    ];
    let mut formats = vec!["geojson", "fgb"];
    if cfg!(feature = "geoparquet") {
        formats.push("parquet");
    }
    for ext in formats {
        let p = dir.join(format!("d.{ext}"));
        formats::write_objects(&p, objects.iter().map(|(id, g)| (*id, g))).unwrap();
        inputs.push((p, ReadOptions::default(), n));
    }
    let layer = ReadOptions {
        layer: Some("places".into()),
        ..ReadOptions::default()
    };
    inputs.push((data("geopandas/layers.gpkg"), layer, 3));
    if cfg!(feature = "osm-pbf") {
        inputs.push((data("pyrosm-test.osm.pbf"), ReadOptions::default(), 2_171));
    }
    inputs
}

/// A GeoJSON document of `n` points with ids `0..n`.
fn geojson_points(n: u64) -> Vec<u8> {
    let mut text = String::from("{\"type\":\"FeatureCollection\",\"features\":[\n");
    for i in 0..n {
        let sep = if i == 0 { "" } else { ",\n" };
        text.push_str(&format!(
            "{sep}{{\"type\":\"Feature\",\"id\":{i},\"geometry\":{{\"type\":\"Point\",\"coordinates\":[{},{}]}}}}",
            i % 1000,
            i / 1000
        ));
    }
    text.push_str("]}\n");
    text.into_bytes()
}

/// The GeoJSON reader parses its document whole before its features: a
/// stop asked mid-document ends the parse at its next read, not at the
/// end of the document. The document comes through a named pipe: once
/// the first megabyte is read the test asks to stop, then writes the rest
/// until the reader closes the pipe (a write fails), which comes within
/// the pipe's and the reader's buffers (tens of kilobytes), far short of
/// the 20 or so megabytes of the document. Before the fix the reader read
/// the whole document and stopped at its first feature.
fn geojson_parse_stops_midway(dir: &Path) {
    let fifo = dir.join("pipe.geojson");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());
    let doc = geojson_points(250_000);
    let path = fifo.clone();
    let reader = std::thread::spawn(move || import::read_dataset(&path, &ReadOptions::default()));
    // Blocks until the reader opens the pipe.
    let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let first = 1 << 20;
    pipe.write_all(&doc[..first]).unwrap();
    geoflash::engine::request_stop();
    let mut written = first;
    for chunk in doc[first..].chunks(1 << 12) {
        if pipe.write_all(chunk).is_err() {
            break;
        }
        written += chunk.len();
    }
    drop(pipe);
    assert_stopped(reader.join().unwrap().map(|d| d.objects.len()), &fifo);
    assert!(
        written < doc.len() / 2,
        "the reader took {written} of the document's {} bytes after the stop",
        doc.len()
    );
}

/// Every reader of [`import::read_dataset`] and [`import::read_rects`]
/// (the readers of the in-memory loads of `geoflash build --bulk`, and of
/// `insert` and `delete`) reads its file, then, once the process is asked
/// to stop, returns [`ErrorKind::Interrupted`] naming the file instead of
/// its records (before the fix only the command line's first pass over a
/// CSV of boxes asked): a CSV of boxes and one of WKT, GeoJSON (whose
/// parse stops midway: [`geojson_parse_stops_midway`]), FlatGeobuf,
/// GeoParquet, a GeoPackage's layer and OSM PBF, whose passes over the
/// file stop at a read: an OSM file that its second pass refuses (a node
/// outside WGS 84) is not refused but stopped.
#[test]
fn every_reader_stops_when_the_process_is_asked_to() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    for (path, opts, n) in &inputs {
        let got =
            import::read_dataset(path, opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(got.objects.len(), *n, "{}", path.display());
    }
    let lon200 = data("fuzz/node-longitude-200.osm.pbf");
    if cfg!(feature = "osm-pbf") {
        let e = import::read_objects(&lon200).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    }
    geojson_parse_stops_midway(dir.path());
    for (path, opts, _) in &inputs {
        assert_stopped(
            import::read_dataset(path, opts).map(|d| d.objects.len()),
            path,
        );
        if opts == &ReadOptions::default() {
            assert_stopped(import::read_rects(path).map(|v| v.len()), path);
        }
    }
    if cfg!(feature = "osm-pbf") {
        assert_stopped(import::read_objects(&lon200).map(|v| v.len()), &lon200);
    }
}
