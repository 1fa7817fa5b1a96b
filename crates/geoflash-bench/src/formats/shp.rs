//! ESRI Shapefile input through the `shapefile` crate (with its `dbase`
//! crate for the attributes).
//!
//! **Records.** The records are read in the order of the `.shx` index and
//! where it says they are, as GDAL reads them (a record that an edit
//! rewrote at the end of the `.shp` is read in its place); without a
//! `.shx`, one after the other up to the length the `.shp` header gives.
//! Each record is checked against the file before the `shapefile` crate
//! decodes it from its own bytes. Points become points, multipoints
//! multipoints, polylines multi-linestrings and polygons multipolygons
//! (`polygon`: each clockwise ring a shell, each counter-clockwise ring a
//! hole of the smallest shell around it, or a shell of its own when no
//! shell holds it, as GDAL reads them); Z and M values are ignored. A null
//! shape (a record without geometry) is an error naming the record.
//!
//! **Ids.** When the `.dbf` beside the `.shp` has a field named `id` (any
//! case), each record's value of it — a numeric field holding a
//! non-negative integer (at most 2^53), or a character field holding one;
//! otherwise the record number (1, 2, …, in the order of the `.shx`).
//!
//! A `.dbf` beside the `.shp` must hold one record per shape (shape `n`
//! goes with record `n`), none marked deleted: GDAL leaves a deleted
//! record and its shape out, where the shape used to be read here (or
//! paired with the next record's id); such a file is an error naming the
//! `.dbf` and the record.
use std::ops::Range;
use std::path::{Path, PathBuf};

use geo_types::{Coord, LineString, MultiPolygon, Polygon};
use geoflash::engine::Geometry;
use geoflash::Result;
use shapefile::dbase;
use shapefile::PolygonRing;

use super::osm::rings::{ring_inside, signed_area2};

use super::{bad, id_from_f64, io_err, reason, Collector};

/// The file beside `path` with extension `ext` (lower case, else upper case).
fn sibling(path: &Path, ext: &str) -> Option<PathBuf> {
    [ext.to_ascii_lowercase(), ext.to_ascii_uppercase()]
        .into_iter()
        .map(|e| path.with_extension(e))
        .find(|p| p.is_file())
}

/// An error of the `shapefile` crate reading the `.shp` header or, when
/// `record` names one, a record (whose bytes the crate reads from a slice
/// of its length: to run out of them is to overrun the record).
fn shp_err(path: &Path, record: Option<&str>, e: shapefile::Error) -> geoflash::Error {
    let eof = matches!(&e, shapefile::Error::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof);
    match (record, e) {
        (None, _) if eof => bad(
            path,
            "not a valid shapefile: shorter than its 100-byte header",
        ),
        (None, e) => bad(path, format!("not a valid shapefile: {e}")),
        (Some(what), _) if eof => bad(
            path,
            format!("{what}: not a valid shape: its content runs past the record's length"),
        ),
        (Some(what), e) => bad(path, format!("{what}: not a valid shape: {e}")),
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

/// The bytes of the `.shp` header (and of the `.shx` header, the same).
const HEADER: usize = 100;

/// Checks the record whose header is at byte `at` of the `.shp` `bytes`
/// (record `n`, from 1): that it fits in the file and that the point and
/// part counts of its shape fit in the record, before the `shapefile`
/// crate allocates by those counts (a damaged count would otherwise ask
/// for gigabytes; found by the `import_shp` fuzz target). Returns the
/// byte range of its content (after the 8-byte record header).
fn check_record(path: &Path, bytes: &[u8], n: u64, at: usize) -> Result<Range<usize>> {
    let be = |at: usize| -> Option<usize> {
        let b = bytes.get(at..at.checked_add(4)?)?;
        usize::try_from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let le = |at: usize| -> Option<usize> {
        let b = bytes.get(at..at.checked_add(4)?)?;
        usize::try_from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let fail = |msg: String| Err(bad(path, format!("record {n} at byte {at}: {msg}")));
    if at < HEADER || at.checked_add(8).is_none_or(|end| end > bytes.len()) {
        return fail(format!(
            "its header is not inside the file's records (bytes {HEADER}..{})",
            bytes.len()
        ));
    }
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
    Ok(start..start + len)
}

/// The file length a `.shp` or `.shx` header gives, in bytes (it stores
/// 16-bit words).
fn declared_length(header: &[u8]) -> usize {
    let words = u32::from_be_bytes([header[24], header[25], header[26], header[27]]);
    usize::try_from(words)
        .unwrap_or(usize::MAX)
        .saturating_mul(2)
}

/// The content of every record of the `.shp` `bytes` ([`check_record`]
/// each), in record order: where its index, the `.shx` `shx`, says the
/// records are (as GDAL reads them: a record that an edit rewrote at the
/// end of the `.shp` is read in its place, and the bytes it left behind
/// are not a record), else one after the other up to the length the
/// `.shp` header gives.
///
/// The `shapefile` crate's iterator ended at the first record that ends
/// where the `.shp` ends, whatever the `.shx` still listed: a record
/// rewritten at the end was read in its turn and the records after it were
/// lost, silently without a `.dbf` id field (review finding).
fn record_ranges(path: &Path, bytes: &[u8], shx: Option<&Path>) -> Result<Vec<Range<usize>>> {
    let Some(shx) = shx else {
        let declared = declared_length(bytes);
        let mut out = Vec::new();
        let mut at = HEADER;
        while at + 8 <= declared.min(bytes.len()) {
            let r = check_record(path, bytes, out.len() as u64 + 1, at)?;
            at = r.end;
            out.push(r);
        }
        if declared > bytes.len() {
            return Err(bad(
                path,
                format!(
                    "truncated shapefile: its header gives a length of {declared} bytes, the file has {}",
                    bytes.len()
                ),
            ));
        }
        return Ok(out);
    };
    let index = std::fs::read(shx).map_err(|e| io_err(shx, e))?;
    shapefile::header::Header::read_from(&mut index.as_slice())
        .map_err(|e| bad(shx, format!("not a valid shapefile index: {e}")))?;
    let declared = declared_length(&index);
    if declared > index.len() || declared < HEADER || !(declared - HEADER).is_multiple_of(8) {
        return Err(bad(
            shx,
            format!(
                "not a valid shapefile index: its header gives a length of {declared} bytes \
                 (the file has {}), not {HEADER} and 8 bytes per record",
                index.len()
            ),
        ));
    }
    index[HEADER..declared]
        .chunks_exact(8)
        .enumerate()
        .map(|(i, entry)| {
            let words = u32::from_be_bytes([entry[0], entry[1], entry[2], entry[3]]);
            let at = usize::try_from(words)
                .unwrap_or(usize::MAX)
                .saturating_mul(2);
            check_record(path, bytes, i as u64 + 1, at).map_err(|e| {
                bad(
                    shx,
                    format!("its entry {} points at a bad record: {}", i + 1, reason(&e)),
                )
            })
        })
        .collect()
}

/// The number of records of the `.dbf` `path`, after refusing one marked
/// deleted (GDAL skips such a record with its shape; here the shapes
/// would be paired with the wrong records, or a deleted shape read).
fn dbf_records(path: &Path) -> Result<usize> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let mut r = std::io::BufReader::new(file);
    let mut header = [0u8; 12];
    r.read_exact(&mut header)
        .map_err(|_| bad(path, "not a valid dBase file: shorter than its header"))?;
    let count = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    let header_len = usize::from(u16::from_le_bytes([header[8], header[9]]));
    let record_len = usize::from(u16::from_le_bytes([header[10], header[11]]));
    if header_len < 12 || record_len == 0 {
        return Err(bad(
            path,
            "not a valid dBase file: bad header or record length",
        ));
    }
    std::io::copy(
        &mut (&mut r).take((header_len - 12) as u64),
        &mut std::io::sink(),
    )
    .map_err(|e| io_err(path, e))?;
    let mut record = vec![0u8; record_len];
    for n in 1..=count {
        r.read_exact(&mut record).map_err(|_| {
            bad(
                path,
                format!("truncated dBase file: its header announces {count} records, it ends inside record {n}"),
            )
        })?;
        if record[0] == b'*' {
            return Err(bad(
                path,
                format!(
                    "record {n} is marked deleted (GDAL leaves it and its shape out): \
                     write the layer anew without it (e.g. ogr2ogr, or GeoPandas read_file then to_file)"
                ),
            ));
        }
    }
    Ok(count)
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
    use shapefile::ReadableShape;
    if !path.is_file() {
        // a clearer message than a bare "No such file or directory"
        std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    }
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    shapefile::header::Header::read_from(&mut bytes.as_slice())
        .map_err(|e| shp_err(path, None, e))?;
    let records = record_ranges(path, &bytes, sibling(path, "shx").as_deref())?;
    let dbf = sibling(path, "dbf");
    let mut table = match &dbf {
        Some(p) => {
            let n = dbf_records(p)?;
            if n != records.len() {
                return Err(bad(
                    p,
                    format!(
                        "holds {n} records for the {} shapes of {} (each shape is paired with \
                         the record of its number)",
                        records.len(),
                        path.display()
                    ),
                ));
            }
            Some(
                dbase::Reader::from_path(p)
                    .map_err(|e| bad(p, format!("not a valid dBase file: {e}")))?,
            )
        }
        None => None,
    };
    let id_field = table.as_ref().and_then(|t| {
        t.fields()
            .iter()
            .map(|f| f.name())
            .find(|n| n.eq_ignore_ascii_case("id"))
            .map(str::to_string)
    });
    let mut dbf_rows = match (&mut table, &id_field) {
        (Some(t), Some(_)) => Some(t.iter_records()),
        _ => None,
    };
    let dbf_path = dbf.unwrap_or_default();
    let mut objects = Collector::new(path);
    for (n, range) in records.into_iter().enumerate() {
        let recno = n as u64 + 1;
        let what = format!("record {recno}");
        let len = i32::try_from(range.len()).map_err(|_| bad(path, format!("{what}: too long")))?;
        let shape = shapefile::Shape::read_from(&mut std::io::Cursor::new(&bytes[range]), len)
            .map_err(|e| shp_err(path, Some(&what), e))?;
        let id = match (&mut dbf_rows, &id_field) {
            (Some(rows), Some(field)) => {
                // as many records as shapes, none deleted (checked above)
                let rec = rows
                    .next()
                    .ok_or_else(|| bad(&dbf_path, format!("no record for shape {recno}")))?
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
    Ok(objects.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shapefile::dbase::{FieldValue, Record, TableWriterBuilder};

    /// Writes points `(id, x, y)` as a shapefile (`.shp`, `.shx`, `.dbf`)
    /// with the `shapefile` crate's writer; the id in a numeric `ID` field
    /// when `id_field`, else a character `NAME` field.
    fn write_points(path: &Path, points: &[(u64, f64, f64)], id_field: bool) {
        let name = if id_field { "ID" } else { "NAME" };
        let table = if id_field {
            TableWriterBuilder::new().add_numeric_field(name.try_into().unwrap(), 20, 0)
        } else {
            TableWriterBuilder::new().add_character_field(name.try_into().unwrap(), 20)
        };
        let mut w = shapefile::Writer::from_path(path, table).unwrap();
        for &(id, x, y) in points {
            let mut rec = Record::default();
            let v = match id_field {
                true => FieldValue::Numeric(Some(id as f64)),
                false => FieldValue::Character(Some(format!("p{id}"))),
            };
            rec.insert(name.to_string(), v);
            w.write_shape_and_record(&shapefile::Point::new(x, y), &rec)
                .unwrap();
        }
    }

    fn ids_and_points(path: &Path) -> Result<Vec<(u64, f64, f64)>> {
        Ok(read(path)?
            .into_iter()
            .map(|(id, g)| match g {
                Geometry::Point(p) => (id, p.x(), p.y()),
                other => panic!("{other:?}"),
            })
            .collect())
    }

    /// The bytes of a `.shp` or `.shx` header.
    const SHX_HEADER: usize = 100;

    fn be32(b: &[u8], at: usize) -> usize {
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
    }

    /// Review finding: a record that an edit rewrote at the end of the
    /// `.shp` (its `.shx` entry pointing there, the old bytes left behind,
    /// as GDAL and other writers update a shape that grew) ended the
    /// `shapefile` crate's iteration: the records after it in the `.shx`
    /// were lost, silently without a `.dbf` id field, and with one the
    /// file was refused ("holds more records than the 2 shapes"). GDAL reads
    /// every record where the `.shx` says, as the reader now does.
    #[test]
    fn records_are_read_where_the_shx_says() {
        let dir = tempfile::tempdir().unwrap();
        for id_field in [false, true] {
            let p = dir.path().join(format!("moved-{id_field}.shp"));
            write_points(
                &p,
                &[(10, 1.0, 1.0), (20, 2.0, 2.0), (30, 3.0, 3.0)],
                id_field,
            );
            let shx_path = p.with_extension("shx");
            let (mut shp, mut shx) = (
                std::fs::read(&p).unwrap(),
                std::fs::read(&shx_path).unwrap(),
            );
            // record 2 rewritten at the end with new coordinates
            let at = be32(&shx, SHX_HEADER + 8) * 2;
            let mut moved = shp[at..at + 8 + be32(&shp, at + 4) * 2].to_vec();
            moved[12..28].copy_from_slice(&[2.5f64.to_le_bytes(), 7.5f64.to_le_bytes()].concat());
            let new_at = shp.len();
            shp.extend(moved);
            let words = (shp.len() / 2) as u32;
            shp[24..28].copy_from_slice(&words.to_be_bytes());
            shx[SHX_HEADER + 8..SHX_HEADER + 12]
                .copy_from_slice(&((new_at / 2) as u32).to_be_bytes());
            std::fs::write(&p, &shp).unwrap();
            std::fs::write(&shx_path, &shx).unwrap();
            let ids = if id_field { [10, 20, 30] } else { [1, 2, 3] };
            let want = vec![(ids[0], 1.0, 1.0), (ids[1], 2.5, 7.5), (ids[2], 3.0, 3.0)];
            assert_eq!(ids_and_points(&p).unwrap(), want, "id field: {id_field}");
            // An entry that points at no record is an error naming the .shx.
            shx[SHX_HEADER + 16..SHX_HEADER + 20].copy_from_slice(&(words + 100).to_be_bytes());
            std::fs::write(&shx_path, &shx).unwrap();
            let m = read(&p).unwrap_err().to_string();
            assert!(
                m.contains(&format!(
                    "moved-{id_field}.shx: its entry 3 points at a bad record"
                )),
                "{m}"
            );
        }
    }

    /// The offset of record `n` (from 1) of a `.dbf`.
    fn dbf_record_at(dbf: &[u8], n: usize) -> usize {
        let header = usize::from(u16::from_le_bytes([dbf[8], dbf[9]]));
        let record = usize::from(u16::from_le_bytes([dbf[10], dbf[11]]));
        header + (n - 1) * record
    }

    /// Review finding: a `.dbf` record marked deleted (GDAL leaves it and
    /// its shape out) was skipped by the `dbase` crate's iterator while its
    /// shape was still read: without an id field the deleted shape became
    /// an object, and with one the shapes were paired with the next
    /// records' ids until the last shape found none. A `.dbf` holding
    /// another number of records than the shapes was ignored without an id
    /// field. Both are now errors naming the `.dbf` (and the record).
    #[test]
    fn deleted_or_missing_dbf_records_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let points = [(10, 1.0, 1.0), (20, 2.0, 2.0), (30, 3.0, 3.0)];
        for id_field in [false, true] {
            let p = dir.path().join(format!("del-{id_field}.shp"));
            write_points(&p, &points, id_field);
            assert_eq!(ids_and_points(&p).unwrap().len(), 3);
            let dbf_path = p.with_extension("dbf");
            let dbf = std::fs::read(&dbf_path).unwrap();
            let mut deleted = dbf.clone();
            deleted[dbf_record_at(&dbf, 2)] = b'*';
            std::fs::write(&dbf_path, &deleted).unwrap();
            let e = read(&p).unwrap_err();
            let m = e.to_string();
            assert!(e.is_user_error(), "{m}");
            assert!(
                m.contains(&format!("del-{id_field}.dbf: record 2 is marked deleted")),
                "{m}"
            );
            // one record fewer than the shapes (the header says so too)
            let mut short = dbf[..dbf_record_at(&dbf, 3)].to_vec();
            short[4..8].copy_from_slice(&2u32.to_le_bytes());
            short.push(0x1a);
            std::fs::write(&dbf_path, &short).unwrap();
            let m = read(&p).unwrap_err().to_string();
            assert!(
                m.contains(&format!(
                    "del-{id_field}.dbf: holds 2 records for the 3 shapes"
                )),
                "{m}"
            );
            // a header announcing more records than the file holds
            let mut cut = dbf.clone();
            cut[4..8].copy_from_slice(&4u32.to_le_bytes());
            std::fs::write(&dbf_path, &cut).unwrap();
            let m = read(&p).unwrap_err().to_string();
            assert!(
                m.contains("truncated dBase file") && m.contains("record 4"),
                "{m}"
            );
        }
    }
}
