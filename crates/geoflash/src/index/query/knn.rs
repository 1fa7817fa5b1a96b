//! The k nearest records of one query, and of many queries at once: a
//! [`KnnSearch`] collects the first `k` neighbours of a [`NearestIter`]
//! (and those tied with the k-th), and [`RTree::nearest_batch_to`] runs
//! many searches in lockstep, each until it needs a node that has not been
//! read, then reads the nodes they all need as one store batch. On a cold
//! index on an SSD that keeps the device's queue full where one search
//! after the other read a page or two at a time (Fevgas' point for SSDs:
//! they are fast with many reads in flight).
use std::collections::HashMap;
use std::sync::Arc;

use super::{checked_point, KnnResult, NearestIter, Neighbor, Step};
use crate::geom::{Point, Rect};
use crate::index::{RTree, ReadMode};
use crate::page::Node;
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

/// Most searches [`RTree::nearest_batch_to`] runs together: enough for
/// batches of hundreds of pages, few enough that their queues (a few
/// kilobytes to tens of kilobytes each) stay small whatever the number of
/// queries.
pub const SEARCHES_AT_ONCE: usize = 256;

/// One k-nearest search: its iterator and the neighbours collected so far.
struct KnnSearch<'a, S: NodeStore> {
    it: NearestIter<'a, S>,
    k: usize,
    ties: bool,
    neighbors: Vec<Neighbor>,
    /// No neighbour is left to collect.
    done: bool,
}

impl<'a, S: NodeStore> KnnSearch<'a, S> {
    /// The search for the `k` records of `tree` nearest to the query of
    /// `it`, a search of that tree that has not started.
    fn new(tree: &'a RTree<S>, mut it: NearestIter<'a, S>, k: usize, ties: bool) -> Self {
        // Memory follows the answer, never `k` itself (a user's number):
        // there are no more neighbours than records.
        let cap = crate::engine::reserve::answer_capacity(k, tree.store.meta().records);
        // Nothing farther than the k-th nearest record seen so far can be in
        // the answer (ties included), so the search need not queue it.
        if k > 0 {
            it.bound = Some(super::Bound::new(k, cap.saturating_add(1)));
        }
        KnnSearch {
            it,
            k,
            ties,
            neighbors: Vec::with_capacity(cap),
            done: k == 0,
        }
    }

    /// Collects neighbours until the answer is complete (`None`) or, when
    /// the search may not read (`may_read` false), until it needs pages
    /// read (`Some` of them, for [`NearestIter::hand_over`]).
    fn run(&mut self, may_read: bool) -> Result<Option<Vec<PageId>>> {
        while !self.done {
            match self.it.step(may_read)? {
                Step::Neighbor(n) => self.take(n),
                Step::Read(ids) => return Ok(Some(ids)),
                Step::End => self.done = true,
            }
        }
        Ok(None)
    }

    /// Takes `n`, the next neighbour: into the answer while fewer than `k`
    /// are in it, or (with `ties`) while at the k-th distance; else the
    /// answer is complete.
    fn take(&mut self, n: Neighbor) {
        if self.neighbors.len() < self.k {
            self.neighbors.push(n);
            self.done = self.neighbors.len() == self.k && !self.ties;
            return;
        }
        match self.neighbors.last() {
            Some(kth) if n.distance <= kth.distance => self.neighbors.push(n),
            _ => self.done = true,
        }
    }

    /// The answer, with what the search did.
    fn finish(self) -> KnnResult {
        let mut stats = self.it.stats();
        stats.results = self.neighbors.len() as u64;
        KnnResult {
            neighbors: self.neighbors,
            stats,
        }
    }
}

impl<S: NodeStore> RTree<S> {
    /// The `k` nearest records to `point` with their distances. With
    /// `ties`, every record at the k-th distance is returned too (so the
    /// answer may hold more than `k`). Equal to the first items of
    /// [`RTree::nearest_iter`]. Both [`ReadMode`]s return the same
    /// neighbours in the same order from the same visited nodes; batched
    /// reads may read a few nodes more ([`super::QueryStats::nodes_read_unused`]).
    pub fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        self.nearest_to(Rect::from_point(checked_point(point)?), k, ties)
    }

    /// The `k` records nearest to the rectangle `query` (distance between the
    /// nearest points, 0 where they intersect), as [`RTree::nearest`] is
    /// for a point.
    pub fn nearest_to(&self, query: Rect, k: usize, ties: bool) -> Result<KnnResult> {
        let mut search = KnnSearch::new(self, self.nearest_iter_to(query)?, k, ties);
        search.run(true)?;
        Ok(search.finish())
    }

    /// [`RTree::nearest`] of each point of `points`: one answer per point,
    /// in order, each the one [`RTree::nearest`] gives (the same neighbours
    /// in the same order from the same visited nodes). With batched reads
    /// the searches run together: each until it must visit a node not read
    /// yet, then the nodes they all need (each search's node and those it
    /// reads ahead) are read as one store batch, each page once.
    pub fn nearest_batch(&self, points: &[Point], k: usize, ties: bool) -> Result<Vec<KnnResult>> {
        let queries = points
            .iter()
            .map(|p| checked_point(*p).map(Rect::from_point))
            .collect::<Result<Vec<_>>>()?;
        self.nearest_batch_to(&queries, k, ties)
    }

    /// [`RTree::nearest_batch`] for rectangles, as [`RTree::nearest_to`] is
    /// for one. With single reads (the papers' search: a page per node
    /// visited) the searches run one after the other.
    /// At most [`SEARCHES_AT_ONCE`] searches run together (each holds its
    /// queues), the next ones after them.
    pub fn nearest_batch_to(&self, queries: &[Rect], k: usize, ties: bool) -> Result<Vec<KnnResult>> {
        if self.reads == ReadMode::Single {
            return queries.iter().map(|q| self.nearest_to(*q, k, ties)).collect();
        }
        let mut out = Vec::with_capacity(queries.len());
        for group in queries.chunks(SEARCHES_AT_ONCE) {
            out.extend(self.nearest_together(group, k, ties)?);
        }
        Ok(out)
    }

    /// The searches of `queries` in lockstep (see [`RTree::nearest_batch`]).
    fn nearest_together(&self, queries: &[Rect], k: usize, ties: bool) -> Result<Vec<KnnResult>> {
        // Room for one node's entries: the searches of a batch are many at
        // once, and a new process pays for the memory they touch in page
        // faults (with four nodes' room each, the searches' queues took
        // 15 % of the page faults of `geoflash knn --points` on a cold index).
        let room = self.params.max_entries;
        let mut searches = queries
            .iter()
            .map(|q| Ok(KnnSearch::new(self, self.nearest_iter_with_room(*q, room)?, k, ties)))
            .collect::<Result<Vec<_>>>()?;
        loop {
            let mut wanted: Vec<(usize, Vec<PageId>)> = Vec::new();
            for (i, search) in searches.iter_mut().enumerate() {
                if let Some(ids) = search.run(false)? {
                    wanted.push((i, ids));
                }
            }
            if wanted.is_empty() {
                break;
            }
            let read = self.read_for(&wanted)?;
            for (i, ids) in wanted {
                let nodes = ids
                    .iter()
                    .map(|id| {
                        read.get(id)
                            .cloned()
                            .ok_or_else(|| Error::corrupt(Some(*id), "the store returned no node"))
                    })
                    .collect::<Result<Vec<_>>>()?;
                if let Some(search) = searches.get_mut(i) {
                    search.it.hand_over(&ids, nodes);
                }
            }
        }
        Ok(searches.into_iter().map(KnnSearch::finish).collect())
    }

    /// The nodes of every page the searches want, read as one store batch
    /// (each page once).
    fn read_for(&self, wanted: &[(usize, Vec<PageId>)]) -> Result<HashMap<PageId, Arc<Node>>> {
        let mut pages: Vec<PageId> = wanted.iter().flat_map(|(_, ids)| ids.iter().copied()).collect();
        pages.sort_unstable();
        pages.dedup();
        let nodes = self.store.get_batch(&pages)?;
        if nodes.len() != pages.len() {
            return Err(Error::invalid(format!(
                "internal: the store returned {} nodes for a batch of {} pages",
                nodes.len(),
                pages.len()
            )));
        }
        Ok(pages.into_iter().zip(nodes).collect())
    }
}
