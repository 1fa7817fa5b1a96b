//! geoflash's R*-tree against the `rstar` crate, in memory, same data, same run.
//!
//! geoflash runs on `PlainStore` over `MemDevice` with a buffer larger than
//! the index (so both libraries work from memory; geoflash still encodes and
//! decodes nothing during queries but goes through its store and `Arc<Node>`s).
//! Phases: one-by-one insertion of N random rectangles, STR bulk load, 100
//! range queries at 0.01% of the extent, 100 kNN queries (k = 10). Each phase
//! is repeated `GEOFLASH_BENCH_REPS` times (default 3) and the median is
//! reported; answers are checked to be equal between the two libraries.
//!
//! Run: `cargo bench -p geoflash --bench rtree_vs_rstar` (N from
//! `GEOFLASH_BENCH_N`, default 1,000,000; `GEOFLASH_BENCH_PROFILE_QUERIES=n`
//! repeats geoflash's queries n times more, untimed, for a profiler).
use std::time::Instant;

use geoflash::cache::PolicyKind;
use geoflash::geom::{Point, Rect};
use geoflash::index::query::Predicate;
use geoflash::index::{BulkMethod, IndexKind, RTree, TreeParams};
use geoflash::store::mem::MemStore;
use geoflash::store::plain::{PlainConfig, PlainStore};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rstar::{RTree as RStarTree, AABB};

type Obj = rstar::primitives::GeomWithData<rstar::primitives::Rectangle<[f64; 2]>, u64>;

/// rstar with geoflash's node capacity at 4 KiB pages (M = 101, m = 51, 30%
/// reinsertion), so both libraries split and search nodes of the same size.
struct PageParams;
impl rstar::RTreeParams for PageParams {
    const MIN_SIZE: usize = 51;
    const MAX_SIZE: usize = 101;
    const REINSERTION_COUNT: usize = 30;
    type DefaultInsertionStrategy = rstar::RStarInsertionStrategy;
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn store() -> PlainStore {
    let cfg = PlainConfig {
        buffer_bytes: 1 << 34,
        policy: PolicyKind::Lru,
        with_payload: false,
    };
    PlainStore::create_in_memory(4096, cfg).expect("store")
}

fn main() {
    let n = env("GEOFLASH_BENCH_N", 1_000_000);
    let reps = env("GEOFLASH_BENCH_REPS", 3).max(1);
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let data: Vec<(u64, Rect)> = (0..n as u64)
        .map(|i| {
            let (x, y): (f64, f64) = (rng.gen(), rng.gen());
            let (w, h) = (rng.gen::<f64>() * 0.001, rng.gen::<f64>() * 0.001);
            (i, Rect::new(x, y, x + w, y + h).expect("rect"))
        })
        .collect();
    let side = (1e-4f64).sqrt(); // 0.01% of the unit extent
    let windows: Vec<Rect> = (0..100)
        .map(|_| {
            let (x, y) = (
                rng.gen::<f64>() * (1.0 - side),
                rng.gen::<f64>() * (1.0 - side),
            );
            Rect::new(x, y, x + side, y + side).expect("window")
        })
        .collect();
    let points: Vec<Point> = (0..100)
        .map(|_| Point::new(rng.gen(), rng.gen()).expect("point"))
        .collect();
    let objs: Vec<Obj> = data
        .iter()
        .map(|(id, r)| {
            Obj::new(
                rstar::primitives::Rectangle::from_corners(
                    [r.min_x(), r.min_y()],
                    [r.max_x(), r.max_y()],
                ),
                *id,
            )
        })
        .collect();
    let params = TreeParams::for_page(IndexKind::RStar, 4096).expect("params");

    let mut rows: Vec<(&str, f64, f64, f64)> = Vec::new();

    // one-by-one insertion
    let (mut g, mut r, mut r_page) = (Vec::new(), Vec::new(), Vec::new());
    let mut g_mem = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let mut tree = RTree::create(store(), params).expect("tree");
        for (id, rect) in &data {
            tree.insert(*id, *rect).expect("insert");
        }
        g.push(t.elapsed().as_secs_f64());
        // The same algorithm on MemStore (a map of nodes: no buffer
        // bookkeeping, no lock): how much of the time is the store's.
        let t = Instant::now();
        let mut tree = RTree::create(MemStore::new(), params).expect("tree");
        for (id, rect) in &data {
            tree.insert(*id, *rect).expect("insert");
        }
        g_mem.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut rt: RStarTree<Obj> = RStarTree::new();
        for o in &objs {
            rt.insert(*o);
        }
        r.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut rt: RStarTree<Obj, PageParams> = RStarTree::new_with_params();
        for o in &objs {
            rt.insert(*o);
        }
        r_page.push(t.elapsed().as_secs_f64());
    }
    let insert_on_mem = median(g_mem);
    rows.push((
        "insert N one by one (s)",
        median(g),
        median(r),
        median(r_page),
    ));

    // bulk load
    let (mut g, mut r, mut r_page) = (Vec::new(), Vec::new(), Vec::new());
    let mut gtree = None;
    let mut rtree = None;
    let mut ptree = None;
    for _ in 0..reps {
        let items = data.clone();
        let t = Instant::now();
        let tree = RTree::bulk_load(store(), params, items, BulkMethod::Str, 1.0).expect("bulk");
        g.push(t.elapsed().as_secs_f64());
        gtree = Some(tree);
        let o = objs.clone();
        let t = Instant::now();
        let rt = RStarTree::bulk_load(o);
        r.push(t.elapsed().as_secs_f64());
        rtree = Some(rt);
        let o = objs.clone();
        let t = Instant::now();
        let pt: RStarTree<Obj, PageParams> = RStarTree::bulk_load_with_params(o);
        r_page.push(t.elapsed().as_secs_f64());
        ptree = Some(pt);
    }
    rows.push(("STR bulk load (s)", median(g), median(r), median(r_page)));
    let (gtree, rtree, ptree) = (
        gtree.expect("tree"),
        rtree.expect("tree"),
        ptree.expect("tree"),
    );

    // range queries (on the bulk-loaded trees), answers compared
    let (mut g, mut r, mut r_page) = (Vec::new(), Vec::new(), Vec::new());
    let mut total = 0usize;
    for _ in 0..reps {
        let t = Instant::now();
        let mut ga: Vec<Vec<u64>> = Vec::with_capacity(100);
        for w in &windows {
            ga.push(
                gtree
                    .query(*w, Predicate::Intersects)
                    .expect("query")
                    .hits
                    .iter()
                    .map(|h| h.id)
                    .collect(),
            );
        }
        g.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let mut ra: Vec<Vec<u64>> = Vec::with_capacity(100);
        for w in &windows {
            let env = AABB::from_corners([w.min_x(), w.min_y()], [w.max_x(), w.max_y()]);
            ra.push(
                rtree
                    .locate_in_envelope_intersecting(&env)
                    .map(|o| o.data)
                    .collect(),
            );
        }
        r.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let mut pa: Vec<Vec<u64>> = Vec::with_capacity(100);
        for w in &windows {
            let env = AABB::from_corners([w.min_x(), w.min_y()], [w.max_x(), w.max_y()]);
            pa.push(
                ptree
                    .locate_in_envelope_intersecting(&env)
                    .map(|o| o.data)
                    .collect(),
            );
        }
        r_page.push(t.elapsed().as_secs_f64() * 1e3);
        for (a, b) in pa.iter_mut().zip(ra.iter_mut()) {
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "rstar range answers differ between node sizes");
        }
        for (a, b) in ga.iter_mut().zip(ra.iter_mut()) {
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "range answers differ");
            total += a.len();
        }
    }
    rows.push((
        "100 range queries at 0.01% (ms)",
        median(g),
        median(r),
        median(r_page),
    ));

    // kNN
    let (mut g, mut r, mut r_page) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        let ga: Vec<Vec<f64>> = points
            .iter()
            .map(|p| {
                gtree
                    .nearest(*p, 10, false)
                    .expect("knn")
                    .neighbors
                    .iter()
                    .map(|n| n.distance)
                    .collect()
            })
            .collect();
        g.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let ra: Vec<Vec<f64>> = points
            .iter()
            .map(|p| {
                rtree
                    .nearest_neighbor_iter_with_distance_2(&[p.x, p.y])
                    .take(10)
                    .map(|(_, d2)| d2.sqrt())
                    .collect()
            })
            .collect();
        r.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let pa: Vec<Vec<f64>> = points
            .iter()
            .map(|p| {
                ptree
                    .nearest_neighbor_iter_with_distance_2(&[p.x, p.y])
                    .take(10)
                    .map(|(_, d2)| d2.sqrt())
                    .collect()
            })
            .collect();
        r_page.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(pa, ra, "rstar kNN distances differ between node sizes");
        for (a, b) in ga.iter().zip(&ra) {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 1e-12, "kNN distances differ");
            }
        }
    }
    rows.push(("100 kNN, k = 10 (ms)", median(g), median(r), median(r_page)));

    // For profiling the query phases (`perf record`): repeat geoflash's
    // queries untimed `GEOFLASH_BENCH_PROFILE_QUERIES` times (default 0).
    let profile = env("GEOFLASH_BENCH_PROFILE_QUERIES", 0);
    let mut sink = 0usize;
    for _ in 0..profile {
        for w in &windows {
            sink += gtree
                .query(*w, Predicate::Intersects)
                .expect("query")
                .hits
                .len();
        }
        for p in &points {
            sink += gtree.nearest(*p, 10, false).expect("knn").neighbors.len();
        }
    }
    if profile > 0 {
        println!("profiling loop: {sink} answers");
    }

    println!(
        "N = {n}, repetitions = {reps}, medians; range answers equal ({} results per run)",
        total / reps
    );
    println!(
        "geoflash insertion on MemStore instead of PlainStore: {insert_on_mem:.3} s (the store's share of the insertion time is the difference)"
    );
    println!("| phase | geoflash (M = 101) | rstar (default M = 6) | geoflash / rstar | rstar with M = 101 | geoflash / rstar M = 101 |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, g, r, rp) in rows {
        if rp.is_nan() {
            println!("| {name} | {g:.3} | {r:.3} | {:.2} | | |", g / r);
        } else {
            println!(
                "| {name} | {g:.3} | {r:.3} | {:.2} | {rp:.3} | {:.2} |",
                g / r,
                g / rp
            );
        }
    }
}
