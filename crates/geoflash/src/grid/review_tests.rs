//! Review of the grid files against a brute-force oracle.
//!
//! 1. [`GridFile`] in memory (GFFM, LB-Grid, H-Grid on a hybrid device):
//!    random sequences of insertions, deletions, moves, point, window,
//!    kNN and group queries, checkpoints and reopens (for writing and for
//!    reading only), at pages of 512 bytes (the smallest a device takes) and 1 KiB with buffers of a
//!    few pages, so that splits, merges and directory growth happen often;
//!    on domains from the usual square to the extremes of
//!    [`MAX_COORD`](crate::geom::MAX_COORD) and a domain a few ULPs wide,
//!    with coordinates on a lattice (equal coordinates and points on cell
//!    boundaries are common), one ULP off it, and outside the domain.
//! 2. Every grid kind behind an [`Index`](crate::Index) on files (with its
//!    rollback journal): the same operations through the front end, boxes
//!    and duplicate ids included, all three predicates, kNN with ties,
//!    batched window and point queries, checkpoints, closes, crashes
//!    (dropped without a checkpoint: the last checkpoint comes back) and
//!    read-only opens.
//! 3. Damage to one page of the grid's files after a checkpoint: the
//!    answer is exact or an error naming the file.
//! 4. Defects found: kNN with prefetching and a huge k overflowed; a
//!    move whose deletion's merge failed lost the object.
//!
//! Case counts: `GEOFLASH_PROPTEST_CASES` (see [`crate::testenv`]); the
//! damage campaign's density: `GEOFLASH_DAMAGE_STRIDE`.
use std::sync::Arc;

use proptest::prelude::*;

use super::gffm::InPlaceBuckets;
use super::lbgrid::LogBuckets;
use super::tests::{sorted, Oracle};
use super::*;
use crate::geom::MAX_COORD;
use crate::index::query::Predicate;
use crate::manifest::Access;
use crate::storage::mem::MemDevice;

/// Steps of the coordinate lattice along each axis.
const STEPS: u32 = 64;

/// The domains the in-memory runs use.
fn domain_of(kind: u8) -> Rect {
    match kind % 4 {
        0 => Rect::new(0.0, 0.0, 100.0, 100.0).unwrap(),
        1 => Rect::new(-MAX_COORD, -MAX_COORD, MAX_COORD, MAX_COORD).unwrap(),
        // A few hundred ULPs wide along x.
        2 => Rect::new(1.0, -3.0, 1.0 + f64::powi(2.0, -44), 5.0).unwrap(),
        _ => Rect::new(-5e149, -7.0, MAX_COORD, 1e-140).unwrap(),
    }
}

/// A coordinate, in units of the domain.
#[derive(Debug, Clone, Copy)]
enum C {
    /// Lattice step `u` of `STEPS` (0 and `STEPS` are the domain's edges).
    Lattice(u32),
    /// One ULP above (`true`) or below a lattice value.
    Nudged(u32, bool),
    /// Outside the domain: below (`true`) or above it, one ULP or far.
    Outside(bool, bool),
}

fn c() -> BoxedStrategy<C> {
    prop_oneof![
        10 => (0..=STEPS).prop_map(C::Lattice),
        // A crowded corner: many equal coordinates.
        4 => (0..=3u32).prop_map(C::Lattice),
        2 => Just(C::Lattice(STEPS)),
        2 => (0..=STEPS, any::<bool>()).prop_map(|(u, up)| C::Nudged(u, up)),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(lo, far)| C::Outside(lo, far)),
    ]
    .boxed()
}

/// Coordinates mostly on the domain's edges (more than half of a
/// bucket's points on its upper edge puts a boundary there, a cell of
/// zero width).
fn edge_c() -> BoxedStrategy<C> {
    prop_oneof![
        6 => Just(C::Lattice(STEPS)),
        3 => Just(C::Lattice(0)),
        2 => (0..=STEPS).prop_map(C::Lattice),
        1 => Just(C::Nudged(STEPS, false)),
        1 => Just(C::Nudged(0, true)),
    ]
    .boxed()
}

/// The value of `c` along the span `lo..=hi` (clamped to what
/// [`Rect::new`] accepts).
fn value(c: C, lo: f64, hi: f64) -> f64 {
    let at = |u: u32| match u.min(STEPS) {
        0 => lo,
        u if u == STEPS => hi,
        u => lo + (hi - lo) * (f64::from(u) / f64::from(STEPS)),
    };
    let v = match c {
        C::Lattice(u) => at(u),
        C::Nudged(u, true) => at(u).next_up(),
        C::Nudged(u, false) => at(u).next_down(),
        C::Outside(true, false) => lo.next_down(),
        C::Outside(false, false) => hi.next_up(),
        C::Outside(true, true) => lo - (hi - lo),
        C::Outside(false, true) => hi + (hi - lo),
    };
    v.clamp(-MAX_COORD, MAX_COORD)
}

fn xy(d: &Rect, (cx, cy): (C, C)) -> (f64, f64) {
    (
        value(cx, d.min_x(), d.max_x()),
        value(cy, d.min_y(), d.max_y()),
    )
}

/// Object ids: mostly fresh, some small ones (duplicates are common) and
/// the extremes.
fn id() -> impl Strategy<Value = u64> {
    prop_oneof![
        12 => 0..1_000_000u64,
        4 => 0..40u64,
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
    ]
}

/// How many neighbours: small, around the count, or everything.
fn k() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0..12usize,
        2 => 12..200usize,
        1 => Just(usize::MAX),
        1 => Just(usize::MAX / 2 + 1),
    ]
}

/// One operation of a run.
#[derive(Debug, Clone)]
enum Op {
    Insert((C, C), u64),
    /// Inserts `n` lattice points, the `i`-th at lattice index
    /// `start + i * stride` (mod the lattice), with fresh ids.
    Fill(u32, u32, u16),
    /// Deletes `n` held objects from the `sel`-th on.
    Drain(usize, u16),
    /// Deletes a held object (`sel`-th), under another id if `wrong`.
    DeleteHeld(usize, bool),
    Delete((C, C), u64),
    /// Moves a held object (`sel`-th) to a point; from a wrong old point if `wrong`.
    MoveHeld(usize, (C, C), bool),
    Move(u64, (C, C), (C, C)),
    Get((C, C)),
    Window((C, C), (C, C)),
    Knn((C, C), usize),
    Group(Vec<(C, C)>),
    Checkpoint,
    Reopen,
}

fn op(c: fn() -> BoxedStrategy<C>) -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => ((c(), c()), id()).prop_map(|(p, i)| Op::Insert(p, i)),
        2 => (any::<u32>(), prop_oneof![Just(1u32), Just(65), 1..5000u32], 0..300u16)
            .prop_map(|(a, s, n)| Op::Fill(a, s, n)),
        2 => (any::<usize>(), 0..300u16).prop_map(|(s, n)| Op::Drain(s, n)),
        8 => (any::<usize>(), prop::bool::weighted(0.2)).prop_map(|(s, w)| Op::DeleteHeld(s, w)),
        3 => ((c(), c()), id()).prop_map(|(p, i)| Op::Delete(p, i)),
        8 => (any::<usize>(), (c(), c()), prop::bool::weighted(0.15))
            .prop_map(|(s, p, w)| Op::MoveHeld(s, p, w)),
        2 => (id(), (c(), c()), (c(), c())).prop_map(|(i, a, b)| Op::Move(i, a, b)),
        3 => (c(), c()).prop_map(Op::Get),
        5 => ((c(), c()), (c(), c())).prop_map(|(a, b)| Op::Window(a, b)),
        4 => ((c(), c()), k()).prop_map(|(p, k)| Op::Knn(p, k)),
        2 => prop::collection::vec((c(), c()), 0..20).prop_map(Op::Group),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
    ]
}

/// The oracle's queries of these tests (`tests.rs` has the oracle).
impl Oracle {
    fn nth(&self, sel: usize) -> Option<(f64, f64, u64)> {
        match self.0.len() {
            0 => None,
            n => self.0.values().nth(sel % n).copied(),
        }
    }
    fn put(&mut self, x: f64, y: f64, id: u64) {
        self.0.insert(Self::key(x, y), (x + 0.0, y + 0.0, id));
    }
    /// Every point's distance to `p`, nearest first.
    fn dists(&self, p: &Point) -> Vec<f64> {
        let mut d: Vec<f64> = self
            .0
            .values()
            .map(|(a, b, _)| Point { x: *a, y: *b }.distance(p))
            .collect();
        d.sort_by(f64::total_cmp);
        d
    }
}

fn inside(d: &Rect, x: f64, y: f64) -> bool {
    x >= d.min_x() && x <= d.max_x() && y >= d.min_y() && y <= d.max_y()
}

/// The parameters of one in-memory run.
#[derive(Debug, Clone)]
struct Setup {
    page: usize,
    domain: u8,
    dir_hot: usize,
    bucket_hot: usize,
    cold: usize,
    merge: (f64, f64),
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![4 => Just(512usize), 1 => Just(1024)],
        0..4u8,
        2..5usize,
        2..6usize,
        1..4usize,
        prop_oneof![Just((0.3, 0.7)), Just((0.5, 0.9)), Just((0.05, 0.1))],
    )
        .prop_map(|(page, domain, dir_hot, bucket_hot, cold, merge)| Setup {
            page,
            domain,
            dir_hot,
            bucket_hot,
            cold,
            merge,
        })
}

impl Setup {
    fn opts(&self) -> GridOptions {
        GridOptions {
            dir_hot_pages: self.dir_hot,
            bucket_hot_pages: self.bucket_hot,
            cold_pages: self.cold,
            merge_threshold: self.merge.0,
            merge_fill: self.merge.1,
            ..GridOptions::new(domain_of(self.domain))
        }
    }
}

/// Checks a kNN answer of `g` for `(x, y)` against the oracle.
fn check_knn(got: &[(f64, GridPoint)], o: &Oracle, x: f64, y: f64, k: usize, what: &str) {
    let p = Point { x, y };
    let mut want = o.dists(&p);
    want.truncate(k);
    let d: Vec<f64> = got.iter().map(|t| t.0).collect();
    assert_eq!(d, want, "{what}: kNN distances of ({x}, {y}), k = {k}");
    let mut ids = std::collections::HashSet::new();
    for (dist, q) in got {
        assert_eq!(o.get(q.x, q.y), Some(q.id), "{what}: kNN point {q:?}");
        assert_eq!(
            *dist,
            q.point().distance(&p),
            "{what}: kNN distance of {q:?}"
        );
        assert!(ids.insert(q.id), "{what}: kNN gives {} twice", q.id);
    }
}

/// Runs `ops` on a new grid file of layer `L` on `dev`, every answer
/// checked against the oracle.
fn run<L: BucketLayer>(dev: Arc<dyn PageDevice>, opts: GridOptions, what: &str, ops: &[Op]) {
    let d = opts.domain;
    let what = format!("{} {what}", L::NAME);
    let mut g: GridFile<L> = GridFile::create(Arc::clone(&dev), opts.clone()).unwrap();
    let mut o = Oracle::default();
    for (step, op) in ops.iter().enumerate() {
        let what = format!("{what}, step {step} {op:?}");
        apply(&mut g, &mut o, &d, op, &what);
        if matches!(op, Op::Reopen) {
            g.checkpoint().unwrap();
            let in_use = g.pages_in_use();
            // A reader of the checkpoint sees it all and refuses changes.
            let mut r: GridFile<L> = GridFile::open_read_only(Arc::clone(&dev), opts.clone())
                .unwrap_or_else(|e| panic!("{what}: read-only open: {e}"));
            assert_eq!(sorted(r.range(&d).unwrap()), o.range(&d), "{what}: reader");
            assert_eq!(r.verify().unwrap(), o.0.len() as u64, "{what}: reader");
            assert!(r.insert(d.min_x(), d.min_y(), 1 << 40).is_err());
            drop(r);
            drop(g);
            g = GridFile::open(Arc::clone(&dev), opts.clone())
                .unwrap_or_else(|e| panic!("{what}: open: {e}"));
            assert_eq!(g.pages_in_use(), in_use, "{what}: pages in use at open");
        }
        assert_eq!(g.count().unwrap(), o.0.len() as u64, "{what}: count");
    }
    assert_eq!(g.verify().unwrap(), o.0.len() as u64, "{what}: verify");
    assert_eq!(sorted(g.range_batched(&d).unwrap()), o.range(&d), "{what}");
    g.checkpoint().unwrap();
    drop(g);
    let mut h: GridFile<L> = GridFile::open(dev, opts).unwrap();
    assert_eq!(
        sorted(h.range(&d).unwrap()),
        o.range(&d),
        "{what}: reopened"
    );
    assert_eq!(h.verify().unwrap(), o.0.len() as u64, "{what}: reopened");
}

/// One operation on `g` and the oracle, its answer checked.
fn apply<L: BucketLayer>(g: &mut GridFile<L>, o: &mut Oracle, d: &Rect, op: &Op, what: &str) {
    let removed = if L::BLIND_UPDATES {
        DeleteOutcome::Logged
    } else {
        DeleteOutcome::Removed
    };
    match op {
        Op::Insert(p, id) => {
            let (x, y) = xy(d, *p);
            let res = g.insert(x, y, *id);
            if !inside(d, x, y) {
                assert!(res.is_err(), "{what}: outside the domain");
            } else if o.get(x, y).is_some() || o.holds_id(*id) {
                let e = res.unwrap_err().to_string();
                assert!(e.contains("already"), "{what}: {e}");
            } else {
                res.unwrap_or_else(|e| panic!("{what}: {e}"));
                o.put(x, y, *id);
            }
        }
        Op::Fill(start, stride, n) => {
            let side = STEPS + 1;
            for i in 0..u32::from(*n) {
                let at = start.wrapping_add(i.wrapping_mul(*stride)) % (side * side);
                let p = (C::Lattice(at % side), C::Lattice(at / side));
                let id = (1 << 32) + (u64::from(*start) << 16) + u64::from(i);
                apply(g, o, d, &Op::Insert(p, id), what);
            }
        }
        Op::Drain(sel, n) => {
            for _ in 0..*n {
                apply(g, o, d, &Op::DeleteHeld(*sel, false), what);
            }
        }
        Op::DeleteHeld(sel, wrong) => {
            let Some((x, y, id)) = o.nth(*sel) else {
                return;
            };
            if *wrong {
                let other = id.wrapping_add(1);
                assert_eq!(
                    g.delete(x, y, other).unwrap(),
                    DeleteOutcome::NotFound,
                    "{what}"
                );
            } else {
                assert_eq!(g.delete(x, y, id).unwrap(), removed, "{what}");
                o.0.remove(&Oracle::key(x, y));
            }
        }
        Op::Delete(p, id) => {
            let (x, y) = xy(d, *p);
            let res = g.delete(x, y, *id);
            if !inside(d, x, y) {
                assert!(res.is_err(), "{what}: outside the domain");
            } else if o.get(x, y) == Some(*id) {
                assert_eq!(res.unwrap(), removed, "{what}");
                o.0.remove(&Oracle::key(x, y));
            } else {
                assert_eq!(res.unwrap(), DeleteOutcome::NotFound, "{what}");
            }
        }
        Op::MoveHeld(sel, to, wrong) => {
            let Some((x, y, id)) = o.nth(*sel) else {
                return;
            };
            let from = if *wrong {
                (x, if y == d.max_y() { d.min_y() } else { d.max_y() })
            } else {
                (x, y)
            };
            apply_move(g, o, d, id, from, xy(d, *to), what);
        }
        Op::Move(id, a, b) => apply_move(g, o, d, *id, xy(d, *a), xy(d, *b), what),
        Op::Get(p) => {
            let (x, y) = xy(d, *p);
            assert_eq!(g.get(x, y).unwrap(), o.get(x, y), "{what}");
        }
        Op::Window(a, b) => {
            let ((x0, y0), (x1, y1)) = (xy(d, *a), xy(d, *b));
            let r = Rect::new(x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)).unwrap();
            let want = o.range(&r);
            assert_eq!(sorted(g.range(&r).unwrap()), want, "{what}: plain");
            assert_eq!(
                sorted(g.range_batched(&r).unwrap()),
                want,
                "{what}: batched"
            );
        }
        Op::Knn(p, k) => {
            let (x, y) = xy(d, *p);
            let plain = g.knn(x, y, *k).unwrap_or_else(|e| panic!("{what}: {e}"));
            check_knn(&plain, o, x, y, *k, &format!("{what}: plain"));
            let batched = g
                .knn_prefetch(x, y, *k)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            check_knn(&batched, o, x, y, *k, &format!("{what}: batched"));
        }
        Op::Group(ps) => {
            let pts: Vec<(f64, f64)> = ps.iter().map(|p| xy(d, *p)).collect();
            let want: Vec<Option<u64>> = pts.iter().map(|&(x, y)| o.get(x, y)).collect();
            assert_eq!(g.group_get(&pts).unwrap(), want, "{what}: batched");
            assert_eq!(g.group_get_plain(&pts).unwrap(), want, "{what}: plain");
        }
        Op::Checkpoint => g.checkpoint().unwrap_or_else(|e| panic!("{what}: {e}")),
        // Done by the caller, which owns the device.
        Op::Reopen => {}
    }
}

/// Moves object `id` from `from` to `to` in `g` and the oracle, the
/// outcome checked: refusals change nothing.
fn apply_move<L: BucketLayer>(
    g: &mut GridFile<L>,
    o: &mut Oracle,
    d: &Rect,
    id: u64,
    from: (f64, f64),
    to: (f64, f64),
    what: &str,
) {
    let res = g.update(id, from, to);
    if !inside(d, from.0, from.1) || !inside(d, to.0, to.1) {
        assert!(res.is_err(), "{what}: outside the domain");
        return;
    }
    let same = Oracle::key(from.0, from.1) == Oracle::key(to.0, to.1);
    let want = match o.get(to.0, to.1) {
        Some(h) if !same => MoveOutcome::PointHeld(h),
        _ if o.get(from.0, from.1) != Some(id) => MoveOutcome::NotFound,
        _ => MoveOutcome::Moved,
    };
    assert_eq!(
        res.unwrap_or_else(|e| panic!("{what}: {e}")),
        want,
        "{what}"
    );
    if want == MoveOutcome::Moved {
        o.0.remove(&Oracle::key(from.0, from.1));
        o.put(to.0, to.1, id);
    }
}

fn mem(page: usize) -> Arc<dyn PageDevice> {
    Arc::new(MemDevice::new(page, 1 << 20).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn review_gffm_agrees_with_the_oracle(s in setup(), ops in prop::collection::vec(op(c), 1..400)) {
        run::<InPlaceBuckets>(mem(s.page), s.opts(), &format!("{s:?}"), &ops);
    }

    /// Points crowding the domain's edges, in GFFM and LB-Grid.
    #[test]
    fn review_grids_with_points_on_the_edges_agree_with_the_oracle(
        s in setup(),
        ops in prop::collection::vec(op(edge_c), 1..400),
        lb in any::<bool>(),
    ) {
        let what = format!("edges {s:?}");
        match lb {
            true => run::<LogBuckets>(mem(s.page), s.opts(), &what, &ops),
            false => run::<InPlaceBuckets>(mem(s.page), s.opts(), &what, &ops),
        }
    }

    #[test]
    fn review_lbgrid_agrees_with_the_oracle(s in setup(), ops in prop::collection::vec(op(c), 1..400)) {
        run::<LogBuckets>(mem(s.page), s.opts(), &format!("{s:?}"), &ops);
    }

    #[test]
    fn review_hgrid_agrees_with_the_oracle(
        s in setup(),
        ops in prop::collection::vec(op(c), 1..400),
        special in any::<bool>(),
        fast_pages in prop_oneof![Just(2u64), Just(100_000u64)],
    ) {
        let h = crate::storage::hybrid::HybridDevice::new(mem(s.page), mem(s.page))
            .unwrap()
            .with_fast_pages(fast_pages);
        let opts = GridOptions {
            hybrid: Some(hot::HybridOptions { s: 1.0, special }),
            ..s.opts()
        };
        let what = format!("hgrid special {special} fast {fast_pages} {s:?}");
        run::<InPlaceBuckets>(Arc::new(h), opts, &what, &ops);
    }
}

/// A grid file of layer `L` in memory holding the points of a 12 × 12
/// lattice (ids 0..144), enough for several buckets.
fn lattice_grid<L: BucketLayer>() -> GridFile<L> {
    let opts = GridOptions {
        dir_hot_pages: 4,
        bucket_hot_pages: 4,
        cold_pages: 2,
        ..GridOptions::new(domain_of(0))
    };
    let mut g: GridFile<L> = GridFile::create(mem(512), opts).unwrap();
    for i in 0..144u64 {
        g.insert((i % 12) as f64 * 8.0, (i / 12) as f64 * 8.0, i)
            .unwrap();
    }
    g
}

/// kNN with prefetching asked for more neighbours than half of `usize`
/// (every point, as a caller asking for "all of them" may): it sized its
/// prefetch groups with `2 * missing`, which overflowed (a panic in a
/// debug build) once two buckets were queued.
#[test]
fn knn_prefetch_takes_any_k() {
    for k in [usize::MAX, usize::MAX / 2 + 1] {
        let mut g = lattice_grid::<InPlaceBuckets>();
        assert_eq!(
            g.knn_prefetch(50.0, 50.0, k).unwrap().len(),
            144,
            "gffm, k {k}"
        );
        let mut g = lattice_grid::<LogBuckets>();
        assert_eq!(
            g.knn_prefetch(50.0, 50.0, k).unwrap().len(),
            144,
            "lbgrid, k {k}"
        );
    }
}

// ---------------------------------------------------------------------
// 2. Every grid kind behind an `Index` on files, with its journal.
// ---------------------------------------------------------------------

/// One operation on an index.
#[derive(Debug, Clone)]
enum IOp {
    Insert(u64, (C, C)),
    /// A box (refused: grid files index points).
    InsertBox(u64, (C, C), (C, C)),
    Fill(u32, u32, u16),
    /// Deletes the `sel`-th held object (under another id if `wrong`).
    DeleteHeld(usize, bool),
    Delete(u64, (C, C)),
    Drain(usize, u16),
    /// Moves the `sel`-th held object to a point (by id alone if `by_id`).
    MoveHeld(usize, (C, C), bool),
    Move(u64, (C, C), (C, C)),
    /// [`Index::update_by_id`](crate::Index::update_by_id) of any id.
    MoveById(u64, (C, C)),
    Query((C, C), (C, C), u8),
    Nearest((C, C), usize, bool),
    QueryBatch(Vec<((C, C), (C, C))>, u8),
    NearestBatch(Vec<(C, C)>, usize, bool),
    PointGroup(Vec<(C, C)>),
    Checkpoint,
    /// Close, open for reading (compared), open for writing.
    Close,
    /// Dropped without a checkpoint: the last checkpoint comes back.
    Crash,
}

fn iop() -> impl Strategy<Value = IOp> {
    let pt = || (c(), c());
    prop_oneof![
        24 => (id(), pt()).prop_map(|(i, p)| IOp::Insert(i, p)),
        2 => (id(), pt(), pt()).prop_map(|(i, a, b)| IOp::InsertBox(i, a, b)),
        3 => (any::<u32>(), prop_oneof![Just(1u32), Just(65), 1..5000u32], 0..200u16)
            .prop_map(|(a, s, n)| IOp::Fill(a, s, n)),
        6 => (any::<usize>(), prop::bool::weighted(0.2)).prop_map(|(s, w)| IOp::DeleteHeld(s, w)),
        2 => (id(), pt()).prop_map(|(i, p)| IOp::Delete(i, p)),
        2 => (any::<usize>(), 0..200u16).prop_map(|(s, n)| IOp::Drain(s, n)),
        6 => (any::<usize>(), pt(), any::<bool>()).prop_map(|(s, p, b)| IOp::MoveHeld(s, p, b)),
        2 => (id(), pt(), pt()).prop_map(|(i, a, b)| IOp::Move(i, a, b)),
        1 => (id(), pt()).prop_map(|(i, p)| IOp::MoveById(i, p)),
        4 => (pt(), pt(), 0..3u8).prop_map(|(a, b, p)| IOp::Query(a, b, p)),
        4 => (pt(), k(), any::<bool>()).prop_map(|(p, k, t)| IOp::Nearest(p, k, t)),
        1 => (prop::collection::vec((pt(), pt()), 0..6), 0..3u8)
            .prop_map(|(w, p)| IOp::QueryBatch(w, p)),
        1 => (prop::collection::vec(pt(), 0..6), k(), any::<bool>())
            .prop_map(|(p, k, t)| IOp::NearestBatch(p, k, t)),
        1 => prop::collection::vec(pt(), 0..12).prop_map(IOp::PointGroup),
        2 => Just(IOp::Checkpoint),
        1 => Just(IOp::Close),
        1 => Just(IOp::Crash),
    ]
}

/// The options of an index of grid kind `kind` on files of the index
/// directory, pages of 512 bytes and a buffer of a few pages, over
/// `domain`.
fn index_options(kind: &str, batched: bool, domain: Rect) -> crate::IndexOptions {
    let special = kind == "hgrid-special";
    let kind = if special { "hgrid" } else { kind };
    let device = if kind == "hgrid" {
        "hybrid:fast=(file?direct=false);slow=(file?direct=false)"
    } else {
        "file?direct=false"
    };
    let mut spec = crate::IndexSpec::new(crate::KeyStyle::Key);
    for (k, v) in [
        ("kind", kind),
        ("device", device),
        ("page_size", "512"),
        ("buffer", "8KiB"),
        ("grid_queries", if batched { "batched" } else { "plain" }),
    ] {
        spec.set(k, v).unwrap();
    }
    if kind == "hgrid" {
        spec.set("grid_special", if special { "on" } else { "off" })
            .unwrap();
        spec.set("grid_s", "1").unwrap();
    }
    let mut opts = spec.options().unwrap();
    opts.hilbert_domain = Some(domain);
    opts
}

fn predicate(p: u8) -> Predicate {
    Predicate::ALL[usize::from(p) % 3]
}

fn window(d: &Rect, a: (C, C), b: (C, C)) -> Rect {
    let ((x0, y0), (x1, y1)) = (xy(d, a), xy(d, b));
    Rect::new(x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)).unwrap()
}

fn at(x: f64, y: f64) -> Rect {
    Rect::new(x, y, x, y).unwrap()
}

impl Oracle {
    /// Ids of the answer of a window query for `pred`.
    fn query(&self, w: &Rect, pred: Predicate) -> Vec<u64> {
        let mut v: Vec<u64> = match pred {
            Predicate::Within if w.is_point() => {
                self.get(w.min_x(), w.min_y()).into_iter().collect()
            }
            Predicate::Within => Vec::new(),
            _ => self.range(w).into_iter().map(|t| t.2).collect(),
        };
        v.sort_unstable();
        v
    }
    /// The answer of a kNN query: (id, distance bits), by distance then id.
    fn nearest(&self, p: &Point, k: usize, ties: bool) -> Vec<(u64, u64)> {
        let mut all: Vec<(f64, u64)> = self
            .0
            .values()
            .map(|(x, y, id)| (Point { x: *x, y: *y }.distance(p), *id))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        match (ties, k.checked_sub(1).and_then(|i| all.get(i)).map(|t| t.0)) {
            (true, Some(kth)) => all.retain(|t| t.0 <= kth),
            _ => all.truncate(k),
        }
        all.into_iter().map(|(d, id)| (id, d.to_bits())).collect()
    }
}

fn ids(r: &crate::index::query::QueryResult) -> Vec<u64> {
    let mut v: Vec<u64> = r.hits.iter().map(|h| h.id).collect();
    v.sort_unstable();
    v
}

fn knn_pairs(r: &crate::index::query::KnnResult) -> Vec<(u64, u64)> {
    r.neighbors
        .iter()
        .map(|n| (n.id, n.distance.to_bits()))
        .collect()
}

/// Everything `idx` holds against the oracle: the count, one query over
/// the domain, and the structure's own check of every page.
fn check_all(idx: &crate::Index, o: &Oracle, d: &Rect, what: &str) {
    assert_eq!(idx.len(), o.0.len() as u64, "{what}: len");
    let got = idx.query(*d, Predicate::Intersects).unwrap();
    assert_eq!(ids(&got), o.query(d, Predicate::Intersects), "{what}: all");
}

/// Runs `ops` on a new index of grid kind `kind` in `dir`.
fn run_index(dir: &std::path::Path, kind: &str, batched: bool, dom: u8, ops: &[IOp]) {
    let d = domain_of(dom);
    let opts = index_options(kind, batched, d);
    let mut idx = crate::Index::create(dir, &opts).unwrap();
    assert!(idx.manifest().journal, "{kind}: a journal on files");
    let kind = if kind == "hgrid-special" {
        "hgrid"
    } else {
        kind
    };
    let mut o = Oracle::default();
    let mut saved = o.clone();
    for (step, op) in ops.iter().enumerate() {
        let what = format!("{kind} batched {batched} domain {dom}, step {step} {op:?}");
        match op {
            IOp::Checkpoint => {
                idx.checkpoint().unwrap_or_else(|e| panic!("{what}: {e}"));
                saved = o.clone();
            }
            IOp::Close => {
                idx.close().unwrap_or_else(|e| panic!("{what}: {e}"));
                saved = o.clone();
                let r = crate::Index::open(dir, Access::Read).unwrap();
                check_all(&r, &o, &d, &format!("{what}: reader"));
                let e = r.structure().len();
                assert_eq!(e, Some(o.0.len() as u64), "{what}: reader");
                drop(r);
                idx = crate::Index::open(dir, Access::Write).unwrap();
            }
            IOp::Crash => {
                drop(idx);
                o = saved.clone();
                idx = crate::Index::open(dir, Access::Write)
                    .unwrap_or_else(|e| panic!("{what}: open after the crash: {e}"));
                check_all(&idx, &o, &d, &format!("{what}: after the crash"));
            }
            _ => index_op(&mut idx, &mut o, &d, op, &what),
        }
        assert_eq!(idx.len(), o.0.len() as u64, "{what}: len");
    }
    check_all(&idx, &o, &d, "end");
    idx.close().unwrap();
    let idx = crate::Index::open(dir, Access::Read).unwrap();
    check_all(&idx, &o, &d, "end, reopened");
}

/// One change or query of `idx` and the oracle, its answer checked.
fn index_op(idx: &mut crate::Index, o: &mut Oracle, d: &Rect, op: &IOp, what: &str) {
    match op {
        IOp::Insert(id, p) => {
            let (x, y) = xy(d, *p);
            let res = idx.insert(*id, at(x, y));
            let refused = !inside(d, x, y) || o.get(x, y).is_some() || o.holds_id(*id);
            match res {
                Ok(()) if !refused => o.put(x, y, *id),
                Err(_) if refused => {}
                r => panic!("{what}: ({x}, {y}) id {id}: {r:?}"),
            }
        }
        IOp::InsertBox(id, a, b) => {
            let w = window(d, *a, *b);
            if w.is_point() {
                index_op(idx, o, d, &IOp::Insert(*id, *a), what);
                return;
            }
            let e = idx.insert(*id, w).unwrap_err().to_string();
            assert!(e.contains("points"), "{what}: {e}");
        }
        IOp::Fill(start, stride, n) => {
            let side = STEPS + 1;
            for i in 0..u32::from(*n) {
                let at = start.wrapping_add(i.wrapping_mul(*stride)) % (side * side);
                let p = (C::Lattice(at % side), C::Lattice(at / side));
                let id = (1 << 32) + (u64::from(*start) << 16) + u64::from(i);
                index_op(idx, o, d, &IOp::Insert(id, p), what);
            }
        }
        IOp::DeleteHeld(sel, wrong) => {
            let Some((x, y, id)) = o.nth(*sel) else {
                return;
            };
            if *wrong {
                let e = idx.delete(id.wrapping_add(1), at(x, y)).unwrap_err();
                assert!(e.to_string().contains("not in"), "{what}: {e}");
            } else {
                idx.delete(id, at(x, y))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                o.0.remove(&Oracle::key(x, y));
            }
        }
        IOp::Delete(id, p) => {
            let (x, y) = xy(d, *p);
            let res = idx.delete(*id, at(x, y));
            if inside(d, x, y) && o.get(x, y) == Some(*id) {
                res.unwrap_or_else(|e| panic!("{what}: {e}"));
                o.0.remove(&Oracle::key(x, y));
            } else {
                assert!(res.is_err(), "{what}");
            }
        }
        IOp::Drain(sel, n) => {
            for _ in 0..*n {
                index_op(idx, o, d, &IOp::DeleteHeld(*sel, false), what);
            }
        }
        IOp::MoveHeld(sel, to, by_id) => {
            let Some((x, y, id)) = o.nth(*sel) else {
                return;
            };
            let (nx, ny) = xy(d, *to);
            let res = match by_id {
                true => idx.update_by_id(id, at(nx, ny)),
                false => idx.update(id, at(x, y), at(nx, ny)),
            };
            index_move(o, d, id, (x, y), (nx, ny), res, what);
        }
        IOp::Move(id, a, b) => {
            let ((x, y), (nx, ny)) = (xy(d, *a), xy(d, *b));
            let res = idx.update(*id, at(x, y), at(nx, ny));
            index_move(o, d, *id, (x, y), (nx, ny), res, what);
        }
        IOp::MoveById(id, to) => {
            let (nx, ny) = xy(d, *to);
            let res = idx.update_by_id(*id, at(nx, ny));
            match o.0.values().find(|t| t.2 == *id).map(|t| (t.0, t.1)) {
                Some(from) => index_move(o, d, *id, from, (nx, ny), res, what),
                None => assert!(res.is_err(), "{what}: not held"),
            }
        }
        IOp::Query(a, b, p) => {
            let (w, pred) = (window(d, *a, *b), predicate(*p));
            let got = idx.query(w, pred).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(ids(&got), o.query(&w, pred), "{what}: {w:?}");
            assert_eq!(idx.count(w, pred).unwrap(), got.hits.len() as u64, "{what}");
        }
        IOp::Nearest(p, k, ties) => {
            let (x, y) = xy(d, *p);
            let q = Point { x, y };
            let got = idx
                .nearest(q, *k, *ties)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(knn_pairs(&got), o.nearest(&q, *k, *ties), "{what}");
        }
        IOp::QueryBatch(ws, p) => {
            let ws: Vec<Rect> = ws.iter().map(|(a, b)| window(d, *a, *b)).collect();
            let pred = predicate(*p);
            let got = idx
                .query_batch(&ws, pred)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.results.len(), ws.len(), "{what}");
            for (r, w) in got.results.iter().zip(&ws) {
                assert_eq!(ids(r), o.query(w, pred), "{what}: {w:?}");
            }
        }
        IOp::NearestBatch(ps, k, ties) => {
            let ps: Vec<Point> = ps
                .iter()
                .map(|p| {
                    let (x, y) = xy(d, *p);
                    Point { x, y }
                })
                .collect();
            let got = idx
                .nearest_batch(&ps, *k, *ties)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.len(), ps.len(), "{what}");
            for (r, q) in got.iter().zip(&ps) {
                assert_eq!(knn_pairs(r), o.nearest(q, *k, *ties), "{what}: {q:?}");
            }
        }
        IOp::PointGroup(ps) => {
            let ps: Vec<Point> = ps
                .iter()
                .map(|p| {
                    let (x, y) = xy(d, *p);
                    Point { x, y }
                })
                .collect();
            let got = idx
                .structure()
                .point_group(&ps)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.results.len(), ps.len(), "{what}");
            for (r, q) in got.results.iter().zip(&ps) {
                let want: Vec<u64> = o.get(q.x, q.y).into_iter().collect();
                assert_eq!(ids(r), want, "{what}: {q:?}");
            }
        }
        IOp::Checkpoint | IOp::Close | IOp::Crash => {}
    }
}

/// Checks the result `res` of moving object `id` from `from` to `to`
/// against the oracle, and applies it there.
fn index_move(
    o: &mut Oracle,
    d: &Rect,
    id: u64,
    from: (f64, f64),
    to: (f64, f64),
    res: crate::Result<()>,
    what: &str,
) {
    let same = Oracle::key(from.0, from.1) == Oracle::key(to.0, to.1);
    let ok = inside(d, from.0, from.1)
        && inside(d, to.0, to.1)
        && o.get(from.0, from.1) == Some(id)
        && (same || o.get(to.0, to.1).is_none());
    match res {
        Ok(()) if ok => {
            o.0.remove(&Oracle::key(from.0, from.1));
            o.put(to.0, to.1, id);
        }
        Err(_) if !ok => {}
        r => panic!("{what}: {id} from {from:?} to {to:?}: {r:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(index_cases()))]

    /// Every grid kind behind an index on files agrees with the oracle
    /// through changes, queries, checkpoints, closes and crashes.
    #[test]
    fn review_grid_indexes_agree_with_the_oracle(
        kind in prop_oneof![
            Just("grid"),
            Just("gffm"),
            Just("lbgrid"),
            Just("hgrid"),
            Just("hgrid-special"),
        ],
        batched in any::<bool>(),
        dom in prop_oneof![Just(0u8), Just(1), Just(3)],
        ops in prop::collection::vec(iop(), 1..120),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        run_index(&tmp.path().join("idx"), kind, batched, dom, &ops);
    }
}

/// Cases of the index runs (on files, slower): a quarter of the property
/// tests' cases, at least 4.
fn index_cases() -> u32 {
    (crate::testenv::proptest_cases() / 4).max(4)
}

// ---------------------------------------------------------------------
// 3. Damage to one page of a grid's files after a checkpoint.
// ---------------------------------------------------------------------

/// Bytes between the ranges flipped in a page past its 16-byte header
/// (`GEOFLASH_DAMAGE_STRIDE`, default 128; the header is flipped at every
/// 4-byte range whatever the stride).
fn damage_stride() -> usize {
    std::env::var("GEOFLASH_DAMAGE_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s: &usize| *s >= 4)
        .unwrap_or(128)
}

/// What a reader of the index in `dir` answers: every id (a window over
/// the domain), the 7 nearest of the centre with ties, and a group of
/// point lookups.
fn answers(dir: &std::path::Path, d: &Rect, probes: &[Point]) -> crate::Result<String> {
    let idx = crate::Index::open(dir, Access::Read)?;
    let all = ids(&idx.query(*d, Predicate::Intersects)?);
    let near = knn_pairs(&idx.nearest(d.center(), 7, true)?);
    let group: Vec<Vec<u64>> = idx
        .structure()
        .point_group(probes)
        .map_err(|e| idx.locate(e))?
        .results
        .iter()
        .map(ids)
        .collect();
    Ok(format!("{} {all:?} {near:?} {group:?}", idx.len()))
}

/// Writes `bytes` at `offset` of `path` in place.
fn patch(path: &std::path::Path, offset: usize, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset as u64).unwrap();
}

/// Builds an index of grid kind `kind` in `dir` (insertions, deletions
/// and moves, so that buckets split and merge) and closes it; returns
/// its domain and the points to probe.
fn damaged_index_base(dir: &std::path::Path, kind: &str) -> (Rect, Vec<Point>) {
    let d = domain_of(0);
    let mut idx = crate::Index::create(dir, &index_options(kind, true, d)).unwrap();
    let pt = |i: u64| ((i * 37 % 101) as f64 * 0.99, (i * 53 % 97) as f64);
    for i in 0..700u64 {
        let (x, y) = pt(i);
        idx.insert(i, at(x, y)).unwrap();
    }
    idx.checkpoint().unwrap();
    for i in (0..700u64).filter(|i| i % 3 == 0) {
        let (x, y) = pt(i);
        idx.delete(i, at(x, y)).unwrap();
    }
    for i in (0..700u64).filter(|i| i % 7 == 1 && i % 3 != 0) {
        let (x, y) = pt(i);
        idx.update(i, at(x, y), at(x + 0.5, y)).unwrap();
    }
    idx.close().unwrap();
    let probes = (0..40u64)
        .map(|i| {
            let (x, y) = pt(i * 17);
            Point { x, y }
        })
        .collect();
    (d, probes)
}

/// Every page of every file of an index of each grid kind, damaged one
/// 4-byte range at a time after the index was closed: a reader gets the
/// exact answers or an error naming the damaged file.
#[test]
fn review_damage_to_any_page_of_a_grid_gives_the_exact_answer_or_names_the_file() {
    const PAGE: usize = 512;
    let root = tempfile::tempdir().unwrap();
    let (mut flips, mut refused) = (0u64, 0u64);
    for kind in ["grid", "gffm", "lbgrid", "hgrid", "hgrid-special"] {
        let dir = root.path().join(kind);
        let (d, probes) = damaged_index_base(&dir, kind);
        let want = answers(&dir, &d, &probes).unwrap();
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert!(
            files.iter().any(|f| f == "journal.dat"),
            "{kind}: {files:?}"
        );
        for file in &files {
            let path = dir.join(file);
            let clean = std::fs::read(&path).unwrap();
            // Every page (a file shorter than a page, or its tail, as one).
            for (page, piece) in clean.chunks(PAGE).enumerate() {
                let base = page * PAGE;
                if piece.iter().all(|&b| b == 0) {
                    continue; // never written: nothing reads it
                }
                let len = piece.len();
                let stride = damage_stride();
                let offsets = (0..16)
                    .step_by(4)
                    .chain((16 + (page * 52) % stride..len).step_by(stride))
                    .filter(|&off| off + 4 <= len);
                for off in offsets {
                    let at = base + off;
                    let mut bytes: [u8; 4] = clean[at..at + 4].try_into().unwrap();
                    bytes.iter_mut().for_each(|b| *b ^= 0x5a);
                    patch(&path, at, &bytes);
                    flips += 1;
                    match answers(&dir, &d, &probes) {
                        Ok(got) => assert_eq!(got, want, "{kind}: {file} page {page} byte {at}"),
                        Err(e) => {
                            let msg = e.to_string();
                            assert!(
                                msg.contains(file.as_str()),
                                "{kind}: {file} page {page} byte {at}: {msg}"
                            );
                            refused += 1;
                        }
                    }
                    patch(&path, at, &clean[at..at + 4]);
                }
            }
        }
        assert_eq!(
            answers(&dir, &d, &probes).unwrap(),
            want,
            "{kind}: restored"
        );
    }
    println!("grid page damage: {flips} flips, {refused} refused naming the file, the rest exact");
}

// ---------------------------------------------------------------------
// 4. Changes whose follow-up work fails.
// ---------------------------------------------------------------------

/// A device whose reads fail while `fail_reads` is set.
#[derive(Debug)]
struct ReadGate {
    inner: Arc<dyn PageDevice>,
    fail_reads: std::sync::atomic::AtomicBool,
}

impl crate::storage::DeviceExt for ReadGate {
    crate::storage::forward_device_ext!(inner: all);
}

impl PageDevice for ReadGate {
    fn geometry(&self) -> crate::storage::DeviceGeometry {
        self.inner.geometry()
    }
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> crate::Result<()> {
        if self.fail_reads.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(crate::Error::InjectedFault("reads switched off".into()));
        }
        self.inner.read_batch(pages, buf)
    }
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> crate::Result<()> {
        self.inner.write_batch(pages, data)
    }
    fn sync(&self) -> crate::Result<()> {
        self.inner.sync()
    }
    fn trim(&self, pages: &[PageId]) -> crate::Result<()> {
        self.inner.trim(pages)
    }
    fn describe(&self) -> String {
        format!("read gate over {}", self.inner.describe())
    }
}

/// A move whose deletion succeeded but whose merge after it failed (the
/// neighbour bucket could not be read) returned the merge's error from
/// the deletion, and the move gave up there: the object was neither at
/// its old point nor at its new one (and a plain deletion reported a
/// failure for a point it had removed). Now the merge is skipped (an
/// under-full bucket is legal) and the change stands: the move is done,
/// the deletion reports the point removed.
fn failed_merge_keeps_the_change<L: BucketLayer>() {
    let gate = Arc::new(ReadGate {
        inner: mem(512),
        fail_reads: false.into(),
    });
    let dev: Arc<dyn PageDevice> = gate.clone();
    // Every deletion tries a merge, which reads a neighbour bucket.
    let opts = GridOptions {
        dir_hot_pages: 3,
        bucket_hot_pages: 3,
        cold_pages: 2,
        merge_threshold: 0.9,
        merge_fill: 0.95,
        ..GridOptions::new(domain_of(0))
    };
    let pts: Vec<(f64, f64)> = (0..400u32)
        .map(|i| (f64::from(i % 20) * 5.0, f64::from(i / 20) * 5.0))
        .collect();
    let mut g: GridFile<L> = GridFile::create(Arc::clone(&dev), opts.clone()).unwrap();
    for (i, &(x, y)) in pts.iter().enumerate() {
        g.insert(x, y, i as u64).unwrap();
    }
    g.checkpoint().unwrap();
    drop(g);
    let set = |on: bool| {
        gate.fail_reads
            .store(on, std::sync::atomic::Ordering::SeqCst)
    };
    // Object 0 moves within its own cell; object 1 is deleted.
    let mut g: GridFile<L> = GridFile::open(Arc::clone(&dev), opts.clone()).unwrap();
    assert_eq!(g.get(0.0, 0.0).unwrap(), Some(0));
    assert_eq!(g.get(0.5, 0.0).unwrap(), None);
    set(true);
    let moved = g.update(0, (0.0, 0.0), (0.5, 0.0));
    set(false);
    let at_old = g.get(0.0, 0.0).unwrap();
    let at_new = g.get(0.5, 0.0).unwrap();
    assert_eq!(
        moved.ok(),
        Some(MoveOutcome::Moved),
        "{}: old {at_old:?}, new {at_new:?}",
        L::NAME
    );
    assert_eq!((at_old, at_new), (None, Some(0)), "{}", L::NAME);
    drop(g);
    let mut g: GridFile<L> = GridFile::open(Arc::clone(&dev), opts.clone()).unwrap();
    assert_eq!(g.get(5.0, 0.0).unwrap(), Some(1));
    set(true);
    let deleted = g.delete(5.0, 0.0, 1);
    set(false);
    assert!(deleted.is_ok(), "{}: {deleted:?}", L::NAME);
    assert_eq!(g.get(5.0, 0.0).unwrap(), None, "{}", L::NAME);
    assert_eq!(g.count().unwrap(), pts.len() as u64 - 1, "{}", L::NAME);
    assert_eq!(g.verify().unwrap(), pts.len() as u64 - 1, "{}", L::NAME);
    g.checkpoint().unwrap();
    let mut h: GridFile<L> = GridFile::open(dev, opts).unwrap();
    assert_eq!(h.get(5.0, 0.0).unwrap(), None, "{}", L::NAME);
    assert_eq!(h.verify().unwrap(), pts.len() as u64 - 1, "{}", L::NAME);
}

#[test]
fn gffm_move_whose_merge_fails_keeps_the_object() {
    failed_merge_keeps_the_change::<InPlaceBuckets>();
}

#[test]
fn lbgrid_move_whose_merge_fails_keeps_the_object() {
    failed_merge_keeps_the_change::<LogBuckets>();
}
