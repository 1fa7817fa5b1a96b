//! Node splits: Guttman's linear, quadratic and exponential splits and the
//! R* split. Each takes the M + 1 entries of an overflowing node and returns
//! two groups of at least m entries each. Ties are broken by entry order,
//! so a split is deterministic.
use super::ops::{area, enlargement, margin, mbr, ordered_bits, overlap, union};
use super::params::{IndexKind, SplitKind, TreeParams};
use crate::geom::Rect;
use crate::page::Entry;
use crate::{Error, Result};

/// Splits `entries` per the tree's parameters.
pub(crate) fn split(params: &TreeParams, entries: Vec<Entry>) -> Result<(Vec<Entry>, Vec<Entry>)> {
    let m = params.min_entries;
    if entries.len() < 2 * m {
        return Err(Error::corrupt(
            None,
            format!(
                "split of {} entries cannot give two groups of m = {m}",
                entries.len()
            ),
        ));
    }
    let (a, b) = match (params.kind, params.split) {
        (IndexKind::RStar, _) => rstar_split(entries, m),
        (_, SplitKind::Linear) => guttman_split(entries, m, false),
        (_, SplitKind::Quadratic) => guttman_split(entries, m, true),
        (_, SplitKind::Exponential) => exponential_split(entries, m),
    };
    if a.len() < m || b.len() < m {
        return Err(Error::corrupt(None, "split produced an underfull group"));
    }
    Ok((a, b))
}

/// Guttman's linear PickSeeds: the pair with the greatest separation along
/// one axis, normalised by the width of the whole set along that axis.
fn linear_seeds(entries: &[Entry]) -> (usize, usize) {
    let Some(all) = mbr(entries) else {
        return (0, 1);
    };
    let mut best: Option<(f64, usize, usize)> = None;
    type Side = fn(&Rect) -> f64;
    let axes: [(Side, Side, f64); 2] = [
        (|r| r.min_x(), |r| r.max_x(), all.max_x() - all.min_x()),
        (|r| r.min_y(), |r| r.max_y(), all.max_y() - all.min_y()),
    ];
    for (low, high, width) in axes {
        // Entry with the highest low side.
        let mut hl = 0;
        for (i, e) in entries.iter().enumerate() {
            if entries.get(hl).is_some_and(|h| low(&e.rect) > low(&h.rect)) {
                hl = i;
            }
        }
        // Entry with the lowest high side, another one.
        let mut lh: Option<usize> = None;
        for (i, e) in entries.iter().enumerate() {
            if i == hl {
                continue;
            }
            let better = match lh.and_then(|j| entries.get(j)) {
                None => true,
                Some(l) => high(&e.rect) < high(&l.rect),
            };
            if better {
                lh = Some(i);
            }
        }
        let Some(lh) = lh else { continue };
        let (Some(a), Some(b)) = (entries.get(hl), entries.get(lh)) else {
            continue;
        };
        let sep = low(&a.rect) - high(&b.rect);
        let norm = if width > 0.0 { sep / width } else { sep };
        if best.is_none_or(|(s, _, _)| norm > s) {
            best = Some((norm, hl, lh));
        }
    }
    best.map(|(_, a, b)| (a, b)).unwrap_or((0, 1))
}

/// Guttman's quadratic PickSeeds: the pair wasting the most area if grouped.
fn quadratic_seeds(entries: &[Entry]) -> (usize, usize) {
    let mut best: Option<(f64, usize, usize)> = None;
    for (i, a) in entries.iter().enumerate() {
        for (j, b) in entries.iter().enumerate().skip(i + 1) {
            let d = area(&union(&a.rect, &b.rect)) - area(&a.rect) - area(&b.rect);
            if best.is_none_or(|(bd, _, _)| d > bd) {
                best = Some((d, i, j));
            }
        }
    }
    best.map(|(_, a, b)| (a, b)).unwrap_or((0, 1))
}

/// Guttman's split: seeds, then the remaining entries one by one (quadratic:
/// PickNext by greatest preference; linear: in order) to the group needing
/// least enlargement, ties by smaller area, then fewer entries; a group that
/// needs every remaining entry to reach m gets them all.
fn guttman_split(entries: Vec<Entry>, m: usize, quadratic: bool) -> (Vec<Entry>, Vec<Entry>) {
    let (s1, s2) = if quadratic {
        quadratic_seeds(&entries)
    } else {
        linear_seeds(&entries)
    };
    let mut a = Vec::with_capacity(entries.len());
    let mut b = Vec::with_capacity(entries.len());
    let mut rest = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        if i == s1 {
            a.push(e);
        } else if i == s2 {
            b.push(e);
        } else {
            rest.push(e);
        }
    }
    let (Some(mut ra), Some(mut rb)) = (mbr(&a), mbr(&b)) else {
        a.append(&mut b);
        let half = a.len() / 2;
        let b = a.split_off(half);
        return (a, b);
    };
    while !rest.is_empty() {
        if a.len() + rest.len() <= m {
            a.append(&mut rest);
            break;
        }
        if b.len() + rest.len() <= m {
            b.append(&mut rest);
            break;
        }
        let pick = if quadratic {
            let mut best = (f64::NEG_INFINITY, 0);
            for (i, e) in rest.iter().enumerate() {
                let d = (enlargement(&ra, &e.rect) - enlargement(&rb, &e.rect)).abs();
                if d > best.0 {
                    best = (d, i);
                }
            }
            best.1
        } else {
            0
        };
        let e = rest.remove(pick.min(rest.len() - 1));
        let (ea, eb) = (enlargement(&ra, &e.rect), enlargement(&rb, &e.rect));
        let to_a = if ea != eb {
            ea < eb
        } else if area(&ra) != area(&rb) {
            area(&ra) < area(&rb)
        } else {
            a.len() <= b.len()
        };
        if to_a {
            ra = union(&ra, &e.rect);
            a.push(e);
        } else {
            rb = union(&rb, &e.rect);
            b.push(e);
        }
    }
    (a, b)
}

/// The exhaustive split: of every partition into two groups of at least m
/// entries, the one with the smallest total area (ties: the first found).
/// Only for small M (checked by [`TreeParams::verify`]).
fn exponential_split(entries: Vec<Entry>, m: usize) -> (Vec<Entry>, Vec<Entry>) {
    let n = entries.len();
    if !(2..64).contains(&n) {
        return guttman_split(entries, m, true);
    }
    // Entry 0 is always in group A, so each partition is seen once.
    let mut best: Option<(f64, u64)> = None;
    for mask in 0u64..(1u64 << (n - 1)) {
        let nb = mask.count_ones() as usize;
        if nb < m || n - nb < m {
            continue;
        }
        let mut ra: Option<Rect> = None;
        let mut rb: Option<Rect> = None;
        for (i, e) in entries.iter().enumerate() {
            let in_b = i > 0 && (mask >> (i - 1)) & 1 == 1;
            let slot = if in_b { &mut rb } else { &mut ra };
            *slot = Some(match slot {
                Some(r) => union(r, &e.rect),
                None => e.rect,
            });
        }
        let cost = ra.map_or(0.0, |r| area(&r)) + rb.map_or(0.0, |r| area(&r));
        if best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, mask));
        }
    }
    let Some((_, mask)) = best else {
        return guttman_split(entries, m, true);
    };
    let mut a = Vec::new();
    let mut b = Vec::new();
    for (i, e) in entries.into_iter().enumerate() {
        if i > 0 && (mask >> (i - 1)) & 1 == 1 {
            b.push(e);
        } else {
            a.push(e);
        }
    }
    (a, b)
}

/// Prefix and suffix MBRs of a sorted entry list.
fn prefix_suffix(sorted: &[Entry]) -> (Vec<Rect>, Vec<Rect>) {
    let mut pre = Vec::with_capacity(sorted.len());
    for e in sorted {
        let r = match pre.last() {
            Some(p) => union(p, &e.rect),
            None => e.rect,
        };
        pre.push(r);
    }
    let mut suf = Vec::with_capacity(sorted.len());
    for e in sorted.iter().rev() {
        let r = match suf.last() {
            Some(p) => union(p, &e.rect),
            None => e.rect,
        };
        suf.push(r);
    }
    suf.reverse();
    (pre, suf)
}

/// The R* split: the axis with the least sum of margins over all
/// distributions (entries sorted by lower, then by upper value), then on that
/// axis the distribution with least overlap, ties by least total area.
fn rstar_split(entries: Vec<Entry>, m: usize) -> (Vec<Entry>, Vec<Entry>) {
    let n = entries.len();
    // Each order sorts (primary, secondary, position) with integer keys
    // that order as `f64::total_cmp` does: the stable sort by the two
    // values that the R* split defines, with ties in entry order, without
    // comparing floats or moving 48-byte entries while sorting.
    let sorted_by = |axis: usize, by_upper: bool| -> Vec<Entry> {
        let mut keys: Vec<(u64, u64, u32)> = entries
            .iter()
            .zip(0u32..)
            .map(|(e, i)| {
                let r = &e.rect;
                let (lo, hi) = match axis {
                    0 => (r.min_x(), r.max_x()),
                    _ => (r.min_y(), r.max_y()),
                };
                let (a, b) = if by_upper { (hi, lo) } else { (lo, hi) };
                (ordered_bits(a), ordered_bits(b), i)
            })
            .collect();
        keys.sort_unstable();
        keys.iter()
            .filter_map(|&(_, _, i)| entries.get(i as usize).copied())
            .collect()
    };
    // The four orders (axis × lower or upper value), each sorted once and
    // used by both steps below.
    let mut orders = [[false, true].map(|u| sorted_by(0, u)), [false, true].map(|u| sorted_by(1, u))];
    // First group sizes k = m ..= n - m.
    let mut best_axis = (f64::INFINITY, 0usize);
    for (axis, sorts) in orders.iter().enumerate() {
        let mut margins = 0.0;
        for s in sorts {
            let (pre, suf) = prefix_suffix(s);
            for k in m..=n - m {
                if let (Some(p), Some(q)) = (pre.get(k - 1), suf.get(k)) {
                    margins += margin(p) + margin(q);
                }
            }
        }
        if margins < best_axis.0 {
            best_axis = (margins, axis);
        }
    }
    let axis = best_axis.1;
    let mut best: Option<(f64, f64, bool, usize)> = None;
    for (s, by_upper) in orders[axis].iter().zip([false, true]) {
        let (pre, suf) = prefix_suffix(s);
        for k in m..=n - m {
            if let (Some(p), Some(q)) = (pre.get(k - 1), suf.get(k)) {
                let ov = overlap(p, q);
                let ar = area(p) + area(q);
                let better = match best {
                    None => true,
                    Some((bo, ba, _, _)) => ov < bo || (ov == bo && ar < ba),
                };
                if better {
                    best = Some((ov, ar, by_upper, k));
                }
            }
        }
    }
    let (by_upper, k) = best.map_or((false, n / 2), |(_, _, u, k)| (u, k));
    let mut a = std::mem::take(&mut orders[axis][usize::from(by_upper)]);
    let b = a.split_off(k.min(a.len()));
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(key: u64, x: f64, y: f64, w: f64) -> Entry {
        Entry {
            key,
            rect: Rect::new(x, y, x + w, y + w).unwrap(),
            payload: 0,
        }
    }

    fn two_clusters() -> Vec<Entry> {
        let mut v = Vec::new();
        for i in 0..5 {
            v.push(e(i, i as f64 * 0.1, 0.0, 0.05));
            v.push(e(100 + i, 50.0 + i as f64 * 0.1, 50.0, 0.05));
        }
        v
    }

    #[test]
    fn every_split_separates_two_clusters_and_respects_m() {
        for (kind, split_kind) in [
            (IndexKind::RTree, SplitKind::Linear),
            (IndexKind::RTree, SplitKind::Quadratic),
            (IndexKind::RTree, SplitKind::Exponential),
            (IndexKind::RStar, SplitKind::Quadratic),
        ] {
            let p = TreeParams::new(kind, 9)
                .with_split(split_kind)
                .with_min_entries(4);
            let (a, b) = split(&p, two_clusters()).unwrap();
            assert_eq!(a.len() + b.len(), 10);
            assert!(a.len() >= 4 && b.len() >= 4, "{kind:?} {split_kind:?}");
            let low = |g: &Vec<Entry>| g.iter().all(|e| e.key < 100);
            let high = |g: &Vec<Entry>| g.iter().all(|e| e.key >= 100);
            assert!(
                (low(&a) && high(&b)) || (high(&a) && low(&b)),
                "{kind:?} {split_kind:?}: {a:?} {b:?}"
            );
        }
    }

    #[test]
    fn identical_rectangles_still_split_with_min_fill() {
        let v: Vec<Entry> = (0..13).map(|i| e(i, 1.0, 1.0, 0.0)).collect();
        for split_kind in [
            SplitKind::Linear,
            SplitKind::Quadratic,
            SplitKind::Exponential,
        ] {
            let p = TreeParams::new(IndexKind::RTree, 12).with_split(split_kind);
            let (a, b) = split(&p, v.clone()).unwrap();
            assert!(a.len() >= 6 && b.len() >= 6, "{split_kind:?}");
        }
        let p = TreeParams::new(IndexKind::RStar, 12);
        let (a, b) = split(&p, v).unwrap();
        assert!(a.len() >= 6 && b.len() >= 6);
    }
}
