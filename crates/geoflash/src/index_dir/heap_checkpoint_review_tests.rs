//! The object heap (`objects.rs`, [`crate::objects`]) of an index without a
//! record map (built by the command line or the Rust API) when a store
//! checkpoint returns an error although its superblock switch may already
//! be durable: the heap's mark of the checkpoint's generation is written
//! and synced before the store's checkpoint names it, so the heap must
//! reopen at whichever generation the store's durable checkpoint names,
//! with the tree, after the caller's `close()` (a checkpoint again) and a
//! crash. The record map had this exposure (`records_review_tests.rs`);
//! the heap is append-only, its marks never rewritten, and every
//! checkpoint of a process names a generation above the one staged for
//! the failed checkpoint, so it holds.
use std::collections::BTreeMap;
use std::path::Path;

use geo::{polygon, Intersects};

use super::records_review_tests::behind_tripwire;
use super::*;
use crate::geom::Rect;
use crate::index::query::Predicate;
use crate::index::BulkMethod;
use crate::manifest::Access;
use crate::objects::Geometry;

/// What a test expects: object id → geometry (every payload is empty: the
/// index's API stores none).
type Oracle = BTreeMap<u64, Geometry>;

/// A thin triangle for object `id` in its `version` (an id inserted again
/// gets another shape, so a stale geometry is seen).
fn shape(id: u64, version: u64) -> Geometry {
    let x = ((id * 7 + version * 3) % 90) as f64;
    let y = ((id * 13 + version * 5) % 90) as f64;
    polygon![(x: x, y: y), (x: x + 6.0, y: y + 1.0), (x: x + 1.0, y: y + 5.0), (x: x, y: y)].into()
}

/// The windows the checks query, refined and not.
const WINDOWS: [(f64, f64, f64, f64); 4] = [
    (-1.0, -1.0, 101.0, 101.0),
    (10.0, 10.0, 40.0, 30.0),
    (50.0, 0.0, 95.0, 95.0),
    (20.0, 45.0, 60.0, 70.0),
];

/// Checks that `index` (tree and heap) holds exactly `oracle`: the tree's
/// ids are the heap's, each object's geometry and (empty) payload, and the
/// answers of filter and refined queries as brute force on `oracle`.
fn check(index: &Index, oracle: &Oracle, what: &str) {
    let heap = index
        .objects()
        .unwrap_or_else(|| panic!("{what}: no object heap"));
    let want: Vec<u64> = oracle.keys().copied().collect();
    assert_eq!(heap.ids(), want, "{what}: the heap's ids");
    assert_eq!(heap.len(), oracle.len() as u64, "{what}: the heap's count");
    assert_eq!(index.len(), oracle.len() as u64, "{what}: the tree's count");
    for (&id, g) in oracle {
        assert_eq!(
            heap.get(id).unwrap().as_ref(),
            Some(g),
            "{what}: geometry of {id}"
        );
        assert_eq!(
            heap.get_payload(id).unwrap(),
            Some(Vec::new()),
            "{what}: payload of {id}"
        );
    }
    for &(x0, y0, x1, y1) in &WINDOWS {
        let w = Rect::from_valid(x0, y0, x1, y1);
        let boxes: Vec<u64> = oracle
            .iter()
            .filter(|(_, g)| {
                crate::objects::geometry::bounding_rect(g)
                    .unwrap()
                    .intersects(&w)
            })
            .map(|(&id, _)| id)
            .collect();
        let got = index.query(w, Predicate::Intersects).unwrap().sorted_ids();
        assert_eq!(got, boxes, "{what}: filter window {w:?}");
        let wg = crate::objects::geometry::window_geometry(&w);
        let exact: Vec<u64> = oracle
            .iter()
            .filter(|(_, g)| g.intersects(&wg))
            .map(|(&id, _)| id)
            .collect();
        let got = index
            .query_refined(w, Predicate::Intersects)
            .unwrap()
            .sorted_ids();
        assert_eq!(got, exact, "{what}: refined window {w:?}");
    }
}

/// A new index in `dir` on `store` holding objects 0..60 (bulk-loaded as
/// `geoflash build --bulk` does, or inserted one by one), closed.
fn created_with_objects(dir: &Path, store: &str, bulk: bool) -> Oracle {
    let base = [
        ("store", store),
        ("page_size", "1024"),
        ("buffer", "1MiB"),
        ("checkpoint_interval", "off"),
    ];
    let opts = super::tests::spec_options(base.iter())
        .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
    let oracle: Oracle = (0..60u64).map(|id| (id, shape(id, 0))).collect();
    let index = if bulk {
        let objects: Vec<(u64, Geometry)> = oracle.iter().map(|(&id, g)| (id, g.clone())).collect();
        Index::bulk_load_objects(dir, &opts, &objects, BulkMethod::Str, 1.0).unwrap()
    } else {
        let mut index = Index::create(dir, &opts).unwrap();
        for (&id, g) in &oracle {
            index.insert_object(id, g).unwrap();
        }
        index
    };
    index.close().unwrap();
    oracle
}

/// How one checkpoint with a failing log device ended.
enum Ending {
    /// The failure came after the checkpoint's last call to the device.
    NoFault,
    /// The checkpoint failed, and the index reopened as acknowledged, at
    /// the generation the failed checkpoint named (`true`: its switch was
    /// durable) or at the one before.
    Failed(bool),
}

/// A committed session on the index in `dir`: objects inserted (their
/// heap changes spilled to the file on the way), deleted, and inserted
/// again with another shape, then the commit that acknowledges them.
fn committed_session(index: &mut Index, oracle: &mut Oracle) {
    for id in 100..130u64 {
        index.insert_object(id, &shape(id, 1)).unwrap();
        oracle.insert(id, shape(id, 1));
    }
    for id in [3u64, 17, 42, 105, 111] {
        index.delete_object(id).unwrap();
        oracle.remove(&id);
    }
    for id in [17u64, 105] {
        index.insert_object(id, &shape(id, 2)).unwrap();
        oracle.insert(id, shape(id, 2));
    }
    assert!(
        index.heap_pending(),
        "the checkpoint has heap changes to commit"
    );
    index.commit().unwrap();
}

/// One run: an index with objects and no record map, a committed session
/// of object inserts and deletes, then a checkpoint whose `at`-th write,
/// sync or trim of the log fails (`crash`: see [`Tripwire`]), an object
/// operation the failed store must refuse, the caller's `close()` (a
/// checkpoint again), then a crash: the index must reopen, read-only and
/// for writing, with every committed operation (the tree's entries, the
/// heap's objects and the refined answers together), and take changes
/// that a later close keeps.
fn checkpoint_failing_at(store: &str, bulk: bool, crash: bool, at: u64) -> Ending {
    let tmp = tempfile::tempdir().unwrap();
    let dir = &tmp.path().join("idx");
    let mut oracle = created_with_objects(dir, store, bulk);
    let mut index = Index::open(dir, Access::Write).unwrap();
    assert!(
        !index.records_in_log(),
        "an index of the Rust API has no record map"
    );
    let trip = behind_tripwire(&mut index, dir, crash);
    committed_session(&mut index, &mut oracle);
    let what = format!(
        "{store} ({}), {} at call {at} of the checkpoint",
        if bulk { "bulk-loaded" } else { "inserted" },
        if crash { "crash" } else { "failure" }
    );
    trip.arm(at);
    let first = match index.checkpoint() {
        Ok(()) => {
            assert!(
                !trip.tripped(),
                "{what}: the checkpoint succeeded through a failed device"
            );
            drop(index);
            let index = Index::open(dir, Access::Write).unwrap();
            check(&index, &oracle, &format!("{what}: no fault"));
            return Ending::NoFault;
        }
        Err(e) => e.to_string(),
    };
    // The heap committed the checkpoint's generation before the store
    // failed (the mark is in objects.dat, whatever the store names), and
    // the store keeps it staged for its next checkpoint.
    let staged = index
        .tree
        .client_log_ref()
        .and_then(|c| c.next_generation());
    assert!(staged.is_some(), "{what}: no generation staged");
    assert_eq!(
        index.objects().and_then(crate::objects::Heap::mark),
        staged,
        "{what}"
    );
    // An operation after the failure: refused by the failed store, the
    // heap unchanged (it would otherwise go to the heap's next commit).
    let late = index.insert_object(500, &shape(500, 0));
    assert!(
        late.is_err(),
        "{what}: an object inserted after the failed checkpoint ({first})"
    );
    assert!(
        !index.objects().unwrap().contains(500),
        "{what}: the refused object is in the heap"
    );
    assert!(
        index.delete_object(100).is_err(),
        "{what}: a delete after the failed checkpoint"
    );
    assert!(
        index.objects().unwrap().contains(100),
        "{what}: the refused delete reached the heap"
    );
    // The caller closes the index after the failure (a checkpoint again).
    let second = index.close().err().map(|e| e.to_string());
    let mut named = Vec::new();
    for access in [Access::Read, Access::Write, Access::Read] {
        let index = Index::open(dir, access).unwrap_or_else(|e| {
            panic!("{what}: the index does not open ({access:?}) after the failed checkpoint ({first}) and close ({second:?}): {e}")
        });
        check(&index, &oracle, &format!("{what}, reopened {access:?}"));
        named.push(index.objects().and_then(crate::objects::Heap::mark));
    }
    assert!(
        named.iter().all(|&n| n == named[0]),
        "{what}: the opens took the heap through marks {named:?}"
    );
    // The reopened index takes changes: its next checkpoint names a
    // generation of its own, whichever one the failed checkpoint left.
    let mut index = Index::open(dir, Access::Write).unwrap();
    index.insert_object(600, &shape(600, 0)).unwrap();
    oracle.insert(600, shape(600, 0));
    index.delete_object(17).unwrap();
    oracle.remove(&17);
    index.close().unwrap();
    for access in [Access::Read, Access::Write] {
        let index = Index::open(dir, access).unwrap();
        check(
            &index,
            &oracle,
            &format!("{what}, changed after and reopened {access:?}"),
        );
    }
    Ending::Failed(named[0] == staged)
}

/// A checkpoint of an index with objects and no record map, whose store
/// checkpoint fails at any write, sync or trim of the log, before or after
/// its superblock switch is durable, with the writes since the last sync
/// kept or lost: the caller's `close()` after the failure and a crash
/// leave an index that reopens, read-only and for writing, with every
/// committed operation, the heap's objects with the tree's entries, and
/// that keeps the changes made after.
///
/// It holds because the heap is append-only: its commit of generation g
/// appends g's mark after the previous one and never rewrites one, so
/// both the generation the store names when the switch was durable (g)
/// and the one it names otherwise (the previous) are marks of the file;
/// the failed checkpoint leaves g staged in the store's client log
/// (`ClientLog::next_generation`), so a later checkpoint of the process
/// names a generation above g, and the store refuses every change after
/// its failure anyway; the next open takes the heap through the mark the
/// durable checkpoint names and drops what follows it (truncated by a
/// writer before its first commit, which may name g again).
#[test]
fn a_store_checkpoint_failing_after_its_switch_keeps_the_heap_with_the_tree() {
    for store in ["efind", "fast"] {
        for bulk in [false, true] {
            for crash in [false, true] {
                let (mut failed, mut switched) = (0, 0);
                for at in 1.. {
                    match checkpoint_failing_at(store, bulk, crash, at) {
                        Ending::Failed(durable) => {
                            failed += 1;
                            switched += u32::from(durable);
                        }
                        Ending::NoFault => break,
                    }
                }
                let what = format!(
                    "{store} ({}), writes since the last sync {}",
                    if bulk { "bulk-loaded" } else { "inserted" },
                    if crash { "lost" } else { "kept" }
                );
                assert!(
                    failed >= 3,
                    "{what}: only {failed} calls of the checkpoint failed"
                );
                // Both outcomes of a failed checkpoint are reached.
                assert!(
                    switched > 0 && switched < failed,
                    "{what}: {switched} of {failed} failed checkpoints left their switch durable"
                );
                eprintln!(
                    "{what}: a checkpoint failing at each of its {failed} log calls ({switched} after its switch was durable) reopened as committed"
                );
            }
        }
    }
}

/// How [`compact_after_checkpoint_failing_at`] ended: as
/// [`Ending::NoFault`], or failed, with whether the failed checkpoint's
/// switch was durable.
fn compact_after_checkpoint_failing_at(store: &str, crash: bool, at: u64) -> Ending {
    let tmp = tempfile::tempdir().unwrap();
    let dir = &tmp.path().join("idx");
    let mut oracle = created_with_objects(dir, store, false);
    let mut index = Index::open(dir, Access::Write).unwrap();
    let trip = behind_tripwire(&mut index, dir, crash);
    committed_session(&mut index, &mut oracle);
    let what = format!(
        "{store}, {} at call {at} of the checkpoint",
        if crash { "crash" } else { "failure" }
    );
    trip.arm(at);
    if index.checkpoint().is_ok() {
        return Ending::NoFault;
    }
    let staged = index
        .tree
        .client_log_ref()
        .and_then(|c| c.next_generation());
    let heap_file = dir.join(crate::objects::OBJECTS_FILE);
    let before = std::fs::read(&heap_file).unwrap();
    let heap = index.objects.as_mut().unwrap();
    let err = heap.compact().expect_err(&format!(
        "{what}: the heap compacted after the failed checkpoint"
    ));
    assert_eq!(err.kind(), crate::ErrorKind::Io, "{what}: {err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&heap_file.display().to_string())
            && msg.contains(&format!("generation {}", staged.unwrap()))
            && msg.contains("reopened"),
        "{what}: {msg}"
    );
    // Refused again (until reopen), and nothing written.
    assert!(heap.compact().is_err(), "{what}: a second compaction");
    assert_eq!(std::fs::read(&heap_file).unwrap(), before, "{what}");
    let _ = index.close();
    // Reopened (its durable checkpoint read), the heap compacts.
    let mut index = Index::open(dir, Access::Write).unwrap_or_else(|e| panic!("{what}: {e}"));
    let named = index.objects().and_then(crate::objects::Heap::mark);
    index.checkpoint().unwrap();
    let report = index.objects.as_mut().unwrap().compact();
    let report = report.unwrap_or_else(|e| panic!("{what}: compacting after reopen: {e}"));
    assert!(
        report.bytes_after < report.bytes_before,
        "{what}: {report:?}"
    );
    check(&index, &oracle, &format!("{what}, compacted after reopen"));
    drop(index);
    for access in [Access::Read, Access::Write] {
        let index = Index::open(dir, access).unwrap_or_else(|e| panic!("{what}: {e}"));
        check(
            &index,
            &oracle,
            &format!("{what}, compacted and reopened {access:?}"),
        );
    }
    Ending::Failed(named == staged)
}

/// [`Heap::compact`](crate::objects::Heap::compact) of an index's heap
/// after a checkpoint whose store checkpoint failed at any write, sync or
/// trim of the log: refused (an error naming `objects.dat` and the
/// generation, the file unchanged) until the index is reopened, after
/// which it compacts and the index reopens with every committed
/// operation. The heap had committed the failed checkpoint's generation,
/// and compacting keeps only that mark: when the store's durable
/// checkpoint names the generation before (its switch was not durable),
/// the compacted heap has no mark of it and the index does not reopen
/// (the heap is corrupt); before the refusal, compact allowed it.
#[test]
fn the_heap_does_not_compact_after_a_failed_checkpoint_until_reopened() {
    for store in ["efind", "fast"] {
        for crash in [false, true] {
            let (mut failed, mut switched) = (0, 0);
            for at in 1.. {
                match compact_after_checkpoint_failing_at(store, crash, at) {
                    Ending::Failed(durable) => {
                        failed += 1;
                        switched += u32::from(durable);
                    }
                    Ending::NoFault => break,
                }
            }
            let what = format!("{store}, crash {crash}");
            assert!(
                failed >= 3,
                "{what}: only {failed} calls of the checkpoint failed"
            );
            assert!(
                switched > 0 && switched < failed,
                "{what}: {switched} of {failed} failed checkpoints left their switch durable"
            );
        }
    }
}
