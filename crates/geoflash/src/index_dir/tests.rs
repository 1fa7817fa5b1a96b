//! Tests of [`Index`]: creation, reopening (read-only and for writing),
//! the logged stores' logs (`log.dat` or a device region) and recovery,
//! atomic builds and adoption of killed ones, the checks of bad options,
//! simulated devices, the object heap and the xBR+-tree against brute force.
use std::collections::BTreeSet;
use std::path::Path;

use super::*;
use crate::config::{StoreKind, StoreSpec, StructureSpec, TreeSpec};
use crate::geom::{Point, Rect};
use crate::index::query::Predicate;
use crate::index::tests::ids;
use crate::index::{BulkMethod, IndexKind, RTree};
use crate::manifest::Access;
use crate::staging::Staging;
use crate::store::efind::EfindConfig;
use crate::store::fast::FastConfig;
use crate::Error;

fn rect(i: u64) -> Rect {
    let x = (i * 7919 % 1000) as f64;
    let y = (i * 104_729 % 997) as f64;
    Rect::new(x, y, x + 5.0, y + 5.0).unwrap()
}

/// Index options from `settings` (keys spelled as keys), in order.
pub(super) fn spec_options<'a>(
    settings: impl IntoIterator<Item = &'a (&'a str, &'a str)>,
) -> IndexOptions {
    let mut spec = crate::IndexSpec::new(crate::KeyStyle::Key);
    for (k, v) in settings {
        spec.set(k, v).unwrap();
    }
    spec.options().unwrap()
}

fn file_opts() -> IndexOptions {
    IndexOptions {
        page_size: 1024,
        device: "file?direct=false".parse().unwrap(),
        ..IndexOptions::default()
    }
}

/// The default options on a simulated flash device (the seed paper's SSD).
fn flash_opts() -> IndexOptions {
    IndexOptions {
        device: "flashsim:preset=seed-tc58".parse().unwrap(),
        ..IndexOptions::default()
    }
}

/// [`file_opts`] with a store of `kind` and `buffer_bytes` of memory.
fn file_opts_with(kind: StoreKind, buffer_bytes: usize) -> IndexOptions {
    IndexOptions {
        store: StoreSpec::of_kind(kind, buffer_bytes),
        ..file_opts()
    }
}

#[test]
fn create_close_reopen_read_only_answers_identically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let mut idx = Index::create(&path, &file_opts()).unwrap();
    for i in 0..2000 {
        idx.insert(i, rect(i)).unwrap();
    }
    let window = Rect::new(100.0, 100.0, 400.0, 300.0).unwrap();
    let before = idx
        .query(window, Predicate::Intersects)
        .unwrap()
        .sorted_ids();
    assert!(!before.is_empty());
    idx.close().unwrap();

    let ro = Index::open(&path, Access::Read).unwrap();
    assert_eq!(ro.len(), 2000);
    let after = ro
        .query(window, Predicate::Intersects)
        .unwrap()
        .sorted_ids();
    assert_eq!(before, after);
    ro.tree().unwrap().check().unwrap();
    // a second reader shares; a writer is refused while readers hold it
    let ro2 = Index::open(&path, Access::Read).unwrap();
    assert!(Index::open(&path, Access::Write)
        .unwrap_err()
        .to_string()
        .contains("locked"));
    drop(ro2);
    let mut ro = ro;
    assert!(ro
        .insert(9999, rect(1))
        .unwrap_err()
        .to_string()
        .contains("read-only"));
    drop(ro);

    let mut w = Index::open(&path, Access::Write).unwrap();
    w.delete(5, rect(5)).unwrap();
    w.close().unwrap();
    assert_eq!(Index::open(&path, Access::Read).unwrap().len(), 1999);
}

#[test]
fn logged_indexes_reopen_with_the_same_answers_and_write_less() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    for (name, kind) in [
        ("efind", StoreKind::Efind),
        ("plain", StoreKind::Plain),
        ("fast", StoreKind::Fast),
    ] {
        let opts = file_opts_with(kind, 64 * 1024);
        let path = dir.path().join(name);
        let mut idx = Index::create(&path, &opts).unwrap();
        for i in 0..3000 {
            idx.insert(i, rect(i * 7 % 3001)).unwrap();
        }
        for i in (0..3000).step_by(3) {
            idx.delete(i, rect(i * 7 % 3001)).unwrap();
        }
        idx.checkpoint().unwrap();
        written.push(idx.device().stats().io.pages_written);
        let window = Rect::new(200.0, 100.0, 700.0, 600.0).unwrap();
        let a = idx
            .query(window, Predicate::Intersects)
            .unwrap()
            .sorted_ids();
        idx.close().unwrap();
        let ro = Index::open(&path, Access::Read).unwrap();
        assert_eq!(ro.len(), 2000);
        ro.tree().unwrap().check().unwrap();
        let b = ro
            .query(window, Predicate::Intersects)
            .unwrap()
            .sorted_ids();
        assert_eq!(a, b, "{name}");
    }
    assert!(
        written[0] < written[1] && written[2] < written[1],
        "eFIND wrote {} pages, plain {}, FAST {}",
        written[0],
        written[1],
        written[2]
    );
}

/// The stores with a log.
const LOGGED_KINDS: [StoreKind; 2] = [StoreKind::Efind, StoreKind::Fast];

/// A store with a log (eFIND or FAST): 16 KiB of memory, a 256 KiB log.
fn logged_opts(kind: StoreKind, durability: crate::store::log::Durability) -> IndexOptions {
    let buffer = 16 * 1024;
    let mut store = match kind {
        StoreKind::Efind | StoreKind::Fast => StoreSpec::of_kind(kind, buffer),
        StoreKind::Plain | StoreKind::Memory => StoreSpec::plain(buffer),
    };
    match &mut store {
        StoreSpec::Efind(s) => {
            s.efind.durability = durability;
            s.efind.log_capacity = 256 * 1024;
        }
        StoreSpec::Fast(s) => {
            s.fast.durability = durability;
            s.fast.log_capacity = 256 * 1024;
        }
        StoreSpec::Plain(_) | StoreSpec::Memory(_) => {}
    }
    IndexOptions {
        store,
        ..file_opts()
    }
}

fn ids_in_all(idx: &Index) -> Vec<u64> {
    let all = Rect::new(-1e9, -1e9, 1e9, 1e9).unwrap();
    idx.query(all, Predicate::Intersects).unwrap().sorted_ids()
}

tests_for!(log_dat_grows_with_what_the_log_holds_not_with_the_memory_budget:
    efind_log_dat_grows_with_what_the_log_holds_not_with_the_memory_budget => StoreKind::Efind,
    fast_log_dat_grows_with_what_the_log_holds_not_with_the_memory_budget => StoreKind::Fast,
);

/// `log.dat` is sized for the memory budget (4 x 64 MiB here), and its
/// regions used to lie one after the other: once a restart or a checkpoint
/// had moved the log to its second region, the file of a small index was
/// longer than a whole region (4.3 GB at the default budget, sparse but
/// copied whole by tools that do not keep holes, such as Python's
/// `shutil.copytree`). With interleaved regions it stays near what the log
/// holds, through closes, reopens and a crash's recovery.
fn log_dat_grows_with_what_the_log_holds_not_with_the_memory_budget(kind: StoreKind) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let mut idx = Index::create(&path, &file_opts_with(kind, 64 << 20)).unwrap();
    for i in 0..2000 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.close().unwrap();
    for round in 0..3u64 {
        let mut idx = Index::open(&path, Access::Write).unwrap();
        for i in 0..200 {
            let id = 10_000 + round * 1000 + i;
            idx.insert(id, rect(id)).unwrap();
        }
        if round == 1 {
            // A crash: the next open recovers from the log.
            drop(idx);
        } else {
            idx.close().unwrap();
        }
    }
    // The crashed round keeps what its group commit made durable.
    let idx = Index::open(&path, Access::Read).unwrap();
    assert!((2400..=2600).contains(&idx.len()), "{}", idx.len());
    drop(idx);
    let len = std::fs::metadata(path.join(LOG_FILE)).unwrap().len();
    assert!(len <= 4 << 20, "{kind:?}: log.dat is {len} bytes long");
}

tests_for!(log_in_log_dat_recovers_an_index_closed_without_checkpoint:
    efind_log_in_log_dat_recovers_an_index_closed_without_checkpoint => StoreKind::Efind,
    fast_log_in_log_dat_recovers_an_index_closed_without_checkpoint => StoreKind::Fast,
);

fn log_in_log_dat_recovers_an_index_closed_without_checkpoint(kind: StoreKind) {
    use crate::store::log::Durability;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let mut idx = Index::create(&path, &logged_opts(kind, Durability::Sync)).unwrap();
    assert!(path.join(LOG_FILE).is_file());
    for i in 0..1500 {
        idx.insert(i, rect(i)).unwrap();
    }
    for i in (0..1500).step_by(5) {
        idx.delete(i, rect(i)).unwrap();
    }
    let last = idx.last_committed_op().unwrap();
    assert_eq!(
        idx.durable_op(),
        Some(last),
        "sync: every commit is durable"
    );
    let log_io = idx.log_device().unwrap().stats().io.pages_written;
    assert!(log_io > 0);
    let s = idx.stats("build");
    assert!(s.io.pages_written >= log_io + idx.device().stats().io.pages_written);
    // The manifest records the durability and the log size.
    let m = serde_json::to_string(&idx.manifest().store).unwrap();
    assert!(m.contains("Sync") && m.contains("log_capacity"), "{m}");
    // "Crash": drop without checkpoint (the writes reached the files).
    drop(idx);
    let want: Vec<u64> = (0..1500).filter(|i| i % 5 != 0).collect();
    // A reader replays the log in memory (issue 44: it was refused until a
    // writer ran `recover`) and writes nothing.
    let files = |p: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|f| {
                f.file_name()
                    .is_some_and(|n| n != crate::manifest::LOCK_FILE)
            })
            .map(|f| (f.display().to_string(), std::fs::read(&f).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = files(&path);
    let ro = Index::open(&path, Access::Read).unwrap();
    assert_eq!(ids_in_all(&ro), want);
    assert_eq!(ro.len(), 1200);
    ro.tree().unwrap().check().unwrap();
    drop(ro);
    assert!(files(&path) == before, "a read-only open changed a file");
    let idx = Index::open(&path, Access::Write).unwrap();
    let r = idx.restart_report().unwrap().clone();
    assert!(r.changes_replayed > 0 && r.records_in_tree == 1200, "{r:?}");
    assert_eq!(idx.len(), 1200);
    idx.tree().unwrap().check().unwrap();
    assert_eq!(ids_in_all(&idx), want);
    idx.close().unwrap();
    // After the checkpoint of close, read-only opens need no recovery.
    let ro = Index::open(&path, Access::Read).unwrap();
    assert_eq!(ids_in_all(&ro), want);
    drop(ro);
    // A log of another index is refused.
    let other = dir.path().join("other");
    Index::create(&other, &logged_opts(kind, Durability::Sync))
        .unwrap()
        .close()
        .unwrap();
    std::fs::copy(other.join(LOG_FILE), path.join(LOG_FILE)).unwrap();
    let e = Index::open(&path, Access::Write).unwrap_err().to_string();
    assert!(e.contains("another index"), "{e}");
}

#[test]
fn logged_stores_on_simulated_flash_keep_their_log_in_a_region_of_the_device() {
    LOGGED_KINDS
        .into_iter()
        .for_each(logged_store_on_simulated_flash);
}

fn logged_store_on_simulated_flash(kind: StoreKind) {
    use crate::store::log::Durability;
    let dir = tempfile::tempdir().unwrap();
    let opts = IndexOptions {
        device: "flashsim:preset=seed-tc58".parse().unwrap(),
        ..logged_opts(
            kind,
            Durability::Group {
                ops: 16,
                millis: 50,
            },
        )
    };
    let path = dir.path().join("sim");
    let mut idx = Index::create(&path, &opts).unwrap();
    assert!(idx.log_device().is_none() && !path.join(LOG_FILE).exists());
    for i in 0..800 {
        idx.insert(i, rect(i)).unwrap();
    }
    let s = idx.stats("build");
    assert!(s.sim.nand_programs > 0);
    idx.close().unwrap();
    let ro = Index::open(&path, Access::Read).unwrap();
    assert_eq!(ids_in_all(&ro), (0..800).collect::<Vec<_>>());
    ro.tree().unwrap().check().unwrap();
}

#[test]
fn hilbert_indexes_keep_their_domain_in_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let hilbert = IndexOptions {
        structure: StructureSpec::tree(IndexKind::Hilbert),
        page_size: 1024,
        ..file_opts()
    };
    // An empty Hilbert R-tree needs its domain.
    let e = Index::create(&dir.path().join("none"), &hilbert).unwrap_err();
    assert!(
        e.is_user_error() && e.to_string().contains("Hilbert domain"),
        "{e}"
    );
    let items: Vec<(u64, Rect)> = (0..1500).map(|i| (i, rect(i))).collect();
    let window = Rect::new(100.0, 0.0, 900.0, 400.0).unwrap();
    let want: BTreeSet<u64> = items
        .iter()
        .filter(|(_, r)| r.intersects(&window))
        .map(|(id, _)| *id)
        .collect();
    // By insertion with a domain smaller than the data (clamped), and
    // bulk-loaded with the items' extent as its domain.
    let given = IndexOptions {
        hilbert_domain: Some(Rect::new(0.0, 0.0, 300.0, 300.0).unwrap()),
        ..hilbert.clone()
    };
    let p1 = dir.path().join("inserted");
    let mut a = Index::create(&p1, &given).unwrap();
    for (id, r) in &items {
        a.insert(*id, *r).unwrap();
    }
    a.close().unwrap();
    let p2 = dir.path().join("bulk");
    Index::bulk_load(Some(&p2), &hilbert, items.clone(), BulkMethod::Hilbert, 1.0)
        .unwrap()
        .close()
        .unwrap();
    for p in [&p1, &p2] {
        let ix = Index::open(p, Access::Write).unwrap();
        assert!(ix
            .manifest()
            .structure
            .to_json()
            .unwrap()
            .to_string()
            .contains("hilbert_domain"));
        ix.tree().unwrap().check().unwrap();
        let got = ids(&ix.query(window, Predicate::Intersects).unwrap());
        assert_eq!(got, want, "{}", p.display());
    }
}

#[test]
fn bad_creation_requests() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    Index::create(&path, &file_opts()).unwrap().close().unwrap();
    assert!(Index::create(&path, &file_opts())
        .unwrap_err()
        .to_string()
        .contains("already holds"));
    let bad = [
        IndexOptions {
            page_size: 3000,
            ..file_opts()
        },
        IndexOptions {
            structure: StructureSpec::Tree(TreeSpec {
                max_entries: Some(10_000),
                ..TreeSpec::new(IndexKind::RStar)
            }),
            ..file_opts()
        },
        IndexOptions {
            structure: StructureSpec::Tree(TreeSpec {
                min_entries: Some(1),
                ..TreeSpec::new(IndexKind::RStar)
            }),
            ..file_opts()
        },
        IndexOptions {
            // A device spec that parses but that no device takes.
            device: "mem:capacity=100".parse().unwrap(),
            ..file_opts()
        },
        IndexOptions {
            store: StoreSpec::fast(
                512 * 1024,
                FastConfig {
                    flush_unit: 0,
                    ..FastConfig::default()
                },
            ),
            ..file_opts()
        },
        IndexOptions {
            store: StoreSpec::fast(
                512 * 1024,
                FastConfig {
                    log_capacity: 512,
                    ..FastConfig::default()
                },
            ),
            ..file_opts()
        },
        IndexOptions {
            store: StoreSpec::efind(
                512 * 1024,
                EfindConfig {
                    log_capacity: 512,
                    ..EfindConfig::default()
                },
            ),
            ..file_opts()
        },
    ];
    for (i, o) in bad.iter().enumerate() {
        let target = dir.path().join(format!("bad{i}"));
        let e = Index::create(&target, o).unwrap_err();
        assert!(e.is_user_error(), "{e}");
        // Nothing is left behind, staging directory included.
        assert!(!target.exists(), "{e}");
        assert!(
            !crate::staging::staging_dir(&target).unwrap().exists(),
            "{e}"
        );
    }
    assert!(Index::open(dir.path(), Access::Read)
        .unwrap_err()
        .to_string()
        .contains("not an index directory"));
}

/// The directory entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_failed_build_leaves_no_directory_and_the_previous_index_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let flash = flash_opts();
    let xbr = {
        let mut o = file_opts();
        o.set_kind("xbr").unwrap();
        o.hilbert_domain = Some(Rect::new(0.0, 0.0, 2000.0, 2000.0).unwrap());
        o
    };
    for (name, opts) in [("file", file_opts()), ("flash", flash), ("xbr", xbr)] {
        let target = tmp.path().join(name);
        // A duplicate id after 1,000 insertions (a box for the xBR+-tree).
        let e = Index::build(&target, &opts, |ix| {
            for i in 0..1000u64 {
                let p = i as f64;
                ix.insert(i, Rect::new(p, 1.0, p, 1.0)?)?;
            }
            // The xBR+-tree refuses a box; the others a duplicate id.
            let id = if opts.kind_name() == "xbr" { 5000 } else { 0 };
            ix.insert(id, Rect::new(0.0, 0.0, 3.0, 3.0)?)
        })
        .unwrap_err();
        assert!(e.is_user_error(), "{name}: {e}");
        assert_eq!(entries(tmp.path()), Vec::<String>::new(), "{name}: {e}");
    }
    // The same failure over an existing index: refused, untouched.
    let target = tmp.path().join("idx");
    let mut first = Index::create(&target, &file_opts()).unwrap();
    first.insert(1, rect(1)).unwrap();
    first.close().unwrap();
    let before = std::fs::read(target.join(PAGES_FILE)).unwrap();
    let e = Index::build(&target, &file_opts(), |ix| ix.insert(2, rect(2))).unwrap_err();
    assert!(e.to_string().contains("already holds an index"), "{e}");
    assert_eq!(std::fs::read(target.join(PAGES_FILE)).unwrap(), before);
    assert_eq!(entries(tmp.path()), vec!["idx".to_string()]);
    assert_eq!(
        ids_in_all(&Index::open(&target, Access::Read).unwrap()),
        vec![1]
    );
    // An explicit device file outside the directory: removed with the
    // failed build that created it.
    let dev = tmp.path().join("dev.dat");
    let opts = IndexOptions {
        device: format!("file:{}?direct=false", dev.display())
            .parse()
            .unwrap(),
        ..file_opts()
    };
    let other = tmp.path().join("other");
    Index::build(&other, &opts, |ix| {
        ix.insert(1, rect(1))?;
        ix.insert(1, rect(1))
    })
    .unwrap_err();
    assert!(!dev.exists() && !other.exists());
    // A successful build publishes the directory under its name only.
    let (ix, n) = Index::build(&other, &opts, |ix| {
        ix.insert(1, rect(1))?;
        Ok::<u32, Error>(1)
    })
    .unwrap();
    assert_eq!((n, ix.dir()), (1, Some(other.as_path())));
    ix.close().unwrap();
    assert_eq!(entries(tmp.path()), vec!["dev.dat", "idx", "other"]);
}

#[test]
fn a_killed_build_is_adopted_and_recovered() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("idx");
    let opts = logged_opts(StoreKind::Efind, crate::store::log::Durability::Sync);
    // What a killed build leaves: a staging directory whose operations
    // are durable in its log only (no checkpoint after them).
    let staging = Staging::begin(&target, &opts.device).unwrap();
    let mut ix = Index::create_in(Some(staging.dir()), &opts, RTree::create).unwrap();
    for i in 1..=300 {
        ix.insert(i, rect(i)).unwrap();
    }
    drop(ix);
    let e = Index::open(&target, Access::Read).unwrap_err();
    assert!(e.to_string().contains("geoflash recover"), "{e}");
    let e = Index::create(&target, &opts).unwrap_err();
    assert!(e.to_string().contains("interrupted build"), "{e}");
    assert_eq!(
        crate::staging::adopt_interrupted(&target)
            .unwrap()
            .as_deref(),
        Some(staging.dir())
    );
    let ix = Index::open(&target, Access::Write).unwrap();
    assert_eq!(ids_in_all(&ix), (1..=300).collect::<Vec<_>>());
    assert_eq!(entries(tmp.path()), vec!["idx".to_string()]);
}

#[test]
fn simulated_devices_live_in_their_process() {
    let dir = tempfile::tempdir().unwrap();
    let opts = flash_opts();
    let mut idx = Index::create(&dir.path().join("sim"), &opts).unwrap();
    for i in 0..500 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.checkpoint().unwrap();
    let s = idx.stats("build");
    assert!(s.device_simulated && s.sim.nand_programs > 0);
    let programs = s.sim.nand_programs;
    let window = Rect::new(0.0, 0.0, 500.0, 500.0).unwrap();
    let before = idx.query(window, Predicate::Intersects).unwrap().hits.len();
    idx.close().unwrap();
    // the simulated NAND comes back with its contents and counters
    let ro = Index::open(&dir.path().join("sim"), Access::Read).unwrap();
    assert_eq!(
        ro.query(window, Predicate::Intersects).unwrap().hits.len(),
        before
    );
    // counters count from the opening: the reopened device has programmed nothing yet
    assert!(programs > 0);
    assert_eq!(ro.stats("reopen").sim.nand_programs, 0);
    drop(ro);
    std::fs::remove_file(dir.path().join("sim").join(DEVICE_IMAGE_FILE)).unwrap();
    let e = Index::open(&dir.path().join("sim"), Access::Read)
        .unwrap_err()
        .to_string();
    assert!(e.contains("device.img"), "{e}");
    let hdd = IndexOptions {
        device: "hddsim:preset=7200rpm".parse().unwrap(),
        ..IndexOptions::default()
    };
    Index::create(&dir.path().join("hdd"), &hdd)
        .unwrap()
        .close()
        .unwrap();
    let e = Index::open(&dir.path().join("hdd"), Access::Read)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lives only in its process"), "{e}");

    let mut t = Index::create_temporary(&IndexOptions {
        device: "mem:".parse().unwrap(),
        ..IndexOptions::default()
    })
    .unwrap();
    t.insert(1, rect(1)).unwrap();
    assert_eq!(
        t.nearest(Point::new(0.0, 0.0).unwrap(), 1, false)
            .unwrap()
            .neighbors
            .len(),
        1
    );
}

#[test]
fn objects_are_stored_refined_and_reopened() {
    use crate::objects::Geometry;
    use geo::{line_string, polygon};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let mut idx = Index::create(&path, &file_opts()).unwrap();
    let no_heap = idx
        .query_refined(
            Rect::new(0.0, 0.0, 1.0, 1.0).unwrap(),
            Predicate::Intersects,
        )
        .unwrap_err();
    assert!(no_heap.to_string().contains("no object heap"), "{no_heap}");
    // thin diagonal triangles: the window at the empty corner of each MBR
    for i in 0..50u64 {
        let x = i as f64 * 20.0;
        let tri: Geometry =
            polygon![(x: x, y: 0.0), (x: x + 10.0, y: 10.0), (x: x + 10.0, y: 9.0), (x: x, y: 0.0)]
                .into();
        idx.insert_object(i, &tri).unwrap();
    }
    let line: Geometry = line_string![(x: 0.0, y: 50.0), (x: 1000.0, y: 50.0)].into();
    idx.insert_object(1000, &line).unwrap();
    assert!(idx
        .insert_object(3, &line)
        .unwrap_err()
        .to_string()
        .contains("already"));
    assert_eq!(idx.len(), 51);
    let corner = Rect::new(0.0, 8.0, 2.0, 10.0).unwrap();
    let r = idx.query_refined(corner, Predicate::Intersects).unwrap();
    assert_eq!((r.stats.candidates, r.stats.results), (1, 0));
    let band = Rect::new(-1.0, 5.0, 1001.0, 60.0).unwrap();
    let r = idx.query_refined(band, Predicate::Contains).unwrap();
    assert_eq!(r.stats.results, 1, "only the line lies inside the band");
    idx.delete_object(1000).unwrap();
    assert!(idx.delete_object(1000).is_err());
    idx.close().unwrap();
    // a heap left by a build killed before its manifest (in its staging
    // directory) does not leak into a new index; a directory holding
    // files is refused, untouched
    let stale = dir.path().join("stale");
    let staging = crate::staging::staging_dir(&stale).unwrap();
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::create_dir_all(&stale).unwrap();
    for d in [&staging, &stale] {
        std::fs::copy(
            path.join(crate::objects::OBJECTS_FILE),
            d.join(crate::objects::OBJECTS_FILE),
        )
        .unwrap();
    }
    assert!(Index::create(&stale, &file_opts()).is_err());
    assert!(stale.join(crate::objects::OBJECTS_FILE).is_file());
    std::fs::remove_file(stale.join(crate::objects::OBJECTS_FILE)).unwrap();
    let mut fresh = Index::create(&stale, &file_opts()).unwrap();
    fresh.insert_object(3, &line).unwrap();
    assert_eq!(fresh.objects().unwrap().len(), 1);
    drop(fresh);

    let ro = Index::open(&path, Access::Read).unwrap();
    assert_eq!(ro.objects().unwrap().len(), 50);
    let w = Rect::new(0.0, 0.0, 1000.0, 10.0).unwrap();
    let r = ro.query_refined(w, Predicate::Contains).unwrap();
    assert_eq!(r.stats.results, 50);
    let r = ro
        .query_refined(Rect::new(9.5, 9.0, 9.8, 9.3).unwrap(), Predicate::Within)
        .unwrap();
    assert_eq!(r.hits.iter().map(|h| h.id).collect::<Vec<_>>(), vec![0]);
    drop(ro);

    let objs: Vec<(u64, Geometry)> = (0..300u64)
        .map(|i| {
            let x = (i % 20) as f64 * 3.0;
            let y = (i / 20) as f64 * 3.0;
            (
                i,
                polygon![(x: x, y: y), (x: x + 2.0, y: y), (x: x, y: y + 2.0), (x: x, y: y)].into(),
            )
        })
        .collect();
    let bulk = Index::bulk_load_objects(
        &dir.path().join("bulk"),
        &file_opts(),
        &objs,
        BulkMethod::Str,
        1.0,
    )
    .unwrap();
    // the window touches each triangle's MBR corner (x+2, y+2) only
    let r = bulk
        .query_refined(
            Rect::new(1.5, 1.5, 2.5, 2.5).unwrap(),
            Predicate::Intersects,
        )
        .unwrap();
    assert_eq!((r.stats.candidates, r.stats.results), (1, 0));
    assert_eq!(bulk.objects().unwrap().len(), 300);
}

/// A bulk load of objects asks its caller whether to stop as it takes
/// their rectangles, every 65,536 objects: stopped at its second question
/// (at object 65,536), it ends there, before the object at the end of the
/// input whose coordinate would fail it, and publishes nothing (it took
/// every rectangle before its first question).
#[test]
fn a_bulk_load_of_objects_stops_while_it_takes_their_rectangles() {
    use crate::index::bulk::BulkWatch;
    use crate::objects::Geometry;
    use std::sync::atomic::{AtomicU64, Ordering};
    let n = 2 * (1u64 << 16) + 1;
    let mut objs: Vec<(u64, Geometry)> = (0..n)
        .map(|i| {
            (
                i,
                geo::point!(x: (i % 1000) as f64, y: (i / 1000) as f64).into(),
            )
        })
        .collect();
    objs[n as usize - 1].1 = geo::point!(x: f64::NAN, y: 0.0).into();
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("idx");
    for stop_at in [None, Some(1)] {
        let asked = AtomicU64::new(0);
        let stop = || asked.fetch_add(1, Ordering::SeqCst) >= stop_at.unwrap_or(u64::MAX);
        let watch = BulkWatch::stopped_by(&stop);
        let loaded = Index::bulk_load_objects_watched(
            &at,
            &file_opts(),
            &objs,
            BulkMethod::Str,
            1.0,
            watch,
            |_| Ok(()),
        );
        let Err(e) = loaded else {
            panic!("{stop_at:?}: loaded with an object of no finite coordinate");
        };
        match stop_at {
            None => {
                assert_eq!(e.kind(), crate::ErrorKind::InvalidInput, "{e}");
                assert!(e.to_string().contains(&format!("object {}", n - 1)), "{e}");
            }
            Some(k) => {
                assert_eq!(e.kind(), crate::ErrorKind::Interrupted, "{e}");
                assert!(e.to_string().contains("no index published"), "{e}");
                assert_eq!(asked.load(Ordering::SeqCst), k + 1);
            }
        }
        assert!(!at.exists(), "{stop_at:?}: {} was published", at.display());
    }
}

/// `n` distinct points scattered over [0, 100]², as degenerate rectangles.
fn scattered_points(n: u64) -> Vec<(u64, Rect)> {
    (0..n)
        .map(|i| {
            let x = (i * 7919 % 1000) as f64 / 10.0;
            let y = (i * 104_729 % 997) as f64 / 10.0;
            (i, Rect::new(x, y, x, y).unwrap())
        })
        .collect()
}

/// The window the point tests query.
fn points_window() -> Rect {
    Rect::new(20.0, 10.0, 45.0, 60.0).unwrap()
}

/// The ids from `skip` on of `pts` inside `window` (brute force).
fn ids_inside(pts: &[(u64, Rect)], window: &Rect, skip: u64) -> BTreeSet<u64> {
    pts.iter()
        .filter(|(i, r)| *i >= skip && window.contains(r))
        .map(|(i, _)| *i)
        .collect()
}

/// `kind = xbr`: an xBR+-tree of points behind `Index` on every store,
/// by insertion and by bulk load, answering like brute force after a
/// reopen; boxes and points outside the domain are refused.
#[test]
fn xbr_index_on_every_store_answers_like_brute_force_after_reopen() {
    let pts = scattered_points(1500);
    let window = points_window();
    let want = ids_inside(&pts, &window, 0);
    let dir = tempfile::tempdir().unwrap();
    for (n, store) in [StoreKind::Plain, StoreKind::Efind, StoreKind::Fast]
        .into_iter()
        .enumerate()
    {
        let mut opts = IndexOptions {
            page_size: 1024,
            device: "file?direct=false".parse().unwrap(),
            hilbert_domain: Some(Rect::new(0.0, 0.0, 100.0, 100.0).unwrap()),
            store: StoreSpec::of_kind(store, 512 * 1024),
            ..IndexOptions::default()
        };
        opts.set_kind("xbr").unwrap();
        assert_eq!(opts.kind_name(), "xbr");
        let by_insert = dir.path().join(format!("ins{n}"));
        let mut idx = Index::create(&by_insert, &opts).unwrap();
        for &(i, r) in &pts {
            idx.insert(i, r).unwrap();
        }
        let e = idx.insert(9999, rect(1)).unwrap_err();
        assert!(e.to_string().contains("points"), "{e}");
        let e = idx
            .insert(9999, Rect::new(150.0, 1.0, 150.0, 1.0).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        idx.delete(0, pts[0].1).unwrap();
        idx.close().unwrap();
        let bulk = dir.path().join(format!("bulk{n}"));
        opts.hilbert_domain = None; // the extent of the data
        Index::bulk_load(Some(&bulk), &opts, pts[1..].to_vec(), BulkMethod::Str, 1.0)
            .unwrap()
            .close()
            .unwrap();
        let mut want = want.clone();
        want.remove(&0);
        for path in [&by_insert, &bulk] {
            let idx = Index::open(path, Access::Read).unwrap();
            assert_eq!(idx.manifest().kind(), "xbr");
            assert_eq!(idx.len(), 1499);
            let t = idx.structure().xbr().unwrap();
            t.check().unwrap();
            let got = ids(&idx.query(window, Predicate::Contains).unwrap());
            assert_eq!(got, want);
            let batch = idx
                .query_batch(&[window, window], Predicate::Intersects)
                .unwrap();
            assert!(batch.results.iter().all(|r| r.hits.len() == want.len()));
            // The keys alone (the trait's default for the xBR+-tree).
            let keys = idx
                .query_batch_keys(&[window, window], Predicate::Intersects)
                .unwrap();
            for (k, r) in keys.iter().zip(&batch.results) {
                let ids: Vec<u64> = r.hits.iter().map(|h| h.id).collect();
                assert_eq!(k.keys, ids);
            }
            let near = idx
                .nearest(Point::new(50.0, 50.0).unwrap(), 5, true)
                .unwrap();
            let mut d: Vec<f64> = pts[1..]
                .iter()
                .map(|(_, r)| r.min_dist_point(&Point::new(50.0, 50.0).unwrap()))
                .collect();
            d.sort_by(f64::total_cmp);
            assert!(near.neighbors.len() >= 5);
            assert_eq!(near.neighbors[4].distance, d[4]);
            assert!(idx.tree().is_err(), "not an R-tree");
        }
    }
}

/// Choosing a kind replaces the structure (one at a time: two cannot be
/// named), keeping the node capacity where both kinds have one.
#[test]
fn set_kind_names_one_structure_and_keeps_its_capacity() {
    let mut opts = IndexOptions {
        device: "mem:".parse().unwrap(),
        hilbert_domain: Some(Rect::new(0.0, 0.0, 1.0, 1.0).unwrap()),
        structure: StructureSpec::Tree(TreeSpec {
            max_entries: Some(12),
            ..TreeSpec::new(IndexKind::RStar)
        }),
        ..IndexOptions::default()
    };
    opts.set_kind("gffm").unwrap();
    assert_eq!(opts.kind_name(), "gffm");
    assert!(matches!(
        opts.resolve().unwrap(),
        crate::config::StructureConfig::Grid(_)
    ));
    opts.set_kind("xbr").unwrap();
    assert_eq!(opts.kind_name(), "xbr");
    opts.structure = StructureSpec::Xbr(crate::config::XbrSpec {
        max_entries: Some(12),
    });
    opts.set_kind("fortree").unwrap();
    assert_eq!(opts.structure.capacities(), (Some(12), None));
    let e = opts.set_kind("quadtree").unwrap_err().to_string();
    assert!(
        e.contains("unknown index kind") && e.contains("fortree"),
        "{e}"
    );
    Index::create_temporary(&opts).unwrap();
}

#[test]
fn grid_files_live_in_index_directories_and_reopen_with_the_same_answers() {
    let pts = scattered_points(3000);
    let window = points_window();
    let inside = |skip: u64| ids_inside(&pts, &window, skip);
    let dir = tempfile::tempdir().unwrap();
    for (kind, device) in [
        ("grid", "file?direct=false"),
        ("gffm", "file?direct=false"),
        ("lbgrid", "file?direct=false"),
        (
            "hgrid",
            "hybrid:fast=(file?direct=false);slow=(file?direct=false)",
        ),
        ("gffm", "flashsim:preset=seed-tc58"),
    ] {
        let opts = spec_options(&[
            ("kind", kind),
            ("device", device),
            ("page_size", "1KiB"),
            ("buffer", "256KiB"),
        ]);
        // The domain comes from the data, as a build from a file takes it.
        let opts = opts.with_domain_of(pts.iter().map(|(_, r)| r));
        let path = dir.path().join(format!("{kind}-{}", device.len()));
        let mut idx = Index::create(&path, &opts).unwrap();
        for &(i, r) in &pts {
            idx.insert(i, r).unwrap();
        }
        let e = idx.insert(9999, rect(1)).unwrap_err();
        assert!(e.to_string().contains("points"), "{kind}: {e}");
        for &(i, r) in &pts[..10] {
            idx.delete(i, r).unwrap();
        }
        assert_eq!(idx.len(), 2990, "{kind}");
        idx.close().unwrap();
        let e = Index::bulk_load(None, &opts, pts.clone(), BulkMethod::Str, 1.0).unwrap_err();
        assert!(
            e.to_string().contains("build it by insertion"),
            "{kind}: {e}"
        );

        let idx = Index::open(&path, Access::Read).unwrap();
        assert_eq!(idx.manifest().kind(), kind);
        assert_eq!(idx.len(), 2990, "{kind}: counted after reopening");
        assert!(idx.structure().pages_in_use() > 2, "{kind}");
        let got = ids(&idx.query(window, Predicate::Intersects).unwrap());
        assert_eq!(got, inside(10), "{kind}");
        let p = Point::new(50.0, 50.0).unwrap();
        let near = idx.nearest(p, 5, false).unwrap();
        let mut d: Vec<f64> = pts[10..]
            .iter()
            .map(|(_, r)| r.min_dist_point(&p))
            .collect();
        d.sort_by(f64::total_cmp);
        assert_eq!(near.neighbors.len(), 5, "{kind}");
        assert_eq!(near.neighbors[4].distance, d[4], "{kind}");
        assert!(idx.tree().is_err(), "{kind} is not an R-tree");
        drop(idx);
        // Reopened for writing, it takes more points and keeps them.
        let mut idx = Index::open(&path, Access::Write).unwrap();
        idx.insert(10_000, Rect::new(1.0, 1.0, 1.0, 1.0).unwrap())
            .unwrap();
        idx.close().unwrap();
        let idx = Index::open(&path, Access::Read).unwrap();
        assert_eq!(idx.len(), 2991, "{kind}");
    }
}

#[test]
fn operations_read_the_cpu_clock_unless_told_not_to() {
    let opts = IndexOptions {
        page_size: 1024,
        device: "mem:".parse().unwrap(),
        ..IndexOptions::default()
    };
    let mut idx = Index::create_temporary(&opts).unwrap();
    assert!(idx.operation_cpu_time());
    let cpu = |idx: &Index| {
        let t = idx.phase_times();
        (t.cpu.cpu_index_ns, t.cpu.cpu_filter_ns)
    };
    let wall = |idx: &Index| {
        let t = idx.phase_times();
        (t.wall.wall_index_ns, t.wall.wall_filter_ns)
    };
    // Enough work that the thread's CPU clock moves on any platform.
    let work = |idx: &mut Index, from: u64| {
        for i in from..from + 3000 {
            idx.insert(i, rect(i)).unwrap();
        }
        for i in 0..300 {
            idx.query(rect(i), Predicate::Intersects).unwrap();
            idx.nearest(Point::new(1.0, 2.0).unwrap(), 5, false)
                .unwrap();
        }
    };
    work(&mut idx, 0);
    let (ci, cf) = cpu(&idx);
    assert!(ci > 0 && cf > 0, "on: CPU time counted ({ci}, {cf})");
    idx.set_operation_cpu_time(false);
    assert!(!idx.operation_cpu_time());
    let (wi, wf) = wall(&idx);
    work(&mut idx, 3000);
    assert_eq!(cpu(&idx), (ci, cf), "off: operations read no CPU clock");
    let (wi2, wf2) = wall(&idx);
    assert!(wi2 > wi && wf2 > wf, "off: wall time still counted");
    // A batch measures its own CPU time once, whatever the switch says.
    idx.batch(BatchDurability::AsConfigured, |ix| {
        (6000..9000).try_for_each(|i| ix.insert(i, rect(i)))
    })
    .unwrap();
    assert!(cpu(&idx).0 > ci, "a batch adds its CPU time");
    let (ci, cf) = cpu(&idx);
    idx.set_operation_cpu_time(true);
    work(&mut idx, 9000);
    let (ci2, cf2) = cpu(&idx);
    assert!(ci2 > ci && cf2 > cf, "on again: counted again");
    assert_eq!(idx.len(), 12_000);
}

#[test]
fn with_operation_cpu_time_off_the_stores_phases_read_no_cpu_clock_either() {
    for kind in LOGGED_KINDS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        // A 16 KiB buffer: insertions flush and log, queries read nodes back.
        let opts = logged_opts(kind, crate::store::log::Durability::None);
        let mut idx = Index::create(&path, &opts).unwrap();
        idx.set_operation_cpu_time(false);
        let before = idx.stats("off");
        for i in 0..3000 {
            idx.insert(i, rect(i)).unwrap();
        }
        for i in 0..300 {
            idx.query(rect(i * 10), Predicate::Intersects).unwrap();
        }
        let off = idx.stats("off");
        let (wall, cpu) = (&off.times.wall, &off.times.cpu);
        assert!(
            wall.wall_read_ns > before.times.wall.wall_read_ns
                && wall.wall_flush_ns > before.times.wall.wall_flush_ns,
            "{kind:?}: reads and flushes happened and their wall time counts"
        );
        assert_eq!(
            (cpu.cpu_read_ns, cpu.cpu_flush_ns, cpu.cpu_log_ns),
            (
                before.times.cpu.cpu_read_ns,
                before.times.cpu.cpu_flush_ns,
                before.times.cpu.cpu_log_ns
            ),
            "{kind:?}: no CPU clock read inside the operations"
        );
        idx.set_operation_cpu_time(true);
        for i in 3000..6000 {
            idx.insert(i, rect(i)).unwrap();
        }
        for i in 0..300 {
            idx.query(rect(i * 20), Predicate::Intersects).unwrap();
        }
        let on = idx.stats("on").times.cpu;
        assert!(
            on.cpu_read_ns > cpu.cpu_read_ns && on.cpu_flush_ns > cpu.cpu_flush_ns,
            "{kind:?}: on again, the stores' phases read the CPU clock again"
        );
    }
}

#[test]
fn pages_in_use_counts_the_nodes_the_check_finds_without_reading_them() {
    for store in ["efind", "fast", "plain"] {
        for kind in ["rtree", "rstar", "hilbert", "xbr"] {
            let tmp = tempfile::tempdir().unwrap();
            let path = tmp.path().join("idx");
            let settings = [
                ("store", store),
                ("kind", kind),
                ("page_size", "1024"),
                ("buffer", "64KiB"),
            ];
            let opts = spec_options(settings.iter())
                .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
            let mut idx = Index::create(&path, &opts).unwrap();
            let point = |i: u64| {
                let (x, y) = ((i * 37 % 1000) as f64 / 10.0, (i * 91 % 997) as f64 / 10.0);
                Rect::from_valid(x, y, x, y)
            };
            for i in 0..4000 {
                idx.insert(i, point(i)).unwrap();
            }
            for i in (0..4000).step_by(3) {
                idx.delete(i, point(i)).unwrap();
            }
            let what = format!("{store} {kind}");
            let check = |idx: &Index, when: &str| {
                let nodes = idx.verify().unwrap().nodes;
                assert_eq!(idx.structure().pages_in_use(), nodes, "{what} {when}");
            };
            check(&idx, "before the checkpoint");
            idx.close().unwrap();
            let idx = Index::open(&path, Access::Read).unwrap();
            check(&idx, "reopened");
        }
    }
}

#[test]
fn a_batch_syncs_once_at_its_end_and_restores_the_durability_mode() {
    LOGGED_KINDS
        .into_iter()
        .for_each(a_batch_syncs_once_at_its_end);
}

fn a_batch_syncs_once_at_its_end(kind: StoreKind) {
    use crate::store::log::Durability;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let mut idx = Index::create(&path, &logged_opts(kind, Durability::Sync)).unwrap();
    let log_syncs = |idx: &Index| idx.structure().store_stats().log_syncs;
    // Operation by operation: `sync` syncs the log at every commit.
    let before = log_syncs(&idx);
    idx.batch(BatchDurability::AsConfigured, |ix| {
        (0..200).try_for_each(|i| ix.insert(i, rect(i)))
    })
    .unwrap();
    assert!(log_syncs(&idx) - before >= 200, "{kind:?}");
    // A batch durable at its end: no sync of its own while it runs (the
    // 16 KiB buffer still flushes, and each flush syncs the log first).
    let before = log_syncs(&idx);
    let s0 = idx.structure().store_stats();
    let (in_batch, forced) = idx
        .batch(BatchDurability::AtEnd, |ix| {
            (200..1200).try_for_each(|i| ix.insert(i, rect(i)))?;
            assert_eq!(
                ix.structure().durability(),
                Some(Durability::UNBOUNDED_GROUP)
            );
            let s = ix.structure().store_stats();
            let forced = (s.flushes - s0.flushes) + (s.compactions - s0.compactions);
            Ok((s.log_syncs - before, forced))
        })
        .unwrap();
    // Only what flushes and compactions force (write-ahead syncs of the
    // log): with the small buffer about one per ten operations, where the
    // configured mode syncs every operation.
    assert!(
        in_batch <= 2 * forced + 1 && in_batch < 250,
        "{kind:?}: {in_batch} log syncs for 1000 inserts and {forced} flushes and compactions"
    );
    assert_eq!(idx.structure().durability(), Some(Durability::Sync));
    assert_eq!(idx.durable_op(), idx.last_committed_op(), "{kind:?}");
    assert!(idx.phase_times().cpu.cpu_index_ns > 0);
    // A failed operation ends the batch with its error, the mode restored.
    let e = idx
        .batch(BatchDurability::AtEnd, |ix| {
            ix.insert(5000, rect(5000))?;
            ix.delete(9999, rect(9999))
        })
        .unwrap_err();
    assert!(e.is_user_error(), "{e}");
    assert_eq!(idx.structure().durability(), Some(Durability::Sync));
    // The next operation, in the restored `sync` mode, makes the failed
    // batch's insertion durable with it: a crash now (drop without
    // checkpoint) loses nothing.
    idx.insert(6000, rect(6000)).unwrap();
    drop(idx);
    let idx = Index::open(&path, Access::Write).unwrap();
    let want: Vec<u64> = (0..1200).chain([5000, 6000]).collect();
    assert_eq!(ids_in_all(&idx), want, "{kind:?}");
}

#[test]
fn an_automatic_log_in_log_dat_holds_at_least_64_mib_and_reopens_with_it() {
    use crate::store::log::LogFormat;
    let dir = tempfile::tempdir().unwrap();
    let capacity = |idx: &Index, store: &str| {
        let s = serde_json::to_value(idx.manifest().store).unwrap();
        s[store]["log_capacity"].as_u64().unwrap()
    };
    for (kind, name) in [(StoreKind::Efind, "efind"), (StoreKind::Fast, "fast")] {
        let path = dir.path().join(format!("small-{name}"));
        let opts = file_opts_with(kind, 512 * 1024);
        let mut idx = Index::create(&path, &opts).unwrap();
        // 4 x 512 KiB would be 2 MiB (10 MiB before the floor).
        assert_eq!(capacity(&idx, name), MIN_FILE_LOG_CAPACITY, "{name}");
        for i in 0..300 {
            idx.insert(i, rect(i)).unwrap();
        }
        idx.checkpoint().unwrap();
        drop(idx);
        let idx = Index::open(&path, Access::Write).unwrap();
        assert_eq!(ids_in_all(&idx), (0..300).collect::<Vec<u64>>());
        assert_eq!(capacity(&idx, name), MIN_FILE_LOG_CAPACITY);
        // A large buffer keeps 4 x the buffer.
        let path = dir.path().join(format!("large-{name}"));
        let large = file_opts_with(kind, 32 << 20);
        let idx = Index::create(&path, &large).unwrap();
        assert_eq!(capacity(&idx, name), 128 << 20, "{name}");
    }
    // The papers' per-change format keeps its automatic 10 MiB.
    let path = dir.path().join("per-change");
    let opts = IndexOptions {
        store: StoreSpec::fast(
            512 * 1024,
            FastConfig {
                log_format: LogFormat::PerChange,
                ..FastConfig::default()
            },
        ),
        ..file_opts()
    };
    let idx = Index::create(&path, &opts).unwrap();
    assert_eq!(capacity(&idx, "fast"), 10 << 20);
}

/// The manifest of format 1 (before the typed store): every store's
/// fields, `null` for another store's parameters and, in the oldest, for
/// the store's own; no checksum. Such an index opens (read-only and for
/// writing) through the one upgrade, read as the current format, and
/// answers as it did.
#[test]
fn an_index_with_a_format_1_manifest_opens() {
    let dir = tempfile::tempdir().unwrap();
    for (n, kind) in [StoreKind::Plain, StoreKind::Efind, StoreKind::Fast]
        .into_iter()
        .enumerate()
    {
        for own_params_null in [false, true] {
            let path = dir.path().join(format!("v1-{n}-{own_params_null}"));
            let mut idx = Index::create(&path, &file_opts_with(kind, 64 * 1024)).unwrap();
            for i in 0..500 {
                idx.insert(i, rect(i)).unwrap();
            }
            idx.close().unwrap();
            let file = path.join(crate::manifest::MANIFEST_FILE);
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            let m = v.as_object_mut().unwrap();
            m.remove("checksum");
            m.insert("format_version".into(), serde_json::json!(1));
            let store = m["store"].as_object_mut().unwrap();
            let name = kind.name();
            for other in ["efind", "fast"] {
                if other != name || (own_params_null && kind == StoreKind::Efind) {
                    store.insert(other.into(), serde_json::Value::Null);
                }
            }
            store.insert("in_place".into(), serde_json::json!(false));
            store
                .entry("policy")
                .or_insert_with(|| serde_json::json!("s2q"));
            std::fs::write(&file, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
            let ro = Index::open(&path, Access::Read).unwrap();
            assert_eq!(ids_in_all(&ro), (0..500).collect::<Vec<_>>(), "{name}");
            assert_eq!(ro.manifest().store.kind(), kind);
            assert_eq!(
                ro.manifest().format_version,
                crate::manifest::MANIFEST_VERSION
            );
            drop(ro);
            let mut rw = Index::open(&path, Access::Write).unwrap();
            rw.insert(9999, rect(9999)).unwrap();
            rw.close().unwrap();
            let again = crate::manifest::Manifest::load(&path).unwrap();
            assert_eq!(again.store.kind(), kind);
            assert_eq!(Index::open(&path, Access::Read).unwrap().len(), 501);
        }
    }
}

/// A hybrid of two simulators saves both images (and its placement map)
/// at each checkpoint: a crash before all are written leaves readers and writers
/// the checkpoint before, exactly; a crash after (before they replace the
/// old ones) the checkpoint after. Before `images.rs` the images were
/// saved one after the other, and a crash between the two left an index
/// that could not be read ("node page 28 carries LSN 1317, newer than the
/// recovered log's end").
#[test]
fn a_crash_while_a_hybrid_of_simulators_saves_its_images_leaves_one_checkpoint() {
    for store in ["plain", "efind"] {
        for crash_after_first_phase in [false, true] {
            let what = format!("{store}, crash after the first phase: {crash_after_first_phase}");
            let tmp = tempfile::tempdir().unwrap();
            let path = tmp.path().join("h");
            let mut opts = spec_options(&[("store", store), ("placement", "internal-fast")]);
            opts.page_size = 1024;
            opts.device = "hybrid:fast=(flashsim:)&slow=(flashsim:)".parse().unwrap();
            let mut idx = Index::create(&path, &opts).unwrap();
            for i in 0..3000 {
                idx.insert(i, rect(i)).unwrap();
            }
            idx.checkpoint().unwrap();
            for i in 3000..6000 {
                idx.insert(i, rect(i)).unwrap();
            }
            if crash_after_first_phase {
                // The save stops after its marker: every new file written
                // beside the old ones.
                use super::images::{Step, STOP_AFTER};
                STOP_AFTER.with(|s| s.set(Some(Step::Marker)));
                assert!(idx.checkpoint().is_err(), "{what}");
                drop(idx);
            } else {
                // The slow tier's image cannot be written (however it is saved).
                let blockers = ["device.img.tmp", "device.img.next.tmp"].map(|b| path.join(b));
                for b in &blockers {
                    std::fs::create_dir(b).unwrap();
                }
                assert!(idx.checkpoint().is_err(), "{what}");
                drop(idx);
                for b in &blockers {
                    std::fs::remove_dir(b).unwrap();
                }
            }
            let want: Vec<u64> = (0..if crash_after_first_phase { 6000 } else { 3000 }).collect();
            let files = |p: &Path| entries(p);
            let before = files(&path);
            let ro = Index::open(&path, Access::Read).unwrap();
            assert_eq!(ids_in_all(&ro), want, "{what}: a reader");
            ro.tree().unwrap().check().unwrap();
            drop(ro);
            assert_eq!(
                files(&path),
                before,
                "{what}: the reader changed the directory"
            );
            let rw = Index::open(&path, Access::Write).unwrap();
            assert_eq!(ids_in_all(&rw), want, "{what}: a writer");
            rw.tree().unwrap().check().unwrap();
            assert!(!files(&path).iter().any(|f| f.ends_with(".next")), "{what}");
            rw.close().unwrap();
            let again = Index::open(&path, Access::Read).unwrap();
            assert_eq!(ids_in_all(&again), want, "{what}: after the writer");
        }
    }
}

/// A crash between checkpoints of an index on a hybrid with a simulated
/// tier, after syncs that moved pages between the tiers (nodes flushed
/// often, freed and reused at other levels, placed by level), or in the
/// next checkpoint's save of its images, reopens a prefix of the
/// operations holding the last checkpoint, the tree whole: the placement
/// map it reads is the one saved with that checkpoint's images, and the
/// rollback journal of a hybrid of a file and a simulator commits with
/// them (a crash after the journal committed and before the images were
/// saved had left the file tier at the new checkpoint, the simulator at
/// the old). Before, the map
/// was saved at every sync, the images only at checkpoints, and a map
/// newer than the images sent reads of moved pages to the tier holding an
/// older copy.
#[test]
fn a_crash_between_checkpoints_of_a_hybrid_with_a_simulated_tier_reopens_a_prefix() {
    // The state after the first `deleted` deletes of 0..2500 and, once
    // they are all done, the first `inserted` inserts of 3000..6000.
    let state = |deleted: u64, inserted: u64| -> Vec<u64> {
        (deleted..3000).chain(3000..3000 + inserted).collect()
    };
    let a_prefix = |ids: &[u64]| {
        let deleted = ids.first().copied().unwrap_or(3000).min(2500);
        let inserted = ids.iter().filter(|&&i| i >= 3000).count() as u64;
        (inserted == 0 || deleted == 2500) && ids == state(deleted, inserted).as_slice()
    };
    use super::images::{Step, STOP_AFTER};
    let devices = [
        "hybrid:fast=(flashsim:)&slow=(flashsim:)",
        "hybrid:fast=(file?direct=false)&slow=(flashsim:)",
        "hybrid:fast=(flashsim:)&slow=(file?direct=false)",
    ];
    // The crash: between checkpoints, or in the next checkpoint's save of
    // the images: in its first phase, after its marker (before the
    // journal's commit), after that commit, after the first rename.
    let stops = [
        None,
        Some(Step::Map),
        Some(Step::Marker),
        Some(Step::Commit),
        Some(Step::Rename),
    ];
    for (device, stop) in devices.into_iter().flat_map(|d| stops.map(|s| (d, s))) {
        let device = format!("{device}, crash after {stop:?}");
        let device = device.as_str();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("h");
        let mut opts = spec_options(&[
            ("store", "efind"),
            ("durability", "sync"),
            ("buffer", "16KiB"),
            ("placement", "internal-fast"),
        ]);
        opts.page_size = 1024;
        opts.device = device.split(", ").next().unwrap().parse().unwrap();
        let mut idx = Index::create(&path, &opts).unwrap();
        for i in 0..3000 {
            idx.insert(i, rect(i)).unwrap();
        }
        idx.checkpoint().unwrap();
        for i in 0..2500 {
            idx.delete(i, rect(i)).unwrap();
        }
        for i in 3000..6000 {
            idx.insert(i, rect(i)).unwrap();
        }
        if let Some(step) = stop {
            STOP_AFTER.with(|s| s.set(Some(step)));
            assert!(idx.checkpoint().is_err(), "{device}");
        }
        drop(idx);
        let check = |idx: &Index, who: &str| {
            let ids = ids_in_all(idx);
            assert!(
                a_prefix(&ids),
                "{device}: {who} read {} ids, not a prefix",
                ids.len()
            );
            idx.tree().unwrap().check().unwrap();
            ids
        };
        let ro = Index::open(&path, Access::Read).unwrap();
        let read = check(&ro, "a reader");
        drop(ro);
        let rw = Index::open(&path, Access::Write).unwrap();
        assert_eq!(
            check(&rw, "a writer"),
            read,
            "{device}: the writer and the reader differ"
        );
        rw.close().unwrap();
        let again = Index::open(&path, Access::Read).unwrap();
        assert_eq!(check(&again, "a reader after the writer"), read, "{device}");
    }
}

/// A journaled index whose `journal.dat` is deleted, truncated or has its
/// header zeroed after a crash between checkpoints is refused naming the
/// journal, for reading and for writing: before, it opened without a
/// journal (or with a blank one) and answered from the pages the crash
/// left, unrolled. An index whose manifest predates the `journal` field
/// (which might predate journals) still opens without one.
#[test]
fn a_missing_or_blank_journal_is_damage_not_the_pages_a_crash_left() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("j");
    let opts = file_opts_with(StoreKind::Plain, 16 * 1024);
    let mut idx = Index::create(&path, &opts).unwrap();
    assert!(idx.manifest().journal);
    for i in 0..2000 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.checkpoint().unwrap();
    // Written in place (a 16 KiB buffer), then the crash: no checkpoint.
    for i in 2000..4000 {
        idx.insert(i, rect(i)).unwrap();
    }
    drop(idx);
    let want: Vec<u64> = (0..2000).collect();
    assert_eq!(ids_in_all(&Index::open(&path, Access::Read).unwrap()), want);
    let journal = path.join(journal::JOURNAL_FILE);
    let saved = std::fs::read(&journal).unwrap();
    for damage in ["deleted", "truncated", "zeroed"] {
        for access in [Access::Read, Access::Write] {
            match damage {
                "deleted" => std::fs::remove_file(&journal).unwrap(),
                "truncated" => std::fs::write(&journal, b"").unwrap(),
                _ => {
                    let mut bytes = saved.clone();
                    bytes[..2 * 1024].fill(0);
                    std::fs::write(&journal, bytes).unwrap();
                }
            }
            let e = match Index::open(&path, access) {
                Ok(idx) => panic!(
                    "{damage}, {access:?}: opened with {} ids",
                    ids_in_all(&idx).len()
                ),
                Err(e) => e.to_string(),
            };
            assert!(e.contains("journal.dat"), "{damage}, {access:?}: {e}");
            std::fs::write(&journal, &saved).unwrap();
        }
    }
    // Restored, the journal rolls the crash back for the writer too.
    let idx = Index::open(&path, Access::Write).unwrap();
    assert_eq!(ids_in_all(&idx), want);
    idx.close().unwrap();
    // A manifest written before the field: the journal stays optional.
    let mut manifest = crate::manifest::Manifest::load(&path).unwrap();
    manifest.journal = false;
    manifest.store(&path).unwrap();
    std::fs::remove_file(&journal).unwrap();
    assert_eq!(ids_in_all(&Index::open(&path, Access::Read).unwrap()), want);
}

/// An operation of a journaled index that fails part-way for another
/// reason than bad input (here a damaged page met on the way) may have
/// written a part of itself in place: the index then refuses every later
/// change and checkpoint, and the next open (the page repaired) finds the
/// last checkpoint. Before, the command line's checkpoint after a failed
/// `insert` or `update` made that part durable (found by a review).
#[test]
fn after_an_operation_fails_part_way_a_journaled_index_refuses_to_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("p");
    let opts = file_opts_with(StoreKind::Plain, 4 * 1024);
    let mut idx = Index::create(&path, &opts).unwrap();
    for i in 0..3000 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.close().unwrap();
    let pages = path.join("pages.dat");
    let saved = std::fs::read(&pages).unwrap();
    let mut damaged = saved.clone();
    // Every node page but the first ones: an insertion soon meets one.
    for page in (8..saved.len() / 1024).step_by(3) {
        damaged[page * 1024 + 100] ^= 0x5a;
    }
    let mut idx = Index::open(&path, Access::Write).unwrap();
    std::fs::write(&pages, &damaged).unwrap();
    let failed = (3000..6000).find_map(|i| idx.insert(i, rect(i)).err());
    let e = failed.expect("an insertion met a damaged page");
    assert!(!e.is_user_error(), "{e}");
    let refused = idx.checkpoint().unwrap_err().to_string();
    assert!(refused.contains("failed part-way"), "{refused}");
    let again = idx.insert(9999, rect(9999)).unwrap_err().to_string();
    assert!(again.contains("failed part-way"), "{again}");
    drop(idx);
    // The writer's open rolls back what the failed operation wrote (the
    // damaged pages' images included), then the damage is repaired.
    drop(Index::open(&path, Access::Write).unwrap());
    let mut now = std::fs::read(&pages).unwrap();
    for page in (8..saved.len() / 1024).step_by(3) {
        let at = page * 1024 + 100;
        if now.get(at) == damaged.get(at) {
            now[at] = saved[at];
        }
    }
    std::fs::write(&pages, &now).unwrap();
    let idx = Index::open(&path, Access::Write).unwrap();
    assert_eq!(ids_in_all(&idx), (0..3000).collect::<Vec<u64>>());
    idx.verify().unwrap();
}

/// An index created in this process holds the lock of its directory under
/// the directory's own name: a second open here is told this process holds
/// it (the lock was recorded under the build's staging directory, renamed
/// since, so the refusal blamed "another process").
#[test]
fn a_second_open_of_an_index_created_here_says_this_process_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let idx = Index::create(&path, &file_opts()).unwrap();
    for access in [Access::Write, Access::Read] {
        let e = Index::open(&path, access).unwrap_err().to_string();
        assert!(
            e.contains("locked by this process, which already has it open for writing"),
            "{e}"
        );
    }
    drop(idx);
    Index::open(&path, Access::Write).unwrap();
}

/// Of an index created in this process, an error names its files where
/// the index was published, not in the staging directory its devices were
/// opened in (which no longer exists).
#[test]
fn errors_of_a_new_index_name_its_files_where_it_was_published() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let idx = Index::create(&path, &file_opts()).unwrap();
    let staged = crate::staging::staging_dir(&path).unwrap();
    let device_file = idx.device.path().expect("a file device names its file");
    assert!(
        device_file.starts_with(&staged),
        "{}",
        device_file.display()
    );
    let published = path.join("pages.dat").display().to_string();
    let io = Error::Io {
        path: device_file.clone(),
        page: Some(3),
        source: std::io::Error::other("refused"),
    };
    let failed = Error::StoreFailed(format!("I/O error on {}: refused", device_file.display()));
    for e in [io, failed] {
        let named = idx.locate(e).to_string();
        assert!(named.contains(&published), "{named}");
        assert!(!named.contains(".building"), "{named}");
    }
    // A file elsewhere keeps its name.
    let other = dir.path().join("elsewhere.dat");
    let named = idx
        .locate(Error::Io {
            path: other.clone(),
            page: None,
            source: std::io::Error::other("refused"),
        })
        .to_string();
    assert!(named.contains(&other.display().to_string()), "{named}");
}

/// Defect (item 1 of a second review of the journal): `journal.dat` had
/// the file device's default capacity (16 GiB) whatever the capacity of
/// the index's device, which `capacity=` can make larger: a generation
/// rewriting most of such a device ran out of journal pages, and the
/// journal then refused every later write. Its capacity now follows from
/// the device's (`journal_capacity`; `storage::journal::second_review_tests`
/// shows what a smaller journal loses), when the index is created and
/// when it is opened.
#[test]
fn the_journal_of_an_index_is_sized_for_its_device() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, capacity) in ["4M", "64G"].into_iter().enumerate() {
        let path = tmp.path().join(format!("c{i}"));
        let opts = IndexOptions {
            device: format!("file?direct=false&capacity={capacity}")
                .parse()
                .unwrap(),
            ..file_opts_with(StoreKind::Plain, 16 * 1024)
        };
        let sized = |idx: &Index| {
            let want = crate::storage::journal::journal_capacity(idx.device().capacity(), 1024);
            let journal = idx.journal.as_ref().expect("a journaled index");
            assert_eq!(journal.journal_pages(), want, "capacity={capacity}");
        };
        let mut idx = Index::create(&path, &opts).unwrap();
        sized(&idx);
        for id in 0..500 {
            idx.insert(id, rect(id)).unwrap();
        }
        idx.close().unwrap();
        for access in [Access::Write, Access::Read] {
            sized(&Index::open(&path, access).unwrap());
        }
    }
}

/// Defect (item 3 of a second review of the journal): an index whose
/// manifest was written before the `journal` field kept its journal
/// optional for good, so once it had one, a deleted or zeroed
/// `journal.dat` opened as "no journal" or "a blank one", and the pages a
/// crash left were the index. The first writable open that holds its
/// journal with a commit now records `"journal": true`, and the same damage
/// is refused naming the file, for reading and writing.
#[test]
fn a_pre_journal_index_requires_its_journal_once_a_writer_has_made_one() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("legacy");
    let opts = file_opts_with(StoreKind::Plain, 16 * 1024);
    let mut idx = Index::create(&path, &opts).unwrap();
    for i in 0..2000 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.close().unwrap();
    // An index written before journals: no field, no journal.
    let mut manifest = crate::manifest::Manifest::load(&path).unwrap();
    manifest.journal = false;
    manifest.store(&path).unwrap();
    let journal = path.join(journal::JOURNAL_FILE);
    std::fs::remove_file(&journal).unwrap();
    drop(Index::open(&path, Access::Read).unwrap());
    assert!(
        !crate::manifest::Manifest::load(&path).unwrap().journal,
        "a reader writes nothing"
    );

    let mut idx = Index::open(&path, Access::Write).unwrap();
    assert!(idx.manifest().journal);
    for i in 2000..3000 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.checkpoint().unwrap();
    for i in 3000..5000 {
        idx.insert(i, rect(i)).unwrap(); // written in place, then a crash
    }
    drop(idx);
    assert!(crate::manifest::Manifest::load(&path).unwrap().journal);
    let saved = std::fs::read(&journal).unwrap();
    for damage in ["deleted", "zeroed"] {
        for access in [Access::Read, Access::Write] {
            match damage {
                "deleted" => std::fs::remove_file(&journal).unwrap(),
                _ => std::fs::write(&journal, vec![0u8; saved.len()]).unwrap(),
            }
            match Index::open(&path, access) {
                Ok(idx) => panic!(
                    "{damage}, {access:?}: opened with {} ids",
                    ids_in_all(&idx).len()
                ),
                Err(e) => assert!(
                    e.to_string().contains("journal.dat"),
                    "{damage}, {access:?}: {e}"
                ),
            }
            std::fs::write(&journal, &saved).unwrap();
        }
    }
    let idx = Index::open(&path, Access::Write).unwrap();
    assert_eq!(ids_in_all(&idx), (0..3000).collect::<Vec<u64>>());
    idx.verify().unwrap();
}

/// Defect (item 4 of a second review of the journal): the journaled device
/// an index hands out (`Index::device`, public) made its journal fail for
/// good on a request it refused as bad input (a page beyond the device, a
/// buffer of another length), so every later checkpoint of the index
/// failed ("the rollback journal failed earlier"). Such a request is
/// refused before anything is written, and the index goes on.
#[test]
fn a_bad_request_to_a_journaled_index_s_device_fails_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bad");
    let opts = IndexOptions {
        device: "file?direct=false&capacity=1M".parse().unwrap(),
        ..file_opts_with(StoreKind::Plain, 16 * 1024)
    };
    let mut idx = Index::create(&path, &opts).unwrap();
    for i in 0..500 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.checkpoint().unwrap();
    let beyond = idx.device().capacity();
    let refused = [
        idx.device().write(beyond, &[0u8; 1024]),
        idx.device().write(1, &[0u8; 1000]),
        idx.device().trim(&[beyond]),
    ];
    for r in refused {
        let e = r.expect_err("a bad request");
        assert!(e.is_user_error(), "{e}");
    }
    for i in 500..1000 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.checkpoint().unwrap();
    idx.close().unwrap();
    let idx = Index::open(&path, Access::Read).unwrap();
    assert_eq!(ids_in_all(&idx), (0..1000).collect::<Vec<u64>>());
}
