//! xBR+-tree tests: random operation sequences against a brute-force
//! oracle on every store (memory, plain with and without buffer, eFIND,
//! FAST), every invariant checked after each operation, reopening after a
//! checkpoint; bulk loading and bulk insertion against the oracle; batch
//! queries against the one-at-a-time ones and their device batches; bad input.
use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::cache::PolicyKind;
use crate::geom::Point;
use crate::index::tests::ids_where;
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::store::crash_harness::LoggedKind;
use crate::store::efind::tests::{create_on, open_on};
use crate::store::efind::EfindConfig;
use crate::store::log::Durability;
use crate::store::log::LogPlacement;
use crate::store::mem::MemStore;
use crate::store::{FastConfig, FastStore, PlainConfig, PlainStore};

const PAGE: usize = 4096;

fn pt(x: f64, y: f64) -> Point {
    Point::new(x, y).unwrap()
}

fn domain() -> Rect {
    Rect::new(0.0, 0.0, 64.0, 64.0).unwrap()
}

/// The stores under test.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Mem,
    Plain,
    PlainNoBuffer,
    Efind,
    Fast,
}

fn efind_cfg() -> EfindConfig {
    LoggedKind::configs(12 * 1024, true, 1 << 20).0
}

fn fast_cfg() -> FastConfig {
    LoggedKind::configs(12 * 1024, true, 1 << 20).1
}

fn plain_cfg(buffer_bytes: usize) -> PlainConfig {
    PlainConfig {
        buffer_bytes,
        policy: PolicyKind::Lru,
        with_payload: true,
    }
}

/// A store of `kind` on `dev` (created fresh or reopened).
fn store_on(kind: Kind, dev: &Arc<dyn PageDevice>, fresh: bool) -> Box<dyn NodeStore> {
    let d = Arc::clone(dev);
    let log = || LogPlacement::tail_of(dev, fast_cfg().log_pages(PAGE).unwrap()).unwrap();
    match (kind, fresh) {
        (Kind::Mem, _) => Box::new(MemStore::new()),
        (Kind::Plain, true) => Box::new(PlainStore::create(d, plain_cfg(16 * 1024)).unwrap()),
        (Kind::Plain, false) => Box::new(PlainStore::open(d, plain_cfg(16 * 1024)).unwrap()),
        (Kind::PlainNoBuffer, true) => Box::new(PlainStore::create(d, plain_cfg(0)).unwrap()),
        (Kind::PlainNoBuffer, false) => Box::new(PlainStore::open(d, plain_cfg(0)).unwrap()),
        (Kind::Efind, true) => Box::new(create_on(d, efind_cfg()).unwrap()),
        (Kind::Efind, false) => Box::new(open_on(d, efind_cfg()).unwrap()),
        (Kind::Fast, true) => Box::new(FastStore::create(d, log(), fast_cfg()).unwrap()),
        (Kind::Fast, false) => Box::new(FastStore::open(d, log(), fast_cfg()).unwrap()),
    }
}

fn device() -> Arc<dyn PageDevice> {
    Arc::new(MemDevice::new(PAGE, 1 << 12).unwrap())
}

/// Brute-force oracle.
#[derive(Default, Clone, Debug)]
struct Oracle {
    items: Vec<(u64, Point)>,
}

impl Oracle {
    fn range(&self, w: &Rect) -> BTreeSet<u64> {
        ids_where(&self.items, |p| w.contains_point(p))
    }
    fn within(&self, c: &Point, r: f64) -> BTreeSet<u64> {
        ids_where(&self.items, |p| p.distance(c) <= r)
    }
    fn knn(&self, c: &Point, k: usize) -> Vec<f64> {
        let mut d: Vec<f64> = self.items.iter().map(|(_, p)| p.distance(c)).collect();
        d.sort_by(f64::total_cmp);
        d.truncate(k);
        d
    }
    fn at(&self, p: &Point) -> Option<u64> {
        self.items.iter().find(|(_, q)| q == p).map(|(id, _)| *id)
    }
}

fn ids(found: &[query::Found]) -> BTreeSet<u64> {
    found.iter().map(|(id, _)| *id).collect()
}

/// Compares every answer of `t` with the oracle's and checks the invariants.
fn agree<S: NodeStore>(t: &XbrTree<S>, o: &Oracle) {
    let rep = t.check().unwrap();
    assert_eq!(rep.points, o.items.len() as u64);
    assert_eq!(ids(&t.range(&domain()).unwrap()), o.range(&domain()));
    for (id, p) in &o.items {
        assert_eq!(t.point(p).unwrap(), Some(*id));
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, u16, u16),
    InsertAtExisting(u64, usize),
    InsertExistingId(usize, u16, u16),
    InsertOutside(u64),
    Delete(usize),
    DeleteAbsent(u16, u16),
    Range(u16, u16, u16, u16),
    Within(u16, u16, u16),
    Knn(u16, u16, usize),
    Point(u16, u16),
}

/// Grid coordinates: 0..=256 quarter units over the 64 × 64 domain.
fn coord(c: u16) -> f64 {
    f64::from(c % 257) / 4.0
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (any::<u64>(), any::<u16>(), any::<u16>()).prop_map(|(i, x, y)| Op::Insert(i % 100_000, x, y)),
        1 => (any::<u64>(), any::<usize>()).prop_map(|(i, k)| Op::InsertAtExisting(i % 100_000, k)),
        1 => (any::<usize>(), any::<u16>(), any::<u16>()).prop_map(|(k, x, y)| Op::InsertExistingId(k, x, y)),
        1 => any::<u64>().prop_map(|i| Op::InsertOutside(i % 100_000)),
        3 => any::<usize>().prop_map(Op::Delete),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(x, y)| Op::DeleteAbsent(x, y)),
        2 => (any::<u16>(), any::<u16>(), any::<u16>(), any::<u16>()).prop_map(|(a, b, c, d)| Op::Range(a, b, c, d)),
        1 => (any::<u16>(), any::<u16>(), any::<u16>()).prop_map(|(x, y, r)| Op::Within(x, y, r)),
        1 => (any::<u16>(), any::<u16>(), 1usize..12).prop_map(|(x, y, k)| Op::Knn(x, y, k)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(x, y)| Op::Point(x, y)),
    ]
}

/// Runs `ops` on `t` and the oracle, comparing after each.
fn run_ops<S: NodeStore>(t: &mut XbrTree<S>, o: &mut Oracle, ops: &[Op]) {
    for op in ops {
        match *op {
            Op::Insert(id, x, y) => {
                let p = pt(coord(x), coord(y));
                let expect_ok = o.items.iter().all(|(i, q)| *i != id && *q != p);
                let r = t.insert(id, p);
                assert_eq!(r.is_ok(), expect_ok, "insert {id} at {p:?}: {r:?}");
                if expect_ok {
                    o.items.push((id, p));
                }
            }
            Op::InsertAtExisting(id, k) if !o.items.is_empty() => {
                let p = o.items[k % o.items.len()].1;
                let e = t.insert(id, p).unwrap_err();
                assert!(e.to_string().contains("already"), "{e}");
            }
            Op::InsertExistingId(k, x, y) if !o.items.is_empty() => {
                let id = o.items[k % o.items.len()].0;
                let e = t.insert(id, pt(coord(x), coord(y))).unwrap_err();
                assert!(
                    e.is_user_error() && e.to_string().contains("already"),
                    "{e}"
                );
            }
            Op::InsertOutside(id) => {
                let e = t.insert(id, pt(64.5, 3.0)).unwrap_err();
                assert!(e.to_string().contains("outside"), "{e}");
            }
            Op::Delete(k) if !o.items.is_empty() => {
                let (id, p) = o.items.swap_remove(k % o.items.len());
                t.delete(id, p).unwrap();
            }
            Op::DeleteAbsent(x, y) => {
                let p = pt(coord(x), coord(y));
                if o.at(&p) != Some(7) {
                    assert!(t.delete(7, p).is_err());
                }
            }
            Op::Range(a, b, c, d) => {
                let (x0, x1) = (coord(a).min(coord(c)), coord(a).max(coord(c)));
                let (y0, y1) = (coord(b).min(coord(d)), coord(b).max(coord(d)));
                let w = Rect::new(x0, y0, x1, y1).unwrap();
                assert_eq!(ids(&t.range(&w).unwrap()), o.range(&w));
            }
            Op::Within(x, y, r) => {
                let (c, r) = (pt(coord(x), coord(y)), coord(r) / 4.0);
                assert_eq!(ids(&t.within_distance(&c, r).unwrap()), o.within(&c, r));
            }
            Op::Knn(x, y, k) => {
                let c = pt(coord(x), coord(y));
                let got = t.nearest(&c, k).unwrap();
                let d: Vec<f64> = got.iter().map(|n| n.distance).collect();
                assert_eq!(d, o.knn(&c, k));
                for n in &got {
                    let p = o.items.iter().find(|(i, _)| *i == n.id).unwrap().1;
                    assert_eq!(p.distance(&c), n.distance);
                }
            }
            Op::Point(x, y) => {
                let p = pt(coord(x), coord(y));
                assert_eq!(t.point(&p).unwrap(), o.at(&p));
            }
            _ => {}
        }
        let rep = t.check().unwrap();
        assert_eq!(rep.points, o.items.len() as u64);
    }
}

/// Batch queries answer like the one-at-a-time ones.
fn batches_agree<S: NodeStore>(t: &XbrTree<S>, o: &Oracle) {
    let windows: Vec<Rect> = (0..6)
        .map(|i| {
            let a = f64::from(i) * 9.0;
            Rect::new(a, 64.0 - a - 10.0, a + 12.0, 64.0 - a).unwrap()
        })
        .collect();
    let (got, stats) = t.range_batch(&windows, 2).unwrap();
    for (w, g) in windows.iter().zip(&got) {
        assert_eq!(ids(g), o.range(w));
    }
    assert!(stats.nodes_read <= stats.visits);
    let mut points: Vec<Point> = o.items.iter().map(|(_, p)| *p).collect();
    points.push(pt(1.1, 2.3));
    points.push(pt(100.0, 2.3));
    let (found, _) = t.point_batch(&points, 3).unwrap();
    for (p, f) in points.iter().zip(found) {
        assert_eq!(f, o.at(p));
    }
    let qs = [(pt(10.0, 10.0), 7.5), (pt(60.0, 2.0), 20.0)];
    let (got, _) = t.within_distance_batch(&qs, 64).unwrap();
    for ((c, r), g) in qs.iter().zip(&got) {
        assert_eq!(ids(g), o.within(c, *r));
    }
}

/// The whole scenario on one store kind: operations, batches, reopen.
fn scenario(kind: Kind, max: usize, ops: &[Op]) {
    let dev = device();
    let cfg = XbrConfig::new(domain(), max);
    let mut t = XbrTree::create(store_on(kind, &dev, true), cfg).unwrap();
    let mut o = Oracle::default();
    run_ops(&mut t, &mut o, ops);
    batches_agree(&t, &o);
    if kind != Kind::Mem {
        t.checkpoint().unwrap();
        drop(t);
        let mut t = XbrTree::open(store_on(kind, &dev, false), cfg).unwrap();
        agree(&t, &o);
        // The id set is rebuilt after the reopen.
        if let Some(&(id, _)) = o.items.first() {
            assert!(t.insert(id, pt(63.9, 63.9)).is_err());
        }
        run_ops(&mut t, &mut o, &ops[..ops.len().min(20)]);
        agree(&t, &o);
    }
}

fn ops_strategy() -> impl Strategy<Value = (usize, Vec<Op>)> {
    (
        prop_oneof![Just(3usize), Just(4), Just(7)],
        prop::collection::vec(op(), 1..160),
    )
}

macro_rules! oracle_test {
    ($name:ident, $kind:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]
            #[test]
            fn $name((max, ops) in ops_strategy()) {
                scenario($kind, max, &ops);
            }
        }
    };
}

oracle_test!(random_ops_agree_with_the_oracle_on_memstore, Kind::Mem);
oracle_test!(
    random_ops_agree_with_the_oracle_on_plain_buffered,
    Kind::Plain
);
oracle_test!(
    random_ops_agree_with_the_oracle_on_plain_unbuffered,
    Kind::PlainNoBuffer
);
oracle_test!(random_ops_agree_with_the_oracle_on_efind, Kind::Efind);
oracle_test!(random_ops_agree_with_the_oracle_on_fast, Kind::Fast);

fn distinct_points() -> impl Strategy<Value = Vec<(u64, Point)>> {
    prop::collection::btree_set((0u16..=256, 0u16..=256), 0..400).prop_map(|s| {
        s.into_iter()
            .enumerate()
            .map(|(i, (x, y))| (i as u64 * 3 + 1, pt(coord(x), coord(y))))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]
    /// Bulk loading and then bulk insertion build trees that answer like
    /// the oracle, on every store, and survive a reopen.
    #[test]
    fn bulk_load_and_bulk_insert_agree_with_the_oracle(
        points in distinct_points(),
        split in 0usize..=100,
        max in prop_oneof![Just(3usize), Just(5), Just(16)],
        write_batch in 1usize..40,
        chunk in 1usize..300,
        kind in prop_oneof![Just(Kind::Mem), Just(Kind::Plain), Just(Kind::PlainNoBuffer), Just(Kind::Efind), Just(Kind::Fast)],
        held_nodes in prop_oneof![Just(1usize), Just(12), Just(usize::MAX)],
    ) {
        let at = points.len() * split / 100;
        let (first, rest) = points.split_at(at);
        let opts = BulkOptions { write_batch, chunk_points: chunk, read_batch: 7, held_nodes };
        let dev = device();
        let cfg = XbrConfig::new(domain(), max);
        let mut t = XbrTree::bulk_load(store_on(kind, &dev, true), cfg, first, opts).unwrap();
        let mut o = Oracle { items: first.to_vec() };
        agree(&t, &o);
        let chunks = t.bulk_insert(rest, opts).unwrap();
        prop_assert_eq!(chunks, rest.len().div_ceil(chunk));
        o.items.extend_from_slice(rest);
        agree(&t, &o);
        batches_agree(&t, &o);
        // Deletes and inserts after the bulk operations.
        let ops: Vec<Op> = (0..30).map(|i| if i % 3 == 0 { Op::Insert(1_000_000 + i, (i * 37) as u16, (i * 91) as u16) } else { Op::Delete(i as usize * 7) }).collect();
        run_ops(&mut t, &mut o, &ops);
        if kind != Kind::Mem {
            t.checkpoint().unwrap();
            drop(t);
            let t = XbrTree::open(store_on(kind, &dev, false), cfg).unwrap();
            agree(&t, &o);
        }
    }
}

#[test]
fn bad_input_is_a_clear_error_and_changes_nothing() {
    let mut t = XbrTree::create(MemStore::new(), XbrConfig::new(domain(), 4)).unwrap();
    t.insert(1, pt(1.0, 1.0)).unwrap();
    for (id, at, says) in [
        (2, pt(-0.5, 1.0), "outside"),
        (2, pt(1.0, 1.0), "distinct points"),
        (1, pt(2.0, 1.0), "object id 1"),
    ] {
        let e = t.insert(id, at).unwrap_err();
        assert!(e.is_user_error() && e.to_string().contains(says), "{e}");
    }
    let e = t.delete(1, pt(2.0, 1.0)).unwrap_err();
    assert!(e.is_user_error() && e.to_string().contains("not in"), "{e}");
    assert!(t.delete(1, pt(99.0, 1.0)).is_err());
    // Bulk operations check the whole batch first.
    for (batch, says) in [
        ([(5, pt(3.0, 3.0)), (6, pt(3.0, 3.0))], "distinct points"),
        ([(5, pt(3.0, 3.0)), (5, pt(4.0, 3.0))], "object id 5"),
        ([(5, pt(3.0, 3.0)), (7, pt(1.0, 1.0))], "distinct points"),
    ] {
        let e = t.bulk_insert(&batch, BulkOptions::default()).unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
    let e = XbrTree::bulk_load(
        MemStore::new(),
        XbrConfig::new(domain(), 4),
        &[(1, pt(70.0, 1.0))],
        BulkOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
    assert_eq!(t.len(), 1);
    t.check().unwrap();
    // Bad parameters.
    assert!(XbrTree::create(MemStore::new(), XbrConfig::new(domain(), 2)).is_err());
    let flat = Rect::new(0.0, 0.0, 10.0, 0.0).unwrap();
    assert!(XbrTree::create(MemStore::new(), XbrConfig::new(flat, 8)).is_err());
    let zero = BulkOptions {
        write_batch: 0,
        ..BulkOptions::default()
    };
    assert!(XbrTree::bulk_load(MemStore::new(), XbrConfig::new(domain(), 4), &[], zero).is_err());
}

/// Issue 17, item 2: a k far beyond the records returns every point and
/// reserves memory for the answer, not for k.
#[test]
fn knn_with_a_huge_k_returns_every_point() {
    let mut t = XbrTree::create(MemStore::new(), XbrConfig::new(domain(), 4)).unwrap();
    for i in 0..30u64 {
        t.insert(i, pt(1.0 + i as f64 * 0.5, 1.0)).unwrap();
    }
    for k in [1usize << 40, usize::MAX] {
        let got = t.nearest(&pt(0.0, 1.0), k).unwrap();
        let ids: Vec<u64> = got.iter().map(|n| n.id).collect();
        assert_eq!(ids, (0..30).collect::<Vec<_>>(), "k {k}");
        assert!(got.capacity() < 1 << 20);
    }
}

#[test]
fn points_no_quadrant_separates_are_refused() {
    let big = Rect::new(0.0, 0.0, 1e12, 1e12).unwrap();
    let mut t = XbrTree::create(MemStore::new(), XbrConfig::new(big, 3)).unwrap();
    for i in 0..3 {
        t.insert(i, pt(5.0 + f64::from(i as u32) * 1e-6, 5.0))
            .unwrap();
    }
    let e = t.insert(3, pt(5.0 + 3e-6, 5.0)).unwrap_err();
    assert!(
        e.is_user_error() && e.to_string().contains("finest cell"),
        "{e}"
    );
    assert_eq!(t.len(), 3);
    t.check().unwrap();
}

#[test]
fn deleting_everything_shrinks_the_tree() {
    let mut t = XbrTree::create(MemStore::new(), XbrConfig::new(domain(), 3)).unwrap();
    let pts: Vec<(u64, Point)> = (0..200u64)
        .map(|i| {
            (
                i,
                pt((i % 16) as f64 * 4.0 + 0.5, (i / 16) as f64 * 4.0 + 0.5),
            )
        })
        .collect();
    for &(id, p) in &pts {
        t.insert(id, p).unwrap();
    }
    assert!(t.height() >= 4);
    let full = t.store().node_count();
    for &(id, p) in &pts {
        t.delete(id, p).unwrap();
        t.check().unwrap();
    }
    assert!(t.is_empty());
    assert!(t.store().node_count() < full / 4, "empty leaves removed");
    assert!(t.range(&domain()).unwrap().is_empty());
}

/// Pages read and read/write batches on a device while `f` runs.
fn io(dev: &Arc<dyn PageDevice>, f: impl FnOnce()) -> (u64, u64, u64) {
    dev.reset_stats();
    f();
    let s = dev.stats().io;
    (s.pages_read, s.read_batches, s.write_batches)
}

#[test]
fn batch_queries_and_bulk_insertion_submit_fewer_device_batches() {
    let pts: Vec<(u64, Point)> = (0..3000u64)
        .map(|i| {
            (
                i,
                pt(
                    (i * 7919 % 3001) as f64 / 3001.0 * 64.0,
                    (i * 104_729 % 2999) as f64 / 2999.0 * 64.0,
                ),
            )
        })
        .collect();
    let (first, rest) = pts.split_at(2000);
    let cfg = XbrConfig::new(domain(), 16);
    let opts = BulkOptions {
        write_batch: 64,
        chunk_points: 500,
        read_batch: 256,
        ..BulkOptions::default()
    };
    let mk = || {
        let dev = device();
        let t = XbrTree::bulk_load(store_on(Kind::PlainNoBuffer, &dev, true), cfg, first, opts)
            .unwrap();
        (dev, t)
    };
    let (dev_a, mut one) = mk();
    let (dev_b, mut bulk) = mk();
    let (_, reads_one, writes_one) = io(&dev_a, || {
        for &(id, p) in rest {
            one.insert(id, p).unwrap();
        }
    });
    let (_, reads_bulk, writes_bulk) = io(&dev_b, || {
        bulk.bulk_insert(rest, opts).unwrap();
    });
    assert!(
        reads_bulk * 10 < reads_one,
        "read batches: bulk {reads_bulk}, one by one {reads_one}"
    );
    assert!(
        writes_bulk * 10 < writes_one,
        "write batches: bulk {writes_bulk}, one by one {writes_one}"
    );
    assert_eq!(one.check().unwrap().points, 3000);
    assert_eq!(bulk.check().unwrap().points, 3000);
    let windows: Vec<Rect> = (0..50)
        .map(|i| {
            let a = f64::from(i) * 1.1;
            Rect::new(a, a, a + 8.0, a + 8.0).unwrap()
        })
        .collect();
    let mut single = Vec::new();
    let (pages_one, batches_one, _) = io(&dev_b, || {
        single = windows
            .iter()
            .map(|w| ids(&bulk.range(w).unwrap()))
            .collect();
    });
    let mut batched = Vec::new();
    let (pages_b, batches_b, _) = io(&dev_b, || {
        batched = bulk
            .range_batch(&windows, 256)
            .unwrap()
            .0
            .iter()
            .map(|g| ids(g))
            .collect();
    });
    assert_eq!(single, batched);
    assert!(
        pages_b < pages_one,
        "pages: batched {pages_b}, single {pages_one}"
    );
    assert!(
        batches_b * 10 < batches_one,
        "batches: batched {batches_b}, single {batches_one}"
    );
    assert_eq!(
        batches_b,
        u64::from(bulk.height()),
        "one read batch per level"
    );
}

/// A logged store of `kind` (eFIND or FAST) on `dev` with durability
/// `sync`, created fresh or reopened (its restart).
fn synced_store(kind: Kind, dev: &Arc<dyn PageDevice>, fresh: bool) -> Box<dyn NodeStore> {
    let d = Arc::clone(dev);
    match kind {
        Kind::Efind => {
            let c = EfindConfig {
                durability: Durability::Sync,
                ..efind_cfg()
            };
            Box::new(if fresh {
                create_on(d, c).unwrap()
            } else {
                open_on(d, c).unwrap()
            })
        }
        _ => {
            let c = FastConfig {
                durability: Durability::Sync,
                ..fast_cfg()
            };
            let log = LogPlacement::tail_of(dev, c.log_pages(PAGE).unwrap()).unwrap();
            Box::new(if fresh {
                FastStore::create(d, log, c).unwrap()
            } else {
                FastStore::open(d, log, c).unwrap()
            })
        }
    }
}

/// On the logged stores with durability `sync`, a tree dropped without a
/// checkpoint (a killed process) reopens through the store's restart with
/// every acknowledged insertion and deletion.
#[test]
fn logged_stores_recover_every_acknowledged_operation_without_checkpoint() {
    for kind in [Kind::Efind, Kind::Fast] {
        let dev = device();
        let cfg = XbrConfig::new(domain(), 5);
        let sync = |fresh: bool| synced_store(kind, &dev, fresh);
        let mut t = XbrTree::create(sync(true), cfg).unwrap();
        let mut o = Oracle::default();
        for i in 0..400u64 {
            let p = pt(
                (i * 7919 % 257) as f64 / 4.0,
                (i * 104_729 % 251) as f64 / 4.0,
            );
            t.insert(i, p).unwrap();
            o.items.push((i, p));
            if i % 3 == 0 {
                let (id, q) = o.items.swap_remove((i as usize * 13) % o.items.len());
                t.delete(id, q).unwrap();
            }
        }
        drop(t);
        let t = XbrTree::open(sync(false), cfg).unwrap();
        agree(&t, &o);
    }
}

/// Review item 1: an update whose insertion cannot be applied leaves the
/// object where it was. A new point outside the domain is refused before
/// the deletion (on every store, after a checkpoint and a reopen too); so
/// is a new point beside points no quadrant separates (before, the
/// insertion failed after the deletion and put the object back).
#[test]
fn an_update_that_cannot_be_applied_leaves_the_object_in_place() {
    use crate::spatial::SpatialIndex;
    let r = |x: f64, y: f64| Rect::new(x, y, x, y).unwrap();
    for kind in [Kind::Mem, Kind::Plain, Kind::Efind, Kind::Fast] {
        let dev = device();
        let cfg = XbrConfig::new(domain(), 4);
        let mut t = XbrTree::create(store_on(kind, &dev, true), cfg).unwrap();
        for i in 0..40u64 {
            let p = pt(1.0 + (i % 8) as f64 * 7.0, 1.0 + (i / 8) as f64 * 7.0);
            t.insert(i, p).unwrap();
        }
        let old = pt(1.0 + 5.0 * 7.0, 1.0);
        let ops = t.store().stats().ops_committed;
        for new in [r(70.0, 70.0), r(-1.0, 3.0), r(8.0, 1.0)] {
            let e = SpatialIndex::update(&mut t, 5, r(old.x, old.y), new).unwrap_err();
            assert!(e.is_user_error(), "{kind:?}: {e}");
            let now = t.point(&old).unwrap();
            assert_eq!(now, Some(5), "{kind:?}: moved to {new:?}");
            assert_eq!(XbrTree::len(&t), 40, "{kind:?}");
        }
        // Refused before the deletion: no store operation at all.
        assert_eq!(t.store().stats().ops_committed, ops, "{kind:?}");
        t.check().unwrap();
        if kind != Kind::Mem {
            t.checkpoint().unwrap();
            drop(t);
            let t = XbrTree::open(store_on(kind, &dev, false), cfg).unwrap();
            assert_eq!(t.point(&old).unwrap(), Some(5), "{kind:?}");
            assert_eq!(XbrTree::len(&t), 40, "{kind:?}");
        }
    }
    // Three points no quadrant separates fill a leaf of M = 3: a fourth
    // beside them cannot be inserted, so a move there fails after the
    // deletion and the object goes back.
    let big = Rect::new(0.0, 0.0, 1e12, 1e12).unwrap();
    let mut t = XbrTree::create(MemStore::new(), XbrConfig::new(big, 3)).unwrap();
    for i in 0..3 {
        t.insert(i, pt(5.0 + f64::from(i as u32) * 1e-6, 5.0))
            .unwrap();
    }
    t.insert(9, pt(7e11, 7e11)).unwrap();
    let e = SpatialIndex::update(&mut t, 9, r(7e11, 7e11), r(5.0 + 3e-6, 5.0)).unwrap_err();
    assert!(e.to_string().contains("finest cell"), "{e}");
    assert_eq!(t.point(&pt(7e11, 7e11)).unwrap(), Some(9));
    assert_eq!(t.point(&pt(5.0 + 3e-6, 5.0)).unwrap(), None);
    assert_eq!(XbrTree::len(&t), 4);
    t.check().unwrap();
    // The id set still holds 9 once: a second object 9 is refused; the
    // refused insertion left no operation open, so the tree takes more.
    assert!(t.insert(9, pt(1e11, 1e11)).is_err());
    t.insert(10, pt(1e11, 1e11)).unwrap();
    assert_eq!(XbrTree::len(&t), 5);
}

/// An update on a logged store (eFIND, FAST; durability `sync`) is one
/// store operation: a crash at any sync of the update (the power lost
/// there, unsynced writes kept, dropped or torn) comes back with the
/// object at its old point or at its new one, never without it, for a
/// move to another leaf and for one inside its leaf; the tree keeps every
/// other object and its invariants. Before, an update was a deletion then
/// an insertion, two operations: a crash between their commits lost the
/// object (found by the command line's torture campaign: `geoflash
/// update` killed on eFIND came back with 4,999 of 5,000 points).
#[test]
fn an_update_on_a_logged_store_survives_a_crash_at_any_of_its_syncs() {
    use crate::spatial::SpatialIndex;
    use crate::storage::faulty::{FaultPlan, FaultyDevice};
    use crate::store::crash_harness::unwrap_faulty;
    let r = |p: Point| Rect::new(p.x, p.y, p.x, p.y).unwrap();
    let points: Vec<Point> = (0..60u64)
        .map(|i| pt(1.0 + (i % 8) as f64 * 7.0, 1.0 + (i / 8) as f64 * 7.0))
        .collect();
    let cfg = XbrConfig::new(domain(), 4);
    // The tree of `points`, checkpointed, on a store of `kind` over `dev`;
    // then object `id` moved to `to`.
    let run = |kind: Kind, dev: &Arc<FaultyDevice<MemDevice>>, id: usize, to: Point| {
        let d: Arc<dyn PageDevice> = dev.clone();
        let mut t = XbrTree::create(synced_store(kind, &d, true), cfg).unwrap();
        for (i, p) in points.iter().enumerate() {
            t.insert(i as u64, *p).unwrap();
        }
        t.checkpoint().unwrap();
        let leaf = |p: &Point| {
            let root = t.store().meta().root.unwrap();
            let path = t.descend(root, t.domain.code(p).unwrap()).unwrap();
            path.last().unwrap().id
        };
        let same_leaf = leaf(&points[id]) == leaf(&to);
        let before = dev.stats().io.syncs;
        let moved = SpatialIndex::update(&mut t, id as u64, r(points[id]), r(to));
        (before, same_leaf, moved)
    };
    let mut crashes = 0;
    for kind in [Kind::Efind, Kind::Fast] {
        // A move far away (another leaf), and a small one (inside its leaf).
        for (id, to, inside) in [(5, pt(60.5, 60.5), false), (12, pt(29.01, 8.01), true)] {
            let what = format!("{kind:?}: object {id} to {to:?}");
            let dry = Arc::new(FaultyDevice::new(
                MemDevice::new(PAGE, 1 << 12).unwrap(),
                FaultPlan::none(),
            ));
            let (s0, same_leaf, moved) = run(kind, &dry, id, to);
            assert_eq!(same_leaf, inside, "{what}");
            moved.unwrap();
            let s1 = dry.stats().io.syncs;
            assert!(s1 > s0, "{what}: the update synced nothing");
            for s in s0 + 1..=s1 {
                let plan = FaultPlan::none().crash_at_sync(s).with_seed(s);
                let dev = Arc::new(FaultyDevice::new(
                    MemDevice::new(PAGE, 1 << 12).unwrap(),
                    plan,
                ));
                let (_, _, moved) = run(kind, &dev, id, to);
                match moved {
                    Err(Error::Crashed(_)) => crashes += 1,
                    Ok(()) => dev.crash_now().unwrap(),
                    Err(e) => panic!("{what}, crash at sync {s}: {e}"),
                }
                let durable: Arc<dyn PageDevice> = Arc::new(unwrap_faulty(dev));
                let t = XbrTree::open(synced_store(kind, &durable, false), cfg).unwrap();
                let at_old = t.point(&points[id]).unwrap();
                let at_new = t.point(&to).unwrap();
                assert!(
                    matches!((at_old, at_new), (Some(i), None) | (None, Some(i)) if i == id as u64),
                    "{what}, crash at sync {s} of {s0}..={s1}: old point {at_old:?}, new point {at_new:?}"
                );
                assert_eq!(XbrTree::len(&t), points.len() as u64, "{what}, sync {s}");
                t.check().unwrap();
                for (i, p) in points.iter().enumerate().filter(|&(i, _)| i != id) {
                    assert_eq!(t.point(p).unwrap(), Some(i as u64), "{what}, sync {s}");
                }
            }
        }
    }
    assert!(crashes > 0, "no crash fell inside an update");
}

/// `n` distinct points spread over the domain (a scrambled grid).
fn spread_points(n: u64) -> Vec<(u64, Point)> {
    (0..n)
        .map(|i| {
            let c = i * 7919 % n;
            let side = (n as f64).sqrt().ceil() as u64;
            let (x, y) = (c % side, c / side);
            (i + 1, pt(x as f64 * 63.0 / side as f64, y as f64 * 63.0 / side as f64))
        })
        .collect()
}

/// A node as its level and entries (key, rectangle bits, payload).
type NodeContent = (u16, Vec<(u64, [u64; 4], u64)>);

/// Every node of `t` as level and content, the keys of internal entries
/// (pages) left out, sorted: two trees with the same list have the same
/// nodes whatever their pages.
fn nodes_of<S: NodeStore>(t: &XbrTree<S>) -> Vec<NodeContent> {
    let mut out = Vec::new();
    let mut stack: Vec<u64> = t.store().meta().root.into_iter().collect();
    while let Some(page) = stack.pop() {
        let node = t.node(page).unwrap();
        let mut entries: Vec<(u64, [u64; 4], u64)> = node
            .entries
            .iter()
            .map(|e| {
                let r = [e.rect.min_x(), e.rect.min_y(), e.rect.max_x(), e.rect.max_y()];
                let key = if node.level == 0 { e.key } else { 0 };
                (key, r.map(f64::to_bits), e.payload)
            })
            .collect();
        if node.level > 0 {
            stack.extend(node.entries.iter().map(|e| e.key));
        }
        entries.sort_unstable();
        out.push((node.level, entries));
    }
    out.sort_unstable();
    out
}

/// Issue 47: a bulk load held the whole tree it builds in memory (every
/// node until the end). Bounded by `held_nodes`, it writes the nodes the
/// Z-ordered insertion leaves behind as it goes, holds a number of nodes
/// that does not grow with the input, and builds the same nodes, which
/// answer as the oracle; a load under the bound writes the very pages of
/// one held whole.
#[test]
fn a_bulk_load_holds_a_bounded_number_of_nodes() {
    let cfg = XbrConfig::new(domain(), 8);
    let load = |points: &[(u64, Point)], held_nodes: usize| {
        let opts = BulkOptions {
            held_nodes,
            write_batch: 16,
            ..BulkOptions::default()
        };
        let mut t = XbrTree::create(MemStore::new(), cfg).unwrap();
        let peak = t.load_counted(points.iter().map(|&p| Ok(p)), opts).unwrap();
        (t, peak)
    };
    let mut peaks = Vec::new();
    for n in [5_000u64, 20_000] {
        let points = spread_points(n);
        let (whole, whole_peak) = load(&points, usize::MAX);
        let (bounded, peak) = load(&points, 64);
        let total = whole.store().node_count();
        assert_eq!(whole_peak, total, "held whole, every node is in memory");
        assert!(total > 1_000, "{n} points: {total} nodes");
        assert!(peak <= 160, "{n} points: {peak} nodes held at once of {total}");
        assert_eq!(bounded.store().node_count(), total);
        assert_eq!(nodes_of(&bounded), nodes_of(&whole), "{n} points");
        let o = Oracle {
            items: points.clone(),
        };
        agree(&bounded, &o);
        batches_agree(&bounded, &o);
        peaks.push(peak);
        // Under the bound: the same pages, in the same order.
        let few = &points[..300];
        let (a, _) = load(few, usize::MAX);
        let (b, _) = load(few, 64_000);
        assert_eq!(a.store().page_ids(), b.store().page_ids());
        for page in a.store().page_ids() {
            assert_eq!(a.node(page).unwrap(), b.node(page).unwrap());
        }
    }
    assert!(peaks[1] <= peaks[0] + 16, "held: {peaks:?}");
}

/// A bounded bulk load writes nodes long before its end; killed at any
/// sync of a logged store, it leaves an empty tree (its nodes unreachable
/// until the last operation sets the metadata), or the whole tree.
#[test]
fn a_bulk_load_killed_midway_leaves_an_empty_tree() {
    let opts = BulkOptions {
        held_nodes: 32,
        write_batch: 8,
        ..BulkOptions::default()
    };
    let points = spread_points(1_500);
    killed_load_leaves_an_empty_or_whole_tree(&points, 3, &|t| t.load(&points, opts));
}

/// The bounded-memory bulk load goes through the store's bulk load
/// (unlogged, published once complete): killed at any sync of it, the
/// store holds no tree or the whole one.
#[test]
fn an_external_bulk_load_killed_midway_leaves_an_empty_tree() {
    use crate::index::bulk::BulkWatch;
    use crate::index::external::{ExternalBulkConfig, MIN_MEMORY_BUDGET};
    let tmp = tempfile::tempdir().unwrap();
    let config = ExternalBulkConfig {
        memory_budget: MIN_MEMORY_BUDGET,
        temp_dir: tmp.path().to_path_buf(),
    };
    let opts = BulkOptions {
        held_nodes: 32,
        ..BulkOptions::default()
    };
    let points = spread_points(1_500);
    killed_load_leaves_an_empty_or_whole_tree(&points, 1, &|t| {
        let input = points.iter().map(|&p| Ok(p));
        t.load_external(input, opts, &config, BulkWatch::NONE).map(|_| ())
    });
}

/// An xBR+-tree on a store chosen at run time.
type BoxedTree = XbrTree<Box<dyn NodeStore>>;

/// `load` of `points` into an empty xBR+-tree on the eFIND store, crashed
/// at each of its syncs: the store reopened holds no tree or the whole one,
/// which answers as the oracle; at least `min_empty` crashes leave none.
fn killed_load_leaves_an_empty_or_whole_tree(
    points: &[(u64, Point)],
    min_empty: usize,
    load: &dyn Fn(&mut BoxedTree) -> Result<()>,
) {
    use crate::storage::faulty::{FaultPlan, FaultyDevice};
    use crate::store::crash_harness::unwrap_faulty;
    let cfg = XbrConfig::new(domain(), 8);
    let run = |dev: &Arc<FaultyDevice<MemDevice>>| {
        let d: Arc<dyn PageDevice> = dev.clone();
        let mut t = XbrTree::create(synced_store(Kind::Efind, &d, true), cfg).unwrap();
        let before = dev.stats().io.syncs;
        (before, load(&mut t))
    };
    let dry = Arc::new(FaultyDevice::new(
        MemDevice::new(PAGE, 1 << 12).unwrap(),
        FaultPlan::none(),
    ));
    let (s0, loaded) = run(&dry);
    loaded.unwrap();
    let s1 = dry.stats().io.syncs;
    assert!(s1 > s0, "syncs {s0}..={s1}");
    let (mut empty, mut whole) = (0, 0);
    for s in s0 + 1..=s1 {
        let plan = FaultPlan::none().crash_at_sync(s).with_seed(s);
        let dev = Arc::new(FaultyDevice::new(MemDevice::new(PAGE, 1 << 12).unwrap(), plan));
        match run(&dev).1 {
            Err(Error::Crashed(_)) => {}
            Ok(()) => dev.crash_now().unwrap(),
            Err(e) => panic!("crash at sync {s}: {e}"),
        }
        let durable: Arc<dyn PageDevice> = Arc::new(unwrap_faulty(dev));
        let t = XbrTree::open(synced_store(Kind::Efind, &durable, false), cfg).unwrap();
        match XbrTree::len(&t) {
            0 => {
                assert!(t.store().meta().root.is_none(), "sync {s}");
                empty += 1;
            }
            n => {
                assert_eq!(n, points.len() as u64, "sync {s}");
                agree(&t, &Oracle { items: points.to_vec() });
                whole += 1;
            }
        }
    }
    assert!(empty >= min_empty && whole > 0, "empty {empty}, whole {whole}");
}

/// Issue 47: the bounded-memory bulk load sorts the points through
/// temporary files (many runs, several merge passes at the smallest
/// budget) and builds the tree the load in memory builds, node for node;
/// it keeps the id set (a second object with a loaded id is refused) and
/// removes its files.
#[test]
fn an_external_bulk_load_builds_the_tree_of_a_load_in_memory() {
    use crate::index::bulk::BulkWatch;
    use crate::index::external::{ExternalBulkConfig, MIN_MEMORY_BUDGET};
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let cfg = XbrConfig::new(domain(), 8);
    let opts = BulkOptions {
        held_nodes: 64,
        write_batch: 16,
        ..BulkOptions::default()
    };
    let mut points = spread_points(6_000);
    points.shuffle(&mut rand::rngs::StdRng::seed_from_u64(5));
    let tmp = tempfile::tempdir().unwrap();
    let config = ExternalBulkConfig {
        memory_budget: MIN_MEMORY_BUDGET,
        temp_dir: tmp.path().to_path_buf(),
    };
    let mut ext = XbrTree::create(MemStore::new(), cfg).unwrap();
    let report = ext
        .load_external(points.iter().map(|&p| Ok(p)), opts, &config, BulkWatch::NONE)
        .unwrap();
    let mut mem = XbrTree::create(MemStore::new(), cfg).unwrap();
    mem.load(&points, opts).unwrap();
    assert_eq!(report.records, 6_000);
    assert!(report.runs >= 10 && report.merge_passes >= 2, "{report:?}");
    assert_eq!(report.nodes, mem.store().node_count() as u64);
    assert_eq!(nodes_of(&ext), nodes_of(&mem));
    ext.check().unwrap();
    agree(&ext, &Oracle { items: points });
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "temporary files left");
    assert!(ext.insert(17, pt(63.5, 0.25)).is_err(), "id 17 is loaded");
}

/// The bounded-memory bulk load refuses what the load in memory refuses,
/// with the same error, and writes nothing: a repeated id, a repeated
/// point (`-0.0` is `0.0`), a point outside the domain, more than M points
/// in one finest cell, an error of the input.
#[test]
fn an_external_bulk_load_refuses_what_a_load_in_memory_refuses() {
    use crate::index::bulk::BulkWatch;
    use crate::index::external::{ExternalBulkConfig, MIN_MEMORY_BUDGET};
    let tmp = tempfile::tempdir().unwrap();
    let config = ExternalBulkConfig {
        memory_budget: MIN_MEMORY_BUDGET,
        temp_dir: tmp.path().to_path_buf(),
    };
    let spread = spread_points(2_000);
    let with = |extra: Vec<(u64, Point)>| -> Vec<(u64, Point)> {
        let mut v = spread.clone();
        for (i, p) in extra.into_iter().enumerate() {
            v.insert(300 * i + 150, p);
        }
        v
    };
    let big = Rect::new(0.0, 0.0, 1e12, 1e12).unwrap();
    let crowded: Vec<(u64, Point)> = (0..4)
        .map(|i| (i, pt(5.0 + f64::from(i as u32) * 1e-6, 5.0)))
        .chain((10..600).map(|i| (i, pt(1e9 * i as f64, 7e11))))
        .collect();
    // (domain, M, the input)
    type Case = (Rect, usize, Vec<(u64, Point)>);
    let cases: Vec<Case> = vec![
        (domain(), 8, with(vec![(7, pt(0.5, 0.5))])),
        // the last point in Z-order again: written nodes would come first
        (domain(), 8, with(vec![(5_000, spread[spread.len() - 1].1)])),
        // in one address, between -0.0 and 0.0 by their bits
        (domain(), 8, vec![(1, pt(0.0, 1.0)), (2, pt(-0.0, 1.0)), (3, pt(0.0, 0.999_999_9))]),
        (domain(), 8, with(vec![(5_001, pt(65.0, 1.0))])),
        (big, 3, crowded),
    ];
    // a few nodes held: a load that checked as it built would have
    // written some before the error
    let opts = BulkOptions {
        held_nodes: 16,
        write_batch: 4,
        ..BulkOptions::default()
    };
    for (d, m, points) in cases {
        let cfg = XbrConfig::new(d, m);
        let mut mem = XbrTree::create(MemStore::new(), cfg).unwrap();
        let expected = mem.load(&points, opts).unwrap_err();
        let mut ext = XbrTree::create(MemStore::new(), cfg).unwrap();
        let got = ext
            .load_external(points.iter().map(|&p| Ok(p)), opts, &config, BulkWatch::NONE)
            .unwrap_err();
        assert!(got.is_user_error(), "{got}");
        assert_eq!(got.to_string(), expected.to_string());
        assert_eq!(ext.store().node_count(), 0, "{got}: nothing written");
        assert_eq!(ext.store().meta().root, None);
    }
    let mut ext = XbrTree::create(MemStore::new(), XbrConfig::new(domain(), 8)).unwrap();
    let input = spread
        .iter()
        .map(|&p| Ok(p))
        .chain(std::iter::once(Err(Error::invalid("line 2001: not a number"))));
    let e = ext
        .load_external(input, BulkOptions::default(), &config, BulkWatch::NONE)
        .unwrap_err();
    assert_eq!(e.to_string(), "invalid input: line 2001: not a number");
    assert_eq!(ext.store().node_count(), 0);
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "temporary files left");
}
