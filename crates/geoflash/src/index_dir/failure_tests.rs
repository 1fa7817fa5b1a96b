//! An index whose change or commit failed answers nothing more until it
//! is opened again (`failure.rs`): queries included, since its structure
//! in memory may hold what no reopen gives back.
use std::path::Path;

use super::records_review_tests::behind_tripwire;
use super::*;
use crate::geom::{Point, Rect};
use crate::index::query::Predicate;
use crate::manifest::Access;

/// The rectangle of object `i`.
fn rect(i: u64) -> Rect {
    let (x, y) = ((i % 50) as f64, (i / 50 % 50) as f64);
    Rect::from_valid(x, y, x + 0.5, y + 0.5)
}

/// The ids a window over everything finds.
fn ids(index: &Index) -> Vec<u64> {
    let all = Rect::from_valid(-1.0, -1.0, 101.0, 101.0);
    index
        .query(all, Predicate::Intersects)
        .unwrap()
        .sorted_ids()
}

/// A new index on `store` in `dir` holding objects `0..n`, closed.
fn created(dir: &Path, store: &str, n: u64) {
    let base = [("store", store), ("page_size", "1024"), ("buffer", "8MiB")];
    let opts = super::tests::spec_options(base.iter());
    let mut index = Index::create(dir, &opts).unwrap();
    for i in 0..n {
        index.insert(i, rect(i)).unwrap();
    }
    index.close().unwrap();
}

/// Every call of `index` after its failure: an error naming the index's
/// directory and the failure, whatever the call.
fn every_call_is_refused(index: &mut Index, dir: &Path, what: &str) {
    let w = Rect::from_valid(0.0, 0.0, 10.0, 10.0);
    let p = Point { x: 1.0, y: 1.0 };
    let calls: Vec<(&str, crate::Result<()>)> = vec![
        ("query", index.query(w, Predicate::Intersects).map(drop)),
        ("count", index.count(w, Predicate::Intersects).map(drop)),
        ("bounds", index.bounds().map(drop)),
        ("nearest", index.nearest(p, 3, false).map(drop)),
        (
            "query_batch",
            index.query_batch(&[w], Predicate::Intersects).map(drop),
        ),
        ("insert", index.insert(5000, rect(5000))),
        ("delete", index.delete(1, rect(1))),
        ("update", index.update(2, rect(2), rect(3))),
        ("update_by_id", index.update_by_id(4, rect(7))),
        ("commit", index.commit()),
        ("checkpoint", index.checkpoint()),
    ];
    for (call, r) in calls {
        let e = r.expect_err(&format!("{what}: {call} after the failure"));
        let text = e.to_string();
        assert!(
            text.contains("answers nothing more") && text.contains(&dir.display().to_string()),
            "{what}: {call}: {text}"
        );
        assert!(!e.is_user_error(), "{what}: {call}: {text}");
    }
    assert!(index.failure().is_some(), "{what}");
}

/// A commit whose log write fails (eFIND, FAST): the operations it was
/// to make durable are in the structure's memory and not in the files,
/// so the index refuses every later call, queries included (before, they
/// answered with the inserted objects, which the reopen does not have);
/// `close()` writes nothing; the reopen holds the last durable state and
/// takes changes again.
#[test]
fn after_a_failed_commit_the_index_answers_nothing_until_reopened() {
    for store in ["efind", "fast"] {
        for crash in [false, true] {
            let what = format!("{store}, crash {crash}");
            let tmp = tempfile::tempdir().unwrap();
            let dir = &tmp.path().join("idx");
            created(dir, store, 100);
            let mut index = Index::open(dir, Access::Write).unwrap();
            let trip = behind_tripwire(&mut index, dir, crash);
            for i in 100..150 {
                index.insert(i, rect(i)).unwrap();
            }
            assert_eq!(ids(&index).len(), 150, "{what}");
            trip.arm(1);
            let e = index.commit().expect_err(&what);
            assert!(trip.tripped(), "{what}: {e}");
            assert!(
                index
                    .failure()
                    .is_some_and(|f| f.contains("failed as planned")),
                "{what}"
            );
            every_call_is_refused(&mut index, dir, &what);
            index.close().unwrap();
            let index = Index::open(dir, Access::Write).unwrap();
            assert_eq!(index.failure(), None);
            let got = ids(&index);
            assert!(
                got == (0..100).collect::<Vec<_>>() || got == (0..150).collect::<Vec<_>>(),
                "{what}: reopened with {} objects",
                got.len()
            );
            let mut index = index;
            index.insert(9000, rect(9000)).unwrap();
            index.close().unwrap();
            let index = Index::open(dir, Access::Read).unwrap();
            assert_eq!(ids(&index).len(), got.len() + 1, "{what}");
        }
    }
}

/// Bad input leaves the structure at an operation boundary: the index
/// goes on answering and taking changes.
#[test]
fn bad_input_does_not_fail_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = &tmp.path().join("idx");
    created(dir, "efind", 10);
    let mut index = Index::open(dir, Access::Write).unwrap();
    assert!(index.insert(3, rect(3)).unwrap_err().is_user_error());
    assert!(index.delete(77, rect(77)).unwrap_err().is_user_error());
    assert!(index.update_by_id(77, rect(1)).unwrap_err().is_user_error());
    assert_eq!(index.failure(), None);
    index.insert(10, rect(10)).unwrap();
    index.commit().unwrap();
    assert_eq!(ids(&index), (0..=10).collect::<Vec<_>>());
}
