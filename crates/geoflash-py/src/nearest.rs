//! The exact k-nearest search of `Index.query_nearest` and `Index.nearest`
//! of a geometry, over the entries the Rust refinement decides
//! ([`Geometries`]), in one call for any number of inputs.
//!
//! Two steps per input. The k entries nearest by box give a bound, the
//! k-th smallest of their exact distances (an entry's box is never
//! farther than the entry; with `exclusive` leaving fewer than k, the box
//! search is repeated with 4 times as many). Then every entry whose box
//! lies within the bound is a candidate, refined by exact distance. The
//! entries of the caller's special ids (refined with shapely, see
//! `_exact._Tree`) are left out of both steps.
//!
//! The Python layer ran the same steps as four calls with NumPy between
//! them: about 50 µs of fixed cost for one geometry, most of the call.

use geoflash_engine::engine::{Error, Geometry, Index, Predicate, Result};
use geoflash_engine::geom::Rect;

use crate::core::{batch_ids, clamp, nearest_of};
use crate::predicates::{on_every_core, Geometries};

/// Inputs from which both steps run in shares, one thread per core: a
/// search of one input costs a few µs, a thread about 30.
const PARALLEL_INPUTS: usize = 256;

/// What the search looks for, the same for every input.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wanted {
    /// How many entries per input (and with `all_matches` every one tied
    /// with the k-th).
    pub k: usize,
    /// Every entry at the k-th distance, not only k.
    pub all_matches: bool,
    /// Leave out entries equal to their input.
    pub exclusive: bool,
    /// No entry farther than this (infinity: no limit).
    pub max_distance: f64,
}

/// The answer: the pairs (input position, entry id, exact distance), by
/// input then distance then id, and each input's bound (its k-th exact
/// distance among its k nearest boxes, or `max_distance` when smaller;
/// infinity when there are fewer than k entries).
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub inputs: Vec<i64>,
    pub ids: Vec<i64>,
    pub distances: Vec<f64>,
    pub bounds: Vec<f64>,
}

/// The search of `inputs` (with their boxes `boxes`) in `index`, whose
/// geometries are `geoms`, without the entries of `special` (sorted ids).
pub(crate) fn search(
    index: &Index,
    geoms: &Geometries,
    inputs: &[Geometry],
    boxes: &[Rect],
    special: &[i64],
    want: Wanted,
) -> Result<Found> {
    if inputs.len() != boxes.len() {
        return Err(Error::invalid(format!(
            "{} input geometries and {} boxes: expected as many of each",
            inputs.len(),
            boxes.len()
        )));
    }
    let total = index.len() as usize;
    let parallel = inputs.len() >= PARALLEL_INPUTS;
    let bounds: Vec<f64> = on_every_core(inputs.len(), parallel, |share| {
        share
            .map(|i| bound(index, geoms, &inputs[i], boxes[i], special, want, total))
            .collect::<Result<Vec<f64>>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    let limits: Vec<f64> = bounds.iter().map(|b| b.min(want.max_distance)).collect();
    let within: Vec<usize> = (0..inputs.len())
        .filter(|&i| limits[i].is_finite())
        .collect();
    let windows = within
        .iter()
        .map(|&i| grown(&boxes[i], limits[i]))
        .collect::<Result<Vec<Rect>>>()?;
    let (offsets, ids) = batch_ids(index, &windows, Predicate::Intersects, false)?;
    let parts = on_every_core(within.len(), parallel, |share| {
        let mut found = Found::default();
        for w in share {
            let i = within[w];
            let candidates = without(special, &ids[offsets[w] as usize..offsets[w + 1] as usize]);
            let d = geoms.distances(&inputs[i], &candidates, want.exclusive)?;
            for (id, dist) in nearest_k(&candidates, &d, want) {
                found.inputs.push(i as i64);
                found.ids.push(id);
                found.distances.push(dist);
            }
        }
        Ok(found)
    })?;
    let mut found = Found {
        bounds: limits,
        ..Found::default()
    };
    for part in parts {
        found.inputs.extend(part.inputs);
        found.ids.extend(part.ids);
        found.distances.extend(part.distances);
    }
    Ok(found)
}

/// The first step for one input: the k-th smallest exact distance to the
/// entries of its k nearest boxes (4 times as many, and again, while
/// `exclusive` leaves fewer than k and the index has more); infinity when
/// the index has fewer than k entries to give.
fn bound(
    index: &Index,
    geoms: &Geometries,
    input: &Geometry,
    q: Rect,
    special: &[i64],
    want: Wanted,
    total: usize,
) -> Result<f64> {
    if want.k == 0 {
        return Ok(f64::INFINITY);
    }
    let mut kk = want.k;
    let mut ids = Vec::new();
    loop {
        let found = nearest_of(index, q, kk, true)?;
        ids.clear();
        index
            .records()
            .extend_ids(found.neighbors.iter().map(|n| n.id), &mut ids)?;
        let ids = without(special, &ids);
        let d = geoms.distances(input, &ids, want.exclusive)?;
        let kth = kth_smallest(d, want.k);
        if kth.is_finite() || kk >= total {
            return Ok(kth);
        }
        kk = kk.saturating_mul(4);
    }
}

/// The `k`-th smallest of `d` leaving out NaN (an entry `exclusive` left
/// out); infinity when fewer than `k` are left.
fn kth_smallest(mut d: Vec<f64>, k: usize) -> f64 {
    d.retain(|x| !x.is_nan());
    if k == 0 || d.len() < k {
        return f64::INFINITY;
    }
    let (_, kth, _) = d.select_nth_unstable_by(k - 1, f64::total_cmp);
    *kth
}

/// The box `b` grown by `d` on every side, and a little more so that
/// rounding in the subtraction loses no entry at distance `d` (extra
/// candidates are refined away): `_exact._grow` of one box.
fn grown(b: &Rect, d: f64) -> Result<Rect> {
    let scale = [b.min_x(), b.min_y(), b.max_x(), b.max_y()]
        .iter()
        .fold(0f64, |m, v| m.max(v.abs()));
    let pad = d * (1.0 + 1e-9) + scale * 1e-12;
    Rect::new(
        clamp(b.min_x() - pad),
        clamp(b.min_y() - pad),
        clamp(b.max_x() + pad),
        clamp(b.max_y() + pad),
    )
}

/// `ids` without those of `special` (sorted).
fn without(special: &[i64], ids: &[i64]) -> Vec<i64> {
    if special.is_empty() {
        return ids.to_vec();
    }
    ids.iter()
        .copied()
        .filter(|id| special.binary_search(id).is_err())
        .collect()
}

/// Of the candidates `ids` at exact distances `d` (NaN: left out), the
/// `k` nearest by distance then id, each id once, and with `all_matches`
/// every other one at the k-th distance; none beyond `max_distance`.
fn nearest_k(ids: &[i64], d: &[f64], want: Wanted) -> Vec<(i64, f64)> {
    let mut found: Vec<(f64, i64)> = ids
        .iter()
        .zip(d)
        .map(|(&id, &x)| (x, id))
        .filter(|(x, _)| !x.is_nan() && *x <= want.max_distance)
        .collect();
    found.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    found.dedup_by_key(|f| f.1);
    if want.k == 0 || found.is_empty() {
        return Vec::new();
    }
    let last = found[found.len().min(want.k) - 1].0;
    let n = if want.all_matches {
        found.iter().take_while(|f| f.0 <= last).count()
    } else {
        found.len().min(want.k)
    };
    found[..n].iter().map(|&(x, id)| (id, x)).collect()
}
