//! Stopping a bulk load ([`BulkWatch`]): each loader (STR and Hilbert
//! packing in memory, the bounded-memory Hilbert and STR loads) asks its
//! caller whether to stop in its sort phase (before any node is stored)
//! and before every node it stores, and a stop at any of those questions
//! ends it with [`Error::Interrupted`]: the store reopens holding no tree,
//! no temporary file is left, and the last node of the tree was never
//! stored.
use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::*;
use crate::index::external::{ExternalBulkConfig, MIN_MEMORY_BUDGET};
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::store::{PlainConfig, PlainStore};

const PAGE: usize = 1024;

/// The bulk loaders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// `n` boxes in [0, 101]², ids unique and not in order (the in-memory
/// loaders then sort the ids to find a duplicate).
fn items(n: u64, seed: u64) -> Vec<(u64, Rect)> {
    (0..n)
        .map(|i| {
            let h = (i ^ seed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .rotate_left(17)
                ^ seed;
            let x = (h % 10_007) as f64 / 100.0;
            let y = ((h >> 20) % 10_009) as f64 / 100.0;
            let w = ((h >> 40) % 9) as f64 / 10.0;
            (
                (i * 7 + 3) ^ 0x55,
                Rect::new(x, y, x + w, y + w / 3.0).unwrap(),
            )
        })
        .collect()
}

fn plain(p: TreeParams) -> PlainConfig {
    PlainConfig {
        with_payload: p.kind == IndexKind::Hilbert,
        ..PlainConfig::default()
    }
}

/// What one load did.
#[derive(Debug)]
struct Outcome {
    /// Its result.
    result: Result<()>,
    /// The questions it asked.
    asked: u64,
    /// What it told of its nodes (stored, of the tree's total), each with
    /// the questions asked by then.
    reports: Vec<(u64, u64, u64)>,
    /// The records it took from its input.
    read: u64,
}

/// Bulk-loads `data` with `loader` into a new plain store on `dev`
/// (temporary files in `tmp`, with the smallest budget: many sorted runs
/// and merge passes), answering `true` from question `stop_at` on
/// (counted from 0; never for `None`).
fn load(
    loader: Loader,
    dev: &Arc<dyn PageDevice>,
    p: TreeParams,
    data: &[(u64, Rect)],
    tmp: &Path,
    stop_at: Option<u64>,
) -> Outcome {
    let asked = AtomicU64::new(0);
    let read = AtomicU64::new(0);
    let stop = || asked.fetch_add(1, Ordering::SeqCst) >= stop_at.unwrap_or(u64::MAX);
    let reports = RefCell::new(Vec::new());
    let stored = |done, total| {
        reports
            .borrow_mut()
            .push((done, total, asked.load(Ordering::SeqCst)));
    };
    let watch = BulkWatch::new(&stop, &stored);
    let store = PlainStore::create(dev.clone(), plain(p)).unwrap();
    let config = ExternalBulkConfig {
        memory_budget: MIN_MEMORY_BUDGET,
        temp_dir: tmp.to_path_buf(),
    };
    let result = match loader {
        Loader::Str | Loader::Hilbert => {
            let method = match loader {
                Loader::Str => BulkMethod::Str,
                _ => BulkMethod::Hilbert,
            };
            read.store(data.len() as u64, Ordering::SeqCst);
            RTree::bulk_load_watched(store, p, data.to_vec(), method, 1.0, watch).map(drop)
        }
        Loader::ExternalHilbert | Loader::ExternalStr => {
            let method = match loader {
                Loader::ExternalStr => BulkMethod::Str,
                _ => BulkMethod::Hilbert,
            };
            let input = data.iter().inspect(|_| {
                read.fetch_add(1, Ordering::SeqCst);
            });
            RTree::bulk_load_external_watched(store, p, input.copied(), method, 1.0, &config, watch)
                .map(drop)
        }
    };
    Outcome {
        result,
        asked: asked.load(Ordering::SeqCst),
        reports: reports.into_inner(),
        read: read.load(Ordering::SeqCst),
    }
}

/// The records of the tree the store on `dev` holds (reopened).
fn records_on(dev: &Arc<dyn PageDevice>, p: TreeParams) -> u64 {
    let store = PlainStore::open(dev.clone(), plain(p)).unwrap();
    RTree::open(store, p).unwrap().len()
}

/// The trees each loader is tried on: an R*-tree (the Hilbert loads find
/// the domain of the input: one more pass for the bounded-memory one) and,
/// for the Hilbert loads, a Hilbert R-tree with its own domain.
fn trees(loader: Loader) -> Vec<TreeParams> {
    let mut v = vec![TreeParams::new(IndexKind::RStar, 8)];
    if matches!(loader, Loader::Hilbert | Loader::ExternalHilbert) {
        v.push(TreeParams::new(IndexKind::Hilbert, 8).with_hilbert_domain(
            HilbertDomain::new(Rect::new(0.0, 0.0, 110.0, 110.0).unwrap(), 12).unwrap(),
        ));
    }
    v
}

/// A stop at any question, in the sort phase or the write phase, ends every
/// loader with `Interrupted`; the store holds no tree afterwards, no
/// temporary file is left, and the tree's last node was never stored.
#[test]
fn a_stop_anywhere_in_a_bulk_load_publishes_nothing_and_leaves_no_file() {
    let data = items(3_000, 7);
    for loader in LOADERS {
        for p in trees(loader) {
            let what = format!("{loader:?} {:?}", p.kind);
            let tmp = tempfile::tempdir().unwrap();
            let leftovers = || std::fs::read_dir(tmp.path()).unwrap().count();
            let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 14).unwrap());
            // Unstopped: the questions it asks, and where the nodes begin.
            let full = load(loader, &dev, p, &data, tmp.path(), None);
            full.result.unwrap();
            assert_eq!(records_on(&dev, p), 3_000, "{what}");
            assert_eq!(leftovers(), 0, "{what}");
            let &(done, total, _) = full.reports.last().expect("nodes reported");
            assert_eq!(done, total, "{what}: {:?}", full.reports);
            assert!(total > 400, "{what}: {total} nodes");
            // The 64 first nodes asked once each before the first report:
            // the questions before them were asked before any node.
            let (_, _, first) = full.reports[0];
            let sort_phase = first
                .checked_sub(64)
                .unwrap_or_else(|| panic!("{what}: the first 64 nodes asked {first} questions"));
            let at_least = match loader {
                // One question after checking the input, more at the sort.
                Loader::Str | Loader::Hilbert => 2,
                // Before and after each sort of a run (13 runs of 227
                // records, or 27 of 113), more in the merges.
                Loader::ExternalHilbert | Loader::ExternalStr => 26,
            };
            assert!(
                sort_phase >= at_least,
                "{what}: {sort_phase} questions before any node"
            );
            assert!(
                full.asked >= sort_phase + total,
                "{what}: {} questions for {total} nodes",
                full.asked
            );
            // Stopped at question k: in the sort phase, at its last
            // question, at the first nodes, across the write phase, at the
            // last node.
            let mut stops: Vec<u64> = (0..full.asked)
                .step_by((full.asked / 40).max(1) as usize)
                .collect();
            stops.extend([sort_phase - 1, sort_phase, sort_phase + 1, full.asked - 1]);
            for k in stops {
                let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 14).unwrap());
                let out = load(loader, &dev, p, &data, tmp.path(), Some(k));
                let err = out
                    .result
                    .expect_err(&format!("{what}: stopped at question {k}"));
                assert_eq!(
                    err.kind(),
                    crate::ErrorKind::Interrupted,
                    "{what} at {k}: {err}"
                );
                assert!(out.asked > k, "{what} at {k}");
                assert_eq!(leftovers(), 0, "{what} at {k}: temporary files left");
                assert_eq!(
                    records_on(&dev, p),
                    0,
                    "{what} at {k}: a tree was published"
                );
                assert!(
                    out.reports.iter().all(|&(done, total, _)| done < total),
                    "{what} at {k}: the whole tree was stored: {:?}",
                    out.reports.last()
                );
                if k < sort_phase {
                    assert!(
                        out.reports.is_empty(),
                        "{what} at {k}: nodes stored in the sort phase"
                    );
                }
                // Stopped at its first question, a load that sorts its
                // input in runs as it reads it (not the Hilbert load that
                // first reads it all for its extent) reads no further.
                let sorts_as_it_reads = match loader {
                    Loader::ExternalStr => true,
                    Loader::ExternalHilbert => p.hilbert_domain.is_some(),
                    Loader::Str | Loader::Hilbert => false,
                };
                if k == 0 && sorts_as_it_reads {
                    assert!(
                        out.read <= 300,
                        "{what}: read {} records after the stop",
                        out.read
                    );
                }
            }
        }
    }
}

/// Levels large enough for the in-memory STR load's second thread (the
/// slices sorted ahead of the nodes stored) and its partition on two
/// threads: a stop in the partition and one halfway through the leaves
/// end the load as on one thread.
#[test]
fn a_stop_ends_the_pipelined_str_load() {
    let data = items(70_000, 3);
    let p = TreeParams::new(IndexKind::RStar, 16);
    let tmp = tempfile::tempdir().unwrap();
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 15).unwrap());
    let full = load(Loader::Str, &dev, p, &data, tmp.path(), None);
    full.result.unwrap();
    let (_, total, first) = full.reports[0];
    let sort_phase = first
        .checked_sub(64)
        .unwrap_or_else(|| panic!("the first 64 nodes asked {first} questions"));
    assert!(sort_phase > 4, "{sort_phase} questions before any node");
    for k in [1, sort_phase / 2, sort_phase + total / 2] {
        let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 15).unwrap());
        let out = load(Loader::Str, &dev, p, &data, tmp.path(), Some(k));
        let err = out.result.expect_err("stopped");
        assert_eq!(err.kind(), crate::ErrorKind::Interrupted, "at {k}: {err}");
        assert_eq!(records_on(&dev, p), 0, "at {k}");
        let stored = out.reports.last().map_or(0, |r| r.0);
        assert!(stored < total, "at {k}: {stored} of {total} nodes stored");
        if k > sort_phase {
            assert!(
                stored >= total / 2 - 64,
                "at {k}: stopped early at {stored}"
            );
        }
    }
}

/// The in-memory loads' pass over their input (each record checked) asks
/// its caller every [`STOP_EVERY`] records: stopped at its second question
/// (at record 65,536), a load ends there, before the record at the end of
/// the input that would fail it (the pass went through the whole input
/// before its first question). A Hilbert R-tree's load asks as often in
/// its pass computing the Hilbert values.
#[test]
fn the_in_memory_loads_stop_in_their_pass_over_the_input() {
    let n = 3 * STOP_EVERY + 1;
    let batches = n.div_ceil(STOP_EVERY);
    let good = items(n, 11);
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last].1 = Rect::invalid_for_tests(1.0, 0.0, 0.0, 1.0);
    for loader in [Loader::Str, Loader::Hilbert] {
        for p in trees(loader) {
            let what = format!("{loader:?} {:?}", p.kind);
            let tmp = tempfile::tempdir().unwrap();
            let device =
                || -> Arc<dyn PageDevice> { Arc::new(MemDevice::new(PAGE, 1 << 16).unwrap()) };
            let full = load(loader, &device(), p, &bad, tmp.path(), None);
            let err = full.result.expect_err(&what);
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{what}: {err}");
            let dev = device();
            let out = load(loader, &dev, p, &bad, tmp.path(), Some(1));
            let err = out.result.expect_err(&what);
            assert_eq!(err.kind(), crate::ErrorKind::Interrupted, "{what}: {err}");
            assert_eq!(out.asked, 2, "{what}");
            assert_eq!(records_on(&dev, p), 0, "{what}");
            // Unstopped on a good input: the questions before the first
            // node, a batch's each in the pass (and in the Hilbert values).
            let full = load(loader, &device(), p, &good, tmp.path(), None);
            full.result.unwrap();
            let (_, _, first) = full.reports[0];
            let passes = if p.kind == IndexKind::Hilbert { 2 } else { 1 };
            assert!(
                first >= 64 + passes * batches,
                "{what}: {first} questions up to the 64th node"
            );
        }
    }
}
