//! Review of the batched and cold reads of the R-tree family (R-tree and
//! R*-tree): `query_batch`, `query_batch_keys`, `query_batch_flat`, `count`,
//! `nearest`, `nearest_batch` and `nearest_batch_to`, in both read modes,
//! against single queries and a brute-force oracle; on the memory store and
//! on the plain, eFIND and FAST stores over file devices (buffered and
//! `O_DIRECT`, psync and io_uring) with buffers of a few pages, after
//! interleaved inserts and deletes, and after a checkpoint and a reopen
//! (cold: nothing cached). The data have duplicates, points, lines, huge and
//! tiny coordinates and many identical rectangles; the windows are empty
//! batches, single windows, hundreds, duplicates, windows covering
//! everything or nothing, and degenerate ones; kNN has k = 0, 1, many, more
//! than the records, and ties on purpose.
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::geom::Point;
use crate::spatial::SpatialIndex;
use crate::storage::file::{FileDevice, FileDeviceOptions, IoEngine};
use crate::storage::PageDevice;
use crate::store::efind::EfindConfig;
use crate::store::fast::{FastConfig, FastStore};
use crate::store::log::LogPlacement;
use crate::store::mem::MemStore;
use crate::store::plain::{PlainConfig, PlainStore};

/// Page size of the stores on file devices (`O_DIRECT` accepts it).
const PS: usize = 4096;

/// Where the data of a case lie: `origin + scale · u` for `u` in [0, 1].
#[derive(Debug, Clone, Copy)]
struct Dom {
    origin: f64,
    scale: f64,
}

impl Dom {
    /// Every domain the cases use: unit, tiny around a far origin, large,
    /// and huge (near `MAX_COORD`, with room for windows around it).
    fn pick(rng: &mut ChaCha8Rng) -> Dom {
        match rng.gen_range(0..4) {
            0 => Dom {
                origin: 0.0,
                scale: 1.0,
            },
            1 => Dom {
                origin: 12_345.678,
                scale: 1e-9,
            },
            2 => Dom {
                origin: -5e11,
                scale: 1e12,
            },
            _ => Dom {
                origin: -5e148,
                scale: 1e149,
            },
        }
    }

    fn at(&self, u: f64) -> f64 {
        self.origin + self.scale * u
    }

    /// A coordinate on a coarse grid (so that many things tie).
    fn grid(&self, rng: &mut ChaCha8Rng) -> f64 {
        self.at(f64::from(rng.gen_range(0..=16u32)) / 16.0)
    }

    fn any(&self, rng: &mut ChaCha8Rng) -> f64 {
        self.at(rng.gen::<f64>())
    }

    /// A point (as a rectangle) on the grid, or anywhere.
    fn point(&self, rng: &mut ChaCha8Rng, on_grid: bool) -> Rect {
        let (x, y) = match on_grid {
            true => (self.grid(rng), self.grid(rng)),
            false => (self.any(rng), self.any(rng)),
        };
        rect(x, y, x, y)
    }

    /// A box anywhere, of sides up to `side` of the domain's.
    fn small_box(&self, rng: &mut ChaCha8Rng, side: f64) -> Rect {
        let (x, y) = (self.any(rng), self.any(rng));
        let (w, h) = (rng.gen::<f64>() * side, rng.gen::<f64>() * side);
        rect(x, y, x + w * self.scale, y + h * self.scale)
    }
}

/// The rectangle with corners `(a, b)` and `(c, d)`, in any order.
fn rect(a: f64, b: f64, c: f64, d: f64) -> Rect {
    Rect::new(a.min(c), b.min(d), a.max(c), b.max(d)).unwrap()
}

/// A random record rectangle: duplicates of `pool`, points, lines, big and
/// small boxes, often on a grid.
fn data_rect(rng: &mut ChaCha8Rng, dom: &Dom, pool: &[(u64, Rect)]) -> Rect {
    match rng.gen_range(0..10) {
        0 | 1 if !pool.is_empty() => pool[rng.gen_range(0..pool.len())].1,
        0..=2 => dom.point(rng, true),
        3 => dom.point(rng, false),
        4 => {
            let y = dom.grid(rng);
            rect(dom.grid(rng), y, dom.grid(rng), y)
        }
        5 => {
            let x = dom.any(rng);
            rect(x, dom.any(rng), x, dom.any(rng))
        }
        6 => {
            let (x, y) = (dom.any(rng) * 0.5, dom.any(rng) * 0.5);
            rect(x, y, dom.any(rng), dom.any(rng))
        }
        _ => dom.small_box(rng, 0.02),
    }
}

/// A fresh id: dense small ones or anywhere in `u64`.
fn fresh_id(rng: &mut ChaCha8Rng, used: &mut HashSet<u64>, wide: bool) -> u64 {
    loop {
        let id = if wide {
            rng.gen::<u64>()
        } else {
            rng.gen_range(0..(used.len() as u64 * 2 + 8))
        };
        if used.insert(id) {
            return id;
        }
    }
}

/// `n` windows of every kind (see the module documentation).
fn windows(rng: &mut ChaCha8Rng, dom: &Dom, live: &[(u64, Rect)], n: usize) -> Vec<Rect> {
    let mut out: Vec<Rect> = Vec::with_capacity(n);
    while out.len() < n {
        let w = match rng.gen_range(0..11) {
            0 if !live.is_empty() => live[rng.gen_range(0..live.len())].1,
            1 => dom.small_box(rng, 0.3),
            2 => rect(dom.grid(rng), dom.grid(rng), dom.grid(rng), dom.grid(rng)),
            3 => dom.point(rng, true),
            4 => dom.point(rng, false),
            5 => {
                let y = dom.grid(rng);
                rect(dom.at(-0.5), y, dom.at(1.5), y)
            }
            6 => rect(dom.at(-1.0), dom.at(-1.0), dom.at(2.0), dom.at(2.0)),
            7 => rect(dom.at(1.5), dom.at(1.5), dom.at(1.9), dom.at(1.7)),
            8 if !out.is_empty() => out[rng.gen_range(0..out.len())],
            9 if !live.is_empty() => {
                let r = live[rng.gen_range(0..live.len())].1;
                rect(r.min_x(), r.min_y(), r.min_x(), r.max_y())
            }
            _ => rect(dom.any(rng), dom.any(rng), dom.any(rng), dom.any(rng)),
        };
        out.push(w);
    }
    out
}

// Does `predicate(window, object)` hold? (Closed rectangles; the
// Hilbert review's oracle.)
use super::hilbert_review_tests::selected as holds;

/// Checks every batch entry point, in both read modes, on `ws` against the
/// single queries and brute force (batched mode first: on a store just
/// reopened, its reads are cold).
fn check_ranges<S: NodeStore + 'static>(
    t: &mut RTree<S>,
    live: &[(u64, Rect)],
    ws: &[Rect],
    what: &str,
) {
    for p in Predicate::ALL {
        let mut answers: Option<Vec<Vec<u64>>> = None;
        for mode in [ReadMode::Batched, ReadMode::Single] {
            t.set_read_mode(mode);
            let ctx = format!("{what}: {p:?}, {mode:?}, {} windows", ws.len());
            let batch = t
                .query_batch(ws, p)
                .unwrap_or_else(|e| panic!("{ctx}: query_batch: {e}"));
            let keys = t
                .query_batch_keys(ws, p)
                .unwrap_or_else(|e| panic!("{ctx}: keys: {e}"));
            let flat = t
                .query_batch_flat(ws, p)
                .unwrap_or_else(|e| panic!("{ctx}: flat: {e}"));
            assert_eq!(batch.results.len(), ws.len(), "{ctx}");
            assert_eq!(keys.len(), ws.len(), "{ctx}");
            assert_eq!(flat.offsets.len(), ws.len() + 1, "{ctx}");
            assert_eq!(flat.offsets.first().copied(), Some(0), "{ctx}");
            assert_eq!(flat.offsets.last().copied(), Some(flat.keys.len()), "{ctx}");
            let mut per_window = Vec::with_capacity(ws.len());
            for (i, w) in ws.iter().enumerate() {
                let c = format!("{ctx}: window {i} {w:?}");
                let single = t.query(*w, p).unwrap_or_else(|e| panic!("{c}: query: {e}"));
                let got = &batch.results[i];
                assert_eq!(got.hits, single.hits, "{c}: batch against single");
                assert_eq!(
                    got.stats.nodes_visited, single.stats.nodes_visited,
                    "{c}: nodes"
                );
                assert_eq!(got.stats.results, single.hits.len() as u64, "{c}: results");
                let ids: Vec<u64> = single.hits.iter().map(|h| h.id).collect();
                assert_eq!(keys[i].keys, ids, "{c}: keys");
                assert_eq!(
                    &flat.keys[flat.offsets[i]..flat.offsets[i + 1]],
                    &ids[..],
                    "{c}: flat"
                );
                let mut want: Vec<(u64, Rect)> = live
                    .iter()
                    .filter(|(_, b)| holds(p, w, b))
                    .copied()
                    .collect();
                want.sort_by_key(|x| x.0);
                let mut found: Vec<(u64, Rect)> =
                    single.hits.iter().map(|h| (h.id, h.rect)).collect();
                found.sort_by_key(|x| x.0);
                assert_eq!(found, want, "{c}: against brute force");
                let n = SpatialIndex::count(t, *w, p).unwrap_or_else(|e| panic!("{c}: count: {e}"));
                assert_eq!(n, want.len() as u64, "{c}: count");
                per_window.push(ids);
            }
            match &answers {
                Some(a) => assert_eq!(a, &per_window, "{ctx}: the read modes differ"),
                None => answers = Some(per_window),
            }
        }
    }
}

/// Distance between the nearest points of `q` and `b` (what kNN orders by).
fn dist(q: &Rect, b: &Rect) -> f64 {
    b.min_dist_sq_rect(q).sqrt()
}

/// The brute-force answer of a kNN query: `(id, distance)` by distance then id.
fn knn_oracle(live: &[(u64, Rect)], q: &Rect, k: usize, ties: bool) -> Vec<(u64, f64)> {
    let mut all: Vec<(u64, f64)> = live.iter().map(|(id, b)| (*id, dist(q, b))).collect();
    all.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    if k == 0 {
        return Vec::new();
    }
    let Some(&(_, kth)) = all.get(k - 1) else {
        return all;
    };
    let end = if ties {
        all.iter().take_while(|x| x.1 <= kth).count()
    } else {
        k
    };
    all.truncate(end);
    all
}

/// Checks `nearest_batch_to` (and `nearest_batch` for the point queries)
/// in both read modes against `nearest_to` and brute force, for each k.
fn check_knn<S: NodeStore + 'static>(
    t: &mut RTree<S>,
    live: &[(u64, Rect)],
    qs: &[Rect],
    ks: &[usize],
    what: &str,
) {
    let rects: HashMap<u64, Rect> = live.iter().copied().collect();
    let points: Vec<Point> = qs
        .iter()
        .filter(|q| q.min_x() == q.max_x() && q.min_y() == q.max_y())
        .map(|q| Point::new(q.min_x(), q.min_y()).unwrap())
        .collect();
    for &k in ks {
        for ties in [false, true] {
            for mode in [ReadMode::Batched, ReadMode::Single] {
                t.set_read_mode(mode);
                let ctx = format!("{what}: kNN k {k}, ties {ties}, {mode:?}");
                let all = t
                    .nearest_batch_to(qs, k, ties)
                    .unwrap_or_else(|e| panic!("{ctx}: batch: {e}"));
                assert_eq!(all.len(), qs.len(), "{ctx}");
                for (i, (q, got)) in qs.iter().zip(&all).enumerate() {
                    let c = format!("{ctx}: query {i} {q:?}");
                    let one = t
                        .nearest_to(*q, k, ties)
                        .unwrap_or_else(|e| panic!("{c}: single: {e}"));
                    assert_eq!(got.neighbors, one.neighbors, "{c}: batch against single");
                    assert_eq!(
                        got.stats.nodes_visited, one.stats.nodes_visited,
                        "{c}: nodes"
                    );
                    let have: Vec<(u64, f64)> =
                        got.neighbors.iter().map(|n| (n.id, n.distance)).collect();
                    assert_eq!(
                        have,
                        knn_oracle(live, q, k, ties),
                        "{c}: against brute force"
                    );
                    for n in &got.neighbors {
                        assert_eq!(
                            rects.get(&n.id),
                            Some(&n.rect),
                            "{c}: rectangle of {}",
                            n.id
                        );
                    }
                }
                let by_point = t
                    .nearest_batch(&points, k, ties)
                    .unwrap_or_else(|e| panic!("{ctx}: points: {e}"));
                for (p, got) in points.iter().zip(&by_point) {
                    let one = t
                        .nearest(*p, k, ties)
                        .unwrap_or_else(|e| panic!("{ctx}: {p:?}: {e}"));
                    assert_eq!(got.neighbors, one.neighbors, "{ctx}: point {p:?}");
                }
            }
        }
    }
}

/// kNN queries: grid points (ties), random points, duplicates, points
/// outside the data, records' own rectangles and windows.
fn knn_queries(rng: &mut ChaCha8Rng, dom: &Dom, live: &[(u64, Rect)], n: usize) -> Vec<Rect> {
    let mut qs = windows(rng, dom, live, n / 2);
    for _ in 0..n - n / 2 {
        let (x, y) = match rng.gen_range(0..3) {
            0 => (dom.grid(rng), dom.grid(rng)),
            1 => (dom.any(rng), dom.any(rng)),
            _ => (dom.at(-0.7), dom.grid(rng)),
        };
        qs.push(rect(x, y, x, y));
    }
    if let Some(q) = qs.first().copied() {
        qs.push(q);
    }
    qs
}

/// Every check on the tree as it is: window batches of 0, 1, a few and
/// hundreds, and kNN batches.
fn check_all<S: NodeStore + 'static>(
    t: &mut RTree<S>,
    live: &[(u64, Rect)],
    rng: &mut ChaCha8Rng,
    dom: &Dom,
    big: usize,
    what: &str,
) {
    assert_eq!(t.len(), live.len() as u64, "{what}: records");
    for n in [0, 1, 7, big] {
        let ws = windows(rng, dom, live, n);
        check_ranges(t, live, &ws, &format!("{what}, batch of {n}"));
    }
    let qs = knn_queries(rng, dom, live, 12);
    let len = live.len();
    let ks = [
        0,
        1,
        3,
        rng.gen_range(1..=len.max(1) * 2),
        len,
        len + 3,
        usize::MAX,
    ];
    check_knn(t, live, &qs, &ks, what);
}

/// Random parameters of the R-tree family (every split, M from 4 to 40).
fn random_params(rng: &mut ChaCha8Rng) -> TreeParams {
    let max = *[4usize, 5, 6, 8, 12, 40].choose(rng).unwrap();
    match rng.gen_range(0..4) {
        0 => TreeParams::new(IndexKind::RTree, max).with_split(SplitKind::Linear),
        1 => TreeParams::new(IndexKind::RTree, max).with_split(SplitKind::Quadratic),
        2 if max <= 8 => TreeParams::new(IndexKind::RTree, max).with_split(SplitKind::Exponential),
        _ => TreeParams::new(IndexKind::RStar, max),
    }
}

/// Deletes about a third of the records and inserts as many new ones
/// (duplicates of live rectangles among them), interleaved.
fn churn<S: NodeStore>(
    t: &mut RTree<S>,
    live: &mut Vec<(u64, Rect)>,
    used: &mut HashSet<u64>,
    rng: &mut ChaCha8Rng,
    dom: &Dom,
    what: &str,
) {
    let ops = live.len() / 3 + 5;
    for _ in 0..2 * ops {
        if rng.gen_bool(0.5) && !live.is_empty() {
            let (id, r) = live.swap_remove(rng.gen_range(0..live.len()));
            t.delete(id, r)
                .unwrap_or_else(|e| panic!("{what}: delete {id} {r:?}: {e}"));
        } else {
            let r = data_rect(rng, dom, live);
            let wide = rng.gen_bool(0.3);
            let id = fresh_id(rng, used, wide);
            t.insert(id, r)
                .unwrap_or_else(|e| panic!("{what}: insert {id} {r:?}: {e}"));
            live.push((id, r));
        }
    }
}

/// One case: a tree built on `create()` (by insertion or a bulk load) is
/// checked, changed, checked, and (with `reopen`) checkpointed, reopened
/// cold, checked, changed and checked again.
fn scenario<S: NodeStore + 'static>(
    seed: u64,
    what: &str,
    max_records: usize,
    create: impl FnOnce() -> S,
    mut reopen: Option<&mut dyn FnMut() -> S>,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dom = Dom::pick(&mut rng);
    let p = random_params(&mut rng);
    let n = match rng.gen_range(0..8) {
        0 => rng.gen_range(0..3),
        _ => rng.gen_range(0..=max_records),
    };
    let wide = rng.gen_bool(0.3);
    let mut used = HashSet::new();
    let mut live: Vec<(u64, Rect)> = Vec::with_capacity(n);
    for _ in 0..n {
        let r = data_rect(&mut rng, &dom, &live);
        live.push((fresh_id(&mut rng, &mut used, wide), r));
    }
    let how = rng.gen_range(0..3);
    let fill = *[1.0, 0.7, 0.5].choose(&mut rng).unwrap();
    let what = format!(
        "{what}, seed {seed}, {dom:?}, {:?} {:?} M {}, {n} records, build {how} fill {fill}",
        p.kind, p.split, p.max_entries
    );
    let mut t = match how {
        1 | 2 if n > 0 => {
            let m = if how == 1 {
                BulkMethod::Str
            } else {
                BulkMethod::Hilbert
            };
            RTree::bulk_load(create(), p, live.clone(), m, fill)
                .unwrap_or_else(|e| panic!("{what}: bulk: {e}"))
        }
        _ => {
            let mut t = RTree::create(create(), p).unwrap();
            for (id, r) in &live {
                t.insert(*id, *r)
                    .unwrap_or_else(|e| panic!("{what}: insert {id} {r:?}: {e}"));
            }
            t
        }
    };
    let big = rng.gen_range(100..200);
    check_all(
        &mut t,
        &live,
        &mut rng,
        &dom,
        big,
        &format!("{what}, built"),
    );
    churn(&mut t, &mut live, &mut used, &mut rng, &dom, &what);
    check_all(
        &mut t,
        &live,
        &mut rng,
        &dom,
        big,
        &format!("{what}, after changes"),
    );
    let Some(reopen) = reopen.as_mut() else {
        return;
    };
    for round in 0..2 {
        t.store_mut()
            .checkpoint()
            .unwrap_or_else(|e| panic!("{what}: checkpoint: {e}"));
        drop(t);
        t = RTree::open(reopen(), p).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        check_all(
            &mut t,
            &live,
            &mut rng,
            &dom,
            big,
            &format!("{what}, reopened {round}"),
        );
        churn(&mut t, &mut live, &mut used, &mut rng, &dom, &what);
        check_all(
            &mut t,
            &live,
            &mut rng,
            &dom,
            big,
            &format!("{what}, reopened {round}, changed"),
        );
    }
}

/// A temporary directory under the workspace's `target/` (a disk
/// filesystem, where `O_DIRECT` usually works; `/tmp` may be tmpfs).
fn test_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tmp");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(&base).unwrap()
}

/// The file-device configurations: buffered and direct, psync and io_uring.
const DEVICES: [(bool, IoEngine); 4] = [
    (false, IoEngine::Psync),
    (false, IoEngine::Uring),
    (true, IoEngine::Psync),
    (true, IoEngine::Uring),
];

/// The file device at `path`, or `None` (skipped outside CI) when the
/// filesystem refuses `O_DIRECT` or io_uring is missing.
fn file_device(path: &Path, direct: bool, engine: IoEngine) -> Option<Arc<dyn PageDevice>> {
    let opts = FileDeviceOptions {
        direct,
        engine,
        capacity_pages: 1 << 16,
        read_only: false,
    };
    match FileDevice::open(path, PS, opts) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("refuses O_DIRECT") || msg.contains("io_uring requested"),
                "{msg}"
            );
            if let Err(e) = crate::testenv::prerequisite_missing(&format!("{opts:?}: {msg}")) {
                panic!("{e}");
            }
            None
        }
    }
}

/// Cases per file-store test (a 32nd of the property-test cases, at
/// least 2), each on half of the [`DEVICES`] ([`on_device`]).
fn file_cases() -> u64 {
    u64::from(crate::testenv::proptest_cases() / 32).max(2)
}

/// Whether file-store case `case` runs on device configuration `d`: every
/// other one, so that two cases cover every device.
fn on_device(case: u64, d: usize) -> bool {
    (case + d as u64).is_multiple_of(2)
}

#[test]
fn memory_store_batches_answer_as_single_queries_and_brute_force() {
    for case in 0..u64::from(crate::testenv::proptest_cases() / 4).max(4) {
        scenario(case, "memory", 600, MemStore::new, None);
    }
}

/// Runs `run(case, device, what)` for each file-store case on the
/// [`DEVICES`] it takes ([`on_device`]): `device` opens the case's file
/// (again for a reopen), `what` names the store and the device.
fn for_file_cases(name: &str, mut run: impl FnMut(u64, &dyn Fn() -> Arc<dyn PageDevice>, &str)) {
    let dir = test_dir();
    for (d, (direct, engine)) in DEVICES.into_iter().enumerate() {
        for case in (0..file_cases()).filter(|c| on_device(*c, d)) {
            let path = dir.path().join(format!("{name}-{d}-{case}"));
            if file_device(&path, direct, engine).is_none() {
                break;
            }
            let dev = || file_device(&path, direct, engine).unwrap();
            run(case, &dev, &format!("{name}, direct {direct}, {engine:?}"));
        }
    }
}

#[test]
fn plain_file_store_cold_batches_answer_as_single_queries_and_brute_force() {
    for_file_cases("plain", |case, dev, what| {
        let buffer = [0, 3 * PS][(case % 2) as usize];
        let cfg = PlainConfig {
            buffer_bytes: buffer,
            ..PlainConfig::default()
        };
        let mut reopen = || PlainStore::open(dev(), cfg).unwrap();
        let create = || PlainStore::create(dev(), cfg).unwrap();
        let what = format!("{what}, buffer {buffer}");
        scenario(1000 + case, &what, 300, create, Some(&mut reopen));
    });
}

#[test]
fn efind_file_store_cold_batches_answer_as_single_queries_and_brute_force() {
    use crate::store::efind::tests::{create_on, open_on};
    for_file_cases("efind", |case, dev, what| {
        let read = [0u8, 50][(case % 2) as usize];
        let cfg = EfindConfig {
            buffer_bytes: 4 * PS,
            read_buffer_percent: read,
            ..EfindConfig::default()
        };
        let mut reopen = || open_on(dev(), cfg).unwrap();
        let create = || create_on(dev(), cfg).unwrap();
        let what = format!("{what}, read buffer {read} %");
        scenario(2000 + case, &what, 300, create, Some(&mut reopen));
    });
}

#[test]
fn fast_file_store_cold_batches_answer_as_single_queries_and_brute_force() {
    for_file_cases("fast", |case, dev, what| {
        let cfg = FastConfig {
            buffer_bytes: 4 * PS,
            ..FastConfig::default()
        };
        let log = |dev: &Arc<dyn PageDevice>| {
            LogPlacement::tail_of(dev, cfg.log_pages(PS).unwrap()).unwrap()
        };
        let mut reopen = || {
            let dev = dev();
            FastStore::open(dev.clone(), log(&dev), cfg).unwrap()
        };
        let create = || {
            let dev = dev();
            FastStore::create(dev.clone(), log(&dev), cfg).unwrap()
        };
        scenario(3000 + case, what, 300, create, Some(&mut reopen));
    });
}

/// A cold batch of more pages than a file device's stream buffer holds
/// (2 MiB: 512 pages of 4 KiB): windows covering everything read every
/// leaf in one level batch, and kNN batches of hundreds of points read
/// hundreds of pages at once; the answers are the brute-force ones.
#[test]
fn a_cold_batch_larger_than_the_stream_buffer_answers_as_brute_force() {
    let dir = test_dir();
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let dom = Dom {
        origin: 0.0,
        scale: 1.0,
    };
    let mut live: Vec<(u64, Rect)> = Vec::new();
    for i in 0..6_000u64 {
        let r = data_rect(&mut rng, &dom, &live);
        live.push((i, r));
    }
    for (d, (direct, engine)) in DEVICES.into_iter().enumerate() {
        let path = dir.path().join(format!("large-{d}"));
        let Some(dev) = file_device(&path, direct, engine) else {
            continue;
        };
        let p = TreeParams::new(IndexKind::RStar, 6);
        let store = PlainStore::create(
            dev,
            PlainConfig {
                buffer_bytes: 0,
                ..PlainConfig::default()
            },
        )
        .unwrap();
        let mut t = RTree::bulk_load(store, p, live.clone(), BulkMethod::Str, 1.0).unwrap();
        t.store_mut().checkpoint().unwrap();
        drop(t);
        let dev = file_device(&path, direct, engine).unwrap();
        let mut t = RTree::open(
            PlainStore::open(
                dev,
                PlainConfig {
                    buffer_bytes: 0,
                    ..PlainConfig::default()
                },
            )
            .unwrap(),
            p,
        )
        .unwrap();
        let what = format!("large, direct {direct}, {engine:?}");
        let all = rect(-1.0, -1.0, 2.0, 2.0);
        let ws = vec![
            all,
            rect(0.0, 0.0, 0.5, 1.0),
            all,
            rect(0.25, 0.25, 0.25, 0.25),
        ];
        check_ranges(&mut t, &live, &ws, &what);
        let qs = knn_queries(&mut rng, &dom, &live, 20);
        check_knn(&mut t, &live, &qs, &[40], &what);
    }
}
