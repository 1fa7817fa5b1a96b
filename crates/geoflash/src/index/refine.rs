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
//!
//! The `geo` crate's DE-9IM computation, behind `contains` and `within`,
//! panics on some valid geometry collections ("topology position
//! conflict": a collection of two overlapping polygons) and answers others
//! wrongly (the same square twice is `within` a segment of its edge, where
//! GEOS says no). So `contains` and `within` of a collection of several
//! members are refused (an error naming the object; a collection of one
//! member is that member), `intersects` is decided member by member, and
//! any other panic of `geo` is contained: an error naming the object,
//! never a panic of the caller, and the panic hook does not report it
//! ([`contained`]).
use std::cell::Cell;
use std::sync::Once;

use geo::{Contains, Intersects};

use super::query::{Predicate, QueryResult};
use crate::geom::Rect;
use crate::objects::{geometry::window_geometry, Geometry, Heap};
use crate::{Error, Result};

/// Does `object` satisfy `predicate(window, object)`? An error, not a
/// panic, where the `geo` crate cannot decide it (see the module's
/// documentation): the error says which predicate failed and why.
pub fn satisfies(window: &Geometry, object: &Geometry, predicate: Predicate) -> Result<bool> {
    decide(window, object, predicate).map_err(Error::invalid)
}

/// [`satisfies`], its failure the message of the error to build.
fn decide(
    window: &Geometry,
    object: &Geometry,
    predicate: Predicate,
) -> std::result::Result<bool, String> {
    if let (Geometry::GeometryCollection(parts), Predicate::Contains | Predicate::Within) =
        (object, predicate)
    {
        match parts.0.as_slice() {
            [one] => return decide(window, one, predicate),
            _ => {
                return Err(format!(
                    "the exact predicate {} is not evaluated on a GeometryCollection of {} \
                     members (the geo crate's DE-9IM answers some collections wrongly and \
                     panics on others): split it into its members or merge them",
                    format!("{predicate:?}").to_lowercase(),
                    parts.0.len()
                ))
            }
        }
    }
    contained(|| match predicate {
        Predicate::Intersects => window.intersects(object),
        Predicate::Contains => window.contains(object),
        Predicate::Within => object.contains(window),
    })
    .map_err(|panic| {
        format!(
            "the exact predicate {} cannot be evaluated on this {} (the geo crate failed: {panic}); \
             a geometry collection whose members overlap can fail so: split it into its members \
             or merge them",
            format!("{predicate:?}").to_lowercase(),
            kind_name(object)
        )
    })
}

/// The geometry type's name, as in WKT.
fn kind_name(g: &Geometry) -> &'static str {
    match g {
        Geometry::Point(_) => "Point",
        Geometry::Line(_) | Geometry::LineString(_) => "LineString",
        Geometry::Polygon(_) | Geometry::Rect(_) | Geometry::Triangle(_) => "Polygon",
        Geometry::MultiPoint(_) => "MultiPoint",
        Geometry::MultiLineString(_) => "MultiLineString",
        Geometry::MultiPolygon(_) => "MultiPolygon",
        Geometry::GeometryCollection(_) => "GeometryCollection",
    }
}

thread_local! {
    /// Whether this thread runs inside [`contained`].
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Wraps the panic hook once per process (see [`contained`]).
static WRAP_HOOK: Once = Once::new();

/// Runs `f`; a panic inside it is returned as `Err` with its message
/// instead of unwinding further. The panic hook is wrapped once per
/// process so that it does not report a panic on a thread inside
/// `contained` (no "thread panicked" message before the error); every
/// other panic goes to the hook installed before.
fn contained<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    WRAP_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !INSIDE.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let outer = INSIDE.with(|i| i.replace(true));
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    INSIDE.with(|i| i.set(outer));
    run.map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string())
    })
}

/// Refines the answer of the filter step for `window` and `predicate`: keeps
/// the hits whose exact geometry in `heap` satisfies the predicate.
/// `stats.candidates` keeps the filter step's count, `stats.results` becomes
/// the refined count. A candidate without a geometry in the heap (an entry
/// inserted by its rectangle, `Index::insert`) is its box, as in the
/// Python package's refinement. An error naming the object where the
/// predicate cannot be evaluated on its geometry ([`satisfies`]).
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
        let holds = decide(&w, &g, predicate).map_err(|why| {
            Error::invalid(format!(
                "refining object {} against the window {},{},{},{}: {why}",
                hit.id,
                window.min_x(),
                window.min_y(),
                window.max_x(),
                window.max_y()
            ))
        })?;
        if holds {
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

    /// A collection of two overlapping polygons: the `geo` crate's DE-9IM
    /// computation panics on it ("topology position conflict") for
    /// `contains` and `within`. Refinement returns an error naming the
    /// object instead of panicking; `intersects`, which `geo` decides member
    /// by member, still answers; the other objects are unaffected.
    #[test]
    fn a_collection_geo_cannot_relate_is_an_error_naming_the_object() {
        let square = |x0: f64, y0: f64, x1: f64, y1: f64| -> Geometry {
            polygon![(x: x0, y: y0), (x: x1, y: y0), (x: x1, y: y1), (x: x0, y: y1), (x: x0, y: y0)]
                .into()
        };
        let overlapping = Geometry::GeometryCollection(
            vec![square(0.0, 0.0, 4.0, 4.0), square(2.0, 2.0, 6.0, 6.0)].into(),
        );
        let dir = tempfile::tempdir().unwrap();
        let mut heap = Heap::create(&dir.path().join("objects.dat"), 0).unwrap();
        let mut t = tree();
        for (id, g) in [(7, overlapping.clone()), (8, square(1.0, 1.0, 2.0, 2.0))] {
            let r = heap.put(id, b"", &g).unwrap();
            t.insert(id, r).unwrap();
        }
        for (w, p) in [
            (
                Rect::new(-1.0, -1.0, 7.0, 7.0).unwrap(),
                Predicate::Contains,
            ),
            (Rect::new(2.5, 2.5, 3.0, 3.0).unwrap(), Predicate::Within),
        ] {
            let e = satisfies(&window_geometry(&w), &overlapping, p).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
            let name = format!("{p:?}").to_lowercase();
            let msg = e.to_string();
            assert!(
                msg.contains(&format!(
                    "exact predicate {name} is not evaluated on a GeometryCollection of 2 members"
                )),
                "{msg}"
            );
            let e = refine(t.query(w, p).unwrap(), &heap, w, p)
                .unwrap_err()
                .to_string();
            let at = format!(
                "refining object 7 against the window {},{},{},{}: ",
                w.min_x(),
                w.min_y(),
                w.max_x(),
                w.max_y()
            );
            assert!(e.contains(&at), "{e}");
            assert!(e.contains(&name), "{e}");
        }
        let w = Rect::new(1.0, 1.0, 5.0, 5.0).unwrap();
        assert!(satisfies(&window_geometry(&w), &overlapping, Predicate::Intersects).unwrap());
        let got = refine(
            t.query(w, Predicate::Intersects).unwrap(),
            &heap,
            w,
            Predicate::Intersects,
        )
        .unwrap();
        let mut ids: Vec<u64> = got.hits.iter().map(|h| h.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [7, 8]);
    }

    /// `geo` answers `within` wrongly, without panicking, for a collection
    /// holding the same square twice and a window that is a segment of its
    /// edge (GEOS: false): refused, not answered; a collection of one
    /// member answers as that member.
    #[test]
    fn a_collection_geo_would_answer_wrongly_is_refused_and_one_member_is_that_member() {
        let square: Geometry = polygon![
            (x: 0.0, y: 0.0),
            (x: 4.0, y: 0.0),
            (x: 4.0, y: 4.0),
            (x: 0.0, y: 4.0),
            (x: 0.0, y: 0.0)
        ]
        .into();
        let twice = Geometry::GeometryCollection(vec![square.clone(), square.clone()].into());
        let edge = window_geometry(&Rect::new(0.0, 0.0, 4.0, 0.0).unwrap());
        let e = satisfies(&edge, &twice, Predicate::Within).unwrap_err();
        assert!(e.to_string().contains("GeometryCollection of 2 members"), "{e}");
        assert!(satisfies(&edge, &twice, Predicate::Intersects).unwrap());
        let one = Geometry::GeometryCollection(vec![square.clone()].into());
        for w in [
            Rect::new(-1.0, -1.0, 5.0, 5.0).unwrap(),
            Rect::new(1.0, 1.0, 2.0, 2.0).unwrap(),
            Rect::new(0.0, 0.0, 4.0, 0.0).unwrap(),
        ] {
            let wg = window_geometry(&w);
            for p in [Predicate::Intersects, Predicate::Contains, Predicate::Within] {
                assert_eq!(
                    satisfies(&wg, &one, p).unwrap(),
                    satisfies(&wg, &square, p).unwrap(),
                    "{w:?} {p:?}"
                );
            }
        }
    }

    /// A panic inside [`contained`] is its `Err`, with its message.
    #[test]
    fn a_panic_inside_contained_is_an_error_with_its_message() {
        let got: std::result::Result<(), String> = contained(|| panic!("geo gave up"));
        assert_eq!(got.unwrap_err(), "geo gave up");
        assert_eq!(contained(|| 3), Ok(3));
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
        assert!(!satisfies(&window_geometry(&w), &edge, Predicate::Contains).unwrap());
        assert!(satisfies(&window_geometry(&w), &edge, Predicate::Intersects).unwrap());
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
