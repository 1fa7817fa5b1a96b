//! Geometry: points, rectangles (MBRs) and their predicates and measures,
//! Hilbert and Z-order values ([`hilbert`]).
//!
//! # Coordinates
//!
//! Coordinates are finite `f64` values of magnitude at most [`MAX_COORD`]
//! (1e150). The constructors ([`Point::new`], [`Rect::new`],
//! [`Rect::from_corners`]) and deserialization reject NaN, infinite, too
//! large and inverted input with [`Error::InvalidInput`]. The bound makes
//! every measure finite: widths are at most 2e150, areas and squared
//! distances at most 8e300, so `area`, `margin`, `enlargement`,
//! `overlap_area` and the distances never overflow to infinity and never
//! produce NaN — the index algorithms can compare them without special cases.
//!
//! A [`Rect`] is validated once, when it is built: its fields are private
//! and read through [`Rect::min_x`], [`Rect::min_y`], [`Rect::max_x`] and
//! [`Rect::max_y`], so every `Rect` in the program satisfies the checks of
//! [`Rect::new`]. Inside the crate, code that derives a rectangle from valid
//! ones (a cell of a valid grid region, a quadrant of a valid domain) uses
//! the unchecked `Rect::from_valid`, which checks the same conditions in
//! debug builds only.
//! The fields of [`Point`] are public for reading and for code that builds
//! points from values already validated; code that takes coordinates from
//! outside goes through the constructors.
//!
//! # Conventions
//!
//! Rectangles are closed: touching rectangles intersect, a rectangle contains
//! its boundary. `margin` is the perimeter (the sum of the edge lengths, as in
//! Beckmann et al.'s R*-tree, where the split axis minimises the sum of the
//! margins); [`Rect::half_perimeter`] is the half of it that some
//! implementations call margin — the choice does not change any R*-tree
//! decision, only the magnitude of the sums.
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

pub mod hilbert;

pub use hilbert::{hilbert_index, hilbert_point, z_order, z_order_point, HilbertDomain};

/// Largest accepted coordinate magnitude. See the module documentation.
pub const MAX_COORD: f64 = 1e150;

#[inline]
fn check_coord(v: f64) -> bool {
    // NaN and the infinities fail the comparison: finite and in range.
    v.abs() <= MAX_COORD
}

/// A point in the plane. Constructed through [`Point::new`], which rejects
/// NaN, infinite and too large coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PointRepr")]
pub struct Point {
    /// x coordinate.
    pub x: f64,
    /// y coordinate.
    pub y: f64,
}

#[derive(Deserialize)]
struct PointRepr {
    x: f64,
    y: f64,
}

impl TryFrom<PointRepr> for Point {
    type Error = Error;
    fn try_from(r: PointRepr) -> Result<Point> {
        Point::new(r.x, r.y)
    }
}

/// A coordinate as an error message shows it: as `{}` does, but in
/// scientific notation when that would write more than 16 digits before
/// or 5 zeros after the decimal point (`1e308`, not 309 digits).
struct Coord(f64);

impl std::fmt::Display for Coord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = self.0.abs();
        match a == 0.0 || !a.is_finite() || (1e-5..1e16).contains(&a) {
            true => write!(f, "{}", self.0),
            false => write!(f, "{:e}", self.0),
        }
    }
}

impl Point {
    /// A point; an error for NaN, infinite or out-of-range coordinates
    /// (magnitude above [`MAX_COORD`]).
    pub fn new(x: f64, y: f64) -> Result<Point> {
        if !check_coord(x) || !check_coord(y) {
            let (x, y) = (Coord(x), Coord(y));
            return Err(Error::invalid(format!(
                "point ({x}, {y}) has a coordinate that is not finite or exceeds {MAX_COORD:e} in magnitude"
            )));
        }
        Ok(Point { x, y })
    }

    /// Squared Euclidean distance to `other`.
    pub fn distance_sq(&self, other: &Point) -> f64 {
        let dx = self.x - other.x;
        let dy = self.y - other.y;
        dx * dx + dy * dy
    }

    /// Euclidean distance to `other`.
    pub fn distance(&self, other: &Point) -> f64 {
        self.distance_sq(other).sqrt()
    }
}

/// An axis-aligned rectangle (minimum bounding rectangle), closed on all sides.
/// Constructed through [`Rect::new`], which rejects NaN, infinite, too large
/// and inverted coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RectRepr")]
pub struct Rect {
    min_x: f64,
    min_y: f64,
    max_x: f64,
    max_y: f64,
}

#[derive(Deserialize)]
struct RectRepr {
    min_x: f64,
    min_y: f64,
    max_x: f64,
    max_y: f64,
}

impl TryFrom<RectRepr> for Rect {
    type Error = Error;
    fn try_from(r: RectRepr) -> Result<Rect> {
        Rect::new(r.min_x, r.min_y, r.max_x, r.max_y)
    }
}

/// Distance along one axis from `v` to the interval `[lo, hi]` (0 inside).
#[inline]
fn axis_gap(v: f64, lo: f64, hi: f64) -> f64 {
    fmax(fmax(lo - v, v - hi), 0.0)
}

impl Rect {
    /// A rectangle from its corners; an error for NaN, infinite, out-of-range
    /// (magnitude above [`MAX_COORD`]) or inverted coordinates.
    #[inline]
    pub fn new(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> Result<Rect> {
        // One test without branches per coordinate (bulk loads validate
        // millions); the error is built out of line.
        let valid = check_coord(min_x)
            & check_coord(min_y)
            & check_coord(max_x)
            & check_coord(max_y)
            & (min_x <= max_x)
            & (min_y <= max_y);
        if !valid {
            return Err(Rect::refusal(min_x, min_y, max_x, max_y));
        }
        Ok(Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        })
    }

    /// Why [`Rect::new`] refuses these coordinates.
    #[cold]
    #[inline(never)]
    fn refusal(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> Error {
        let valid = [min_x, min_y, max_x, max_y].into_iter().all(check_coord);
        let [min_x, min_y, max_x, max_y] = [min_x, min_y, max_x, max_y].map(Coord);
        if valid {
            Error::invalid(format!(
                "rectangle ({min_x}, {min_y}, {max_x}, {max_y}) is inverted (min greater than max)"
            ))
        } else {
            Error::invalid(format!(
                "rectangle ({min_x}, {min_y}, {max_x}, {max_y}) has a coordinate that is not finite or exceeds {MAX_COORD:e} in magnitude"
            ))
        }
    }

    /// A rectangle from coordinates the caller guarantees valid: finite, of
    /// magnitude at most [`MAX_COORD`], not inverted — what [`Rect::new`]
    /// would accept. For rectangles derived from valid ones inside the crate
    /// (a cell or quadrant of a valid region) where validation would cost in a
    /// hot path or could not fail; debug builds check the guarantee.
    #[inline]
    pub(crate) fn from_valid(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> Rect {
        debug_assert!(
            Rect::new(min_x, min_y, max_x, max_y).is_ok(),
            "Rect::from_valid({min_x}, {min_y}, {max_x}, {max_y}) given an invalid rectangle"
        );
        Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        }
    }

    /// A rectangle that skips every check, for tests that must show how code
    /// handles a rectangle [`Rect::new`] would refuse (defence in depth).
    #[cfg(test)]
    pub(crate) fn invalid_for_tests(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> Rect {
        Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        }
    }

    /// Smallest x.
    #[inline]
    pub fn min_x(&self) -> f64 {
        self.min_x
    }

    /// Smallest y.
    #[inline]
    pub fn min_y(&self) -> f64 {
        self.min_y
    }

    /// Largest x.
    #[inline]
    pub fn max_x(&self) -> f64 {
        self.max_x
    }

    /// Largest y.
    #[inline]
    pub fn max_y(&self) -> f64 {
        self.max_y
    }

    /// The bit patterns of min x, min y, max x and max y: the rectangle
    /// compared or hashed bit for bit.
    #[inline]
    pub fn to_bits(&self) -> [u64; 4] {
        [
            self.min_x.to_bits(),
            self.min_y.to_bits(),
            self.max_x.to_bits(),
            self.max_y.to_bits(),
        ]
    }

    /// The rectangle spanned by two opposite corners given in any order.
    pub fn from_corners(a: Point, b: Point) -> Result<Rect> {
        Rect::new(a.x.min(b.x), a.y.min(b.y), a.x.max(b.x), a.y.max(b.y))
    }

    /// The degenerate rectangle of one point.
    pub fn from_point(p: Point) -> Rect {
        Rect {
            min_x: p.x,
            min_y: p.y,
            max_x: p.x,
            max_y: p.y,
        }
    }

    /// The whole coordinate domain, `[-MAX_COORD, MAX_COORD]²`: a window that
    /// every valid rectangle is inside.
    pub fn world() -> Rect {
        Rect {
            min_x: -MAX_COORD,
            min_y: -MAX_COORD,
            max_x: MAX_COORD,
            max_y: MAX_COORD,
        }
    }

    /// This rectangle widened where it is flat: an axis of zero extent
    /// grows on both sides by 1e-9 of its coordinate's magnitude (at least
    /// 1e-9), so that a domain over data on one line or at one point has an
    /// area (a grid file's domain, a Hilbert curve's). An error only when
    /// the widened rectangle leaves the coordinate range.
    pub fn with_area(&self) -> Result<Rect> {
        let pad = |lo: f64, hi: f64| {
            if hi > lo {
                0.0
            } else {
                lo.abs().max(1.0) * 1e-9
            }
        };
        let (px, py) = (pad(self.min_x, self.max_x), pad(self.min_y, self.max_y));
        Rect::new(
            self.min_x - px,
            self.min_y - py,
            self.max_x + px,
            self.max_y + py,
        )
    }

    /// The smallest rectangle covering all of `rects`, `None` for none.
    pub fn union_all<'a, I: IntoIterator<Item = &'a Rect>>(rects: I) -> Option<Rect> {
        rects.into_iter().fold(None, |acc, r| match acc {
            None => Some(*r),
            Some(a) => Some(a.union(r)),
        })
    }

    /// Extent along x.
    pub fn width(&self) -> f64 {
        self.max_x - self.min_x
    }

    /// Extent along y.
    pub fn height(&self) -> f64 {
        self.max_y - self.min_y
    }

    /// Area (0 for points and segments).
    pub fn area(&self) -> f64 {
        self.width() * self.height()
    }

    /// Perimeter, `2 (width + height)`: the R*-tree's margin (see the module
    /// documentation).
    pub fn margin(&self) -> f64 {
        2.0 * self.half_perimeter()
    }

    /// `width + height`.
    pub fn half_perimeter(&self) -> f64 {
        self.width() + self.height()
    }

    /// The centre.
    pub fn center(&self) -> Point {
        Point {
            x: self.min_x + self.width() * 0.5,
            y: self.min_y + self.height() * 0.5,
        }
    }

    /// True for a rectangle of zero width and height.
    pub fn is_point(&self) -> bool {
        self.min_x == self.max_x && self.min_y == self.max_y
    }

    /// The closed rectangles share at least one point (touching counts).
    /// The four comparisons are combined without short-circuiting: a scan
    /// of a node's entries then runs without a branch per comparison, which
    /// the processor mispredicts often where about half the entries match.
    #[inline]
    pub fn intersects(&self, other: &Rect) -> bool {
        (self.min_x <= other.max_x)
            & (other.min_x <= self.max_x)
            & (self.min_y <= other.max_y)
            & (other.min_y <= self.max_y)
    }

    /// `other` lies inside `self`, boundaries included (combined without
    /// short-circuiting, as [`Rect::intersects`]).
    #[inline]
    pub fn contains(&self, other: &Rect) -> bool {
        (self.min_x <= other.min_x)
            & (self.min_y <= other.min_y)
            & (other.max_x <= self.max_x)
            & (other.max_y <= self.max_y)
    }

    /// `self` lies inside `other`, boundaries included (`other.contains(self)`).
    pub fn within(&self, other: &Rect) -> bool {
        other.contains(self)
    }

    /// The point lies inside `self` or on its boundary.
    pub fn contains_point(&self, p: &Point) -> bool {
        self.min_x <= p.x && p.x <= self.max_x && self.min_y <= p.y && p.y <= self.max_y
    }

    /// The smallest rectangle covering both.
    pub fn union(&self, other: &Rect) -> Rect {
        Rect {
            min_x: fmin(self.min_x, other.min_x),
            min_y: fmin(self.min_y, other.min_y),
            max_x: fmax(self.max_x, other.max_x),
            max_y: fmax(self.max_y, other.max_y),
        }
    }

    /// Grows `self` to cover `other`.
    pub fn expand(&mut self, other: &Rect) {
        *self = self.union(other);
    }

    /// Grows `self` to cover the point.
    pub fn expand_point(&mut self, p: &Point) {
        self.expand(&Rect::from_point(*p));
    }

    /// Area added to `self` by covering `other` too (Guttman's enlargement), ≥ 0.
    pub fn enlargement(&self, other: &Rect) -> f64 {
        fmax(self.union(other).area() - self.area(), 0.0)
    }

    /// The common part of the closed rectangles, `None` when disjoint (a
    /// shared edge or corner gives a degenerate rectangle).
    pub fn intersection(&self, other: &Rect) -> Option<Rect> {
        if !self.intersects(other) {
            return None;
        }
        Some(Rect {
            min_x: fmax(self.min_x, other.min_x),
            min_y: fmax(self.min_y, other.min_y),
            max_x: fmin(self.max_x, other.max_x),
            max_y: fmin(self.max_y, other.max_y),
        })
    }

    /// Area of the intersection (0 when disjoint or touching).
    pub fn overlap_area(&self, other: &Rect) -> f64 {
        // The inner loop of the R*-tree's ChooseSubtree: plain comparisons
        // compile to single min/max instructions, where `f64::min`/`max`
        // add NaN handling (rectangles hold no NaN: `Rect::new` refuses it).
        let w = fmax(
            fmin(self.max_x, other.max_x) - fmax(self.min_x, other.min_x),
            0.0,
        );
        let h = fmax(
            fmin(self.max_y, other.max_y) - fmax(self.min_y, other.min_y),
            0.0,
        );
        w * h
    }

    /// Squared distance between the centres (the R*-tree's reinsertion order).
    pub fn center_distance_sq(&self, other: &Rect) -> f64 {
        self.center().distance_sq(&other.center())
    }

    /// Distance between the centres.
    pub fn center_distance(&self, other: &Rect) -> f64 {
        self.center_distance_sq(other).sqrt()
    }

    /// Squared MINDIST (Roussopoulos et al.): squared distance from the point
    /// to the nearest point of the rectangle, 0 when the point is inside.
    pub fn min_dist_sq_point(&self, p: &Point) -> f64 {
        let dx = axis_gap(p.x, self.min_x, self.max_x);
        let dy = axis_gap(p.y, self.min_y, self.max_y);
        dx * dx + dy * dy
    }

    /// MINDIST: distance from the point to the nearest point of the
    /// rectangle, 0 when the point is inside.
    pub fn min_dist_point(&self, p: &Point) -> f64 {
        self.min_dist_sq_point(p).sqrt()
    }

    /// Squared distance between the nearest points of two rectangles (0 when they intersect).
    pub fn min_dist_sq_rect(&self, other: &Rect) -> f64 {
        let dx = fmax(
            fmax(other.min_x - self.max_x, self.min_x - other.max_x),
            0.0,
        );
        let dy = fmax(
            fmax(other.min_y - self.max_y, self.min_y - other.max_y),
            0.0,
        );
        dx * dx + dy * dy
    }

    /// Squared distance from the point to the farthest point of the rectangle
    /// (a corner): an upper bound of the distance to anything inside.
    pub fn max_dist_sq_point(&self, p: &Point) -> f64 {
        let dx = (p.x - self.min_x).abs().max((p.x - self.max_x).abs());
        let dy = (p.y - self.min_y).abs().max((p.y - self.max_y).abs());
        dx * dx + dy * dy
    }

    /// Squared MINMAXDIST (Roussopoulos, Kelley, Vincent 1995): the smallest
    /// distance within which an object whose MBR is exactly `self` (touching
    /// every edge) is guaranteed to lie. MINDIST ≤ MINMAXDIST ≤ MAXDIST.
    pub fn min_max_dist_sq_point(&self, p: &Point) -> f64 {
        // Per axis: rm = the nearer edge coordinate, r_M = the farther one.
        let near = |v: f64, lo: f64, hi: f64| if v <= (lo + hi) * 0.5 { lo } else { hi };
        let far = |v: f64, lo: f64, hi: f64| if v >= (lo + hi) * 0.5 { lo } else { hi };
        let sq = |a: f64, b: f64| (a - b) * (a - b);
        let fx = sq(p.x, far(p.x, self.min_x, self.max_x));
        let fy = sq(p.y, far(p.y, self.min_y, self.max_y));
        let via_x = sq(p.x, near(p.x, self.min_x, self.max_x)) + fy;
        let via_y = sq(p.y, near(p.y, self.min_y, self.max_y)) + fx;
        via_x.min(via_y)
    }
}

/// The smaller of two numbers that are not NaN (one `minsd`).
#[inline(always)]
fn fmin(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

/// The larger of two numbers that are not NaN (one `maxsd`).
#[inline(always)]
fn fmax(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(a: f64, b: f64, c: f64, d: f64) -> Rect {
        Rect::new(a, b, c, d).unwrap()
    }

    fn p(x: f64, y: f64) -> Point {
        Point::new(x, y).unwrap()
    }

    #[test]
    fn refused_coordinates_are_shown_short() {
        let e = Rect::new(0.0, 0.5, 1e308, 1.0).unwrap_err().to_string();
        assert!(
            e.contains("rectangle (0, 0.5, 1e308, 1) has a coordinate"),
            "{e}"
        );
        let e = Point::new(-1.5e-300, f64::NAN).unwrap_err().to_string();
        assert!(e.contains("point (-1.5e-300, NaN)"), "{e}");
        let e = Rect::new(2.0, 0.0, 1.0, f64::INFINITY)
            .unwrap_err()
            .to_string();
        assert!(e.contains("(2, 0, 1, inf)"), "{e}");
        let e = Rect::new(3.0, 0.0, 1.0, 0.0).unwrap_err().to_string();
        assert!(e.contains("rectangle (3, 0, 1, 0) is inverted"), "{e}");
    }

    #[test]
    fn with_area_widens_only_flat_axes() {
        let full = r(1.0, 2.0, 3.0, 4.0);
        assert_eq!(full.with_area().unwrap(), full);
        let line = r(1.0, 5.0, 3.0, 5.0).with_area().unwrap();
        assert!(line.height() > 0.0 && line.area() > 0.0);
        assert_eq!((line.min_x(), line.max_x()), (1.0, 3.0));
        assert!(line.contains(&r(1.0, 5.0, 3.0, 5.0)));
        let point = Rect::from_point(p(-2e6, 0.0)).with_area().unwrap();
        assert!(point.width() > 0.0 && point.height() > 0.0);
        assert!(point.contains(&Rect::from_point(p(-2e6, 0.0))));
        assert!(Rect::from_point(p(MAX_COORD, 0.0)).with_area().is_err());
    }

    #[test]
    fn constructors_validate() {
        assert!(Rect::new(0.0, 0.0, 1.0, 1.0).is_ok());
        assert!(Rect::new(1.0, 0.0, 0.0, 1.0).is_err());
        assert!(Rect::new(0.0, 1.0, 1.0, 0.0).is_err());
        assert!(Rect::new(f64::NAN, 0.0, 1.0, 1.0).is_err());
        assert!(Rect::new(0.0, 0.0, f64::INFINITY, 1.0).is_err());
        assert!(Rect::new(-f64::MAX, 0.0, 1.0, 1.0).is_err());
        assert!(Rect::new(-MAX_COORD, -MAX_COORD, MAX_COORD, MAX_COORD).is_ok());
        assert!(Point::new(f64::NAN, 0.0).is_err());
        assert!(Point::new(0.0, f64::NEG_INFINITY).is_err());
        assert!(Point::new(0.0, 2e150).is_err());
        let e = Rect::new(2.0, 0.0, 1.0, 1.0).unwrap_err().to_string();
        assert!(e.contains("inverted"), "{e}");
        assert_eq!(
            Rect::from_corners(p(3.0, 1.0), p(1.0, 4.0)).unwrap(),
            r(1.0, 1.0, 3.0, 4.0)
        );
        assert_eq!(Rect::from_point(p(2.0, 5.0)), r(2.0, 5.0, 2.0, 5.0));
        assert!(Rect::from_point(p(2.0, 5.0)).is_point());
    }

    #[test]
    fn serde_validates() {
        let ok: Rect =
            serde_json::from_str(r#"{"min_x":0,"min_y":1,"max_x":2,"max_y":3}"#).unwrap();
        assert_eq!(ok, r(0.0, 1.0, 2.0, 3.0));
        assert_eq!(
            serde_json::from_str::<Rect>(&serde_json::to_string(&ok).unwrap()).unwrap(),
            ok
        );
        assert!(
            serde_json::from_str::<Rect>(r#"{"min_x":5,"min_y":1,"max_x":2,"max_y":3}"#).is_err()
        );
        assert!(serde_json::from_str::<Point>(r#"{"x":1e200,"y":0}"#).is_err());
        assert_eq!(
            serde_json::from_str::<Point>(r#"{"x":1.5,"y":-2}"#).unwrap(),
            p(1.5, -2.0)
        );
    }

    #[test]
    fn measures() {
        let a = r(0.0, 0.0, 4.0, 2.0);
        assert_eq!(a.area(), 8.0);
        assert_eq!(a.margin(), 12.0);
        assert_eq!(a.half_perimeter(), 6.0);
        assert_eq!(a.center(), p(2.0, 1.0));
        let b = r(3.0, 1.0, 5.0, 5.0);
        assert_eq!(a.union(&b), r(0.0, 0.0, 5.0, 5.0));
        assert_eq!(a.enlargement(&b), 25.0 - 8.0);
        assert_eq!(a.intersection(&b), Some(r(3.0, 1.0, 4.0, 2.0)));
        assert_eq!(a.overlap_area(&b), 1.0);
        let c = r(4.0, 2.0, 6.0, 6.0); // touches a at a corner
        assert!(a.intersects(&c));
        assert_eq!(a.intersection(&c), Some(r(4.0, 2.0, 4.0, 2.0)));
        assert_eq!(a.overlap_area(&c), 0.0);
        assert!(!a.intersects(&r(4.1, 0.0, 5.0, 1.0)));
        assert_eq!(a.intersection(&r(4.1, 0.0, 5.0, 1.0)), None);
        assert_eq!(a.center_distance_sq(&b), 4.0 + 4.0);
        assert_eq!(Rect::union_all(&[a, b, c]).unwrap(), r(0.0, 0.0, 6.0, 6.0));
        assert_eq!(Rect::union_all(&[]), None);
        let mut d = a;
        d.expand_point(&p(-1.0, 7.0));
        assert_eq!(d, r(-1.0, 0.0, 4.0, 7.0));
    }

    #[test]
    fn predicates() {
        let outer = r(0.0, 0.0, 10.0, 10.0);
        let inner = r(2.0, 2.0, 10.0, 3.0);
        assert!(outer.contains(&inner));
        assert!(inner.within(&outer));
        assert!(!inner.contains(&outer));
        assert!(outer.contains(&outer));
        assert!(outer.contains_point(&p(10.0, 0.0)));
        assert!(!outer.contains_point(&p(10.0, 10.5)));
        assert!(Rect::world().contains(&outer));
    }

    #[test]
    fn distances() {
        let a = r(0.0, 0.0, 2.0, 1.0);
        assert_eq!(a.min_dist_sq_point(&p(1.0, 0.5)), 0.0);
        assert_eq!(a.min_dist_sq_point(&p(5.0, 5.0)), 9.0 + 16.0);
        assert_eq!(a.min_dist_point(&p(5.0, 5.0)), 5.0);
        assert_eq!(a.min_dist_point(&p(1.0, -3.0)), 3.0);
        assert_eq!(a.max_dist_sq_point(&p(0.0, 0.0)), 4.0 + 1.0);
        assert_eq!(a.min_dist_sq_rect(&r(5.0, 5.0, 6.0, 6.0)), 9.0 + 16.0);
        assert_eq!(a.min_dist_sq_rect(&r(1.0, 0.5, 6.0, 6.0)), 0.0);
        // MINMAXDIST from (0, 0) to [0,2]x[0,1]: the nearer edge along x (x=0)
        // with the farther corner y=1 gives 1; along y (y=0) with far x=2 gives 4.
        assert_eq!(a.min_max_dist_sq_point(&p(0.0, 0.0)), 1.0);
    }

    fn coord() -> impl Strategy<Value = f64> {
        prop_oneof![
            -1000.0f64..1000.0,
            (-20i32..20).prop_map(f64::from), // exact values: touching edges
        ]
    }

    fn arb_rect() -> impl Strategy<Value = Rect> {
        (coord(), coord(), coord(), coord())
            .prop_map(|(a, b, c, d)| Rect::new(a.min(c), b.min(d), a.max(c), b.max(d)).unwrap())
    }

    fn arb_point() -> impl Strategy<Value = Point> {
        (coord(), coord()).prop_map(|(x, y)| Point::new(x, y).unwrap())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        #[test]
        fn prop_predicate_laws(a in arb_rect(), b in arb_rect()) {
            prop_assert_eq!(a.intersects(&b), b.intersects(&a));
            if a.contains(&b) {
                prop_assert!(a.intersects(&b));
                prop_assert!(b.within(&a));
                prop_assert_eq!(a.enlargement(&b), 0.0);
            }
            let u = a.union(&b);
            prop_assert!(u.contains(&a) && u.contains(&b));
            prop_assert_eq!(u, b.union(&a));
            prop_assert!(a.enlargement(&b) >= 0.0);
            prop_assert!(a.enlargement(&b).is_finite());
            let ov = a.overlap_area(&b);
            prop_assert!(ov >= 0.0);
            prop_assert!(ov <= a.area().min(b.area()));
            prop_assert_eq!(ov, b.overlap_area(&a));
            match a.intersection(&b) {
                Some(i) => {
                    prop_assert!(a.intersects(&b));
                    prop_assert!(a.contains(&i) && b.contains(&i));
                }
                None => {
                    prop_assert!(!a.intersects(&b));
                    prop_assert_eq!(ov, 0.0);
                    prop_assert!(a.min_dist_sq_rect(&b) > 0.0);
                }
            }
            prop_assert_eq!(a.min_dist_sq_rect(&b) == 0.0, a.intersects(&b));
            prop_assert!(a.margin() >= 0.0 && a.area() >= 0.0);
            prop_assert!(a.contains_point(&a.center()));
            prop_assert_eq!(Rect::union_all(&[a, b]), Some(u));
        }

        #[test]
        fn prop_distance_laws(a in arb_rect(), q in arb_point(), inside in (0.0f64..=1.0, 0.0f64..=1.0)) {
            let d = a.min_dist_sq_point(&q);
            prop_assert!(d >= 0.0);
            prop_assert_eq!(d == 0.0, a.contains_point(&q));
            prop_assert_eq!(a.min_dist_point(&q), d.sqrt());
            let mm = a.min_max_dist_sq_point(&q);
            let mx = a.max_dist_sq_point(&q);
            prop_assert!(d <= mm * (1.0 + 1e-12) && mm <= mx * (1.0 + 1e-12), "{} {} {}", d, mm, mx);
            // Every point of the rectangle lies between MINDIST and MAXDIST.
            let s = Point {
                x: a.min_x + a.width() * inside.0,
                y: a.min_y + a.height() * inside.1,
            };
            if a.contains_point(&s) {
                let ds = q.distance_sq(&s);
                prop_assert!(d <= ds * (1.0 + 1e-12) + 1e-12);
                prop_assert!(ds <= mx * (1.0 + 1e-12) + 1e-12);
            }
            prop_assert_eq!(a.min_dist_sq_rect(&Rect::from_point(q)), d);
        }

        #[test]
        fn prop_extreme_measures_are_finite(
            a in (-MAX_COORD..MAX_COORD, -MAX_COORD..MAX_COORD),
            b in (-MAX_COORD..MAX_COORD, -MAX_COORD..MAX_COORD),
        ) {
            let r1 = Rect::from_corners(p(a.0, a.1), p(b.0, b.1)).unwrap();
            let w = Rect::world();
            for v in [r1.area(), w.area(), w.margin(), r1.enlargement(&w), w.enlargement(&r1),
                      w.overlap_area(&r1), w.max_dist_sq_point(&p(a.0, a.1)),
                      w.min_max_dist_sq_point(&p(b.0, b.1)), w.center_distance_sq(&r1)] {
                prop_assert!(v.is_finite() && v >= 0.0, "{}", v);
            }
        }
    }
}
