//! The refinement step: the filter step on MBRs ([`super::query`]) yields
//! candidates; refinement reads each candidate's exact geometry from the
//! object heap ([`crate::objects::Heap`]) and keeps those that satisfy the
//! predicate against the window, with the `geo` crate's DE-9IM predicates.
//!
//! Predicates read as shapely's `predicate(window, object)`:
//! - [`Predicate::Intersects`]: the object and the window share a point
//!   (boundaries included);
//! - [`Predicate::Contains`]: the window contains the object (no point of the
//!   object outside the window and at least one in its interior — so a line
//!   lying on the window's edge is *not* contained, as in shapely);
//! - [`Predicate::Within`]: the window is within the object (the object
//!   contains the window).
//!
//! A degenerate window (zero width or height) is a line or a point, see
//! [`crate::objects::geometry::window_geometry`].
use geo::{Contains, Intersects};

use super::query::{Predicate, QueryResult};
use crate::geom::Rect;
use crate::objects::{geometry::window_geometry, Geometry, Heap};
use crate::Result;

/// Does `object` satisfy `predicate(window, object)`?
pub fn satisfies(window: &Geometry, object: &Geometry, predicate: Predicate) -> bool {
    match predicate {
        Predicate::Intersects => window.intersects(object),
        Predicate::Contains => window.contains(object),
        Predicate::Within => object.contains(window),
    }
}

/// Refines the answer of the filter step for `window` and `predicate`: keeps
/// the hits whose exact geometry in `heap` satisfies the predicate.
/// `stats.candidates` keeps the filter step's count, `stats.results` becomes
/// the refined count. A candidate without a geometry in the heap (an entry
/// inserted by its rectangle, `Index::insert`) is its box, as in the
/// Python package's refinement.
pub fn refine(
    filtered: QueryResult,
    heap: &Heap,
    window: Rect,
    predicate: Predicate,
) -> Result<QueryResult> {
    let w = window_geometry(&window);
    let mut out = QueryResult {
        hits: Vec::with_capacity(filtered.hits.len()),
        stats: filtered.stats,
    };
    for hit in filtered.hits {
        let g = match heap.get(hit.id)? {
            Some(g) => g,
            None => window_geometry(&hit.rect),
        };
        if satisfies(&w, &g, predicate) {
            out.hits.push(hit);
        }
    }
    out.stats.results = out.hits.len() as u64;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::query::Hit;
    use crate::index::{IndexKind, RTree, TreeParams};
    use crate::storage::mem::MemDevice;
    use crate::store::plain::{PlainConfig, PlainStore};
    use geo::{line_string, point, polygon, Relate, Rotate};
    use proptest::prelude::*;
    use std::sync::Arc;

    /// The brute-force check: the DE-9IM matrix of `relate`, a code path of
    /// `geo` other than the `Intersects`/`Contains` traits refinement uses.
    fn oracle(window: &Geometry, object: &Geometry, predicate: Predicate) -> bool {
        let m = window.relate(object);
        match predicate {
            Predicate::Intersects => m.is_intersects(),
            Predicate::Contains => m.is_contains(),
            Predicate::Within => m.is_within(),
        }
    }

    #[derive(Debug, Clone)]
    enum Shape {
        Triangle([(f64, f64); 3]),
        RotatedRect {
            cx: f64,
            cy: f64,
            w: f64,
            h: f64,
            angle: f64,
        },
        Segment((f64, f64), (f64, f64)),
        Point(f64, f64),
    }

    fn shape() -> impl Strategy<Value = Shape> {
        let c = 0.0..100.0f64;
        prop_oneof![
            3 => [(c.clone(), c.clone()), (c.clone(), c.clone()), (c.clone(), c.clone())]
                .prop_map(Shape::Triangle),
            3 => (c.clone(), c.clone(), 1.0..40.0f64, 1.0..40.0f64, 0.0..180.0f64)
                .prop_map(|(cx, cy, w, h, angle)| Shape::RotatedRect { cx, cy, w, h, angle }),
            1 => ((c.clone(), c.clone()), (c.clone(), c.clone())).prop_map(|(a, b)| Shape::Segment(a, b)),
            1 => (c.clone(), c).prop_map(|(x, y)| Shape::Point(x, y)),
        ]
    }

    fn geometry(s: &Shape) -> Geometry {
        match *s {
            Shape::Triangle([a, b, c]) => {
                polygon![(x: a.0, y: a.1), (x: b.0, y: b.1), (x: c.0, y: c.1), (x: a.0, y: a.1)]
                    .into()
            }
            Shape::RotatedRect {
                cx,
                cy,
                w,
                h,
                angle,
            } => {
                let (x0, y0, x1, y1) = (cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0);
                polygon![(x: x0, y: y0), (x: x1, y: y0), (x: x1, y: y1), (x: x0, y: y1), (x: x0, y: y0)]
                    .rotate_around_centroid(angle)
                    .into()
            }
            Shape::Segment(a, b) => line_string![(x: a.0, y: a.1), (x: b.0, y: b.1)].into(),
            Shape::Point(x, y) => point!(x: x, y: y).into(),
        }
    }

    fn tree() -> RTree<PlainStore> {
        let dev = Arc::new(MemDevice::new(1024, 1 << 20).unwrap());
        let store = PlainStore::create(dev, PlainConfig::default()).unwrap();
        let params = TreeParams::new(IndexKind::RStar, 8).with_min_entries(3);
        RTree::create(store, params).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// Filter + refine through the index and the heap equals the
        /// predicate applied to every object, for all three predicates.
        #[test]
        fn filter_and_refine_equal_brute_force(
            shapes in proptest::collection::vec(shape(), 1..60),
            windows in proptest::collection::vec(
                (0.0..100.0f64, 0.0..100.0f64, 0.0..60.0f64, 0.0..60.0f64), 1..6),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut heap = Heap::create(&dir.path().join("objects.dat"), 0).unwrap();
            let mut t = tree();
            let geoms: Vec<Geometry> = shapes.iter().map(geometry).collect();
            for (i, g) in geoms.iter().enumerate() {
                let r = heap.put(i as u64, b"", g).unwrap();
                t.insert(i as u64, r).unwrap();
            }
            // a window inside the first object, so `within` finds something
            let mut ws: Vec<Rect> = windows
                .iter()
                .map(|&(x, y, w, h)| Rect::new(x, y, x + w, y + h).unwrap())
                .collect();
            if let Some(Shape::RotatedRect { cx, cy, .. }) = shapes.first() {
                ws.push(Rect::new(*cx - 0.2, *cy - 0.2, *cx + 0.2, *cy + 0.2).unwrap());
            }
            for w in ws {
                let wg = window_geometry(&w);
                for p in [Predicate::Intersects, Predicate::Contains, Predicate::Within] {
                    let filtered = t.query(w, p).unwrap();
                    let candidates = filtered.stats.candidates;
                    let refined = refine(filtered, &heap, w, p).unwrap();
                    let mut got: Vec<u64> = refined.hits.iter().map(|h| h.id).collect();
                    got.sort_unstable();
                    let want: Vec<u64> = geoms
                        .iter()
                        .enumerate()
                        .filter(|(_, g)| oracle(&wg, g, p))
                        .map(|(i, _)| i as u64)
                        .collect();
                    prop_assert_eq!(&got, &want, "window {:?} predicate {:?}", w, p);
                    prop_assert_eq!(refined.stats.results, want.len() as u64);
                    prop_assert_eq!(refined.stats.candidates, candidates);
                    prop_assert!(candidates >= refined.stats.results);
                }
            }
        }
    }

    /// Shapes on a coarse integer grid, so that they touch windows and one
    /// another on edges and at corners: axis-parallel boxes, triangles,
    /// horizontal, vertical and diagonal segments, polylines, points,
    /// multipoints and boxes with a hole.
    fn grid_shape() -> impl Strategy<Value = Geometry> {
        let c = 0i32..10;
        let f = |v: i32| f64::from(v);
        prop_oneof![
            (c.clone(), c.clone(), 1i32..5, 1i32..5).prop_map(move |(x, y, w, h)| {
                let (x0, y0, x1, y1) = (f(x), f(y), f(x + w), f(y + h));
                polygon![(x: x0, y: y0), (x: x1, y: y0), (x: x1, y: y1), (x: x0, y: y1), (x: x0, y: y0)].into()
            }),
            (c.clone(), c.clone(), c.clone(), c.clone(), c.clone(), c.clone()).prop_filter_map(
                "a triangle of no area",
                move |(ax, ay, bx, by, cx, cy)| {
                    let area2 = (bx - ax) * (cy - ay) - (cx - ax) * (by - ay);
                    (area2 != 0).then(|| {
                        polygon![(x: f(ax), y: f(ay)), (x: f(bx), y: f(by)), (x: f(cx), y: f(cy)), (x: f(ax), y: f(ay))]
                            .into()
                    })
                }
            ),
            (c.clone(), c.clone(), 1i32..6, 0usize..3).prop_map(move |(x, y, l, dir)| {
                let (dx, dy) = [(l, 0), (0, l), (l, l)][dir];
                line_string![(x: f(x), y: f(y)), (x: f(x + dx), y: f(y + dy))].into()
            }),
            (c.clone(), c.clone(), c.clone(), c.clone(), c.clone(), c.clone()).prop_filter_map(
                "a polyline with repeated vertices",
                move |(ax, ay, bx, by, cx, cy)| {
                    ((ax, ay) != (bx, by) && (bx, by) != (cx, cy)).then(|| {
                        line_string![(x: f(ax), y: f(ay)), (x: f(bx), y: f(by)), (x: f(cx), y: f(cy))].into()
                    })
                }
            ),
            (c.clone(), c.clone()).prop_map(move |(x, y)| point!(x: f(x), y: f(y)).into()),
            ((c.clone(), c.clone()), (c.clone(), c.clone())).prop_map(move |(a, b)| {
                geo::MultiPoint::new(vec![point!(x: f(a.0), y: f(a.1)), point!(x: f(b.0), y: f(b.1))]).into()
            }),
            (c.clone(), c).prop_map(move |(x, y)| {
                let (x0, y0, x1, y1) = (f(x), f(y), f(x + 4), f(y + 4));
                geo::Polygon::new(
                    line_string![(x: x0, y: y0), (x: x1, y: y0), (x: x1, y: y1), (x: x0, y: y1), (x: x0, y: y0)],
                    vec![line_string![
                        (x: x0 + 1.0, y: y0 + 1.0), (x: x0 + 3.0, y: y0 + 1.0), (x: x0 + 3.0, y: y0 + 3.0),
                        (x: x0 + 1.0, y: y0 + 3.0), (x: x0 + 1.0, y: y0 + 1.0)
                    ]],
                )
                .into()
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// Filter and refinement against the DE-9IM matrix of every object
        /// where boundaries meet: shapes and windows on one coarse grid,
        /// windows of no width or height (segments and points) among them,
        /// and entries inserted by their box alone (refined as the box).
        /// Nothing the predicate holds for is lost by the filter step on
        /// MBRs, nothing else is returned.
        #[test]
        fn filter_and_refine_equal_brute_force_on_touching_shapes(
            shapes in proptest::collection::vec(grid_shape(), 1..40),
            boxes in proptest::collection::vec((0i32..10, 0i32..10, 0i32..4, 0i32..4), 0..10),
            windows in proptest::collection::vec((0i32..12, 0i32..12, 0i32..5, 0i32..5), 1..12),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut heap = Heap::create(&dir.path().join("objects.dat"), 0).unwrap();
            let mut t = tree();
            let mut objects: Vec<(u64, Geometry)> = Vec::new();
            for (i, g) in shapes.iter().enumerate() {
                let r = heap.put(i as u64, b"", g).unwrap();
                t.insert(i as u64, r).unwrap();
                objects.push((i as u64, g.clone()));
            }
            for (j, &(x, y, w, h)) in boxes.iter().enumerate() {
                let id = 1000 + j as u64;
                let b = Rect::new(f64::from(x), f64::from(y), f64::from(x + w), f64::from(y + h)).unwrap();
                t.insert(id, b).unwrap();
                objects.push((id, window_geometry(&b)));
            }
            for &(x, y, w, h) in &windows {
                let w = Rect::new(f64::from(x) - 1.0, f64::from(y) - 1.0, f64::from(x + w) - 1.0, f64::from(y + h) - 1.0)
                    .unwrap();
                let wg = window_geometry(&w);
                for p in Predicate::ALL {
                    let filtered = t.query(w, p).unwrap();
                    let refined = refine(filtered, &heap, w, p).unwrap();
                    let mut got: Vec<u64> = refined.hits.iter().map(|h| h.id).collect();
                    got.sort_unstable();
                    let want: Vec<u64> =
                        objects.iter().filter(|(_, g)| oracle(&wg, g, p)).map(|(i, _)| *i).collect();
                    prop_assert_eq!(&got, &want, "window {:?} predicate {:?}", w, p);
                    prop_assert_eq!(refined.stats.results, want.len() as u64);
                }
            }
        }
    }

    #[test]
    fn refinement_drops_mbr_only_matches() {
        let dir = tempfile::tempdir().unwrap();
        let mut heap = Heap::create(&dir.path().join("objects.dat"), 0).unwrap();
        let mut t = tree();
        // a thin diagonal triangle whose MBR covers the window's corner, but not the triangle
        let tri: Geometry =
            polygon![(x: 0.0, y: 0.0), (x: 10.0, y: 10.0), (x: 10.0, y: 9.0), (x: 0.0, y: 0.0)]
                .into();
        let r = heap.put(1, b"", &tri).unwrap();
        t.insert(1, r).unwrap();
        let w = Rect::new(0.0, 8.0, 2.0, 10.0).unwrap();
        let f = t.query(w, Predicate::Intersects).unwrap();
        assert_eq!(f.stats.candidates, 1);
        let res = refine(f, &heap, w, Predicate::Intersects).unwrap();
        assert_eq!((res.stats.candidates, res.stats.results), (1, 0));
        assert!(res.hits.is_empty());
        // contains: a line on the window's edge is not contained (shapely semantics)
        let edge: Geometry = line_string![(x: 0.0, y: 8.0), (x: 2.0, y: 8.0)].into();
        assert!(!satisfies(&window_geometry(&w), &edge, Predicate::Contains));
        assert!(satisfies(
            &window_geometry(&w),
            &edge,
            Predicate::Intersects
        ));
        // a candidate without geometry (an entry inserted by its box) is its box
        let boxed = |rect: Rect| QueryResult {
            hits: vec![Hit { id: 42, rect }],
            ..QueryResult::default()
        };
        let inside = boxed(Rect::new(1.0, 9.0, 1.5, 9.5).unwrap());
        let apart = boxed(Rect::new(3.0, 3.0, 4.0, 4.0).unwrap());
        assert_eq!(refine(inside, &heap, w, Predicate::Intersects).unwrap().stats.results, 1);
        assert_eq!(refine(apart, &heap, w, Predicate::Intersects).unwrap().stats.results, 0);
    }
}
