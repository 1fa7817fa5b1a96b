//! The read-ahead of batched range queries ([`query`]'s `ReadAhead`):
//! a batch of windows reads each node it visits exactly once and nothing
//! else, in about one store batch per level while the nodes below the
//! windows fit the cap, and answers as single reads and brute force do
//! whatever the cap.
use std::cell::Cell;
use std::collections::HashSet;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};

use super::recording_tests::{Call, Recording};
use super::*;

thread_local! {
    /// Most nodes a read-ahead holds in this thread's queries, instead of
    /// the cap the page size gives (`None`: that cap).
    pub(super) static CAP: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Runs `f` with the read-ahead cap at `cap` nodes.
fn with_cap<R>(cap: usize, f: impl FnOnce() -> R) -> R {
    CAP.with(|c| c.set(Some(cap)));
    let out = f();
    CAP.with(|c| c.set(None));
    out
}

fn r(x0: f64, y0: f64, x1: f64, y1: f64) -> Rect {
    Rect::new(x0, y0, x1, y1).unwrap()
}

/// `n` boxes of side `side` spread uniformly over the unit square.
fn boxes(seed: u64, n: u64, side: f64) -> Vec<(u64, Rect)> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let (x, y): (f64, f64) = (rng.gen(), rng.gen());
            (i, r(x, y, x + side, y + side))
        })
        .collect()
}

/// `n` square windows of side `side` in the unit square.
fn windows(seed: u64, n: usize, side: f64) -> Vec<Rect> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let (x, y): (f64, f64) = (rng.gen(), rng.gen());
            r(x, y, x + side, y + side)
        })
        .collect()
}

/// The batch's answers (keys per window, in order) in `mode`, with the
/// store's reads.
fn run(t: &mut RTree<Recording>, mode: ReadMode, ws: &[Rect]) -> (Vec<Vec<u64>>, u64, Vec<Call>) {
    t.set_read_mode(mode);
    t.store().take();
    let res = t.query_batch(ws, Predicate::Intersects).unwrap();
    let keys = res
        .results
        .iter()
        .map(|q| q.hits.iter().map(|h| h.id).collect())
        .collect();
    (keys, res.nodes_visited, t.store().take())
}

/// Every page of `calls`, a batch's one by one.
fn pages(calls: &[Call]) -> Vec<PageId> {
    calls
        .iter()
        .flat_map(|c| match c {
            Call::Get(id) => vec![*id],
            Call::Batch(ids) => ids.clone(),
        })
        .collect()
}

/// Checks the batched run of `ws` against the single one and brute force:
/// same answers, and every node the walk visits read once, nothing else.
/// Returns the batched run's non-empty store batches.
fn check(t: &mut RTree<Recording>, items: &[(u64, Rect)], ws: &[Rect]) -> usize {
    let (single, visited, single_calls) = run(t, ReadMode::Single, ws);
    let (batched, batched_visited, calls) = run(t, ReadMode::Batched, ws);
    assert_eq!(batched, single);
    assert_eq!(batched_visited, visited);
    for (w, keys) in ws.iter().zip(&batched) {
        let mut got = keys.clone();
        got.sort_unstable();
        let want: Vec<u64> = items
            .iter()
            .filter(|(_, b)| b.intersects(w))
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(got, want, "window {w:?}");
    }
    let read = pages(&calls);
    let distinct: HashSet<PageId> = read.iter().copied().collect();
    assert_eq!(distinct.len(), read.len(), "a page read twice");
    let single_pages: HashSet<PageId> = pages(&single_calls).into_iter().collect();
    // The root is read on its own, as in single mode.
    assert_eq!(distinct, single_pages, "batched reads other pages than single ones");
    calls
        .iter()
        .filter(|c| !matches!(c, Call::Batch(ids) if ids.is_empty()))
        .count()
}

/// A deep tree (M = 8, 20,000 boxes by insertion and by STR): a batch of
/// small windows reads its nodes in one store call per level below the
/// root (reading one level ahead of each group of siblings took 82 calls
/// for the insertion-built tree).
#[test]
fn a_batch_of_small_windows_is_read_in_a_call_per_level() {
    let items = boxes(1, 20_000, 0.001);
    for bulk in [false, true] {
        let p = TreeParams::new(IndexKind::RStar, 8);
        let mut t = if bulk {
            RTree::bulk_load(Recording::default(), p, items.clone(), BulkMethod::Str, 1.0).unwrap()
        } else {
            let mut t = RTree::create(Recording::default(), p).unwrap();
            for (id, rect) in &items {
                t.insert(*id, *rect).unwrap();
            }
            t
        };
        let height = usize::from(t.store().meta().height);
        assert!(height >= 5, "height {height}");
        let ws = windows(2, 100, 0.002);
        let calls = check(&mut t, &items, &ws);
        eprintln!("bulk {bulk}: {calls} store calls, height {height}");
        // The root, then one batch per level below it.
        assert!(calls <= height, "bulk {bulk}: {calls} calls for height {height}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// Whatever the cap (down to one node), the batched walk answers as
    /// single reads and brute force and reads each visited node once.
    #[test]
    fn any_cap_answers_as_single_reads_and_reads_each_node_once(
        n in 0u64..3000,
        seed in any::<u64>(),
        nw in 1usize..40,
        side in prop::sample::select(vec![0.0, 0.001, 0.01, 0.1, 0.5]),
        cap in prop::sample::select(vec![1usize, 2, 3, 7, 50, 1000]),
        max in 4usize..12,
    ) {
        let items = boxes(seed, n, 0.003);
        let mut t = RTree::create(Recording::default(), TreeParams::new(IndexKind::RStar, max)).unwrap();
        for (id, rect) in &items {
            t.insert(*id, *rect).unwrap();
        }
        let ws = windows(seed ^ 7, nw, side);
        with_cap(cap, || check(&mut t, &items, &ws));
    }
}
