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

/// The geometry as ISO WKB (little-endian, two dimensions).
pub fn to_wkb(g: &Geometry) -> Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(wkb::writer::geometry_wkb_size(g));
    wkb::writer::write_geometry(&mut buf, g, &wkb::writer::WriteOptions::default())
        .map_err(|e| Error::invalid(format!("geometry cannot be encoded as WKB: {e}")))?;
    Ok(buf)
}

/// Decodes WKB (ISO or extended; only x and y are kept). Malformed or empty
/// input is an error whose message starts with `what`; never panics.
pub fn from_wkb(bytes: &[u8], what: &str) -> Result<Geometry> {
    let parsed = wkb::reader::read_wkb(bytes)
        .map_err(|e| Error::invalid(format!("{what}: bad WKB: {e}")))?;
    parsed
        .try_to_geometry()
        .ok_or_else(|| Error::invalid(format!("{what}: WKB holds an empty point")))
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
}
