//! The object heap recorded in the manifest (`objects.rs`,
//! [`Manifest::objects`](crate::manifest::Manifest::objects) and
//! [`Manifest::objects_mark`](crate::manifest::Manifest::objects_mark)):
//!
//! - an index whose manifest says it has a heap does not open, read-only
//!   or writable, when `objects.dat` is missing (it opened as an index
//!   without a heap, its objects answered as their boxes, and its next
//!   object insert created an empty heap), on eFIND, FAST and the plain
//!   store; the manifest says so from the heap's creation, before any
//!   object is durable, and a heap the manifest does not name (an older
//!   manifest, or a crash between the heap's creation and the manifest's
//!   write) opens and is recorded by the next writable open;
//! - with `journal = off` (whose checkpoints name no generation of the
//!   heap) the manifest records the generation of the heap's last
//!   commit: a heap cut back to an earlier mark is refused naming
//!   `objects.dat` (it opened with the older objects).
use std::path::Path;

use geo::{polygon, Intersects};

use super::*;
use crate::geom::Rect;
use crate::index::query::Predicate;
use crate::manifest::{Access, Manifest, MANIFEST_FILE};
use crate::objects::{Geometry, OBJECTS_FILE};
use crate::Error;

/// A thin triangle for object `id`.
fn shape(id: u64) -> Geometry {
    let x = ((id * 7) % 90) as f64;
    let y = ((id * 13) % 90) as f64;
    polygon![(x: x, y: y), (x: x + 6.0, y: y + 1.0), (x: x + 1.0, y: y + 5.0), (x: x, y: y)].into()
}

/// The stores of the tests, each on a file device: eFIND and FAST with
/// their logs, the plain store under its rollback journal, and the plain
/// store without it.
const STORES: [&[(&str, &str)]; 4] = [
    &[
        ("store", "efind"),
        ("durability", "sync"),
        ("checkpoint_interval", "off"),
    ],
    &[
        ("store", "fast"),
        ("durability", "sync"),
        ("checkpoint_interval", "off"),
    ],
    &[("store", "plain")],
    &[("store", "plain"), ("journal", "off")],
];

fn create(dir: &Path, settings: &[(&str, &str)]) -> Index {
    let base = [
        ("page_size", "1024"),
        ("buffer", "1MiB"),
        ("device", "file?direct=false"),
    ];
    let opts = super::tests::spec_options(base.iter().chain(settings))
        .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
    Index::create(dir, &opts).unwrap()
}

/// The manifest's text as it is on disk.
fn manifest_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap()
}

/// Checks that `index` holds objects `ids` (tree and heap), with refined
/// answers as brute force on their shapes.
fn holds(index: &Index, ids: &[u64], what: &str) {
    let heap = index
        .objects()
        .unwrap_or_else(|| panic!("{what}: no object heap"));
    assert_eq!(heap.ids(), ids, "{what}: the heap's ids");
    assert_eq!(index.len(), ids.len() as u64, "{what}: the tree's count");
    for w in [
        Rect::from_valid(0.0, 0.0, 100.0, 100.0),
        Rect::from_valid(20.0, 10.0, 60.0, 50.0),
    ] {
        let wg = crate::objects::geometry::window_geometry(&w);
        let want: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|&id| shape(id).intersects(&wg))
            .collect();
        let got = index
            .query_refined(w, Predicate::Intersects)
            .unwrap()
            .sorted_ids();
        assert_eq!(got, want, "{what}: refined window {w:?}");
    }
}

/// An error naming `objects.dat` (a corruption error, never another
/// index) for both opens of `dir`, which leave `objects.dat` as it was.
fn refused(dir: &Path, what: &str) {
    let before = std::fs::read(dir.join(OBJECTS_FILE)).ok();
    for access in [Access::Read, Access::Write] {
        let e = Index::open(dir, access).map(|_| ()).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e, Error::Corrupt { .. }) && msg.contains(OBJECTS_FILE),
            "{what}, {access:?}: {msg}"
        );
        assert_eq!(
            std::fs::read(dir.join(OBJECTS_FILE)).ok(),
            before,
            "{what}, {access:?}"
        );
    }
}

/// An index with objects 0..20 checkpointed and 20..25 inserted after
/// (acknowledged by the log's syncs on eFIND and FAST, by the close's
/// checkpoint on the plain store).
fn with_objects(dir: &Path, settings: &[(&str, &str)]) -> Vec<u64> {
    let mut index = create(dir, settings);
    for id in 0..20 {
        index.insert_object(id, &shape(id)).unwrap();
    }
    index.checkpoint().unwrap();
    for id in 20..25 {
        index.insert_object(id, &shape(id)).unwrap();
    }
    index.delete_object(4).unwrap();
    index.close().unwrap();
    (0..25).filter(|&id| id != 4).collect()
}

#[test]
fn an_index_whose_manifest_names_a_heap_does_not_open_without_it() {
    for settings in STORES {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let what = format!("{settings:?}");
        let ids = with_objects(&dir, settings);
        assert!(manifest_text(&dir).contains("\"objects\": true"), "{what}");
        let away = tmp.path().join("objects.away");
        std::fs::rename(dir.join(OBJECTS_FILE), &away).unwrap();
        refused(&dir, &what);
        assert!(
            !dir.join(OBJECTS_FILE).exists(),
            "{what}: nothing created in its place"
        );
        std::fs::rename(&away, dir.join(OBJECTS_FILE)).unwrap();
        holds(&Index::open(&dir, Access::Read).unwrap(), &ids, &what);
        let mut index = Index::open(&dir, Access::Write).unwrap();
        holds(&index, &ids, &what);
        index.insert_object(30, &shape(30)).unwrap();
        index.close().unwrap();
    }
}

/// The manifest names the heap as soon as it is created, before the first
/// object's operation: an object acknowledged by the log's sync (eFIND,
/// FAST) and then a crash, the heap then deleted, is refused.
#[test]
fn the_manifest_names_the_heap_before_its_first_object_is_durable() {
    for settings in STORES {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let what = format!("{settings:?}");
        let mut index = create(&dir, settings);
        assert!(!manifest_text(&dir).contains("objects"), "{what}");
        index.insert_object(7, &shape(7)).unwrap();
        assert!(manifest_text(&dir).contains("\"objects\": true"), "{what}");
        // A crash: what the index held in memory is lost.
        drop(index);
        std::fs::remove_file(dir.join(OBJECTS_FILE)).unwrap();
        refused(&dir, &what);
    }
}

/// A heap the manifest does not name (a manifest written before the
/// field, or a crash between the heap's creation and the manifest's
/// write) opens read-only as before and is recorded by the next writable
/// open; such a manifest without its heap opens without one (nothing
/// tells it had one).
#[test]
fn a_heap_the_manifest_does_not_name_opens_and_is_recorded() {
    for settings in STORES {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let what = format!("{settings:?}");
        let ids = with_objects(&dir, settings);
        let older = Manifest {
            objects: false,
            objects_mark: None,
            ..Manifest::load(&dir).unwrap()
        };
        older.store(&dir).unwrap();
        holds(&Index::open(&dir, Access::Read).unwrap(), &ids, &what);
        assert!(
            !manifest_text(&dir).contains("objects"),
            "{what}: a reader writes nothing"
        );
        let index = Index::open(&dir, Access::Write).unwrap();
        holds(&index, &ids, &what);
        assert!(manifest_text(&dir).contains("\"objects\": true"), "{what}");
        drop(index);
        // Recorded: from now on the heap is required.
        let away = tmp.path().join("objects.away");
        std::fs::rename(dir.join(OBJECTS_FILE), &away).unwrap();
        refused(&dir, &what);
        std::fs::rename(&away, dir.join(OBJECTS_FILE)).unwrap();
        // The crash between the heap's creation and the manifest's write,
        // in a new index: its first mark is the generation it was created
        // under, the manifest without the field.
        let fresh = tmp.path().join("fresh");
        drop(create(&fresh, settings));
        crate::objects::Heap::create(&fresh.join(OBJECTS_FILE), 0).unwrap();
        assert_eq!(
            Index::open(&fresh, Access::Read)
                .unwrap()
                .objects()
                .unwrap()
                .len(),
            0,
            "{what}"
        );
        let mut index = Index::open(&fresh, Access::Write).unwrap();
        assert!(
            manifest_text(&fresh).contains("\"objects\": true"),
            "{what}"
        );
        index.insert_object(3, &shape(3)).unwrap();
        index.close().unwrap();
        holds(&Index::open(&fresh, Access::Read).unwrap(), &[3], &what);
        // An older manifest without its heap: nothing tells it had one.
        let bare = Manifest {
            objects: false,
            objects_mark: None,
            ..Manifest::load(&fresh).unwrap()
        };
        bare.store(&fresh).unwrap();
        std::fs::remove_file(fresh.join(OBJECTS_FILE)).unwrap();
        assert!(
            Index::open(&fresh, Access::Read)
                .unwrap()
                .objects()
                .is_none(),
            "{what}"
        );
    }
}

/// `journal = off`: the manifest records the generation of the heap's
/// last commit, and a heap cut back at an earlier commit's mark is
/// refused naming `objects.dat`; a heap whose last commit is newer than
/// the manifest's (a crash between the heap's commit and the manifest's
/// write) opens, and the writable open records its mark.
#[test]
fn journal_off_a_heap_cut_back_to_an_earlier_mark_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let mut index = create(&dir, STORES[3]);
    for id in 0..10 {
        index.insert_object(id, &shape(id)).unwrap();
    }
    index.checkpoint().unwrap();
    let heap = index.objects().unwrap();
    let (first_mark, first_end) = (heap.mark().unwrap(), heap.file_bytes());
    assert_eq!(Manifest::load(&dir).unwrap().objects_mark, Some(first_mark));
    for id in 10..20 {
        index.insert_object(id, &shape(id)).unwrap();
    }
    index.delete_object(3).unwrap();
    index.close().unwrap();
    let ids: Vec<u64> = (0..20).filter(|&id| id != 3).collect();
    let last_mark = Manifest::load(&dir).unwrap().objects_mark.unwrap();
    assert!(last_mark > first_mark);
    let full = std::fs::read(dir.join(OBJECTS_FILE)).unwrap();
    // The heap cut at the first commit's mark: its objects and boxes
    // answered before, without an error.
    std::fs::write(dir.join(OBJECTS_FILE), &full[..first_end as usize]).unwrap();
    refused(&dir, "cut at the first mark");
    let msg = Index::open(&dir, Access::Read)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!("generation {first_mark}"))
            && msg.contains(&format!("generation {last_mark}")),
        "{msg}"
    );
    std::fs::write(dir.join(OBJECTS_FILE), &full).unwrap();
    holds(&Index::open(&dir, Access::Read).unwrap(), &ids, "whole");
    // The manifest one commit behind the heap.
    let behind = Manifest {
        objects_mark: Some(first_mark),
        ..Manifest::load(&dir).unwrap()
    };
    behind.store(&dir).unwrap();
    holds(
        &Index::open(&dir, Access::Read).unwrap(),
        &ids,
        "manifest behind, read-only",
    );
    assert_eq!(Manifest::load(&dir).unwrap().objects_mark, Some(first_mark));
    let index = Index::open(&dir, Access::Write).unwrap();
    holds(&index, &ids, "manifest behind");
    assert_eq!(Manifest::load(&dir).unwrap().objects_mark, Some(last_mark));
}

/// A bulk load of objects builds its heap in the staging directory and
/// publishes it with the index: the heap the returned index holds is then
/// `objects.dat` of the published directory, in [`crate::objects::Heap::path`]
/// and in the errors of its records (it named `.NAME.building/objects.dat`,
/// a directory that no longer exists).
#[test]
fn a_bulk_loaded_heap_is_named_where_the_index_was_published() {
    let root = tempfile::tempdir().unwrap();
    for (i, settings) in STORES.iter().enumerate() {
        let dir = root.path().join(format!("bulk{i}"));
        let base = [
            ("page_size", "1024"),
            ("buffer", "1MiB"),
            ("device", "file?direct=false"),
        ];
        let opts = super::tests::spec_options(base.iter().chain(settings.iter()))
            .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
        let objects: Vec<(u64, Geometry)> = (0..40).map(|id| (id, shape(id))).collect();
        let index =
            Index::bulk_load_objects(&dir, &opts, &objects, crate::index::BulkMethod::Str, 1.0)
                .unwrap();
        let heap = dir.join(OBJECTS_FILE);
        assert_eq!(index.objects().unwrap().path(), heap, "{settings:?}");
        // Damage every record's bytes past the file's header: a refined
        // query's error names the published file.
        let mut bytes = std::fs::read(&heap).unwrap();
        for b in bytes.iter_mut().skip(64) {
            *b ^= 0x5a;
        }
        std::fs::write(&heap, &bytes).unwrap();
        let e = index
            .query_refined(
                Rect::from_valid(0.0, 0.0, 100.0, 100.0),
                Predicate::Intersects,
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&heap.display().to_string()) && !e.contains(".building"),
            "{settings:?}: {e}"
        );
    }
}
