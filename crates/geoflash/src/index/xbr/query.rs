//! Queries of the xBR+-tree: point location, window (range), distance
//! range and kNN, and the batch versions of the first three (Fevgas'
//! thesis §3.6; Roumelis et al., MEDI 2018).
//!
//! A *batch* query processes many queries together, level by level from the
//! root: at each level the nodes any query of the batch needs are read with
//! one [`NodeStore::get_batch`] per `max_batch` pages (each page once, however
//! many queries need it), so a store that reads pages in place submits them
//! as one device batch. The thesis segments the query set into batches that
//! fit memory; here the caller passes the queries of one batch, and
//! `max_batch` bounds one read submission. The one-at-a-time versions visit
//! nodes depth first, one `get` each.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use super::quad::{self, Domain};
use super::XbrTree;
use crate::geom::{Point, Rect};
use crate::index::fortree::query::Item;
use crate::index::query::{Predicate, Selection, Window};
#[cfg(any(test, feature = "internals"))]
use crate::index::query::WithinDistance;
use crate::index::Neighbor;
use crate::page::{Entry, Node};
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::Result;

/// A point found by a query: object id and point.
pub type Found = (u64, Point);

/// One query as a traversal: which children of an internal node it enters
/// and which records of a leaf it reports.
pub trait Probe {
    /// Appends the pages of the children of internal node `page` to visit.
    fn children(&self, node: &Node, page: PageId, out: &mut Vec<PageId>) -> Result<()>;
    /// Reports leaf record `e`?
    fn select(&self, e: &Entry) -> bool;
}

/// A [`Selection`] as an xBR+-tree traversal, so that the xBR+-tree's
/// window and distance queries are driven by the same selection functions
/// as the R-tree family's: it enters a child whose DBR (the region its
/// points lie in) the selection descends into, and reports a point whose
/// degenerate rectangle the selection selects.
#[derive(Debug, Clone, Copy)]
pub struct Selected<F>(pub F);

impl<F: Selection> Probe for Selected<F> {
    fn children(&self, node: &Node, page: PageId, out: &mut Vec<PageId>) -> Result<()> {
        for e in &node.entries {
            if quad::child_ref(e, page)?
                .dbr
                .is_some_and(|d| self.0.descend(&d))
            {
                out.push(e.key);
            }
        }
        Ok(())
    }
    fn select(&self, e: &Entry) -> bool {
        self.0.select(&Rect::from_point(quad::entry_point(e)))
    }
}

/// Points inside the closed window `w`: the window selection with
/// `intersects`, which a point satisfies exactly when the window contains it.
fn window(w: &Rect) -> Selected<Window> {
    Selected(Window {
        rect: *w,
        predicate: Predicate::Intersects,
    })
}

/// Point location: the one path of a point (none when it lies outside the domain).
#[derive(Debug, Clone, Copy)]
pub struct PointProbe {
    point: Point,
    /// The point's address; `None` outside the domain.
    code: Option<u64>,
}

impl PointProbe {
    /// The location query of `p` in `domain`.
    pub fn new(domain: &Domain, p: Point) -> Self {
        PointProbe {
            point: p,
            code: domain.code(&p).ok(),
        }
    }
}

impl Probe for PointProbe {
    fn children(&self, node: &Node, page: PageId, out: &mut Vec<PageId>) -> Result<()> {
        if let Some(code) = self.code {
            out.push(node.entries[quad::route(&node.entries, code, page)?].key);
        }
        Ok(())
    }
    fn select(&self, e: &Entry) -> bool {
        self.code.is_some() && quad::entry_point(e) == self.point
    }
}

/// Counters of a batch query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Node visits the queries made (a node needed by 3 queries counts 3).
    pub visits: u64,
    /// Distinct node reads requested from the store.
    pub nodes_read: u64,
    /// `get_batch` calls (read submissions).
    pub batches: u64,
}

impl<S: NodeStore> XbrTree<S> {
    /// Runs `probe` one node at a time (depth first, one `get` per node).
    pub fn probe(&self, probe: &impl Probe) -> Result<Vec<Found>> {
        let mut out = Vec::new();
        let mut stack: Vec<PageId> = self.store.meta().root.into_iter().collect();
        let mut children = Vec::new();
        while let Some(page) = stack.pop() {
            let node = self.node(page)?;
            visit(probe, &node, page, &mut out, &mut children)?;
            stack.append(&mut children);
        }
        Ok(out)
    }

    /// Runs `probes` together, level by level, reading each level's nodes
    /// in batches of at most `max_batch` pages; `on_read` sees every node
    /// read. Answers in the order of `probes`.
    pub fn probe_batch<P: Probe>(
        &self,
        probes: &[P],
        max_batch: usize,
        on_read: &mut dyn FnMut(PageId, &Arc<Node>),
    ) -> Result<(Vec<Vec<Found>>, BatchStats)> {
        let mut out: Vec<Vec<Found>> = vec![Vec::new(); probes.len()];
        let mut stats = BatchStats::default();
        let Some(root) = self.store.meta().root else {
            return Ok((out, stats));
        };
        let mut frontier: Vec<(usize, PageId)> = (0..probes.len()).map(|q| (q, root)).collect();
        let mut children = Vec::new();
        while !frontier.is_empty() {
            let mut pages: Vec<PageId> = frontier.iter().map(|&(_, p)| p).collect();
            pages.sort_unstable();
            pages.dedup();
            let mut nodes: HashMap<PageId, Arc<Node>> = HashMap::with_capacity(pages.len());
            for chunk in pages.chunks(max_batch.max(1)) {
                for (&id, node) in chunk.iter().zip(self.nodes_batch(chunk)?) {
                    on_read(id, &node);
                    nodes.insert(id, node);
                }
                stats.batches += 1;
                stats.nodes_read += chunk.len() as u64;
            }
            let mut next = Vec::new();
            for (q, page) in frontier {
                stats.visits += 1;
                let node = &nodes[&page];
                visit(&probes[q], node, page, &mut out[q], &mut children)?;
                next.extend(children.drain(..).map(|c| (q, c)));
            }
            frontier = next;
        }
        Ok((out, stats))
    }

    /// Points inside the closed window `w` (one node at a time).
    pub fn range(&self, w: &Rect) -> Result<Vec<Found>> {
        self.probe(&window(w))
    }

#[cfg(any(test, feature = "internals"))]
    /// Points within `radius` of `center` (one node at a time).
    pub fn within_distance(&self, center: &Point, radius: f64) -> Result<Vec<Found>> {
        self.probe(&Selected(WithinDistance {
            center: *center,
            radius,
        }))
    }

#[cfg(any(test, feature = "internals"))]
    /// The id of the point at `p`, if the tree holds it.
    pub fn point(&self, p: &Point) -> Result<Option<u64>> {
        Ok(self
            .probe(&PointProbe::new(&self.domain, *p))?
            .first()
            .map(|&(id, _)| id))
    }

    /// Window queries as one batch (see the module documentation).
    pub fn range_batch(
        &self,
        windows: &[Rect],
        max_batch: usize,
    ) -> Result<(Vec<Vec<Found>>, BatchStats)> {
        let probes: Vec<Selected<Window>> = windows.iter().map(window).collect();
        self.probe_batch(&probes, max_batch, &mut |_, _| {})
    }

#[cfg(any(test, feature = "internals"))]
    /// Distance-range queries `(centre, radius)` as one batch.
    pub fn within_distance_batch(
        &self,
        queries: &[(Point, f64)],
        max_batch: usize,
    ) -> Result<(Vec<Vec<Found>>, BatchStats)> {
        let probes: Vec<Selected<WithinDistance>> = queries
            .iter()
            .map(|&(center, radius)| Selected(WithinDistance { center, radius }))
            .collect();
        self.probe_batch(&probes, max_batch, &mut |_, _| {})
    }

    /// Point-location queries as one batch: the id at each point, if any.
    pub fn point_batch(
        &self,
        points: &[Point],
        max_batch: usize,
    ) -> Result<(Vec<Option<u64>>, BatchStats)> {
        let probes: Vec<PointProbe> = points
            .iter()
            .map(|p| PointProbe::new(&self.domain, *p))
            .collect();
        let (found, stats) = self.probe_batch(&probes, max_batch, &mut |_, _| {})?;
        Ok((
            found.iter().map(|f| f.first().map(|&(id, _)| id)).collect(),
            stats,
        ))
    }

    /// The `k` points nearest to `p` by best-first search (Hjaltason and
    /// Samet) over the DBRs, by ascending distance, ties by id (nodes are
    /// expanded before points at the same distance).
    pub fn nearest(&self, p: &Point, k: usize) -> Result<Vec<Neighbor>> {
        let meta = self.store.meta();
        // Memory follows the answer, never `k` itself (a user's number).
        let mut out = Vec::with_capacity(crate::engine::reserve::answer_capacity(k, meta.records));
        let Some(root) = meta.root else {
            return Ok(out);
        };
        let mut heap = BinaryHeap::new();
        heap.push(Reverse(Item::root(root)));
        while let Some(Reverse(item)) = heap.pop() {
            if out.len() >= k {
                break;
            }
            if let (false, Some(rect)) = (item.node, item.rect) {
                out.push(Neighbor {
                    id: item.key,
                    rect,
                    distance: item.dist,
                });
                continue;
            }
            let node = self.node(item.key)?;
            for e in &node.entries {
                if node.level == 0 {
                    heap.push(Reverse(Item {
                        dist: quad::entry_point(e).distance(p),
                        node: false,
                        key: e.key,
                        rect: Some(e.rect),
                    }));
                } else if let Some(d) = quad::child_ref(e, item.key)?.dbr {
                    heap.push(Reverse(Item {
                        dist: d.min_dist_point(p),
                        node: true,
                        key: e.key,
                        rect: None,
                    }));
                }
            }
        }
        Ok(out)
    }
}

/// One node of a traversal: records of a leaf that `probe` selects go to
/// `out`, the children of an internal node it enters to `children`.
fn visit(
    probe: &impl Probe,
    node: &Node,
    page: PageId,
    out: &mut Vec<Found>,
    children: &mut Vec<PageId>,
) -> Result<()> {
    if node.level == 0 {
        out.extend(
            node.entries
                .iter()
                .filter(|e| probe.select(e))
                .map(|e| (e.key, quad::entry_point(e))),
        );
        Ok(())
    } else {
        probe.children(node, page, children)
    }
}
