//! GeoArrow-encoded geometry columns of GeoParquet 1.1 (the `encoding`s
//! `point`, `linestring`, `polygon`, `multipoint`, `multilinestring` and
//! `multipolygon`, which GeoPandas writes with
//! `to_parquet(geometry_encoding="geoarrow")`): nested lists whose innermost
//! elements are coordinates, stored in Parquet as the leaf columns of the
//! coordinate struct (`x`, `y`, maybe `z`, `m`: the separated layout of the
//! GeoParquet specification) or, in the interleaved layout some GeoArrow
//! writers use, as one leaf of doubles in a fixed-size list per coordinate.
//!
//! Parquet stores a nested column as its leaf values with a repetition and a
//! definition level per entry (the Dremel encoding); [`assemble`] rebuilds
//! each row's nesting from the levels, [`geometry`] turns it into a
//! geometry. Only x and y are kept, as the WKB reader keeps them.
use geo_types::{Coord, LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon};
use geoflash::engine::Geometry;

/// The GeoArrow geometry types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `point`: a coordinate.
    Point,
    /// `linestring`: a list of coordinates.
    LineString,
    /// `polygon`: a list of rings, the exterior first.
    Polygon,
    /// `multipoint`: a list of coordinates.
    MultiPoint,
    /// `multilinestring`: a list of lines.
    MultiLineString,
    /// `multipolygon`: a list of polygons.
    MultiPolygon,
}

impl Kind {
    /// The kind of a GeoParquet `encoding` name (any case), `None` for an
    /// encoding that is not a GeoArrow one.
    pub(crate) fn parse(encoding: &str) -> Option<Kind> {
        Some(match encoding.to_ascii_lowercase().as_str() {
            "point" => Kind::Point,
            "linestring" => Kind::LineString,
            "polygon" => Kind::Polygon,
            "multipoint" => Kind::MultiPoint,
            "multilinestring" => Kind::MultiLineString,
            "multipolygon" => Kind::MultiPolygon,
            _ => return None,
        })
    }

    /// How many lists nest around a coordinate.
    pub(crate) fn depth(self) -> usize {
        match self {
            Kind::Point => 0,
            Kind::LineString | Kind::MultiPoint => 1,
            Kind::Polygon | Kind::MultiLineString => 2,
            Kind::MultiPolygon => 3,
        }
    }
}

/// The definition levels of one list (a repeated node) on the path of a
/// leaf column, outermost list first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListLevels {
    /// From this level on, the list exists (it is not null).
    pub(crate) present: i16,
    /// From this level on, the list has an element at this entry.
    pub(crate) element: i16,
}

/// A row's nesting: lists of lists … of leaf values (indices into the
/// leaf column's non-null values).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Nest {
    /// The index of a leaf value.
    Value(usize),
    /// A list.
    List(Vec<Nest>),
}

/// Rebuilds the rows of a leaf column from its definition levels `defs` and
/// repetition levels `reps` (one per entry; both all zero for a column
/// without them), given the levels of the lists on its path (`lists`) and
/// its maximum definition level (a value is present at `max_def`). Returns
/// each row (`None` for a null row) and the number of leaf values the rows
/// use. A null inside a row (a null ring or coordinate, which GeoArrow does
/// not allow) or levels that contradict each other are errors.
pub(crate) fn assemble(
    lists: &[ListLevels],
    max_def: i16,
    defs: &[i16],
    reps: &[i16],
) -> Result<(Vec<Option<Nest>>, usize), String> {
    if defs.len() != reps.len() {
        return Err(format!(
            "{} definition levels but {} repetition levels",
            defs.len(),
            reps.len()
        ));
    }
    let mut rows = Vec::new();
    let mut values = 0usize;
    if lists.is_empty() {
        // a coordinate per row (points)
        for &d in defs {
            rows.push((d >= max_def).then(|| {
                values += 1;
                Nest::Value(values - 1)
            }));
        }
        return Ok((rows, values));
    }
    // the lists open in the current row, depth 1 first
    let mut open: Vec<Vec<Nest>> = Vec::new();
    for (i, (&d, &r)) in defs.iter().zip(reps).enumerate() {
        let r = usize::try_from(r).map_err(|_| format!("entry {i}: repetition level {r}"))?;
        if r == 0 {
            if !open.is_empty() {
                rows.push(Some(close(&mut open)));
            }
            if d < lists[0].present {
                rows.push(None);
                continue;
            }
            open.push(Vec::new());
        } else {
            if r > open.len() || r > lists.len() {
                return Err(format!(
                    "entry {i}: repetition level {r} continues a list that is not open"
                ));
            }
            while open.len() > r {
                let inner = open.pop().unwrap_or_default();
                if let Some(outer) = open.last_mut() {
                    outer.push(Nest::List(inner));
                }
            }
        }
        // the list at depth open.len() receives an element when d says so
        loop {
            let k = open.len();
            if d < lists[k - 1].element {
                if r == k {
                    return Err(format!(
                        "entry {i}: repeats a list without giving it an element"
                    ));
                }
                break;
            }
            if k == lists.len() {
                if d < max_def {
                    return Err(format!("entry {i}: a null coordinate"));
                }
                if let Some(inner) = open.last_mut() {
                    inner.push(Nest::Value(values));
                }
                values += 1;
                break;
            }
            if d < lists[k].present {
                return Err(format!("entry {i}: a null element"));
            }
            open.push(Vec::new());
        }
    }
    if !open.is_empty() {
        rows.push(Some(close(&mut open)));
    }
    Ok((rows, values))
}

/// Closes the open lists of a row: each into its parent; returns the outermost.
fn close(open: &mut Vec<Vec<Nest>>) -> Nest {
    while open.len() > 1 {
        let inner = open.pop().unwrap_or_default();
        if let Some(outer) = open.last_mut() {
            outer.push(Nest::List(inner));
        }
    }
    Nest::List(open.pop().unwrap_or_default())
}

/// The coordinate values of a column.
pub(crate) enum Coords<'a> {
    /// The separated layout: the `x` and the `y` leaf columns.
    Separated {
        /// The x values.
        x: &'a [f64],
        /// The y values.
        y: &'a [f64],
    },
    /// The interleaved layout: each coordinate a list of its values (x, y
    /// and maybe z, m).
    Interleaved(&'a [f64]),
}

impl Coords<'_> {
    fn coord(&self, n: &Nest) -> Result<Coord<f64>, String> {
        let value = |v: &[f64], n: &Nest| match n {
            Nest::Value(i) => v.get(*i).copied().ok_or("a coordinate past the values"),
            Nest::List(_) => Err("a list where a coordinate value belongs"),
        };
        match (self, n) {
            (Coords::Separated { x, y }, Nest::Value(_)) => Ok(Coord {
                x: value(x, n)?,
                y: value(y, n)?,
            }),
            (Coords::Interleaved(v), Nest::List(c)) if c.len() >= 2 => Ok(Coord {
                x: value(v, &c[0])?,
                y: value(v, &c[1])?,
            }),
            (Coords::Interleaved(_), Nest::List(c)) => Err(format!(
                "a coordinate of {} values (at least x and y are needed)",
                c.len()
            )),
            _ => Err("the nesting does not match the encoding".into()),
        }
    }
}

fn list(n: &Nest) -> Result<&[Nest], String> {
    match n {
        Nest::List(v) => Ok(v),
        Nest::Value(_) => Err("a coordinate where a list belongs".into()),
    }
}

fn line(n: &Nest, c: &Coords) -> Result<LineString<f64>, String> {
    list(n)?.iter().map(|p| c.coord(p)).collect()
}

fn polygon(n: &Nest, c: &Coords) -> Result<Polygon<f64>, String> {
    let mut rings = list(n)?.iter().map(|r| line(r, c));
    let exterior = rings
        .next()
        .transpose()?
        .unwrap_or_else(|| LineString::new(Vec::new()));
    Ok(Polygon::new(exterior, rings.collect::<Result<_, _>>()?))
}

/// The geometry of a row of a `kind` column (a row from [`assemble`]).
pub(crate) fn geometry(kind: Kind, n: &Nest, c: &Coords) -> Result<Geometry, String> {
    Ok(match kind {
        Kind::Point => Geometry::Point(Point(c.coord(n)?)),
        Kind::LineString => Geometry::LineString(line(n, c)?),
        Kind::Polygon => Geometry::Polygon(polygon(n, c)?),
        Kind::MultiPoint => Geometry::MultiPoint(MultiPoint(
            list(n)?
                .iter()
                .map(|p| c.coord(p).map(Point))
                .collect::<Result<_, _>>()?,
        )),
        Kind::MultiLineString => Geometry::MultiLineString(MultiLineString(
            list(n)?
                .iter()
                .map(|l| line(l, c))
                .collect::<Result<_, _>>()?,
        )),
        Kind::MultiPolygon => Geometry::MultiPolygon(MultiPolygon(
            list(n)?
                .iter()
                .map(|p| polygon(p, c))
                .collect::<Result<_, _>>()?,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The levels of GeoPandas' polygon column: an optional list of required
    /// lists of required structs.
    const POLYGON: [ListLevels; 2] = [
        ListLevels {
            present: 1,
            element: 2,
        },
        ListLevels {
            present: 2,
            element: 3,
        },
    ];

    #[test]
    fn polygons_from_levels() {
        // row 0: two rings of 2 and 1 coordinates; row 1: null; row 2: empty
        // polygon; row 3: one ring of 1 coordinate
        let defs = [3, 3, 3, 0, 1, 3];
        let reps = [0, 2, 1, 0, 0, 0];
        let (rows, n) = assemble(&POLYGON, 3, &defs, &reps).unwrap();
        assert_eq!(n, 4);
        let v = Nest::Value;
        let l = Nest::List;
        assert_eq!(
            rows,
            vec![
                Some(l(vec![l(vec![v(0), v(1)]), l(vec![v(2)])])),
                None,
                Some(l(vec![])),
                Some(l(vec![l(vec![v(3)])])),
            ]
        );
        let x = [0.0, 1.0, 2.0, 3.0];
        let y = [10.0, 11.0, 12.0, 13.0];
        let c = Coords::Separated { x: &x, y: &y };
        let g = geometry(Kind::Polygon, rows[0].as_ref().unwrap(), &c).unwrap();
        let Geometry::Polygon(p) = g else {
            panic!("{g:?}")
        };
        // (geo closes an open ring: the first coordinate again)
        assert_eq!(p.exterior().0.len(), 3);
        assert_eq!(p.interiors()[0].0[0], Coord { x: 2.0, y: 12.0 });
        // an empty polygon is a polygon without coordinates
        let g = geometry(Kind::Polygon, rows[2].as_ref().unwrap(), &c).unwrap();
        assert!(matches!(g, Geometry::Polygon(p) if p.exterior().0.is_empty()));
    }

    #[test]
    fn points_and_interleaved_coordinates() {
        let (rows, n) = assemble(&[], 1, &[1, 0, 1], &[0, 0, 0]).unwrap();
        assert_eq!(n, 2);
        assert_eq!(rows, vec![Some(Nest::Value(0)), None, Some(Nest::Value(1))]);
        // a linestring of interleaved x,y,z: the coordinate is a list of 3,
        // so its levels are the polygon's (two lists deep)
        let (rows, n) = assemble(&POLYGON, 3, &[3, 3, 3, 3, 3, 3], &[0, 2, 2, 1, 2, 2]).unwrap();
        assert_eq!(n, 6);
        let vals = [1.0, 2.0, 9.0, 3.0, 4.0, 9.0];
        let g = geometry(
            Kind::LineString,
            rows[0].as_ref().unwrap(),
            &Coords::Interleaved(&vals),
        )
        .unwrap();
        assert_eq!(
            g,
            Geometry::LineString(LineString::from(vec![(1.0, 2.0), (3.0, 4.0)]))
        );
    }

    #[test]
    fn malformed_levels_are_errors() {
        // a null coordinate (level 2 of 3) inside a ring
        let e = assemble(&POLYGON, 3, &[3, 2], &[0, 2]).unwrap_err();
        assert!(e.contains("entry 1"), "{e}");
        // a repetition level beyond the open lists
        let e = assemble(&POLYGON, 3, &[1, 3], &[0, 2]).unwrap_err();
        assert!(e.contains("not open"), "{e}");
        // a level count mismatch
        assert!(assemble(&POLYGON, 3, &[3], &[]).is_err());
        // the wrong nesting for the kind
        let (rows, _) = assemble(&POLYGON, 3, &[3], &[0]).unwrap();
        let c = Coords::Separated {
            x: &[0.0],
            y: &[0.0],
        };
        assert!(geometry(Kind::Point, rows[0].as_ref().unwrap(), &c).is_err());
        assert!(geometry(Kind::MultiPolygon, rows[0].as_ref().unwrap(), &c).is_err());
    }
}
