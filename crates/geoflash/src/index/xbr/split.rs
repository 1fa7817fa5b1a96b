//! Node splits of the xBR+-tree (see the module documentation of
//! [`super`]): both choose a quadrant S inside the node's quadrant and move
//! what lies inside S to a new node.
use std::cmp::Reverse;

use super::quad::{self, Domain, Quadrant};
use crate::page::Entry;
use crate::{Error, Result};

/// The outcome of a split: the entries that stay, those that move, and the
/// quadrant of the new node.
#[derive(Debug)]
pub(crate) struct Split {
    /// Entries left in the node.
    pub(crate) stay: Vec<Entry>,
    /// Entries of the new node.
    pub(crate) moved: Vec<Entry>,
    /// Quadrant of the new node.
    pub(crate) quad: Quadrant,
}

/// How far `part` of `n` is from an even split (smaller is better).
fn imbalance(part: usize, n: usize) -> usize {
    (2 * part).abs_diff(n)
}

/// Partitions `entries` by the indices in `moved` (sorted ascending).
fn partition(entries: Vec<Entry>, moved: &[usize], quad: Quadrant) -> Split {
    let mut stay = Vec::with_capacity(entries.len() - moved.len());
    let mut out = Vec::with_capacity(moved.len());
    let mut m = moved.iter().peekable();
    for (i, e) in entries.into_iter().enumerate() {
        if m.peek() == Some(&&i) {
            m.next();
            out.push(e);
        } else {
            stay.push(e);
        }
    }
    Split {
        stay,
        moved: out,
        quad,
    }
}

/// Splits an overflowing leaf of quadrant `quad` (page `page`): down the
/// chain of sub-quadrants holding most of its points, the one whose share
/// is closest to one half. Points that no quadrant down to the finest
/// level separates are an error.
pub(crate) fn split_leaf(domain: &Domain, quad: Quadrant, entries: Vec<Entry>) -> Result<Split> {
    let codes = entries
        .iter()
        .map(|e| domain.code(&quad::entry_point(e)))
        .collect::<Result<Vec<u64>>>()?;
    let n = entries.len();
    let mut cur = quad;
    let mut members: Vec<usize> = (0..n).collect();
    let mut best: Option<(usize, Quadrant, Vec<usize>)> = None;
    while cur.level() < quad::MAX_LEVEL {
        let mut parts: [Vec<usize>; 4] = Default::default();
        for &i in &members {
            let d = cur.digit_of(codes[i]).unwrap_or(0);
            parts[usize::from(d)].push(i);
        }
        let (digit, part) = parts
            .into_iter()
            .enumerate()
            .max_by_key(|(d, v)| (v.len(), Reverse(*d)))
            .unwrap_or_default();
        let Some(q) = cur.child(digit as u8) else {
            break;
        };
        let c = part.len();
        if c < n && best.as_ref().is_none_or(|(s, _, _)| imbalance(c, n) < *s) {
            best = Some((imbalance(c, n), q, part.clone()));
        }
        if c <= 1 {
            break;
        }
        cur = q;
        members = part;
    }
    let Some((_, q, moved)) = best else {
        let (w, h) = domain.finest_cell();
        return Err(Error::invalid(format!(
            "more than {} points lie within one finest cell ({w:e} × {h:e}) of the xBR+-tree's domain: \
             they cannot be told apart (declare a smaller domain)",
            n - 1
        )));
    };
    Ok(partition(entries, &moved, q))
}

/// Splits an overflowing internal node of quadrant `quad` (page `page`):
/// S is the quadrant of one of its entries (not the node's own) that moves
/// the number of entries closest to one half; ties go to the larger
/// quadrant, then to the first entry.
pub(crate) fn split_internal(quad: Quadrant, mut entries: Vec<Entry>, page: u64) -> Result<Split> {
    entries.sort_by_key(|e| e.key);
    let quads = entries
        .iter()
        .map(|e| quad::child_ref(e, page).map(|c| c.quad))
        .collect::<Result<Vec<Quadrant>>>()?;
    let n = entries.len();
    let mut best: Option<(usize, u8, usize)> = None;
    for (f, qf) in quads.iter().enumerate() {
        if *qf == quad || !quad.contains(qf) {
            continue;
        }
        let moved = quads.iter().filter(|q| qf.contains(q)).count();
        if moved >= n {
            continue;
        }
        let score = (imbalance(moved, n), qf.level(), f);
        if best.is_none_or(|b| score < b) {
            best = Some(score);
        }
    }
    let Some((_, _, f)) = best else {
        return Err(Error::corrupt(
            Some(page),
            "an overflowing xBR+-tree node has no entry quadrant to split off",
        ));
    };
    let s = quads[f];
    let moved: Vec<usize> = (0..n).filter(|&i| s.contains(&quads[i])).collect();
    Ok(partition(entries, &moved, s))
}
