//! Dataset import: the input formats the workbench and `geoflash build`
//! read, and `geoflash import`'s conversion between formats with a chosen
//! insertion order.
//!
//! Formats (by extension, see [`Format`]): `.csv` with either the header
//! `id,minx,miny,maxx,maxy` (rectangles) or a `wkt` (or `geometry`, `geom`)
//! column of WKT geometries and an optional `id` column; `.geojson`/`.json`;
//! `.fgb` (FlatGeobuf); `.parquet` (GeoParquet with WKB or GeoArrow
//! geometries, any codec but LZO; cargo feature `geoparquet`); `.shp`
//! (Shapefile, ids from the `.dbf`); `.gpkg` (GeoPackage: one feature layer,
//! [`formats::gpkg`]); `.osm.pbf` (OpenStreetMap: the ways and multipolygon
//! relations a tag filter selects, [`formats::osm`]). [`read_dataset`] reads
//! any of them, [`import`] writes any writable one
//! ([`formats::write_objects`]).
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use geoflash::engine::Geometry;
use geoflash::geom::Rect;
use geoflash::{Error, Result};

use crate::formats::attributes::Attributes;
use crate::formats::{self, osm, Format};
use crate::generate::{self, InsertionOrder};

/// The format of an input file: the one list of formats is [`Format`];
/// this name is kept for callers that classify inputs
/// (`InputFormat::from_path`).
pub type InputFormat = Format;

/// Options of the readers that have any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// What of an OSM PBF file becomes objects (the tag filters).
    pub osm: osm::OsmOptions,
    /// The layer of a GeoPackage to read (needed when it has several).
    pub layer: Option<String>,
}

/// The objects of a dataset file.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The file's format.
    pub format: Format,
    /// `(id, geometry)` pairs in file order, ids unique.
    pub objects: Vec<(u64, Geometry)>,
    /// Records skipped without error, with the reason (OSM ways and
    /// relations that pass the filter but cannot be built; empty for the
    /// other formats).
    pub skipped: Vec<osm::Skipped>,
    /// The objects' attributes, one row per object in `objects`' order
    /// (OSM type, id and tags of OSM PBF input, [`formats::attributes`]);
    /// no columns for the other formats.
    pub attributes: Attributes,
}

/// The WKT column of a CSV header, if it has one.
fn wkt_column(headers: &csv::StringRecord) -> Option<usize> {
    headers
        .iter()
        .position(|h| matches!(h.to_ascii_lowercase().as_str(), "wkt" | "geometry" | "geom"))
}

fn csv_headers(path: &Path) -> Result<csv::StringRecord> {
    let file = File::open(path).map_err(|e| formats::io_err(path, e))?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(BufReader::new(file));
    rdr.headers().cloned().map_err(|e| formats::bad(path, e))
}

/// The deepest nesting of parentheses [`check_wkt`] lets through: a
/// polygon in a multipolygon in about 125 geometry collections (the `wkb`
/// crate stops at 128 collections). The `wkt` crate's parser recurses once
/// per level, so without a bound a value of many thousands of nested
/// `GEOMETRYCOLLECTION`s overflows the stack and aborts the process.
pub const MAX_WKT_NESTING: usize = 128;

/// A cheap scan of WKT text before the `wkt` crate parses it: parentheses
/// nested at most [`MAX_WKT_NESTING`] deep, nothing but blanks after the
/// parenthesis that closes the geometry (the parser stops there and ignores
/// the rest, so `MULTIPOLYGON(((…))),((…)))` read as its first polygon
/// alone; review finding), and no coordinate that reads as a number but not
/// a finite one (`NaN`, `inf`, `1e999`; the parser itself would report
/// `NaN` as a missing parenthesis).
pub fn check_wkt(text: &str) -> std::result::Result<(), String> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => {
                depth += 1;
                if depth > MAX_WKT_NESTING {
                    return Err(format!(
                        "geometry nested more than {MAX_WKT_NESTING} levels of parentheses deep \
                         (geometry collections inside geometry collections?)"
                    ));
                }
            }
            ')' => {
                if depth == 0 {
                    return Err("a ')' without its '('".into());
                }
                depth -= 1;
                let rest = text[i + 1..].trim();
                if depth == 0 && !rest.is_empty() {
                    let shown: String = rest.chars().take(40).collect();
                    return Err(format!(
                        "text after the end of the geometry: {shown:?} (a ')' too many, or two geometries in one value?)"
                    ));
                }
            }
            _ => {}
        }
    }
    let words = text
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ','))
        .filter(|w| !w.is_empty());
    for w in words {
        if let Ok(v) = w.parse::<f64>() {
            if !v.is_finite() {
                return Err(format!("coordinate {w:?} is not a finite number"));
            }
        }
    }
    Ok(())
}

/// The dimension tag (` Z`, ` ZM`) that WKT text written without one needs:
/// `POINT (1 2 3)`, as PostGIS's `ST_AsEWKT` and older OGR write 3D
/// coordinates, which the `wkt` crate refuses with "Missing closing
/// parenthesis". Decided by the values of the first coordinate (3: Z, 4:
/// ZM); `None` when the text has a tag or its coordinates have 2 values.
fn missing_dimension_tag(text: &str) -> Option<&'static str> {
    let words = || {
        text.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ','))
            .filter(|w| !w.is_empty())
    };
    if words().any(|w| matches!(w.to_ascii_uppercase().as_str(), "Z" | "M" | "ZM")) {
        return None;
    }
    // the first run of numbers between two delimiters: a coordinate
    let first = text
        .split(['(', ')', ','])
        .map(|part| part.split_whitespace().collect::<Vec<_>>())
        .find(|nums| !nums.is_empty() && nums.iter().all(|n| n.parse::<f64>().is_ok()))?;
    match first.len() {
        3 => Some(" Z"),
        4 => Some(" ZM"),
        _ => None,
    }
}

/// WKT text as the `wkt` crate parses it ([`check_wkt`] first); text whose
/// coordinates have 3 or 4 values without a dimension tag is read as if it
/// had one ([`missing_dimension_tag`]; x and y are the first two values
/// either way), as GEOS reads it.
fn parse_wkt(text: &str) -> std::result::Result<wkt::Wkt<f64>, String> {
    use std::str::FromStr;
    check_wkt(text)?;
    let first = match wkt::Wkt::<f64>::from_str(text) {
        Ok(w) => return Ok(w),
        Err(e) => e.to_string(),
    };
    let Some(tag) = missing_dimension_tag(text) else {
        return Err(first);
    };
    // the tag after every geometry type name
    let mut tagged = String::with_capacity(text.len() + 16);
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphabetic() {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tagged.push_str(&word);
            if matches!(
                word.to_ascii_uppercase().as_str(),
                "POINT"
                    | "LINESTRING"
                    | "POLYGON"
                    | "MULTIPOINT"
                    | "MULTILINESTRING"
                    | "MULTIPOLYGON"
                    | "GEOMETRYCOLLECTION"
            ) {
                tagged.push_str(tag);
            }
            word.clear();
        }
        tagged.push(c);
    }
    wkt::Wkt::<f64>::from_str(&tagged).map_err(|_| first)
}

/// Reads a CSV file with a WKT geometry column (ids from an `id` column,
/// else positions).
pub fn read_wkt_csv(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    let file = File::open(path).map_err(|e| formats::io_err(path, e))?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(BufReader::new(file));
    let headers = rdr.headers().cloned().map_err(|e| formats::bad(path, e))?;
    let col =
        wkt_column(&headers).ok_or_else(|| formats::bad(path, "no wkt column in the header"))?;
    let id_col = headers.iter().position(|h| h.eq_ignore_ascii_case("id"));
    let mut objects = formats::Collector::new(path);
    // The position of each data record (lines of blanks skipped, as empty
    // lines are): its default id.
    let mut n = 0usize;
    for rec in rdr.records() {
        let rec = rec.map_err(|e| formats::bad(path, e))?;
        if !formats::csv_data_record(path, n + 1, rec.as_byte_record(), headers.len())? {
            continue;
        }
        n += 1;
        let n = n - 1;
        let what = format!("record {}", n + 1);
        let at = |msg: &str| formats::bad(path, format!("{what}: {msg}"));
        let text = rec.get(col).ok_or_else(|| at("missing wkt field"))?;
        let w = parse_wkt(text).map_err(|e| at(&format!("not WKT: {e}")))?;
        let g: Geometry = w
            .try_into()
            .map_err(|e: wkt::conversion::Error| at(&format!("{e}")))?;
        let id = match id_col {
            None => n as u64,
            Some(i) => {
                let s = rec.get(i).unwrap_or("");
                s.parse::<u64>()
                    .map_err(|_| at(&format!("id {s:?} is not a non-negative integer")))?
            }
        };
        objects.push(&what, id, g)?;
    }
    Ok(objects.finish())
}

/// Reads the objects of a dataset file in any [`Format`], with the
/// readers' options.
pub fn read_dataset(path: &Path, opts: &ReadOptions) -> Result<Dataset> {
    let format = Format::from_path(path)?;
    // one clear message for a missing input, whatever the format: bad input
    // (exit code 2 in the CLI), not an I/O failure
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(formats::bad(path, "is a directory, not a dataset file"))
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(formats::bad(path, "no such file"))
        }
        Err(e) => return Err(formats::io_err(path, e)),
    }
    let mut skipped = Vec::new();
    let mut attributes = Attributes::default();
    let objects = match format {
        Format::GeoJson => formats::read_geojson(path)?,
        Format::Csv => {
            if wkt_column(&csv_headers(path)?).is_some() {
                read_wkt_csv(path)?
            } else {
                formats::read_csv(path)?
                    .into_iter()
                    .map(|(id, r)| (id, geoflash::engine::window_geometry(&r)))
                    .collect()
            }
        }
        Format::FlatGeobuf => formats::fgb::read(path)?,
        Format::GeoParquet => formats::geoparquet::read(path)?,
        Format::Shapefile => formats::shp::read(path)?,
        Format::GeoPackage => formats::gpkg::read(path, opts.layer.as_deref())?,
        Format::OsmPbf => {
            let r = osm::read(path, &opts.osm)?;
            skipped = r.skipped;
            attributes = r.attributes;
            r.objects
        }
    };
    Ok(Dataset {
        format,
        objects,
        skipped,
        attributes,
    })
}

/// Reads the geometries of any input file (default [`ReadOptions`]).
pub fn read_objects(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    Ok(read_dataset(path, &ReadOptions::default())?.objects)
}

/// Whether `path` is a CSV file of boxes (`id,minx,miny,maxx,maxy`, no
/// WKT column): the input [`formats::csv_records`] streams.
pub fn is_box_csv(path: &Path) -> Result<bool> {
    Ok(Format::from_path(path)? == Format::Csv && wkt_column(&csv_headers(path)?).is_none())
}

/// Reads the `(id, MBR)` records of any input file.
pub fn read_rects(path: &Path) -> Result<Vec<(u64, Rect)>> {
    read_rects_with(path, &ReadOptions::default())
}

/// Reads the `(id, MBR)` records of any input file with `opts` (the layer
/// of a GeoPackage, the filters of an OSM file).
pub fn read_rects_with(path: &Path, opts: &ReadOptions) -> Result<Vec<(u64, Rect)>> {
    if is_box_csv(path)? {
        return formats::read_csv(path);
    }
    read_dataset(path, opts)?
        .objects
        .into_iter()
        .map(|(id, g)| {
            geoflash::engine::bounding_rect(&g)
                .map(|r| (id, r))
                .map_err(|e| formats::bad(path, format!("object {id}: {}", formats::reason(&e))))
        })
        .collect()
}

/// What [`import`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportReport {
    /// Input file (or PostGIS table and URL, without its password).
    pub input: String,
    /// Format of the input: a [`Format`]'s name in JSON (`csv`, `geojson`,
    /// `flatgeobuf`, `geoparquet`, `shapefile`, `osm-pbf`) or `postgis`.
    pub input_format: String,
    /// Output file.
    pub out: String,
    /// Format of the output file.
    pub out_format: Format,
    /// Objects written.
    pub count: usize,
    /// Input records skipped without error (OSM ways and relations that
    /// cannot be built).
    pub skipped: u64,
    /// The skipped records per reason (`missing-nodes`, …; see
    /// [`osm::SkipReason`]); only the reasons that occurred.
    pub skipped_by_reason: BTreeMap<String, u64>,
    /// The skipped records themselves (not in the JSON summary; see
    /// [`write_skipped`]).
    #[serde(skip)]
    pub skipped_records: Vec<osm::Skipped>,
    /// Insertion order of the output.
    pub order: InsertionOrder,
}

/// The JSON name of a format (`osm-pbf`).
fn format_key(f: Format) -> String {
    serde_json::to_value(f)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| f.name().to_string())
}

/// Writes `objects` with their `attributes` (read from `input`, named in
/// errors) to `out` in insertion order `order` (seeded by `seed`); returns
/// how many.
fn write_ordered(
    objects: &[(u64, Geometry)],
    attributes: &Attributes,
    input: &Path,
    out: &Path,
    order: InsertionOrder,
    seed: u64,
) -> Result<usize> {
    let rects = objects
        .iter()
        .map(|(id, g)| {
            geoflash::engine::bounding_rect(g)
                .map_err(|e| formats::bad(input, format!("object {id}: {}", formats::reason(&e))))
        })
        .collect::<Result<Vec<Rect>>>()?;
    let perm = generate::order(&rects, order, seed)?;
    let ordered = perm
        .iter()
        .filter_map(|&i| objects.get(i).map(|(id, g)| (*id, g, attributes.row(i))));
    let count = formats::write_objects_with(out, attributes.columns(), ordered)?;
    if count != objects.len() as u64 {
        return Err(Error::invalid(format!(
            "{}: wrote {count} of {} objects (the order is not a permutation)",
            out.display(),
            objects.len()
        )));
    }
    Ok(objects.len())
}

/// Converts `input` (any [`Format`]) to `out` (a writable one: `.csv`
/// rectangles, `.geojson`, `.fgb` or `.parquet` geometries), in insertion
/// order `order` (seeded by `seed`).
pub fn import(
    input: &Path,
    out: &Path,
    order: InsertionOrder,
    seed: u64,
    opts: &ReadOptions,
) -> Result<ImportReport> {
    let out_format = Format::for_output(out)?;
    let data = read_dataset(input, opts)?;
    let count = write_ordered(&data.objects, &data.attributes, input, out, order, seed)?;
    Ok(ImportReport {
        input: input.display().to_string(),
        input_format: format_key(data.format),
        out: out.display().to_string(),
        out_format,
        count,
        skipped: data.skipped.len() as u64,
        skipped_by_reason: by_reason(&data.skipped),
        skipped_records: data.skipped,
        order,
    })
}

/// The number of skipped records per reason, by the reason's name.
fn by_reason(skipped: &[osm::Skipped]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for s in skipped {
        *m.entry(s.reason.name().to_string()).or_insert(0) += 1;
    }
    m
}

/// Writes skipped records to `path` as CSV: the header
/// `osm_type,osm_id,reason`, then one line per record (`way,22466256,missing-nodes`).
/// The file is written whole or not at all ([`formats::OutputFile`]).
pub fn write_skipped(path: &Path, skipped: &[osm::Skipped]) -> Result<()> {
    use std::io::Write;
    let io = |e| formats::io_err(path, e);
    let out = formats::OutputFile::create(path)?;
    let mut w = std::io::BufWriter::new(out.file());
    writeln!(w, "osm_type,osm_id,reason").map_err(io)?;
    for s in skipped {
        writeln!(w, "{},{},{}", s.osm_type.name(), s.osm_id, s.reason.name()).map_err(io)?;
    }
    w.flush().map_err(io)?;
    drop(w);
    out.commit()
}

/// Converts the geometries of a PostGIS table ([`crate::postgis`]) to
/// `out`, like [`import`] a file.
#[cfg(feature = "postgres")]
pub fn import_postgis(
    src: &crate::postgis::PostgisSource,
    out: &Path,
    order: InsertionOrder,
    seed: u64,
) -> Result<ImportReport> {
    let out_format = Format::for_output(out)?;
    let objects = crate::postgis::read(src)?;
    let what = src.describe();
    let count = write_ordered(
        &objects,
        &Attributes::default(),
        Path::new(&what),
        out,
        order,
        seed,
    )?;
    Ok(ImportReport {
        input: what,
        input_format: "postgis".into(),
        out: out.display().to_string(),
        out_format,
        count,
        skipped: 0,
        skipped_by_reason: BTreeMap::new(),
        skipped_records: Vec::new(),
        order,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44, item 10: WKT nested deeper than the bound is refused
    /// before the recursive parser sees it (10,000 nested collections used
    /// to overflow the stack), naming the record; a non-finite coordinate
    /// says so; nesting up to the bound parses.
    #[test]
    fn deep_wkt_and_non_finite_coordinates_are_refused_naming_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("deep.csv");
        let nested = |n: usize| {
            format!(
                "{}POINT(1 2){}",
                "GEOMETRYCOLLECTION(".repeat(n),
                ")".repeat(n)
            )
        };
        std::fs::write(
            &p,
            format!("id,wkt\n1,POINT(0 0)\n2,\"{}\"\n", nested(10_000)),
        )
        .unwrap();
        let e = read_objects(&p).unwrap_err();
        let m = e.to_string();
        assert!(e.is_user_error(), "{m}");
        assert!(m.contains("deep.csv") && m.contains("record 2"), "{m}");
        assert!(m.contains("nested more than 128"), "{m}");
        // At the bound (one level for the point's own parentheses).
        std::fs::write(
            &p,
            format!("id,wkt\n1,\"{}\"\n", nested(MAX_WKT_NESTING - 1)),
        )
        .unwrap();
        assert_eq!(read_objects(&p).unwrap().len(), 1);
        for (text, want) in [
            ("POINT(NaN 1)", "\"NaN\" is not a finite number"),
            ("POINT(1 inf)", "\"inf\" is not a finite number"),
            (
                "LINESTRING(0 0,1e999 1)",
                "\"1e999\" is not a finite number",
            ),
        ] {
            std::fs::write(&p, format!("id,wkt\n1,POINT(0 0)\n2,\"{text}\"\n")).unwrap();
            let m = read_objects(&p).unwrap_err().to_string();
            assert!(m.contains("record 2") && m.contains(want), "{text}: {m}");
        }
        // WKB: the wkb crate bounds the nesting of collections itself.
        let mut wkb = Vec::new();
        for _ in 0..10_000 {
            wkb.extend_from_slice(&[1, 7, 0, 0, 0, 1, 0, 0, 0]);
        }
        wkb.extend_from_slice(&[1, 1, 0, 0, 0]);
        wkb.extend_from_slice(&1.0f64.to_le_bytes());
        wkb.extend_from_slice(&2.0f64.to_le_bytes());
        let e = geoflash::engine::from_wkb(&wkb, "object 5").unwrap_err();
        assert!(
            e.is_user_error() && e.to_string().contains("object 5"),
            "{e}"
        );
    }

    /// Lines of blanks in a WKT CSV are skipped as empty lines are (it was
    /// "found record with 1 fields"), and the default ids count data
    /// records only.
    #[test]
    fn blank_lines_of_a_wkt_csv_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.csv");
        std::fs::write(&p, "wkt\n  \nPOINT(1 2)\n\t\n\nPOINT(3 4)\n").unwrap();
        let ids: Vec<u64> = read_wkt_csv(&p)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids, [0, 1]);
        std::fs::write(&p, "id,wkt\n1,POINT(1 2)\n2\n").unwrap();
        let e = read_wkt_csv(&p).unwrap_err().to_string();
        assert!(e.contains("record 2 (line 3) has 1 fields"), "{e}");
    }

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
        let convert = |from: &Path, to: &Path, order: InsertionOrder, seed: u64| {
            import(from, to, order, seed, &ReadOptions::default()).unwrap()
        };
        let r = convert(&wkt, &gj, InsertionOrder::AsGenerated, 1);
        assert_eq!(r.count, 3);
        assert_eq!(read_rects(&gj).unwrap(), rects);
        let csv = dir.path().join("r.csv");
        convert(&gj, &csv, InsertionOrder::AsGenerated, 1);
        assert_eq!(read_rects(&csv).unwrap(), rects);
        // a random order is a permutation of the same records
        let shuffled = dir.path().join("s.csv");
        convert(&wkt, &shuffled, InsertionOrder::Random, 3);
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
