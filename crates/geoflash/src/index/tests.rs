//! Index tests: random operation sequences against a brute-force oracle,
//! with every structural invariant checked after each operation.
use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::geom::{HilbertDomain, Point};
use crate::store::mem::MemStore;

fn r(x0: f64, y0: f64, x1: f64, y1: f64) -> Rect {
    Rect::new(x0, y0, x1, y1).unwrap()
}

/// Every configuration under test: (kind, split, M).
fn configs(max: usize) -> Vec<TreeParams> {
    let mut v = vec![
        TreeParams::new(IndexKind::RTree, max).with_split(SplitKind::Linear),
        TreeParams::new(IndexKind::RTree, max).with_split(SplitKind::Quadratic),
        TreeParams::new(IndexKind::RStar, max),
        TreeParams::new(IndexKind::RStar, max).with_reinsert_percent(40),
        TreeParams::new(IndexKind::RStar, max).with_reinsert_percent(0),
    ];
    if max <= 12 {
        v.push(TreeParams::new(IndexKind::RTree, max).with_split(SplitKind::Exponential));
    }
    // Hilbert R-trees: a coarse domain covering the data (many equal values)
    // and a fine one covering a part of it (centres outside are clamped).
    let coarse = HilbertDomain::new(r(0.0, 0.0, 25.0, 25.0), 3).unwrap();
    let fine = HilbertDomain::new(r(5.0, 5.0, 15.0, 15.0), 16).unwrap();
    v.push(TreeParams::new(IndexKind::Hilbert, max).with_hilbert_domain(coarse));
    v.push(TreeParams::new(IndexKind::Hilbert, max).with_hilbert_domain(fine));
    v
}

/// `p` with the M of a page of `page` bytes (Hilbert entries carry a payload).
/// The exponential split is left out above M = 20 (refused there).
fn for_page(p: TreeParams, page: usize) -> Option<TreeParams> {
    let max = crate::page::max_entries(page, p.kind == IndexKind::Hilbert);
    let p = TreeParams {
        max_entries: max,
        min_entries: max.div_ceil(2),
        ..p
    };
    p.verify().is_ok().then_some(p)
}

/// The ids of the items of `items` whose value `keep` accepts (a
/// brute-force answer).
pub(crate) fn ids_where<T>(items: &[(u64, T)], keep: impl Fn(&T) -> bool) -> BTreeSet<u64> {
    items.iter().filter(|(_, v)| keep(v)).map(|(id, _)| *id).collect()
}

/// The ids of the rectangles of `items` that window `w` selects under `p`.
pub(crate) fn ids_selected(items: &[(u64, Rect)], w: &Rect, p: Predicate) -> BTreeSet<u64> {
    let sel = query::Window {
        rect: *w,
        predicate: p,
    };
    ids_where(items, |r| query::Selection::select(&sel, r))
}

/// Brute-force oracle.
#[derive(Default, Clone)]
struct Oracle {
    items: Vec<(u64, Rect)>,
}

impl Oracle {
    fn query(&self, w: &Rect, p: Predicate) -> BTreeSet<u64> {
        ids_selected(&self.items, w, p)
    }

    fn point(&self, p: &Point) -> BTreeSet<u64> {
        ids_where(&self.items, |r| r.contains_point(p))
    }

    fn dists(&self, p: &Point) -> Vec<(f64, u64)> {
        let mut d: Vec<(f64, u64)> = self
            .items
            .iter()
            .map(|(id, r)| (min_dist(p, r), *id))
            .collect();
        d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        d
    }
}

/// The ids of the hits of `res`, checking that none is reported twice.
pub(crate) fn ids(res: &QueryResult) -> BTreeSet<u64> {
    let set: BTreeSet<u64> = res.hits.iter().map(|h| h.id).collect();
    assert_eq!(set.len(), res.hits.len(), "a record reported twice");
    set
}

/// The hits of `res` as (id, rectangle), ordered by id (a record reported
/// twice stays twice).
pub(crate) fn hits_by_id(res: &QueryResult) -> Vec<(u64, Rect)> {
    let mut hits: Vec<(u64, Rect)> = res.hits.iter().map(|h| (h.id, h.rect)).collect();
    hits.sort_by_key(|&(k, _)| k);
    hits
}

/// Checks every query kind against the oracle.
fn check_queries<S: NodeStore>(t: &RTree<S>, o: &Oracle, w: &Rect, p: &Point, k: usize) {
    for pred in Predicate::ALL {
        let res = t.query(*w, pred).unwrap();
        assert_eq!(ids(&res), o.query(w, pred), "{pred:?} {w:?}");
        assert_eq!(res.stats.results, res.hits.len() as u64);
    }
    let batch = t
        .query_batch(&[*w, r(p.x, p.y, p.x, p.y)], Predicate::Intersects)
        .unwrap();
    assert_eq!(batch.results.len(), 2);
    assert_eq!(ids(&batch.results[0]), o.query(w, Predicate::Intersects));
    assert_eq!(ids(&batch.results[1]), o.point(p));
    assert_eq!(ids(&t.query_point(*p).unwrap()), o.point(p));

    let truth = o.dists(p);
    let knn = t.nearest(*p, k, false).unwrap();
    let want: Vec<f64> = truth.iter().take(k).map(|x| x.0).collect();
    let got: Vec<f64> = knn.neighbors.iter().map(|n| n.distance).collect();
    assert_eq!(got, want, "kNN distances");
    for n in &knn.neighbors {
        assert!(
            truth.contains(&(n.distance, n.id)),
            "neighbour {n:?} has the wrong distance"
        );
    }
    let with_ties = t.nearest(*p, k, true).unwrap();
    let expect: BTreeSet<u64> = match want.last() {
        Some(&kth) => truth.iter().filter(|x| x.0 <= kth).map(|x| x.1).collect(),
        None => BTreeSet::new(),
    };
    let got: BTreeSet<u64> = with_ties.neighbors.iter().map(|n| n.id).collect();
    assert_eq!(got, expect, "kNN with ties");
    // The iterator form agrees with the bounded form.
    let iter: Vec<Neighbor> = t
        .nearest_iter(*p)
        .unwrap()
        .take(k)
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(iter, knn.neighbors);
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Rect),
    Delete(usize),
    Update(usize, Rect),
    /// A small move (a quarter unit per step, the box shrunk or grown by
    /// as much): mostly inside the leaf's rectangle, an update in place.
    Nudge(usize, (i8, i8, i8)),
    DeleteAbsent(Rect),
    Query(Rect, Point, usize),
}

/// `n` half-unit squares, twenty to a row, with ids 0 to `n - 1`.
pub(crate) fn grid_items(n: u64) -> Vec<(u64, Rect)> {
    (0..n)
        .map(|i| {
            let (x, y) = ((i % 20) as f64, (i / 20) as f64);
            (i, r(x, y, x + 0.5, y + 0.5))
        })
        .collect()
}

/// Rectangles on a coarse grid (half units over 20 × 20), so that ties,
/// touching and identical rectangles are common: the property tests of
/// every tree and store draw from it.
pub(crate) fn rect_strategy() -> impl Strategy<Value = Rect> {
    (0i32..40, 0i32..40, 0i32..6, 0i32..6).prop_map(|(x, y, w, h)| {
        let (x, y) = (f64::from(x) * 0.5, f64::from(y) * 0.5);
        r(x, y, x + f64::from(w) * 0.5, y + f64::from(h) * 0.5)
    })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => rect_strategy().prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Delete),
        1 => (any::<usize>(), rect_strategy()).prop_map(|(i, r)| Op::Update(i, r)),
        2 => (any::<usize>(), (-2i8..3, -2i8..3, -1i8..2)).prop_map(|(i, d)| Op::Nudge(i, d)),
        1 => rect_strategy().prop_map(Op::DeleteAbsent),
        1 => (rect_strategy(), (0i32..44, 0i32..44), 0usize..12)
            .prop_map(|(w, (x, y), k)| Op::Query(w, Point { x: f64::from(x) * 0.5, y: f64::from(y) * 0.5 }, k)),
    ]
}

/// Runs `ops` on a fresh tree of `params` over `store`, checking against the oracle.
fn run_ops<S: NodeStore>(store: S, params: TreeParams, ops: &[Op]) -> RTree<S> {
    let mut t = RTree::create(store, params).unwrap();
    let mut o = Oracle::default();
    let mut next_id = 0u64;
    for op in ops {
        match op {
            Op::Insert(rect) => {
                next_id += 1;
                t.insert(next_id * 7 % 1000 + next_id * 1000, *rect)
                    .unwrap();
                o.items.push((next_id * 7 % 1000 + next_id * 1000, *rect));
            }
            Op::Delete(i) if !o.items.is_empty() => {
                let (id, rect) = o.items.swap_remove(i % o.items.len());
                t.delete(id, rect).unwrap();
            }
            Op::Update(i, new) if !o.items.is_empty() => {
                let j = i % o.items.len();
                let (id, old) = o.items[j];
                t.update(id, old, *new).unwrap();
                o.items[j].1 = *new;
            }
            Op::Nudge(i, (dx, dy, grow)) if !o.items.is_empty() => {
                let j = i % o.items.len();
                let (id, old) = o.items[j];
                let (dx, dy) = (f64::from(*dx) * 0.25, f64::from(*dy) * 0.25);
                let g = f64::from(*grow) * 0.25;
                let (x0, y0) = (old.min_x() + dx, old.min_y() + dy);
                let x1 = (old.max_x() + dx + g).max(x0);
                let y1 = (old.max_y() + dy + g).max(y0);
                let new = r(x0, y0, x1, y1);
                t.update(id, old, new).unwrap();
                o.items[j].1 = new;
            }
            Op::DeleteAbsent(rect) => {
                let before = t.store().stats().ops_committed;
                let err = t.delete(u64::MAX, *rect).unwrap_err();
                assert!(err.to_string().contains("not in the index"), "{err}");
                assert_eq!(t.store().stats().ops_committed, before);
            }
            Op::Query(w, p, k) => check_queries(&t, &o, w, p, *k),
            _ => {}
        }
        let rep = t.check().unwrap_or_else(|e| panic!("after {op:?}: {e}"));
        assert_eq!(rep.records, o.items.len() as u64);
    }
    let all = r(-100.0, -100.0, 100.0, 100.0);
    assert_eq!(
        ids(&t.query(all, Predicate::Intersects).unwrap()),
        o.items.iter().map(|x| x.0).collect()
    );
    check_leaves(&mut t, &o);
    t
}

/// The leaves (in both read modes) hold every record once, each with the
/// MBR of its records, left to right as a whole-tree query reports them;
/// the bounds are the union of every record.
fn check_leaves<S: NodeStore>(t: &mut RTree<S>, o: &Oracle) {
    let mode = t.read_mode();
    t.set_read_mode(ReadMode::Single);
    let single = t.leaves().unwrap();
    t.set_read_mode(ReadMode::Batched);
    let leaves = t.leaves().unwrap();
    t.set_read_mode(mode);
    assert_eq!(leaves, single, "the read mode changes no leaf");
    let rects: std::collections::HashMap<u64, Rect> = o.items.iter().copied().collect();
    let mut in_order = Vec::new();
    for (page, keys, mbr) in &leaves {
        let union = Rect::union_all(keys.iter().map(|k| &rects[k])).unwrap();
        assert_eq!(*mbr, union, "leaf {page}");
        in_order.extend(keys.iter().copied());
    }
    let pages: BTreeSet<PageId> = leaves.iter().map(|l| l.0).collect();
    assert_eq!(pages.len(), leaves.len(), "a leaf listed twice");
    let mut all = Vec::new();
    t.select(&query::Everything, |e| all.push(e.key)).unwrap();
    assert_eq!(in_order, all, "leaves left to right");
    assert_eq!(all.len(), o.items.len());
    let bounds = Rect::union_all(o.items.iter().map(|x| &x.1));
    assert_eq!(t.bounds().unwrap(), bounds);
    check_batch_modes(t, o);
}

/// A batch of windows (records' own rectangles, grown, and the whole
/// plane) answers in both read modes as one query per window does, hits in
/// the same order, with the same node counts.
fn check_batch_modes<S: NodeStore>(t: &mut RTree<S>, o: &Oracle) {
    let mut windows: Vec<Rect> = o
        .items
        .iter()
        .step_by(7)
        .take(6)
        .map(|(_, b)| {
            r(
                b.min_x() - 1.0,
                b.min_y() - 1.0,
                b.max_x() + 1.0,
                b.max_y() + 1.0,
            )
        })
        .collect();
    windows.push(r(-100.0, -100.0, 100.0, 100.0));
    let mode = t.read_mode();
    for pred in [
        Predicate::Intersects,
        Predicate::Within,
        Predicate::Contains,
    ] {
        let mut by_mode = Vec::new();
        for m in [ReadMode::Single, ReadMode::Batched] {
            t.set_read_mode(m);
            let batch = t.query_batch(&windows, pred).unwrap();
            let keys = t.query_batch_keys(&windows, pred).unwrap();
            assert_eq!(keys.len(), windows.len());
            // The flat answer: the same keys in the same order, window by
            // window; without the window over everything, most leaves have
            // one window alone (the leaf scan rather than the test per entry).
            for ws in [&windows[..], &windows[..windows.len() - 1]] {
                let flat = t.query_batch_flat(ws, pred).unwrap();
                assert_eq!(flat.offsets.len(), ws.len() + 1);
                for (i, w) in ws.iter().enumerate() {
                    let one = KeyResult::from(t.query(*w, pred).unwrap());
                    let run = &flat.keys[flat.offsets[i]..flat.offsets[i + 1]];
                    assert_eq!(run, &one.keys[..], "{pred:?} window {i} {m:?}");
                }
                assert_eq!(flat.offsets.last(), Some(&flat.keys.len()));
            }
            for ((w, got), got_keys) in windows.iter().zip(&batch.results).zip(keys) {
                let one = t.query(*w, pred).unwrap();
                assert_eq!(got.hits, one.hits, "{pred:?} {w:?} {m:?}");
                assert_eq!(got.stats, one.stats, "{pred:?} {w:?} {m:?}");
                // The keys alone: the same records in the same order.
                assert_eq!(got_keys, KeyResult::from(one), "{pred:?} {w:?} {m:?}");
            }
            by_mode.push(batch);
        }
        assert_eq!(by_mode[0], by_mode[1], "the read mode changes no answer");
    }
    t.set_read_mode(mode);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn random_operations_agree_with_the_oracle_small_pages(
        ops in prop::collection::vec(op_strategy(), 1..250),
        max in 4usize..9,
    ) {
        for p in configs(max) {
            run_ops(MemStore::new(), p, &ops);
        }
    }

    #[test]
    fn random_operations_agree_with_the_oracle_page_sizes(
        ops in prop::collection::vec(op_strategy(), 1..300),
    ) {
        // M of a 512-byte and of a 4 KiB page.
        for page in [512usize, 4096] {
            for p in configs(12).into_iter().filter_map(|p| for_page(p, page)) {
                run_ops(MemStore::new(), p, &ops);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// A batch of many windows of mixed widths (points, vertical lines,
    /// slivers, wide ones and one covering everything), many of them
    /// touching records' edges, and coordinates far from the origin where
    /// `min_x + width` rounds: each window's answer is the oracle's and a
    /// query of its own, with the same nodes visited. The batch's run
    /// search by `min_x` must skip no window that enters a node.
    #[test]
    fn many_windows_of_mixed_widths_answer_as_the_oracle(
        boxes in prop::collection::vec((0u32..400, 0u32..400, 0u32..20, 0u32..20), 1..300),
        wins in prop::collection::vec((0u32..440, 0u32..440, 0usize..5, 0u32..60), 2..80),
        offset in prop_oneof![Just(0.0), Just(1.0e9), Just(-3.3e7)],
        scale in prop_oneof![Just(1.0), Just(1.0e-3), Just(0.1)],
    ) {
        let at = |v: u32| offset + scale * f64::from(v);
        let mut t = RTree::create(MemStore::new(), TreeParams::new(IndexKind::RStar, 6)).unwrap();
        let mut o = Oracle::default();
        for (i, &(x, y, w, h)) in boxes.iter().enumerate() {
            let rect = r(at(x), at(y), at(x + w), at(y + h));
            t.insert(i as u64, rect).unwrap();
            o.items.push((i as u64, rect));
        }
        let windows: Vec<Rect> = wins
            .iter()
            .map(|&(x, y, class, size)| {
                let w = [0, 0, 1, size, 440][class];
                let h = [0, size, 1, size, 440][class];
                r(at(x), at(y), at(x + w), at(y + h))
            })
            .collect();
        for pred in [Predicate::Intersects, Predicate::Contains, Predicate::Within] {
            let batch = t.query_batch(&windows, pred).unwrap();
            prop_assert_eq!(batch.results.len(), windows.len());
            for (w, got) in windows.iter().zip(&batch.results) {
                prop_assert_eq!(ids(got), o.query(w, pred), "{:?} {:?}", pred, w);
                let one = t.query(*w, pred).unwrap();
                prop_assert_eq!(&got.hits, &one.hits);
                prop_assert_eq!(got.stats, one.stats);
            }
        }
    }
}

#[test]
fn many_objects_with_small_nodes_grow_and_shrink_the_tree() {
    for p in configs(4) {
        let mut t = RTree::create(MemStore::new(), p).unwrap();
        let mut items = Vec::new();
        for i in 0..600u64 {
            let x = ((i * 37) % 101) as f64;
            let y = ((i * 53) % 97) as f64;
            let rect = r(x, y, x + (i % 3) as f64, y + (i % 5) as f64);
            t.insert(i, rect).unwrap();
            items.push((i, rect));
        }
        let rep = t.check().unwrap();
        assert!(rep.height >= 4, "{p:?}: height {}", rep.height);
        assert_eq!(rep.records, 600);
        for (n, (i, rect)) in items.iter().enumerate() {
            t.delete(*i, *rect).unwrap();
            if n % 50 == 0 {
                t.check().unwrap();
            }
        }
        let rep = t.check().unwrap();
        assert_eq!((rep.height, rep.records), (0, 0));
        assert_eq!(t.store().node_count(), 0, "{p:?}: every node freed");
    }
}

#[test]
fn bad_input_is_refused_and_leaves_the_tree_unchanged() {
    let mut t = RTree::create(MemStore::new(), TreeParams::new(IndexKind::RStar, 6)).unwrap();
    for i in 0..30u64 {
        let x = i as f64;
        t.insert(i, r(x, x, x + 1.0, x + 1.0)).unwrap();
    }
    let before: Vec<Hit> = t
        .query(r(-1e9, -1e9, 1e9, 1e9), Predicate::Intersects)
        .unwrap()
        .hits;
    let nan = Rect::invalid_for_tests(f64::NAN, 0.0, 1.0, 1.0);
    let inverted = Rect::invalid_for_tests(2.0, 0.0, 1.0, 1.0);
    assert!(t.insert(99, nan).is_err());
    assert!(t.insert(99, inverted).is_err());
    assert!(t.query(nan, Predicate::Intersects).is_err());
    assert!(t
        .query_point(Point {
            x: f64::INFINITY,
            y: 0.0
        })
        .is_err());
    assert!(t
        .nearest_iter(Point {
            x: f64::NAN,
            y: 0.0
        })
        .is_err());
    let dup = t.insert(5, r(5.0, 5.0, 6.0, 6.0)).unwrap_err();
    assert!(dup.to_string().contains("already in the index"), "{dup}");
    let absent = t.delete(5, r(5.0, 5.0, 6.5, 6.0)).unwrap_err();
    assert!(absent.to_string().contains("not in the index"), "{absent}");
    assert!(t
        .update(77, r(0.0, 0.0, 1.0, 1.0), r(1.0, 1.0, 2.0, 2.0))
        .is_err());
    let after: Vec<Hit> = t
        .query(r(-1e9, -1e9, 1e9, 1e9), Predicate::Intersects)
        .unwrap()
        .hits;
    assert_eq!(before, after);
    assert_eq!(t.len(), 30);
    t.check().unwrap();
    // Creating on a store that already holds a tree is refused.
    let store = t.into_store();
    assert!(RTree::create(store, TreeParams::new(IndexKind::RStar, 6)).is_err());
}

#[test]
fn a_duplicate_id_anywhere_in_the_tree_is_refused() {
    // Object 3 sits far from where its duplicate's rectangle goes, so the
    // leaf check alone would not see it; the id set must.
    let far = r(1000.0, 1000.0, 1001.0, 1001.0);
    let items = grid_items(200);
    for params in configs(6) {
        let mut t = RTree::create(MemStore::new(), params).unwrap();
        for (i, rect) in &items {
            t.insert(*i, *rect).unwrap();
        }
        let err = t.insert(3, far).unwrap_err();
        assert!(err.to_string().contains("already in the index"), "{err}");
        assert_eq!(t.len(), 200);
        t.check().unwrap();
        // After a delete the id is free again; the set follows updates.
        t.delete(3, items[3].1).unwrap();
        t.insert(3, far).unwrap();
        t.update(3, far, items[3].1).unwrap();
        assert!(t.insert(3, far).is_err());
        // Reopened and bulk-loaded trees build their set at the first insertion.
        let mut t = RTree::open(t.into_store(), params).unwrap();
        assert!(t.insert(150, far).is_err());
        t.insert(1000, far).unwrap();
        let mut b =
            RTree::bulk_load(MemStore::new(), params, items.clone(), BulkMethod::Str, 1.0).unwrap();
        assert!(b.insert(42, far).is_err());
        b.insert(4242, far).unwrap();
        b.check().unwrap();
    }
}

#[test]
fn same_operations_build_the_same_tree_twice() {
    let ops: Vec<(u64, Rect)> = (0..200u64)
        .map(|i| {
            let x = ((i * 31) % 89) as f64;
            (i, r(x, (i % 13) as f64, x + 1.0, (i % 13) as f64 + 2.0))
        })
        .collect();
    let build = || {
        let mut t = RTree::create(MemStore::new(), TreeParams::new(IndexKind::RStar, 8)).unwrap();
        for (i, rect) in &ops {
            t.insert(*i, *rect).unwrap();
        }
        for (i, rect) in ops.iter().step_by(3) {
            t.delete(*i, *rect).unwrap();
        }
        let s = t.into_store();
        s.page_ids()
            .into_iter()
            .map(|p| (p, s.get(p).unwrap()))
            .collect::<Vec<_>>()
    };
    assert_eq!(build(), build());
}

#[test]
fn knn_ties_return_every_item_at_the_kth_distance() {
    let mut t = RTree::create(MemStore::new(), TreeParams::new(IndexKind::RTree, 4)).unwrap();
    // Eight unit squares at distance exactly 1 from the origin, one farther.
    let pts = [(1.0, 0.0), (-2.0, 0.0), (0.0, 1.0), (0.0, -2.0)];
    for (i, (x, y)) in pts.iter().enumerate() {
        t.insert(i as u64, r(*x, *y, x + 1.0, y + 1.0)).unwrap();
    }
    t.insert(10, r(5.0, 5.0, 6.0, 6.0)).unwrap();
    let o = Point { x: 0.0, y: 0.0 };
    let one = t.nearest(o, 1, false).unwrap();
    assert_eq!(one.neighbors.len(), 1);
    assert_eq!(one.neighbors[0].distance, 1.0);
    let all = t.nearest(o, 1, true).unwrap();
    assert_eq!(all.neighbors.len(), 4);
    assert!(all.neighbors.iter().all(|n| n.distance == 1.0));
    assert_eq!(all.stats.results, 4);
    assert!(all.stats.candidates >= 4);
    assert_eq!(t.nearest(o, 0, true).unwrap().neighbors.len(), 0);
    assert_eq!(t.nearest(o, 100, false).unwrap().neighbors.len(), 5);
}

/// Issue 17, item 2: a k far beyond the records (a user's number) returns
/// every record, and reserves memory for the answer, not for k.
#[test]
fn knn_with_a_huge_k_returns_every_record() {
    let mut t = RTree::create(MemStore::new(), TreeParams::new(IndexKind::RStar, 6)).unwrap();
    for i in 0..40u64 {
        let x = i as f64;
        t.insert(i, r(x, 0.0, x + 0.5, 0.5)).unwrap();
    }
    let o = Point { x: 0.0, y: 0.0 };
    for k in [1usize << 40, usize::MAX] {
        for ties in [false, true] {
            let got = t.nearest(o, k, ties).unwrap();
            let ids: Vec<u64> = got.neighbors.iter().map(|n| n.id).collect();
            assert_eq!(ids, (0..40).collect::<Vec<_>>(), "k {k} ties {ties}");
            assert!(got.neighbors.capacity() < 1 << 20);
        }
    }
}

#[test]
fn diff_produces_minimal_changes() {
    let e = |k: u64, x: f64| Entry {
        key: k,
        rect: r(x, 0.0, x, 0.0),
        payload: 0,
    };
    let old = vec![e(1, 1.0), e(2, 2.0), e(3, 3.0)];
    let new = vec![e(4, 4.0), e(2, 2.5), e(1, 1.0)];
    let mut applied = old.clone();
    let changes = diff(&old, &new);
    assert_eq!(changes.len(), 3);
    crate::store::mem::apply_changes(&mut applied, &changes);
    let mut want = new.clone();
    want.sort_by_key(|x| x.key);
    assert_eq!(applied, want);
}

mod plain {
    //! The same oracle tests on the disk-based `PlainStore` over a `MemDevice`,
    //! with every buffer configuration, and a close/reopen round trip.
    use std::sync::Arc;

    use super::*;
    use crate::cache::PolicyKind;
    use crate::storage::mem::MemDevice;
    use crate::store::plain::{PlainConfig, PlainStore};

    /// Buffer settings under test: none, and a small buffer (a few nodes,
    /// so evictions and write-backs happen) for each policy.
    fn buffers(page: usize) -> Vec<PlainConfig> {
        let mut v = vec![PlainConfig {
            buffer_bytes: 0,
            policy: PolicyKind::Lru,
            with_payload: false,
        }];
        for policy in [
            PolicyKind::Lru,
            PolicyKind::Hlru,
            PolicyKind::S2q,
            PolicyKind::TwoQ,
        ] {
            v.push(PlainConfig {
                buffer_bytes: 6 * page,
                policy,
                with_payload: false,
            });
        }
        v
    }

    fn all_answers<S: NodeStore>(t: &RTree<S>) -> Vec<Vec<u64>> {
        let mut out = Vec::new();
        for i in 0..10 {
            let x = f64::from(i) * 2.0;
            for pred in Predicate::ALL {
                let ids = t
                    .query(r(x, x, x + 3.0, x + 3.0), pred)
                    .unwrap()
                    .sorted_ids();
                out.push(ids);
            }
            let knn = t.nearest(Point { x, y: 20.0 - x }, 5, true).unwrap();
            out.push(knn.neighbors.iter().map(|n| n.id).collect());
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        #[test]
        fn plain_store_agrees_with_the_oracle_and_survives_reopen(
            ops in prop::collection::vec(op_strategy(), 1..200),
        ) {
            for page in [512usize, 4096] {
                for cfg in buffers(page) {
                    for params in configs(12).into_iter().filter_map(|p| for_page(p, page)) {
                        let cfg = PlainConfig { with_payload: params.kind == IndexKind::Hilbert, ..cfg };
                        let dev = Arc::new(MemDevice::new(page, 1 << 20).unwrap());
                        let store = PlainStore::create(dev.clone(), cfg).unwrap();
                        let mut t = run_ops(store, params, &ops);
                        let answers = all_answers(&t);
                        let report = t.check().unwrap();
                        t.store_mut().checkpoint().unwrap();
                        drop(t);
                        let store = PlainStore::open(dev, cfg).unwrap();
                        let t = RTree::open(store, params).unwrap();
                        prop_assert_eq!(t.check().unwrap(), report);
                        prop_assert_eq!(all_answers(&t), answers);
                    }
                }
            }
        }
    }

    #[test]
    fn two_threads_querying_one_tree_agree_with_one_thread() {
        let dev = Arc::new(MemDevice::new(512, 1 << 20).unwrap());
        let cfg = PlainConfig {
            buffer_bytes: 8 * 512,
            policy: PolicyKind::S2q,
            with_payload: false,
        };
        let params = TreeParams::for_page(IndexKind::RStar, 512).unwrap();
        let mut t = RTree::create(PlainStore::create(dev, cfg).unwrap(), params).unwrap();
        for i in 0..2000u64 {
            let x = ((i * 7919) % 1000) as f64 / 10.0;
            let y = ((i * 104_729) % 997) as f64 / 10.0;
            t.insert(i, r(x, y, x + (i % 4) as f64, y + (i % 3) as f64))
                .unwrap();
        }
        let windows: Vec<Rect> = (0..200)
            .map(|i| {
                let x = f64::from(i % 20) * 5.0;
                let y = f64::from(i / 20) * 10.0;
                r(x, y, x + 7.0, y + 4.0)
            })
            .collect();
        let answer = |t: &RTree<PlainStore>, w: &Rect| -> (Vec<u64>, Vec<u64>) {
            let ids = t.query(*w, Predicate::Intersects).unwrap().sorted_ids();
            let p = Point {
                x: w.min_x(),
                y: w.max_y(),
            };
            let knn = t
                .nearest(p, 10, true)
                .unwrap()
                .neighbors
                .iter()
                .map(|n| n.id)
                .collect();
            (ids, knn)
        };
        let single: Vec<_> = windows.iter().map(|w| answer(&t, w)).collect();
        let tree = &t;
        let results: Vec<Vec<_>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| s.spawn(|| windows.iter().map(|w| answer(tree, w)).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            assert_eq!(r, single);
        }
    }

    /// The memory store of an index in memory (made for pages: M from the
    /// page size, payloads only for the Hilbert R-tree) under the oracle,
    /// and the same trees as the plain store page by page: by insertion
    /// (no deletion, so both allocate pages in the same order) and by both
    /// bulk loads (the memory store's own sink against the device's).
    #[test]
    fn the_memory_store_builds_the_plain_store_s_trees() {
        for params in configs(12).into_iter().filter_map(|p| for_page(p, 512)) {
            let with_payload = params.kind == IndexKind::Hilbert;
            let plain = || {
                let dev = Arc::new(MemDevice::new(512, 1 << 20).unwrap());
                let cfg = PlainConfig {
                    buffer_bytes: 4096,
                    policy: PolicyKind::S2q,
                    with_payload,
                };
                PlainStore::create(dev, cfg).unwrap()
            };
            let memory = || MemStore::for_pages(512, with_payload).unwrap();
            let items: Vec<(u64, Rect)> = (0..600u64)
                .map(|i| {
                    let x = ((i * 7919) % 1000) as f64 / 50.0;
                    let y = ((i * 104_729) % 997) as f64 / 50.0;
                    (i, r(x, y, x + (i % 4) as f64 * 0.5, y + (i % 3) as f64 * 0.5))
                })
                .collect();
            let mut a = RTree::create(memory(), params).unwrap();
            let mut b = RTree::create(plain(), params).unwrap();
            for &(id, rect) in &items {
                a.insert(id, rect).unwrap();
                b.insert(id, rect).unwrap();
            }
            b.store_mut().checkpoint().unwrap();
            same_pages(&a, &b, &format!("{params:?} by insertion"));
            assert_eq!(all_answers(&a), all_answers(&b));
            for method in [BulkMethod::Str, BulkMethod::Hilbert] {
                let a = RTree::bulk_load(memory(), params, items.clone(), method, 0.8).unwrap();
                let b = RTree::bulk_load(plain(), params, items.clone(), method, 0.8).unwrap();
                same_pages(&a, &b, &format!("{params:?} bulk {method:?}"));
                assert_eq!(a.store().stats().ops_committed, 0);
            }
        }
    }

    /// The tree of `a` (a memory store) is that of `b`, page by page.
    fn same_pages<S: NodeStore>(a: &RTree<MemStore>, b: &RTree<S>, what: &str) {
        assert_eq!(a.check().unwrap(), b.check().unwrap(), "{what}");
        assert_eq!(a.store().meta(), b.store().meta(), "{what}");
        for p in a.store().page_ids() {
            assert_eq!(a.store().get(p).unwrap(), b.store().get(p).unwrap(), "{what}: page {p}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// Random operations, deletions and updates included, on the memory
        /// store of an index in memory, against the oracle.
        #[test]
        fn the_memory_store_for_pages_agrees_with_the_oracle(
            ops in prop::collection::vec(op_strategy(), 1..200),
        ) {
            for params in configs(12).into_iter().filter_map(|p| for_page(p, 512)) {
                let store = MemStore::for_pages(512, params.kind == IndexKind::Hilbert).unwrap();
                let t = run_ops(store, params, &ops);
                let nodes: u64 = t.check().unwrap().nodes_per_level.iter().sum();
                prop_assert_eq!(t.store().node_count() as u64, nodes);
            }
        }
    }

    #[test]
    fn plain_and_mem_stores_build_the_same_tree_by_insertion() {
        // Without deletions both stores allocate pages in the same order, so
        // the same insertions give the same logical pages.
        for params in configs(12).into_iter().filter_map(|p| for_page(p, 512)) {
            let dev = Arc::new(MemDevice::new(512, 1 << 20).unwrap());
            let cfg = PlainConfig {
                buffer_bytes: 4096,
                policy: PolicyKind::S2q,
                with_payload: params.kind == IndexKind::Hilbert,
            };
            let mut a = RTree::create(MemStore::new(), params).unwrap();
            let mut b = RTree::create(PlainStore::create(dev, cfg).unwrap(), params).unwrap();
            for i in 0..400u64 {
                let x = ((i * 7919) % 1000) as f64 / 10.0;
                let y = ((i * 104_729) % 997) as f64 / 10.0;
                let rect = r(x, y, x + (i % 4) as f64, y + (i % 3) as f64);
                a.insert(i, rect).unwrap();
                b.insert(i, rect).unwrap();
            }
            b.store_mut().checkpoint().unwrap();
            assert_eq!(a.check().unwrap(), b.check().unwrap());
            for p in a.store().page_ids() {
                assert_eq!(
                    a.store().get(p).unwrap(),
                    b.store().get(p).unwrap(),
                    "page {p}"
                );
            }
        }
    }
}

/// Every tree, built by insertion and by bulk loading, answers range queries
/// with the same ids as the `rstar` crate and kNN with the same distances.
#[test]
fn answers_equal_those_of_the_rstar_crate() {
    use rand::{Rng, SeedableRng};
    type Obj = ::rstar::primitives::GeomWithData<::rstar::primitives::Rectangle<[f64; 2]>, u64>;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let data: Vec<(u64, Rect)> = (0..3000u64)
        .map(|i| {
            let (x, y): (f64, f64) = (rng.gen(), rng.gen());
            let (w, h) = (rng.gen::<f64>() * 0.02, rng.gen::<f64>() * 0.02);
            (i, r(x, y, x + w, y + h))
        })
        .collect();
    let reference = ::rstar::RTree::bulk_load(
        data.iter()
            .map(|(id, b)| {
                Obj::new(
                    ::rstar::primitives::Rectangle::from_corners(
                        [b.min_x(), b.min_y()],
                        [b.max_x(), b.max_y()],
                    ),
                    *id,
                )
            })
            .collect(),
    );
    let windows: Vec<Rect> = (0..40)
        .map(|_| {
            let (x, y, s): (f64, f64, f64) = (rng.gen(), rng.gen(), rng.gen::<f64>() * 0.1);
            r(x, y, x + s, y + s)
        })
        .collect();
    let points: Vec<Point> = (0..20)
        .map(|_| Point::new(rng.gen(), rng.gen()).unwrap())
        .collect();
    let domain = HilbertDomain::new(r(0.0, 0.0, 1.1, 1.1), 16).unwrap();
    let kinds = [
        TreeParams::new(IndexKind::RTree, 16).with_split(SplitKind::Linear),
        TreeParams::new(IndexKind::RTree, 16).with_split(SplitKind::Quadratic),
        TreeParams::new(IndexKind::RStar, 16),
        TreeParams::new(IndexKind::Hilbert, 16).with_hilbert_domain(domain),
    ];
    for params in kinds {
        let mut inserted = RTree::create(MemStore::new(), params).unwrap();
        for (id, b) in &data {
            inserted.insert(*id, *b).unwrap();
        }
        let bulk =
            RTree::bulk_load(MemStore::new(), params, data.clone(), BulkMethod::Str, 1.0).unwrap();
        for tree in [&inserted, &bulk] {
            for w in &windows {
                let env =
                    ::rstar::AABB::from_corners([w.min_x(), w.min_y()], [w.max_x(), w.max_y()]);
                let want: BTreeSet<u64> = reference
                    .locate_in_envelope_intersecting(&env)
                    .map(|o| o.data)
                    .collect();
                let res = tree.query(*w, Predicate::Intersects).unwrap();
                assert_eq!(ids(&res), want, "{params:?} window {w:?}");
            }
            for p in &points {
                let want: Vec<f64> = reference
                    .nearest_neighbor_iter_with_distance_2(&[p.x, p.y])
                    .take(10)
                    .map(|(_, d2)| d2.sqrt())
                    .collect();
                let got: Vec<f64> = tree
                    .nearest(*p, 10, false)
                    .unwrap()
                    .neighbors
                    .iter()
                    .map(|n| n.distance)
                    .collect();
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() < 1e-12,
                        "{params:?} kNN at {p:?}: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }
}

/// The brute-force answer of `predicate(window, object)` on closed
/// rectangles, written out coordinate by coordinate (independent of
/// `Rect::intersects` and `Rect::contains`): `contains` finds the objects
/// inside the window, `within` the objects that contain it.
fn brute_force_ids(items: &[(u64, Rect)], w: &Rect, p: Predicate) -> BTreeSet<u64> {
    let keep = |b: &Rect| match p {
        Predicate::Intersects => {
            b.min_x() <= w.max_x() && w.min_x() <= b.max_x() && b.min_y() <= w.max_y() && w.min_y() <= b.max_y()
        }
        Predicate::Contains => {
            w.min_x() <= b.min_x() && b.max_x() <= w.max_x() && w.min_y() <= b.min_y() && b.max_y() <= w.max_y()
        }
        Predicate::Within => {
            b.min_x() <= w.min_x() && w.max_x() <= b.max_x() && b.min_y() <= w.min_y() && w.max_y() <= b.max_y()
        }
    };
    items.iter().filter(|(_, b)| keep(b)).map(|(id, _)| *id).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// Range queries against brute force on trees built by insertion (some
    /// records deleted again) and by bulk loads, in both read modes: one
    /// window, and batches where windows repeat (identical windows, more
    /// than the few a node tests one by one), points, segments, windows
    /// equal to or touching records, and the whole plane. Every window's
    /// answer is its own, in the order its own query gives, once per
    /// record; the counters say as much.
    #[test]
    fn range_queries_and_batches_with_repeated_windows_answer_as_brute_force(
        boxes in prop::collection::vec(rect_strategy(), 0..250),
        wins in prop::collection::vec((rect_strategy(), 0usize..6, 1usize..4), 1..14),
        build in 0usize..3,
        max in 4usize..9,
    ) {
        let items: Vec<(u64, Rect)> = boxes.iter().enumerate().map(|(i, b)| (i as u64 * 5 + 2, *b)).collect();
        let mut windows = Vec::new();
        for (i, &(w, class, copies)) in wins.iter().enumerate() {
            let w = match class {
                0 => r(w.min_x(), w.min_y(), w.min_x(), w.min_y()),
                1 => r(w.min_x(), w.min_y(), w.min_x(), w.max_y() + 1.0),
                2 => items.get(i % items.len().max(1)).map_or(w, |x| x.1),
                3 => Rect::world(),
                _ => w,
            };
            windows.extend(std::iter::repeat_n(w, copies));
        }
        // Many copies of one window: the batch's search by `min_x`.
        windows.extend(std::iter::repeat_n(windows[0], 12));
        for p in configs(max).into_iter().filter(|p| p.kind != IndexKind::RTree || p.split != SplitKind::Exponential) {
            let (mut t, live) = match build {
                0 => (RTree::bulk_load(MemStore::new(), p, items.clone(), BulkMethod::Str, 1.0).unwrap(), items.clone()),
                1 => (RTree::bulk_load(MemStore::new(), p, items.clone(), BulkMethod::Hilbert, 0.7).unwrap(), items.clone()),
                _ => {
                    let mut t = RTree::create(MemStore::new(), p).unwrap();
                    for (id, b) in &items {
                        t.insert(*id, *b).unwrap();
                    }
                    let mut live = Vec::new();
                    for (i, (id, b)) in items.iter().enumerate() {
                        if i % 3 == 0 {
                            t.delete(*id, *b).unwrap();
                        } else {
                            live.push((*id, *b));
                        }
                    }
                    (t, live)
                }
            };
            for mode in [ReadMode::Single, ReadMode::Batched] {
                t.set_read_mode(mode);
                for pred in Predicate::ALL {
                    let batch = t.query_batch(&windows, pred).unwrap();
                    let keys = t.query_batch_keys(&windows, pred).unwrap();
                    let flat = t.query_batch_flat(&windows, pred).unwrap();
                    prop_assert_eq!(batch.results.len(), windows.len());
                    prop_assert_eq!(keys.len(), windows.len());
                    prop_assert_eq!(flat.offsets.len(), windows.len() + 1);
                    for (i, w) in windows.iter().enumerate() {
                        let want = brute_force_ids(&live, w, pred);
                        let one = t.query(*w, pred).unwrap();
                        let what = format!("{:?} {:?} {:?} window {} {:?}", p.kind, mode, pred, i, w);
                        prop_assert_eq!(&ids(&one), &want, "{}", what);
                        prop_assert_eq!(one.stats.results, want.len() as u64, "{}", what);
                        prop_assert_eq!(crate::spatial::SpatialIndex::count(&t, *w, pred).unwrap(), want.len() as u64, "{}", what);
                        prop_assert_eq!(&batch.results[i].hits, &one.hits, "{}", what);
                        prop_assert_eq!(batch.results[i].stats, one.stats, "{}", what);
                        prop_assert_eq!(&keys[i], &KeyResult::from(one.clone()), "{}", what);
                        let run = &flat.keys[flat.offsets[i]..flat.offsets[i + 1]];
                        prop_assert_eq!(run, &keys[i].keys[..], "{}", what);
                    }
                }
            }
        }
    }
}

/// A window, a batch of windows or a kNN query given a rectangle that
/// `Rect::new` refuses (NaN, infinite, beyond `MAX_COORD`, inverted) is
/// refused, not answered.
#[test]
fn range_queries_refuse_invalid_windows() {
    let mut t = RTree::create(MemStore::new(), TreeParams::new(IndexKind::RStar, 4)).unwrap();
    for (id, b) in grid_items(40) {
        t.insert(id, b).unwrap();
    }
    let good = r(0.0, 0.0, 3.0, 3.0);
    for bad in [
        Rect::invalid_for_tests(f64::NAN, 0.0, 1.0, 1.0),
        Rect::invalid_for_tests(0.0, 0.0, f64::INFINITY, 1.0),
        Rect::invalid_for_tests(0.0, -1.0e200, 1.0, 1.0),
        Rect::invalid_for_tests(2.0, 0.0, 1.0, 1.0),
    ] {
        for pred in Predicate::ALL {
            assert!(t.query(bad, pred).is_err(), "{bad:?} {pred:?}");
            assert!(crate::spatial::SpatialIndex::count(&t, bad, pred).is_err(), "{bad:?} {pred:?}");
            assert!(t.query_batch(&[good, bad], pred).is_err(), "{bad:?} {pred:?}");
            assert!(t.query_batch_keys(&[good, bad], pred).is_err());
            assert!(t.query_batch_flat(&[good, bad], pred).is_err());
        }
        assert!(t.nearest_to(bad, 3, false).is_err(), "{bad:?}");
        assert!(t.nearest_batch_to(&[good, bad], 3, false).is_err(), "{bad:?}");
    }
}
