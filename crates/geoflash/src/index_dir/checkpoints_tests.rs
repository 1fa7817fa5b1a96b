//! Checkpoints by time (`checkpoints.rs`): which durability points
//! checkpoint once the interval has passed, on the tests' clock (advanced
//! by the tests, the wall clock ignored; nothing sleeps). A checkpoint is seen in the counters (the dirty nodes
//! flushed) and after a crash (the index dropped without closing): the
//! reopened store replays nothing.
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::engine::Access;
use crate::geom::Rect;
use crate::index::query::Predicate;

const MINUTE: Duration = Duration::from_secs(60);

/// A new index in `dir` on the eFIND store (or `store`) with a buffer
/// that holds every node, its checkpoint interval one minute, and
/// `settings` on top.
fn create(dir: &Path, store: &str, settings: &[(&str, &str)]) -> Index {
    let base = [
        ("store", store),
        ("page_size", "1024"),
        ("buffer", "8MiB"),
        ("checkpoint_interval", "1min"),
    ];
    let opts = super::tests::spec_options(base.iter().chain(settings))
        .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
    let mut index = Index::create(dir, &opts).unwrap();
    // The tests' clock from here on: advanced, never read from the wall.
    index.checkpoints.advance(Duration::ZERO);
    index
}

fn rect(i: u64) -> Rect {
    let (x, y) = ((i % 97) as f64, (i / 97 % 97) as f64);
    Rect::from_valid(x, y, x + 0.5, y + 0.5)
}

/// Inserts objects `from .. to` as one batch durable at its end.
fn commit_batch(index: &mut Index, from: u64, to: u64) {
    index
        .batch(BatchDurability::Commit, |index| {
            for i in from..to {
                index.insert(i, rect(i))?;
            }
            Ok(())
        })
        .unwrap();
}

fn flushed(index: &Index) -> u64 {
    index.stats("t").flushed_nodes
}

/// Drops `index` without closing it (a killed process: what its store
/// wrote stays, what it held in memory is lost), reopens the directory
/// and returns what restart replayed, after checking that `objects` are
/// all there.
fn crash_and_reopen(index: Index, dir: &Path, objects: u64) -> u64 {
    drop(index);
    let index = Index::open(dir, Access::Write).unwrap();
    let all = Rect::from_valid(-1.0, -1.0, 101.0, 101.0);
    assert_eq!(index.count(all, Predicate::Intersects).unwrap(), objects);
    let replayed = index.restart_report().map_or(0, |r| r.changes_replayed);
    index.close().unwrap();
    replayed
}

#[test]
fn a_commit_after_the_interval_checkpoints_and_leaves_nothing_to_replay() {
    for store in ["efind", "fast"] {
        let tmp = tempfile::tempdir().unwrap();
        let mut index = create(tmp.path(), store, &[]);
        assert_eq!(index.checkpoint_interval(), Some(MINUTE), "{store}");
        // The first batch into the empty index is not logged: it checkpoints.
        commit_batch(&mut index, 0, 300);
        let base = flushed(&index);
        // Within the interval a commit syncs the log: nothing flushed.
        commit_batch(&mut index, 300, 450);
        index.checkpoints.advance(MINUTE - Duration::from_millis(1));
        commit_batch(&mut index, 450, 600);
        assert_eq!(flushed(&index), base, "{store}: before the interval");
        index.checkpoints.advance(Duration::from_millis(1));
        commit_batch(&mut index, 600, 900);
        let after = flushed(&index);
        assert!(after > base, "{store}: the commit after the interval flushed nothing");
        // The clock restarted: the next commit syncs the log only.
        commit_batch(&mut index, 900, 950);
        assert_eq!(flushed(&index), after, "{store}: the clock did not restart");
        assert!(
            crash_and_reopen(index, tmp.path(), 950) > 0,
            "{store}: the last commit is replayed from the log"
        );

        // The same commits without the interval passing: replayed.
        let tmp = tempfile::tempdir().unwrap();
        let mut index = create(tmp.path(), store, &[]);
        commit_batch(&mut index, 0, 300);
        let base = flushed(&index);
        commit_batch(&mut index, 300, 900);
        assert_eq!(flushed(&index), base, "{store}");
        index.checkpoints.advance(MINUTE);
        commit_batch(&mut index, 900, 950);
        assert!(flushed(&index) > base, "{store}");
        assert_eq!(crash_and_reopen(index, tmp.path(), 950), 0, "{store}");
    }
}

#[test]
fn operations_checkpoint_at_the_durability_points_of_the_mode_only() {
    let tmp = tempfile::tempdir().unwrap();
    // Group commit every 4 operations (and never by its own time).
    let mut index = create(tmp.path(), "efind", &[("group_commit", "4,3600000")]);
    // Two groups, and the ninth operation opens a third.
    for i in 0..9 {
        index.insert(i, rect(i)).unwrap();
    }
    assert_eq!(flushed(&index), 0);
    index.checkpoints.advance(MINUTE);
    // The checkpoint an operation makes due runs when the next one begins
    // (its error is that one's): operations 10 to 12 begin after no
    // durability point, so none checkpoints although due.
    for i in 9..12 {
        index.insert(i, rect(i)).unwrap();
        assert_eq!(flushed(&index), 0, "operation {i} began after no durability point");
    }
    // The 12th completed the group: the 13th begins with the checkpoint.
    index.insert(12, rect(12)).unwrap();
    assert!(flushed(&index) > 0);
    // The 13th is in no finished group: a crash keeps the first 12, and
    // maybe the 13th.
    drop(index);
    let index = Index::open(tmp.path(), Access::Write).unwrap();
    let all = Rect::from_valid(-1.0, -1.0, 101.0, 101.0);
    let n = index.count(all, Predicate::Intersects).unwrap();
    assert!((12..=13).contains(&n), "{n} objects after the crash");
}

#[test]
fn a_batch_waiting_for_its_end_checkpoints_at_its_end_only() {
    let tmp = tempfile::tempdir().unwrap();
    let mut index = create(tmp.path(), "efind", &[("durability", "sync")]);
    commit_batch(&mut index, 0, 100);
    let base = flushed(&index);
    index.checkpoints.advance(MINUTE);
    let mut seen = Vec::new();
    index
        .batch(BatchDurability::Commit, |index| {
            for i in 100..200 {
                index.insert(i, rect(i))?;
                seen.push(index.stats("t").flushed_nodes);
            }
            Ok(())
        })
        .unwrap();
    assert!(seen.iter().all(|&n| n == base), "checkpointed inside the batch");
    assert!(flushed(&index) > base, "not at its end");
    assert_eq!(crash_and_reopen(index, tmp.path(), 200), 0);
}

#[test]
fn off_never_checkpoints_by_time() {
    let tmp = tempfile::tempdir().unwrap();
    let mut index = create(tmp.path(), "efind", &[("checkpoint_interval", "off"), ("durability", "sync")]);
    assert_eq!(index.checkpoint_interval(), None);
    commit_batch(&mut index, 0, 100);
    let base = flushed(&index);
    index.checkpoints.advance(Duration::from_secs(1 << 30));
    commit_batch(&mut index, 100, 200);
    index.insert(200, rect(200)).unwrap();
    assert_eq!(flushed(&index), base);
    assert!(crash_and_reopen(index, tmp.path(), 201) > 0);
}

