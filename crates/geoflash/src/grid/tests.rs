//! Oracle tests of GFFM and LB-Grid: random insert/delete/query sequences
//! against a brute-force map, with checkpoints and reopens in between.
use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::storage::mem::MemDevice;
use crate::storage::DeviceExt;

/// The domain of the test grids.
pub(super) fn domain() -> Rect {
    Rect::new(0.0, 0.0, 100.0, 100.0).unwrap()
}

/// Small buffers so that eviction, cold batches and group splitting happen.
pub(super) fn small_opts() -> GridOptions {
    GridOptions {
        dir_hot_pages: 3,
        bucket_hot_pages: 4,
        cold_pages: 3,
        ..GridOptions::new(domain())
    }
}

fn mem(page: usize) -> Arc<dyn PageDevice> {
    Arc::new(MemDevice::new(page, 1 << 20).unwrap())
}

/// The brute-force oracle: each point (by the bits of its coordinates,
/// `-0.0` as `0.0`) with its object id (also `review_tests`').
#[derive(Debug, Default, Clone)]
pub(super) struct Oracle(pub(super) BTreeMap<(u64, u64), (f64, f64, u64)>);

impl Oracle {
    pub(super) fn key(x: f64, y: f64) -> (u64, u64) {
        ((x + 0.0).to_bits(), (y + 0.0).to_bits())
    }
    pub(super) fn get(&self, x: f64, y: f64) -> Option<u64> {
        self.0.get(&Self::key(x, y)).map(|t| t.2)
    }
    pub(super) fn holds_id(&self, id: u64) -> bool {
        self.0.values().any(|t| t.2 == id)
    }
    /// The points in `r` as (x bits, y bits, id), sorted.
    pub(super) fn range(&self, r: &Rect) -> Vec<(u64, u64, u64)> {
        let mut v: Vec<_> = self
            .0
            .values()
            .filter(|(x, y, _)| {
                *x >= r.min_x() && *x <= r.max_x() && *y >= r.min_y() && *y <= r.max_y()
            })
            .map(|(x, y, id)| (x.to_bits(), y.to_bits(), *id))
            .collect();
        v.sort_unstable();
        v
    }
    fn knn_dists(&self, x: f64, y: f64, k: usize) -> Vec<f64> {
        let p = Point { x, y };
        let mut d: Vec<f64> = self
            .0
            .values()
            .map(|(a, b, _)| Point { x: *a, y: *b }.distance(&p))
            .collect();
        d.sort_by(f64::total_cmp);
        d.truncate(k);
        d
    }
}

/// `v` as the oracle's [`Oracle::range`] lists points.
pub(super) fn sorted(v: Vec<GridPoint>) -> Vec<(u64, u64, u64)> {
    let mut v: Vec<_> = v
        .into_iter()
        .map(|p| (p.x.to_bits(), p.y.to_bits(), p.id))
        .collect();
    v.sort_unstable();
    v
}

#[derive(Debug, Clone)]
enum Op {
    Insert(f64, f64, u64),
    Delete(f64, f64),
    Get(f64, f64),
    Range(Rect),
    Knn(f64, f64, usize),
    Group(Vec<(f64, f64)>),
    Reopen,
}

/// Coordinates on a lattice (collisions and equal coordinates are common),
/// sometimes at the domain's edges.
fn coord() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => (0u32..=400).prop_map(|v| f64::from(v) / 4.0),
        1 => Just(0.0),
        1 => Just(100.0),
        1 => (0u32..=20).prop_map(|v| 50.0 + f64::from(v) / 64.0),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => (coord(), coord(), any::<u64>()).prop_map(|(x, y, id)| Op::Insert(x, y, id)),
        18 => (coord(), coord()).prop_map(|(x, y)| Op::Delete(x, y)),
        3 => (coord(), coord()).prop_map(|(x, y)| Op::Get(x, y)),
        3 => (coord(), coord(), 0.0..60.0f64, 0.0..60.0f64)
            .prop_map(|(x, y, w, h)| Op::Range(Rect::new(x - 5.0, y - 5.0, x + w, y + h).unwrap())),
        3 => (-10.0..110.0f64, -10.0..110.0f64, 0usize..40).prop_map(|(x, y, k)| Op::Knn(x, y, k)),
        2 => prop::collection::vec((coord(), coord()), 0..30).prop_map(Op::Group),
        1 => Just(Op::Reopen),
    ]
}

/// Runs `ops` on a fresh grid file of layer `L`, checking every answer
/// against the oracle. Every layer refuses a present point and a present
/// id, and deletes only a point held under the given id (GFFM removes it,
/// LB-Grid logs it).
fn run<L: BucketLayer>(
    page: usize,
    opts: GridOptions,
    ops: &[Op],
    prefill: &[(f64, f64)],
) -> GridFile<L> {
    run_on(mem(page), opts, ops, prefill)
}

/// [`run`] on a given device.
fn run_on<L: BucketLayer>(
    dev: Arc<dyn PageDevice>,
    opts: GridOptions,
    ops: &[Op],
    prefill: &[(f64, f64)],
) -> GridFile<L> {
    let mut g: GridFile<L> = GridFile::create(Arc::clone(&dev), opts.clone()).unwrap();
    let mut o = Oracle::default();
    let gffm = L::KIND == gffm::InPlaceBuckets::KIND;
    let all = prefill
        .iter()
        .map(|&(x, y)| Op::Insert(x, y, prefill_id(x, y)))
        .chain(ops.iter().cloned());
    let removed = if gffm {
        DeleteOutcome::Removed
    } else {
        DeleteOutcome::Logged
    };
    for op in all {
        match op {
            Op::Insert(x, y, id) => {
                let had = o.get(x, y).is_some() || o.holds_id(id);
                let res = g.insert(x, y, id);
                if had {
                    let e = res.unwrap_err();
                    assert!(e.to_string().contains("already"), "({x}, {y}) id {id}: {e}");
                } else {
                    res.unwrap();
                    o.0.insert(Oracle::key(x, y), (x + 0.0, y + 0.0, id));
                }
            }
            Op::Delete(x, y) => match o.0.remove(&Oracle::key(x, y)) {
                Some((_, _, id)) => {
                    // Another id at the point is not it: nothing changes.
                    let other = id.wrapping_add(1);
                    assert_eq!(g.delete(x, y, other).unwrap(), DeleteOutcome::NotFound);
                    assert_eq!(g.get(x, y).unwrap(), Some(id));
                    assert_eq!(g.delete(x, y, id).unwrap(), removed);
                }
                None => {
                    assert_eq!(g.delete(x, y, 7).unwrap(), DeleteOutcome::NotFound);
                }
            },
            Op::Get(x, y) => assert_eq!(g.get(x, y).unwrap(), o.get(x, y)),
            Op::Range(r) => {
                let want = o.range(&r);
                assert_eq!(sorted(g.range(&r).unwrap()), want);
                assert_eq!(sorted(g.range_batched(&r).unwrap()), want);
            }
            Op::Knn(x, y, k) => {
                let want = o.knn_dists(x, y, k);
                for got in [g.knn(x, y, k).unwrap(), g.knn_prefetch(x, y, k).unwrap()] {
                    let d: Vec<f64> = got.iter().map(|t| t.0).collect();
                    assert_eq!(d, want, "kNN distances of ({x}, {y}), k = {k}");
                    for (_, p) in got {
                        assert_eq!(o.get(p.x, p.y), Some(p.id));
                    }
                }
            }
            Op::Group(pts) => {
                let want: Vec<Option<u64>> = pts.iter().map(|&(x, y)| o.get(x, y)).collect();
                assert_eq!(g.group_get(&pts).unwrap(), want);
                assert_eq!(g.group_get_plain(&pts).unwrap(), want);
            }
            Op::Reopen => {
                g.checkpoint().unwrap();
                let in_use = g.pages_in_use();
                drop(g);
                g = GridFile::open(Arc::clone(&dev), opts.clone()).unwrap();
                assert_eq!(
                    g.pages_in_use(),
                    in_use,
                    "free space recomputed differently at open"
                );
            }
        }
        assert_eq!(g.count().unwrap(), o.0.len() as u64);
    }
    assert_eq!(g.verify().unwrap(), o.0.len() as u64);
    assert_eq!(sorted(g.range(&domain()).unwrap()), o.range(&domain()));
    // A final reopen finds the same points.
    g.checkpoint().unwrap();
    let mut h: GridFile<L> = GridFile::open(dev, opts).unwrap();
    assert_eq!(
        sorted(h.range_batched(&domain()).unwrap()),
        o.range(&domain())
    );
    assert_eq!(h.verify().unwrap(), o.0.len() as u64);
    h
}

/// The points of `pts` in the hot corner, x and y below 20.
fn hot_corner(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    pts.iter()
        .copied()
        .filter(|&(x, y)| x < 20.0 && y < 20.0)
        .collect()
}

/// The id of a prefilled point: distinct for the lattice's points.
fn prefill_id(x: f64, y: f64) -> u64 {
    (x * 4.0) as u64 * 1000 + (y * 4.0) as u64
}

fn prefill(n: usize, seed: u64) -> Vec<(f64, f64)> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut seen = std::collections::HashSet::new();
    let mut v = Vec::new();
    while v.len() < n {
        let (x, y) = (
            f64::from(rng.gen_range(0u32..=400)) / 4.0,
            f64::from(rng.gen_range(0u32..=400)) / 4.0,
        );
        if seen.insert((x.to_bits(), y.to_bits())) {
            v.push((x, y));
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn gffm_agrees_with_the_oracle(ops in prop::collection::vec(op(), 1..300), n in 0usize..400, seed in any::<u64>()) {
        run::<gffm::InPlaceBuckets>(512, small_opts(), &ops, &prefill(n, seed));
    }

    #[test]
    fn lbgrid_agrees_with_the_oracle(ops in prop::collection::vec(op(), 1..300), n in 0usize..400, seed in any::<u64>()) {
        run::<lbgrid::LogBuckets>(512, small_opts(), &ops, &prefill(n, seed));
    }

    /// H-Grid on a hybrid device answers like the oracle whatever s, the
    /// special case and the fast tier's size (a full one falls back), and
    /// reopens; in the special case every sub-directory written since the
    /// last reopen sits on the fast tier when it has room.
    #[test]
    fn hgrid_agrees_with_the_oracle(
        ops in prop::collection::vec(op(), 1..300),
        n in 0usize..400,
        seed in any::<u64>(),
        s in prop_oneof![Just(1.0), Just(2.5)],
        special in any::<bool>(),
        fast_pages in prop_oneof![Just(3u64), Just(100_000u64)],
    ) {
        let h = Arc::new(hybrid_mem(512, fast_pages));
        let opts = GridOptions {
            hybrid: Some(hot::HybridOptions { s, special }),
            ..small_opts()
        };
        let g = run_on::<gffm::InPlaceBuckets>(h.clone(), opts, &ops, &prefill(n, seed));
        prop_assert!(h.fast_pages() <= fast_pages);
        if special && fast_pages > 1000 {
            let mut g = g;
            // Touch every sub-directory (a range over the domain), then flush.
            g.range(&domain()).unwrap();
            g.checkpoint().unwrap();
            for (sd, _) in g.root().boxes() {
                prop_assert_eq!(h.tier_of(sd), crate::storage::Tier::Fast);
            }
        }
    }
}

fn hybrid_mem(page: usize, fast_pages: u64) -> crate::storage::hybrid::HybridDevice {
    crate::storage::hybrid::HybridDevice::new(
        Arc::new(MemDevice::new(page, 1 << 20).unwrap()),
        Arc::new(MemDevice::new(page, 1 << 20).unwrap()),
    )
    .unwrap()
    .with_fast_pages(fast_pages)
}

/// A skewed workload: the hot corner's pages reach the fast tier and are
/// read there; GFFM on the same data reads everything from the slow tier.
#[test]
fn hgrid_moves_the_hot_region_to_the_fast_tier() {
    use crate::storage::Tier;
    let pts = prefill(4000, 3);
    let hot = hot_corner(&pts);
    assert!(hot.len() > 50);
    let mut reads = Vec::new();
    for hybrid in [
        None,
        Some(hot::HybridOptions {
            s: 1.0,
            special: false,
        }),
    ] {
        let dev = Arc::new(hybrid_mem(512, 100_000));
        let opts = GridOptions {
            hybrid,
            ..small_opts()
        };
        let mut g = Gffm::create(dev.clone(), opts).unwrap();
        for (i, &(x, y)) in pts.iter().enumerate() {
            g.insert(x, y, i as u64).unwrap();
        }
        g.checkpoint().unwrap();
        for _ in 0..20 {
            for &(x, y) in &hot {
                assert!(g.get(x, y).unwrap().is_some());
            }
        }
        g.checkpoint().unwrap();
        dev.reset_stats();
        for &(x, y) in &hot {
            assert!(g.get(x, y).unwrap().is_some());
        }
        let t = dev.tiers().unwrap();
        reads.push((t.fast.io.pages_read, t.slow.io.pages_read));
        let s = g.stats();
        if hybrid.is_some() {
            assert!(s.hot_dirs > 0 && s.hot_buckets > 0, "{s:?}");
            // The hot corner's sub-directory is on the fast tier.
            let sd = g.root().lookup(1.0, 1.0).unwrap();
            assert_eq!(dev.tier_of(sd), Tier::Fast);
        } else {
            assert_eq!((s.hot_dirs, s.hot_buckets, dev.fast_pages()), (0, 0, 0));
        }
    }
    assert_eq!(reads[0].0, 0);
    assert!(reads[1].0 > reads[1].1, "{reads:?}");
}

#[test]
fn thousands_of_points_split_directories_and_shrink_back() {
    for kind in 0..2 {
        let dev = mem(512);
        let pts = prefill(3000, 7);
        let opts = small_opts();
        macro_rules! body {
            ($g:expr) => {{
                let mut g = $g;
                for (i, &(x, y)) in pts.iter().enumerate() {
                    g.insert(x, y, i as u64).unwrap();
                }
                let s = g.stats();
                assert!(s.bucket_splits > 50 && s.dir_splits > 3, "{s:?}");
                assert!(g.root().cells.len() > 3);
                assert_eq!(g.verify().unwrap(), 3000);
                for (i, &(x, y)) in pts.iter().enumerate().skip(100) {
                    g.delete(x, y, i as u64).unwrap();
                }
                let s = g.stats();
                assert!(s.bucket_merges > 20 && s.dir_merges > 0, "{s:?}");
                assert_eq!(g.verify().unwrap(), 100);
                let mut got = g.range(&domain()).unwrap();
                got.sort_by_key(|p| p.id);
                assert_eq!(
                    got.iter().map(|p| p.id).collect::<Vec<_>>(),
                    (0..100).collect::<Vec<u64>>()
                );
            }};
        }
        if kind == 0 {
            body!(Gffm::create(Arc::clone(&dev), opts).unwrap());
        } else {
            body!(LbGrid::create(Arc::clone(&dev), opts).unwrap());
        }
    }
}

#[test]
fn bad_input_is_refused() {
    let dev = mem(512);
    let mut g = Gffm::create(Arc::clone(&dev), small_opts()).unwrap();
    assert!(matches!(
        g.insert(100.5, 3.0, 1),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        g.insert(f64::NAN, 3.0, 1),
        Err(Error::InvalidInput(_))
    ));
    assert!(g.delete(-1.0, 0.0, 1).is_err());
    g.insert(1.0, 1.0, 1).unwrap();
    let e = g.insert(1.0, 1.0, 2).unwrap_err();
    assert!(e.to_string().contains("already"), "{e}");
    assert_eq!(g.get(1.0, 1.0).unwrap(), Some(1));
    assert_eq!(g.get(-0.0 + 1.0, 1.0).unwrap(), Some(1));
    assert_eq!(g.get(500.0, 1.0).unwrap(), None);
    assert!(g.get(f64::INFINITY, 1.0).is_err());
    assert!(g.knn(1.0, f64::NAN, 3).is_err());
    // Bad options.
    let mut o = small_opts();
    o.cold_pages = 0;
    assert!(Gffm::create(mem(512), o).is_err());
    let mut o = small_opts();
    o.merge_threshold = 0.9;
    assert!(LbGrid::create(mem(512), o).is_err());
    // Opening with the wrong kind, the wrong page size or garbage.
    g.checkpoint().unwrap();
    let e = LbGrid::open(Arc::clone(&dev), small_opts()).unwrap_err();
    assert!(e.to_string().contains("kind"), "{e}");
    assert!(Gffm::open(mem(512), small_opts()).is_err());
    // A device too small.
    let tiny: Arc<dyn PageDevice> = Arc::new(MemDevice::new(512, 3).unwrap());
    assert!(matches!(
        Gffm::create(tiny, small_opts()),
        Err(Error::DeviceFull(_))
    ));
}

#[test]
fn corrupted_pages_are_errors_not_panics() {
    let dev = Arc::new(MemDevice::new(512, 4096).unwrap());
    let d: Arc<dyn PageDevice> = dev.clone();
    let mut g = LbGrid::create(Arc::clone(&d), small_opts()).unwrap();
    for (i, &(x, y)) in prefill(500, 3).iter().enumerate() {
        g.insert(x, y, i as u64).unwrap();
    }
    g.checkpoint().unwrap();
    let used = g.pages_in_use();
    drop(g);
    let mut page = vec![0u8; 512];
    let mut errors = 0;
    for p in 0..used + 2 {
        dev.read(p, &mut page).unwrap();
        let saved = page.clone();
        page[40] ^= 0x10;
        dev.write(p, &page).unwrap();
        if let Ok(mut g) = LbGrid::open(Arc::clone(&d), small_opts()) {
            // Damage the open does not read shows up as an error on use.
            if g.verify().is_err() {
                errors += 1;
            }
        } else {
            errors += 1;
        }
        dev.write(p, &saved).unwrap();
    }
    assert!(
        errors as u64 >= used / 2,
        "only {errors} of {used} damaged pages noticed"
    );
    let mut g = LbGrid::open(d, small_opts()).unwrap();
    assert_eq!(g.verify().unwrap(), 500);
}

#[test]
fn lbgrid_rebuilds_the_btt_at_open() {
    let dev = mem(512);
    let mut g = LbGrid::create(Arc::clone(&dev), small_opts()).unwrap();
    let pts = prefill(800, 11);
    for (i, &(x, y)) in pts.iter().enumerate() {
        g.insert(x, y, i as u64).unwrap();
    }
    for (i, &(x, y)) in pts.iter().enumerate().step_by(3) {
        g.delete(x, y, i as u64).unwrap();
    }
    // Same point, new id: refused (issue 44); after a delete, accepted.
    for (i, &(x, y)) in pts.iter().enumerate().skip(1).step_by(3).take(50) {
        let id = 99_999 + i as u64;
        assert!(g.insert(x, y, id).is_err());
        g.delete(x, y, i as u64).unwrap();
        g.insert(x, y, id).unwrap();
    }
    let before = sorted(g.range(&domain()).unwrap());
    let lists: Vec<(u64, usize)> = g.root().boxes().iter().map(|t| (t.0, 0)).collect();
    assert!(!lists.is_empty());
    let mean = g.layer().mean_list_len();
    g.checkpoint().unwrap();
    let mut h = LbGrid::open(Arc::clone(&dev), small_opts()).unwrap();
    assert_eq!(h.layer().buckets(), g.layer().buckets());
    assert!(h.layer().mean_list_len() <= mean + 1e-9);
    assert_eq!(sorted(h.range(&domain()).unwrap()), before);
    // The rebuilt sizes are exact: a point query for each gives the right id.
    for (i, &(x, y)) in pts.iter().enumerate().take(200) {
        let want = if i % 3 == 0 {
            None
        } else if i % 3 == 1 && i / 3 < 50 {
            Some(99_999 + i as u64)
        } else {
            Some(i as u64)
        };
        assert_eq!(h.get(x, y).unwrap(), want, "point {i}");
    }
    h.verify().unwrap();
}

/// Issue 44, item 3: a second object at a point LB-Grid holds is refused
/// with GFFM's error, whether the bucket is appended to blindly, full (read
/// and split) or reopened, and the first object stays.
#[test]
fn lbgrid_refuses_a_point_it_holds_as_gffm_does() {
    let dev = mem(512);
    let mut g = LbGrid::create(Arc::clone(&dev), small_opts()).unwrap();
    let mut h = Gffm::create(mem(512), small_opts()).unwrap();
    g.insert(10.1, 20.3, 1).unwrap();
    h.insert(10.1, 20.3, 1).unwrap();
    let e = g.insert(10.1, 20.3, 2).unwrap_err();
    let f = h.insert(10.1, 20.3, 2).unwrap_err();
    assert!(e.is_user_error(), "{e}");
    assert_eq!(e.to_string(), f.to_string());
    assert!(e.to_string().contains("already in the grid file"), "{e}");
    // -0.0 is 0.0.
    g.insert(0.0, 5.1, 3).unwrap();
    assert!(g.insert(-0.0, 5.1, 4).is_err());
    assert_eq!(g.get(10.1, 20.3).unwrap(), Some(1));
    // Full buckets (read, then split) and many buckets.
    let pts = prefill(3000, 17);
    for (i, &(x, y)) in pts.iter().enumerate() {
        g.insert(x, y, 100 + i as u64).unwrap();
    }
    for (i, &(x, y)) in pts.iter().enumerate().step_by(7) {
        assert!(g.insert(x, y, 9_999_999).is_err(), "point {i}");
    }
    assert_eq!(g.verify().unwrap(), 3002);
    // Reopened: the set of points comes back from the replay.
    g.checkpoint().unwrap();
    drop(g);
    let mut g = LbGrid::open(Arc::clone(&dev), small_opts()).unwrap();
    assert!(g.insert(10.1, 20.3, 5).is_err());
    for (i, &(x, y)) in pts.iter().enumerate().step_by(11) {
        assert!(g.insert(x, y, 9_999_999).is_err(), "point {i} after reopen");
        assert_eq!(g.get(x, y).unwrap(), Some(100 + i as u64));
    }
    // A deleted point is free again.
    g.delete(10.1, 20.3, 1).unwrap();
    g.insert(10.1, 20.3, 6).unwrap();
    assert_eq!(g.get(10.1, 20.3).unwrap(), Some(6));
    assert_eq!(g.verify().unwrap(), 3002);
}

#[test]
fn gffm_writes_leave_in_cold_list_batches() {
    let dev = mem(512);
    let opts = GridOptions {
        cold_pages: 8,
        ..small_opts()
    };
    let mut g = Gffm::create(Arc::clone(&dev), opts).unwrap();
    dev.reset_stats();
    let b0 = g.stats();
    for (i, &(x, y)) in prefill(2000, 5).iter().enumerate() {
        g.insert(x, y, i as u64).unwrap();
    }
    let s = dev.stats().io;
    let mut b = g.stats();
    b.dir_buffer.pages_written -= b0.dir_buffer.pages_written;
    b.bucket_buffer.pages_written -= b0.bucket_buffer.pages_written;
    b.dir_buffer.write_batches -= b0.dir_buffer.write_batches;
    b.bucket_buffer.write_batches -= b0.bucket_buffer.write_batches;
    // Every write of the run was a cold-list batch of one of the buffers,
    // nearly all of them full.
    assert_eq!(
        b.dir_buffer.pages_written + b.bucket_buffer.pages_written,
        s.pages_written
    );
    assert_eq!(
        b.dir_buffer.write_batches + b.bucket_buffer.write_batches,
        s.write_batches
    );
    assert!(s.pages_written * 10 >= s.write_batches * 8 * 9, "{s:?}");
}

#[test]
fn batched_queries_issue_fewer_reads_than_plain_ones() {
    for lb in [false, true] {
        let dev = mem(4096);
        let opts = GridOptions {
            dir_hot_pages: 8,
            bucket_hot_pages: 64,
            cold_pages: 16,
            ..GridOptions::new(domain())
        };
        let pts = prefill(20_000, 9);
        let r = Rect::new(10.0, 10.0, 60.0, 70.0).unwrap();
        let q: Vec<(f64, f64)> = pts.iter().step_by(97).copied().collect();
        let mut reads = Vec::new();
        macro_rules! measure {
            ($g:expr) => {{
                let mut g = $g;
                for (i, &(x, y)) in pts.iter().enumerate() {
                    g.insert(x, y, i as u64).unwrap();
                }
                g.checkpoint().unwrap();
                for batched in [false, true] {
                    let mut g2 = GridFile::open(Arc::clone(&dev), opts.clone()).unwrap();
                    g2 = std::mem::replace(&mut g, g2);
                    drop(g2);
                    dev.reset_stats();
                    let a = if batched {
                        g.range_batched(&r).unwrap()
                    } else {
                        g.range(&r).unwrap()
                    };
                    let k = if batched {
                        g.knn_prefetch(30.0, 30.0, 500).unwrap()
                    } else {
                        g.knn(30.0, 30.0, 500).unwrap()
                    };
                    let gp = if batched {
                        g.group_get(&q).unwrap()
                    } else {
                        g.group_get_plain(&q).unwrap()
                    };
                    assert!(!a.is_empty() && k.len() == 500 && gp.iter().all(Option::is_some));
                    reads.push(dev.stats().io.read_batches);
                }
            }};
        }
        if lb {
            measure!(LbGrid::create(Arc::clone(&dev), opts.clone()).unwrap());
        } else {
            measure!(Gffm::create(Arc::clone(&dev), opts.clone()).unwrap());
        }
        assert!(
            reads[1] * 3 < reads[0],
            "lb={lb}: read batches plain {} vs batched {}",
            reads[0],
            reads[1]
        );
    }
}

#[test]
fn next_fit_groups_in_order_within_the_budget() {
    let g = next_fit(&[1usize, 2, 3, 1, 5, 1], |n| n, 4);
    assert_eq!(g, vec![vec![1, 2], vec![3, 1], vec![5], vec![1]]);
    assert!(next_fit(&[] as &[usize], |n| n, 4).is_empty());
}

/// H-Grid on a hybrid of two file tiers whose placement map is a file
/// too: after the grid file and the device are closed and reopened (as
/// another process would), every page is on the tier it was on, the hot
/// corner is still read from the fast tier, and every point is found.
#[test]
fn hgrid_keeps_its_placement_across_processes() {
    use crate::storage::file::{FileDevice, FileDeviceOptions};
    use crate::storage::hybrid::{HybridDevice, MapOpen};
    use crate::storage::tier_map::TierMapStore;
    use crate::storage::Tier;
    let tmp = tempfile::tempdir().unwrap();
    let file = |name: &str, page: usize, pages: u64| -> Arc<dyn PageDevice> {
        let opts = FileDeviceOptions {
            direct: false,
            capacity_pages: pages,
            ..FileDeviceOptions::default()
        };
        Arc::new(FileDevice::open(&tmp.path().join(name), page, opts).unwrap())
    };
    let open = |how: MapOpen| {
        let map = file(
            "tiers.map",
            4096,
            2 * TierMapStore::region_pages(4096, 4096),
        );
        Arc::new(
            HybridDevice::new(file("fast.dat", 512, 4096), file("slow.dat", 512, 1 << 16))
                .unwrap()
                .with_map(map, how)
                .unwrap(),
        )
    };
    let opts = GridOptions {
        hybrid: Some(hot::HybridOptions {
            s: 1.0,
            special: false,
        }),
        ..small_opts()
    };
    let pts = prefill(3000, 5);
    let hot = hot_corner(&pts);
    let dev = open(MapOpen::Create);
    let mut g = Gffm::create(dev.clone(), opts.clone()).unwrap();
    for (i, &(x, y)) in pts.iter().enumerate() {
        g.insert(x, y, i as u64).unwrap();
    }
    for _ in 0..20 {
        for &(x, y) in &hot {
            assert!(g.get(x, y).unwrap().is_some());
        }
    }
    g.checkpoint().unwrap();
    let before = dev.fast_page_ids();
    let sd = g.root().lookup(1.0, 1.0).unwrap();
    assert_eq!(dev.tier_of(sd), Tier::Fast);
    assert!(!before.is_empty());
    drop(g);
    drop(dev);

    let dev = open(MapOpen::Open);
    assert_eq!(dev.fast_page_ids(), before);
    let mut g = Gffm::open(dev.clone(), opts).unwrap();
    dev.reset_stats();
    for &(x, y) in &hot {
        assert!(g.get(x, y).unwrap().is_some());
    }
    let t = dev.tiers().unwrap();
    assert!(t.fast.io.pages_read > 0, "{t:?}");
    for (i, &(x, y)) in pts.iter().enumerate() {
        assert_eq!(g.get(x, y).unwrap(), Some(i as u64));
    }
}

/// Issue 47, item 5: the id set of dense ids takes bits, not a hash set's
/// 9 to 18 bytes an id, whether kept by the insertions or rebuilt after an
/// open (GFFM from a pass over its buckets, LB-Grid from the scan of its
/// log-buckets at open), and it still refuses an id held.
#[test]
fn the_id_set_of_dense_ids_is_small() {
    const N: u64 = 200_000;
    let at = |i: u64| ((i % 500) as f64 * 0.2, (i / 500) as f64 * 0.2);
    for kind in 0..2 {
        let dev = Arc::new(MemDevice::new(4096, 1 << 16).unwrap()) as Arc<dyn PageDevice>;
        let opts = GridOptions::new(domain());
        macro_rules! body {
            ($create:expr, $open:expr) => {{
                let mut g = $create;
                for i in 0..N {
                    let (x, y) = at(i);
                    g.insert(x, y, i).unwrap();
                }
                let small = |b: Option<usize>| b.is_some_and(|b| b < (N / 4) as usize);
                assert!(
                    small(g.id_set_heap_bytes()),
                    "kind {kind}: {:?}",
                    g.id_set_heap_bytes()
                );
                g.checkpoint().unwrap();
                drop(g);
                let mut g = $open;
                // LB-Grid takes the ids of its scan of the log-buckets at
                // open (no delete record: every bucket is known).
                assert_eq!(g.id_set_heap_bytes().is_some(), kind == 1, "kind {kind}");
                let e = g.insert(99.9, 99.9, N / 2).unwrap_err();
                assert!(e.to_string().contains("is already"), "kind {kind}: {e}");
                assert!(
                    small(g.id_set_heap_bytes()),
                    "kind {kind}: {:?}",
                    g.id_set_heap_bytes()
                );
                g.insert(99.9, 99.9, N).unwrap();
                assert_eq!(g.count().unwrap(), N + 1, "kind {kind}");
            }};
        }
        if kind == 0 {
            body!(
                Gffm::create(Arc::clone(&dev), opts.clone()).unwrap(),
                Gffm::open(Arc::clone(&dev), opts.clone()).unwrap()
            );
        } else {
            body!(
                LbGrid::create(Arc::clone(&dev), opts.clone()).unwrap(),
                LbGrid::open(Arc::clone(&dev), opts.clone()).unwrap()
            );
        }
    }
}

/// Issue 47, item 5: LB-Grid keeps a 32-bit fingerprint of each point it
/// holds (it kept a map of every point to its id, about 100 bytes a
/// point), built and reopened alike; a fresh point is still appended
/// without reading (Algorithm 2), a point held is refused, and after an
/// open the fingerprints come back from the scan of the log-buckets.
#[test]
fn lbgrid_keeps_a_fingerprint_a_point() {
    const N: u64 = 100_000;
    let at = |i: u64| ((i % 400) as f64 * 0.25, (i / 400) as f64 * 0.25);
    let dev = Arc::new(MemDevice::new(4096, 1 << 16).unwrap()) as Arc<dyn PageDevice>;
    let opts = GridOptions::new(domain());
    let mut g = LbGrid::create(Arc::clone(&dev), opts.clone()).unwrap();
    for i in 0..N {
        let (x, y) = at(i);
        g.insert(x, y, i).unwrap();
    }
    let per_point = |g: &LbGrid| g.layer().held_bytes() as f64 / N as f64;
    assert!(per_point(&g) <= 8.0, "{} bytes a point", per_point(&g));
    // A fresh point in a bucket with room reads nothing.
    dev.reset_stats();
    g.insert(0.1, 0.1, N).unwrap();
    assert_eq!(dev.stats().io.pages_read, 0);
    g.delete(0.1, 0.1, N).unwrap();
    g.checkpoint().unwrap();
    drop(g);
    let mut g = LbGrid::open(Arc::clone(&dev), opts).unwrap();
    assert!(per_point(&g) <= 4.5, "{} bytes a point", per_point(&g));
    // Only the bucket with a delete record is not known.
    assert!(g.layer().unknown_buckets() <= 1);
    let e = g.insert(0.25, 0.0, N + 1).unwrap_err();
    assert!(e.to_string().contains("already"), "{e}");
    let e = g.insert(0.25, 0.0, 1).unwrap_err();
    assert!(e.to_string().contains("already"), "{e}");
    assert_eq!(g.layer().unknown_buckets(), 0);
    assert_eq!(g.count().unwrap(), N);
    assert_eq!(g.delete(0.25, 0.0, 2).unwrap(), DeleteOutcome::NotFound);
    assert_eq!(g.delete(0.25, 0.0, 1).unwrap(), DeleteOutcome::Logged);
    assert_eq!(g.get(0.25, 0.0).unwrap(), None);
    assert_eq!(g.verify().unwrap(), N - 1);
}

/// Two points of one bucket sharing a fingerprint are told apart by
/// reading the bucket: both are stored, each refused again, and a delete
/// under the other's id finds nothing.
#[test]
fn lbgrid_tells_apart_points_that_share_a_fingerprint() {
    let mut seen = std::collections::HashMap::new();
    let pair = (0..1u64 << 22)
        .map(|i| (1.0 + i as f64 * 1e-6, 2.0))
        .find_map(|(x, y)| {
            seen.insert(lbgrid::fingerprint(x, y), x)
                .map(|x0| ((x0, y), (x, y)))
        })
        .expect("a shared fingerprint");
    let ((x1, y1), (x2, y2)) = pair;
    assert_ne!(x1, x2);
    drop(seen);
    let dev = mem(4096);
    let mut g = LbGrid::create(Arc::clone(&dev), GridOptions::new(domain())).unwrap();
    g.insert(x1, y1, 1).unwrap();
    g.insert(x2, y2, 2).unwrap();
    assert!(g.insert(x1, y1, 3).is_err());
    assert!(g.insert(x2, y2, 3).is_err());
    assert_eq!(g.delete(x1, y1, 2).unwrap(), DeleteOutcome::NotFound);
    assert_eq!(g.get(x2, y2).unwrap(), Some(2));
    assert_eq!(g.delete(x2, y2, 2).unwrap(), DeleteOutcome::Logged);
    assert_eq!(g.get(x1, y1).unwrap(), Some(1));
    assert_eq!(g.get(x2, y2).unwrap(), None);
    g.insert(x2, y2, 4).unwrap();
    g.checkpoint().unwrap();
    drop(g);
    let mut g = LbGrid::open(dev, GridOptions::new(domain())).unwrap();
    assert!(g.insert(x2, y2, 5).is_err());
    assert_eq!(g.get(x1, y1).unwrap(), Some(1));
    assert_eq!(g.get(x2, y2).unwrap(), Some(4));
    assert_eq!(g.verify().unwrap(), 2);
}
