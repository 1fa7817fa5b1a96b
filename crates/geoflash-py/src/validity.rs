//! GEOS's validity (`shapely.is_valid`) of the geometries whose test is
//! cheap: points, lines and polygons without holes. The refinement sends
//! every pair of an invalid geometry to GEOS (as shapely's `STRtree`
//! answers for them, which the `geo` crate does not: a line of two equal
//! points, a polygon collapsed to a line, a bow-tie, a ring that touches
//! itself). Polygons with holes and multi-polygons are tested with shapely
//! in Python (`_exact._invalid`), whose test covers how holes and parts
//! meet.
//!
//! GEOS's rules (`IsValidOp`) for these: a point is valid (its coordinates
//! are finite: checked before); a line needs 2 distinct points; a ring
//! (the shell of a polygon) 4 points without consecutive repeats (which
//! GEOS leaves out before testing), no two of its segments meeting but
//! consecutive ones at their shared vertex (a crossing, a touch and an
//! overlap of collinear segments are all invalid; so is a spike). Which
//! segments meet and how is decided with exact orientation tests
//! (`geo::line_intersection`, a port of the `RobustLineIntersector` that
//! GEOS also uses), so the answers are GEOS's.

use geo::line_intersection::{line_intersection, LineIntersection};
use geo::{BoundingRect, Coord, Intersects, Line, Polygon};
use geoflash_engine::engine::Geometry;

use crate::distance;

/// GEOS's validity of a geometry, where it is decided here.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Validity {
    /// Valid for GEOS.
    Valid,
    /// Invalid for GEOS.
    Invalid,
    /// Not tested here: a polygon with holes, a multi-polygon or a
    /// collection (Python tests them with shapely).
    Unknown,
    /// Not invalid where tested here, but nearly degenerate
    /// ([`nearly_degenerate`]): GEOS decides its pairs as for an invalid one.
    Degenerate,
}

/// Whether the pairs of `g` go to GEOS, and why: GEOS's validity of `g`
/// ([`validity`]), or [`Validity::Degenerate`].
pub(crate) fn status(g: &Geometry) -> Validity {
    match validity(g) {
        Validity::Invalid => Validity::Invalid,
        _ if nearly_degenerate(g) => Validity::Degenerate,
        v => v,
    }
}

/// GEOS's validity of `g`.
fn validity(g: &Geometry) -> Validity {
    let of = |valid: bool| {
        if valid {
            Validity::Valid
        } else {
            Validity::Invalid
        }
    };
    match g {
        Geometry::Point(_) | Geometry::MultiPoint(_) | Geometry::Rect(_) => Validity::Valid,
        Geometry::Line(l) => of(l.start != l.end),
        Geometry::LineString(ls) => of(line_valid(&ls.0)),
        Geometry::MultiLineString(m) => of(m.0.iter().all(|ls| line_valid(&ls.0))),
        Geometry::Polygon(p) if p.interiors().is_empty() => of(shell_valid(p)),
        _ => Validity::Unknown,
    }
}

/// A line string: empty, or at least 2 distinct points.
fn line_valid(coords: &[Coord]) -> bool {
    coords
        .first()
        .is_none_or(|&c| coords.iter().any(|&p| p != c))
}

/// The shell of a polygon without holes: empty, or a simple ring of at
/// least 4 points without consecutive repeats.
fn shell_valid(p: &Polygon) -> bool {
    let ring = &p.exterior().0;
    if ring.is_empty() {
        return true;
    }
    let mut points: Vec<Coord> = Vec::with_capacity(ring.len());
    for &c in ring {
        if points.last() != Some(&c) {
            points.push(c);
        }
    }
    points.len() >= 4 && ring_simple(&points)
}

/// Do no two segments of the closed ring `points` (without consecutive
/// repeats) meet, but consecutive ones at their shared vertex? The
/// segments are swept by their least x: each is compared with those
/// whose x ranges overlap its own (all of them in the worst case).
fn ring_simple(points: &[Coord]) -> bool {
    let n = points.len() - 1; // segments; the last point closes the ring
    let segment = |i: usize| Line::new(points[i], points[i + 1]);
    let min_x = |i: usize| points[i].x.min(points[i + 1].x);
    let max_x = |i: usize| points[i].x.max(points[i + 1].x);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by(|&a, &b| min_x(a).total_cmp(&min_x(b)));
    for (k, &i) in order.iter().enumerate() {
        let end = max_x(i);
        for &j in order[k + 1..].iter().take_while(|&&j| min_x(j) <= end) {
            let (lo, hi) = (i.min(j), i.max(j));
            // GEOS's isAdjacentInRing: consecutive, or the first and last
            let adjacent = hi - lo == 1 || (lo == 0 && hi == n - 1);
            match line_intersection(segment(i), segment(j)) {
                None => {}
                Some(LineIntersection::SinglePoint { is_proper, .. }) if adjacent && !is_proper => {
                }
                Some(_) => return false,
            }
        }
    }
    true
}

/// How close (a share of the largest coordinate) a vertex of a geometry
/// may come to a segment of its own that does not end at it before the
/// geometry counts as nearly degenerate ([`nearly_degenerate`]).
pub(crate) const NEAR: f64 = 1e-12;

/// Is `g` nearly degenerate: does a vertex come within [`NEAR`] of the
/// largest coordinate of a segment of `g` that does not end at it (two
/// segments of the same ring folding back, a ring or part passing near
/// another: a triangle whose corners lie on one line in decimal), or two
/// segments that do not share a vertex meet? GEOS computes the matrix of
/// such a geometry as if those segments met, and its answers differ from
/// exact geometry, and from one another: a box 2e-9 wide within such a
/// triangle of area 2e-16, for GEOS. Every pair of one goes to GEOS.
pub(crate) fn nearly_degenerate(g: &Geometry) -> bool {
    let Some(r) = g.bounding_rect() else {
        return false;
    };
    let largest = [r.min().x, r.min().y, r.max().x, r.max().y]
        .iter()
        .fold(0f64, |m, v| m.max(v.abs()));
    let tol = NEAR * largest;
    // every line and ring, without consecutive repeats; (segment start,
    // its chain, its index in the chain, the chain's segment count, closed)
    let mut chains: Vec<Vec<Coord>> = Vec::new();
    distance::lines(g, &mut |l| {
        let mut c: Vec<Coord> = Vec::with_capacity(l.len());
        for &p in l {
            if c.last() != Some(&p) {
                c.push(p);
            }
        }
        chains.push(c);
        false
    });
    let segments: Vec<(usize, usize)> = chains
        .iter()
        .enumerate()
        .flat_map(|(k, c)| (0..c.len().saturating_sub(1)).map(move |i| (k, i)))
        .collect();
    let ends = |(k, i): (usize, usize)| (chains[k][i], chains[k][i + 1]);
    let min_x = |s: (usize, usize)| ends(s).0.x.min(ends(s).1.x) - tol;
    let max_x = |s: (usize, usize)| ends(s).0.x.max(ends(s).1.x) + tol;
    let mut order: Vec<usize> = (0..segments.len()).collect();
    order.sort_unstable_by(|&a, &b| min_x(segments[a]).total_cmp(&min_x(segments[b])));
    for (n, &a) in order.iter().enumerate() {
        let (sa, end) = (segments[a], max_x(segments[a]));
        for &b in order[n + 1..]
            .iter()
            .take_while(|&&b| min_x(segments[b]) <= end)
        {
            if near(sa, segments[b], &chains, tol) {
                return true;
            }
        }
    }
    false
}

/// Do segments `a` and `b` (chain, index) come near each other without
/// sharing a vertex, or does one fold back along the other at their
/// shared vertex (see [`nearly_degenerate`])?
fn near(a: (usize, usize), b: (usize, usize), chains: &[Vec<Coord>], tol: f64) -> bool {
    let (a0, a1) = (chains[a.0][a.1], chains[a.0][a.1 + 1]);
    let (b0, b1) = (chains[b.0][b.1], chains[b.0][b.1 + 1]);
    let close = |p: Coord, s0: Coord, s1: Coord| distance::point_segment(p, s0, s1) <= tol;
    // a shared vertex: consecutive in a chain, or the first and last of a
    // closed one
    let chain = &chains[a.0];
    let closed = chain.len() > 2 && chain.first() == chain.last();
    let last = chain.len() - 2;
    let (lo, hi) = (a.1.min(b.1), a.1.max(b.1));
    let shared = a.0 == b.0 && (hi - lo == 1 || (closed && lo == 0 && hi == last));
    if shared {
        // the far end of each near the other: a fold, not a continuation
        let (fa, fb) = if a1 == b0 {
            (a0, b1)
        } else if a0 == b1 {
            (a1, b0)
        } else if a0 == b0 {
            (a1, b1)
        } else {
            (a0, b0)
        };
        return close(fa, b0, b1) || close(fb, a0, a1);
    }
    Line::new(a0, a1).intersects(&Line::new(b0, b1))
        || close(a0, b0, b1)
        || close(a1, b0, b1)
        || close(b0, a0, a1)
        || close(b1, a0, a1)
}
