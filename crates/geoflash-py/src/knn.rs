//! kNN from a query *rectangle* (the engine's kNN takes a point), as the
//! `rtree` package answers `nearest((minx, miny, maxx, maxy), k)`: entries
//! by ascending Euclidean distance between the rectangles (0 when they
//! intersect), every entry tied at the k-th distance included when `ties`.
//! Best-first search (Hjaltason and Samet) through [`NodeStore::get`].
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use geoflash_engine::geom::Rect;
use geoflash_engine::index::query::Hit;
use geoflash_engine::store::NodeStore;
use geoflash_engine::Result;

/// A queued node or record.
struct Item {
    dist: f64,
    record: bool,
    key: u64,
    rect: Rect,
}

impl Ord for Item {
    /// By distance, records before nodes at equal distance, then by key.
    fn cmp(&self, other: &Self) -> Ordering {
        self.dist
            .total_cmp(&other.dist)
            .then(other.record.cmp(&self.record))
            .then(self.key.cmp(&other.key))
    }
}
impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Item {}

/// The `k` records nearest to `query` (see the module docs).
pub fn nearest_to_rect<S: NodeStore + ?Sized>(
    store: &S,
    query: Rect,
    k: usize,
    ties: bool,
) -> Result<Vec<Hit>> {
    let mut out = Vec::new();
    let Some(root) = store.meta().root else {
        return Ok(out);
    };
    if k == 0 {
        return Ok(out);
    }
    let mut heap = BinaryHeap::new();
    heap.push(Reverse(Item {
        dist: 0.0,
        record: false,
        key: root,
        rect: query,
    }));
    let mut kth: Option<f64> = None;
    while let Some(Reverse(it)) = heap.pop() {
        if kth.is_some_and(|d| it.dist > d) {
            break;
        }
        if it.record {
            out.push(Hit {
                id: it.key,
                rect: it.rect,
            });
            if out.len() == k {
                if !ties {
                    break;
                }
                kth = Some(it.dist);
            }
            continue;
        }
        let node = store.get(it.key)?;
        for e in &node.entries {
            heap.push(Reverse(Item {
                // rtree compares the distances themselves (not their squares)
                dist: e.rect.min_dist_sq_rect(&query).sqrt(),
                record: node.level == 0,
                key: e.key,
                rect: e.rect,
            }));
        }
    }
    Ok(out)
}
