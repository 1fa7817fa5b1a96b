//! The R*-tree's own steps (Beckmann, Kriegel, Schneider, Seeger 1990):
//! ChooseSubtree by overlap enlargement when the children are leaves, and the
//! choice of entries for forced reinsertion. The R* split is in `split`.
use std::cmp::Ordering;

use super::ops::{area, center, union};
use crate::geom::Rect;
use crate::page::Entry;
use crate::page_id::PageId;

/// Candidates examined for overlap enlargement when a node has many children:
/// the paper's "nearly minimum overlap cost" optimisation (the 32 children of
/// least area enlargement).
const OVERLAP_CANDIDATES: usize = 32;

/// ChooseSubtree when the children are leaves: the child whose overlap with
/// its siblings grows least, ties by least area enlargement, then least area,
/// then the first in key order.
pub(crate) fn choose_by_overlap(entries: &[Entry], rect: &Rect) -> Option<PageId> {
    // Growing a rectangle never decreases its overlap with others, so a child
    // that already contains `rect` has the least possible overlap enlargement
    // (zero) and zero area enlargement: the rule then picks the smallest such
    // child without the quadratic scan.
    if let Some(key) = smallest_containing(entries, rect) {
        return Some(key);
    }
    let n = entries.len();
    // Each child's area enlargement and area, computed once for the tries,
    // the candidates and the tie-breakers below. `area(union) - area` is
    // never below zero (rounding is monotone and the union is at least the
    // child along each axis), but it is -0.0 where a width of -0.0 (a
    // rectangle from +0.0 to -0.0) makes both areas zeros of opposite
    // signs; clamped at +0.0, as `enlargement` does, since the candidates
    // are ranked by `total_cmp`, which orders -0.0 first.
    let sizes: Vec<Size> = entries
        .iter()
        .map(|e| {
            let a = area(&e.rect);
            Size {
                enlargement: max(area(&union(&e.rect, rect)) - a, 0.0),
                area: a,
            }
        })
        .collect();
    // The candidates: every child, or the OVERLAP_CANDIDATES of least area
    // enlargement (ties by position) when there are more.
    let is_candidate = |i: usize| {
        if n <= OVERLAP_CANDIDATES {
            return true;
        }
        let Some(ei) = sizes.get(i).map(|s| s.enlargement) else {
            return false;
        };
        let ahead = sizes
            .iter()
            .enumerate()
            .filter(|&(j, sj)| sj.enlargement.total_cmp(&ei).then(j.cmp(&i)) == Ordering::Less)
            .count();
        ahead < OVERLAP_CANDIDATES
    };
    let tried_among_candidates = match first_without_overlap_growth(entries, &sizes, rect, |_| true, is_candidate) {
        Tries::Found(key) => return Some(key),
        Tries::Grow => true,
        Tries::NotCandidate => false,
    };
    let mut candidates: Vec<usize> = (0..n).collect();
    if n > OVERLAP_CANDIDATES {
        let by_enlargement = |a: &usize, b: &usize| {
            let (ea, eb) = (
                sizes.get(*a).map_or(0.0, |s| s.enlargement),
                sizes.get(*b).map_or(0.0, |s| s.enlargement),
            );
            ea.total_cmp(&eb).then(a.cmp(b))
        };
        candidates.select_nth_unstable_by(OVERLAP_CANDIDATES - 1, by_enlargement);
        candidates.truncate(OVERLAP_CANDIDATES);
        candidates.sort_unstable();
    }
    if !tried_among_candidates {
        let mut pool = vec![false; n];
        for &i in &candidates {
            if let Some(p) = pool.get_mut(i) {
                *p = true;
            }
        }
        let in_pool = |i: usize| pool.get(i).copied().unwrap_or(false);
        if let Tries::Found(key) = first_without_overlap_growth(entries, &sizes, rect, in_pool, |_| true) {
            return Some(key);
        }
    }
    // The overlap enlargement of every candidate at once: lane `j` holds
    // candidate `candidates[j]` grown by `rect` and as it is, and sums over
    // the siblings in their order, exactly as a loop per candidate would
    // (the same operations in the same order, so the same bits), but in a
    // form the compiler vectorises across candidates. Branch-free: a
    // sibling disjoint from the grown rectangle adds exactly 0.0, and the
    // candidate itself adds area(e) - area(e) = 0.0.
    let mut grown = Lanes::default();
    let mut now = Lanes::default();
    for (lane, e) in candidates
        .iter()
        .filter_map(|&i| entries.get(i))
        .enumerate()
        .take(OVERLAP_CANDIDATES)
    {
        grown.set(lane, &union(&e.rect, rect));
        now.set(lane, &e.rect);
    }
    // A sibling disjoint from the bounds of every grown candidate adds
    // exactly 0.0 to every lane (each width or height clamps to 0, and a
    // sum never holds -0.0), so it is skipped without changing a bit.
    let reach = candidates
        .iter()
        .filter_map(|&i| entries.get(i))
        .map(|e| union(&e.rect, rect))
        .reduce(|a, b| union(&a, &b));
    let delta = overlap_growths(&grown, &now, entries, reach);
    let mut best: Option<(f64, f64, f64, PageId)> = None;
    for (lane, &i) in candidates.iter().enumerate() {
        let (Some(e), Some(size)) = (entries.get(i), sizes.get(i)) else {
            continue;
        };
        let delta = delta.get(lane).copied().unwrap_or(f64::INFINITY);
        keep_best(&mut best, delta, size, e.key);
    }
    best.map(|(_, _, _, k)| k)
}

/// A child's area enlargement by the new rectangle, and its area.
#[derive(Clone, Copy)]
struct Size {
    /// `area(union(child, new)) - area(child)`.
    enlargement: f64,
    /// `area(child)`.
    area: f64,
}

/// Keeps in `best` (overlap growth, area enlargement, area, key) the better
/// of itself and the child `key` of `size` with overlap growth `delta`: the
/// least overlap growth, ties broken by the least area enlargement, then
/// the least area.
fn keep_best(best: &mut Option<(f64, f64, f64, PageId)>, delta: f64, size: &Size, key: PageId) {
    let (enl, a) = (size.enlargement, size.area);
    let better = match *best {
        None => true,
        Some((bd, be, ba, _)) => delta < bd || (delta == bd && (enl < be || (enl == be && a < ba))),
    };
    if better {
        *best = Some((delta, enl, a, key));
    }
}

/// How many candidates [`first_without_overlap_growth`] tries before the
/// full computation takes over. Measured on 200,000 uniform small boxes
/// (R*-tree, 4 KiB pages): of the calls that reach it, the first try
/// answers 46 %, the second 4 % more, the third and fourth 0.3 %.
const ZERO_GROWTH_TRIES: usize = 2;

/// What [`first_without_overlap_growth`] found.
enum Tries {
    /// The child of this key: its growth increases no overlap.
    Found(PageId),
    /// Each child tried grows some overlap (or there were none to try).
    Grow,
    /// A child the tries reached is not a candidate: nothing is decided.
    NotCandidate,
}

/// The first of the [`ZERO_GROWTH_TRIES`] best children in `pool` by area
/// enlargement, then area, then position, whose growth by `rect` increases
/// its overlap with no sibling (each overlap computed as
/// [`Lanes::add_overlap_growth`] computes it), if any; the tries stop with
/// [`Tries::NotCandidate`] at a child that `candidate` refuses.
fn first_without_overlap_growth(
    entries: &[Entry],
    sizes: &[Size],
    rect: &Rect,
    pool: impl Fn(usize) -> bool,
    candidate: impl Fn(usize) -> bool,
) -> Tries {
    // (area enlargement, area, position): a total order (positions differ)
    let before = |a: &(f64, f64, usize), b: &(f64, f64, usize)| {
        a.0 < b.0 || (a.0 == b.0 && (a.1 < b.1 || (a.1 == b.1 && a.2 < b.2)))
    };
    let mut tried: Option<(f64, f64, usize)> = None;
    for _ in 0..ZERO_GROWTH_TRIES {
        // The first child of the pool after `tried` in that order (a plain
        // loop: as an iterator chain, whether it was inlined depended on
        // how the crate happened to be split into codegen units, and its
        // cost doubled when it was not).
        let mut next: Option<(f64, f64, usize)> = None;
        for (i, size) in sizes.iter().enumerate() {
            if !pool(i) {
                continue;
            }
            let k = (size.enlargement, size.area, i);
            if tried.is_some_and(|t| !before(&t, &k)) {
                continue;
            }
            if next.is_none_or(|a| before(&k, &a)) {
                next = Some(k);
            }
        }
        let Some(next) = next else {
            return Tries::Grow;
        };
        if !candidate(next.2) {
            return Tries::NotCandidate;
        }
        let Some(e) = entries.get(next.2) else {
            return Tries::Grow;
        };
        let grown = union(&e.rect, rect);
        let grows = entries.iter().any(|other| {
            let o = &other.rect;
            let w = max(
                min(grown.max_x(), o.max_x()) - max(grown.min_x(), o.min_x()),
                0.0,
            );
            let h = max(
                min(grown.max_y(), o.max_y()) - max(grown.min_y(), o.min_y()),
                0.0,
            );
            let bw = max(
                min(e.rect.max_x(), o.max_x()) - max(e.rect.min_x(), o.min_x()),
                0.0,
            );
            let bh = max(
                min(e.rect.max_y(), o.max_y()) - max(e.rect.min_y(), o.min_y()),
                0.0,
            );
            w * h - bw * bh > 0.0
        });
        if !grows {
            return Tries::Found(e.key);
        }
        tried = Some(next);
    }
    Tries::Grow
}

/// The smallest child that contains `rect` (the first in key order on ties).
fn smallest_containing(entries: &[Entry], rect: &Rect) -> Option<PageId> {
    let mut containing: Option<(f64, PageId)> = None;
    for e in entries {
        if e.rect.contains(rect) {
            let a = area(&e.rect);
            if containing.is_none_or(|(ba, _)| a < ba) {
                containing = Some((a, e.key));
            }
        }
    }
    containing.map(|(_, key)| key)
}

/// The overlap growth of every lane: for each lane `j`, the sum over the
/// siblings `entries` of the area of their intersection with lane `j` of
/// `grown` minus that with lane `j` of `now`. A sibling disjoint from
/// `reach` (the bounds of every grown lane) adds exactly 0.0 to every lane
/// and is skipped.
///
/// The arithmetic is the same, lane by lane and in the same order, on
/// every CPU; where the CPU has AVX2 (detected at run time, once, by the
/// standard library) the lanes go four to an instruction instead of two,
/// which halves the cost of the R*-tree's most expensive step. Both paths
/// give the same bits: each lane is computed on its own, with the same
/// IEEE operations.
fn overlap_growths(
    grown: &Lanes,
    now: &Lanes,
    entries: &[Entry],
    reach: Option<Rect>,
) -> [f64; OVERLAP_CANDIDATES] {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the only requirement of a `#[target_feature]` function is
        // that the CPU has the feature, and it was detected just above.
        #[allow(unsafe_code)]
        return unsafe { overlap_growths_avx2(grown, now, entries, reach) };
    }
    sum_overlap_growths(grown, now, entries, reach)
}

/// [`sum_overlap_growths`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn overlap_growths_avx2(
    grown: &Lanes,
    now: &Lanes,
    entries: &[Entry],
    reach: Option<Rect>,
) -> [f64; OVERLAP_CANDIDATES] {
    sum_overlap_growths(grown, now, entries, reach)
}

/// The body of [`overlap_growths`], inlined into each of its versions.
#[inline(always)]
fn sum_overlap_growths(
    grown: &Lanes,
    now: &Lanes,
    entries: &[Entry],
    reach: Option<Rect>,
) -> [f64; OVERLAP_CANDIDATES] {
    let mut delta = [0.0f64; OVERLAP_CANDIDATES];
    for other in entries {
        let o = &other.rect;
        if reach.is_some_and(|b| {
            o.max_x() < b.min_x()
                || o.min_x() > b.max_x()
                || o.max_y() < b.min_y()
                || o.min_y() > b.max_y()
        }) {
            continue;
        }
        grown.add_overlap_growth(now, o, &mut delta);
    }
    delta
}

/// Up to [`OVERLAP_CANDIDATES`] rectangles as four arrays of coordinates
/// (the unused lanes are the empty rectangle at the origin).
#[derive(Default)]
struct Lanes {
    min_x: [f64; OVERLAP_CANDIDATES],
    min_y: [f64; OVERLAP_CANDIDATES],
    max_x: [f64; OVERLAP_CANDIDATES],
    max_y: [f64; OVERLAP_CANDIDATES],
}

impl Lanes {
    fn set(&mut self, lane: usize, r: &Rect) {
        let slots = [
            (&mut self.min_x, r.min_x()),
            (&mut self.min_y, r.min_y()),
            (&mut self.max_x, r.max_x()),
            (&mut self.max_y, r.max_y()),
        ];
        for (array, v) in slots {
            if let Some(slot) = array.get_mut(lane) {
                *slot = v;
            }
        }
    }

    /// Adds to `delta[j]`, for every lane `j`, the area of this lane's
    /// intersection with `o` minus that of lane `j` of `before`, each
    /// computed as [`Rect::overlap_area`] computes it (same operations,
    /// same order).
    #[inline(always)]
    fn add_overlap_growth(&self, before: &Lanes, o: &Rect, delta: &mut [f64; OVERLAP_CANDIDATES]) {
        for (j, d) in delta.iter_mut().enumerate() {
            let w = max(
                min(self.max_x[j], o.max_x()) - max(self.min_x[j], o.min_x()),
                0.0,
            );
            let h = max(
                min(self.max_y[j], o.max_y()) - max(self.min_y[j], o.min_y()),
                0.0,
            );
            let bw = max(
                min(before.max_x[j], o.max_x()) - max(before.min_x[j], o.min_x()),
                0.0,
            );
            let bh = max(
                min(before.max_y[j], o.max_y()) - max(before.min_y[j], o.min_y()),
                0.0,
            );
            *d += w * h - bw * bh;
        }
    }
}

/// `a < b ? a : b`, as the geometry's own minimum (no NaN handling:
/// rectangles hold no NaN).
#[inline(always)]
fn min(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

/// `a > b ? a : b`, as the geometry's own maximum.
#[inline(always)]
fn max(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

/// Splits an overflowing node's entries into those kept and the `p` whose
/// centres lie farthest from the centre of the node's MBR. The removed ones
/// come back nearest first (the paper's "close reinsert").
pub(crate) fn pick_reinsert(entries: Vec<Entry>, p: usize) -> (Vec<Entry>, Vec<Entry>) {
    let Some(bounds) = super::ops::mbr(&entries) else {
        return (entries, Vec::new());
    };
    let (cx, cy) = center(&bounds);
    let mut with_dist: Vec<(f64, Entry)> = entries
        .into_iter()
        .map(|e| {
            let (x, y) = center(&e.rect);
            ((x - cx).powi(2) + (y - cy).powi(2), e)
        })
        .collect();
    // Farthest first; equal distances keep their node order (stable sort).
    with_dist.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal));
    let p = p.min(with_dist.len());
    let keep: Vec<Entry> = with_dist.split_off(p).into_iter().map(|(_, e)| e).collect();
    let removed: Vec<Entry> = with_dist.into_iter().rev().map(|(_, e)| e).collect();
    (keep, removed)
}

#[cfg(test)]
mod tests {
    use super::super::ops::{enlargement, overlap};
    use super::*;
    use proptest::prelude::*;

    /// ChooseSubtree by overlap as one loop per candidate: the oracle of
    /// the lane-parallel [`choose_by_overlap`].
    fn choose_by_overlap_per_candidate(entries: &[Entry], rect: &Rect) -> Option<PageId> {
        if let Some(key) = smallest_containing(entries, rect) {
            return Some(key);
        }
        // The candidates by a full sort on (enlargement, position).
        let mut by_enlargement: Vec<(f64, usize)> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (enlargement(&e.rect, rect), i))
            .collect();
        by_enlargement.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut candidates: Vec<usize> = by_enlargement
            .into_iter()
            .take(OVERLAP_CANDIDATES)
            .map(|(_, i)| i)
            .collect();
        candidates.sort_unstable();
        let mut best: Option<(f64, f64, f64, PageId)> = None;
        for &i in &candidates {
            let e = &entries[i];
            let grown = union(&e.rect, rect);
            let mut delta = 0.0;
            for other in entries {
                delta += overlap(&grown, &other.rect) - overlap(&e.rect, &other.rect);
            }
            let size = Size {
                enlargement: enlargement(&e.rect, rect),
                area: area(&e.rect),
            };
            keep_best(&mut best, delta, &size, e.key);
        }
        best.map(|(_, _, _, k)| k)
    }

    fn rect_strategy() -> impl Strategy<Value = Rect> {
        // Coarse coordinates make ties and shared edges common.
        (0u8..40, 0u8..40, 0u8..12, 0u8..12).prop_map(|(x, y, w, h)| {
            let (x, y) = (f64::from(x) / 4.0, f64::from(y) / 4.0);
            Rect::new(x, y, x + f64::from(w) / 4.0, y + f64::from(h) / 4.0).unwrap()
        })
    }

    /// Small rectangles spread over a wide area, as the children of a node
    /// low in a tree of small objects: a grown child often overlaps no
    /// more than before (the early answer), sometimes more (the full sum).
    fn sparse_rect_strategy() -> impl Strategy<Value = Rect> {
        (0u8..160, 0u8..160, 0u8..24, 0u8..24).prop_map(|(x, y, w, h)| {
            let (x, y) = (f64::from(x) / 8.0, f64::from(y) / 8.0);
            Rect::new(x, y, x + f64::from(w) / 8.0, y + f64::from(h) / 8.0).unwrap()
        })
    }

    fn keyed(rects: &[Rect]) -> Vec<Entry> {
        rects
            .iter()
            .enumerate()
            .map(|(i, r)| Entry {
                key: 10 + 3 * i as u64,
                rect: *r,
                payload: 0,
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// Dense children (many ties and shared edges) and sparse ones
        /// (the early answer and the full sum both common).
        #[test]
        fn lane_parallel_choice_equals_the_loop_per_candidate(
            (rects, new) in prop_oneof![
                (prop::collection::vec(rect_strategy(), 1..120), rect_strategy()),
                (prop::collection::vec(sparse_rect_strategy(), 1..120), sparse_rect_strategy()),
            ],
        ) {
            let entries = keyed(&rects);
            prop_assert_eq!(
                choose_by_overlap(&entries, &new),
                choose_by_overlap_per_candidate(&entries, &new)
            );
        }
    }

    /// Strips right of the unit square `[0,1]²`, each `[1+d, 1+d+w] × [0,1]`:
    /// the unit square's enlargement of a strip is `1+d` whatever its width
    /// `w`, so with few gaps `d` many children tie on the least enlargement
    /// and differ in area.
    fn strips(gaps_and_widths: &[(u8, u8)]) -> Vec<Entry> {
        let rects: Vec<Rect> = gaps_and_widths
            .iter()
            .map(|&(d, w)| {
                let x = 1.0 + f64::from(d) / 4.0;
                Rect::new(x, 0.0, x + f64::from(w) / 8.0, 1.0).unwrap()
            })
            .collect();
        keyed(&rects)
    }

    /// More than OVERLAP_CANDIDATES children tie on the least enlargement,
    /// and the smallest of them (the first in the tries' order) lies beyond
    /// the candidates: the tries over every child must defer to the
    /// candidates' own.
    #[test]
    fn a_tied_child_beyond_the_candidates_is_not_chosen_by_the_tries() {
        let mut spec: Vec<(u8, u8)> = (0..40).map(|i| (0, 10 + (i % 7) as u8)).collect();
        spec[39] = (0, 1);
        let entries = strips(&spec);
        let new = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
        let chosen = choose_by_overlap(&entries, &new);
        assert_eq!(chosen, choose_by_overlap_per_candidate(&entries, &new));
        assert_ne!(chosen, Some(entries[39].key));
    }

    /// A rectangle from +0.0 to -0.0 has a width, and so an area, of
    /// -0.0, and a child's enlargement by it can come out as -0.0: ranked
    /// by `total_cmp` as such, 32 children of enlargement "-0.0" would push
    /// the first child (+0.0 after clamping, as `enlargement` gives) out of
    /// the candidates.
    #[test]
    fn signed_zero_enlargements_rank_as_zero() {
        let r = |a, b, c, d| Rect::new(a, b, c, d).unwrap();
        let mut rects = vec![r(0.0, 0.0, -0.0, 5.0)];
        rects.extend((0..32).map(|_| r(0.0, 0.0, 0.0, 5.0)));
        let entries = keyed(&rects);
        let new = r(0.0, 0.0, -0.0, 10.0);
        assert_eq!(
            choose_by_overlap(&entries, &new),
            choose_by_overlap_per_candidate(&entries, &new)
        );
        assert_eq!(choose_by_overlap(&entries, &new), Some(entries[0].key));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// Many children tied on the least enlargement (and so on whether
        /// they are candidates), with different areas.
        #[test]
        fn tied_enlargements_choose_as_the_loop_per_candidate(
            spec in prop::collection::vec((0u8..3, 1u8..20), 1..90),
            side in 1u8..12,
        ) {
            let entries = strips(&spec);
            let new = Rect::new(0.0, 0.0, 1.0, f64::from(side) / 8.0).unwrap();
            prop_assert_eq!(
                choose_by_overlap(&entries, &new),
                choose_by_overlap_per_candidate(&entries, &new)
            );
        }
    }

    /// Hand-worked: the child of least area enlargement (key 1, 0.3) would
    /// come to overlap key 2 (by 0.1 × 0.2), so the rule takes key 2
    /// (enlargement 0.5), whose growth overlaps nothing; without key 2,
    /// key 1's growth overlaps nothing and the least enlargement wins.
    #[test]
    fn the_least_enlargement_loses_to_a_child_whose_growth_overlaps_nothing() {
        let r = |a, b, c, d| Rect::new(a, b, c, d).unwrap();
        let e = |key, rect| Entry {
            key,
            rect,
            payload: 0,
        };
        let a = e(1, r(0.0, 0.0, 1.0, 1.0));
        let b = e(2, r(1.1, 0.8, 1.2, 5.0));
        let d = e(3, r(5.0, 5.0, 6.0, 6.0));
        let new = r(1.2, 0.4, 1.3, 0.6);
        let all = [a, b, d];
        assert_eq!(choose_by_overlap(&all, &new), Some(2));
        assert_eq!(choose_by_overlap_per_candidate(&all, &new), Some(2));
        assert_eq!(choose_by_overlap(&[a, d], &new), Some(1));
    }
}
