//! PostGIS datasets, the FESTIval way: the geometries of a table read
//! from a PostgreSQL server as WKB (`ST_AsBinary`) and decoded by the same
//! code as GeoParquet's ([`geoflash::engine::from_wkb`]).
//!
//! Ids come from an integer column (`id_column`, cast to `bigint`; the
//! objects are then read in id order) or else are positions 0, 1, … in the
//! table's physical order (`ctid`). A NULL geometry, a NULL or negative id,
//! a duplicate id, an empty geometry or a coordinate that is not finite is
//! an error naming the row. Reading needs the cargo feature `postgres`.
use serde::Serialize;

/// A PostGIS table to read a dataset from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PostgisSource {
    /// Connection URL (`postgresql://user@host/db`); recorded without its password.
    #[serde(serialize_with = "redacted")]
    pub url: String,
    /// Table (or view), optionally schema-qualified: `schema.table`.
    pub table: String,
    /// Column of type `geometry` (or `geography`).
    pub geometry_column: String,
    /// Integer column of object ids (none: positions in physical order).
    pub id_column: Option<String>,
}

fn redacted<S: serde::Serializer>(url: &str, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&crate::pg::redact(url))
}

/// `name` as an SQL identifier: each part of `schema.table` in double
/// quotes (embedded quotes doubled), so any name is taken literally.
pub fn quote_ident(name: &str) -> String {
    name.split('.')
        .map(|p| format!("\"{}\"", p.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(".")
}

impl PostgisSource {
    /// How errors name the source: `table T at postgresql://user@host/db`.
    pub fn describe(&self) -> String {
        format!(
            "PostGIS table {} at {}",
            self.table,
            crate::pg::redact(&self.url)
        )
    }

    /// The query reading `(id, WKB)` rows.
    pub fn query(&self) -> String {
        let geom = quote_ident(&self.geometry_column);
        let table = quote_ident(&self.table);
        match &self.id_column {
            Some(id) => {
                let id = quote_ident(id);
                format!(
                    "SELECT CAST({id} AS BIGINT), ST_AsBinary({geom}) FROM {table} ORDER BY {id}"
                )
            }
            None => format!(
                "SELECT CAST(NULL AS BIGINT), ST_AsBinary({geom}) FROM {table} ORDER BY ctid"
            ),
        }
    }
}

#[cfg(feature = "postgres")]
pub use read::{read, read_rects};

#[cfg(feature = "postgres")]
mod read {
    use std::path::Path;

    use geoflash::engine::Geometry;
    use geoflash::engine::{bounding_rect, from_wkb};
    use geoflash::geom::Rect;
    use geoflash::{Error, Result};
    use postgres::fallible_iterator::FallibleIterator;

    use super::PostgisSource;
    use crate::formats::{bad, Collector};

    /// The objects of the table, in id order (or physical order without ids).
    pub fn read(src: &PostgisSource) -> Result<Vec<(u64, Geometry)>> {
        let what = src.describe();
        let label = Path::new(&what);
        let db = |e: postgres::Error| bad(label, crate::pg::message(&e));
        let mut client = crate::pg::connect(&src.url)?;
        let sql = src.query();
        let mut rows = client
            .query_raw(
                sql.as_str(),
                std::iter::empty::<&(dyn postgres::types::ToSql + Sync)>(),
            )
            .map_err(db)?;
        let mut objects = Collector::new(label);
        let mut n = 0u64;
        while let Some(row) = rows.next().map_err(db)? {
            let at = format!("row {}", n + 1);
            let id = match &src.id_column {
                None => n,
                Some(col) => {
                    let v: Option<i64> = row.try_get(0).map_err(db)?;
                    let v =
                        v.ok_or_else(|| bad(label, format!("{at}: id column {col} is NULL")))?;
                    u64::try_from(v).map_err(|_| bad(label, format!("{at}: id {v} is negative")))?
                }
            };
            let wkb: Option<&[u8]> = row.try_get(1).map_err(db)?;
            let wkb = wkb.ok_or_else(|| bad(label, format!("{at} (id {id}) has no geometry")))?;
            let g = from_wkb(wkb, &format!("{what}: {at} (id {id})"))?;
            objects.push(&at, id, g)?;
            n += 1;
        }
        let objects = objects.finish();
        if objects.is_empty() {
            return Err(Error::invalid(format!("{what}: no rows")));
        }
        Ok(objects)
    }

    /// The `(id, MBR)` records of the table.
    pub fn read_rects(src: &PostgisSource) -> Result<Vec<(u64, Rect)>> {
        read(src)?
            .into_iter()
            .map(|(id, g)| {
                bounding_rect(&g).map(|r| (id, r)).map_err(|e| {
                    let e = crate::formats::reason(&e);
                    Error::invalid(format!("{}: object {id}: {e}", src.describe()))
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_queries() {
        assert_eq!(quote_ident("buildings"), "\"buildings\"");
        assert_eq!(quote_ident("osm.Build\"ings"), "\"osm\".\"Build\"\"ings\"");
        let mut s = PostgisSource {
            url: "postgresql://u:secret@h/db".into(),
            table: "t".into(),
            geometry_column: "geom".into(),
            id_column: Some("osm_id".into()),
        };
        assert_eq!(
            s.query(),
            "SELECT CAST(\"osm_id\" AS BIGINT), ST_AsBinary(\"geom\") FROM \"t\" ORDER BY \"osm_id\""
        );
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            json.contains("postgresql://u@h/db") && !json.contains("secret"),
            "{json}"
        );
        s.id_column = None;
        assert!(s.query().ends_with("ORDER BY ctid"));
        assert_eq!(s.describe(), "PostGIS table t at postgresql://u@h/db");
    }
}
