//! ESRI Shapefile input through the `shapefile` crate (with its `dbase`
//! crate for the attributes).
//!
//! The `.shp` is read in record order (seeking with the `.shx` when it is
//! there). Points become points, multipoints multipoints, polylines
//! multi-linestrings and polygons multipolygons (the crate groups the inner
//! rings under the outer ring before them); Z and M values are ignored. A
//! null shape (a record without geometry) is an error naming the record.
//!
//! Ids: when the `.dbf` beside the `.shp` has a field named `id` (any
//! case), each record's value of it — a numeric field holding a
//! non-negative integer (at most 2^53), or a character field holding one;
//! otherwise the record number (1, 2, …, as in the `.shp`). The `.dbf` must
//! then hold one record per shape (deleted records make it an error, as
//! the pairing would no longer be certain).
use std::path::{Path, PathBuf};

use geoflash::objects::Geometry;
use geoflash::Result;
use shapefile::dbase;

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

/// Reads the shapes of a shapefile with their ids (see the module
/// documentation).
pub fn read(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    if !path.is_file() {
        // the crate would report a bare "No such file or directory"
        std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    }
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
        let g =
            Geometry::try_from(shape).map_err(|e| bad(path, format!("{what} (id {id}): {e}")))?;
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
