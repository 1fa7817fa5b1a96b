//! [`Index::update_by_id`] on every structure against a brute-force oracle
//! (id → rectangle), and the R-tree family's updates in place seen from the
//! index.
use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;

use super::*;
use crate::geom::Rect;
use crate::index::query::Predicate;

/// Every structure an index can hold, by its `kind` name.
const KINDS: [&str; 8] = [
    "rtree", "rstar", "hilbert", "fortree", "xbr", "grid", "gffm", "lbgrid",
];

/// Structures that hold points (degenerate rectangles) only.
fn points_only(kind: &str) -> bool {
    matches!(kind, "xbr" | "grid" | "gffm" | "lbgrid")
}

fn rect(x0: f64, y0: f64, x1: f64, y1: f64) -> Rect {
    Rect::new(x0, y0, x1, y1).unwrap()
}

/// A temporary index of `kind` in memory, small pages, over [0, 100]².
fn index_of(kind: &str) -> Index {
    let opts = super::tests::spec_options(&[
        ("kind", kind),
        ("device", "mem:"),
        ("page_size", "512"),
        ("buffer", "64KiB"),
    ]);
    let corners = [rect(0.0, 0.0, 0.0, 0.0), rect(100.0, 100.0, 100.0, 100.0)];
    let opts = opts.with_domain_of(corners.iter());
    Index::create_temporary(&opts).unwrap_or_else(|e| panic!("{kind}: {e}"))
}

#[derive(Debug, Clone)]
enum Op {
    /// A new object at (x, y), of size (w, h) for boxes.
    Insert(u8, u8, u8, u8),
    Delete(usize),
    /// A small move of an object (tenths of a unit): mostly inside its leaf.
    Nudge(usize, i8, i8),
    /// A move anywhere.
    Jump(usize, u8, u8),
    /// An update by id of an id the index does not hold.
    Absent(u64),
    /// A window query compared with the oracle.
    Query(u8, u8, u8, u8),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..100, 0u8..100, 0u8..4, 0u8..4).prop_map(|(x, y, w, h)| Op::Insert(x, y, w, h)),
        1 => any::<usize>().prop_map(Op::Delete),
        5 => (any::<usize>(), -5i8..6, -5i8..6).prop_map(|(i, dx, dy)| Op::Nudge(i, dx, dy)),
        1 => (any::<usize>(), 0u8..100, 0u8..100).prop_map(|(i, x, y)| Op::Jump(i, x, y)),
        1 => (1u64..1000).prop_map(|k| Op::Absent(1_000_000 + k)),
        1 => (0u8..100, 0u8..100, 1u8..40, 1u8..40).prop_map(|(x, y, w, h)| Op::Query(x, y, w, h)),
    ]
}

/// The objects of `oracle` whose rectangle intersects `w`.
fn expected(oracle: &HashMap<u64, Rect>, w: &Rect) -> BTreeSet<u64> {
    oracle
        .iter()
        .filter(|(_, r)| r.intersects(w))
        .map(|(id, _)| *id)
        .collect()
}

fn check_window(kind: &str, index: &Index, oracle: &HashMap<u64, Rect>, w: Rect) {
    let got: BTreeSet<u64> = index
        .query(w, Predicate::Intersects)
        .unwrap()
        .sorted_ids()
        .into_iter()
        .collect();
    assert_eq!(got, expected(oracle, &w), "{kind}: window {w:?}");
}

/// Moves `id` to `new` by [`Index::update_by_id`], and the oracle with it.
/// A structure of distinct points refuses a move onto another object's
/// point: then the error names the point and nothing changes (the moved
/// object is not lost).
fn move_to(
    kind: &str,
    points: bool,
    index: &mut Index,
    oracle: &mut HashMap<u64, Rect>,
    id: u64,
    new: Rect,
) {
    let held = points && oracle.iter().any(|(&other, r)| other != id && *r == new);
    let done = index.update_by_id(id, new);
    if held {
        let e = done.expect_err(kind).to_string();
        assert!(e.contains("already"), "{kind}: {e}");
    } else {
        done.unwrap_or_else(|e| panic!("{kind}: {e}"));
        oracle.insert(id, new);
    }
}

/// Runs `ops` on an index of `kind`, checking it against the oracle.
fn run(kind: &str, ops: &[Op]) -> Index {
    let mut index = index_of(kind);
    let mut oracle: HashMap<u64, Rect> = HashMap::new();
    let mut ids: Vec<u64> = Vec::new();
    let mut next = 1u64;
    let points = points_only(kind);
    let clamp = |v: f64| v.clamp(0.0, 99.0);
    // The structures of points hold distinct points: an insertion onto
    // another object's point is left out (a move onto one is refused, see
    // `move_to`).
    let taken = |oracle: &HashMap<u64, Rect>, r: &Rect| points && oracle.values().any(|o| o == r);
    for op in ops {
        match *op {
            Op::Insert(x, y, w, h) => {
                let (x, y) = (f64::from(x), f64::from(y));
                let (w, h) = if points {
                    (0.0, 0.0)
                } else {
                    (f64::from(w) * 0.5, f64::from(h) * 0.5)
                };
                let r = rect(x, y, x + w, y + h);
                if taken(&oracle, &r) {
                    continue;
                }
                index.insert(next, r).unwrap();
                oracle.insert(next, r);
                ids.push(next);
                next += 1;
            }
            Op::Delete(i) if !ids.is_empty() => {
                let id = ids.swap_remove(i % ids.len());
                let r = oracle.remove(&id).unwrap();
                index.delete(id, r).unwrap();
            }
            Op::Nudge(i, dx, dy) if !ids.is_empty() => {
                let id = ids[i % ids.len()];
                let old = oracle[&id];
                let (dx, dy) = (f64::from(dx) * 0.1, f64::from(dy) * 0.1);
                let (x, y) = (clamp(old.min_x() + dx), clamp(old.min_y() + dy));
                let new = rect(
                    x,
                    y,
                    x + (old.max_x() - old.min_x()),
                    y + (old.max_y() - old.min_y()),
                );
                move_to(kind, points, &mut index, &mut oracle, id, new);
            }
            Op::Jump(i, x, y) if !ids.is_empty() => {
                let id = ids[i % ids.len()];
                let old = oracle[&id];
                let (x, y) = (f64::from(x), f64::from(y));
                let new = rect(
                    x,
                    y,
                    x + (old.max_x() - old.min_x()),
                    y + (old.max_y() - old.min_y()),
                );
                move_to(kind, points, &mut index, &mut oracle, id, new);
            }
            Op::Absent(id) => {
                let before = index.len();
                let e = index
                    .update_by_id(id, rect(1.0, 1.0, 1.0, 1.0))
                    .unwrap_err();
                assert!(
                    e.to_string()
                        .contains(&format!("object {id} is not in the index")),
                    "{kind}: {e}"
                );
                assert_eq!(index.len(), before, "{kind}");
            }
            Op::Query(x, y, w, h) => {
                let (x, y) = (f64::from(x), f64::from(y));
                check_window(
                    kind,
                    &index,
                    &oracle,
                    rect(x, y, x + f64::from(w), y + f64::from(h)),
                );
            }
            _ => {}
        }
        assert_eq!(index.len(), oracle.len() as u64, "{kind} after {op:?}");
    }
    check_window(kind, &index, &oracle, Rect::world());
    for i in 0..10 {
        let x = f64::from(i) * 10.0;
        check_window(kind, &index, &oracle, rect(x, 0.0, x + 10.0, 100.0));
    }
    if let Ok(t) = index.tree() {
        t.check().unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
    if let Some(v) = index.structure().verify_grid() {
        assert_eq!(v.unwrap(), oracle.len() as u64, "{kind}");
    }
    index
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        (crate::testenv::proptest_cases() / 4).max(4)
    ))]

    #[test]
    fn updates_by_id_on_every_structure_agree_with_the_oracle(
        ops in prop::collection::vec(op_strategy(), 1..200),
    ) {
        for kind in KINDS {
            run(kind, &ops);
        }
    }
}

/// Small moves of an R-tree or R*-tree index's objects are mostly done in
/// place (the `updates_in_place` column counts them); large moves leave the
/// leaf and are a delete and an insert; the answers are right either way.
#[test]
fn small_moves_update_in_place_and_large_ones_do_not() {
    for kind in ["rtree", "rstar"] {
        let mut ops: Vec<Op> = (0..600u32)
            .map(|i| Op::Insert((i % 25 * 4) as u8, (i / 25 * 4) as u8, 1, 1))
            .collect();
        ops.extend((0..300).map(|i| Op::Nudge(i * 7, (i % 3) as i8 - 1, (i % 5) as i8 - 2)));
        let index = run(kind, &ops);
        let small = index.stats("small").updates_in_place;
        assert!(small > 100, "{kind}: {small} of 300 small moves in place");
        let mut index = index;
        // Across the plane: out of every leaf's rectangle.
        for id in 1..=50u64 {
            let x = if id % 2 == 0 { 0.0 } else { 98.0 };
            let y = (id % 7) as f64;
            index
                .update_by_id(id * 11, rect(x, y, x + 0.5, y + 0.5))
                .unwrap();
        }
        let large = index.stats("large").updates_in_place - small;
        assert!(large < 10, "{kind}: {large} of 50 large moves in place");
        index.tree().unwrap().check().unwrap();
        assert_eq!(index.len(), 600);
        assert!(index.locator.is_built());
    }
    // A Hilbert R-tree never updates in place.
    let ops: Vec<Op> = (0..200u32)
        .map(|i| Op::Insert((i % 20 * 5) as u8, (i / 20 * 5) as u8, 1, 1))
        .chain((0..100).map(|i| Op::Nudge(i, 1, 1)))
        .collect();
    assert_eq!(run("hilbert", &ops).stats("h").updates_in_place, 0);
}

/// The locator follows insertions, deletions and updates made after it was
/// built, and is kept through a refused operation; an absent id changes
/// nothing.
#[test]
fn the_locator_follows_every_change() {
    let mut index = index_of("rstar");
    for i in 0..50u64 {
        let x = i as f64;
        index.insert(i, rect(x, x, x + 1.0, x + 1.0)).unwrap();
    }
    index.update_by_id(3, rect(3.2, 3.2, 3.8, 3.8)).unwrap();
    assert!(index.locator.is_built());
    // After it was built: a new object, a deletion, an update by rectangle.
    index.insert(100, rect(60.0, 60.0, 61.0, 61.0)).unwrap();
    index.delete(4, rect(4.0, 4.0, 5.0, 5.0)).unwrap();
    index
        .update(5, rect(5.0, 5.0, 6.0, 6.0), rect(70.0, 70.0, 71.0, 71.0))
        .unwrap();
    index
        .update_by_id(100, rect(80.0, 80.0, 81.0, 81.0))
        .unwrap();
    index.update_by_id(5, rect(90.0, 90.0, 91.0, 91.0)).unwrap();
    // Moved twice: found where the first move left it.
    index.update_by_id(3, rect(3.0, 3.0, 3.5, 3.5)).unwrap();
    let e = index.update_by_id(4, rect(0.0, 0.0, 1.0, 1.0)).unwrap_err();
    assert!(
        e.to_string().contains("object 4 is not in the index"),
        "{e}"
    );
    // A refused operation changes nothing and keeps the map (other
    // failures drop it; `update_review_tests` has the refusals of every
    // kind); dropped, the next update by id rebuilds it.
    assert!(index.delete(4, rect(4.0, 4.0, 5.0, 5.0)).is_err());
    assert!(index.locator.is_built());
    index.locator.forget();
    index.update_by_id(6, rect(6.5, 6.5, 6.6, 6.6)).unwrap();
    assert!(index.locator.is_built());
    let ids = |w: Rect| index.query(w, Predicate::Intersects).unwrap().sorted_ids();
    assert_eq!(ids(rect(79.0, 79.0, 95.0, 95.0)), vec![5, 100]);
    assert_eq!(ids(rect(3.0, 3.0, 3.1, 3.1)), vec![2, 3]);
    assert_eq!(ids(rect(6.5, 6.5, 6.5, 6.5)), vec![6]);
    assert_eq!(index.len(), 50);
    index.tree().unwrap().check().unwrap();
}

/// The counters of `index` that no clock sets (everything but times).
fn counted(index: &Index) -> serde_json::Map<String, serde_json::Value> {
    let json = index.stats("warm").to_json().unwrap();
    let serde_json::Value::Object(mut all) = serde_json::from_str(&json).unwrap() else {
        panic!("stats are not an object: {json}");
    };
    all.retain(|k, v| {
        v.is_number() && !(k.contains("time") || k.ends_with("_ns") || k.contains("rss") || k.ends_with("_s"))
    });
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        (crate::testenv::proptest_cases() / 4).max(4)
    ))]

    /// `warm_for_updates` is a hint: two indices given the same operations,
    /// one told of random ids (held, moved, deleted, absent) before each,
    /// answer alike and count alike (every counter but times, so also the
    /// buffers' hits and misses, which a changed eviction order would move),
    /// on each store, with a buffer of a few pages.
    #[test]
    fn warming_changes_no_answer_and_no_counter(
        ops in prop::collection::vec(op_strategy(), 1..150),
        warms in prop::collection::vec(prop::collection::vec(0u64..80, 0..20), 150),
    ) {
        // eFIND twice: with the product's read buffer, and with the paper's
        // (which reads MOD pages through the read buffer, so its order
        // shows in the counters sooner).
        for (store, mode) in [("efind", "adaptive"), ("efind", "fixed"), ("plain", ""), ("fast", "")] {
            let open = || {
                let mut settings = vec![
                    ("kind", "rstar"),
                    ("store", store),
                    ("device", "mem:"),
                    ("page_size", "512"),
                    ("buffer", "2KiB"),
                ];
                if store == "efind" {
                    settings.push(("read_buffer_mode", mode));
                }
                if store != "plain" {
                    // No clock in the log's counters: each operation
                    // synced, no checkpoint by time.
                    settings.extend([("durability", "sync"), ("checkpoint_interval", "0")]);
                }
                let opts = super::tests::spec_options(&settings);
                let corners = [rect(0.0, 0.0, 0.0, 0.0), rect(100.0, 100.0, 100.0, 100.0)];
                Index::create_temporary(&opts.with_domain_of(corners.iter())).unwrap()
            };
            let (mut plain, mut warmed) = (open(), open());
            let mut held: Vec<(u64, Rect)> = Vec::new();
            let mut next = 1u64;
            for (op, warm) in ops.iter().zip(&warms) {
                warmed.warm_for_updates(warm);
                let (a, b) = match *op {
                    Op::Insert(x, y, w, h) => {
                        let (x, y) = (f64::from(x), f64::from(y));
                        let r = rect(x, y, x + f64::from(w) * 0.5, y + f64::from(h) * 0.5);
                        held.push((next, r));
                        next += 1;
                        (plain.insert(next - 1, r), warmed.insert(next - 1, r))
                    }
                    Op::Delete(i) if !held.is_empty() => {
                        let (id, r) = held.swap_remove(i % held.len());
                        (plain.delete(id, r), warmed.delete(id, r))
                    }
                    Op::Nudge(i, dx, dy) if !held.is_empty() => {
                        let k = i % held.len();
                        let (id, old) = held[k];
                        let (dx, dy) = (f64::from(dx) * 0.1, f64::from(dy) * 0.1);
                        let new = rect(old.min_x() + dx, old.min_y() + dy, old.max_x() + dx, old.max_y() + dy);
                        held[k].1 = new;
                        (plain.update_by_id(id, new), warmed.update_by_id(id, new))
                    }
                    Op::Jump(i, x, y) if !held.is_empty() => {
                        let k = i % held.len();
                        let (id, old) = held[k];
                        let (x, y) = (f64::from(x), f64::from(y));
                        let new = rect(x, y, x + old.width(), y + old.height());
                        held[k].1 = new;
                        (plain.update_by_id(id, new), warmed.update_by_id(id, new))
                    }
                    Op::Absent(id) => {
                        let r = rect(1.0, 1.0, 1.0, 1.0);
                        (plain.update_by_id(id, r), warmed.update_by_id(id, r))
                    }
                    Op::Query(x, y, w, h) => {
                        let (x, y) = (f64::from(x), f64::from(y));
                        let win = rect(x, y, x + f64::from(w), y + f64::from(h));
                        let got = |ix: &Index| ix.query(win, Predicate::Intersects).unwrap().sorted_ids();
                        prop_assert_eq!(got(&plain), got(&warmed), "{} {}: {:?}", store, mode, op);
                        (Ok(()), Ok(()))
                    }
                    _ => (Ok(()), Ok(())),
                };
                prop_assert_eq!(a.map_err(|e| e.to_string()), b.map_err(|e| e.to_string()), "{} {}: {:?}", store, mode, op);
                prop_assert_eq!(counted(&plain), counted(&warmed), "{} {}: after {:?}", store, mode, op);
            }
        }
    }
}
