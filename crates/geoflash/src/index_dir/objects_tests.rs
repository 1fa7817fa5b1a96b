//! The object heap kept with the tree across crashes (`objects.rs`): random
//! `insert_object` and `delete_object` sequences, commits and checkpoints,
//! then a crash (the index dropped without closing: what its files were
//! given stays, what it held in memory is lost) at an operation boundary
//! or inside a checkpoint (after the heap's commit, after the store's
//! checkpoint too). Reopened (read-only first, then for writing), the tree
//! and the heap hold the same objects with the geometries of one prefix
//! of the operations, holding every acknowledged one (the last checkpoint
//! exactly for the plain store), and refined queries answer as brute force
//! on that prefix.
use std::collections::BTreeMap;
use std::path::Path;

use geo::{polygon, Intersects};
use rand::{Rng, SeedableRng};

use super::*;
use crate::engine::Access;
use crate::geom::Rect;
use crate::index::query::Predicate;
use crate::objects::Geometry;

/// The objects of a prefix of the operations: id → geometry.
type State = BTreeMap<u64, Geometry>;

fn domain() -> Rect {
    Rect::from_valid(0.0, 0.0, 100.0, 100.0)
}

/// A thin triangle for object `id` in its `version` (a reinserted id
/// gets another shape, so a stale geometry is seen).
fn shape(id: u64, version: u64) -> Geometry {
    let x = ((id * 7 + version * 3) % 90) as f64;
    let y = ((id * 13 + version * 5) % 90) as f64;
    polygon![(x: x, y: y), (x: x + 6.0, y: y + 1.0), (x: x + 1.0, y: y + 5.0), (x: x, y: y)].into()
}

/// A configuration of the campaign: store settings, and whether every
/// operation is acknowledged (durability `sync`) or only commits are.
struct Config {
    settings: &'static [(&'static str, &'static str)],
    every_op_acked: bool,
    /// The store writes in place: a crash returns exactly to the last
    /// acknowledged state.
    exact: bool,
}

const CONFIGS: [Config; 5] = [
    Config {
        settings: &[("store", "efind"), ("durability", "sync"), ("checkpoint_interval", "off")],
        every_op_acked: true,
        exact: false,
    },
    Config {
        settings: &[("store", "efind"), ("checkpoint_interval", "off")],
        every_op_acked: false,
        exact: false,
    },
    Config {
        settings: &[("store", "fast"), ("durability", "sync"), ("checkpoint_interval", "off")],
        every_op_acked: true,
        exact: false,
    },
    Config {
        settings: &[("store", "plain")],
        every_op_acked: false,
        exact: true,
    },
    // Saved whole at checkpoints (`device.img`).
    Config {
        settings: &[("store", "plain"), ("device", "flashsim:preset=seed-tc58")],
        every_op_acked: false,
        exact: true,
    },
];

/// Where the crash comes.
#[derive(Debug, Clone, Copy)]
enum Crash {
    /// Between two operations.
    Between,
    /// In a checkpoint, after the heap's commit (its mark written).
    AfterHeapCommit,
    /// In a checkpoint, after the store's checkpoint too (before the
    /// journal's commit and the map's rename).
    AfterStoreCheckpoint,
}

fn create(dir: &Path, config: &Config) -> Index {
    let base = [("page_size", "1024"), ("buffer", "1MiB")];
    let opts = super::tests::spec_options(base.iter().chain(config.settings))
        .with_domain_of([domain()].iter());
    Index::create(dir, &opts).unwrap()
}

/// Runs one case: random operations on a new index in `dir`, a crash,
/// and returns the states after each operation and how many were
/// acknowledged.
fn run_case(dir: &Path, config: &Config, seed: u64) -> (Vec<State>, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut index = create(dir, config);
    let mut state = State::new();
    let mut states = vec![state.clone()];
    let mut acked = 0;
    let mut version = 0u64;
    let ops = rng.gen_range(10..60);
    for _ in 0..ops {
        let id = rng.gen_range(0..30u64);
        if state.remove(&id).is_some() {
            index.delete_object(id).unwrap();
        } else {
            version += 1;
            let g = shape(id, version);
            index.insert_object(id, &g).unwrap();
            state.insert(id, g);
        }
        states.push(state.clone());
        if config.every_op_acked {
            acked = states.len() - 1;
        }
        match rng.gen_range(0..20) {
            0 | 1 => {
                index.commit().unwrap();
                acked = states.len() - 1;
            }
            2 => {
                index.checkpoint().unwrap();
                acked = states.len() - 1;
            }
            _ => {}
        }
    }
    let crash = [Crash::Between, Crash::AfterHeapCommit, Crash::AfterStoreCheckpoint][rng.gen_range(0..3)];
    match crash {
        Crash::Between => {}
        Crash::AfterHeapCommit => {
            index.before_store_checkpoint().unwrap();
        }
        Crash::AfterStoreCheckpoint => {
            index.before_store_checkpoint().unwrap();
            index.tree.checkpoint().unwrap();
        }
    }
    drop(index);
    (states, acked)
}

/// The objects `index` holds: the tree's ids, each with the heap's
/// geometry; the tree and the heap must hold the same ids.
fn found(index: &Index, what: &str) -> State {
    let mut tree_ids = index
        .query(Rect::from_valid(-1.0, -1.0, 101.0, 101.0), Predicate::Intersects)
        .unwrap()
        .sorted_ids();
    tree_ids.dedup();
    let heap = index.objects();
    let heap_ids = heap.map(crate::objects::Heap::ids).unwrap_or_default();
    assert_eq!(tree_ids, heap_ids, "{what}: the tree's ids and the heap's differ");
    heap_ids
        .into_iter()
        .map(|id| (id, heap.unwrap().get(id).unwrap().unwrap()))
        .collect()
}

/// Checks a reopened index against the states: one prefix holding every
/// acknowledged operation (exactly the acknowledged one when `exact`),
/// refined queries as brute force on it. Returns that prefix's state.
fn check(index: &Index, states: &[State], acked: usize, exact: bool, what: &str) -> State {
    let got = found(index, what);
    let k = (acked..states.len())
        .find(|&k| states[k] == got)
        .unwrap_or_else(|| panic!("{what}: the objects are no prefix of the operations from {acked} on: {got:?}"));
    assert!(!exact || k == acked, "{what}: prefix {k}, acknowledged {acked}");
    for w in [Rect::from_valid(10.0, 10.0, 40.0, 30.0), Rect::from_valid(50.0, 0.0, 95.0, 95.0)] {
        let wg = crate::objects::geometry::window_geometry(&w);
        let want: Vec<u64> = got
            .iter()
            .filter(|(_, g)| g.intersects(&wg))
            .map(|(&id, _)| id)
            .collect();
        if got.is_empty() {
            continue;
        }
        let refined = index.query_refined(w, Predicate::Intersects).unwrap().sorted_ids();
        assert_eq!(refined, want, "{what}: refined window {w:?}");
    }
    got
}

#[test]
fn crashes_keep_the_object_heap_and_the_tree_together() {
    let cases = (crate::testenv::crash_cases() / 8).max(8);
    for (c, config) in CONFIGS.iter().enumerate() {
        for case in 0..cases {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            let seed = 1000 * c as u64 + case;
            let (states, acked) = run_case(dir, config, seed);
            let what = format!("{:?} seed {seed}", config.settings);
            let ro = Index::open(dir, Access::Read).unwrap();
            let seen = check(&ro, &states, acked, config.exact, &format!("{what}, read-only"));
            drop(ro);
            let mut index = Index::open(dir, Access::Write).unwrap();
            let recovered = check(&index, &states, acked, config.exact, &what);
            assert_eq!(seen, recovered, "{what}: the reader saw another state");
            // The recovered index takes changes, and keeps them.
            let id = 1_000 + seed;
            index.insert_object(id, &shape(id, 0)).unwrap();
            if let Some(&first) = recovered.keys().next() {
                index.delete_object(first).unwrap();
            }
            index.close().unwrap();
            let index = Index::open(dir, Access::Read).unwrap();
            let mut want = recovered.clone();
            want.insert(id, shape(id, 0));
            if let Some(&first) = recovered.keys().next() {
                want.remove(&first);
            }
            assert_eq!(found(&index, &what), want, "{what}: after recovery and more changes");
        }
    }
}

/// Writes by rectangle on an index with an object heap keep the two
/// together: an object's box is its geometry's, so moving it by
/// rectangle is refused (it used to move the box and keep the geometry,
/// and refined queries missed it), inserting its id again is refused, a
/// delete by rectangle deletes its geometry too, and an entry inserted by
/// rectangle is its box in refined queries (it used to be an error).
#[test]
fn writes_by_rectangle_keep_the_heap_and_the_tree_together() {
    for config in &CONFIGS {
        let tmp = tempfile::tempdir().unwrap();
        let mut index = create(tmp.path(), config);
        let what = format!("{:?}", config.settings);
        let tri = shape(1, 0);
        index.insert_object(1, &tri).unwrap();
        let bbox = crate::objects::geometry::bounding_rect(&tri).unwrap();
        let far = Rect::from_valid(80.0, 80.0, 81.0, 81.0);
        for e in [
            index.update(1, bbox, far).unwrap_err(),
            index.update_by_id(1, far).unwrap_err(),
        ] {
            assert!(e.is_user_error() && e.to_string().contains("object 1 has an exact geometry"), "{what}: {e}");
        }
        let e = index.insert(1, far).unwrap_err();
        assert!(e.to_string().contains("already in the index"), "{what}: {e}");
        // a box entry beside the objects: refined as its box
        index.insert(2, far).unwrap();
        index.commit().unwrap();
        let hits = |index: &Index, w: Rect| index.query_refined(w, Predicate::Intersects).unwrap().sorted_ids();
        assert_eq!(hits(&index, Rect::from_valid(79.0, 79.0, 80.5, 80.5)), vec![2], "{what}");
        assert_eq!(hits(&index, bbox), vec![1], "{what}");
        // a delete by rectangle deletes the object's geometry with it
        index.delete(1, bbox).unwrap();
        assert!(!index.objects().unwrap().contains(1), "{what}");
        index.insert_object(1, &shape(1, 1)).unwrap();
        index.close().unwrap();
        let index = Index::open(tmp.path(), Access::Read).unwrap();
        assert_eq!(found_with_boxes(&index), vec![1, 2], "{what}");
        assert_eq!(index.objects().unwrap().get(1).unwrap(), Some(shape(1, 1)), "{what}");
    }
}

/// Every id of the tree.
fn found_with_boxes(index: &Index) -> Vec<u64> {
    index
        .query(Rect::from_valid(-1.0, -1.0, 101.0, 101.0), Predicate::Intersects)
        .unwrap()
        .sorted_ids()
}

/// A line of `points` vertices (16 bytes of WKB each) for object `id`.
fn long_line(id: u64, points: usize) -> Geometry {
    let base = (id % 80) as f64;
    let coords: Vec<geo::Coord<f64>> = (0..points)
        .map(|i| geo::coord! { x: base + (i % 100) as f64 * 0.01, y: base + (i / 100) as f64 * 0.001 })
        .collect();
    geo::LineString::new(coords).into()
}

/// A geometry larger than the store's log carries with one operation is
/// refused before the tree changes (it used to fail at the commit, after
/// the tree had kept it: the tree and the heap then disagreed for good),
/// and a batch of geometries that together pass a log record is logged
/// in several groups (it used to fail at its end).
#[test]
fn large_geometries_are_refused_before_the_tree_changes_and_batches_of_them_log_in_parts() {
    for config in CONFIGS.iter().filter(|c| !c.exact) {
        let tmp = tempfile::tempdir().unwrap();
        let what = format!("{:?}", config.settings);
        let mut index = create(tmp.path(), config);
        index.insert_object(1, &shape(1, 0)).unwrap();
        index.commit().unwrap();
        let limit = index.tree.client_log_ref().unwrap().max_op_bytes();
        let huge = long_line(2, limit / 16 + 100);
        let e = index.insert_object(2, &huge).unwrap_err();
        assert!(e.is_user_error() && e.to_string().contains("more than the store's log carries"), "{what}: {e}");
        // Nothing changed, and the index goes on.
        assert_eq!(found_with_boxes(&index), vec![1], "{what}");
        index.insert_object(3, &shape(3, 0)).unwrap();
        // A batch whose geometries together pass the log's room.
        let room = index.tree.client_log_ref().unwrap().room();
        let each = limit / 16 / 2;
        let count = (room as usize / (each * 16)).max(1) * 3;
        index
            .batch(BatchDurability::AtEnd, |index| {
                for id in 10..10 + count as u64 {
                    index.insert_object(id, &long_line(id, each))?;
                }
                Ok(())
            })
            .unwrap();
        drop(index);
        let index = Index::open(tmp.path(), Access::Write).unwrap();
        let got = found(&index, &what);
        assert_eq!(got.len(), 2 + count, "{what}");
        assert_eq!(got.get(&12), Some(&long_line(12, each)), "{what}");
    }
}

/// A crash inside the checkpoint that ends an unlogged batch (the build
/// of an empty eFIND index), after the heap's commit: a reader and a
/// writer both see the empty index (a reader, which opens no client log
/// for a log whose checkpoints named no generation, used to see the
/// heap's objects without the tree's).
#[test]
fn a_crash_ending_an_unlogged_batch_leaves_readers_and_writers_the_empty_index() {
    let tmp = tempfile::tempdir().unwrap();
    let mut index = create(tmp.path(), &CONFIGS[1]);
    let batch = index.begin_batch(BatchDurability::AtEnd).unwrap();
    for id in 0..20 {
        index.insert_object(id, &shape(id, 0)).unwrap();
    }
    index.before_store_checkpoint().unwrap();
    drop(batch);
    drop(index);
    let ro = Index::open(tmp.path(), Access::Read).unwrap();
    assert_eq!(found(&ro, "read-only"), State::new());
    drop(ro);
    let index = Index::open(tmp.path(), Access::Write).unwrap();
    assert_eq!(found(&index, "writable"), State::new());
}

/// An object whose insertion fails in the tree (its id is there already,
/// inserted by rectangle) leaves no geometry behind: not in the heap, not
/// in the store's log for the next operation to carry, so that neither
/// the open index nor a reopened one (closed, or after a crash) refines
/// the entry with a geometry whose box is not its own; a deleted object
/// is refined as nothing (gone) and an id inserted again by rectangle
/// after its object was deleted is its box.
#[test]
fn a_failed_object_insertion_leaves_no_geometry_and_a_deleted_one_none() {
    for config in &CONFIGS {
        for crash in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let mut index = create(tmp.path(), config);
            let what = format!("{:?} crash {crash}", config.settings);
            let boxed = Rect::from_valid(80.0, 80.0, 81.0, 81.0);
            index.insert(5, boxed).unwrap();
            // A triangle over the box's corner: a different box.
            assert!(index.insert_object(5, &shape(5, 0)).is_err(), "{what}");
            assert!(!index.objects().is_some_and(|h| h.contains(5)), "{what}");
            index.insert_object(6, &shape(6, 0)).unwrap();
            index.insert_object(7, &shape(7, 0)).unwrap();
            index.delete_object(7).unwrap();
            // 7 again, by rectangle: its box, not its old geometry.
            let seven = Rect::from_valid(60.0, 60.0, 61.0, 61.0);
            index.insert(7, seven).unwrap();
            index.commit().unwrap();
            let check = |index: &Index, when: &str| {
                let heap = index.objects().unwrap();
                assert_eq!(heap.ids(), vec![6], "{what} {when}");
                let hits = |w: Rect| index.query_refined(w, Predicate::Intersects).unwrap().sorted_ids();
                assert_eq!(hits(boxed), vec![5], "{what} {when}");
                assert_eq!(hits(seven), vec![7], "{what} {when}");
                let six = crate::objects::geometry::bounding_rect(&shape(6, 0)).unwrap();
                assert_eq!(hits(six), vec![6], "{what} {when}");
                let contained = index.query_refined(Rect::from_valid(59.0, 59.0, 62.0, 62.0), Predicate::Contains);
                assert_eq!(contained.unwrap().sorted_ids(), vec![7], "{what} {when}");
            };
            check(&index, "open");
            if crash {
                drop(index);
            } else {
                index.close().unwrap();
            }
            let index = Index::open(tmp.path(), Access::Write).unwrap();
            check(&index, "reopened");
        }
    }
}
