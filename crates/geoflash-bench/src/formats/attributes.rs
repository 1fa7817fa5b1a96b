//! Attributes of objects: named, typed values that travel beside each
//! object's id and geometry from a reader to the writers (today the OSM
//! type, id and tag values of objects read from OpenStreetMap PBF,
//! [`osm_columns`]).
//!
//! An [`Attributes`] table holds the columns and one row per object, in the
//! objects' order; a dataset without attributes has no columns and its
//! files are written exactly as before. Every writer stores the columns
//! after its own ones ([`super::write_objects_with`]):
//!
//! | format | where | unsigned integers | text | absent |
//! |---|---|---|---|---|
//! | CSV | columns after `id,minx,miny,maxx,maxy` | digits | quoted when needed | empty field |
//! | GeoJSON | feature properties beside `id` | JSON number | JSON string | `null` |
//! | FlatGeobuf | nullable columns after `id` | `ULong` | `String` | property not set |
//! | GeoParquet | optional columns after `geometry` | `INT64` (unsigned) | `BYTE_ARRAY` (UTF-8) | null |
//!
//! [`super::read_attributes`] reads the attribute columns of a file of any writable format
//! back. Column names are checked once ([`Attributes::new`]): no two alike,
//! none empty, and none of the names the formats use themselves
//! ([`RESERVED`]).
use std::collections::BTreeSet;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use geoflash::{Error, Result};

use super::{bad, io_err, reason};

/// Column names the formats use themselves (any case): the id, the CSV
/// rectangle columns and the names the readers take for a geometry column.
pub const RESERVED: [&str; 9] = [
    "id", "minx", "miny", "maxx", "maxy", "wkt", "geometry", "geom", "wkb",
];

/// The type of an attribute column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Unsigned 64-bit integers.
    UInt,
    /// UTF-8 text.
    Text,
}

/// One attribute column: its name and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// The type of its values.
    pub kind: Kind,
}

impl Column {
    /// A column named `name` of type `kind`.
    pub fn new(name: impl Into<String>, kind: Kind) -> Self {
        Column {
            name: name.into(),
            kind,
        }
    }
}

/// One attribute value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    /// An unsigned integer.
    UInt(u64),
    /// Text.
    Text(String),
}

impl Value {
    /// The text of a [`Value::Text`] (`None` for an integer).
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            Value::UInt(_) => None,
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::UInt(v) => write!(f, "{v}"),
            Value::Text(s) => f.write_str(s),
        }
    }
}

/// The attribute values of one object, one per column (`None`: absent).
pub type Row = [Option<Value>];

/// Attribute columns and one row per object, in the objects' order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    columns: Vec<Column>,
    rows: Vec<Vec<Option<Value>>>,
}

impl Attributes {
    /// An empty table of `columns`, after checking their names: none empty,
    /// none twice, none [`RESERVED`] (compared without case).
    pub fn new(columns: Vec<Column>) -> Result<Self> {
        let mut seen = BTreeSet::new();
        for c in &columns {
            let lower = c.name.to_ascii_lowercase();
            if c.name.trim().is_empty() {
                return Err(Error::invalid("an attribute column has an empty name"));
            }
            if RESERVED.contains(&lower.as_str()) {
                return Err(Error::invalid(format!(
                    "attribute column {:?} would clash with a column the output formats use themselves ({})",
                    c.name,
                    RESERVED.join(", ")
                )));
            }
            if !seen.insert(lower) {
                return Err(Error::invalid(format!(
                    "attribute column {:?} is given twice",
                    c.name
                )));
            }
        }
        Ok(Attributes {
            columns,
            rows: Vec::new(),
        })
    }

    /// The columns.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Whether the table has no columns (objects without attributes).
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Appends a row; it must have one value per column, each of the
    /// column's type (a programming error otherwise, reported as such).
    pub fn push(&mut self, row: Vec<Option<Value>>) -> Result<()> {
        let fits = row.len() == self.columns.len()
            && row.iter().zip(&self.columns).all(|(v, c)| {
                matches!(
                    (v, c.kind),
                    (None, _)
                        | (Some(Value::UInt(_)), Kind::UInt)
                        | (Some(Value::Text(_)), Kind::Text)
                )
            });
        if !fits {
            return Err(Error::invalid(format!(
                "an attribute row {row:?} does not fit the columns {:?}",
                self.columns
            )));
        }
        self.rows.push(row);
        Ok(())
    }

    /// Row `i`; the empty row when the table has no columns (any `i`).
    pub fn row(&self, i: usize) -> &Row {
        self.rows.get(i).map_or(&[], Vec::as_slice)
    }

    /// The value of column `name` in row `i`.
    pub fn get(&self, i: usize, name: &str) -> Option<&Value> {
        let c = self.columns.iter().position(|c| c.name == name)?;
        self.rows.get(i)?.get(c)?.as_ref()
    }
}

/// The attribute columns of objects read from OSM PBF: `osm_type` (text,
/// `way` or `relation`), `osm_id` (unsigned) and one text column per
/// distinct key of the tag filters, in the filters' order (the tag's value,
/// absent when the element lacks the tag).
pub fn osm_columns(keys: &[String]) -> Result<Attributes> {
    let mut columns = vec![
        Column::new("osm_type", Kind::Text),
        Column::new("osm_id", Kind::UInt),
    ];
    columns.extend(keys.iter().map(|k| Column::new(k.clone(), Kind::Text)));
    Attributes::new(columns).map_err(|e| {
        Error::invalid(format!(
            "the OSM tag filters cannot become output columns: {e}"
        ))
    })
}

pub(super) fn read_csv(path: &Path) -> Result<(Vec<u64>, Attributes)> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    // flexible: blank lines are skipped as the geometry readers skip them
    // (super::csv_data_record)
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(BufReader::new(file));
    let headers = rdr.headers().cloned().map_err(|e| bad(path, e))?;
    let extra: Vec<(usize, &str)> = headers
        .iter()
        .enumerate()
        .filter(|(_, h)| !RESERVED.contains(&h.to_ascii_lowercase().as_str()))
        .collect();
    let id_col = headers.iter().position(|h| h.eq_ignore_ascii_case("id"));
    let mut attrs = Attributes::new(
        extra
            .iter()
            .map(|(_, h)| Column::new(*h, Kind::Text))
            .collect(),
    )
    .map_err(|e| bad(path, reason(&e)))?;
    let mut ids = Vec::new();
    let mut n = 0;
    for rec in rdr.records() {
        let rec = rec.map_err(|e| bad(path, e))?;
        if !super::csv_data_record(path, n + 1, rec.as_byte_record(), headers.len())? {
            continue;
        }
        let id = match id_col {
            None => n as u64,
            Some(i) => {
                let s = rec.get(i).unwrap_or("").trim();
                s.parse().map_err(|_| {
                    bad(
                        path,
                        format!("record {}: id {s:?} is not a non-negative integer", n + 1),
                    )
                })?
            }
        };
        ids.push(id);
        attrs.push(
            extra
                .iter()
                .map(|&(i, _)| {
                    rec.get(i)
                        .filter(|s| !s.is_empty())
                        .map(|s| Value::Text(s.to_string()))
                })
                .collect(),
        )?;
        n += 1;
    }
    Ok((ids, attrs))
}

pub(super) fn read_geojson(path: &Path) -> Result<(Vec<u64>, Attributes)> {
    let ids: Vec<u64> = super::read_geojson(path)?
        .into_iter()
        .map(|o| o.0)
        .collect();
    let features = super::geojson_features(path)?;
    let props = |f: &geojson::Feature| f.properties.clone().unwrap_or_default();
    let names: BTreeSet<String> = features
        .iter()
        .flat_map(|f| props(f).into_iter().map(|(k, _)| k))
        .filter(|k| k != "id")
        .collect();
    let numeric = |name: &str| {
        features.iter().all(|f| {
            matches!(props(f).get(name), None | Some(serde_json::Value::Null))
                || props(f).get(name).and_then(|v| v.as_u64()).is_some()
        })
    };
    let columns = names
        .iter()
        .map(|n| {
            let kind = if numeric(n) { Kind::UInt } else { Kind::Text };
            Column::new(n.clone(), kind)
        })
        .collect();
    let mut attrs = Attributes::new(columns).map_err(|e| bad(path, reason(&e)))?;
    for f in &features {
        let p = props(f);
        let row = attrs
            .columns()
            .iter()
            .map(|c| match (p.get(&c.name), c.kind) {
                (None | Some(serde_json::Value::Null), _) => None,
                (Some(v), Kind::UInt) => v.as_u64().map(Value::UInt),
                (Some(serde_json::Value::String(s)), Kind::Text) => Some(Value::Text(s.clone())),
                (Some(v), Kind::Text) => Some(Value::Text(v.to_string())),
            })
            .collect();
        attrs.push(row)?;
    }
    Ok((ids, attrs))
}

/// The text of a CSV field: as is, or quoted (quotes doubled) when it holds
/// a comma, a quote or a line break.
pub(crate) fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_rows_must_fit() {
        assert!(osm_columns(&["building".into(), "highway".into()]).is_ok());
        for bad in [&["id"][..], &["Geometry"], &["osm_id"], &[""], &["a", "A"]] {
            let keys: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            let e = osm_columns(&keys).unwrap_err().to_string();
            assert!(e.contains("OSM tag filters"), "{bad:?}: {e}");
        }
        let mut a = osm_columns(&["building".into()]).unwrap();
        assert!(a
            .push(vec![Some(Value::UInt(3)), None, None])
            .unwrap_err()
            .to_string()
            .contains("does not fit"));
        assert!(a.push(vec![None, None]).is_err());
        a.push(vec![
            Some(Value::Text("way".into())),
            Some(Value::UInt(7)),
            None,
        ])
        .unwrap();
        assert_eq!(a.get(0, "osm_id"), Some(&Value::UInt(7)));
        assert_eq!(a.get(0, "building"), None);
        assert_eq!(Attributes::default().row(5), &[]);
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("yes"), "yes");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
    }
}
