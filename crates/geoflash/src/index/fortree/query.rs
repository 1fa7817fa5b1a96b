//! Queries over units: range queries (intersects, contains, within, point)
//! by depth-first search and kNN by best-first search (Hjaltason and
//! Samet), reading a unit's P-node and every O-node, and counting the
//! access of each unit with O-nodes.
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{checked, Access, Fortree};
use crate::geom::{Point, Rect};
use crate::index::query::checked_point;
#[cfg(test)]
use crate::index::query::PointSelection;
use crate::index::query::{
    KnnResult, Neighbor, Predicate, QueryResult, QueryStats, Selection, Window,
};
use crate::page::Entry;
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::Result;

impl<S: NodeStore> Fortree<S> {
    /// Depth-first traversal through units: enters the subtrees `sel`
    /// descends into and calls `visit` for each record it selects.
    pub fn select<F: Selection + ?Sized>(
        &mut self,
        sel: &F,
        mut visit: impl FnMut(&Entry),
    ) -> Result<QueryStats> {
        let mut stats = QueryStats::default();
        let Some(root) = self.root else {
            return Ok(stats);
        };
        let mut stack: Vec<PageId> = vec![root];
        while let Some(id) = stack.pop() {
            self.count_access(id, Access::Search);
            let nodes = self.unit(id)?;
            for (_, node) in nodes.iter() {
                stats.nodes_visited += 1;
                if node.level == 0 {
                    for e in node.entries.iter().filter(|e| sel.select(&e.rect)) {
                        stats.candidates += 1;
                        stats.results += 1;
                        visit(e);
                    }
                } else {
                    for e in node.entries.iter().rev().filter(|e| sel.descend(&e.rect)) {
                        stack.push(e.key);
                    }
                }
            }
        }
        self.after_query();
        Ok(stats)
    }

    fn collect<F: Selection + ?Sized>(&mut self, sel: &F) -> Result<QueryResult> {
        QueryResult::gather(|visit| self.select(sel, visit))
    }

    /// Records related to `window` by `predicate`.
    pub fn query(&mut self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let rect = checked(window)?;
        self.collect(&Window { rect, predicate })
    }

    #[cfg(test)]
    /// Records whose MBR contains the point.
    pub fn query_point(&mut self, point: Point) -> Result<QueryResult> {
        let p = checked_point(point)?;
        self.collect(&PointSelection(p))
    }

    /// The `k` nearest records to `point` by ascending distance (ties by
    /// id); with `ties`, every record at the k-th distance too.
    pub fn nearest(&mut self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        let p = checked_point(point)?;
        let mut out = KnnResult::default();
        let Some(root) = self.root else {
            return Ok(out);
        };
        if k == 0 {
            return Ok(out);
        }
        let mut heap = BinaryHeap::new();
        heap.push(Reverse(Item::root(root)));
        while let Some(Reverse(item)) = heap.pop() {
            if !item.node {
                let kth = out.neighbors.last().map(|n| n.distance);
                let take = out.neighbors.len() < k || (ties && kth.is_some_and(|d| item.dist <= d));
                if !take {
                    break;
                }
                if let Some(rect) = item.rect {
                    out.neighbors.push(Neighbor {
                        id: item.key,
                        rect,
                        distance: item.dist,
                    });
                }
                continue;
            }
            if out.neighbors.len() >= k {
                let kth = out.neighbors.last().map_or(f64::INFINITY, |n| n.distance);
                if !ties || item.dist > kth {
                    break;
                }
            }
            self.count_access(item.key, Access::Search);
            for (_, node) in self.unit(item.key)? {
                out.stats.nodes_visited += 1;
                let leaf = node.level == 0;
                if leaf {
                    out.stats.candidates += node.entries.len() as u64;
                }
                for e in &node.entries {
                    heap.push(Reverse(Item {
                        dist: e.rect.min_dist_point(&p),
                        node: !leaf,
                        key: e.key,
                        rect: leaf.then_some(e.rect),
                    }));
                }
            }
        }
        out.stats.results = out.neighbors.len() as u64;
        self.after_query();
        Ok(out)
    }
}

/// A queued unit or record (also the xBR+-tree's kNN queue item).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item {
    /// Distance from the query point (MINDIST for a node).
    pub(crate) dist: f64,
    /// True for a node (unit), false for a record.
    pub(crate) node: bool,
    /// Page id of a node, object id of a record.
    pub(crate) key: u64,
    /// A record's rectangle.
    pub(crate) rect: Option<Rect>,
}

impl Item {
    /// The root node, where a search starts (distance 0).
    pub(crate) fn root(key: PageId) -> Item {
        Item {
            dist: 0.0,
            node: true,
            key,
            rect: None,
        }
    }
}

// By distance, units before records at equal distance (so that every
// record at a distance is queued before the first of them is taken, and
// ties come out by id), then by key.
ordered_by!(Item, |a, b| a
    .dist
    .total_cmp(&b.dist)
    .then(b.node.cmp(&a.node))
    .then(a.key.cmp(&b.key)));
