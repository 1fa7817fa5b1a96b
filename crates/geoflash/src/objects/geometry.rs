//! Exact geometries: validation, bounding rectangles and the WKB encoding
//! (through the `wkb` crate) of [`Geometry`] values.
use geo::BoundingRect;
use geo_traits::to_geo::ToGeoGeometry;

use super::Geometry;
use crate::geom::{Rect, MAX_COORD};
use crate::{Error, Result};

/// Checks that every coordinate of `g` is finite and at most [`MAX_COORD`]
/// in magnitude, and that `g` is not empty; returns its bounding rectangle.
pub fn bounding_rect(g: &Geometry) -> Result<Rect> {
    use geo::CoordsIter;
    for c in g.coords_iter() {
        if !(c.x.is_finite() && c.y.is_finite() && c.x.abs() <= MAX_COORD && c.y.abs() <= MAX_COORD)
        {
            return Err(Error::invalid(format!(
                "geometry has a coordinate ({}, {}) that is not finite or exceeds {MAX_COORD:e} in magnitude",
                c.x, c.y
            )));
        }
    }
    let r = g
        .bounding_rect()
        .ok_or_else(|| Error::invalid("geometry is empty (it has no coordinate)"))?;
    Rect::new(r.min().x, r.min().y, r.max().x, r.max().y)
}

/// The geometry as ISO WKB (little-endian, two dimensions), which
/// [`from_wkb`] reads back as `g` (a `Line` as a line string, a `Rect` and
/// a `Triangle` as polygons). A polygon with interior rings and no
/// exterior ring (at any depth) is refused: WKB has no room for it (its
/// first ring is the exterior).
pub fn to_wkb(g: &Geometry) -> Result<Vec<u8>> {
    check_rings(g)?;
    // The `wkb` crate's writer (0.9.3) writes a `Rect` without its ring's
    // point count: WKB that reads back as another geometry (`POLYGON
    // EMPTY`) or not at all. Its polygon is written instead.
    let polygons;
    let g = if holds_rect(g) {
        polygons = rects_as_polygons(g);
        &polygons
    } else {
        g
    };
    let mut buf = Vec::with_capacity(wkb::writer::geometry_wkb_size(g));
    wkb::writer::write_geometry(&mut buf, g, &wkb::writer::WriteOptions::default())
        .map_err(|e| Error::invalid(format!("geometry cannot be encoded as WKB: {e}")))?;
    Ok(buf)
}

/// An error if `g` holds a polygon with interior rings and no exterior
/// ring: the `wkb` crate writes it as a polygon of no rings followed by
/// the interior rings' bytes, which read back as `POLYGON EMPTY`, or as
/// the next members of a multi-polygon or a collection.
fn check_rings(g: &Geometry) -> Result<()> {
    let bad = |p: &geo::Polygon<f64>| p.exterior().0.is_empty() && !p.interiors().is_empty();
    let found = match g {
        Geometry::Polygon(p) => bad(p),
        Geometry::MultiPolygon(m) => m.0.iter().any(bad),
        Geometry::GeometryCollection(c) => return c.0.iter().try_for_each(check_rings),
        _ => false,
    };
    if found {
        return Err(Error::invalid(
            "geometry cannot be encoded as WKB: a polygon has interior rings but no exterior ring \
             (WKB's first ring is the exterior)",
        ));
    }
    Ok(())
}

/// Whether `g` is or holds (in a collection, at any depth) a `Rect`.
fn holds_rect(g: &Geometry) -> bool {
    match g {
        Geometry::Rect(_) => true,
        Geometry::GeometryCollection(c) => c.0.iter().any(holds_rect),
        _ => false,
    }
}

/// `g` with each `Rect` (at any depth) as its polygon.
fn rects_as_polygons(g: &Geometry) -> Geometry {
    match g {
        Geometry::Rect(r) => Geometry::Polygon(r.to_polygon()),
        Geometry::GeometryCollection(c) => {
            Geometry::GeometryCollection(c.0.iter().map(rects_as_polygons).collect())
        }
        other => other.clone(),
    }
}

/// Decodes WKB (ISO or extended; only x and y are kept). Malformed input,
/// or an empty point, is an error whose message starts with `what`; never
/// panics. The empty points of a multi-point or a collection are left out
/// (they add nothing to the geometry: GEOS and GDAL read them so), where
/// the `wkb` crate's conversion refuses the whole geometry; one whose every
/// member is empty is an empty geometry, which [`bounding_rect`] refuses.
/// Bytes past the geometry's end are malformed input too, and so are the
/// members of a multi-point, multi-line string or multi-polygon whose
/// header is not of the parent's byte order and dimensions (see
/// `check_members`).
pub fn from_wkb(bytes: &[u8], what: &str) -> Result<Geometry> {
    let parsed = wkb::reader::read_wkb(bytes)
        .map_err(|e| Error::invalid(format!("{what}: bad WKB: {e}")))?;
    let end = parsed.buf().len();
    if end != bytes.len() {
        return Err(Error::invalid(format!(
            "{what}: bad WKB: {} byte(s) past the geometry's end at byte {end}",
            bytes.len() - end
        )));
    }
    without_empty_points(&parsed, what)?
        .ok_or_else(|| Error::invalid(format!("{what}: WKB holds an empty point")))
}

/// `g` as a [`Geometry`], the empty points of its multi-points and
/// collections (at any depth) left out; `None` for an empty point.
fn without_empty_points(g: &wkb::reader::Wkb<'_>, what: &str) -> Result<Option<Geometry>> {
    use geo_traits::to_geo::ToGeoPoint;
    use geo_traits::{
        GeometryCollectionTrait, GeometryTrait, GeometryType, MultiLineStringTrait,
        MultiPointTrait, MultiPolygonTrait,
    };
    Ok(match g.as_type() {
        GeometryType::MultiPoint(m) => {
            let buf = m.buf();
            let points = (0..m.num_points()).map(|i| {
                let at = usize::try_from(m.point_offset(i as u64)).unwrap_or(usize::MAX);
                buf.get(at..).unwrap_or_default()
            });
            check_members(buf, points, (1, "point", "multi-point", false), what)?;
            Some(Geometry::MultiPoint(
                m.points().filter_map(|p| p.try_to_point()).collect(),
            ))
        }
        GeometryType::MultiLineString(m) => {
            let lines = m.line_strings().map(|l| l.buf());
            check_members(
                m.buf(),
                lines,
                (2, "line string", "multi-line string", true),
                what,
            )?;
            g.try_to_geometry()
        }
        GeometryType::MultiPolygon(m) => {
            let polygons = m.polygons().map(|p| p.buf());
            check_members(
                m.buf(),
                polygons,
                (3, "polygon", "multi-polygon", true),
                what,
            )?;
            g.try_to_geometry()
        }
        GeometryType::GeometryCollection(c) => {
            let mut members = Vec::with_capacity(c.num_geometries());
            for m in c.geometries() {
                members.extend(without_empty_points(m, what)?);
            }
            Some(Geometry::GeometryCollection(members.into()))
        }
        _ => g.try_to_geometry(),
    })
}

/// An error unless every member of a multi-geometry (whose own bytes are
/// `parent`; `members`, the bytes from each member's header on) has the
/// header the `wkb` crate reads it with: the multi-geometry's byte order
/// and dimensions, and the member's type (`kind`: its WKB type code, its
/// name and the parent's, and whether the member may carry an SRID). The
/// crate reads each member in the parent's byte order and dimensions
/// whatever its own header says (a multi-point's at a fixed stride, where
/// a point whose code carries an SRID makes it panic): another header
/// would give other coordinates, silently.
fn check_members<'a>(
    parent: &[u8],
    members: impl Iterator<Item = &'a [u8]>,
    kind: (u32, &str, &str, bool),
    what: &str,
) -> Result<()> {
    let (code, member, name, srid) = kind;
    let little = parent.first() == Some(&1);
    let code_at = |b: &[u8]| -> Option<(u8, u32)> {
        let bytes: [u8; 4] = b.get(1..5)?.try_into().ok()?;
        let code = if little {
            u32::from_le_bytes(bytes)
        } else {
            u32::from_be_bytes(bytes)
        };
        Some((*b.first()?, code))
    };
    let own = code_at(parent).map(|(_, c)| c).unwrap_or(0);
    // The parent's dimension flags (EWKB's Z and M bits, or ISO's
    // thousands) that each of its members repeats, with its own type.
    let (ewkb_dims, iso_dims) = (own & 0xC000_0000, (own & 0x0FFF_FFFF) / 1000);
    for (i, m) in members.enumerate() {
        let good = code_at(m).is_some_and(|(order, c)| {
            parent.first() == Some(&order)
                && (srid || c & 0x2000_0000 == 0)
                && c & 0xC000_0000 == ewkb_dims
                && (c & 0x0FFF_FFFF) == iso_dims * 1000 + code
        });
        if !good {
            return Err(Error::invalid(format!(
                "{what}: bad WKB: {member} {i} of a {name} has a header other than a {member}'s of \
                 the {name}'s byte order and dimensions{}",
                if srid { "" } else { " (or an SRID)" }
            )));
        }
    }
    Ok(())
}

/// The window of a range query as a geometry: a polygon, or a line or a
/// point when the rectangle is degenerate (so the DE-9IM predicates see its
/// true dimension).
pub fn window_geometry(w: &Rect) -> Geometry {
    let (a, b) = (
        geo::coord! { x: w.min_x(), y: w.min_y() },
        geo::coord! { x: w.max_x(), y: w.max_y() },
    );
    match (w.width() > 0.0, w.height() > 0.0) {
        (true, true) => Geometry::Polygon(geo::Rect::new(a, b).to_polygon()),
        (false, false) => Geometry::Point(geo::Point::from(a)),
        _ => Geometry::Line(geo::Line::new(a, b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use geo::{line_string, point, polygon};

    #[test]
    fn wkb_round_trip_of_every_kind() {
        let geoms: Vec<Geometry> = vec![
            point!(x: 1.5, y: -2.0).into(),
            line_string![(x: 0.0, y: 0.0), (x: 3.0, y: 4.0)].into(),
            polygon![(x: 0.0, y: 0.0), (x: 4.0, y: 0.0), (x: 0.0, y: 4.0), (x: 0.0, y: 0.0)].into(),
            geo::MultiPoint::new(vec![point!(x: 1.0, y: 1.0), point!(x: 2.0, y: 3.0)]).into(),
        ];
        for g in geoms {
            let b = to_wkb(&g).unwrap();
            assert_eq!(from_wkb(&b, "t").unwrap(), g);
        }
    }

    #[test]
    fn bad_geometries_and_bytes_are_errors() {
        let nan: Geometry = point!(x: f64::NAN, y: 0.0).into();
        assert!(bounding_rect(&nan).unwrap_err().is_user_error());
        let empty: Geometry = geo::LineString::<f64>::new(vec![]).into();
        assert!(bounding_rect(&empty)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        let poly: Geometry =
            polygon![(x: 0.0, y: 1.0), (x: 4.0, y: 0.0), (x: 0.0, y: 4.0), (x: 0.0, y: 1.0)].into();
        assert_eq!(
            bounding_rect(&poly).unwrap(),
            Rect::new(0.0, 0.0, 4.0, 4.0).unwrap()
        );
        let b = to_wkb(&poly).unwrap();
        for cut in 0..b.len() {
            assert!(from_wkb(&b[..cut], "cut").is_err(), "prefix {cut}");
        }
        assert!(from_wkb(&[0xff; 9], "junk")
            .unwrap_err()
            .to_string()
            .contains("junk"));
    }

    #[test]
    fn degenerate_windows_keep_their_dimension() {
        let p = window_geometry(&Rect::new(1.0, 1.0, 1.0, 1.0).unwrap());
        assert!(matches!(p, Geometry::Point(_)));
        let l = window_geometry(&Rect::new(1.0, 1.0, 1.0, 5.0).unwrap());
        assert!(matches!(l, Geometry::Line(_)));
        let r = window_geometry(&Rect::new(0.0, 1.0, 2.0, 5.0).unwrap());
        assert!(matches!(r, Geometry::Polygon(_)));
    }

    /// WKB of a point, little- or big-endian, with an EWKB SRID or not.
    fn point(x: f64, y: f64, little: bool) -> Vec<u8> {
        let mut b = vec![u8::from(little)];
        let put32 = |b: &mut Vec<u8>, v: u32| {
            b.extend(if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            })
        };
        put32(&mut b, 1);
        for v in [x, y] {
            b.extend(if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            });
        }
        b
    }

    /// WKB of a collection of `kind` holding `members`.
    fn collection(kind: u32, little: bool, members: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![u8::from(little)];
        for v in [kind, members.len() as u32] {
            b.extend(if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            });
        }
        members.iter().for_each(|m| b.extend_from_slice(m));
        b
    }

    fn rect_of(g: &Geometry) -> Rect {
        bounding_rect(g).unwrap()
    }

    /// A collection or multi-point with an empty member was refused whole
    /// (the `wkb` crate's conversion fails on an empty point). Its empty
    /// members now contribute nothing; a collection of empty members only
    /// is an empty geometry, refused as a top-level empty one is.
    #[test]
    fn the_empty_members_of_a_collection_are_left_out() {
        let nan = f64::NAN;
        let one = Rect::new(1.0, 2.0, 1.0, 2.0).unwrap();
        let empty_line = to_wkb(&geo::LineString::<f64>::new(vec![]).into()).unwrap();
        let empty_poly = collection(3, true, &[]);
        for little in [true, false] {
            let empty = point(nan, nan, little);
            let full = point(1.0, 2.0, little);
            // GEOMETRYCOLLECTION (POINT EMPTY, POINT (1 2)), either order
            for members in [[empty.clone(), full.clone()], [full.clone(), empty.clone()]] {
                let g = from_wkb(&collection(7, little, &members), "t").unwrap();
                assert_eq!(rect_of(&g), one, "{g:?}");
                let Geometry::GeometryCollection(c) = &g else {
                    panic!("{g:?}")
                };
                assert_eq!(c.0.len(), 1, "{g:?}");
            }
            // MULTIPOINT (EMPTY, (1 2))
            let g = from_wkb(&collection(4, little, &[empty.clone(), full.clone()]), "t").unwrap();
            assert_eq!(rect_of(&g), one, "{g:?}");
            // nested: GEOMETRYCOLLECTION (GEOMETRYCOLLECTION (POINT EMPTY), POINT (1 2))
            let inner = collection(7, little, std::slice::from_ref(&empty));
            let g = from_wkb(&collection(7, little, &[inner, full.clone()]), "t").unwrap();
            assert_eq!(rect_of(&g), one, "{g:?}");
            // GEOMETRYCOLLECTION (GEOMETRYCOLLECTION (POINT EMPTY, POINT (1 2))), the inner
            // one in the other byte order
            let inner = collection(
                7,
                !little,
                &[point(nan, nan, !little), point(1.0, 2.0, !little)],
            );
            let g = from_wkb(&collection(7, little, &[inner]), "t").unwrap();
            assert_eq!(rect_of(&g), one, "{g:?}");
            // every member empty: an empty geometry, refused as one
            for members in [
                vec![empty.clone()],
                vec![empty.clone(), empty.clone()],
                vec![],
            ] {
                let g = from_wkb(&collection(7, little, &members), "t").unwrap();
                let e = bounding_rect(&g).unwrap_err().to_string();
                assert!(e.contains("empty"), "{e}");
            }
        }
        // zero-part members: an empty line string and an empty polygon
        let full = point(1.0, 2.0, true);
        let g = from_wkb(
            &collection(7, true, &[empty_line, empty_poly, full.clone()]),
            "t",
        )
        .unwrap();
        assert_eq!(rect_of(&g), one, "{g:?}");
        // A point with one NaN value is not empty: refused, as before.
        let half = collection(7, true, &[point(nan, 1.0, true), full.clone()]);
        let g = from_wkb(&half, "t").unwrap();
        assert!(bounding_rect(&g)
            .unwrap_err()
            .to_string()
            .contains("not finite"));
        // A top-level empty point is refused, as before.
        let e = from_wkb(&point(nan, nan, true), "obj 3")
            .unwrap_err()
            .to_string();
        assert!(e.contains("obj 3") && e.contains("empty point"), "{e}");
        // Malformed input is passed on: refused as without the walk.
        let cut = collection(7, true, &[point(nan, nan, true), full.clone()]);
        for end in 0..cut.len() {
            assert!(from_wkb(&cut[..end], "cut").is_err(), "prefix {end}");
        }
        // Damaged bytes never panic.
        let multi = collection(4, true, &[point(nan, nan, true), full.clone()]);
        let nested = collection(7, false, &[cut.clone(), multi.clone(), full]);
        for wkb in [cut, multi, nested] {
            for i in 0..wkb.len() {
                for v in [0u8, 1, 2, 3, 4, 7, 0x20, 0x80, 0xff] {
                    let mut b = wkb.clone();
                    b[i] = v;
                    let _ = from_wkb(&b, "damaged");
                }
            }
        }
    }

    /// A multi-point of three-dimensional points, ISO or EWKB (with an
    /// SRID on the multi-point), reads its x and y; a point whose header
    /// carries an SRID or another byte order is refused, not misread.
    #[test]
    fn multi_points_check_their_points_headers() {
        let le = |v: u32| v.to_le_bytes().to_vec();
        let xyz = |code: u32, order: u8| {
            let mut b = vec![order];
            b.extend(le(code));
            for v in [1.0f64, 2.0, 9.0] {
                b.extend(v.to_le_bytes());
            }
            b
        };
        let multi = |head: Vec<u8>, members: &[Vec<u8>]| {
            let mut b = head;
            b.extend(le(members.len() as u32));
            members.iter().for_each(|m| b.extend_from_slice(m));
            b
        };
        let one = Rect::new(1.0, 2.0, 1.0, 2.0).unwrap();
        let iso = multi([vec![1], le(1004)].concat(), &[xyz(1001, 1)]);
        let ewkb = multi([vec![1], le(0xA000_0004), le(4326)].concat(), &[xyz(0x8000_0001, 1)]);
        for b in [iso, ewkb] {
            assert_eq!(bounding_rect(&from_wkb(&b, "t").unwrap()).unwrap(), one);
        }
        for bad in [xyz(0xA000_0001, 1), xyz(1001, 0), xyz(1002, 1)] {
            let b = multi([vec![1], le(1004)].concat(), &[xyz(1001, 1), bad]);
            let e = from_wkb(&b, "m").unwrap_err().to_string();
            assert!(e.contains("point 1 of a multi-point"), "{e}");
        }
    }
}
