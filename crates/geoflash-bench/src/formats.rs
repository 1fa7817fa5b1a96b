//! Dataset files of rectangles with ids: CSV (`id,minx,miny,maxx,maxy`) and
//! GeoJSON (a FeatureCollection of Points or Polygons with an `id` property).
//! The format follows the file extension. [`read_geojson`] reads GeoJSON
//! files of any geometries (points, lines, polygons and their multi forms)
//! for the object heap.
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use geoflash::geom::Rect;
use geoflash::{Error, Result};

/// A file format of datasets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// CSV with header `id,minx,miny,maxx,maxy`.
    Csv,
    /// GeoJSON FeatureCollection.
    GeoJson,
}

impl Format {
    /// The format named by `path`'s extension.
    pub fn from_path(path: &Path) -> Result<Format> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("csv") => Ok(Format::Csv),
            Some("geojson") | Some("json") => Ok(Format::GeoJson),
            Some("fgb") | Some("parquet") => Err(Error::invalid(format!(
                "{}: FlatGeobuf and GeoParquet output are not available in this version; use .csv or .geojson",
                path.display()
            ))),
            _ => Err(Error::invalid(format!(
                "{}: unknown dataset format (use a .csv or .geojson extension)",
                path.display()
            ))),
        }
    }
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    }
}

/// Writes `(id, rect)` records to `path` in the format of its extension.
pub fn write_dataset(path: &Path, records: impl Iterator<Item = (u64, Rect)>) -> Result<u64> {
    let format = Format::from_path(path)?;
    let file = File::create(path).map_err(|e| io_err(path, e))?;
    let mut w = BufWriter::new(file);
    let mut n = 0u64;
    let res: std::io::Result<()> = (|| {
        match format {
            Format::Csv => {
                writeln!(w, "id,minx,miny,maxx,maxy")?;
                for (id, r) in records {
                    writeln!(w, "{id},{},{},{},{}", r.min_x, r.min_y, r.max_x, r.max_y)?;
                    n += 1;
                }
            }
            Format::GeoJson => {
                write!(w, "{{\"type\":\"FeatureCollection\",\"features\":[")?;
                for (id, r) in records {
                    if n > 0 {
                        writeln!(w, ",")?;
                    }
                    let geom = if r.min_x == r.max_x && r.min_y == r.max_y {
                        format!(
                            "{{\"type\":\"Point\",\"coordinates\":[{},{}]}}",
                            r.min_x, r.min_y
                        )
                    } else {
                        format!(
                            "{{\"type\":\"Polygon\",\"coordinates\":[[[{a},{b}],[{c},{b}],[{c},{d}],[{a},{d}],[{a},{b}]]]}}",
                            a = r.min_x,
                            b = r.min_y,
                            c = r.max_x,
                            d = r.max_y
                        )
                    };
                    write!(w, "{{\"type\":\"Feature\",\"id\":{id},\"properties\":{{\"id\":{id}}},\"geometry\":{geom}}}")?;
                    n += 1;
                }
                writeln!(w, "]}}")?;
            }
        }
        w.flush()
    })();
    res.map_err(|e| io_err(path, e))?;
    Ok(n)
}

/// Reads `(id, rect)` records from a CSV dataset file (`id,minx,miny,maxx,maxy` with a header).
pub fn read_csv(path: &Path) -> Result<Vec<(u64, Rect)>> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(BufReader::new(file));
    let mut out = Vec::new();
    for (line, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
        let at = |i: usize| {
            rec.get(i).ok_or_else(|| {
                Error::invalid(format!(
                    "{}: record {} has {} fields, expected id,minx,miny,maxx,maxy",
                    path.display(),
                    line + 1,
                    rec.len()
                ))
            })
        };
        let num = |i: usize| -> Result<f64> {
            let s = at(i)?;
            s.parse::<f64>().map_err(|_| {
                Error::invalid(format!(
                    "{}: record {}: {s:?} is not a number",
                    path.display(),
                    line + 1
                ))
            })
        };
        let id_s = at(0)?;
        let id = id_s.parse::<u64>().map_err(|_| {
            Error::invalid(format!(
                "{}: record {}: id {id_s:?} is not a non-negative integer",
                path.display(),
                line + 1
            ))
        })?;
        let r = Rect::new(num(1)?, num(2)?, num(3)?, num(4)?)
            .map_err(|e| Error::invalid(format!("{}: record {}: {e}", path.display(), line + 1)))?;
        out.push((id, r));
    }
    Ok(out)
}

/// The id of a feature: the feature's `id`, else an `id` property (a
/// non-negative integer, or a string holding one), else `None`.
fn feature_id(f: &geojson::Feature, path: &Path, n: usize) -> Result<Option<u64>> {
    let bad = |v: &dyn std::fmt::Display| {
        Error::invalid(format!(
            "{}: feature {n}: id {v} is not a non-negative integer",
            path.display()
        ))
    };
    let from_json = |v: &serde_json::Value| -> Result<u64> {
        match v {
            serde_json::Value::Number(x) => x.as_u64().ok_or_else(|| bad(x)),
            serde_json::Value::String(t) => t.trim().parse().map_err(|_| bad(&format!("{t:?}"))),
            other => Err(bad(other)),
        }
    };
    match (&f.id, f.properties.as_ref().and_then(|p| p.get("id"))) {
        (Some(geojson::feature::Id::Number(x)), _) => x.as_u64().map(Some).ok_or_else(|| bad(x)),
        (Some(geojson::feature::Id::String(t)), _) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad(&format!("{t:?}"))),
        (None, Some(v)) => from_json(v).map(Some),
        (None, None) => Ok(None),
    }
}

/// Reads `(id, geometry)` records from a GeoJSON file: a FeatureCollection,
/// a single Feature or a bare Geometry. Ids come from each feature's `id`,
/// else its `id` property, else its position in the file (0, 1, …).
/// Features without geometry, geometries with non-finite or out-of-range
/// coordinates, empty geometries and duplicate ids are errors naming the
/// feature.
pub fn read_geojson(path: &Path) -> Result<Vec<(u64, geoflash::objects::Geometry)>> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let gj = geojson::GeoJson::from_reader(BufReader::new(file))
        .map_err(|e| Error::invalid(format!("{}: not GeoJSON: {e}", path.display())))?;
    let features = match gj {
        geojson::GeoJson::FeatureCollection(fc) => fc.features,
        geojson::GeoJson::Feature(f) => vec![f],
        geojson::GeoJson::Geometry(g) => vec![geojson::Feature::from(g)],
    };
    let mut out = Vec::with_capacity(features.len());
    let mut seen = std::collections::HashSet::with_capacity(features.len());
    for (n, f) in features.into_iter().enumerate() {
        let id = feature_id(&f, path, n)?.unwrap_or(n as u64);
        let g = f.geometry.ok_or_else(|| {
            Error::invalid(format!(
                "{}: feature {n} (id {id}) has no geometry",
                path.display()
            ))
        })?;
        let g = geoflash::objects::Geometry::try_from(g).map_err(|e| {
            Error::invalid(format!("{}: feature {n} (id {id}): {e}", path.display()))
        })?;
        geoflash::objects::geometry::bounding_rect(&g).map_err(|e| {
            Error::invalid(format!("{}: feature {n} (id {id}): {e}", path.display()))
        })?;
        if !seen.insert(id) {
            return Err(Error::invalid(format!(
                "{}: feature {n}: duplicate id {id}",
                path.display()
            )));
        }
        out.push((id, g));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geojson_geometries_with_ids() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("g.geojson");
        std::fs::write(
            &p,
            r#"{"type":"FeatureCollection","features":[
              {"type":"Feature","id":7,"properties":{},"geometry":{"type":"Polygon","coordinates":[[[0,0],[4,0],[0,4],[0,0]]]}},
              {"type":"Feature","properties":{"id":"12"},"geometry":{"type":"LineString","coordinates":[[0,0],[1,5]]}},
              {"type":"Feature","properties":{"name":"x"},"geometry":{"type":"Point","coordinates":[3,3]}},
              {"type":"Feature","id":"40","geometry":{"type":"MultiPoint","coordinates":[[1,1],[2,2]]}}
            ]}"#,
        )
        .unwrap();
        let got = read_geojson(&p).unwrap();
        let ids: Vec<u64> = got.iter().map(|(i, _)| *i).collect();
        assert_eq!(ids, vec![7, 12, 2, 40]);
        assert!(matches!(got[0].1, geoflash::objects::Geometry::Polygon(_)));
        assert!(matches!(
            got[1].1,
            geoflash::objects::Geometry::LineString(_)
        ));
        assert!(matches!(got[2].1, geoflash::objects::Geometry::Point(_)));
        // the rectangle datasets written by write_dataset read back as polygons and points
        let recs = vec![
            (3, Rect::new(0.0, 0.0, 1.0, 2.0).unwrap()),
            (9, Rect::new(5.0, 5.0, 5.0, 5.0).unwrap()),
        ];
        let q = dir.path().join("r.geojson");
        write_dataset(&q, recs.clone().into_iter()).unwrap();
        let back = read_geojson(&q).unwrap();
        for ((id, r), (bid, g)) in recs.iter().zip(&back) {
            assert_eq!(id, bid);
            assert_eq!(geoflash::objects::geometry::bounding_rect(g).unwrap(), *r);
        }
        let bad = [
            (
                r#"{"type":"FeatureCollection","features":[{"type":"Feature","id":-3,"properties":{},"geometry":{"type":"Point","coordinates":[0,0]}}]}"#,
                "id -3",
            ),
            (
                r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":null}]}"#,
                "no geometry",
            ),
            (
                r#"{"type":"FeatureCollection","features":[{"type":"Feature","id":1,"properties":{},"geometry":{"type":"Point","coordinates":[0,0]}},{"type":"Feature","id":1,"properties":{},"geometry":{"type":"Point","coordinates":[1,0]}}]}"#,
                "duplicate id 1",
            ),
            (
                r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[1e200,0]}}]}"#,
                "feature 0",
            ),
            (r#"{"type":"Nope"}"#, "not GeoJSON"),
        ];
        for (text, want) in bad {
            std::fs::write(&p, text).unwrap();
            let e = read_geojson(&p).unwrap_err().to_string();
            assert!(e.contains(want), "{e} (wanted {want})");
        }
    }

    #[test]
    fn csv_round_trip_and_geojson_parses() {
        let dir = tempfile::tempdir().unwrap();
        let recs = vec![
            (1, Rect::new(0.0, 0.0, 1.0, 2.0).unwrap()),
            (7, Rect::new(0.5, 0.5, 0.5, 0.5).unwrap()),
        ];
        let csv = dir.path().join("d.csv");
        assert_eq!(write_dataset(&csv, recs.clone().into_iter()).unwrap(), 2);
        assert_eq!(read_csv(&csv).unwrap(), recs);
        let gj = dir.path().join("d.geojson");
        write_dataset(&gj, recs.clone().into_iter()).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&gj).unwrap()).unwrap();
        assert_eq!(v["features"].as_array().unwrap().len(), 2);
        assert_eq!(v["features"][1]["geometry"]["type"], "Point");
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Format::from_path(Path::new("x.shp")).is_err());
        assert!(Format::from_path(Path::new("x.parquet"))
            .unwrap_err()
            .to_string()
            .contains("not available"));
        let p = dir.path().join("bad.csv");
        std::fs::write(&p, "id,minx,miny,maxx,maxy\n1,0,0,nan,1\n").unwrap();
        assert!(read_csv(&p).unwrap_err().to_string().contains("record 1"));
        std::fs::write(&p, "id,minx,miny,maxx,maxy\n1,2,0,1,1\n").unwrap();
        assert!(read_csv(&p).unwrap_err().to_string().contains("inverted"));
        std::fs::write(&p, "id,minx,miny,maxx,maxy\n-1,0,0,1,1\n").unwrap();
        assert!(read_csv(&p).is_err());
    }
}
