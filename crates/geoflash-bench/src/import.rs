//! Dataset import: the input formats the workbench and `geoflash build`
//! read, and `geoflash import`'s conversion to CSV or GeoJSON with a chosen
//! insertion order.
//!
//! Formats (by extension): `.csv` with either the header
//! `id,minx,miny,maxx,maxy` (rectangles) or a `wkt` (or `geometry`, `geom`)
//! column of WKT geometries and an optional `id` column; `.geojson`/`.json`.
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use geoflash::geom::Rect;
use geoflash::objects::Geometry;
use geoflash::{Error, Result};

use crate::formats;
use crate::generate::{self, InsertionOrder};

/// An input format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputFormat {
    /// CSV: `id,minx,miny,maxx,maxy`, or WKT geometries in a `wkt` column.
    Csv,
    /// GeoJSON.
    GeoJson,
}

impl InputFormat {
    /// The format of `path`, by extension.
    pub fn from_path(path: &Path) -> Result<InputFormat> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("csv") => Ok(InputFormat::Csv),
            Some("geojson") | Some("json") => Ok(InputFormat::GeoJson),
            _ => Err(Error::invalid(format!(
                "{}: unknown input format (use .csv or .geojson)",
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

/// The WKT column of a CSV header, if it has one.
fn wkt_column(headers: &csv::StringRecord) -> Option<usize> {
    headers
        .iter()
        .position(|h| matches!(h.to_ascii_lowercase().as_str(), "wkt" | "geometry" | "geom"))
}

fn csv_headers(path: &Path) -> Result<csv::StringRecord> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(BufReader::new(file));
    rdr.headers()
        .cloned()
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))
}

/// Reads a CSV file with a WKT geometry column (ids from an `id` column,
/// else positions).
pub fn read_wkt_csv(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    use std::str::FromStr;
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(BufReader::new(file));
    let headers = rdr
        .headers()
        .cloned()
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    let col = wkt_column(&headers).ok_or_else(|| {
        Error::invalid(format!("{}: no wkt column in the header", path.display()))
    })?;
    let id_col = headers.iter().position(|h| h.eq_ignore_ascii_case("id"));
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (n, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
        let at = |what: &str| format!("{}: record {}: {what}", path.display(), n + 1);
        let text = rec
            .get(col)
            .ok_or_else(|| Error::invalid(at("missing wkt field")))?;
        let w = wkt::Wkt::<f64>::from_str(text)
            .map_err(|e| Error::invalid(at(&format!("not WKT: {e}"))))?;
        let g: Geometry = w
            .try_into()
            .map_err(|e: wkt::conversion::Error| Error::invalid(at(&format!("{e}"))))?;
        let id = match id_col {
            None => n as u64,
            Some(i) => {
                let s = rec.get(i).unwrap_or("");
                s.parse::<u64>().map_err(|_| {
                    Error::invalid(at(&format!("id {s:?} is not a non-negative integer")))
                })?
            }
        };
        geoflash::objects::geometry::bounding_rect(&g)
            .map_err(|e| Error::invalid(at(&format!("id {id}: {e}"))))?;
        if !seen.insert(id) {
            return Err(Error::invalid(at(&format!("duplicate id {id}"))));
        }
        out.push((id, g));
    }
    Ok(out)
}

/// Reads the geometries of any input file.
pub fn read_objects(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    match InputFormat::from_path(path)? {
        InputFormat::GeoJson => formats::read_geojson(path),
        InputFormat::Csv => {
            if wkt_column(&csv_headers(path)?).is_some() {
                read_wkt_csv(path)
            } else {
                Ok(formats::read_csv(path)?
                    .into_iter()
                    .map(|(id, r)| (id, geoflash::objects::geometry::window_geometry(&r)))
                    .collect())
            }
        }
    }
}

/// Reads the `(id, MBR)` records of any input file.
pub fn read_rects(path: &Path) -> Result<Vec<(u64, Rect)>> {
    if InputFormat::from_path(path)? == InputFormat::Csv
        && wkt_column(&csv_headers(path)?).is_none()
    {
        return formats::read_csv(path);
    }
    read_objects(path)?
        .into_iter()
        .map(|(id, g)| {
            geoflash::objects::geometry::bounding_rect(&g)
                .map(|r| (id, r))
                .map_err(|e| Error::invalid(format!("{}: object {id}: {e}", path.display())))
        })
        .collect()
}

/// Writes geometries as GeoJSON (a FeatureCollection with ids).
pub fn write_geojson(path: &Path, objects: &[(u64, Geometry)]) -> Result<()> {
    let file = File::create(path).map_err(|e| io_err(path, e))?;
    let mut w = BufWriter::new(file);
    let res: std::io::Result<()> = (|| {
        write!(w, "{{\"type\":\"FeatureCollection\",\"features\":[")?;
        for (n, (id, g)) in objects.iter().enumerate() {
            if n > 0 {
                writeln!(w, ",")?;
            }
            let gj = geojson::Geometry::from(g);
            let text = serde_json::to_string(&gj).map_err(std::io::Error::other)?;
            write!(
                w,
                "{{\"type\":\"Feature\",\"id\":{id},\"properties\":{{\"id\":{id}}},\"geometry\":{text}}}"
            )?;
        }
        writeln!(w, "]}}")?;
        w.flush()
    })();
    res.map_err(|e| io_err(path, e))
}

/// What [`import`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportReport {
    /// Input file.
    pub input: String,
    /// Output file.
    pub out: String,
    /// Objects written.
    pub count: usize,
    /// Insertion order of the output.
    pub order: InsertionOrder,
}

/// Converts `input` to `out` (`.csv` rectangles or `.geojson` geometries),
/// in insertion order `order` (seeded by `seed`).
pub fn import(input: &Path, out: &Path, order: InsertionOrder, seed: u64) -> Result<ImportReport> {
    let out_format = formats::Format::from_path(out)?;
    let objects = read_objects(input)?;
    let rects = objects
        .iter()
        .map(|(id, g)| {
            geoflash::objects::geometry::bounding_rect(g)
                .map_err(|e| Error::invalid(format!("{}: object {id}: {e}", input.display())))
        })
        .collect::<Result<Vec<Rect>>>()?;
    let perm = generate::order(&rects, order, seed)?;
    match out_format {
        formats::Format::Csv => {
            let recs = perm.iter().filter_map(|&i| {
                let (id, _) = objects.get(i)?;
                Some((*id, *rects.get(i)?))
            });
            formats::write_dataset(out, recs)?;
        }
        formats::Format::GeoJson => {
            let ordered: Vec<(u64, Geometry)> = perm
                .iter()
                .filter_map(|&i| objects.get(i).cloned())
                .collect();
            write_geojson(out, &ordered)?;
        }
    }
    Ok(ImportReport {
        input: input.display().to_string(),
        out: out.display().to_string(),
        count: objects.len(),
        order,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wkt_csv_geojson_and_rect_csv_agree() {
        let dir = tempfile::tempdir().unwrap();
        let wkt = dir.path().join("d.csv");
        std::fs::write(
            &wkt,
            "id,name,wkt\n4,a,\"POLYGON((0 0,2 0,2 3,0 3,0 0))\"\n9,b,POINT(5 6)\n11,c,\"LINESTRING(1 1,4 2)\"\n",
        )
        .unwrap();
        let objs = read_objects(&wkt).unwrap();
        assert_eq!(objs.iter().map(|o| o.0).collect::<Vec<_>>(), [4, 9, 11]);
        let rects = read_rects(&wkt).unwrap();
        assert_eq!(rects[0].1, Rect::new(0.0, 0.0, 2.0, 3.0).unwrap());
        assert_eq!(rects[1].1, Rect::new(5.0, 6.0, 5.0, 6.0).unwrap());
        // to GeoJSON and back, to rectangle CSV and back: the same MBRs
        let gj = dir.path().join("d.geojson");
        let r = import(&wkt, &gj, InsertionOrder::AsGenerated, 1).unwrap();
        assert_eq!(r.count, 3);
        assert_eq!(read_rects(&gj).unwrap(), rects);
        let csv = dir.path().join("r.csv");
        import(&gj, &csv, InsertionOrder::AsGenerated, 1).unwrap();
        assert_eq!(read_rects(&csv).unwrap(), rects);
        // a random order is a permutation of the same records
        let shuffled = dir.path().join("s.csv");
        import(&wkt, &shuffled, InsertionOrder::Random, 3).unwrap();
        let mut got = read_rects(&shuffled).unwrap();
        got.sort_by_key(|x| x.0);
        assert_eq!(got, rects);
    }

    #[test]
    fn bad_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.csv");
        std::fs::write(&p, "id,wkt\n1,\"POLYGON((0 0,1 1\"\n").unwrap();
        let e = read_objects(&p).unwrap_err().to_string();
        assert!(e.contains("record 1") && e.contains("not WKT"), "{e}");
        std::fs::write(&p, "id,wkt\n1,POINT(0 0)\n1,POINT(1 1)\n").unwrap();
        assert!(read_objects(&p)
            .unwrap_err()
            .to_string()
            .contains("duplicate id 1"));
        std::fs::write(&p, "id,wkt\nx,POINT(0 0)\n").unwrap();
        assert!(read_objects(&p).unwrap_err().to_string().contains("\"x\""));
        assert!(InputFormat::from_path(Path::new("a.xyz")).is_err());
        assert!(read_rects(&dir.path().join("missing.csv")).is_err());
    }
}
