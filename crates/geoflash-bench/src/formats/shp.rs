//! ESRI Shapefile input through the `shapefile` crate (with its `dbase`
//! crate for the attributes).
//!
//! The `.shp` is read in record order (seeking with the `.shx` when it is
//! there). Points become points, multipoints multipoints, polylines
//! multi-linestrings and polygons multipolygons (`polygon`: each
//! clockwise ring a shell, each counter-clockwise ring a hole of the
//! smallest shell around it, or a shell of its own when no shell holds it,
//! as GDAL reads them); Z and M values are ignored. A null shape (a record
//! without geometry) is an error naming the record.
//!
//! Ids: when the `.dbf` beside the `.shp` has a field named `id` (any
//! case), each record's value of it — a numeric field holding a
//! non-negative integer (at most 2^53), or a character field holding one;
//! otherwise the record number (1, 2, …, as in the `.shp`). The `.dbf` must
//! then hold one record per shape (deleted records make it an error, as
//! the pairing would no longer be certain).
use std::path::{Path, PathBuf};

use geo_types::{Coord, LineString, MultiPolygon, Polygon};
use geoflash::engine::Geometry;
use geoflash::Result;
use shapefile::dbase;
use shapefile::PolygonRing;

use super::osm::rings::{ring_inside, signed_area2};

use super::{bad, id_from_f64, io_err, Collector};

/// The file beside `path` with extension `ext` (lower case, else upper case).
fn sibling(path: &Path, ext: &str) -> Option<PathBuf> {
    [ext.to_ascii_lowercase(), ext.to_ascii_uppercase()]
        .into_iter()
        .map(|e| path.with_extension(e))
        .find(|p| p.is_file())
}

fn shp_err(path: &Path, e: shapefile::Error) -> geoflash::Error {
    match e {
        shapefile::Error::IoError(io) if io.kind() != std::io::ErrorKind::UnexpectedEof => {
            io_err(path, io)
        }
        shapefile::Error::IoError(_) => bad(path, "truncated shapefile (it ends inside a record)"),
        e => bad(path, format!("not a valid shapefile: {e}")),
    }
}

/// The id held by a dBase field value.
fn field_id(v: &dbase::FieldValue) -> std::result::Result<u64, String> {
    use dbase::FieldValue as F;
    let parsed = match v {
        F::Numeric(Some(x)) | F::Double(x) | F::Currency(x) => id_from_f64(*x),
        F::Float(Some(x)) => id_from_f64(f64::from(*x)),
        F::Integer(x) => u64::try_from(*x).ok(),
        F::Character(Some(s)) | F::Memo(s) => s.trim().parse().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| format!("id {v:?} is not a non-negative integer"))
}

/// Checks that every record of the `.shp` (read in file order from byte
/// 100) fits in the file and that the point and part counts of its shape
/// fit in the record, before the `shapefile` crate allocates by those
/// counts: a damaged count would otherwise ask for gigabytes (found by the
/// `import_shp` fuzz target).
fn check_record_sizes(path: &Path) -> Result<()> {
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let be = |at: usize| -> Option<usize> {
        let b = bytes.get(at..at + 4)?;
        usize::try_from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let le = |at: usize| -> Option<usize> {
        let b = bytes.get(at..at + 4)?;
        usize::try_from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let mut at = 100usize;
    let mut n = 0u64;
    while at + 8 <= bytes.len() {
        n += 1;
        let fail = |msg: String| Err(bad(path, format!("record {n} at byte {at}: {msg}")));
        let Some(len) = be(at + 4).and_then(|w| w.checked_mul(2)) else {
            return fail("unreadable record header".into());
        };
        let start = at + 8;
        if len > bytes.len() - start {
            return fail(format!(
                "content of {len} bytes runs past the end of the file ({} bytes)",
                bytes.len()
            ));
        }
        // (offset of the point count, bytes before the parts and points)
        let counts = match le(start) {
            // MultiPoint, MultiPointZ, MultiPointM: bbox, then the point count
            Some(8 | 18 | 28) => Some((36, 40, false)),
            // PolyLine, Polygon, MultiPatch and their Z/M forms: bbox, parts, points
            Some(3 | 5 | 13 | 15 | 23 | 25 | 31) => Some((40, 44, true)),
            _ => None,
        };
        if let Some((points_at, fixed, has_parts)) = counts {
            let parts = if has_parts { le(start + 36) } else { Some(0) };
            let points = le(start + points_at);
            let need = parts
                .zip(points)
                .and_then(|(p, q)| p.checked_mul(4)?.checked_add(q.checked_mul(16)?))
                .and_then(|b| b.checked_add(fixed));
            match need {
                Some(need) if need <= len => {}
                _ => {
                    return fail(format!(
                        "{} parts and {} points do not fit its {len} bytes",
                        parts.unwrap_or(0),
                        points.unwrap_or(0)
                    ))
                }
            }
            // Each part starts at a point index, in order, at most the point
            // count: the crate sizes a part's points by the distance to the
            // next part's start, whatever the point count says (a record of
            // no points whose second part starts at 687,921,111 asked for
            // 22 GB; found by fuzzing).
            if let (true, Some(parts), Some(points)) = (has_parts, parts, points) {
                let mut prev = 0usize;
                for i in 0..parts {
                    let Some(first) = le(start + fixed + 4 * i) else {
                        return fail("unreadable part index".into());
                    };
                    if first < prev || first > points {
                        return fail(format!(
                            "part {i} starts at point {first}, outside 0..={points} or before the previous part"
                        ));
                    }
                    prev = first;
                }
            }
        }
        at = start + len;
    }
    Ok(())
}

/// An outer ring of a shapefile polygon while its holes are assigned.
struct Shell {
    /// The ring, closed.
    ring: Vec<Coord>,
    /// Its bounding box (min x, min y, max x, max y).
    bbox: [f64; 4],
    /// Its area (absolute): a hole goes to the smallest shell holding it.
    area: f64,
    /// The holes assigned to it.
    holes: Vec<LineString>,
}

/// The polygons of a shapefile polygon's rings. The format makes a
/// clockwise ring a shell and a counter-clockwise one a hole, but does not
/// say which shell a hole belongs to, and writers do not all orient their
/// rings as it asks: the `shapefile` crate's conversion puts each hole in
/// the shell before it, and refuses a hole before any shell, so a
/// counter-clockwise second part became a hole of the first, outside it,
/// and the object's bounding rectangle lost that part (review finding). Here
/// a hole goes to the smallest shell that holds it, and a counter-clockwise
/// ring that no shell holds is a shell itself (GDAL's reading): every
/// ring's coordinates are inside the result's bounding rectangle.
fn polygon<P: Copy>(rings: &[PolygonRing<P>]) -> MultiPolygon
where
    Coord: From<P>,
{
    let closed = |points: &[P]| -> Vec<Coord> {
        let mut c: Vec<Coord> = points.iter().map(|&p| Coord::from(p)).collect();
        if c.len() > 1 && c.first() != c.last() {
            c.push(c[0]);
        }
        c
    };
    let bbox = |r: &[Coord]| {
        r.iter().fold(
            [
                f64::INFINITY,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NEG_INFINITY,
            ],
            |b, c| [b[0].min(c.x), b[1].min(c.y), b[2].max(c.x), b[3].max(c.y)],
        )
    };
    let within =
        |a: &[f64; 4], b: &[f64; 4]| a[0] >= b[0] && a[1] >= b[1] && a[2] <= b[2] && a[3] <= b[3];
    let mut shells: Vec<Shell> = Vec::new();
    let mut holes = Vec::new();
    for ring in rings {
        match ring {
            PolygonRing::Outer(p) => {
                let r = closed(p);
                shells.push(Shell {
                    bbox: bbox(&r),
                    area: signed_area2(&r).abs(),
                    ring: r,
                    holes: Vec::new(),
                });
            }
            PolygonRing::Inner(p) => holes.push(closed(p)),
        }
    }
    let mut orphans = Vec::new();
    for hole in holes {
        let b = bbox(&hole);
        let owner = shells
            .iter()
            .enumerate()
            .filter(|(_, s)| within(&b, &s.bbox) && ring_inside(&hole, &s.ring))
            .min_by(|x, y| x.1.area.total_cmp(&y.1.area))
            .map(|(i, _)| i);
        match owner {
            Some(i) => shells[i].holes.push(LineString::new(hole)),
            None => orphans.push(hole),
        }
    }
    shells
        .into_iter()
        .map(|s| Polygon::new(LineString::new(s.ring), s.holes))
        .chain(
            orphans
                .into_iter()
                .map(|r| Polygon::new(LineString::new(r), vec![])),
        )
        .collect()
}

/// Reads the shapes of a shapefile with their ids (see the module
/// documentation).
pub fn read(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    if !path.is_file() {
        // the crate would report a bare "No such file or directory"
        std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    }
    check_record_sizes(path)?;
    let mut shapes = shapefile::ShapeReader::from_path(path).map_err(|e| shp_err(path, e))?;
    let dbf = sibling(path, "dbf");
    let mut table = match &dbf {
        Some(p) => Some(
            dbase::Reader::from_path(p)
                .map_err(|e| bad(p, format!("not a valid dBase file: {e}")))?,
        ),
        None => None,
    };
    let id_field = table.as_ref().and_then(|t| {
        t.fields()
            .iter()
            .map(|f| f.name())
            .find(|n| n.eq_ignore_ascii_case("id"))
            .map(str::to_string)
    });
    let mut records = match (&mut table, &id_field) {
        (Some(t), Some(_)) => Some(t.iter_records()),
        _ => None,
    };
    let dbf_path = dbf.unwrap_or_default();
    let mut objects = Collector::new(path);
    for (n, shape) in shapes.iter_shapes().enumerate() {
        let recno = n as u64 + 1;
        let what = format!("record {recno}");
        let shape = shape.map_err(|e| shp_err(path, e))?;
        let id = match (&mut records, &id_field) {
            (Some(it), Some(field)) => {
                let rec = it
                    .next()
                    .ok_or_else(|| {
                        bad(
                            &dbf_path,
                            format!("holds fewer records than the .shp (none for shape {recno}; deleted records?)"),
                        )
                    })?
                    .map_err(|e| bad(&dbf_path, format!("{what}: {e}")))?;
                let v = rec
                    .get(field)
                    .ok_or_else(|| bad(&dbf_path, format!("{what}: no {field} field")))?;
                field_id(v).map_err(|e| bad(&dbf_path, format!("{what}: {e}")))?
            }
            _ => recno,
        };
        if matches!(shape, shapefile::Shape::NullShape) {
            return Err(bad(
                path,
                format!("{what} (id {id}) has no geometry (a null shape)"),
            ));
        }
        let g = match shape {
            shapefile::Shape::Polygon(p) => Geometry::MultiPolygon(polygon(p.rings())),
            shapefile::Shape::PolygonM(p) => Geometry::MultiPolygon(polygon(p.rings())),
            shapefile::Shape::PolygonZ(p) => Geometry::MultiPolygon(polygon(p.rings())),
            shape => Geometry::try_from(shape)
                .map_err(|e| bad(path, format!("{what} (id {id}): {e}")))?,
        };
        objects.push(&what, id, g)?;
    }
    if let Some(mut it) = records {
        if it.next().is_some() {
            return Err(bad(
                &dbf_path,
                format!(
                    "holds more records than the {} shapes of {}",
                    objects.out.len(),
                    path.display()
                ),
            ));
        }
    }
    Ok(objects.finish())
}
