//! The R*-tree's own steps (Beckmann, Kriegel, Schneider, Seeger 1990):
//! ChooseSubtree by overlap enlargement when the children are leaves, and the
//! choice of entries for forced reinsertion. The R* split is in `split`.
use std::cmp::Ordering;

use super::ops::{area, center, enlargement, overlap, union};
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
    // child (first in key order on ties) without the quadratic scan.
    let mut containing: Option<(f64, PageId)> = None;
    for e in entries {
        if e.rect.contains(rect) {
            let a = area(&e.rect);
            if containing.is_none_or(|(ba, _)| a < ba) {
                containing = Some((a, e.key));
            }
        }
    }
    if let Some((_, key)) = containing {
        return Some(key);
    }
    let mut candidates: Vec<usize> = (0..entries.len()).collect();
    if entries.len() > OVERLAP_CANDIDATES {
        let enl: Vec<f64> = entries.iter().map(|e| enlargement(&e.rect, rect)).collect();
        let by_enlargement = |a: &usize, b: &usize| {
            let (ea, eb) = (
                enl.get(*a).copied().unwrap_or(0.0),
                enl.get(*b).copied().unwrap_or(0.0),
            );
            ea.total_cmp(&eb).then(a.cmp(b))
        };
        candidates.select_nth_unstable_by(OVERLAP_CANDIDATES - 1, by_enlargement);
        candidates.truncate(OVERLAP_CANDIDATES);
        candidates.sort_unstable();
    }
    let mut best: Option<(f64, f64, f64, PageId)> = None;
    for &i in &candidates {
        let Some(e) = entries.get(i) else { continue };
        let grown = union(&e.rect, rect);
        // Branch-free over every sibling (as fast as the data allows: no
        // unpredictable branch). A sibling disjoint from `grown` adds exactly
        // 0.0, and the child itself adds area(e) - area(e) = 0.0 exactly
        // (`grown` contains it, so both intersections are `e.rect`), so the
        // sum equals the one over the other, intersecting siblings.
        let mut delta = 0.0;
        for other in entries {
            delta += overlap(&grown, &other.rect) - overlap(&e.rect, &other.rect);
        }
        let enl = area(&grown) - area(&e.rect);
        let a = area(&e.rect);
        let better = match best {
            None => true,
            Some((bd, be, ba, _)) => {
                delta < bd || (delta == bd && (enl < be || (enl == be && a < ba)))
            }
        };
        if better {
            best = Some((delta, enl, a, e.key));
        }
    }
    best.map(|(_, _, _, k)| k)
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
