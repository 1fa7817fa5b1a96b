//! Every family behind [`SpatialIndex`] against one brute-force oracle:
//! random insertions and deletions of points, then range queries with each
//! predicate (one window and a batch), kNN and group point lookups, all
//! through `&mut dyn SpatialIndex`.
use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use crate::engine::{IndexSpec, KeyStyle};
use crate::geom::{Point, Rect};
use crate::grid::gffm::InPlaceBuckets;
use crate::grid::lbgrid::LogBuckets;
use crate::grid::{GridIndex, GridOptions};
use crate::index::query::Predicate;
use crate::spatial::{Sought, SpatialIndex};
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::Index;

const SIDE: f64 = 64.0;

fn domain() -> Rect {
    Rect::new(0.0, 0.0, SIDE, SIDE).unwrap()
}

/// The families: the tree kinds through an [`Index`] on `mem:` (the
/// default store; `KIND@memory` the memory store), the grid files directly.
const FAMILIES: &[&str] = &[
    "rtree",
    "rstar",
    "hilbert",
    "fortree",
    "xbr",
    "rstar@memory",
    "hilbert@memory",
    "xbr@memory",
    "gffm",
    "gffm-batched",
    "lbgrid",
];

fn make(family: &str) -> Box<dyn SpatialIndex> {
    let grid_dev = || -> Arc<dyn PageDevice> { Arc::new(MemDevice::new(1024, 1 << 16).unwrap()) };
    let grid_opts = || GridOptions {
        dir_hot_pages: 3,
        bucket_hot_pages: 4,
        cold_pages: 3,
        ..GridOptions::new(domain())
    };
    match family {
        "gffm" => Box::new(
            GridIndex::<InPlaceBuckets>::create(family, grid_dev(), grid_opts(), false).unwrap(),
        ),
        "gffm-batched" => Box::new(
            GridIndex::<InPlaceBuckets>::create(family, grid_dev(), grid_opts(), true).unwrap(),
        ),
        "lbgrid" => Box::new(
            GridIndex::<LogBuckets>::create(family, grid_dev(), grid_opts(), true).unwrap(),
        ),
        family => {
            let (kind, store) = match family.split_once('@') {
                Some((kind, store)) => (kind, Some(store)),
                None => (family, None),
            };
            let mut spec = IndexSpec::new(KeyStyle::Key);
            for (k, v) in [("kind", kind), ("device", "mem:"), ("page_size", "1024")] {
                spec.set(k, v).unwrap();
            }
            if let Some(store) = store {
                spec.set("store", store).unwrap();
            }
            let opts = spec
                .options()
                .unwrap()
                .with_domain_of(std::iter::once(&domain()));
            Box::new(Index::create_temporary(&opts).unwrap())
        }
    }
}

/// A step of a random sequence: insert at a grid cell, or delete the i-th
/// live point.
#[derive(Debug, Clone)]
enum Op {
    Insert(u8, u8),
    Delete(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..64, 0u8..64).prop_map(|(x, y)| Op::Insert(x, y)),
        1 => any::<usize>().prop_map(Op::Delete),
    ]
}

/// Live points: cell to (id, point).
type Oracle = BTreeMap<(u8, u8), (u64, Point)>;

fn ids_in(oracle: &Oracle, w: &Rect, p: Predicate) -> Vec<u64> {
    let mut v: Vec<u64> = oracle
        .values()
        .filter(|(_, pt)| {
            let r = Rect::from_point(*pt);
            match p {
                Predicate::Within => r.contains(w),
                _ => w.contains(&r),
            }
        })
        .map(|(id, _)| *id)
        .collect();
    v.sort_unstable();
    v
}

fn check(family: &str, ops: &[Op], windows: &[(u8, u8, u8, u8)], probes: &[(u8, u8)], k: usize) {
    let mut ix = make(family);
    let mut live = Oracle::new();
    for (n, op) in ops.iter().enumerate() {
        match *op {
            Op::Insert(x, y) if !live.contains_key(&(x, y)) => {
                let p = Point::new(f64::from(x), f64::from(y)).unwrap();
                ix.insert(n as u64, Rect::from_point(p)).unwrap();
                live.insert((x, y), (n as u64, p));
            }
            Op::Insert(..) => {}
            Op::Delete(i) if !live.is_empty() => {
                let key = *live.keys().nth(i % live.len()).unwrap();
                let (id, p) = live.remove(&key).unwrap();
                ix.delete(id, Rect::from_point(p)).unwrap();
            }
            Op::Delete(_) => {}
        }
    }
    ix.checkpoint().unwrap();
    // LB-Grid (blind updates) counts its points with a query over its domain.
    assert_eq!(ix.len(), Some(live.len() as u64), "{family}: len");
    let bounds = Rect::union_all(
        live.values()
            .map(|(_, p)| Rect::from_point(*p))
            .collect::<Vec<_>>()
            .iter(),
    );
    assert_eq!(ix.bounds().unwrap(), bounds, "{family}: bounds");
    let rects: Vec<Rect> = windows
        .iter()
        .map(|&(a, b, w, h)| {
            let (x, y) = (f64::from(a), f64::from(b));
            Rect::new(x, y, x + f64::from(w % 16), y + f64::from(h % 16)).unwrap()
        })
        .collect();
    for p in Predicate::ALL {
        let batch = ix.query_batch(&rects, p).unwrap();
        assert_eq!(batch.results.len(), rects.len());
        for (w, b) in rects.iter().zip(&batch.results) {
            let want = ids_in(&live, w, p);
            let mut got: Vec<u64> = ix.query(*w, p).unwrap().hits.iter().map(|h| h.id).collect();
            got.sort_unstable();
            assert_eq!(got, want, "{family}: {p:?} {w:?}");
            let mut keys = ix.query_keys(*w, p).unwrap().keys;
            keys.sort_unstable();
            assert_eq!(keys, want, "{family}: query_keys {p:?} {w:?}");
            assert_eq!(
                ix.count(*w, p).unwrap(),
                want.len() as u64,
                "{family}: count"
            );
            let mut got: Vec<u64> = b.hits.iter().map(|h| h.id).collect();
            got.sort_unstable();
            assert_eq!(got, want, "{family}: batched {p:?} {w:?}");
        }
    }
    check_update_within(&mut *ix, &mut live, family);
    let points: Vec<Point> = probes
        .iter()
        .map(|&(x, y)| Point::new(f64::from(x), f64::from(y)).unwrap())
        .collect();
    let group = ix.point_group(&points).unwrap();
    assert_eq!(group.results.len(), points.len());
    for (p, r) in points.iter().zip(&group.results) {
        let want = ids_in(&live, &Rect::from_point(*p), Predicate::Intersects);
        let got: Vec<u64> = r.hits.iter().map(|h| h.id).collect();
        assert_eq!(got, want, "{family}: point {p:?}");
    }
    for p in &points {
        let mut want: Vec<f64> = live.values().map(|(_, q)| q.distance(p)).collect();
        want.sort_by(f64::total_cmp);
        want.truncate(k);
        let got: Vec<f64> = ix
            .nearest(*p, k, false)
            .unwrap()
            .neighbors
            .iter()
            .map(|n| n.distance)
            .collect();
        assert_eq!(got.len(), want.len(), "{family}: {k} nearest to {p:?}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-9,
                "{family}: {k} nearest to {p:?}: {got:?} vs {want:?}"
            );
        }
    }
}

/// [`SpatialIndex::update_within`] moves each live record, found within a
/// rectangle around it, half a cell up and right: with the hint the
/// structure gave for it ([`SpatialIndex::visit_located`]), without one,
/// with a wrong one; it changes nothing for an id the structure does not
/// hold, or for a rectangle away from the record without a hint. `live`
/// follows the moves.
fn check_update_within(ix: &mut dyn SpatialIndex, live: &mut Oracle, family: &str) {
    let mut hints = BTreeMap::new();
    ix.visit_located(&mut |id, rect, near| {
        hints.insert(id, (rect, near));
    })
    .unwrap();
    assert_eq!(hints.len(), live.len(), "{family}: visit_located");
    let wrong = hints.values().filter_map(|h| h.1).max().map(|n| n + 1);
    for (i, (id, p)) in live.values_mut().enumerate() {
        let (id, exact) = (*id, Rect::from_point(*p));
        assert_eq!(hints.get(&id).map(|h| h.0), Some(exact), "{family}: {id}");
        let around = Rect::new(p.x - 0.25, p.y - 0.25, p.x + 0.25, p.y + 0.25).unwrap();
        let away = Rect::new(p.x + 0.5, p.y + 0.5, p.x + 0.75, p.y + 0.75).unwrap();
        let near = [hints[&id].1, None, wrong, Some(0)][i % 4];
        let to = Point::new(p.x + 0.5, p.y + 0.5).unwrap();
        // A hint that names the record's leaf finds it there, wherever
        // `within` is: away from the record, no hint.
        let gone = [(u64::MAX - id, around, near), (id, away, None)];
        for (absent, within, near) in gone {
            let sought = ix.update_within(absent, within, Rect::from_point(to), near);
            assert_eq!(
                sought.unwrap(),
                Sought::Absent,
                "{family}: {absent} in {within:?}"
            );
        }
        let sought = ix
            .update_within(id, around, Rect::from_point(to), near)
            .unwrap();
        assert!(
            matches!(sought, Sought::Moved(_)),
            "{family}: {id} near {near:?}"
        );
        *p = to;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn every_family_answers_as_the_oracle(
        ops in proptest::collection::vec(op(), 0..400),
        windows in proptest::collection::vec((0u8..64, 0u8..64, any::<u8>(), any::<u8>()), 1..8),
        probes in proptest::collection::vec((0u8..64, 0u8..64), 1..8),
        k in 0usize..12,
    ) {
        for family in FAMILIES {
            check(family, &ops, &windows, &probes, k);
        }
    }
}

#[test]
fn a_family_s_own_operations_are_reached_through_the_trait() {
    // (family, which downcast succeeds, what `rtree` says otherwise)
    for (family, own, refusal) in [
        ("rstar", "rtree", None),
        (
            "fortree",
            "fortree",
            Some("a check is not available for a FOR-tree index"),
        ),
        (
            "xbr",
            "xbr",
            Some("a check is not available for an xBR+-tree index"),
        ),
    ] {
        let ix = make(family);
        let s = ix.as_any().downcast_ref::<Index>().unwrap().structure();
        let reached = [
            ("rtree", s.rtree("a check").is_ok()),
            ("fortree", s.fortree().is_some()),
            ("xbr", s.xbr().is_some()),
        ];
        for (name, ok) in reached {
            assert_eq!(ok, name == own, "{family}: {name}");
        }
        if let Some(want) = refusal {
            let e = s.rtree("a check").err().unwrap().to_string();
            assert!(e.contains(want), "{family}: {e}");
        }
    }
}

#[test]
fn point_families_refuse_a_box() {
    let r = Rect::new(1.0, 1.0, 2.0, 2.0).unwrap();
    for family in ["xbr", "gffm", "lbgrid"] {
        let mut ix = make(family);
        let e = ix.insert(1, r).unwrap_err().to_string();
        assert!(e.contains("is a box"), "{family}: {e}");
    }
}

/// A kNN query point with a coordinate that is NaN, infinite or beyond
/// `MAX_COORD` (as `Point::new` refuses: a user can build such a `Point`,
/// its fields are public) is refused by every family, alone and in a
/// batch, not answered with made-up distances.
#[test]
fn every_family_refuses_non_finite_and_out_of_range_query_points() {
    let good = Point::new(3.0, 4.0).unwrap();
    let bad = [
        Point {
            x: f64::NAN,
            y: 1.0,
        },
        Point {
            x: 1.0,
            y: f64::INFINITY,
        },
        Point {
            x: -1.0e200,
            y: 1.0,
        },
    ];
    for family in crate::config::KIND_NAMES {
        let mut ix = index_of(family);
        for (i, (x, y)) in [(1.0, 1.0), (5.0, 5.0), (60.0, 2.0)]
            .into_iter()
            .enumerate()
        {
            ix.insert(i as u64, Rect::from_point(Point::new(x, y).unwrap()))
                .unwrap();
        }
        for p in bad {
            let one = ix.nearest(p, 2, false);
            assert!(one.is_err(), "{family}: nearest {p:?}: {one:?}");
            let all = ix.nearest_batch(&[good, p], 2, false);
            assert!(all.is_err(), "{family}: nearest_batch {p:?}: {all:?}");
            // The point as a window (`Rect::from_point` checks nothing).
            let w = Rect::from_point(p);
            let fine = Rect::from_point(good);
            for pred in Predicate::ALL {
                let one = ix.query(w, pred);
                assert!(one.is_err(), "{family}: query {p:?} {pred:?}: {one:?}");
                let n = ix.count(w, pred);
                assert!(n.is_err(), "{family}: count {p:?} {pred:?}: {n:?}");
                let all = ix.query_batch(&[fine, w], pred);
                assert!(
                    all.is_err(),
                    "{family}: query_batch {p:?} {pred:?}: {all:?}"
                );
                let keys = ix.query_batch_keys(&[fine, w], pred);
                assert!(
                    keys.is_err(),
                    "{family}: query_batch_keys {p:?} {pred:?}: {keys:?}"
                );
                let flat = ix.query_batch_flat(&[fine, w], pred);
                assert!(
                    flat.is_err(),
                    "{family}: query_batch_flat {p:?} {pred:?}: {flat:?}"
                );
            }
            let group = ix.point_group(&[good, p]);
            assert!(group.is_err(), "{family}: point_group {p:?}: {group:?}");
        }
    }
}

/// An index of `family` on memory (H-Grid on a hybrid device of two
/// memory tiers), over [`domain`].
fn index_of(family: &str) -> Index {
    let mut spec = IndexSpec::new(KeyStyle::Key);
    let device = match family {
        "hgrid" => "hybrid:fast=(mem:);slow=(mem:)",
        _ => "mem:",
    };
    for (k, v) in [("kind", family), ("device", device), ("page_size", "1024")] {
        spec.set(k, v).unwrap();
    }
    let opts = spec
        .options()
        .unwrap()
        .with_domain_of(std::iter::once(&domain()));
    Index::create_temporary(&opts).unwrap_or_else(|e| panic!("{family}: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// kNN through the front door of every structure, on points of an
    /// integer grid (many exact ties): the answer is brute force's first
    /// `k` by (distance, id), ties off; with ties, every point at the k-th
    /// distance too; one point or a batch (`nearest_batch`) alike.
    #[test]
    fn every_kind_answers_knn_with_ties_as_brute_force(
        cells in proptest::collection::btree_set((0u8..16, 0u8..16), 0..120),
        probes in proptest::collection::vec((0u8..34, 0u8..34), 1..5),
        k in 0usize..10,
    ) {
        let pts: Vec<(u64, Point)> = cells
            .iter()
            .enumerate()
            .map(|(i, &(x, y))| ((i as u64 * 7919) % 1000, Point::new(f64::from(x) * 4.0, f64::from(y) * 4.0).unwrap()))
            .collect();
        let queries: Vec<Point> = probes
            .iter()
            .map(|&(x, y)| Point::new(f64::from(x) * 2.0 - 2.0, f64::from(y) * 2.0 - 2.0).unwrap())
            .collect();
        for family in crate::config::KIND_NAMES {
            let mut ix = index_of(family);
            for (id, p) in &pts {
                ix.insert(*id, Rect::from_point(*p)).unwrap();
            }
            for ties in [false, true] {
                let batch = ix.nearest_batch(&queries, k, ties).unwrap();
                for (q, b) in queries.iter().zip(&batch) {
                    let mut truth: Vec<(f64, u64)> = pts.iter().map(|(id, p)| (p.distance(q), *id)).collect();
                    truth.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    let kth = truth.get(k.min(truth.len()).wrapping_sub(1)).map(|x| x.0);
                    let want: Vec<(f64, u64)> = match (ties, kth) {
                        (_, None) => Vec::new(),
                        (false, Some(_)) => truth.iter().take(k).copied().collect(),
                        (true, Some(d)) => truth.iter().take_while(|x| x.0 <= d).copied().collect(),
                    };
                    let one = ix.nearest(*q, k, ties).unwrap();
                    let got: Vec<(f64, u64)> = one.neighbors.iter().map(|n| (n.distance, n.id)).collect();
                    prop_assert_eq!(&got, &want, "{} at {:?}, k {}, ties {}", family, q, k, ties);
                    prop_assert_eq!(&b.neighbors, &one.neighbors, "{} batch at {:?}", family, q);
                }
            }
        }
    }
}
