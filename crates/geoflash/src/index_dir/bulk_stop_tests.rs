//! A bulk load of an index directory that is asked to stop (the process's
//! stop request, here a stop of the test's own: the process-wide one is
//! never reset) ends with the error every stopped build gives, "no index
//! published at DIR", and leaves nothing: no index, no staging directory,
//! no temporary file of the bounded-memory loads. So does a bounded-memory
//! load whose input fails, before it stores a node.
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::index::MIN_MEMORY_BUDGET;

/// `n` boxes with ids `1..=n` in [0, 1000]².
fn items(n: u64) -> Vec<(u64, Rect)> {
    (1..=n)
        .map(|i| {
            let x = (i * 7919 % 1000) as f64;
            let y = (i * 104_729 % 997) as f64;
            (i, Rect::new(x, y, x + 2.0, y + 2.0).unwrap())
        })
        .collect()
}

fn opts() -> IndexOptions {
    IndexOptions {
        page_size: 1024,
        device: "file?direct=false".parse().unwrap(),
        ..IndexOptions::default()
    }
}

/// What is left in `parent` (the target's parent, holding nothing else).
fn left_in(parent: &Path) -> Vec<String> {
    std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// `(method, bounded memory)`: STR and Hilbert packing, in memory and
/// with the smallest memory budget (many sorted runs in the staging
/// directory).
const LOADS: [(BulkMethod, bool); 4] = [
    (BulkMethod::Str, false),
    (BulkMethod::Hilbert, false),
    (BulkMethod::Str, true),
    (BulkMethod::Hilbert, true),
];

/// Loads `data` into `target` as `load` says, stopped by `stop`; returns
/// the result and the last count of nodes stored it told (stored, total).
fn load_into(
    target: &Path,
    (method, bounded): (BulkMethod, bool),
    data: Vec<(u64, Rect)>,
    input_fails_at: Option<usize>,
    stop: &(dyn Fn() -> bool + Sync),
) -> (Result<()>, Option<(u64, u64)>) {
    let last = Cell::new(None);
    let progress = |done, total| last.set(Some((done, total)));
    let opts = opts();
    let result = if bounded {
        let config = ExternalBulkConfig {
            memory_budget: MIN_MEMORY_BUDGET,
            temp_dir: std::env::temp_dir(),
        };
        let input = data
            .into_iter()
            .enumerate()
            .map(|(i, r)| match Some(i) == input_fails_at {
                true => Err(Error::invalid(format!("record {}: not a box", i + 1))),
                false => Ok(r),
            });
        Index::bulk_load_external_watched(
            Some(target),
            &opts,
            input,
            method,
            1.0,
            &config,
            &progress,
            stop,
        )
        .map(|(index, _)| drop(index))
    } else {
        let watch = BulkWatch::new(stop, &progress);
        Index::bulk_load_watched(Some(target), &opts, data, method, 1.0, watch).map(drop)
    };
    (result, last.get())
}

/// Stopped before its first node (in its sort phase) or halfway through
/// its nodes, every load publishes nothing and leaves nothing, saying so.
#[test]
fn a_stopped_bulk_load_of_a_directory_publishes_nothing_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("idx");
    for load in LOADS {
        // Unstopped, for the number of nodes and the questions asked
        // before the first.
        let asked = AtomicU64::new(0);
        let count = || {
            asked.fetch_add(1, Ordering::SeqCst);
            false
        };
        let (done, last) = load_into(&target, load, items(6_000), None, &count);
        done.unwrap();
        let (stored, total) = last.unwrap();
        assert_eq!(stored, total, "{load:?}");
        std::fs::remove_dir_all(&target).unwrap();
        let all = asked.load(Ordering::SeqCst);
        // Question k of `all`: the first (sort phase) or halfway through
        // the nodes (write phase: the last `total` questions are the
        // nodes').
        let halfway = all
            .checked_sub(total / 2)
            .unwrap_or_else(|| panic!("{load:?}: {all} questions for {total} nodes"));
        for k in [0, halfway] {
            let asked = AtomicU64::new(0);
            let stop = || asked.fetch_add(1, Ordering::SeqCst) >= k;
            let (result, last) = load_into(&target, load, items(6_000), None, &stop);
            let err = result.expect_err("stopped");
            assert_eq!(
                err.kind(),
                crate::ErrorKind::Interrupted,
                "{load:?} at {k}: {err}"
            );
            assert!(
                err.to_string()
                    .contains(&format!("no index published at {}", target.display())),
                "{load:?} at {k}: {err}"
            );
            assert_eq!(left_in(dir.path()), Vec::<String>::new(), "{load:?} at {k}");
            let stored = last.map_or(0, |(stored, _)| stored);
            assert!(
                stored < total,
                "{load:?} at {k}: {stored} of {total} nodes stored"
            );
            if k > 0 {
                assert!(
                    stored >= total / 4,
                    "{load:?} at {k}: {stored} of {total} nodes stored"
                );
            }
        }
    }
}

/// The input of a bounded-memory load fails at its 500th record: its error
/// is returned, no node is stored (the load stops at its next question
/// instead of packing the 499 records before it), nothing is left.
#[test]
fn a_failed_input_stops_a_bounded_memory_load_before_any_node() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("idx");
    for load in LOADS.into_iter().filter(|(_, bounded)| *bounded) {
        let (result, last) = load_into(&target, load, items(6_000), Some(499), &|| false);
        let err = result.expect_err("a failed input");
        assert!(
            err.to_string().contains("record 500: not a box"),
            "{load:?}: {err}"
        );
        assert_eq!(last, None, "{load:?}: nodes stored");
        assert_eq!(left_in(dir.path()), Vec::<String>::new(), "{load:?}");
    }
}

/// The xBR+-tree's bounded-memory load, stopped at any of its questions
/// (while its runs are formed, checked, merged or built), publishes
/// nothing and leaves nothing; unstopped, it publishes every point.
#[test]
fn a_stopped_xbr_bulk_load_publishes_nothing_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("idx");
    let mut opts = opts();
    opts.set_kind("xbr").unwrap();
    opts.hilbert_domain = Some(Rect::new(0.0, 0.0, 1000.0, 1000.0).unwrap());
    // distinct points: (i, 7i mod 1000) for 1 ≤ i ≤ 999, and more rows
    let points: Vec<(u64, Rect)> = (1..=150_000u64)
        .map(|i| {
            let (x, y) = ((i % 999) as f64 + 0.5, (i / 999) as f64 * 6.5 % 999.0 + 0.25);
            (i, Rect::from_point(crate::geom::Point::new(x, y).unwrap()))
        })
        .collect();
    let config = ExternalBulkConfig {
        memory_budget: MIN_MEMORY_BUDGET,
        temp_dir: std::env::temp_dir(),
    };
    let load = |stop: &(dyn Fn() -> bool + Sync)| {
        let input = points.iter().map(|&p| Ok(p));
        Index::bulk_load_external_watched(
            Some(&target),
            &opts,
            input,
            BulkMethod::Str,
            1.0,
            &config,
            &|_, _| {},
            stop,
        )
    };
    let asked = AtomicU64::new(0);
    let (index, report) = load(&|| {
        asked.fetch_add(1, Ordering::SeqCst);
        false
    })
    .unwrap();
    assert_eq!(report.records, 150_000);
    assert_eq!(index.len(), 150_000);
    drop(index);
    std::fs::remove_dir_all(&target).unwrap();
    let all = asked.load(Ordering::SeqCst);
    assert!(all > 10, "{all} questions");
    for k in [0, all / 3, all / 2, all - 1] {
        let asked = AtomicU64::new(0);
        let stop = || asked.fetch_add(1, Ordering::SeqCst) >= k;
        let err = load(&stop).expect_err("stopped");
        assert_eq!(err.kind(), crate::ErrorKind::Interrupted, "at {k}: {err}");
        assert_eq!(left_in(dir.path()), Vec::<String>::new(), "at {k}");
    }
}
