//! Review tests of hybrid placement (the sHR-tree of Fevgas' thesis,
//! §4.4.2: every internal node on the fast 3D XPoint tier, the leaves on
//! flash) on the plain store over [`HybridDevice`]s of every kind of tier:
//! two memory tiers, two files in a temporary directory, a simulator in
//! front of a file, two simulators; fast tiers of a few pages and larger
//! ones.
//!
//! - Store level: the shared review driver
//!   (`index::hilbert_review_tests::drive`: random insertions, deletions,
//!   updates, every range predicate, point groups and kNN against a
//!   brute-force oracle) on R-trees and R*-trees, with checkpoints and
//!   reopens that build a new hybrid over the same tiers and load the
//!   placement map it saved (files: new file handles, as another process
//!   would). After every operation: the tree's check; the fast tier never
//!   holds more than its limit; every page is read from one tier (the
//!   hybrid's host counters equal the sum of the tiers'); and, where every
//!   node is on the device (no buffer, or right after a checkpoint),
//!   every reachable node is on the tier its level maps to, a node meant
//!   for the fast tier being on the slow one only if the fast tier was
//!   full (counted as a fallback).
//! - Index directory: random operations on hybrid index directories
//!   (two files, a simulator and a file, two simulators), queries of every
//!   predicate and kNN against the oracle, close and reopen (the placement
//!   map `tiers.map`: every node on the tier it was on, the same answers),
//!   and drops without a close (a crash for the files) that must reopen at
//!   the last checkpoint exactly.
//!
//! Cases: `GEOFLASH_PROPTEST_CASES` (default 64) seeds per test.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{StoreSpec, StructureSpec, TreeSpec};
use crate::geom::{Point, Rect};
use crate::index::hilbert_review_tests::{drive, review_cases, Drive, Tally, SHAPES};
use crate::index::query::Predicate;
use crate::index::{IndexKind, RTree, SplitKind, TreeParams};
use crate::index_dir::{Index, IndexOptions};
use crate::manifest::Access;
use crate::spatial::SpatialIndex;
use crate::storage::file::{FileDevice, FileDeviceOptions};
use crate::storage::flashsim::FlashSim;
use crate::storage::hybrid::{HybridDevice, MapOpen};
use crate::storage::mem::MemDevice;
use crate::storage::tier_map::TierMapStore;
use crate::storage::{DeviceExt, PageDevice, PageId, Tier};
use crate::store::placement::Placement;
use crate::store::{NodeStore, PlainConfig, PlainStore};
use crate::Result;

const PAGE: usize = 512;
/// Pages of the slow tier (and of the memory and file fast tiers' room).
const SLOW_PAGES: u64 = 8192;
const MAP_PAGE: usize = 1024;

/// The kinds of tiers a case runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TierKind {
    /// Two memory tiers, the map in the hybrid's process (reopen: the same hybrid).
    Mem,
    /// Two files and a map file (reopen: new handles, the map loaded).
    Files,
    /// A simulated fast tier in front of a file (the map on a memory device).
    SimFile,
    /// Two simulators (the map on a memory device).
    Sims,
}

/// A tier or map device a case keeps across reopens (`None`: made at each open).
type Dev = Option<Arc<dyn PageDevice>>;

/// The tiers of a case, kept across reopens.
struct Tiers {
    kind: TierKind,
    limit: u64,
    dir: tempfile::TempDir,
    fast: Option<Arc<dyn PageDevice>>,
    slow: Option<Arc<dyn PageDevice>>,
    map: Option<Arc<dyn PageDevice>>,
    /// The hybrid of a `Mem` case (its map lives in it).
    mem: Option<Arc<HybridDevice>>,
}

fn file(path: &Path, pages: u64, page_size: usize) -> Arc<dyn PageDevice> {
    let opts = FileDeviceOptions {
        direct: false,
        capacity_pages: pages,
        ..FileDeviceOptions::default()
    };
    Arc::new(FileDevice::open(path, page_size, opts).unwrap())
}

fn sim(params: &str) -> Arc<dyn PageDevice> {
    Arc::new(FlashSim::from_params(params, PAGE).unwrap())
}

/// A simulated fast tier of about 300 pages of 512 bytes.
const FAST_SIM: &str = "page_size=512&ppb=8&blocks=48&op=0.25";
/// A simulated slow tier of about 12,000 pages of 512 bytes.
const SLOW_SIM: &str = "page_size=512&ppb=32&blocks=512&op=0.25";

impl Tiers {
    fn new(kind: TierKind, limit: u64) -> Tiers {
        let dir = tempfile::tempdir().unwrap();
        let map_pages = 2 * TierMapStore::region_pages(limit, MAP_PAGE);
        let (fast, slow, map): (Dev, Dev, Dev) = match kind {
            TierKind::Mem => (None, None, None),
            TierKind::Files => (None, None, None),
            TierKind::SimFile => (
                Some(sim(FAST_SIM)),
                Some(file(&dir.path().join("slow"), SLOW_PAGES, PAGE)),
                Some(Arc::new(MemDevice::new(MAP_PAGE, map_pages).unwrap())),
            ),
            TierKind::Sims => (
                Some(sim(FAST_SIM)),
                Some(sim(SLOW_SIM)),
                Some(Arc::new(MemDevice::new(MAP_PAGE, map_pages).unwrap())),
            ),
        };
        let mem = (kind == TierKind::Mem).then(|| {
            let f = Arc::new(MemDevice::new(PAGE, 1024).unwrap());
            let s = Arc::new(MemDevice::new(PAGE, SLOW_PAGES).unwrap());
            Arc::new(HybridDevice::new(f, s).unwrap().with_fast_pages(limit))
        });
        Tiers {
            kind,
            limit,
            dir,
            fast,
            slow,
            map,
            mem,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A hybrid over the tiers: new (`Create`) or as saved (`Open`).
    fn hybrid(&self, how: MapOpen) -> Arc<HybridDevice> {
        if let Some(h) = &self.mem {
            return Arc::clone(h);
        }
        let (fast, slow, map) = match self.kind {
            TierKind::Files => (
                file(&self.path("fast"), 1024, PAGE),
                file(&self.path("slow"), SLOW_PAGES, PAGE),
                file(
                    &self.path("tiers.map"),
                    2 * TierMapStore::region_pages(self.limit, MAP_PAGE),
                    MAP_PAGE,
                ),
            ),
            _ => (
                self.fast.clone().unwrap(),
                self.slow.clone().unwrap(),
                self.map.clone().unwrap(),
            ),
        };
        let h = HybridDevice::new(fast, slow)
            .unwrap()
            .with_fast_pages(self.limit)
            .with_map(map, how)
            .unwrap();
        h.reset_stats();
        Arc::new(h)
    }
}

/// Every node reachable from the root of `t`, with its level.
fn nodes_of(t: &RTree<PlainStore>) -> Vec<(PageId, u16)> {
    let store = t.store();
    let mut out = Vec::new();
    let mut stack: Vec<PageId> = store.meta().root.into_iter().collect();
    while let Some(p) = stack.pop() {
        let n = store.get(p).unwrap();
        if n.level > 0 {
            stack.extend(n.entries.iter().map(|e| e.key));
        }
        out.push((p, n.level));
    }
    out
}

/// What the placement checks saw, over the cases.
#[derive(Debug, Default)]
struct Seen {
    placed_checks: u64,
    fast_nodes: u64,
    fallbacks: u64,
    /// Fast slots held by pages no node uses while a node meant for the
    /// fast tier was on the slow one.
    dead_fast_while_falling_back: u64,
    /// Checks that found a node meant for the fast tier on the slow one
    /// while the fast tier had room (it moves at its next write).
    room_while_falling_back: u64,
    reopens: u64,
}

/// The hybrid's invariants: the fast tier within its limit, every host
/// read and write served by one tier, and (`placed`: every node is on the
/// device) each reachable node on the tier its level maps to, a node
/// meant for the fast tier being on the slow one only after a fallback
/// (counted by this hybrid, or by one before the last reopen: `reopened`,
/// the counter is the process's).
fn check_hybrid(
    h: &HybridDevice,
    t: &RTree<PlainStore>,
    (placement, placed, reopened): (Placement, bool, bool),
    seen: &mut Seen,
    at: &str,
) {
    let rep = h.tiers().unwrap();
    assert!(rep.fast_pages <= rep.fast_limit, "{at}: {rep:?}");
    assert_eq!(rep.fast_pages, h.fast_page_ids().len() as u64, "{at}");
    let host = h.stats().io;
    assert_eq!(
        host.pages_written,
        rep.fast.io.pages_written + rep.slow.io.pages_written,
        "{at}: pages written by the hybrid and by its tiers"
    );
    assert_eq!(
        host.pages_read,
        rep.fast.io.pages_read + rep.slow.io.pages_read,
        "{at}: pages read by the hybrid and by its tiers"
    );
    if !placed {
        return;
    }
    seen.placed_checks += 1;
    let nodes = nodes_of(t);
    let mut fell_back = 0u64;
    for &(p, level) in &nodes {
        let want = placement.tier(level).unwrap_or(Tier::Slow);
        let got = h.tier_of(p);
        match (want, got) {
            (a, b) if a == b => {}
            (Tier::Fast, Tier::Slow) => {
                assert!(
                    rep.fallbacks > 0 || reopened,
                    "{at}: page {p} (level {level}) is on the slow tier with no fallback counted ({rep:?})"
                );
                fell_back += 1;
            }
            _ => panic!("{at}: page {p} (level {level}) is on the {got:?} tier, not {want:?}"),
        }
    }
    let fast_nodes = nodes
        .iter()
        .filter(|n| h.tier_of(n.0) == Tier::Fast)
        .count() as u64;
    seen.fast_nodes += fast_nodes;
    seen.fallbacks += fell_back;
    if fell_back > 0 {
        if rep.fast_pages < rep.fast_limit {
            seen.room_while_falling_back += 1;
        }
        // Pages on the fast tier that no reachable node uses.
        seen.dead_fast_while_falling_back += rep.fast_pages - fast_nodes;
    }
}

/// One store-level case: seed `seed`, on tiers of `kind`.
fn store_case(seed: u64, kind: TierKind, seen: &mut Seen) -> Tally {
    let shape = SHAPES[(seed % SHAPES.len() as u64) as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7348_5274);
    let limit = if rng.gen_bool(0.5) {
        rng.gen_range(1..6)
    } else {
        rng.gen_range(40..300)
    };
    let tree = if rng.gen_bool(0.5) {
        IndexKind::RTree
    } else {
        IndexKind::RStar
    };
    let max = rng.gen_range(3..9usize);
    let mut params = TreeParams {
        min_entries: rng.gen_range(2..=max.div_ceil(2).max(2)),
        ..TreeParams::new(tree, max)
    };
    if tree == IndexKind::RTree && rng.gen_bool(0.5) {
        params.split = SplitKind::Linear;
    }
    let placement = match rng.gen_range(0..4) {
        0 => Placement::FastFromLevel(0),
        1 => Placement::FastFromLevel(2),
        _ => Placement::SHR_TREE,
    };
    let buffer = [0, 0, 3 * PAGE, 64 * PAGE][rng.gen_range(0..4)];
    let cfg = PlainConfig {
        buffer_bytes: buffer,
        with_payload: true,
        ..PlainConfig::default()
    };
    let ops = rng.gen_range(120..260);
    let insert_share = rng.gen_range(30..41);
    let tiers = Tiers::new(kind, limit);
    let what = format!(
        "seed {seed} {kind:?} {tree:?} M={max} fast_pages={limit} {placement} buffer={buffer}"
    );
    let current = Mutex::new(tiers.hybrid(MapOpen::Create));
    let dev: Arc<dyn PageDevice> = current.lock().unwrap().clone();
    let store = PlainStore::create(dev, cfg)
        .unwrap()
        .with_placement(placement);
    let idx: Box<dyn SpatialIndex> = Box::new(RTree::create(store, params).unwrap());
    let seen_cell = Mutex::new(std::mem::take(seen));
    let reopened = std::cell::Cell::new(false);
    let verify = |idx: &dyn SpatialIndex| -> Result<u64> {
        let t = idx.as_any().downcast_ref::<RTree<PlainStore>>().unwrap();
        let records = t.check()?.records;
        let h = current.lock().unwrap().clone();
        let mut s = seen_cell.lock().unwrap();
        let how = (placement, buffer == 0, reopened.get());
        check_hybrid(&h, t, how, &mut s, &what);
        Ok(records)
    };
    let mut reopen = |mut idx: Box<dyn SpatialIndex>| -> Box<dyn SpatialIndex> {
        idx.checkpoint().unwrap();
        let (before, nodes) = {
            let t = idx.as_any().downcast_ref::<RTree<PlainStore>>().unwrap();
            let h = current.lock().unwrap().clone();
            let mut s = seen_cell.lock().unwrap();
            let how = (placement, true, reopened.get());
            check_hybrid(&h, t, how, &mut s, &format!("{what}: checkpointed"));
            s.reopens += 1;
            let nodes: Vec<(PageId, Tier)> = nodes_of(t)
                .into_iter()
                .map(|(p, _)| (p, h.tier_of(p)))
                .collect();
            (t.check().unwrap(), nodes)
        };
        drop(idx);
        let h = tiers.hybrid(MapOpen::Open);
        reopened.set(kind != TierKind::Mem);
        *current.lock().unwrap() = h.clone();
        for &(p, tier) in &nodes {
            assert_eq!(h.tier_of(p), tier, "{what}: page {p} after the reopen");
        }
        let dev: Arc<dyn PageDevice> = h;
        let store = PlainStore::open(dev, cfg)
            .unwrap()
            .with_placement(placement);
        let t = RTree::open(store, params).unwrap();
        assert_eq!(t.check().unwrap(), before, "{what}: check after the reopen");
        Box::new(t)
    };
    let d = Drive {
        seed,
        shape,
        ops,
        insert_share,
        distinct_low_bits: false,
        verify: &verify,
        reopen: Some(&mut reopen),
    };
    let (idx, tally) = drive(idx, d);
    drop(idx);
    *seen = seen_cell.into_inner().unwrap();
    tally
}

fn store_level(kinds: &[TierKind]) {
    let mut seen = Seen::default();
    let mut tally = Tally::default();
    for seed in 0..review_cases() {
        let kind = kinds[(seed % kinds.len() as u64) as usize];
        let t = store_case(seed, kind, &mut seen);
        tally.ops += t.ops;
        tally.reopens += t.reopens;
        tally.peak_records = tally.peak_records.max(t.peak_records);
    }
    eprintln!(
        "hybrid placement review ({kinds:?}): {} cases, {tally:?}, {seen:?}",
        review_cases()
    );
    // The cases reached what they test: reopens, nodes on the fast tier,
    // and (tiny fast tiers) nodes that fell back.
    assert!(tally.reopens > 0 && seen.placed_checks > 0, "{seen:?}");
    assert!(seen.fast_nodes > 0 && seen.fallbacks > 0, "{seen:?}");
}

/// Memory tiers and two files (the map in a file, reloaded at reopens).
#[test]
fn shr_on_memory_and_file_tiers_agrees_with_the_oracle_and_places_by_level() {
    store_level(&[TierKind::Mem, TierKind::Files]);
}

/// A simulated fast tier before a file, and two simulators.
#[test]
fn shr_on_simulated_tiers_agrees_with_the_oracle_and_places_by_level() {
    store_level(&[TierKind::SimFile, TierKind::Sims]);
}

// ---------------------------------------------------------------------
// Index directories.
// ---------------------------------------------------------------------

/// The brute-force answer of `pred` for window `w`, by id.
fn oracle_query(o: &BTreeMap<u64, Rect>, w: &Rect, pred: Predicate) -> Vec<u64> {
    o.iter()
        .filter(|(_, x)| crate::index::hilbert_review_tests::selected(pred, w, x))
        .map(|(id, _)| *id)
        .collect()
}

/// The `k` nearest `(distance, id)`, ties by id.
fn oracle_knn(o: &BTreeMap<u64, Rect>, p: &Point, k: usize) -> Vec<(f64, u64)> {
    let gap = |v: f64, lo: f64, hi: f64| (lo - v).max(v - hi).max(0.0);
    let mut d: Vec<(f64, u64)> = o
        .iter()
        .map(|(id, x)| {
            let (dx, dy) = (
                gap(p.x, x.min_x(), x.max_x()),
                gap(p.y, x.min_y(), x.max_y()),
            );
            ((dx * dx + dy * dy).sqrt(), *id)
        })
        .collect();
    d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    d.truncate(k);
    d
}

/// Every predicate on a few windows and kNN at a few points, against the oracle.
fn compare(index: &Index, o: &BTreeMap<u64, Rect>, rng: &mut ChaCha8Rng, at: &str) {
    for _ in 0..3 {
        let (x, y, s) = (
            rng.gen_range(-5.0..100.0),
            rng.gen_range(-5.0..100.0),
            rng.gen_range(0.0..40.0),
        );
        let w = Rect::new(x, y, x + s, y + s).unwrap();
        for pred in Predicate::ALL {
            let mut got: Vec<u64> = index
                .query(w, pred)
                .unwrap()
                .hits
                .iter()
                .map(|h| h.id)
                .collect();
            got.sort_unstable();
            assert_eq!(got, oracle_query(o, &w, pred), "{at}: {pred:?} {w:?}");
        }
        let p = Point::new(rng.gen_range(0.0..100.0), rng.gen_range(0.0..100.0)).unwrap();
        let k = rng.gen_range(1..12);
        let got: Vec<(f64, u64)> = index
            .structure()
            .nearest(p, k, false)
            .unwrap()
            .neighbors
            .iter()
            .map(|n| (n.distance, n.id))
            .collect();
        assert_eq!(got, oracle_knn(o, &p, k), "{at}: kNN {p:?} k={k}");
    }
    let all = Rect::new(-1e3, -1e3, 1e3, 1e3).unwrap();
    assert_eq!(index.len(), o.len() as u64, "{at}: len");
    assert_eq!(
        index.query(all, Predicate::Intersects).unwrap().hits.len(),
        o.len(),
        "{at}: everything"
    );
}

/// Every node reachable from the index's root, with its tier.
fn index_nodes(index: &Index) -> Vec<(PageId, u16, Option<Tier>)> {
    let store = index.tree().unwrap().store();
    let mut out = Vec::new();
    let mut stack: Vec<PageId> = store.meta().root.into_iter().collect();
    while let Some(p) = stack.pop() {
        let n = store.get(p).unwrap();
        if n.level > 0 {
            stack.extend(n.entries.iter().map(|e| e.key));
        }
        out.push((p, n.level, index.device().page_tier(p)));
    }
    out.sort_unstable_by_key(|n| n.0);
    out
}

/// After a checkpoint: the fast tier within its limit, every node on its
/// level's tier unless it fell back (counted, or before a reopen:
/// `reopened`), the tree sound.
fn check_index(index: &Index, placement: Placement, reopened: bool, at: &str) {
    index.tree().unwrap().check().unwrap();
    let rep = index.device().tiers().unwrap();
    assert!(rep.fast_pages <= rep.fast_limit, "{at}: {rep:?}");
    for (p, level, tier) in index_nodes(index) {
        let want = placement.tier(level).unwrap_or(Tier::Slow);
        let ok = tier == Some(want)
            || (want == Tier::Fast && tier == Some(Tier::Slow) && (rep.fallbacks > 0 || reopened));
        assert!(ok, "{at}: page {p} at level {level} on {tier:?} ({rep:?})");
    }
}

/// One index-directory case on `device` (a `hybrid:` spec with
/// `&fast_pages=` left to add).
fn dir_case(seed: u64, device: &str) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6469_7268);
    let limit: u64 = if rng.gen_bool(0.5) {
        rng.gen_range(1..5)
    } else {
        rng.gen_range(30..200)
    };
    let tree = if rng.gen_bool(0.5) {
        IndexKind::RTree
    } else {
        IndexKind::RStar
    };
    let placement = if rng.gen_bool(0.75) {
        Placement::SHR_TREE
    } else {
        Placement::FastFromLevel(0)
    };
    let buffer = [0, 4 * 1024, 64 * 1024][rng.gen_range(0..3)];
    let spec = format!("{device}&fast_pages={limit}");
    let at = format!("seed {seed} {spec} {tree:?} {placement} buffer={buffer}");
    let opts = IndexOptions {
        page_size: 1024,
        structure: StructureSpec::Tree(TreeSpec {
            max_entries: Some(rng.gen_range(4..10)),
            ..TreeSpec::new(tree)
        }),
        store: StoreSpec::plain(buffer).with_placement(placement),
        device: spec.parse().unwrap(),
        ..IndexOptions::default()
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let mut index = Index::create(&dir, &opts).unwrap();
    let mut o: BTreeMap<u64, Rect> = BTreeMap::new();
    let mut durable = o.clone();
    let mut next = 0u64;
    let mut reopened = false;
    for step in 0..rng.gen_range(80..160) {
        let at = format!("{at} step {step}");
        match rng.gen_range(0..100) {
            0..=49 => {
                let (x, y) = (rng.gen_range(0.0..95.0), rng.gen_range(0.0..95.0));
                let r = Rect::new(
                    x,
                    y,
                    x + rng.gen_range(0.0..4.0),
                    y + rng.gen_range(0.0..4.0),
                )
                .unwrap();
                index.insert(next, r).unwrap();
                o.insert(next, r);
                next += 1;
            }
            50..=69 if !o.is_empty() => {
                let i = rng.gen_range(0..o.len());
                let (id, r) = o.iter().nth(i).map(|(a, b)| (*a, *b)).unwrap();
                if rng.gen_bool(0.5) {
                    index.delete(id, r).unwrap();
                    o.remove(&id);
                } else {
                    let (x, y) = (rng.gen_range(0.0..95.0), rng.gen_range(0.0..95.0));
                    let new = Rect::new(x, y, x + 1.0, y + 1.0).unwrap();
                    index.update(id, r, new).unwrap();
                    o.insert(id, new);
                }
            }
            70..=84 => compare(&index, &o, &mut rng, &at),
            85..=91 => {
                index.checkpoint().unwrap();
                durable = o.clone();
                check_index(&index, placement, reopened, &at);
            }
            92..=96 => {
                // Close and reopen: every node where it was, the same answers.
                index.checkpoint().unwrap();
                durable = o.clone();
                check_index(&index, placement, reopened, &at);
                let before = index_nodes(&index);
                let fast = index.device().tiers().unwrap().fast_pages;
                index.close().unwrap();
                let ro = Index::open(&dir, Access::Read).unwrap();
                assert_eq!(index_nodes(&ro), before, "{at}: read-only reopen");
                compare(&ro, &o, &mut rng, &format!("{at} (read-only)"));
                drop(ro);
                index = Index::open(&dir, Access::Write).unwrap();
                reopened = true;
                assert_eq!(index_nodes(&index), before, "{at}: reopen");
                assert_eq!(index.device().tiers().unwrap().fast_pages, fast, "{at}");
                check_index(&index, placement, reopened, &at);
            }
            _ => {
                // A crash: dropped without a close, reopened at the last checkpoint.
                drop(index);
                index = Index::open(&dir, Access::Write)
                    .unwrap_or_else(|e| panic!("{at}: reopening after a crash: {e}"));
                reopened = true;
                o = durable.clone();
                index.tree().unwrap().check().unwrap();
                compare(&index, &o, &mut rng, &format!("{at} (after a crash)"));
                next += 1000;
            }
        }
    }
    index.checkpoint().unwrap();
    check_index(&index, placement, reopened, &at);
    compare(&index, &o, &mut rng, &format!("{at} end"));
    index.close().unwrap();
}

/// Random operations on hybrid index directories of two files, a
/// simulator and a file, and two simulators: answers as the oracle,
/// placement by level, kept by close and reopen, and a drop without a
/// close reopens at the last checkpoint.
#[test]
fn shr_index_directories_agree_with_the_oracle_across_reopens_and_crashes() {
    let devices = [
        "hybrid:fast=(file?direct=false&capacity=1MiB);slow=(file?direct=false&capacity=16MiB)",
        "hybrid:fast=(flashsim:preset=xpoint);slow=(file?direct=false&capacity=16MiB)",
        "hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700)",
    ];
    let cases = review_cases().div_ceil(8).max(3);
    for seed in 0..cases {
        dir_case(seed, devices[(seed % 3) as usize]);
    }
}
