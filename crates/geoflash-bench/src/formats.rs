//! Dataset files: the one list of formats the workbench reads and writes,
//! chosen by file extension ([`Format`]), the writers ([`write_dataset`] for
//! rectangles, [`write_objects`] for geometries) and the readers of CSV
//! rectangles ([`read_csv`]) and GeoJSON ([`read_geojson`]). The other
//! readers live in submodules ([`fgb`], [`shp`], [`geoparquet`], [`gpkg`],
//! [`osm`]);
//! [`crate::import::read_objects`] dispatches over all of them.
//!
//! | format | extensions | read | write |
//! |---|---|---|---|
//! | CSV | `.csv` | `id,minx,miny,maxx,maxy`, or a `wkt` column | MBRs |
//! | GeoJSON | `.geojson`, `.json` | any geometry | geometries |
//! | FlatGeobuf | `.fgb` | any geometry but curves | geometries |
//! | GeoParquet | `.parquet`, `.geoparquet` | WKB or GeoArrow geometry column, any codec but LZO (cargo feature `geoparquet`) | geometries (WKB) |
//! | GeoPackage | `.gpkg` | the features of one layer | no |
//! | Shapefile | `.shp` (+ `.dbf`) | points, lines, polygons | no |
//! | OSM PBF | `.pbf` (`.osm.pbf`) | ways and multipolygon relations by tag filter (cargo feature `osm-pbf`) | no |
//!
//! Objects may carry attributes ([`attributes`]: the OSM type, id and tags
//! of objects read from OSM PBF), which [`write_objects_with`] stores in
//! every writable format and [`read_attributes`] reads back.
//!
//! Every writer writes its file whole or not at all ([`OutputFile`]): the
//! objects go to a temporary file beside the destination, renamed onto it
//! once complete and synced, so an error, a Ctrl-C or a kill never leaves a
//! truncated dataset (whose last line a reader would take for an object).
//!
//! Every reader returns `(id, geometry)` pairs in file order, with unique
//! ids and geometries whose coordinates are finite and at most
//! [`geoflash::geom::MAX_COORD`] in magnitude; anything else is an
//! [`Error::InvalidInput`] naming the file and the record, never a panic.
//!
//! Every reader stops when its process is asked to
//! ([`geoflash::engine::request_stop`], the command line's Ctrl-C), with
//! [`Error::Interrupted`] ([`read_stopped`]): it asks every [`STOP_EVERY`]
//! records it reads, and the readers that take their file in one piece
//! before its records (a GeoJSON document's parse, an OSM PBF file's
//! passes) at each read from the file.
use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

use geoflash::engine::Geometry;
use geoflash::geom::Rect;
use geoflash::{Error, Result};

use attributes::{Column, Row, Value};
#[cfg(any(feature = "geoparquet", feature = "osm-pbf"))]
pub(crate) use contained::contained_reader;

pub mod attributes;
// The decoders that can panic on damaged input: GeoParquet's and OSM PBF's.
#[cfg(any(feature = "geoparquet", feature = "osm-pbf"))]
mod contained;
pub mod fgb;
pub mod geoparquet;
pub mod gpkg;
pub mod osm;
mod output;
#[cfg(feature = "geoparquet")]
mod parquet_thrift;
pub mod shp;

pub use output::{discard_pending_outputs, write_via_temp, Discarded, OutputFile};

/// A file format of datasets. [`Format::from_path`] names the format of a
/// file to read, [`Format::for_output`] the format of a file to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Format {
    /// CSV with header `id,minx,miny,maxx,maxy`, or with a `wkt` (or
    /// `geometry`, `geom`) column of WKT and an optional `id` column.
    #[serde(rename = "csv")]
    Csv,
    /// GeoJSON: a FeatureCollection, a Feature or a bare Geometry.
    #[serde(rename = "geojson")]
    GeoJson,
    /// FlatGeobuf (<https://flatgeobuf.org>), version 3.
    #[serde(rename = "flatgeobuf")]
    FlatGeobuf,
    /// GeoParquet 1.x with a WKB or GeoArrow geometry column (cargo
    /// feature `geoparquet`).
    #[serde(rename = "geoparquet")]
    GeoParquet,
    /// ESRI Shapefile: the `.shp` and, when present, its `.dbf`.
    #[serde(rename = "shapefile")]
    Shapefile,
    /// OGC GeoPackage: the features of one layer ([`gpkg`]).
    #[serde(rename = "geopackage")]
    GeoPackage,
    /// OpenStreetMap PBF (`.osm.pbf`; cargo feature `osm-pbf`).
    #[serde(rename = "osm-pbf")]
    OsmPbf,
}

impl Format {
    /// Every format, in the order the documentation lists them.
    pub const ALL: [Format; 7] = [
        Format::Csv,
        Format::GeoJson,
        Format::FlatGeobuf,
        Format::GeoParquet,
        Format::Shapefile,
        Format::GeoPackage,
        Format::OsmPbf,
    ];

    /// The file extensions (lower case, without the dot) of the format; the
    /// first one is the one to write.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Format::Csv => &["csv"],
            Format::GeoJson => &["geojson", "json"],
            Format::FlatGeobuf => &["fgb"],
            Format::GeoParquet => &["parquet", "geoparquet"],
            Format::Shapefile => &["shp"],
            Format::GeoPackage => &["gpkg"],
            Format::OsmPbf => &["pbf"],
        }
    }

    /// A readable name (`"FlatGeobuf"`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "CSV",
            Format::GeoJson => "GeoJSON",
            Format::FlatGeobuf => "FlatGeobuf",
            Format::GeoParquet => "GeoParquet",
            Format::Shapefile => "Shapefile",
            Format::GeoPackage => "GeoPackage",
            Format::OsmPbf => "OSM PBF",
        }
    }

    /// Whether the workbench writes this format ([`write_objects`]).
    pub fn writable(self) -> bool {
        !matches!(
            self,
            Format::Shapefile | Format::GeoPackage | Format::OsmPbf
        )
    }

    /// The format of a dataset file to read, by `path`'s extension (case
    /// insensitive). An unknown extension is an error listing the known ones.
    pub fn from_path(path: &Path) -> Result<Format> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        Format::ALL
            .into_iter()
            .find(|f| f.extensions().contains(&ext.as_str()))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{}: unknown dataset format; use one of the extensions {}",
                    path.display(),
                    Self::list(Format::ALL.into_iter())
                ))
            })
    }

    /// The format of a dataset file to write, by `path`'s extension: as
    /// [`Format::from_path`], and an error for the formats that are only read.
    pub fn for_output(path: &Path) -> Result<Format> {
        let f = Format::from_path(path)?;
        if f.writable() {
            Ok(f)
        } else {
            Err(Error::invalid(format!(
                "{}: {} is an input format only; write one of {}",
                path.display(),
                f.name(),
                Self::list(Format::ALL.into_iter().filter(|f| f.writable()))
            )))
        }
    }

    fn list(formats: impl Iterator<Item = Format>) -> String {
        formats
            .map(|f| match f {
                Format::OsmPbf => ".osm.pbf".to_string(),
                f => format!(".{}", f.extensions()[0]),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    }
}

/// An error about `path`: `"{path}: {msg}"`.
pub(crate) fn bad(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::invalid(format!("{}: {msg}", path.display()))
}

/// The text of `e` to put in a new error that says where it occurred (a
/// file, a record): an [`Error::InvalidInput`]'s message without the
/// `invalid input: ` its display starts with, which the new error's adds
/// again (the user saw "invalid input: f.csv: record 2: invalid input:
/// …"); another error as it displays.
pub fn reason(e: &Error) -> std::borrow::Cow<'_, str> {
    match e {
        Error::InvalidInput(m) => m.as_str().into(),
        e => e.to_string().into(),
    }
}

/// The header of a CSV file whose columns are read by position, in the
/// order `expected` (lower case, e.g. `["id", "minx", "miny", "maxx",
/// "maxy"]`). The csv reader takes the first line as the header whatever
/// it holds, so a file without a header would silently lose its first
/// row: a first line with a number among its fields is refused as data,
/// and so is a header that names an expected column at another position,
/// by its name or a common synonym (`xmin`, `left`, `west`, `lat`, …: see
/// `column_meaning`), since its values would be read as the wrong
/// coordinate. Other names are accepted (names are not case-sensitive).
pub fn check_csv_header(path: &Path, headers: &csv::StringRecord, expected: &[&str]) -> Result<()> {
    let want = expected.join(",");
    if headers.is_empty() {
        // A 0-byte file: not the documented format (an empty input is the
        // header alone), and more often a file cut short than meant.
        return Err(bad(
            path,
            format!("the file is empty: it must start with the header line {want}"),
        ));
    }
    let line = headers.iter().collect::<Vec<_>>().join(",");
    if headers
        .iter()
        .any(|h| !h.trim().is_empty() && h.trim().parse::<f64>().is_ok())
    {
        return Err(bad(
            path,
            format!(
                "line 1 ({line:?}) is data, not a header: the file must start with the \
                 header line {want}"
            ),
        ));
    }
    for (i, h) in headers.iter().enumerate().take(expected.len()) {
        let h = h.trim().to_ascii_lowercase();
        let meant = column_meaning(&h);
        if expected.get(i) != Some(&meant) && expected.contains(&meant) {
            let what = if meant == h {
                String::new()
            } else {
                format!(" ({meant})")
            };
            return Err(bad(
                path,
                format!(
                    "line 1: column {} is named {h:?}{what}, but the columns are read in the \
                     order {want}",
                    i + 1
                ),
            ));
        }
    }
    Ok(())
}

/// The column a header name `h` (lower case) stands for among
/// [`BOX_COLUMNS`], [`WINDOW_COLUMNS`] and [`POINT_COLUMNS`]: itself, or
/// the canonical name of a common synonym (`xmin`, `left`, `west` for
/// `minx`; `lon`, `lat` for `x`, `y`), so that a header naming the
/// coordinates in another order (`id,xmin,xmax,ymin,ymax`, `lat,lon`) is
/// refused rather than read by position as the wrong coordinates.
fn column_meaning(h: &str) -> &str {
    match h {
        "xmin" | "min_x" | "x_min" | "left" | "west" => "minx",
        "ymin" | "min_y" | "y_min" | "bottom" | "south" => "miny",
        "xmax" | "max_x" | "x_max" | "right" | "east" => "maxx",
        "ymax" | "max_y" | "y_max" | "top" | "north" => "maxy",
        "lon" | "lng" | "long" | "longitude" => "x",
        "lat" | "latitude" => "y",
        other => other,
    }
}

/// The header of a CSV dataset of boxes.
pub const BOX_COLUMNS: [&str; 5] = ["id", "minx", "miny", "maxx", "maxy"];
/// The header of a CSV file of query windows.
pub const WINDOW_COLUMNS: [&str; 4] = ["minx", "miny", "maxx", "maxy"];
/// The header of a CSV file of query points.
pub const POINT_COLUMNS: [&str; 2] = ["x", "y"];

/// An object id from a floating-point attribute (dBase numeric fields,
/// FlatGeobuf doubles, JSON numbers): a non-negative integer that `f64`
/// holds exactly (at most 2^53).
pub(crate) fn id_from_f64(v: f64) -> Option<u64> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= EXACT).then_some(v as u64)
}

/// How many records a reader reads between two questions whether its
/// process was asked to stop ([`geoflash::engine::stop_requested`]): as
/// often as the in-memory bulk loads ask in their passes over the records.
pub const STOP_EVERY: u64 = 1 << 16;

/// The error of a read of `path` that stopped because its process was
/// asked to ([`geoflash::engine::request_stop`]: the command line's
/// Ctrl-C): [`Error::Interrupted`].
pub fn read_stopped(path: &Path) -> Error {
    Error::Interrupted(format!("the reading of {} was stopped", path.display()))
}

/// [`read_stopped`] when the process was asked to stop and `read`, the
/// number of records read from `path` so far, is a multiple of
/// [`STOP_EVERY`].
pub(crate) fn stop_check(path: &Path, read: u64) -> Result<()> {
    match read.is_multiple_of(STOP_EVERY) && geoflash::engine::stop_requested() {
        true => Err(read_stopped(path)),
        false => Ok(()),
    }
}

/// `e`, an error reading `path`, or [`read_stopped`] when the process was
/// asked to stop: the failure of a [`Stoppable`] reader, whatever the
/// decoder over it made of it.
pub(crate) fn unless_stopped(path: &Path, e: Error) -> Error {
    match geoflash::engine::stop_requested() {
        true => read_stopped(path),
        false => e,
    }
}

/// A reader whose reads fail once the process is asked to stop, for the
/// decoders that take a whole file in one call before its records (a
/// GeoJSON document's parse, an OSM PBF file's passes): they ask at each
/// read (a buffer's refill, for the reader under a [`BufReader`]), and
/// their caller turns the failure into [`read_stopped`]
/// ([`unless_stopped`]).
pub(crate) struct Stoppable<R>(pub(crate) R);

impl<R: Read> Read for Stoppable<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if geoflash::engine::stop_requested() {
            // Not `ErrorKind::Interrupted`, which readers retry.
            return Err(std::io::Error::other("the reading was stopped"));
        }
        self.0.read(buf)
    }
}

impl<R: Seek> Seek for Stoppable<R> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.0.seek(pos)
    }
}

/// Collects the objects of a file: checks each geometry
/// ([`geoflash::engine::bounding_rect`]) and that ids are unique, and
/// stops every [`STOP_EVERY`] objects when the process was asked to
/// ([`read_stopped`]).
pub(crate) struct Collector<'p> {
    path: &'p Path,
    seen: HashSet<u64>,
    /// The objects so far, in file order.
    pub(crate) out: Vec<(u64, Geometry)>,
}

impl<'p> Collector<'p> {
    pub(crate) fn new(path: &'p Path) -> Self {
        Collector {
            path,
            seen: HashSet::new(),
            out: Vec::new(),
        }
    }

    /// Adds object `id`; `what` names the record in errors
    /// (`"feature 3"`), followed by the id.
    pub(crate) fn push(
        &mut self,
        what: impl std::fmt::Display,
        id: u64,
        g: Geometry,
    ) -> Result<()> {
        stop_check(self.path, self.out.len() as u64)?;
        geoflash::engine::bounding_rect(&g)
            .map_err(|e| bad(self.path, format!("{what} (id {id}): {}", reason(&e))))?;
        if !self.seen.insert(id) {
            return Err(bad(self.path, format!("{what}: duplicate id {id}")));
        }
        self.out.push((id, g));
        Ok(())
    }

    /// The objects, in file order.
    pub(crate) fn finish(self) -> Vec<(u64, Geometry)> {
        self.out
    }
}

/// The geometry written for a rectangle record: a point when the rectangle
/// is a point, else the polygon of its four corners (counter-clockwise from
/// `(min_x, min_y)`, closed), whose bounding rectangle is the record's,
/// bit for bit.
pub fn rect_geometry(r: &Rect) -> Geometry {
    if r.min_x() == r.max_x() && r.min_y() == r.max_y() {
        return Geometry::Point(geo_types::Point::new(r.min_x(), r.min_y()));
    }
    let ring = vec![
        geo_types::coord! { x: r.min_x(), y: r.min_y() },
        geo_types::coord! { x: r.max_x(), y: r.min_y() },
        geo_types::coord! { x: r.max_x(), y: r.max_y() },
        geo_types::coord! { x: r.min_x(), y: r.max_y() },
        geo_types::coord! { x: r.min_x(), y: r.min_y() },
    ];
    Geometry::Polygon(geo_types::Polygon::new(
        geo_types::LineString::new(ring),
        vec![],
    ))
}

/// Writes `(id, rect)` records to `path` in the format of its extension
/// ([`Format::for_output`]): CSV `id,minx,miny,maxx,maxy`, or in the other
/// formats each rectangle as [`rect_geometry`]. Returns the number written.
/// The file is written whole or not at all ([`OutputFile`]).
pub fn write_dataset(path: &Path, records: impl Iterator<Item = (u64, Rect)>) -> Result<u64> {
    Format::for_output(path)?;
    let out = OutputFile::create(path)?;
    let n = write_dataset_to(&out, records)?;
    out.commit()?;
    Ok(n)
}

/// [`write_dataset`] into `out`, without the commit.
fn write_dataset_to(out: &OutputFile, records: impl Iterator<Item = (u64, Rect)>) -> Result<u64> {
    if Format::for_output(out.path())? == Format::Csv {
        return write_csv_with(out, &[], records.map(|(id, r)| Ok((id, r, &[] as &Row))));
    }
    write_objects_to(
        out,
        &[],
        records.map(|(id, r)| (id, rect_geometry(&r), &[] as &Row)),
    )
}

/// The fewest bytes an object takes in any output format (a CSV line
/// `0,0,0,0,0` and its newline).
const MIN_OBJECT_BYTES: u64 = 10;

/// Refuses `count` objects written to `path` when they cannot fit in the
/// space its filesystem has free (at `MIN_OBJECT_BYTES` each, a lower
/// bound): a dataset streamed to a file holds no object in memory, so the
/// disk is what bounds its size, and a count beyond it is bad input found
/// before any work, not a full disk found after.
pub fn check_room(path: &Path, count: u64) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let fs = rustix::fs::statvfs(dir).map_err(|e| io_err(dir, std::io::Error::from(e)))?;
    let free = u128::from(fs.f_bavail) * u128::from(fs.f_frsize);
    let need = u128::from(count) * u128::from(MIN_OBJECT_BYTES);
    if need > free {
        return Err(Error::invalid(format!(
            "count: {count} is too large for {}: its objects need at least {need} bytes, the filesystem has {free} free",
            path.display()
        )));
    }
    Ok(())
}

/// [`write_dataset`] for records that may fail as they come (a generator
/// streaming its objects, [`crate::generate::objects`]): the first error
/// ends the writing and is returned, leaving `path` as it was (the
/// previous file, or none).
pub fn write_dataset_results(
    path: &Path,
    records: impl Iterator<Item = Result<(u64, Rect)>>,
) -> Result<u64> {
    Format::for_output(path)?;
    let out = OutputFile::create(path)?;
    let mut failure = None;
    let ok = records.map_while(|r| r.map_err(|e| failure = Some(e)).ok());
    let written = write_dataset_to(&out, ok)?;
    if let Some(e) = failure {
        // The file was written up to the error: it is not the dataset
        // (dropped uncommitted, it is removed).
        return Err(e);
    }
    out.commit()?;
    Ok(written)
}

/// Writes `(id, geometry)` objects to `path` in the format of its extension
/// ([`Format::for_output`]): `.csv` holds their bounding rectangles,
/// `.geojson`, `.fgb` and `.parquet` the geometries with their ids (GeoJSON
/// `id` and an `id` property, an unsigned `id` column in FlatGeobuf and
/// GeoParquet), in the order given. Returns the number written.
pub fn write_objects<G: Borrow<Geometry>>(
    path: &Path,
    objects: impl IntoIterator<Item = (u64, G)>,
) -> Result<u64> {
    write_objects_with(
        path,
        &[],
        objects.into_iter().map(|(id, g)| (id, g, &[] as &Row)),
    )
}

/// [`write_objects`] with attribute `columns`: each object comes with its
/// row (one value per column), written as the format stores attributes
/// ([`attributes`]). No columns: exactly [`write_objects`]'s files. The
/// file is written whole or not at all ([`OutputFile`]).
pub fn write_objects_with<'r, G: Borrow<Geometry>>(
    path: &Path,
    columns: &[Column],
    objects: impl IntoIterator<Item = (u64, G, &'r Row)>,
) -> Result<u64> {
    Format::for_output(path)?;
    let out = OutputFile::create(path)?;
    let n = write_objects_to(&out, columns, objects)?;
    out.commit()?;
    Ok(n)
}

/// [`write_objects_with`] into `out`, without the commit.
fn write_objects_to<'r, G: Borrow<Geometry>>(
    out: &OutputFile,
    columns: &[Column],
    objects: impl IntoIterator<Item = (u64, G, &'r Row)>,
) -> Result<u64> {
    let path = out.path();
    let mut objects = objects.into_iter().map(|(id, g, row)| {
        if row.len() == columns.len() {
            Ok((id, g, row))
        } else {
            Err(bad(
                path,
                format!(
                    "object {id} has {} attribute values for {} columns",
                    row.len(),
                    columns.len()
                ),
            ))
        }
    });
    // the writers take plain items: the first bad row stops the stream and
    // is returned after the writer has stopped
    let mut failure = None;
    let items = std::iter::from_fn(|| match objects.next()? {
        Ok(item) => Some(item),
        Err(e) => {
            failure = Some(e);
            None
        }
    });
    let n = match Format::for_output(path)? {
        Format::Csv => write_csv_with(
            out,
            columns,
            items.map(|(id, g, row)| {
                geoflash::engine::bounding_rect(g.borrow())
                    .map(|r| (id, r, row))
                    .map_err(|e| bad(path, format!("object {id}: {}", reason(&e))))
            }),
        ),
        Format::GeoJson => write_geojson(out, columns, items),
        Format::FlatGeobuf => fgb::write_to(out, columns, items),
        Format::GeoParquet => geoparquet::write_to(out, columns, items),
        // for_output refuses the input-only formats
        f @ (Format::Shapefile | Format::GeoPackage | Format::OsmPbf) => {
            Err(bad(path, format!("{} output is not supported", f.name())))
        }
    }?;
    match failure {
        Some(e) => Err(e),
        None => Ok(n),
    }
}

/// Writes the bytes of `out` through `body`, mapping I/O errors to its
/// destination.
fn write_file(
    out: &OutputFile,
    body: impl FnOnce(&mut BufWriter<&File>) -> Result<u64>,
) -> Result<u64> {
    let path = out.path();
    let mut w = BufWriter::new(out.file());
    let n = body(&mut w)?;
    w.flush().map_err(|e| io_err(path, e))?;
    Ok(n)
}

/// CSV rectangles, then one field per attribute column.
fn write_csv_with<'r>(
    out: &OutputFile,
    columns: &[Column],
    records: impl Iterator<Item = Result<(u64, Rect, &'r Row)>>,
) -> Result<u64> {
    let path = out.path();
    write_file(out, |w| {
        let io = |e| io_err(path, e);
        write!(w, "id,minx,miny,maxx,maxy").map_err(io)?;
        for c in columns {
            write!(w, ",{}", attributes::csv_field(&c.name)).map_err(io)?;
        }
        writeln!(w).map_err(io)?;
        let mut n = 0u64;
        for rec in records {
            let (id, r, row) = rec?;
            write!(
                w,
                "{id},{},{},{},{}",
                r.min_x(),
                r.min_y(),
                r.max_x(),
                r.max_y()
            )
            .map_err(io)?;
            for v in row {
                match v {
                    None => write!(w, ","),
                    Some(Value::UInt(x)) => write!(w, ",{x}"),
                    Some(Value::Text(t)) => write!(w, ",{}", attributes::csv_field(t)),
                }
                .map_err(io)?;
            }
            writeln!(w).map_err(io)?;
            n += 1;
        }
        Ok(n)
    })
}

fn write_geojson<'r, G: Borrow<Geometry>>(
    out: &OutputFile,
    columns: &[Column],
    objects: impl IntoIterator<Item = (u64, G, &'r Row)>,
) -> Result<u64> {
    let path = out.path();
    write_file(out, |w| {
        let io = |e| io_err(path, e);
        write!(w, "{{\"type\":\"FeatureCollection\",\"features\":[").map_err(io)?;
        let mut n = 0u64;
        for (id, g, row) in objects {
            if n > 0 {
                writeln!(w, ",").map_err(io)?;
            }
            let gj = geojson::Geometry::from(g.borrow());
            let text = json_text(path, id, &gj)?;
            let mut props = format!("\"id\":{id}");
            for (c, v) in columns.iter().zip(row) {
                let value = match v {
                    None => "null".to_string(),
                    Some(Value::UInt(x)) => x.to_string(),
                    Some(Value::Text(t)) => json_text(path, id, t)?,
                };
                props.push_str(&format!(",{}:{value}", json_text(path, id, &c.name)?));
            }
            write!(
                w,
                "{{\"type\":\"Feature\",\"id\":{id},\"properties\":{{{props}}},\"geometry\":{text}}}"
            )
            .map_err(io)?;
            n += 1;
        }
        writeln!(w, "]}}").map_err(io)?;
        Ok(n)
    })
}

/// The JSON text of `v`, a part of object `id` of the GeoJSON file `path`.
fn json_text(path: &Path, id: u64, v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(v).map_err(|e| bad(path, format!("object {id}: {e}")))
}

/// Reads the ids and the attribute columns of a file of a writable
/// [`Format`], in file order: the columns after `id,minx,miny,maxx,maxy`
/// of a rectangle CSV (or beside the `id` and WKT columns of a WKT CSV),
/// all as text; the properties other than `id` of GeoJSON features
/// (numbers that are unsigned integers as such, other values as their JSON
/// text, `null` absent; columns in name order); the columns other than `id`
/// of FlatGeobuf (integers that are non-negative as such, the rest as text);
/// the top-level integer and binary columns other than `id` and the
/// geometry of GeoParquet. Ids are those the geometry readers give.
pub fn read_attributes(path: &Path) -> Result<(Vec<u64>, attributes::Attributes)> {
    match Format::from_path(path)? {
        Format::Csv => attributes::read_csv(path),
        Format::GeoJson => attributes::read_geojson(path),
        Format::FlatGeobuf => fgb::read_attributes(path),
        Format::GeoParquet => geoparquet::read_attributes(path),
        f => Err(bad(
            path,
            format!("{} files carry no attributes geoflash reads", f.name()),
        )),
    }
}

/// Reads `(id, rect)` records from a CSV dataset file (`id,minx,miny,maxx,maxy` with a header).
/// Ids must be unique: a repeated id is an error naming its record. Empty
/// lines and lines of blanks are skipped ([`csv_data_record`]). Stops every
/// [`STOP_EVERY`] records when the process was asked to ([`read_stopped`]).
pub fn read_csv(path: &Path) -> Result<Vec<(u64, Rect)>> {
    let mut first = HashMap::new();
    csv_records(path)?
        .enumerate()
        .map(|(n, record)| {
            stop_check(path, n as u64)?;
            let (id, rect) = record?;
            if let Some(earlier) = first.insert(id, n + 1) {
                return Err(Error::invalid(format!(
                    "record {} of {}: duplicate id: object {id} is also record {earlier}",
                    n + 1,
                    path.display()
                )));
            }
            Ok((id, rect))
        })
        .collect()
}

/// Streams the `(id, rect)` records of a CSV dataset file
/// (`id,minx,miny,maxx,maxy` with a header) one at a time, for loads that
/// must not hold the whole input in memory. Each item is a record or the
/// error of its line. Blank lines are skipped ([`csv_data_record`]).
pub fn csv_records(path: &Path) -> Result<impl Iterator<Item = Result<(u64, Rect)>>> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    // Fields are trimmed as they are parsed (`trim_ascii`, what the csv
    // crate's `Trim::All` removes) rather than by the reader, which would
    // copy every record into a new one. Flexible: csv_data_record skips a
    // line of blanks (one blank field) and checks the number of fields.
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(BufReader::new(file));
    let headers = rdr.headers().map_err(|e| bad(path, e))?;
    check_csv_header(path, headers, &BOX_COLUMNS)?;
    let width = headers.len();
    let path = path.to_path_buf();
    // One record buffer for the whole file (no allocation per line).
    let mut rec = csv::ByteRecord::new();
    let mut line = 0;
    Ok(std::iter::from_fn(move || {
        let item = loop {
            match rdr.read_byte_record(&mut rec) {
                Ok(false) => return None,
                Ok(true) => match csv_data_record(&path, line + 1, &rec, width) {
                    Ok(false) => continue,
                    Ok(true) => break csv_record(&path, line, &rec),
                    Err(e) => break Err(e),
                },
                Err(e) => break Err(bad(&path, e)),
            }
        };
        line += 1;
        Some(item)
    }))
}

/// Whether `rec`, record `n` (from 1, blank lines not counted) of the CSV
/// file `path` read with `flexible(true)`, is data: `false` for a line of
/// blanks (spaces or tabs: one field, blank once trimmed), which is skipped
/// as the csv crate skips an empty line; `true` for a record of `width`
/// fields (the header's); an error naming the file, the record and its
/// line otherwise (the csv crate's own, without `flexible`, is "found
/// record with 1 fields" for a line of blanks).
pub fn csv_data_record(path: &Path, n: usize, rec: &csv::ByteRecord, width: usize) -> Result<bool> {
    if rec.len() == 1 && rec[0].trim_ascii().is_empty() {
        return Ok(false);
    }
    if rec.len() == width {
        return Ok(true);
    }
    let line = rec
        .position()
        .map_or(String::new(), |p| format!(" (line {})", p.line()));
    Err(bad(
        path,
        format!(
            "record {n}{line} has {} fields, but the header has {width}",
            rec.len()
        ),
    ))
}

/// One record of [`csv_records`].
fn csv_record(path: &Path, line: usize, rec: &csv::ByteRecord) -> Result<(u64, Rect)> {
    let at = |i: usize| {
        let field = rec.get(i).ok_or_else(|| {
            bad(
                path,
                format!(
                    "record {} has {} fields, expected id,minx,miny,maxx,maxy",
                    line + 1,
                    rec.len()
                ),
            )
        })?;
        std::str::from_utf8(field.trim_ascii()).map_err(|_| {
            bad(
                path,
                format!("record {}: field {} is not UTF-8", line + 1, i + 1),
            )
        })
    };
    let num = |i: usize| -> Result<f64> {
        let s = at(i)?;
        s.parse::<f64>()
            .map_err(|_| bad(path, format!("record {}: {s:?} is not a number", line + 1)))
    };
    let id_s = at(0)?;
    let id = id_s.parse::<u64>().map_err(|_| {
        bad(
            path,
            format!(
                "record {}: id {id_s:?} is not a non-negative integer",
                line + 1
            ),
        )
    })?;
    let r = Rect::new(num(1)?, num(2)?, num(3)?, num(4)?)
        .map_err(|e| bad(path, format!("record {}: {}", line + 1, reason(&e))))?;
    Ok((id, r))
}

/// The UTF-8 encoding of U+FEFF, the byte order mark.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The id of a feature: the feature's `id`, else an `id` property (a
/// non-negative integer, a float holding one exactly, as `3.0`, or a string
/// holding an integer), else `None`.
fn feature_id(f: &geojson::Feature, path: &Path, n: usize) -> Result<Option<u64>> {
    let not_id = |v: &dyn std::fmt::Display| {
        bad(
            path,
            format!("feature {n}: id {v} is not a non-negative integer"),
        )
    };
    let number = |x: &serde_json::Number| -> Result<u64> {
        match (x.as_u64(), x.as_f64()) {
            (Some(v), _) => Ok(v),
            (None, Some(v)) if v.is_finite() && v >= 0.0 && v.fract() == 0.0 => {
                id_from_f64(v).ok_or_else(|| {
                    bad(
                        path,
                        format!(
                            "feature {n}: id {x} is out of range: an id written as a float must be \
                             an integer of at most 2^53 (9007199254740992), which a float holds exactly"
                        ),
                    )
                })
            }
            _ => Err(not_id(x)),
        }
    };
    let from_json = |v: &serde_json::Value| -> Result<u64> {
        match v {
            serde_json::Value::Number(x) => number(x),
            serde_json::Value::String(t) => t.trim().parse().map_err(|_| not_id(&format!("{t:?}"))),
            other => Err(not_id(other)),
        }
    };
    match (&f.id, f.properties.as_ref().and_then(|p| p.get("id"))) {
        (Some(geojson::feature::Id::Number(x)), _) => number(x).map(Some),
        (Some(geojson::feature::Id::String(t)), _) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| not_id(&format!("{t:?}"))),
        (None, Some(v)) => from_json(v).map(Some),
        (None, None) => Ok(None),
    }
}

/// The features of a GeoJSON file, in file order: those of a
/// FeatureCollection, a single Feature, or a bare Geometry as one feature
/// without properties. A UTF-8 byte order mark at the start of the file
/// (which JSON forbids but Windows tools write, and GDAL skips) is skipped.
pub(crate) fn geojson_features(path: &Path) -> Result<Vec<geojson::Feature>> {
    use std::io::BufRead;
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    // The document is parsed whole: it stops at a read once the process
    // is asked to.
    let mut reader = BufReader::new(Stoppable(file));
    if reader
        .fill_buf()
        .map_err(|e| unless_stopped(path, io_err(path, e)))?
        .starts_with(UTF8_BOM)
    {
        reader.consume(UTF8_BOM.len());
    }
    let gj = geojson::GeoJson::from_reader(reader)
        .map_err(|e| unless_stopped(path, bad(path, format!("not GeoJSON: {e}"))))?;
    Ok(match gj {
        geojson::GeoJson::FeatureCollection(fc) => fc.features,
        geojson::GeoJson::Feature(f) => vec![f],
        geojson::GeoJson::Geometry(g) => vec![geojson::Feature::from(g)],
    })
}

/// The error for a position of fewer than two coordinates anywhere in `g`
/// (`[140]`), which the `geojson` crate's conversion indexes without a
/// check (a panic); None when every position has x and y.
fn short_position(g: &geojson::Geometry) -> Option<String> {
    use geojson::GeometryValue as V;
    let short = |p: &geojson::Position| p.as_slice().len() < 2;
    let found = match &g.value {
        V::Point { coordinates } => short(coordinates),
        V::MultiPoint { coordinates } | V::LineString { coordinates } => {
            coordinates.iter().any(short)
        }
        V::MultiLineString { coordinates } | V::Polygon { coordinates } => {
            coordinates.iter().flatten().any(short)
        }
        V::MultiPolygon { coordinates } => coordinates.iter().flatten().flatten().any(short),
        V::GeometryCollection { geometries } => {
            return geometries.iter().find_map(short_position);
        }
    };
    found.then(|| {
        format!(
            "a {} has a position with fewer than two coordinates",
            g.value.type_name()
        )
    })
}

/// Reads `(id, geometry)` records from a GeoJSON file: a FeatureCollection,
/// a single Feature or a bare Geometry (after a UTF-8 byte order mark, if
/// the file starts with one). Ids come from each feature's `id`, else its
/// `id` property, else its position in the file (0, 1, …): an integer, a
/// float holding one up to 2^53 (`3.0`) or a string holding an integer.
/// Features without geometry, geometries with non-finite or out-of-range
/// coordinates, empty geometries and duplicate ids are errors naming the
/// feature.
pub fn read_geojson(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    let features = geojson_features(path)?;
    let mut objects = Collector::new(path);
    objects.out.reserve(features.len());
    for (n, f) in features.into_iter().enumerate() {
        let id = feature_id(&f, path, n)?.unwrap_or(n as u64);
        let g = f
            .geometry
            .ok_or_else(|| bad(path, format!("feature {n} (id {id}) has no geometry")))?;
        let g = short_position(&g)
            .map_or_else(|| Geometry::try_from(g).map_err(|e| e.to_string()), Err)
            .map_err(|e| bad(path, format!("feature {n} (id {id}): {e}")))?;
        objects.push(format_args!("feature {n}"), id, g)?;
    }
    Ok(objects.finish())
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
        assert!(matches!(got[0].1, Geometry::Polygon(_)));
        assert!(matches!(got[1].1, Geometry::LineString(_)));
        assert!(matches!(got[2].1, Geometry::Point(_)));
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
            assert_eq!(geoflash::engine::bounding_rect(g).unwrap(), *r);
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

    /// Issue 44, item 12: a CSV file without a header line is refused
    /// (naming the file and line 1) instead of losing its first row, and
    /// so is a header whose coordinate names are out of order.
    #[test]
    fn a_csv_whose_first_line_is_data_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nohead.csv");
        std::fs::write(&p, "1,0,0,1,1\n2,2,2,3,3\n3,4,4,5,5\n").unwrap();
        for e in [read_csv(&p).unwrap_err(), csv_records(&p).err().unwrap()] {
            let m = e.to_string();
            assert!(e.is_user_error(), "{m}");
            assert!(m.contains("nohead.csv") && m.contains("line 1"), "{m}");
            assert!(
                m.contains("not a header") && m.contains("id,minx,miny,maxx,maxy"),
                "{m}"
            );
        }
        // One number is enough (an id column named "7" is data).
        std::fs::write(&p, "7,minx,miny,maxx,maxy\n1,0,0,1,1\n").unwrap();
        assert!(read_csv(&p)
            .unwrap_err()
            .to_string()
            .contains("not a header"));
        // Coordinates named out of order would be read as the wrong ones.
        std::fs::write(&p, "id,miny,minx,maxx,maxy\n1,0,0,1,1\n").unwrap();
        let m = read_csv(&p).unwrap_err().to_string();
        assert!(m.contains("column 2") && m.contains("\"miny\""), "{m}");
        // Other names, any case, are headers.
        for head in [
            "ID,MinX,MinY,MaxX,MaxY",
            "fid,xmin,ymin,xmax,ymax",
            "id,minx,miny,maxx,maxy,name",
        ] {
            let extra = if head.ends_with("name") { ",a" } else { "" };
            std::fs::write(&p, format!("{head}\n1,0,0,1,1{extra}\n2,2,2,3,3{extra}\n")).unwrap();
            assert_eq!(read_csv(&p).unwrap().len(), 2, "{head}");
        }
        // Windows and points files.
        let hdr = |t: &str| {
            let mut r = csv::ReaderBuilder::new().from_reader(t.as_bytes());
            r.headers().unwrap().clone()
        };
        assert!(check_csv_header(&p, &hdr("0.1,0.1,0.2,0.2\n"), &WINDOW_COLUMNS).is_err());
        assert!(check_csv_header(&p, &hdr("minx,miny,maxx,maxy\n"), &WINDOW_COLUMNS).is_ok());
        assert!(check_csv_header(&p, &hdr("y,x\n"), &POINT_COLUMNS).is_err());
        assert!(check_csv_header(&p, &hdr("x,y\n"), &POINT_COLUMNS).is_ok());
        assert!(check_csv_header(&p, &hdr("-1e3,5\n"), &POINT_COLUMNS).is_err());
        // Synonyms in another order would be read as the wrong coordinates.
        for (head, cols) in [
            ("id,xmin,xmax,ymin,ymax\n", &BOX_COLUMNS[..]),
            ("id,left,right,bottom,top\n", &BOX_COLUMNS[..]),
            ("west,east,south,north\n", &WINDOW_COLUMNS[..]),
            ("lat,lon\n", &POINT_COLUMNS[..]),
        ] {
            let m = check_csv_header(&p, &hdr(head), cols)
                .unwrap_err()
                .to_string();
            assert!(m.contains("read in the order"), "{head}: {m}");
        }
        for (head, cols) in [
            ("fid,xmin,ymin,xmax,ymax\n", &BOX_COLUMNS[..]),
            ("west,south,east,north\n", &WINDOW_COLUMNS[..]),
            ("lon,lat\n", &POINT_COLUMNS[..]),
        ] {
            assert!(check_csv_header(&p, &hdr(head), cols).is_ok(), "{head}");
        }
        let empty = check_csv_header(&p, &hdr(""), &BOX_COLUMNS)
            .unwrap_err()
            .to_string();
        assert!(empty.contains("the file is empty"), "{empty}");
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
    fn csv_fields_are_trimmed_and_a_field_that_is_not_utf8_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let padded = dir.path().join("padded.csv");
        std::fs::write(&padded, " id , minx,miny ,maxx,maxy\n 3 , 0.5 ,\t1,2 ,3\n").unwrap();
        assert_eq!(
            read_csv(&padded).unwrap(),
            vec![(3, Rect::new(0.5, 1.0, 2.0, 3.0).unwrap())]
        );
        let bytes = dir.path().join("bytes.csv");
        std::fs::write(&bytes, b"id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,0,\xff,1,1\n").unwrap();
        let e = read_csv(&bytes).unwrap_err().to_string();
        assert!(
            e.contains("bytes.csv") && e.contains("record 2: field 3 is not UTF-8"),
            "{e}"
        );
    }

    #[test]
    fn formats_by_extension() {
        let f = |p: &str| Format::from_path(Path::new(p));
        assert_eq!(f("a.CSV").unwrap(), Format::Csv);
        assert_eq!(f("a.json").unwrap(), Format::GeoJson);
        assert_eq!(f("a.fgb").unwrap(), Format::FlatGeobuf);
        assert_eq!(f("a.parquet").unwrap(), Format::GeoParquet);
        assert_eq!(f("a.shp").unwrap(), Format::Shapefile);
        assert_eq!(f("b.GPKG").unwrap(), Format::GeoPackage);
        assert_eq!(f("monaco-latest.osm.pbf").unwrap(), Format::OsmPbf);
        for p in ["a.xyz", "a", "a.shx"] {
            let e = f(p).unwrap_err().to_string();
            assert!(
                e.contains("unknown dataset format") && e.contains(".osm.pbf"),
                "{e}"
            );
        }
        for p in ["a.shp", "a.gpkg", "a.osm.pbf"] {
            let e = Format::for_output(Path::new(p)).unwrap_err().to_string();
            assert!(e.contains("input format only") && e.contains(".fgb"), "{e}");
        }
        for fmt in Format::ALL {
            let p = format!("x.{}", fmt.extensions()[0]);
            assert_eq!(f(&p).unwrap(), fmt);
            assert_eq!(Format::for_output(Path::new(&p)).is_ok(), fmt.writable());
        }
    }

    #[test]
    fn a_failing_record_stream_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["d.csv", "d.geojson"] {
            let path = dir.path().join(name);
            let rect = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
            let records = vec![
                Ok((0, rect)),
                Err(Error::invalid("drawn badly")),
                Ok((2, rect)),
            ];
            let e = write_dataset_results(&path, records.into_iter()).unwrap_err();
            assert!(e.to_string().contains("drawn badly"), "{name}: {e}");
            assert!(!path.exists(), "{name}: a partial file is left");
            let good = vec![Ok((0, rect)), Ok((1, rect))];
            assert_eq!(
                write_dataset_results(&path, good.into_iter()).unwrap(),
                2,
                "{name}"
            );
            // A failure keeps the previous file whole (review finding:
            // outputs are written whole or not at all).
            let previous = std::fs::read(&path).unwrap();
            let records = vec![Ok((5, rect)), Err(Error::invalid("drawn badly"))];
            assert!(write_dataset_results(&path, records.into_iter()).is_err());
            assert!(
                std::fs::read(&path).unwrap() == previous,
                "{name}: the previous file was not kept"
            );
            let names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert!(
                names.iter().all(|n| !n.to_string_lossy().ends_with(".tmp")),
                "{name}: {names:?}"
            );
        }
    }

    /// A bad row part-way through (attributes that do not fit the columns)
    /// leaves the previous file of every writable format whole, and no
    /// temporary file.
    #[test]
    fn a_failing_object_stream_keeps_the_previous_file() {
        let dir = tempfile::tempdir().unwrap();
        let rect = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
        let columns = vec![Column {
            name: "name".into(),
            kind: attributes::Kind::Text,
        }];
        let good: &Row = &[Some(Value::Text("a".into()))];
        let short: &Row = &[];
        for name in ["d.csv", "d.geojson", "d.fgb", "d.parquet"] {
            let path = dir.path().join(name);
            let objects = (0..5000u64).map(|i| (i, rect_geometry(&rect), good));
            if write_objects_with(&path, &columns, objects).is_err() {
                // GeoParquet without its cargo feature
                continue;
            }
            let previous = std::fs::read(&path).unwrap();
            let objects = (0..5000u64).map(|i| {
                let row = if i == 4000 { short } else { good };
                (i, rect_geometry(&rect), row)
            });
            let e = write_objects_with(&path, &columns, objects).unwrap_err();
            assert!(e.to_string().contains("object 4000"), "{name}: {e}");
            assert!(
                std::fs::read(&path).unwrap() == previous,
                "{name}: the previous file was not kept"
            );
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.csv");
        std::fs::write(&p, "id,minx,miny,maxx,maxy\n1,0,0,nan,1\n").unwrap();
        assert!(read_csv(&p).unwrap_err().to_string().contains("record 1"));
        std::fs::write(&p, "id,minx,miny,maxx,maxy\n1,2,0,1,1\n").unwrap();
        assert!(read_csv(&p).unwrap_err().to_string().contains("inverted"));
        std::fs::write(&p, "id,minx,miny,maxx,maxy\n-1,0,0,1,1\n").unwrap();
        assert!(read_csv(&p).is_err());
        let out = dir.path().join("x.shp");
        let e = write_dataset(&out, std::iter::empty()).unwrap_err();
        assert!(e.to_string().contains("input format only"), "{e}");
        assert!(!out.exists());
    }

    /// A GeoJSON feature id written as a float holding an integer (`3.0`)
    /// is that integer, as FlatGeobuf and GDAL read it; a fraction, a
    /// negative or a float beyond 2^53 (where a float no longer tells
    /// neighbouring integers apart) is refused naming the feature. A file
    /// starting with a UTF-8 byte order mark is read.
    #[test]
    fn geojson_float_ids_and_a_byte_order_mark() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.geojson");
        let feature = |id: &str, props: &str| {
            format!(
                r#"{{"type":"Feature"{id},"properties":{{{props}}},"geometry":{{"type":"Point","coordinates":[1,2]}}}}"#
            )
        };
        let collection = |features: &[String]| {
            format!(
                r#"{{"type":"FeatureCollection","features":[{}]}}"#,
                features.join(",")
            )
        };
        let good = collection(&[
            feature(r#","id":3.0"#, ""),
            feature("", r#""id":5.0"#),
            feature(r#","id":0.0"#, ""),
            feature(r#","id":9007199254740992.0"#, ""),
            feature(r#","id":12"#, ""),
            feature(r#","id":7e2"#, ""),
        ]);
        std::fs::write(&p, &good).unwrap();
        let ids: Vec<u64> = read_geojson(&p).unwrap().iter().map(|o| o.0).collect();
        assert_eq!(ids, [3, 5, 0, 9_007_199_254_740_992, 12, 700]);
        for (id, props, want) in [
            (
                r#","id":3.5"#,
                "",
                "feature 1: id 3.5 is not a non-negative integer",
            ),
            (
                "",
                r#""id":2.25"#,
                "feature 1: id 2.25 is not a non-negative integer",
            ),
            (
                r#","id":-2.0"#,
                "",
                "feature 1: id -2.0 is not a non-negative integer",
            ),
            (
                r#","id":9007199254740994.0"#,
                "",
                "feature 1: id 9007199254740994.0 is out of range",
            ),
            (r#","id":1e300"#, "", "feature 1: id 1e+300 is out of range"),
            (r#","id":1e19"#, "", "feature 1: id 1e+19 is out of range"),
            // beyond u64: serde_json reads it as a float
            (
                "",
                r#""id":18446744073709551616"#,
                "feature 1: id 1.8446744073709552e+19 is out of range",
            ),
            // JSON has no NaN: not GeoJSON at all
            (r#","id":NaN"#, "", "not GeoJSON"),
        ] {
            let text = collection(&[feature(r#","id":1"#, ""), feature(id, props)]);
            std::fs::write(&p, text).unwrap();
            let e = read_geojson(&p).unwrap_err();
            let m = e.to_string();
            assert!(e.is_user_error() && m.contains("f.geojson"), "{m}");
            assert!(m.contains(want), "{id}{props}: wanted {want:?}: {m}");
        }
        // A byte order mark, before a collection, a feature or a geometry.
        let bare = r#"{"type":"Point","coordinates":[1,2]}"#;
        for text in [good.as_str(), &feature(r#","id":4.0"#, ""), bare] {
            let mut bytes = UTF8_BOM.to_vec();
            bytes.extend(text.as_bytes());
            std::fs::write(&p, &bytes).unwrap();
            let with_bom = read_geojson(&p).unwrap();
            std::fs::write(&p, text).unwrap();
            assert_eq!(with_bom, read_geojson(&p).unwrap(), "{text}");
        }
        let mut bytes = UTF8_BOM.to_vec();
        bytes.extend(good.as_bytes());
        std::fs::write(&p, &bytes).unwrap();
        let (ids, _) = read_attributes(&p).unwrap();
        assert_eq!(ids, [3, 5, 0, 9_007_199_254_740_992, 12, 700]);
        // A BOM alone, or one that is not at the start, is still refused.
        std::fs::write(&p, UTF8_BOM).unwrap();
        assert!(read_geojson(&p)
            .unwrap_err()
            .to_string()
            .contains("not GeoJSON"));
        let mut bytes = b" ".to_vec();
        bytes.extend(UTF8_BOM);
        bytes.extend(bare.as_bytes());
        std::fs::write(&p, &bytes).unwrap();
        assert!(read_geojson(&p)
            .unwrap_err()
            .to_string()
            .contains("not GeoJSON"));
    }

    /// A line of blanks (spaces, tabs) in a CSV of boxes is skipped as an
    /// empty line is (the csv crate skips those), instead of the csv
    /// crate's "found record with 1 fields"; a record of another number of
    /// fields than the header is an error naming its line.
    #[test]
    fn blank_csv_lines_are_skipped_like_empty_ones() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("blank.csv");
        let want = vec![
            (1, Rect::new(0.0, 0.0, 1.0, 1.0).unwrap()),
            (2, Rect::new(2.0, 2.0, 3.0, 3.0).unwrap()),
        ];
        for blank in ["", "   ", "\t", " \t ", "  \r"] {
            for text in [
                format!("id,minx,miny,maxx,maxy\n1,0,0,1,1\n{blank}\n2,2,2,3,3\n"),
                format!("id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,2,2,3,3\n{blank}\n"),
                format!("id,minx,miny,maxx,maxy\n{blank}\n{blank}\n1,0,0,1,1\n2,2,2,3,3"),
            ] {
                std::fs::write(&p, &text).unwrap();
                assert_eq!(read_csv(&p).unwrap(), want, "{text:?}");
                let streamed: Vec<_> = csv_records(&p).unwrap().collect::<Result<_>>().unwrap();
                assert_eq!(streamed, want, "{text:?}");
                assert_eq!(read_attributes(&p).unwrap().0, [1, 2], "{text:?}");
            }
        }
        // Records are numbered without the blank lines; errors give the line.
        std::fs::write(&p, "id,minx,miny,maxx,maxy\n1,0,0,1,1\n \n2,2,2,x,3\n").unwrap();
        let m = read_csv(&p).unwrap_err().to_string();
        assert!(m.contains("record 2: \"x\" is not a number"), "{m}");
        for (line, fields) in [("2,2,2", 3), ("2,2,2,3,3,4", 6), ("7", 1)] {
            std::fs::write(
                &p,
                format!("id,minx,miny,maxx,maxy\n1,0,0,1,1\n\t\n{line}\n"),
            )
            .unwrap();
            let e = read_csv(&p).unwrap_err();
            let m = e.to_string();
            assert!(e.is_user_error() && m.contains("blank.csv"), "{m}");
            let want = format!("record 2 (line 4) has {fields} fields, but the header has 5");
            assert!(m.contains(&want), "{line}: wanted {want:?}: {m}");
            let m = read_attributes(&p).unwrap_err().to_string();
            assert!(m.contains(&want), "{line}: wanted {want:?}: {m}");
        }
        // Extra columns in the header: their records have as many fields.
        std::fs::write(
            &p,
            "id,minx,miny,maxx,maxy,name\n1,0,0,1,1,a\n \n2,2,2,3,3,b\n",
        )
        .unwrap();
        assert_eq!(read_csv(&p).unwrap(), want);
    }

    /// A WKT collection with an empty member: the member adds nothing to
    /// the box (as in WKB, `geoflash::engine::from_wkb`); a collection of empty members only is
    /// an empty geometry, refused.
    #[test]
    fn wkt_collections_with_empty_members() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.csv");
        std::fs::write(
            &p,
            "id,wkt\n1,\"GEOMETRYCOLLECTION (POINT EMPTY, POINT (1 2))\"\n2,\"GEOMETRYCOLLECTION (POINT (3 4), LINESTRING EMPTY)\"\n",
        )
        .unwrap();
        let got = crate::import::read_rects(&p).unwrap();
        assert_eq!(
            got,
            [
                (1, Rect::new(1.0, 2.0, 1.0, 2.0).unwrap()),
                (2, Rect::new(3.0, 4.0, 3.0, 4.0).unwrap())
            ]
        );
        for text in ["GEOMETRYCOLLECTION (POINT EMPTY)", "POINT EMPTY"] {
            std::fs::write(&p, format!("id,wkt\n1,POINT (0 0)\n2,\"{text}\"\n")).unwrap();
            let m = crate::import::read_objects(&p).unwrap_err().to_string();
            assert!(m.contains("record 2") && m.contains("empty"), "{text}: {m}");
        }
    }

    #[test]
    fn ids_from_floats() {
        assert_eq!(id_from_f64(7.0), Some(7));
        assert_eq!(id_from_f64(0.0), Some(0));
        for v in [-1.0, 0.5, f64::NAN, f64::INFINITY, 1e300] {
            assert_eq!(id_from_f64(v), None, "{v}");
        }
    }

    /// An error of the library put in a reader's or a writer's error keeps
    /// one "invalid input:" (it had two: "invalid input: f.csv: object 7:
    /// invalid input: geometry has a coordinate …"), and names the file
    /// and the object or record.
    #[test]
    fn wrapped_errors_say_invalid_input_once() {
        let once = |e: &Error, needles: &[&str]| {
            let m = e.to_string();
            assert_eq!(m.matches("invalid input:").count(), 1, "{m}");
            for n in needles {
                assert!(m.contains(n), "{n:?} not in {m}");
            }
        };
        assert_eq!(reason(&Error::invalid("x: y")), "x: y");
        let io = std::io::Error::other("boom");
        assert_eq!(reason(&io_err(Path::new("f"), io)), "I/O error on f: boom");
        let dir = tempfile::tempdir().unwrap();
        // writers: the bounding rectangle of each object
        let nan: Geometry = geo_types::Point::new(f64::NAN, 0.0).into();
        let mut outs = vec!["o.csv"];
        if cfg!(feature = "geoparquet") {
            outs.push("o.parquet");
        }
        for name in outs {
            let p = dir.path().join(name);
            let e = write_objects(&p, [(7, &nan)]).unwrap_err();
            once(&e, &[name, "object 7", "not finite"]);
        }
        // readers: the rectangles of a CSV file, the geometries of the others
        let p = dir.path().join("r.csv");
        std::fs::write(&p, "id,minx,miny,maxx,maxy\n1,0,0,1,1\n2,3,0,1,1\n").unwrap();
        once(
            &read_csv(&p).unwrap_err(),
            &["r.csv", "record 2", "inverted"],
        );
        let p = dir.path().join("e.geojson");
        std::fs::write(
            &p,
            r#"{"type":"Feature","id":3,"geometry":{"type":"MultiPoint","coordinates":[]}}"#,
        )
        .unwrap();
        once(
            &read_geojson(&p).unwrap_err(),
            &["e.geojson", "feature 0 (id 3)", "empty"],
        );
    }
}
