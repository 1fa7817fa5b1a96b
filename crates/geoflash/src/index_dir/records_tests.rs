//! The record map in the store's log (`records.rs`, issue 43, item 1): a
//! commit is one sync of the store's log, a crash brings the map back at
//! the tree's prefix of operations, and a crash between the steps of a
//! checkpoint opens the snapshot the store's checkpoint names.
use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::engine::Access;
use crate::geom::Rect;
use crate::index::query::Predicate;
use crate::index::tests::hits_by_id;
use crate::records::{Records, NEXT_FILE, RECORDS_FILE};

/// A new index in `dir` on `store` with its record map in the store's log.
fn create(dir: &Path, store: &str, settings: &[(&str, &str)]) -> Index {
    let base = [("store", store), ("page_size", "1024"), ("buffer", "8MiB")];
    let opts = super::tests::spec_options(base.iter().chain(settings))
        .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
    let mut index = Index::create(dir, &opts).unwrap();
    assert!(index.log_records_in_store(Records::new()).unwrap(), "{store}");
    index
}

/// Runs `test` with each store of `stores` (by name) and a fresh
/// temporary directory.
fn in_fresh_dirs(stores: [&str; 2], test: impl Fn(&str, &Path)) {
    for store in stores {
        let tmp = tempfile::tempdir().unwrap();
        test(store, tmp.path());
    }
}

fn rect(i: u64) -> Rect {
    let (x, y) = ((i % 97) as f64, (i / 97 % 97) as f64);
    Rect::from_valid(x, y, x + 0.5, y + 0.5)
}

/// What the test expects: record key → (user id, rectangle, object).
type Oracle = BTreeMap<u64, (i64, Rect, Option<Vec<u8>>)>;

/// Inserts user id `id` at `r` (an object for every third id).
fn insert(index: &mut Index, oracle: &mut Oracle, id: i64, r: Rect) {
    let obj = (id % 3 == 0).then(|| vec![id as u8; 3]);
    let key = index.insert_logged_record(id, r, obj.clone()).unwrap();
    oracle.insert(key, (id, r, obj));
}

/// Moves the record `key` to `r`: a delete and an insert of its id.
fn mv(index: &mut Index, oracle: &mut Oracle, key: u64, r: Rect) {
    let (id, old, _) = oracle.remove(&key).unwrap();
    index.delete_logged_record(key, old).unwrap();
    insert(index, oracle, id, r);
}

/// Checks that `index` (tree and map) holds exactly `oracle`.
fn check(index: &Index, oracle: &Oracle, what: &str) {
    let all = Rect::from_valid(-1.0, -1.0, 101.0, 101.0);
    let tree = hits_by_id(&index.query(all, Predicate::Intersects).unwrap());
    let want: Vec<(u64, Rect)> = oracle.iter().map(|(&k, (_, r, _))| (k, *r)).collect();
    if tree != want {
        let first = tree.iter().zip(&want).position(|(a, b)| a != b);
        panic!(
            "{what}: the tree holds {} entries, the oracle {}; first difference at {first:?}",
            tree.len(),
            want.len()
        );
    }
    let map = index.records();
    assert_eq!(map.live(), Some(oracle.len() as u64), "{what}: live ids");
    for (&k, (id, _, obj)) in oracle {
        assert_eq!(map.id(k).unwrap(), *id, "{what}: id of key {k}");
        assert_eq!(map.obj(k), obj.as_deref(), "{what}: object of key {k}");
    }
}

#[test]
fn a_commit_is_one_sync_and_a_crash_brings_the_map_back_with_the_tree() {
    in_fresh_dirs(["efind", "fast"], |store, dir| {
        let mut index = create(dir, store, &[]);
        let mut oracle = Oracle::new();
        index
            .batch(BatchDurability::Commit, |index| {
                for i in 0..300u64 {
                    insert(index, &mut oracle, 10 * i as i64 - 7, rect(i));
                }
                Ok(())
            })
            .unwrap();
        // Commits of moves: one sync of the store's log each, no other file.
        for round in 0..3u64 {
            let before = index.stats("t");
            let keys: Vec<u64> = oracle.keys().copied().step_by(7).collect();
            index
                .batch(BatchDurability::Commit, |index| {
                    for (j, &k) in keys.iter().enumerate() {
                        mv(index, &mut oracle, k, rect(1000 + 31 * round + j as u64));
                    }
                    Ok(())
                })
                .unwrap();
            let after = index.stats("t");
            assert_eq!(after.io.syncs - before.io.syncs, 1, "{store}: device syncs of a commit");
            assert_eq!(after.log_syncs - before.log_syncs, 1, "{store}: log syncs of a commit");
        }
        assert!(!dir.join(crate::records::log::LOG_FILE).exists(), "{store}");
        check(&index, &oracle, store);
        // A crash after the commits: the map comes back from its snapshot
        // and the frames restart kept, exactly the tree's operations.
        drop(index);
        let index = Index::open(dir, Access::Write).unwrap();
        assert!(index.records_in_log(), "{store}");
        check(&index, &oracle, &format!("{store} after a crash"));
        // Read-only, the same, and nothing written.
        drop(index);
        let ro = Index::open(dir, Access::Read).unwrap();
        check(&ro, &oracle, &format!("{store} read-only"));
        drop(ro);
        let mut index = Index::open(dir, Access::Write).unwrap();
        // Deletes and inserts after the last commit, outside a batch: each
        // its own operation, durable by the group commit; a crash keeps a
        // prefix of them, ids with the tree.
        let states: Vec<Oracle> = {
            let mut states = vec![oracle.clone()];
            let keys: Vec<u64> = oracle.keys().copied().take(40).collect();
            for (j, &k) in keys.iter().enumerate() {
                let (id, old, _) = oracle.remove(&k).unwrap();
                index.delete_logged_record(k, old).unwrap();
                states.push(oracle.clone());
                insert(&mut index, &mut oracle, id, rect(5000 + j as u64));
                states.push(oracle.clone());
            }
            states
        };
        drop(index);
        let index = Index::open(dir, Access::Write).unwrap();
        let live = index.records().live().unwrap_or(0);
        let prefix = states
            .iter()
            .rposition(|s| s.len() as u64 == live && s.keys().all(|k| index.records().is_live(*k)))
            .unwrap_or_else(|| panic!("{store}: the recovered map is no prefix state"));
        check(&index, &states[prefix], &format!("{store}: prefix {prefix}"));
        index.close().unwrap();
    });
}

#[test]
fn a_snapshot_of_the_column_layout_is_read_and_rewritten_compact_at_the_next_checkpoint() {
    in_fresh_dirs(["efind", "fast"], |store, dir| {
        let mut index = create(dir, store, &[]);
        let mut oracle = Oracle::new();
        for i in 0..300u64 {
            // Ids that are their keys, then others (negative, repeated).
            let id = if i < 200 { i as i64 } else { (i % 7) as i64 - 3 };
            insert(&mut index, &mut oracle, id, rect(i));
        }
        index.close().unwrap();
        // The snapshot as a build before the compact layout wrote it.
        let path = dir.join(RECORDS_FILE);
        let map = Records::decode(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(map.read_version(), crate::records::LOGGED_VERSION, "{store}");
        let columns = map.encode_columns(3, map.generation());
        std::fs::write(&path, &columns).unwrap();
        let index = Index::open(dir, Access::Read).unwrap();
        assert_eq!(index.records().read_version(), 3, "{store}");
        check(&index, &oracle, &format!("{store}: version 3 read-only"));
        drop(index);
        assert_eq!(std::fs::read(&path).unwrap(), columns, "{store}: a read-only open writes nothing");
        let index = Index::open(dir, Access::Write).unwrap();
        check(&index, &oracle, &format!("{store}: version 3"));
        index.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            bytes[8..10],
            crate::records::LOGGED_VERSION.to_le_bytes(),
            "{store}: rewritten in the current format"
        );
        // The 200 ids that are their keys not stored (8 bytes for their
        // count), and 38 bytes of liveness bits instead of 300 bytes.
        assert_eq!(
            columns.len() - bytes.len(),
            200 * 8 - 8 + 300 - 38,
            "{store}"
        );
        let index = Index::open(dir, Access::Write).unwrap();
        check(&index, &oracle, &format!("{store}: rewritten"));
    });
}

#[test]
fn a_crash_between_the_steps_of_a_checkpoint_opens_the_snapshot_the_store_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut index = create(dir, "efind", &[]);
    let mut oracle = Oracle::new();
    for i in 0..50u64 {
        insert(&mut index, &mut oracle, i as i64, rect(i));
    }
    index.close().unwrap();
    let generation = |dir: &Path, name: &str| {
        Records::decode(&std::fs::read(dir.join(name)).unwrap())
            .unwrap()
            .generation()
    };
    let g = generation(dir, RECORDS_FILE);

    // 1. After the snapshot, before the store's checkpoint: the next
    //    snapshot is a checkpoint that did not happen.
    let mut index = Index::open(dir, Access::Write).unwrap();
    for i in 50..60u64 {
        insert(&mut index, &mut oracle, i as i64, rect(i));
    }
    index.commit().unwrap();
    assert_eq!(index.before_store_checkpoint().unwrap(), Some((g + 1, true)));
    drop(index);
    assert_eq!(generation(dir, NEXT_FILE), g + 1);
    let index = Index::open(dir, Access::Write).unwrap();
    check(&index, &oracle, "a crash after the snapshot");
    assert!(!dir.join(NEXT_FILE).exists(), "the stale snapshot stays");
    assert_eq!(index.records().generation(), g);
    drop(index);

    // 2. After the store's checkpoint, before the rename: the next
    //    snapshot is the one the store names.
    let mut index = Index::open(dir, Access::Write).unwrap();
    for i in 60..70u64 {
        insert(&mut index, &mut oracle, i as i64, rect(i));
    }
    let (next, _) = index.before_store_checkpoint().unwrap().unwrap();
    index.tree.checkpoint().unwrap();
    drop(index);
    assert_eq!((generation(dir, RECORDS_FILE), generation(dir, NEXT_FILE)), (g, next));
    let ro = Index::open(dir, Access::Read).unwrap();
    check(&ro, &oracle, "read-only after the store's checkpoint");
    assert!(dir.join(NEXT_FILE).exists(), "a reader renames nothing");
    drop(ro);
    let index = Index::open(dir, Access::Write).unwrap();
    check(&index, &oracle, "a crash after the store's checkpoint");
    assert!(!dir.join(NEXT_FILE).exists(), "the rename is finished");
    assert_eq!(generation(dir, RECORDS_FILE), next);
    drop(index);

    // 3. A snapshot the store does not name is refused, naming both files.
    std::fs::remove_file(dir.join(RECORDS_FILE)).unwrap();
    let e = Index::open(dir, Access::Read).unwrap_err().to_string();
    assert!(
        e.contains(RECORDS_FILE) && e.contains(NEXT_FILE) && e.contains(&format!("generation {next}")),
        "{e}"
    );
}

#[test]
fn frames_past_their_budget_checkpoint_between_operations() {
    in_fresh_dirs(["efind", "fast"], |store, dir| {
        // A small log: a quarter of it is the frames' budget.
        let mut index = create(dir, store, &[("log_capacity", "256KiB")]);
        let room = index.tree.client_log_ref().unwrap().room();
        assert!(room <= 66 << 10, "{store}: {room}");
        let mut oracle = Oracle::new();
        let start = index.records().generation();
        // Several times the budget of frames, with objects.
        for i in 0..8000u64 {
            insert(&mut index, &mut oracle, 3 * i as i64, rect(i));
        }
        let logged = index.tree.client_log_ref().unwrap().bytes();
        assert!(logged < 2 * room, "{store}: {logged} bytes of frames, room {room}");
        assert!(
            index.records().generation() > start + 1,
            "{store}: no checkpoint by the frames' budget"
        );
        index.commit().unwrap();
        drop(index);
        let index = Index::open(dir, Access::Write).unwrap();
        check(&index, &oracle, store);
        index.close().unwrap();
    });
}

/// Asserts that every write by key on `index` is refused naming the
/// Python package's map, and that the index is unchanged.
fn refuses_keyed_writes(index: &mut Index, key: u64, at: Rect, what: &str) {
    let before = index.len();
    let new = Rect::from_valid(50.0, 50.0, 50.5, 50.5);
    let errors = [
        index.insert(1_000_000, new).unwrap_err(),
        index.delete(key, at).unwrap_err(),
        index.update(key, at, new).unwrap_err(),
        index.update_by_id(key, new).unwrap_err(),
    ];
    for e in errors {
        let text = e.to_string();
        assert!(text.contains(RECORDS_FILE) && text.contains("Python"), "{what}: {text}");
    }
    assert_eq!(index.len(), before, "{what}: a refused write changed the index");
}

#[test]
fn an_index_keyed_by_a_front_ends_map_refuses_writes_by_key_until_the_front_end_claims_it() {
    // The map in the store's log (eFIND) and the map with its own log
    // (the plain store): opened by another caller (the command line), a
    // write by key would be an entry the map does not know or knows as
    // another object.
    in_fresh_dirs(["efind", "plain"], |store, dir| {
        let mut oracle = Oracle::new();
        if store == "efind" {
            let mut index = create(dir, store, &[]);
            for i in 0..50 {
                insert(&mut index, &mut oracle, -(i as i64), rect(i));
            }
            index.close().unwrap();
        } else {
            let base = [("store", store), ("page_size", "1024"), ("buffer", "8MiB")];
            let opts = super::tests::spec_options(base.iter())
                .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
            let mut index = Index::create(dir, &opts).unwrap();
            let mut map = Records::new();
            for i in 0..50u64 {
                let key = map.add(-(i as i64), None).unwrap();
                index.insert(key, rect(i)).unwrap();
                oracle.insert(key, (-(i as i64), rect(i), None));
            }
            map.save(dir).unwrap();
            index.set_records(map);
            index.close().unwrap();
        }
        let (&key, &(_, at, _)) = oracle.iter().next().unwrap();
        let mut index = Index::open(dir, Access::Write).unwrap();
        assert!(index.has_front_end_records(), "{store}");
        refuses_keyed_writes(&mut index, key, at, store);
        // Queries, checkpoints and the map's own protocol still work.
        assert_eq!(index.len(), 50, "{store}");
        index.checkpoint().unwrap();
        if store == "efind" {
            mv(&mut index, &mut oracle, key, rect(60));
            check(&index, &oracle, "a move through the map, unclaimed");
            refuses_keyed_writes(&mut index, 1, rect(1), "after a move through the map");
        }
        // The front end claims the map: its writes by key go through.
        index.claim_records();
        let key = *oracle.keys().next().unwrap();
        index.update_by_id(key, rect(70)).unwrap();
        index.close().unwrap();
        // An index without a front end's map takes writes by key.
        let plain = tempfile::tempdir().unwrap();
        let opts = super::tests::spec_options([("store", store)].iter())
            .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
        let mut index = Index::create(plain.path(), &opts).unwrap();
        index.insert(1, rect(1)).unwrap();
        index.close().unwrap();
        let mut index = Index::open(plain.path(), Access::Write).unwrap();
        assert!(!index.has_front_end_records());
        index.insert(2, rect(2)).unwrap();
    });
}

/// A checkpoint whose store's checkpoint is durable but whose rename of
/// `pyrecords.next.dat` onto `pyrecords.dat` fails (here a directory in
/// the way; an I/O error alike) leaves the snapshot the store names in
/// `pyrecords.next.dat`. The failed index answers nothing more; the next
/// open reads that snapshot and finishes the rename, and a crash in a
/// later checkpoint after its snapshot was written reopens the same. (A
/// checkpoint in the same process, which the failure now refuses,
/// finishes the rename before it writes its own snapshot: before, it
/// overwrote the named snapshot, and a crash before its store's
/// checkpoint left an index that no open could read: "names record-map
/// generation g, but pyrecords.dat is missing and pyrecords.next.dat
/// holds generation g + 1".)
#[test]
fn a_checkpoint_whose_rename_failed_keeps_the_named_snapshot_through_the_next_one() {
    in_fresh_dirs(["efind", "fast"], |store, dir| {
        let mut index = create(dir, store, &[]);
        let mut oracle = Oracle::new();
        for i in 0..20u64 {
            insert(&mut index, &mut oracle, i as i64 - 5, rect(i));
        }
        index.close().unwrap();
        let mut index = Index::open(dir, Access::Write).unwrap();
        for i in 20..30u64 {
            insert(&mut index, &mut oracle, 7, rect(i));
        }
        // The rename onto pyrecords.dat fails.
        let current = dir.join(RECORDS_FILE);
        std::fs::remove_file(&current).unwrap();
        std::fs::create_dir(&current).unwrap();
        std::fs::write(current.join("in-the-way"), b"x").unwrap();
        assert!(index.checkpoint().is_err(), "{store}: the rename cannot succeed");
        std::fs::remove_dir_all(&current).unwrap();
        // The failed index answers nothing more (`failure.rs`); opened
        // again, it holds what the failed checkpoint's store named.
        assert!(index.query(rect(0), Predicate::Intersects).is_err(), "{store}");
        drop(index);
        let mut index = Index::open(dir, Access::Write).unwrap();
        check(&index, &oracle, &format!("{store} reopened after the failed rename"));
        for i in 30..40u64 {
            insert(&mut index, &mut oracle, i as i64, rect(i));
        }
        index.commit().unwrap();
        // A crash in the next checkpoint, after its snapshot was written.
        index.before_store_checkpoint().unwrap();
        drop(index);
        for access in [Access::Read, Access::Write] {
            let index = Index::open(dir, access)
                .unwrap_or_else(|e| panic!("{store}: a crash after a failed rename: {e}"));
            check(&index, &oracle, &format!("{store} {access:?}"));
        }
        // And a checkpoint after all that reopens the same.
        let mut index = Index::open(dir, Access::Write).unwrap();
        index.checkpoint().unwrap();
        drop(index);
        let index = Index::open(dir, Access::Write).unwrap();
        check(&index, &oracle, &format!("{store} after a checkpoint"));
    });
}
