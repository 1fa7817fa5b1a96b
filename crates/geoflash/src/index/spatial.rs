//! The R-tree family (R-tree, R*-tree, Hilbert R-tree) as a
//! [`SpatialIndex`].
use super::query::{BatchKeys, BatchResult, KeyResult, KnnResult, Predicate, QueryResult};
use super::{RTree, ReadMode};
use crate::geom::{Point, Rect};
use crate::spatial::{forward_to_store, SpatialIndex};
use crate::store::NodeStore;
use crate::Result;

crate::spatial::store_link_to_store!(RTree<S>);

impl<S: NodeStore + 'static> SpatialIndex for RTree<S> {
    fn family(&self) -> &'static str {
        "an R-tree-family tree"
    }

    fn len(&self) -> Option<u64> {
        Some(RTree::len(self))
    }

    fn height(&self) -> u16 {
        RTree::height(self)
    }

    fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        RTree::insert(self, id, rect)
    }

    fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        RTree::delete(self, id, rect)
    }

    fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        RTree::update(self, id, old, new)
    }

    fn located_records(&self) -> Result<Vec<(u64, Rect, Option<u64>)>> {
        Ok(RTree::records_by_leaf(self)?
            .into_iter()
            .map(|(id, rect, leaf)| (id, rect, Some(leaf)))
            .collect())
    }

    fn update_near(&mut self, id: u64, old: Rect, new: Rect, near: Option<u64>) -> Result<Option<u64>> {
        RTree::update_near(self, id, old, new, near)
    }

    fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        RTree::query(self, window, predicate)
    }

    fn count(&self, window: Rect, predicate: Predicate) -> Result<u64> {
        let mut n = 0u64;
        let rect = super::checked(window)?;
        self.select(&super::query::Window { rect, predicate }, |_| n += 1)?;
        Ok(n)
    }

    fn bounds(&self) -> Result<Option<Rect>> {
        RTree::bounds(self)
    }

    fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        RTree::query_batch(self, windows, predicate)
    }

    fn query_batch_keys(&self, windows: &[Rect], predicate: Predicate) -> Result<Vec<KeyResult>> {
        RTree::query_batch_keys(self, windows, predicate)
    }

    fn query_batch_flat(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchKeys> {
        RTree::query_batch_flat(self, windows, predicate)
    }

    fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        RTree::nearest(self, point, k, ties)
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.store_mut().checkpoint()
    }

    forward_to_store!();

    fn read_mode(&self) -> ReadMode {
        RTree::read_mode(self)
    }

    fn set_read_mode(&mut self, mode: ReadMode) {
        RTree::set_read_mode(self, mode)
    }
}
