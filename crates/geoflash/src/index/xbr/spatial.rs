//! The xBR+-tree as a [`SpatialIndex`]. It indexes points: an object given
//! as a rectangle must be degenerate (a point), a box is an error. Its
//! range queries answer every predicate on points, batched range queries
//! and group point lookups use its level-by-level batch algorithms, and an
//! update is one store operation, checked first (see
//! [`SpatialIndex::update`]'s implementation).
use super::insert::duplicate_point;
use super::XbrTree;
use crate::geom::{Point, Rect};
use crate::index::query::{BatchResult, KnnResult, Predicate, QueryResult};
use crate::spatial::{
    as_point, forward_to_store, knn_answer, point_answer, point_group_answer, SpatialIndex,
};
use crate::store::NodeStore;
use crate::Result;

/// Most pages of one batched read of the xBR+-tree's batch queries.
const XBR_READ_BATCH: usize = 1024;

crate::spatial::store_link_to_store!(XbrTree<S>);

impl<S: NodeStore + 'static> SpatialIndex for XbrTree<S> {
    fn family(&self) -> &'static str {
        "an xBR+-tree"
    }

    fn len(&self) -> Option<u64> {
        Some(XbrTree::len(self))
    }

    fn height(&self) -> u16 {
        XbrTree::height(self)
    }

    fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        XbrTree::insert(self, id, as_point(id, &rect)?)
    }

    fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        XbrTree::delete(self, id, as_point(id, &rect)?)
    }

    /// One store operation (`XbrTree::move_point`), after checking what
    /// the insertion would refuse: the new point outside the domain (or not
    /// finite), held by another object, or beside points no quadrant
    /// separates. A refused update leaves the object where it was.
    fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        let from = as_point(id, &old)?;
        let p = as_point(id, &new)?;
        self.domain.code(&p)?;
        if let Some(&(holder, _)) = self.range(&new)?.iter().find(|(other, _)| *other != id) {
            return Err(duplicate_point(&p, holder));
        }
        self.move_point(id, from, p)
    }

    /// Nodes visited are not counted here (the store's counters hold its
    /// reads).
    fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let found = self.range(&window)?;
        Ok(point_answer(found, &window, predicate, 0))
    }

    fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        let (found, stats) = self.range_batch(windows, XBR_READ_BATCH)?;
        let results = found
            .into_iter()
            .zip(windows)
            .map(|(f, w)| point_answer(f, w, predicate, 0))
            .collect();
        Ok(BatchResult {
            results,
            nodes_visited: stats.nodes_read,
        })
    }

    fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        // With ties, ask for more until the k-th distance is passed.
        let mut m = k;
        loop {
            let mut neighbors = XbrTree::nearest(self, &point, m)?;
            let kth = neighbors.get(k.wrapping_sub(1)).map(|n| n.distance);
            let more = ties && neighbors.len() == m && kth == neighbors.last().map(|n| n.distance);
            if more && k > 0 {
                m = m.saturating_mul(2);
                continue;
            }
            if let Some(d) = kth.filter(|_| ties) {
                neighbors.retain(|n| n.distance <= d);
            } else {
                neighbors.truncate(k);
            }
            return Ok(knn_answer(neighbors));
        }
    }

    /// One batched read per level (the batch point-location algorithm).
    fn point_group(&self, points: &[Point]) -> Result<BatchResult> {
        let (found, _) = self.point_batch(points, XBR_READ_BATCH)?;
        Ok(point_group_answer(points, &found))
    }

    fn checkpoint(&mut self) -> Result<()> {
        XbrTree::checkpoint(self)
    }

    forward_to_store!();
}
