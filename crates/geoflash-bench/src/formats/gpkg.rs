//! GeoPackage (<https://www.geopackage.org>, OGC 12-128r18): an SQLite
//! database, read through `rusqlite` (read-only, with the schema's own SQL
//! functions untrusted). What GeoPandas writes with `to_file(…)` to a
//! `.gpkg` (pyogrio or Fiona, through GDAL).
//!
//! **Layers.** The feature layers are the tables that `gpkg_contents` lists
//! with `data_type = 'features'` and `gpkg_geometry_columns` gives a
//! geometry column. A file of one layer is read whole; a file of several
//! needs the layer's name ([`read`]'s `layer`, `--layer` on the command
//! line), and an error lists them otherwise.
//!
//! **Geometries.** Each value of the geometry column is a GeoPackage binary
//! geometry ([`split_blob`]): the magic `GP`, a version byte (0: version 1),
//! a flags byte (bit 0 the byte order of the header, bits 1–3 the envelope
//! type: none, xy, xyz, xym or xyzm; bit 4 the empty geometry flag, bit 5
//! an extended geometry type), the spatial reference system id and the
//! envelope, then the geometry as WKB (only x and y are kept). The spatial
//! reference system is not converted (the workbench's coordinates have no
//! declared CRS). A null or empty geometry is an error naming the feature,
//! as in the other formats; so is an extended (non-standard) geometry type.
//!
//! **Ids.** From an integer column named `id` (any case) when the layer has
//! one, else from the layer's integer primary key (the feature id, `fid` in
//! GDAL's files), else the position in the layer (0, 1, …). Features are
//! read in the order of the primary key.
use std::path::Path;

use geoflash::engine::{from_wkb, Geometry};
use geoflash::Result;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::{bad, Collector};

/// A feature layer: its table and geometry column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The table's name.
    pub table: String,
    /// The geometry column's name.
    pub geometry_column: String,
}

/// An SQL identifier in double quotes.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Opens the GeoPackage `path` read-only.
fn open(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| bad(path, format!("cannot open as a GeoPackage: {e}")))?;
    // the SQL of a file's views and triggers runs no function with side
    // effects; ignore a failure (an SQLite without the pragma has no such functions)
    let _ = conn.pragma_update(None, "trusted_schema", false);
    Ok(conn)
}

/// The feature layers of the GeoPackage `path`, by table name.
pub fn layers(path: &Path) -> Result<Vec<Layer>> {
    layers_of(path, &open(path)?)
}

fn layers_of(path: &Path, conn: &Connection) -> Result<Vec<Layer>> {
    let sql = "SELECT c.table_name, g.column_name FROM gpkg_contents c \
               JOIN gpkg_geometry_columns g ON g.table_name = c.table_name \
               WHERE c.data_type = 'features' ORDER BY c.table_name";
    let mut stmt = conn.prepare(sql).map_err(|e| {
        let msg = e.to_string();
        if msg.contains("no such table") {
            bad(
                path,
                format!("not a GeoPackage: it has no gpkg_contents or gpkg_geometry_columns table ({msg})"),
            )
        } else {
            bad(path, format!("not a GeoPackage: {msg}"))
        }
    })?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Layer {
                table: r.get(0)?,
                geometry_column: r.get(1)?,
            })
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(|e| bad(path, format!("cannot read the GeoPackage's layers: {e}")))?;
    Ok(rows)
}

/// The layer to read: `name`, or the only one.
fn choose(path: &Path, layers: Vec<Layer>, name: Option<&str>) -> Result<Layer> {
    let names = || {
        layers
            .iter()
            .map(|l| l.table.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(n) => layers
            .iter()
            .find(|l| l.table == n)
            .cloned()
            .ok_or_else(|| {
                bad(
                    path,
                    if layers.is_empty() {
                        format!("no layer {n:?}: the GeoPackage has no feature layer")
                    } else {
                        format!("no layer {n:?}; its feature layers: {}", names())
                    },
                )
            }),
        None => match layers.len() {
            0 => Err(bad(path, "the GeoPackage has no feature layer")),
            1 => Ok(layers.into_iter().next().expect("one layer")),
            n => Err(bad(
                path,
                format!(
                    "the GeoPackage has {n} feature layers ({}): choose one with --layer NAME \
                     (in a workload, the dataset's layer = \"NAME\")",
                    names()
                ),
            )),
        },
    }
}

/// Checks that [`read`] can choose a layer of `path` by `name`: the layer
/// exists, or the file has only one when `name` is `None` (the errors list
/// the file's feature layers).
pub fn check_layer(path: &Path, name: Option<&str>) -> Result<()> {
    choose(path, layers(path)?, name).map(drop)
}

/// The parts of a GeoPackage binary geometry: the WKB after the header, or
/// `None` when the header's empty flag is set. Errors say what is wrong.
pub fn split_blob(blob: &[u8]) -> std::result::Result<Option<&[u8]>, String> {
    if blob.len() < 8 {
        return Err(format!(
            "{} bytes, too short for a GeoPackage geometry header",
            blob.len()
        ));
    }
    if &blob[..2] != b"GP" {
        return Err("not a GeoPackage geometry (no GP magic)".into());
    }
    if blob[2] != 0 {
        return Err(format!(
            "GeoPackage geometry version byte {} (only 0, version 1, is defined)",
            blob[2]
        ));
    }
    let flags = blob[3];
    if flags & 0xc0 != 0 {
        return Err(format!("reserved flag bits set in {flags:#04x}"));
    }
    if flags & 0x20 != 0 {
        return Err(
            "an extended GeoPackage geometry (a non-standard geometry type), which this reader does not read"
                .into(),
        );
    }
    let envelope = match (flags >> 1) & 7 {
        0 => 0,
        1 => 32,
        2 | 3 => 48,
        4 => 64,
        e => return Err(format!("invalid envelope contents indicator {e}")),
    };
    let start = 8 + envelope;
    if blob.len() < start {
        return Err(format!(
            "{} bytes, too short for its header and {envelope}-byte envelope",
            blob.len()
        ));
    }
    if flags & 0x10 != 0 {
        return Ok(None);
    }
    Ok(Some(&blob[start..]))
}

/// The columns of a table: (name, declared type, primary key position).
fn table_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<(String, String, i64)>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({})", quoted(table)))?;
    let rows = stmt.query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(5)?)))?;
    rows.collect()
}

/// Reads the `(id, geometry)` objects of a GeoPackage's feature layer
/// `layer` (the only one when `None`; see the module documentation).
pub fn read(path: &Path, layer: Option<&str>) -> Result<Vec<(u64, Geometry)>> {
    let conn = open(path)?;
    let layer = choose(path, layers_of(path, &conn)?, layer)?;
    let sqlerr = |e: rusqlite::Error| bad(path, format!("layer {:?}: {e}", layer.table));
    let columns = table_columns(&conn, &layer.table).map_err(sqlerr)?;
    let integer = |t: &str| t.eq_ignore_ascii_case("INTEGER") || t.eq_ignore_ascii_case("INT");
    let pks: Vec<&(String, String, i64)> = columns.iter().filter(|c| c.2 > 0).collect();
    let pk = match pks.as_slice() {
        [c] if integer(&c.1) => Some(c.0.as_str()),
        _ => None,
    };
    let id = columns
        .iter()
        .find(|c| c.0.eq_ignore_ascii_case("id") && c.0 != layer.geometry_column)
        .map(|c| c.0.as_str())
        .or(pk);
    if !columns.iter().any(|c| c.0 == layer.geometry_column) {
        return Err(bad(
            path,
            format!(
                "layer {:?} has no column {:?} (its geometry column in gpkg_geometry_columns)",
                layer.table, layer.geometry_column
            ),
        ));
    }
    let sql = format!(
        "SELECT {}, {} FROM {}{}",
        id.map_or("NULL".to_string(), quoted),
        quoted(&layer.geometry_column),
        quoted(&layer.table),
        pk.map_or(String::new(), |k| format!(" ORDER BY {}", quoted(k)))
    );
    let mut stmt = conn.prepare(&sql).map_err(sqlerr)?;
    let mut rows = stmt.query([]).map_err(sqlerr)?;
    let mut objects = Collector::new(path);
    let mut n = 0u64;
    while let Some(row) = rows.next().map_err(sqlerr)? {
        let what = format!("layer {:?}, feature {n}", layer.table);
        let oid = match (id, row.get_ref(0).map_err(sqlerr)?) {
            (None, _) => n,
            (Some(_), ValueRef::Integer(v)) => {
                u64::try_from(v).map_err(|_| bad(path, format!("{what}: id {v} is negative")))?
            }
            (Some(c), ValueRef::Null) => return Err(bad(path, format!("{what}: the {c} is null"))),
            (Some(c), v) => {
                return Err(bad(
                    path,
                    format!("{what}: the {c} is a {}, not an integer", v.data_type()),
                ))
            }
        };
        let g = match row.get_ref(1).map_err(sqlerr)? {
            ValueRef::Blob(b) => {
                let at = |e: String| bad(path, format!("{what} (id {oid}): {e}"));
                match split_blob(b).map_err(at)? {
                    None => return Err(at("the geometry is empty".into())),
                    Some(wkb) => from_wkb(wkb, &format!("{}: {what} (id {oid})", path.display()))?,
                }
            }
            ValueRef::Null => return Err(bad(path, format!("{what} (id {oid}) has no geometry"))),
            v => {
                return Err(bad(
                    path,
                    format!(
                        "{what} (id {oid}): the geometry is a {}, not a GeoPackage geometry blob",
                        v.data_type()
                    ),
                ))
            }
        };
        objects.push(&what, oid, g)?;
        n += 1;
    }
    Ok(objects.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(flags: u8, envelope: usize) -> Vec<u8> {
        let mut b = vec![b'G', b'P', 0, flags, 0, 0, 0x10, 0xe6];
        b.extend(std::iter::repeat_n(0u8, envelope));
        b
    }

    #[test]
    fn blob_headers() {
        let wkb =
            geoflash::engine::to_wkb(&Geometry::Point(geo_types::Point::new(1.0, 2.0))).unwrap();
        // every envelope size, either byte order
        for (env, len) in [(0u8, 0), (1, 32), (2, 48), (3, 48), (4, 64)] {
            for order in [0u8, 1] {
                let mut b = header(env << 1 | order, len);
                b.extend(&wkb);
                assert_eq!(split_blob(&b), Ok(Some(wkb.as_slice())), "{env} {order}");
            }
        }
        // the empty flag
        assert_eq!(split_blob(&header(0x10 | 0x01, 0)), Ok(None));
        let cases: [(Vec<u8>, &str); 6] = [
            (b"GP\0".to_vec(), "too short"),
            (b"XY\0\x01\0\0\0\0".to_vec(), "no GP magic"),
            (b"GP\x01\x01\0\0\0\0".to_vec(), "version byte 1"),
            (header(0x21, 0), "extended"),
            (header(5 << 1, 0), "envelope contents indicator 5"),
            (header(1 << 1, 16), "32-byte envelope"),
        ];
        for (b, want) in cases {
            let e = split_blob(&b).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn layer_choice() {
        let p = Path::new("x.gpkg");
        let l = |t: &str| Layer {
            table: t.into(),
            geometry_column: "geom".into(),
        };
        assert_eq!(choose(p, vec![l("a")], None).unwrap(), l("a"));
        assert_eq!(choose(p, vec![l("a"), l("b")], Some("b")).unwrap(), l("b"));
        let e = choose(p, vec![l("a"), l("b")], None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("2 feature layers (a, b)") && e.contains("--layer"),
            "{e}"
        );
        let e = choose(p, vec![l("a")], Some("c")).unwrap_err().to_string();
        assert!(e.contains("no layer \"c\"; its feature layers: a"), "{e}");
        assert!(choose(p, vec![], None)
            .unwrap_err()
            .to_string()
            .contains("no feature layer"));
    }
}
