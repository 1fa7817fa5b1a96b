//! `NodeStore::get_batch` against `get` on every store: the same nodes, in
//! the order asked, with repeats, and the pages not in memory read as one
//! device batch; batched and single-page range and kNN queries give the
//! same records in the same order.
use std::collections::HashSet;
use std::sync::Arc;

use super::efind::tests::create_on;
use super::efind::EfindConfig;
use super::fast::{FastConfig, FastStore};
use super::plain::{PlainConfig, PlainStore};
use super::NodeStore;
use crate::geom::{Point, Rect};
use crate::index::{min_dist, IndexKind, Predicate, RTree, ReadMode, TreeParams};
use crate::storage::mem::MemDevice;
use crate::storage::PageId;

const PAGE: usize = 512;

fn rect(i: u64) -> Rect {
    let x = ((i * 37) % 97) as f64;
    let y = ((i * 61) % 89) as f64;
    Rect::new(x, y, x + 1.5, y + 2.5).unwrap()
}

/// Every node page of the tree, parents before children.
fn pages<S: NodeStore>(t: &RTree<S>) -> Vec<PageId> {
    let mut out = Vec::new();
    let mut todo: Vec<PageId> = t.store().meta().root.into_iter().collect();
    while let Some(id) = todo.pop() {
        out.push(id);
        let node = t.store().get(id).unwrap();
        if node.level > 0 {
            todo.extend(node.entries.iter().map(|e| e.key));
        }
    }
    out
}

/// Builds a tree of `n` records on `store` (deleting every fifth), then
/// checks `get_batch` against `get` and the two read modes against each
/// other, for range and kNN queries; returns the kNN queries' device read
/// batches in single and in batched mode.
fn check<S: NodeStore>(store: S, dev: &MemDevice, n: u64, label: &str) -> (u64, u64) {
    let mut t =
        RTree::create(store, TreeParams::for_page(IndexKind::RStar, PAGE).unwrap()).unwrap();
    for i in 0..n {
        t.insert(i, rect(i)).unwrap();
    }
    for i in (0..n).step_by(5) {
        t.delete(i, rect(i)).unwrap();
    }
    let mut ids = pages(&t);
    assert!(ids.len() > 10, "{label}: a tree of several levels");
    // Shuffled deterministically, with repeats.
    ids.reverse();
    let third = ids.len() / 3;
    ids.rotate_left(third);
    let repeats: Vec<PageId> = ids.iter().step_by(4).copied().collect();
    ids.extend(repeats);
    dev.reset_stats();
    let got = t.store().get_batch(&ids).unwrap();
    let io = dev.stats().io;
    assert!(
        io.read_batches <= 1,
        "{label}: {} device batches",
        io.read_batches
    );
    let distinct: HashSet<PageId> = ids.iter().copied().collect();
    assert!(
        io.pages_read <= distinct.len() as u64,
        "{label}: each missing page once"
    );
    for (id, node) in ids.iter().zip(&got) {
        let one = t.store().get(*id).unwrap();
        assert_eq!(node.level, one.level, "{label}: page {id}");
        assert_eq!(node.entries, one.entries, "{label}: page {id}");
    }
    assert!(
        t.store().get_batch(&[ids[0], 1 << 40]).is_err(),
        "{label}: no such page"
    );
    for w in [
        Rect::new(10.0, 10.0, 30.0, 40.0).unwrap(),
        Rect::new(-1.0, -1.0, 100.0, 100.0).unwrap(),
        Rect::new(50.0, 5.0, 51.0, 6.0).unwrap(),
    ] {
        t.set_read_mode(ReadMode::Batched);
        let batched = t.query(w, Predicate::Intersects).unwrap();
        t.set_read_mode(ReadMode::Single);
        let single = t.query(w, Predicate::Intersects).unwrap();
        assert_eq!(batched.hits, single.hits, "{label}: window {w:?}");
        assert_eq!(batched.stats.nodes_visited, single.stats.nodes_visited);
        let want = (0..n)
            .filter(|i| i % 5 != 0 && rect(*i).intersects(&w))
            .count();
        assert_eq!(batched.hits.len(), want, "{label}: window {w:?}");
    }
    knn_modes_agree(&mut t, dev, n, label)
}

/// Device read batches of kNN queries on `t` in single and in batched
/// mode, after checking that both return the brute-force neighbours, the
/// same in the same order from the same visited nodes, and that a batched
/// query asks for at most one device batch per visited node.
fn knn_modes_agree<S: NodeStore>(
    t: &mut RTree<S>,
    dev: &MemDevice,
    n: u64,
    label: &str,
) -> (u64, u64) {
    let (mut single_batches, mut batched_batches) = (0, 0);
    for q in 0..12u32 {
        let p = Point::new(f64::from(q * 9 % 100), f64::from(q * 13 % 90)).unwrap();
        for (k, ties) in [(1, false), (10, true), (40, false)] {
            t.set_read_mode(ReadMode::Single);
            dev.reset_stats();
            let single = t.nearest(p, k, ties).unwrap();
            single_batches += dev.stats().io.read_batches;
            t.set_read_mode(ReadMode::Batched);
            dev.reset_stats();
            let batched = t.nearest(p, k, ties).unwrap();
            let io = dev.stats().io;
            batched_batches += io.read_batches;
            let what = format!("{label}: kNN at {p:?}, k {k}, ties {ties}");
            assert_eq!(batched.neighbors, single.neighbors, "{what}");
            assert_eq!(
                batched.stats.nodes_visited, single.stats.nodes_visited,
                "{what}"
            );
            assert!(io.read_batches <= batched.stats.nodes_visited, "{what}");
            assert!(
                io.pages_read <= batched.stats.nodes_visited + batched.stats.nodes_read_unused,
                "{what}"
            );
            let mut truth: Vec<f64> = (0..n)
                .filter(|i| i % 5 != 0)
                .map(|i| min_dist(&p, &rect(i)))
                .collect();
            truth.sort_by(f64::total_cmp);
            let got: Vec<f64> = single.neighbors.iter().map(|x| x.distance).collect();
            if ties {
                let kth = truth[k - 1];
                assert_eq!(got.len(), truth.iter().filter(|d| **d <= kth).count());
            } else {
                assert_eq!(got, truth[..k], "{what}");
            }
        }
    }
    eprintln!("{label}: kNN device batches single {single_batches}, batched {batched_batches}");
    if single_batches == 0 {
        // Everything in memory: batched reads must not reach the device
        // either (FAST once sent an empty batch).
        assert_eq!(batched_batches, 0, "{label}");
    }
    (single_batches, batched_batches)
}

#[test]
fn plain_get_batch_matches_get() {
    for buffer in [0, 8 * PAGE] {
        let dev = Arc::new(MemDevice::new(PAGE, 1 << 16).unwrap());
        let cfg = PlainConfig {
            buffer_bytes: buffer,
            ..PlainConfig::default()
        };
        let s = PlainStore::create(dev.clone(), cfg).unwrap();
        let (single, batched) = check(s, &dev, 600, &format!("plain, buffer {buffer}"));
        if buffer == 0 {
            // No cache: every visited node is read from the device.
            assert!(batched < single, "{batched} batches, single {single}");
        }
    }
}

#[test]
fn efind_get_batch_matches_get() {
    for (buffer, read) in [(4 * PAGE, 0), (16 * PAGE, 50), (1 << 20, 20)] {
        let dev = Arc::new(MemDevice::new(PAGE, 1 << 16).unwrap());
        let cfg = EfindConfig {
            buffer_bytes: buffer,
            read_buffer_percent: read,
            ..EfindConfig::default()
        };
        let s = create_on(dev.clone(), cfg).unwrap();
        check(
            s,
            &dev,
            600,
            &format!("efind, buffer {buffer}, read {read} %"),
        );
    }
}

#[test]
fn fast_get_batch_matches_get() {
    for buffer in [4 * PAGE, 1 << 20] {
        let cfg = FastConfig {
            buffer_bytes: buffer,
            ..FastConfig::default()
        };
        let (mem, dev, log) = super::fast::tests::mem_device(&cfg);
        let s = FastStore::create(dev, log, cfg).unwrap();
        check(s, &mem, 600, &format!("fast, buffer {buffer}"));
    }
}
