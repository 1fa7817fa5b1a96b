//! Bottom-up updates ([`RTree::update`]): a record whose new rectangle stays
//! inside its leaf's rectangle is rewritten in place (one `modify` of the
//! leaf, more only when the leaf's rectangle shrinks), anything else is a
//! delete and an insert; the Hilbert R-tree always takes the second way.
use std::collections::HashMap;

use super::*;
use crate::geom::HilbertDomain;
use super::recording_tests::{Recording, Write};

fn r(x0: f64, y0: f64, x1: f64, y1: f64) -> Rect {
    Rect::new(x0, y0, x1, y1).unwrap()
}

/// A tree of `params` holding 400 small boxes on a 20 × 20 grid.
fn grid_tree(params: TreeParams) -> (RTree<Recording>, HashMap<u64, Rect>) {
    let mut t = RTree::create(Recording::default(), params).unwrap();
    let mut rects = HashMap::new();
    for i in 0..400u64 {
        let (x, y) = ((i % 20) as f64, (i / 20) as f64);
        let b = r(x, y, x + 0.5, y + 0.5);
        t.insert(i, b).unwrap();
        rects.insert(i, b);
    }
    t.store().take_writes();
    (t, rects)
}

/// A tree of `params` holding `n` boxes of `size` × `size` with corners at
/// seeded random points of the square `[0, extent)²`.
fn random_tree(
    params: TreeParams,
    n: u64,
    extent: f64,
    size: f64,
    mut seed: u64,
) -> (RTree<Recording>, HashMap<u64, Rect>) {
    let mut t = RTree::create(Recording::default(), params).unwrap();
    let mut rects = HashMap::new();
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as f64 / (1u64 << 31) as f64
    };
    for i in 0..n {
        let (x, y) = (next() * extent, next() * extent);
        let b = r(x, y, x + size, y + size);
        t.insert(i, b).unwrap();
        rects.insert(i, b);
    }
    (t, rects)
}

/// `b` shrunk to its middle half (inside `b`).
fn shrunk(b: &Rect) -> Rect {
    let (w, h) = (b.max_x() - b.min_x(), b.max_y() - b.min_y());
    r(
        b.min_x() + w / 4.0,
        b.min_y() + h / 4.0,
        b.max_x() - w / 4.0,
        b.max_y() - h / 4.0,
    )
}

fn in_place_params() -> Vec<TreeParams> {
    vec![
        TreeParams::new(IndexKind::RTree, 16).with_split(SplitKind::Linear),
        TreeParams::new(IndexKind::RTree, 16).with_split(SplitKind::Quadratic),
        TreeParams::new(IndexKind::RStar, 16),
    ]
}

#[test]
fn an_update_inside_its_leaf_rewrites_the_record_in_place() {
    for params in in_place_params() {
        let (mut t, mut rects) = grid_tree(params);
        let meta = t.store().meta();
        let built = t.counters();
        let mut in_place = 0;
        let mut single = 0;
        for (leaf, keys, _) in t.leaves().unwrap() {
            for id in keys {
                let old = rects[&id];
                let new = shrunk(&old);
                // The leaf's rectangle stays as it is (the record is off
                // its border): nothing above the leaf changes.
                let node = t.store().get(leaf).unwrap();
                let others = node.entries.iter().filter(|e| e.key != id).map(|e| e.rect);
                let before =
                    Rect::union_all(others.clone().chain([old]).collect::<Vec<_>>().iter());
                let after = Rect::union_all(others.chain([new]).collect::<Vec<_>>().iter());
                let inner = before == after;
                t.update(id, old, new).unwrap();
                rects.insert(id, new);
                in_place += 1;
                let writes = t.store().take_writes();
                let record = Entry {
                    key: id,
                    rect: new,
                    payload: 0,
                };
                assert_eq!(
                    writes.first(),
                    Some(&Write::Modify(leaf, 0, vec![EntryChange::Upsert(record)])),
                    "{params:?}: record {id}"
                );
                if inner {
                    assert_eq!(writes.len(), 1, "{params:?}: record {id}: {writes:?}");
                    single += 1;
                }
                // Only the entries above shrink: no node created or deleted,
                // no metadata written.
                assert!(
                    writes.iter().all(|w| matches!(w, Write::Modify(..))),
                    "{params:?}: record {id}: {writes:?}"
                );
                assert_eq!(t.counters().updates_in_place, in_place);
                t.check().unwrap();
            }
        }
        assert!(single > 0, "{params:?}: no record off its leaf's border");
        assert_eq!(t.store().meta(), meta, "{params:?}: metadata unchanged");
        let work = t.counters().since(&built);
        assert_eq!((work.splits, work.reinsertions, work.merges), (0, 0, 0));
        // Every record answers at its new rectangle, none at the old one.
        for (id, b) in &rects {
            let hits = t.query(*b, Predicate::Within).unwrap();
            assert!(hits.hits.iter().any(|h| h.id == *id), "{params:?}: {id}");
        }
        assert_eq!(
            t.bounds().unwrap(),
            Rect::union_all(rects.values()),
            "{params:?}: exact bounds"
        );
    }
}

#[test]
fn an_update_leaving_its_leaf_is_a_delete_and_an_insert() {
    for params in in_place_params() {
        let (mut t, mut rects) = grid_tree(params);
        // Far outside the whole tree: no leaf's rectangle holds it.
        for id in [0u64, 17, 211, 399] {
            let old = rects[&id];
            let new = r(100.0 + id as f64, 100.0, 100.5 + id as f64, 100.5);
            t.update(id, old, new).unwrap();
            rects.insert(id, new);
            let writes = t.store().take_writes();
            assert!(writes.contains(&Write::SetMeta), "{params:?}: {writes:?}");
            t.check().unwrap();
            assert!(t
                .query(old, Predicate::Intersects)
                .unwrap()
                .hits
                .iter()
                .all(|h| h.id != id));
            assert_eq!(t.query(new, Predicate::Intersects).unwrap().hits[0].id, id);
        }
        assert_eq!(t.counters().updates_in_place, 0, "{params:?}");
        assert_eq!(t.len(), 400);
        // Back inside one leaf's rectangle: in place again.
        let old = rects[&211];
        let new = shrunk(&old);
        t.update(211, old, new).unwrap();
        assert_eq!(t.counters().updates_in_place, 1, "{params:?}");
        t.check().unwrap();
    }
}

#[test]
fn a_root_leaf_takes_any_rectangle_in_place() {
    let mut t = RTree::create(Recording::default(), TreeParams::new(IndexKind::RTree, 8)).unwrap();
    t.insert(1, r(0.0, 0.0, 1.0, 1.0)).unwrap();
    t.insert(2, r(2.0, 2.0, 3.0, 3.0)).unwrap();
    t.store().take_writes();
    t.update(1, r(0.0, 0.0, 1.0, 1.0), r(50.0, 50.0, 51.0, 51.0))
        .unwrap();
    let writes = t.store().take_writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(t.counters().updates_in_place, 1);
    t.check().unwrap();
    assert_eq!(t.bounds().unwrap(), Some(r(2.0, 2.0, 51.0, 51.0)));
    // An absent (id, old) is refused and changes nothing.
    assert!(t
        .update(1, r(0.0, 0.0, 1.0, 1.0), r(0.0, 0.0, 1.0, 1.0))
        .is_err());
    assert!(t.store().take_writes().is_empty());
    assert_eq!(t.counters().updates_in_place, 1);
}

#[test]
fn a_hilbert_rtree_never_updates_in_place() {
    let domain = HilbertDomain::new(r(0.0, 0.0, 20.0, 20.0), 8).unwrap();
    let (mut t, rects) =
        grid_tree(TreeParams::new(IndexKind::Hilbert, 8).with_hilbert_domain(domain));
    for id in [3u64, 50, 222] {
        let old = rects[&id];
        t.update(id, old, shrunk(&old)).unwrap();
        t.check().unwrap();
    }
    assert_eq!(t.counters().updates_in_place, 0);
}

#[test]
fn a_small_move_across_its_leafs_border_is_in_place_within_the_parent() {
    for params in in_place_params() {
        let (mut t, mut rects) = grid_tree(params);
        let meta = t.store().meta();
        let mut crossed = 0;
        for (leaf, keys, leaf_rect) in t.leaves().unwrap() {
            // The record on the leaf's right border moves a little further
            // right: out of the leaf's rectangle, within its margin.
            let id = *keys
                .iter()
                .max_by(|a, b| rects[*a].max_x().total_cmp(&rects[*b].max_x()))
                .unwrap();
            let old = rects[&id];
            let step = leaf_rect.width() * super::IN_PLACE_MARGIN / 2.0;
            let new = r(old.min_x() + step, old.min_y(), old.max_x() + step, old.max_y());
            assert!(!leaf_rect.contains(&new));
            let before = t.counters().updates_in_place;
            t.update(id, old, new).unwrap();
            rects.insert(id, new);
            let writes = t.store().take_writes();
            t.check().unwrap();
            if t.counters().updates_in_place > before {
                crossed += 1;
                // The record rewritten in its leaf, the leaf's entry grown
                // in its parent: two modifies, nothing else.
                assert_eq!(writes.len(), 2, "{params:?}: {writes:?}");
                assert!(matches!(writes[0], Write::Modify(l, 0, _) if l == leaf));
                assert!(matches!(writes[1], Write::Modify(_, 1, _)), "{writes:?}");
            }
        }
        assert!(crossed > 0, "{params:?}: no move across a border in place");
        assert_eq!(t.store().meta(), meta, "{params:?}: metadata unchanged");
        for (id, b) in &rects {
            let hits = t.query(*b, Predicate::Within).unwrap();
            assert!(hits.hits.iter().any(|h| h.id == *id), "{params:?}: {id}");
        }
        assert_eq!(t.bounds().unwrap(), Rect::union_all(rects.values()));
    }
}

#[test]
fn a_leaf_hint_reads_that_leaf_alone_and_a_stale_one_falls_back() {
    // Boxes of 4 × 4 in a 40 × 40 square: leaves' rectangles overlap, so
    // a record's rectangle lies inside several of them.
    let (mut t, rects) = random_tree(TreeParams::new(IndexKind::RStar, 8), 600, 36.0, 4.0, 7);
    assert!(t.height() >= 3, "height {}", t.height());
    let located = t.records_by_leaf().unwrap();
    assert_eq!(located.len(), 600);
    let leaves: std::collections::HashSet<PageId> = located.iter().map(|l| l.2).collect();
    let store = t.store();
    let leaf_reads = |reads: &[PageId]| reads.iter().filter(|p| leaves.contains(p)).count();
    let mut searched_several = 0;
    for &(id, rect, leaf) in &located {
        assert_eq!(rects[&id], rect);
        store.take_reads();
        let path = t.find_record_near(id, &rect, Some(leaf)).unwrap();
        assert_eq!(path.last().map(|s| s.id), Some(leaf));
        assert_eq!(leaf_reads(&store.take_reads()), 1, "record {id}: more than its leaf read");
        let path = t.find_record(id, &rect).unwrap();
        assert_eq!(path.last().map(|s| s.id), Some(leaf));
        if leaf_reads(&store.take_reads()) > 1 {
            searched_several += 1;
        }
        // A stale hint (another leaf): found by the full search.
        let other = *leaves.iter().find(|&&l| l != leaf).unwrap();
        let path = t.find_record_near(id, &rect, Some(other)).unwrap();
        assert_eq!(path.last().map(|s| s.id), Some(leaf));
    }
    assert!(searched_several > 0, "no record whose search without a hint read several leaves");
    // update_near returns the leaf of a record rewritten in place, None for one moved.
    let (id, rect, leaf) = located[0];
    assert_eq!(t.update_near(id, rect, shrunk(&rect), Some(leaf)).unwrap(), Some(leaf));
    let far = r(1000.0, 1000.0, 1001.0, 1001.0);
    assert_eq!(t.update_near(id, shrunk(&rect), far, Some(leaf)).unwrap(), None);
    assert_eq!(t.query(far, Predicate::Intersects).unwrap().sorted_ids(), vec![id]);
}

#[test]
fn a_hinted_update_inside_its_leafs_entries_reads_and_writes_that_leaf_alone() {
    for params in in_place_params() {
        // 1,000 small boxes at random: leaves of many records around.
        let (mut t, mut rects) = random_tree(params, 1000, 100.0, 0.5, 11);
        assert!(t.height() >= 3, "{params:?}: height {}", t.height());
        let root = t.store().meta().root.unwrap();
        let mut alone = 0;
        for (id, old, leaf) in t.records_by_leaf().unwrap() {
            // Strictly inside the rectangle of its leaf's entries on every
            // side (the grid's records in a leaf's middle), or not.
            let entries: Vec<Rect> = t.store().get(leaf).unwrap().entries.iter().map(|e| e.rect).collect();
            let bounds = Rect::union_all(entries.iter()).unwrap();
            let interior = old.min_x() > bounds.min_x()
                && old.min_y() > bounds.min_y()
                && old.max_x() < bounds.max_x()
                && old.max_y() < bounds.max_y();
            let new = shrunk(&old);
            t.store().take_reads();
            t.store().take_writes();
            let before = t.counters().updates_in_place;
            assert_eq!(t.update_near(id, old, new, Some(leaf)).unwrap(), Some(leaf));
            assert_eq!(t.counters().updates_in_place, before + 1);
            let (reads, writes) = (t.store().take_reads(), t.store().take_writes());
            if interior {
                alone += 1;
                assert_eq!(reads, vec![leaf], "{params:?}: record {id}");
                assert_eq!(writes.len(), 1, "{params:?}: {writes:?}");
                assert!(matches!(writes[0], Write::Modify(l, 0, _) if l == leaf));
            } else {
                // The search from the root: the leaf's rectangle in its
                // parent is needed, and perhaps changes.
                assert!(reads.contains(&root), "{params:?}: record {id}: {reads:?}");
            }
            rects.insert(id, new);
            t.check().unwrap();
        }
        assert!(alone > 0, "{params:?}: no record inside its leaf's entries");
        // A hint naming an inner node, or a page no live node holds: the
        // search from the root settles it.
        let (id, old, leaf) = t.records_by_leaf().unwrap()[0];
        let new = shrunk(&old);
        assert_eq!(t.update_near(id, old, new, Some(root)).unwrap(), Some(leaf));
        rects.insert(id, new);
        let (id, old, leaf) = t.records_by_leaf().unwrap()[1];
        let new = shrunk(&old);
        assert_eq!(t.update_near(id, old, new, Some(1 << 40)).unwrap(), Some(leaf));
        rects.insert(id, new);
        t.check().unwrap();
        for (id, b) in &rects {
            let hits = t.query(*b, Predicate::Within).unwrap();
            assert!(hits.hits.iter().any(|h| h.id == *id), "{params:?}: {id}");
        }
        assert_eq!(t.bounds().unwrap(), Rect::union_all(rects.values()));
    }
}
