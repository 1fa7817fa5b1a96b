//! FlatGeobuf (<https://flatgeobuf.org>, format version 3) through the
//! `flatgeobuf` crate.
//!
//! **Reading.** The file's framing (magic bytes, size-prefixed header, the
//! optional packed R-tree index, which is skipped, and the size-prefixed
//! features) is checked here against the file's length, and every header
//! and feature buffer goes through the flatbuffers verifier of the
//! `flatgeobuf` crate before it is touched. Geometries and the id property
//! are then decoded here, with bounds-checked access, instead of through the
//! crate's geozero and geo-traits readers, which index the coordinate and
//! `ends` arrays without checks and panic on a verified but inconsistent
//! feature. Supported geometry types: Point, LineString, Polygon,
//! MultiPoint, MultiLineString, MultiPolygon, GeometryCollection (Z and M
//! values are ignored); curves, TINs and polyhedral surfaces are an error.
//! An empty point (one without coordinates, or whose x and y are both NaN,
//! as WKB writes one) of a multi-point or a collection, at any depth, is
//! left out, as the WKB reader (`geoflash::engine::from_wkb`) leaves it
//! out; an empty point as a feature's geometry is an error, and a
//! multi-point or a collection with nothing left is an empty geometry,
//! refused as such.
//! The id is a column named `id` (any case) of an integer type, a double
//! holding an integer or a string holding one (a feature without a value,
//! a null id, is an error); without that column it is the feature's
//! position (0, 1, …). A header that announces more features than
//! the file holds is an error (a truncated file), as is a feature without
//! geometry.
//!
//! **Writing.** Features in the order given, with an unsigned 64-bit `id`
//! column, each with its own geometry type (the header's type is Unknown;
//! geometry collections are refused, as the crate's writer mislabels them in
//! such a file), and **without the spatial index**: the crate's index sorts the features
//! along a Hilbert curve, which would lose the insertion order the
//! workbench chose (`--order`).
use std::borrow::Borrow;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom};
use std::path::Path;

use flatgeobuf::geozero::{ColumnValue, GeozeroGeometry, PropertyProcessor};
use flatgeobuf::{ColumnType, FgbWriter, FgbWriterOptions, GeometryType};
use geo_types::{Coord, LineString};
use geoflash::engine::Geometry;
use geoflash::Result;

use super::attributes::{Attributes, Column, Kind, Row, Value};
use super::{bad, id_from_f64, io_err, reason, Collector};

/// Largest header the reader accepts (the `flatgeobuf` crate's limit).
const MAX_HEADER: u64 = 10 * 1024 * 1024;
/// Bytes of one node of the packed R-tree index.
const NODE_BYTES: u64 = 40;
/// Nesting depth of geometry collections the reader follows.
const MAX_DEPTH: usize = 32;

/// The bytes of the packed R-tree index of `n` features with `node_size`
/// entries per node (0 without index); `None` on overflow.
fn index_bytes(n: u64, node_size: u16) -> Option<u64> {
    if node_size == 0 || n == 0 {
        return Some(0);
    }
    let node = u64::from(node_size.max(2));
    let (mut level, mut total) = (n, n);
    loop {
        level = level.div_ceil(node);
        total = total.checked_add(level)?;
        if level == 1 {
            break;
        }
    }
    total.checked_mul(NODE_BYTES)
}

/// Reads a whole FlatGeobuf file (see the module documentation).
pub fn read(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    Ok(read_with(path, false)?.0)
}

/// The ids and the attributes of a FlatGeobuf file: every column but `id`
/// (`attribute_value`; see [`super::read_attributes`]).
pub fn read_attributes(path: &Path) -> Result<(Vec<u64>, Attributes)> {
    let (objects, attrs) = read_with(path, true)?;
    Ok((objects.into_iter().map(|o| o.0).collect(), attrs))
}

/// The attribute table of `columns` (name, type) `attr_cols`: unsigned
/// integer columns as [`Kind::UInt`], the others as text.
fn attribute_table(columns: &[(String, ColumnType)], attr_cols: &[usize]) -> Result<Attributes> {
    Attributes::new(
        attr_cols
            .iter()
            .map(|&c| {
                let kind = match columns[c].1 {
                    ColumnType::UByte
                    | ColumnType::UShort
                    | ColumnType::UInt
                    | ColumnType::ULong => Kind::UInt,
                    _ => Kind::Text,
                };
                Column::new(columns[c].0.clone(), kind)
            })
            .collect(),
    )
}

/// The row of `attrs` (columns `attr_cols` of the header) of a feature
/// whose properties are `set` (column, type, bytes): a value of another
/// kind than its column's as text; `None` where the feature has none.
fn attribute_row(
    attrs: &Attributes,
    attr_cols: &[usize],
    set: &[Property<'_>],
) -> Vec<Option<Value>> {
    attrs
        .columns()
        .iter()
        .zip(attr_cols)
        .map(|(col, &c)| {
            let (_, ty, v) = set.iter().find(|p| p.0 == c)?;
            match (attribute_value(*ty, v), col.kind) {
                (v @ Value::UInt(_), Kind::UInt) | (v @ Value::Text(_), Kind::Text) => Some(v),
                (v, _) => Some(Value::Text(v.to_string())),
            }
        })
        .collect()
}

/// The columns (name, type) the header declares.
fn header_columns(header: &flatgeobuf::Header) -> Vec<(String, ColumnType)> {
    header
        .columns()
        .map(|cs| {
            cs.iter()
                .map(|c| (c.name().to_string(), c.type_()))
                .collect()
        })
        .unwrap_or_default()
}

/// Fills `buf` from `r`, a read that ends early being a truncated file
/// (`what`: the part of the file being read).
fn read_all(path: &Path, r: &mut BufReader<File>, buf: &mut [u8], what: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            bad(
                path,
                format!("truncated FlatGeobuf file: it ends inside {what}"),
            )
        } else {
            io_err(path, e)
        }
    })
}

/// Reads the magic bytes and the size-prefixed header of a FlatGeobuf
/// file of `len` bytes: the header's bytes with their size prefix, and the
/// position after them.
fn read_header_bytes(path: &Path, r: &mut BufReader<File>, len: u64) -> Result<(Vec<u8>, u64)> {
    let corrupt = |msg: String| bad(path, format!("not a valid FlatGeobuf file: {msg}"));
    let mut magic = [0u8; 8];
    read_all(path, r, &mut magic, "the magic bytes")?;
    if &magic[0..3] != b"fgb" || &magic[4..7] != b"fgb" || magic[3] != flatgeobuf::VERSION {
        return Err(corrupt(format!(
            "magic bytes {magic:02x?} are not those of FlatGeobuf version {}",
            flatgeobuf::VERSION
        )));
    }
    let mut size = [0u8; 4];
    read_all(path, r, &mut size, "the header size")?;
    let header_len = u64::from(u32::from_le_bytes(size));
    let pos = 12u64;
    if !(8..=MAX_HEADER).contains(&header_len) || header_len > len.saturating_sub(pos) {
        return Err(corrupt(format!(
            "header size {header_len} is impossible in a file of {len} bytes"
        )));
    }
    let mut header_buf = vec![0u8; header_len as usize + 4];
    header_buf[..4].copy_from_slice(&size);
    read_all(path, r, &mut header_buf[4..], "the header")?;
    Ok((header_buf, pos + header_len))
}

/// Reads a whole FlatGeobuf file, and the attributes (columns other than
/// `id`) when `attributes` is set (else an empty table).
fn read_with(path: &Path, attributes: bool) -> Result<(Vec<(u64, Geometry)>, Attributes)> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    let mut r = BufReader::new(file);
    let corrupt = |msg: String| bad(path, format!("not a valid FlatGeobuf file: {msg}"));
    let read_exact =
        |r: &mut BufReader<File>, buf: &mut [u8], what: &str| read_all(path, r, buf, what);
    let (header_buf, mut pos) = read_header_bytes(path, &mut r, len)?;
    let mut size = [0u8; 4];
    let header = flatgeobuf::size_prefixed_root_as_header(&header_buf)
        .map_err(|e| corrupt(format!("bad header: {e}")))?;
    let count = header.features_count();
    let dataset_type = header.geometry_type();

    // the id column and the sizes of the columns before it
    let columns = header_columns(&header);
    let id_col = columns
        .iter()
        .position(|(n, _)| n.eq_ignore_ascii_case("id"));
    // the attribute columns: (index in the header, index in the table)
    let attr_cols: Vec<usize> = (0..columns.len())
        .filter(|&c| attributes && Some(c) != id_col)
        .collect();
    let mut attrs = attribute_table(&columns, &attr_cols).map_err(|e| bad(path, reason(&e)))?;

    let index = index_bytes(count, header.index_node_size())
        .filter(|&b| b <= len.saturating_sub(pos))
        .ok_or_else(|| {
            corrupt(format!(
                "the index of {count} features does not fit in a file of {len} bytes"
            ))
        })?;
    r.seek(SeekFrom::Current(index as i64))
        .map_err(|e| io_err(path, e))?;
    pos += index;

    let mut objects = Collector::new(path);
    let mut buf = Vec::new();
    let mut n = 0u64;
    while pos < len {
        let what = format!("feature {n}");
        read_exact(&mut r, &mut size, &what)?;
        let feature_len = u64::from(u32::from_le_bytes(size));
        pos += 4;
        if feature_len > len.saturating_sub(pos) {
            return Err(bad(
                path,
                format!(
                    "truncated FlatGeobuf file: {what} has {feature_len} bytes, the file only {} more",
                    len.saturating_sub(pos)
                ),
            ));
        }
        buf.clear();
        buf.extend_from_slice(&size);
        buf.resize(feature_len as usize + 4, 0);
        read_exact(&mut r, &mut buf[4..], &what)?;
        pos += feature_len;
        let feature = flatgeobuf::size_prefixed_root_as_feature(&buf)
            .map_err(|e| corrupt(format!("{what}: {e}")))?;
        let props = feature.properties().map(|p| p.bytes()).unwrap_or_default();
        let id = match id_col {
            // A feature that does not set the id column has a null id: an
            // error, as in the other formats, not its position (which gave
            // it another object's id, or one that is no object's; review
            // finding).
            Some(col) => property_id(props, &columns, col)
                .map_err(|e| corrupt(format!("{what}: {e}")))?
                .ok_or_else(|| {
                    bad(
                        path,
                        format!("{what}: the id is null (column {:?})", columns[col].0),
                    )
                })?,
            None => n,
        };
        if !attrs.is_empty() {
            let set = properties(props, &columns).map_err(|e| corrupt(format!("{what}: {e}")))?;
            let row = attribute_row(&attrs, &attr_cols, &set);
            attrs
                .push(row)
                .map_err(|e| corrupt(format!("{what}: {}", reason(&e))))?;
        }
        let geom = feature
            .geometry()
            .ok_or_else(|| bad(path, format!("{what} (id {id}) has no geometry")))?;
        let ty = if dataset_type == GeometryType::Unknown {
            geom.type_()
        } else {
            dataset_type
        };
        let g = decode(&geom, ty, 0)
            .and_then(|g| g.ok_or_else(|| "the geometry is an empty point".to_string()))
            .map_err(|e| bad(path, format!("{what} (id {id}): {e}")))?;
        objects.push(&what, id, g)?;
        n += 1;
    }
    if count != 0 && n != count {
        return Err(bad(
            path,
            format!("truncated FlatGeobuf file: the header announces {count} features, the file holds {n}"),
        ));
    }
    Ok((objects.finish(), attrs))
}

/// One property of a feature: its column, the column's type, the value's bytes.
type Property<'b> = (usize, ColumnType, &'b [u8]);

/// The properties of a feature's property bytes (pairs of a little-endian
/// `u16` column index and a value): `(column, type, value bytes)` in the
/// order stored. Every slice is bounds-checked.
fn properties<'b>(
    bytes: &'b [u8],
    columns: &[(String, ColumnType)],
) -> std::result::Result<Vec<Property<'b>>, String> {
    let take = |at: usize, n: usize| -> std::result::Result<&[u8], String> {
        at.checked_add(n)
            .and_then(|end| bytes.get(at..end))
            .ok_or_else(|| "property bytes end inside a value".to_string())
    };
    let mut out = Vec::new();
    let mut at = 0;
    // a trailing byte after the last value occurs in files of other writers
    while at + 1 < bytes.len() {
        let c = usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
        at += 2;
        let ty = columns
            .get(c)
            .map(|(_, t)| *t)
            .ok_or_else(|| format!("property of column {c}, the header has {}", columns.len()))?;
        let width = match ty {
            ColumnType::Byte | ColumnType::UByte | ColumnType::Bool => 1,
            ColumnType::Short | ColumnType::UShort => 2,
            ColumnType::Int | ColumnType::UInt | ColumnType::Float => 4,
            ColumnType::Long | ColumnType::ULong | ColumnType::Double => 8,
            ColumnType::String | ColumnType::Json | ColumnType::DateTime | ColumnType::Binary => {
                let l = take(at, 4)?;
                at += 4;
                u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize
            }
            other => return Err(format!("unknown column type {}", other.0)),
        };
        out.push((c, ty, take(at, width)?));
        at += width;
    }
    Ok(out)
}

/// An integer property of type `ty` as `i128` (so that every integer type
/// fits); `None` for the other types.
fn int_value(ty: ColumnType, v: &[u8]) -> Option<i128> {
    let mut b8 = [0u8; 8];
    b8[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
    Some(match ty {
        ColumnType::Byte => i128::from(b8[0] as i8),
        ColumnType::UByte => i128::from(b8[0]),
        ColumnType::Short => i128::from(i16::from_le_bytes([b8[0], b8[1]])),
        ColumnType::UShort => i128::from(u16::from_le_bytes([b8[0], b8[1]])),
        ColumnType::Int => i128::from(i32::from_le_bytes([b8[0], b8[1], b8[2], b8[3]])),
        ColumnType::UInt => i128::from(u32::from_le_bytes([b8[0], b8[1], b8[2], b8[3]])),
        ColumnType::Long => i128::from(i64::from_le_bytes(b8)),
        ColumnType::ULong => i128::from(u64::from_le_bytes(b8)),
        _ => return None,
    })
}

/// The value of column `col` in a feature's property bytes, as an id;
/// `Ok(None)` when the feature does not set it.
fn property_id(
    bytes: &[u8],
    columns: &[(String, ColumnType)],
    col: usize,
) -> std::result::Result<Option<u64>, String> {
    let Some((_, ty, v)) = properties(bytes, columns)?.into_iter().find(|p| p.0 == col) else {
        return Ok(None);
    };
    if let Some(x) = int_value(ty, v) {
        return u64::try_from(x)
            .map(Some)
            .map_err(|_| format!("id {x} is negative"));
    }
    match ty {
        ColumnType::Double => {
            let mut b8 = [0u8; 8];
            b8.copy_from_slice(v);
            let x = f64::from_le_bytes(b8);
            id_from_f64(x)
                .map(Some)
                .ok_or_else(|| format!("id {x} is not a non-negative integer"))
        }
        ColumnType::String => {
            let s = String::from_utf8_lossy(v);
            s.trim()
                .parse()
                .map(Some)
                .map_err(|_| format!("id {s:?} is not a non-negative integer"))
        }
        _ => Err(format!(
            "the id column has type {}, not an integer type",
            ty.variant_name().unwrap_or("unknown")
        )),
    }
}

/// An attribute value of a property: non-negative integers as
/// [`Value::UInt`], the rest as text (numbers in decimal, booleans as
/// `true`/`false`, strings as they are).
fn attribute_value(ty: ColumnType, v: &[u8]) -> Value {
    if let Some(x) = int_value(ty, v) {
        return u64::try_from(x).map_or_else(|_| Value::Text(x.to_string()), Value::UInt);
    }
    let mut b8 = [0u8; 8];
    b8[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
    Value::Text(match ty {
        ColumnType::Bool => (b8[0] != 0).to_string(),
        ColumnType::Float => f32::from_le_bytes([b8[0], b8[1], b8[2], b8[3]]).to_string(),
        ColumnType::Double => f64::from_le_bytes(b8).to_string(),
        _ => String::from_utf8_lossy(v).into_owned(),
    })
}

/// The coordinates `from..to` (in pairs) of a flat `xy` array.
fn coords(xy: &[f64], from: usize, to: usize) -> std::result::Result<Vec<Coord>, String> {
    xy.get(from * 2..to * 2)
        .map(|s| {
            s.chunks_exact(2)
                .map(|c| Coord { x: c[0], y: c[1] })
                .collect()
        })
        .ok_or_else(|| format!("coordinates {from}..{to} beyond the {} given", xy.len() / 2))
}

/// The parts of a geometry's coordinates given by its `ends` array (end
/// offsets in coordinate pairs); one part when `ends` is absent.
fn parts(g: &flatgeobuf::Geometry<'_>, xy: &[f64]) -> std::result::Result<Vec<Vec<Coord>>, String> {
    let n = xy.len() / 2;
    let ends: Vec<usize> = match g.ends() {
        Some(e) if !e.is_empty() => e.iter().map(|x| x as usize).collect(),
        _ => vec![n],
    };
    let mut out = Vec::with_capacity(ends.len());
    let mut start = 0;
    for end in ends {
        if end < start || end > n {
            return Err(format!("part end {end} outside {start}..={n}"));
        }
        out.push(coords(xy, start, end)?);
        start = end;
    }
    Ok(out)
}

fn polygon(
    g: &flatgeobuf::Geometry<'_>,
    xy: &[f64],
) -> std::result::Result<geo_types::Polygon, String> {
    let mut rings = parts(g, xy)?.into_iter().map(LineString::new);
    let exterior = rings.next().unwrap_or_else(|| LineString::new(vec![]));
    Ok(geo_types::Polygon::new(exterior, rings.collect()))
}

/// Whether `c`, the coordinates of a point, are those of an empty point:
/// x and y both NaN (as WKB, which has no other way, writes one).
fn is_empty_point(c: &Coord) -> bool {
    c.x.is_nan() && c.y.is_nan()
}

/// Decodes a verified geometry table of type `ty` into a [`Geometry`];
/// `None` for an empty point. The empty points of a multi-point or a
/// collection (at any depth) are left out, as [`geoflash::engine::from_wkb`]
/// leaves them out.
fn decode(
    g: &flatgeobuf::Geometry<'_>,
    ty: GeometryType,
    depth: usize,
) -> std::result::Result<Option<Geometry>, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "geometry collections nested deeper than {MAX_DEPTH}"
        ));
    }
    let xy: Vec<f64> = g.xy().map(|v| v.iter().collect()).unwrap_or_default();
    if !xy.len().is_multiple_of(2) {
        return Err(format!("odd number ({}) of xy values", xy.len()));
    }
    // the members of a multi-polygon or a collection, empty points left out
    let sub =
        |f: &dyn Fn(&flatgeobuf::Geometry<'_>) -> std::result::Result<Option<Geometry>, String>| {
            let mut members = Vec::new();
            if let Some(ps) = g.parts() {
                for p in ps.iter() {
                    members.extend(f(&p)?);
                }
            }
            Ok::<_, String>(members)
        };
    Ok(Some(match ty {
        GeometryType::Point => match coords(&xy, 0, xy.len() / 2)?.as_slice() {
            [] => return Ok(None),
            [c] if is_empty_point(c) => return Ok(None),
            [c] => Geometry::Point((*c).into()),
            cs => return Err(format!("a point with {} coordinates", cs.len())),
        },
        GeometryType::MultiPoint => Geometry::MultiPoint(
            coords(&xy, 0, xy.len() / 2)?
                .into_iter()
                .filter(|c| !is_empty_point(c))
                .map(geo_types::Point::from)
                .collect(),
        ),
        GeometryType::LineString => {
            Geometry::LineString(LineString::new(coords(&xy, 0, xy.len() / 2)?))
        }
        GeometryType::MultiLineString => {
            Geometry::MultiLineString(geo_types::MultiLineString::new(
                parts(g, &xy)?.into_iter().map(LineString::new).collect(),
            ))
        }
        GeometryType::Polygon => Geometry::Polygon(polygon(g, &xy)?),
        GeometryType::MultiPolygon => {
            let polys = sub(&|p| {
                let pxy: Vec<f64> = p.xy().map(|v| v.iter().collect()).unwrap_or_default();
                polygon(p, &pxy).map(|p| Some(Geometry::Polygon(p)))
            })?;
            Geometry::MultiPolygon(geo_types::MultiPolygon::new(
                polys
                    .into_iter()
                    .filter_map(|p| match p {
                        Geometry::Polygon(p) => Some(p),
                        _ => None,
                    })
                    .collect(),
            ))
        }
        GeometryType::GeometryCollection => {
            Geometry::GeometryCollection(geo_types::GeometryCollection::new_from(sub(&|p| {
                decode(p, p.type_(), depth + 1)
            })?))
        }
        other => {
            return Err(format!(
                "geometry type {} is not supported",
                other.variant_name().unwrap_or("unknown")
            ))
        }
    }))
}

/// A borrowed geometry that the FlatGeobuf writer can consume.
struct Geom<'a>(&'a Geometry);

impl GeozeroGeometry for Geom<'_> {
    fn process_geom<P: flatgeobuf::geozero::GeomProcessor>(
        &self,
        processor: &mut P,
    ) -> flatgeobuf::geozero::error::Result<()> {
        self.0.process_geom(processor)
    }
}

/// Writes `(id, geometry, attributes)` objects as FlatGeobuf (see the
/// module documentation; each attribute column a nullable `ULong` or
/// `String` column after `id`, an absent value an unset property);
/// returns the number written.
/// The file is written whole or not at all ([`super::OutputFile`]).
pub fn write<'r, G: Borrow<Geometry>>(
    path: &Path,
    columns: &[Column],
    objects: impl IntoIterator<Item = (u64, G, &'r Row)>,
) -> Result<u64> {
    let out = super::OutputFile::create(path)?;
    let n = write_to(&out, columns, objects)?;
    out.commit()?;
    Ok(n)
}

/// [`write`] into `out`, without the commit.
pub(super) fn write_to<'r, G: Borrow<Geometry>>(
    out: &super::OutputFile,
    columns: &[Column],
    objects: impl IntoIterator<Item = (u64, G, &'r Row)>,
) -> Result<u64> {
    let path = out.path();
    let fail = |e: &dyn std::fmt::Display| bad(path, format!("cannot write FlatGeobuf: {e}"));
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("geoflash");
    let options = FgbWriterOptions {
        write_index: false,
        detect_type: false,
        promote_to_multi: false,
        ..Default::default()
    };
    let mut fgb = FgbWriter::create_with_options(name, GeometryType::Unknown, options)
        .map_err(|e| fail(&e))?;
    fgb.add_column("id", ColumnType::ULong, |_, col| col.nullable = false);
    for c in columns {
        let ty = match c.kind {
            Kind::UInt => ColumnType::ULong,
            Kind::Text => ColumnType::String,
        };
        fgb.add_column(&c.name, ty, |_, col| col.nullable = true);
    }
    let mut n = 0u64;
    for (id, g, row) in objects {
        if let Geometry::GeometryCollection(_) = g.borrow() {
            // the crate's writer gives the collection the type of its last
            // member when the file mixes geometry types: the file would be wrong
            return Err(fail(&format_args!(
                "object {id} is a geometry collection, which the flatgeobuf writer cannot store in a file of mixed geometry types; write .geojson or .parquet"
            )));
        }
        let mut prop = Ok(false);
        fgb.add_feature_geom(Geom(g.borrow()), |f| {
            prop = f.property(0, "id", &ColumnValue::ULong(id));
            for (i, (c, v)) in columns.iter().zip(row).enumerate() {
                let value = match v {
                    None => continue,
                    Some(Value::UInt(x)) => ColumnValue::ULong(*x),
                    Some(Value::Text(t)) => ColumnValue::String(t),
                };
                if prop.is_ok() {
                    prop = f.property(i + 1, &c.name, &value);
                }
            }
        })
        .and(prop)
        .map_err(|e| fail(&format_args!("object {id}: {e}")))?;
        n += 1;
    }
    let mut w = BufWriter::new(out.file());
    fgb.write(&mut w).map_err(|e| fail(&e))?;
    std::io::Write::flush(&mut w).map_err(|e| io_err(path, e))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_size_matches_the_crate() {
        for n in [1usize, 2, 15, 16, 17, 300, 100_000] {
            for node in [2u16, 16, 300] {
                assert_eq!(
                    index_bytes(n as u64, node),
                    Some(flatgeobuf::packed_r_tree::PackedRTree::index_size(n, node) as u64),
                    "{n} {node}"
                );
            }
        }
        assert_eq!(index_bytes(5, 0), Some(0));
        assert_eq!(index_bytes(u64::MAX, 2), None);
    }

    #[test]
    fn property_ids() {
        let cols = vec![
            ("name".to_string(), ColumnType::String),
            ("ID".to_string(), ColumnType::Long),
        ];
        let mut b = vec![0, 0, 3, 0, 0, 0, b'a', b'b', b'c', 1, 0];
        b.extend_from_slice(&42i64.to_le_bytes());
        assert_eq!(property_id(&b, &cols, 1), Ok(Some(42)));
        assert_eq!(property_id(&b[..9], &cols, 1), Ok(None));
        assert!(property_id(&b[..14], &cols, 1)
            .unwrap_err()
            .contains("end inside"));
        let mut neg = b[..11].to_vec();
        neg.extend_from_slice(&(-1i64).to_le_bytes());
        assert!(property_id(&neg, &cols, 1)
            .unwrap_err()
            .contains("negative"));
        assert!(property_id(&[9, 0, 1], &cols, 1)
            .unwrap_err()
            .contains("column 9"));
        // a string length beyond the bytes
        assert!(property_id(&[0, 0, 255, 255, 255, 255, 1], &cols, 1).is_err());
    }

    /// A geometry of a hand-built feature: its type, its `xy` values (absent
    /// when `None`) and its parts. Built by hand because the `flatgeobuf`
    /// crate's writer nests no collection.
    struct Geom {
        ty: GeometryType,
        xy: Option<Vec<f64>>,
        parts: Vec<Geom>,
    }

    fn leaf(ty: GeometryType, xy: &[f64]) -> Geom {
        Geom {
            ty,
            xy: Some(xy.to_vec()),
            parts: vec![],
        }
    }

    fn point(xy: &[f64]) -> Geom {
        leaf(GeometryType::Point, xy)
    }

    fn collection(parts: Vec<Geom>) -> Geom {
        Geom {
            ty: GeometryType::GeometryCollection,
            xy: None,
            parts,
        }
    }

    /// Pads `b` with zeros to a length of `rem` modulo `align`.
    fn pad(b: &mut Vec<u8>, align: usize, rem: usize) {
        while b.len() % align != rem {
            b.push(0);
        }
    }

    /// Sets the offset at `at` to point at `to` (a flatbuffers uoffset,
    /// relative to its own position).
    fn point_at(b: &mut [u8], at: usize, to: usize) {
        b[at..at + 4].copy_from_slice(&((to - at) as u32).to_le_bytes());
    }

    /// Appends `g` as a flatbuffers Geometry table (its vtable, the table,
    /// then its vectors and parts, each child after its parent as the
    /// unsigned offsets require); returns the table's position.
    fn put_geometry(b: &mut Vec<u8>, g: &Geom) -> usize {
        pad(b, 4, 0);
        let vtable = b.len();
        // the table: soffset to the vtable, xy, parts, type
        let (xy, parts, ty) = (4u16, 8u16, 12u16);
        let fields = [
            0,
            if g.xy.is_some() { xy } else { 0 },
            0,
            0,
            0,
            0,
            ty,
            if g.parts.is_empty() { 0 } else { parts },
        ];
        b.extend(20u16.to_le_bytes());
        b.extend(16u16.to_le_bytes());
        fields.iter().for_each(|f| b.extend(f.to_le_bytes()));
        let table = b.len();
        b.extend(((table - vtable) as i32).to_le_bytes());
        b.extend([0; 8]);
        b.extend([g.ty.0, 0, 0, 0]);
        if let Some(values) = &g.xy {
            pad(b, 8, 4);
            let at = b.len();
            point_at(b, table + usize::from(xy), at);
            b.extend((values.len() as u32).to_le_bytes());
            values.iter().for_each(|v| b.extend(v.to_le_bytes()));
        }
        if !g.parts.is_empty() {
            pad(b, 4, 0);
            let at = b.len();
            point_at(b, table + usize::from(parts), at);
            b.extend((g.parts.len() as u32).to_le_bytes());
            let slots = b.len();
            b.resize(slots + 4 * g.parts.len(), 0);
            for (i, p) in g.parts.iter().enumerate() {
                let child = put_geometry(b, p);
                point_at(b, slots + 4 * i, child);
            }
        }
        table
    }

    /// A size-prefixed Feature of geometry `g`, without properties.
    fn feature(g: &Geom) -> Vec<u8> {
        let mut b = vec![0u8; 8];
        let vtable = b.len();
        for v in [8u16, 8, 4, 0] {
            b.extend(v.to_le_bytes());
        }
        let table = b.len();
        b.extend(((table - vtable) as i32).to_le_bytes());
        b.extend([0; 4]);
        let geometry = put_geometry(&mut b, g);
        point_at(&mut b, table + 4, geometry);
        point_at(&mut b, 4, table);
        let size = (b.len() - 4) as u32;
        b[..4].copy_from_slice(&size.to_le_bytes());
        b
    }

    /// A FlatGeobuf file (the crate's header, of an unknown geometry type
    /// and no feature count, then the features) of the geometries `geoms`
    /// (ids 0, 1, …).
    fn fgb_file(dir: &Path, geoms: &[Geom]) -> std::path::PathBuf {
        let options = FgbWriterOptions {
            write_index: false,
            ..Default::default()
        };
        let w = FgbWriter::create_with_options("t", GeometryType::Unknown, options).unwrap();
        let mut bytes = Vec::new();
        w.write(&mut bytes).unwrap();
        geoms.iter().for_each(|g| bytes.extend(feature(g)));
        let p = dir.join("t.fgb");
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// The hand-built features read as the crate writes them.
    #[test]
    fn hand_built_features_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = fgb_file(
            dir.path(),
            &[
                point(&[1.0, 2.0]),
                collection(vec![
                    point(&[3.0, 4.0]),
                    collection(vec![leaf(GeometryType::LineString, &[0.0, 0.0, 5.0, 6.0])]),
                ]),
            ],
        );
        let got = read(&p).unwrap();
        assert_eq!(got[0], (0, geo_types::point!(x: 1.0, y: 2.0).into()));
        let line: Geometry = LineString::from(vec![(0.0, 0.0), (5.0, 6.0)]).into();
        let inner = Geometry::GeometryCollection(vec![line].into());
        let outer = vec![geo_types::point!(x: 3.0, y: 4.0).into(), inner];
        assert_eq!(got[1], (1, Geometry::GeometryCollection(outer.into())));
    }

    /// An empty point (no coordinates, an absent `xy`, or x and y both NaN)
    /// of a collection or a multi-point, at any depth, was refused whole
    /// ("a point with 0 coordinates", or a NaN coordinate). It is now left
    /// out, as the WKB reader leaves it out; a collection or a multi-point
    /// with nothing left is an empty geometry, refused as one; a top-level
    /// empty point is refused, naming the feature; a point with one NaN
    /// value is not empty, and refused as before.
    #[test]
    fn empty_points_of_collections_and_multi_points_are_left_out() {
        let nan = f64::NAN;
        let dir = tempfile::tempdir().unwrap();
        let full = || point(&[1.0, 2.0]);
        let empties = || {
            vec![
                point(&[]),
                point(&[nan, nan]),
                Geom {
                    ty: GeometryType::Point,
                    xy: None,
                    parts: vec![],
                },
            ]
        };
        let one: Geometry = geo_types::point!(x: 1.0, y: 2.0).into();
        let read_one = |g: Geom| -> Result<Geometry> {
            let p = fgb_file(dir.path(), &[g]);
            read(&p).map(|mut v| v.remove(0).1)
        };
        for empty in empties() {
            // GEOMETRYCOLLECTION (POINT EMPTY, POINT (1 2))
            let g = read_one(collection(vec![empty, full()])).unwrap();
            assert_eq!(g, Geometry::GeometryCollection(vec![one.clone()].into()));
        }
        for empty in empties() {
            // POINT (1 2) first
            let g = read_one(collection(vec![full(), empty])).unwrap();
            assert_eq!(g, Geometry::GeometryCollection(vec![one.clone()].into()));
        }
        for empty in empties() {
            // nested: GEOMETRYCOLLECTION (GEOMETRYCOLLECTION (POINT EMPTY, POINT (1 2)))
            let g = read_one(collection(vec![collection(vec![empty, full()])])).unwrap();
            let inner = Geometry::GeometryCollection(vec![one.clone()].into());
            assert_eq!(g, Geometry::GeometryCollection(vec![inner].into()));
        }
        // MULTIPOINT (EMPTY, (1 2), EMPTY, (3 4)), also inside a collection
        let multi = || {
            leaf(
                GeometryType::MultiPoint,
                &[nan, nan, 1.0, 2.0, nan, nan, 3.0, 4.0],
            )
        };
        let want = Geometry::MultiPoint(
            vec![
                geo_types::point!(x: 1.0, y: 2.0),
                geo_types::point!(x: 3.0, y: 4.0),
            ]
            .into(),
        );
        assert_eq!(read_one(multi()).unwrap(), want);
        assert_eq!(
            read_one(collection(vec![point(&[]), multi()])).unwrap(),
            Geometry::GeometryCollection(vec![want].into())
        );
        // nothing left: an empty geometry, refused naming the feature
        for g in [
            collection(vec![point(&[])]),
            collection(vec![point(&[nan, nan]), collection(vec![point(&[])])]),
            leaf(GeometryType::MultiPoint, &[nan, nan]),
        ] {
            let e = read_one(g).unwrap_err();
            let m = e.to_string();
            assert!(
                e.is_user_error() && m.contains("t.fgb: feature 0 (id 0)") && m.contains("empty"),
                "{m}"
            );
        }
        // a top-level empty point: refused, naming the feature
        for empty in empties() {
            let m = read_one(empty).unwrap_err().to_string();
            assert!(
                m.contains("t.fgb: feature 0 (id 0): the geometry is an empty point"),
                "{m}"
            );
        }
        // a point with one NaN value is not empty: refused, as before
        for half in [
            point(&[nan, 1.0]),
            collection(vec![point(&[1.0, nan]), full()]),
        ] {
            let m = read_one(half).unwrap_err().to_string();
            assert!(m.contains("not finite"), "{m}");
        }
        // two coordinates are not a point, in a collection too
        let m = read_one(collection(vec![point(&[1.0, 2.0, 3.0, 4.0])]))
            .unwrap_err()
            .to_string();
        assert!(m.contains("a point with 2 coordinates"), "{m}");
    }
}
