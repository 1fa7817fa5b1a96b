//! An index directory whose `journal.dat` is replaced by an older copy of
//! itself (a backup of the one file restored, a copy from an earlier
//! generation) is refused naming the journal, for reading and writing,
//! before anything is rolled back or dropped: the plain store and a grid
//! file on a file, eFIND and FAST on a hybrid of a file and a simulator
//! (whose journal commits with the simulator's image). Each test whose
//! comment begins "Defect" failed on the code before its fix.
use std::path::Path;

use super::JOURNAL_FILE;
use crate::geom::Rect;
use crate::index::query::Predicate;
use crate::index_dir::images::{Step, MARKER_FILE, STOP_AFTER};
use crate::index_dir::tests::spec_options;
use crate::index_dir::{Index, IndexOptions};
use crate::manifest::Access;

/// Object `i`: a point (grid files index points; the trees take them too).
fn point(i: u64) -> Rect {
    let x = (i * 7919 % 1000) as f64;
    let y = (i * 104_729 % 997) as f64;
    Rect::new(x, y, x, y).unwrap()
}

fn ids(idx: &Index) -> Vec<u64> {
    let all = Rect::new(-1.0, -1.0, 1001.0, 1001.0).unwrap();
    idx.query(all, Predicate::Intersects).unwrap().sorted_ids()
}

/// The journaled indexes: (what, options).
fn journaled() -> Vec<(&'static str, IndexOptions)> {
    let hybrid = "hybrid:fast=(file?direct=false)&slow=(flashsim:)";
    let logged = |store| {
        [
            ("store", store),
            ("durability", "sync"),
            ("placement", "internal-fast"),
        ]
    };
    let cases: [(&str, Vec<(&str, &str)>); 4] = [
        ("plain", vec![("store", "plain")]),
        ("gffm", vec![("kind", "gffm")]),
        ("efind", logged("efind").to_vec()),
        ("fast", logged("fast").to_vec()),
    ];
    let domain: Vec<Rect> = (0..4000).map(point).collect();
    cases
        .into_iter()
        .map(|(what, mut settings)| {
            settings.extend([("page_size", "1KiB"), ("buffer", "16KiB")]);
            let mut opts = spec_options(&settings);
            opts.device = match what {
                "plain" | "gffm" => "file?direct=false",
                _ => hybrid,
            }
            .parse()
            .unwrap();
            (what, opts.with_domain_of(&domain))
        })
        .collect()
}

/// Every file of `dir` with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "LOCK"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Opening `dir` for reading, then for writing, is refused naming the
/// journal, and changes no file.
fn refused(dir: &Path, what: &str) {
    let before = files(dir);
    for access in [Access::Read, Access::Write] {
        match Index::open(dir, access) {
            Ok(idx) => panic!("{what} ({access:?}): opened with {} ids", ids(&idx).len()),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(JOURNAL_FILE), "{what} ({access:?}): {msg}");
            }
        }
        assert!(files(dir) == before, "{what} ({access:?}): a file changed");
    }
}

/// Defect: `journal.dat` replaced by an older copy of itself opened as the
/// index's journal. A copy taken after a close (no batches) opened at its
/// older generation, horizon and client mark; a copy a crash left with
/// batches of before-images rolled pages that later checkpoints had
/// changed back to their older content, a mix of generations (on the
/// plain store, wrong answers or a broken tree). The journal's header now
/// records the last pages each commit wrote with their CRC-32C (its
/// witnesses), and an open refuses a journal whose witnesses the pages do
/// not hold, naming `journal.dat`, before anything is written.
#[test]
fn a_journal_replaced_by_an_older_copy_of_itself_is_refused_naming_it() {
    let root = tempfile::tempdir().unwrap();
    for (what, opts) in journaled() {
        let dir = root.path().join(what);
        let journal = dir.join(JOURNAL_FILE);
        let (after_close, mut idx) = closed_then_reopened(&dir, &opts, 2500);
        for i in 0..300 {
            idx.delete(i, point(i)).unwrap();
        }
        drop(idx); // a crash: the pages written in place since the close
        let after_crash = std::fs::read(&journal).unwrap();
        let mut idx = Index::open(&dir, Access::Write).unwrap();
        for i in 2500..4000 {
            idx.insert(i, point(i)).unwrap();
        }
        for i in 300..900 {
            idx.delete(i, point(i)).unwrap();
        }
        idx.close().unwrap();
        let want = ids(&Index::open(&dir, Access::Read).unwrap());
        let current = std::fs::read(&journal).unwrap();
        for (copy, bytes) in [
            ("a copy after a close", &after_close),
            ("a copy after a crash", &after_crash),
        ] {
            std::fs::write(&journal, bytes).unwrap();
            refused(&dir, &format!("{what}: {copy}"));
        }
        std::fs::write(&journal, &current).unwrap();
        assert_eq!(
            ids(&Index::open(&dir, Access::Read).unwrap()),
            want,
            "{what}"
        );
        Index::open(&dir, Access::Write).unwrap().close().unwrap();
        assert_eq!(
            ids(&Index::open(&dir, Access::Read).unwrap()),
            want,
            "{what}: reopened"
        );
    }
}

/// A new index in `dir` holding points `0..1000`, closed; returns the
/// bytes of its `journal.dat` then, and the index reopened for writing
/// with points `1000..upto` inserted.
fn closed_then_reopened(dir: &Path, opts: &IndexOptions, upto: u64) -> (Vec<u8>, Index) {
    let mut idx = Index::create(dir, opts).unwrap();
    for i in 0..1000 {
        idx.insert(i, point(i)).unwrap();
    }
    idx.close().unwrap();
    let journal = std::fs::read(dir.join(JOURNAL_FILE)).unwrap();
    let mut idx = Index::open(dir, Access::Write).unwrap();
    for i in 1000..upto {
        idx.insert(i, point(i)).unwrap();
    }
    (journal, idx)
}

/// Defect: the marker `images.next` of a checkpoint's save names the
/// journal generation that commits it, written when the journal's last
/// commit was the one before; a `journal.dat` older than that (here two
/// checkpoints older) made a writer take the save for one that never
/// reached its commit point and delete its `.next` files, maybe a
/// committed checkpoint, before anything else was checked. The open now
/// refuses such a journal naming it, and the files stay.
#[test]
fn a_journal_older_than_the_marker_of_a_save_is_refused_and_the_save_kept() {
    let root = tempfile::tempdir().unwrap();
    for (what, opts) in journaled()
        .into_iter()
        .filter(|(w, _)| *w == "efind" || *w == "fast")
    {
        let dir = root.path().join(what);
        let journal = dir.join(JOURNAL_FILE);
        let (older, mut idx) = closed_then_reopened(&dir, &opts, 2000);
        idx.checkpoint().unwrap();
        for i in 2000..3000 {
            idx.insert(i, point(i)).unwrap();
        }
        // The save stops after the journal's commit: its renames are left.
        STOP_AFTER.with(|s| s.set(Some(Step::Commit)));
        assert!(idx.checkpoint().is_err(), "{what}");
        drop(idx);
        let current = std::fs::read(&journal).unwrap();
        std::fs::write(&journal, &older).unwrap();
        refused(&dir, what);
        assert!(
            dir.join(MARKER_FILE).is_file(),
            "{what}: the marker was dropped"
        );
        assert!(
            dir.join("device.img.next").is_file(),
            "{what}: the save's image was dropped"
        );
        std::fs::write(&journal, &current).unwrap();
        let idx = Index::open(&dir, Access::Write).unwrap();
        assert_eq!(ids(&idx), (0..3000).collect::<Vec<u64>>(), "{what}");
        idx.close().unwrap();
    }
}
