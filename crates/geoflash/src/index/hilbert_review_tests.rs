//! Review tests of the Hilbert R-tree (`IndexKind::Hilbert`), and the
//! driver they share with the FOR-tree's review tests
//! (`index::fortree::review_tests`): seeded random sequences of insertions
//! (fresh and duplicate ids), deletions (present pairs, absent ids, a
//! present id with a wrong rectangle), updates (`update`, `update_near`
//! with good, missing and stale hints, a wrong old rectangle), every range
//! predicate, `count`, batches, point groups, kNN with and without ties,
//! `bounds`, `len` and `located_records`, all through [`SpatialIndex`] and
//! compared with a brute-force oracle written independently of the
//! structures' selection code; the structure's own check runs after every
//! operation, and runs on a store that can be reopened checkpoint, reopen
//! and compare again in the middle.
//!
//! The data is degenerate on purpose ([`Shape`]): points, zero-width
//! lines, a few identical rectangles, coordinates at ±`MAX_COORD` and at
//! subnormal magnitudes, negative zero; ids sharing their low 32 bits
//! (`k << 32`: equal Hilbert record values in one cell), ids at the
//! FOR-tree's provisional page ids (`1 << 62` and up) and near `u64::MAX`.
//!
//! Cases: `GEOFLASH_PROPTEST_CASES` (default 64) seeds per test.
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::geom::{HilbertDomain, Point, MAX_COORD};
use crate::index::query::{KnnResult, Predicate, QueryResult};
use crate::spatial::SpatialIndex;
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::store::mem::MemStore;
use crate::store::{PlainConfig, PlainStore};

fn r(x0: f64, y0: f64, x1: f64, y1: f64) -> Rect {
    Rect::new(x0, y0, x1, y1).unwrap()
}

/// The kind of data a run draws its rectangles (and windows) from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Half units over 20 × 20, small boxes: many ties and touching boxes.
    Grid,
    /// Points of the grid.
    Points,
    /// Horizontal and vertical segments (zero width or height).
    Lines,
    /// Three rectangles, over and over.
    Identical,
    /// Coordinates up to ±`MAX_COORD`.
    Huge,
    /// Subnormal and tiny coordinates.
    Tiny,
    /// Coordinates among ±0 and ±1, with `-0.0` and `0.0` in both orders.
    NegZero,
    /// Each rectangle of any of the above.
    Mixed,
}

/// Every shape, in the order the cases cycle through them.
pub(crate) const SHAPES: [Shape; 8] = [
    Shape::Grid,
    Shape::Points,
    Shape::Lines,
    Shape::Identical,
    Shape::Huge,
    Shape::Tiny,
    Shape::NegZero,
    Shape::Mixed,
];

/// Two values of `vals`, the smaller first (equal values in drawing order,
/// so `0.0, -0.0` happens).
fn pair_of(rng: &mut ChaCha8Rng, vals: &[f64]) -> (f64, f64) {
    let a = vals[rng.gen_range(0..vals.len())];
    let b = vals[rng.gen_range(0..vals.len())];
    if b < a {
        (b, a)
    } else {
        (a, b)
    }
}

/// A rectangle of `shape`.
pub(crate) fn rect_of(rng: &mut ChaCha8Rng, shape: Shape) -> Rect {
    let grid = |rng: &mut ChaCha8Rng| f64::from(rng.gen_range(0i32..40)) * 0.5;
    match shape {
        Shape::Grid => {
            let (x, y) = (grid(rng), grid(rng));
            let (w, h) = (
                f64::from(rng.gen_range(0i32..6)) * 0.5,
                f64::from(rng.gen_range(0i32..6)) * 0.5,
            );
            r(x, y, x + w, y + h)
        }
        Shape::Points => {
            let (x, y) = (grid(rng), grid(rng));
            r(x, y, x, y)
        }
        Shape::Lines => {
            let (x, y) = (grid(rng), grid(rng));
            let len = f64::from(rng.gen_range(0i32..7)) * 0.5;
            if rng.gen_bool(0.5) {
                r(x, y, x + len, y)
            } else {
                r(x, y, x, y + len)
            }
        }
        Shape::Identical => match rng.gen_range(0..3) {
            0 => r(1.0, 1.0, 2.0, 2.0),
            1 => r(1.0, 1.0, 1.0, 1.0),
            _ => r(0.0, 1.5, 3.0, 1.5),
        },
        Shape::Huge => {
            let vals = [
                -MAX_COORD, -1e149, -1e100, -1.0, 0.0, 1.0, 1e100, 1e149, MAX_COORD,
            ];
            let (x0, x1) = pair_of(rng, &vals);
            let (y0, y1) = pair_of(rng, &vals);
            r(x0, y0, x1, y1)
        }
        Shape::Tiny => {
            let vals = [0.0, 5e-324, 1e-323, 2e-323, 1e-300, 2e-300, 3e-300];
            let (x0, x1) = pair_of(rng, &vals);
            let (y0, y1) = pair_of(rng, &vals);
            r(x0, y0, x1, y1)
        }
        Shape::NegZero => {
            let vals = [-0.0, 0.0, -1.0, 1.0, 0.5];
            let (x0, x1) = pair_of(rng, &vals);
            let (y0, y1) = pair_of(rng, &vals);
            r(x0, y0, x1, y1)
        }
        Shape::Mixed => {
            let s = SHAPES[rng.gen_range(0..SHAPES.len() - 1)];
            rect_of(rng, s)
        }
    }
}

/// An object id: small, sharing the low 32 bits with others (`k << 32`),
/// at the FOR-tree's provisional page ids (`1 << 62` and up), near
/// `u64::MAX`, or spread.
pub(crate) fn id_of(rng: &mut ChaCha8Rng, distinct_low_bits: bool) -> u64 {
    let k = rng.gen_range(0..48u64);
    let kind = rng.gen_range(0..6);
    if distinct_low_bits {
        // The same kinds of high bits, each id with low 32 bits of its own.
        let low = kind * 48 + k;
        let high: u64 = [0, 1, 7, 1 << 30, (1 << 32) - 1, 12345][kind as usize];
        return (high << 32) | low;
    }
    match kind {
        0 => k,
        1 => k << 32,
        2 => (k << 32) | 1,
        3 => (1 << 62) + k,
        4 => u64::MAX - k,
        _ => k * 1000 + 7,
    }
}

/// A query point: a corner or the centre of a record (equal distances to
/// many records), or a point of the data's kind.
fn point_of(rng: &mut ChaCha8Rng, shape: Shape, o: &Oracle) -> Point {
    if !o.items.is_empty() && rng.gen_bool(0.6) {
        let i = rng.gen_range(0..o.items.len());
        let (_, rect) = o.items.iter().nth(i).unwrap();
        return match rng.gen_range(0..3) {
            0 => Point {
                x: rect.min_x(),
                y: rect.min_y(),
            },
            1 => Point {
                x: rect.max_x(),
                y: rect.min_y(),
            },
            _ => rect.center(),
        };
    }
    let w = rect_of(rng, shape);
    Point {
        x: w.min_x(),
        y: w.max_y(),
    }
}

/// A query window: of the data's kind, or the whole plane.
fn window_of(rng: &mut ChaCha8Rng, shape: Shape) -> Rect {
    if rng.gen_ratio(1, 12) {
        return Rect::world();
    }
    rect_of(rng, shape)
}

/// The brute-force oracle: the records by id.
#[derive(Debug, Default, Clone)]
pub(crate) struct Oracle {
    /// Id → rectangle.
    pub(crate) items: BTreeMap<u64, Rect>,
}

/// `predicate(window, rect)`, written from the predicates' definitions.
pub(crate) fn selected(p: Predicate, w: &Rect, x: &Rect) -> bool {
    let inside = |a: &Rect, b: &Rect| {
        // a inside b
        b.min_x() <= a.min_x()
            && a.max_x() <= b.max_x()
            && b.min_y() <= a.min_y()
            && a.max_y() <= b.max_y()
    };
    match p {
        Predicate::Intersects => {
            x.min_x() <= w.max_x()
                && w.min_x() <= x.max_x()
                && x.min_y() <= w.max_y()
                && w.min_y() <= x.max_y()
        }
        Predicate::Contains => inside(x, w),
        Predicate::Within => inside(w, x),
    }
}

/// Distance from `p` to the nearest point of `x`.
fn dist(p: &Point, x: &Rect) -> f64 {
    let gap = |v: f64, lo: f64, hi: f64| {
        if v < lo {
            lo - v
        } else if v > hi {
            v - hi
        } else {
            0.0
        }
    };
    let (dx, dy) = (
        gap(p.x, x.min_x(), x.max_x()),
        gap(p.y, x.min_y(), x.max_y()),
    );
    (dx * dx + dy * dy).sqrt()
}

impl Oracle {
    fn query(&self, w: &Rect, p: Predicate) -> Vec<(u64, Rect)> {
        self.items
            .iter()
            .filter(|(_, x)| selected(p, w, x))
            .map(|(id, x)| (*id, *x))
            .collect()
    }

    /// `(distance, id)` of the k nearest, ties by id; with `ties` every
    /// record at the k-th distance too.
    fn knn(&self, p: &Point, k: usize, ties: bool) -> Vec<(f64, u64)> {
        let mut d: Vec<(f64, u64)> = self.items.iter().map(|(id, x)| (dist(p, x), *id)).collect();
        d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        if k == 0 {
            return Vec::new();
        }
        let Some(kth) = d.get(k - 1).map(|x| x.0) else {
            return d;
        };
        d.into_iter()
            .enumerate()
            .take_while(|(i, x)| *i < k || (ties && x.0 <= kth))
            .map(|(_, x)| x)
            .collect()
    }

    fn bounds(&self) -> Option<Rect> {
        Rect::union_all(self.items.values())
    }
}

/// The hits of a range answer by id (a record reported twice stays twice).
fn hits(res: &QueryResult) -> Vec<(u64, Rect)> {
    let mut v: Vec<(u64, Rect)> = res.hits.iter().map(|h| (h.id, h.rect)).collect();
    v.sort_by_key(|x| x.0);
    v
}

fn knn_of(res: &KnnResult) -> Vec<(f64, u64)> {
    res.neighbors.iter().map(|n| (n.distance, n.id)).collect()
}

/// The sign of each zero of `x` flipped (an equal rectangle with other bits).
fn flip_zeros(x: &Rect) -> Rect {
    let f = |v: f64| if v == 0.0 { -v } else { v };
    r(f(x.min_x()), f(x.min_y()), f(x.max_x()), f(x.max_y()))
}

/// A rectangle different from `x` (for a present id with a wrong one).
fn other_rect(x: &Rect) -> Rect {
    let x1 = if x.max_x() < 1e149 {
        x.max_x() + 1.0
    } else {
        x.max_x()
    };
    let y0 = if x.min_y() > -1e149 {
        x.min_y() - 1.0
    } else {
        x.min_y()
    };
    let c = r(x.min_x(), y0, x1, x.max_y());
    if c != *x {
        c
    } else {
        r(0.25, 0.25, 0.75, 0.75)
    }
}

/// Counts of what a driven run did, to show the cases reached the cases
/// they are meant to.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    /// Operations run.
    pub(crate) ops: u64,
    /// Refusals checked (duplicates, absent pairs, wrong rectangles).
    pub(crate) refusals: u64,
    /// Checkpoints and reopenings.
    pub(crate) reopens: u64,
    /// Largest record count reached.
    pub(crate) peak_records: u64,
}

/// Checkpoints an index, drops it and opens it again from its store.
pub(crate) type Reopen<'a> = dyn FnMut(Box<dyn SpatialIndex>) -> Box<dyn SpatialIndex> + 'a;

/// What a run drives: the data, the length, the structure's own check
/// (returning its record count) and how to reopen it from its store.
pub(crate) struct Drive<'a> {
    /// Seed of the operation sequence (named in every failure).
    pub(crate) seed: u64,
    /// The data's kind.
    pub(crate) shape: Shape,
    /// Operations to run.
    pub(crate) ops: usize,
    /// Share of insertions among the updates of the index (per cent).
    pub(crate) insert_share: u32,
    /// Ids with low 32 bits of their own (no two records with equal
    /// Hilbert values), or ids sharing them (`k << 32`: records of equal
    /// value whose runs span siblings; `siblings_tying_on_their_lhv_stay_in_hilbert_order`).
    pub(crate) distinct_low_bits: bool,
    /// The structure's invariant check; its record count.
    pub(crate) verify: &'a dyn Fn(&dyn SpatialIndex) -> Result<u64>,
    /// Checkpoints the index, drops it and opens it again from its store.
    pub(crate) reopen: Option<&'a mut Reopen<'a>>,
}

/// Compares everything the index answers about its whole content with the oracle.
fn compare_all(idx: &dyn SpatialIndex, o: &Oracle, at: &str) {
    let all = idx.query(Rect::world(), Predicate::Intersects).unwrap();
    let want: Vec<(u64, Rect)> = o.items.iter().map(|(a, b)| (*a, *b)).collect();
    assert_eq!(hits(&all), want, "{at}: content");
    assert_eq!(idx.len(), Some(o.items.len() as u64), "{at}: len");
    assert_eq!(idx.is_empty(), Some(o.items.is_empty()), "{at}: is_empty");
    assert_eq!(idx.bounds().unwrap(), o.bounds(), "{at}: bounds");
    let mut located: Vec<(u64, Rect)> = idx
        .located_records()
        .unwrap()
        .into_iter()
        .map(|(id, x, _)| (id, x))
        .collect();
    located.sort_by_key(|x| x.0);
    assert_eq!(located, want, "{at}: located_records");
}

/// Every range query kind for `w` and `pred`, against the oracle.
fn compare_range(idx: &dyn SpatialIndex, o: &Oracle, ws: &[Rect], pred: Predicate, at: &str) {
    for w in ws {
        let want = o.query(w, pred);
        let got = idx.query(*w, pred).unwrap();
        assert_eq!(hits(&got), want, "{at}: {pred:?} {w:?}");
        assert_eq!(
            got.stats.results,
            want.len() as u64,
            "{at}: results counter"
        );
        assert_eq!(
            idx.count(*w, pred).unwrap(),
            want.len() as u64,
            "{at}: count {pred:?} {w:?}"
        );
    }
    let batch = idx.query_batch(ws, pred).unwrap();
    let keys = idx.query_batch_keys(ws, pred).unwrap();
    let flat = idx.query_batch_flat(ws, pred).unwrap();
    assert_eq!(batch.results.len(), ws.len(), "{at}: batch length");
    assert_eq!(keys.len(), ws.len(), "{at}: batch keys length");
    assert_eq!(flat.offsets.len(), ws.len() + 1, "{at}: flat offsets");
    for (i, w) in ws.iter().enumerate() {
        let want = o.query(w, pred);
        let ids: Vec<u64> = want.iter().map(|x| x.0).collect();
        assert_eq!(
            hits(&batch.results[i]),
            want,
            "{at}: batch {i} {pred:?} {w:?}"
        );
        let mut k = keys[i].keys.clone();
        k.sort_unstable();
        assert_eq!(k, ids, "{at}: batch keys {i}");
        let mut f = flat.keys[flat.offsets[i]..flat.offsets[i + 1]].to_vec();
        f.sort_unstable();
        assert_eq!(f, ids, "{at}: batch flat {i}");
    }
}

/// kNN (single, batched, with and without ties) against the oracle.
fn compare_knn(idx: &dyn SpatialIndex, o: &Oracle, ps: &[Point], k: usize, at: &str) {
    for ties in [false, true] {
        let batch = idx.nearest_batch(ps, k, ties).unwrap();
        assert_eq!(batch.len(), ps.len(), "{at}: kNN batch length");
        for (p, b) in ps.iter().zip(&batch) {
            let want = o.knn(p, k, ties);
            let got = idx.nearest(*p, k, ties).unwrap();
            assert_eq!(knn_of(&got), want, "{at}: kNN {p:?} k={k} ties={ties}");
            assert_eq!(knn_of(b), want, "{at}: kNN batch {p:?} k={k} ties={ties}");
            for n in &got.neighbors {
                assert_eq!(
                    o.items.get(&n.id),
                    Some(&n.rect),
                    "{at}: kNN rectangle of {}",
                    n.id
                );
            }
        }
    }
}

/// Point lookups as one group, against the oracle.
fn compare_points(idx: &dyn SpatialIndex, o: &Oracle, ps: &[Point], at: &str) {
    let got = idx.point_group(ps).unwrap();
    assert_eq!(got.results.len(), ps.len(), "{at}: point group length");
    for (p, res) in ps.iter().zip(&got.results) {
        let w = Rect::from_point(*p);
        assert_eq!(
            hits(res),
            o.query(&w, Predicate::Intersects),
            "{at}: point {p:?}"
        );
    }
}

fn is_refusal(e: &crate::Error) -> bool {
    matches!(e, crate::Error::InvalidInput(_))
}

/// Runs the sequence of `d` on `idx` (see the module documentation) and
/// returns the index and what it did.
pub(crate) fn drive(
    mut idx: Box<dyn SpatialIndex>,
    mut d: Drive<'_>,
) -> (Box<dyn SpatialIndex>, Tally) {
    let mut rng = ChaCha8Rng::seed_from_u64(d.seed);
    let mut o = Oracle::default();
    let mut hints: HashMap<u64, Option<u64>> = HashMap::new();
    let mut tally = Tally::default();
    let shape = d.shape;
    for step in 0..d.ops {
        let roll = rng.gen_range(0..100u32);
        let at = format!("seed {} ({shape:?}) step {step} roll {roll}", d.seed);
        let present = |rng: &mut ChaCha8Rng, o: &Oracle| -> Option<(u64, Rect)> {
            if o.items.is_empty() {
                return None;
            }
            let i = rng.gen_range(0..o.items.len());
            o.items.iter().nth(i).map(|(a, b)| (*a, *b))
        };
        let ins = d.insert_share;
        match roll {
            x if x < ins => {
                let id = id_of(&mut rng, d.distinct_low_bits);
                let rect = rect_of(&mut rng, shape);
                match idx.insert(id, rect) {
                    Ok(()) => {
                        assert!(
                            !o.items.contains_key(&id),
                            "{at}: duplicate id {id} accepted"
                        );
                        o.items.insert(id, rect);
                    }
                    Err(e) => {
                        assert!(o.items.contains_key(&id), "{at}: insert {id} {rect:?}: {e}");
                        assert!(is_refusal(&e), "{at}: {e}");
                        tally.refusals += 1;
                    }
                }
            }
            x if x < ins + 14 => {
                if let Some((id, rect)) = present(&mut rng, &o) {
                    let given = if rng.gen_bool(0.3) {
                        flip_zeros(&rect)
                    } else {
                        rect
                    };
                    idx.delete(id, given)
                        .unwrap_or_else(|e| panic!("{at}: delete {id} {given:?}: {e}"));
                    o.items.remove(&id);
                    hints.remove(&id);
                }
            }
            x if x < ins + 18 => {
                // A present id with a wrong rectangle, or an absent id.
                let (id, rect) = match present(&mut rng, &o) {
                    Some((id, rect)) if rng.gen_bool(0.6) => (id, other_rect(&rect)),
                    _ => (
                        id_of(&mut rng, d.distinct_low_bits),
                        rect_of(&mut rng, shape),
                    ),
                };
                if o.items.get(&id) == Some(&rect) {
                    continue;
                }
                let e = idx.delete(id, rect).expect_err(&at);
                assert!(is_refusal(&e), "{at}: {e}");
                tally.refusals += 1;
                compare_all(&*idx, &o, &at);
            }
            x if x < ins + 30 => {
                if let Some((id, old)) = present(&mut rng, &o) {
                    let new = if rng.gen_ratio(1, 8) {
                        old
                    } else {
                        rect_of(&mut rng, shape)
                    };
                    let given = if rng.gen_bool(0.2) {
                        flip_zeros(&old)
                    } else {
                        old
                    };
                    match rng.gen_range(0..4) {
                        0 => idx
                            .update(id, given, new)
                            .unwrap_or_else(|e| panic!("{at}: update {id}: {e}")),
                        k => {
                            let hint = match k {
                                1 => hints.get(&id).copied().flatten(),
                                2 => Some(rng.gen_range(0..64u64)),
                                _ => Some(u64::MAX - rng.gen_range(0..4u64)),
                            };
                            let h = idx
                                .update_near(id, given, new, hint)
                                .unwrap_or_else(|e| panic!("{at}: update_near {id} {hint:?}: {e}"));
                            hints.insert(id, h);
                        }
                    }
                    o.items.insert(id, new);
                }
            }
            x if x < ins + 33 => {
                // A wrong old rectangle or an absent id: refused, nothing changes.
                let (id, old) = match present(&mut rng, &o) {
                    Some((id, rect)) if rng.gen_bool(0.6) => (id, other_rect(&rect)),
                    _ => (
                        id_of(&mut rng, d.distinct_low_bits),
                        rect_of(&mut rng, shape),
                    ),
                };
                if o.items.get(&id) == Some(&old) {
                    continue;
                }
                let new = rect_of(&mut rng, shape);
                let e = if rng.gen_bool(0.5) {
                    idx.update(id, old, new).expect_err(&at)
                } else {
                    idx.update_near(id, old, new, Some(rng.gen_range(0..64u64)))
                        .expect_err(&at)
                };
                assert!(is_refusal(&e), "{at}: {e}");
                tally.refusals += 1;
                compare_all(&*idx, &o, &at);
            }
            x if x < ins + 45 => {
                let ws: Vec<Rect> = (0..rng.gen_range(1..4))
                    .map(|_| window_of(&mut rng, shape))
                    .collect();
                for pred in Predicate::ALL {
                    compare_range(&*idx, &o, &ws, pred, &at);
                }
                let ps: Vec<Point> = (0..2).map(|_| point_of(&mut rng, shape, &o)).collect();
                compare_points(&*idx, &o, &ps, &at);
            }
            x if x < ins + 55 => {
                let ps: Vec<Point> = (0..rng.gen_range(1..3))
                    .map(|_| point_of(&mut rng, shape, &o))
                    .collect();
                let k = rng.gen_range(0..o.items.len() + 3);
                compare_knn(&*idx, &o, &ps, k, &at);
            }
            x if x < ins + 58 => {
                let located = idx.located_records().unwrap();
                for (id, _, h) in located {
                    hints.insert(id, h);
                }
                compare_all(&*idx, &o, &at);
            }
            _ => {
                if let Some(reopen) = d.reopen.as_mut() {
                    idx = reopen(idx);
                    tally.reopens += 1;
                    compare_all(&*idx, &o, &format!("{at} (reopened)"));
                }
            }
        }
        let n = (d.verify)(&*idx).unwrap_or_else(|e| panic!("{at}: check: {e}"));
        assert_eq!(n, o.items.len() as u64, "{at}: records in the structure");
        tally.ops += 1;
        tally.peak_records = tally.peak_records.max(n);
    }
    compare_all(&*idx, &o, &format!("seed {} end", d.seed));
    if let Some(reopen) = d.reopen.as_mut() {
        idx = reopen(idx);
        tally.reopens += 1;
        compare_all(&*idx, &o, &format!("seed {} end, reopened", d.seed));
        let n = (d.verify)(&*idx)
            .unwrap_or_else(|e| panic!("seed {}: check after reopen: {e}", d.seed));
        assert_eq!(n, o.items.len() as u64);
    }
    // Empty it: every record deletes, and the structure stays sound.
    let items: Vec<(u64, Rect)> = o.items.iter().map(|(a, b)| (*a, *b)).collect();
    for (i, (id, rect)) in items.iter().enumerate() {
        idx.delete(*id, *rect)
            .unwrap_or_else(|e| panic!("seed {}: emptying, delete {id}: {e}", d.seed));
        o.items.remove(id);
        if i % 7 == 0 {
            let n = (d.verify)(&*idx).unwrap_or_else(|e| panic!("seed {}: emptying: {e}", d.seed));
            assert_eq!(n, o.items.len() as u64);
        }
    }
    compare_all(&*idx, &o, &format!("seed {} emptied", d.seed));
    (idx, tally)
}

/// Seeds per review test (`GEOFLASH_PROPTEST_CASES`, default 64).
pub(crate) fn review_cases() -> u64 {
    u64::from(crate::testenv::proptest_cases())
}

// ---------------------------------------------------------------------
// The Hilbert R-tree.
// ---------------------------------------------------------------------

/// A Hilbert domain for a case: coarse (order 1 or 2: most records share
/// a cell), fine over part of the grid data (centres outside are
/// clamped), or over the whole plane, or over a tiny extent.
fn domain_for(rng: &mut ChaCha8Rng, shape: Shape) -> HilbertDomain {
    let pick = rng.gen_range(0..5);
    let (extent, order) = match pick {
        0 => (r(0.0, 0.0, 20.0, 20.0), 1),
        1 => (r(0.0, 0.0, 20.0, 20.0), 2),
        2 => (r(5.0, 5.0, 15.0, 15.0), 16),
        3 => (Rect::world(), 16),
        _ => match shape {
            Shape::Tiny => (r(0.0, 0.0, 3e-300, 3e-300), 16),
            Shape::NegZero => (r(-1.0, -1.0, 1.0, 1.0), 3),
            _ => (r(0.0, 0.0, 1.0, 1.0), 16),
        },
    };
    HilbertDomain::new(extent, order).unwrap()
}

fn hilbert_params(rng: &mut ChaCha8Rng, shape: Shape) -> TreeParams {
    let max = rng.gen_range(3..8usize);
    let min = rng.gen_range(2..=max.div_ceil(2));
    TreeParams {
        min_entries: min,
        ..TreeParams::new(IndexKind::Hilbert, max).with_hilbert_domain(domain_for(rng, shape))
    }
}

/// The check of a Hilbert R-tree on `S` behind `dyn SpatialIndex`.
fn rtree_check<S: NodeStore + 'static>(idx: &dyn SpatialIndex) -> Result<u64> {
    let t = idx
        .as_any()
        .downcast_ref::<RTree<S>>()
        .expect("an R-tree on the expected store");
    Ok(t.check()?.records)
}

fn plain_config(buffer: usize) -> PlainConfig {
    PlainConfig {
        buffer_bytes: buffer,
        with_payload: true,
        ..PlainConfig::default()
    }
}

/// One case: a random Hilbert R-tree on a memory store or on a plain
/// store (reopened in the middle), driven by seed `seed`.
fn hilbert_case(seed: u64) -> Tally {
    let shape = SHAPES[(seed % SHAPES.len() as u64) as usize];
    // Every other seed draws ids sharing their low 32 bits: equal values.
    let distinct_low_bits = seed.is_multiple_of(2);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4869_6c62);
    let params = hilbert_params(&mut rng, shape);
    let ops = rng.gen_range(120..260);
    let insert_share = rng.gen_range(30..41);
    if rng.gen_bool(0.4) {
        let idx: Box<dyn SpatialIndex> = Box::new(RTree::create(MemStore::new(), params).unwrap());
        let d = Drive {
            seed,
            shape,
            ops,
            insert_share,
            distinct_low_bits,
            verify: &rtree_check::<MemStore>,
            reopen: None,
        };
        return drive(idx, d).1;
    }
    let page = 512;
    let cfg = plain_config(if rng.gen_bool(0.5) { 0 } else { 4 * page });
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(page, 1 << 16).unwrap());
    let store = PlainStore::create(Arc::clone(&dev), cfg).unwrap();
    let idx: Box<dyn SpatialIndex> = Box::new(RTree::create(store, params).unwrap());
    let mut reopen = |mut idx: Box<dyn SpatialIndex>| -> Box<dyn SpatialIndex> {
        let before = rtree_check::<PlainStore>(&*idx).unwrap();
        idx.checkpoint().unwrap();
        drop(idx);
        let store = PlainStore::open(Arc::clone(&dev), cfg).unwrap();
        let t = RTree::open(store, params).unwrap();
        assert_eq!(
            t.check().unwrap().records,
            before,
            "seed {seed}: records after reopen"
        );
        Box::new(t)
    };
    let d = Drive {
        seed,
        shape,
        ops,
        insert_share,
        distinct_low_bits,
        verify: &rtree_check::<PlainStore>,
        reopen: Some(&mut reopen),
    };
    drive(idx, d).1
}

#[test]
fn hilbert_random_operations_agree_with_the_oracle() {
    let mut total = Tally::default();
    for seed in 0..review_cases() {
        let t = hilbert_case(seed);
        total.ops += t.ops;
        total.refusals += t.refusals;
        total.reopens += t.reopens;
        total.peak_records = total.peak_records.max(t.peak_records);
    }
    eprintln!("Hilbert review: {} cases, {total:?}", review_cases());
    assert!(total.refusals > 0 && total.reopens > 0, "{total:?}");
}

/// Thousands of records in a deep Hilbert R-tree (M = 3) on a plain store
/// with a small buffer, on a coarse domain (many records per cell, ids
/// with low 32 bits of their own), moved by `update_near` with the hints
/// `located_records` gives and with stale ones, deleted, checkpointed and
/// reopened: the check holds throughout and the answers match.
#[test]
fn hilbert_deep_tree_survives_moves_reopen_and_emptying() {
    deep_tree_case(|i| ((i % 5) << 32) | i);
}

/// The deep tree of `hilbert_deep_tree_survives_moves_reopen_and_emptying`
/// with ids that agree modulo 2^32 in sevens (`i << 32 | i % 7`): about
/// 23 records per cell, runs of equal values longer than a node, siblings
/// tying on their LHV at every level.
#[test]
fn hilbert_deep_tree_with_equal_values_survives_moves_reopen_and_emptying() {
    deep_tree_case(|i| (i << 32) | (i % 7));
}

/// Inserts, moves, reopens and empties a deep Hilbert R-tree whose
/// record `i` has id `id(i)`.
fn deep_tree_case(id: fn(u64) -> u64) {
    let domain = HilbertDomain::new(r(0.0, 0.0, 100.0, 100.0), 3).unwrap();
    let params = TreeParams::new(IndexKind::Hilbert, 3).with_hilbert_domain(domain);
    let cfg = plain_config(6 * 512);
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(512, 1 << 16).unwrap());
    let mut t = RTree::create(PlainStore::create(Arc::clone(&dev), cfg).unwrap(), params).unwrap();
    let mut o = Oracle::default();
    let rect = |i: u64, shift: u64| {
        let x = ((i * 7919 + shift) % 97) as f64;
        let y = ((i * 104_729 + shift * 3) % 89) as f64;
        r(x, y, x + (i % 3) as f64, y)
    };
    for i in 0..1500u64 {
        t.insert(id(i), rect(i, 0)).unwrap();
        o.items.insert(id(i), rect(i, 0));
        if i % 101 == 0 {
            t.check().unwrap_or_else(|e| panic!("insert {i}: {e}"));
        }
    }
    assert!(t.check().unwrap().height >= 6);
    let hints: HashMap<u64, Option<u64>> = SpatialIndex::located_records(&t)
        .unwrap()
        .into_iter()
        .map(|(id, _, h)| (id, h))
        .collect();
    for i in 0..1500u64 {
        let (k, old) = (id(i), o.items[&id(i)]);
        let new = rect(i, 1 + i % 4);
        let hint = if i % 2 == 0 { hints[&k] } else { Some(i % 40) };
        SpatialIndex::update_near(&mut t, k, old, new, hint)
            .unwrap_or_else(|e| panic!("move {i}: {e}"));
        o.items.insert(k, new);
        if i % 101 == 0 {
            t.check().unwrap_or_else(|e| panic!("move {i}: {e}"));
        }
    }
    t.store_mut().checkpoint().unwrap();
    let rep = t.check().unwrap();
    drop(t);
    let mut t = RTree::open(PlainStore::open(Arc::clone(&dev), cfg).unwrap(), params).unwrap();
    assert_eq!(t.check().unwrap(), rep);
    compare_all(&t, &o, "after reopen");
    for (n, i) in (0..1500u64).map(|j| (j * 7) % 1500).enumerate() {
        let k = id(i);
        t.delete(k, o.items[&k])
            .unwrap_or_else(|e| panic!("delete {i}: {e}"));
        o.items.remove(&k);
        if n % 97 == 0 {
            let rep = t.check().unwrap_or_else(|e| panic!("delete {i}: {e}"));
            assert_eq!(rep.records, o.items.len() as u64);
            compare_knn(&t, &o, &[Point { x: 50.0, y: 40.0 }], 9, "emptying");
        }
    }
    assert_eq!((t.len(), t.height()), (0, 0));
}

/// The review's case: records of equal Hilbert value (ids agreeing modulo
/// 2^32 at one point) fill siblings that tie on their LHV, then a record
/// beyond them arrives. Before the tree told a tie group's first child
/// (the one holding smaller values) by its values instead of its page id,
/// the insertions left siblings out of Hilbert order, and `check` (so
/// `verify` and `recover`) called the tree damaged.
#[test]
fn siblings_tying_on_their_lhv_stay_in_hilbert_order() {
    let domain = HilbertDomain::new(r(0.0, 0.0, 20.0, 20.0), 1).unwrap();
    let params = TreeParams::new(IndexKind::Hilbert, 3).with_hilbert_domain(domain);
    let mut t = RTree::create(MemStore::new(), params).unwrap();
    let mut o = Oracle::default();
    let at = r(1.0, 1.0, 1.0, 1.0);
    let ids = [
        3 << 32,
        6 << 32 | 1,
        5 << 32 | 1,
        2 << 32 | 1,
        4 << 32,
        8 << 32,
        1 << 32,
        0,
        7 << 32,
    ];
    for (n, id) in ids.into_iter().enumerate() {
        t.insert(id, at).unwrap();
        o.items.insert(id, at);
        t.check()
            .unwrap_or_else(|e| panic!("after insertion {n}: {e}"));
    }
    t.insert(1 << 40, r(15.0, 15.0, 15.0, 15.0)).unwrap();
    o.items.insert(1 << 40, r(15.0, 15.0, 15.0, 15.0));
    t.check()
        .unwrap_or_else(|e| panic!("after the record beyond: {e}"));
    compare_all(&t, &o, "ties");
    for (n, id) in ids.into_iter().enumerate() {
        t.delete(id, at).unwrap();
        o.items.remove(&id);
        t.check()
            .unwrap_or_else(|e| panic!("after deletion {n}: {e}"));
        compare_all(&t, &o, "deletions");
    }
}
