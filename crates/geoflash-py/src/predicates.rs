//! `_geoflash.Geometries`: the exact geometries of an index's entries, and
//! the refinement step of shapely 2's `STRtree.query` and `query_nearest`
//! on them, in Rust: exact tests (where a point lies, whether segments
//! meet) and GEOS's distances (`distance.rs`) decide what they can; a
//! pair whose answer needs the DE-9IM matrix is handed back to Python,
//! where GEOS decides it as in shapely (see [`Geometries::refine`]).
//!
//! `geoflash.Index.query` runs the filter step in the index (one batched
//! traversal over the bounding boxes of all input geometries, each box
//! grown by the distance for `dwithin`), then hands the candidates to
//! [`Geometries::refine`], which keeps the pairs where
//! `predicate(input, tree_geometry)` holds: the input geometry is the
//! first argument, as in shapely (`query(g, predicate="contains")` finds
//! the tree geometries that `g` contains).
use std::collections::HashMap;

use geo::coordinate_position::{CoordPos, CoordinatePosition};
use geo::dimensions::{Dimensions, HasDimensions};
use geo::relate::IntersectionMatrix;
use geo::{
    Area, BoundingRect, Coord, CoordsIter, Intersects, LineString, MultiLineString, MultiPolygon,
    Polygon, Relate,
};
use geoflash_engine::engine::{from_wkb, window_geometry, Error, Geometry, Result};
use geoflash_engine::geom::Rect;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

use crate::core::Core;
use crate::distance;
use crate::nearest::{self, Wanted};
use crate::to_py;
use crate::validity::{status, Validity};

/// The predicates of shapely 2's `STRtree.query` (besides None), the one
/// list of their names: Python reads it as `geoflash._geoflash.PREDICATES`.
pub const PREDICATES: [&str; 10] = [
    "intersects",
    "within",
    "contains",
    "overlaps",
    "crosses",
    "touches",
    "covers",
    "covered_by",
    "contains_properly",
    "dwithin",
];

/// Candidates of a bulk refinement from which it runs on every core.
const PARALLEL_CANDIDATES: usize = 20_000;

/// Geometries from which their decoding runs on every core.
const PARALLEL_DECODES: usize = 20_000;

/// `work` of the positions `0..n` in contiguous shares, one thread per
/// core when `parallel` (else one share), the answers in the order of the
/// shares; the first error is returned.
pub(crate) fn on_every_core<T: Send>(
    n: usize,
    parallel: bool,
    work: impl Fn(std::ops::Range<usize>) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let threads = if parallel {
        geoflash_engine::defaults::cores()
    } else {
        1
    };
    if threads == 1 {
        return Ok(vec![work(0..n)?]);
    }
    let share = n.div_ceil(threads).max(1);
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(share)
            .map(|lo| s.spawn(move || work(lo..(lo + share).min(n))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("a worker thread panicked")))
            })
            .collect()
    })
}

/// A predicate of [`PREDICATES`], `p(input, tree_geometry)`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Pred {
    Intersects,
    Within,
    Contains,
    Overlaps,
    Crosses,
    Touches,
    Covers,
    CoveredBy,
    ContainsProperly,
    Dwithin(f64),
}

impl Pred {
    /// The predicate called `name` (`distance` for `dwithin`, a finite
    /// number of at least 0).
    fn parse(name: &str, distance: Option<f64>) -> Result<Pred> {
        let p = match name {
            "intersects" => Pred::Intersects,
            "within" => Pred::Within,
            "contains" => Pred::Contains,
            "overlaps" => Pred::Overlaps,
            "crosses" => Pred::Crosses,
            "touches" => Pred::Touches,
            "covers" => Pred::Covers,
            "covered_by" => Pred::CoveredBy,
            "contains_properly" => Pred::ContainsProperly,
            "dwithin" => match distance {
                Some(d) if d.is_finite() && d >= 0.0 => Pred::Dwithin(d),
                Some(d) => {
                    return Err(Error::invalid(format!(
                        "predicate \"dwithin\" needs a finite distance of at least 0, not {d}"
                    )))
                }
                None => {
                    return Err(Error::invalid(
                        "predicate \"dwithin\" needs a distance (distance=...)",
                    ))
                }
            },
            _ => {
                return Err(Error::invalid(format!(
                    "unknown predicate {name:?}: use None or one of {}",
                    PREDICATES.join(", ")
                )))
            }
        };
        Ok(p)
    }

    /// Does `p(input, tree)` hold? None when the answer needs their DE-9IM
    /// matrix: GEOS computes it then (shapely, in Python), as for shapely's
    /// `STRtree`. The `geo` crate's matrix differs from GEOS's wherever an
    /// intersection point is computed near another vertex or edge (a line
    /// ending 2e-15 above a segment, which GEOS finds touching it and `geo`
    /// crossing it), so it is not used. What is decided here rests on exact tests only (where a
    /// point lies, whether segments meet: `robust` orientation tests),
    /// which GEOS's matrix agrees with for valid geometries (the Python
    /// side sends the pairs of an invalid one to GEOS too), except where a
    /// vertex lies within rounding of the other's boundary: such a vertex
    /// decides nothing ([`CLEAR`]).
    fn holds(self, input: &Geometry, tree: &Geometry) -> Option<bool> {
        match self {
            Pred::Intersects => return Some(input.intersects(tree)),
            Pred::Dwithin(d) => return distance::within(input, tree, d),
            _ => {}
        }
        if let Some(answer) = self.by_dimension(dimension(input), dimension(tree)) {
            return Some(answer);
        }
        // Each of the others implies that the two share a point.
        if !input.intersects(tree) {
            return Some(false);
        }
        if let Some(answer) = self.point_holds(input, tree) {
            return Some(answer);
        }
        if input == tree {
            return Some(self.matrix_holds(&equal_matrix(input)));
        }
        // `touches` of most overlapping pairs: a vertex strictly inside the
        // other (see `by_vertices`), before the costlier tests below
        let touches = matches!(self, Pred::Touches);
        if touches {
            if let Some(answer) = self.by_vertices(input, tree) {
                return Some(answer);
            }
        }
        // One simple polygon inside the other without their boundaries
        // meeting (most pairs of a join of small polygons with large
        // ones).
        if let Some(n) = nesting(input, tree) {
            return Some(self.nested_holds(n));
        }
        // A vertex of the one that must lie in the other strictly outside
        // it (most pairs whose boundaries cross).
        if self.vertex_rules_out(input, tree) {
            return Some(false);
        }
        if touches {
            None
        } else {
            self.by_vertices(input, tree)
        }
    }

    /// The predicate of two geometries of the dimensions `a` (the input's)
    /// and `b` (the tree geometry's) where those decide it, whatever the
    /// geometries (the DE-9IM definitions): two areas or two points never
    /// cross, two points never touch, geometries of different dimensions
    /// never overlap, and a geometry holds none of a higher dimension (the
    /// other has interior points outside it).
    fn by_dimension(self, a: u8, b: u8) -> Option<bool> {
        let never = match self {
            Pred::Crosses => a == b && a != 1,
            Pred::Touches => a == 0 && b == 0,
            Pred::Overlaps => a != b,
            Pred::Contains | Pred::Covers | Pred::ContainsProperly => a < b,
            Pred::Within | Pred::CoveredBy => a > b,
            _ => false,
        };
        never.then_some(false)
    }

    /// The predicate decided from where the vertices of each lie in the
    /// other (exact point locations of the vertices that lie clearly on
    /// one side, [`clear_position`]), for two areas or a line and an area,
    /// or None. A vertex strictly inside an area has a disc around it in
    /// that area's interior, and that disc holds interior points of the
    /// geometry the vertex belongs to (a vertex of a valid polygon borders
    /// its interior; a line's interior runs to each of its vertices): the
    /// interiors meet. Likewise a vertex strictly outside shows interior
    /// points of its geometry in the other's exterior. So two areas
    /// overlap when the interiors meet (a vertex inside, or boundaries
    /// crossing: [`boundaries_cross`]) and each has a vertex outside the
    /// other; a line crosses an area when it has vertices strictly inside
    /// and strictly outside it; and meeting interiors rule out `touches`
    /// (most overlapping pairs, which reached the matrix before).
    /// Pairs of more than [`VERTICES_MAX_PAIRS`] vertex-to-vertex pairs are
    /// not tested (GEOS's indexed matrix costs less there).
    fn by_vertices(self, input: &Geometry, tree: &Geometry) -> Option<bool> {
        if !matches!(self, Pred::Touches | Pred::Overlaps | Pred::Crosses) {
            return None;
        }
        let (da, db) = (dimension(input), dimension(tree));
        let areas = da == 2 && db == 2 && is_area(input) && is_area(tree);
        let line_area = (da, db) == (1, 2) || (da, db) == (2, 1);
        if !(areas || line_area) || input.coords_count() * tree.coords_count() > VERTICES_MAX_PAIRS
        {
            return None;
        }
        let touches = matches!(self, Pred::Touches);
        let tol = clearance(input, tree);
        if areas {
            let a = Vertices::of(input, tree, touches, tol);
            if touches && a.inside {
                return Some(false);
            }
            let b = Vertices::of(tree, input, touches, tol);
            // two boxes crossing like a plus sign: no vertex inside
            let interiors_meet = a.inside
                || b.inside
                || ((touches || (a.outside && b.outside)) && boundaries_cross(input, tree, tol));
            return match self {
                Pred::Touches if interiors_meet => Some(false),
                Pred::Overlaps if interiors_meet && a.outside && b.outside => Some(true),
                _ => None,
            };
        }
        // (only the line's vertices tell: a vertex of the area on the
        // line's interior may be a point where they merely touch)
        let line = if da == 1 {
            Vertices::of(input, tree, touches, tol)
        } else {
            Vertices::of(tree, input, touches, tol)
        };
        match self {
            Pred::Touches if line.inside => Some(false),
            Pred::Crosses if line.inside && line.outside => Some(true),
            _ => None,
        }
    }

    /// Does the predicate hold for two geometries nested as `n`?
    fn nested_holds(self, n: Nesting) -> bool {
        matches!(
            (self, n),
            (Pred::Intersects | Pred::Dwithin(_), _)
                | (
                    Pred::Contains | Pred::Covers | Pred::ContainsProperly,
                    Nesting::TreeInInput
                )
                | (Pred::Within | Pred::CoveredBy, Nesting::InputInTree)
        )
    }

    /// The predicate for a pair of which one is a point, from where the
    /// point lies in the other (interior, boundary, exterior): within and
    /// contains ask for the interior, covered_by and covers for not the
    /// exterior, touches for the boundary, and a point overlaps and
    /// crosses nothing (both need a point of its interior outside the
    /// other). None when neither is a point, or when the point must hold
    /// the other (left to the matrix).
    fn point_holds(self, input: &Geometry, tree: &Geometry) -> Option<bool> {
        let (point, other, point_is_input) = match (input, tree) {
            (Geometry::Point(p), g) => (p, g, true),
            (g, Geometry::Point(p)) => (p, g, false),
            _ => return None,
        };
        let pos = other.coordinate_position(&point.0);
        Some(match (self, point_is_input) {
            (Pred::Touches, _) => pos == CoordPos::OnBoundary,
            (Pred::Overlaps | Pred::Crosses, _) => false,
            (Pred::Within, true) | (Pred::Contains | Pred::ContainsProperly, false) => {
                pos == CoordPos::Inside
            }
            (Pred::CoveredBy, true) | (Pred::Covers, false) => pos != CoordPos::Outside,
            _ => return None,
        })
    }

    /// Is the predicate false because a vertex of the geometry it needs
    /// inside the other lies clearly outside it ([`clear_position`]:
    /// contains, covers and contains_properly need every point of the tree
    /// geometry in the input, within and covered_by every point of the
    /// input in the tree geometry)? False says nothing; geometries of more
    /// than [`NESTING_MAX_COORDS`] coordinates are not tested.
    fn vertex_rules_out(self, input: &Geometry, tree: &Geometry) -> bool {
        let (outer, inner) = match self {
            Pred::Contains | Pred::Covers | Pred::ContainsProperly => (input, tree),
            Pred::Within | Pred::CoveredBy => (tree, input),
            _ => return false,
        };
        if outer.coords_count() > NESTING_MAX_COORDS || inner.coords_count() > NESTING_MAX_COORDS {
            return false;
        }
        let tol = clearance(input, tree);
        inner
            .coords_iter()
            .any(|c| clear_position(outer, c, tol) == Some(CoordPos::Outside))
    }

    /// Does the DE-9IM matrix `m` of (input, tree) satisfy the predicate?
    fn matrix_holds(self, m: &IntersectionMatrix) -> bool {
        match self {
            Pred::Intersects => m.is_intersects(),
            Pred::Within => m.is_within(),
            Pred::Contains => m.is_contains(),
            Pred::Overlaps => m.is_overlaps(),
            Pred::Crosses => m.is_crosses(),
            Pred::Touches => m.is_touches(),
            Pred::Covers => m.is_covers(),
            Pred::CoveredBy => m.is_coveredby(),
            Pred::ContainsProperly => m.is_contains_properly(),
            Pred::Dwithin(_) => unreachable!("dwithin is decided by distance"),
        }
    }
}

/// The polygons of an area (a polygon or multipolygon, as WKB gives
/// them), or None for another kind of geometry.
fn areal_parts(g: &Geometry) -> Option<&[Polygon]> {
    match g {
        Geometry::Polygon(p) => Some(std::slice::from_ref(p)),
        Geometry::MultiPolygon(mp) => Some(&mp.0),
        _ => None,
    }
}

/// Is `g` a polygon or multipolygon whose every part has positive area?
/// Its interior is then two-dimensional, and so is the intersection of
/// that interior with the other geometry's interior or exterior, whatever
/// that geometry is: the dimension the DE-9IM predicates read for it.
fn is_area(g: &Geometry) -> bool {
    areal_parts(g)
        .is_some_and(|parts| !parts.is_empty() && parts.iter().all(|p| p.unsigned_area() > 0.0))
}

/// How far a vertex must lie from every segment and point of the other
/// geometry for its place (inside or outside) to decide a predicate, as a
/// share of the largest coordinate of the two ([`clearance`]). GEOS's
/// DE-9IM matrix computes where segments meet, and puts a vertex that
/// lies within the rounding of such a point on the other's boundary,
/// whatever exact point location says: a box corner at (4.2, 1.8), on a
/// triangle's edge in decimal and a hair inside it in binary, touches the
/// triangle for GEOS. That rounding is a few units in the last place of
/// the coordinates whatever the angle of the segments (the error of the
/// computed point grows with the cotangent of the angle, and so does the
/// distance along the segment from the vertex to the point); 1e-12 leaves
/// a margin of thousands of units.
const CLEAR: f64 = 1e-12;

/// The tolerance of [`clear_position`] for a pair of geometries.
fn clearance(a: &Geometry, b: &Geometry) -> f64 {
    let largest = |g: &Geometry| {
        g.bounding_rect().map_or(0.0, |r| {
            [r.min().x, r.min().y, r.max().x, r.max().y]
                .iter()
                .fold(0f64, |m, v| m.max(v.abs()))
        })
    };
    CLEAR * largest(a).max(largest(b))
}

/// Do the boundaries of two areas cross clearly: a segment of each
/// crossing the other at a point inside both (exact orientation tests),
/// each end of each farther than `tol` from the other's line, and no other
/// segment of either within `tol` of the point? Near such a point both
/// interiors lie on one side of each segment: they meet. GEOS finds it
/// too: it computes the point, which lies farther from every end and every
/// other segment than its rounding (the distance along a segment from an
/// end to the point is the end's distance from the other line over the
/// sine of the angle, and so is the error of the point: see [`CLEAR`]),
/// so GEOS meets the segments at a point inside both, where two area
/// boundaries crossing have interiors meeting. Without the margins it can
/// put the point on an end, or two such points of a sliver (a triangle
/// whose corners lie on one line in decimal) on one, and see the
/// boundaries touch there. `tol`: [`clearance`] of the pair.
fn boundaries_cross(a: &Geometry, b: &Geometry, tol: f64) -> bool {
    distance::lines(a, &mut |la| {
        distance::lines(b, &mut |lb| {
            la.windows(2).any(|s| {
                lb.windows(2).any(|t| {
                    crossing(s[0], s[1], t[0], t[1], tol)
                        .is_some_and(|p| alone(p, (s[0], s[1]), (t[0], t[1]), [a, b], tol))
                })
            })
        })
    })
}

/// Where segment `p0 p1` crosses segment `q0 q1` at a point inside both,
/// each end farther than `tol` from the other's line (the point computed
/// in floating point, within `tol` of the true one); None otherwise.
fn crossing(p0: Coord, p1: Coord, q0: Coord, q1: Coord, tol: f64) -> Option<Coord> {
    use geo::kernels::{Kernel, Orientation, RobustKernel};
    if p0.x.max(p1.x) < q0.x.min(q1.x)
        || q0.x.max(q1.x) < p0.x.min(p1.x)
        || p0.y.max(p1.y) < q0.y.min(q1.y)
        || q0.y.max(q1.y) < p0.y.min(p1.y)
    {
        return None;
    }
    let opposite = |a: Orientation, b: Orientation| {
        a != Orientation::Collinear && b != Orientation::Collinear && a != b
    };
    let o = RobustKernel::orient2d;
    if !opposite(o(p0, p1, q0), o(p0, p1, q1)) || !opposite(o(q0, q1, p0), o(q0, q1, p1)) {
        return None;
    }
    // the distance of `v` from the line through `a` and `b`, above `tol`
    let far = |v: Coord, a: Coord, b: Coord| {
        let (dx, dy) = (b.x - a.x, b.y - a.y);
        ((v.x - a.x) * dy - (v.y - a.y) * dx).abs() > tol * dx.hypot(dy)
    };
    if !(far(q0, p0, p1) && far(q1, p0, p1) && far(p0, q0, q1) && far(p1, q0, q1)) {
        return None;
    }
    let (dp, dq) = (p1 - p0, q1 - q0);
    let cross = dp.x * dq.y - dp.y * dq.x;
    let sine = cross.abs() / (dp.x.hypot(dp.y) * dq.x.hypot(dq.y));
    // the point's rounding: a few units in the last place of the
    // coordinates over the sine (the largest coordinate is tol / CLEAR)
    if 64.0 * f64::EPSILON * (tol / CLEAR) / sine > tol {
        return None;
    }
    let r = ((q0.x - p0.x) * dq.y - (q0.y - p0.y) * dq.x) / cross;
    Some(p0 + dp * r)
}

/// Is every segment of `geoms` but `s` and `t` farther than twice `tol`
/// from `p` (the crossing of `s` and `t`, within `tol`)?
fn alone(p: Coord, s: (Coord, Coord), t: (Coord, Coord), geoms: [&Geometry; 2], tol: f64) -> bool {
    !geoms.iter().any(|g| {
        distance::lines(g, &mut |l| {
            l.windows(2).any(|u| {
                (u[0], u[1]) != s
                    && (u[0], u[1]) != t
                    && distance::point_segment(p, u[0], u[1]) <= 2.0 * tol
            })
        })
    })
}

/// Where `c` lies in `g` if clearly: farther than `tol` from every segment
/// and point of `g`; None otherwise (see [`CLEAR`]).
fn clear_position(g: &Geometry, c: Coord, tol: f64) -> Option<CoordPos> {
    (!distance::near(c, g, tol)).then(|| g.coordinate_position(&c))
}

/// Where the vertices of a geometry lie in another (see
/// [`Pred::by_vertices`]): some clearly inside, some clearly outside.
struct Vertices {
    inside: bool,
    outside: bool,
}

impl Vertices {
    /// Where the vertices of `g` lie in `other` (`tol`: see
    /// [`clear_position`]; with `inside_only`, the search stops at the
    /// first inside).
    fn of(g: &Geometry, other: &Geometry, inside_only: bool, tol: f64) -> Vertices {
        let mut v = Vertices {
            inside: false,
            outside: false,
        };
        for c in g.coords_iter() {
            match clear_position(other, c, tol) {
                Some(CoordPos::Inside) => v.inside = true,
                Some(CoordPos::Outside) => v.outside = true,
                _ => {}
            }
            if v.inside && (v.outside || inside_only) {
                break;
            }
        }
        v
    }
}

/// The dimension of a geometry's kind, as GEOS reads it: 0 for points, 1
/// for lines, 2 for polygons (a valid geometry has the dimension of its
/// kind; a collection, refined in Python, counts as 2 and is not read).
fn dimension(g: &Geometry) -> u8 {
    match g {
        Geometry::Point(_) | Geometry::MultiPoint(_) => 0,
        Geometry::Line(_) | Geometry::LineString(_) | Geometry::MultiLineString(_) => 1,
        _ => 2,
    }
}

/// Which of two intersecting geometries lies in the other's interior
/// (see [`nesting`]).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Nesting {
    /// The tree geometry lies in the input's interior.
    TreeInInput,
    /// The input lies in the tree geometry's interior.
    InputInTree,
}

/// Pairs of geometries whose vertex counts multiply to more than this are
/// left to GEOS by [`Pred::by_vertices`] (each vertex of one is located in
/// the other: a cost that grows with the product).
const VERTICES_MAX_PAIRS: usize = 128 * 128;

/// Rings of at most this many coordinates each are compared segment by
/// segment in [`nesting`]; larger ones go to the DE-9IM matrix, whose
/// sweep costs less than all pairs of their segments.
const NESTING_MAX_COORDS: usize = 64;

/// For two intersecting polygons of positive area without holes whose
/// boundaries do not meet, the one that lies in the other's interior; None
/// otherwise (other geometries, holes, large rings, meeting boundaries).
/// Valid polygons (the semantics shapely's predicates have): a boundary
/// that does not meet the other's lies wholly inside it or wholly outside;
/// a vertex strictly inside tells which, and a polygon without holes holds
/// all that its boundary encloses.
fn nesting(input: &Geometry, tree: &Geometry) -> Option<Nesting> {
    let (Geometry::Polygon(a), Geometry::Polygon(b)) = (input, tree) else {
        return None;
    };
    let simple = |p: &Polygon| {
        p.interiors().is_empty()
            && p.exterior().0.len() <= NESTING_MAX_COORDS
            && p.unsigned_area() > 0.0
    };
    if !(simple(a) && simple(b)) || a.exterior().intersects(b.exterior()) {
        return None;
    }
    let inside = |outer: &Polygon, inner: &Polygon| {
        inner
            .exterior()
            .0
            .first()
            .is_some_and(|c| outer.coordinate_position(c) == CoordPos::Inside)
    };
    if inside(a, b) {
        Some(Nesting::TreeInInput)
    } else if inside(b, a) {
        Some(Nesting::InputInTree)
    } else {
        None
    }
}

/// The DE-9IM matrix of a geometry with itself: interiors meet in its
/// dimension, boundaries in theirs, nothing else but the exteriors. GEOS
/// gives it for identical geometries even when they are invalid (OSM
/// buildings with self-touching rings), where a computed matrix differs.
fn equal_matrix(g: &Geometry) -> IntersectionMatrix {
    let code = |d: Dimensions| match d {
        Dimensions::Empty => 'F',
        Dimensions::ZeroDimensional => '0',
        Dimensions::OneDimensional => '1',
        Dimensions::TwoDimensional => '2',
    };
    let (i, b) = (code(g.dimensions()), code(g.boundary_dimensions()));
    format!("{i}FFF{b}FFF2")
        .parse()
        .unwrap_or_else(|_| g.relate(g))
}

/// Are `a` and `b` equal as point sets (shapely's `equals`)? Only when
/// their bounding rectangles are.
fn equal(a: &Geometry, b: &Geometry) -> bool {
    a == b || (a.bounding_rect() == b.bounding_rect() && a.relate(b).is_equal_topo())
}

/// Native-endian 8-byte values of `bytes` (`what` names the buffer in
/// the error when its length is not a multiple of 8).
fn words(bytes: &[u8], what: &str) -> Result<Vec<[u8; 8]>> {
    let rows = bytes.chunks_exact(8);
    if !rows.remainder().is_empty() {
        return Err(Error::invalid(format!(
            "{what} buffer of {} bytes is not a whole number of 8-byte values",
            bytes.len()
        )));
    }
    Ok(rows
        .map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            a
        })
        .collect())
}

/// Native-endian int64 values.
fn int64s(bytes: &[u8], what: &str) -> Result<Vec<i64>> {
    Ok(words(bytes, what)?
        .into_iter()
        .map(i64::from_ne_bytes)
        .collect())
}

/// Native-endian float64 values.
pub(crate) fn float64s(bytes: &[u8], what: &str) -> Result<Vec<f64>> {
    Ok(words(bytes, what)?
        .into_iter()
        .map(f64::from_ne_bytes)
        .collect())
}

/// The positions of `keys` (native int64, each in `0..bound`) in the
/// order of their keys, equal keys in their order (a stable sort): one
/// counting pass, where a comparison sort of a join's million pairs took a
/// twentieth of the join. Native int64.
#[pyfunction]
pub(crate) fn stable_order_by_key<'py>(
    py: Python<'py>,
    keys: &[u8],
    bound: usize,
) -> PyResult<Bound<'py, PyByteArray>> {
    let order = py
        .allow_threads(|| -> Result<Vec<i64>> {
            let keys = int64s(keys, "key")?;
            let mut start = vec![0usize; bound + 1];
            for &k in &keys {
                let slot = usize::try_from(k)
                    .ok()
                    .filter(|&k| k < bound)
                    .ok_or_else(|| Error::invalid(format!("key {k} is not in 0..{bound}")))?;
                start[slot + 1] += 1;
            }
            for i in 0..bound {
                start[i + 1] += start[i];
            }
            let mut order = vec![0i64; keys.len()];
            for (position, &k) in keys.iter().enumerate() {
                let at = &mut start[k as usize];
                order[*at] = position as i64;
                *at += 1;
            }
            Ok(order)
        })
        .map_err(to_py)?;
    Ok(out_bytes(py, &order, i64::to_ne_bytes))
}

/// A `bytearray` of native-endian values (NumPy's `frombuffer` reads it
/// without a copy, writable).
pub(crate) fn out_bytes<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    values: &[T],
    f: impl Fn(T) -> [u8; N],
) -> Bound<'py, PyByteArray> {
    let mut buf = Vec::with_capacity(values.len() * N);
    for v in values {
        buf.extend_from_slice(&f(*v));
    }
    PyByteArray::new_bound(py, &buf)
}

/// Polygons of one ring given as their coordinates rather than as WKB
/// (what shapely's `get_coordinates` and `get_num_coordinates` return,
/// without writing and reading WKB): geometry `i` is the ring of
/// `counts[i]` coordinates that follows those of the geometries before
/// it, or is given otherwise when `counts[i]` is 0.
#[derive(Default)]
struct Rings {
    /// x, y of every ring's coordinates, ring after ring.
    coords: Vec<f64>,
    /// Per geometry, its first coordinate (one more: the end); empty when
    /// no geometry is given this way.
    starts: Vec<usize>,
}

impl Rings {
    /// The rings of `n` geometries from `counts` (native int64, one per
    /// geometry) and `coords` (native float64 x, y pairs); none when
    /// neither is given.
    fn new(counts: Option<&[u8]>, coords: Option<&[u8]>, n: usize) -> Result<Rings> {
        let (counts, coords) = match (counts, coords) {
            (None, None) => return Ok(Rings::default()),
            (Some(a), Some(b)) => (int64s(a, "coordinate count")?, float64s(b, "coordinate")?),
            _ => {
                return Err(Error::invalid(
                    "coordinate counts and coordinates go together: give both or neither",
                ))
            }
        };
        if counts.len() != n {
            return Err(Error::invalid(format!(
                "{} coordinate counts for {n} geometries (expected one each)",
                counts.len()
            )));
        }
        let mut starts = Vec::with_capacity(n + 1);
        let mut at = 0usize;
        starts.push(at);
        for &c in &counts {
            let c = usize::try_from(c)
                .map_err(|_| Error::invalid(format!("negative coordinate count {c}")))?;
            at = at.saturating_add(c);
            starts.push(at);
        }
        if at.checked_mul(2) != Some(coords.len()) {
            return Err(Error::invalid(format!(
                "the coordinate counts add up to {at} coordinates but {} values were given \
                 (expected x, y of each)",
                coords.len()
            )));
        }
        Ok(Rings { coords, starts })
    }

    /// Geometry `i` as a polygon of one ring, if it is given this way.
    fn polygon(&self, i: usize) -> Option<Geometry> {
        let (a, b) = (*self.starts.get(i)?, *self.starts.get(i + 1)?);
        if a == b {
            return None;
        }
        let ring: Vec<Coord> = self.coords[2 * a..2 * b]
            .chunks_exact(2)
            .map(|c| Coord { x: c[0], y: c[1] })
            .collect();
        Some(Geometry::Polygon(Polygon::new(
            LineString::from(ring),
            vec![],
        )))
    }
}

/// Geometry `i` of a batch as Python hands it over: its WKB when given,
/// else its ring when `rings` has one, else its box (`boxes`: native
/// float64 rows, a point or a degenerate box as what it is). `what` names
/// the geometry in errors.
fn decode(
    wkb: Option<&[u8]>,
    rings: &Rings,
    boxes: &[f64],
    i: usize,
    what: impl Fn() -> String,
) -> Result<Geometry> {
    if let Some(w) = wkb {
        return from_wkb(w, &what()).map(without_empty_parts);
    }
    if let Some(p) = rings.polygon(i) {
        return Ok(p);
    }
    let b = boxes
        .get(4 * i..4 * i + 4)
        .ok_or_else(|| Error::invalid(format!("{} has neither WKB nor a box", what())))?;
    let r = Rect::new(b[0], b[1], b[2], b[3]).map_err(|e| match e {
        Error::InvalidInput(m) => Error::invalid(format!("{}: {m}", what())),
        e => e,
    })?;
    Ok(window_geometry(&r))
}

/// `g` without the empty line strings and polygons of its multi-geometries
/// (`from_wkb` leaves out empty points already): they add no point, GEOS
/// answers the same without them (measured on every predicate, `dwithin`
/// and the nearest search), and the `geo` crate's algorithms do not expect
/// them (its point location warns of a line string without points; its
/// distance put an empty polygon at distance 0 from anything).
fn without_empty_parts(g: Geometry) -> Geometry {
    match g {
        Geometry::MultiLineString(m) if m.0.iter().any(|l| l.0.is_empty()) => {
            Geometry::MultiLineString(MultiLineString(
                m.0.into_iter().filter(|l| !l.0.is_empty()).collect(),
            ))
        }
        Geometry::MultiPolygon(m) if m.0.iter().any(|p| p.exterior().0.is_empty()) => {
            Geometry::MultiPolygon(MultiPolygon(
                m.0.into_iter()
                    .filter(|p| !p.exterior().0.is_empty())
                    .collect(),
            ))
        }
        g => g,
    }
}

/// The input geometries of a bulk query: the WKB of each, borrowed from
/// its `bytes` object (extracting a `Vec<u8>` would read a Python int per
/// byte), or None for one that is its box (a point: no WKB to write and
/// read) or one given as a ring ([`Rings`]), and the inputs' boxes
/// (native float64 rows).
struct Inputs<'a> {
    wkbs: Vec<Option<&'a [u8]>>,
    boxes: Vec<f64>,
    rings: Rings,
}

impl<'a> Inputs<'a> {
    /// The inputs of `wkbs` and `boxes` (needed where a WKB is None).
    fn new(wkbs: &'a [Option<Bound<'_, PyBytes>>], boxes: Option<&[u8]>) -> Result<Inputs<'a>> {
        let boxes = float64s(boxes.unwrap_or_default(), "input box")?;
        Ok(Inputs {
            wkbs: wkbs
                .iter()
                .map(|w| w.as_ref().map(|b| b.as_bytes()))
                .collect(),
            boxes,
            rings: Rings::default(),
        })
    }

    /// The inputs whose WKB is None given as rings by `counts` and
    /// `coords` where they are (see [`Rings`]).
    fn with_rings(mut self, counts: Option<&[u8]>, coords: Option<&[u8]>) -> Result<Self> {
        self.rings = Rings::new(counts, coords, self.wkbs.len())?;
        Ok(self)
    }

    /// How many inputs.
    fn len(&self) -> usize {
        self.wkbs.len()
    }

    /// Input `i`, decoded ([`decode`]).
    fn geometry(&self, i: usize) -> Result<Geometry> {
        decode(self.wkbs[i], &self.rings, &self.boxes, i, || {
            format!("input geometry {i}")
        })
    }

    /// Every input, decoded.
    fn geometries(&self) -> Result<Vec<Geometry>> {
        (0..self.len()).map(|i| self.geometry(i)).collect()
    }
}

/// The candidate ranges of each input: `offsets` (len(inputs) + 1
/// non-decreasing values ending at `n_ids`) as index ranges.
fn ranges(offsets: &[i64], n_inputs: usize, n_ids: usize) -> Result<Vec<std::ops::Range<usize>>> {
    if offsets.len() != n_inputs + 1 {
        return Err(Error::invalid(format!(
            "{} offsets for {n_inputs} input geometries (expected {})",
            offsets.len(),
            n_inputs + 1
        )));
    }
    let mut out = Vec::with_capacity(n_inputs);
    for w in offsets.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a < 0 || b < a || b as usize > n_ids {
            return Err(Error::invalid(format!(
                "bad candidate offsets {a}..{b} for {n_ids} candidates"
            )));
        }
        out.push(a as usize..b as usize);
    }
    Ok(out)
}

/// Where each id's geometry is: a table indexed by id when the ids are
/// small non-negative numbers (row positions, as `from_geoseries` gives:
/// no hashing per candidate), else a hash map.
enum Slots {
    /// `table[id]` is the position, `usize::MAX` for an id without one.
    Table(Vec<usize>),
    /// Any ids.
    Map(HashMap<i64, usize>),
}

impl Slots {
    /// The slots of `ids` (position `i` holds `ids[i]`; the first of
    /// duplicates wins).
    fn new(ids: &[i64]) -> Slots {
        let small = ids
            .iter()
            .all(|&id| id >= 0 && (id as u64) < 2 * ids.len() as u64 + 1024);
        if small {
            let len = ids.iter().map(|&id| id as usize + 1).max().unwrap_or(0);
            let mut table = vec![usize::MAX; len];
            for (i, &id) in ids.iter().enumerate() {
                if table[id as usize] == usize::MAX {
                    table[id as usize] = i;
                }
            }
            return Slots::Table(table);
        }
        let mut map = HashMap::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            map.entry(id).or_insert(i);
        }
        Slots::Map(map)
    }

    /// The position of `id`'s geometry.
    fn get(&self, id: i64) -> Option<usize> {
        match self {
            Slots::Table(t) => usize::try_from(id)
                .ok()
                .and_then(|i| t.get(i).copied())
                .filter(|&i| i != usize::MAX),
            Slots::Map(m) => m.get(&id).copied(),
        }
    }
}

/// The answer of a refinement: the pairs (input position, entry id) where
/// the predicate holds, and those left to GEOS.
#[derive(Default)]
struct Refined {
    found: Vec<(i64, i64)>,
    to_geos: Vec<(i64, i64)>,
}

/// Pairs as one native int64 buffer of `2 × M` values: the M input
/// positions, then the M ids.
fn pair_bytes<'py>(py: Python<'py>, pairs: &[(i64, i64)]) -> Bound<'py, PyByteArray> {
    let values: Vec<i64> = pairs
        .iter()
        .map(|p| p.0)
        .chain(pairs.iter().map(|p| p.1))
        .collect();
    out_bytes(py, &values, i64::to_ne_bytes)
}

/// The exact geometries of an index's entries by user id (internal: used
/// by `geoflash.Index.query` and `query_nearest`). An entry stored without
/// a geometry counts as its box (a line or a point when the box is
/// degenerate).
#[pyclass(module = "geoflash._geoflash", frozen)]
pub struct Geometries {
    /// Position in `geoms` of each id (the first geometry of a duplicate id).
    slot: Slots,
    geoms: Vec<Geometry>,
    /// The id of each of `geoms`.
    ids: Vec<i64>,
    /// GEOS's validity of each of `geoms`, where it is decided in Rust, or
    /// that it is nearly degenerate (`validity::status`).
    validity: Vec<Validity>,
}

impl Geometries {
    /// The ids of the geometries of validity `v`.
    fn ids_of(&self, v: Validity) -> Vec<i64> {
        self.ids
            .iter()
            .zip(&self.validity)
            .filter(|(_, &w)| w == v)
            .map(|(&id, _)| id)
            .collect()
    }

    /// The geometry of entry `id`.
    fn get(&self, id: i64) -> Result<&Geometry> {
        self.slot
            .get(id)
            .map(|i| &self.geoms[i])
            .ok_or_else(|| Error::invalid(format!("no geometry for entry {id}")))
    }

    /// The refinement of the inputs `share` (positions in `inputs`, WKB):
    /// the pairs (input position, entry id) of their candidates
    /// (`ranges` into `ids`) where `p(input, entry)` holds, and those it
    /// leaves to GEOS ([`Pred::holds`]), each by input then id. Inputs
    /// without candidates are not decoded.
    fn refine_share(
        &self,
        p: Pred,
        inputs: &Inputs<'_>,
        ranges: &[std::ops::Range<usize>],
        ids: &[i64],
        share: std::ops::Range<usize>,
    ) -> Result<Refined> {
        let mut out = Refined::default();
        for i in share {
            let r = ranges[i].clone();
            if r.is_empty() {
                continue;
            }
            let g = inputs.geometry(i)?;
            let mut cands: Vec<i64> = ids[r].to_vec();
            cands.sort_unstable();
            // an input GEOS finds invalid, or nearly degenerate: every pair
            // to GEOS (those of such an entry do not come here, see
            // `geos_ids`)
            let invalid = matches!(status(&g), Validity::Invalid | Validity::Degenerate);
            for id in cands {
                let answer = if invalid {
                    None
                } else {
                    p.holds(&g, self.get(id)?)
                };
                match answer {
                    Some(true) => out.found.push((i as i64, id)),
                    Some(false) => {}
                    None => out.to_geos.push((i as i64, id)),
                }
            }
        }
        Ok(out)
    }

    /// The exact distances from `input` to the entries of `ids`
    /// (`f64::NAN` for one `exclusive` leaves out: one equal to the input).
    pub(crate) fn distances(
        &self,
        input: &Geometry,
        ids: &[i64],
        exclusive: bool,
    ) -> Result<Vec<f64>> {
        ids.iter()
            .map(|&id| {
                let t = self.get(id)?;
                let d = distance::distance(input, t);
                Ok(if exclusive && d == 0.0 && equal(input, t) {
                    f64::NAN
                } else {
                    d
                })
            })
            .collect()
    }
}

#[pymethods]
impl Geometries {
    /// The geometries of entries `ids` (native int64): `wkbs[i]` (WKB) or,
    /// where None, the polygon of `counts[i]` coordinates of `coords` when
    /// given and not 0 (see `Rings`), else the box `rects[i]` (native
    /// float64 rows `minx, miny, maxx, maxy`).
    #[new]
    #[pyo3(signature = (ids, wkbs, rects, counts=None, coords=None))]
    fn new(
        py: Python<'_>,
        ids: &[u8],
        wkbs: Vec<Option<Bound<'_, PyBytes>>>,
        rects: &[u8],
        counts: Option<&[u8]>,
        coords: Option<&[u8]>,
    ) -> PyResult<Geometries> {
        let wkbs: Vec<Option<&[u8]>> = wkbs
            .iter()
            .map(|w| w.as_ref().map(|b| b.as_bytes()))
            .collect();
        py.allow_threads(|| -> Result<Geometries> {
            let ids = int64s(ids, "id")?;
            let rects = float64s(rects, "box")?;
            if wkbs.len() != ids.len() || rects.len() != 4 * ids.len() {
                return Err(Error::invalid(format!(
                    "{} ids, {} geometries and {} boxes: expected as many of each",
                    ids.len(),
                    wkbs.len(),
                    rects.len() / 4
                )));
            }
            let rings = Rings::new(counts, coords, ids.len())?;
            let entry = |i: usize| -> Result<Geometry> {
                decode(wkbs[i], &rings, &rects, i, || {
                    format!("geometry of entry {}", ids[i])
                })
            };
            let decoded = on_every_core(ids.len(), ids.len() >= PARALLEL_DECODES, |range| {
                range
                    .map(|i| entry(i).map(|g| (status(&g), g)))
                    .collect::<Result<Vec<_>>>()
            })?;
            let (validity, geoms) = decoded.into_iter().flatten().unzip();
            Ok(Geometries {
                slot: Slots::new(&ids),
                geoms,
                ids,
                validity,
            })
        })
        .map_err(to_py)
    }

    /// Number of geometries.
    fn __len__(&self) -> usize {
        self.geoms.len()
    }

    /// The ids (native int64) of the geometries GEOS finds invalid among
    /// those whose validity is decided in Rust, and of the nearly
    /// degenerate ones (see `validity.rs`): the Python side refines their
    /// pairs with shapely.
    fn geos_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyByteArray> {
        let mut ids = self.ids_of(Validity::Invalid);
        ids.extend(self.ids_of(Validity::Degenerate));
        out_bytes(py, &ids, i64::to_ne_bytes)
    }

    /// The ids (native int64) of the geometries whose validity Rust does
    /// not decide (polygons with holes, multi-polygons, collections): the
    /// Python side tests them with shapely.
    fn untested_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyByteArray> {
        out_bytes(py, &self.ids_of(Validity::Unknown), i64::to_ne_bytes)
    }

    /// The refinement of a bulk query: `inputs` (WKB of each input
    /// geometry, or None for one that is its box in `boxes`, native
    /// float64 rows: a point), `offsets` and `ids` (native int64: the candidates of
    /// input `i`, entries whose box passed the filter step, at
    /// `ids[offsets[i]:offsets[i+1]]`). Returns two buffers of (input
    /// position, entry id) pairs, each one native int64 buffer of `2 × M`
    /// values (the M input positions, then the M ids; NumPy:
    /// `frombuffer(...).reshape(2, -1)`), by input then by id: the pairs
    /// where `predicate(input, entry)` holds, and those whose answer needs
    /// the DE-9IM matrix, left to GEOS (see `Pred::holds`). Many
    /// candidates are refined on every core, the inputs in contiguous
    /// shares.
    /// `counts` and `coords` give inputs whose WKB is None as rings (see
    /// `Rings`; `_exact._encode` writes all three).
    #[pyo3(signature = (inputs, offsets, ids, predicate, distance=None, boxes=None, counts=None, coords=None))]
    #[allow(clippy::too_many_arguments)] // the Python call's arguments
    fn refine<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Option<Bound<'py, PyBytes>>>,
        offsets: &[u8],
        ids: &[u8],
        predicate: &str,
        distance: Option<f64>,
        boxes: Option<&[u8]>,
        counts: Option<&[u8]>,
        coords: Option<&[u8]>,
    ) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyByteArray>)> {
        let p = Pred::parse(predicate, distance).map_err(to_py)?;
        let inputs = Inputs::new(&inputs, boxes)
            .and_then(|i| i.with_rings(counts, coords))
            .map_err(to_py)?;
        let refined = py
            .allow_threads(|| -> Result<Refined> {
                let ids = int64s(ids, "id")?;
                let ranges = ranges(&int64s(offsets, "offset")?, inputs.len(), ids.len())?;
                // Inputs in contiguous shares, one thread each when there
                // are enough candidates to pay for the threads.
                let parts =
                    on_every_core(inputs.len(), ids.len() >= PARALLEL_CANDIDATES, |share| {
                        self.refine_share(p, &inputs, &ranges, &ids, share)
                    })?;
                let mut all = Refined::default();
                for part in parts {
                    all.found.extend(part.found);
                    all.to_geos.extend(part.to_geos);
                }
                Ok(all)
            })
            .map_err(to_py)?;
        Ok((
            pair_bytes(py, &refined.found),
            pair_bytes(py, &refined.to_geos),
        ))
    }

    /// The exact k-nearest search of `inputs` (WKB, or None for one that
    /// is its box in `boxes`, native float64 rows: a point) in the index
    /// of `core`, over these geometries but those of the `special` ids
    /// (native int64, sorted): per input the `k` entries nearest by exact
    /// distance (ties by id), and with `all_matches` every other one at
    /// the k-th distance; none farther than `max_distance`; with
    /// `exclusive` none equal to the input (see `nearest.rs`). Returns
    /// (input positions, entry ids, distances, each input's bound: its
    /// k-th distance among its k nearest boxes or `max_distance` when
    /// smaller, infinity when fewer than k), native int64, int64,
    /// float64, float64.
    #[pyo3(signature = (core, inputs, boxes, special, k, all_matches, exclusive, max_distance=None))]
    #[allow(clippy::too_many_arguments)] // the Python call's arguments
    #[allow(clippy::type_complexity)]
    fn nearest_in<'py>(
        &self,
        py: Python<'py>,
        core: PyRef<'py, Core>,
        inputs: Vec<Option<Bound<'py, PyBytes>>>,
        boxes: &[u8],
        special: &[u8],
        k: usize,
        all_matches: bool,
        exclusive: bool,
        max_distance: Option<f64>,
    ) -> PyResult<(
        Bound<'py, PyByteArray>,
        Bound<'py, PyByteArray>,
        Bound<'py, PyByteArray>,
        Bound<'py, PyByteArray>,
    )> {
        let want = Wanted {
            k,
            all_matches,
            exclusive,
            max_distance: max_distance.unwrap_or(f64::INFINITY),
        };
        let inputs = Inputs::new(&inputs, Some(boxes)).map_err(to_py)?;
        let found = core.read_index_nogil(py, |index| {
            let geoms = inputs.geometries()?;
            let windows = crate::core::boxes(boxes, true)?;
            let special = int64s(special, "special id")?;
            nearest::search(index, self, &geoms, &windows, &special, want)
        })?;
        Ok((
            out_bytes(py, &found.inputs, i64::to_ne_bytes),
            out_bytes(py, &found.ids, i64::to_ne_bytes),
            out_bytes(py, &found.distances, f64::to_ne_bytes),
            out_bytes(py, &found.bounds, f64::to_ne_bytes),
        ))
    }
}
