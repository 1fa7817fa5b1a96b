//! Bulk loads at their boundaries against a brute-force oracle: the four
//! loaders (STR and Hilbert packing, in memory and with bounded memory) on
//! every tree kind, for input sizes at a node's capacity and at the
//! external sort's run length, on inputs of duplicate rectangles, points on
//! a line, coordinates at the limits of the valid range and ids anywhere in
//! `u64`; the trees pass their checks, answer every window like a scan,
//! and stay updatable (a Hilbert R-tree also with records outside its
//! domain).
use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;

use crate::geom::{HilbertDomain, Rect, MAX_COORD};
use crate::index::external::{ExternalBulkConfig, MIN_MEMORY_BUDGET, RUN_RECORD_COST};
use crate::index::{BulkMethod, IndexKind, Predicate, RTree, SplitKind, TreeParams};
use crate::store::mem::MemStore;

/// The bulk loaders.
#[derive(Debug, Clone, Copy)]
enum Loader {
    Str,
    Hilbert,
    ExternalHilbert,
    ExternalStr,
}

const LOADERS: [Loader; 4] = [
    Loader::Str,
    Loader::Hilbert,
    Loader::ExternalHilbert,
    Loader::ExternalStr,
];

/// Records a run of the external Hilbert load holds at the smallest
/// budget, and those of a sort of the external STR load (half of it).
fn run_lengths() -> (usize, usize) {
    (
        MIN_MEMORY_BUDGET / RUN_RECORD_COST,
        MIN_MEMORY_BUDGET / 2 / RUN_RECORD_COST,
    )
}

fn load(
    loader: Loader,
    p: TreeParams,
    data: &[(u64, Rect)],
    fill: f64,
    dir: &Path,
) -> crate::Result<RTree<MemStore>> {
    let config = ExternalBulkConfig {
        memory_budget: MIN_MEMORY_BUDGET,
        temp_dir: dir.to_path_buf(),
    };
    match loader {
        Loader::Str => RTree::bulk_load(MemStore::new(), p, data.to_vec(), BulkMethod::Str, fill),
        Loader::Hilbert => {
            RTree::bulk_load(MemStore::new(), p, data.to_vec(), BulkMethod::Hilbert, fill)
        }
        Loader::ExternalHilbert | Loader::ExternalStr => {
            let method = match loader {
                Loader::ExternalStr => BulkMethod::Str,
                _ => BulkMethod::Hilbert,
            };
            RTree::bulk_load_external(
                MemStore::new(),
                p,
                data.iter().copied(),
                method,
                fill,
                &config,
            )
            .map(|(t, _)| t)
        }
    }
}

fn r(x0: f64, y0: f64, x1: f64, y1: f64) -> Rect {
    Rect::new(x0, y0, x1, y1).unwrap()
}

/// `n` records of shape `class`, from `seed`:
/// 0. small boxes in [0, 100]²;
/// 1. one rectangle, repeated;
/// 2. points on a vertical line (a flat extent), many at the same place;
/// 3. points and boxes reaching ±`MAX_COORD` among tiny ones;
/// 4. boxes in negative coordinates, half of them points, on few centres;
/// 5. as 0, the ids spread over all of `u64` (0 and `u64::MAX` included),
///    their low 32 bits distinct (ids that agree modulo 2^32 in one Hilbert
///    cell tie: see [`equal_hilbert_values_pass_check_and_answer_right`]).
fn data(class: u8, n: usize, seed: u64) -> Vec<(u64, Rect)> {
    let mut state = seed | 1;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|i| {
            let id = match class {
                5 => match i {
                    0 => u64::MAX,
                    1 => 0,
                    _ => (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                },
                _ => (i as u64).wrapping_mul(7_919) ^ seed.rotate_left(7) & 0xFFFF,
            };
            let rect = match class {
                1 => r(3.0, 4.0, 5.0, 6.5),
                2 => {
                    let y = (next() * 10.0).floor();
                    r(7.0, y, 7.0, y)
                }
                3 => match i % 5 {
                    0 => r(-MAX_COORD, -MAX_COORD, -MAX_COORD, -MAX_COORD),
                    1 => r(MAX_COORD, MAX_COORD, MAX_COORD, MAX_COORD),
                    2 => r(-MAX_COORD, 0.0, MAX_COORD, next()),
                    _ => {
                        let (x, y) = (next(), next());
                        r(x, y, x + 1e-300, y)
                    }
                },
                4 => {
                    let (x, y) = (-(next() * 8.0).floor() * 1e6, -(next() * 8.0).floor());
                    let w = if i % 2 == 0 { 0.0 } else { next() };
                    r(x - w, y - w, x, y)
                }
                _ => {
                    let (x, y) = (next() * 100.0, next() * 100.0);
                    r(x, y, x + next(), y + next() * 3.0)
                }
            };
            (id, rect)
        })
        .collect()
}

/// The ids of `live` that intersect `w`, ascending.
fn brute(live: &BTreeMap<u64, Rect>, w: &Rect) -> Vec<u64> {
    live.iter()
        .filter(|(_, b)| b.intersects(w))
        .map(|(&id, _)| id)
        .collect()
}

/// Windows over the data of every class, the whole plane among them.
fn windows(live: &BTreeMap<u64, Rect>) -> Vec<Rect> {
    let mut w = vec![
        Rect::world(),
        r(0.0, 0.0, 50.0, 50.0),
        r(20.0, 30.0, 21.0, 90.0),
        r(7.0, 2.0, 7.0, 5.0),
        r(-4e6, -5.0, -1e6, -1.0),
        r(-1.0, -1.0, 1.0, 1.0),
        r(MAX_COORD, MAX_COORD, MAX_COORD, MAX_COORD),
    ];
    // Each of a few records' own rectangles.
    w.extend(live.values().step_by(live.len() / 5 + 1).copied());
    w
}

/// The tree passes its checks, holds `live` and answers like a scan.
fn agrees(
    t: &RTree<MemStore>,
    live: &BTreeMap<u64, Rect>,
    what: &str,
) -> Result<(), TestCaseError> {
    let report = t
        .check()
        .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    prop_assert_eq!(report.records, live.len() as u64, "{}", what);
    for w in windows(live) {
        let got = t.query(w, Predicate::Intersects).unwrap();
        let ids = got.sorted_ids();
        prop_assert_eq!(
            ids.len(),
            got.hits.len(),
            "{}: a record reported twice",
            what
        );
        prop_assert_eq!(ids, brute(live, &w), "{}: window {:?}", what, w);
    }
    Ok(())
}

/// The tree kinds: an R-tree, an R*-tree, and Hilbert R-trees over the
/// data's extent and over a small domain most records lie outside of.
fn kinds(max: usize, data: &[(u64, Rect)]) -> Vec<TreeParams> {
    let mut v = vec![
        TreeParams::new(IndexKind::RTree, max).with_split(SplitKind::Quadratic),
        TreeParams::new(IndexKind::RStar, max),
        TreeParams::new(IndexKind::Hilbert, max)
            .with_hilbert_domain(HilbertDomain::new(r(10.0, 10.0, 11.0, 11.0), 16).unwrap()),
    ];
    let extent = Rect::union_all(data.iter().map(|(_, b)| b)).and_then(|e| e.with_area().ok());
    if let Some(e) = extent {
        v.push(
            TreeParams::new(IndexKind::Hilbert, max)
                .with_hilbert_domain(HilbertDomain::new(e, 16).unwrap()),
        );
    }
    v
}

/// Input sizes at the boundaries for nodes of at most `max` entries: a
/// node's capacity, a full two-level tree, and the run lengths of both
/// external loads at the smallest budget.
fn sizes(max: usize) -> Vec<usize> {
    let (hilbert_run, str_run) = run_lengths();
    let mut v = vec![0, 1, 2, max - 1, max, max + 1, max * max, max * max + 1];
    for run in [hilbert_run, str_run, 2 * hilbert_run, 2 * str_run] {
        v.extend([run - 1, run, run + 1]);
    }
    v
}

fn size_strategy() -> impl Strategy<Value = (usize, usize)> {
    (4usize..10).prop_flat_map(|max| {
        let sizes = sizes(max);
        (
            Just(max),
            prop_oneof![prop::sample::select(sizes), 0usize..700],
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// Every loader on every tree kind, at the boundaries, on every shape
    /// of input: the tree holds each record once and answers like a scan,
    /// also after deleting a third of it and inserting records elsewhere
    /// (outside a Hilbert R-tree's domain too).
    #[test]
    fn bulk_loads_at_their_boundaries_answer_like_brute_force(
        (max, n) in size_strategy(),
        class in 0u8..6,
        seed in any::<u64>(),
        fill in prop_oneof![Just(1.0f64), Just(0.5), Just(0.01), 0.3f64..1.0],
    ) {
        let items = data(class, n, seed);
        let dir = tempfile::tempdir().unwrap();
        for p in kinds(max, &items) {
            for loader in LOADERS {
                let what = format!("{loader:?} {:?} M={max} n={n} class {class} fill {fill}", p.kind);
                let mut t = load(loader, p, &items, fill, dir.path())
                    .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
                prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{}: files left", what);
                let mut live: BTreeMap<u64, Rect> = items.iter().copied().collect();
                agrees(&t, &live, &what)?;
                let gone: Vec<(u64, Rect)> = items.iter().copied().step_by(3).collect();
                for (id, b) in &gone {
                    t.delete(*id, *b).map_err(|e| TestCaseError::fail(format!("{what}: delete {id}: {e}")))?;
                    live.remove(id);
                }
                for i in 0..(n as u64 / 4 + 3) {
                    let id = (1u64 << 63) + i * 3;
                    let x = -300.0 + (i * 37 % 700) as f64;
                    let b = r(x, x / 2.0, x + 1.0, x / 2.0 + 0.5);
                    t.insert(id, b).map_err(|e| TestCaseError::fail(format!("{what}: insert {id}: {e}")))?;
                    live.insert(id, b);
                }
                agrees(&t, &live, &format!("{what}, updated"))?;
            }
        }
    }
}

/// A bounded-memory load of a few records under a budget far above the
/// machine's memory takes what the records need, not the budget: the
/// budget bounds the load's memory, it is not allocated up front (before,
/// 10 records under 64 TiB aborted the process: "memory allocation of
/// 53 TB failed").
#[test]
fn a_large_memory_budget_is_a_bound_not_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let items = data(0, 10, 3);
    let huge = ExternalBulkConfig {
        memory_budget: 1 << 46,
        temp_dir: dir.path().to_path_buf(),
    };
    for p in kinds(8, &items) {
        for method in [BulkMethod::Str, BulkMethod::Hilbert] {
            let (t, rep) = RTree::bulk_load_external(
                MemStore::new(),
                p,
                items.iter().copied(),
                method,
                1.0,
                &huge,
            )
            .unwrap();
            assert_eq!(rep.records, 10);
            assert_eq!(t.check().unwrap().records, 10);
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Records of equal Hilbert value: ids that agree modulo 2^32 (the low
/// half of a record's value) in one cell of the domain, here every record
/// outside a small domain (clamped to its border cells). Siblings then tie
/// on their largest Hilbert value (LHV), which orders them by page id, so
/// their records interleave: `check` accepts any order among children of
/// one LHV (it reported such a tree as damaged, "children out of Hilbert
/// order", and `recover`, which verifies, refused it), and the answers stay
/// right.
#[test]
fn equal_hilbert_values_pass_check_and_answer_right() {
    let items: Vec<(u64, Rect)> = data(0, 226, 0)
        .into_iter()
        .enumerate()
        .map(|(i, (_, b))| (((i as u64 % 7) << 32) | (i as u64 / 7), b))
        .collect();
    let p = TreeParams::new(IndexKind::Hilbert, 4)
        .with_hilbert_domain(HilbertDomain::new(r(10.0, 10.0, 11.0, 11.0), 16).unwrap());
    let mut t = RTree::bulk_load(MemStore::new(), p, items.clone(), BulkMethod::Str, 0.5).unwrap();
    t.check().unwrap();
    let mut live: BTreeMap<u64, Rect> = items.iter().copied().collect();
    for (id, b) in items.iter().copied().step_by(3) {
        t.delete(id, b).unwrap();
        live.remove(&id);
        // The answers stay right whatever the order.
        for w in windows(&live) {
            assert_eq!(
                t.query(w, Predicate::Intersects).unwrap().sorted_ids(),
                brute(&live, &w)
            );
        }
        if let Err(e) = t.check() {
            panic!("after deleting {id}: {e}");
        }
    }
}

/// A device that fills up in the middle of a bounded-memory load (its
/// runs and level files live, nodes written): the load fails with the
/// device's error and leaves no temporary file.
#[test]
fn a_device_failing_mid_load_leaves_no_temporary_file() {
    use crate::storage::faulty::{FaultPlan, FaultyDevice};
    use crate::storage::mem::MemDevice;
    use crate::store::{PlainConfig, PlainStore};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let config = ExternalBulkConfig {
        memory_budget: MIN_MEMORY_BUDGET,
        temp_dir: dir.path().to_path_buf(),
    };
    // 512-byte pages: a batch of 2,048 nodes is written while the leaves
    // are packed, past the device's limit.
    let items = data(0, 12_000, 5);
    for p in kinds(4, &items) {
        for method in [BulkMethod::Str, BulkMethod::Hilbert] {
            let dev = Arc::new(FaultyDevice::new(
                MemDevice::new(512, 1 << 16).unwrap(),
                FaultPlan::none().full_at_page(1_000),
            ));
            let cfg = PlainConfig {
                with_payload: p.kind == IndexKind::Hilbert,
                ..PlainConfig::default()
            };
            let store = PlainStore::create(dev, cfg).unwrap();
            let loaded =
                RTree::bulk_load_external(store, p, items.iter().copied(), method, 1.0, &config);
            let Err(err) = loaded else {
                panic!("{:?} {method:?}: loaded onto a full device", p.kind);
            };
            assert!(
                err.to_string().contains("full"),
                "{:?} {method:?}: {err}",
                p.kind
            );
            assert_eq!(
                std::fs::read_dir(dir.path()).unwrap().count(),
                0,
                "{:?} {method:?}",
                p.kind
            );
        }
    }
}
