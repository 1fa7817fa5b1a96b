//! Rectangle measures the tree algorithms use, kept private to the index so
//! the algorithms read the same whatever `geom` grows.
use crate::geom::{Point, Rect};
use crate::page::Entry;

/// Smallest rectangle covering both.
#[inline]
pub(crate) fn union(a: &Rect, b: &Rect) -> Rect {
    Rect {
        min_x: a.min_x.min(b.min_x),
        min_y: a.min_y.min(b.min_y),
        max_x: a.max_x.max(b.max_x),
        max_y: a.max_y.max(b.max_y),
    }
}

/// Area.
#[inline]
pub(crate) fn area(r: &Rect) -> f64 {
    (r.max_x - r.min_x) * (r.max_y - r.min_y)
}

/// Half perimeter (the R*-tree's margin, up to a constant factor).
#[inline]
pub(crate) fn margin(r: &Rect) -> f64 {
    (r.max_x - r.min_x) + (r.max_y - r.min_y)
}

/// Area added to `r` by covering `add` too.
#[inline]
pub(crate) fn enlargement(r: &Rect, add: &Rect) -> f64 {
    area(&union(r, add)) - area(r)
}

/// Area of the intersection (0 when disjoint).
#[inline]
pub(crate) fn overlap(a: &Rect, b: &Rect) -> f64 {
    let w = a.max_x.min(b.max_x) - a.min_x.max(b.min_x);
    let h = a.max_y.min(b.max_y) - a.min_y.max(b.min_y);
    if w > 0.0 && h > 0.0 {
        w * h
    } else {
        0.0
    }
}

/// Closed rectangles share at least one point.
#[inline]
pub(crate) fn intersects(a: &Rect, b: &Rect) -> bool {
    a.min_x <= b.max_x && b.min_x <= a.max_x && a.min_y <= b.max_y && b.min_y <= a.max_y
}

/// `outer` contains `inner` (boundaries included).
#[inline]
pub(crate) fn contains(outer: &Rect, inner: &Rect) -> bool {
    outer.min_x <= inner.min_x
        && outer.min_y <= inner.min_y
        && inner.max_x <= outer.max_x
        && inner.max_y <= outer.max_y
}

/// `r` contains the point (boundaries included).
#[inline]
pub(crate) fn contains_point(r: &Rect, p: &Point) -> bool {
    r.min_x <= p.x && p.x <= r.max_x && r.min_y <= p.y && p.y <= r.max_y
}

/// Centre of the rectangle.
#[inline]
pub(crate) fn center(r: &Rect) -> (f64, f64) {
    ((r.min_x + r.max_x) * 0.5, (r.min_y + r.max_y) * 0.5)
}

/// Euclidean distance from the point to the nearest point of the rectangle
/// (0 inside). Public through [`crate::index::min_dist`].
#[inline]
pub(crate) fn min_dist(p: &Point, r: &Rect) -> f64 {
    let dx = (r.min_x - p.x).max(0.0).max(p.x - r.max_x);
    let dy = (r.min_y - p.y).max(0.0).max(p.y - r.max_y);
    dx.hypot(dy)
}

/// Union of the rectangles of `entries` (`None` when empty).
pub(crate) fn mbr(entries: &[Entry]) -> Option<Rect> {
    let mut it = entries.iter();
    let first = it.next()?.rect;
    Some(it.fold(first, |acc, e| union(&acc, &e.rect)))
}
