//! Rectangle measures the tree algorithms use, as short free functions over
//! the methods of [`crate::geom::Rect`] so the algorithms read like the papers.
use crate::geom::Rect;
use crate::page::Entry;

/// An integer whose order is [`f64::total_cmp`]'s order of `v`: sort keys
/// that compare as integers (the bulk load's STR, the R* split's orders).
#[inline]
pub(crate) fn ordered_bits(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// Smallest rectangle covering both.
#[inline]
pub(crate) fn union(a: &Rect, b: &Rect) -> Rect {
    a.union(b)
}

/// Area.
#[inline]
pub(crate) fn area(r: &Rect) -> f64 {
    r.area()
}

/// The R*-tree's margin (perimeter).
#[inline]
pub(crate) fn margin(r: &Rect) -> f64 {
    r.margin()
}

/// Area added to `r` by covering `add` too.
#[inline]
pub(crate) fn enlargement(r: &Rect, add: &Rect) -> f64 {
    r.enlargement(add)
}

/// Area of the intersection (0 when disjoint or touching).
#[inline]
pub(crate) fn overlap(a: &Rect, b: &Rect) -> f64 {
    a.overlap_area(b)
}

/// Closed rectangles share at least one point.
#[inline]
pub(crate) fn intersects(a: &Rect, b: &Rect) -> bool {
    a.intersects(b)
}

/// `outer` contains `inner` (boundaries included).
#[inline]
pub(crate) fn contains(outer: &Rect, inner: &Rect) -> bool {
    outer.contains(inner)
}


/// Centre of the rectangle.
#[inline]
pub(crate) fn center(r: &Rect) -> (f64, f64) {
    let c = r.center();
    (c.x, c.y)
}

/// Euclidean distance from the point to the nearest point of the rectangle
/// (0 inside). Public through [`crate::index::min_dist`].
#[inline]
#[cfg(test)]
pub(crate) fn min_dist(p: &crate::geom::Point, r: &Rect) -> f64 {
    r.min_dist_point(p)
}

/// Union of the rectangles of `entries` (`None` when empty).
pub(crate) fn mbr(entries: &[Entry]) -> Option<Rect> {
    let mut it = entries.iter();
    let first = it.next()?.rect;
    Some(it.fold(first, |acc, e| union(&acc, &e.rect)))
}
